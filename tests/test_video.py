"""evaluate.py --video (issue 55 item 4, evaluation/video.py): episode 0 drawn by the env's own
renderer, one frame per step (the state the policy acted in), written as a GIF (Pillow) or an MP4
(imageio-ffmpeg) and read back here with imageio; an env or a path it cannot do refused in one line
before anything runs."""

import imageio.v2 as imageio
import jax
import numpy as np
import pytest
from script_runs import assert_one_line_refusal, evaluated_replay, run_evaluate, save_untrained

import evaluate
from evaluation import video

FORMATS = [".gif", ".mp4"]


def read_frames(path) -> list[np.ndarray]:
    return imageio.mimread(path, memtest=False)


@pytest.mark.parametrize("suffix", FORMATS)
def test_gymnax_video_has_a_frame_per_step(tmp_path, suffix):
    """CartPole-v1 (gymnax) drawn by gymnasium's drawing of each state: the evaluated episode 0
    itself, as many frames as eval.json says it has steps (each frame is captioned with its step, so
    the GIF merges none), 600 x 400."""
    folder = save_untrained(tmp_path / "run", "CartPole-v1", "gymnax", 4, 2, False)
    path = tmp_path / f"replay{suffix}"
    result = evaluate.main([str(folder), "--episodes", "2", "--video", str(path)])
    frames = read_frames(path)
    assert len(frames) == result["lengths"][0] > 1
    assert {frame.shape for frame in frames} == {(400, 600, 3)}
    assert len({frame.tobytes() for frame in frames}) > 1  # a film, not one picture


def test_minatar_frames_have_the_visualizers_colours(tmp_path):
    """Breakout-MinAtar drawn with NumPy from the episode's observations: a frame per state, 400 x
    400, each 40-pixel cell of the colour gymnax's Visualizer gives it (its colour map applied to
    its image of the same state)."""
    import matplotlib

    matplotlib.use("Agg")
    import gymnax
    import matplotlib.pyplot as plt
    from gymnax.visualize import Visualizer

    folder = save_untrained(tmp_path / "run", "Breakout-MinAtar", "gymnax", 400, 3, False)
    replay = evaluated_replay(folder, 4)
    recording = video.record(replay, str(tmp_path / "replay.mp4"))
    assert (recording.frames, recording.renderer) == (4, "minatar")
    frames = list(video.minatar_frames(replay)[0])
    assert {frame.shape for frame in frames} == {(400, 400, 3)}
    vis = Visualizer(gymnax.make("Breakout-MinAtar")[0], replay.env_params, replay.states)
    try:
        for step, frame in enumerate(frames):
            vis.init() if step == 0 else vis.update(step)
            expected = vis.im.cmap(vis.im.norm(vis.im.get_array()))[..., :3]
            centres = frame[20::40, 20::40] / 255
            np.testing.assert_allclose(centres, expected, atol=1 / 255)
    finally:
        plt.close(vis.fig)


def full_push(acted):
    """A policy that pushes InvertedPendulum's cart at full force (its bound, 3): the pole falls
    within a few steps, so the episode ends itself; each call is kept in acted."""

    def policy(obs):
        acted.append(obs)
        return np.full((len(obs), 1), 3.0, np.float32)

    return policy


@pytest.mark.parametrize("suffix", FORMATS)
def test_mujoco_video_has_a_frame_per_step(tmp_path, suffix):
    """envpool's InvertedPendulum-v4 drawn by gymnasium's MuJoCo renderer (MUJOCO_GL=egl): the
    episode is gymnasium's, run by the replay's policy, one frame per observation the policy acted
    on, 480 x 480."""
    path = tmp_path / "sub" / f"replay{suffix}"
    env = dict(env="InvertedPendulum-v4", env_backend="envpool")
    video.check(str(path), env)
    acted = []
    replay = evaluate.Replay(
        env_id=env["env"],
        backend=env["env_backend"],
        env=None,
        env_params=None,
        states=[],
        actions=[],
        policy=full_push(acted),
        seed=1,
    )
    recording = video.record(replay, str(path))
    frames = read_frames(path)
    assert len(frames) == len(acted) == recording.frames
    assert 1 < len(acted) < 1000  # ended by the pole's fall, before the time limit
    assert {frame.shape for frame in frames} == {(480, 480, 3)}
    assert (recording.height, recording.width, recording.renderer) == (480, 480, "gymnasium")
    video.check(str(path), env)  # its own video: replaceable
    assert video.record(replay, str(path)).frames == recording.frames


@pytest.mark.slow
def test_envpool_evaluation_video(tmp_path):
    """evaluate.py --video on an envpool checkpoint: its policy replayed in gymnasium, drawn as an
    MP4."""
    folder = save_untrained(tmp_path / "run", "InvertedPendulum-v4", "envpool", 4, 1, True)
    path = tmp_path / "replay.mp4"
    evaluate.main([str(folder), "--episodes", "1", "--video", str(path)])
    frames = read_frames(path)
    assert len(frames) >= 1 and {frame.shape for frame in frames} == {(480, 480, 3)}


def first_steps(env_id: str, steps: int):
    """A Replay of the first steps of env_id (an env_adapters env, one env), acting with zeros."""
    import env_adapters

    env, params = env_adapters.make(env_id, "gymnax", 1, 0)
    _, states = env.reset(jax.random.split(jax.random.key(0), 1), params)
    kept = []
    for step in range(steps):
        kept.append(evaluate.first_env(states))
        shape = (1, env.num_actions) if env.continuous else (1,)
        action = np.zeros(shape, np.float32 if env.continuous else np.int32)
        _, states, *_ = env.step(jax.random.split(jax.random.key(step), 1), states, action, params)
    return evaluate.Replay(env_id, "gymnax", env, params, kept, [], None, 0)


@pytest.mark.slow
@pytest.mark.parametrize(
    "env_id, shape",
    [("Craftax-Classic-Symbolic-v1", (144, 144, 3)), ("brax-halfcheetah", (240, 320, 3))],
)
def test_craftax_and_brax_videos(tmp_path, env_id, shape):
    """Craftax's pixel renderer and Brax's (MuJoCo, EGL) draw the replay's own states, a frame
    each."""
    video.check(str(tmp_path / "replay.mp4"), dict(env=env_id, env_backend="gymnax"))
    recording = video.record(first_steps(env_id, 3), str(tmp_path / "replay.mp4"))
    frames = read_frames(tmp_path / "replay.mp4")
    assert len(frames) == recording.frames == 3
    assert {frame.shape for frame in frames} == {shape}


def test_first_env_keeps_typed_keys():
    """A Craftax state holds a typed JAX key, which NumPy cannot hold: env 0's part of it stays a
    JAX key."""
    tree = {"key": jax.random.split(jax.random.key(0), 2), "x": np.arange(2)}
    first = evaluate.first_env(tree)
    assert jax.dtypes.issubdtype(first["key"].dtype, jax.dtypes.prng_key) and first["x"] == 0


# ----------------------------------------------------------------------------------------- refusals
def test_env_without_renderer_is_refused(tmp_path):
    """DeepSea-bsuite has no renderer here: evaluate.py --video says so in one line, exit 2, before
    evaluating (no eval.json, no video)."""
    folder = save_untrained(tmp_path, "DeepSea-bsuite", "gymnax", 64, 2, False)
    proc = run_evaluate(str(folder), "--episodes", "1", "--video", str(tmp_path / "replay.gif"))
    assert_one_line_refusal(proc, ["--video", "DeepSea-bsuite", "no renderer", "CartPole-v1"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]


def test_unrenderable_envpool_env_is_refused():
    """Pusher-v4, which gymnasium makes only with mujoco < 3: refused in one line, gymnasium's
    reason in it."""
    with pytest.raises(video.CannotRecord, match="Pusher-v4 cannot be drawn here") as refused:
        video.check("replay.mp4", dict(env="Pusher-v4", env_backend="envpool"))
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "name, content, words",
    [
        ("replay.avi", None, [".gif or .mp4", "'.avi'"]),
        (
            "replay.gif",
            b"GIF89a, someone else's",
            ["not a video evaluate.py wrote", "left as it is"],
        ),
        ("folder.mp4", "folder", ["not a regular file"]),
    ],
)
def test_video_path_is_refused(tmp_path, name, content, words):
    """A path of another format, a file evaluate.py did not write (left as it is), a folder: one
    line."""
    path = tmp_path / name
    if content == "folder":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(video.CannotRecord) as refused:
        video.check(str(path), dict(env="CartPole-v1", env_backend="gymnax"))
    assert all(word in str(refused.value) for word in words), refused.value
    if isinstance(content, bytes):
        assert path.read_bytes() == content


def test_renderer_failing_midway_is_one_line_and_writes_nothing(tmp_path):
    """A renderer that fails after some frames (here the policy, at its third step): CannotRecord in
    one line, no file (evaluate.py prints it; the evaluation is already written)."""
    acted = []

    def failing(obs):
        if len(acted) == 2:
            raise RuntimeError("the policy broke\non two lines")
        return full_push(acted)(obs)

    replay = evaluate.Replay("InvertedPendulum-v4", "envpool", None, None, [], [], failing, 1)
    with pytest.raises(video.CannotRecord, match="could not be drawn") as refused:
        video.record(replay, str(tmp_path / "replay.gif"))
    assert "\n" not in str(refused.value) and list(tmp_path.iterdir()) == []


# ------------------------------------------ issue 79, item 7: a video is ours by its comment field
def tiny_frames():
    return (np.full((8, 8, 3), level, np.uint8) for level in (0, 120, 240))


@pytest.mark.parametrize("suffix", FORMATS)
def test_a_video_is_known_as_its_own_by_its_comment_field_alone(tmp_path, suffix):
    """A video gif_bytes or mp4_bytes made is evaluate.py's (MARK in its format's comment field,
    read back exactly: Pillow's GIF comment, the MP4's moov/udta/meta/ilst/©cmt). A user's file that
    merely holds MARK's text (a caption, a title, a frame), or holds it in a comment of its own
    words, is not: refused and left as it is (the code of before took any file holding the text)."""
    make = video.gif_bytes if suffix == ".gif" else video.mp4_bytes
    ours = tmp_path / f"ours{suffix}"
    ours.write_bytes(make(tiny_frames(), 10))
    assert video.not_ours(ours) is None
    video.check_path(str(ours))
    header = ours.read_bytes()[:64] if suffix == ".gif" else ours.read_bytes()[:32]
    users = {
        "the text in its data": header + b"my video of benchback-rl evaluate.py --video runs",
        "the text in a comment of its own": ours.read_bytes().replace(
            video.MARK, video.MARK[:-1] + b"!"
        ),
    }
    for name, content in users.items():
        path = tmp_path / f"{name.replace(' ', '_')}{suffix}"
        path.write_bytes(content)
        assert video.MARK[:-1] in content
        with pytest.raises(video.CannotRecord, match="not a video evaluate.py wrote") as refused:
            video.check_path(str(path))
        assert "\n" not in str(refused.value) and path.read_bytes() == content, name


def test_an_mp4_is_read_box_by_box_for_its_mark():
    """mp4_comment walks the top-level boxes by their sizes (the media data skipped, never read)
    and the comment's boxes down from the movie box; a box of a 64-bit size and one that runs to
    the end of the file are read as MP4 says; a box that claims less than its own header ends the
    walk (no endless loop)."""
    import io

    def box(kind: bytes, body: bytes) -> bytes:
        return (8 + len(body)).to_bytes(4, "big") + kind + body

    data = box(b"data", b"\0\0\0\1\0\0\0\0" + video.MARK)
    meta = box(b"meta", b"\0" * 4 + box(b"ilst", box(b"\xa9cmt", data)))
    moov = box(b"moov", box(b"udta", meta))
    media = b"\0\0\0\1mdat" + (16 + 5).to_bytes(8, "big") + b"12345"
    assert video.mp4_comment(io.BytesIO(box(b"ftyp", b"isom") + media + moov)) == video.MARK
    last = b"\0\0\0\0" + moov[4:]  # size 0: to the end of the file
    assert video.mp4_comment(io.BytesIO(box(b"ftyp", b"isom") + last)) == video.MARK
    assert video.mp4_comment(io.BytesIO(b"\0\0\0\4ftyp" + moov)) is None
    assert video.mp4_comment(io.BytesIO(moov[:-3])) is None  # cut short: no mark

"""evaluate.py tells what it does (issue 68 items 4 and 5): a "wrote PATH" line for every file it
writes (eval.json, the video, the ONNX file, each file of the Hub folder), a progress line every few
seconds on a video, classic-control frames drawn without a matplotlib figure or a gymnasium env per
frame, an N-agent run folder answered with its agent_k folders, and no warning from torch on the
env's read-only observations."""

import re
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from script_runs import assert_one_line_refusal, evaluated_replay, save_untrained

import atomic
import evaluate
from evaluation import model_file, policy, progress, video

WROTE = re.compile(r"^wrote (\S+)")


def announced(out: str) -> set:
    """The paths of the "wrote PATH" lines of an output."""
    return {match[1] for line in out.splitlines() if (match := WROTE.match(line))}


def files_under(folder) -> set:
    return {str(path) for path in folder.rglob("*") if path.is_file()}


def test_every_file_written_is_announced(tmp_path, capsys, monkeypatch):
    """--video, --export-onnx and --hub-folder at once: each file that appears is named by a
    "wrote PATH" line, eval.json's among them, and nothing else is."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = save_untrained(tmp_path / "run", "CartPole-v1", "gymnax", 4, 2, False)
    before = files_under(tmp_path)
    out = tmp_path / "out"
    evaluate.main(
        [str(folder), "--episodes", "2", "--video", str(out / "replay.gif")]
        + ["--export-onnx", str(out / "actor.onnx"), "--hub-folder", str(out / "hub")]
    )
    # the folder's writer lock (atomic.hold_folder) is no output: never announced
    lock = str(folder / atomic.LOCK_FILE)
    written = files_under(tmp_path) - before - {lock} | {str(folder / "eval.json")}
    lines = announced(capsys.readouterr().out)
    assert lines == written
    assert {str(out / "replay.gif"), str(out / "actor.onnx"), str(out / "hub" / "replay.mp4")} <= (
        lines
    )
    assert str(out / "hub" / "evaluation" / "progress.py") in lines


def test_progress_lines_name_the_frames_done_and_the_time_left(capsys, monkeypatch):
    """A line once EVERY_S have passed since the last: frames done of the total, the seconds so far
    and those left at the pace so far; none before; without a total, no time left."""
    now = [0.0]
    counter = progress.Progress("replay.gif", 500, "frames", clock=lambda: now[0])
    for _ in range(100):
        now[0] += 0.01
        counter.step()
    assert capsys.readouterr().out == ""
    now[0] = 3.0
    counter.step()
    assert capsys.readouterr().out == "replay.gif: 101/500 frames, 3 s, about 12 s left\n"
    unknown = progress.Progress("replay.mp4", None, "frames", clock=lambda: now[0])
    now[0] = 7.0
    unknown.step(40)
    assert capsys.readouterr().out == "replay.mp4: 40 frames, 4 s\n"


@pytest.mark.parametrize("suffix", [".gif", ".mp4"])
def test_a_video_tells_its_progress(tmp_path, capsys, monkeypatch, suffix):
    """video.record counts its frames: with a line every 0 s, one per frame, the last N/N."""
    replay = cartpole_replay(tmp_path, 5)
    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    path = tmp_path / f"replay{suffix}"
    video.record(replay, str(path))
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(",")[0] for line in lines] == [f"{path}: {k}/5 frames" for k in range(1, 6)]


def test_the_evaluation_tells_the_episodes_ended(tmp_path, capsys, monkeypatch):
    """With a line every 0 s, one per step of the envs: the episodes ended so far, of the total."""
    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    folder = save_untrained(tmp_path / "run", "CartPole-v1", "gymnax", 4, 2, False)
    evaluate.main([str(folder), "--episodes", "3"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("eval")]
    assert lines[0].startswith("evaluation: ") and "/3 episodes ended, " in lines[0]
    assert lines[-1].startswith("evaluation: 3/3 episodes ended, ")


def test_classic_control_frames_are_drawn_without_a_figure_or_an_env_per_frame(
    tmp_path, monkeypatch
):
    """CartPole's frames (gymnasium's drawing of each state): no matplotlib figure is made, and one
    gymnasium env draws them all (gymnax's Visualizer redrew a figure and made an env per frame: 58
    s for 500 frames). Each frame is captioned with its step, so none merge in the GIF."""
    import gymnasium
    import matplotlib.pyplot as plt

    def no_figure(*args, **kwargs):
        raise AssertionError("a matplotlib figure was made")

    made = []
    make = gymnasium.make
    monkeypatch.setattr(plt, "subplots", no_figure)
    monkeypatch.setattr(plt, "figure", no_figure)
    monkeypatch.setattr(gymnasium, "make", lambda *a, **k: made.append(a) or make(*a, **k))
    recording = video.record(cartpole_replay(tmp_path, 6), str(tmp_path / "replay.gif"))
    assert (recording.frames, recording.renderer) == (6, "classic")
    assert len(made) == 1
    import imageio.v2 as imageio

    frames = imageio.mimread(tmp_path / "replay.gif", memtest=False)
    assert len(frames) == 6 and {frame.shape for frame in frames} == {(400, 600, 3)}


def cartpole_replay(tmp_path, steps: int) -> evaluate.Replay:
    """The first steps of a CartPole evaluation's episode 0 (an untrained policy)."""
    folder = save_untrained(tmp_path / "run", "CartPole-v1", "gymnax", 4, 2, False)
    return evaluated_replay(folder, steps)


def test_an_n_agent_run_folder_points_to_its_agent_folders(tmp_path, capsys):
    """A run folder of --num-agents 3 holds no model.safetensors, its agent_k folders do: the
    refusal names them (agent_10 after agent_2), in one line, exit 2, nothing written."""
    run = tmp_path / "run"
    run.mkdir()
    for k in (0, 2, 10):
        save_untrained(run / f"agent_{k}", "CartPole-v1", "gymnax", 4, 2, False)
    (run / "config.json").write_text("{}")
    before = files_under(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main([str(run), "--episodes", "1"])
    refusal = SimpleNamespace(returncode=exit_info.value.code, stderr=capsys.readouterr().err)
    assert_one_line_refusal(refusal, [f"{run}: a run of 3 agents", "agent_0 to agent_10"])
    assert f"e.g. {run / 'agent_0'}" in refusal.stderr
    assert files_under(tmp_path) == before
    assert model_file.agent_folders(run / "agent_0") == []


def test_torch_takes_read_only_observations_without_a_warning(tmp_path):
    """The env's observations are a view of a JAX array, read-only: torch's actor takes them
    quietly (torch.from_numpy warned "The given NumPy array is not writable" at every call) and
    leaves them as they were."""
    import jax.numpy as jnp

    obs = np.asarray(jnp.ones((3, 4), jnp.float32))
    assert not obs.flags.writeable
    folder = save_untrained(tmp_path / "run", "CartPole-v1", "gymnax", 4, 2, False)
    ckpt = model_file.load(folder)
    actor = policy.load_actor(ckpt, "torch")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = actor(obs)
    assert out.shape == (3, 2) and np.all(obs == 1)

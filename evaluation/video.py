"""evaluate.py --video PATH: episode 0 of an evaluation as a GIF or an MP4, drawn by the env's own
renderer (part of benchback-rl).

    # before anything runs: CannotRecord (one line) for a path or an env it cannot do
    video.check(path, meta)
    # the video of evaluate.py's Replay (episode 0); returns a Recording
    video.record(replay, path)

What renders, and how (one frame per step: the state the policy acted in, so a video has as many
frames as its episode has steps):

- gymnax's classic-control envs (GYMNAX_CLASSIC): gymnasium's own pygame drawing of each state
  (one gymnasium env given the gymnax env's parameters, then each state in turn), at gymnasium's
  sizes (CartPole 600 x 400), captioned with the step, 20 frames a second (gymnax's rate): 500
  frames in about a second and a half. The evaluated episode itself: the Replay's states.
- gymnax's MinAtar envs (MINATAR): the Visualizer's colours (a colour per channel) drawn with
  NumPy from the observations of the whole episode, made in one jitted batch; 400 x 400 frames (a
  cell 40 pixels) captioned with the step, 10 frames a second (gymnax's rate). The evaluated
  episode itself.
- gymnax's other envs that gymnax draws (RENDERED_BY_GYMNAX: Catch, Pong, PointRobot, MetaMaze,
  FourRooms): gymnax.visualize's Visualizer (matplotlib, one figure redrawn per frame), 600 x 500
  frames titled with the step, 10 frames a second (gymnax's rate). The evaluated episode itself.
- Craftax: Craftax's pixel renderer (16-pixel blocks), 10 frames a second. The evaluated episode
  itself.
- Brax: brax.io.image (MuJoCo's renderer through MUJOCO_GL=egl), 320 x 240, at the env's own rate
  (1 / dt). The evaluated episode itself.
- envpool's envs (classic control and MuJoCo): envpool keeps its states inside its pool, so the
  video's episode is gymnasium's: the same model id made in gymnasium (only one of the project's
  envpool ids: MuJoCo through MUJOCO_GL=egl, 480 x 480; classic control at gymnasium's sizes),
  reset with the evaluation's seed and run to its end by the same policy, at gymnasium's
  render_fps. Its initial state is drawn by
  gymnasium's generator, not envpool's, so its return and length can differ from the evaluated
  episode 0's: the video shows the policy, not that exact episode.

Any other env has no renderer here: check refuses it in one line (evaluate.py: exit 2 before
evaluating), and so does a MuJoCo renderer that cannot start (no EGL). A line every few seconds
tells the frames drawn (progress.Progress). A GIF is written by Pillow, each frame with its own
palette (Pillow's fast octree), which merges identical consecutive frames into one longer frame (it
then holds fewer frames, and plays as long); an MP4 by imageio's ffmpeg plugin (H.264, the ffmpeg
of the pinned imageio-ffmpeg), every frame kept. The file is written whole or not at all
(atomic.write_file) and carries MARK in its format's comment field (a GIF's comment extension, an
MP4's comment tag), by which a later --video recognises a file it may replace (not_ours: that field
read back and equal to MARK; MARK's text elsewhere in a file is anyone's).
A stop signal (atomic.py: SIGINT, SIGTERM, SIGHUP) stops the drawing at its next frame, and no
file is written; evaluate.py's handlers are in place before pygame starts, whose SDL would
otherwise take SIGTERM (it takes a signal left at its default action) and drop it.
"""

import contextlib
import io
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple, Optional

import numpy as np

import atomic
from evaluation import progress

# MuJoCo chooses its OpenGL platform when it is first imported (Brax's renderer), gymnasium when it
# renders: EGL renders headless on these machines, osmesa and glfw do not. pygame (gymnasium's
# classic-control drawings) gets no display and no sound device: else SDL and ALSA complain on
# stderr at every frame.
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

FORMATS = (".gif", ".mp4")
MARK = b"benchback-rl evaluate.py --video"
# the env names gymnax.visualize.Visualizer draws (gymnax 1.0.1), the classic-control ones at 20
# frames a second
GYMNAX_CLASSIC = (
    "Acrobot-v1",
    "CartPole-v1",
    "Pendulum-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
)
RENDERED_BY_GYMNAX = GYMNAX_CLASSIC + (
    "Catch-bsuite",
    "Asterix-MinAtar",
    "Breakout-MinAtar",
    "Freeway-MinAtar",
    "Seaquest-MinAtar",
    "SpaceInvaders-MinAtar",
    "Pong-misc",
    "PointRobot-misc",
    "MetaMaze-misc",
    "FourRooms-misc",
)
CLASSIC_FPS = 20  # gymnax's Visualizer's rate for classic control
MINATAR = tuple(env_id for env_id in RENDERED_BY_GYMNAX if env_id.endswith("-MinAtar"))
MINATAR_FPS = 10  # gymnax's Visualizer's rate
MINATAR_CELL = 40  # the pixels of a cell's side: 400 x 400 frames of the 10 x 10 grid
CRAFTAX_FPS = 10
BRAX_SIZE = (240, 320)  # height, width: brax.io.image's default
BRAX_CAMERA = "track"
# states drawn by one MuJoCo renderer: the frames of a whole episode need not be held at once
BRAX_CHUNK = 100


class CannotRecord(ValueError):
    """A video that cannot be made: the message, one line, says why."""


class Recording(NamedTuple):
    path: str
    frames: int  # rendered, one per step (a GIF may hold fewer: identical consecutive frames merge)
    height: int
    width: int
    fps: float
    renderer: str  # "classic", "minatar", "gymnax", "craftax", "brax" or "gymnasium"
    seconds: float  # to draw and encode it


# ------------------------------------------------------------------------------------- what renders
def renderer(env_id: str, backend: str) -> Optional[str]:
    """The renderer of an env (as evaluate.py makes it: env id and backend), or None when there is
    none. Only an envpool id the project knows goes to gymnasium (which imports the module named
    before a ':' of an id)."""
    import env_adapters

    if backend == "envpool":
        return "gymnasium" if env_id in env_adapters.ENVPOOL_ENVS else None
    if env_id in GYMNAX_CLASSIC:
        return "classic"
    if env_id in MINATAR:
        return "minatar"
    if env_id in RENDERED_BY_GYMNAX:
        return "gymnax"
    if env_id in env_adapters.CRAFTAX_ENVS:
        return "craftax"
    if env_id in env_adapters.BRAX_ENVS:
        return "brax"
    return None


def check_env(env_id: str, backend: str) -> None:
    """CannotRecord unless env_id (on backend) has a renderer that works here: a MuJoCo one is
    tried."""
    kind = renderer(env_id, backend)
    if kind is None:
        raise CannotRecord(
            f"--video: {env_id} (backend {backend}) has no renderer here; videos are drawn for "
            "gymnax's "
            f"{', '.join(RENDERED_BY_GYMNAX)}, Craftax, Brax, and envpool's envs (through "
            "gymnasium)"
        )
    try:
        if kind == "gymnasium":
            env = gymnasium_env(env_id)
            env.reset(seed=0)
            env.render()
            env.close()
        elif kind == "brax":
            mujoco_probe()
    except Exception as e:  # what gymnasium or MuJoCo raise varies: any failure is this one line
        raise CannotRecord(
            f"--video: {env_id} cannot be drawn here by {kind} ({type(e).__name__}: "
            f"{one_line(e)}); "
            f"MuJoCo's renderer runs with MUJOCO_GL={os.environ.get('MUJOCO_GL')}"
        ) from None


def one_line(error: Exception) -> str:
    return " ".join(str(error).split())[:300]


def mujoco_probe() -> None:
    """A frame of an empty MuJoCo model: raises when MuJoCo cannot render here."""
    import mujoco

    drawer = mujoco.Renderer(mujoco.MjModel.from_xml_string("<mujoco/>"), 8, 8)
    drawer.render()
    drawer.close()


# ---------------------------------------------------------------------------------- the output path
def check_path(path: str) -> None:
    """CannotRecord unless path is a .gif or .mp4 that can be written (atomic.check_replaceable): a
    new file in a folder that is or can be made writable, or a video this tool wrote (MARK)."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise CannotRecord(
            f"--video {path}: a video is {' or '.join(FORMATS)}, not {suffix or 'no suffix'!r}"
        )
    try:
        # not_ours is given the file's path: it reads only the part that holds the mark
        atomic.check_replaceable("--video", path, not_ours, read=Path)
    except atomic.OutputRefused as e:
        raise CannotRecord(str(e)) from None


def not_ours(path: Path) -> Optional[str]:
    """Why the file at path is not a video this tool wrote (None: it is): the comment of its
    format's own metadata is MARK, exactly (a GIF's comment extension, an MP4's comment tag: the
    field that gif_bytes and mp4_bytes write), not MARK's text anywhere in it (a video of anyone,
    a frame or a title, may hold it)."""
    with open(path, "rb") as file:
        comment = mp4_comment(file) if path.suffix.lower() == ".mp4" else gif_comment(file)
    return None if comment == MARK else "is not a video evaluate.py wrote (no mark of it)"


def gif_comment(file) -> Optional[bytes]:
    """The comment of a GIF (Pillow reads it, before the first frame, where gif_bytes puts it);
    None for a file that is not a GIF or has none."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(file, formats=["GIF"]) as image:
            return image.info.get("comment")
    except (UnidentifiedImageError, OSError, ValueError, EOFError):
        return None


# the most bytes of an MP4's movie box (its tables and metadata: a few kB a thousand frames) read to
# find its comment; the media data is skipped, never read
MAX_MOOV_BYTES = 1 << 26
# the boxes from the movie box down to the comment's text (ffmpeg's -metadata comment=, in an MP4:
# iTunes-style metadata), and the bytes before each one's children: meta is a full box (version
# and flags), data holds its type (1: UTF-8) and locale before the text
COMMENT_BOXES = ((b"udta", 0), (b"meta", 4), (b"ilst", 0), (b"\xa9cmt", 0), (b"data", 8))


def mp4_comment(file) -> Optional[bytes]:
    """The comment of an MP4 (moov/udta/meta/ilst/©cmt/data, as mp4_bytes writes it); None for a
    file that has none or is no MP4. The top-level boxes are walked by their sizes."""
    body = top_box(file, b"moov")
    for kind, skip in COMMENT_BOXES:
        body = child_box(body, kind) if body is not None else None
        body = body[skip:] if body is not None and len(body) >= skip else None
    return body


def box_header(data: bytes) -> Optional[tuple[bytes, int, int]]:
    """(kind, size in all, header's size) of the box data starts with (a size of 1: a 64-bit size
    follows; 0: to the end); None when it is no box."""
    if len(data) < 8:
        return None
    size, kind, head = int.from_bytes(data[:4], "big"), data[4:8], 8
    if size == 1:
        if len(data) < 16:
            return None
        size, head = int.from_bytes(data[8:16], "big"), 16
    return kind, size, head


def top_box(file, kind: bytes) -> Optional[bytes]:
    """The content of the first top-level box of kind in an open file, at most MAX_MOOV_BYTES;
    None when there is none, or it is larger."""
    while True:
        start = file.tell()
        header = box_header(file.read(16))
        if header is None:
            return None
        found, size, head = header
        if size == 0:  # the last box, to the end of the file
            size = file.seek(0, os.SEEK_END) - start
        if size < head:
            return None
        if found == kind:
            file.seek(start + head)
            body = file.read(size - head) if size - head <= MAX_MOOV_BYTES else b""
            return body if len(body) == size - head else None  # else larger, or cut short
        file.seek(start + size)


def child_box(data: bytes, kind: bytes) -> Optional[bytes]:
    """The content of the first box of kind among the boxes data holds; None when none."""
    at = 0
    while (header := box_header(data[at : at + 16])) is not None:
        found, size, head = header
        size = size or len(data) - at
        if size < head or at + size > len(data):
            return None
        if found == kind:
            return data[at + head : at + size]
        at += size
    return None


def ffmpeg() -> str:
    """The ffmpeg that writes MP4s (imageio-ffmpeg's own); CannotRecord when it is missing."""
    try:
        import imageio_ffmpeg

        return imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError) as e:
        raise CannotRecord(
            f"--video: an MP4 needs imageio-ffmpeg ({one_line(e)}); ./setup.sh installs it"
        ) from None


def check(path: str, meta: dict) -> None:
    """CannotRecord (one line) for a --video path that cannot be written, or an env that cannot be
    drawn here; meta: the checkpoint's metadata (its env and env_backend). Called before anything
    runs."""
    check_path(path)
    if Path(path).suffix.lower() == ".mp4":
        ffmpeg()
    check_env(meta["env"], meta["env_backend"])


# --------------------------------------------------------------------------------------- the frames
def gymnax_frames(replay) -> tuple[Iterator[np.ndarray], float]:
    """The replay's states drawn by gymnax's Visualizer, one figure redrawn per frame (matplotlib,
    no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import gymnax
    import matplotlib.pyplot as plt
    from gymnax.visualize import Visualizer

    env = gymnax.make(replay.env_id)[0]
    vis = Visualizer(env, replay.env_params, replay.states)

    def frames():
        try:
            vis.init()
            for step in range(len(replay.states)):
                vis.update(step)
                vis.fig.canvas.draw()
                yield np.asarray(vis.fig.canvas.buffer_rgba())[..., :3].copy()
        finally:
            plt.close(vis.fig)

    return frames(), 1000 / vis.interval


def classic_frames(replay) -> tuple[Iterator[np.ndarray], float]:
    """The replay's classic-control states drawn by gymnasium's own drawing of the env (pygame, no
    display): one gymnasium env, given the gymnax env's parameters and then each state in turn (as
    gymnax's Visualizer does, without its matplotlib figure and without a new env per frame), each
    frame captioned with its step."""
    from gymnax.visualize import vis_gym

    env = quiet_make(replay.env_id)
    raw = env.unwrapped
    vis_gym.set_gym_params(raw, replay.env_id, replay.env_params)

    def frames():
        try:
            env.reset(seed=0)
            for step, state in enumerate(replay.states, start=1):
                raw.state = vis_gym.get_gym_state(state, replay.env_id)
                if replay.env_id == "Pendulum-v1":
                    # the torque's arrow
                    raw.last_u = np.asarray(state.last_u, np.float64)
                yield captioned(env.render(), f"{replay.env_id}  step {step}")
        finally:
            env.close()

    return frames(), CLASSIC_FPS


def captioned(frame: np.ndarray, text: str, colour=(0, 0, 0)) -> np.ndarray:
    """frame with text in its top left corner (Pillow's own font): the step it shows, which also
    keeps a GIF from merging two frames of the same picture."""
    from PIL import Image, ImageDraw

    image = Image.fromarray(np.ascontiguousarray(frame))
    ImageDraw.Draw(image).text((6, 4), text, fill=colour)
    return np.asarray(image)


def minatar_frames(replay) -> tuple[Iterator[np.ndarray], float]:
    """The replay's MinAtar states coloured as gymnax's Visualizer colours them (black, then
    seaborn's cubehelix palette, a colour per channel; in a cell, the last channel set), drawn with
    NumPy: the observations of the whole episode made in one jitted batch, each cell a block of
    MINATAR_CELL pixels, each frame captioned with its step."""
    import gymnax
    import jax
    import seaborn

    env = gymnax.make(replay.env_id)[0]
    states = jax.tree.map(lambda *leaves: np.stack(leaves), *replay.states)
    key = jax.random.key(0)
    observe = jax.vmap(lambda state: env.observe(key, state, None, replay.env_params))
    obs = np.asarray(jax.jit(observe)(states))
    channels = obs.shape[-1]
    palette = np.array([(0, 0, 0), *seaborn.color_palette("cubehelix", channels)])
    palette = np.round(palette * 255).astype(np.uint8)
    # a cell's colour: 0 (black) where no channel is set, else the last set channel's, from 1
    cells = np.amax((obs > 0) * np.arange(1, channels + 1), axis=-1)

    def frames():
        for step, grid in enumerate(cells, start=1):
            image = palette[grid].repeat(MINATAR_CELL, 0).repeat(MINATAR_CELL, 1)
            yield captioned(image, f"{replay.env_id}  step {step}", (255, 255, 255))

    return frames(), MINATAR_FPS


def craftax_frames(replay) -> tuple[Iterator[np.ndarray], float]:
    """The replay's states drawn by Craftax's pixel renderer (jitted once; its textures load
    quietly)."""
    import jax

    if "Classic" in replay.env_id:
        from craftax.craftax_classic import constants
        from craftax.craftax_classic.renderer import make_craftax_pixel_renderer
    else:
        from craftax.craftax import constants
        from craftax.craftax.renderer import make_craftax_pixel_renderer
    with contextlib.redirect_stdout(io.StringIO()):  # "Loading ... textures from cache."
        draw = jax.jit(make_craftax_pixel_renderer(constants.BLOCK_PIXEL_SIZE_IMG))
    frames = (np.asarray(draw(state)).astype(np.uint8) for state in replay.states)
    return frames, CRAFTAX_FPS


def brax_frames(replay) -> tuple[Iterator[np.ndarray], float]:
    """The replay's states (their physics states) drawn by brax.io.image, BRAX_CHUNK at a time."""
    from brax.io import image

    env = replay.env.env  # env_adapters.Brax's EpisodeWrapper
    physics = [state.pipeline_state for state in replay.states]
    model = env.sys.mj_model
    # the model's camera that follows the body (halfcheetah, ant), else MuJoCo's free camera, which
    # loses it
    cameras = [model.camera(i).name for i in range(model.ncam)]
    camera = BRAX_CAMERA if BRAX_CAMERA in cameras else None

    def frames():
        for start in range(0, len(physics), BRAX_CHUNK):
            chunk = physics[start : start + BRAX_CHUNK]
            yield from image.render_array(env.sys, chunk, *BRAX_SIZE, camera=camera)

    return frames(), round(1 / float(env.dt), 3)


def gymnasium_env(env_id: str):
    """env_id made in gymnasium to draw rgb arrays, quietly: gymnasium's deprecation of the v4
    MuJoCo envs (envpool's are v4) and MuJoCo's warnings on gymnasium's own models (HalfCheetah's
    deprecated settotalmass, else written to MUJOCO_LOG.TXT in the working folder) say nothing of
    the policy. CannotRecord for an id that is not one of the project's envpool ids: gymnasium
    would import the module named before a ':' of it."""
    if renderer(env_id, "envpool") != "gymnasium":
        raise CannotRecord(f"--video: {env_id!r} is not an envpool env here: not drawn")
    import mujoco

    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(lambda message: warnings.warn(f"MuJoCo: {message}", stacklevel=2))
    try:
        return quiet_make(env_id)
    finally:
        mujoco.set_mju_user_warning(previous)


def quiet_make(env_id: str):
    """gymnasium's env_id (one of the project's ids), drawing rgb arrays, its warnings silenced."""
    import gymnasium

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gymnasium.make(env_id, render_mode="rgb_array")


def gymnasium_frames(replay) -> tuple[Iterator[np.ndarray], float]:
    """A fresh episode in gymnasium, reset with the replay's seed and acted on by the replay's
    policy."""
    env = gymnasium_env(replay.env_id)

    def frames():
        try:
            obs, _ = env.reset(seed=replay.seed)
            done = False
            while not done:
                yield env.render()
                action = replay.policy(np.asarray(obs, np.float32).reshape(1, -1))[0]
                obs, _, terminated, truncated, _ = env.step(action)
                done = terminated or truncated
        finally:
            env.close()

    return frames(), float(env.metadata["render_fps"])


DRAW = {
    "classic": classic_frames,
    "minatar": minatar_frames,
    "gymnax": gymnax_frames,
    "craftax": craftax_frames,
    "brax": brax_frames,
    "gymnasium": gymnasium_frames,
}


# ----------------------------------------------------------------------------------------- the file
def gif_bytes(frames: Iterator[np.ndarray], fps: float) -> bytes:
    """The frames as a looping GIF (Pillow), MARK as its comment. Each frame gets its own palette
    of 256 colours by Pillow's fast octree, undithered (Pillow's default, a median cut, took 20 ms a
    frame); Pillow takes them one by one and keeps them paletted (a byte a pixel) until it
    writes."""
    from PIL import Image

    out = io.BytesIO()
    images = (
        Image.fromarray(frame).quantize(
            colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE
        )
        for frame in frames
    )
    first, rest = next(images), images
    first.save(
        out,
        format="GIF",
        save_all=True,
        append_images=rest,
        duration=round(1000 / fps),
        loop=0,
        comment=MARK,
    )
    return out.getvalue()


def mp4_bytes(frames: Iterable[np.ndarray], fps: float) -> bytes:
    """The frames as an H.264 MP4 (imageio's ffmpeg plugin), MARK as its comment; streamed to a
    temporary file."""
    import imageio.v2 as imageio

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        # JAX warns of any fork; ffmpeg's is a fork and an exec at once
        warnings.filterwarnings(
            "ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning
        )
        path = Path(folder) / "video.mp4"
        # macro_block_size 2: H.264 wants even sizes; an odd one is resized by a pixel, the others
        # kept
        options = dict(fps=fps, codec="libx264", macro_block_size=2, ffmpeg_log_level="error")
        with imageio.get_writer(
            path,
            format="FFMPEG",
            output_params=["-metadata", f"comment={MARK.decode()}"],
            **options,
        ) as writer:
            for frame in frames:
                writer.append_data(frame)
        return path.read_bytes()


def record(replay, path: str) -> Recording:
    """The video of replay (evaluate.py's Replay: episode 0) at path (.gif or .mp4; check(path,
    meta) first), written whole or not at all; CannotRecord (one line) when its renderer fails."""
    kind = renderer(replay.env_id, replay.backend)
    if kind is None:
        check_env(replay.env_id, replay.backend)  # raises, with the reason
    shapes = []
    # envpool's episode is gymnasium's, its length unknown until it ends
    total = None if kind == "gymnasium" else len(replay.states)
    counter = progress.Progress(str(path), total, "frames")

    def counted(frames):
        for frame in frames:
            atomic.check_stop()  # a stop signal stops the drawing here
            shapes.append(frame.shape)
            yield frame
            counter.step()

    start = time.monotonic()
    try:
        frames, fps = DRAW[kind](replay)
        if Path(path).suffix.lower() == ".gif":
            data = gif_bytes(counted(frames), fps)
        else:
            data = mp4_bytes(counted(frames), fps)
    except Exception as e:
        # a stop signal that failed the renderer (ffmpeg, in the terminal's group, stopped by a
        # Ctrl-C) is a stop, not the renderer's failure
        atomic.check_stop()
        # a renderer's failure, whatever it raises: one line, never a traceback (evaluate.py prints
        # it)
        raise CannotRecord(
            f"--video: {replay.env_id} could not be drawn ({type(e).__name__}: {one_line(e)})"
        ) from None
    # the path as named is followed (check_path let it be made), a link below it never
    atomic.check_inside(path, path, "--video").parent.mkdir(parents=True, exist_ok=True)
    atomic.write_file(path, data, given=path)
    height, width = shapes[0][:2]
    return Recording(str(path), len(shapes), height, width, fps, kind, time.monotonic() - start)

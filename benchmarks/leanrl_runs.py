"""One run of benchmarks/leanrl.py, either side: LeanRL's files at a commit, shimmed (none is
copied into this repository), its venv, each configuration's command, the run timed as its output
arrives, and its result."""

import codecs
import hashlib
import os
import re
import sys
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Optional

from atomic import check_inside, write_file
from benchmarks.common import (
    ROOT,
    STEADY_FROM,
    fresh_environment,
    git,
    git_out,
    gpus,
    run_logged,
    run_series,
    stamped_venv,
    steady_mean,
)
from core import runlog, study


class SetupError(Exception):
    """LeanRL's files or its venv cannot be had: a clone, a commit, a file or a pip install."""


class ShimMismatch(SetupError):
    """A shim's old text is not in its file exactly once: not the file it was written for."""


class RunFailed(Exception):
    """A run that did not finish, or whose timing cannot be read."""


# ----------------------------------------------------------------------- LeanRL's files, shimmed
LEANRL_REPO = "https://github.com/meta-pytorch/LeanRL"
# 2024-09-27; the two scripts are the same at the head (2025-08-22), which changed only Atari's
LEANRL_COMMIT = "8dbb6336b7f6cc65cdbbeb2e86637c38867e2677"
PLAIN = "leanrl/ppo_continuous_action.py"  # CleanRL's script, LeanRL's baseline
COMPILED = "leanrl/ppo_continuous_action_torchcompile.py"  # --compile, --cudagraphs, or neither
SCRIPTS = (PLAIN, COMPILED)


@dataclass(frozen=True)
class Shim:
    file: str  # one of SCRIPTS
    old: str  # exact text, exactly once in the file
    new: str
    why: str


CLIP = "env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10)"
CLIP_WHY = (
    "gymnasium 1.x: TransformObservation takes the observation space as a third argument, with no "
    "default (clipping keeps the space's shape and dtype, so the wrapped env's space is the right "
    "one)"
)
INFERENCE_COPY = "    agent_inference_p.to_module(agent_inference)\n"
SHIMS = (
    *(Shim(path, CLIP + ")", CLIP + ", env.observation_space)", CLIP_WHY) for path in SCRIPTS),
    Shim(
        COMPILED,
        INFERENCE_COPY,
        INFERENCE_COPY + "    agent_inference.requires_grad_(False)\n",
        "tensordict 0.15: to_module puts the detached copy of the parameters back as Parameters "
        "that require grad, so the rollout's actions carry a graph: .numpy() refuses them, and the "
        "update would backward through the rollout's graph a second time. The inference copy is "
        "meant to hold no grad.",
    ),
)


def shim_records(shims=SHIMS) -> list[dict]:
    """The shims as the JSON record and the table list them."""
    return [asdict(shim) for shim in shims]


def apply_shims(texts: dict[str, str], shims=SHIMS) -> dict[str, str]:
    """texts (file -> its text) shimmed; ShimMismatch unless each old text occurs exactly once."""
    shimmed = dict(texts)
    for shim in shims:
        count = shimmed[shim.file].count(shim.old)
        if count != 1:
            raise ShimMismatch(
                f"{shim.file}: a shim's text occurs {count} times, not once ({shim.old.strip()!r};"
                f" {shim.why.split(':')[0]}): not the file it was written for"
            )
        shimmed[shim.file] = shimmed[shim.file].replace(shim.old, shim.new)
    return shimmed


def fetch_scripts(
    work: Path, commit: str, repo: str, leanrl_dir: Optional[Path]
) -> tuple[str, dict[str, Path]]:
    """The full commit, and SCRIPTS at it shimmed in work/leanrl-COMMIT/ under their own names
    (LeanRL names its runs after them); read from leanrl_dir, else from a clone of repo made
    once."""
    checkout = leanrl_dir or work / "LeanRL"
    if leanrl_dir is None and not (checkout / ".git").exists():
        print(f"cloning {repo} into {checkout}", flush=True)
        clone = ("clone", "--quiet", "--", repo, str(checkout))
        git_out(*clone, why=f"cannot clone {repo}", error=SetupError)
    wanted = ["-C", str(checkout), "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"]
    if git(*wanted).returncode != 0:
        git("-C", str(checkout), "fetch", "--quiet", "origin", commit)
    proc = git(*wanted)
    if proc.returncode != 0:
        raise SetupError(f"commit {commit} is not in {checkout} nor in its origin")
    full = proc.stdout.strip()
    show = ("-C", str(checkout), "show")
    texts = {
        path: git_out(*show, f"{full}:{path}", why=f"{path} at {full[:12]}", error=SetupError)
        for path in SCRIPTS
    }
    folder = work / f"leanrl-{full[:12]}"
    # --work-dir is the user's (followed); below it no link is written through
    check_inside(work, folder, "--work-dir").mkdir(parents=True, exist_ok=True)
    paths = {path: folder / Path(path).name for path in SCRIPTS}
    for path, text in apply_shims(texts).items():
        write_file(paths[path], text, given=work)
    return full, paths


# -------------------------------------------------------------------------------- LeanRL's venv
REQUIREMENTS = Path(__file__).with_name("leanrl-requirements.txt")
# what the record lists of each side's interpreter (those it lacks are left out)
PACKAGES = ("torch", "tensordict", "gymnasium", "mujoco", "numpy", "tqdm", "jax", "flax", "envpool")


def torch_build() -> str:
    """cpu or cuda: BENCHBACK_TORCH when set (as setup.sh reads it), else cuda with a GPU."""
    choice = os.environ.get("BENCHBACK_TORCH", "")
    if choice and choice not in ("cpu", "cuda"):
        raise SetupError(f"BENCHBACK_TORCH must be cpu or cuda, not {choice!r}")
    return choice or ("cuda" if gpus() else "cpu")


def cpu_index(setup_sh: Path = ROOT / "setup.sh") -> str:
    """setup.sh's CPU_INDEX: where torch's CPU build comes from (one place names it)."""
    for line in setup_sh.read_text().splitlines():
        if line.startswith("CPU_INDEX="):
            return line.partition("=")[2].strip().strip("'\"")
    raise SetupError(f"{setup_sh} sets no CPU_INDEX")


def install_commands(python: Path, build: str) -> list[list[str]]:
    """The pip commands that fill a fresh venv: torch of the build, then every pin (no deps)."""
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    pins = [line.split("#")[0].strip() for line in REQUIREMENTS.read_text().splitlines()]
    torch = next((pin for pin in pins if pin.lower().startswith("torch==")), None)
    if torch is None:
        raise SetupError(f"{REQUIREMENTS.name} pins no torch")
    # the CPU build's dependencies are pinned in the file, installed next; the CUDA build's own
    # (the NVIDIA libraries) come with it
    first = (
        [*pip, "--no-deps", "--index-url", cpu_index(), torch] if build == "cpu" else [*pip, torch]
    )
    return [first, [*pip, "--no-deps", "--requirement", str(REQUIREMENTS)]]


def ensure_venv(venv: Path) -> Path:
    """The python of venv, set up from REQUIREMENTS as setup.sh sets up .venv (torch's build first;
    BENCHBACK_TORCH=cpu|cuda chooses it) unless it already is."""
    build = torch_build()
    stamp = f"leanrl {hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()} torch {build}\n"
    what = f"LeanRL's venv (torch {build} build; minutes)"
    return stamped_venv(venv, stamp, partial(install_commands, build=build), SetupError, what)


# --------------------------------------------------------------------------- what runs, and how
EXPERIMENT, LABEL = "exp9", "HalfCheetah-v4@envpool"
SEED = "1"
# flags LeanRL's Args spell as CleanRL's and ours do
LEANRL_SHARED = (
    "--num-envs --num-steps --update-epochs --num-minibatches --learning-rate --ent-coef".split()
)
ALWAYS_ON = ("--norm-obs", "--norm-reward")  # LeanRL's make_env always normalises (and clips)


@dataclass(frozen=True)
class Config:
    name: str
    script: str  # LeanRL: one of SCRIPTS; ours: a ppo_*.py of the project root
    flags: tuple[str, ...]
    leanrl: bool
    gpu_only: bool = False


@dataclass
class Plan:  # what every run shares
    num_iterations: int
    cores: int
    timeout: float
    logs: Path
    leanrl_python: str
    leanrl_scripts: dict  # SCRIPTS -> the shimmed copy


def reference_options() -> dict[str, Optional[str]]:
    """exp9's flags as {flag: value}; a flag with no value maps to None."""
    args = study.load().experiments[EXPERIMENT].env_args(LABEL)
    if not args:
        raise ValueError(f"study.toml: {EXPERIMENT} has no configuration for {LABEL}")
    options, flag = {}, None
    for word in args:
        if word.startswith("--"):
            options[word], flag = None, word
        elif flag is not None:
            options[flag], flag = word, None
    return options


def batch_size() -> int:
    options = reference_options()
    return int(options["--num-envs"]) * int(options["--num-steps"])


def our_args(config: Config, num_iterations: int, cores: int) -> list[str]:
    """A run of ours, as `bench.sh --cpus CORES` runs exp9's, for num_iterations."""
    exp = study.load().experiments[EXPERIMENT]
    env, backend = study.split_label(LABEL)
    options = reference_options()
    options.pop("--num-iterations", None)
    args = ["--env", env, "--env-backend", backend, "--model-size", exp.sizes[0], *config.flags]
    # envpool's threads, one per pinned core, as bench.sh --cpus gives them
    args += ["--seed", SEED, "--env-threads", str(cores)]
    args += [word for flag, value in options.items() for word in (flag, value) if word is not None]
    args += ["--num-iterations", str(num_iterations)]
    # exp9's sync setting (its first, were it "both")
    return args + ([] if exp.syncs[0] else ["--no-sync-timing"])


def leanrl_args(config: Config, num_iterations: int) -> list[str]:
    """A LeanRL run of exp9's settings: the shared flags, the iterations as total timesteps."""
    options = reference_options()
    unknown = set(options) - set(LEANRL_SHARED) - set(ALWAYS_ON) - {"--num-iterations"}
    if unknown:
        raise ValueError(f"{EXPERIMENT}'s {', '.join(sorted(unknown))}: no LeanRL counterpart")
    args = ["--env-id", study.split_label(LABEL)[0], "--seed", SEED]
    args += [word for flag in LEANRL_SHARED if flag in options for word in (flag, options[flag])]
    args += ["--total-timesteps", str(num_iterations * batch_size())]
    # LeanRL's own speed over the same iterations as ours (its iterations count from 1)
    args += ["--measure-burnin", str(STEADY_FROM + 1)]
    return args + list(config.flags)


def command(config: Config, plan: Plan, log_dir: Path) -> list[str]:
    if config.leanrl:
        script = str(plan.leanrl_scripts[config.script])
        return [plan.leanrl_python, script, *leanrl_args(config, plan.num_iterations)]
    args = our_args(config, plan.num_iterations, plan.cores)
    return [sys.executable, str(ROOT / config.script), *args, "--log-dir", str(log_dir)]


def run_environment(cores: int, scratch: Path) -> dict:
    """This environment without what would reuse a cache or another venv, with empty caches in
    scratch, OMP threads one per pinned core, wandb off, output unbuffered (tqdm's redraws arrive
    when they are made)."""
    env = fresh_environment(scratch)
    env.update(OMP_NUM_THREADS=str(cores), WANDB_MODE="disabled", PYTHONUNBUFFERED="1")
    env.update(TRITON_CACHE_DIR=str(scratch / "triton"), JAX_COMPILATION_CACHE_DIR="")
    return env


# ------------------------------------------------------------------------------ a run, timed
TICK = re.compile(r"\|\s*(\d+)/(\d+) \[")
SPEED = re.compile(r"speed:\s*([0-9.]+) sps")


class Progress:
    """A run's output as it arrives: its text, and the time (since the start) each tqdm count n
    first showed."""

    def __init__(self):
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.chunks: list[str] = []
        self.tail = ""
        self.first_seen: dict[int, float] = {}

    def feed(self, data: bytes, at: float) -> None:
        text = self.decoder.decode(data)
        self.chunks.append(text)
        pieces = re.split(r"[\r\n]", self.tail + text)
        # the last piece may be a bar still being written: read now, kept to be read whole
        self.tail = pieces[-1]
        for piece in pieces:
            for match in TICK.finditer(piece):
                self.first_seen.setdefault(int(match.group(1)), at)

    @property
    def text(self) -> str:
        return "".join(self.chunks)


@dataclass
class Finished:
    returncode: Optional[int]  # None: killed at the timeout
    wall_s: float
    progress: Progress


def run_timed(cmd: list[str], cwd: Path, env: dict, timeout: float, log: Path) -> Finished:
    """Runs cmd, its output to log and its progress counts timed as they arrive
    (common.run_logged); killed at the timeout, or on Ctrl-C (raised again)."""
    progress = Progress()
    logged = run_logged(cmd, cwd, env, log, timeout, on_output=progress.feed)
    if logged.interrupted:
        raise KeyboardInterrupt
    return Finished(logged.returncode, logged.wall_s, progress)


def steady_rate(first_seen: dict[int, float], batch: int, first: int = STEADY_FROM) -> float:
    """Steps per second from tqdm's count `first` to its last: the iterations after it. LeanRL
    prints no time per iteration; tqdm redraws its bar after every one, and count n first shows at
    the end of iteration n (1-based)."""
    counts = sorted(n for n in first_seen if n >= first)
    if len(counts) < 2:
        raise RunFailed(f"fewer than two progress counts from {first} on: {sorted(first_seen)}")
    start, end = counts[0], counts[-1]
    return (end - start) * batch / (first_seen[end] - first_seen[start])


def reported_speed(text: str) -> Optional[float]:
    """The last `speed: X sps` LeanRL printed, if any."""
    found = SPEED.findall(text)
    return float(found[-1]) if found else None


def leanrl_result(finished: Finished, batch: int) -> dict:
    seen = finished.progress.first_seen
    if 0 not in seen or 1 not in seen:
        raise RunFailed(f"no progress bar counts 0 and 1 in its output: {sorted(seen)}")
    return {
        "wall_s": finished.wall_s,
        "iter0_s": seen[1] - seen[0],
        "steady_sps": steady_rate(seen, batch),
        "reported_sps": reported_speed(finished.progress.text),
    }


def our_result(run: dict, wall_s: float, batch: int) -> dict:
    elapsed = run["series"]["time/elapsed"]
    if len(elapsed) <= STEADY_FROM:
        raise RunFailed(f"{len(elapsed)} iterations: none after iteration {STEADY_FROM - 1}")
    loop_s = elapsed[-1] - elapsed[STEADY_FROM - 1]
    return {
        "wall_s": wall_s,
        "iter0_s": float(run["series"]["time/iteration"][0]),
        "steady_sps": (len(elapsed) - STEADY_FROM) * batch / float(loop_s),
        # the study's measure: the mean time/iteration, logging left out
        "timed_sps": batch / steady_mean(run),
        "total_s": run["summary"]["total_s"],
    }


def failure(finished: Finished, timeout: float) -> str:
    if finished.returncode is None:
        return f"killed after {timeout:.0f} s (--timeout)"
    tail = finished.progress.text.strip()[-1500:]
    return f"exit status {finished.returncode}: ...{tail}"


def run_config(config: Config, plan: Plan, log_name: str, scratch: Path) -> dict:
    """One run of config in scratch (its cwd for LeanRL, its caches and log folder); its result, or
    {"error": why}. The whole output goes to plan.logs/log_name."""
    log_dir = scratch / "runs"
    cwd = scratch if config.leanrl else ROOT
    env = run_environment(plan.cores, scratch)
    log = plan.logs / log_name
    finished = run_timed(command(config, plan, log_dir), cwd, env, plan.timeout, log)
    if finished.returncode != 0:
        return {"error": failure(finished, plan.timeout), "log": log.name}
    try:
        if config.leanrl:
            return {**leanrl_result(finished, batch_size()), "log": log.name}
        (run_dir,) = log_dir.iterdir()
        return {**our_result(run_series(run_dir), finished.wall_s, batch_size()), "log": log.name}
    except (RunFailed, runlog.RunError, ValueError, KeyError) as e:
        return {"error": f"unreadable: {e}", "log": log.name}

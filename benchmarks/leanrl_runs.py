"""What benchmarks/leanrl.py runs, and how it reads each run.

Every configuration trains HalfCheetah-v4 under CleanRL's ppo_continuous_action.py settings as study.toml's exp9
states them for "HalfCheetah-v4@envpool" (its --num-iterations replaced by the benchmark's): our scripts take those
flags as they are, with exp9's backend (envpool), model size and sync setting, and envpool's threads as `bench.sh
--cpus` gives them; LeanRL's scripts take the ones they share by name with CleanRL's (LEANRL_SHARED),
--total-timesteps for the iterations, and normalise observations and rewards as they always do (ALWAYS_ON). Each
run is a fresh process with empty TorchInductor and Triton caches and no JAX cache: its iteration 0 pays the whole
compile, as a first run does.

Steady state is the study's: iterations STEADY_FROM+ (0-based); steps per second over it is the loop's wall time,
logging included, for both sides. LeanRL prints no time per iteration, so its progress is timed as it arrives: tqdm
redraws its bar (`| n/N [`) on stderr after every iteration, and the first time each count n appears is the end of
iteration n (1-based), so the steady window runs from count STEADY_FROM to count N. Ours: time/elapsed at the end of
iteration STEADY_FROM-1 and of the last. LeanRL's own figure (`speed: X sps`, printed every 10th iteration, over
iterations --measure-burnin+; we pass STEADY_FROM+1, the same window) is kept beside it as reported_sps.
"""

import codecs
import os
import re
import selectors
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from analysis import runlog
from benchmarks.common import ROOT, STEADY_FROM, run_series, steady_mean
from benchmarks.leanrl_source import COMPILED, PLAIN
from benchmarks.quickstart_clone import DROPPED_VARIABLES
from sweep import study

EXPERIMENT, LABEL = "exp9", "HalfCheetah-v4@envpool"
SEED = "1"
# flags LeanRL's Args spell as CleanRL's and ours do
LEANRL_SHARED = (
    "--num-envs",
    "--num-steps",
    "--update-epochs",
    "--num-minibatches",
    "--learning-rate",
    "--ent-coef",
)
# LeanRL's make_env always normalises (and clips) observations and rewards
ALWAYS_ON = ("--norm-obs", "--norm-reward")
TICK = re.compile(r"\|\s*(\d+)/(\d+) \[")
SPEED = re.compile(r"speed:\s*([0-9.]+) sps")


@dataclass(frozen=True)
class Config:
    name: str
    script: str  # LeanRL: one of leanrl_source.SCRIPTS; ours: a ppo_*.py of the project root
    flags: tuple[str, ...]
    leanrl: bool
    gpu_only: bool = False


def our_config(framework: str, mode: str, gpu_only: bool = False) -> Config:
    script = study.load().frameworks[framework].script
    return Config(f"{framework} {mode}", script, ("--compile", mode), False, gpu_only)


TORCH = our_config("torch", study.load().default_compile("torch"))
CONFIG_LIST = (
    Config("leanrl compile", COMPILED, ("--compile",), True),
    Config("leanrl eager", COMPILED, (), True),
    Config("leanrl plain", PLAIN, (), True),
    Config("leanrl cudagraphs", COMPILED, ("--compile", "--cudagraphs"), True, gpu_only=True),
    TORCH,
    our_config("torch", "cudagraphs", gpu_only=True),
    our_config("linen", study.load().default_compile("linen")),
)
CONFIGS = {config.name: config for config in CONFIG_LIST}
BASELINE = TORCH.name


@dataclass
class Plan:
    """What every run shares."""

    num_iterations: int
    cores: int
    timeout: float
    logs: Path
    leanrl_python: str
    leanrl_scripts: dict  # leanrl_source.SCRIPTS -> the shimmed copy


# ------------------------------------------------------------------------------------------------ commands
def reference_args() -> tuple[str, ...]:
    args = study.load().experiments[EXPERIMENT].env_args(LABEL)
    if not args:
        raise ValueError(f"study.toml: {EXPERIMENT} has no configuration for {LABEL}")
    return args


def as_options(args) -> dict[str, Optional[str]]:
    """--flag value pairs as {flag: value}; a flag with no value maps to None."""
    options, flag = {}, None
    for word in args:
        if word.startswith("--"):
            options[word], flag = None, word
        elif flag is not None:
            options[flag], flag = word, None
    return options


def batch_size() -> int:
    options = as_options(reference_args())
    return int(options["--num-envs"]) * int(options["--num-steps"])


def our_args(config: Config, num_iterations: int, cores: int) -> list[str]:
    """A run of ours, as `bench.sh --cpus CORES` runs exp9's (sweep_matrix.command), for num_iterations."""
    exp = study.load().experiments[EXPERIMENT]
    env, backend = study.split_label(LABEL)
    options = as_options(reference_args())
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
    options = as_options(reference_args())
    unknown = set(options) - set(LEANRL_SHARED) - set(ALWAYS_ON) - {"--num-iterations"}
    if unknown:
        raise ValueError(f"{EXPERIMENT}'s {', '.join(sorted(unknown))}: no LeanRL counterpart")
    env, _ = study.split_label(LABEL)
    args = ["--env-id", env, "--seed", SEED]
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
    """This environment without what would reuse a cache or another venv; empty caches in scratch; OMP threads one
    per pinned core; wandb off; output unbuffered, so that tqdm's redraws arrive when they are made."""
    env = {key: value for key, value in os.environ.items() if key not in DROPPED_VARIABLES}
    env.update(
        OMP_NUM_THREADS=str(cores),
        WANDB_MODE="disabled",
        PYTHONUNBUFFERED="1",
        TORCHINDUCTOR_CACHE_DIR=str(scratch / "torchinductor"),
        TRITON_CACHE_DIR=str(scratch / "triton"),
        JAX_COMPILATION_CACHE_DIR="",
    )
    return env


# ------------------------------------------------------------------------------------------- timed output
class Progress:
    """A run's output as it arrives: its text, and the time (since the start) each tqdm count n first showed."""

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


def read_output(proc, progress: Progress, started: float, deadline: float, exited) -> bool:
    """Feeds proc's output to progress until it ends (True) or the deadline passes (False)."""
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while (left := deadline - time.perf_counter()) > 0:
            if not selector.select(timeout=min(left, 1.0)):
                # TorchInductor's compile workers inherit the pipe: it may outlive the run a while
                if exited.is_set():
                    return True
                continue
            data = os.read(proc.stdout.fileno(), 1 << 16)
            if not data:
                return True
            progress.feed(data, time.perf_counter() - started)
    return False


def run_timed(cmd: list[str], cwd: Path, env: dict, timeout: float) -> Finished:
    """Runs cmd (stderr into stdout), timing its output as it arrives and its exit; killed at the timeout or on
    Ctrl-C. Its wall time runs from its start to its exit."""
    progress = Progress()
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    exited, ended_at = threading.Event(), [None]

    def wait() -> None:
        proc.wait()
        ended_at[0] = time.perf_counter()
        exited.set()

    threading.Thread(target=wait, daemon=True).start()
    try:
        finished = read_output(proc, progress, started, started + timeout, exited)
        finished = finished and exited.wait(timeout=max(started + timeout - time.perf_counter(), 1))
    except BaseException:
        proc.kill()
        raise
    finally:
        proc.stdout.close()
    if not finished:
        proc.kill()
        exited.wait()
    returncode = proc.returncode if finished else None
    return Finished(returncode, ended_at[0] - started, progress)


# ------------------------------------------------------------------------------------------ what a run says
class RunFailed(Exception):
    """A run that did not finish, or whose timing cannot be read."""


def steady_rate(first_seen: dict[int, float], batch: int, first: int = STEADY_FROM) -> float:
    """Steps per second from count `first` to the last count: the iterations after it."""
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
    cmd = command(config, plan, log_dir)
    cwd = scratch if config.leanrl else ROOT
    finished = run_timed(cmd, cwd, run_environment(plan.cores, scratch), plan.timeout)
    log = plan.logs / log_name
    log.write_text(finished.progress.text)
    if finished.returncode != 0:
        return {"error": failure(finished, plan.timeout), "log": log.name}
    try:
        if config.leanrl:
            return {**leanrl_result(finished, batch_size()), "log": log.name}
        (run_dir,) = log_dir.iterdir()
        return {**our_result(run_series(run_dir), finished.wall_s, batch_size()), "log": log.name}
    except (RunFailed, runlog.RunError, ValueError, KeyError) as e:
        return {"error": f"unreadable: {e}", "log": log.name}

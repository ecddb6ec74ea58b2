"""One run of benchmarks/purejaxrl.py, either side: PureJaxRL's venv and checkout, each side's
command for a configuration and a number of agents, the run in a fresh process with its peak
memory (the child's own resource usage), and its result."""

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Optional

from atomic import BadJson, parse_json
from benchmarks.common import (
    ROOT,
    fresh_environment,
    git,
    gpus,
    open_log,
    run_series,
    stamped_venv,
)
from benchmarks.leanrl_runs import RunFailed, our_result
from core import runlog


class SetupError(Exception):
    """PureJaxRL's checkout or its venv cannot be had."""


# ------------------------------------------------------------------ PureJaxRL: checkout and venv
PUREJAXRL_REPO = "https://github.com/luchris429/purejaxrl"
PUREJAXRL_COMMIT = "31756b197773a52db763fdbe6d635e4b46522a73"  # the head when this was written
PPO = Path("purejaxrl", "ppo.py")
DRIVER = Path(__file__).with_name("purejaxrl_train.py")
REQUIREMENTS = Path(__file__).with_name("purejaxrl-requirements.txt")
# what the record lists of each side's interpreter (those it lacks are left out)
PACKAGES = (
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "gymnax",
    "distrax",
    "tensorflow-probability",
    "chex",
    "equinox",
    "numpy",
)


def checkout_commit(checkout: Path) -> dict:
    """The checkout's commit and whether ppo.py or wrappers.py differ from it (the record says
    which code ran; null where git is not installed, as on the TPU machine, and the commit is read
    from .git); SetupError when it is no PureJaxRL checkout."""
    if not Path(checkout, PPO).is_file():
        raise SetupError(f"{checkout}: no {PPO} (not a PureJaxRL checkout)")
    if shutil.which("git") is None:
        return {"commit": head_without_git(Path(checkout)), "modified": None}
    head = git("-C", str(checkout), "rev-parse", "HEAD")
    if head.returncode != 0:
        raise SetupError(f"{checkout}: not a git checkout")
    changed = git("-C", str(checkout), "status", "--porcelain", "--", "purejaxrl")
    return {"commit": head.stdout.strip(), "modified": bool(changed.stdout.strip())}


def head_without_git(checkout: Path) -> str:
    """The commit .git/HEAD names (a branch's ref file or packed-refs line, or the commit itself);
    SetupError when there is none."""
    git_dir = checkout / ".git"
    try:
        head = (git_dir / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head.removeprefix("ref: ")
        if (git_dir / ref).is_file():
            return (git_dir / ref).read_text().strip()
        for line in (git_dir / "packed-refs").read_text().splitlines():
            if line.endswith(f" {ref}"):
                return line.split()[0]
    except OSError:
        pass
    raise SetupError(f"{checkout}: not a git checkout (no commit in {git_dir})")


def jax_pin() -> str:
    pins = [line.split("#")[0].strip() for line in REQUIREMENTS.read_text().splitlines()]
    jax = next((pin for pin in pins if pin.startswith("jax==")), None)
    if jax is None:
        raise SetupError(f"{REQUIREMENTS.name} pins no jax")
    return jax.partition("==")[2]


def install_commands(python: Path, gpu: bool) -> list[list[str]]:
    """The pip commands that fill a fresh venv: every pin (no deps); with a GPU, then jax's CUDA
    plugin at the pinned jax."""
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    commands = [[*pip, "--no-deps", "--requirement", str(REQUIREMENTS)]]
    if gpu:
        commands.append([*pip, f"jax[cuda12]=={jax_pin()}"])
    return commands


def ensure_venv(venv: Path) -> Path:
    """The python of venv, set up from REQUIREMENTS unless it already is."""
    gpu = bool(gpus())
    stamp = f"purejaxrl {hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()} gpu {gpu}\n"
    what = "PureJaxRL's venv (a minute or two)"
    return stamped_venv(venv, stamp, partial(install_commands, gpu=gpu), SetupError, what)


# --------------------------------------------------------------------------- what runs, and how
@dataclass(frozen=True)
class Setting:
    """A PPO configuration: the batch (envs x steps) and the update (epochs x minibatches)."""

    num_envs: int
    num_steps: int
    update_epochs: int
    num_minibatches: int

    @property
    def batch(self) -> int:  # one agent's env steps an iteration
        return self.num_envs * self.num_steps

    def flags(self) -> list[str]:
        return [
            *("--num-envs", str(self.num_envs), "--num-steps", str(self.num_steps)),
            *("--update-epochs", str(self.update_epochs)),
            *("--num-minibatches", str(self.num_minibatches)),
        ]


SETTINGS = {
    "cleanrl": Setting(4, 128, 4, 4),  # CleanRL's ppo.py (and PureJaxRL's ppo.py)
    "ours": Setting(32, 256, 10, 8),  # the templates' defaults
}
ENV, SEED = "CartPole-v1", 1
OURS = {"linen": "ppo_linen.py", "nnx": "ppo_nnx.py", "equinox": "ppo_equinox.py"}
PUREJAXRL = "purejaxrl"


@dataclass
class Plan:  # what every run shares
    iterations: int
    timeout: float
    logs: Path
    purejaxrl_python: str
    purejaxrl_dir: Path
    shims: bool = False  # PureJaxRL on our JAX (benchmarks/purejaxrl_shims.py)
    # ours only as a user trains (--no-sync-timing): no sync-timed run, half the processes
    fast_only: bool = False


def purejaxrl_command(plan: Plan, setting: Setting, agents: int, whole: bool) -> list[str]:
    cmd = [plan.purejaxrl_python, str(DRIVER), "--purejaxrl-dir", str(plan.purejaxrl_dir)]
    cmd += ["--env", ENV, "--seed", str(SEED), *setting.flags()]
    cmd += ["--iterations", str(plan.iterations), "--agents", str(agents)]
    cmd += ["--shims"] if plan.shims else []
    return cmd + (["--whole"] if whole else [])


def our_command(
    plan: Plan, side: str, setting: Setting, agents: int, log_dir: Path, whole: bool, fast=False
):
    """A template's run: sync timing on for the steady state (its time/iteration is the
    iteration's work), off for the whole process and for fast (as a user trains: the fast path,
    many iterations a device call)."""
    cmd = [sys.executable, str(ROOT / OURS[side]), "--env", ENV, "--seed", str(SEED)]
    cmd += [*setting.flags(), "--num-iterations", str(plan.iterations)]
    cmd += [] if whole else ["--num-agents", str(agents)]  # whole: as a user runs it
    return cmd + ["--log-dir", str(log_dir)] + (["--no-sync-timing"] if whole or fast else [])


def command(
    plan: Plan, side: str, setting: Setting, agents: int, log_dir: Path, whole=False, fast=False
):
    if side == PUREJAXRL:
        return purejaxrl_command(plan, setting, agents, whole)
    return our_command(plan, side, setting, agents, log_dir, whole, fast)


def run_environment(scratch: Path, own_interpreter: bool) -> dict:
    """This environment without what would reuse a cache or another venv (no JAX cache: a first
    run's compile), wandb off. A run on this interpreter (ours; PureJaxRL's with --shims) keeps
    PYTHONPATH, where a machine may put the packages it lacks (the TPU runner's carried wheels);
    one in PureJaxRL's own venv does not, so that none of ours leaks into it."""
    env = fresh_environment(scratch, keep=("PYTHONPATH",) if own_interpreter else ())
    env.update(WANDB_MODE="disabled", PYTHONUNBUFFERED="1", JAX_COMPILATION_CACHE_DIR="")
    return env


# ------------------------------------------------------------------------ a run, in a fresh process
@dataclass
class Child:
    returncode: Optional[int]  # None: killed at the timeout
    wall_s: float  # from its start to its exit
    # its own peak resident set (its VmHWM, or wait4's where /proc is not); None: unknown
    peak_rss_bytes: Optional[int]
    output: str


def run_child(cmd: list[str], cwd: Path, env: dict, log: Path, timeout: float) -> Child:
    """Runs cmd, its output (stderr into stdout) to log; killed at the timeout or on Ctrl-C
    (raised again). Its peak memory is its own: Linux's VmHWM of its process, read while it runs
    (wait4's ru_maxrss also holds this process's peak, which a child inherits at its exec); wait4's
    where there is no /proc."""
    with open_log(log) as out:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        timer = threading.Timer(timeout, proc.send_signal, (signal.SIGKILL,))
        timer.start()
        peaks = [0]
        watcher = threading.Thread(target=watch_peak, args=(proc.pid, peaks), daemon=True)
        watcher.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except KeyboardInterrupt:
            proc.kill()
            proc.wait()
            raise
        finally:
            timer.cancel()
        wall_s = time.perf_counter() - started
        watcher.join()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    killed = proc.returncode == -signal.SIGKILL and wall_s >= timeout
    output = log.read_text(errors="replace")
    # ru_maxrss: KiB on Linux
    peak = peaks[0] if os.path.exists("/proc/self/status") else usage.ru_maxrss * 1024
    # 0: a machine that reports no peak (gVisor's /proc has no VmHWM): unknown, not none
    return Child(None if killed else proc.returncode, wall_s, peak or None, output)


def watch_peak(pid: int, peaks: list, every_s: float = 0.02) -> None:
    """peaks[0]: the largest VmHWM (the process's peak resident set, in bytes) read from Linux's
    /proc/PID/status until the process is gone; left 0 where it cannot be read. A peak reached
    in the process's last `every_s` can be missed: nothing for runs of seconds or more."""
    while True:
        try:
            with open(f"/proc/{pid}/status") as status:
                lines = [line for line in status if line.startswith("VmHWM:")]
        except OSError:
            return
        if not lines:  # exited: a zombie has no memory left
            return
        peaks[0] = max(peaks[0], int(lines[0].split()[1]) * 1024)
        time.sleep(every_s)


def last_json(output: str) -> dict:
    """The driver's result: the last line of its output, JSON."""
    lines = output.strip().splitlines()
    try:
        result = parse_json(lines[-1], "the driver's result")
    except (IndexError, BadJson):
        raise RunFailed(f"no JSON result last: {output.strip()[-300:]!r}") from None
    if not isinstance(result, dict):
        raise RunFailed(f"the driver's result is not a JSON object: {lines[-1][:300]!r}")
    return result


def purejaxrl_result(child: Child, setting: Setting, agents: int, iterations: int, whole: bool):
    found = last_json(child.output)
    result = {"wall_s": child.wall_s, "peak_rss_bytes": child.peak_rss_bytes, **found}
    if not whole:
        # every iteration of the timed run is a steady one: its agent-steps over its time
        result["steady_sps"] = agents * iterations * setting.batch / found["train_s"]
    return result


def fast_rate(run: dict, batch: int) -> float:
    """Agent-steps per second over whole iterations of a --no-sync-timing run: iterations 1+ over
    the time from the end of iteration 0 (a device call of its own, its compile) to the end of the
    last (time/elapsed): every later call, its transfer and the writing included, as a user trains.
    The study's steady window (iterations 8+) may start inside a call, whose iterations are logged
    together at its end: its time/elapsed would not count that call's work."""
    elapsed = run["series"]["time/elapsed"]
    if len(elapsed) < 2 or not elapsed[-1] > elapsed[0]:
        raise RunFailed(f"{len(elapsed)} iterations: none timed after iteration 0")
    return (len(elapsed) - 1) * batch / float(elapsed[-1] - elapsed[0])


def ours_result(
    child: Child, log_dir: Path, setting: Setting, agents: int, whole: bool, fast=False
) -> dict:
    (run_dir,) = log_dir.iterdir()
    run = run_series(run_dir)
    result = {"wall_s": child.wall_s, "peak_rss_bytes": child.peak_rss_bytes}
    if fast:
        return {**result, "fast_sps": fast_rate(run, agents * setting.batch)}
    summary = run["summary"]
    result.update({key: summary.get(key) for key in ("import_s", "setup_s", "total_s")})
    result["final_return"] = summary.get("final_return")
    if whole:
        result["iter0_s"] = float(run["series"]["time/iteration"][0])
        return result
    measured = our_result(run, child.wall_s, agents * setting.batch)
    # the study's measure: the steady window's mean time/iteration (sync on; logging left out)
    result["steady_sps"] = measured["timed_sps"]
    result["loop_sps"] = measured["steady_sps"]  # the loop's wall time, logging included
    result["iter0_s"] = measured["iter0_s"]
    return result


def failure(child: Child, timeout: float) -> str:
    if child.returncode is None:
        return f"killed after {timeout:.0f} s (--timeout)"
    return f"exit status {child.returncode}: ...{child.output.strip()[-1500:]}"


def run_one(plan: Plan, side: str, setting: Setting, agents: int, log_name: str, whole: bool):
    """One run in a fresh process in its own scratch folder; its result, or {"error": why}. Its
    whole output goes to plan.logs/log_name. A template's scaling run is followed by the same with
    --no-sync-timing (its output in ...-fast.log), whose rate over whole iterations is fast_sps;
    with plan.fast_only, a template's scaling run is that run alone."""
    if plan.fast_only and side != PUREJAXRL and not whole:
        fast = run_process(plan, side, setting, agents, log_name, whole, fast=True)
        return {**fast, "fast_log": fast["log"]} if "error" not in fast else fast
    result = run_process(plan, side, setting, agents, log_name, whole)
    if side == PUREJAXRL or whole or "error" in result:
        return result
    fast_log = log_name.removesuffix(".log") + "-fast.log"
    fast = run_process(plan, side, setting, agents, fast_log, whole, fast=True)
    if "error" in fast:
        return fast
    return {**result, "fast_sps": fast["fast_sps"], "fast_log": fast["log"]}


def run_process(
    plan: Plan, side: str, setting: Setting, agents: int, log_name: str, whole: bool, fast=False
) -> dict:
    """run_one's process: with fast, a template's with --no-sync-timing, its result fast_sps."""
    with tempfile.TemporaryDirectory(prefix="purejaxrl-run-") as scratch:
        log_dir = Path(scratch, "runs")
        cmd = command(plan, side, setting, agents, log_dir, whole, fast)
        log = plan.logs / log_name
        own_interpreter = side != PUREJAXRL or plan.shims
        env = run_environment(Path(scratch), own_interpreter)
        child = run_child(cmd, ROOT, env, log, plan.timeout)
        if child.returncode != 0:
            return {"error": failure(child, plan.timeout), "log": log.name}
        try:
            if side == PUREJAXRL:
                result = purejaxrl_result(child, setting, agents, plan.iterations, whole)
            else:
                result = ours_result(child, log_dir, setting, agents, whole, fast)
        except (RunFailed, runlog.RunError, ValueError, KeyError) as e:
            return {"error": f"unreadable: {e}", "log": log.name}
    return {**result, "log": log.name}

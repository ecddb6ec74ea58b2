"""Shared by the benchmarks: launch a PPO script in a fresh process and read what its run wrote;
check their options before anything is measured (a bad one: one line, exit status 2); the machine
they ran on and durations as a person reads them. Their outputs, a JSON record and its table beside
it as .md, are checked and written by atomic.py (check_outputs, write_outputs): a file there that
the benchmark did not write is refused, never replaced. A command run, its output logged and timed
as it arrives (run_logged): the quick start's steps and the LeanRL benchmark's runs."""

import argparse
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NoReturn, Optional

import numpy as np

from analysis.common import BadInput, md_text
from atomic import BadJson, check_inside, parse_json, write_file, write_outputs
from core import runlog, study
from core.option_checks import BadOption, check_int
from tools import launch

ROOT = Path(__file__).resolve().parents[1]
STEADY_FROM = study.load().steady.first  # the study's steady state: iterations STEADY_FROM+
# variables a first-time user lacks, that would reuse what was made before or run in another venv
DROPPED_VARIABLES = (
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONHOME",
    "PIP_CACHE_DIR",
    "PIP_NO_CACHE_DIR",
    "TORCHINDUCTOR_CACHE_DIR",
    "JAX_COMPILATION_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES",
    "OMP_NUM_THREADS",
)


def run_and_read(script: str, *args: str) -> dict:
    """Runs `python script args` in a fresh process; returns its run's summary and per-iteration
    series. script: a path from the project root, or an absolute one. torch gets OMP_NUM_THREADS as
    set now (a benchmark's --cpus sets it), else one thread per core this process may use."""
    threads = os.environ.get("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0))))
    with tempfile.TemporaryDirectory() as log_dir:
        # no JAX cache: a first run's compile
        env = {"OMP_NUM_THREADS": threads, "JAX_COMPILATION_CACHE_DIR": ""}
        proc = launch.run_script(script, *args, log_dir=log_dir, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"{script} {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
        (run_dir,) = Path(log_dir).iterdir()
        return run_series(run_dir)


def run_series(run_dir: Path) -> dict:
    """A run read by runlog.read_run, as {"summary": summary.json, "series": {tag: the values at
    the steps where the tag was logged}}."""
    run = runlog.read_run(run_dir)
    series = {
        tag: run.scalars[tag].dropna().to_numpy(float)
        for tag in run.scalars.columns
        if tag != "step"
    }
    return {"summary": run.summary, "series": series}


def steady_mean(run: dict, tag: str = "time/iteration") -> float:
    """The mean over the steady state (iterations STEADY_FROM+), or over iterations 1+ in a shorter
    run."""
    values = run["series"][tag]
    return float(np.mean(values[STEADY_FROM if len(values) > STEADY_FROM else 1 :]))


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True)


def git_out(*args: str, why: str, error: type[Exception] = RuntimeError) -> str:
    """git's output; error with why and git's last line when it fails."""
    proc = git(*args)
    if proc.returncode != 0:
        raise error(f"{why}: {(proc.stderr.strip().splitlines() or ['git failed'])[-1]}")
    return proc.stdout


def fresh_environment(scratch: Path, keep=()) -> dict:
    """This environment without DROPPED_VARIABLES (but those in keep), with an empty TorchInductor
    cache in scratch: what runs in it reuses nothing made before."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_VARIABLES or k in keep}
    env["TORCHINDUCTOR_CACHE_DIR"] = str(scratch / "torchinductor-cache")
    return env


# ------------------------------------------------------------------ a command, logged and timed
@dataclass
class Logged:
    returncode: Optional[int]  # None: killed at the timeout, or on Ctrl-C
    wall_s: float  # time.perf_counter() from its start to its exit
    interrupted: bool = False  # Ctrl-C stopped it


def open_log(log: Path, given=None):
    """log opened for writing (binary), made or emptied: never through a link below given (the
    folder the user named; default: log's folder, so that log itself must not be a link, O_NOFOLLOW
    for one made in between). LinkRefused (an OSError), one line, when one is."""
    check_inside(log.parent if given is None else given, log)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    return os.fdopen(os.open(log, flags, 0o666), "wb")


def run_logged(cmd, cwd: Path, env: dict, log: Path, timeout=None, on_output=None) -> Logged:
    """Runs cmd (stderr into stdout), its output written to log as it arrives and passed to
    on_output(bytes, seconds since the start) when given; killed at the timeout or on Ctrl-C
    (interrupted: the caller decides what Ctrl-C means). OSError when it cannot be started, or
    when log is a link (open_log: nothing run, nothing written)."""
    written = open_log(log)
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
    except BaseException:
        written.close()
        raise

    def read() -> None:  # the log is the reader's: an output that outlives the wait still lands
        with proc.stdout, written:
            while data := os.read(proc.stdout.fileno(), 1 << 16):
                written.write(data)
                if on_output is not None:
                    on_output(data, time.perf_counter() - started)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    returncode, interrupted = None, False
    try:
        returncode = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if proc.returncode is None:  # past the timeout, or Ctrl-C
            proc.kill()
            proc.wait()
    wall_s = time.perf_counter() - started
    # a child that inherited the pipe (TorchInductor's compile workers) may hold it open a while
    reader.join(timeout=1.0)
    return Logged(returncode, wall_s, interrupted)


# ------------------------------------------------------------------------- the machine, in words
# one CPU-bound thread that never sleeps: a competing process
BUSY_LOOP = "while True: pass"


@contextmanager
def busy_loops(count: int):
    """count competing processes (a Python busy loop each) for the length of the block, started
    before it, so that what it runs meets a busy machine from its first line; killed after it."""
    competitors = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(count)]
    try:
        yield
    finally:
        for competitor in competitors:
            competitor.kill()
            competitor.wait()


def cpu_info() -> dict:
    """The CPU's model and whether it is a virtual machine's, from /proc/cpuinfo (Linux); else
    platform's."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    fields = {}
    for line in lines:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return {
        "cpu_model": fields.get("model name") or platform.processor() or platform.machine(),
        "virtual_machine": "hypervisor" in fields.get("flags", "").split(),
    }


def gpus() -> list[str]:
    """The GPUs nvidia-smi lists ("GPU 0: NVIDIA H200"), as setup.sh looks for one."""
    if shutil.which("nvidia-smi") is None:
        return []
    proc = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("GPU")]
    return [line.split(" (UUID")[0] for line in lines]


# run in the interpreter whose versions are wanted: its package metadata, no import of the packages
VERSIONS = (
    "import importlib.metadata as m, json, platform; found = {d.metadata['Name'].lower(): "
    "d.version for d in m.distributions()}; "
    "print(json.dumps({'python': platform.python_version(), **found}))"
)


def interpreter_versions(python, packages, error: type[Exception] = RuntimeError) -> dict:
    """The Python and packages' versions of an interpreter (those it lacks left out), from its
    package metadata; error when it cannot say."""
    proc = subprocess.run([str(python), "-c", VERSIONS], capture_output=True, text=True)
    if proc.returncode != 0:
        raise error(f"{python} cannot report its versions: {proc.stderr.strip()[-300:]}")
    try:
        found = parse_json(proc.stdout, f"{python}'s versions")
    except BadJson as e:
        raise error(str(e)) from None
    if not isinstance(found, dict):
        raise error(f"{python}'s versions are not a JSON object")
    return {name: found[name] for name in ("python", *packages) if name in found}


def machine() -> dict:
    """The machine a benchmark runs on: cores, CPU, memory, OS, this Python, host."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cores": cores,
        **cpu_info(),
        "memory_gib": round(memory / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),  # this tool's; a venv's is in each run's versions
        "hostname": socket.gethostname(),
    }


def machine_text(machine_info: dict) -> str:
    vm = ", a VM" if machine_info.get("virtual_machine") else ""
    return (
        f"{machine_info['cores']} cores ({md_text(machine_info['cpu_model'])}{vm}; "
        f"{machine_info['memory_gib']:.0f} GiB)"
    )


def human(seconds) -> str:
    """A duration as a person reads it: 4.2 s, 55 s, 2m58s, 1h05m; '-' when unknown."""
    if seconds is None:
        return "-"
    if abs(seconds) < 9.95:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


# ------------------------------------------------------------------------------------------ options
class Parser(argparse.ArgumentParser):
    """argparse's complaints as BadInput: one line, exit status 2 where main catches it."""

    def error(self, message):
        raise BadInput(message)


def refuse(message) -> NoReturn:
    """Bad input: one line on stderr, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def check_or_exit(check: Callable[[], None]) -> None:
    """check() run before anything is measured; a ValueError it raises (BadOption,
    atomic.OutputRefused) refused."""
    try:
        check()
    except ValueError as e:
        refuse(e)


def check_counts(opts, *names: str) -> None:
    """BadOption for an option among names (attributes of opts) below 1."""
    for name in names:
        check_int(f"--{name.replace('_', '-')}", getattr(opts, name), 1)


def check_choices(option: str, values, valid) -> None:
    """BadOption for a value not among valid, naming it and the valid choices."""
    for value in values:
        if value not in valid:
            raise BadOption(f"{option} {value!r} is not one of {', '.join(valid)}")


def check_envs(option: str, envs, valid=None) -> None:
    """BadOption for an env the scripts cannot train (or not among valid, when given), naming the
    usable ones."""
    import env_adapters  # imports JAX: only when checking
    from sweep.options import why_untrainable

    for env in envs:
        problem = why_untrainable(env) if valid is None else None
        if problem or (valid is not None and env not in valid):
            usable = env_adapters.usable_envs() if valid is None else valid
            said = problem or "is not one this benchmark takes"
            raise BadOption(f"{option} {env!r} {said}; usable envs: {', '.join(usable)}")


OUT_HELP = "also write the rows as JSON here (a .json file), and the table beside it as .md"


def show_table(tool: str, out, record, table: str) -> None:
    """A benchmark's table on stdout and, when --out is given, its record there (JSON) and the
    table beside it (.md)."""
    print(table)
    if out:
        write_outputs(tool, out, record, table, out)


def run_recorded(tool: str, out, record: dict, markdown: Callable[[dict], str], run) -> bool:
    """A benchmark's rounds, run(), with its record (and its table) written before and after them,
    "finished" or, on Ctrl-C, "interrupted" (what was measured is kept); prints the table. False
    when interrupted."""
    write_outputs(tool, out, record, markdown(record), given=out)
    try:
        run()
        record["status"] = "finished"
    except KeyboardInterrupt:
        record["status"] = "interrupted"
    write_outputs(tool, out, record, markdown(record), given=out)
    print("\n" + markdown(record), flush=True)
    if record["status"] == "interrupted":
        print(f"interrupted: what was measured is kept in {out}", file=sys.stderr)
        return False
    return True


VENV_PYTHON = Path("bin", "python")


def stamped_venv(venv: Path, stamp_text: str, install: Callable, error, what: str) -> Path:
    """The python of venv (a peer's own environment), made with `python -m venv` and then the
    commands install(python) returns, unless the stamp file it leaves says that stamp_text's set-up
    is done already. error: raised, one line, when a command fails; what: said when it sets up."""
    stamp = venv / ".benchback-stamp"
    if stamp.is_file() and stamp.read_text() == stamp_text:
        return venv / VENV_PYTHON
    print(f"setting up {what} in {venv}", flush=True)
    steps = [[sys.executable, "-m", "venv", "--clear", str(venv)]]
    for command in steps + install(venv / VENV_PYTHON):
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise error(f"{' '.join(command[:6])} ... failed: {tail}")
    write_file(stamp, stamp_text)
    return venv / VENV_PYTHON

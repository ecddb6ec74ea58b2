"""Shared by the benchmarks: launch a PPO script in a fresh process and read what its run wrote; check their options
before anything is measured (a bad one: one line, exit status 2). Their outputs, a JSON record and its table beside
it as .md, are checked and written by atomic.py (check_outputs, write_outputs): a file there that the benchmark did
not write is refused, never replaced."""

import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, NoReturn

import numpy as np

from analysis import runlog
from sweep import study
from sweep.option_checks import BadOption, check_int
from tools import launch

ROOT = Path(__file__).resolve().parents[1]
STEADY_FROM = study.load().steady.first  # the study's steady state: iterations STEADY_FROM+


def run_and_read(script: str, *args: str) -> dict:
    """Runs `python script args` in a fresh process; returns its run's summary and per-iteration series.
    script: a path from the project root, or an absolute one. torch gets OMP_NUM_THREADS as set now (a benchmark's
    --cpus sets it), else one thread per core this process may use."""
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
    """A run read by runlog.read_run, as {"summary": summary.json, "series": {tag: the values at the steps where
    the tag was logged}}."""
    run = runlog.read_run(run_dir)
    series = {
        tag: run.scalars[tag].dropna().to_numpy(float)
        for tag in run.scalars.columns
        if tag != "step"
    }
    return {"summary": run.summary, "series": series}


def steady_mean(run: dict, tag: str = "time/iteration") -> float:
    """The mean over the steady state (iterations STEADY_FROM+), or over iterations 1+ in a shorter run."""
    values = run["series"][tag]
    return float(np.mean(values[STEADY_FROM if len(values) > STEADY_FROM else 1 :]))


# ------------------------------------------------------------------------------------------ options
def refuse(message) -> NoReturn:
    """Bad input: one line on stderr, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def check_or_exit(check: Callable[[], None]) -> None:
    """check() run before anything is measured; a ValueError it raises (BadOption, atomic.OutputRefused) refused."""
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
    """BadOption for an env the scripts cannot train (or not among valid, when given), naming the usable ones."""
    import env_adapters  # imports JAX: only when checking

    for env in envs:
        problem = env_adapters.why_untrainable(env) if valid is None else None
        if problem or (valid is not None and env not in valid):
            usable = env_adapters.usable_envs() if valid is None else valid
            raise BadOption(
                f"{option} {env!r} {problem or 'is not one this benchmark takes'}; usable envs: {', '.join(usable)}"
            )

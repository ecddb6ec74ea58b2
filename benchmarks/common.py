"""Shared by the benchmarks: launch a PPO script in a fresh process and read what its run wrote."""

import os
import tempfile
from pathlib import Path

import numpy as np

import launch
import runlog
import study

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

"""Shared by the benchmarks: launch a PPO script in a fresh process and read what its run wrote."""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

ROOT = Path(__file__).resolve().parents[1]
STEADY_FROM = 8  # iterations 8+ are the steady state (DESIGN.md)


def run_script(script: str, *args: str) -> dict:
    """Runs `python script args` in a fresh process; returns its run's summary and per-iteration series."""
    with tempfile.TemporaryDirectory() as log_dir:
        cmd = [sys.executable, str(ROOT / script), *args, "--log-dir", log_dir]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
        (run_dir,) = Path(log_dir).iterdir()
        return read_run(run_dir)


def read_run(run_dir: Path) -> dict:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    series = {tag: np.array([e.value for e in acc.Scalars(tag)]) for tag in acc.Tags()["scalars"]}
    return {"summary": json.loads((run_dir / "summary.json").read_text()), "series": series}


def steady_mean(run: dict, tag: str = "time/iteration") -> float:
    return float(run["series"][tag][STEADY_FROM:].mean())


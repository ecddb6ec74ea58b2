"""Runs a ppo_*.py script in a fresh process, and reads what a run wrote: config.json, summary.json, its scalars.

The one reader of run folders, used by plot_results.py, sweep.py (bench.sh's resume), benchmarks/ and the tests.
One definition of a usable run serves them all: `check_completed` says why a run is not one.

    from runlog import read_run, is_completed
    run = read_run("runs/CartPole-v1__linen__small__jit__1__1700000000")
    run.config["framework"], run.summary["status"], run.scalars["time/iteration"]
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pandas as pd

ROOT = Path(__file__).resolve().parent

# config.json keys that the analysis and the resume need: a run without them cannot be placed in the study
REQUIRED_CONFIG = ["env", "framework", "model_size", "compile", "seed", "sync_timing", "batch_size", "num_iterations"]


class RunError(Exception):
    """A run folder that cannot be used; the message says why."""


class Run(NamedTuple):
    path: Path
    config: dict
    summary: dict
    scalars: pd.DataFrame  # one row per logged step (column "step"), one column per scalar tag


def read_json(path: Path) -> dict:
    """A JSON object from a file; RunError (naming the file) when it is missing, unreadable or not an object."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise RunError(f"no {path.name}") from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RunError(f"unreadable {path.name} ({e})") from None
    if not isinstance(data, dict):
        raise RunError(f"{path.name} is not a JSON object")
    return data


def read_scalars(run_dir: Path) -> pd.DataFrame:
    """Every scalar of the one TensorBoard events file in run_dir: a row per step, a column per tag."""
    from tbparse import SummaryReader  # here: sweep.py's resume check must not pay for it when nothing is done

    run_dir = Path(run_dir)
    events = sorted(run_dir.glob("events.out.tfevents.*"))
    if len(events) > 1:  # two writers in one folder: neither series can be trusted
        raise RunError(f"{len(events)} TensorBoard events files in one run folder")
    if not events:
        raise RunError("no TensorBoard events file")
    try:
        scalars = SummaryReader(str(events[0]), pivot=True).scalars
    except Exception as e:  # a truncated or corrupt file
        raise RunError(f"unreadable TensorBoard events ({type(e).__name__}: {e})") from None
    if scalars.empty or "step" not in scalars:
        raise RunError("no TensorBoard scalars")
    return scalars.sort_values("step").reset_index(drop=True)


def run_dirs(roots) -> list[Path]:
    """Every run folder (one holding config.json) at any depth under the given folders, sorted per folder."""
    found = []
    for root in roots:
        found += sorted(path.parent for path in Path(root).rglob("config.json"))
    return found


def read_run(run_dir) -> Run:
    """config.json, summary.json and the scalars of a run folder, whatever its status; RunError when unreadable."""
    run_dir = Path(run_dir)
    config = read_json(run_dir / "config.json")
    summary = read_json(run_dir / "summary.json")
    return Run(run_dir, config, summary, read_scalars(run_dir))


def check_completed(run: Run) -> None:
    """RunError, saying why, unless the run completed and its files hold every iteration it claims."""
    status = run.summary.get("status")
    if status != "completed":
        raise RunError(f"status {status!r}")
    missing = [key for key in REQUIRED_CONFIG if key not in run.config]
    if missing:
        raise RunError(f"config.json lacks {', '.join(missing)}")
    if run.summary.get("total_s") is None:
        raise RunError("summary.json lacks total_s")
    iterations = run.summary.get("iterations_completed")
    if not isinstance(iterations, int) or iterations <= 0:
        raise RunError(f"completed with {iterations!r} iterations")
    if "time/iteration" not in run.scalars:
        raise RunError("no time/iteration scalar")
    logged = int(run.scalars["time/iteration"].notna().sum())
    if logged < iterations:
        raise RunError(f"events hold {logged} of {iterations} iterations")


def read_completed_run(run_dir) -> Run:
    """read_run, then check_completed: the run, or RunError saying why it cannot be used. A run that did not
    complete says so first (its events, cut short, are not read)."""
    status = read_json(Path(run_dir) / "summary.json").get("status")
    if status != "completed":
        raise RunError(f"status {status!r}")
    run = read_run(run_dir)
    check_completed(run)
    return run


def is_completed(run_dir) -> bool:
    """A usable completed run: what bench.sh skips on resume and what plot_results.py analyses."""
    try:
        read_completed_run(run_dir)
    except RunError:
        return False
    return True


def run_script(script: str, *args: str, log_dir, timeout: float = 600, env: dict | None = None):
    """Runs `python script args --log-dir log_dir` from the project root; returns the CompletedProcess."""
    cmd = [sys.executable, str(ROOT / script), *args, "--log-dir", str(log_dir)]
    # one torch thread unless set: OpenMP threads stall on the busy cores of a shared machine
    full_env = {"OMP_NUM_THREADS": "1", **os.environ, "WANDB_MODE": "disabled", **(env or {})}
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=full_env)

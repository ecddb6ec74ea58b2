"""Reads what a run of a ppo_*.py script wrote: config.json, summary.json and its TensorBoard scalars.

The one reader of run folders, used by plot_results.py, benchmarks/ and the tests.

    from runlog import read_run
    run = read_run("runs/CartPole-v1__linen__small__jit__1__1700000000")
    run.config["framework"], run.summary["status"], run.scalars["time/iteration"]
"""

import json
from pathlib import Path
from typing import NamedTuple

import pandas as pd
from tbparse import SummaryReader


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
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RunError(f"unreadable {path.name} ({e})") from None
    if not isinstance(data, dict):
        raise RunError(f"{path.name} is not a JSON object")
    return data


def read_scalars(run_dir: Path) -> pd.DataFrame:
    """Every scalar of the TensorBoard events directly in run_dir: a row per step, a column per tag."""
    scalars = SummaryReader(str(run_dir), pivot=True).scalars
    if scalars.empty:
        raise RunError("no TensorBoard scalars")
    return scalars.sort_values("step").reset_index(drop=True)


def read_run(run_dir) -> Run:
    run_dir = Path(run_dir)
    return Run(run_dir, read_json(run_dir / "config.json"), read_json(run_dir / "summary.json"), read_scalars(run_dir))

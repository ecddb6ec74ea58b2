"""A run axis is declared once (core/study_types.py's RUN_AXES): the study's reader, the sweep's
plan and the analysis read it from there. A made-up axis, --matmul-precision with an experiment of
two values, is added as a study would add one (an entry of RUN_AXES and the experiment's field),
and nothing else changes: its runs are planned with the flag, kept apart in the speedup tables, and
named in the report's titles."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from analysis_runs import write_run

from core import study

ROOT = Path(__file__).resolve().parents[1]
AXIS = "matmul_precision"
VALUES = ("default", "highest")
EXPERIMENT = f"""
[experiments.precision]
title = "float32 matmuls at two precisions"
envs = ["Acrobot-v1"]
sizes = ["small"]
compile = "default"
sync = false
precisions = {json.dumps(list(VALUES))}
"""
# the study's two lines of a new axis, made before anything reads RUN_AXES; then the program
# (the sweep's planner, or plot_results.py) runs with the arguments given
WITH_THE_AXIS = f"""
import dataclasses, os, runpy, sys
from core import study_types

axis = study_types.RunAxis(
    "{AXIS}", "precisions", "default", ("default", "high", "highest"), title=os.environ["TITLE"]
)
study_types.RUN_AXES = (*study_types.RUN_AXES, axis)
field = dataclasses.field(default=("default",))
study_types.Experiment = dataclasses.make_dataclass(
    "Experiment", [("precisions", tuple, field)], bases=(study_types.Experiment,), frozen=True
)
program, sys.argv = sys.argv[1], sys.argv[1:]
if program.endswith(".py"):
    runpy.run_path(program, run_name="__main__")
else:
    runpy.run_module(program, run_name="__main__", alter_sys=True)
"""


@pytest.fixture
def axis_study(tmp_path: Path) -> dict:
    """The environment of a process whose study has EXPERIMENT (through $BENCHBACK_STUDY)."""
    path = tmp_path / "study.toml"
    path.write_text(Path(study.DEFAULT_PATH).read_text() + EXPERIMENT)
    return {**os.environ, study.PATH_VARIABLE: str(path)}


def with_the_axis(env: dict, *args: str, title="at {} precision") -> subprocess.CompletedProcess:
    """The program of args, run with the axis; title: its tables' words ("": one table)."""
    env = {**env, "TITLE": title}
    command = [sys.executable, "-c", WITH_THE_AXIS, *args]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


# with tables of its own or not, each value is planned
@pytest.mark.parametrize("title", ["at {} precision", ""])
def test_the_sweep_plans_each_value_of_a_new_axis_with_its_flag(axis_study, title):
    args = ["sweep", "dry-run", "--experiments", "precision", "--seeds", "1"]
    done = with_the_axis(axis_study, *args, title=title)
    commands = [line for line in done.stdout.splitlines() if "ppo_" in line]
    frameworks = len(study.load().frameworks)
    assert len(commands) == 2 * frameworks
    flagged = [line for line in commands if "--matmul-precision highest" in line]
    # the default value names no flag, as a float32 run names no --dtype
    assert len(flagged) == frameworks
    assert not any("--matmul-precision default" in line for line in commands)


def test_the_analysis_keeps_a_new_axis_values_apart_and_names_them(axis_study, tmp_path):
    root = tmp_path / "runs"
    for value in VALUES:
        for seed in (1, 2, 3):
            for framework, mode in (("linen", "jit"), ("nnx", "cached_partial")):
                # highest: nnx twice as slow as linen; default: the runs' known durations
                factor = 2.0 if value == "highest" and framework == "nnx" else 1.0
                run = write_run(
                    root, "Acrobot-v1", framework, "small", mode, seed, False, factor=factor
                )
                config_path = run["run_dir"] / "config.json"
                config = json.loads(config_path.read_text())
                config[AXIS] = value
                config["command"] += ["--matmul-precision", value]
                config_path.write_text(json.dumps(config))
    out = tmp_path / "out"
    with_the_axis(axis_study, "plot_results.py", str(root), "--out", str(out), "--no-figures")
    with open(out / "speedups.csv", newline="") as f:
        rows = [row for row in csv.DictReader(f) if row["experiment"] == "precision"]
    assert {row[AXIS] for row in rows} == set(VALUES)
    # the steady state: each iteration's time x the factor (total_s adds a setup the same for all)
    steady = {row[AXIS]: row for row in rows if row["metric"] == "steady"}
    # a cell per value: each of its 3 linen runs against each of its 3 nnx runs, never against
    # the other value's (6 x 6 pooled)
    assert [int(steady[value]["n_pairs"]) for value in VALUES] == [9, 9]
    ratio = float(steady["highest"]["geomean"]) / float(steady["default"]["geomean"])
    assert ratio == pytest.approx(2.0) or ratio == pytest.approx(0.5)
    report = (out / "REPORT.md").read_text()
    assert "float32 matmuls at two precisions; at highest precision" in report
    assert "float32 matmuls at two precisions; at default precision" in report

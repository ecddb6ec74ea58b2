"""The compile time in the analysis: summary.json's compile_s (per jitted function) becomes columns
of summary.csv and runs.csv and REPORT.md's "Compile time" table, per tag, device, framework and
size; runs that did not record it (older editions, torch) leave no column and no section, so the
committed editions' tables stay as they were."""

import json
import re

import pandas as pd
from analysis_runs import write_run

import plot_results

MODES = {"linen": "jit", "nnx": "cached_partial"}


def with_compile_s(run: dict, compile_s) -> None:
    """Adds compile_s to the run's summary.json, as the JAX scripts write it."""
    path = run["run_dir"] / "summary.json"
    summary = json.loads(path.read_text())
    summary["compile_s"] = compile_s
    path.write_text(json.dumps(summary))


def plot(source: list[str], out) -> str:
    plot_results.main([*source, "--out", str(out), "--no-figures"])
    return (out / "REPORT.md").read_text()


def section(report: str, title: str) -> str:
    return report.split(f"## {title}\n")[1].split("\n## ")[0]


def row_of(table: str, framework: str) -> list[str]:
    (line,) = [line for line in table.splitlines() if re.search(rf"\|\s*{framework}\s*\|", line)]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_compile_seconds_are_tabled_per_framework_and_read_back_from_runs_csv(tmp_path):
    runs = tmp_path / "runs"
    for seed, (rollout, update) in enumerate([(2.0, 10.0), (4.0, 14.0)], 1):
        for framework, extra in (("linen", 0.0), ("nnx", 1.0)):
            run = write_run(runs, "CartPole-v1", framework, "small", MODES[framework], seed, False)
            parts = {"rollout": rollout, "update": update + extra, "other": 0.5}
            with_compile_s(run, parts)
    report = plot([str(runs)], tmp_path / "out")
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    medians = summary.groupby("framework")[["compile_rollout_s", "compile_update_s"]].median()
    assert medians.loc["linen"].tolist() == [3.0, 12.0]
    assert medians.loc["nnx"].tolist() == [3.0, 13.0]
    table = section(report, "Compile time")
    assert "compile: update (s)" in table and "iteration 0 (s)" in table
    assert {"2", "3", "12", "0.5"} <= set(row_of(table, "linen"))  # 2 runs, medians
    assert "13" in row_of(table, "nnx")
    # the compile columns go through runs.csv: the same tables again from it
    plot(["--csv", str(tmp_path / "out" / "runs.csv")], tmp_path / "again")
    for name in ("summary.csv", "runs.csv"):
        again = (tmp_path / "again" / name).read_bytes()
        assert again == (tmp_path / "out" / name).read_bytes(), name


def test_runs_without_compile_s_leave_no_column_and_no_section(tmp_path):
    runs = tmp_path / "runs"
    for framework in MODES:
        write_run(runs, "CartPole-v1", framework, "small", MODES[framework], 1, False)
    # a compile_s that is not seconds per function counts as none
    forged = write_run(runs, "CartPole-v1", "linen", "small", "jit", 2, False)
    with_compile_s(forged, {"rollout": "fast", "update": None, "other": True})
    report = plot([str(runs)], tmp_path / "out")
    assert "## Compile time" not in report
    for name in ("summary.csv", "runs.csv"):
        columns = pd.read_csv(tmp_path / "out" / name, nrows=0).columns
        assert not [c for c in columns if c.startswith("compile_")], name


def test_the_fast_paths_one_call_is_a_column_of_its_own(tmp_path):
    """A --no-sync-timing run compiles iterations() (rollout and update in one call): its seconds
    are a column beside the timed path's rollout and update."""
    runs = tmp_path / "runs"
    timed = write_run(runs, "CartPole-v1", "linen", "small", "jit", 1, True)
    with_compile_s(timed, {"rollout": 2.0, "update": 10.0, "other": 0.5})
    fast = write_run(runs, "CartPole-v1", "linen", "small", "jit", 2, False)
    with_compile_s(fast, {"iterations": 11.0, "other": 0.5})
    report = plot([str(runs)], tmp_path / "out")
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert sorted(summary["compile_iterations_s"].dropna().tolist()) == [11.0]
    table = section(report, "Compile time")
    assert "compile: iterations (s)" in table and "11" in row_of(table, "linen")

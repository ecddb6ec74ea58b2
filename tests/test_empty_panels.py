"""A panel or table without data says why: the analysis of runs too short for the steady window,
beside that of runs long enough for every window, whose figures show data in every panel.

Every figure is inspected as plot_results.main saves it (its artists, never its pixels): a panel
draws data (points, boxes, bars, a line through data) or holds words; REPORT.md says what is missing
where a table would be.
"""

from pathlib import Path

import pandas as pd
import pytest
from analysis_runs import BATCH, has_data, write_timing

import plot_results
from analysis import figures
from helpers import STUDY

# three envs: the speedup tables get intervals
ENVS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0"]
WINDOW = STUDY.steady
SHORT = WINDOW.first - 2  # iterations: the warm-up window has data, the steady one none
LONG = WINDOW.first + 3  # every window has data


def experiment_csv_run(
    env: str, framework: str, iterations: int, sync: bool, experiment: str
) -> list[dict]:
    """The rows of one run of bench.sh's folder of `experiment` in a runs.csv: every iteration takes
    0.1 s (0.04 s rollout and 0.05 s update when sync), each framework its own total."""
    total = iterations * (0.2 + 0.1 * list(STUDY.frameworks).index(framework))
    parts = {"time/rollout": 0.04, "time/update": 0.05} if sync else {}
    mode = STUDY.default_compile(framework)
    return [
        {
            "run": f"{env}__{framework}__small__{mode}__1__{experiment}__{sync}",
            "iteration": i,
            "step": (i + 1) * BATCH,
            "time/iteration": 0.1,
            **parts,
            "experiment_folder": experiment,
            "env": env,
            "framework": framework,
            "model_size": "small",
            "compile": mode,
            "seed": 1,
            "tag": "t",
            "sync_timing": sync,
            "num_iterations": iterations,
            "batch_size": BATCH,
            "hostname": "h",
            "command": f"ppo_{framework}.py --env {env} --exp-name {experiment} --sync {sync}",
            "start_time": f"2025-01-01T00:00:00 {env} {framework} {experiment} {sync}",
            "status": "completed",
            "iterations_completed": iterations,
            "total_s": total,
        }
        for i in range(iterations)
    ]


def write_runs(path: Path, iterations: int) -> Path:
    """exp1's runs (sync off, every framework, three envs) and exp7's sync-on runs of one env, as a
    runs.csv."""
    runs = [
        experiment_csv_run(env, fw, iterations, False, "exp1")
        for env in ENVS
        for fw in STUDY.frameworks
    ]
    runs += [experiment_csv_run(ENVS[0], fw, iterations, True, "exp7") for fw in STUDY.frameworks]
    pd.DataFrame([row for run in runs for row in run]).to_csv(path, index=False)
    return path


def words(ax) -> str:
    """A panel's words, on one line (empty panels wrap theirs)."""
    return " ".join(" ".join(text.get_text().split()) for text in ax.texts)


def blank_panels(fig) -> list[str]:
    """The panels of a figure (their titles) that show neither data nor words saying why."""
    return [ax.get_title() for ax in fig.axes if not has_data(ax) and not ax.texts]


def figures_and_report(tmp_path: Path, iterations: int) -> tuple[dict, str]:
    """plot_results.main of the runs: the figures it saved (file name -> figure) and REPORT.md."""
    saved, save = {}, figures.save_figure

    def keep(fig, path):
        saved[Path(path).name] = fig
        save(fig, path)

    csv, out = write_runs(tmp_path / "runs.csv", iterations), tmp_path / "out"
    timing = write_timing(tmp_path / "timing.json")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(figures, "save_figure", keep)
        plot_results.main(["--csv", str(csv), "--out", str(out), "--env-timing", str(timing)])
    return saved, (out / "REPORT.md").read_text()


@pytest.fixture(scope="module")
def short(tmp_path_factory) -> tuple[dict, str]:
    """The analysis of runs that end before the steady window."""
    return figures_and_report(tmp_path_factory.mktemp("short"), SHORT)


@pytest.fixture(scope="module")
def long(tmp_path_factory) -> tuple[dict, str]:
    """The analysis of runs long enough for every window."""
    return figures_and_report(tmp_path_factory.mktemp("long"), LONG)


def too_short() -> str:
    return (
        f"the {WINDOW.name} window ({WINDOW.label}) needs runs of {WINDOW.first + 1} or more "
        f"iterations; these have {SHORT}"
    )


def test_runs_too_short_for_the_steady_window_say_so_in_the_figures(short):
    saved, report = short
    assert saved, "no figure drawn"
    for name, fig in saved.items():
        assert blank_panels(fig) == [], name
    windows = [words(ax) for ax in saved["overhead_windows.png"].axes]
    note = f"no run reaches iteration {WINDOW.first} ({SHORT} iterations)"
    assert all(note in text for text in windows), windows  # at the steady window, top and bottom
    costs = {ax.get_title(): words(ax) for ax in saved["speedup_vs_env_cost.png"].axes}
    assert too_short() in costs["steady, small model"] and costs["total, small model"] == ""
    assert "steady_speedups.png" not in saved and "exp7_backends.png" not in saved
    assert f"steady_speedups.png skipped: {too_short()}" in report
    assert f"exp7_backends.png skipped: {too_short()}" in report


def test_runs_too_short_for_the_steady_window_say_so_in_the_report(short):
    """REPORT.md says what is missing: the steady window, not the runs (exp7 has sync-on runs, 4 of
    them)."""
    _, report = short
    assert f"_No steady speedups of exp1: {too_short()}._" in report
    assert f"_No time for {WINDOW.label}: {too_short()}._" in report
    exp7 = report.split("## Rollout and update per framework (exp7)")[1].split("\n## ")[0]
    runs = len(STUDY.frameworks)
    assert f"_No rollout and update times of exp7's {runs} sync-on runs" in exp7
    assert too_short() in exp7 and "No sync-on runs" not in exp7


def test_runs_long_enough_for_every_window_show_data_in_every_panel(long):
    saved, report = long
    for name, fig in saved.items():
        assert [ax.get_title() for ax in fig.axes if not has_data(ax)] == [], name
    assert {"overhead_windows.png", "steady_speedups.png", "exp7_backends.png"} <= set(saved)
    assert "needs runs of" not in report
    exp7 = report.split("## Rollout and update per framework (exp7)")[1].split("\n## ")[0]
    assert "0.090 (0.040 + 0.050)" in exp7  # each framework's rollout + update

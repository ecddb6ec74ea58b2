"""The learning analysis (analysis/learning.py): smoothed returns, the time to the reference's
return, runs that never reach it kept as such, the per-framework table and the time-to-return
speedups, on runs made up here so that every number is known."""

import math
import re

import numpy as np
import pandas as pd
import pytest
from learning_runs import BATCH, ENV, EXP, made_up_runs, run_rows

from analysis import learning
from helpers import STUDY

# a learning experiment like exp9 with a configuration of 12 iterations, for a sweep of real runs
SHORT = "short9"
TINY_LEARNING = """
[experiments.EXP]
title = "learning, short: CleanRL's reference with a configuration of 12 iterations"
reference = "CleanRL's PPO benchmark"
sizes = ["small"]
compile = "default"
sync = false
figures = ["learning"]

[experiments.EXP.configs.ppo]
title = "12 iterations of 4 envs x 16 steps"
args = ["--num-envs", "4", "--num-steps", "16", "--num-iterations", "12", "--update-epochs", "1",
        "--num-minibatches", "1"]
returns = { "CartPole-v1" = [490.04, 6.12] }
"""


def test_the_smoothed_return_is_the_mean_of_the_last_ten_iterations_with_a_return():
    rows = run_rows("r", "linen", 1, [np.nan, 10.0, np.nan] + [20.0] * 12, 1.0)
    curve = learning.smoothed_returns(rows)
    assert (
        math.isnan(curve["smoothed"][0])
        and curve["smoothed"][1] == 10.0
        and curve["smoothed"][2] == 10.0
    )
    assert curve["smoothed"][3] == 15.0  # the NaN iteration does not count
    assert curve["smoothed"].iloc[-1] == 20.0


def test_the_time_to_a_return_is_the_elapsed_time_of_the_first_iteration_that_reaches_it():
    runs, summary, masks = made_up_runs()
    learned = learning.learning_runs(runs, summary, masks, STUDY)[0]
    linen = learned[learned["framework"] == "linen"].iloc[0]
    # the reference (490.04): all 10 of the last iterations at 500, the 20th (index 19): 10 + 20 x 1
    # s
    assert linen["s_to_reference"] == 30.0 and linen["steps_to_reference"] == 20 * BATCH
    # within 10 % (441.04): 9 of the last 10 at 500 (4,600 / 10 = 460), the 19th
    assert linen["s_to_within_10pct"] == 29.0
    assert (linen["reference_mean"], linen["reference_std"]) == (490.04, 6.12)
    stuck = learned[(learned["framework"] == "torch") & (learned["seed"] == 1)].iloc[0]
    assert math.isnan(stuck["s_to_reference"]) and math.isnan(stuck["steps_to_within_10pct"])
    assert len(learned) == 6  # the run that never reached it is kept


def test_the_curves_hold_every_iteration_of_every_run():
    runs, summary, masks = made_up_runs()
    _, curves = learning.learning_runs(runs, summary, masks, STUDY)
    assert len(curves) == 6 * 20 and set(curves["framework"]) == {"linen", "torch"}
    linen = curves[(curves["framework"] == "linen") & (curves["seed"] == 2)]
    assert (
        list(linen["step"]) == [(i + 1) * BATCH for i in range(20)]
        and linen["smoothed"].iloc[-1] == 500.0
    )


@pytest.mark.parametrize("target", ["reference", "within_10pct"])
def test_a_negative_reference_gets_a_lower_bar_within_10_percent(target):
    lower = learning.target_return(-86.36, target)
    assert lower == pytest.approx(-86.36 if target == "reference" else -94.996)
    assert learning.target_return(1442.64, "within_10pct") == pytest.approx(1298.376)


def test_the_table_counts_the_runs_that_reached_it_and_takes_their_median():
    runs, summary, masks = made_up_runs(never_reached=1)
    table = learning.learning_table(learning.learning_runs(runs, summary, masks, STUDY)[0], STUDY)
    assert list(table["framework"]) == ["linen", "torch"]  # the study's order
    linen, torch = (table[table["framework"] == f].iloc[0] for f in ("linen", "torch"))
    assert (linen["reached_reference"], torch["reached_reference"]) == (3, 2)
    assert linen["median_s_to_reference"] == 30.0 and torch["median_s_to_reference"] == 70.0
    # torch's mean: (100 + 500 + 500) / 3
    assert linen["meets_reference"] and not torch["meets_reference"]
    assert torch["final_mean"] == pytest.approx(1100 / 3) and torch["final_std"] == pytest.approx(
        230.94, abs=0.01
    )


def test_a_median_not_reached_by_most_seeds_is_nan():
    runs, summary, masks = made_up_runs(never_reached=2)
    table = learning.learning_table(learning.learning_runs(runs, summary, masks, STUDY)[0], STUDY)
    torch = table[table["framework"] == "torch"].iloc[0]
    assert torch["reached_reference"] == 1 and math.isnan(torch["median_s_to_reference"])


def test_the_speedups_pair_only_runs_that_both_reached_the_target():
    runs, summary, masks = made_up_runs(never_reached=1)
    speedups = learning.learning_speedups(
        learning.learning_runs(runs, summary, masks, STUDY)[0], STUDY
    )
    cell = speedups[
        (speedups["target"] == "reference") & (speedups["pair"] == "torch->linen")
    ].iloc[0]
    # 3 linen runs x the 2 torch runs that reached it
    assert cell["n_pairs"] == 3 * 2 and cell["n_clusters"] == 1
    # one env: no interval
    assert cell["geomean"] == pytest.approx(70.0 / 30.0) and math.isnan(cell["ci_low"])


def test_the_figure_draws_each_framework_in_steps_and_seconds_beside_the_reference(tmp_path):
    from analysis.figures import learning_figure
    from analysis.plotting import plt

    runs, summary, masks = made_up_runs()
    _, curves = learning.learning_runs(runs, summary, masks, STUDY)
    fig = learning_figure(curves, EXP, STUDY)
    steps, seconds = fig.axes[:2]
    for ax in (steps, seconds):
        labels = [line.get_label() for line in ax.get_lines()]
        assert labels == ["linen (3 seeds)", "torch (3 seeds)", "reference (mean ± std)"]
        assert ax.get_lines()[-1].get_ydata()[0] == 490.04
    assert list(steps.get_lines()[0].get_xdata()) == [(i + 1) * BATCH for i in range(20)]
    # torch's mean elapsed at its last iteration
    assert seconds.get_lines()[1].get_xdata()[-1] == 10.0 + 20 * 3.0
    fig.savefig(tmp_path / "learning.png")
    plt.close(fig)
    empty = learning_figure(curves.iloc[:0], EXP, STUDY)  # not drawn: the words say why
    assert isinstance(empty, str) and f"no run of {EXP}" in empty


def test_a_learning_experiment_holds_only_the_runs_of_its_folder():
    """A CartPole-v1 small sync-off run in its default mode matches exp9's matrix, but not its
    configuration's flags: it joins exp9 only from bench.sh's exp9 folder."""
    from analysis.loading import in_experiment

    run = dict(
        env=ENV,
        model_size="small",
        framework="linen",
        compile="jit",
        sync_timing=False,
        dtype="float32",
    )
    assert not in_experiment({**run, "experiment_folder": ""}, STUDY.experiments[EXP], STUDY)
    assert in_experiment({**run, "experiment_folder": EXP}, STUDY.experiments[EXP], STUDY)
    assert in_experiment({**run, "experiment_folder": ""}, STUDY.experiments["exp1"], STUDY)


@pytest.mark.slow
def test_a_learning_sweep_is_analysed_into_its_tables_report_and_readme_block(
    tmp_path, monkeypatch
):
    """Real runs of a learning experiment of two frameworks (CartPole-v1, a configuration of 12
    iterations, 2 seeds) through bench.sh, then plot_results: learning.csv and
    learning_speedups.csv, REPORT.md's section, the figure, and the README's learning block replaced
    while its speedup block (no exp1, exp6 or exp7 runs here) is left as it was. The experiment is
    exp9 with a short configuration (a study of its own): exp9's own would take 976 iterations, and
    its runs count only with it."""
    from sweep_runs import bench, other_study

    import plot_results
    from analysis.markdown import LEARNING_MARKERS
    from analysis.report import README_MARKERS

    short = TINY_LEARNING.replace("EXP", SHORT)
    env = other_study(tmp_path, short)
    monkeypatch.setenv(*next(iter(env.items())))
    log_dir = tmp_path / "runs"
    sweep = [
        "--experiments",
        SHORT,
        "--envs",
        ENV,
        "--frameworks",
        "linen,nnx",
        "--sizes",
        "small",
        "--seeds",
        "2",
    ]
    proc = bench(*sweep, "--no-env-timing", "--log-dir", str(log_dir), timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    readme = tmp_path / "README.md"
    speedups_block = f"{README_MARKERS[0]}\nthe speedups of an earlier edition\n{README_MARKERS[1]}"
    readme.write_text(
        f"# r\n{speedups_block}\n{LEARNING_MARKERS[0]}\nnot run yet\n{LEARNING_MARKERS[1]}\n"
    )
    out = tmp_path / "out"
    plot_results.main([str(log_dir), "--out", str(out), "--update-readme", str(readme)])
    table = pd.read_csv(out / "learning.csv")
    assert list(table["framework"]) == ["linen", "nnx"] and set(table["n_runs"]) == {2}
    assert (table["reference_mean"] == 490.04).all() and (table["env"] == ENV).all()
    assert (out / f"{SHORT}_learning.png").exists()
    report = (out / "REPORT.md").read_text()
    assert "## Learning against the reference" in report and "490.0 ± 6.1" in report
    text = readme.read_text()
    assert speedups_block in text and "not run yet" not in text
    block = text.split(LEARNING_MARKERS[0])[1].split(LEARNING_MARKERS[1])[0]
    assert "| CartPole-v1 | 490.0 ± 6.1 |" in block and re.search(r" \([012]/2\)", block)

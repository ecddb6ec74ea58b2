"""plot_results.py on synthetic run folders with known durations.

The runs are written like the ppo_*.py scripts write them (config.json, summary.json, tensorboardX
events at step (i + 1) * batch_size), with durations chosen so that every speedup is known in
advance.
"""

import dataclasses
import importlib
import itertools
import json
import math
import re
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from analysis_runs import (
    CONTINUOUS_COST,
    CONTINUOUS_FACTOR,
    DEFAULT_MODES,
    DTYPE_FACTOR,
    ENV_FACTOR,
    ENVPOOL_COST,
    ENVPOOL_FACTOR,
    EXPENSIVE_COST,
    EXPENSIVE_FACTOR,
    MUJOCO_FACTOR,
    SEED_FACTOR,
    TAG_FACTOR,
    analysis_of,
    own_figure,
    write_run,
    write_runs_csv,
    write_timing,
)

import plot_results
from analysis import figures, plotting, speedup_figures, stats, time_figures
from analysis.common import DTYPE_COLUMNS, ENV_COST_COLUMNS, SPEEDUP_COLUMNS
from analysis.loading import read_previous
from analysis.markdown import speedup_markdown
from analysis.report import README_MARKERS, readme_markdown
from core import study
from helpers import ROOT, STUDY

MODES = [(name, mode) for name, framework in STUDY.frameworks.items() for mode in framework.compile]
# The synthetic study has no learning runs (exp9 holds only the runs of its bench.sh folder):
# tests/test_learning.py draws its figure; nor runs of an experiment with args (exp11's batch, only
# from its folder): tests/test_agents_analysis.py draws the agents figure
LEARNING = [name for name, exp in STUDY.experiments.items() if exp.configs]
FOLDER_ONLY = [name for name, exp in STUDY.experiments.items() if exp.configs or exp.args]
ALL_FIGURES = figures.figure_files(STUDY) - {
    figures.KINDS[kind].file.format(experiment=owner)
    for kind, owner in figures.listed_figures(STUDY)
    if owner in FOLDER_ONLY
}


def write_study(root: Path) -> list[dict]:
    """exp1 (linux) + a small exp4 repeat (mac, old-style configs) + exp2 + exp3 + exp10's bfloat16
    runs (small and large; exp3's are its float32 runs) + exp5 and exp6 (small, sync off and on) +
    exp7's envpool runs (exp1's and exp2's gymnax runs of its envs are its others) and exp8 (small,
    sync off and on), and three runs that must be skipped."""
    runs = []
    for env, size, (framework, mode), seed in itertools.product(
        ENV_FACTOR, ["small", "large"], DEFAULT_MODES, SEED_FACTOR
    ):
        runs.append(write_run(root, env, framework, size, mode, seed, sync=False))
    for (framework, mode), seed in itertools.product(DEFAULT_MODES, SEED_FACTOR):
        runs.append(
            write_run(
                root,
                "CartPole-v1",
                framework,
                "small",
                mode,
                seed,
                sync=False,
                tag="mac",
                old_config=True,
            )
        )
    for env, (framework, mode) in itertools.product(ENV_FACTOR, MODES):
        runs.append(write_run(root, env, framework, "small", mode, 1, sync=True))
    for framework, mode in MODES:
        runs.append(write_run(root, "Acrobot-v1", framework, "large", mode, 1, sync=True))
    # exp10's bfloat16 runs: beside the float32 runs of exp3 (its default modes)
    for size, (framework, mode) in itertools.product(["small", "large"], DEFAULT_MODES):
        runs.append(
            write_run(root, "Acrobot-v1", framework, size, mode, 1, sync=True, dtype="bfloat16")
        )
    for env, (framework, mode), sync in itertools.product(
        EXPENSIVE_FACTOR, DEFAULT_MODES, (False, True)
    ):
        runs.append(write_run(root, env, framework, "small", mode, 1, sync=sync))
    for env, (framework, mode), sync in itertools.product(
        CONTINUOUS_FACTOR, DEFAULT_MODES, (False, True)
    ):
        runs.append(write_run(root, env, framework, "small", mode, 1, sync=sync))
    for env, (framework, mode), sync in itertools.product(
        [*ENV_FACTOR, *MUJOCO_FACTOR], DEFAULT_MODES, (False, True)
    ):
        runs.append(write_run(root, env, framework, "small", mode, 1, sync=sync, backend="envpool"))
    write_run(
        root,
        "CartPole-v1",
        "linen",
        "small",
        "jit",
        7,
        sync=False,
        status="interrupted",
        iterations=5,
    )
    write_run(root, "CartPole-v1", "nnx", "small", "cached_partial", 8, sync=False, events=False)
    corrupt = write_run(root, "CartPole-v1", "torch", "small", "compile", 9, sync=False)
    (corrupt["run_dir"] / "config.json").write_text("{not json")
    return runs


def experiments_of(run: dict) -> set[str]:
    """The study's experiments of a synthetic run, by their definition (runs written outside
    bench.sh's exp folders: never in an experiment whose configs or args are part of its matrix)."""
    framework = STUDY.frameworks[run["framework"]]
    return {
        name
        for name, exp in STUDY.experiments.items()
        if not (exp.configs or exp.args)
        and run["sync_timing"] in exp.syncs
        and run["dtype"] in exp.dtypes
        and run["label"] in exp.envs
        and run["model_size"] in exp.sizes
        and run["compile"] in exp.compile_modes(framework)
    }


def is_default(run) -> bool:
    return run["compile"] == STUDY.default_compile(run["framework"])


def expected_speedups(runs: list[dict], metric: str, experiments: list[str], sync: bool) -> dict:
    """(experiment, backend, dtype, size, pair) -> (geomean, median, n pairs, n envs) by plain math
    over every pair of default-compile runs of one experiment with the same env, size, data type and
    tag, under the metric's sync setting, the envs of one backend pooled. Each pair of runs is
    looked at once and put in its cells (not every pair of runs tried again for every cell)."""
    cells = {}
    for ra, rb in itertools.product(runs, runs):
        backend = study.split_label(ra["label"])[1]
        if not (
            (ra["framework"], rb["framework"]) in STUDY.pairs
            and backend in study.BACKENDS
            and is_default(ra)
            and is_default(rb)
            and ra["sync_timing"] == rb["sync_timing"] == sync
            and ra["model_size"] == rb["model_size"]
            and ra["model_size"] in STUDY.sizes
            and ra["dtype"] == rb["dtype"]
            and ra["dtype"] in study.DTYPES
            # an env on envpool is another env
            and (ra["label"], ra["tag"]) == (rb["label"], rb["tag"])
        ):
            continue
        pair = f"{ra['framework']}->{rb['framework']}"
        for experiment in experiments:
            if experiment in experiments_of(ra) and experiment in experiments_of(rb):
                key = (experiment, backend, ra["dtype"], ra["model_size"], pair)
                ratios, envs = cells.setdefault(key, ([], set()))
                ratios.append(ra[metric] / rb[metric])
                envs.add((ra["label"], ra["tag"]))
    expected = {}
    for cell, (ratios, envs) in cells.items():
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        expected[cell] = (geomean, statistics.median(ratios), len(ratios), len(envs))
    return expected


# the experiments of the README block that study_out's study shows (the committed one: exp1 alone)
BLOCK_TABLES = ("exp1", "exp6", "exp7")


def with_block_tables(text: str) -> str:
    """A study.toml's text whose README block shows BLOCK_TABLES."""
    tables = ", ".join(f'"{exp}"' for exp in BLOCK_TABLES)
    return re.sub(r"^tables = .*$", f"tables = [{tables}]", text, count=1, flags=re.M)


# the tests of study_out: its analysis draws every figure of the synthetic study (~60 s)
STUDY_OUT = pytest.mark.slow


@pytest.fixture(scope="module")
def study_out(tmp_path_factory):
    """The synthetic study, analysed once: (its runs, the output folder)."""
    root = tmp_path_factory.mktemp("study")
    runs = write_study(root / "runs")
    out = root / "out"
    # the committed study's README block holds exp1 alone: here, a block of several experiments
    study_file = root / "study.toml"
    study_file.write_text(with_block_tables((ROOT / "study.toml").read_text()))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(study.PATH_VARIABLE, str(study_file))
        plot_results.main(
            [
                str(root / "runs"),
                "--out",
                str(out),
                "--env-timing",
                str(write_timing(root / "timing.json")),
                "--readme-block",
                str(root / "block.md"),
            ]
        )
    return runs, out


@STUDY_OUT
def test_speedups_match_hand_computed_values(study_out):
    runs, out = study_out
    speedups = pd.read_csv(out / "speedups.csv")
    assert list(speedups.columns) == [
        "metric",
        "experiment",
        "backend",
        "dtype",
        "size",
        "pair",
        "geomean",
        "median",
        "ci_low",
        "ci_high",
        "n_pairs",
        "n_clusters",
    ]
    # exp1, exp5-exp8: a learning experiment holds only the runs of its folder, none here
    sync_off = [
        name
        for name, exp in STUDY.experiments.items()
        if False in exp.syncs and name not in LEARNING
    ]
    # exp2, exp3, exp5-exp8, exp10
    sync_on = [name for name, exp in STUDY.experiments.items() if True in exp.syncs]
    selections = {
        "total": ("total_s", sync_off, False),
        "steady": ("steady", sync_off, False),
        "rollout": ("rollout8", sync_on, True),
        "update": ("update8", sync_on, True),
    }
    for metric, (key, experiments, sync) in selections.items():
        expected = expected_speedups(runs, key, experiments, sync)
        got = speedups[speedups["metric"] == metric].set_index(
            ["experiment", "backend", "dtype", "size", "pair"]
        )
        assert set(got.index) == set(expected), metric
        for cell, (geomean, median, n, envs) in expected.items():
            row = got.loc[cell]
            assert row["geomean"] == pytest.approx(geomean, rel=1e-5), (metric, cell)
            assert row["median"] == pytest.approx(median, rel=1e-5), (metric, cell)
            assert (row["n_pairs"], row["n_clusters"]) == (n, envs), (metric, cell)
            if envs < 3:
                assert math.isnan(row["ci_low"]) and math.isnan(row["ci_high"]), (metric, cell)
            else:
                assert row["ci_low"] <= row["geomean"] * (1 + 1e-9) and row["geomean"] <= row[
                    "ci_high"
                ] * (1 + 1e-9)
    # The same numbers by hand: seeds 1.0/1.2 give ratios 1.25 x {1, 1.2, 1/1.2, 1} -> geomean and
    # median 1.25
    table = speedups.set_index(["metric", "experiment", "backend", "dtype", "size", "pair"])
    steady = table.loc[("steady", "exp1", "gymnax", "float32", "large", "nnx->linen")]
    assert steady["geomean"] == pytest.approx(1.25, rel=1e-5) and steady["median"] == pytest.approx(
        1.25, rel=1e-5
    )
    assert (steady["n_pairs"], steady["n_clusters"]) == (3 * 4, 3)  # 3 envs x 2 x 2 seeds
    assert steady["ci_low"] < 1.25 < steady["ci_high"]  # the seeds differ within each env
    assert table.loc[
        ("rollout", "exp3", "gymnax", "float32", "large", "torch->linen"), "geomean"
    ] == pytest.approx(5.0, rel=1e-5)
    # rollout/update per experiment: exp2 = the three envs' small runs, exp3 = Acrobot-v1's
    assert (
        table.loc[("rollout", "exp2", "gymnax", "float32", "small", "nnx->linen"), "n_pairs"] == 3
    )
    assert (
        table.loc[("rollout", "exp3", "gymnax", "float32", "small", "nnx->linen"), "n_pairs"] == 1
    )
    assert ("rollout", "exp2", "gymnax", "float32", "large", "nnx->linen") not in table.index
    # exp10: the framework pairs per data type; in bfloat16 torch is 4 times linen's speed less than
    # in float32
    for dtype, torch_linen in {"float32": 5.0, "bfloat16": 1.25}.items():
        cell = table.loc[("update", "exp10", "gymnax", dtype, "large", "torch->linen")]
        assert cell["geomean"] == pytest.approx(torch_linen, rel=1e-5) and cell["n_pairs"] == 1
    # exp3 (float32 only) never takes exp10's bfloat16 runs
    assert not (
        speedups["experiment"].isin(["exp3", "exp2"]) & (speedups["dtype"] != "float32")
    ).any()
    # exp5, exp6: the sync-off runs give the totals, the sync-on runs the rollout/update split, each
    # pair of runs once
    for (experiment, envs), metric in itertools.product(
        {"exp5": EXPENSIVE_FACTOR, "exp6": CONTINUOUS_FACTOR}.items(),
        ("total", "steady", "rollout", "update"),
    ):
        cell = table.loc[(metric, experiment, "gymnax", "float32", "small", "torch->linen")]
        assert cell["n_pairs"] == cell["n_clusters"] == len(envs)
        if metric != "total":  # total_s adds the same setup time to both
            assert cell["geomean"] == pytest.approx(5.0, rel=1e-5)
    # exp7: a cell per backend (torch -> linen 5 on gymnax, 2.5 on envpool): 3 envs on gymnax under
    # tag linux (2 x 2 seeds each) and CartPole-v1 under tag mac (exp1's runs of its envs and
    # sizes); 3 envs on envpool
    gymnax, envpool = (
        table.loc[("steady", "exp7", backend, "float32", "small", "torch->linen")]
        for backend in study.BACKENDS
    )
    assert (gymnax["n_pairs"], gymnax["n_clusters"]) == (3 * 4 + 4, 3 + 1)
    assert (envpool["n_pairs"], envpool["n_clusters"]) == (3, 3)
    assert gymnax["geomean"] == pytest.approx(5.0, rel=1e-5) and envpool[
        "geomean"
    ] == pytest.approx(2.5, rel=1e-5)
    # MuJoCo on envpool only
    exp8 = table.loc[("rollout", "exp8", "envpool", "float32", "small", "torch->linen")]
    assert exp8["geomean"] == pytest.approx(2.5, rel=1e-5) and exp8["n_clusters"] == len(
        MUJOCO_FACTOR
    )


@STUDY_OUT
def test_summary_windows_and_experiments(study_out):
    runs, out = study_out
    summary = pd.read_csv(out / "summary.csv").set_index("run")
    assert len(summary) == len(runs)
    one = runs[0]  # exp1, sync off
    row = summary[
        (summary["env"] == one["env"])
        & (summary["framework"] == one["framework"])
        & (summary["model_size"] == one["model_size"])
        & (summary["seed"] == one["seed"])
        & (summary["tag"] == one["tag"])
        & ~summary["sync_timing"]
    ].iloc[0]
    assert row["iter0_s"] == pytest.approx(one["iteration"][0], rel=1e-6)
    assert row["iters1_7_s"] == pytest.approx(statistics.mean(one["iteration"][1:8]), rel=1e-6)
    assert row["iters8plus_s"] == pytest.approx(one["steady"], rel=1e-6)
    assert math.isnan(row["rollout8plus_s"])  # rollout/update timers are not exact without sync
    # exp7: CartPole-v1 on gymnax
    assert row["env_cost"] == 1.0 and row["experiments"] == "exp1 exp7 exp4"
    acrobot_small = summary[
        (summary["env"] == "Acrobot-v1")
        & (summary["model_size"] == "small")
        & summary["sync_timing"]
    ]
    # a run can be in several (exp7 and exp10: default modes); a bfloat16 run in exp10 alone
    assert set(acrobot_small["experiments"]) == {"exp2 exp3", "exp2 exp3 exp7 exp10", "exp10"}
    assert set(acrobot_small.loc[acrobot_small["dtype"] == "bfloat16", "experiments"]) == {"exp10"}
    # Acrobot large: exp3's other modes; its default ones are exp10's float32 runs too
    assert (summary["experiments"] == "exp3").sum() == len(MODES) - len(DEFAULT_MODES)
    assert (summary["experiments"] == "exp3 exp10").sum() == len(DEFAULT_MODES)


@STUDY_OUT
def test_device_name_command_and_import_time(study_out):
    """New runs record the resolved device as device_name (device is torch's flag); old runs only
    have device."""
    runs, out = study_out
    summary = pd.read_csv(out / "summary.csv")
    assert "device" not in summary
    assert set(summary.loc[summary["tag"] == "linux", "device_name"]) == {"Test GPU 9000"}
    assert set(summary.loc[summary["tag"] == "mac", "device_name"]) == {"cpu"}
    new = summary[summary["tag"] == "linux"]
    assert (
        set(new["import_s"]) == {0.7}
        and summary.loc[summary["tag"] == "mac", "import_s"].isna().all()
    )
    # argv as a command line
    assert all(command.endswith("--exp-name 'two words'") for command in new["command"])
    machines = (out / "REPORT.md").read_text().split("## Speedups")[0]
    assert "Test GPU 9000" in machines and "| cpu " in machines and "auto" not in machines


@STUDY_OUT
def test_broken_runs_are_skipped_and_counted(study_out):
    runs, out = study_out
    report = (out / "REPORT.md").read_text()
    assert "3 skipped" in report
    for reason in ("status 'interrupted'", "no TensorBoard events file", "unreadable config.json"):
        assert reason in report
    assert pd.read_csv(out / "runs.csv")["run"].nunique() == len(runs)


@STUDY_OUT
def test_every_figure_and_the_report(study_out):
    runs, out = study_out
    assert ALL_FIGURES <= {p.name for p in out.glob("*.png")}
    report = (out / "REPORT.md").read_text()
    for name in ALL_FIGURES:
        assert f"]({name})" in report
    assert "linux-host" in report and "mac-host" in report and "jax 0.6.0" in report
    block = (out.parent / "block.md").read_text()
    # the README block, between its markers (issue 79): a short intro, then the total and steady
    # tables
    inner = block.split(f"{README_MARKERS[0]}\n", 1)[1].split(README_MARKERS[1])[0]
    headline = inner.split("\n\n", 1)[1]
    assert "nnx → linen" in block and all(part in report for part in headline.split("\n\n"))
    # REPORT.md has every experiment
    assert "**Rollout" not in block and "(exp5: " not in block and "(exp5: " in report
    # study.tables, in its order
    titles = [(metric, exp) for metric, exp, _ in readme_tables(block)]
    assert titles == [
        (metric, exp)
        for exp in BLOCK_TABLES
        for metric in ("Total time", "Steady state")
        for _ in STUDY.experiments[exp].backends  # exp7: a table per backend
    ]
    assert (
        "(exp7: CPU envs" in block
        and "its envs on gymnax" in block
        and "its envs on envpool" in block
    )


def readme_tables(block: str) -> list[tuple[str, str, str]]:
    """(metric, experiment, the markdown table) of each table of a README block, in its order."""
    pattern = (
        r"^\*\*(Total time|Steady state)[^\n]*?\((exp\d):[^\n]*\*\*\n\n((?:\|[^\n]*(?:\n|$))+)"
    )
    return re.findall(pattern, block, re.M)


@STUDY_OUT
def test_the_backends_figure_stacks_rollout_and_update_per_framework_and_backend(study_out):
    """exp7_backends.png, a panel per env and size: per framework a bar on gymnax and one on envpool
    (sync on, default modes), rollout under update, and over the envpool bar its rollout over the
    gymnax one's (3x for the JAX frameworks, 1.5x for torch here); exp8's MuJoCo envs on envpool
    alone, with no ratio. exp7's tables are in the README block."""
    runs, out = study_out
    assert {"exp7_backends.png", "exp8_backends.png"} <= {p.name for p in out.glob("*.png")}
    an = analysis_of(out / "runs.csv", out.parent / "timing.json")
    fig = time_figures.fig_backends(an, "exp7")
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    assert set(panels) == {f"{env}, small model" for env in ENV_FACTOR}
    ax = panels["Acrobot-v1, small model"]
    for backend in ("gymnax", "envpool"):
        mine = [
            r
            for r in runs
            if r["label"] == study.env_label("Acrobot-v1", backend)
            and r["model_size"] == "small"
            and r["sync_timing"]
            and is_default(r)
        ]
        for part in ("rollout", "update"):
            bars = [
                patch.get_height() for patch in ax.patches if patch.get_gid() == f"{backend} {part}"
            ]
            expected = [
                next(r[f"{part}8"] for r in mine if r["framework"] == fw) for fw in STUDY.frameworks
            ]
            assert bars == pytest.approx(expected, rel=1e-6), (backend, part)
    ratios = [f"×{ENVPOOL_FACTOR[fw]:.1f}" for fw in STUDY.frameworks]
    assert [text.get_text() for text in ax.texts] == ratios
    figures.plt.close(fig)
    mujoco = time_figures.fig_backends(an, "exp8")
    gids = {patch.get_gid() for ax in mujoco.axes for patch in ax.patches if patch.get_gid()}
    assert gids == {"envpool rollout", "envpool update"} and not any(ax.texts for ax in mujoco.axes)
    figures.plt.close(mujoco)
    tables = {exp for _, exp, _ in readme_tables((out.parent / "block.md").read_text())}
    assert "exp7" in tables


@STUDY_OUT
def test_the_data_type_experiment_compares_each_framework_across_types(study_out):
    """exp10: dtype_speedups.csv has each framework's bfloat16 -> float32 speedup (its time in
    bfloat16 / in float32, DTYPE_FACTOR by construction) per sync-on metric and size; REPORT.md
    tables both times and those speedups, and says which CPU had native bfloat16; exp10_dtypes.png
    puts a bar per data type, rollout under update, and over the bfloat16 bar its whole time over
    the float32 one's. The runs.csv keeps each run's dtype."""
    runs, out = study_out
    table = pd.read_csv(out / "dtype_speedups.csv")
    assert list(table.columns) == DTYPE_COLUMNS
    assert set(table["experiment"]) == {"exp10"} and set(table["pair"]) == {"bfloat16->float32"}
    cells = table.set_index(["metric", "size", "framework"])
    expected = itertools.product(("rollout", "update"), ("small", "large"), STUDY.frameworks)
    assert set(cells.index) == set(expected)  # sync on: no total or steady
    for (metric, size, framework), row in cells.iterrows():
        assert row["geomean"] == pytest.approx(DTYPE_FACTOR[framework], rel=1e-5)
        assert (row["n_pairs"], row["n_clusters"]) == (1, 1)
    report = (out / "REPORT.md").read_text()
    section = report.split("## Data types (exp10)")[1].split("\n## ")[0]
    assert "| float32" in section and "| bfloat16" in section
    assert section.count("bfloat16 → float32 (sync on)") == 2  # rollout, update
    linen = next(
        r
        for r in runs
        if r["label"] == "Acrobot-v1"
        and r["model_size"] == "large"
        and r["framework"] == "linen"
        and r["sync_timing"]
        and is_default(r)
        and r["dtype"] == "bfloat16"
    )
    total = linen["rollout8"] + linen["update8"]
    assert f"{total:.3f} ({linen['rollout8']:.3f} + {linen['update8']:.3f})" in section
    assert "avx512_bf16" in report.split("## Machines and versions")[1].split("\n## ")[0]
    an = analysis_of(out / "runs.csv", out.parent / "timing.json")
    assert set(an.summary["dtype"]) == {"float32", "bfloat16"}
    fig = time_figures.fig_dtypes(an, "exp10")
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    assert set(panels) == {"Acrobot-v1, small model", "Acrobot-v1, large model"}
    ax = panels["Acrobot-v1, large model"]
    bf16 = [patch.get_height() for patch in ax.patches if patch.get_gid() == "bfloat16 update"]
    f32 = [patch.get_height() for patch in ax.patches if patch.get_gid() == "float32 update"]
    factors = [DTYPE_FACTOR[fw] for fw in STUDY.frameworks]
    assert np.divide(bf16, f32) == pytest.approx(factors, rel=1e-6)
    assert [text.get_text() for text in ax.texts] == [f"×{f:.1f}" for f in factors]
    figures.plt.close(fig)


@STUDY_OUT
def test_the_report_tables_each_frameworks_rollout_and_update_per_experiment_of_both_syncs(
    study_out,
):
    """REPORT.md: for the experiments of sync "both" (exp5-exp8), a table of each framework's steady
    rollout + update per size, env label and tag, the median over its sync-on default-mode runs;
    none for the others."""
    runs, out = study_out
    report = (out / "REPORT.md").read_text()
    sections = re.findall(r"^## Rollout and update per framework \((\w+)\)", report, re.M)
    assert sections == [name for name, exp in STUDY.experiments.items() if len(exp.syncs) > 1]
    for exp, labels in [
        ("exp7", ["Acrobot-v1", "Acrobot-v1@envpool"]),
        ("exp6", STUDY.continuous_envs[:2]),
    ]:
        section = report.split(f"## Rollout and update per framework ({exp})")[1].split("\n## ")[0]
        header = next(line for line in section.splitlines() if line.startswith("| size"))
        columns = [cell.strip() for cell in header.strip("|").split("|")]
        for label in labels:
            pattern = rf"\| small +\| {re.escape(label)} +\| linux +\|"
            row = next(line for line in section.splitlines() if re.match(pattern, line))
            cells = dict(zip(columns, (cell.strip() for cell in row.strip("|").split("|"))))
            for framework in STUDY.frameworks:
                mine = [
                    run
                    for run in runs
                    if run["label"] == label
                    and run["tag"] == "linux"
                    and run["framework"] == framework
                    and run["model_size"] == "small"
                    and run["sync_timing"]
                    and is_default(run)
                    and exp in experiments_of(run)
                ]
                assert mine, (exp, label, framework)
                rollout = statistics.median(run["rollout8"] for run in mine)
                update = statistics.median(run["update8"] for run in mine)
                shown = [float(number) for number in re.findall(r"[\d.]+", cells[framework])]
                # "total (rollout + update)", to 3 decimals
                expected = [rollout + update, rollout, update]
                assert shown == pytest.approx(expected, abs=6e-4), (exp, label, framework)


@STUDY_OUT
def test_the_continuous_experiment_gets_its_tables_and_figures(study_out):
    """exp6, by the study's roles alone: its total-time and steady-state tables in the README block
    (every pair, with intervals: 4 envs), its figures, and its total-time figure drawn from its
    sync-off runs only."""
    runs, out = study_out
    tables = {
        (metric, exp): table
        for metric, exp, table in readme_tables((out.parent / "block.md").read_text())
    }
    for metric in ("Total time", "Steady state"):
        rows = [line for line in tables[(metric, "exp6")].splitlines() if "→" in line]
        assert len(rows) == len(STUDY.pairs)
        assert all(
            re.search(r"\[\d\.\d\d, \d\.\d\d\]; median [^|]*; 4 pairs / 4 envs", row)
            for row in rows
        )
    assert {"exp6_total.png", "exp6_speedups.png"} <= {p.name for p in out.glob("*.png")}
    an = analysis_of(out / "runs.csv", out.parent / "timing.json")
    total = time_figures.fig_total(an, "exp6")
    dots = sum(len(collection.get_offsets()) for collection in total.axes[0].collections)
    # each run once: sync off, not sync on
    assert dots == len(CONTINUOUS_FACTOR) * len(DEFAULT_MODES)
    figures.plt.close(total)


@STUDY_OUT
def test_the_speedups_figure_has_a_panel_per_backend_of_its_experiment(study_out):
    """exp7_speedups.png: a panel per env backend (gymnax, envpool), each with that backend's cells
    of speedups.csv at their geometric means, on one y range; exp1's (gymnax alone) has one
    panel."""
    runs, out = study_out
    speedups = pd.read_csv(out / "speedups.csv")
    an = analysis_of(out / "runs.csv", out.parent / "timing.json")
    fig = speedup_figures.fig_speedups(an, "exp7")
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title().split(":")[0] for ax in panels] == ["envs on gymnax", "envs on envpool"]
    assert panels[0].get_ylim() == panels[1].get_ylim()
    for ax, backend in zip(panels, study.BACKENDS):
        cells = speedups[(speedups["metric"] == "total") & (speedups["experiment"] == "exp7")]
        expected = sorted(cells.loc[cells["backend"] == backend, "geomean"])
        centres = [c for c in ax.collections if c.get_gid() == plotting.CENTRE_GID]
        drawn = sorted(y for c in centres for _, y in c.get_offsets())
        assert drawn == pytest.approx(expected, rel=1e-9), backend
    figures.plt.close(fig)
    one = speedup_figures.fig_speedups(an, "exp1")
    assert len([ax for ax in one.axes if ax.get_title()]) == 1
    figures.plt.close(one)


@STUDY_OUT
def test_speedup_text_says_what_the_interval_is(study_out):
    runs, out = study_out
    report = (out / "REPORT.md").read_text()
    assert "cluster-bootstrap interval" in report and "resamples envs with replacement" in report
    assert "– = fewer than 3 envs" in report
    assert "[–]" in report  # large model: one env (Acrobot-v1) in exp3
    assert "12 pairs / 3 envs" in report
    block = (out.parent / "block.md").read_text()
    assert "cluster-bootstrap interval over envs, then runs; – below 3 envs" in block


@STUDY_OUT
def test_csv_round_trip(study_out, tmp_path):
    runs, out = study_out
    again = tmp_path / "again"
    # runs.csv alone, and runs.csv given twice (as from two machines with overlapping runs)
    plot_results.main(
        [
            "--csv",
            str(out / "runs.csv"),
            "--csv",
            str(out / "runs.csv"),
            "--out",
            str(again),
            "--env-timing",
            str(out.parent / "timing.json"),
            "--no-figures",
        ]
    )
    for table in ("summary.csv", "speedups.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(again / table), pd.read_csv(out / table))
    assert not list(again.glob("*.png"))


@STUDY_OUT
def test_a_runs_csv_of_the_older_tool_is_read(study_out, tmp_path):
    """An older runs.csv has a device column (the resolved device) instead of device_name."""
    runs, out = study_out
    old = (
        pd.read_csv(out / "runs.csv")
        .drop(columns=["command", "import_s"])
        .rename(columns={"device_name": "device"})
    )
    old.to_csv(tmp_path / "old.csv", index=False)
    plot_results.main(
        ["--csv", str(tmp_path / "old.csv"), "--out", str(tmp_path / "out"), "--no-figures"]
    )
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert set(summary["device_name"]) == {"Test GPU 9000", "cpu"}


def test_figures_of_absent_experiments_are_skipped_and_stale_ones_removed(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    # figures of an earlier call, and a file that is not this tool's
    for name in ALL_FIGURES:
        (out / name).write_bytes(own_figure())
    (out / "my_own.png").write_bytes(b"old")
    for (framework, mode), seed in itertools.product(MODES, SEED_FACTOR):  # exp2 only
        write_run(tmp_path / "runs", "CartPole-v1", framework, "small", mode, seed, sync=True)
    (tmp_path / "timing.json").write_text(
        '{"envs": {"CartPole-v1": {"ratio": 1.0}, "Acrobot-v1": {"ratio": 3.0}}}'
    )
    plot_results.main(
        [
            str(tmp_path / "runs"),
            "--out",
            str(out),
            "--env-timing",
            str(tmp_path / "timing.json"),
            "--force",
        ]
    )
    # exp7: CartPole-v1 on gymnax, default modes, sync on
    drawn = {"exp2_rollout_update.png", "exp7_backends.png"}
    assert {p.name for p in out.glob("*.png")} == drawn | {"my_own.png"}
    assert (out / "exp2_rollout_update.png").read_bytes() != own_figure()
    report = (out / "REPORT.md").read_text()
    for name in ALL_FIGURES - drawn:
        assert (
            f"{name} skipped" in report
            and f"{name} removed" in report
            and f"]({name})" not in report
        )
    assert "exp1_total.png removed" in capsys.readouterr().out
    speedups = pd.read_csv(out / "speedups.csv")
    assert set(speedups["metric"]) == {"rollout", "update"} and set(speedups["experiment"]) == {
        "exp2",
        "exp7",
    }


@STUDY_OUT
def test_no_figures_removes_the_figures_of_an_earlier_call(study_out, tmp_path):
    runs, out = study_out
    again = tmp_path / "again"
    again.mkdir()
    (again / "exp1_total.png").write_bytes(own_figure())
    plot_results.main(
        ["--csv", str(out / "runs.csv"), "--out", str(again), "--no-figures", "--force"]
    )
    assert not (again / "exp1_total.png").exists()
    assert "exp1_total.png removed" in (again / "REPORT.md").read_text()


def test_no_completed_run_writes_nothing(tmp_path, capsys):
    """An empty (or wrong) runs folder: exit 2, one line, --out and the README untouched."""
    (tmp_path / "runs").mkdir()
    write_run(
        tmp_path / "runs",
        "CartPole-v1",
        "linen",
        "small",
        "jit",
        1,
        sync=False,
        status="interrupted",
    )
    readme = tmp_path / "README.md"
    start, end = README_MARKERS
    readme.write_text(f"# title\n{start}\nold numbers\n{end}\n")
    for out in (tmp_path / "new", tmp_path / "old"):
        if out.name == "old":
            out.mkdir()
            # a table of an earlier call: its header
            (out / "speedups.csv").write_text(",".join(SPEEDUP_COLUMNS) + "\n")
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            plot_results.main(
                [str(tmp_path / "runs"), "--out", str(out), "--update-readme", str(readme)]
            )
        assert exit_info.value.code == 2
        errors = [
            line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")
        ]
        assert (
            len(errors) == 1 and "no completed run" in errors[0] and "nothing written" in errors[0]
        )
    assert not (tmp_path / "new").exists()
    assert [p.name for p in (tmp_path / "old").iterdir()] == ["speedups.csv"]
    assert (tmp_path / "old" / "speedups.csv").read_text() == ",".join(SPEEDUP_COLUMNS) + "\n"
    assert "old numbers" in readme.read_text()


def test_the_readme_tables_are_never_replaced_by_empty_ones(tmp_path, capsys):
    """Completed runs of one framework only: no pairs to compare, so --update-readme refuses and
    writes nothing."""
    for env in ENV_FACTOR:
        write_run(tmp_path / "runs", env, "linen", "small", "jit", 1, sync=False)
    readme = tmp_path / "README.md"
    start, end = README_MARKERS
    readme.write_text(f"# title\n{start}\nold numbers\n{end}\n")
    with pytest.raises(SystemExit) as exit_info:
        plot_results.main(
            [str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--update-readme", str(readme)]
        )
    assert exit_info.value.code == 2 and "no pairs of runs" in capsys.readouterr().err
    assert readme.read_text() == f"# title\n{start}\nold numbers\n{end}\n"
    assert not (tmp_path / "out").exists()
    # without the README the same runs give their (pairless) tables and report
    plot_results.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--no-figures"])
    assert "No pairs of runs" in (tmp_path / "out" / "REPORT.md").read_text()


def test_experiment_folder_of_bench_sh_decides_membership(tmp_path):
    """bench.sh runs Acrobot-v1 small twice, into exp2/ and exp3/: each copy belongs to its own
    experiment."""
    for experiment in ("exp2", "exp3"):
        run_dir = write_run(
            tmp_path / experiment, "Acrobot-v1", "linen", "small", "jit", 1, sync=True
        )["run_dir"]
        (tmp_path / "runs" / experiment).mkdir(parents=True)
        # started at another time
        run_dir.rename(tmp_path / "runs" / experiment / f"{run_dir.name}{experiment[-1]}")
    plot_results.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--no-figures"])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert sorted(summary["experiments"]) == ["exp2", "exp3"]
    assert sorted(summary["experiment_folder"]) == ["exp2", "exp3"]


def test_bench_sh_folder_admits_envs_outside_the_experiment_matrix(tmp_path):
    """bench.sh --envs may sweep an env the study's experiment does not list: in its exp folder it
    still counts."""
    swept = write_run(tmp_path / "tmp", "CartPole-v1", "linen", "small", "jit", 1, sync=True)[
        "run_dir"
    ]
    (tmp_path / "runs" / "exp3").mkdir(parents=True)
    swept.rename(tmp_path / "runs" / "exp3" / swept.name)
    # no bench folder
    write_run(tmp_path / "runs" / "loose", "CartPole-v1", "linen", "large", "jit", 1, sync=True)
    plot_results.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--no-figures"])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv").set_index("model_size")
    assert summary.loc["small", "experiments"] == "exp3"
    assert pd.isna(summary.loc["large", "experiments"]) or summary.loc["large", "experiments"] == ""


def test_rollout_and_update_pair_runs_within_one_experiment(tmp_path):
    """bench.sh's exp2/ and exp3/ copies of Acrobot-v1 small are never paired with each other."""
    nnx_factor = {"exp2": 1.0, "exp3": 3.0}  # nnx -> linen: 1.25 in exp2, 3.75 in exp3
    for experiment, framework in itertools.product(nnx_factor, ["linen", "nnx"]):
        factor = nnx_factor[experiment] if framework == "nnx" else 1.0
        run_dir = write_run(
            tmp_path / experiment,
            "Acrobot-v1",
            framework,
            "small",
            STUDY.default_compile(framework),
            1,
            sync=True,
            factor=factor,
        )["run_dir"]
        (tmp_path / "runs" / experiment).mkdir(parents=True, exist_ok=True)
        # started at another time
        run_dir.rename(tmp_path / "runs" / experiment / f"{run_dir.name}{experiment[-1]}")
    plot_results.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--no-figures"])
    speedups = pd.read_csv(tmp_path / "out" / "speedups.csv").set_index(["metric", "experiment"])
    for metric in ("rollout", "update"):
        assert speedups.loc[(metric, "exp2"), "geomean"] == pytest.approx(1.25, rel=1e-6)
        assert speedups.loc[(metric, "exp3"), "geomean"] == pytest.approx(3.75, rel=1e-6)
        assert (
            speedups.loc[(metric, "exp2"), "n_pairs"]
            == speedups.loc[(metric, "exp3"), "n_pairs"]
            == 1
        )
    block = speedup_markdown(speedups.reset_index(), STUDY)
    assert block.count("**Rollout") == 2 and "(exp2: " in block and "(exp3: " in block


@STUDY_OUT
def test_update_readme_replaces_only_the_marked_block(study_out, tmp_path):
    runs, out = study_out
    readme = tmp_path / "README.md"
    start, end = README_MARKERS
    readme.write_text(f"# title\n{start}\nold numbers\n{end}\ntail\n")
    plot_results.main(
        [
            "--csv",
            str(out / "runs.csv"),
            "--out",
            str(tmp_path / "out"),
            "--no-figures",
            "--update-readme",
            str(readme),
        ]
    )
    text = readme.read_text()
    block = readme_markdown(pd.read_csv(out / "speedups.csv"), STUDY)
    assert text == f"# title\n{start}\n{block}{end}\ntail\n"
    assert "old numbers" not in text and "nnx → linen" in text


@STUDY_OUT
def test_previous_edition_side_by_side(study_out, tmp_path):
    """--previous: the headline pairs measured in both editions, previous -> now, in the README
    block and REPORT.md; a pair the previous edition lacks is left out, and speedups.csv is the same
    as without --previous."""
    runs, out = study_out
    now = pd.read_csv(out / "speedups.csv")
    previous = now[now["pair"] != "equinox->linen"].assign(
        geomean=lambda t: t["geomean"] * 2, ci_low=np.nan, ci_high=np.nan
    )
    previous.to_csv(tmp_path / "previous.csv", index=False)
    new_out = tmp_path / "out"
    (tmp_path / "study.toml").write_text(with_block_tables((ROOT / "study.toml").read_text()))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(study.PATH_VARIABLE, str(tmp_path / "study.toml"))
        plot_results.main(
            [
                "--csv",
                str(out / "runs.csv"),
                "--out",
                str(new_out),
                "--no-figures",
                "--previous",
                str(tmp_path / "previous.csv"),
                "--readme-block",
                str(tmp_path / "block.md"),
            ]
        )
    assert (new_out / "speedups.csv").read_text() == (out / "speedups.csv").read_text()
    block, report = (tmp_path / "block.md").read_text(), (new_out / "REPORT.md").read_text()
    # the block file holds the block between its markers (issue 79)
    edition = block[block.index("**Since the previous edition**") : block.index(README_MARKERS[1])]
    assert edition in report and str(tmp_path / "previous.csv") in edition
    row = now[
        (now["metric"] == "total")
        & (now["experiment"] == "exp1")
        & (now["size"] == "small")
        & (now["pair"] == "torch->linen")
    ].iloc[0]
    assert (
        f"{2 * row.geomean:.2f}× [–] → **{row.geomean:.2f}× [{row.ci_low:.2f}, {row.ci_high:.2f}]**"
        in edition
    )
    assert (
        "torch → nnx" in edition and "equinox → linen" not in edition and "equinox → linen" in block
    )
    # a table per experiment (and env backend) of the README's tables, each named
    names = [line for line in edition.splitlines() if line.startswith("*exp")]
    assert [name.split(":")[0] for name in names] == [
        f"*{exp}" for exp in BLOCK_TABLES for _ in STUDY.experiments[exp].backends
    ]
    assert sum("its envs on envpool" in name for name in names) == 1


@STUDY_OUT
def test_previous_edition_of_before_the_backends(study_out, tmp_path):
    """A previous speedups.csv without the backend column (editions of before the env backends): its
    rows were on gymnax, so they meet this edition's gymnax cells, and none meets an envpool one."""
    runs, out = study_out
    now = pd.read_csv(out / "speedups.csv")
    old = now[now["backend"] == "gymnax"].drop(columns="backend")
    old.to_csv(tmp_path / "previous.csv", index=False)
    previous = read_previous(str(tmp_path / "previous.csv"), SPEEDUP_COLUMNS)
    block = readme_markdown(now, dataclasses.replace(STUDY, tables=BLOCK_TABLES), previous, "old")
    edition = block[block.index("**Since the previous edition**") :]
    names = [line for line in edition.splitlines() if line.startswith("*exp")]
    assert [name.split(":")[0] for name in names] == [f"*{exp}" for exp in BLOCK_TABLES]
    assert "its envs on gymnax" in edition and "its envs on envpool" not in edition


@STUDY_OUT
def test_previous_edition_of_before_the_data_types(study_out, tmp_path):
    """A previous speedups.csv without the dtype column (editions of before --dtype): its rows were
    float32 runs, so they meet this edition's float32 cells, as its full copy does."""
    runs, out = study_out
    now = pd.read_csv(out / "speedups.csv")
    now[now["dtype"] == "float32"].drop(columns="dtype").to_csv(tmp_path / "old.csv", index=False)
    old = read_previous(str(tmp_path / "old.csv"), SPEEDUP_COLUMNS)
    assert set(old["dtype"]) == {"float32"}
    block = readme_markdown(now, STUDY, old, "old")
    same = readme_markdown(
        now, STUDY, read_previous(str(out / "speedups.csv"), SPEEDUP_COLUMNS), "old"
    )
    assert "**Since the previous edition**" in block and block == same


@STUDY_OUT
def test_previous_that_is_not_a_speedups_csv_is_refused(study_out, tmp_path, capsys):
    runs, out = study_out
    (tmp_path / "previous.csv").write_text("pair,geomean\nnnx->linen,1.0\n")
    with pytest.raises(SystemExit) as exit_info:
        plot_results.main(
            [
                "--csv",
                str(out / "runs.csv"),
                "--out",
                str(tmp_path / "out"),
                "--previous",
                str(tmp_path / "previous.csv"),
            ]
        )
    assert exit_info.value.code == 2 and not (tmp_path / "out").exists()
    assert "is not a speedups.csv" in capsys.readouterr().err


# ---------------------------------------------------------------------------- the cluster bootstrap


def nnx_linen_total(tmp_path: Path, name: str, runs) -> pd.Series:
    out = tmp_path / name
    plot_results.main(
        [
            "--csv",
            str(write_runs_csv(tmp_path / f"{name}.csv", runs)),
            "--out",
            str(out),
            "--no-figures",
        ]
    )
    speedups = pd.read_csv(out / "speedups.csv")
    return speedups[(speedups["metric"] == "total") & (speedups["pair"] == "nnx->linen")].iloc[0]


ENV_RATIOS = {
    "CartPole-v1": 1.0,
    "Acrobot-v1": 1.5,
    "MountainCar-v0": 2.0,
    "DiscountingChain-bsuite": 3.0,
}


def test_duplicated_runs_do_not_narrow_the_interval(tmp_path):
    """Each env's runs repeated three times with identical times: 9x the pairs, but no new
    information. Resampling pairs as if independent would shrink the interval about 3x; resampling
    envs, then runs, leaves it as it is."""

    def runs(copies):
        return [
            (env, framework, seed, 10.0 * (ratio if framework == "nnx" else 1.0))
            for env, ratio in ENV_RATIOS.items()
            for framework in ("linen", "nnx")
            for seed in range(copies)
        ]

    once, thrice = (
        nnx_linen_total(tmp_path, "once", runs(1)),
        nnx_linen_total(tmp_path, "thrice", runs(3)),
    )
    assert (once["n_pairs"], thrice["n_pairs"]) == (4, 36)
    assert once["geomean"] == pytest.approx(thrice["geomean"], rel=1e-9)
    assert once["ci_high"] / once["ci_low"] > 1.5  # the envs differ: a wide interval
    assert thrice["ci_low"] == pytest.approx(once["ci_low"], rel=1e-9)
    assert thrice["ci_high"] == pytest.approx(once["ci_high"], rel=1e-9)
    assert once["n_clusters"] == thrice["n_clusters"] == 4
    # the same again: seeded, so identical
    pd.testing.assert_series_equal(nnx_linen_total(tmp_path, "thrice_again", runs(3)), thrice)


def test_runs_within_an_env_widen_the_interval(tmp_path):
    """Three envs with the same ratio on average but seeds that differ: the interval comes from the
    runs."""
    runs = [
        (env, framework, seed, 10.0 * (1.25 if framework == "nnx" else 1.0) * (1.0 + 0.2 * seed))
        for env in list(ENV_RATIOS)[:3]
        for framework in ("linen", "nnx")
        for seed in range(2)
    ]
    row = nnx_linen_total(tmp_path, "seeds", runs)
    assert row["geomean"] == pytest.approx(1.25, rel=1e-9)
    assert row["ci_low"] < 1.2 and row["ci_high"] > 1.3


def test_fewer_than_three_envs_give_no_interval(tmp_path):
    runs = [
        (
            env,
            framework,
            seed,
            10.0 * (ENV_RATIOS[env] if framework == "nnx" else 1.0) * (1.0 + 0.2 * seed),
        )
        for env in list(ENV_RATIOS)[:2]
        for framework in ("linen", "nnx")
        for seed in range(3)
    ]
    row = nnx_linen_total(tmp_path, "two_envs", runs)
    assert row["n_pairs"] == 18
    assert math.isnan(row["ci_low"]) and math.isnan(row["ci_high"])
    assert row["n_clusters"] == 2
    block = speedup_markdown(pd.read_csv(tmp_path / "two_envs" / "speedups.csv"), STUDY)
    assert "[–]; median" in block and "18 pairs / 2 envs" in block


# ------------------------------------------------------------------------ the study and the readers
FAKE_FRAMEWORK = (
    '\n[frameworks.fake]\nscript = "ppo_fake.py"\ncompile = ["fast", "slow"]\ncolor = "#9467bd"\n'
)


def test_a_fifth_framework_of_the_study_is_compared(tmp_path, monkeypatch):
    path = tmp_path / "study.toml"
    path.write_text(study.DEFAULT_PATH.read_text() + FAKE_FRAMEWORK)
    monkeypatch.setenv(study.PATH_VARIABLE, str(path))
    study._load.cache_clear()
    for env, (framework, mode) in itertools.product(ENV_FACTOR, [*DEFAULT_MODES, ("fake", "fast")]):
        write_run(tmp_path / "runs", env, framework, "small", mode, 1, sync=False)
    # exp2: every compile mode
    write_run(tmp_path / "runs", "CartPole-v1", "fake", "small", "slow", 1, sync=True)
    plot_results.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
    speedups = pd.read_csv(tmp_path / "out" / "speedups.csv")
    speedups = speedups[(speedups["metric"] == "steady") & (speedups["experiment"] == "exp1")]
    speedups = speedups.set_index("pair")["geomean"]
    # every pair A -> B with B listed first, in the study's order
    frameworks = [*STUDY.frameworks, "fake"]
    assert list(speedups.index) == [f"{a}->{b}" for b, a in itertools.combinations(frameworks, 2)]
    assert speedups["fake->linen"] == pytest.approx(2.0, rel=1e-6)
    assert speedups["fake->torch"] == pytest.approx(0.4, rel=1e-6)
    summary = pd.read_csv(tmp_path / "out" / "summary.csv").set_index(["framework", "compile"])
    # exp7: its envs on gymnax
    assert set(summary.loc[("fake", "fast"), "experiments"]) == {"exp1 exp7"}
    assert summary.loc[("fake", "slow"), "experiments"] == "exp2"
    assert (tmp_path / "out" / "exp1_total.png").exists()
    assert "fake → linen" in (tmp_path / "out" / "REPORT.md").read_text()


def test_windows_come_from_the_study(tmp_path, monkeypatch):
    """Another steady window (iterations 5+) moves plot_results' columns and benchmarks.common's
    STEADY_FROM."""
    import benchmarks.common

    path = tmp_path / "study.toml"
    text = study.DEFAULT_PATH.read_text()
    text = text.replace(
        'warmup = { first = 1, last = 7, label = "iterations 1-7" }',
        'warmup = { first = 1, last = 4, label = "iterations 1-4" }',
    )
    text = text.replace(
        'steady = { first = 8, label = "iterations 8+" }',
        'steady = { first = 5, label = "iterations 5+" }',
    )
    path.write_text(text)
    monkeypatch.setenv(study.PATH_VARIABLE, str(path))
    try:
        assert importlib.reload(benchmarks.common).STEADY_FROM == 5
        run = write_run(tmp_path / "runs", "CartPole-v1", "linen", "small", "jit", 1, sync=True)
        plot_results.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--no-figures"])
        summary = pd.read_csv(tmp_path / "out" / "summary.csv").iloc[0]
        assert summary["iters5plus_s"] == pytest.approx(
            statistics.mean(run["iteration"][5:]), rel=1e-6
        )
        assert summary["rollout5plus_s"] == pytest.approx(
            statistics.mean(run["rollout"][5:]), rel=1e-6
        )
        # no exp1 runs
        assert "iterations 1-4 (s/iter)" not in (tmp_path / "out" / "REPORT.md").read_text()
    finally:
        monkeypatch.undo()
        assert importlib.reload(benchmarks.common).STEADY_FROM == STUDY.steady.first


def test_one_reader_of_run_folders(tmp_path, monkeypatch, capsys):
    """plot_results.py and benchmarks/common.py read runs through core/runlog.py and no other
    way: the analysis through runlog.read_completed_run (the one definition of a usable completed
    run: a run it refuses is skipped with its reason), benchmarks/common.py through runlog.read_run
    (which read_completed_run reads with). Each sees only what runlog hands it: times doubled by
    runlog.read_run are the times in summary.csv and in the series."""
    import benchmarks.common
    from core import runlog

    root = tmp_path / "runs"
    kept = write_run(root, "CartPole-v1", "linen", "small", "jit", 1, sync=True)
    refused = write_run(root, "CartPole-v1", "nnx", "small", "jit", 1, sync=True)
    read_completed_run, read_run = runlog.read_completed_run, runlog.read_run

    def doubled(run: runlog.Run) -> runlog.Run:
        scalars = run.scalars.assign(**{"time/iteration": run.scalars["time/iteration"] * 2})
        return run._replace(scalars=scalars)

    asked = []

    def completed_reader(run_dir, *args, **kwargs):
        asked.append(Path(run_dir).name)
        if Path(run_dir) == Path(refused["run_dir"]):
            raise runlog.RunError("refused by runlog")
        return read_completed_run(run_dir, *args, **kwargs)

    monkeypatch.setattr(runlog, "read_completed_run", completed_reader)
    monkeypatch.setattr(runlog, "read_run", lambda run_dir: doubled(read_run(run_dir)))
    out = tmp_path / "out"
    plot_results.main([str(root), "--out", str(out), "--no-figures"])
    assert sorted(asked) == sorted(Path(run["run_dir"]).name for run in (kept, refused))
    assert "refused by runlog" in capsys.readouterr().err
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["run"]) == [Path(kept["run_dir"]).name]
    steady = f"iters{STUDY.steady.first}plus_s"
    assert summary[steady].iloc[0] == pytest.approx(
        2 * statistics.mean(kept["iteration"][STUDY.steady.first :]), rel=1e-6
    )
    series = benchmarks.common.run_series(kept["run_dir"])["series"]
    np.testing.assert_allclose(series["time/iteration"], 2 * np.array(kept["iteration"]), rtol=1e-6)
    # iterations 2, 5, 8
    np.testing.assert_allclose(series["charts/episodic_return"], [20.0, 50.0, 80.0])


def scatter_x(ax) -> set[float]:
    return {float(x) for collection in ax.collections for x in collection.get_offsets()[:, 0]}


@STUDY_OUT
def test_the_expensive_envs_are_on_the_env_cost_axis(study_out):
    runs, out = study_out
    summary = pd.read_csv(out / "summary.csv")
    expensive = summary[summary["env"].isin(STUDY.expensive_envs)]
    assert len(expensive) == len(EXPENSIVE_FACTOR) * len(DEFAULT_MODES) * 2  # sync off and on
    assert set(expensive["experiments"]) == {"exp5"}
    assert dict(zip(expensive["env"], expensive["env_cost"])) == EXPENSIVE_COST
    an = analysis_of(out / "runs.csv", out.parent / "timing.json")
    total = time_figures.fig_total(an, "exp1")
    every_cost = {1.0, 2.0, 3.0} | set(CONTINUOUS_COST.values()) | set(EXPENSIVE_COST.values())
    # exp1's, exp6's, exp5's, exp7's, exp8's
    assert every_cost | set(ENVPOOL_COST.values()) == scatter_x(total.axes[1])
    against = speedup_figures.fig_speedup_vs_env_cost(an)
    # total, small
    assert set(EXPENSIVE_COST.values()) | set(CONTINUOUS_COST.values()) < scatter_x(against.axes[0])
    report = (out / "REPORT.md").read_text()
    assert "](speedup_vs_env_cost.png)" in report and "## Speedup against env cost" in report
    env_rows = report.split("## Environment complexity")[1]
    for env in [*EXPENSIVE_FACTOR, *CONTINUOUS_FACTOR]:
        assert f"| {env} " in env_rows
    # costs, not 2e+03
    assert "| 2,000× " in env_rows and "| 500× " in env_rows and "e+0" not in env_rows
    table = pd.read_csv(out / "env_cost.csv").set_index(["metric", "size", "pair"])
    assert list(table.reset_index().columns) == ENV_COST_COLUMNS
    # 3 envs of exp1 (CartPole twice: 2 tags) + 2 of exp5 + 4 of exp6 + exp7's (exp1's 4 again, 3 on
    # envpool) + 2 of exp8
    n_envs = (
        4
        + len(EXPENSIVE_FACTOR)
        + len(CONTINUOUS_FACTOR)
        + (4 + len(ENV_FACTOR))
        + len(MUJOCO_FACTOR)
    )
    assert table.loc[("total", "small", "nnx->linen"), "n_envs"] == n_envs
    # exp1's 3 envs
    assert table.loc[("total", "large", "nnx->linen"), "trend"].startswith("too few envs")


def cost_study(tmp_path: Path, ratio: dict, name: str = "cost") -> tuple[Path, Path]:
    """exp1 and exp5 runs of linen and nnx (two seeds) with nnx -> linen = ratio[env] in total time,
    and an env timing where the envs cost 1.5^i in the order of `ratio`; returns (runs.csv,
    timing.json)."""
    runs = [
        (
            env,
            framework,
            seed,
            10.0 * (ratio[env] if framework == "nnx" else 1.0) * (1.0 + 0.01 * seed),
        )
        for env in ratio
        for framework in ("linen", "nnx")
        for seed in (1, 2)
    ]
    timing = tmp_path / f"{name}_timing.json"
    timing.write_text(
        json.dumps(
            {"device": "cpu", "envs": {env: {"ratio": 1.5**i} for i, env in enumerate(ratio)}}
        )
    )
    return write_runs_csv(tmp_path / f"{name}.csv", runs), timing


def env_cost_row(
    tmp_path: Path, ratio: dict, name: str = "cost", metric: str = "total", figures: bool = False
) -> pd.Series:
    """The env-cost row of a metric's nnx -> linen from plot_results (its figures drawn only when
    asked: a test of the table alone does not pay for them)."""
    runs_csv, timing = cost_study(tmp_path, ratio, name)
    out = tmp_path / name
    options = [] if figures else ["--no-figures"]
    plot_results.main(
        ["--csv", str(runs_csv), "--env-timing", str(timing), "--out", str(out), *options]
    )
    table = pd.read_csv(out / "env_cost.csv")
    return table[(table["metric"] == metric) & (table["pair"] == "nnx->linen")].iloc[0]


def test_a_speedup_that_falls_with_env_cost(tmp_path):
    """nnx -> linen falls from 3x on the cheapest env to 1.7x on the costliest (Craftax): rho = -1,
    a negative slope."""
    ratio = {env: 3.0 - 0.1 * i for i, env in enumerate(STUDY.every_env)}
    row = env_cost_row(tmp_path, ratio, figures=True)
    assert row["n_envs"] == len(STUDY.every_env) and row["size"] == "small"
    assert [row["rho"], row["rho_low"], row["rho_high"]] == pytest.approx([-1.0, -1.0, -1.0])
    assert row["slope_low"] <= row["slope"] < row["slope_high"] < 0
    assert row["trend"] == "falls with env cost: shrinks towards 1×"
    report = (tmp_path / "cost" / "REPORT.md").read_text()
    envs = f"{len(STUDY.every_env)} envs: falls with env cost: shrinks towards 1×"
    assert "ρ **-1.00** [-1.00, -1.00]" in report and envs in report
    assert (tmp_path / "cost" / "speedup_vs_env_cost.png").exists()
    steady = pd.read_csv(tmp_path / "cost" / "env_cost.csv").query("metric == 'steady'").iloc[0]
    # every iteration took 0.1 s
    assert math.isnan(steady["rho"]) and steady["trend"].startswith("no correlation")


def test_a_speedup_without_a_trend(tmp_path):
    """Speedups that alternate high and low along the cost axis: the interval of rho holds 0."""
    ratio = {env: 2.0 + 0.5 * (i % 2) for i, env in enumerate(STUDY.every_env)}
    row = env_cost_row(tmp_path, ratio)
    assert row["rho_low"] < 0 < row["rho_high"] and row["trend"].startswith("no clear trend")


def test_too_few_envs_give_no_correlation(tmp_path):
    ratio = {
        env: 3.0 - 0.1 * i for i, env in enumerate(STUDY.envs[: stats.MIN_CORRELATION_ENVS - 1])
    }
    row = env_cost_row(tmp_path, ratio)
    assert row["n_envs"] == 4 and all(
        math.isnan(row[c]) for c in ("rho", "rho_low", "rho_high", "slope")
    )
    assert row["trend"] == "too few envs (under 5)"
    assert "– (4 envs: too few envs (under 5))" in (tmp_path / "cost" / "REPORT.md").read_text()


def test_no_env_timing_no_correlation(tmp_path):
    runs_csv, _ = cost_study(tmp_path, {env: 2.0 for env in STUDY.envs})
    plot_results.main(["--csv", str(runs_csv), "--out", str(tmp_path / "out")])
    assert pd.read_csv(tmp_path / "out" / "env_cost.csv").empty
    report = (tmp_path / "out" / "REPORT.md").read_text()
    assert (
        "no env costs to correlate with" in report
        and "speedup_vs_env_cost.png skipped: no env timing" in report
    )


def test_cost_correlation_by_hand():
    cost, speedup = (
        np.array([1.0, 10.0, 100.0, 1000.0, 10000.0]),
        np.array([4.0, 2.0, 1.0, 0.5, 0.25]),
    )
    result = stats.cost_correlation(cost, speedup)
    # halves per 10x cost
    assert result["rho"] == pytest.approx(-1.0) and 10 ** result["slope"] == pytest.approx(0.5)
    rising = stats.cost_correlation(cost, speedup[::-1])
    assert rising["rho"] == pytest.approx(1.0) and rising["rho_low"] == pytest.approx(1.0)
    assert math.isnan(stats.cost_correlation(cost[:4], speedup[:4])["rho"])


# --------------------------------------------------------------- figures draw the tables' intervals
def drawn(fig, gid: str) -> list[float]:
    """The y values of the marks with gid in a figure: the ends of every interval bar, or every
    estimate."""
    from analysis.plotting import INTERVAL_GID

    values = []
    for collection in (c for ax in fig.axes for c in ax.collections if c.get_gid() == gid):
        if gid == INTERVAL_GID:
            values += [
                float(y)
                for segment in collection.get_segments()
                for y in (segment[0][1], segment[1][1])
            ]
        else:
            values += [float(y) for y in collection.get_offsets()[:, 1]]
    return sorted(values)


def table_values(cells: pd.DataFrame) -> tuple[list[float], list[float]]:
    """(every interval's ends, every geometric mean) of some rows of speedups.csv."""
    with_interval = cells.dropna(subset=["ci_low"])
    return sorted([*with_interval["ci_low"], *with_interval["ci_high"]]), sorted(cells["geomean"])


@pytest.mark.parametrize(
    "kind,owner,metrics",
    [
        ("speedups", "exp1", ["total"]),
        ("speedups", "exp6", ["total"]),
        ("steady_speedups", "exp1", ["steady"]),
        ("rollout_update", "exp2", ["rollout", "update"]),
    ],
)
@STUDY_OUT
def test_speedup_figures_draw_the_intervals_the_tables_print(study_out, kind, owner, metrics):
    """Every interval bar of a speedup figure is a (ci_low, ci_high) of speedups.csv for its
    experiment, and every estimate a geomean: the same numbers, no other (no boxes, no min-max
    bars)."""
    from analysis.plotting import CENTRE_GID, INTERVAL_GID

    runs, out = study_out
    r = analysis_of(out / "runs.csv", out.parent / "timing.json")
    fig = figures.KINDS[kind].draw(r, owner)
    table = pd.read_csv(out / "speedups.csv")
    ends, geomeans = table_values(
        table[table["metric"].isin(metrics) & (table["experiment"] == owner)]
    )
    assert len(ends) >= 4 and drawn(fig, INTERVAL_GID) == pytest.approx(ends, rel=1e-12)
    assert drawn(fig, CENTRE_GID) == pytest.approx(geomeans, rel=1e-12)
    assert not [p for ax in fig.axes for p in ax.patches]  # no boxes
    figures.plt.close(fig)


@STUDY_OUT
def test_the_platform_figure_draws_each_tags_intervals(study_out):
    """The platform comparison's speedups per tag: the cells of REPORT.md's per-tag tables."""
    from analysis.plotting import CENTRE_GID, INTERVAL_GID

    runs, out = study_out
    r = analysis_of(out / "runs.csv", out.parent / "timing.json")
    tables = r.platform_speedups["exp4"]
    assert set(tables) == {"linux", "mac"}
    cells = pd.concat(tables.values())
    assert set(cells["experiment"]) == {"exp1"}  # the experiment exp4 repeats
    ends, geomeans = table_values(cells)
    fig = figures.KINDS["tags"].draw(r, "exp4")
    assert ends and drawn(fig, INTERVAL_GID) == pytest.approx(ends, rel=1e-12)
    assert drawn(fig, CENTRE_GID) == pytest.approx(geomeans, rel=1e-12)
    report = (out / "REPORT.md").read_text().split("### Total-time speedups per tag (exp4)")[1]
    linux = tables["linux"].set_index(["size", "pair"]).loc[("small", "torch->linen")]
    assert f"[{linux['ci_low']:.2f}, {linux['ci_high']:.2f}]" in report.split("Tag `mac`")[0]
    figures.plt.close(fig)


# ----------------------------------------------------------- the experiments' roles, from the study
RENAMED = {
    "exp1": "overall",
    "exp2": "rollout",
    "exp3": "sizes",
    "exp4": "platforms",
    "exp5": "craftax",
    "exp6": "continuous",
    "exp7": "backends",
    "exp8": "mujoco",
    "exp9": "learning",
    "exp10": "dtypes",
    "exp11": "agents_cleanrl",
    "exp12": "agents_ours",
    "exp13": "learning_agents",
    "exp14": "agents_mujoco",
}


@pytest.mark.slow
def test_the_experiments_roles_come_from_the_study(tmp_path, monkeypatch, capsys):
    """study.toml with every experiment renamed: the same analysis, under the new names (figures,
    tables, README), and no old name anywhere in what it writes or prints: no analysis code names an
    experiment."""
    text = with_block_tables(study.DEFAULT_PATH.read_text())
    text = re.sub(r"\bexp(\d+)\b", lambda m: RENAMED[m.group(0)], text)
    (tmp_path / "study.toml").write_text(text)
    monkeypatch.setenv(study.PATH_VARIABLE, str(tmp_path / "study.toml"))
    study._load.cache_clear()
    try:
        renamed = study.load()
        assert (renamed.headline, renamed.platforms["platforms"].repeats) == ("overall", "overall")
        root = tmp_path / "runs"
        for env, (framework, mode), tag in itertools.product(ENV_FACTOR, DEFAULT_MODES, TAG_FACTOR):
            write_run(root, env, framework, "small", mode, 1, sync=False, tag=tag)
        for framework, mode in MODES:
            write_run(root, "CartPole-v1", framework, "small", mode, 1, sync=True)
            write_run(root, "Acrobot-v1", framework, "large", mode, 1, sync=True)
        for env, (framework, mode), sync in itertools.product(
            EXPENSIVE_FACTOR, DEFAULT_MODES, (False, True)
        ):
            write_run(root, env, framework, "small", mode, 1, sync=sync)
        for env, (framework, mode), sync in itertools.product(
            CONTINUOUS_FACTOR, DEFAULT_MODES, (False, True)
        ):
            write_run(root, env, framework, "small", mode, 1, sync=sync)
        for framework, mode in DEFAULT_MODES:
            write_run(root, "Acrobot-v1", framework, "large", mode, 1, True, dtype="bfloat16")
        out = tmp_path / "out"
        plot_results.main(
            [
                str(root),
                "--out",
                str(out),
                "--env-timing",
                str(write_timing(tmp_path / "timing.json")),
            ]
            + ["--readme-block", str(tmp_path / "block.md")]
        )
    finally:
        study._load.cache_clear()
    printed = capsys.readouterr()
    written = [path.read_text() for path in out.iterdir() if path.suffix in (".csv", ".md")]
    for text in [printed.out, printed.err, *written]:
        assert not re.search(r"\bexp\d", text)
    assert {p.name for p in out.glob("*.png")} == {
        "overall_total.png",
        "overall_speedups.png",
        "overhead_windows.png",
        "steady_speedups.png",
        "rollout_rollout_update.png",
        "sizes_compile_modes.png",
        "platforms_tags.png",
        "speedup_vs_env_cost.png",
        "continuous_total.png",
        "continuous_speedups.png",
        "backends_backends.png",  # exp7's gymnax half: overall's and rollout's runs of its envs
        "backends_speedups.png",
        "dtypes_dtypes.png",
    }
    speedups = pd.read_csv(out / "speedups.csv")
    assert set(speedups["experiment"]) == {
        "overall",
        "rollout",
        "sizes",
        "craftax",
        "continuous",
        "backends",
        "dtypes",
    }
    assert set(pd.read_csv(out / "dtype_speedups.csv")["experiment"]) == {"dtypes"}
    summary = pd.read_csv(out / "summary.csv")
    assert "overall backends platforms" in set(summary["experiments"])
    block, report = (tmp_path / "block.md").read_text(), (out / "REPORT.md").read_text()
    assert (
        "(overall: " in block
        and "(continuous: " in block
        and "(backends: " in block
        and "(craftax: " not in block
    )
    assert (
        "### Total-time speedups per tag (platforms)" in report
        and "## Iteration windows (overall," in report
        and "## Data types (dtypes)" in report
    )
    assert not re.search(r"\bexp\d", block + report)


@pytest.mark.parametrize(
    "old,new,named",
    [
        (
            'figures = ["compile_modes"]',
            'figures = ["compile_mode"]',
            "'compile_mode'; valid: total",
        ),
        ('figures = ["compile_modes"]', 'figures = ["tags"]', "lists figure 'tags'"),
        ('figures = ["compile_modes"]', 'figures = ["steady_speedups"]', "listed by exp1 and exp3"),
        # one that would draw exp10's float32 and bfloat16 runs as one
        (
            'figures = ["dtypes"]',
            'figures = ["dtypes", "total"]',
            "exp10 lists figure 'total'; valid: dtypes",
        ),
    ],
)
def test_a_figure_the_analysis_cannot_draw_is_refused(
    tmp_path, monkeypatch, capsys, old, new, named
):
    text = study.DEFAULT_PATH.read_text()
    assert old in text
    (tmp_path / "study.toml").write_text(text.replace(old, new))
    monkeypatch.setenv(study.PATH_VARIABLE, str(tmp_path / "study.toml"))
    study._load.cache_clear()
    try:
        with pytest.raises(SystemExit) as exit_info:
            plot_results.main(
                [
                    "--csv",
                    str(write_runs_csv(tmp_path / "a.csv", [])),
                    "--out",
                    str(tmp_path / "out"),
                ]
            )
    finally:
        study._load.cache_clear()
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert exit_info.value.code == 2 and len(errors) == 1 and named in errors[0]
    assert not (tmp_path / "out").exists()

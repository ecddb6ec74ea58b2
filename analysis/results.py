"""Everything the figures and the report are drawn from, computed once from the runs (the Results),
with the two results that build on the speedups: the data types compared, and why a table has no
data.

The data types compared: each framework's time in one data type against its time in another. Speedup
A -> B between data types = a framework's time in A / its time in B, as between frameworks: bfloat16
-> float32 above 1× means that the framework is faster in float32. In an experiment of several
dtypes (study.toml), every run of a framework in A is paired with every run of the same framework in
B with the same other PAIR_KEYS (env, model size, tag, iterations and batch size), each in the
framework's default compile mode under the metric's sync setting (speedups.speedup_masks), one run
configuration per experiment and size (speedups.one_configuration). A cell (metric, experiment,
backend, size, framework, pair) has the speedup tables' statistics (speedups.cell_statistics). The
framework pairs within each data type are in the speedup tables (their dtype column).

Why a figure's panel or a table has no data, in the words that panel or REPORT.md shows instead of
empty axes: a time of an iteration window is missing when the runs end before the window starts; a
rollout or update time when the run's timers were not synchronised (sync off) or it logged none, and
every time of a run resumed after a stop (loading.is_timed); a speedup when the experiment has no
runs of the metric's sync setting in default compile modes, none with a time for it, or no second
framework to pair with.
"""

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.common import (
    COMPILE_COLUMNS,
    COMPILE_PARTS,
    DTYPE_COLUMNS,
    METRICS,
    in_order,
    metric_sync,
    mode_name,
    split_cell,
)
from analysis.learning import learning_runs, learning_speedups, learning_table
from analysis.loading import agents_scaling, is_timed, summarize, window_column, window_columns
from analysis.speedups import (
    PAIR_KEYS,
    backends_of,
    env_cost_table,
    env_costs,
    experiment_data,
    left_out,
    metric_columns,
    metric_pairs,
    one_configuration,
    paired,
    speedup_masks,
    speedup_table,
    table_rows,
)
from core.study import DTYPES, Study, Window, split_label


@dataclass
class Results:
    study: Study
    summary: pd.DataFrame  # a row per run
    masks: dict[str, pd.Series]  # experiment or platform comparison -> its rows of summary
    envs: list[str]  # cheapest first when timed, else in the study's order
    timing: pd.DataFrame  # sweep/env_timing.py's table (empty without --env-timing)
    pairs: dict[str, pd.DataFrame]  # metric -> the pairs of runs its speedups come from
    speedups: pd.DataFrame  # speedups.csv
    env_cost: pd.DataFrame  # env_cost.csv
    left_out: pd.DataFrame  # runs a metric could use but does not, with the reason
    # dtype_speedups.csv: each framework's time in one data type / in another, per metric and size
    dtype_speedups: pd.DataFrame
    # platform comparison -> tag -> its total-time speedups
    platform_speedups: dict[str, dict[str, pd.DataFrame]]
    # a row per run of a learning experiment: final return, times to the reference's
    learning_runs: pd.DataFrame
    learning_curves: pd.DataFrame  # their smoothed returns per iteration
    # learning.csv: per learning experiment, env and framework, against the reference
    learning: pd.DataFrame
    # learning_speedups.csv: time-to-return speedups per target and pair
    learning_speedups: pd.DataFrame

    def dtype_cells(self, metric: str, experiment: str) -> pd.DataFrame:
        """The rows of dtype_speedups.csv of one metric and experiment."""
        table = self.dtype_speedups
        return table[(table["metric"] == metric) & (table["experiment"] == experiment)]

    def runs(self, experiment: str) -> pd.DataFrame:
        """The summary rows of an experiment (or platform comparison), with their framework/compile
        mode."""
        runs = self.summary[self.masks[experiment]]
        return runs.assign(
            mode=[mode_name(f, c) for f, c in zip(runs["framework"], runs["compile"])]
        )

    def agents_cells(self, experiment: str) -> pd.DataFrame:
        """An experiment's runs in default compile modes as agents_scaling's medians: a row per
        framework, model size and number of agents per process."""
        runs = self.runs(experiment)
        runs = runs[runs["compile"] == runs["framework"].map(self.study.default_compile)]
        return agents_scaling(runs, ["framework", "model_size", "num_agents"])

    def backend_runs(self, experiment: str) -> pd.DataFrame:
        """An experiment's sync-on runs in default compile modes, with each run's env id and backend
        (from its label)."""
        runs = self.runs(experiment)
        default = runs["compile"] == runs["framework"].map(self.study.default_compile)
        runs = runs[runs["sync_timing"].astype(bool) & default]
        labels = [split_label(label) for label in runs["env"]]
        return runs.assign(
            env_id=[env for env, _ in labels], backend=[backend for _, backend in labels]
        )

    def metric_runs(self, metric: str) -> pd.DataFrame:
        """The runs a speedup metric compares, from all its experiments."""
        masks = list(speedup_masks(self.summary, self.masks, self.study, metric).values())
        return self.summary[np.logical_or.reduce(masks)] if masks else self.summary.iloc[:0]

    def compared(self, metric: str) -> list[str]:
        """The experiments a speedup metric compares that have runs for it (metric_runs'
        experiments), in the study's order: what a figure drawn over all of them names."""
        masks = speedup_masks(self.summary, self.masks, self.study, metric)
        return [name for name, mask in masks.items() if mask.any()]

    def cells(self, metric: str, experiment: str) -> pd.DataFrame:
        """The rows of speedups.csv of one metric and experiment."""
        return self.speedups[
            (self.speedups["metric"] == metric) & (self.speedups["experiment"] == experiment)
        ]

    def has_runs(self, name: str) -> bool:
        return bool(self.masks.get(name, pd.Series(dtype=bool)).any())


def env_order(envs, timing: pd.DataFrame, study: Study) -> list[str]:
    """Cheapest env first when timed; envs without timing follow in the study's order (others by
    name)."""
    cost = env_costs(timing)
    timed = sorted((env for env in set(envs) if env in cost), key=lambda env: (cost[env], env))
    return timed + in_order(study.every_env, [env for env in set(envs) if env not in cost])


def platform_tables(
    summary, masks, study: Study, pairs: dict
) -> dict[str, dict[str, pd.DataFrame]]:
    """Per platform comparison with runs, per tag: the total-time speedups of the experiment it
    repeats."""
    tables = {}
    for name, platform in study.platforms.items():
        if not masks[name].any():
            continue
        total = pairs["total"][pairs["total"]["experiment"] == platform.repeats]
        tags = sorted(summary.loc[masks[name], "tag"].unique())
        tables[name] = {
            tag: speedup_table({"total": total[total["tag"] == tag]}, study) for tag in tags
        }
    return tables


def analyse(runs: pd.DataFrame, timing: pd.DataFrame, study: Study) -> Results:
    """The summary, the pairs, the speedup and env-cost tables and what was left out, from the tidy
    runs table."""
    summary, masks = summarize(runs, timing, study)
    split = {metric: metric_pairs(summary, masks, study, metric) for metric in METRICS}
    pairs = {metric: pooled for metric, (pooled, _) in split.items()}
    not_pooled = {metric: rest for metric, (_, rest) in split.items()}
    learned, curves = learning_runs(runs, summary, masks, study)
    return Results(
        study=study,
        summary=summary,
        masks=masks,
        envs=env_order(summary["env"], timing, study),
        timing=timing,
        pairs=pairs,
        speedups=speedup_table(pairs, study),
        env_cost=env_cost_table(pairs, timing, study),
        left_out=left_out(summary, masks, study, pairs, not_pooled),
        dtype_speedups=dtype_table(summary, masks, study),
        platform_speedups=platform_tables(summary, masks, study, pairs),
        learning_runs=learned,
        learning_curves=curves,
        learning=learning_table(learned, study),
        learning_speedups=learning_speedups(learned, study),
    )


def dtype_pair_names(dtypes: tuple[str, ...]) -> list[tuple[str, str]]:
    """Every pair A -> B of an experiment's data types with B listed before A in DTYPES (bfloat16 ->
    float32)."""
    ordered = [dtype for dtype in DTYPES if dtype in dtypes]
    return [(a, b) for b, a in itertools.combinations(ordered, 2)]


def dtype_pairs(summary: pd.DataFrame, masks: dict, study: Study, metric: str) -> pd.DataFrame:
    """The pairs of runs (one framework, two data types) of a metric, from each experiment of
    several dtypes. Their dtype column holds the pair, "bfloat16->float32", so that
    speedups.clusters_of groups them by env and tag."""
    column = metric_columns(study)[metric]
    keys = [key for key in PAIR_KEYS if key != "dtype"] + ["framework"]
    frames = []
    for experiment, mask in speedup_masks(summary, masks, study, metric).items():
        data = experiment_data(summary, mask, column, experiment)
        pairs = dtype_pair_names(study.experiments[experiment].dtypes)
        for frame in paired(data, column, "dtype", pairs, keys, np.divide):
            frames.append(frame.assign(dtype=frame["pair"]))
    frames = [frame for frame in frames if not frame.empty]
    if not frames:
        return pd.DataFrame(columns=[*keys, "dtype", "pair", "run_a", "run_b", "a", "b", "value"])
    return one_configuration(pd.concat(frames, ignore_index=True))[0]


def dtype_table(summary: pd.DataFrame, masks: dict, study: Study) -> pd.DataFrame:
    """dtype_speedups.csv: a row per metric, experiment, backend, size, framework and data-type pair
    with pairs of runs, in the study's orders, with cell_statistics' columns."""
    rows = []
    for metric in METRICS:
        ratios = dtype_pairs(summary, masks, study, metric)
        keys = (
            {
                "experiment": experiment,
                "backend": backend,
                "size": size,
                "framework": fw,
                "pair": pair,
            }
            for experiment, exp in study.experiments.items()
            for backend, size, fw, pair in itertools.product(
                exp.backends,
                study.sizes,
                study.frameworks,
                [f"{a}->{b}" for a, b in dtype_pair_names(exp.dtypes)],
            )
        )
        rows += table_rows(metric, ratios.assign(backend=backends_of(ratios)), keys)
    return pd.DataFrame(rows, columns=DTYPE_COLUMNS)


def dtype_experiments(study: Study) -> list[str]:
    """The experiments of several data types, in the study's order."""
    return [name for name, exp in study.experiments.items() if len(exp.dtypes) > 1]


def window_of(column: str, study: Study) -> Window:
    """The iteration window of a summary column: its own (iters8plus_s), else the steady one
    (rollout8plus_s)."""
    return window_columns(study).get(column, study.steady)


def counts(runs: pd.DataFrame) -> str:
    """The runs' numbers of iterations, in words: "6", "2 to 6"."""
    low, high = int(runs["num_iterations"].min()), int(runs["num_iterations"].max())
    return str(low) if low == high else f"{low} to {high}"


def too_short(runs: pd.DataFrame, window: Window) -> str:
    """Why no run reaches a window, e.g. "the steady window (iterations 8+) needs runs of 9 or more
    iterations; these have 6"."""
    return (
        f"the {window.name} window ({window.label}) needs runs of {window.first + 1} or more "
        "iterations; "
        f"these have {counts(runs)}"
    )


def short_note(runs: pd.DataFrame, window: Window) -> str:
    """too_short in a few words, for a column of a panel."""
    have = counts(runs)
    return (
        f"no run reaches\niteration {window.first}\n({have} iteration{'' if have == '1' else 's'})"
    )


def missing_time(runs: pd.DataFrame, column: str, study: Study) -> str:
    """Why none of `runs` (not empty) has a time in `column` (a window's, or the steady rollout or
    update)."""
    window = window_of(column, study)
    if not is_timed(runs).any():
        return (
            "these runs were resumed after a stop: a second start is in their times, "
            "which are not compared"
        )
    if (runs["num_iterations"] <= window.first).all():
        return too_short(runs, window)
    if column not in window_columns(study) and not runs["sync_timing"].astype(bool).any():
        return "rollout and update are timed only in sync-on runs (--sync-timing)"
    return f"no run logged a time for {window.label}"


def missing_pairs(runs: pd.DataFrame, column: str, study: Study) -> str:
    """Why `runs` (not empty: those a comparison could pair) give no pair of runs with a time in
    `column`."""
    timed = runs[runs[column].notna()]
    if timed.empty:
        return missing_time(runs, column, study)
    frameworks = in_order(study.frameworks, timed["framework"])
    if len(frameworks) < 2:
        return f"only {frameworks[0]} has runs; a pair needs two frameworks"
    return (
        "no runs of two frameworks share an env, model size, tag, number of iterations, batch size "
        "and "
        "machine (host and device)"
    )


def sync_words(metric: str) -> str:
    return f"sync-{'on' if metric_sync(metric) else 'off'}"


def speedup_gap(results, experiment: str, metric: str, size: str = "") -> str:
    """Why an experiment (of one model size, when given) has no speedups of a metric."""
    study = results.study
    masks = speedup_masks(results.summary, results.masks, study, metric)
    if experiment not in masks:
        return f"{experiment} has no {sync_words(metric)} runs"
    runs = results.summary[masks[experiment]]
    runs = runs[runs["model_size"] == size] if size else runs
    if runs.empty:
        return f"no {sync_words(metric)} runs of {experiment} in default compile modes"
    return missing_pairs(runs, metric_columns(study)[metric], study)


def env_cost_gap(results, metric: str, size: str = "") -> str:
    """Why the speedup-against-env-cost figure has no point of a metric (of one model size, when
    given)."""
    pairs = results.pairs[metric]
    pairs = pairs[pairs["model_size"] == size] if size else pairs
    if not pairs.empty:
        return "no env of these pairs of runs has a measured step cost (env_timing.json)"
    runs = results.metric_runs(metric)
    runs = runs[runs["model_size"] == size] if size else runs
    if runs.empty:
        return f"no {sync_words(metric)} runs in default compile modes"
    return missing_pairs(runs, metric_columns(results.study)[metric], results.study)


def times_table(results: Results, name: str) -> pd.DataFrame:
    """Per model size, env, tag and framework (a row), rollout + update seconds per iteration in
    each data type (a column): the steady window's mean of the sync-on runs in default compile
    modes, the median over seeds."""
    study, runs = results.study, results.backend_runs(name)
    parts = [window_column(study.steady, part) for part in ("rollout", "update")]
    keys = ["model_size", "env", "tag", "framework", "dtype"]
    medians = runs.groupby(keys)[parts].median().dropna()
    if medians.empty:
        return pd.DataFrame()
    cells = pd.Series(
        [split_cell(times) for times in medians.to_numpy()], index=medians.index, dtype=object
    )
    wide = cells.unstack("dtype")
    rows = [
        (size, env, tag, framework)
        for size in study.sizes
        for env in results.envs
        for tag in sorted(set(wide.index.get_level_values("tag")))
        for framework in study.frameworks
        if (size, env, tag, framework) in wide.index
    ]
    wide = wide.reindex(index=rows, columns=in_order(DTYPES, wide.columns))
    return wide.rename_axis(["size", "env", "tag", "framework"]).reset_index()


def machines_table(summary: pd.DataFrame) -> pd.DataFrame:
    columns = ["tag", "hostname", "device_name", "platform", "cpu_bf16", "framework", "versions"]
    cells = summary[columns].astype(object).where(summary[columns].notna(), "")
    table = cells.groupby(columns).size().rename("runs").reset_index()
    return table.rename(columns={"device_name": "device", "cpu_bf16": "native bfloat16"})


def windows_table(results: Results) -> pd.DataFrame:
    runs = results.runs(results.study.headline)
    columns = {
        "setup_s": "setup (s)",
        **{c: f"{w.label} (s/iter)" for c, w in window_columns(results.study).items()},
        "total_s": "total (s)",
    }
    table = (
        runs.groupby(["framework", "model_size"])[list(columns)]
        .median()
        .rename(columns=columns)
        .reset_index()
    )
    key = {v: i for i, v in enumerate([*results.study.frameworks, *results.study.sizes])}
    return table.sort_values(["model_size", "framework"], key=lambda s: s.map(key)).rename(
        columns={"model_size": "size"}
    )


def compile_table(results: Results) -> pd.DataFrame:
    """Per tag, device, framework and model size: the runs that recorded compile_s, and the medians
    of their set-up, iteration 0 and compile seconds per jitted function; empty when none did."""
    summary = results.summary
    columns = [c for c in COMPILE_COLUMNS if c in summary]
    if not columns:
        return pd.DataFrame()
    runs = summary[summary[columns].notna().any(axis=1)]
    keys = ["tag", "device_name", "framework", "model_size"]
    # the study's first window: iteration 0, where the compilation is
    first, window = next(iter(window_columns(results.study).items()))
    named = {"setup_s": "setup (s)", first: f"{window.label} (s)"}
    for part, column in zip(COMPILE_PARTS, COMPILE_COLUMNS):
        if column in columns:
            named[column] = f"compile: {part} (s)"
    grouped = runs.groupby(keys)
    table = grouped[list(named)].median().rename(columns=named)
    table.insert(0, "runs", grouped.size())
    order = {v: i for i, v in enumerate([*results.study.frameworks, *results.study.sizes])}
    table = table.reset_index().sort_values(
        ["tag", "device_name", "model_size", "framework"],
        key=lambda s: s.map(order) if s.name in ("model_size", "framework") else s,
    )
    return table.rename(columns={"model_size": "size", "device_name": "device"})


def env_table(results: Results) -> pd.DataFrame:
    table = results.timing.reindex(results.envs).reset_index(names="env")
    runs = results.summary.groupby("env").size()
    # integers stay integers, and a cost in the thousands reads 8,027×, not 8.03e+03
    table = table.astype({"obs_dim": "Int64", "num_actions": "Int64"})
    table["ratio"] = table["ratio"].map(
        lambda c: c if pd.isna(c) else f"{c:.3g}×" if c < 1000 else f"{c:,.0f}×"
    )
    return table.assign(runs=table["env"].map(runs).fillna(0).astype(int)).rename(
        columns={
            "obs_dim": "obs dim",
            "num_actions": "actions",
            "ms_per_step": "ms per step",
            "ratio": "relative cost",
        }
    )

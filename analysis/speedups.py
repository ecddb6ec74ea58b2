"""Pairs of runs -> the speedup tables, the speedups against env cost, and the runs left out of
them.

Speedup A -> B = time of A / time of B, over every pair of runs of frameworks A and B with the same
PAIR_KEYS: one experiment (runs are never paired across experiments), env, model size, data type,
tag, number of iterations, batch size and machine (host and device: runs of two machines are never
paired; the seeds of one machine are), each framework in its default compile mode, under the
metric's sync setting. A cluster of the interval's bootstrap is an env on one machine (one tag,
...): the pairs of a cell whose runs come from two machines form two clusters per env. A table cell
(metric, experiment, backend, dtype, size, pair) pools the envs of one env backend (an experiment of
several, e.g. the same envs on gymnax and on envpool, gets a cell per backend: the question it asks
is how the backends differ) and the pairs of one run configuration (iterations and batch size):
where an experiment's runs of one size come in several, the one with the most envs (then the most
pairs, then the longest runs, then the largest batch) makes the cells and the others are left out,
as are the runs that found no run to pair with; the report lists both.
"""

import itertools

import numpy as np
import pandas as pd

from analysis.common import (
    CONFIGURATION,
    ENV_COST_COLUMNS,
    PAIR_KEYS,
    SPEEDUP_COLUMNS,
    VARIANTS,
    experiment_variants,
    metric_sync,
)
from analysis.loading import window_column
from analysis.stats import (
    MIN_CORRELATION_ENVS,
    cluster_bootstrap_ci,
    cost_correlation,
    exp,
    geometric_mean,
    log,
)
from core.study import Study, split_label

# sync off: every env of the study, the expensive ones included
ENV_COST_METRICS = ("total", "steady")
LEFT_OUT_COLUMNS = ["metric", "experiment", "run", "reason"]
UNPAIRED = (
    "no run of another framework with the same env, size, data type, tag, iterations, batch size "
    "and machine "
    "(host and device)"
)


# ------------------------------------------------------------------------------------------ metrics
def metric_columns(study: Study) -> dict[str, str]:
    """speedup metric -> summary column."""
    return {
        "total": "total_s",
        "steady": window_column(study.steady),
        "rollout": window_column(study.steady, "rollout"),
        "update": window_column(study.steady, "update"),
    }


def metric_experiments(study: Study, metric: str) -> list[str]:
    """The experiments a metric is compared in, each on its own: those with runs under the metric's
    sync setting."""
    return [name for name, exp in study.experiments.items() if metric_sync(metric) in exp.syncs]


def speedup_masks(
    summary: pd.DataFrame, masks: dict, study: Study, metric: str
) -> dict[str, pd.Series]:
    """experiment -> the runs a speedup metric is computed from: the default compile mode of each
    framework, under the metric's sync setting (an experiment may have runs of both)."""
    chosen = (summary["compile"] == summary["framework"].map(study.default_compile)) & (
        summary["sync_timing"].astype(bool) == metric_sync(metric)
    )
    return {
        name: masks[name] & chosen for name in metric_experiments(study, metric) if name in masks
    }


# -------------------------------------------------------------------------------------------- pairs
def pairwise(
    summary: pd.DataFrame, column: str, masks: dict, study: Study, op=np.divide
) -> pd.DataFrame:
    """op(A, B) over every pair of runs of frameworks A and B with the same PAIR_KEYS, for each pair
    A->B. masks: experiment -> the runs of that experiment to pair. run_a, run_b: the runs' rows in
    summary."""
    columns = [*PAIR_KEYS, "pair", "run_a", "run_b", "a", "b", "value"]
    frames = []
    for experiment, mask in masks.items():
        data = experiment_data(summary, mask, column, experiment)
        frames += paired(data, column, "framework", study.pairs, PAIR_KEYS, op)
    frames = [frame for frame in frames if not frame.empty]
    return (
        pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)
    )


def experiment_data(summary: pd.DataFrame, mask, column: str, experiment: str) -> pd.DataFrame:
    """The rows of an experiment's runs that have a time in column: the PAIR_KEYS, framework, run
    (its summary row) and the time."""
    keys = [key for key in PAIR_KEYS if key != "experiment"]
    data = summary.loc[mask & summary[column].notna(), [*keys, "framework", "run", column]]
    data = data.sort_values("run", kind="stable").assign(experiment=experiment)
    # folder names may repeat (other tags, other machines); summary rows do not
    data["run"] = data.index
    return data


def paired(data: pd.DataFrame, column: str, side: str, pairs, keys: list, op) -> list:
    """Per pair (a, b) of pairs: op(A, B) over every pair of a run whose `side` (framework, dtype)
    is a with one whose `side` is b and the same keys; the rows' keys, run_a, run_b, a, b, value and
    pair "a->b"."""
    # one merge of the runs with themselves for every pair: it keeps the left rows' order (then
    # the right ones'), so each pair's rows come as from a merge of its own two sides
    both = data.merge(data, on=keys, suffixes=("_a", "_b"))
    frames = []
    for a, b in pairs:
        rows = both[(both[f"{side}_a"] == a) & (both[f"{side}_b"] == b)]
        values_a, values_b = (
            rows[f"{column}_a"].to_numpy(float),
            rows[f"{column}_b"].to_numpy(float),
        )
        frames.append(
            rows[[*keys, "run_a", "run_b"]].assign(
                pair=f"{a}->{b}", a=values_a, b=values_b, value=op(values_a, values_b)
            )
        )
    return frames


def one_configuration(ratios: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(pooled, not pooled): per experiment and model size, the pairs of the run configuration with
    the most envs, then the most pairs, then the longest runs and the largest batch; and the pairs
    of every other configuration."""
    if ratios.empty:
        return ratios, ratios
    cell, by = ["experiment", "model_size"], ["experiment", "model_size", *CONFIGURATION]
    envs = (
        ratios.drop_duplicates([*by, "env", "tag"]).groupby(by, dropna=False).size().rename("envs")
    )
    ranking = pd.concat(
        [envs, ratios.groupby(by, dropna=False).size().rename("pairs")], axis=1
    ).reset_index()
    ranking = ranking.sort_values(["envs", "pairs", *CONFIGURATION], ascending=False, kind="stable")
    chosen = ranking.drop_duplicates(cell)[by].assign(pooled=True)
    pooled = ratios[by].merge(chosen, how="left", on=by)["pooled"].fillna(False).to_numpy(bool)
    return ratios[pooled], ratios[~pooled]


def metric_pairs(
    summary: pd.DataFrame, masks: dict, study: Study, metric: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pairs of runs a metric's speedups come from, and those left out (another run
    configuration)."""
    ratios = pairwise(
        summary, metric_columns(study)[metric], speedup_masks(summary, masks, study, metric), study
    )
    return one_configuration(ratios)


def clusters_of(ratios: pd.DataFrame) -> list[tuple[np.ndarray, np.ndarray]]:
    """The times of the runs of A and of B (each run once, in run order) of each cluster (same
    PAIR_KEYS: one env, tag, machine and experiment) of some pair rows, in the clusters' order."""
    if ratios.empty:
        return []
    # each row's cluster, numbered in the clusters' sorted order: one grouping for every cluster
    cluster = ratios.groupby(PAIR_KEYS, sort=True, dropna=False).ngroup().to_numpy()
    sides = []
    for run, time in (("run_a", "a"), ("run_b", "b")):
        runs = pd.DataFrame(
            {
                "cluster": cluster,
                "run": ratios[run].to_numpy(),
                "time": ratios[time].to_numpy(float),
            }
        )
        runs = runs.drop_duplicates(["cluster", "run"]).sort_values(["cluster", "run"])
        starts = np.flatnonzero(np.diff(runs["cluster"].to_numpy())) + 1
        sides.append(np.split(runs["time"].to_numpy(float), starts))
    return list(zip(*sides))


def several_machines(pairs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The speedup cells whose pairs of runs come from two or more machines (each pair from one): a
    row per metric, experiment, backend, dtype and size, with its machines ("host (device)", sorted)
    as one text."""
    rows = []
    for metric, ratios in pairs.items():
        cells = ratios.assign(backend=backends_of(ratios)).groupby(
            ["experiment", *VARIANTS, "model_size"], sort=False
        )
        for (experiment, *variant, size), cell in cells:
            machines = sorted(
                set(
                    f"{host} ({device})"
                    for host, device in zip(cell["hostname"], cell["device_name"])
                )
            )
            if len(machines) > 1:
                rows.append([metric, experiment, *variant, size, ", ".join(machines)])
    return pd.DataFrame(rows, columns=["metric", "experiment", *VARIANTS, "size", "machines"])


# ----------------------------------------------------------------------------------------- speedups
def backends_of(ratios: pd.DataFrame) -> pd.Series:
    """The env backend of each pair of runs (from its env label)."""
    return ratios["env"].map(lambda label: split_label(label)[1])


def cell_statistics(cell: pd.DataFrame) -> dict:
    """geomean, median, ci_low, ci_high (cluster bootstrap; NaN under MIN_CLUSTERS clusters),
    n_pairs, n_clusters of the pairs of runs of one table cell."""
    values = cell["value"].to_numpy(float)
    clusters = clusters_of(cell)
    low, high = cluster_bootstrap_ci(clusters)
    return {
        "geomean": geometric_mean(values),
        "median": float(np.median(values)),
        "ci_low": low,
        "ci_high": high,
        "n_pairs": len(values),
        "n_clusters": len(clusters),
    }


def table_rows(metric: str, ratios: pd.DataFrame, keys) -> list[dict]:
    """A table's rows of one metric: per key (a table's column -> value; "size" is the pairs'
    model_size; every key has the same columns) whose cell has pairs of runs, in the keys' order,
    the metric, the key and cell_statistics' columns. ratios: pairs with their backend."""
    keys = list(keys)
    if not keys or ratios.empty:
        return []
    # grouped once: a cell is the group of its key's values (its rows in ratios' order), not
    # ratios filtered again per key of the tables' product
    by = ["model_size" if column == "size" else column for column in keys[0]]
    cells = dict(iter(ratios.groupby(by, sort=False)))
    return [
        {"metric": metric, **key, **cell_statistics(cells[values])}
        for key in keys
        if (values := tuple(key.values())) in cells
    ]


def speedup_table(pairs: dict[str, pd.DataFrame], study: Study) -> pd.DataFrame:
    """A row per metric, experiment, backend, dtype, size and pair (combinations without pairs are
    left out), in the study's orders, with cell_statistics' columns. pairs: metric -> its pooled
    pairs of runs (metric_pairs)."""
    rows = []
    for metric, ratios in pairs.items():
        keys = (
            {"experiment": experiment, **dict(zip(VARIANTS, variant)), "size": size, "pair": pair}
            for experiment in metric_experiments(study, metric)
            for variant, size, pair in itertools.product(
                experiment_variants(study.experiments[experiment]), study.sizes, study.pair_names
            )
        )
        rows += table_rows(metric, ratios.assign(backend=backends_of(ratios)), keys)
    return pd.DataFrame(rows, columns=SPEEDUP_COLUMNS)


def left_out(
    summary: pd.DataFrame,
    masks: dict,
    study: Study,
    pooled: dict[str, pd.DataFrame],
    not_pooled: dict,
) -> pd.DataFrame:
    """The runs each metric's speedups could use (in an experiment of the metric, default compile
    mode, its sync setting, a time for it) but do not, with the reason: a row per metric, experiment
    and run (a summary row)."""
    rows = []
    for metric, ratios in pooled.items():
        column = metric_columns(study)[metric]
        for experiment, mask in speedup_masks(summary, masks, study, metric).items():
            used = runs_in(ratios, experiment)
            cells = (
                ratios[ratios["experiment"] == experiment]
                .drop_duplicates("model_size")
                .set_index("model_size")
            )
            for run in summary.index[mask & summary[column].notna()]:
                if run in used:
                    continue
                size = summary.at[run, "model_size"]
                if run in runs_in(not_pooled[metric], experiment) and size in cells.index:
                    kept = cells.loc[size]
                    reason = (
                        f"not pooled: its cell holds runs of {int(kept['num_iterations'])} "
                        "iterations, batch "
                        f"{int(kept['batch_size'])} (more envs); other lengths and batch sizes are "
                        "never pooled"
                    )
                else:
                    reason = f"unpaired: {UNPAIRED}"
                rows.append(
                    {"metric": metric, "experiment": experiment, "run": run, "reason": reason}
                )
    return pd.DataFrame(rows, columns=LEFT_OUT_COLUMNS)


def runs_in(ratios: pd.DataFrame, experiment: str) -> set:
    mine = ratios[ratios["experiment"] == experiment]
    return set(mine["run_a"]) | set(mine["run_b"])


# ------------------------------------------------------------------------- speedup against env cost
def env_costs(timing: pd.DataFrame) -> pd.Series:
    """env -> its step cost relative to the cheapest env (sweep/env_timing.py's ratio); empty
    without timing."""
    return timing["ratio"].dropna() if "ratio" in timing else pd.Series(dtype=float)


def env_speedups(ratios: pd.DataFrame, timing: pd.DataFrame) -> pd.DataFrame:
    """One point per env (per tag) of a metric's pooled pairs, per pair and size: the geometric mean
    speedup over the env's pairs of runs, and the env's step cost. Envs without a measured cost are
    left out."""
    cost = env_costs(timing)
    ratios = ratios[ratios["env"].isin(cost.index)].assign(log=lambda r: log(r["value"]))
    points = ratios.groupby([*PAIR_KEYS, "pair"], dropna=False)["log"].mean().reset_index()
    return points.assign(speedup=exp(points["log"]), cost=points["env"].map(cost)).drop(
        columns="log"
    )


def cost_trend(row) -> str:
    """Words for a correlation: named only when the interval of rho excludes 0; "shrinks" = towards
    1x."""
    if row["n_envs"] < MIN_CORRELATION_ENVS:
        return f"too few envs (under {MIN_CORRELATION_ENVS})"
    if np.isnan(row["rho"]):
        return "no correlation: every env has the same speedup (or cost)"
    if row["rho_low"] <= 0 <= row["rho_high"]:
        return "no clear trend (the interval of rho holds 0)"
    falls = row["rho_high"] < 0
    towards_one = falls == (row["geomean"] > 1)
    direction = "falls" if falls else "rises"
    return (
        f"{direction} with env cost: {'shrinks towards' if towards_one else 'grows away from'} 1×"
    )


def env_cost_table(
    pairs: dict[str, pd.DataFrame], timing: pd.DataFrame, study: Study
) -> pd.DataFrame:
    """A row per metric, size and pair with points: n_envs, geomean over the envs, rho and slope
    with their intervals, trend."""
    rows = []
    for metric in ENV_COST_METRICS:
        points = env_speedups(pairs[metric], timing)
        for size, pair in ((size, pair) for size in study.sizes for pair in study.pair_names):
            cell = points[(points["model_size"] == size) & (points["pair"] == pair)]
            if cell.empty:
                continue
            row = {
                "metric": metric,
                "size": size,
                "pair": pair,
                "n_envs": len(cell),
                "geomean": geometric_mean(cell["speedup"]),
                **cost_correlation(cell["cost"], cell["speedup"]),
            }
            rows.append({**row, "trend": cost_trend(row)})
    return pd.DataFrame(rows, columns=ENV_COST_COLUMNS)


# runs of each framework a speedup cell needs before it reads as a result, not a single measurement
# (a smoke sweep)
MIN_RUNS = 3
CELL_KEYS = ["metric", "experiment", *VARIANTS, "size", "pair"]


def few_runs_cells(pairs: dict[str, pd.DataFrame], speedups: pd.DataFrame) -> pd.DataFrame:
    """The rows of speedups (a speedup table's cells) whose pairs come from fewer than MIN_RUNS runs
    of A or of B. pairs: metric -> the pairs of runs its speedups come from (Results.pairs)."""
    counts = [
        ratios.assign(metric=metric, backend=backends_of(ratios), size=ratios["model_size"])
        .groupby(CELL_KEYS)[["run_a", "run_b"]]
        .nunique()
        .min(axis=1)
        .rename("runs")
        .reset_index()
        for metric, ratios in pairs.items()
        if not ratios.empty
    ]
    if not counts or speedups.empty:
        return speedups.iloc[:0]
    cells = speedups.merge(pd.concat(counts), on=CELL_KEYS, how="left")
    return speedups[(cells["runs"] < MIN_RUNS).to_numpy()]


# the README's tables, of study.tables; REPORT.md has every metric, experiment
HEADLINE_METRICS = ("total", "steady")


def headline(speedups: pd.DataFrame, study: Study) -> pd.DataFrame:
    """The rows of the README's tables: the total-time and steady-state speedups of the experiments
    of study.tables, experiment by experiment in that order."""
    rows = speedups[
        speedups["metric"].isin(HEADLINE_METRICS) & speedups["experiment"].isin(study.tables)
    ]
    return rows.sort_values("experiment", key=lambda e: e.map(study.tables.index), kind="stable")

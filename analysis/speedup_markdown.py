"""The speedup tables and the speedup-against-env-cost tables in markdown, with the words that say what they hold
(REPORT.md, and the README block's speedup tables)."""

import numpy as np
import pandas as pd

from analysis.markdown import NO_INTERVAL, pair_by_size_table
from analysis.speedups import backends_of, metric_experiments, metric_sync
from analysis.stats import (
    BOOTSTRAP_LEVEL,
    BOOTSTRAP_RESAMPLES,
    MIN_CLUSTERS,
    MIN_CORRELATION_ENVS,
)
from sweep.study import Study


def metric_name(metric: str, study: Study) -> str:
    steady = study.steady.label
    return {
        "total": "Total time",
        "steady": f"Steady state, mean time/iteration over {steady}",
        "rollout": f"Rollout, mean over {steady}",
        "update": f"Update, mean over {steady}",
    }[metric]


def metric_title(
    metric: str, experiment: str, study: Study, backend: str = "", dtype: str = ""
) -> str:
    """A table's title: the metric, the experiment and, for an experiment of several env backends or data types, the
    backend of the table's envs and the data type of its runs."""
    exp = study.experiments[experiment]
    modes = "; speedups between default compile modes" if exp.all_compile_modes else ""
    sync = "on" if metric_sync(metric) else "off"
    where = on_backend(experiment, backend, study, "; ") + in_dtype(experiment, dtype, study, "; ")
    return f"{metric_name(metric, study)} ({experiment}: {exp.title}{where}; sync {sync}{modes})"


def on_backend(experiment: str, backend: str, study: Study, separator: str) -> str:
    """ ", its envs on envpool" for an experiment of several env backends (its tables are per backend), else ""."""
    return (
        f"{separator}its envs on {backend}"
        if len(study.experiments[experiment].backends) > 1
        else ""
    )


def in_dtype(experiment: str, dtype: str, study: Study, separator: str) -> str:
    """ "; in bfloat16" for an experiment of several data types (its tables are per data type), else ""."""
    return f"{separator}in {dtype}" if len(study.experiments[experiment].dtypes) > 1 else ""


def speedup_intro(study: Study) -> str:
    unsynced, synced = (
        ", ".join(metric_experiments(study, "total")),
        ", ".join(metric_experiments(study, "rollout")),
    )
    return (
        "Speedup A → B = time of A / time of B (above 1×: B is faster), over every pair of runs of A and B with the "
        "same env, model size, data type and tag within one experiment (runs are never paired across experiments), each "
        f"framework in its default compile mode. Total time and steady state ({study.steady.label}) come from each "
        f"sync-off experiment on its own ({unsynced}), rollout and update from each sync-on one ({synced}); never "
        "pooled; an experiment of several env backends has a table per backend, of its envs on that backend. "
        f"Cells: geometric mean of the ratios [{BOOTSTRAP_LEVEL:.0%} cluster-bootstrap interval]; median; "
        "pairs / envs (an env measured under several tags counts once per tag). The interval resamples envs with "
        "replacement, then, within each drawn env, the runs of A and of B with replacement, recomputes the geometric "
        f"mean ({BOOTSTRAP_RESAMPLES:,} resamples, seeded) and takes its 2.5th and 97.5th percentiles; "
        f"{NO_INTERVAL} = fewer than {MIN_CLUSTERS} envs, too few for an interval."
    )


# runs of each framework a speedup cell needs before it reads as a result, not a single measurement (a smoke sweep)
MIN_RUNS = 3
CELL_KEYS = ["metric", "experiment", "backend", "dtype", "size", "pair"]


def few_runs_cells(pairs: dict[str, pd.DataFrame], speedups: pd.DataFrame) -> pd.DataFrame:
    """The rows of speedups (a speedup table's cells) whose pairs come from fewer than MIN_RUNS runs of A or of B.
    pairs: metric -> the pairs of runs its speedups come from (Results.pairs)."""
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


def few_runs_warning(few: pd.DataFrame, cells: pd.DataFrame) -> str:
    """One line for the top of REPORT.md or the README block when some of its speedup cells (cells) come from
    fewer than MIN_RUNS runs a framework (few, of few_runs_cells); "" when none do."""
    if few.empty:
        return ""
    runs = f"fewer than {MIN_RUNS} runs a framework"
    if len(few) == len(cells):
        return (
            f"**Not a result:** {'the' if len(cells) == 1 else f'all {len(cells)}'} speedup "
            f"cell{'s' * (len(cells) != 1)} below {'has' if len(cells) == 1 else 'have'} {runs} (a smoke sweep, or "
            "too few seeds and envs): each speedup is a single measurement, not an estimate."
        )
    tables = few.groupby("experiment", sort=False)["metric"].agg(
        lambda m: ", ".join(dict.fromkeys(m))
    )
    where = "; ".join(f"{experiment}: {metrics}" for experiment, metrics in tables.items())
    return (
        f"**Not a result, in part:** {len(few)} of the {len(cells)} speedup cells below have {runs} ({where}): "
        "read those as single measurements, not estimates."
    )


def speedup_cell(row) -> str:
    interval = NO_INTERVAL if np.isnan(row.ci_low) else f"{row.ci_low:.2f}, {row.ci_high:.2f}"
    pairs, envs = int(row.n_pairs), int(row.n_clusters)
    counts = f"{pairs} pair{'s' * (pairs != 1)} / {envs} env{'s' * (envs != 1)}"
    return f"**{row.geomean:.2f}×** [{interval}]; median {row.median:.2f}; {counts}"


def speedup_markdown(speedups: pd.DataFrame, study: Study, intro: bool = True) -> str:
    """The speedup tables: per metric and experiment, a row per pair and a column per size."""
    if speedups.empty:
        return "_No pairs of runs to compare._\n"
    blocks = [speedup_intro(study)] if intro else []
    for (metric, experiment, backend, dtype), table in speedups.groupby(
        ["metric", "experiment", "backend", "dtype"], sort=False
    ):
        title = metric_title(metric, experiment, study, backend, dtype)
        blocks.append(f"**{title}**\n\n" + pair_by_size_table(table, speedup_cell, study))
    return "\n\n".join(blocks) + "\n"


# -------------------------------------------------------------------------------- speedup against env cost
def env_cost_intro(study: Study) -> str:
    experiments = " and ".join(metric_experiments(study, "total"))
    return (
        f"Does a speedup shrink as the env's step gets more expensive? Per pair and model size, one point per env of "
        f"{experiments} (sync off, default compile modes; an env under several tags counts once per tag): its "
        "geometric mean speedup, against the env's step cost measured by sweep/env_timing.py. **ρ**: Spearman's rank "
        "correlation of speedup and env cost (below 0: the speedup falls as the env gets costlier); **slope**: the "
        "least-squares fit of log speedup on log cost, as the factor by which the speedup changes per tenfold env "
        "cost (the few expensive envs weigh heavily on it; ρ, on ranks, does not). Intervals: "
        f"{BOOTSTRAP_LEVEL:.0%} percentile bootstrap, envs resampled with replacement ({BOOTSTRAP_RESAMPLES:,} "
        "resamples, seeded). The trend is named only when the interval of ρ excludes 0; *shrinks* = moves towards 1×. "
        f"{NO_INTERVAL} = fewer than {MIN_CORRELATION_ENVS} envs."
    )


def env_cost_cell(row) -> str:
    envs = f"{int(row.n_envs)} env{'s' * (row.n_envs != 1)}"
    if np.isnan(row.rho):
        return f"{NO_INTERVAL} ({envs}: {row.trend}); geomean {row.geomean:.2f}×"
    return (
        f"ρ **{row.rho:+.2f}** [{row.rho_low:+.2f}, {row.rho_high:+.2f}]; ×{10**row.slope:.2f} per 10× cost "
        f"[{10**row.slope_low:.2f}, {10**row.slope_high:.2f}]; {envs}: {row.trend}"
    )


def env_cost_markdown(table: pd.DataFrame, timed: bool, study: Study) -> str:
    """The correlation tables: per metric, a row per pair and a column per size."""
    if not timed:
        return "_No env timing given (`--env-timing`): no env costs to correlate with._\n"
    if table.empty:
        return f"_No pairs of runs of {' or '.join(metric_experiments(study, 'total'))} with a measured env cost._\n"
    blocks = [env_cost_intro(study)]
    for metric, rows in table.groupby("metric", sort=False):
        blocks.append(
            f"**{metric_name(metric, study)}**\n\n" + pair_by_size_table(rows, env_cost_cell, study)
        )
    return "\n\n".join(blocks) + "\n"

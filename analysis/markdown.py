"""The analysis' tables in markdown (with report.py, the only modules that write markdown): the
speedup and speedup-against-env-cost tables with the words that say what they hold, the learning
experiments (the README's learning block and REPORT.md's section), and the experiments of several
data types (each framework's seconds per iteration in each data type, and its speedups between
them). The numbers come from speedups.py, learning.py and results.py.

Text from outside (tags, hosts, platforms, devices, versions, env names, run folders, skip reasons)
goes through analysis/common.py: it reads as itself, never as markdown or HTML, and never breaks a
table.
"""

import numpy as np
import pandas as pd

from analysis.common import (
    METRICS,
    VARIANTS,
    in_order,
    markdown_table,
    metric_name,
    metric_sync,
    metric_title,
    mode_name,
    pretty_pair,
)
from analysis.learning import (
    SMOOTHING,
    TARGET_LABELS,
    TARGETS,
    learning_experiments,
    learning_selection,
)
from analysis.loading import agents_scaling
from analysis.results import Results, dtype_experiments, times_table
from analysis.speedups import metric_experiments
from analysis.stats import (
    BOOTSTRAP_LEVEL,
    BOOTSTRAP_RESAMPLES,
    MIN_CLUSTERS,
    MIN_CORRELATION_ENVS,
)
from core.study import Study

NO_INTERVAL = "–"


def pair_by_size_table(rows: pd.DataFrame, cell, study: Study) -> str:
    """A markdown table of cell(row) per pair (rows) and model size (columns), both in the study's
    order."""
    return by_size_table(rows, cell, study, "pair", study.pair_names, pretty_pair)


def by_size_table(rows: pd.DataFrame, cell, study: Study, index: str, order, name=str) -> str:
    """A markdown table of cell(row) per value of the column `index` (rows, in `order`, shown as
    name(value)) and model size (columns, in the study's order)."""
    wide = rows.assign(cell=[cell(row) for row in rows.itertuples()]).pivot(
        index=index, columns="size", values="cell"
    )
    wide = wide.reindex(
        index=in_order(order, wide.index), columns=in_order(study.sizes, wide.columns)
    )
    wide.index = [name(value) for value in wide.index]
    return markdown_table(wide.rename_axis(index).reset_index())


def speedup_intro(study: Study) -> str:
    unsynced, synced = (
        ", ".join(metric_experiments(study, "total")),
        ", ".join(metric_experiments(study, "rollout")),
    )
    return (
        "Speedup A → B = time of A / time of B (above 1×: B is faster), over every pair of runs of "
        "A and B with the same env, model size, data type, agents per process and tag within one "
        "experiment (runs are never paired across experiments), each framework in its default "
        f"compile mode. Total time and steady state ({study.steady.label}) come from each sync-off "
        f"experiment on its own ({unsynced}), rollout and update from each sync-on one ({synced}); "
        "never pooled; an experiment of several env backends has a table per backend, of its envs "
        "on that backend. "
        f"Cells: geometric mean of the ratios [{BOOTSTRAP_LEVEL:.0%} cluster-bootstrap interval]; "
        "median; pairs / envs (an env measured under several tags counts once per tag). The "
        "interval resamples envs with replacement, then, within each drawn env, the runs of A and "
        f"of B with replacement, recomputes the geometric mean ({BOOTSTRAP_RESAMPLES:,} resamples, "
        "seeded) and takes its 2.5th and 97.5th percentiles; "
        f"{NO_INTERVAL} = fewer than {MIN_CLUSTERS} envs, too few for an interval."
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
    for (metric, experiment, *variant), table in speedups.groupby(
        ["metric", "experiment", *VARIANTS], sort=False
    ):
        title = metric_title(metric, experiment, study, tuple(variant))
        blocks.append(f"**{title}**\n\n" + pair_by_size_table(table, speedup_cell, study))
    return "\n\n".join(blocks) + "\n"


def env_cost_intro(study: Study) -> str:
    experiments = " and ".join(metric_experiments(study, "total"))
    return (
        "Does a speedup shrink as the env's step gets more expensive? Per pair and model size, one "
        f"point per env of {experiments} (sync off, default compile modes; an env under several "
        "tags counts once per tag): its geometric mean speedup, against the env's step cost "
        "measured by sweep/env_timing.py. **ρ**: Spearman's rank correlation of speedup and env "
        "cost (below 0: the speedup falls as the env gets costlier); **slope**: the least-squares "
        "fit of log speedup on log cost, as the factor by which the speedup changes per tenfold "
        "env cost (the few expensive envs weigh heavily on it; ρ, on ranks, does not). Intervals: "
        f"{BOOTSTRAP_LEVEL:.0%} percentile bootstrap, envs resampled with replacement "
        f"({BOOTSTRAP_RESAMPLES:,} resamples, seeded). The trend is named only when the interval "
        "of ρ excludes 0; *shrinks* = moves towards 1×. "
        f"{NO_INTERVAL} = fewer than {MIN_CORRELATION_ENVS} envs."
    )


def env_cost_cell(row) -> str:
    envs = f"{int(row.n_envs)} env{'s' * (row.n_envs != 1)}"
    if np.isnan(row.rho):
        return f"{NO_INTERVAL} ({envs}: {row.trend}); geomean {row.geomean:.2f}×"
    return (
        f"ρ **{row.rho:+.2f}** [{row.rho_low:+.2f}, {row.rho_high:+.2f}]; ×{10**row.slope:.2f} per "
        "10× cost "
        f"[{10**row.slope_low:.2f}, {10**row.slope_high:.2f}]; {envs}: {row.trend}"
    )


def env_cost_markdown(table: pd.DataFrame, timed: bool, study: Study) -> str:
    """The correlation tables: per metric, a row per pair and a column per size."""
    if not timed:
        return "_No env timing given (`--env-timing`): no env costs to correlate with._\n"
    if table.empty:
        experiments = " or ".join(metric_experiments(study, "total"))
        return f"_No pairs of runs of {experiments} with a measured env cost._\n"
    blocks = [env_cost_intro(study)]
    for metric, rows in table.groupby("metric", sort=False):
        blocks.append(
            f"**{metric_name(metric, study)}**\n\n" + pair_by_size_table(rows, env_cost_cell, study)
        )
    return "\n\n".join(blocks) + "\n"


LEARNING_MARKERS = ("<!-- learning:start -->", "<!-- learning:end -->")


def final_cell(row) -> str:
    """mean ± std over seeds, in bold where it meets the reference (at least its mean minus its
    std), then the IQM [its interval]; with the runs that had a return where some ended no
    episode."""
    spread = f" ± {row.final_std:.1f}" if np.isfinite(row.final_std) else ""
    interval = f"{row.iqm_low:.1f}, {row.iqm_high:.1f}" if np.isfinite(row.iqm_low) else NO_INTERVAL
    text = f"{row.final_mean:.1f}{spread}" if row.n_returns else NO_INTERVAL
    text = f"**{text}**" if row.meets_reference else text
    if row.n_returns:
        text += f"; IQM {row.final_iqm:.1f} [{interval}]"
    if row.n_returns < row.n_runs:
        text += f" ({row.n_runs - row.n_returns} of {row.n_runs} runs ended no episode)"
    return text


def time_cell(row, target: str) -> str:
    """The median time to the target over seeds, and how many of the timed runs reached it."""
    median = getattr(row, f"median_s_to_{target}")
    reached = f"({getattr(row, f'reached_{target}')}/{row.n_timed})"
    return f"{median:,.0f} s {reached}" if np.isfinite(median) else f"{NO_INTERVAL} {reached}"


def wide(table: pd.DataFrame, cell, study: Study, reference: bool) -> str:
    """A row per env, a column per framework (and the reference's published return first, when
    asked)."""
    cells = table.assign(cell=[cell(row) for row in table.itertuples()])
    # the runs of two tags (or numbers of agents) are never pooled: a row each, the env named so
    tagged = cells["tag"].nunique(dropna=False) > 1
    cells["env"] = [f"{e} ({t})" if tagged else e for e, t in zip(cells["env"], cells["tag"])]
    if cells["num_agents"].nunique() > 1:
        cells["env"] = [f"{e} ({n} agents)" for e, n in zip(cells["env"], cells["num_agents"])]
    grid = cells.pivot(index="env", columns="framework", values="cell")
    envs = list(dict.fromkeys(cells["env"]))
    grid = grid.reindex(index=envs, columns=in_order(study.frameworks, grid.columns))
    if reference:
        published = cells.drop_duplicates("env").set_index("env")
        published = published[["reference_mean", "reference_std"]].to_numpy()
        grid.insert(0, "reference", [f"{mean:.1f} ± {std:.1f}" for mean, std in published])
    return markdown_table(grid.rename_axis("env").reset_index())


def experiment_markdown(table: pd.DataFrame, experiment: str, study: Study) -> str:
    exp = study.experiments[experiment]
    rows = table[table["experiment"] == experiment]
    resumed = int((rows["n_runs"] - rows["n_timed"]).sum())
    untimed = (
        f" {resumed} run{'s' if resumed > 1 else ''} resumed after a stop "
        f"count{'' if resumed > 1 else 's'} in "
        "the final return, not here: a second start is in its time."
        if resumed
        else ""
    )
    return (
        f"**{experiment}: {exp.title}.** Final return: the mean over each run's last {SMOOTHING} "
        "iterations, mean ± std over seeds, in bold where it is at least the reference's mean "
        f"minus its std ({exp.reference}); then the interquartile mean (IQM) over seeds "
        "[stratified-bootstrap 95 % interval]. Each agent of a run of several is a seed.\n\n"
        + wide(rows, final_cell, study, reference=True)
        + f"\n\nTime to {TARGET_LABELS['reference']}: seconds from the process's first line "
        "(imports and compilation included), the median over seeds (runs that never reached it "
        f"count as slowest; {NO_INTERVAL}: fewer than half reached it), and the runs that reached "
        f"it.{untimed}\n\n"
        + wide(rows, lambda row: time_cell(row, "reference"), study, reference=False)
    )


def learning_markdown(results: Results) -> str:
    """The README's learning block: per learning experiment with runs, the final returns beside the
    reference's and the time each framework took to reach it. Empty when there are no learning
    runs."""
    with_runs = [
        name
        for name in learning_experiments(results.study)
        if name in set(results.learning["experiment"])
    ]
    blocks = [experiment_markdown(results.learning, name, results.study) for name in with_runs]
    return "\n\n".join(blocks) + "\n" if blocks else ""


def learning_speedup_cell(row) -> str:
    interval = NO_INTERVAL if np.isnan(row.ci_low) else f"{row.ci_low:.2f}, {row.ci_high:.2f}"
    counts = f"{row.n_pairs} pairs / {row.n_clusters} envs"
    return f"**{row.geomean:.2f}×** [{interval}]; median {row.median:.2f}; {counts}"


def learning_speedup_table(speedups: pd.DataFrame, study: Study) -> str:
    """One learning experiment's time-to-return speedups: a row per pair, a column per target."""
    cells = speedups.assign(cell=[learning_speedup_cell(row) for row in speedups.itertuples()])
    grid = cells.pivot(index="pair", columns="target", values="cell")
    grid = grid.reindex(
        index=in_order(study.pair_names, grid.index), columns=in_order(TARGETS, grid.columns)
    )
    grid.index = [pretty_pair(pair) for pair in grid.index]
    grid.columns = [f"to {TARGET_LABELS[target]}" for target in grid.columns]
    return markdown_table(grid.rename_axis("pair").reset_index())


def report_markdown(results: Results) -> str:
    """REPORT.md's learning section: the README block, then per experiment the time-to-return
    speedups."""
    if results.learning.empty:
        return ""
    parts = [learning_markdown(results)]
    left_out = learning_selection(results.summary, results.masks, results.study)[1]
    if not left_out.empty:
        parts += [
            "Left out of the learning tables (only the runs of an experiment's configuration "
            "count, once per seed):",
            markdown_table(left_out),
        ]
    intro = (
        "Time-to-return speedups A → B (time of A / time of B), over the pairs of runs of one env "
        "that both reached "
        "the target, pooled over envs: geometric mean [cluster-bootstrap interval], median, pairs "
        "/ envs."
    )
    for experiment, speedups in results.learning_speedups.groupby("experiment", sort=False):
        parts += [f"*{experiment}*: {intro}", learning_speedup_table(speedups, results.study)]
    if results.learning_speedups.empty:
        parts.append("_No pair of runs of two frameworks reached a target._")
    return "\n\n".join(parts) + "\n"


def speedup_tables(results: Results, name: str) -> list[str]:
    """Per metric with pairs of runs, a table of each framework's speedups between data types: a row
    per framework and data-type pair, a column per size."""
    study, blocks = results.study, []
    for metric in METRICS:
        cells = results.dtype_cells(metric, name)
        if cells.empty:
            continue
        sync = "on" if metric_sync(metric) else "off"
        for pair, rows in cells.groupby("pair", sort=False):
            title = f"{metric_name(metric, study)}, {pair.replace('->', ' → ')} (sync {sync})"
            table = by_size_table(rows, speedup_cell, study, "framework", study.frameworks)
            blocks.append(f"**{title}**\n\n{table}")
    return blocks


def dtype_markdown(results: Results, name: str) -> str:
    """One experiment's section: its times per data type, then its speedups between data types."""
    intro = (
        f"Seconds per iteration, rollout + update (the mean over {results.study.steady.label} of "
        "each sync-on run "
        "in its framework's default compile mode; the median over seeds), in each data type. "
        "Below, "
        "each "
        "framework's speedup between data types: A → B = its time in A / its time in B (above 1×: "
        "it is faster in "
        "B), over every pair of its runs in A and B with the same env, size and tag; cells as in "
        "the speedup "
        "tables. The framework pairs within each data type are in the speedup tables above."
    )
    table = times_table(results, name)
    if table.empty:
        return (
            f"_No rollout and update times of {name}: no sync-on runs in default compile modes._\n"
        )
    blocks = [intro, markdown_table(table), *speedup_tables(results, name)]
    return "\n\n".join(blocks) + "\n"


def mib(value: float) -> str:
    return f"{value / 2**20:,.0f} MiB"


def memory_cell(row) -> str:
    """Median peak memory: host RSS, and device bytes where recorded; per agent for N > 1."""
    text = mib(row.peak_rss_bytes)
    text += f" ({mib(row.peak_rss_per_agent)}/agent)" if row.num_agents > 1 else ""
    if np.isfinite(row.peak_device_bytes):
        text += f"; device {mib(row.peak_device_bytes)}"
        text += f" ({mib(row.peak_device_per_agent)}/agent)" if row.num_agents > 1 else ""
    return text


def memory_markdown(results: Results) -> list[str]:
    """REPORT.md's peak memory: per cell (env, size, data type, agents per process), a column per
    framework and compile mode, the median over its runs; a line for runs that recorded none."""
    summary = results.summary
    summary = summary.assign(mode=list(map(mode_name, summary["framework"], summary["compile"])))
    runs = summary[pd.to_numeric(summary["peak_rss_bytes"], errors="coerce").notna()]
    older = len(summary) - len(runs)
    missing = [f"_{older} runs (of earlier editions) record no peak memory._"] if older else []
    if runs.empty:
        return ["## Peak memory", *missing]
    keys = ["env", "model_size", "dtype", "num_agents"]
    cells = agents_scaling(runs, [*keys, "mode"])
    grid = cells.assign(cell=[memory_cell(row) for row in cells.itertuples()])
    grid = grid.pivot(index=keys, columns="mode", values="cell")
    modes = [mode_name(f, c) for f, fw in results.study.frameworks.items() for c in fw.compile]
    grid = grid.reindex(columns=in_order(modes, grid.columns)).reset_index()
    intro = (
        "Peak memory of each process, the median over its cell's runs: the host's resident set "
        "(summary.json peak_rss_bytes) and, on an accelerator (GPU, TPU), its peak device bytes; "
        "for a run of N agents also per agent (peak / N)."
    )
    grid = grid.rename(columns={"model_size": "size", "num_agents": "agents"})
    return ["## Peak memory", intro, markdown_table(grid), *missing]


def agents_markdown(results: Results, name: str) -> str:
    """An experiment of several agents per process: a row per framework (default compile mode) and
    model size, a column per N: agent-steps per second in the steady window and peak memory per
    agent."""
    cells = results.agents_cells(name)
    cells["cell"] = [
        f"{row.agent_steps_s:,.0f}/s ({row.agent_steps_whole_s:,.0f}/s whole); "
        f"{mib(row.peak_rss_per_agent)}/agent"
        for row in cells.itertuples()
    ]
    grid = cells.pivot(index=["framework", "model_size"], columns="num_agents", values="cell")
    frameworks = in_order(results.study.frameworks, grid.index.get_level_values(0))
    sizes = in_order(results.study.sizes, grid.index.get_level_values(1))
    grid = grid.reindex(index=[(f, size) for f in frameworks for size in sizes]).dropna(how="all")
    grid.columns = [f"{n} agent{'s' * (n > 1)}" for n in grid.columns]
    grid = grid.rename_axis(["framework", "size"]).reset_index()
    intro = (
        "Agent-steps per second (N x batch / mean time per iteration over "
        f"{results.study.steady.label}, the median over runs; whole: over whole iterations, the "
        "steps of time/elapsed, which also hold the host's work between the timed calls, each "
        "agent's logging among it) and peak host memory per agent (peak RSS / N), each framework "
        "in its default compile mode."
    )
    return intro + "\n\n" + markdown_table(grid)


def agents_experiments(results: Results) -> list[str]:
    """The experiments whose runs span several numbers of agents per process."""
    return [
        name
        for name in results.study.experiments
        if results.has_runs(name) and results.runs(name)["num_agents"].nunique() > 1
    ]


def report_sections(results: Results) -> list[str]:
    """REPORT.md's sections of the experiments of several data types and of several agents per
    process that have runs (a heading and its text each), then the peak memory."""
    parts = []
    for name in dtype_experiments(results.study):
        if results.has_runs(name):
            parts += [f"## Data types ({name})", dtype_markdown(results, name)]
    for name in agents_experiments(results):
        parts += [f"## Agents per process ({name})", agents_markdown(results, name)]
    return parts + memory_markdown(results)

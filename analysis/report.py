"""REPORT.md and the README block: the tables in markdown, with the words that say what they hold.

Text from outside (tags, hosts, platforms, devices, versions, env names, run folders, skip reasons, paths given on
the command line) goes through analysis/escape.py: it reads as itself, never as markdown or HTML, and never breaks a
table.
"""

from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from analysis.escape import md_cell, md_code, md_text
from analysis.loading import BadInput, SkippedRun, flat
from analysis.plotting import pretty_pair
from analysis.results import Results, present
from analysis.speedups import SPEEDUP_COLUMNS, env_costs, metric_experiments, metric_sync
from analysis.stats import BOOTSTRAP_LEVEL, BOOTSTRAP_RESAMPLES, MIN_CLUSTERS, MIN_CORRELATION_ENVS
from analysis.summary import window_column, window_columns
from study import Study

NO_INTERVAL = "–"
HEADLINE_METRICS = (
    "total",
    "steady",
)  # the README's tables, of study.tables; REPORT.md has every metric, experiment
README_MARKERS = ("<!-- speedups:start -->", "<!-- speedups:end -->")


TEXT_COLUMNS = (
    "env",
    "tag",
    "hostname",
    "device",
    "platform",
    "versions",
    "run",
    "reason",
)  # text from outside


def markdown_table(table: pd.DataFrame) -> str:
    """A DataFrame as a markdown table (floats to 3 significant digits, missing as '-'). The cells of TEXT_COLUMNS
    are text from outside: shown as they are (md_text, never read as numbers); the others are ours (md_cell)."""
    text = [i for i, column in enumerate(table.columns) if column in TEXT_COLUMNS]
    cells = table.copy()
    for i, column in enumerate(table.columns):
        escape = md_text if i in text else md_cell
        cells[column] = table[column].map(
            lambda v, escape=escape: escape(v) if isinstance(v, str) else v
        )
    cells = (
        cells.astype(object).where(table.notna(), None).rename(columns=lambda c: md_cell(str(c)))
    )
    return cells.to_markdown(
        index=False, floatfmt=".3g", missingval="-", disable_numparse=text or False
    )


def pair_by_size_table(rows: pd.DataFrame, cell, study: Study) -> str:
    """A markdown table of cell(row) per pair (rows) and model size (columns), both in the study's order."""
    wide = rows.assign(cell=[cell(r) for r in rows.itertuples()]).pivot(
        index="pair", columns="size", values="cell"
    )
    wide = wide.reindex(
        index=present(study.pair_names, wide.index), columns=present(study.sizes, wide.columns)
    )
    wide.index = [pretty_pair(p) for p in wide.index]
    return markdown_table(wide.rename_axis("pair").reset_index())


# ---------------------------------------------------------------------------------------------- speedups
def metric_name(metric: str, study: Study) -> str:
    steady = study.steady.label
    return {
        "total": "Total time",
        "steady": f"Steady state, mean time/iteration over {steady}",
        "rollout": f"Rollout, mean over {steady}",
        "update": f"Update, mean over {steady}",
    }[metric]


def metric_title(metric: str, experiment: str, study: Study, backend: str = "") -> str:
    """A table's title: the metric, the experiment and, for an experiment of several env backends, the backend of
    the table's envs."""
    exp = study.experiments[experiment]
    modes = "; speedups between default compile modes" if exp.all_compile_modes else ""
    sync = "on" if metric_sync(metric) else "off"
    where = on_backend(experiment, backend, study, "; ")
    return f"{metric_name(metric, study)} ({experiment}: {exp.title}{where}; sync {sync}{modes})"


def on_backend(experiment: str, backend: str, study: Study, separator: str) -> str:
    """ ", its envs on envpool" for an experiment of several env backends (its tables are per backend), else ""."""
    return (
        f"{separator}its envs on {backend}"
        if len(study.experiments[experiment].backends) > 1
        else ""
    )


def speedup_intro(study: Study) -> str:
    unsynced, synced = (
        ", ".join(metric_experiments(study, "total")),
        ", ".join(metric_experiments(study, "rollout")),
    )
    return (
        "Speedup A → B = time of A / time of B (above 1×: B is faster), over every pair of runs of A and B with the "
        "same env, model size and tag within one experiment (runs are never paired across experiments), each "
        f"framework in its default compile mode. Total time and steady state ({study.steady.label}) come from each "
        f"sync-off experiment on its own ({unsynced}), rollout and update from each sync-on one ({synced}); never "
        "pooled; an experiment of several env backends has a table per backend, of its envs on that backend. "
        f"Cells: geometric mean of the ratios [{BOOTSTRAP_LEVEL:.0%} cluster-bootstrap interval]; median; "
        "pairs / envs (an env measured under several tags counts once per tag). The interval resamples envs with "
        "replacement, then, within each drawn env, the runs of A and of B with replacement, recomputes the geometric "
        f"mean ({BOOTSTRAP_RESAMPLES:,} resamples, seeded) and takes its 2.5th and 97.5th percentiles; "
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
    for (metric, experiment, backend), table in speedups.groupby(
        ["metric", "experiment", "backend"], sort=False
    ):
        title = metric_title(metric, experiment, study, backend)
        blocks.append(f"**{title}**\n\n" + pair_by_size_table(table, speedup_cell, study))
    return "\n\n".join(blocks) + "\n"


def left_out_markdown(r: Results) -> str:
    """The runs a speedup table could use but does not, a row per experiment, size, env, tag, configuration and
    reason; empty when every such run is in its tables."""
    if r.left_out.empty:
        return ""
    columns = ["model_size", "env", "tag", "num_iterations", "batch_size", "framework"]
    rows = r.left_out.join(r.summary[columns], on="run")
    by = ["experiment", "model_size", "env", "tag", "num_iterations", "batch_size", "reason"]
    metrics = rows.groupby(by, sort=False, dropna=False)["metric"].agg(
        lambda m: ", ".join(dict.fromkeys(m))
    )
    frameworks = rows.drop_duplicates([*by, "run"]).groupby(by, sort=False, dropna=False)[
        "framework"
    ]
    runs = frameworks.agg(
        lambda f: ", ".join(f"{n} {fw}" for fw, n in f.value_counts(sort=False).items())
    )
    table = pd.DataFrame({"runs": runs, "metrics": metrics}).reset_index()
    table = table[[*by[:-1], "runs", "metrics", "reason"]].rename(
        columns={"model_size": "size", "num_iterations": "iterations", "batch_size": "batch"}
    )
    return (
        "### Left out of the speedup tables\n\n"
        "Runs a table could compare (default compile mode, the metric's sync setting) but does not: runs are paired "
        "only with runs of the same env, size, tag, number of iterations and batch size, and a cell pools one such "
        "configuration.\n\n" + markdown_table(table)
    )


# -------------------------------------------------------------------------------- speedup against env cost
def env_cost_intro(study: Study) -> str:
    experiments = " and ".join(metric_experiments(study, "total"))
    return (
        f"Does a speedup shrink as the env's step gets more expensive? Per pair and model size, one point per env of "
        f"{experiments} (sync off, default compile modes; an env under several tags counts once per tag): its "
        "geometric mean speedup, against the env's step cost measured by env_timing.py. **ρ**: Spearman's rank "
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


# ------------------------------------------------------------------------------------ the README block
def headline(speedups: pd.DataFrame, study: Study) -> pd.DataFrame:
    """The rows of the README's tables: the total-time and steady-state speedups of the experiments of study.tables,
    experiment by experiment in that order."""
    rows = speedups[
        speedups["metric"].isin(HEADLINE_METRICS) & speedups["experiment"].isin(study.tables)
    ]
    return rows.sort_values("experiment", key=lambda e: e.map(study.tables.index), kind="stable")


def readme_markdown(
    speedups: pd.DataFrame,
    study: Study,
    previous: Optional[pd.DataFrame] = None,
    previous_name: str = "",
) -> str:
    """The README's headline: the total-time and steady-state tables of the experiments of study.tables, with a short
    intro (REPORT.md has the long one), then the comparison with a previous edition when one is given."""
    intro = (
        f"Speedup A → B = time of A / time of B (above 1×: B is faster), each framework in its default compile "
        f"mode. Cells: geometric mean [{BOOTSTRAP_LEVEL:.0%} cluster-bootstrap interval over envs, then runs; "
        f"{NO_INTERVAL} below {MIN_CLUSTERS} envs]; median; pairs / envs. METHODOLOGY.md explains the statistics."
    )
    text = intro + "\n\n" + speedup_markdown(headline(speedups, study), study, intro=False)
    if previous is not None:
        text += "\n" + edition_markdown(previous, speedups, previous_name, study)
    return text


def edition_cell(row) -> str:
    def speedup(geomean, low, high):
        interval = NO_INTERVAL if np.isnan(low) else f"{low:.2f}, {high:.2f}"
        return f"{geomean:.2f}× [{interval}]"

    return (
        f"{speedup(row.geomean_previous, row.ci_low_previous, row.ci_high_previous)} → "
        f"**{speedup(row.geomean, row.ci_low, row.ci_high)}**"
    )


def edition_table(table: pd.DataFrame, study: Study) -> str:
    """One experiment's rows of both editions as a markdown table: a row per pair, a column per headline metric and
    size."""
    table = table.assign(
        column=table["metric"] + ", " + table["size"],
        cell=[edition_cell(r) for r in table.itertuples()],
    )
    columns = [f"{metric}, {size}" for metric in HEADLINE_METRICS for size in study.sizes]
    wide = table.pivot(index="pair", columns="column", values="cell")
    wide = wide.reindex(
        index=present(study.pair_names, wide.index), columns=present(columns, wide.columns)
    )
    wide.index = [pretty_pair(p) for p in wide.index]
    return markdown_table(wide.rename_axis("pair").reset_index())


def edition_name(experiment: str, backend: str, study: Study) -> str:
    return f"{experiment}: {study.experiments[experiment].title}{on_backend(experiment, backend, study, ', ')}"


def edition_markdown(
    previous: pd.DataFrame, speedups: pd.DataFrame, previous_name: str, study: Study
) -> str:
    """Previous edition -> this one: a table per experiment (and env backend) of the README's tables with pairs
    measured in both (named when there are several), a row per pair, a column per headline metric and size."""
    table = headline(previous, study)[SPEEDUP_COLUMNS].merge(
        headline(speedups, study)[SPEEDUP_COLUMNS],
        suffixes=("_previous", ""),
        on=["metric", "experiment", "backend", "size", "pair"],
    )
    if table.empty:
        return f"_No pair of the headline tables was measured in the previous edition ({md_text(previous_name)})._\n"
    experiments = table.groupby(["experiment", "backend"], sort=False)
    blocks = [
        (f"*{edition_name(name, backend, study)}*\n\n" if experiments.ngroups > 1 else "")
        + edition_table(rows, study)
        for (name, backend), rows in experiments
    ]
    return (
        f"**Since the previous edition** ({md_text(previous_name)}): geometric mean [interval], previous → now; "
        f"total time and steady state ({study.steady.label}), per model size.\n\n"
        + "\n\n".join(blocks)
        + "\n"
    )


def readme_with(path: Path, blocks: dict[tuple[str, str], str]) -> str:
    """The text of the file at path with each block between its markers (start, end; the markers stay)."""
    text = path.read_text()
    for (opening, closing), block in blocks.items():
        start, end = text.find(opening), text.find(closing)
        if start < 0 or end < start:
            raise BadInput(f"{path} has no {opening} ... {closing} block; nothing written")
        text = text[: start + len(opening)] + "\n" + block + text[end:]
    return text


# ---------------------------------------------------------------------------------------------- REPORT.md
def machines_table(summary: pd.DataFrame) -> pd.DataFrame:
    columns = ["tag", "hostname", "device_name", "platform", "framework", "versions"]
    cells = summary[columns].astype(object).where(summary[columns].notna(), "")
    table = cells.groupby(columns).size().rename("runs").reset_index()
    return table.rename(columns={"device_name": "device"})


def windows_table(r: Results) -> pd.DataFrame:
    runs = r.runs(r.study.headline)
    columns = {
        "setup_s": "setup (s)",
        **{c: f"{w.label} (s/iter)" for c, w in window_columns(r.study).items()},
        "total_s": "total (s)",
    }
    table = (
        runs.groupby(["framework", "model_size"])[list(columns)]
        .median()
        .rename(columns=columns)
        .reset_index()
    )
    key = {v: i for i, v in enumerate([*r.study.frameworks, *r.study.sizes])}
    return table.sort_values(["model_size", "framework"], key=lambda s: s.map(key)).rename(
        columns={"model_size": "size"}
    )


def env_table(r: Results) -> pd.DataFrame:
    table = r.timing.reindex(r.envs).reset_index(names="env")
    runs = r.summary.groupby("env").size()
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


def split_experiments(r: Results) -> list[str]:
    """The experiments of sync "both" that have runs: their sync-on runs split each iteration into rollout and update,
    beside the sync-off runs of their total times."""
    S = r.study
    return [name for name, exp in S.experiments.items() if len(exp.syncs) > 1 and r.has_runs(name)]


def split_cell(times) -> str:
    rollout, update = times
    return f"{rollout + update:.3f} ({rollout:.3f} + {update:.3f})"


def split_table(r: Results, name: str) -> pd.DataFrame:
    """Per model size, env label and tag (a row), each framework's rollout + update seconds per iteration (a column):
    the steady window's mean of the experiment's sync-on runs in default compile modes, the median over seeds."""
    S, runs = r.study, r.backend_runs(name)
    parts = [window_column(S.steady, part) for part in ("rollout", "update")]
    medians = runs.groupby(["model_size", "env", "tag", "framework"])[parts].median().dropna()
    if medians.empty:
        return pd.DataFrame()
    cells = pd.Series(
        [split_cell(times) for times in medians.to_numpy()], index=medians.index, dtype=object
    )
    wide = cells.unstack("framework")
    tags = sorted(set(wide.index.get_level_values("tag")))
    rows = [
        (size, env, tag)
        for size in S.sizes
        for env in r.envs
        for tag in tags
        if (size, env, tag) in wide.index
    ]
    wide = wide.reindex(index=rows, columns=present(S.frameworks, wide.columns))
    return wide.rename_axis(["size", "env", "tag"]).reset_index()


def split_markdown(r: Results, name: str) -> str:
    table = split_table(r, name)
    if table.empty:
        return f"_No sync-on runs of {name} in default compile modes._\n"
    intro = (
        f"Seconds per iteration, rollout + update (the mean over {r.study.steady.label} of each sync-on run in its "
        "framework's default compile mode; the median over seeds): how much of each framework's iteration the env "
        "(and its backend: an env label ending in @envpool runs on envpool) takes."
    )
    return intro + "\n\n" + markdown_table(table) + "\n"


def report_text(
    r: Results,
    skipped: list[SkippedRun],
    drawn,
    notes,
    sources: list[str],
    timing_info: dict,
    edition: str = "",
    learning: str = "",
) -> str:
    """REPORT.md. drawn: the figures drawn (file, caption); learning: the learning section (learning_report)."""
    S, summary = r.study, r.summary
    counts = ", ".join(f"{name}: {int(mask.sum())}" for name, mask in r.masks.items())
    left_out = left_out_markdown(r)
    parts = [
        "# benchback-rl results",
        f"Generated by `plot_results.py` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from "
        f"{', '.join(md_code(s) for s in sources)}: {len(summary)} completed runs ({counts}); "
        f"{len(skipped)} skipped (listed at the end).",
        "## Machines and versions",
        markdown_table(machines_table(summary)) if len(summary) else "_No runs._",
        "## Speedups",
        speedup_markdown(r.speedups, S),
        *([left_out] if left_out else []),
        *([edition] if edition else []),
    ]
    for name, tables in r.platform_speedups.items():
        per_tag = [
            f"Tag {md_code(tag)}:\n\n" + speedup_markdown(table, S, intro=False)
            for tag, table in tables.items()
        ]
        parts += [f"### Total-time speedups per tag ({name})", *per_tag]
    for name in split_experiments(r):
        parts += [f"## Rollout and update per framework ({name})", split_markdown(r, name)]
    if learning:
        parts += ["## Learning against the reference", learning]
    parts += [
        "## Speedup against env cost",
        env_cost_markdown(r.env_cost, not env_costs(r.timing).empty, S),
    ]
    if r.has_runs(S.headline):
        parts += [
            f"## Iteration windows ({S.headline}, median over runs)",
            markdown_table(windows_table(r)),
        ]
    timing_note = (
        f"Measured by env_timing.py on {md_text(timing_info.get('device') or 'an unnamed device')} "
        f"({md_text(flat(timing_info.get('versions')) or 'versions not recorded')})."
        if timing_info
        else "No env timing given (`--env-timing`): envs are in the study's order."
    )
    parts += ["## Environment complexity", timing_note, markdown_table(env_table(r))]
    parts += ["## Figures"]
    parts += [f"### {figure.caption}\n\n![{figure.caption}]({figure.file})" for figure in drawn]
    parts += [f"- {md_text(note)}" for note in notes]
    parts += ["## Skipped runs"]
    parts += [
        markdown_table(pd.DataFrame(skipped, columns=["run", "reason"])) if skipped else "None."
    ]
    return "\n\n".join(parts) + "\n"

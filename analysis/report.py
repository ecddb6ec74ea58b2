"""REPORT.md and the README block: every table in markdown (from markdown.py), the machines and
versions, the figures and the skipped runs; the README block holds the headline speedup tables of
study.tables and the comparison with a previous edition (output.readme_with puts it in the README).

Text from outside (tags, hosts, platforms, devices, versions, env names, run folders, skip reasons,
paths given on the command line) goes through analysis/common.py: it reads as itself, never as
markdown or HTML, and never breaks a table.
"""

from typing import Optional

import numpy as np
import pandas as pd

from analysis.common import (
    METRICS,
    SPEEDUP_COLUMNS,
    VARIANTS,
    SkippedRun,
    config_cell,
    generated_at,
    in_order,
    md_code,
    md_text,
    pretty_pair,
    split_cell,
    variant_words,
)
from analysis.loading import is_timed, window_column, window_columns
from analysis.markdown import (
    NO_INTERVAL,
    env_cost_markdown,
    markdown_table,
    report_sections,
    speedup_markdown,
)
from analysis.results import (
    Results,
    compile_table,
    env_table,
    machines_table,
    missing_time,
    speedup_gap,
    windows_table,
)
from analysis.speedups import (
    HEADLINE_METRICS,
    MIN_RUNS,
    env_costs,
    few_runs_cells,
    headline,
    metric_experiments,
    several_machines,
)
from analysis.stats import BOOTSTRAP_LEVEL, MIN_CLUSTERS
from core.study import Study


def left_out_markdown(results: Results) -> str:
    """The runs a speedup table could use but does not, a row per experiment, size, env, tag,
    configuration and reason; empty when every such run is in its tables."""
    if results.left_out.empty:
        return ""
    columns = ["model_size", "env", "tag", "num_iterations", "batch_size", "framework"]
    rows = results.left_out.join(results.summary[columns], on="run")
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
        "Runs a table could compare (default compile mode, the metric's sync setting) but does "
        "not: "
        "runs are paired "
        "only with runs of the same env, size, tag, number of iterations and batch size, and a "
        "cell "
        "pools one such "
        "configuration.\n\n" + markdown_table(table)
    )


def windows_gaps(results: Results) -> list[str]:
    """Why a window of the headline's runs has no time (its column of windows_table is empty), a
    line each."""
    runs = results.runs(results.study.headline)
    return [
        f"_No time for {window.label}: {missing_time(runs, column, results.study)}._"
        for column, window in window_columns(results.study).items()
        if runs[column].isna().all()
    ]


def missing_speedups(results: Results) -> list[str]:
    """Why an experiment with runs has no speedup table of a metric it compares, a line each."""
    study, speedups = results.study, results.speedups
    lines = []
    for metric in METRICS:
        for name in metric_experiments(study, metric):
            tabled = ((speedups["metric"] == metric) & (speedups["experiment"] == name)).any()
            if results.has_runs(name) and not tabled:
                why = speedup_gap(results, name, metric)
                lines.append(f"_No {metric} speedups of {name}: {why}._")
    return lines


def machines_notes(results: Results) -> list[str]:
    """A line per speedup cell whose runs come from several machines: its pairs are of one machine
    each, and each env on each machine is a cluster of its interval."""
    return [
        f"_{row.metric} speedups of {row.experiment} ({row.size}, {row.dtype}, {row.backend}): "
        "runs "
        "of "
        f"{md_text(row.machines)}; each pair is of one machine, each env on each machine a cluster "
        "of the "
        "interval._"
        for row in several_machines(results.pairs).itertuples()
    ]


def split_experiments(results: Results) -> list[str]:
    """The experiments of sync "both" that have runs: their sync-on runs split each iteration into
    rollout and update, beside the sync-off runs of their total times."""
    study = results.study
    return [
        name
        for name, exp in study.experiments.items()
        if len(exp.syncs) > 1 and results.has_runs(name)
    ]


def split_table(results: Results, name: str) -> pd.DataFrame:
    """Per model size, env label and tag (a row), each framework's rollout + update seconds per
    iteration (a column): the steady window's mean of the experiment's sync-on runs in default
    compile modes, the median over seeds."""
    study, runs = results.study, results.backend_runs(name)
    parts = [window_column(study.steady, part) for part in ("rollout", "update")]
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
        for size in study.sizes
        for env in results.envs
        for tag in tags
        if (size, env, tag) in wide.index
    ]
    wide = wide.reindex(index=rows, columns=in_order(study.frameworks, wide.columns))
    return wide.rename_axis(["size", "env", "tag"]).reset_index()


def split_markdown(results: Results, name: str) -> str:
    runs = results.backend_runs(name)
    if runs.empty:
        return f"_No sync-on runs of {name} in default compile modes._\n"
    table = split_table(results, name)
    if table.empty:
        column = window_column(results.study.steady, "rollout")
        why = missing_time(runs, column, results.study)
        return (
            f"_No rollout and update times of {name}'s {len(runs)} sync-on runs in default compile "
            "modes: "
            f"{why}._\n"
        )
    intro = (
        f"Seconds per iteration, rollout + update (the mean over {results.study.steady.label} of "
        "each sync-on run in its "
        "framework's default compile mode; the median over seeds): how much of each framework's "
        "iteration the env "
        "(and its backend: an env label ending in @envpool runs on envpool) takes."
    )
    return intro + "\n\n" + markdown_table(table) + "\n"


def resumed_note(summary: pd.DataFrame) -> list[str]:
    """The line on the runs resumed after a stop, when there are any."""
    resumed = int((~is_timed(summary)).sum()) if len(summary) else 0
    if not resumed:
        return []
    runs = "1 run was" if resumed == 1 else f"{resumed} runs were"
    return [
        f"{runs} resumed after a stop (summary.json resumed_at): in the learning results, not in "
        "the timings "
        "(a second start is in their times)."
    ]


def compile_markdown(results: Results) -> list[str]:
    """REPORT.md's compile time, when runs recorded it (summary.json compile_s); else nothing."""
    table = compile_table(results)
    if table.empty:
        return []
    intro = (
        "JAX's compile time up to the end of iteration 0 (summary.json compile_s: tracing, "
        "lowering and XLA's compile, per jitted function; `iterations`: the fast path's one call "
        "(--no-sync-timing), rollout and update in it; `other`: the init and eager ops), the "
        "median over the runs that recorded it, beside the set-up (first line to iteration 0) and "
        "iteration 0's time, which hold it. A run on a CPU and one on an accelerator are rows of "
        "their own (device)."
    )
    return ["## Compile time", intro, markdown_table(table)]


def report_text(
    results: Results,
    skipped: list[SkippedRun],
    drawn,
    notes,
    sources: list[str],
    timing_info: dict,
    edition: str = "",
    learning: str = "",
) -> str:
    """REPORT.md. drawn: the figures drawn (file, caption); learning: the learning section
    (markdown.report_markdown)."""
    study, summary = results.study, results.summary
    counts = ", ".join(f"{name}: {int(mask.sum())}" for name, mask in results.masks.items())
    left_out = left_out_markdown(results)
    # first: a smoke sweep's speedups read as results otherwise
    warning = few_runs_warning(few_runs_cells(results.pairs, results.speedups), results.speedups)
    parts = [
        *([warning] if warning else []),
        "# benchback-rl results",
        f"Generated by `plot_results.py` on {generated_at():%Y-%m-%d %H:%M} UTC from "
        f"{', '.join(md_code(s) for s in sources)}: {len(summary)} completed runs ({counts}); "
        f"{len(skipped)} skipped (listed at the end).",
        *resumed_note(summary),
        "## Machines and versions",
        markdown_table(machines_table(summary)) if len(summary) else "_No runs._",
        "## Speedups",
        speedup_markdown(results.speedups, study),
        *missing_speedups(results),
        *machines_notes(results),
        *([left_out] if left_out else []),
        *([edition] if edition else []),
    ]
    for name, tables in results.platform_speedups.items():
        per_tag = [
            f"Tag {md_code(tag)}:\n\n" + speedup_markdown(table, study, intro=False)
            for tag, table in tables.items()
        ]
        parts += [f"### Total-time speedups per tag ({name})", *per_tag]
    for name in split_experiments(results):
        parts += [f"## Rollout and update per framework ({name})", split_markdown(results, name)]
    parts += report_sections(results)  # data types, agents per process, peak memory
    if learning:
        parts += ["## Learning against the reference", learning]
    parts += [
        "## Speedup against env cost",
        env_cost_markdown(results.env_cost, not env_costs(results.timing).empty, study),
    ]
    if results.has_runs(study.headline):
        parts += [
            f"## Iteration windows ({study.headline}, median over runs)",
            markdown_table(windows_table(results)),
            *windows_gaps(results),
        ]
    parts += compile_markdown(results)
    timing_note = (
        "Measured by sweep/env_timing.py on "
        f"{md_text(timing_info.get('device') or 'an unnamed device')} "
        f"({md_text(config_cell(timing_info.get('versions')) or 'versions not recorded')})."
        if timing_info
        else "No env timing given (`--env-timing`): envs are in the study's order."
    )
    parts += ["## Environment complexity", timing_note, markdown_table(env_table(results))]
    parts += ["## Figures"]
    parts += [f"### {figure.caption}\n\n![{figure.caption}]({figure.file})" for figure in drawn]
    parts += [f"- {md_text(note)}" for note in notes]
    parts += ["## Skipped runs"]
    parts += [
        markdown_table(pd.DataFrame(skipped, columns=["run", "reason"])) if skipped else "None."
    ]
    return "\n\n".join(parts) + "\n"


README_MARKERS = ("<!-- speedups:start -->", "<!-- speedups:end -->")


def readme_markdown(
    speedups: pd.DataFrame,
    study: Study,
    previous: Optional[pd.DataFrame] = None,
    previous_name: str = "",
    few_runs: Optional[pd.DataFrame] = None,
) -> str:
    """The README's headline: the total-time and steady-state tables of the experiments of
    study.tables, with a short intro (REPORT.md has the long one), then the comparison with a
    previous edition when one is given. few_runs: the speedup cells of too few runs
    (speedups.few_runs_cells); those of the headline are warned of first."""
    table = headline(speedups, study)
    few = headline(few_runs, study) if few_runs is not None else table.iloc[:0]
    warning = few_runs_warning(few, table)
    intro = (
        "Speedup A → B = time of A / time of B (above 1×: B is faster), each framework in its "
        "default compile "
        f"mode. Cells: geometric mean [{BOOTSTRAP_LEVEL:.0%} cluster-bootstrap interval over envs, "
        "then runs; "
        f"{NO_INTERVAL} below {MIN_CLUSTERS} envs]; median; pairs / envs. METHODOLOGY.md explains "
        "the statistics."
    )
    text = (warning + "\n\n" if warning else "") + intro + "\n\n"
    text += speedup_markdown(table, study, intro=False)
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
    """One experiment's rows of both editions as a markdown table: a row per pair, a column per
    headline metric and size."""
    table = table.assign(
        column=table["metric"] + ", " + table["size"],
        cell=[edition_cell(row) for row in table.itertuples()],
    )
    columns = [f"{metric}, {size}" for metric in HEADLINE_METRICS for size in study.sizes]
    wide = table.pivot(index="pair", columns="column", values="cell")
    wide = wide.reindex(
        index=in_order(study.pair_names, wide.index), columns=in_order(columns, wide.columns)
    )
    wide.index = [pretty_pair(p) for p in wide.index]
    return markdown_table(wide.rename_axis("pair").reset_index())


def edition_name(experiment: str, variant: tuple, study: Study) -> str:
    where = variant_words(experiment, variant, study, ", ")
    return f"{experiment}: {study.experiments[experiment].title}{where}"


def edition_markdown(
    previous: pd.DataFrame, speedups: pd.DataFrame, previous_name: str, study: Study
) -> str:
    """Previous edition -> this one: a table per experiment (and env backend) of the README's tables
    with pairs measured in both (named when there are several), a row per pair, a column per
    headline metric and size."""
    table = headline(previous, study)[SPEEDUP_COLUMNS].merge(
        headline(speedups, study)[SPEEDUP_COLUMNS],
        suffixes=("_previous", ""),
        on=["metric", "experiment", *VARIANTS, "size", "pair"],
    )
    if table.empty:
        return (
            "_No pair of the headline tables was measured in the previous edition "
            f"({md_text(previous_name)})._\n"
        )
    experiments = table.groupby(["experiment", *VARIANTS], sort=False)
    blocks = [
        (f"*{edition_name(name, tuple(variant), study)}*\n\n" if experiments.ngroups > 1 else "")
        + edition_table(rows, study)
        for (name, *variant), rows in experiments
    ]
    return (
        f"**Since the previous edition** ({md_text(previous_name)}): geometric mean [interval], "
        "previous → now; "
        f"total time and steady state ({study.steady.label}), per model size.\n\n"
        + "\n\n".join(blocks)
        + "\n"
    )


def few_runs_warning(few: pd.DataFrame, cells: pd.DataFrame) -> str:
    """One line for the top of REPORT.md or the README block when some of its speedup cells (cells)
    come from fewer than MIN_RUNS runs a framework (few, of few_runs_cells); "" when none do."""
    if few.empty:
        return ""
    runs = f"fewer than {MIN_RUNS} runs a framework"
    if len(few) == len(cells):
        return (
            f"**Not a result:** {'the' if len(cells) == 1 else f'all {len(cells)}'} speedup "
            f"cell{'s' * (len(cells) != 1)} below {'has' if len(cells) == 1 else 'have'} {runs} (a "
            "smoke sweep, or "
            "too few seeds and envs): each speedup is a single measurement, not an estimate."
        )
    tables = few.groupby("experiment", sort=False)["metric"].agg(
        lambda m: ", ".join(dict.fromkeys(m))
    )
    where = "; ".join(f"{experiment}: {metrics}" for experiment, metrics in tables.items())
    return (
        f"**Not a result, in part:** {len(few)} of the {len(cells)} speedup cells below have "
        f"{runs} "
        f"({where}): "
        "read those as single measurements, not estimates."
    )

"""The experiments of several data types in markdown (REPORT.md's section): each framework's seconds per iteration in
each data type, and its speedups between them (analysis/dtypes.py computes them)."""

import pandas as pd

from analysis.common import in_order
from analysis.loading import window_column
from analysis.markdown import by_size_table, markdown_table, split_cell
from analysis.results import Results, dtype_experiments
from analysis.speedup_markdown import metric_name, speedup_cell
from analysis.speedups import METRICS, metric_sync
from sweep.study import DTYPES


def times_table(results: Results, name: str) -> pd.DataFrame:
    """Per model size, env, tag and framework (a row), rollout + update seconds per iteration in each data type (a
    column): the steady window's mean of the sync-on runs in default compile modes, the median over seeds."""
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


def speedup_tables(results: Results, name: str) -> list[str]:
    """Per metric with pairs of runs, a table of each framework's speedups between data types: a row per framework
    and data-type pair, a column per size."""
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
        f"Seconds per iteration, rollout + update (the mean over {results.study.steady.label} of each sync-on run "
        "in its framework's default compile mode; the median over seeds), in each data type. Below, each "
        "framework's speedup between data types: A → B = its time in A / its time in B (above 1×: it is faster in "
        "B), over every pair of its runs in A and B with the same env, size and tag; cells as in the speedup "
        "tables. The framework pairs within each data type are in the speedup tables above."
    )
    table = times_table(results, name)
    if table.empty:
        return (
            f"_No rollout and update times of {name}: no sync-on runs in default compile modes._\n"
        )
    blocks = [intro, markdown_table(table), *speedup_tables(results, name)]
    return "\n\n".join(blocks) + "\n"


def report_sections(results: Results) -> list[str]:
    """REPORT.md's sections of the experiments of several data types that have runs: a heading and its text each."""
    parts = []
    for name in dtype_experiments(results.study):
        if results.has_runs(name):
            parts += [f"## Data types ({name})", dtype_markdown(results, name)]
    return parts

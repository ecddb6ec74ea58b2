"""The README block: the headline speedup tables of study.tables, the comparison with a previous edition, and the
README file with its blocks replaced between their markers."""

from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from analysis.common import BadInput, in_order, md_text, pretty_pair
from analysis.markdown import NO_INTERVAL, markdown_table
from analysis.speedup_markdown import (
    few_runs_warning,
    in_dtype,
    on_backend,
    speedup_markdown,
)
from analysis.speedups import SPEEDUP_COLUMNS
from analysis.stats import BOOTSTRAP_LEVEL, MIN_CLUSTERS
from sweep.study import Study

# the README's tables, of study.tables; REPORT.md has every metric, experiment
HEADLINE_METRICS = ("total", "steady")
README_MARKERS = ("<!-- speedups:start -->", "<!-- speedups:end -->")


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
    few_runs: Optional[pd.DataFrame] = None,
) -> str:
    """The README's headline: the total-time and steady-state tables of the experiments of study.tables, with a short
    intro (REPORT.md has the long one), then the comparison with a previous edition when one is given. few_runs: the
    speedup cells of too few runs (speedup_markdown.few_runs_cells); those of the headline are warned of first."""
    table = headline(speedups, study)
    few = headline(few_runs, study) if few_runs is not None else table.iloc[:0]
    warning = few_runs_warning(few, table)
    intro = (
        f"Speedup A → B = time of A / time of B (above 1×: B is faster), each framework in its default compile "
        f"mode. Cells: geometric mean [{BOOTSTRAP_LEVEL:.0%} cluster-bootstrap interval over envs, then runs; "
        f"{NO_INTERVAL} below {MIN_CLUSTERS} envs]; median; pairs / envs. METHODOLOGY.md explains the statistics."
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
    """One experiment's rows of both editions as a markdown table: a row per pair, a column per headline metric and
    size."""
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


def edition_name(experiment: str, backend: str, dtype: str, study: Study) -> str:
    where = on_backend(experiment, backend, study, ", ") + in_dtype(experiment, dtype, study, ", ")
    return f"{experiment}: {study.experiments[experiment].title}{where}"


def edition_markdown(
    previous: pd.DataFrame, speedups: pd.DataFrame, previous_name: str, study: Study
) -> str:
    """Previous edition -> this one: a table per experiment (and env backend) of the README's tables with pairs
    measured in both (named when there are several), a row per pair, a column per headline metric and size."""
    table = headline(previous, study)[SPEEDUP_COLUMNS].merge(
        headline(speedups, study)[SPEEDUP_COLUMNS],
        suffixes=("_previous", ""),
        on=["metric", "experiment", "backend", "dtype", "size", "pair"],
    )
    if table.empty:
        return f"_No pair of the headline tables was measured in the previous edition ({md_text(previous_name)})._\n"
    experiments = table.groupby(["experiment", "backend", "dtype"], sort=False)
    blocks = [
        (f"*{edition_name(name, backend, dtype, study)}*\n\n" if experiments.ngroups > 1 else "")
        + edition_table(rows, study)
        for (name, backend, dtype), rows in experiments
    ]
    return (
        f"**Since the previous edition** ({md_text(previous_name)}): geometric mean [interval], previous → now; "
        f"total time and steady state ({study.steady.label}), per model size.\n\n"
        + "\n\n".join(blocks)
        + "\n"
    )


def readme_with(path: Path, blocks: dict[tuple[str, str], str]) -> str:
    """The text of the file at path with each block between its markers (start, end; the markers stay). A file that
    holds a block's markers more than once is refused: which block is the README's is ambiguous."""
    text = path.read_text()
    for (opening, closing), block in blocks.items():
        twice = [marker for marker in (opening, closing) if text.count(marker) > 1]
        if twice:
            raise BadInput(
                f"{path} holds {twice[0]} {text.count(twice[0])} times: which block to replace is ambiguous; "
                "nothing written (keep one block)"
            )
        start, end = text.find(opening), text.find(closing)
        if start < 0 or end < start:
            raise BadInput(f"{path} has no {opening} ... {closing} block; nothing written")
        text = text[: start + len(opening)] + "\n" + block + text[end:]
    return text

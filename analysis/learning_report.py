"""The learning experiments in markdown: the README's learning block and REPORT.md's section (analysis/learning.py
computes the numbers)."""

import numpy as np
import pandas as pd

from analysis.common import in_order, pretty_pair
from analysis.learning import (
    SMOOTHING,
    TARGET_LABELS,
    TARGETS,
    learning_experiments,
    learning_selection,
)
from analysis.markdown import NO_INTERVAL, markdown_table
from analysis.results import Results
from sweep.study import Study

LEARNING_MARKERS = ("<!-- learning:start -->", "<!-- learning:end -->")


def final_cell(row) -> str:
    """mean ± std over seeds, in bold where it meets the reference (at least its mean minus its std); with the runs
    that had a return where some ended no episode."""
    spread = f" ± {row.final_std:.1f}" if np.isfinite(row.final_std) else ""
    text = f"{row.final_mean:.1f}{spread}" if row.n_returns else NO_INTERVAL
    if row.n_returns < row.n_runs:
        text += f" ({row.n_runs - row.n_returns} of {row.n_runs} runs ended no episode)"
    return f"**{text}**" if row.meets_reference else text


def time_cell(row, target: str) -> str:
    """The median time to the target over seeds, and how many of the timed runs reached it."""
    median = getattr(row, f"median_s_to_{target}")
    reached = f"({getattr(row, f'reached_{target}')}/{row.n_timed})"
    return f"{median:,.0f} s {reached}" if np.isfinite(median) else f"{NO_INTERVAL} {reached}"


def wide(table: pd.DataFrame, cell, study: Study, reference: bool) -> str:
    """A row per env, a column per framework (and the reference's published return first, when asked)."""
    cells = table.assign(cell=[cell(row) for row in table.itertuples()])
    # the runs of two tags are never pooled: a row each, the env named with its tag
    tagged = cells["tag"].nunique(dropna=False) > 1
    cells["env"] = [f"{e} ({t})" if tagged else e for e, t in zip(cells["env"], cells["tag"])]
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
        f" {resumed} run{'s' if resumed > 1 else ''} resumed after a stop count{'' if resumed > 1 else 's'} in "
        "the final return, not here: a second start is in its time."
        if resumed
        else ""
    )
    return (
        f"**{experiment}: {exp.title}.** Final return: the mean over each run's last {SMOOTHING} iterations, mean ± "
        f"std over seeds, in bold where it is at least the reference's mean minus its std ({exp.reference}).\n\n"
        + wide(rows, final_cell, study, reference=True)
        + f"\n\nTime to {TARGET_LABELS['reference']}: seconds from the process's first line (imports and "
        "compilation included), the median over seeds (runs that never reached it count as slowest; "
        f"{NO_INTERVAL}: fewer than half reached it), and the runs that reached it.{untimed}\n\n"
        + wide(rows, lambda row: time_cell(row, "reference"), study, reference=False)
    )


def learning_markdown(results: Results) -> str:
    """The README's learning block: per learning experiment with runs, the final returns beside the reference's and
    the time each framework took to reach it. Empty when there are no learning runs."""
    with_runs = [
        name
        for name in learning_experiments(results.study)
        if name in set(results.learning["experiment"])
    ]
    blocks = [experiment_markdown(results.learning, name, results.study) for name in with_runs]
    return "\n\n".join(blocks) + "\n" if blocks else ""


def speedup_cell(row) -> str:
    interval = NO_INTERVAL if np.isnan(row.ci_low) else f"{row.ci_low:.2f}, {row.ci_high:.2f}"
    return f"**{row.geomean:.2f}×** [{interval}]; median {row.median:.2f}; {row.n_pairs} pairs / {row.n_clusters} envs"


def speedup_table(speedups: pd.DataFrame, study: Study) -> str:
    """One learning experiment's time-to-return speedups: a row per pair, a column per target."""
    cells = speedups.assign(cell=[speedup_cell(row) for row in speedups.itertuples()])
    grid = cells.pivot(index="pair", columns="target", values="cell")
    grid = grid.reindex(
        index=in_order(study.pair_names, grid.index), columns=in_order(TARGETS, grid.columns)
    )
    grid.index = [pretty_pair(pair) for pair in grid.index]
    grid.columns = [f"to {TARGET_LABELS[target]}" for target in grid.columns]
    return markdown_table(grid.rename_axis("pair").reset_index())


def report_markdown(results: Results) -> str:
    """REPORT.md's learning section: the README block, then per experiment the time-to-return speedups."""
    if results.learning.empty:
        return ""
    parts = [learning_markdown(results)]
    left_out = learning_selection(results.summary, results.masks, results.study)[1]
    if not left_out.empty:
        parts += [
            "Left out of the learning tables (only the runs of an experiment's configuration count, once per "
            "seed):",
            markdown_table(left_out),
        ]
    intro = (
        "Time-to-return speedups A → B (time of A / time of B), over the pairs of runs of one env that both reached "
        "the target, pooled over envs: geometric mean [cluster-bootstrap interval], median, pairs / envs."
    )
    for experiment, speedups in results.learning_speedups.groupby("experiment", sort=False):
        parts += [f"*{experiment}*: {intro}", speedup_table(speedups, results.study)]
    if results.learning_speedups.empty:
        parts.append("_No pair of runs of two frameworks reached a target._")
    return "\n\n".join(parts) + "\n"

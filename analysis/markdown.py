"""Markdown tables of the analysis' outputs (REPORT.md, the README blocks).

Text from outside (tags, hosts, platforms, devices, versions, env names, run folders, skip reasons) goes through
analysis/common.py: it reads as itself, never as markdown or HTML, and never breaks a table.
"""

import pandas as pd

from analysis.common import in_order, md_cell, md_text, pretty_pair
from sweep.study import Study

NO_INTERVAL = "–"
# text from outside
TEXT_COLUMNS = (
    "env",
    "tag",
    "hostname",
    "device",
    "platform",
    "native bfloat16",
    "versions",
    "run",
    "reason",
)


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


def split_cell(times) -> str:
    """Seconds of rollout and update as "total (rollout + update)"."""
    rollout, update = times
    return f"{rollout + update:.3f} ({rollout:.3f} + {update:.3f})"


def pair_by_size_table(rows: pd.DataFrame, cell, study: Study) -> str:
    """A markdown table of cell(row) per pair (rows) and model size (columns), both in the study's order."""
    return by_size_table(rows, cell, study, "pair", study.pair_names, pretty_pair)


def by_size_table(rows: pd.DataFrame, cell, study: Study, index: str, order, name=str) -> str:
    """A markdown table of cell(row) per value of the column `index` (rows, in `order`, shown as name(value)) and
    model size (columns, in the study's order)."""
    wide = rows.assign(cell=[cell(row) for row in rows.itertuples()]).pivot(
        index=index, columns="size", values="cell"
    )
    wide = wide.reindex(
        index=in_order(order, wide.index), columns=in_order(study.sizes, wide.columns)
    )
    wide.index = [name(value) for value in wide.index]
    return markdown_table(wide.rename_axis(index).reset_index())

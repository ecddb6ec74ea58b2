"""Text from the runs made safe for the readers of this tool's outputs: spreadsheets (the CSVs) and markdown readers
(REPORT.md, the README block, the learning curves' table).

A run's tag, hostname, platform or folder name, an env timing's device, a path given on the command line: text that
anyone who made the run could have chosen. In a CSV, a text cell that begins with = + - @, a tab, a carriage return
or a newline is a formula to a spreadsheet (=HYPERLINK(...), =cmd|' /C calc'!A0): it is written with a ' in front
(OWASP's advice), and so is one that begins with ' itself, so that reading strips exactly one and a runs.csv read back
with --csv gives the text it was written from. Numbers are not text: -1.5 in a number column stays a number.

In markdown, such text goes into tables and lines: a newline or a | would break a table, <img onerror=...> would be
HTML, [x](url) a link, ` a code span. md_text writes text as itself (characters that are not printable as a space,
the rest of those as HTML entities); md_code as a code span that holds it verbatim. The tables' own cells (numbers,
intervals in [ ], ** for bold) are ours: md_cell keeps their markdown and escapes only what could break the table or
be HTML.
"""

import re

import pandas as pd

QUOTE = "'"
# OWASP's, and the quote itself (for the way back)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n", QUOTE)
CELL_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "&#124;"}
TEXT_ENTITIES = {
    **CELL_ENTITIES,
    "[": "&#91;",
    "]": "&#93;",
    "`": "&#96;",
    "\\": "&#92;",
    "*": "&#42;",
}


# --------------------------------------------------------------------------------------------------- CSV
def csv_text(value):
    """A cell as written to a CSV: text a spreadsheet would run (or text that begins with ') gets a ' in front."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return QUOTE + value
    return value


def from_csv_text(value):
    """A cell of a CSV of this tool as the text it was written from (csv_text's inverse)."""
    if isinstance(value, str) and value.startswith(QUOTE):
        return value[1:]
    return value


def text_columns(table: pd.DataFrame) -> list:
    return [
        c
        for c in table.columns
        if not pd.api.types.is_numeric_dtype(table[c]) or table[c].dtype == bool
    ]


def csv_safe(table: pd.DataFrame) -> pd.DataFrame:
    """table with every text cell, and every column name, as csv_text writes it."""
    safe = table.copy()
    for column in text_columns(table):
        safe[column] = table[column].map(csv_text).astype(object)
    return safe.rename(columns=csv_text)


def from_csv(table: pd.DataFrame) -> pd.DataFrame:
    """A table read from a CSV of this tool, its text cells and column names as they were before csv_safe."""
    table = table.rename(columns=from_csv_text)
    for column in text_columns(table):
        if table[column].map(lambda v: isinstance(v, str) and v.startswith(QUOTE)).any():
            table[column] = table[column].map(from_csv_text)
    return table


def write_csv(table: pd.DataFrame, path) -> None:
    csv_safe(table).to_csv(path, index=False)


# ---------------------------------------------------------------------------------------------- markdown
def _escaped(text: str, entities: dict) -> str:
    return "".join(entities.get(ch, ch) if ch.isprintable() else " " for ch in text)


def md_cell(value):
    """A cell of one of our tables in markdown: its markdown kept; what would break the table (a line break, a |)
    or be HTML (<, >, &) escaped."""
    return _escaped(value, CELL_ENTITIES) if isinstance(value, str) else value


def md_text(value) -> str:
    """Text from outside (a tag, a host, a path, a reason) as itself in markdown, in a table or a line."""
    return _escaped(str(value), TEXT_ENTITIES)


def md_code(value) -> str:
    """Text from outside as a code span that shows it verbatim (no markdown, no HTML in a code span), on one line."""
    text = "".join(ch if ch.isprintable() else " " for ch in str(value))
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"

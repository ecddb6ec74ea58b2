"""What every layer of the analysis uses: its one error, a run's identity (declared once, every key
list derived from it), how things are named and ordered, and text from the runs made safe.

BadInput: an input the analysis cannot use (a path, a file, a study.toml, an --out that would lose
data): plot_results.py (and analysis.learning_curves) print the message as one line and exit with
status 2, before anything is written.

Text from the runs made safe for the readers of this tool's outputs: spreadsheets (the CSVs) and
markdown readers (REPORT.md, the README block, the learning curves' table). A run's tag, hostname,
platform or folder name, an env timing's device, a path given on the command line: text that anyone
who made the run could have chosen. In a CSV, a text cell that begins with = + - @, a tab, a
carriage return or a newline is a formula to a spreadsheet (=HYPERLINK(...), =cmd|' /C calc'!A0): it
is written with a ' in front (OWASP's advice), and so is one that begins with ' itself, so that
reading strips exactly one and a runs.csv read back with --csv gives the text it was written from.
Numbers are not text: -1.5 in a number column stays a number. In markdown, such text goes into
tables and lines: a newline or a | would break a table, <img onerror=...> would be HTML, [x](url) a
link, ` a code span. md_text writes text as itself (characters that are not printable as a space,
the rest of those as HTML entities); md_code as a code span that holds it verbatim. The tables' own
cells (numbers, intervals in [ ], ** for bold) are ours: md_cell keeps their markdown and escapes
only what could break the table or be HTML.
"""

import bz2
import gzip
import io
import itertools
import lzma
import math
import os
import re
import shlex
import zipfile
from datetime import datetime, timezone
from typing import NamedTuple

import pandas as pd

from core.study import BACKENDS, RUN_AXES, Experiment, Study


class BadInput(Exception):
    """An input the analysis cannot use: plot_results.py (and analysis.learning_curves) print the
    message as one line and exit with status 2, before anything is written."""


def pretty_pair(pair: str) -> str:
    """A framework pair as shown: "torch->linen" as "torch → linen"."""
    return pair.replace("->", " → ")


def capitalised(name: str) -> str:
    """An experiment's name at the start of a title."""
    return name[:1].upper() + name[1:]


def mode_name(framework: str, compile_mode: str) -> str:
    """A framework in one compile mode: "torch/compile"."""
    return f"{framework}/{compile_mode}"


def in_order(order, values) -> list:
    """The members of order found in values (then any others, sorted), so that categories keep a
    fixed order."""
    values = set(values)
    return [v for v in order if v in values] + sorted(v for v in values if v not in order)


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


def csv_text(value):
    """A cell as written to a CSV: text a spreadsheet would run (or text that begins with ') gets a
    ' in front."""
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
    """A table read from a CSV of this tool, its text cells and column names as they were before
    csv_safe."""
    table = table.rename(columns=from_csv_text)
    for column in text_columns(table):
        if table[column].map(lambda v: isinstance(v, str) and v.startswith(QUOTE)).any():
            table[column] = table[column].map(from_csv_text)
    return table


def without_empty_optional(table: pd.DataFrame) -> pd.DataFrame:
    """table without the optional columns (COMPILE_COLUMNS) that no row fills."""
    empty = [c for c in COMPILE_COLUMNS if c in table and table[c].isna().all()]
    return table.drop(columns=empty)


def compile_seconds(summary: dict) -> dict:
    """summary.json's compile_s as COMPILE_COLUMNS: a part's seconds, None where it is missing or
    not a number (an older run, a torch run)."""
    compiled = summary.get("compile_s")
    compiled = compiled if isinstance(compiled, dict) else {}
    columns = {}
    for part, column in zip(COMPILE_PARTS, COMPILE_COLUMNS):
        value = compiled.get(part)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        columns[column] = float(value) if number and math.isfinite(value) else None
    return columns


def write_csv(table: pd.DataFrame, path) -> None:
    csv_safe(table).to_csv(path, index=False)


def _escaped(text: str, entities: dict) -> str:
    return "".join(entities.get(ch, ch) if ch.isprintable() else " " for ch in text)


def md_cell(value):
    """A cell of one of our tables in markdown: its markdown kept; what would break the table (a
    line break, a |) or be HTML (<, >, &) escaped."""
    return _escaped(value, CELL_ENTITIES) if isinstance(value, str) else value


def md_text(value) -> str:
    """Text from outside (a tag, a host, a path, a reason) as itself in markdown, in a table or a
    line."""
    return _escaped(str(value), TEXT_ENTITIES)


def md_code(value) -> str:
    """Text from outside as a code span that shows it verbatim (no markdown, no HTML in a code
    span), on one line."""
    text = "".join(ch if ch.isprintable() else " " for ch in str(value))
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


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
    """A DataFrame as a markdown table (floats to 3 significant digits, missing as '-'). The cells
    of TEXT_COLUMNS are text from outside: shown as they are (md_text, never read as numbers); the
    others are ours (md_cell)."""
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


# What reading a CSV file that is not one of this tool's (missing, binary, empty, malformed) raises
# (or, compressed, whose compression is broken: a truncated gzip, a zip or xz that is not one)
CSV_READ_ERRORS = (
    OSError,
    EOFError,
    zipfile.BadZipFile,
    lzma.LZMAError,
    ValueError,
    UnicodeDecodeError,
    pd.errors.ParserError,
    pd.errors.EmptyDataError,
)


# ------------------------------------------------------------------------------- a run's identity
# What a run measured (its env, on its backend: "CartPole-v1@envpool"), with what (framework, model
# size, compile mode, sync setting, the study's run axes: data type, agents per process) and which
# repetition (seed, tag), in config.json's keys. The key lists below derive from it, and a new run
# axis is one entry of core/study_types.py's RUN_AXES: another value is another cell.
IDENTITY = ["env", "framework", "model_size", "compile", "seed", "tag", "sync_timing"]
IDENTITY += [axis.key for axis in RUN_AXES]
# the run axes whose every value has speedup tables of its own (a table's variant is its value of
# each, after its env backend)
TABLE_AXES = [axis for axis in RUN_AXES if axis.title]
VARIANTS = ["backend", *[axis.key for axis in TABLE_AXES]]
# what a speedup compares (framework A against B, each in its compile mode, over their seeds) or
# what its experiment fixes (the sync setting): the rest of the identity is a pair's
COMPARED = ["framework", "compile", "seed", "sync_timing"]
# a run's length and batch: runs of other configurations are never pooled in one cell
CONFIGURATION = ["num_iterations", "batch_size"]
# the machine a run ran on: runs are paired within one
MACHINE = ["hostname", "device_name"]
# two runs make a pair when these are the same (analysis/speedups.py)
PAIR_KEYS = ["experiment", *[k for k in IDENTITY if k not in COMPARED], *CONFIGURATION, *MACHINE]
# config.json's keys in runs.csv and summary.csv
CONFIG_COLUMNS = [*IDENTITY, "num_iterations", "num_envs", "num_steps", "batch_size", "exp_name"]
CONFIG_COLUMNS += ["device_name", "hostname", "platform", "cpu_bf16", "versions", "command"]
CONFIG_COLUMNS += ["start_time"]
SUMMARY_JSON_COLUMNS = ["status", "iterations_completed", "setup_s", "import_s", "total_s"]
SUMMARY_JSON_COLUMNS += ["final_return", "resumed_at"]  # resumed_at as words: resumed_words
# each agent's final return (a JSON list in a runs.csv); the process's peak memory (bytes, or none)
SUMMARY_JSON_COLUMNS += ["final_returns", "peak_rss_bytes", "peak_device_bytes"]
# summary.json's compile_s (JAX's compile time up to the end of iteration 0, per jitted function)
# as columns of seconds; a table keeps them only where a run recorded them
# (without_empty_optional), so the tables of the editions before compile_s stay as they were
# (iterations: the fast path's one call, rollout and update in it, with --no-sync-timing)
COMPILE_PARTS = ("rollout", "update", "iterations", "other")
COMPILE_COLUMNS = [f"compile_{part}_s" for part in COMPILE_PARTS]
# experiment_folder: the experiment whose folder (bench.sh's) holds the run, "" for a run elsewhere
RUN_COLUMNS = ["run", "run_dir", "experiment_folder", *CONFIG_COLUMNS, *SUMMARY_JSON_COLUMNS]
RUN_COLUMNS += COMPILE_COLUMNS
# columns of a runs.csv of an older plot_results.py -> their names now
RENAMED_COLUMNS = {"device": "device_name", "sweep": "experiment_folder"}
# the identity's axes that tables of earlier versions lack, and the value their runs had: before
# the env backends every env on gymnax; before a learning row per tag the scripts' default tag;
# before a run axis (--dtype, --num-agents) its default
ADDED_KEYS = {"backend": BACKENDS[0], "tag": "default"}
ADDED_KEYS |= {axis.key: axis.default for axis in RUN_AXES}
# what tells two runs apart (run_keys); the folder name too for a run without a start time
SAME_RUN_COLUMNS = ["command", "hostname", "start_time"]


class SkippedRun(NamedTuple):
    path: str
    reason: str


def config_cell(value):
    """A config value as one CSV cell: a dict as 'key value, ...', a list (argv) as a shell command
    line."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return shlex.join(str(v) for v in value)
    return value


def text_column(table: pd.DataFrame, column: str) -> pd.Series:
    """A column as text, "" where it is missing."""
    if column not in table:
        return pd.Series("", index=table.index)
    return table[column].astype(object).where(table[column].notna(), "").astype(str)


def run_keys(table: pd.DataFrame) -> pd.Series:
    """Per row of a runs or summary table, the identity of its run: SAME_RUN_COLUMNS as one string
    (one command started on one host at one time is one run, whatever its folder is called), and its
    folder name where it has no start time (a run of an older runs.csv)."""
    parts = [text_column(table, c) for c in SAME_RUN_COLUMNS]
    key = parts[0].str.cat(parts[1:], sep="\x1f")
    return key.where(parts[-1] != "", key + "\x1f" + text_column(table, "run"))


# ------------------------------------------------------------------------- files read, bounded
# The most bytes a table (a runs.csv, a speedups.csv) or a README the analysis reads may hold, on
# disk and once decompressed: 24 times the largest runs.csv of an edition (results/learning-cpu's,
# 45 MB for 41,000 rows x iterations), and a table pandas reads in a few GB of memory
MAX_TABLE_BYTES = 2**30
# what a table is decompressed by, by the suffix of its name (as pandas infers); a zip holds one
# file, as pandas wants
DECOMPRESS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
COMPRESSIONS = (*DECOMPRESS, ".zip")
# suffixes pandas would decompress that are not read here: no bounded reader of the standard library
UNREAD_COMPRESSIONS = (".zst", ".tar", ".tgz")


class Bounded(io.RawIOBase):
    """A binary stream read through, BadInput (one line naming the file and the bound) at its
    max_bytes + 1st byte: a small gzip that expands to gigabytes is refused at the bound, not read
    whole."""

    def __init__(self, stream, flag: str, path, max_bytes: int):
        super().__init__()
        self.stream, self.flag, self.path, self.max_bytes = stream, flag, path, max_bytes
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        size = self.stream.readinto(buffer)
        self.count += size
        if self.count > self.max_bytes:
            raise too_large(self.flag, self.path, "once decompressed", self.max_bytes)
        return size

    def close(self) -> None:
        self.stream.close()
        super().close()


def too_large(flag: str, path, what: str, max_bytes: int) -> BadInput:
    return BadInput(
        f"{flag} {path}: more than {max_bytes:,} bytes {what}, the most a file the analysis reads "
        "may hold; nothing written"
    )


def open_bounded(flag: str, path) -> io.BufferedReader:
    """The bytes of a table or text file at path, decompressed by its suffix (.gz, .bz2, .xz, .zip
    as pandas would), through a stream that raises BadInput at its MAX_TABLE_BYTES + 1st byte;
    BadInput at once for a file larger than that on disk (a sparse file of gigabytes), or
    compressed in a way not read here. OSError when it cannot be read."""
    max_bytes = MAX_TABLE_BYTES
    name = str(path).lower()
    if name.endswith(UNREAD_COMPRESSIONS) or ".tar." in name:
        kinds = ", ".join(COMPRESSIONS)
        raise BadInput(f"{flag} {path}: give it plain or compressed as one of {kinds}")
    size = os.stat(path).st_size
    if size > max_bytes:
        raise too_large(flag, path, "on disk", max_bytes)
    suffix = os.path.splitext(name)[1]
    if suffix == ".zip":
        stream = zip_member(flag, path)
    else:
        stream = DECOMPRESS.get(suffix, lambda p: open(p, "rb"))(path)
    return io.BufferedReader(Bounded(stream, flag, path, max_bytes), 1 << 20)


def zip_member(flag: str, path):
    """The one file of a zip (pandas reads no other zip); BadInput for a zip of more or none."""
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        if len(names) != 1:
            raise BadInput(f"{flag} {path}: a zip of {len(names)} files; give one of a single CSV")
        # the member keeps the file open once the archive is closed
        return archive.open(names[0])


def check_bounded(flag: str, path) -> None:
    """BadInput (one line) unless the file at path, decompressed, holds at most MAX_TABLE_BYTES:
    read through once in chunks and not kept, so that refusing a gzip bomb takes no more memory
    than a chunk and no longer than decompressing the bound."""
    with open_bounded(flag, path) as stream:
        while stream.read(1 << 20):
            pass


def read_bounded_text(flag: str, path) -> str:
    """The text (UTF-8) of a file the analysis reads whole (a README), at most MAX_TABLE_BYTES;
    BadInput when it holds more, or is not UTF-8 text."""
    with open_bounded(flag, path) as stream:
        data = stream.read()
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        raise BadInput(f"{flag} {path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_table(flag: str, path, **options) -> pd.DataFrame:
    """pd.read_csv of the table at path (options: read_csv's) within MAX_TABLE_BYTES: checked
    through first (check_bounded), then read through the same bound."""
    check_bounded(flag, path)
    with open_bounded(flag, path) as stream:
        return pd.read_csv(stream, **options)


def read_csv(flag: str, path: str, what: str, **options) -> pd.DataFrame:
    """A CSV file of this tool, its text as it was written from (analysis/common.py), or BadInput
    naming it when it is empty, binary, not CSV or larger than MAX_TABLE_BYTES (compressed or
    not)."""
    try:
        return from_csv(read_table(flag, path, **options))
    except CSV_READ_ERRORS as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BadInput(f"{flag} {path} is not a {what} of plot_results.py ({reason})") from None


def numeric_columns(
    table: pd.DataFrame, columns: list[str], flag: str, path: str, what: str
) -> pd.DataFrame:
    """table with columns made numeric; BadInput naming the first cell that is not a number."""
    table = table.copy()
    for column in columns:
        values = pd.to_numeric(table[column], errors="coerce")
        bad = values.isna() & table[column].notna()
        if bad.any():
            value = table[column][bad].iloc[0]
            raise BadInput(
                f"{flag} {path} is not a {what} of plot_results.py: its {column} holds {value!r}"
            )
        table[column] = values
    return table


def metric_name(metric: str, study: Study) -> str:
    steady = study.steady.label
    return {
        "total": "Total time",
        "steady": f"Steady state, mean time/iteration over {steady}",
        "rollout": f"Rollout, mean over {steady}",
        "update": f"Update, mean over {steady}",
    }[metric]


def metric_title(metric: str, experiment: str, study: Study, variant: tuple) -> str:
    """A table's title: the metric, the experiment and, where the experiment has several, the
    table's variant (VARIANTS' values: the backend of its envs, its runs' data type)."""
    exp = study.experiments[experiment]
    modes = "; speedups between default compile modes" if exp.all_compile_modes else ""
    sync = "on" if metric_sync(metric) else "off"
    where = variant_words(experiment, variant, study, "; ")
    return f"{metric_name(metric, study)} ({experiment}: {exp.title}{where}; sync {sync}{modes})"


# each of VARIANTS: the experiment's list of its values, and a table title's words for one
VARIANT_WORDS = [("backends", "its envs on {}"), *[(a.field, a.title) for a in TABLE_AXES]]


def experiment_variants(exp: Experiment) -> list[tuple]:
    """Each variant of an experiment's tables (VARIANTS' values), in the study's order: each of its
    env backends with each of its data types."""
    return list(itertools.product(*[getattr(exp, field) for field, _ in VARIANT_WORDS]))


def variant_words(experiment: str, variant: tuple, study: Study, separator: str) -> str:
    """A table's variant (a value of each of VARIANTS) in words, each after separator, for those
    the experiment has several of: "; its envs on envpool; in bfloat16"."""
    exp = study.experiments[experiment]
    words = [
        separator + title.format(value)
        for (field, title), value in zip(VARIANT_WORDS, variant)
        if len(getattr(exp, field)) > 1
    ]
    return "".join(words)


METRICS = ("total", "steady", "rollout", "update")


def metric_sync(metric: str) -> bool:
    """The sync setting a metric is measured under: rollout and update need synchronised timers,
    total time and the steady state are measured without them (the timers' waits would slow the
    runs)."""
    return metric in ("rollout", "update")


def split_cell(times) -> str:
    """Seconds of rollout and update as "total (rollout + update)"."""
    rollout, update = times
    return f"{rollout + update:.3f} ({rollout:.3f} + {update:.3f})"


# cell_statistics' columns, after each table's keys
CELL_STATISTICS = ["geomean", "median", "ci_low", "ci_high", "n_pairs", "n_clusters"]
SPEEDUP_COLUMNS = ["metric", "experiment", *VARIANTS, "size", "pair", *CELL_STATISTICS]
ENV_COST_STATISTICS = [
    "n_envs",
    "geomean",
    "rho",
    "rho_low",
    "rho_high",
    "slope",
    "slope_low",
    "slope_high",
    "trend",
]
ENV_COST_COLUMNS = ["metric", "size", "pair", *ENV_COST_STATISTICS]
DTYPE_COLUMNS = ["metric", "experiment", "backend", "size", "framework", "pair", *CELL_STATISTICS]


def table_keys(columns: list[str]) -> list[str]:
    """A table's keys: its columns before the statistics (speedups.cell_statistics's,
    env_costs')."""
    return [c for c in columns if c not in (*CELL_STATISTICS, *ENV_COST_STATISTICS)]


# table -> the columns that identify its rows; "run_key" stands for run_keys (the run's identity)
TABLE_KEYS = {
    "runs.csv": ["run_key", "iteration"],
    "summary.csv": ["run_key"],
    "speedups.csv": table_keys(SPEEDUP_COLUMNS),
    "dtype_speedups.csv": table_keys(DTYPE_COLUMNS),
    "env_cost.csv": table_keys(ENV_COST_COLUMNS),
    "learning.csv": ["experiment", "tag", "env", "framework", "num_agents"],
    "learning_speedups.csv": ["target", "experiment", "pair"],
}


def generated_at() -> datetime:
    """Now, or the reproducible-builds convention's SOURCE_DATE_EPOCH (seconds since 1970, UTC) when
    set: an edition re-plotted with the epoch of its last plot is then byte for byte the same."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None:
        return datetime.now(timezone.utc)
    if not epoch.isdigit():
        raise BadInput(f"SOURCE_DATE_EPOCH={epoch!r}: not a number of seconds since 1970")
    return datetime.fromtimestamp(int(epoch), timezone.utc)

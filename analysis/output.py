"""The analysis' own files: a runs.csv read back (--csv: its runs checked as runlog checks a
folder's, run by run), and --out written without losing what was there; the README with its blocks
replaced between their markers.

The files of this tool in --out are its tables (runs.csv, summary.csv, speedups.csv, env_cost.csv,
the learning and data-type tables), REPORT.md and the figures the study can draw; anything else
there (a README, the run folders, logs) is never touched.

Replacing with less: an analysis would leave --out with less than it holds when one of its tables
there has a row the new one lacks (a run of runs.csv or summary.csv, told apart by folder name,
command, hostname and start time; an iteration of runs.csv; a (metric, experiment, backend, dtype,
size, pair) of speedups.csv; a (metric, size, pair) of env_cost.csv; the like of the others,
TABLE_KEYS), when such a table cannot be read, or when a figure of this tool there would not be
drawn again (which would leave it stale: it is removed). Such a call is refused (exit status 2, one
line naming the folder and --force) before anything is written, unless --force is given. REPORT.md
is rewritten from the rest and not compared.

Every file is first written into a temporary folder beside --out; only when all of them are complete
do they replace their namesakes in --out, each by one rename (atomic), with SIGINT and SIGTERM held
back meanwhile. An analysis interrupted before then leaves --out as it was. A --out that does not
exist yet is the temporary folder, renamed.

Whose files, and which paths can be written: analysis/owned.py (check_out, check_target), before
anything is read: a file of this tool in --out that it did not write is refused in one line (exit
status 2), --force or not.

Links (atomic.py's check_inside and write_file, the project's one write): --out, --update-readme and
--readme-block are named by the user and followed wherever they lead (a chain of links included);
below --out no file is written through a link: a file of this tool in --out that is a link is
refused in one line before anything is read, and one planted while the analysis ran fails the
replacement (exit status 1) with --out as it was for that file. A target that is not a regular file
(a folder, /dev/null, a FIFO, a circular link) is refused before anything is written (owned.py).
"""

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from analysis.common import (
    ADDED_KEYS,
    COMPILE_COLUMNS,
    CONFIG_COLUMNS,
    CSV_READ_ERRORS,
    RENAMED_COLUMNS,
    SUMMARY_JSON_COLUMNS,
    TABLE_KEYS,
    BadInput,
    SkippedRun,
    from_csv,
    numeric_columns,
    read_bounded_text,
    read_csv,
    read_table,
    run_keys,
    text_column,
)
from atomic import (
    BadJson,
    check_inside,
    current_umask,
    deferred_signals,
    keep_owner_and_mode,
    old_stat,
    parse_json,
)
from core import runlog
from core.study import RUN_AXES, Study

REPORT = "REPORT.md"


def replace_from(staged: Path, out: Path, name: str) -> None:
    """A complete file of the stage moved to name in out (the user's --out, followed): renamed over
    the file there, with its mode; LinkRefused (an OSError) when that is a link planted since
    check_out."""
    dest = check_inside(out, Path(out) / name, "--out")
    keep_owner_and_mode(staged, old_stat(dest))
    os.replace(staged, dest)


def row_keys(table: pd.DataFrame, name: str) -> list[tuple]:
    """The identity of each row of a table of this tool, as text (a missing cell as "")."""
    columns = TABLE_KEYS[name]
    if "run_key" in columns:
        table = table.assign(run_key=run_keys(table))
    cells = table[columns].astype(object)
    return list(cells.where(cells.notna(), "").astype(str).itertuples(index=False, name=None))


def old_table(path: Path, name: str) -> pd.DataFrame:
    """The identifying columns of a table of this tool found in --out; ValueError when it cannot be
    read."""
    wanted = {c for c in TABLE_KEYS[name] if c != "run_key"}
    if "run_key" in TABLE_KEYS[name]:
        wanted |= {"run", "command", "hostname", "start_time"}
    try:
        old = read_table(
            "--out",
            path,
            usecols=lambda c: c in wanted,
            dtype=str,
            keep_default_na=False,
            na_values=[""],
        )
        # its text as written from (analysis/common.py): the keys of the new table's rows
        old = from_csv(old)
    except CSV_READ_ERRORS as e:
        raise ValueError(f"{name} cannot be read ({type(e).__name__})") from None
    except BadInput as e:  # larger than any table of this tool
        raise ValueError(f"{name} cannot be read ({e})") from None
    for column, value in ADDED_KEYS.items():
        if column in wanted and column not in old:
            old[column] = value
    missing = sorted(c for c in wanted - {"command", "hostname", "start_time"} if c not in old)
    if missing:
        raise ValueError(f"{name} has no column {', '.join(missing)}")
    return old


def lost_rows(out: Path, tables: dict[str, pd.DataFrame]) -> list[str]:
    """What each table of this tool in out holds that its new version would not (or why it cannot be
    compared)."""
    losses = []
    for name, new in tables.items():
        if not (out / name).is_file():
            continue
        try:
            old = old_table(out / name, name)
        except ValueError as e:
            losses.append(str(e))
            continue
        old_keys = row_keys(old, name)
        gone = set(old_keys) - set(row_keys(new, name))
        if not gone:
            continue
        if "run_key" in TABLE_KEYS[name]:  # count runs, not iterations
            runs = {key[0] for key in old_keys}
            losses.append(
                f"{name}: {len({key[0] for key in gone})} of its {len(runs)} runs are not in this "
                "analysis"
            )
        else:
            losses.append(
                f"{name}: {len(gone)} of its {len(old_keys)} rows are not in this analysis"
            )
    return losses


def stale_figures(out: Path, ours: set[str], drawn: set[str]) -> list[str]:
    """The figures of this tool in out that this call does not draw."""
    return sorted(name for name in ours - drawn if (out / name).exists())


def refuse(out: Path, losses: list[str]) -> None:
    raise BadInput(
        f"--out {out} holds more than this analysis would write ({'; '.join(losses)}); nothing "
        "written: "
        "give --force to replace it"
    )


@contextmanager
def staged(out: Path, remove: list[str]):
    """A temporary folder beside out to write every file into; when the block ends without an error,
    its files replace their namesakes in out (REPORT.md last) and the files in remove are deleted
    from out. On an error or an interruption, out is left as it was and the temporary folder
    removed."""
    # out may be a link to the folder (the user named it): the stage goes beside the folder, on its
    # disk
    real = check_inside(out, out, "--out")
    real.parent.mkdir(parents=True, exist_ok=True)
    stage = None
    try:
        # made and named with the stop signals held: a stop between the two would leave it
        with deferred_signals():
            stage = Path(
                tempfile.mkdtemp(prefix=f".{real.name}.", suffix=".partial", dir=real.parent)
            )
        yield stage
        with deferred_signals():
            if not real.exists():
                # mkdtemp's folder is private; a results folder is not
                stage.chmod(0o777 & ~current_umask())
                stage.rename(real)
                return
            files = sorted(stage.iterdir(), key=lambda p: (p.name == REPORT, p.name))
            for path in files:
                replace_from(path, out, path.name)
            for name in remove:
                check_inside(out, Path(out) / name, "--out").unlink(missing_ok=True)
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)


RUNS_CSV_COLUMNS = [
    "run",
    "iteration",
    "time/iteration",
    *runlog.REQUIRED_CONFIG,
    "status",
    "total_s",
]
RUNS_CSV_NUMBERS = ["iteration", "time/iteration", "total_s", "batch_size", "num_iterations"]
# its other numbers, checked run by run (runlog.check_completed): a word there skips its run, not
# the file
RUNS_CSV_CHECKED_NUMBERS = [
    "seed",
    "num_envs",
    "num_steps",
    "iterations_completed",
    "setup_s",
    "import_s",
]
RUNS_CSV_CHECKED_NUMBERS += ["final_return", "peak_rss_bytes", "peak_device_bytes"]
# the text columns of a runs.csv: read as written (never as numbers, never "NA" as missing)
RUNS_CSV_TEXT = [
    "run",
    "run_dir",
    "experiment_folder",
    "sweep",
    "env",
    "framework",
    "model_size",
    "compile",
    "tag",
    "exp_name",
]
RUNS_CSV_TEXT += [
    "device_name",
    "device",
    "hostname",
    "platform",
    "cpu_bf16",
    "versions",
    "command",
    "start_time",
    "status",
    "resumed_at",
    "final_returns",  # JSON: a list of numbers and nulls
]
# the run axes: a word (--dtype) is text, a count (--num-agents) a number checked as the others
RUNS_CSV_TEXT += [axis.key for axis in RUN_AXES if isinstance(axis.default, str)]
RUNS_CSV_CHECKED_NUMBERS += [axis.key for axis in RUN_AXES if isinstance(axis.default, int)]


def json_value(value):
    """A cell as the JSON value it came from: None for a missing one, int for a whole number."""
    if pd.isna(value):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value.item() if hasattr(value, "item") else value


def cell_value(value):
    """A cell of a column of a runs.csv that is not text, as the JSON value it came from: a column
    of mixed cells is read as text, and its cells that spell a number or a bool are made one again
    (the others stay text)."""
    if isinstance(value, str):
        if value in ("True", "False"):
            return value == "True"
        try:
            value = float(value)
        except ValueError:
            return value
    return json_value(value)


def check_csv_run(rows: pd.DataFrame, study: Study) -> None:
    """runlog.check_completed on a run of a runs.csv (a runs.csv without iterations_completed: every
    logged one)."""
    first = rows.iloc[0]
    cell = {
        key: json_value if key in RUNS_CSV_TEXT else cell_value
        for key in [*CONFIG_COLUMNS, *SUMMARY_JSON_COLUMNS]
    }
    config = {key: cell[key](first[key]) for key in CONFIG_COLUMNS if key in rows}
    summary = {key: cell[key](first[key]) for key in SUMMARY_JSON_COLUMNS if key in rows}
    if isinstance(summary.get("final_returns"), str):  # else runlog refuses it
        summary["final_returns"] = json_list(summary["final_returns"])
    resumed = resumed_list(summary.pop("resumed_at", None))
    if resumed is not None:
        summary["resumed_at"] = resumed
    if "iterations_completed" not in rows:
        summary["iterations_completed"] = int(rows["time/iteration"].notna().sum())
    run = runlog.Run(Path(str(first.get("run_dir", first["run"]))), config, summary, rows)
    runlog.check_completed(run, study)


def read_runs_csv(path: str, study: Study) -> tuple[pd.DataFrame, list[SkippedRun]]:
    """The completed runs of a runs.csv written earlier, and the skipped ones; BadInput when it is
    not a runs.csv."""
    text = {column: str for column in RUNS_CSV_TEXT}
    runs = read_csv(
        "--csv",
        path,
        "runs.csv",
        low_memory=False,
        dtype=text,
        keep_default_na=False,
        na_values=[""],
    )
    runs = runs.rename(
        columns={
            old: new for old, new in RENAMED_COLUMNS.items() if old in runs and new not in runs
        }
    )
    missing = [column for column in RUNS_CSV_COLUMNS if column not in runs]
    if missing:
        raise BadInput(
            f"--csv {path} is not a runs.csv of plot_results.py (no column {', '.join(missing)})"
        )
    for axis in RUN_AXES:  # a runs.csv of before a run axis: the scripts' default
        runs[axis.key] = runs[axis.key].fillna(axis.default) if axis.key in runs else axis.default
    runs = numeric_columns(runs, RUNS_CSV_NUMBERS, "--csv", path, "runs.csv")
    for column in COMPILE_COLUMNS:  # optional seconds: a word there is no number
        if column in runs:
            runs[column] = pd.to_numeric(runs[column], errors="coerce")
    # copies of one run under two folder names are checked apart (and counted once by load_runs)
    keys = run_keys(runs) + "\x1f" + text_column(runs, "run")
    bad, skipped = pd.Series(False, index=runs.index), []
    for _, rows in runs.groupby(keys, sort=False):
        try:
            check_csv_run(rows, study)
        except runlog.RunError as e:
            bad[rows.index] = True
            skipped.append(SkippedRun(f"{rows['run'].iloc[0]} (in {path})", str(e)))
    runs = runs[~bad].copy()
    # numbers again once the runs whose cells were words are gone
    for column in RUNS_CSV_CHECKED_NUMBERS:
        if column in runs and runs[column].dtype == object:
            runs[column] = pd.to_numeric(runs[column].map(cell_value), errors="coerce")
    return runs, skipped


def as_bool(values: pd.Series) -> pd.Series:
    return values.map(lambda v: str(v).strip().lower() in ("true", "1", "yes"))


def block_span(path, lines: list[str], markers: tuple[str, str]):
    """(the line of its opening marker, of its closing one) of a block in lines (a README's, with
    their ends), None when it has none: a marker is a line of its own, as this tool writes it (a
    marker quoted in a sentence is text). BadInput when a marker is such a line twice (which block
    to replace is ambiguous), one is there without the other, or the closing one comes first."""
    found = [[i for i, line in enumerate(lines) if line.rstrip("\r\n") == m] for m in markers]
    for marker, at in zip(markers, found):
        if len(at) > 1:
            raise BadInput(
                f"{path} holds {marker} {len(at)} times: which block to replace is ambiguous; "
                "nothing written (keep one block)"
            )
    if not any(found):
        return None
    if not all(found):  # half a block: where the other half was meant to be is anyone's guess
        held, lacked = markers if found[0] else markers[::-1]
        raise BadInput(f"{path} holds {held} without {lacked}; nothing written")
    (start,), (end,) = found
    if end < start:
        raise BadInput(f"{path}: {markers[1]} comes before {markers[0]}; nothing written")
    return start, end


def readme_with(
    path: Path, blocks: dict[tuple[str, str], str], flag: str = "--update-readme", add=False
) -> str:
    """The text of the file at path with each block between its markers (start, end; the markers
    stay, each a line of its own: block_span), the rest as it was. A block whose markers the file
    lacks is refused, or with add put at its end between its markers (a file not there yet: the
    blocks alone)."""
    text = read_bounded_text(flag, path) if not add or Path(path).exists() else ""
    for markers, block in blocks.items():
        lines = text.splitlines(keepends=True)
        block = block if block.endswith("\n") else f"{block}\n"
        span = block_span(path, lines, markers)
        if span is not None:
            text = "".join([*lines[: span[0] + 1], block, *lines[span[1] :]])
        elif add:
            if text:  # after a blank line, as the README's blocks are
                text += "\n\n" if not text.endswith("\n") else "\n"
            text += f"{markers[0]}\n{block}{markers[1]}\n"
        else:
            raise BadInput(f"{path} has no {markers[0]} ... {markers[1]} block; nothing written")
    return text


def resumed_list(cell):
    """A resumed_at cell of a runs.csv as summary.json's value (for runlog's checks): None for a run
    never resumed, a list of ints, or the cell as it is when it is not one (which runlog then
    refuses)."""
    if cell is None or cell == "":
        return None
    words = str(cell).split()
    if all(word.isascii() and word.isdigit() for word in words):
        return [int(word) for word in words]
    return cell


def json_list(cell):
    """A final_returns cell of a runs.csv (JSON, atomic's reader: bounded in size and depth) as
    summary.json's list, or the cell as it is (which runlog then refuses)."""
    try:
        return parse_json(cell, "runs.csv final_returns")
    except BadJson:
        return cell

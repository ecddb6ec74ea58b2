"""Run folders and runs.csv files -> one tidy table of the completed runs (a row per run x iteration).

A run is a folder holding config.json, at any depth under the given folders. runlog.read_completed_run reads it
and says why it cannot be used: the one definition of a usable completed run (checked against the study, and its
events file against its config), shared with bench.sh's resume. The runs of a runs.csv written earlier go through
the same check (runlog.check_completed, without an events file), run by run; its text columns are read as text (a
tag "007" or "NA" stays one). Unusable runs are skipped with their reason, never stop the analysis.

A run's dtype is its config.json dtype (float32 for runs made before the scripts had --dtype). A run's env is its env
label (study.env_label): the env id, with "@envpool" for a run on envpool (config.json
env_backend; runs made before the scripts had backends lack it, and ran on gymnax), so that the env column, and
every table and figure keyed by it, never merges the two backends of one env id.

A resumed run (the scripts' --resume) is read by runlog as one run, its events files merged; its resumed_at column
holds summary.json's resumed_at as words ("4 8"; "" for a run never resumed), and is read back from a runs.csv, so
that the analysis keeps it out of its timings there too (analysis/summary.py's is_timed).

Runs are told apart by their content: the config's command, hostname and start time (with the folder name only for
a run of an older runs.csv without a start time). Runs of other tags or machines that share a folder name are all
kept; the same run given twice (a copied folder, cp -a B B-2; a folder and a runs.csv) counts once: the first copy
is kept, the others are listed as skipped. Run folders are found as bench.sh's resume finds them
(runlog.find_runs): a link to a folder is not followed, and is listed as skipped.
"""

import shlex
from pathlib import Path
from typing import NamedTuple, Optional

import pandas as pd

from analysis import runlog
from analysis.errors import BadInput
from analysis.escape import from_csv
from sweep import env_timing_file
from sweep.study import BACKENDS, DTYPES, Study, env_label

# What reading a CSV file that is not one of this tool's (missing, binary, empty, malformed) raises
CSV_READ_ERRORS = (
    OSError,
    ValueError,
    UnicodeDecodeError,
    pd.errors.ParserError,
    pd.errors.EmptyDataError,
)

CONFIG_COLUMNS = [
    "env",
    "framework",
    "model_size",
    "compile",
    "seed",
    "tag",
    "sync_timing",
    "dtype",
    "num_iterations",
    "num_envs",
    "num_steps",
    "batch_size",
    "exp_name",
    "device_name",
    "hostname",
    "platform",
    "cpu_bf16",
    "versions",
    "command",
    "start_time",
]
SUMMARY_JSON_COLUMNS = [
    "status",
    "iterations_completed",
    "setup_s",
    "import_s",
    "total_s",
    "final_return",
    "resumed_at",  # as words: resumed_words
]
# experiment_folder: the experiment whose folder (bench.sh's) holds the run, "" for a run elsewhere
RUN_COLUMNS = ["run", "run_dir", "experiment_folder", *CONFIG_COLUMNS, *SUMMARY_JSON_COLUMNS]
# columns of a runs.csv of an older plot_results.py -> their names now
RENAMED_COLUMNS = {"device": "device_name", "sweep": "experiment_folder"}
# what tells two runs apart (run_keys); the folder name too for a run without a start time
IDENTITY_COLUMNS = ["command", "hostname", "start_time"]
RUNS_CSV_COLUMNS = [
    "run",
    "iteration",
    "time/iteration",
    *runlog.REQUIRED_CONFIG,
    "status",
    "total_s",
]
RUNS_CSV_NUMBERS = ["iteration", "time/iteration", "total_s", "batch_size", "num_iterations"]
# its other numbers, checked run by run (runlog.check_completed): a word there skips its run, not the file
RUNS_CSV_CHECKED_NUMBERS = [
    "seed",
    "num_envs",
    "num_steps",
    "iterations_completed",
    "setup_s",
    "import_s",
]
RUNS_CSV_CHECKED_NUMBERS += ["final_return"]
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
    "dtype",
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
]
TIMING_COLUMNS = ["obs_dim", "num_actions", "ms_per_step", "ratio"]


class SkippedRun(NamedTuple):
    path: str
    reason: str


def config_cell(value):
    """A config value as one CSV cell: a dict as 'key value, ...', a list (argv) as a shell command line."""
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
    """Per row of a runs or summary table, the identity of its run: IDENTITY_COLUMNS as one string (one command
    started on one host at one time is one run, whatever its folder is called), and its folder name where it has
    no start time (a run of an older runs.csv)."""
    parts = [text_column(table, c) for c in IDENTITY_COLUMNS]
    key = parts[0].str.cat(parts[1:], sep="\x1f")
    return key.where(parts[-1] != "", key + "\x1f" + text_column(table, "run"))


# ----------------------------------------------------------------------------------------- run folders
def resumed_words(summary: dict) -> str:
    """summary.json's resumed_at (runlog.resumed_at: checked) as one cell: "4 8", "" for a run never resumed."""
    return " ".join(str(k) for k in runlog.resumed_at(summary))


def resumed_list(cell):
    """A resumed_at cell of a runs.csv as summary.json's value (for runlog's checks): None for a run never resumed,
    a list of ints, or the cell as it is when it is not one (which runlog then refuses)."""
    if cell is None or cell == "":
        return None
    words = str(cell).split()
    if all(word.isascii() and word.isdigit() for word in words):
        return [int(word) for word in words]
    return cell


def run_env(config: dict) -> str:
    """A run's env label: its env on its env_backend (gymnax where config.json has none)."""
    return env_label(config["env"], config.get("env_backend") or BACKENDS[0])


def bf16_words(flags) -> Optional[str]:
    """config.json cpu_bf16 (the CPU's native bfloat16 flags) in words: the flags, "none (emulated)" for none, None
    where it was not recorded (a run of before --dtype, a machine without /proc/cpuinfo)."""
    if not isinstance(flags, list):
        return None
    return " ".join(str(flag) for flag in flags) or "none (emulated)"


def run_rows(run: runlog.Run, study: Study) -> pd.DataFrame:
    """The rows of one completed run: its config and summary on every row, its scalars one row per logged step."""
    config, summary, scalars = run.config, run.summary, run.scalars
    # bench.sh writes each experiment's runs into a folder of its name (two experiments may run the same cell)
    parent = run.path.parent.name
    experiment_folder = parent if parent in study.experiments else ""
    # "device" in older runs
    config = {**config, "device_name": config.get("device_name", config.get("device"))}
    config["env"] = run_env(config)
    config["dtype"] = config.get("dtype") or DTYPES[0]
    config["cpu_bf16"] = bf16_words(config.get("cpu_bf16"))
    info = {
        "run": run.path.name,
        "run_dir": str(run.path),
        "experiment_folder": experiment_folder,
        **{key: config_cell(config.get(key)) for key in CONFIG_COLUMNS},
        **{key: summary.get(key) for key in SUMMARY_JSON_COLUMNS},
        "resumed_at": resumed_words(summary),
    }
    iteration = scalars["step"] // config["batch_size"] - 1
    return pd.concat([pd.DataFrame({**info, "iteration": iteration}), scalars], axis=1)


def read_run_dirs(roots: list[str], study: Study) -> tuple[list[pd.DataFrame], list[SkippedRun]]:
    """Every run folder (one holding config.json) at any depth under roots: the completed ones, and the skipped."""
    found, links = runlog.find_runs(roots)
    frames = []
    skipped = [
        SkippedRun(str(link), "a link to a folder: not followed (nor by bench.sh's resume)")
        for link in links
    ]
    for run_dir in found:
        try:
            frames.append(run_rows(runlog.read_completed_run(run_dir, study), study))
        except Exception as e:  # one broken run never stops the analysis
            reason = str(e) if isinstance(e, runlog.RunError) else f"{type(e).__name__}: {e}"
            skipped.append(SkippedRun(str(run_dir), reason))
    return frames, skipped


# --------------------------------------------------------------------------------------------- runs.csv
def read_csv(flag: str, path: str, what: str, **options) -> pd.DataFrame:
    """A CSV file of this tool, its text as it was written from (analysis/escape.py), or BadInput naming it when it is
    empty, binary or not CSV."""
    try:
        return from_csv(pd.read_csv(path, **options))
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


def json_value(value):
    """A cell as the JSON value it came from: None for a missing one, int for a whole number."""
    if pd.isna(value):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value.item() if hasattr(value, "item") else value


def cell_value(value):
    """A cell of a column of a runs.csv that is not text, as the JSON value it came from: a column of mixed cells is
    read as text, and its cells that spell a number or a bool are made one again (the others stay text)."""
    if isinstance(value, str):
        if value in ("True", "False"):
            return value == "True"
        try:
            value = float(value)
        except ValueError:
            return value
    return json_value(value)


def check_csv_run(rows: pd.DataFrame, study: Study) -> None:
    """runlog.check_completed on a run of a runs.csv (a runs.csv without iterations_completed: every logged one)."""
    first = rows.iloc[0]
    cell = {
        key: json_value if key in RUNS_CSV_TEXT else cell_value
        for key in [*CONFIG_COLUMNS, *SUMMARY_JSON_COLUMNS]
    }
    config = {key: cell[key](first[key]) for key in CONFIG_COLUMNS if key in rows}
    summary = {key: cell[key](first[key]) for key in SUMMARY_JSON_COLUMNS if key in rows}
    resumed = resumed_list(summary.pop("resumed_at", None))
    if resumed is not None:
        summary["resumed_at"] = resumed
    if "iterations_completed" not in rows:
        summary["iterations_completed"] = int(rows["time/iteration"].notna().sum())
    run = runlog.Run(Path(str(first.get("run_dir", first["run"]))), config, summary, rows)
    runlog.check_completed(run, study)


def read_runs_csv(path: str, study: Study) -> tuple[pd.DataFrame, list[SkippedRun]]:
    """The completed runs of a runs.csv written earlier, and the skipped ones; BadInput when it is not a runs.csv."""
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
    # a runs.csv of before --dtype: every run in float32
    runs["dtype"] = runs["dtype"].fillna(DTYPES[0]) if "dtype" in runs else DTYPES[0]
    runs = numeric_columns(runs, RUNS_CSV_NUMBERS, "--csv", path, "runs.csv")
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


# ------------------------------------------------------------------------------------------- the table
def as_bool(values: pd.Series) -> pd.Series:
    return values.map(lambda v: str(v).strip().lower() in ("true", "1", "yes"))


def load_runs(
    roots: list[str], csvs: list[str], study: Study
) -> tuple[pd.DataFrame, list[SkippedRun]]:
    """The tidy table of all completed runs (one row per run x iteration), and the skipped runs."""
    frames, skipped = read_run_dirs(roots, study)
    # where each run was read: its folder, or its folder name in a runs.csv
    frames = [frame.assign(source=frame["run_dir"]) for frame in frames]
    for path in csvs:
        runs, bad = read_runs_csv(path, study)
        name = text_column(runs, "run_dir").where(text_column(runs, "run_dir") != "", runs["run"])
        # a frame per run, as for the folders
        runs = runs.assign(source=name + f" (in {path})")
        frames += [rows for _, rows in runs.groupby(["source", run_keys(runs)], sort=False)]
        skipped += bad
    frames = [frame.assign(frame=number) for number, frame in enumerate(frames)]
    if not frames:
        return pd.DataFrame(columns=[*RUN_COLUMNS, "iteration", "step", "time/iteration"]), skipped
    runs = pd.concat(frames, ignore_index=True)
    runs["sync_timing"] = as_bool(runs["sync_timing"])
    runs = runs.assign(run_key=run_keys(runs))
    runs, copies = first_copies(runs)
    skipped += copies
    first = [*RUN_COLUMNS, "iteration", "step"]
    columns = [c for c in first if c in runs] + sorted(
        c for c in runs if c not in first and c not in ("run_key", "source", "frame")
    )
    # by folder name, then (folder names shared by runs of other tags or machines) by identity
    runs = runs.sort_values(["run", "run_key", "iteration"], kind="stable")
    return runs[columns].reset_index(drop=True), skipped


def first_copies(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[SkippedRun]]:
    """The rows of each run's first copy (by run_key; runs: with the frame each row was read in and its source),
    and the other copies as skipped."""
    first = runs.groupby("run_key", sort=False)["frame"].transform("first")
    again = runs["frame"] != first
    copies = runs[again].drop_duplicates("frame")
    if len(copies):
        print(
            f"note: {copies['run_key'].nunique()} runs were given more than once; kept the first copy"
        )
    kept = runs[~again].drop_duplicates("run_key").set_index("run_key")["source"]
    skipped = [
        SkippedRun(
            f"{source} (again)" if source == kept[key] else source,
            f"a copy of {kept[key]}: the same command, host and start time are one run, counted once",
        )
        for source, key in zip(copies["source"], copies["run_key"])
    ]
    return runs[~again], skipped


# ------------------------------------------------------------------------------------------ env timing
def read_env_timing(path: Optional[str]) -> tuple[pd.DataFrame, dict]:
    """Per env obs_dim, num_actions, ms_per_step, ratio (from sweep/env_timing.py), and the file's device and versions.
    A file that is not a usable env-timing file (sweep/env_timing_file.py: a step cost of -1, 0, NaN or "x" among others)
    is refused, not used: BadInput, one line naming the file, the env and the value."""
    if path is None:
        return pd.DataFrame(columns=TIMING_COLUMNS, dtype=float), {}
    try:
        data = env_timing_file.read(path)
    except FileNotFoundError:
        raise BadInput(f"env timing {path}: no such file") from None
    except env_timing_file.BadTiming as e:
        raise BadInput(f"{e}; nothing written: fix it, or give --env-timing another file") from None
    table = pd.DataFrame(
        {env: {c: values.get(c) for c in TIMING_COLUMNS} for env, values in data["envs"].items()}
    ).T
    return table.reindex(columns=TIMING_COLUMNS).astype(float), {
        "device": data.get("device"),
        "versions": data.get("versions"),
    }


def read_previous(path: str, columns: list[str]) -> pd.DataFrame:
    """The speedups.csv of a previous edition; BadInput when the file is not one."""
    previous = read_csv("--previous", path, "speedups.csv")
    if "backend" not in previous.columns and "experiment" in previous.columns:
        # an edition of before the env backends: every env on gymnax
        previous.insert(list(previous.columns).index("experiment") + 1, "backend", BACKENDS[0])
    if "dtype" not in previous.columns and "backend" in previous.columns:
        # an edition of before --dtype: every run in float32
        previous.insert(list(previous.columns).index("backend") + 1, "dtype", DTYPES[0])
    missing = [c for c in columns if c not in previous.columns]
    if missing:
        raise BadInput(
            f"--previous {path} is not a speedups.csv of plot_results.py: no column {', '.join(missing)}"
        )
    numeric = ["geomean", "median", "ci_low", "ci_high", "n_pairs", "n_clusters"]
    return numeric_columns(previous, numeric, "--previous", path, "speedups.csv")

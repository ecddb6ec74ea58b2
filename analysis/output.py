"""Writing --out without losing what was there.

The files of this tool in --out are its tables (runs.csv, summary.csv, speedups.csv, env_cost.csv, the learning and
data-type tables), REPORT.md and the figures the study can draw; anything else there (a README, the run folders,
logs) is never touched.

Replacing with less: an analysis would leave --out with less than it holds when one of its tables there has a row
the new one lacks (a run of runs.csv or summary.csv, told apart by folder name, command, hostname and start time; an
iteration of runs.csv; a (metric, experiment, backend, dtype, size, pair) of speedups.csv; a (metric, size, pair) of
env_cost.csv; the like of the others, TABLE_KEYS), when such a table cannot be read, or when a figure of this tool
there would not be drawn again (which would leave it stale: it is removed). Such a call is refused (exit status 2,
one line naming the folder and --force) before anything is written, unless --force is given. REPORT.md is rewritten
from the rest and not compared.

Every file is first written into a temporary folder beside --out; only when all of them are complete do they
replace their namesakes in --out, each by one rename (atomic), with SIGINT and SIGTERM held back meanwhile. An
analysis interrupted before then leaves --out as it was. A --out that does not exist yet is the temporary folder,
renamed.

Links (atomic.py's write_file, the project's one atomic write): a write never replaces a symbolic link. --out, a file of this tool in it, the README (--update-readme), the
README block (--readme-block) and the learning curves may each be links: the write goes through them to the file
they lead to, its temporary file staged beside that file, its mode (and, where allowed, its owner) kept. A target
that is not a regular file (a folder, /dev/null, a FIFO, a link that leads round in a circle) is refused in one
line before anything is written (check_target, check_out); a failed write removes its temporary file.
"""

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import pandas as pd

from analysis.common import (
    CSV_READ_ERRORS,
    BadInput,
    from_csv,
    numeric_columns,
    read_csv,
    run_keys,
)
from atomic import (
    current_umask,
    deferred_signals,
    keep_owner_and_mode,
    old_stat,
    target,
    write_file,
)
from sweep import env_timing_file
from sweep.study import BACKENDS, DTYPES

REPORT = "REPORT.md"
# table -> the columns that identify its rows; "run_key" stands for loading.run_keys (the run's identity)
TABLE_KEYS = {
    "runs.csv": ["run_key", "iteration"],
    "summary.csv": ["run_key"],
    "speedups.csv": ["metric", "experiment", "backend", "dtype", "size", "pair"],
    "dtype_speedups.csv": ["metric", "experiment", "backend", "size", "framework", "pair"],
    "env_cost.csv": ["metric", "size", "pair"],
    "learning.csv": ["experiment", "tag", "env", "framework"],
    "learning_speedups.csv": ["target", "experiment", "pair"],
}
# key columns that tables of earlier versions lack, and the value their rows had
# speedups.csv of before the env backends: every env on gymnax; of before --dtype: every run in float32;
# learning.csv of before a row per tag: the scripts' default tag, the only one its editions used
ADDED_KEYS = {"backend": BACKENDS[0], "dtype": DTYPES[0], "tag": "default"}


def writable_folder(flag: str, path, folder: Path) -> None:
    if not folder.is_dir():
        raise BadInput(f"{flag} {path}: no folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BadInput(f"{flag} {path}: cannot write into {folder}")


def check_target(flag: str, path, new: bool = True) -> None:
    """BadInput unless a write to path (through its links) replaces a regular file, or, when new, creates one in a
    writable folder."""
    real = target(path)
    # realpath stops at a link it cannot follow: one that leads round in a circle
    if real.is_symlink():
        raise BadInput(f"{flag} {path}: a symbolic link that leads to no file")
    if real.exists() and not real.is_file():
        what = "a folder" if real.is_dir() else "not a regular file"
        shown = f"{path}" if real == Path(path).absolute() else f"{path} (-> {real})"
        raise BadInput(f"{flag} {shown} is {what}: nothing written")
    if not real.exists() and not new:
        raise BadInput(f"{flag} {path}: no such file")
    writable_folder(flag, path, real.parent)


def check_out(out: Path, names=()) -> None:
    """BadInput unless out is (or can be created as) a writable folder whose files named names (those of this
    tool) are regular files where they exist."""
    real = target(out)
    if real.is_symlink():
        raise BadInput(f"--out {out}: a symbolic link that leads to no folder")
    if real.exists() and not real.is_dir():
        raise BadInput(f"--out {out} is a file, not a folder")
    existing = next(p for p in [real, *real.parents] if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise BadInput(f"--out {out}: cannot write into {existing}")
    for name in names:
        path = real / name
        if path.exists() or path.is_symlink():
            check_target("--out", path)


def replace_from(staged: Path, dest: Path) -> None:
    """A complete file of the stage moved to dest in --out: renamed over it, with its mode; where dest is a link,
    written through it to the file it leads to."""
    real = target(dest)
    if real != dest.absolute():
        write_file(real, staged.read_bytes())
        return
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
    """The identifying columns of a table of this tool found in --out; ValueError when it cannot be read."""
    wanted = {c for c in TABLE_KEYS[name] if c != "run_key"}
    if "run_key" in TABLE_KEYS[name]:
        wanted |= {"run", "command", "hostname", "start_time"}
    try:
        old = pd.read_csv(
            path, usecols=lambda c: c in wanted, dtype=str, keep_default_na=False, na_values=[""]
        )
        # its text as written from (analysis/common.py): the keys of the new table's rows
        old = from_csv(old)
    except CSV_READ_ERRORS as e:
        raise ValueError(f"{name} cannot be read ({type(e).__name__})") from None
    for column, value in ADDED_KEYS.items():
        if column in wanted and column not in old:
            old[column] = value
    missing = sorted(c for c in wanted - {"command", "hostname", "start_time"} if c not in old)
    if missing:
        raise ValueError(f"{name} has no column {', '.join(missing)}")
    return old


def lost_rows(out: Path, tables: dict[str, pd.DataFrame]) -> list[str]:
    """What each table of this tool in out holds that its new version would not (or why it cannot be compared)."""
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
                f"{name}: {len({key[0] for key in gone})} of its {len(runs)} runs are not in this analysis"
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
        f"--out {out} holds more than this analysis would write ({'; '.join(losses)}); nothing written: "
        "give --force to replace it"
    )


@contextmanager
def staged(out: Path, remove: list[str]):
    """A temporary folder beside out to write every file into; when the block ends without an error, its files
    replace their namesakes in out (REPORT.md last) and the files in remove are deleted from out. On an error or
    an interruption, out is left as it was and the temporary folder removed."""
    # out may be a link to the folder: the stage goes beside the folder, on its disk
    real = target(out)
    real.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{real.name}.", suffix=".partial", dir=real.parent))
    try:
        yield stage
        with deferred_signals():
            if not real.exists():
                # mkdtemp's folder is private; a results folder is not
                stage.chmod(0o777 & ~current_umask())
                stage.rename(real)
                return
            files = sorted(stage.iterdir(), key=lambda p: (p.name == REPORT, p.name))
            for path in files:
                replace_from(path, real / path.name)
            for name in remove:
                (real / name).unlink(missing_ok=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


TIMING_COLUMNS = ["obs_dim", "num_actions", "ms_per_step", "ratio"]


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

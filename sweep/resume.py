"""Which runs of a sweep are done already (the resume), and the cell locks that keep two sweeps off
one run.

A run is done when a folder in {log-dir}/{exp}/ holds a usable completed run (runlog.is_completed,
as for the analysis) whose config.json "command" (sys.argv of the run) is the planned command: the
same script file name and the same arguments, apart from the value of --log-dir (and --resume, which
the first start's command never has).

A run that is not done, but whose folder (the same command, not completed) holds the resume file of
the scripts' --save-every (resuming.RESUME_FILE, readable), is continued there: its command gets
--resume FOLDER (with_resumes), so that a sweep stopped part-way (a Slurm requeue, a timeout) loses
at most --save-every iterations of it. Of several such folders, the one saved furthest on. Any other
run starts afresh."""

import datetime
import fcntl
import os
import socket
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

from atomic import LinkRefused, check_inside
from core.option_checks import PROG
from sweep.matrix import PlannedRun

# the options that do not tell two runs apart: where the run writes (a run folder is found under the
# log dir anyway), and the folder it continues (the command of config.json, the first start's, has
# none)
WHERE = ("--log-dir", "--resume")


def without_log_dir(args) -> tuple[str, ...]:
    """The arguments without --log-dir and --resume and their values."""
    args, out, i = list(args), [], 0
    while i < len(args):
        if args[i] in WHERE:
            i += 2
            continue
        if not args[i].startswith(tuple(f"{name}=" for name in WHERE)):
            out.append(args[i])
        i += 1
    return tuple(out)


def run_key(command) -> tuple[str, tuple[str, ...]]:
    """What makes two runs the same: the script's file name and its arguments (bar --log-dir and
    --resume)."""
    return Path(command[0]).name, without_log_dir(command[1:])


def completed_keys(exp_dir: Path, wanted: Optional[set] = None) -> set:
    """run_key of every usable completed run in a folder: runlog.is_completed, the one definition
    that the analysis uses too (status completed, the config keys, at least one iteration, one
    readable events file holding every iteration, a command that its config.json agrees with), of
    the run folders the analysis finds (runlog.find_runs: links to folders are not followed),
    directly in the folder. Runs without config.json "command" are not counted. `wanted`: only these
    keys are checked in full (reading the events is the slow part: about 10 ms a run)."""
    done = set()
    if not any(exp_dir.glob("*/config.json")):
        return done
    # here: runlog imports pandas, which a sweep with no runs yet need not pay for
    from core import runlog

    for run_dir in runlog.find_runs([exp_dir])[0]:
        if run_dir.parent != exp_dir:  # bench.sh's run folders are directly in it
            continue
        # first the cheap part: a completed summary and a command (runlog's reader: a FIFO or a file
        # nested too deep is no run, never a hang or a crash)
        try:
            summary = runlog.read_json(run_dir / "summary.json")
            config = runlog.read_json(run_dir / "config.json")
        except runlog.RunError:
            continue
        command = config.get("command")
        if not (runlog.says_completed(summary) and isinstance(command, list) and command):
            continue
        key = run_key([str(word) for word in command])
        if key in done or (wanted is not None and key not in wanted):
            continue
        if runlog.is_completed(run_dir):
            done.add(key)
    return done


def resumable(run_dir: Path) -> int:
    """The iterations that a run folder's resume file saved, 0 when it has none that the scripts
    would take."""
    # resuming.RESUME_FILE (resuming is imported only for a folder that has one)
    if not (run_dir / "resume.safetensors").is_file():  # none, or a FIFO
        return 0
    import checkpoint
    from core import resuming

    try:
        return resuming.read_resume(run_dir).iteration
    except checkpoint.BadCheckpoint:
        return 0


def stopped_runs(exp_dir: Path, wanted: set) -> dict:
    """run_key -> the folder in exp_dir that continues it: a run of a wanted key, not completed,
    whose resume file saved the most iterations."""
    found = {}
    if not any(exp_dir.glob("*/resume.safetensors")):
        return found
    from core import runlog

    for run_dir in runlog.find_runs([exp_dir])[0]:
        if run_dir.parent != exp_dir:
            continue
        # a run killed (SIGKILL) before its first summary has none: a stopped run all the same
        has_summary = os.path.lexists(run_dir / "summary.json")
        try:
            config = runlog.read_json(run_dir / "config.json")
            summary = runlog.read_json(run_dir / "summary.json") if has_summary else {}
        except runlog.RunError:
            continue
        command = config.get("command")
        if runlog.says_completed(summary) or not (isinstance(command, list) and command):
            continue
        key = run_key([str(word) for word in command])
        saved = resumable(run_dir) if key in wanted else 0
        if saved > found.get(key, (0, None))[0]:
            found[key] = (saved, run_dir)
    return {key: run_dir for key, (_, run_dir) in found.items()}


def with_resumes(runs: list[PlannedRun], done: list[bool], log_dir: str) -> list[PlannedRun]:
    """The runs, each that is not done and was stopped part-way after a save (stopped_runs) with
    --resume FOLDER added to its command."""
    exps = dict.fromkeys(run.experiment for run, is_done in zip(runs, done) if not is_done)
    stopped = {
        exp: stopped_runs(
            Path(log_dir) / exp,
            {run_key(run.command[1:]) for run in runs if run.experiment == exp},
        )
        for exp in exps
    }
    resumed = []
    for run, is_done in zip(runs, done):
        folder = None if is_done else stopped[run.experiment].get(run_key(run.command[1:]))
        command = run.command if folder is None else (*run.command, "--resume", str(folder))
        resumed.append(replace(run, command=command))
    return resumed


def done_flags(runs: list[PlannedRun], log_dir: str) -> list[bool]:
    return done_commands([(run.experiment, run.command) for run in runs], log_dir)


def done_commands(runs: list[tuple[str, tuple[str, ...]]], log_dir: str) -> list[bool]:
    """Whether each run, given as (experiment, command), has a usable completed run in
    {log_dir}/{experiment}."""
    keys = [run_key(command[1:]) for _, command in runs]
    completed = {
        exp: completed_keys(
            Path(log_dir) / exp, {key for (e, _), key in zip(runs, keys) if e == exp}
        )
        for exp in dict.fromkeys(exp for exp, _ in runs)
    }
    return [key in completed[exp] for (exp, _), key in zip(runs, keys)]


# Two sweeps on one log dir never run the same run at once, whatever their shards (0/1 and 0/2
# overlap): a sweep runs a cell only while it holds the cell's lock, flock(2) on
# {log-dir}/.bench-cells/{cell id}.lock, taken on a file descriptor of bench.sh (so that it is held
# until bench.sh moves on to the next cell, or is gone with the runs it started, however they end),
# and once it holds it, it runs only what is still to do: a sweep that finds the cell taken waits
# for it, then skips the runs that the other one completed. Each sweep holds one cell at a time: no
# sweep waits for another that waits for it. Shards of one count never share a cell: they run side
# by side.
CELL_LOCKS = ".bench-cells"


def check_lock(fd: int, path: str, given) -> None:
    """LinkRefused (one line) unless `path`, below `given` (the log dir the user named, followed),
    is no link and lies in no folder that is one, and `fd` is that very file: the holder's note
    truncates the file, which must never be one that a planted link leads to."""
    check_inside(given, path, "--log-dir")
    if not os.path.samestat(os.fstat(fd), os.stat(path)):
        raise LinkRefused(f"{path} is not the file bench.sh opened as its lock: nothing written")


def take_lock(
    fd: int, path: str, holder: str, wait: Optional[str] = None, given=None
) -> Optional[str]:
    """flock(2) on bench.sh's open file descriptor `fd` of `path`: held until bench.sh closes it or
    is gone with the runs it started (they inherit it), however they end; `holder` is noted in it.
    When another sweep holds it: with `wait` (a message), says so on stderr and waits; without,
    returns what the holder wrote. Without locks on this filesystem (NFS without its lock daemon,
    ...): a warning on stderr, and no lock. LinkRefused, before anything, when `path` is a link or
    lies in a linked folder below `given` (the log dir; default: its folder), check_lock."""
    check_lock(fd, path, Path(path).parent if given is None else given)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with open(path, errors="replace") as f:
                other = " ".join(f.read().split()) or "a sweep that wrote nothing"
            if wait is None:
                return other
            print(f"{PROG}: {wait} ({other}); waiting for it", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        since = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        os.write(fd, f"{holder} on {socket.gethostname()}, since {since}\n".encode())
    except OSError as e:
        print(
            f"{PROG}: warning: cannot lock {path} ({e.strerror or e}); another sweep on this log "
            "dir could run the same runs at the same time",
            file=sys.stderr,
        )
    return None


def claim_cell(
    fd: int, path: str, holder: str, description: str, log_dir: str, words: list[str]
) -> list[bool]:
    """Takes the cell's lock on `fd` (an open `path`), waiting while another sweep holds it (said on
    stderr), and notes `holder` in it; then says which runs of the cell are done. `words`: each run
    as its number of words and its command (the experiment from its --exp-name). Without locks on
    this filesystem: a warning, and no wait. LinkRefused when the lock is (or lies in) a link below
    log_dir."""
    wait = f"another sweep is running the cell of {description}"
    take_lock(fd, path, holder, wait=wait, given=log_dir)
    runs, i = [], 0
    while i < len(words):
        command = tuple(words[i + 1 : i + 1 + int(words[i])])
        runs.append((command[command.index("--exp-name") + 1], command))
        i += 1 + int(words[i])
    return done_commands(runs, log_dir)

"""Which runs of a sweep are done already (the resume), and the cell locks that keep two sweeps off one run.

A run is done when a folder in {log-dir}/{exp}/ holds a usable completed run (runlog.is_completed, as for the
analysis) whose config.json "command" (sys.argv of the run) is the planned command: the same script file name and
the same arguments, apart from the value of --log-dir.
"""

import os
import socket
import sys
from pathlib import Path
from typing import Optional

from option_checks import PROG
from sweep_matrix import PlannedRun


def without_log_dir(args) -> tuple[str, ...]:
    """The arguments without the value of --log-dir (a run folder is found under the log dir anyway)."""
    args, out, i = list(args), [], 0
    while i < len(args):
        if args[i] == "--log-dir":
            i += 2
            continue
        if not args[i].startswith("--log-dir="):
            out.append(args[i])
        i += 1
    return tuple(out)


def run_key(command) -> tuple[str, tuple[str, ...]]:
    """What makes two runs the same: the script's file name and its arguments (bar --log-dir)."""
    return Path(command[0]).name, without_log_dir(command[1:])


def completed_keys(exp_dir: Path, wanted: Optional[set] = None) -> set:
    """run_key of every usable completed run in a folder: runlog.is_completed, the one definition that the analysis
    uses too (status completed, the config keys, at least one iteration, one readable events file holding every
    iteration, a command that its config.json agrees with), of the run folders the analysis finds (runlog.find_runs:
    links to folders are not followed), directly in the folder. Runs without config.json "command" are not counted.
    `wanted`: only these keys are checked in full (reading the events is the slow part: about 10 ms a run)."""
    done = set()
    if not any(exp_dir.glob("*/config.json")):
        return done
    # here: runlog imports pandas, which a sweep with no runs yet need not pay for
    import runlog

    for run_dir in runlog.find_runs([exp_dir])[0]:
        if run_dir.parent != exp_dir:  # bench.sh's run folders are directly in it
            continue
        # first the cheap part: a completed summary and a command (runlog's reader: a FIFO or a file nested too
        # deep is no run, never a hang or a crash)
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


def done_flags(runs: list[PlannedRun], log_dir: str) -> list[bool]:
    return done_commands([(run.experiment, run.command) for run in runs], log_dir)


def done_commands(runs: list[tuple[str, tuple[str, ...]]], log_dir: str) -> list[bool]:
    """Whether each run, given as (experiment, command), has a usable completed run in {log_dir}/{experiment}."""
    keys = [run_key(command[1:]) for _, command in runs]
    completed = {
        exp: completed_keys(
            Path(log_dir) / exp, {key for (e, _), key in zip(runs, keys) if e == exp}
        )
        for exp in dict.fromkeys(exp for exp, _ in runs)
    }
    return [key in completed[exp] for (exp, _), key in zip(runs, keys)]


# Two sweeps on one log dir never run the same run at once, whatever their shards (0/1 and 0/2 overlap): a sweep
# runs a cell only while it holds the cell's lock, flock(2) on {log-dir}/.bench-cells/{cell id}.lock, taken on a file
# descriptor of bench.sh (so that it is held until bench.sh moves on to the next cell, or is gone with the runs it
# started, however they end), and once it holds it, it runs only what is still to do: a sweep that finds the cell
# taken waits for it, then skips the runs that the other one completed. Each sweep holds one cell at a time: no
# sweep waits for another that waits for it. Shards of one count never share a cell: they run side by side.
CELL_LOCKS = ".bench-cells"


def claim_cell(
    fd: int, path: str, holder: str, description: str, log_dir: str, words: list[str]
) -> list[bool]:
    """Takes the cell's lock on `fd` (an open `path`), waiting while another sweep holds it (said on stderr), and
    notes `holder` in it; then says which runs of the cell are done. `words`: each run as its number of words and
    its command (the experiment from its --exp-name). Without locks on this filesystem: a warning, and no wait."""
    import fcntl

    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another sweep runs this cell: say which, and wait for its end
            with open(path, errors="replace") as f:
                other = " ".join(f.read().split()) or "a sweep that wrote nothing"
            print(
                f"{PROG}: another sweep is running the cell of {description} ({other}); waiting for it",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.write(fd, f"{holder} on {socket.gethostname()}\n".encode())
    except OSError as e:  # a filesystem without locks (NFS without its lock daemon, Lustre without -o flock, ...)
        print(
            f"{PROG}: warning: cannot lock {path} ({e.strerror or e}); another sweep on this log dir could run "
            "this cell's runs at the same time",
            file=sys.stderr,
        )
    runs, i = [], 0
    while i < len(words):
        command = tuple(words[i + 1 : i + 1 + int(words[i])])
        runs.append((command[command.index("--exp-name") + 1], command))
        i += 1 + int(words[i])
    return done_commands(runs, log_dir)

"""bench.sh's Python side: its command line read with sweep/cli.py's table and checked, its --help,
the one lock mechanism of the sweep, and bench.sh started again with SIGINT and SIGTERM at their
defaults.

    python3 -m sweep args ARGS...  # bench.sh's settings, NUL-separated (FIELDS, then words)
    python -m sweep lock --fd N --lock F --holder H  # the sweep's lock of its log dir and shard
    python3 -m sweep restart BASH bench.sh ARGS...  # bench.sh again, SIGINT and SIGTERM reset

bash reads what `args` prints as data (mapfile -d ''), never as code. bash keeps what must be bash:
the loop of runs, the process groups, the traps and the timeouts."""

import os
import re
import shutil
import signal
import sys
from pathlib import Path
from typing import Optional

from atomic import LinkRefused
from core.option_checks import PROG, BadOption, cpus, seconds, shown
from core.shell_quoting import control_characters, shell_word
from sweep import cli
from sweep.resume import take_lock

# what `args` prints first, in this order (bash reads them so), then the words of its python -m
# sweep calls
FIELDS = (
    "mode",  # help, dry-run, slurm, slurm-dry-run or sweep
    "log_dir",
    "python",
    "timeout",  # "" without --timeout
    "kill_after",
    "timeout_bin",  # GNU timeout, with --timeout
    "cpus",  # the runs' threads: --cpus, else every core this process may use
    "cpu_list",  # the runs' cores for taskset, "" without taskset
    "env_timing_file",  # "" with --no-env-timing
    "env_threads",  # --cpus, for the env timing
)
# bash's marker of a bench.sh started again by `restart`
RESTARTED = "BENCHBACK_SIGNALS_RESET"


def quoted(value: str) -> str:
    """A value for a message as bash's ${x@Q} writes it: 'runs', or $'a\\nb' with a control
    character."""
    if control_characters(value):
        return shell_word(value)
    return "'" + value.replace("'", "'\\''") + "'"


def option_named(name: str) -> Optional[cli.Option]:
    """bench.sh's option of that name (or -h), None for another word."""
    for option in cli.OPTIONS:
        if option.section and name in (option.name, option.short or option.name):
            return option
    return None


def read_words(argv: list[str]) -> tuple[dict, list[str]]:
    """bench.sh's options as given ({"--name": value, a flag's value True}) and the words after
    --."""
    given, words = {}, iter(argv)
    names = " ".join(
        [o.name for o in cli.OPTIONS if o.section and o.metavar]
        + [o.name for o in cli.OPTIONS if o.section and not o.metavar]
    )
    for word in words:
        if word == "--":
            return given, list(words)
        name, attached, value = word.partition("=") if word.startswith("--") else (word, "", "")
        option = option_named(name)
        if option is None or (attached and option.metavar is None):
            raise BadOption(
                f"unknown option {quoted(name)}; valid options: {names} (then -- extra run args)"
            )
        if option.metavar is None:
            given[option.name] = True
            continue
        if not attached:
            value = next(words, None)
            if value is None:
                raise BadOption(f"option {name} needs a value")
        if not value:
            raise BadOption(f"{name} is empty: an empty value names nothing")
        given[option.name] = value
    return given, []


def default(name: str) -> Optional[str]:
    return next(option.default for option in cli.OPTIONS if option.name == name)


def check_log_dir(log_dir: str) -> None:
    """--log-dir: a folder, or a path where one can be made."""
    path = Path(log_dir)
    if path.exists() and not path.is_dir():
        raise BadOption(
            f"--log-dir {quoted(log_dir)} exists and is not a folder; give a folder (it is made "
            "when missing)"
        )
    parent = path
    while not os.path.lexists(parent) and parent != parent.parent:
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise BadOption(
            f"--log-dir {quoted(log_dir)} cannot be made: {quoted(str(parent))} is not a folder"
        )


def cores(count: Optional[int], pinned: bool) -> tuple[int, str]:
    """The runs' threads and cores: the first `count` (every one by default) this process may use,
    as taskset's list ("" when taskset is missing and --cpus was not given)."""
    available = sorted(os.sched_getaffinity(0))
    if count is not None and count > len(available):
        raise BadOption(
            f"--cpus {count} is more than the {len(available)} cores this process may use; "
            f"valid: 1 to {len(available)}"
        )
    count = count or len(available)
    if not pinned and shutil.which("taskset") is None:
        return count, ""
    if shutil.which("taskset") is None:
        raise BadOption("--cpus needs taskset (util-linux), not found")
    return count, ",".join(map(str, available[:count]))


def plain_seconds(option: str, value: str, positive: bool) -> None:
    """option_checks.seconds, in the plain form that bash's arithmetic and timeout read (not 1e3,
    nor " 5")."""
    seconds(option, value, positive)
    if not re.fullmatch(r"[0-9]*\.?[0-9]+", value):
        raise BadOption(
            f"{option} must be a number of seconds such as 90 or 1.5, got {shown(value)}"
        )


def check_slurm(given: dict) -> None:
    slurm_given = [
        o.name for o in cli.OPTIONS if o.section == cli.SLURM and o.metavar and o.name in given
    ]
    if "--slurm" not in given:
        if slurm_given:
            raise BadOption(f"{slurm_given[-1]} needs --slurm")
    elif "--env-timing-file" in given:
        raise BadOption(
            "--env-timing-file does not go with --slurm: each node measures into "
            "{log-dir}/env_timing/{hostname}.json"
        )
    elif "--dry-run" not in given and shutil.which("sbatch") is None:
        raise BadOption(
            "--slurm: sbatch was not found; run this on a Slurm login node (or start a local one: "
            "slurm/local_cluster.sh)"
        )


def settings(given: dict) -> dict:
    """FIELDS from bench.sh's options, each checked: BadOption names the first bad one."""
    preset = "smoke" if "--smoke" in given else given.get("--preset")
    log_dir = given.get("--log-dir") or (
        f"{default('--log-dir')}-{preset}" if preset else default("--log-dir")
    )
    check_log_dir(log_dir)
    timeout = given.get("--timeout")
    if timeout is not None:
        plain_seconds("--timeout", timeout, positive=True)
    kill_after = given.get("--kill-after", default("--kill-after"))
    plain_seconds("--kill-after", kill_after, positive=False)
    if timeout is None and "--kill-after" in given:
        raise BadOption("--kill-after needs --timeout")
    python = given.get("--python", default("--python"))
    if shutil.which(python) is None:
        raise BadOption(
            f"--python {quoted(python)} is not an executable; give a Python interpreter"
        )
    count = cpus(given.get("--cpus"))
    check_slurm(given)
    slurm, dry_run = "--slurm" in given, "--dry-run" in given
    threads, cpu_list = (count or "", "") if slurm else cores(count, count is not None)
    timing = not slurm and "--no-env-timing" not in given
    return dict(
        mode=mode(slurm, dry_run),
        log_dir=log_dir,
        python=python,
        timeout=timeout or "",
        kill_after=kill_after,
        timeout_bin=needs_timeout() if timeout and not slurm else "",
        cpus=str(threads),
        cpu_list=cpu_list,
        env_timing_file=given.get("--env-timing-file", f"{log_dir}/env_timing.json")
        if timing
        else "",
        env_threads=given.get("--cpus", ""),
        preset=preset,
    )


def mode(slurm: bool, dry_run: bool) -> str:
    if slurm:
        return "slurm-dry-run" if dry_run else "slurm"
    return "dry-run" if dry_run else "sweep"


def needs_timeout() -> str:
    found = shutil.which("timeout") or shutil.which("gtimeout")
    if found is None:
        raise BadOption("--timeout needs GNU timeout (coreutils), not found")
    return found


def sweep_words(given: dict, extra: list[str], the: dict) -> list[str]:
    """The options of bench.sh's python -m sweep calls, those its action takes (sbatch with --slurm,
    else plan's), each --name=VALUE (a value that starts with "-" stays a value), then -- and the
    run arguments."""
    action = "sbatch" if the["mode"].startswith("slurm") else "plan"
    settled = ("log_dir", "python", "preset", "kill_after", "env_threads")
    values = {**given, **{f"--{name.replace('_', '-')}": the[name] for name in settled}}
    words = [
        option.name if option.metavar is None else f"{option.name}={values[option.name]}"
        for option in cli.OPTIONS
        if action in option.actions and values.get(option.name)
    ]
    return [*words, "--", *extra]


def print_fields(fields: list[str]) -> None:
    """Each field NUL-terminated, for bash's mapfile -d '': any character but NUL stays what it
    is."""
    out = sys.stdout.buffer
    out.write(b"".join(os.fsencode(field) + b"\0" for field in fields))
    out.flush()


def args_main(argv: list[str], help_text) -> int:
    """`args`: bench.sh's settings (FIELDS, then the words of its calls), or its --help; exit 2 on
    bad input."""
    try:
        given, extra = read_words(argv)
        if "--help" in given:
            print_fields(["help", help_text()])
            return 0
        the = settings(given)
    except BadOption as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    print_fields([the[field] for field in FIELDS] + sweep_words(given, extra, the))
    return 0


def lock_main(fd: int, path: str, holder: str) -> int:
    """`lock`: the sweep's lock, {log-dir}/.bench-K-of-N.lock: a second sweep is refused, not
    queued; a lock that is a link is refused (exit 2): its file is never truncated."""
    try:
        other = take_lock(fd, path, holder)
    except LinkRefused as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    if other is None:
        return 0
    print(
        f"{PROG}: another sweep is running into {quoted(str(Path(path).parent))} ({other}); "
        "refused, not queued: start this one when it ends, or give another --log-dir",
        file=sys.stderr,
    )
    return 2


def restart(argv: list[str]) -> None:
    """`restart`: bench.sh again with SIGINT and SIGTERM at their defaults. A shell started with a
    signal ignored (a script's `./bench.sh &`, `nohup`) cannot trap it: bash drops such a trap
    without a word."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    os.environ[RESTARTED] = "1"
    os.execv(argv[0], argv)

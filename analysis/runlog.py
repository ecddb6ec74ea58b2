"""Reads what a run of a ppo_*.py script wrote: config.json, summary.json, its scalars (tools/launch.py runs one).

The one reader of run folders, used by plot_results.py, sweep/resume.py (bench.sh's resume), benchmarks/ and the tests.
One definition of a usable run serves them all: `check_completed` says why a run is not one.

    from analysis.runlog import read_run, is_completed
    run = read_run("runs/CartPole-v1__linen__small__jit__1__1700000000")
    run.config["framework"], run.summary["status"], run.scalars["time/iteration"]

A usable run is what the scripts write, checked against the study (study.toml) and against itself, so that a folder
forged or pieced together (which would make bench.sh skip a run it never made, or put words in the analysis'
tables) is not one:

- config.json: the framework, model size and compile mode that the study names; an env id (or an env label,
  "{id}@envpool") and an env_backend of the study's backends; seed an int; sync_timing a bool; batch_size and
  num_iterations positive ints (never bools), batch_size = num_envs x num_steps where those are given; the texts
  (tag, hostname, platform, ...) strings; its command (argv) runs the framework's script, and every flag it gives
  has the value of the field it sets (check_command: the resume knows a run by its command, the analysis by its
  fields).
- summary.json: status completed after num_iterations iterations; total_s a finite positive number; setup_s and
  import_s finite numbers within total_s; final_return null or a finite number: the mean episodic return of the
  last 10 iterations, as bookkeeping.py makes it.
- the scalars: one time/iteration per iteration, at steps batch_size, 2 x batch_size, ... (by which the analysis
  numbers the iterations), each a finite positive number, adding up to at most total_s.
- a run folder's events file (check_events): named by tensorboardX for the host of config.json
  (events.out.tfevents.{unix time}.{hostname}), and written during the run: its time and the wall time of every
  scalar between config.json's start_time and start_time + total_s, and the script's first line by its
  time/elapsed scalars (wall time less time/elapsed) at most setup_s before start_time (each give or take
  CLOCK_SLACK_S), so that an events file copied in from another run is not taken for this one's; and total_s at
  most TAIL_S longer than the run its events show (its last time/elapsed; TRACKED_TAIL_S with --track).
- config.json and summary.json: regular files of at most MAX_JSON_BYTES (a FIFO or a file nested too deep for the
  parser is a reason, never a hang or a crash). Run folders are found without following links (find_runs).

A run of a runs.csv (plot_results.py --csv) goes through the same check_completed, without an events file.

A resumed run (the scripts' --resume; summary.json "resumed_at": the iterations each resume continued after, a
non-empty increasing list of positive ints below iterations_completed, else RunError) is read as one run: its folder
holds an events file per process (at least 1 + len(resumed_at)), merged so that a later file's value (by the file's
first wall time) replaces an earlier one's at the same step and tag: the scalars hold each iteration once, as the
resumed process logged it (check_resumed_events). Its checks are a run's, bar those that tie total_s (the last
process's own) to the events: the sum of time/iteration, the events within start_time + total_s and check_total
are made on the last process's events file alone (its iterations, after resumed_at's last, within its own
start and total_s); in a runs.csv, which does not say which process logged what, they are skipped.
"""

import json
import math
import os
import re
import shlex
import stat
import warnings
from datetime import datetime
from pathlib import Path
from typing import NamedTuple, Optional

import pandas as pd

from sweep import run_args, study

# config.json keys that the analysis and the resume need: a run without them cannot be placed in the study
REQUIRED_CONFIG = [
    "env",
    "framework",
    "model_size",
    "compile",
    "seed",
    "sync_timing",
    "batch_size",
    "num_iterations",
]
# config.json keys that are strings if given
TEXT_CONFIG = ["tag", "hostname", "platform", "exp_name", "device_name", "device", "start_time"]
# the ids of gymnax, Craftax, Brax and envpool envs
ENV_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# tensorboardX's events file name: {unix time}.{hostname}
EVENTS_NAME = re.compile(r"events\.out\.tfevents\.(\d+)\.(.+)")
# start_time and the events' wall times come from one clock: room for a step of it
CLOCK_SLACK_S = 2.0
RETURN = "charts/episodic_return"
# summary.json final_return: the mean episodic return of the last 10 iterations
FINAL_ITERATIONS = 10
# config.json and summary.json are a few kB; a larger file is not a run's (and is not read whole)
MAX_JSON_BYTES = 1 << 20
# how much longer total_s may be than the run its events show (its last time/elapsed): the writer's close (every run
# of results/ took under 1.1 s); with --track also W&B's finish, which uploads over the network (else a tracked
# run on a slow link would be refused, and run again by every resume)
TAIL_S = 30.0
TRACKED_TAIL_S = 600.0


class RunError(Exception):
    """A run folder that cannot be used; the message says why."""


class Events(NamedTuple):
    """Where a run folder's scalars come from: its events file's name, the wall times of its first and last scalar,
    and the earliest and latest wall time of the script's first line by its time/elapsed scalars (wall time less
    time/elapsed; None without them)."""

    name: str
    first: float
    last: float
    origin: Optional[tuple[float, float]] = None
    steps: frozenset = frozenset()  # the steps at which it logged time/iteration


class Run(NamedTuple):
    path: Path
    config: dict
    summary: dict
    scalars: pd.DataFrame  # one row per logged step (column "step"), one column per scalar tag
    # a run folder's (a resumed run's: its last process's); None for a run of a runs.csv
    events: Optional[Events] = None
    segments: tuple = ()  # a resumed run folder's events files (Events), in the order they were written


def read_json(path: Path) -> dict:
    """A JSON object from a file; RunError (naming the file) when it is missing, unreadable, not a regular file (a FIFO
    would block the reader for ever), over MAX_JSON_BYTES, nested too deep for the parser, or not an object."""
    path = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO returns at once, and fstat then says what it is
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise RunError(f"no {path.name}") from None
    except OSError as e:
        raise RunError(f"unreadable {path.name} ({e})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RunError(f"{path.name} is not a regular file")
        if info.st_size > MAX_JSON_BYTES:
            raise RunError(f"{path.name} holds {info.st_size:,} bytes, more than a run writes")
        try:
            data = json.loads(f.read(MAX_JSON_BYTES + 1))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise RunError(f"unreadable {path.name} ({e})") from None
        except RecursionError:
            raise RunError(f"unreadable {path.name} (nested too deep)") from None
    if not isinstance(data, dict):
        raise RunError(f"{path.name} is not a JSON object")
    return data


def events_files(run_dir: Path, resumes: int) -> list[Path]:
    """The events files of a run folder: one, or for a run resumed `resumes` times at least 1 + resumes (a resume
    stopped before its first iteration leaves one more)."""
    events = sorted(run_dir.glob("events.out.tfevents.*"))
    if not resumes and len(events) > 1:  # two writers in one folder: neither series can be trusted
        raise RunError(f"{len(events)} TensorBoard events files in one run folder")
    if not events:
        raise RunError("no TensorBoard events file")
    if len(events) < 1 + resumes:
        raise RunError(
            f"{len(events)} TensorBoard events files for a run resumed {resumes} times (summary.json "
            f"resumed_at): at least {1 + resumes}, one per process"
        )
    for path in events:
        if not path.is_file():  # a FIFO would block the reader for ever
            raise RunError(f"{path.name} is not a regular file")
    return events


def read_events_file(path: Path) -> tuple[pd.DataFrame, Events]:
    """Every scalar of one events file, a row per step and tag (step, tag, value, wall_time), and what Events says
    of it; a file without scalars (a resume stopped before its first iteration) has its name's time as its first and
    last."""
    # imported here: the sweep's resume check must not pay for it when nothing is done
    from tbparse import SummaryReader

    try:
        with warnings.catch_warnings():  # tbparse's own use of pandas, deprecated in pandas 3
            warnings.simplefilter("ignore")
            long = SummaryReader(str(path), extra_columns={"wall_time"}).scalars
    except Exception as e:  # a truncated or corrupt file
        raise RunError(f"unreadable TensorBoard events ({type(e).__name__}: {e})") from None
    if long.empty or not {"step", "tag", "value", "wall_time"} <= set(long.columns):
        name = EVENTS_NAME.fullmatch(path.name)
        made = float(name[1]) if name else 0.0
        empty = pd.DataFrame(columns=["step", "tag", "value", "wall_time"])
        return empty, Events(path.name, made, made)
    if long.duplicated(["step", "tag"]).any():  # the scripts log each scalar once per iteration
        raise RunError("a TensorBoard scalar logged twice at one step")
    walls = long["wall_time"].astype(float)
    if not all(math.isfinite(t) for t in walls):
        raise RunError("TensorBoard scalars without a wall time")
    elapsed = long[long["tag"] == "time/elapsed"]
    origins = (elapsed["wall_time"] - elapsed["value"]).astype(float)
    origin = (float(origins.min()), float(origins.max())) if len(origins) else None
    steps = frozenset(int(step) for step in long.loc[long["tag"] == "time/iteration", "step"])
    return long, Events(path.name, float(walls.min()), float(walls.max()), origin, steps)


def read_events(run_dir: Path, resumes: int = 0) -> tuple[pd.DataFrame, Events, tuple]:
    """Every scalar of run_dir's events (a row per step, a column per tag), the Events of the file of its last
    process, and (resumes: how many times the run was resumed) every file's Events in the order they were written
    (by their first wall time; () for a run never resumed). A resumed run's files are merged: at a step and tag
    logged by two processes, the later one's value is kept (the resumed process continued after the stopped one's
    last save, and logged again what that one logged after it)."""
    run_dir = Path(run_dir)
    read = [read_events_file(path) for path in events_files(run_dir, resumes)]
    read.sort(key=lambda file: (file[1].first, file[1].name))  # stable: one file keeps its order
    if all(long.empty for long, _ in read):
        raise RunError("no TensorBoard scalars")
    long = pd.concat([long for long, _ in read if not long.empty], ignore_index=True)
    long = long.drop_duplicates(["step", "tag"], keep="last")
    # as tbparse's pivot=True
    scalars = long.pivot(index="step", columns="tag", values="value").reset_index()
    scalars.columns.name = None
    last = [events for frame, events in read if not frame.empty][-1]
    return scalars, last, tuple(events for _, events in read) if resumes else ()


def read_scalars(run_dir: Path) -> pd.DataFrame:
    """Every scalar of the one TensorBoard events file in run_dir: a row per step, a column per tag."""
    return read_events(run_dir)[0]


def find_runs(roots) -> tuple[list[Path], list[Path]]:
    """(every run folder, one holding config.json, at any depth under the given folders, sorted per folder; the links
    to folders met on the way). Links are never followed: a run is read where it is, once, and bench.sh's resume
    (sweep/resume.py) finds runs here too, so that a run one of them counts, the other counts as well."""
    found, links = [], []
    for root in roots:
        here = []
        for folder, subfolders, files in os.walk(root):  # lists the links to folders, enters none
            folder = Path(folder)
            if "config.json" in files:
                here.append(folder)
            links += sorted(folder / name for name in subfolders if (folder / name).is_symlink())
        found += sorted(here)
    return found, links


def run_dirs(roots) -> list[Path]:
    """Every run folder (one holding config.json) at any depth under the given folders, sorted per folder, links
    to folders not followed (find_runs)."""
    return find_runs(roots)[0]


def read_run(run_dir) -> Run:
    """config.json, summary.json and the scalars of a run folder, whatever its status; RunError when unreadable."""
    run_dir = Path(run_dir)
    config = read_json(run_dir / "config.json")
    summary = read_json(run_dir / "summary.json")
    return Run(run_dir, config, summary, *read_events(run_dir, len(resumed_at(summary))))


# ------------------------------------------------------------------------------------- what a usable run is
def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    """A finite int or float, never a bool (JSON's true is not a 1 here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def positive_int(key: str, value) -> int:
    if not is_int(value) or value <= 0:
        raise RunError(f"config.json {key} is {value!r}, not a positive integer")
    return value


def check_env(config: dict) -> None:
    """An env id (a label "{id}@{backend}" in a runs.csv) and an env_backend of the study's backends."""
    env, backend = config["env"], config.get("env_backend")
    env_id, label_backend = study.split_label(env) if isinstance(env, str) else ("", "")
    named = study.env_label(env_id, label_backend) == env and label_backend in study.BACKENDS
    if not (named and ENV_ID.fullmatch(env_id)):
        raise RunError(f"config.json env {env!r} is not an env id")
    if backend is not None and backend not in study.BACKENDS:
        raise RunError(
            f"config.json env_backend {backend!r} is not one of {', '.join(study.BACKENDS)}"
        )


def check_config(config: dict, the_study: study.Study) -> None:
    """RunError unless config.json names what the study knows, with values of the types the scripts write."""
    missing = [key for key in REQUIRED_CONFIG if key not in config]
    if missing:
        raise RunError(f"config.json lacks {', '.join(missing)}")
    framework, size, mode = config["framework"], config["model_size"], config["compile"]
    if not isinstance(framework, str) or framework not in the_study.frameworks:
        raise RunError(
            f"config.json framework {framework!r} is not one of the study's ({', '.join(the_study.frameworks)})"
        )
    if not isinstance(size, str) or size not in the_study.sizes:
        raise RunError(
            f"config.json model_size {size!r} is not one of the study's ({', '.join(the_study.sizes)})"
        )
    modes = the_study.frameworks[framework].compile
    if not isinstance(mode, str) or mode not in modes:
        raise RunError(
            f"config.json compile {mode!r} is not one of {framework}'s ({', '.join(modes)})"
        )
    check_env(config)
    if not is_int(config["seed"]):
        raise RunError(f"config.json seed is {config['seed']!r}, not an integer")
    if not isinstance(config["sync_timing"], bool):
        raise RunError(f"config.json sync_timing is {config['sync_timing']!r}, not true or false")
    # runs of before --dtype have none: they ran in float32
    dtype = config.get("dtype", study.DTYPES[0])
    if not isinstance(dtype, str) or dtype not in study.DTYPES:
        raise RunError(
            f"config.json dtype {dtype!r} is not one of the scripts' ({', '.join(study.DTYPES)})"
        )
    batch = positive_int("batch_size", config["batch_size"])
    positive_int("num_iterations", config["num_iterations"])
    if config.get("num_envs") is not None or config.get("num_steps") is not None:
        envs, steps = (
            positive_int("num_envs", config.get("num_envs")),
            positive_int("num_steps", config.get("num_steps")),
        )
        if envs * steps != batch:
            raise RunError(
                f"config.json batch_size {batch} is not num_envs {envs} x num_steps {steps}"
            )
    for key in TEXT_CONFIG:
        if config.get(key) is not None and not isinstance(config[key], str):
            raise RunError(f"config.json {key} is {config[key]!r}, not a string")
    check_command(config, the_study)


def command_words(command) -> list[str]:
    """config.json's command (argv; one shell command line in a runs.csv) as its words; RunError when it is
    neither."""
    if isinstance(command, str):
        try:
            return shlex.split(command)
        except ValueError:
            pass
    elif isinstance(command, list) and command and all(isinstance(word, str) for word in command):
        return command
    raise RunError(f"config.json command is {command!r}, not a command line")


def check_command(config: dict, the_study: study.Study) -> None:
    """RunError unless config.json's fields are what its own command set: the script is the framework's, and every
    flag the command gives has the value of the field it sets (as the analysis reads the fields: an env label's
    backend, float32 for a run without dtype). The resume knows a run by its command and the analysis by its fields:
    they must be one run. A run without a command (made before config.json had one) has nothing to agree with."""
    if config.get("command") is None:
        return
    words = command_words(config["command"])
    script = Path(the_study.frameworks[config["framework"]].script).name
    if Path(words[0]).name != script:
        raise RunError(
            f"config.json command runs {Path(words[0]).name!r}, not {script}, the script of its framework "
            f"{config['framework']}"
        )
    try:
        given = run_args.flags(words)
    except ValueError as e:
        raise RunError(f"config.json command is not a command line of the scripts ({e})") from None
    env_id, label_backend = study.split_label(config["env"])
    fields = {
        **config,
        "env": env_id,
        "env_backend": config.get("env_backend") or label_backend,
        "dtype": config.get("dtype") or study.DTYPES[0],
    }
    for name, value in given.items():
        # a runs.csv keeps only some fields
        if name in fields and not run_args.same_value(value, fields[name]):
            flag = f"--{name.replace('_', '-')}"
            raise RunError(
                f"config.json {name} is {fields[name]!r}, but its command gives {flag} {value!r}"
            )


def check_status(summary) -> None:
    """RunError unless summary.json (any JSON value) says status completed: the first check of a usable run, the
    one the resume makes before reading anything more."""
    status = summary.get("status") if isinstance(summary, dict) else None
    if status != "completed":
        raise RunError(f"status {status!r}")


def says_completed(summary) -> bool:
    """Whether summary.json (any JSON value) says status completed (check_status, as a yes or no)."""
    try:
        check_status(summary)
    except RunError:
        return False
    return True


def resumed_at(summary) -> list[int]:
    """summary.json's resumed_at: the iterations after which the run was resumed (--resume), in order; [] for a run
    never resumed. RunError unless it is a non-empty list of increasing positive ints (the scripts write no other):
    it says how many events files the run folder holds, and that its times are not one process's."""
    value = summary.get("resumed_at") if isinstance(summary, dict) else None
    if value is None:
        return []
    increasing = isinstance(value, list) and all(is_int(k) for k in value)
    increasing = increasing and all(a < b for a, b in zip([0, *value], value))
    if not (increasing and value):
        raise RunError(
            f"summary.json resumed_at is {value!r}, not the increasing iterations that its resumes continued after"
        )
    return value


def check_summary(summary: dict, config: dict) -> None:
    """RunError unless summary.json says the run completed every iteration of config.json, in a finite time."""
    check_status(summary)
    if summary.get("total_s") is None:
        raise RunError("summary.json lacks total_s")
    iterations = summary.get("iterations_completed")
    if not is_int(iterations) or iterations <= 0:
        raise RunError(f"completed with {iterations!r} iterations")
    if iterations != config["num_iterations"]:
        raise RunError(
            f"completed with {iterations} iterations, config.json's num_iterations {config['num_iterations']}"
        )
    resumes = resumed_at(summary)
    if resumes and resumes[-1] >= iterations:
        raise RunError(
            f"summary.json resumed_at {resumes!r}: a resume after iteration {resumes[-1]} of {iterations}"
        )
    total = summary["total_s"]
    if not is_number(total) or total <= 0:
        raise RunError(f"summary.json total_s is {total!r}, not a positive number of seconds")
    for key in ("setup_s", "import_s"):
        value = summary.get(key)
        if value is not None and not (is_number(value) and 0 <= value <= total):
            raise RunError(
                f"summary.json {key} is {value!r}, not a number of seconds within total_s"
            )
    final = summary.get("final_return")
    if final is not None and not is_number(final):
        raise RunError(f"summary.json final_return is {final!r}, not a number")


def check_scalars(scalars: pd.DataFrame, config: dict, summary: dict) -> None:
    """RunError unless time/iteration holds a finite positive time per iteration, logged at the steps the analysis
    numbers them by (batch_size, 2 x batch_size, ...; in a runs.csv without steps, iterations 0, 1, ...), adding
    up to at most total_s (a resumed run's: those of its last process, check_resumed_events)."""
    iterations = summary["iterations_completed"]
    if "time/iteration" not in scalars:
        raise RunError("no time/iteration scalar")
    logged = scalars[scalars["time/iteration"].notna()]
    if len(logged) != iterations:
        raise RunError(f"events hold {len(logged)} of {iterations} iterations")
    times = pd.to_numeric(logged["time/iteration"], errors="coerce").astype(float)
    if not all(math.isfinite(t) and t > 0 for t in times):
        raise RunError("a time/iteration that is not a positive number of seconds")
    if not resumed_at(summary):
        check_time_sum(times, summary["total_s"])
    column, unit = ("step", config["batch_size"]) if "step" in logged else ("iteration", 0)
    if column in logged:
        wanted = [unit * (i + 1) for i in range(iterations)] if unit else list(range(iterations))
        if sorted(pd.to_numeric(logged[column], errors="coerce").tolist()) != wanted:
            where = f"steps {unit}, {2 * unit}, ..." if unit else "iterations 0, 1, ..."
            raise RunError(
                f"time/iteration is not logged at the {where} of its {iterations} iterations"
            )
    if "final_return" in summary:
        check_final_return(logged, summary["final_return"])


def check_time_sum(times: pd.Series, total: float) -> None:
    """RunError when the iterations of one process take longer than its total_s."""
    if times.sum() > total * (1 + 1e-5) + 1e-6:  # room for the events' float32
        raise RunError(
            f"its iterations take {times.sum():.6g} s, more than its total_s {total:.6g} s"
        )


def check_final_return(logged: pd.DataFrame, final) -> None:
    """RunError unless final_return is what bookkeeping.py makes of the scalars: the mean episodic return of the
    last 10 iterations (those in which an episode ended), null when none did."""
    order = "step" if "step" in logged else "iteration" if "iteration" in logged else None
    last = (logged.sort_values(order) if order else logged).tail(FINAL_ITERATIONS)
    returns = pd.to_numeric(last.get(RETURN, pd.Series(dtype=float)), errors="coerce").dropna()
    mean = float(returns.mean()) if len(returns) else None
    if mean is None or final is None:
        same = mean is None and final is None
    else:
        same = math.isclose(mean, final, rel_tol=1e-6, abs_tol=1e-9)
    if not same:
        raise RunError(
            f"summary.json final_return {final!r} is not the mean return of its last iterations ({mean!r})"
        )


def config_start(run: Run) -> tuple[str, datetime]:
    """config.json's hostname and start_time, which tie the events files to it; RunError when it lacks them."""
    host, start = run.config.get("hostname"), run.config.get("start_time")
    if not isinstance(host, str) or not host or not isinstance(start, str):
        raise RunError(
            "config.json lacks the hostname and start_time that tie the events file to it"
        )
    try:
        started = datetime.fromisoformat(start)
    except ValueError:
        raise RunError(f"config.json start_time {start!r} is not an ISO 8601 time") from None
    if started.tzinfo is None:
        raise RunError(f"config.json start_time {start!r} has no time zone")
    return host, started


def check_made(run: Run, events: Events, high: float) -> None:
    """RunError unless an events file of the run is named for config.json's host, and was made and written from
    start_time to `high` (give or take CLOCK_SLACK_S)."""
    host, started = config_start(run)
    name = EVENTS_NAME.fullmatch(events.name)
    if not name or name[2] != host:
        raise RunError(
            f"events file {events.name} was not written on {host}, the host of config.json"
        )
    low, start = started.timestamp() - CLOCK_SLACK_S, run.config["start_time"]
    if not low - 1 <= int(name[1]) <= high:  # the file's name has its time in whole seconds
        raise RunError(f"events file {events.name} was not made during the run (started {start})")
    if not low <= events.first <= events.last <= high:
        raise RunError(
            f"the events in {events.name} were not written during the run (started {start})"
        )


def check_events(run: Run) -> None:
    """RunError unless the events file is the run's own: named for config.json's host, made and written during the
    run (start_time to start_time + total_s, give or take CLOCK_SLACK_S). A resumed run's: check_resumed_events."""
    started = config_start(run)[1]
    if resumed_at(run.summary):
        check_resumed_events(run, started)
        return
    high = started.timestamp() + run.summary["total_s"] + CLOCK_SLACK_S
    check_made(run, run.events, high)
    # the script's first line (a wall time less its time/elapsed) came before start_time, by at most setup_s
    setup = run.summary.get("setup_s")
    setup = run.summary["total_s"] if setup is None else setup
    low = started.timestamp() - CLOCK_SLACK_S
    if run.events.origin and not (
        low - setup
        <= run.events.origin[0]
        <= run.events.origin[1]
        <= started.timestamp() + CLOCK_SLACK_S
    ):
        raise RunError(
            f"the events in {run.events.name} are of a run that did not start at {run.config['start_time']}"
        )


def check_resumed_events(run: Run, started: datetime) -> None:
    """RunError unless a resumed run's events files are its own: each named for config.json's host, made and
    written from start_time to its last process's end; the first process's first line before start_time; the
    last one's (the file of run.events) started after it, logged the iterations after resumed_at's last, each
    once, and ran within its total_s (the sum of its time/iteration, its events from its first line to total_s
    later, check_total on its time/elapsed). total_s and setup_s are the last process's: they tell nothing of the
    processes before it, whose times are checked against start_time alone."""
    last, total = run.events, run.summary["total_s"]
    if last.origin is None:
        raise RunError(f"the events in {last.name} have no time/elapsed: not a resumed process's")
    end = last.origin[1] + total + CLOCK_SLACK_S
    for events in run.segments:
        check_made(run, events, end)
    first = run.segments[0].origin
    if first and first[1] > started.timestamp() + CLOCK_SLACK_S:
        raise RunError(
            f"the events in {run.segments[0].name} are of a run that did not start at {run.config['start_time']}"
        )
    if not started.timestamp() - CLOCK_SLACK_S <= last.origin[0] <= last.first:
        raise RunError(
            f"the events in {last.name} are not of a process that resumed the run started at "
            f"{run.config['start_time']}"
        )
    after, iterations = resumed_at(run.summary)[-1], run.summary["iterations_completed"]
    wanted = {run.config["batch_size"] * (i + 1) for i in range(after, iterations)}
    if last.steps != wanted:
        raise RunError(
            f"the events of its last process ({last.name}) do not hold the iterations after {after}, the "
            f"last of summary.json resumed_at, each once"
        )
    check_time_sum(last_process(run)["time/iteration"].astype(float), total)


def last_process(run: Run) -> pd.DataFrame:
    """The scalars of the process that wrote summary.json: all of them, but a resumed run's are those of its last
    events file (none in a runs.csv, which does not say which process logged what)."""
    if not resumed_at(run.summary):
        return run.scalars
    if run.events is None or "step" not in run.scalars:
        return run.scalars.iloc[:0]
    return run.scalars[run.scalars["step"].isin(run.events.steps)]


def events_span(run: Run) -> Optional[float]:
    """How long the run's last process ran to its last iteration by its events: its last time/elapsed (seconds
    from the script's first line); without one, a run folder's last event less start_time, plus setup_s (the most
    the first line came before start_time); None for a run of a runs.csv without time/elapsed, and for a resumed
    run of a runs.csv."""
    scalars = last_process(run)
    if "time/elapsed" in scalars:
        elapsed = pd.to_numeric(scalars["time/elapsed"], errors="coerce").dropna()
        if len(elapsed):
            return float(elapsed.max())
    if run.events is None or resumed_at(run.summary):
        return None
    started = datetime.fromisoformat(run.config["start_time"]).timestamp()
    return run.events.last - started + (run.summary.get("setup_s") or 0.0)


def check_total(run: Run) -> None:
    """RunError when total_s is longer than the run its events show (events_span) by more than TAIL_S: the other
    checks bound total_s from below only, and a total_s made longer would make its framework look slower."""
    span, total = events_span(run), run.summary["total_s"]
    tail = TRACKED_TAIL_S if run.config.get("track") is True else TAIL_S
    if span is not None and total > span + tail:
        raise RunError(
            f"summary.json total_s {total:.6g} s is longer than its events show: {span:.6g} s to its last "
            f"iteration (at most {tail:g} s more are a run's end)"
        )


def check_completed(run: Run, the_study: Optional[study.Study] = None) -> None:
    """RunError, saying why, unless the run completed, its files hold every iteration it claims, its values are the
    study's and of the types the scripts write, and its events file (a run folder's) is its own. the_study: the study
    (study.load() when not given)."""
    check_status(run.summary)
    the_study = the_study or study.load()
    check_config(run.config, the_study)
    check_summary(run.summary, run.config)
    check_scalars(run.scalars, run.config, run.summary)
    if run.events is not None:
        check_events(run)
    check_total(run)


def read_completed_run(run_dir, the_study: Optional[study.Study] = None) -> Run:
    """read_run, then check_completed: the run, or RunError saying why it cannot be used. A run that did not
    complete says so first (its events, cut short, are not read)."""
    check_status(read_json(Path(run_dir) / "summary.json"))
    run = read_run(run_dir)
    check_completed(run, the_study)
    return run


def is_completed(run_dir) -> bool:
    """A usable completed run: what bench.sh skips on resume and what plot_results.py analyses."""
    try:
        read_completed_run(run_dir)
    except RunError:
        return False
    return True

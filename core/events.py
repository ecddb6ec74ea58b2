"""A run folder's TensorBoard events (core/runlog.py's lower floor): the files, read and merged,
and the ties of a run's times to them; a run (Run) and why one cannot be used (RunError).

A run folder's events file (check_events): named by tensorboardX for the host of config.json
(events.out.tfevents.{unix time}.{hostname}), and written during the run: its time and the wall time
of every scalar between config.json's start_time and start_time + total_s, and the script's first
line by its time/elapsed scalars (wall time less time/elapsed) at most setup_s before start_time
(each give or take CLOCK_SLACK_S), so that an events file copied in from another run is not taken
for this one's; and total_s at most TAIL_S longer than the run its events show (its last
time/elapsed; TRACKED_TAIL_S with --track).

A resumed run (the scripts' --resume) is read as one run: its folder holds an events file per
process (at least 1 + len(resumed_at)), merged so that a later file's value (by the file's first
wall time) replaces an earlier one's at the same step and tag: the scalars hold each iteration once,
as the resumed process logged it (check_resumed_events). The ties of total_s to the events (the sum
of time/iteration, the events within start_time + total_s, check_total) are made on the last
process's events file alone (its iterations, after resumed_at's last, within its own start and
total_s): its time/elapsed and total_s count on from the time the run ran before it
(resuming.time_before; a run resumed before that: from 0, total_s the last process's alone), so
that its origin (a wall time less its time/elapsed) lies that much before its first line, after the
first process's.
"""

import math
import re
import warnings
from datetime import datetime
from pathlib import Path
from typing import NamedTuple, Optional

import pandas as pd

# tensorboardX's events file name: {unix time}.{hostname}
EVENTS_NAME = re.compile(r"events\.out\.tfevents\.(\d+)\.(.+)")
# start_time and the events' wall times come from one clock: room for a step of it
CLOCK_SLACK_S = 2.0
# how much longer total_s may be than the run its events show (its last time/elapsed): the writer's
# close (every run of results/ took under 1.1 s); with --track also W&B's finish, which uploads over
# the network (else a tracked run on a slow link would be refused, and run again by every resume)
TAIL_S = 30.0
TRACKED_TAIL_S = 600.0
RETURN = "charts/episodic_return"
# summary.json final_return: the mean episodic return of the last 10 iterations
FINAL_ITERATIONS = 10


# a tag of one agent's scalar: agent_{k}/TAG
AGENT_TAG = re.compile(r"agent_(\d+)/")


def agent_column(k: int) -> str:
    """The column of agent k's return in a run's scalars (its agent_{k}/ tag; W&B's key)."""
    return f"agent_{k}/{RETURN}"


class RunError(Exception):
    """A run folder that cannot be used; the message says why."""


class Events(NamedTuple):
    """Where a run folder's scalars come from: its events file's name, the wall times of its first
    and last scalar, and the earliest and latest wall time of the script's first line by its
    time/elapsed scalars (wall time less time/elapsed; None without them)."""

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
    # a resumed run folder's events files (Events), in the order they were written
    segments: tuple = ()


def events_files(run_dir: Path, resumes: int) -> list[Path]:
    """The events files of a run folder: one, or for a run resumed `resumes` times at least 1 +
    resumes (a resume stopped before its first iteration leaves one more)."""
    events = sorted(run_dir.glob("events.out.tfevents.*"))
    if not resumes and len(events) > 1:  # two writers in one folder: neither series can be trusted
        raise RunError(f"{len(events)} TensorBoard events files in one run folder")
    if not events:
        raise RunError("no TensorBoard events file")
    if len(events) < 1 + resumes:
        raise RunError(
            f"{len(events)} TensorBoard events files for a run resumed {resumes} times "
            "(summary.json "
            f"resumed_at): at least {1 + resumes}, one per process"
        )
    for path in events:
        if not path.is_file():  # a FIFO would block the reader for ever
            raise RunError(f"{path.name} is not a regular file")
    return events


def read_events_file(path: Path) -> tuple[pd.DataFrame, Events]:
    """Every scalar of one events file, a row per step and tag (step, tag, value, wall_time), and
    what Events says of it; a file without scalars (a resume stopped before its first iteration) has
    its name's time as its first and last."""
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
    """Every scalar of run_dir's events (a row per step, a column per tag), the Events of the file
    of its last process, and (resumes: how many times the run was resumed) every file's Events in
    the order they were written (by their first wall time; () for a run never resumed). A resumed
    run's files are merged: at a step and tag logged by two processes, the later one's value is kept
    (the resumed process continued after the stopped one's last save, and logged again what that one
    logged after it)."""
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


def agent_returns_kept(scalars: pd.DataFrame) -> tuple[pd.DataFrame, set[int]]:
    """A run's scalars less its agents' own other than their returns (agent_column), and the agents
    k that logged any under agent_{k}/ tags in the run's events (the scripts do since one event
    holds an iteration's scalars; before, agent k's were in its agent_{k}/ folder: with_agent).
    The analysis reads an agent's return alone: N agents' losses would be N x 8 more columns of
    every runs.csv."""
    others, logged = [], set()
    for tag in scalars.columns:
        match = AGENT_TAG.match(tag)
        if match:
            k = int(match[1])
            logged.add(k)
            if tag != agent_column(k):
                others.append(tag)
    return scalars.drop(columns=others), logged


def with_agent(scalars: pd.DataFrame, agent_dir: Path, k: int, resumes: int) -> pd.DataFrame:
    """A run's scalars with agent k's return from the events file of its agent_{k}/ folder (an
    older run's: agent_column(k), NaN where none of its episodes ended) at the run's steps;
    RunError: none, or logged elsewhere."""
    try:
        agent = read_events(agent_dir, resumes)[0]
    except RunError as e:
        raise RunError(f"agent_{k}/: {e}") from None
    if not set(agent["step"]) <= set(scalars["step"]):
        raise RunError(f"agent_{k}/ logged at steps the run did not log")
    returns = agent[RETURN] if RETURN in agent else float("nan")
    column = agent.assign(**{agent_column(k): returns})[["step", agent_column(k)]]
    return scalars.merge(column, on="step", how="left")


def read_scalars(run_dir: Path) -> pd.DataFrame:
    """Every scalar of the one TensorBoard events file in run_dir: a row per step, a column per
    tag."""
    return read_events(run_dir)[0]


def config_start(run: Run) -> tuple[str, datetime]:
    """config.json's hostname and start_time, which tie the events files to it; RunError when it
    lacks them."""
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
    """RunError unless an events file of the run is named for config.json's host, and was made and
    written from start_time to `high` (give or take CLOCK_SLACK_S)."""
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
    """RunError unless the events file is the run's own: named for config.json's host, made and
    written during the run (start_time to start_time + total_s, give or take CLOCK_SLACK_S). A
    resumed run's: check_resumed_events."""
    started = config_start(run)[1]
    if resumed_at(run.summary):
        check_resumed_events(run, started)
        return
    high = started.timestamp() + run.summary["total_s"] + CLOCK_SLACK_S
    check_made(run, run.events, high)
    # the script's first line (a wall time less its time/elapsed) came before start_time, by at most
    # setup_s
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
            f"the events in {run.events.name} are of a run that did not start at "
            f"{run.config['start_time']}"
        )


def check_resumed_events(run: Run, started: datetime) -> None:
    """RunError unless a resumed run's events files are its own: each named for config.json's host,
    made and written from start_time to its last process's end; the first process's first line
    before start_time; the last one's (the file of run.events) started after it, logged the
    iterations after resumed_at's last, each once, and ran within its total_s (the sum of its
    time/iteration, its events from its first line to total_s later, check_total on its
    time/elapsed, both counting on from the run's time before it). Its origin lies after the first
    process's; setup_s is the last process's: it tells nothing of the processes before it, whose
    times are checked against start_time alone."""
    last, total = run.events, run.summary["total_s"]
    if last.origin is None:
        raise RunError(f"the events in {last.name} have no time/elapsed: not a resumed process's")
    end = last.origin[1] + total + CLOCK_SLACK_S
    for events in run.segments:
        check_made(run, events, end)
    first = run.segments[0].origin
    if first and first[1] > started.timestamp() + CLOCK_SLACK_S:
        raise RunError(
            f"the events in {run.segments[0].name} are of a run that did not start at "
            f"{run.config['start_time']}"
        )
    # the resumed process's first line less the run's time before it (its time/elapsed's offset):
    # after the first process's first line, which start_time follows by up to its setup_s
    low = first[0] if first else started.timestamp()
    if not low - CLOCK_SLACK_S <= last.origin[0] <= last.first:
        raise RunError(
            f"the events in {last.name} are not of a process that resumed the run started at "
            f"{run.config['start_time']}"
        )
    after, iterations = resumed_at(run.summary)[-1], run.summary["iterations_completed"]
    wanted = {run.config["batch_size"] * (i + 1) for i in range(after, iterations)}
    if last.steps != wanted:
        raise RunError(
            f"the events of its last process ({last.name}) do not hold the iterations after "
            f"{after}, the "
            f"last of summary.json resumed_at, each once"
        )
    check_time_sum(last_process(run)["time/iteration"].astype(float), total)


def last_process(run: Run) -> pd.DataFrame:
    """The scalars of the process that wrote summary.json: all of them, but a resumed run's are
    those of its last events file (none in a runs.csv, which does not say which process logged
    what)."""
    if not resumed_at(run.summary):
        return run.scalars
    if run.events is None or "step" not in run.scalars:
        return run.scalars.iloc[:0]
    return run.scalars[run.scalars["step"].isin(run.events.steps)]


def events_span(run: Run) -> Optional[float]:
    """How long the run's last process ran to its last iteration by its events: its last
    time/elapsed (seconds from the script's first line); without one, a run folder's last event less
    start_time, plus setup_s (the most the first line came before start_time); None for a run of a
    runs.csv without time/elapsed, and for a resumed run of a runs.csv."""
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
    """RunError when total_s is longer than the run its events show (events_span) by more than
    TAIL_S: the other checks bound total_s from below only, and a total_s made longer would make its
    framework look slower."""
    span, total = events_span(run), run.summary["total_s"]
    tail = TRACKED_TAIL_S if run.config.get("track") is True else TAIL_S
    if span is not None and total > span + tail:
        raise RunError(
            f"summary.json total_s {total:.6g} s is longer than its events show: {span:.6g} s to "
            "its last "
            f"iteration (at most {tail:g} s more are a run's end)"
        )


def resumed_at(summary) -> list[int]:
    """summary.json's resumed_at: the iterations after which the run was resumed (--resume), in
    order; [] for a run never resumed. RunError unless it is a non-empty list of increasing positive
    ints (the scripts write no other): it says how many events files the run folder holds, and that
    its times are not one process's."""
    value = summary.get("resumed_at") if isinstance(summary, dict) else None
    if value is None:
        return []
    increasing = isinstance(value, list) and all(is_int(k) for k in value)
    increasing = increasing and all(a < b for a, b in zip([0, *value], value))
    if not (increasing and value):
        raise RunError(
            f"summary.json resumed_at is {value!r}, not the increasing iterations that its resumes "
            "continued after"
        )
    return value


def check_time_sum(times: pd.Series, total: float) -> None:
    """RunError when the iterations of one process take longer than its total_s."""
    if times.sum() > total * (1 + 1e-5) + 1e-6:  # room for the events' float32
        raise RunError(
            f"its iterations take {times.sum():.6g} s, more than its total_s {total:.6g} s"
        )


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_scalars(scalars: pd.DataFrame, config: dict, summary: dict) -> None:
    """RunError unless time/iteration holds a finite positive time per iteration, logged at the
    steps the analysis numbers them by (batch_size, 2 x batch_size, ...; in a runs.csv without
    steps, iterations 0, 1, ...), adding up to at most total_s (a resumed run's: those of its last
    process, check_resumed_events)."""
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
    # the run's own returns are its agents' mean: its final_return is checked with its agents'
    if "final_return" in summary and config.get("num_agents", 1) == 1:
        check_final_return(logged, summary["final_return"])


def check_final_return(logged: pd.DataFrame, final, column: str = RETURN, what="") -> None:
    """RunError unless final_return is what bookkeeping.py makes of the scalars: the mean episodic
    return of the last 10 iterations (those in which an episode ended), null when none did. column:
    the return's (an agent's: agent_column), what: the value's name (final_returns[k])."""
    order = "step" if "step" in logged else "iteration" if "iteration" in logged else None
    last = (logged.sort_values(order) if order else logged).tail(FINAL_ITERATIONS)
    returns = pd.to_numeric(last.get(column, pd.Series(dtype=float)), errors="coerce").dropna()
    mean = float(returns.mean()) if len(returns) else None
    if mean is None or final is None:
        same = mean is None and final is None
    else:
        same = math.isclose(mean, final, rel_tol=1e-6, abs_tol=1e-9)
    if not same:
        raise RunError(
            f"summary.json {what or 'final_return'} {final!r} is not the mean return of its last "
            "iterations "
            f"({mean!r})"
        )

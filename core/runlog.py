"""Reads what a run of a ppo_*.py script wrote: config.json, summary.json, its scalars
(tools/launch.py runs one).

The one reader of run folders, used by plot_results.py, sweep/resume.py (bench.sh's resume),
benchmarks/ and the tests. One definition of a usable run serves them all: `check_completed` says
why a run is not one.

    from core.runlog import read_run, is_completed
    run = read_run("runs/CartPole-v1__linen__small__jit__1__1700000000")
    run.config["framework"], run.summary["status"], run.scalars["time/iteration"]

A usable run is what the scripts write, checked against the study (study.toml) and against itself,
so that a folder forged or pieced together (which would make bench.sh skip a run it never made, or
put words in the analysis' tables) is not one:

- config.json: the framework, model size and compile mode that the study names; an env id (or an env
  label, "{id}@envpool") and an env_backend of the study's backends; seed an int; sync_timing a
  bool; batch_size and num_iterations positive ints (never bools), batch_size = num_envs x num_steps
  where those are given; the texts (tag, hostname, platform, ...) strings; its command (argv) runs
  the framework's script, and every flag it gives has the value of the field it sets (check_command:
  the resume knows a run by its command, the analysis by its fields).
- summary.json: status completed after num_iterations iterations; total_s a finite positive number;
  setup_s and import_s finite numbers within total_s; final_returns (their mean: final_return) one
  per agent (config.json num_agents), each null or the mean return of its last 10 iterations.
- the scalars: one time/iteration per iteration, at steps batch_size, 2 x batch_size, ... (by which
  the analysis numbers the iterations), each a finite positive number, adding up to at most total_s.
- a run folder's events file (check_events): named by tensorboardX for the host of config.json
  (events.out.tfevents.{unix time}.{hostname}), and written during the run: its time and the wall
  time of every scalar between config.json's start_time and start_time + total_s, and the script's
  first line by its time/elapsed scalars (wall time less time/elapsed) at most setup_s before
  start_time (each give or take CLOCK_SLACK_S), so that an events file copied in from another run is
  not taken for this one's; and total_s at most TAIL_S longer than the run its events show (its last
  time/elapsed; TRACKED_TAIL_S with --track).
- config.json and summary.json: regular files of at most MAX_JSON_BYTES, read by atomic.py's one
  JSON reader (a FIFO, a file nested deeper than its MAX_JSON_DEPTH or holding NaN is a reason,
  never a hang or a crash). Run folders are found without following
  links (find_runs).

A run of a runs.csv (plot_results.py --csv) goes through the same check_completed, without an events
file.

A resumed run (the scripts' --resume; summary.json "resumed_at": the iterations each resume
continued after, a non-empty increasing list of positive ints below iterations_completed, else
RunError) is read as one run: its folder holds an events file per process (at least 1 +
len(resumed_at)), merged so that a later file's value (by the file's first wall time) replaces an
earlier one's at the same step and tag: the scalars hold each iteration once, as the resumed process
logged it (check_resumed_events). Its checks are a run's, bar those that tie total_s (every
process's, as the last one's time/elapsed counts on from the time before it) to the events: the sum
of time/iteration, the events within start_time + total_s and check_total are made on the last
process's events file alone (its iterations, after resumed_at's last, within its own start and
total_s); in a runs.csv, which does not say which process logged what, they are skipped.
"""

import math
import os
import re
import shlex
import stat
from pathlib import Path
from typing import Optional

from atomic import MAX_JSON_BYTES, BadJson, parse_json  # a run's JSON files are a few kB
from core import run_args, study
from core.events import (
    Run,
    RunError,
    agent_column,
    agent_returns_kept,
    check_events,
    check_final_return,
    check_scalars,
    check_total,
    is_int,
    read_events,
    resumed_at,
    with_agent,
)

# config.json keys that the analysis and the resume need: a run without them cannot be placed in the
# study
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


def read_json(path: Path) -> dict:
    """A JSON object from a file, read by atomic's one JSON reader (at most MAX_JSON_BYTES, at most
    MAX_JSON_DEPTH deep); RunError (naming the file, one line) when it is missing,
    unreadable, not a regular file (a FIFO would block the reader for ever), too large, too deep,
    not JSON or not an object."""
    path = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO returns at once, and fstat then says what it is
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise RunError(f"no {path.name}") from None
    except OSError as e:
        raise RunError(f"unreadable {path.name} ({e.strerror or e})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RunError(f"{path.name} is not a regular file")
        if info.st_size > MAX_JSON_BYTES:
            raise RunError(f"{path.name} holds {info.st_size:,} bytes, more than a run writes")
        try:
            data = parse_json(f.read(MAX_JSON_BYTES + 1), path.name)
        except OSError as e:
            raise RunError(f"unreadable {path.name} ({e.strerror or e})") from None
        except BadJson as e:
            raise RunError(f"unreadable {e}") from None
    if not isinstance(data, dict):
        raise RunError(f"{path.name} is not a JSON object")
    return data


def find_runs(roots) -> tuple[list[Path], list[Path]]:
    """(every run folder, one holding config.json, at any depth under the given folders, sorted per
    folder; the links to folders met on the way). Links are never followed: a run is read where it
    is, once, and bench.sh's resume (sweep/resume.py) finds runs here too, so that a run one of them
    counts, the other counts as well."""
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
    """Every run folder (one holding config.json) at any depth under the given folders, sorted per
    folder, links to folders not followed (find_runs)."""
    return find_runs(roots)[0]


def read_run(run_dir) -> Run:
    """config.json, summary.json and the scalars of a run folder, whatever its status; RunError when
    unreadable."""
    run_dir = Path(run_dir)
    config = read_json(run_dir / "config.json")
    summary = read_json(run_dir / "summary.json")
    scalars, *events = read_events(run_dir, len(resumed_at(summary)))
    n = config.get("num_agents", 1)
    scalars, logged = agent_returns_kept(scalars)
    for k in range(n if is_int(n) and n > 1 else 0):
        if k in logged:
            # agent k's scalars in the run's own events; no return column: no episode of it ended
            if agent_column(k) not in scalars:
                scalars[agent_column(k)] = float("nan")
        else:
            # a run of before the agents' tags: agent k's events in its agent_k folder
            scalars = with_agent(scalars, run_dir / f"agent_{k}", k, len(resumed_at(summary)))
    return Run(run_dir, config, summary, scalars, *events)


# ----------------------------------------------------------------------------- what a usable run is


def is_number(value) -> bool:
    """A finite int or float, never a bool (JSON's true is not a 1 here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def positive_int(key: str, value) -> int:
    if not is_int(value) or value <= 0:
        raise RunError(f"config.json {key} is {value!r}, not a positive integer")
    return value


def check_env(config: dict) -> None:
    """An env id (a label "{id}@{backend}" in a runs.csv) and an env_backend of the study's
    backends."""
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
    """RunError unless config.json names what the study knows, with values of the types the scripts
    write."""
    missing = [key for key in REQUIRED_CONFIG if key not in config]
    if missing:
        raise RunError(f"config.json lacks {', '.join(missing)}")
    framework, size, mode = config["framework"], config["model_size"], config["compile"]
    if not isinstance(framework, str) or framework not in the_study.frameworks:
        raise RunError(
            f"config.json framework {framework!r} is not one of the study's "
            f"({', '.join(the_study.frameworks)})"
        )
    if not isinstance(size, str) or size not in the_study.sizes:
        raise RunError(
            f"config.json model_size {size!r} is not one of the study's "
            f"({', '.join(the_study.sizes)})"
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
    positive_int("num_agents", config.get("num_agents", 1))  # runs of before it: one agent
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
    """config.json's command (argv; one shell command line in a runs.csv) as its words; RunError
    when it is neither."""
    if isinstance(command, str):
        try:
            return shlex.split(command)
        except ValueError:
            pass
    elif isinstance(command, list) and command and all(isinstance(word, str) for word in command):
        return command
    raise RunError(f"config.json command is {command!r}, not a command line")


def check_command(config: dict, the_study: study.Study) -> None:
    """RunError unless config.json's fields are what its own command set: the script is the
    framework's, and every flag the command gives has the value of the field it sets (as the
    analysis reads the fields: an env label's backend, float32 for a run without dtype). The resume
    knows a run by its command and the analysis by its fields: they must be one run. A run without a
    command (made before config.json had one) has nothing to agree with."""
    if config.get("command") is None:
        return
    words = command_words(config["command"])
    script = Path(the_study.frameworks[config["framework"]].script).name
    if Path(words[0]).name != script:
        raise RunError(
            f"config.json command runs {Path(words[0]).name!r}, not {script}, the script of its "
            "framework "
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
    """RunError unless summary.json (any JSON value) says status completed: the first check of a
    usable run, the one the resume makes before reading anything more."""
    status = summary.get("status") if isinstance(summary, dict) else None
    if status != "completed":
        raise RunError(f"status {status!r}")


def says_completed(summary) -> bool:
    """Whether summary.json (any JSON value) says status completed (check_status, as a yes or
    no)."""
    try:
        check_status(summary)
    except RunError:
        return False
    return True


def check_summary(summary: dict, config: dict) -> None:
    """RunError unless summary.json says the run completed every iteration of config.json, in a
    finite time."""
    check_status(summary)
    if summary.get("total_s") is None:
        raise RunError("summary.json lacks total_s")
    iterations = summary.get("iterations_completed")
    if not is_int(iterations) or iterations <= 0:
        raise RunError(f"completed with {iterations!r} iterations")
    if iterations != config["num_iterations"]:
        raise RunError(
            f"completed with {iterations} iterations, config.json's num_iterations "
            f"{config['num_iterations']}"
        )
    resumes = resumed_at(summary)
    if resumes and resumes[-1] >= iterations:
        raise RunError(
            f"summary.json resumed_at {resumes!r}: a resume after iteration {resumes[-1]} of "
            f"{iterations}"
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


def final_returns(summary: dict, agents: int) -> list:
    """summary.json's final_returns (runs of before --num-agents: [final_return]); RunError unless
    it holds a return (a number or null) per agent, and final_return is their mean (null: none)."""
    finals = summary.get("final_returns", [summary.get("final_return")])
    if not (isinstance(finals, list) and len(finals) == agents):
        raise RunError(f"summary.json final_returns is {finals!r}, not a list of {agents} returns")
    if not all(value is None or is_number(value) for value in finals):
        raise RunError(f"summary.json final_returns is {finals!r}: a return is not a number")
    known, final = [v for v in finals if v is not None], summary.get("final_return")
    mean = math.fsum(known) / len(known) if known else None
    if (mean is None) != (final is None) or (known and not math.isclose(mean, final, rel_tol=1e-6)):
        raise RunError(f"summary.json final_return {final!r} is not its agents' mean ({mean!r})")
    return finals


def check_agents(run: Run) -> None:
    """RunError unless summary.json's final_returns are the run's (final_returns) and, for N > 1
    agents, each agent's final return is its agent_{k}/ tags' (agent_column's)."""
    agents = run.config.get("num_agents", 1)
    finals = final_returns(run.summary, agents)
    logged = run.scalars[run.scalars["time/iteration"].notna()]
    for k in range(agents if agents > 1 else 0):
        if agent_column(k) not in logged:
            raise RunError(f"no events of agent {k} (agent_{k}/) for its {agents} agents")
        check_final_return(logged, finals[k], agent_column(k), f"final_returns[{k}]")


def check_completed(run: Run, the_study: Optional[study.Study] = None) -> None:
    """RunError, saying why, unless the run completed, its files hold every iteration it claims, its
    values are the study's and of the types the scripts write, and its events file (a run folder's)
    is its own. the_study: the study (study.load() when not given)."""
    check_status(run.summary)
    the_study = the_study or study.load()
    check_config(run.config, the_study)
    check_summary(run.summary, run.config)
    check_scalars(run.scalars, run.config, run.summary)
    check_agents(run)
    if run.events is not None:
        check_events(run)
    check_total(run)


def read_completed_run(run_dir, the_study: Optional[study.Study] = None) -> Run:
    """read_run, then check_completed: the run, or RunError saying why it cannot be used. A run that
    did not complete says so first (its events, cut short, are not read)."""
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

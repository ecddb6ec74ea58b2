"""The run matrix of bench.sh: which runs the chosen experiments make, which shard runs each, which are done.

bench.sh calls this module once per sweep and keeps the process work (one fresh process per run, timeouts,
logs, progress). Everything here comes from the study (study.toml, through study.py):

    python sweep.py dry-run --experiments exp1 --seeds 1 --log-dir runs   # one command per run, then a count
    python sweep.py plan    --log-dir runs --shard 0/2 -- --num-envs 64   # the same, as NUL-separated data for bench.sh
    python sweep.py experiments                                           # one line per experiment
    python sweep.py check   --log-dir runs --shard 0/2                    # exit 2 on a bad option, else prints 0/2
    python sweep.py env-timing --file runs/env_timing.json --envs CartPole-v1  # must the env timing be (re)done?
    python sweep.py sbatch  --log-dir runs --tasks 8 --timeout 900        # the job array script (bench.sh --slurm)
    python sweep.py claim --fd 9 --lock F --holder H --description D --log-dir runs -- N WORDS...  # a cell's lock

Matrix: for each experiment, seed, env and model size (a *cell*), every sync setting, framework and compile mode of
the experiment, in the study's order (sync "both": every framework sync off, then every one sync on). An env is an env
label (study.env_label): the env id on gymnax, "{id}@envpool" on envpool, whose runs get --env-backend envpool (and
--env-threads N from bench.sh --cpus N), so the two backends of one env id are two cells. Sharding deals out whole
cells, so every run of a cell lands on the same shard and a speedup never compares two machines. A run is done when a
folder in {log-dir}/{exp}/ holds a usable completed run (runlog.is_completed, as for the analysis) whose
config.json "command" (sys.argv of the run) is the planned command: the same script file name and the same
arguments, apart from the value of --log-dir.

On Slurm (bench.sh --slurm), array task K of N runs `bench.sh --shard K/N` with the same options; see
sbatch_script() for the job's settings (exclusive node, time limit, logs, env timing per node).
"""

import argparse
import hashlib
import json
import math
import os
import shlex
import shutil
import socket
import sys
from dataclasses import dataclass, replace
from itertools import product
from pathlib import Path
from typing import Optional

import study

PROG = "bench.sh"  # the messages are bench.sh's: it is the entry point that calls this module


class BadOption(Exception):
    """A bad option value; the message names it and the valid choices."""


@dataclass(frozen=True)
class Run:
    experiment: str
    seed: int
    env: str
    size: str
    framework: str
    compile: str
    sync: bool
    command: tuple[str, ...]  # python, script, arguments
    both_syncs: bool = (
        False  # its experiment runs sync off and on: the description and the log name say which
    )
    # env: an env label (study.env_label), e.g. "CartPole-v1" (gymnax) or "CartPole-v1@envpool"

    @property
    def sync_name(self) -> str:
        return f" sync {'on' if self.sync else 'off'}" if self.both_syncs else ""

    @property
    def cell(self) -> tuple[str, int, str, str]:
        return (self.experiment, self.seed, self.env, self.size)

    @property
    def description(self) -> str:
        return f"{self.experiment} {self.env} {self.framework} {self.size} {self.compile}{self.sync_name} seed {self.seed}"

    @property
    def log_stem(self) -> str:  # bench.sh adds __{unix time}.log
        sync = self.sync_name.replace(" sync on", "__sync").replace(" sync off", "__nosync")
        return f"logs/{self.experiment}/{self.env}__{self.framework}__{self.size}__{self.compile}{sync}__{self.seed}"


# ------------------------------------------------------------------------------------------ options
def choices(
    option: str, value: Optional[str], valid: tuple[str, ...], extra=None
) -> tuple[str, ...]:
    """The items of a comma-separated option (all of `valid` when not given), each checked against `valid`.

    `extra(name)` may accept a name outside `valid` (the envs: any gymnax env id)."""
    if value is None:
        return valid
    items = tuple(dict.fromkeys(item.strip() for item in value.split(",") if item.strip()))
    if not items:
        raise BadOption(f"{option} is empty; valid choices: {', '.join(valid)}")
    for item in items:
        if item not in valid and not (extra and extra(item)):
            more = " or another gymnax env id the scripts can train" if extra else ""
            raise BadOption(
                f"unknown value {item!r} in {option}; valid choices: {', '.join(valid)}{more}"
            )
    return items


def why_untrainable(env: str) -> Optional[str]:
    """Why the PPO scripts cannot train `env`, an env label (an id on gymnax, "{id}@envpool" on envpool), in words;
    None when they can. On gymnax, env_adapters.py's check, the same as the scripts' make_env (gymnax is imported only
    for an env outside the study, which takes a few seconds); on envpool, an id of env_adapters.ENVPOOL_ENVS."""
    env_id, backend = study.split_label(env)
    if backend not in study.BACKENDS:
        return f"names backend {backend!r}; backends: {', '.join(study.BACKENDS)}"
    if study.env_label(env_id, backend) != env:  # "X@gymnax": a gymnax env is named by its id alone
        return f"is a {backend} env, named {env_id!r} alone"
    from env_adapters import ENVPOOL_ENVS
    from env_adapters import why_untrainable as scripts_check

    if backend == "envpool":
        return None if env_id in ENVPOOL_ENVS else "is not an envpool env here"
    problem = scripts_check(env_id)
    if problem and env_id in ENVPOOL_ENVS:
        problem += f" to gymnax (on envpool: {study.env_label(env_id, 'envpool')})"
    return problem


def env_choices(value: str, S: study.Study) -> tuple[str, ...]:
    """--envs: each a study env label or another env the scripts can train (a gymnax id, or "{id}@envpool" for an
    envpool id); BadOption names the first other one and lists what can be trained (on this error path only: it makes
    every gymnax env, about a second)."""
    envs = choices("--envs", value, S.every_env, extra=lambda env: True)
    for env in (env for env in envs if env not in S.every_env):  # the study's own are trainable
        problem = why_untrainable(env)
        if problem:
            from env_adapters import ENVPOOL_ENVS, usable_envs

            others = [other for other in usable_envs() if other not in S.every_env]
            raise BadOption(
                f"--envs: {env!r} {problem}, so the scripts cannot train it; valid choices: the study's "
                f"{', '.join(S.every_env)}, an envpool env as ID@envpool (ID one of {', '.join(ENVPOOL_ENVS)}), "
                f"or another gymnax env the scripts can train (Discrete or 1-D Box actions): {', '.join(others)}"
            )
    return envs


def natural(text: str) -> bool:
    """ASCII digits only: str.isdigit() and int() also take '²' or '٣', which no one means as a count."""
    return text.isascii() and text.isdigit()


# The bounds of the sizes a sweep takes: each larger value is refused in one line, before anything is planned.
MAX_RUNS = 100_000  # runs in a sweep's matrix: planning as many takes seconds, running them years; also the most
# seeds, shards (--shard K/N), array tasks and tasks at once one sweep can use
MAX_COUNT = (
    2**31 - 1
)  # --iterations and --cpus (the runs' --env-threads): what a 32-bit integer holds, JAX's default
MAX_SECONDS = (
    30 * 24 * 3600
)  # --timeout and --kill-after: 30 days (bench.sh's MAX_SECONDS, the same)


def shown(value: str) -> str:
    """A value for a message: repr, cut short when it is long (a count of 5000 digits)."""
    return repr(value) if len(value) <= 40 else f"{value[:20]!r}... ({len(value)} characters)"


def bounded_int(option: str, value: str, low: int, high: int) -> int:
    """An integer from low to high, of ASCII digits; BadOption names the value and the valid range. The digits are
    counted before int() reads them: int() refuses a string of more than 4300 digits with a traceback."""
    digits = value.lstrip("0") or "0" if natural(value) else ""
    if not digits or len(digits) > len(str(high)) or not low <= int(digits) <= high:
        raise BadOption(f"{option} must be an integer from {low} to {high}, got {shown(value)}")
    return int(digits)


def positive_int(option: str, value: Optional[str], high: int = MAX_COUNT) -> Optional[int]:
    return None if value is None else bounded_int(option, value, 1, high)


def shard(value: str) -> tuple[int, int]:
    k, _, n = value.partition("/")
    try:
        num = bounded_int("--shard", n, 1, MAX_RUNS)
        return bounded_int("--shard", k, 0, num - 1), num
    except BadOption:
        raise BadOption(
            f"--shard must be K/N with 0 <= K < N <= {MAX_RUNS}, got {shown(value)}"
        ) from None


def seconds(option: str, value: str, positive: bool) -> float:
    """A number of seconds, above 0 (`positive`) or from 0, up to MAX_SECONDS; BadOption names the value."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if (
        not ((0 < number) if positive else (0 <= number)) or not number <= MAX_SECONDS
    ):  # nan and inf fail it too
        raise BadOption(
            f"{option} must be a number of seconds up to {MAX_SECONDS} (30 days), got {shown(value)}"
        )
    return number


# The run arguments the sweep sets itself (the scripts' flags, as tyro spells them; tyro takes _ for - too): given
# again after --, the last value would win, and the run would not be the run its label, its folder and the resume
# say. --num-iterations and --tag only when --iterations and --tag set them.
SWEEP_FLAGS = {
    "--env": "bench.sh --envs",
    "--model-size": "bench.sh --sizes",
    "--compile": "each experiment's compile modes",
    "--seed": "bench.sh --seeds",
    "--log-dir": "bench.sh --log-dir",
    "--exp-name": "each experiment's name",
    "--sync-timing": "each experiment's sync setting",
    "--no-sync-timing": "each experiment's sync setting",
    "--env-backend": "each experiment's backends, or bench.sh --envs ID@envpool",
}


def check_extra(
    extra: tuple[str, ...],
    iterations: Optional[int],
    tag: Optional[str],
    env_threads: Optional[int] = None,
) -> None:
    """BadOption for an argument after -- that sets what the sweep sets (in any spelling: --seed 7, --seed=7,
    --log_dir X)."""
    owned = dict(SWEEP_FLAGS)
    if iterations is not None:
        owned["--num-iterations"] = "bench.sh --iterations"
    if tag is not None:
        owned["--tag"] = "bench.sh --tag"
    if env_threads is not None:
        owned["--env-threads"] = "bench.sh --cpus"
    for arg in extra:
        flag = arg.split("=", 1)[0].replace("_", "-")
        if flag in owned:
            raise BadOption(
                f"{arg!r} after -- would override what the sweep sets itself ({owned[flag]}); "
                f"leave {', '.join(owned)} out of the arguments after --"
            )


@dataclass(frozen=True)
class Selection:
    experiments: tuple[str, ...]
    frameworks: tuple[str, ...]
    envs: Optional[tuple[str, ...]]  # None: each experiment's own
    sizes: tuple[str, ...]
    seeds: int
    iterations: Optional[int]
    tag: Optional[str]
    log_dir: str
    shard: tuple[int, int]
    python: str
    extra: tuple[str, ...]
    env_threads: Optional[int] = (
        None  # --env-threads of the envpool runs (bench.sh --cpus); None: the scripts' own
    )
    compile_modes: Optional[tuple[str, ...]] = (
        None  # None: each experiment's own; DEFAULT_MODE: each framework's first
    )


# --compile-modes: the word for each framework's default mode (its first in study.toml), beside the modes' names
DEFAULT_MODE = "default"


def mode_choices(value: Optional[str], S: study.Study) -> Optional[tuple[str, ...]]:
    """The items of --compile-modes, each "default" or a compile mode of some framework of the study."""
    if value is None:
        return None
    modes = (mode for fw in S.frameworks.values() for mode in fw.compile)
    return choices("--compile-modes", value, (DEFAULT_MODE, *dict.fromkeys(modes)))


def kept_modes(sel: Selection, exp: study.Experiment, fw: study.Framework) -> tuple[str, ...]:
    """The experiment's compile modes of this framework that --compile-modes keeps (all of them when not given)."""
    modes = exp.compile_modes(fw)
    if sel.compile_modes is None:
        return modes
    wanted = set(sel.compile_modes)
    if DEFAULT_MODE in wanted:
        wanted.add(fw.default_compile)
    return tuple(mode for mode in modes if mode in wanted)


def select(args: argparse.Namespace, S: study.Study) -> Selection:
    """Checks the options against the study; BadOption names the first bad value."""
    sel = Selection(
        experiments=choices("--experiments", args.experiments, tuple(S.experiments)),
        frameworks=choices("--frameworks", args.frameworks, tuple(S.frameworks)),
        envs=None if args.envs is None else env_choices(args.envs, S),
        sizes=choices("--sizes", args.sizes, S.sizes),
        seeds=positive_int("--seeds", args.seeds, MAX_RUNS),
        iterations=positive_int("--iterations", args.iterations),
        tag=args.tag,
        log_dir=args.log_dir,
        shard=shard(args.shard),
        python=args.python,
        extra=tuple(args.extra),
        env_threads=positive_int("--cpus", args.env_threads),
        compile_modes=mode_choices(args.compile_modes, S),
    )
    check_extra(sel.extra, sel.iterations, sel.tag, sel.env_threads)
    return sel


# ------------------------------------------------------------------------------------------- matrix
def option(name: str, value: str) -> list[str]:
    """A run's option and value, as two words; as one, --name=VALUE, when VALUE starts with "-" (a tag "-x", a log
    dir "-runs"), which the script's parser would otherwise read as another option."""
    return [f"{name}={value}"] if value.startswith("-") else [name, value]


def command(
    sel: Selection,
    exp: study.Experiment,
    fw: study.Framework,
    env: str,
    size: str,
    mode: str,
    seed: int,
    sync: bool,
) -> tuple[str, ...]:
    """A run's command. env: an env label; a gymnax run's command names no backend (as before there were two)."""
    env_id, backend = study.split_label(env)
    cmd = [
        sel.python,
        str(study.ROOT / fw.script),
        "--env",
        env_id,
        "--model-size",
        size,
        "--compile",
        mode,
        "--seed",
        str(seed),
        *option("--log-dir", f"{sel.log_dir.rstrip('/')}/{exp.name}"),
        "--exp-name",
        exp.name,
    ]
    if backend != study.BACKENDS[0]:
        cmd += ["--env-backend", backend]
    if backend == "envpool" and sel.env_threads is not None:  # a gymnax run has no use for it
        cmd += ["--env-threads", str(sel.env_threads)]
    cmd += exp.env_args(
        env
    )  # a learning experiment's reference configuration, before --iterations may cut it
    if sel.iterations is not None:
        cmd += ["--num-iterations", str(sel.iterations)]
    if sel.tag is not None:
        cmd += option("--tag", sel.tag)
    if not sync:
        cmd += ["--no-sync-timing"]
    return (*cmd, *sel.extra)


def takes_outside_env(exp: study.Experiment, env: str, S: study.Study) -> bool:
    """Whether an env label of --envs outside the study joins this experiment: a gymnax env joins the experiments of
    envs "all", an env on another backend (e.g. "Humanoid-v4@envpool") those that run that backend alone."""
    backend = study.split_label(env)[1]
    return exp.envs == S.envs if backend == study.BACKENDS[0] else exp.backends == (backend,)


def experiment_envs(sel: Selection, exp: study.Experiment, S: study.Study) -> tuple[str, ...]:
    """The env labels of an experiment in this sweep: its own, or those of --envs it has (in the order given), and
    those of --envs outside the study that it takes (takes_outside_env)."""
    if sel.envs is None:
        return exp.envs
    return tuple(
        env
        for env in sel.envs
        if env in exp.envs or (env not in S.every_env and takes_outside_env(exp, env, S))
    )


def matrix(sel: Selection, S: study.Study) -> list[Run]:
    """Every run of the selection, cell after cell (experiments, seeds, envs, sizes); within a cell, every sync setting,
    framework and compile mode of the experiment, one after another. The study's order throughout; envs in the order
    given."""
    runs = []
    frameworks = [fw for name, fw in S.frameworks.items() if name in sel.frameworks]
    for exp in (exp for name, exp in S.experiments.items() if name in sel.experiments):
        sizes = [size for size in S.sizes if size in sel.sizes and size in exp.sizes]
        for seed, env, size in product(
            range(1, sel.seeds + 1), experiment_envs(sel, exp, S), sizes
        ):
            for sync, fw in product(exp.syncs, frameworks):
                for mode in kept_modes(sel, exp, fw):
                    runs.append(
                        Run(
                            exp.name,
                            seed,
                            env,
                            size,
                            fw.name,
                            mode,
                            sync,
                            command(sel, exp, fw, env, size, mode, seed, sync),
                            both_syncs=len(exp.syncs) > 1,
                        )
                    )
    return runs


def bounded_matrix(sel: Selection, S: study.Study) -> list[Run]:
    """matrix(), when it holds at most MAX_RUNS runs; else BadOption, found from the runs of one seed before any
    more are made (--seeds 2000000 would take minutes to plan)."""
    per_seed = len(matrix(replace(sel, seeds=1), S))
    if per_seed * sel.seeds > MAX_RUNS:
        most = MAX_RUNS // per_seed
        valid = f"valid: 1 to {most} with these options" if most else "narrow the sweep"
        raise BadOption(
            f"--seeds {sel.seeds} makes {per_seed * sel.seeds} runs, more than the {MAX_RUNS} a sweep may plan; {valid}"
        )
    return matrix(sel, S)


def cells(runs: list[Run]) -> list[tuple]:
    return list(dict.fromkeys(run.cell for run in runs))


def shard_of_cells(all_cells: list[tuple], n: int) -> dict[tuple, int]:
    """Each cell's shard: cells are dealt out in turn, in a fixed scrambled order (a hash of the cell).

    So the shards differ by at most one cell, and no shard gets all of one size or env (dealing in matrix
    order would, e.g. every large cell to one shard when N is the number of sizes)."""
    order = sorted(all_cells, key=lambda cell: hashlib.sha256(repr(cell).encode()).hexdigest())
    return {cell: i % n for i, cell in enumerate(order)}


def shard_runs(runs: list[Run], k: int, n: int) -> list[Run]:
    """This shard's runs, in matrix order."""
    owner = shard_of_cells(cells(runs), n)
    return [run for run in runs if owner[run.cell] == k]


# ------------------------------------------------------------------------------------------- resume
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


def completed_runs(exp_dir: Path, wanted: Optional[set] = None) -> set:
    """run_key of every usable completed run in a folder: runlog.is_completed, the one definition that the analysis
    uses too (status completed, the config keys, at least one iteration, one readable events file holding every
    iteration). Runs without config.json "command" are not counted. `wanted`: only these keys are checked in full
    (reading the events is the slow part: about 10 ms a run)."""
    done = set()
    for summary_path in sorted(exp_dir.glob("*/summary.json")):
        try:  # first the cheap part: a completed summary and a command
            summary = json.loads(summary_path.read_text())
            config = json.loads((summary_path.parent / "config.json").read_text())
        except (OSError, ValueError):
            continue
        cmd = config.get("command") if isinstance(config, dict) else None
        if not (
            isinstance(summary, dict)
            and summary.get("status") == "completed"
            and isinstance(cmd, list)
            and cmd
        ):
            continue
        key = run_key([str(c) for c in cmd])
        if key in done or (wanted is not None and key not in wanted):
            continue
        import runlog  # here: it imports pandas, which a sweep with nothing completed need not pay for

        if runlog.is_completed(summary_path.parent):
            done.add(key)
    return done


def done_flags(runs: list[Run], log_dir: str) -> list[bool]:
    return done_commands([(run.experiment, run.command) for run in runs], log_dir)


def done_commands(runs: list[tuple[str, tuple[str, ...]]], log_dir: str) -> list[bool]:
    """Whether each run, given as (experiment, command), has a usable completed run in {log_dir}/{experiment}."""
    keys = [run_key(command[1:]) for _, command in runs]
    completed = {
        exp: completed_runs(
            Path(log_dir) / exp, {key for (e, _), key in zip(runs, keys) if e == exp}
        )
        for exp in dict.fromkeys(exp for exp, _ in runs)
    }
    return [key in completed[exp] for (exp, _), key in zip(runs, keys)]


# ------------------------------------------------------------------------------------------ cell locks
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


# ---------------------------------------------------------------------------------------- env timing
def env_timing_reason(
    path: Path, envs: list[str], env_threads: Optional[int] = None
) -> Optional[tuple[str, list[str]]]:
    """Why the env timing at `path` must be (re)done on this machine, and which envs to time; None if usable.

    Usable: it exists, comes from this hostname and device (jax.devices()[0].device_kind), holds every env (label)
    of the sweep, and, when the sweep has envpool envs, timed them with the sweep's --env-threads (`env_threads`;
    None: the scripts' default, 1). Re-timing on the same machine keeps the envs the file already has."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return f"{path} is missing", envs
    except (OSError, ValueError) as e:
        return f"{path} is unreadable ({e})", envs
    host = socket.gethostname()
    if data.get("hostname") != host:
        return f"{path} comes from host {data.get('hostname')!r}, this is {host!r}", envs
    import jax  # only when the hostname matches: importing it takes a few seconds

    device = jax.devices()[0].device_kind
    if data.get("device") != device:
        return (
            f"{path} was measured on {data.get('device')!r}, this machine's device is {device!r}",
            envs,
        )
    have = list(data.get("envs") or {})
    missing = [env for env in envs if env not in have]
    if missing:
        return f"{path} lacks {', '.join(missing)}", list(dict.fromkeys(have + envs))
    threads, timed = (
        env_threads or DEFAULT_ENV_THREADS,
        data.get("env_threads", DEFAULT_ENV_THREADS),
    )
    if timed != threads and any(study.split_label(env)[1] == "envpool" for env in envs):
        return (
            f"{path} timed the envpool envs with {timed} threads, this sweep's runs get {threads}",
            have,
        )
    return None


DEFAULT_ENV_THREADS = 0  # the scripts' --env-threads default (and env_timing.py's)


# -------------------------------------------------------------------------------------------- Slurm
MAX_TASKS = 1000  # the default task count is the number of cells, at most this (Slurm's default MaxArraySize is 1001)
TIME_MARGIN_S = 15 * 60  # added to a task's time limit: the env timing, imports, the last summary
SIGNAL_BEFORE_S = 120  # bench.sh gets SIGTERM this long before the time limit: the run in progress saves its summary
# sbatch's options, as its parser knows them: sbatch reads the #SBATCH lines with getopt_long, so a unique prefix of a
# long option is that option (--arr=0-3 is --array), an ambiguous one is an error, and a letter's value may be
# attached, after other letters (-Ha5 is --hold --array=5). The table of Slurm 22.05 (the options of
# src/common/slurm_opt.c that sbatch takes; `sbatch --help` lists most): each long option by what it takes, and the
# letters. (tasks-per-node is another name of ntasks-per-node.)
SBATCH_NO_VALUE = (
    "contiguous help hold ignore-pbs no-requeue overcommit oversubscribe parsable quiet reboot requeue spread-job "
    "test-only usage use-min-nodes verbose version wait"
).split()
SBATCH_OPTIONAL_VALUE = "exclusive get-user-env nice no-kill propagate".split()  # --name=VALUE only
SBATCH_VALUE = (  # --name=VALUE or --name VALUE
    "account acctg-freq array batch bb bbf begin chdir cluster cluster-constraint clusters comment constraint "
    "container context core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot dependency "
    "distribution error exclude export export-file extra-node-info gid gpu-bind gpu-freq gpus gpus-per-node "
    "gpus-per-socket gpus-per-task gres gres-flags hint input job-name kill-on-invalid-dep licenses mail-type "
    "mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus network nodefile nodelist nodes ntasks "
    "ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket ntasks-per-tres open-mode output partition "
    "power prefer priority profile qos reservation signal sockets-per-node switches tasks-per-node thread-spec "
    "threads-per-core time time-min tmp uid wait-all-nodes wckey wrap"
).split()
SBATCH_LETTERS = dict(
    pair.split(":")
    for pair in (
        "A:account a:array b:begin B:extra-node-info C:constraint c:cpus-per-task D:chdir d:dependency e:error "
        "F:nodefile G:gpus h:help H:hold i:input J:job-name k:no-kill L:licenses M:clusters m:distribution N:nodes "
        "n:ntasks o:output O:overcommit p:partition q:qos Q:quiet S:core-spec s:oversubscribe t:time v:verbose "
        "V:version w:nodelist W:wait x:exclude"
    ).split()
)
# What bench.sh sets (or what would undo it), which --slurm-args must not: option -> what bench.sh makes of it.
# --job-name and --time it sets too, but a later line may change them (--time: see sbatch_script()).
SBATCH_OWN = {
    "array": "the job array, from --slurm-tasks and --slurm-parallel",
    "output": "each task's log, {log-dir}/logs/slurm/%A_%a.out",
    "error": "each task's log, {log-dir}/logs/slurm/%A_%a.out, errors included",
    "wrap": "the job's script",
    "signal": f"SIGTERM {SIGNAL_BEFORE_S} s before the time limit, so that the run in progress saves its summary",
    "exclusive": "a node of its own for each task",
    "oversubscribe": "a node of its own for each task (--exclusive)",
    "nodes": "one node for each task",
    "ntasks": "one task for each array task",
}


def sbatch_long_option(word: str) -> Optional[str]:
    """The sbatch option that a word --NAME or --NAME=VALUE is, as getopt_long finds it: NAME itself, else the one
    option NAME begins; None for a NAME that begins none (sbatch refuses it, or it is of a later Slurm). BadOption
    when NAME begins several (sbatch refuses it too)."""
    name = word[2:].partition("=")[0]
    known = [*SBATCH_NO_VALUE, *SBATCH_OPTIONAL_VALUE, *SBATCH_VALUE]
    if name in known:
        return name
    matches = sorted(option for option in known if option.startswith(name))
    if len(matches) > 1:
        raise BadOption(
            f"--slurm-args: {word!r} is ambiguous to sbatch (--{', --'.join(matches)}); give the option's full name"
        )
    return matches[0] if matches else None


def sbatch_options(word: str) -> tuple[list[str], bool]:
    """The sbatch options that a word starting with "-" sets (-Ha5: hold, array), and whether the next word is the
    value of the last (--comment -a5: the comment "-a5"). An option of letters stops at a letter sbatch does not know
    (it refuses the word) and at one that takes a value: the rest of the word is that value."""
    if word.startswith("--"):
        option = sbatch_long_option(word)
        return ([option] if option else []), option in SBATCH_VALUE and "=" not in word
    options = []
    for i, letter in enumerate(word[1:], start=1):
        option = SBATCH_LETTERS.get(letter)
        if option is None:
            break
        options.append(option)
        if option in SBATCH_VALUE or option in SBATCH_OPTIONAL_VALUE:
            return options, option in SBATCH_VALUE and i == len(word) - 1
    return options, False


# What goes into an #SBATCH line. bash reads the line as a comment, up to the newline, so a newline (or any control
# character) in it would start a shell command: refused. sbatch reads the rest with its own parser, not the shell's
# (_get_argument in Slurm's src/sbatch/opt.c): quotes group words, a backslash escapes the next character, an unquoted
# # starts a comment, a word may not start with ":", and an empty word ends the line. So a word with a space, a quote,
# a backslash or a #, or one that starts with ":", goes in double quotes, with " and \ escaped (sbatch_word); an empty
# word is refused; nothing else is special. (Slurm also blanks the word "packjob" anywhere in an #SBATCH line.)
def control_characters(text: str) -> list[str]:
    return [c for c in text if ord(c) < 32 or ord(c) == 127]


def shell_word(word: str) -> str:
    """A word quoted for bash on one line: shlex.quote, or $'...' with \\xHH escapes when it holds a control
    character (a dry run prints one command a line, whatever the arguments hold)."""
    if not control_characters(word):
        return shlex.quote(word)
    escaped = {"\\": "\\\\", "'": "\\'"}
    return (
        "$'"
        + "".join(f"\\x{ord(c):02x}" if control_characters(c) else escaped.get(c, c) for c in word)
        + "'"
    )


def sbatch_word(word: str) -> str:
    """A word (without control characters) for an #SBATCH line, so that sbatch's parser reads it back as it is; an
    option's value quoted apart from its name: --comment="tiny sweep"."""
    name, eq, value = word.partition("=")
    if eq and name.startswith("-") and sbatch_word(name) == name:
        return f"{name}={sbatch_word(value)}"
    if word and not word.startswith(":") and not any(c.isspace() or c in "\"'\\#" for c in word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sbatch_lines(value: str) -> list[str]:
    """--slurm-args as #SBATCH lines, one option (with its value) a line: "-p gpu --gres=gpu:1" -> two lines.

    Split like a shell would (shlex: quotes group, and a newline between words is a space); a word that holds a
    control character, e.g. a quoted newline, is refused: it cannot go into an #SBATCH line."""
    try:
        words = shlex.split(value)
    except ValueError as e:
        raise BadOption(f"--slurm-args is not a valid shell word list ({e}): {value!r}") from None
    lines: list[list[str]] = []
    value_next = unknown = (
        False  # the next word is the last option's value; the last option is none sbatch knows
    )
    for word in words:
        if control_characters(word) or not word:
            raise BadOption(
                f"--slurm-args: {word!r} is empty or holds a control character (a newline, a tab, ...), which "
                "cannot go into an #SBATCH line; give sbatch options of printable characters"
            )
        if value_next or (
            unknown and not word.startswith("-")
        ):  # its value, whatever it holds: --comment -a5
            lines[-1].append(word)
            value_next = False
        elif word.startswith("-") and word not in ("-", "--"):
            options, value_next = sbatch_options(word)
            for option in options:
                if option in SBATCH_OWN:
                    raise BadOption(
                        f"--slurm-args: {word!r} is sbatch's --{option}, which bench.sh sets itself "
                        f"({SBATCH_OWN[option]}); leave it out"
                    )
            lines.append([word])
            unknown = not options
        else:
            raise BadOption(
                f"--slurm-args must be sbatch options such as --partition=gpu, got {word!r}"
            )
    return [" ".join(map(sbatch_word, line)) for line in lines]


def output_pattern(log_dir: str) -> str:
    """#SBATCH --output's value: {log_dir}/logs/slurm/%A_%a.out, the log dir's own % doubled (Slurm's literal %).

    BadOption for a log dir that cannot be one: a control character (the #SBATCH line would end), or a backslash
    (Slurm then ignores every %A and %a, and all tasks write one file)."""
    if control_characters(log_dir) or "\\" in log_dir:
        raise BadOption(
            f"--log-dir {log_dir!r} holds a control character or a backslash, which cannot go into the job's "
            "#SBATCH --output path; with --slurm give a log dir without them"
        )
    return "--output=" + sbatch_word(f"{log_dir.replace('%', '%%')}/logs/slurm/%A_%a.out")


def time_limit(runs_per_task: int, timeout: Optional[float], kill_after: float) -> Optional[str]:
    """Slurm's --time for a task: its runs x (--timeout + bench.sh's grace before SIGKILL) + a margin, as D-HH:MM:SS;
    None without --timeout."""
    if timeout is None:
        return None
    minutes = math.ceil((runs_per_task * (timeout + kill_after) + TIME_MARGIN_S) / 60)
    return f"{minutes // 1440}-{minutes % 1440 // 60:02d}:{minutes % 60:02d}:00"


def absolute_python(python: str) -> str:
    """The interpreter as an absolute path (symlinks kept, so a venv's python stays the venv's)."""
    found = shutil.which(python)
    if found is None:
        raise BadOption(f"--python '{python}' is not an executable; give a Python interpreter")
    return os.path.abspath(found)


def sbatch_script(
    sel: Selection,
    matrix_options: list[str],
    whole: list[Run],
    done: list[bool],
    tasks: int,
    parallel: Optional[int],
    timeout: Optional[float],
    kill_after: float,
    env_timing: bool,
    slurm_args: list[str],
    cpus: Optional[str] = None,
) -> str:
    """The sbatch script of a job array: task K of `tasks` runs `bench.sh --shard K/tasks` with the options of
    the sweep (`matrix_options`: bench.sh's matrix options as given, e.g. ["--experiments", "exp1"]).

    - `--exclusive`: no other job shares the node while it is being timed; one node per task.
    - `--time`: the most runs still to do in one shard x (--timeout + `kill_after`) + 15 min; none without --timeout
      (then the partition's default limit holds; --slurm-args --time=... sets one). bench.sh gets SIGTERM 2 min
      before the limit, so the run in progress saves an "interrupted" summary.
    - `--output`: one file per task, {log-dir}/logs/slurm/{job id}_{task id}.out.
    - env timing: each task measures into {log-dir}/env_timing/{hostname}.json (skipped when that node's file is
      already there), so that no two nodes write one file and every node is timed on itself.
    - the same interpreter, bench.sh, study file ($BENCHBACK_STUDY) and log dir, as absolute paths.
    """
    log_dir = os.path.abspath(sel.log_dir)
    owner = shard_of_cells(cells(whole), tasks)
    per_task = [0] * tasks
    for run, is_done in zip(whole, done):
        per_task[owner[run.cell]] += not is_done
    limit = time_limit(max(per_task), timeout, kill_after)
    if limit:
        time_note = (
            f"# time limit: {max(per_task)} runs to do in the largest shard x (--timeout {timeout:g} s + "
            f"{kill_after:g} s) + {TIME_MARGIN_S // 60} min"
        )
    else:
        time_note = "# time limit: the partition's default (no --timeout given; --slurm-args --time=... sets one)"
    options = [
        *matrix_options,
        *(
            ["--timeout", f"{timeout:g}", "--kill-after", f"{kill_after:g}"]
            if timeout is not None
            else []
        ),
        *(["--cpus", cpus] if cpus else []),
    ]
    study_file = os.environ.get(study.PATH_VARIABLE)
    lines = [
        "#!/bin/bash",
        f"# benchback-rl on Slurm, written by bench.sh --slurm: a job array of {tasks} tasks for {len(whole)} runs "
        f"({done.count(False)} to run)",
        f"# in {len(cells(whole))} cells. Task K runs shard K/{tasks}: whole cells, every framework of a cell on one "
        "node.",
        "# Submitting the same bench.sh command again skips the completed runs.",
        time_note,
        "#SBATCH --job-name=benchback",
        f"#SBATCH --array=0-{tasks - 1}" + (f"%{parallel}" if parallel else ""),
        "#SBATCH --exclusive",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        *([f"#SBATCH --time={limit}"] if limit else []),
        f"#SBATCH --signal=B:TERM@{SIGNAL_BEFORE_S}",
        f"#SBATCH {output_pattern(log_dir)}",
        *(f"#SBATCH {line}" for line in slurm_args),
        "set -euo pipefail",
        *(
            [f"export {study.PATH_VARIABLE}={shlex.quote(os.path.abspath(study_file))}"]
            if study_file
            else []
        ),
        f"LOG_DIR={shlex.quote(log_dir)}",
        f"NUM_TASKS={tasks}",
        'SHARD="$SLURM_ARRAY_TASK_ID/$NUM_TASKS"  # task K of the array runs shard K/N',
        'echo "job $SLURM_ARRAY_JOB_ID task $SLURM_ARRAY_TASK_ID: shard $SHARD on $(hostname), $(date)"',
        f'exec bash {shlex.quote(str(study.ROOT / "bench.sh"))} --shard "$SHARD" --log-dir "$LOG_DIR" \\',
        f"  --python {shlex.quote(absolute_python(sel.python))} \\",
        *([f"  {shlex.join(options)} \\"] if options else []),
        '  --env-timing-file "$LOG_DIR/env_timing/$(hostname).json"'
        if env_timing
        else "  --no-env-timing",
    ]
    if sel.extra:
        lines[-1] += " \\"
        lines.append(f"  -- {shlex.join(sel.extra)}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- CLI
class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        print(f"{PROG}: {message}", file=sys.stderr)
        sys.exit(2)


def parser() -> Parser:
    p = Parser(prog="sweep.py", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    sub = p.add_subparsers(dest="action", required=True, parser_class=Parser)
    for action in ("check", "plan", "dry-run", "env-timing", "sbatch"):
        s = sub.add_parser(action, allow_abbrev=False)
        if action == "env-timing":
            s.add_argument("--file", required=True, help="the env_timing.json to check")
        if action == "sbatch":
            s.add_argument(
                "--tasks",
                help=f"array tasks (default: the cells of the sweep, at most {MAX_TASKS})",
            )
            s.add_argument("--parallel", help="at most this many tasks at once (the array's %%K)")
            s.add_argument(
                "--timeout", help="bench.sh --timeout (seconds per run): sets the time limit"
            )
            s.add_argument(
                "--kill-after", default="60", help="bench.sh's SIGKILL this long after --timeout"
            )
            s.add_argument(
                "--cpus", help="bench.sh --cpus for every task (default: every core of its node)"
            )
            s.add_argument("--no-env-timing", dest="env_timing", action="store_false")
            s.add_argument(
                "--slurm-args",
                default="",
                help="sbatch options, e.g. '--partition=gpu --gres=gpu:1'",
            )
        s.add_argument(
            "--experiments", help="comma-separated (default: every experiment of the study)"
        )
        s.add_argument(
            "--frameworks", help="comma-separated (default: every framework of the study)"
        )
        s.add_argument("--envs", help="comma-separated env ids (default: each experiment's envs)")
        s.add_argument("--sizes", help="comma-separated (default: every size of the study)")
        s.add_argument(
            "--compile-modes",
            help="comma-separated: 'default' or mode names (default: each experiment's)",
        )
        s.add_argument("--seeds", default="3", help="seeds 1..N (default 3)")
        s.add_argument(
            "--iterations", help="--num-iterations of every run (default: the scripts' own)"
        )
        s.add_argument("--tag", help="--tag of every run (default: the scripts' own)")
        s.add_argument("--log-dir", default="runs")
        s.add_argument("--shard", default="0/1", help="K/N: this shard's cells only")
        s.add_argument("--python", default="python", help="the interpreter in the commands")
        s.add_argument(
            "--env-threads", help="--env-threads of every envpool run (bench.sh --cpus N gives N)"
        )
        s.add_argument("extra", nargs="*", help="after --: arguments added to every run")
    sub.add_parser("experiments", allow_abbrev=False)
    claim = sub.add_parser(
        "claim", allow_abbrev=False
    )  # bench.sh's, before the runs of a cell: claim_cell()
    claim.add_argument(
        "--fd", type=int, required=True, help="bench.sh's open file descriptor of the lock file"
    )
    claim.add_argument(
        "--lock", required=True, help="the lock file, {log-dir}/.bench-cells/{cell id}.lock"
    )
    claim.add_argument("--holder", required=True, help="who holds it, for a sweep that waits")
    claim.add_argument(
        "--description", required=True, help="a run of the cell, for the message of a wait"
    )
    claim.add_argument("--log-dir", required=True)
    claim.add_argument("runs", nargs="*", help="after --: each run to check, as N and its N words")
    return p


def attach_values(p: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """argv with each `--option VALUE` of an option that takes a value written `--option=VALUE` (up to --).

    argparse reads a VALUE that starts with "-" (--shard -1/2, --tag -x) as another option and says only "expected
    one argument"; attached, the value reaches the check that names it, or the run that takes it."""
    takes_value = {
        name
        for action in p._actions  # the subcommands' options: each subparser's
        if isinstance(action, argparse._SubParsersAction)
        for subparser in action.choices.values()
        for option in subparser._actions
        if option.option_strings and option.nargs is None
        for name in option.option_strings
    }
    out, words = [], iter(argv)
    for word in words:
        if word == "--":
            out += [word, *words]
            break
        value = next(words, None) if word in takes_value else None
        out.append(word if value is None else f"{word}={value}")
    return out


def plan_fields(runs: list[Run], done: list[bool], matrix_size: int, k: int, n: int) -> list[str]:
    """The plan for bench.sh, as data: the header RUNS, TO_RUN, CELLS, MATRIX_SIZE, K/N, then per run
    done|todo, description, log stem, its cell's id (the runs of a cell follow one another), the number of words of
    its command, and those words (python, script, args)."""
    fields = [
        str(len(runs)),
        str(done.count(False)),
        str(len(cells(runs))),
        str(matrix_size),
        f"{k}/{n}",
    ]
    for run, is_done in zip(runs, done):
        state, cell = "done" if is_done else "todo", cell_id(run.cell)
        fields += [state, run.description, run.log_stem, cell, str(len(run.command)), *run.command]
    return fields


def cell_id(cell: tuple) -> str:
    """A cell's name in file names (its lock): a hash of it."""
    return hashlib.sha256(repr(cell).encode()).hexdigest()[:16]


def print_plan(fields: list[str]) -> None:
    """Each field NUL-terminated, read by bash's `mapfile -d ''`: no field is ever parsed as shell code, and any
    character but NUL (which no argument can hold) stays what it is, newlines and tabs included."""
    out = sys.stdout.buffer
    for field in fields:
        out.write(os.fsencode(field) + b"\0")
    out.flush()


def print_sbatch(args: argparse.Namespace, sel: Selection, whole: list[Run]) -> int:
    """For bench.sh: a header "RUNS TO_RUN CELLS TASKS", then the sbatch script."""
    num_cells = len(cells(whole))
    try:
        if sel.shard != (0, 1):
            raise BadOption(
                "--shard does not go with --slurm: the array tasks are the shards (--slurm-tasks N)"
            )
        tasks = positive_int("--slurm-tasks", args.tasks, MAX_RUNS) or min(num_cells, MAX_TASKS)
        if tasks > num_cells:
            raise BadOption(
                f"--slurm-tasks {tasks} is more than the {num_cells} cells of this sweep; valid: 1 to {num_cells}"
            )
        parallel = positive_int("--slurm-parallel", args.parallel, MAX_RUNS)
        timeout = seconds("--timeout", args.timeout, positive=True) if args.timeout else None
        kill_after = seconds("--kill-after", args.kill_after, positive=False)
        positive_int("--cpus", args.cpus)
        slurm_args = sbatch_lines(args.slurm_args)
        done = done_flags(whole, sel.log_dir)
        matrix_options = [
            item
            for name in (
                "experiments",
                "frameworks",
                "envs",
                "sizes",
                "compile_modes",
                "seeds",
                "iterations",
                "tag",
            )
            if getattr(args, name) is not None
            for item in (f"--{name.replace('_', '-')}", getattr(args, name))
        ]
        script = sbatch_script(
            sel,
            matrix_options,
            whole,
            done,
            tasks,
            parallel,
            timeout,
            kill_after,
            args.env_timing,
            slurm_args,
            args.cpus,
        )
    except BadOption as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    print(len(whole), done.count(False), num_cells, tasks)
    print(script, end="")
    return 0


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(attach_values(p, sys.argv[1:] if argv is None else argv))
    if args.action == "claim":  # which runs of the cell are done, once it is this sweep's
        done = claim_cell(
            args.fd, args.lock, args.holder, args.description, args.log_dir, args.runs
        )
        print(" ".join("done" if is_done else "todo" for is_done in done))
        return 0
    S = study.load()
    if args.action == "experiments":
        for exp in S.experiments.values():
            print(
                f"{exp.name}  {exp.title} (sync timing {' and '.join('on' if s else 'off' for s in exp.syncs)})"
            )
        for platform in S.platforms.values():  # no runs of their own
            print(
                f"{platform.name}  is {platform.repeats} under another --tag (e.g. the OS or the machine)"
            )
        return 0
    try:
        sel = select(args, S)
    except BadOption as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    try:
        whole = bounded_matrix(sel, S)
    except BadOption as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    runs = shard_runs(whole, *sel.shard)
    if args.action in ("check", "plan"):
        missing = sorted(
            {
                str(study.ROOT / S.frameworks[run.framework].script)
                for run in runs
                if not (study.ROOT / S.frameworks[run.framework].script).exists()
            }
        )
        if missing:
            print(
                f"{PROG}: no script {', '.join(missing)}; check the study's [frameworks]",
                file=sys.stderr,
            )
            return 2
    if args.action == "check":  # the options are good: this shard, as K/N
        print(f"{sel.shard[0]}/{sel.shard[1]}")
        return 0
    if args.action == "env-timing":
        envs = list(dict.fromkeys(run.env for run in whole))
        verdict = env_timing_reason(Path(args.file), envs, sel.env_threads)
        if verdict:  # two lines: why, and the envs to time; nothing when the file is usable
            print(*verdict[0].splitlines(), sep=" ")
            print(",".join(verdict[1]))
        return 0
    if args.action == "sbatch":
        return print_sbatch(args, sel, whole)
    done = done_flags(runs, sel.log_dir)
    if args.action == "plan":
        print_plan(plan_fields(runs, done, len(whole), *sel.shard))
        return 0
    for run, is_done in zip(runs, done):
        print(("# done: " if is_done else "") + " ".join(map(shell_word, run.command)))
    k, n = sel.shard
    print(
        f"dry run: {len(runs)} runs ({sum(done)} already completed) in {len(cells(runs))} cells, "
        f"of {len(whole)} runs in the matrix, shard {k}/{n}"
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)

"""The sweep's options, declared once: bench.sh's, with their help, and the python -m sweep actions that take each.

From this table python -m sweep makes its parsers (add_options), and bench.sh --help its lists of options
(`python -m sweep options [slurm]`: help_lines). bench.sh reads its own command line without Python (the
interpreter, --python, is one of its options), so it keeps the names of those that take a value and of the flags;
tests/test_bench.py holds them to value_names() and flag_names().
"""

import argparse
import textwrap
from dataclasses import dataclass
from typing import Optional

from sweep.options import DEFAULT_SEEDS
from sweep.sbatch_options import SBATCH_OWN
from sweep.sbatch_script import MAX_TASKS, TIME_MARGIN_S

# python -m sweep's actions on a sweep: each takes the options of the sweep's runs
SWEEP_ACTIONS = ("check", "plan", "dry-run", "env-timing", "sbatch")
SBATCH = ("sbatch",)
# bench.sh --help's lists of options: the sweep's, and those of the Slurm job array
GENERAL, SLURM = "general", "slurm"
# --kill-after when not given: bench.sh's KILL_AFTER_S, the same
KILL_AFTER_S = "300"
# the sbatch options bench.sh sets itself, which --slurm-args may not
SBATCH_OWN_OPTIONS = ", ".join(f"--{name}" for name in SBATCH_OWN)
# bench.sh --help: the column of each option's text, and the width of its lines (before their indent of 2)
HELP_COLUMN, HELP_WIDTH = 20, 113


@dataclass(frozen=True)
class Option:
    """An option of the sweep: bench.sh's (in a section of its --help), python -m sweep's (taken by actions), or both."""

    name: str
    # its value in bench.sh --help; None: a flag, which takes no value
    metavar: Optional[str]
    help: str
    # the list of bench.sh --help it is in; None: python -m sweep's alone (bench.sh passes one of its own on with it)
    section: Optional[str] = GENERAL
    # the python -m sweep actions that take it; none: bench.sh's alone
    actions: tuple[str, ...] = ()
    # python -m sweep's value when it is not given
    default: Optional[str] = None
    required: bool = False
    # it selects the sweep's runs: each Slurm task's bench.sh gets it as it was given
    matrix: bool = False
    # bench.sh's short spelling
    short: str = ""


OPTIONS = (
    Option(
        "--experiments",
        "LIST",
        "comma-separated experiments (default: all of the study)",
        actions=SWEEP_ACTIONS,
        matrix=True,
    ),
    Option(
        "--frameworks",
        "LIST",
        "comma-separated frameworks (default: all of the study)",
        actions=SWEEP_ACTIONS,
        matrix=True,
    ),
    Option(
        "--envs",
        "LIST",
        "comma-separated env ids (default: each experiment's envs), ID@envpool for an env on envpool; each "
        'experiment takes those of its own, an experiment of envs "all" also the gymnax envs outside the study '
        "(any with Discrete or 1-D Box actions) and one on envpool alone the envpool envs outside it; an env "
        "the scripts cannot train is refused",
        actions=SWEEP_ACTIONS,
        matrix=True,
    ),
    Option(
        "--sizes",
        "LIST",
        "comma-separated model sizes (default: all of the study)",
        actions=SWEEP_ACTIONS,
        matrix=True,
    ),
    Option(
        "--compile-modes",
        "LIST",
        "comma-separated compile modes to keep of each experiment's: \"default\" (each framework's first) or "
        "the study's mode names (default: every mode each experiment runs)",
        actions=SWEEP_ACTIONS,
        matrix=True,
    ),
    Option(
        "--seeds",
        "N",
        f"repeats, seeds 1..N (default {DEFAULT_SEEDS})",
        actions=SWEEP_ACTIONS,
        matrix=True,
    ),
    Option(
        "--iterations",
        "N",
        "num_iterations of every run (default: the scripts' own)",
        actions=SWEEP_ACTIONS,
        matrix=True,
    ),
    Option(
        "--tag",
        "TAG",
        "label of every run, e.g. the machine (default: the scripts' own)",
        actions=SWEEP_ACTIONS,
        matrix=True,
    ),
    Option(
        "--save-every",
        "N",
        "every N iterations, each gymnax run saves its state (the scripts' --save-every N: resume.safetensors in "
        "its folder; not envpool runs), and a run stopped part-way (a timeout, a Slurm requeue) is continued from "
        "its last save (--resume) when the sweep is run again (default 0: off, a stopped run starts afresh)",
        actions=SWEEP_ACTIONS,
        matrix=True,
    ),
    Option(
        "--log-dir",
        "DIR",
        "the runs folder (default runs; with --preset NAME, runs-NAME)",
        actions=SWEEP_ACTIONS,
        default="runs",
    ),
    Option(
        "--preset",
        "NAME",
        "the sweep of a preset (above): the options it sets and the arguments of every run (ahead of those "
        "after --); an option it sets, or a run argument that would override one of its, may not be given "
        "beside it",
        actions=SWEEP_ACTIONS,
    ),
    Option(
        "--smoke",
        None,
        "--preset smoke: the quick sweep, into runs-smoke unless --log-dir is given",
    ),
    Option(
        "--timeout",
        "SECONDS",
        'stop a run after this long (SIGTERM, so it saves an "interrupted" summary); it is reported '
        '"timed out"',
        actions=SBATCH,
    ),
    Option(
        "--kill-after",
        "SECONDS",
        f"with --timeout: SIGKILL a run this long after its SIGTERM (default {KILL_AFTER_S}: one slow "
        "iteration; a run stops at the next iteration boundary)",
        actions=SBATCH,
        default=KILL_AFTER_S,
    ),
    Option(
        "--cpus",
        "N",
        "equal resources: pin every run to the same N cores (taskset) and give it N threads "
        "(OMP_NUM_THREADS: torch's thread count; JAX uses the cores it is pinned to; an envpool run and the "
        "env timing also get --env-threads N); default: every core this process may use (and envpool's "
        "threads the scripts' default)",
        actions=SBATCH,
    ),
    Option(
        "--shard",
        "K/N",
        "run only shard K (0..N-1) of N: whole cells (experiment, seed, env, model size), so every framework "
        "and compile mode of a cell runs on the same machine",
        actions=SWEEP_ACTIONS,
        default="0/1",
    ),
    Option(
        "--python",
        "PATH",
        "the Python interpreter (default python)",
        actions=SWEEP_ACTIONS,
        default="python",
    ),
    Option("--no-env-timing", None, "do not measure the env step costs first", actions=SBATCH),
    Option(
        "--env-timing-file",
        "F",
        "where the env step costs are measured to (default {log-dir}/env_timing.json)",
    ),
    Option(
        "--dry-run",
        None,
        'print one command per run ("# done: " before those already completed) and the count',
    ),
    Option("--help", None, "show this help", short="-h"),
    Option(
        "--slurm",
        None,
        "write an sbatch script and submit it: array task K of N runs this sweep with --shard K/N, on a node "
        "of its own (--exclusive), its output in {log-dir}/logs/slurm/{job}_{task}.out; each node measures "
        "its env step costs into {log-dir}/env_timing/{hostname}.json (--no-env-timing skips that). With "
        "--dry-run: print the script, submit nothing",
        section=SLURM,
    ),
    Option(
        "--slurm-tasks",
        "N",
        f"array tasks, i.e. shards (default: one per cell of the sweep, at most {MAX_TASKS})",
        section=SLURM,
        actions=SBATCH,
    ),
    Option(
        "--slurm-parallel",
        "K",
        "at most K tasks at once (default: as many as Slurm allows)",
        section=SLURM,
        actions=SBATCH,
    ),
    Option(
        "--slurm-args",
        "ARGS",
        'sbatch options, e.g. "--partition=gpu --gres=gpu:1 --account=me", split like shell words, one '
        "#SBATCH line per option (a word holding a newline or another control character is refused: it would "
        f"end the #SBATCH line); those bench.sh sets ({SBATCH_OWN_OPTIONS}) are "
        "refused in any spelling sbatch takes (-a5, --arr=5, -Ho x), and so is an ambiguous prefix (--ex); "
        "the --job-name may be changed, and the time limit, which is (runs of the largest shard) x (--timeout "
        f"+ --kill-after) + {TIME_MARGIN_S // 60} min, or without --timeout the partition's default (ARGS may "
        "give --time=...)",
        section=SLURM,
        actions=SBATCH,
        default="",
    ),
    Option(
        "--env-threads",
        "N",
        "--env-threads of every envpool run (bench.sh --cpus N gives N)",
        section=None,
        actions=SWEEP_ACTIONS,
    ),
    Option(
        "--file",
        "F",
        "the env_timing.json to check",
        section=None,
        actions=("env-timing",),
        required=True,
    ),
)


def attribute(name: str) -> str:
    """python -m sweep's attribute of an option: "--compile-modes" -> "compile_modes"."""
    return name.removeprefix("--").replace("-", "_")


def argparse_settings(option: Option) -> dict:
    """add_argument's settings for an option: a flag --no-X clears X (another sets its own), a value is a string."""
    # argparse formats the help with %
    settings = dict(help=option.help.replace("%", "%%"))
    if option.metavar is None:
        negated = option.name.startswith("--no-")
        name = option.name.removeprefix("--no-") if negated else option.name
        return settings | dict(
            dest=attribute(name), action="store_false" if negated else "store_true"
        )
    return settings | dict(metavar=option.metavar, default=option.default, required=option.required)


def add_options(parser: argparse.ArgumentParser, action: str) -> None:
    """The options that the python -m sweep action takes, into its parser."""
    for option in OPTIONS:
        if action in option.actions:
            parser.add_argument(option.name, **argparse_settings(option))


def help_entry(option: Option) -> list[str]:
    """An option's lines in bench.sh --help: its spelling, then its help from HELP_COLUMN on, wrapped."""
    head = f"{option.short}, {option.name}" if option.short else option.name
    if option.metavar is not None:
        head += f" {option.metavar}"
    return textwrap.wrap(
        option.help,
        width=HELP_WIDTH,
        initial_indent=head.ljust(HELP_COLUMN - 2) + "  ",
        subsequent_indent=" " * HELP_COLUMN,
        break_long_words=False,
        break_on_hyphens=False,
    )


def help_lines(section: str) -> list[str]:
    """A list of options of bench.sh --help (GENERAL or SLURM), unindented: bench.sh indents it."""
    return [line for option in OPTIONS if option.section == section for line in help_entry(option)]


def value_names() -> list[str]:
    """bench.sh's options that take a value."""
    return [option.name for option in OPTIONS if option.section and option.metavar is not None]


def flag_names() -> list[str]:
    """bench.sh's flags, which take none."""
    return [option.name for option in OPTIONS if option.section and option.metavar is None]


def matrix_options(args: argparse.Namespace) -> list[str]:
    """The options that select the sweep's runs, as given (e.g. ["--experiments", "exp1"]), for each Slurm task's
    bench.sh."""
    given = [
        (option.name, getattr(args, attribute(option.name))) for option in OPTIONS if option.matrix
    ]
    return [word for name, value in given if value is not None for word in (name, value)]

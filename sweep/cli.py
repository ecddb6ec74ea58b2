"""The sweep's options, declared once: bench.sh's, with their help, and the python -m sweep actions
that take each.

From this table python -m sweep makes its parsers (add_options), sweep/bench.py reads bench.sh's
command line, and bench.sh --help lists them (usage)."""

import argparse
import textwrap
from dataclasses import dataclass
from typing import Optional

from sweep.options import DEFAULT_SEEDS
from sweep.sbatch import MAX_TASKS, SBATCH_OWN, TIME_MARGIN_S

# python -m sweep's actions on a sweep: each takes the options of the sweep's runs
SWEEP_ACTIONS = ("check", "plan", "dry-run", "env-timing", "sbatch")
SBATCH = ("sbatch",)
# bench.sh --help's lists of options: the sweep's, and those of the Slurm job array
GENERAL, SLURM = "general", "slurm"
# --kill-after when not given: after --timeout, a run gets SIGTERM (it saves its summary at the next
# iteration boundary), then SIGKILL this much later: long enough for one phase of the slowest
# iteration (an eager rollout on MinAtar took 55 s on the cpu-v2 VM, a whole iteration about 110 s)
# and the teardown
KILL_AFTER_S = "300"
# the sbatch options bench.sh sets itself, which --slurm-args may not
SBATCH_OWN_OPTIONS = ", ".join(f"--{name}" for name in SBATCH_OWN)
# bench.sh --help: the column of each option's text, and the width of its lines (before their indent
# of 2)
HELP_COLUMN, HELP_WIDTH = 20, 113


@dataclass(frozen=True)
class Option:
    """An option of the sweep: bench.sh's (in a section of its --help), python -m sweep's (taken by
    actions), or both."""

    name: str
    # its value in bench.sh --help; None: a flag, which takes no value
    metavar: Optional[str]
    help: str
    # the list of bench.sh --help it is in; None: python -m sweep's alone (bench.sh passes one of
    # its own on with it)
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
        "comma-separated env ids (default: each experiment's envs), ID@envpool for an env on "
        'envpool; each experiment takes those of its own, an experiment of envs "all" also the '
        "gymnax envs outside the study (any with Discrete or 1-D Box actions) and one on envpool "
        "alone the envpool envs outside it; an env the scripts cannot train is refused",
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
        "comma-separated compile modes to keep of each experiment's: \"default\" (each framework's "
        "first) or the study's mode names (default: every mode each experiment runs)",
        actions=SWEEP_ACTIONS,
        matrix=True,
    ),
    Option(
        "--seeds",
        "N",
        f"repeats, seeds 1..N (default {DEFAULT_SEEDS}); a run of A agents (an experiment's "
        "agents) trains seeds --seed..--seed+A-1, so the r-th repeat (r = 0..N-1) runs --seed "
        "1+r*A: agent seeds 1..N*A, each once",
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
        "every N iterations, each gymnax run saves its state (the scripts' --save-every N: "
        "resume.safetensors in its folder; not envpool runs), and a run stopped part-way (a "
        "timeout, a Slurm requeue) is continued from its last save (--resume) when the sweep is "
        "run again (default 0: off, a stopped run starts afresh)",
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
        "the sweep of a preset (above): the options it sets and the arguments of every run (ahead "
        "of those after --); an option it sets, or a run argument that would override one of its, "
        "may not be given beside it",
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
        'stop a run after this long (SIGTERM, so it saves an "interrupted" summary); it is '
        'reported "timed out"',
        actions=SBATCH,
    ),
    Option(
        "--kill-after",
        "SECONDS",
        f"with --timeout: SIGKILL a run this long after its SIGTERM (default {KILL_AFTER_S}: one "
        "slow iteration; a run stops at the next iteration boundary)",
        actions=SBATCH,
        default=KILL_AFTER_S,
    ),
    Option(
        "--cpus",
        "N",
        "equal resources: pin every run to the same N cores (taskset) and give it N threads "
        "(OMP_NUM_THREADS: torch's thread count; JAX uses the cores it is pinned to; an envpool "
        "run and the env timing also get --env-threads N); default: every core this process may "
        "use (and envpool's threads the scripts' default)",
        actions=SBATCH,
    ),
    Option(
        "--shard",
        "K/N",
        "run only shard K (0..N-1) of N: whole cells (experiment, seed, env, model size, agents), "
        "so every framework and compile mode of a cell runs on the same machine",
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
        "write an sbatch script and submit it: array task K of N runs this sweep with --shard K/N, "
        "on a node of its own (--exclusive), its output in {log-dir}/logs/slurm/{job}_{task}.out; "
        "each node measures its env step costs into {log-dir}/env_timing/{hostname}.json "
        "(--no-env-timing skips that). With --dry-run: print the script, submit nothing",
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
        'sbatch options, e.g. "--partition=gpu --gres=gpu:1 --account=me", split like shell '
        "words, one #SBATCH line per option (a word holding a newline or another control "
        "character is refused: it would end the #SBATCH line); those bench.sh sets "
        f"({SBATCH_OWN_OPTIONS}) are "
        "refused in any spelling sbatch takes (-a5, --arr=5, -Ho x), and so is an ambiguous "
        "prefix (--ex); the --job-name may be changed, and the time limit, which is (runs of the "
        f"largest shard) x (--timeout + --kill-after) + {TIME_MARGIN_S // 60} min, or without "
        "--timeout the partition's default (ARGS may give --time=...)",
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
    """add_argument's settings for an option: a flag --no-X clears X (another sets its own), a value
    is a string."""
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
    """An option's lines in bench.sh --help: its spelling, then its help from HELP_COLUMN on,
    wrapped."""
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


def matrix_options(args: argparse.Namespace) -> list[str]:
    """The options that select the sweep's runs, as given (e.g. ["--experiments", "exp1"]), for each
    Slurm task's bench.sh."""
    given = [
        (option.name, getattr(args, attribute(option.name))) for option in OPTIONS if option.matrix
    ]
    return [word for name, value in given if value is not None for word in (name, value)]


USAGE = """usage: ./bench.sh [options] [-- extra args passed to every run]

Runs the benchback-rl experiments of study.toml, one fresh process per run, into {log-dir}/{exp}/. A
run is skipped when a folder in {log-dir}/{exp}/ holds a completed run of the same command
(config.json "command": the same script and arguments, --log-dir aside), so an interrupted sweep
resumes where it stopped; a run stopped part-way after a save (--save-every) is continued in its
folder with --resume, the others start afresh. Each run's output goes to {log-dir}/logs/{exp}/.
Before the runs, the env step costs are measured into {log-dir}/env_timing.json when that file is
missing, lacks an env of the sweep, or comes from another host or device.

experiments (study.toml; each run is repeated for seeds 1..N, a run of A agents per process with
--seed 1, 1+A, .., 1+(N-1)*A: agent seeds 1..N*A):
EXPERIMENTS

presets (study.toml's [presets]: a sweep by name, the options it sets, the arguments of every run):
PRESETS

options:
GENERAL

One sweep at a time per log dir and shard: a second bench.sh on the same --log-dir and --shard is
refused (exit 2), while the first holds {log-dir}/.bench-K-of-N.lock. Sweeps of other shards run
side by side, and never run one run twice at once, whatever their shard counts (0/1 and 0/2
overlap): a sweep runs a cell (experiment, seed, env, size, agents) while it holds
{log-dir}/.bench-cells/{cell}.lock, waits while another sweep holds it, and then skips the runs that
one completed. Ctrl-C or SIGTERM stops what is in progress at once (a run saves an "interrupted"
summary; the env timing, the planning or sbatch just end) and then the sweep, however bench.sh was
started (in the background of a script, under nohup). The arguments after -- reach every run as they
are (any character); those the sweep sets itself (--env, --env-backend, --model-size, --compile,
--seed, --log-dir, --exp-name, --[no-]sync-timing, --dtype and --num-agents (each experiment's
dtypes and agents in study.toml), and --num-iterations, --tag or --env-threads when --iterations,
--tag or --cpus is given) are refused, and so is one the scripts' own parser refuses (checked
before the first run, in a few seconds: the scripts are imported).

Slurm (the sweep as a job array; every other option above applies to each task):
SLURM

examples:
  ./bench.sh --experiments exp1 --tag linux-h200
  ./bench.sh --shard 0/2 & ./bench.sh --shard 1/2    # two machines or GPUs, one sweep
  ./bench.sh --smoke                                 # the quick sweep, into runs-smoke/, and
  python plot_results.py runs-smoke --out runs-smoke/analysis    # its analysis
  ./bench.sh --slurm --timeout 1800 --slurm-args "--partition=gpu --gres=gpu:1"   # on a cluster
"""


def usage(experiments: list[str], presets: list[str]) -> str:
    """bench.sh --help: the lists (of the study's experiments and presets, and of the options)
    indented by 2."""
    lists = dict(
        EXPERIMENTS=experiments,
        PRESETS=presets,
        GENERAL=help_lines(GENERAL),
        SLURM=help_lines(SLURM),
    )
    return (
        "\n".join(
            "\n".join(f"  {item}" for item in lists[line]) if line in lists else line
            for line in USAGE.splitlines()
        )
        + "\n"
    )

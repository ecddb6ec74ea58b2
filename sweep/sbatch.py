"""The Slurm side of bench.sh --slurm: --slurm-args read as sbatch reads them, and the job array's
script.

--slurm-args, read as sbatch reads its options, become #SBATCH lines; those bench.sh sets itself are
refused. sbatch's options, as its parser knows them: sbatch reads the #SBATCH lines with
getopt_long, so a unique prefix of a long option is that option (--arr=0-3 is --array), an ambiguous
one is an error, and a letter's value may be attached, after other letters (-Ha5 is --hold
--array=5). The table of Slurm 22.05 (the options of src/common/slurm_opt.c that sbatch takes;
`sbatch --help` lists most): each long option by what it takes, and the letters. (tasks-per-node is
another name of ntasks-per-node.)

The script: The sbatch script of bench.sh --slurm: a job array whose task K runs `bench.sh --shard
K/N` of the same sweep.

- `--exclusive`: no other job shares the node while it is being timed; one node per task.
- `--time`: the most runs still to do in one shard x (--timeout + --kill-after) + 15 min; none
  without --timeout (then the partition's default limit holds; --slurm-args --time=... sets one).
  bench.sh gets SIGTERM 2 min before the limit, so the run in progress saves an "interrupted"
  summary.
- `--output`: one file per task, {log-dir}/logs/slurm/{job id}_{task id}.out.
- env timing: each task measures into {log-dir}/env_timing/{hostname}.json (skipped when that node's
  file is already there), so that no two nodes write one file and every node is timed on itself.
- the same interpreter, bench.sh, study file ($BENCHBACK_STUDY) and log dir, as absolute paths.
"""

import argparse
import math
import os
import shlex
import shutil
from dataclasses import dataclass
from typing import Optional

from core import study
from core.option_checks import MAX_RUNS, BadOption, cpus, positive_int, seconds
from core.shell_quoting import control_characters
from sweep.matrix import PlannedRun, cells, shard_of_cells
from sweep.options import Selection

# bench.sh gets SIGTERM this long before the time limit: the run in progress saves its summary
SIGNAL_BEFORE_S = 120

SBATCH_NO_VALUE = (
    "contiguous help hold ignore-pbs no-requeue overcommit oversubscribe parsable quiet reboot "
    "requeue spread-job test-only usage use-min-nodes verbose version wait"
).split()
SBATCH_OPTIONAL_VALUE = "exclusive get-user-env nice no-kill propagate".split()  # --name=VALUE only
SBATCH_VALUE = (  # --name=VALUE or --name VALUE
    "account acctg-freq array batch bb bbf begin chdir cluster cluster-constraint clusters comment "
    "constraint container context core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task "
    "deadline delay-boot dependency distribution error exclude export export-file extra-node-info "
    "gid gpu-bind gpu-freq gpus gpus-per-node gpus-per-socket gpus-per-task gres gres-flags hint "
    "input job-name kill-on-invalid-dep licenses mail-type mail-user mcs-label mem mem-bind "
    "mem-per-cpu mem-per-gpu mincpus network nodefile nodelist nodes ntasks ntasks-per-core "
    "ntasks-per-gpu ntasks-per-node ntasks-per-socket ntasks-per-tres open-mode output partition "
    "power prefer priority profile qos reservation signal sockets-per-node switches tasks-per-node "
    "thread-spec threads-per-core time time-min tmp uid wait-all-nodes wckey wrap"
).split()
SBATCH_LETTERS = dict(
    pair.split(":")
    for pair in (
        "A:account a:array b:begin B:extra-node-info C:constraint c:cpus-per-task D:chdir "
        "d:dependency e:error F:nodefile G:gpus h:help H:hold i:input J:job-name k:no-kill "
        "L:licenses M:clusters m:distribution N:nodes n:ntasks o:output O:overcommit p:partition "
        "q:qos Q:quiet S:core-spec s:oversubscribe t:time v:verbose V:version w:nodelist W:wait "
        "x:exclude"
    ).split()
)
# What bench.sh sets (or what would undo it), which --slurm-args must not: option -> what bench.sh
# makes of it. --job-name and --time it sets too, but a later line may change them (--time: see
# sbatch_script()).
SBATCH_OWN = {
    "array": "the job array, from --slurm-tasks and --slurm-parallel",
    "output": "each task's log, {log-dir}/logs/slurm/%A_%a.out",
    "error": "each task's log, {log-dir}/logs/slurm/%A_%a.out, errors included",
    "wrap": "the job's script",
    "signal": (
        f"SIGTERM {SIGNAL_BEFORE_S} s before the time limit, so that the run in progress saves its "
        "summary"
    ),
    "exclusive": "a node of its own for each task",
    "oversubscribe": "a node of its own for each task (--exclusive)",
    "nodes": "one node for each task",
    "ntasks": "one task for each array task",
}


def sbatch_long_option(word: str) -> Optional[str]:
    """The sbatch option that a word --NAME or --NAME=VALUE is, as getopt_long finds it: NAME
    itself, else the one option NAME begins; None for a NAME that begins none (sbatch refuses it, or
    it is of a later Slurm). BadOption when NAME begins several (sbatch refuses it too)."""
    name = word[2:].partition("=")[0]
    known = [*SBATCH_NO_VALUE, *SBATCH_OPTIONAL_VALUE, *SBATCH_VALUE]
    if name in known:
        return name
    matches = sorted(option for option in known if option.startswith(name))
    if len(matches) > 1:
        raise BadOption(
            f"--slurm-args: {word!r} is ambiguous to sbatch (--{', --'.join(matches)}); give the "
            "option's full name"
        )
    return matches[0] if matches else None


def sbatch_options(word: str) -> tuple[list[str], bool]:
    """The sbatch options that a word starting with "-" sets (-Ha5: hold, array), and whether the
    next word is the value of the last (--comment -a5: the comment "-a5"). An option of letters
    stops at a letter sbatch does not know (it refuses the word) and at one that takes a value: the
    rest of the word is that value."""
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


# What goes into an #SBATCH line. bash reads the line as a comment, up to the newline, so a newline
# (or any control character) in it would start a shell command: refused. sbatch reads the rest with
# its own parser, not the shell's (_get_argument in Slurm's src/sbatch/opt.c): quotes group words, a
# backslash escapes the next character, an unquoted # starts a comment, a word may not start with
# ":", and an empty word ends the line. So a word with a space, a quote, a backslash or a #, or one
# that starts with ":", goes in double quotes, with " and \ escaped (sbatch_word); an empty word is
# refused; nothing else is special. (Slurm also blanks the word "packjob" anywhere in an #SBATCH
# line.)
def sbatch_word(word: str) -> str:
    """A word (without control characters) for an #SBATCH line, so that sbatch's parser reads it
    back as it is; an option's value quoted apart from its name: --comment="tiny sweep"."""
    name, eq, value = word.partition("=")
    if eq and name.startswith("-") and sbatch_word(name) == name:
        return f"{name}={sbatch_word(value)}"
    if word and not word.startswith(":") and not any(c.isspace() or c in "\"'\\#" for c in word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sbatch_lines(value: str) -> list[str]:
    """--slurm-args as #SBATCH lines, one option (with its value) a line: "-p gpu --gres=gpu:1" ->
    two lines.

    Split like a shell would (shlex: quotes group, and a newline between words is a space); a word
    that holds a control character, e.g. a quoted newline, is refused: it cannot go into an #SBATCH
    line."""
    try:
        words = shlex.split(value)
    except ValueError as e:
        raise BadOption(f"--slurm-args is not a valid shell word list ({e}): {value!r}") from None
    lines: list[list[str]] = []
    # the next word is the last option's value; the last option is none sbatch knows
    value_next = unknown = False
    for word in words:
        if control_characters(word) or not word:
            raise BadOption(
                f"--slurm-args: {word!r} is empty or holds a control character (a newline, a tab, "
                "...), which cannot go into an #SBATCH line; give sbatch options of printable "
                "characters"
            )
        # its value, whatever it holds: --comment -a5
        if value_next or (unknown and not word.startswith("-")):
            lines[-1].append(word)
            value_next = False
        elif word.startswith("-") and word not in ("-", "--"):
            options, value_next = sbatch_options(word)
            for option in options:
                if option in SBATCH_OWN:
                    raise BadOption(
                        f"--slurm-args: {word!r} is sbatch's --{option}, which bench.sh sets "
                        f"itself ({SBATCH_OWN[option]}); leave it out"
                    )
            lines.append([word])
            unknown = not options
        else:
            raise BadOption(
                f"--slurm-args must be sbatch options such as --partition=gpu, got {word!r}"
            )
    return [" ".join(map(sbatch_word, line)) for line in lines]


# the default task count is the number of cells, at most this (Slurm's default MaxArraySize is 1001)
MAX_TASKS = 1000
# added to a task's time limit: the env timing, imports, the last summary
TIME_MARGIN_S = 15 * 60


@dataclass(frozen=True)
class JobArray:
    """The job's settings, checked: from --slurm-tasks, --slurm-parallel, --slurm-args, --timeout,
    --kill-after, --cpus and --no-env-timing."""

    tasks: int
    parallel: Optional[int]
    timeout: Optional[float]
    kill_after: float
    env_timing: bool
    # --slurm-args, one #SBATCH line (without "#SBATCH ") per option
    slurm_lines: tuple[str, ...]
    cpus: Optional[str]


def job_array(args: argparse.Namespace, sel: Selection, num_cells: int) -> JobArray:
    """The job's settings from python -m sweep sbatch's options; BadOption names the first bad
    one."""
    if sel.shard != (0, 1):
        raise BadOption(
            "--shard does not go with --slurm: the array tasks are the shards (--slurm-tasks N)"
        )
    tasks = positive_int("--slurm-tasks", args.slurm_tasks, MAX_RUNS) or min(num_cells, MAX_TASKS)
    if tasks > num_cells:
        raise BadOption(
            f"--slurm-tasks {tasks} is more than the {num_cells} cells of this sweep; valid: 1 to "
            f"{num_cells}"
        )
    parallel = positive_int("--slurm-parallel", args.slurm_parallel, MAX_RUNS)
    timeout = seconds("--timeout", args.timeout, positive=True) if args.timeout else None
    kill_after = seconds("--kill-after", args.kill_after, positive=False)
    cpus(args.cpus)
    slurm_lines = tuple(sbatch_lines(args.slurm_args))
    return JobArray(tasks, parallel, timeout, kill_after, args.env_timing, slurm_lines, args.cpus)


def output_pattern(log_dir: str) -> str:
    """#SBATCH --output's value: {log_dir}/logs/slurm/%A_%a.out, the log dir's own % doubled
    (Slurm's literal %).

    BadOption for a log dir that cannot be one: a control character (the #SBATCH line would end), or
    a backslash (Slurm then ignores every %A and %a, and all tasks write one file)."""
    if control_characters(log_dir) or "\\" in log_dir:
        raise BadOption(
            f"--log-dir {log_dir!r} holds a control character or a backslash, which cannot go into "
            "the job's #SBATCH --output path; with --slurm give a log dir without them"
        )
    return "--output=" + sbatch_word(f"{log_dir.replace('%', '%%')}/logs/slurm/%A_%a.out")


def time_limit(runs_per_task: int, timeout: Optional[float], kill_after: float) -> Optional[str]:
    """Slurm's --time for a task: its runs x (--timeout + bench.sh's grace before SIGKILL) + a
    margin, as D-HH:MM:SS; None without --timeout."""
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


def largest_shard(whole: list[PlannedRun], done: list[bool], tasks: int) -> int:
    """The most runs still to do in one shard of `tasks`."""
    owner = shard_of_cells(cells(whole), tasks)
    per_task = [0] * tasks
    for run, is_done in zip(whole, done):
        per_task[owner[run.cell]] += not is_done
    return max(per_task)


def time_note(most: int, job: JobArray) -> str:
    """The script's comment on its time limit."""
    if job.timeout is None:
        return (
            "# time limit: the partition's default (no --timeout given; --slurm-args --time=... "
            "sets one)"
        )
    return (
        f"# time limit: {most} runs to do in the largest shard x (--timeout {job.timeout:g} s + "
        f"{job.kill_after:g} s) + {TIME_MARGIN_S // 60} min"
    )


def sbatch_header(
    whole: list[PlannedRun], done: list[bool], job: JobArray, log_dir: str
) -> list[str]:
    """The script's first lines: what it is, then its #SBATCH lines."""
    most = largest_shard(whole, done, job.tasks)
    limit = time_limit(most, job.timeout, job.kill_after)
    return [
        "#!/bin/bash",
        f"# benchback-rl on Slurm, written by bench.sh --slurm: a job array of {job.tasks} tasks "
        f"for {len(whole)} runs ({done.count(False)} to run)",
        f"# in {len(cells(whole))} cells. Task K runs shard K/{job.tasks}: whole cells, every "
        "framework of a cell on one node.",
        "# Submitting the same bench.sh command again skips the completed runs.",
        time_note(most, job),
        "#SBATCH --job-name=benchback",
        f"#SBATCH --array=0-{job.tasks - 1}" + (f"%{job.parallel}" if job.parallel else ""),
        "#SBATCH --exclusive",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        *([f"#SBATCH --time={limit}"] if limit else []),
        f"#SBATCH --signal=B:TERM@{SIGNAL_BEFORE_S}",
        f"#SBATCH {output_pattern(log_dir)}",
        *(f"#SBATCH {line}" for line in job.slurm_lines),
    ]


def bench_command(sel: Selection, options: list[str], job: JobArray, log_dir: str) -> list[str]:
    """The script's body: bench.sh of this task's shard, with the sweep's options."""
    if job.timeout is not None:
        options = [*options, "--timeout", f"{job.timeout:g}", "--kill-after", f"{job.kill_after:g}"]
    if job.cpus:
        options = [*options, "--cpus", job.cpus]
    study_file = os.environ.get(study.PATH_VARIABLE)
    study_path = shlex.quote(os.path.abspath(study_file)) if study_file else ""
    lines = [
        "set -euo pipefail",
        *([f"export {study.PATH_VARIABLE}={study_path}"] if study_file else []),
        f"LOG_DIR={shlex.quote(log_dir)}",
        f"NUM_TASKS={job.tasks}",
        'SHARD="$SLURM_ARRAY_TASK_ID/$NUM_TASKS"  # task K of the array runs shard K/N',
        'echo "job $SLURM_ARRAY_JOB_ID task $SLURM_ARRAY_TASK_ID: shard $SHARD on $(hostname), '
        '$(date)"',
        f'exec bash {shlex.quote(str(study.ROOT / "bench.sh"))} --shard "$SHARD" '
        '--log-dir "$LOG_DIR" \\',
        f"  --python {shlex.quote(absolute_python(sel.python))} \\",
        *([f"  {shlex.join(options)} \\"] if options else []),
        '  --env-timing-file "$LOG_DIR/env_timing/$(hostname).json"'
        if job.env_timing
        else "  --no-env-timing",
    ]
    if sel.extra:
        lines[-1] += " \\"
        lines.append(f"  -- {shlex.join(sel.extra)}")
    return lines


def sbatch_script(
    sel: Selection, options: list[str], whole: list[PlannedRun], done: list[bool], job: JobArray
) -> str:
    """The sbatch script of the job array (see the module's docstring); `options`:
    sweep_cli.matrix_options()."""
    log_dir = os.path.abspath(sel.log_dir)
    header = sbatch_header(whole, done, job, log_dir)
    return "\n".join([*header, *bench_command(sel, options, job, log_dir)]) + "\n"

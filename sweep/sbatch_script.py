"""The sbatch script of bench.sh --slurm: a job array whose task K runs `bench.sh --shard K/N` of the same sweep.

- `--exclusive`: no other job shares the node while it is being timed; one node per task.
- `--time`: the most runs still to do in one shard x (--timeout + --kill-after) + 15 min; none without --timeout
  (then the partition's default limit holds; --slurm-args --time=... sets one). bench.sh gets SIGTERM 2 min before
  the limit, so the run in progress saves an "interrupted" summary.
- `--output`: one file per task, {log-dir}/logs/slurm/{job id}_{task id}.out.
- env timing: each task measures into {log-dir}/env_timing/{hostname}.json (skipped when that node's file is already
  there), so that no two nodes write one file and every node is timed on itself.
- the same interpreter, bench.sh, study file ($BENCHBACK_STUDY) and log dir, as absolute paths.
"""

import argparse
import math
import os
import shlex
import shutil
from dataclasses import dataclass
from typing import Optional

from sweep import study
from sweep.matrix import PlannedRun, cells, shard_of_cells
from sweep.option_checks import MAX_RUNS, BadOption, cpus, positive_int, seconds
from sweep.options import Selection
from sweep.sbatch_options import SIGNAL_BEFORE_S, sbatch_lines, sbatch_word
from sweep.shell_quoting import control_characters

# the default task count is the number of cells, at most this (Slurm's default MaxArraySize is 1001)
MAX_TASKS = 1000
# added to a task's time limit: the env timing, imports, the last summary
TIME_MARGIN_S = 15 * 60


@dataclass(frozen=True)
class JobArray:
    """The job's settings, checked: from --slurm-tasks, --slurm-parallel, --slurm-args, --timeout, --kill-after,
    --cpus and --no-env-timing."""

    tasks: int
    parallel: Optional[int]
    timeout: Optional[float]
    kill_after: float
    env_timing: bool
    # --slurm-args, one #SBATCH line (without "#SBATCH ") per option
    slurm_lines: tuple[str, ...]
    cpus: Optional[str]


def job_array(args: argparse.Namespace, sel: Selection, num_cells: int) -> JobArray:
    """The job's settings from python -m sweep sbatch's options; BadOption names the first bad one."""
    if sel.shard != (0, 1):
        raise BadOption(
            "--shard does not go with --slurm: the array tasks are the shards (--slurm-tasks N)"
        )
    tasks = positive_int("--slurm-tasks", args.slurm_tasks, MAX_RUNS) or min(num_cells, MAX_TASKS)
    if tasks > num_cells:
        raise BadOption(
            f"--slurm-tasks {tasks} is more than the {num_cells} cells of this sweep; valid: 1 to {num_cells}"
        )
    parallel = positive_int("--slurm-parallel", args.slurm_parallel, MAX_RUNS)
    timeout = seconds("--timeout", args.timeout, positive=True) if args.timeout else None
    kill_after = seconds("--kill-after", args.kill_after, positive=False)
    cpus(args.cpus)
    slurm_lines = tuple(sbatch_lines(args.slurm_args))
    return JobArray(tasks, parallel, timeout, kill_after, args.env_timing, slurm_lines, args.cpus)


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
        return "# time limit: the partition's default (no --timeout given; --slurm-args --time=... sets one)"
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
        f"# benchback-rl on Slurm, written by bench.sh --slurm: a job array of {job.tasks} tasks for {len(whole)} "
        f"runs ({done.count(False)} to run)",
        f"# in {len(cells(whole))} cells. Task K runs shard K/{job.tasks}: whole cells, every framework of a cell "
        "on one node.",
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
        'echo "job $SLURM_ARRAY_JOB_ID task $SLURM_ARRAY_TASK_ID: shard $SHARD on $(hostname), $(date)"',
        f'exec bash {shlex.quote(str(study.ROOT / "bench.sh"))} --shard "$SHARD" --log-dir "$LOG_DIR" \\',
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
    """The sbatch script of the job array (see the module's docstring); `options`: sweep_cli.matrix_options()."""
    log_dir = os.path.abspath(sel.log_dir)
    header = sbatch_header(whole, done, job, log_dir)
    return "\n".join([*header, *bench_command(sel, options, job, log_dir)]) + "\n"

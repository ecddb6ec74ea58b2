"""The sweep's planner, called by bench.sh: which runs the chosen experiments make, which shard runs
each, which are done, and the Slurm job array's script.

bench.sh calls this module once per sweep and keeps the process work (one fresh process per run,
timeouts, logs, progress). Everything here comes from the study (study.toml, through
core/study.py):

    python -m sweep dry-run --experiments exp1 --seeds 1 --log-dir runs  # a command a run
    python -m sweep plan --log-dir runs --shard 0/2 -- --num-envs 64  # the same, NUL-separated
    python -m sweep dry-run --preset smoke --log-dir runs-smoke  # a preset's (bench.sh --smoke)
    python -m sweep check --log-dir runs --shard 0/2  # exit 2 on a bad option, else prints 0/2
    python -m sweep env-timing --file runs/env_timing.json  # must the env timing be (re)done?
    python -m sweep sbatch --log-dir runs --slurm-tasks 8 --timeout 900  # the job array's script
    python -m sweep claim --fd 9 --lock F --holder H --description D --log-dir runs -- N WORDS...
    python3 -m sweep args ARGS...  # bench.sh's command line, read and checked (sweep/bench.py)
    python -m sweep lock --fd 9 --lock F --holder H  # the sweep's lock (sweep/bench.py)

Its parts, one job each: see sweep/__init__.py.
"""

import argparse
import os
import shlex
import sys
from pathlib import Path

from atomic import LinkRefused
from core import study
from core.env_timing_file import BadTiming
from core.option_checks import PROG, BadOption
from core.shell_quoting import shell_word
from sweep import bench
from sweep.cli import SWEEP_ACTIONS, add_options, matrix_options, usage
from sweep.env_timing_check import env_timing_reason
from sweep.matrix import PlannedRun, bounded_matrix, cell_id, cells, shard_runs
from sweep.options import Selection, select
from sweep.preset import apply_preset, preset_words
from sweep.resume import claim_cell, done_flags, with_resumes
from sweep.run_check import check_run_args
from sweep.sbatch import job_array, sbatch_script


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        print(f"{PROG}: {message}", file=sys.stderr)
        sys.exit(2)


def parser() -> Parser:
    p = Parser(prog="python -m sweep", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    sub = p.add_subparsers(dest="action", required=True, parser_class=Parser)
    for action in SWEEP_ACTIONS:
        s = sub.add_parser(action, allow_abbrev=False)
        add_options(s, action)
        s.add_argument("extra", nargs="*", help="after --: arguments added to every run")
    add_claim_parser(sub)
    lock = sub.add_parser("lock", allow_abbrev=False)
    for name in ("--fd", "--lock", "--holder"):
        lock.add_argument(name, type=int if name == "--fd" else str, required=True)
    return p


def add_claim_parser(sub: argparse._SubParsersAction) -> None:
    """bench.sh's, before the runs of a cell: claim_cell()."""
    claim = sub.add_parser("claim", allow_abbrev=False)
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


def attach_values(p: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """argv with each `--option VALUE` of an option that takes a value written `--option=VALUE` (up
    to --).

    argparse reads a VALUE that starts with "-" (--shard -1/2, --tag -x) as another option and says
    only "expected one argument"; attached, the value reaches the check that names it, or the run
    that takes it."""
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


def plan_fields(
    runs: list[PlannedRun], done: list[bool], matrix_size: int, k: int, n: int
) -> list[str]:
    """The plan for bench.sh, as data: the header RUNS, TO_RUN, CELLS, MATRIX_SIZE, K/N, then per
    run done|todo, description, log stem, its cell's id (the runs of a cell follow one another), the
    number of words of its command, and those words (python, script, args)."""
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


def print_plan(fields: list[str]) -> None:
    """Each field NUL-terminated, read by bash's `mapfile -d ''`: no field is ever parsed as shell
    code, and any character but NUL (which no argument can hold) stays what it is, newlines and tabs
    included."""
    out = sys.stdout.buffer
    for field in fields:
        out.write(os.fsencode(field) + b"\0")
    out.flush()


def print_sbatch(args: argparse.Namespace, sel: Selection, whole: list[PlannedRun]) -> None:
    """For bench.sh: a header "RUNS TO_RUN CELLS TASKS", then the sbatch script; BadOption for a bad
    option."""
    num_cells = len(cells(whole))
    job = job_array(args, sel, num_cells)
    done = done_flags(whole, sel.log_dir)
    script = sbatch_script(sel, matrix_options(args), whole, done, job)
    print(len(whole), done.count(False), num_cells, job.tasks)
    print(script, end="")


def experiment_lines(the_study: study.Study) -> list[str]:
    """One line per experiment (bench.sh --help), then the platform comparisons, which have no runs
    of their own."""
    lines = []
    for exp in the_study.experiments.values():
        syncs = " and ".join("on" if sync else "off" for sync in exp.syncs)
        lines.append(f"{exp.name}  {exp.title} (sync timing {syncs})")
    for platform in the_study.platforms.values():
        lines.append(
            f"{platform.name}  is {platform.repeats} under another --tag (e.g. the OS or the "
            "machine)"
        )
    return lines


def preset_lines(the_study: study.Study) -> list[str]:
    """Two lines per preset (bench.sh --help): its name and title, then the options it stands
    for."""
    return [
        line
        for preset in the_study.presets.values()
        for line in (f"{preset.name}  {preset.title}", f"    {preset_words(preset)}")
    ]


def help_text() -> str:
    """bench.sh --help, with the study's experiments and presets (or where to find them)."""
    try:
        the_study = study.load()
        return usage(experiment_lines(the_study), preset_lines(the_study))
    except Exception:  # a broken study: the help still helps
        return usage(["(see study.toml)"], ["(see study.toml)"])


def check_scripts(runs: list[PlannedRun], the_study: study.Study) -> None:
    """BadOption when a framework of these runs has no script."""
    scripts = {str(the_study.frameworks[run.framework].script_path(study.ROOT)) for run in runs}
    missing = sorted(script for script in scripts if not Path(script).exists())
    if missing:
        raise BadOption(f"no script {', '.join(missing)}; check the study's [frameworks]")


def check_selects_runs(
    args: argparse.Namespace, sel: Selection, whole: list[PlannedRun], the_study: study.Study
) -> None:
    """BadOption when the options select no run at all (an env or a size that none of the chosen
    experiments runs, a compile mode none of the chosen frameworks has): a sweep of nothing is a
    mistake, not a sweep."""
    if whole:
        return
    selection = shlex.join(matrix_options(args)) or "the sweep"
    experiments = [the_study.experiments[name] for name in sel.experiments]
    modes = {True: "every compile mode", False: "each framework's default compile mode"}
    runs = "; ".join(
        f"{exp.name} runs {', '.join(exp.envs)} in sizes {', '.join(exp.sizes)}, "
        f"{modes[exp.all_compile_modes]}"
        for exp in experiments
    )
    raise BadOption(f"{selection} selects no runs ({runs}); choose among those")


def print_env_timing(args: argparse.Namespace, sel: Selection, whole: list[PlannedRun]) -> None:
    """Two lines, why the env timing must be (re)done and the envs to time; nothing when the file is
    usable."""
    envs = list(dict.fromkeys(run.env for run in whole))
    try:
        verdict = env_timing_reason(Path(args.file), envs, sel.env_threads)
    except BadTiming as e:  # neither used nor replaced: bench.sh goes on without env timing
        raise BadOption(str(e)) from None
    if verdict:
        print(*verdict[0].splitlines(), sep=" ")
        print(",".join(verdict[1]))


def print_dry_run(sel: Selection, runs: list[PlannedRun], whole: list[PlannedRun]) -> None:
    """One command per run ("# done: " before those already completed; --resume FOLDER after those
    that continue a stopped run), then the count."""
    done = done_flags(runs, sel.log_dir)
    for run, is_done in zip(with_resumes(runs, done, sel.log_dir), done):
        print(("# done: " if is_done else "") + " ".join(map(shell_word, run.command)))
    k, n = sel.shard
    print(
        f"dry run: {len(runs)} runs ({sum(done)} already completed) in {len(cells(runs))} cells, "
        f"of {len(whole)} runs in the matrix, shard {k}/{n}"
    )


def sweep_action(args: argparse.Namespace, the_study: study.Study) -> None:
    """check, plan, dry-run, env-timing or sbatch, for the sweep the options select; BadOption names
    a bad one."""
    given = tuple(args.extra)  # the run arguments after --, before the preset's join them
    args = apply_preset(args, the_study)  # its options, as if given
    sel = select(args, the_study)
    whole = bounded_matrix(sel, the_study)
    check_selects_runs(args, sel, whole, the_study)
    runs = shard_runs(whole, *sel.shard)
    if args.action in ("check", "plan"):
        check_scripts(runs, the_study)
    if args.action in ("check", "dry-run", "sbatch"):  # bench.sh's first call, whatever it does
        check_run_args(whole, given, the_study, sel.python)
    if args.action == "check":
        # the options are good: this shard, as K/N
        print(f"{sel.shard[0]}/{sel.shard[1]}")
    elif args.action == "env-timing":
        print_env_timing(args, sel, whole)
    elif args.action == "sbatch":
        print_sbatch(args, sel, whole)
    elif args.action == "plan":
        done = done_flags(runs, sel.log_dir)
        runs = with_resumes(runs, done, sel.log_dir)  # a run stopped after a save goes on from it
        print_plan(plan_fields(runs, done, len(whole), *sel.shard))
    else:
        print_dry_run(sel, runs, whole)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["args"]:
        return bench.args_main(argv[1:], help_text)
    if argv[:1] == ["restart"]:
        bench.restart(argv[1:])
    p = parser()
    args = p.parse_args(attach_values(p, argv))
    if args.action == "lock":
        return bench.lock_main(args.fd, args.lock, args.holder)
    if args.action == "claim":
        # which runs of the cell are done, once it is this sweep's
        try:
            done = claim_cell(
                args.fd, args.lock, args.holder, args.description, args.log_dir, args.runs
            )
        except LinkRefused as e:  # a planted link: its file never truncated
            print(f"{PROG}: {e}", file=sys.stderr)
            return 2
        print(" ".join("done" if is_done else "todo" for is_done in done))
        return 0
    the_study = study.load()
    try:
        sweep_action(args, the_study)
    except BadOption as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)

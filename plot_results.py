"""Turns benchmark runs into the study's tables, figures and REPORT.md (part of benchback-rl).

    python plot_results.py runs/ --out results/ --env-timing results/env_timing.json
    python plot_results.py --csv linux/runs.csv --csv mac/runs.csv --out results/   # merge machines
    python plot_results.py runs/ --out new/ --previous old/speedups.csv   # beside the one before

The study (frameworks, compile modes, envs, sizes, experiments and what the analysis makes of each:
the headline, the README's tables, the figures, the platform comparisons) is read from study.toml
through core/study.py. Every folder holding a config.json (at any depth under the given folders) is
a run. Completed runs are read (config.json, summary.json, TensorBoard scalars, through
core/runlog.py); the others are skipped and listed in the report. A run on envpool (config.json
env_backend) is an env of its own, "CartPole-v1@envpool" in every table, never paired or pooled with
the gymnax runs of that env id (a run without env_backend ran on gymnax). A run resumed after a stop
(the scripts' --resume) is one run: in the learning results, and out of every timed one
(analysis/loading.py). Written to --out:

    runs.csv      one row per run x iteration: the run's config, its summary and every scalar
    summary.csv   one row per run: config, durations, iteration windows, the experiments it belongs
                  to
    speedups.csv  speedups A->B = time_A / time_B per metric, experiment, data type, model size and
                  framework pair
    env_cost.csv  per metric, model size and pair: does the speedup shrink with env cost?
                  (Spearman's rho, the log-log slope, bootstrap intervals over envs; needs the env
                  timing: --env-timing, else the env_timing.json that bench.sh wrote in the first
                  RUNS_DIR that holds one)
    learning.csv, learning_speedups.csv
                  the learning experiments (those with configs): final returns against the
                  reference's, and the times to reach it
    dtype_speedups.csv
                  the experiments of several data types: each framework's time in bfloat16 / in
                  float32, per metric and model size (the framework pairs within each data type are
                  in speedups.csv)
    *.png         the figures study.toml lists for each experiment (skipped, and REPORT.md says why,
                  when there is nothing to draw: no runs, or none reach the window drawn); a panel
                  without data says why
    REPORT.md     the tables, the figures, the machines and versions, the runs left out of the
                  speedups, the skipped runs (and, with --previous, the headline speedups of both
                  editions side by side)

Nothing is written (exit status 2) when no completed run is found, and a README block is never
replaced by an empty one. An --out that holds more than this call would write (runs or rows of its
tables that this analysis lacks, figures it would not draw again) is refused unless --force is
given; other files in --out are never touched, and the new files replace the old ones only once all
of them are written (analysis/output.py). A file of --out named like one of these that this tool did
not write (REPORT.md without its mark, a figure without its PNG text chunk, a table without its
columns: analysis/owned.py) or that is a symbolic link is refused, --force or not; --out itself may
be a link. --readme-block and --update-readme replace only the text between a block's markers
(each a line of its own): a file holding none is refused before anything is read. A table read
(--csv, --previous, the tables in --out) or a README larger than analysis.common.MAX_TABLE_BYTES,
on disk or decompressed, is refused in one line at the bound. The work is done by the analysis
package (analysis/__init__.py lists its modules).
"""

import atomic

if __name__ == "__main__":
    # a signal during the imports (pandas, matplotlib: seconds): held, then taken by main()'s policy
    atomic.hold_stop_signals()

import argparse
import sys
from pathlib import Path

from analysis import common, figures, markdown, output, owned, report
from analysis.common import SPEEDUP_COLUMNS, BadInput
from analysis.loading import load_runs, read_env_timing, read_previous
from analysis.results import analyse
from analysis.speedups import few_runs_cells, headline
from atomic import md_mark, write_file
from core.study import Study
from core.study import load as load_study

TIMING_FILE = "env_timing.json"  # bench.sh's, in its --log-dir
TABLES = (
    "runs.csv",
    "summary.csv",
    "speedups.csv",
    "env_cost.csv",
    "learning.csv",
    "learning_speedups.csv",
    "dtype_speedups.csv",
)


def fail(message: str) -> None:
    """Stops with exit status 2 and one line on stderr."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "runs_dirs",
        nargs="*",
        metavar="RUNS_DIR",
        help="folders searched (at any depth) for run folders, i.e. folders holding config.json",
    )
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="output folder (created if needed)"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace the tables and figures in --out even when they hold more than this analysis "
        "(runs or rows it "
        "lacks, figures it does not draw again); without it such a call is refused",
    )
    parser.add_argument(
        "--csv",
        action="append",
        default=[],
        metavar="FILE",
        help="a runs.csv written earlier (e.g. on another machine) to merge in; repeatable",
    )
    parser.add_argument(
        "--env-timing",
        metavar="FILE",
        help="env_timing.json from sweep/env_timing.py: orders envs by step cost (default: the "
        "env_timing.json bench.sh "
        "wrote in the first RUNS_DIR that holds one; none: the study's order)",
    )
    parser.add_argument(
        "--no-figures",
        dest="figures",
        action="store_false",
        help="write the tables and REPORT.md only (fast, e.g. to merge the CSVs of several "
        "machines); "
        "figures of an earlier call in --out are removed (with --force)",
    )
    parser.add_argument(
        "--readme-block",
        metavar="FILE",
        help="also write just the README's tables (markdown: the speedups, then the learning ones, "
        "each between its markers as in the README) to FILE: a new file, or one that holds such a "
        "block, whose text between the markers alone is replaced (a block it lacks is added at its "
        "end); a file without them is refused",
    )
    parser.add_argument(
        "--previous",
        metavar="FILE",
        help="the speedups.csv of a previous edition: its headline pairs, side by side with this "
        "one's, are added to REPORT.md and the README tables",
    )
    parser.add_argument(
        "--update-readme",
        metavar="FILE",
        help=f"replace the text between {report.README_MARKERS[0]} and {report.README_MARKERS[1]} "
        "in FILE with the "
        f"speedup tables, and between {markdown.LEARNING_MARKERS[0]} and "
        f"{markdown.LEARNING_MARKERS[1]} "
        "with the learning tables, each when this analysis has data for it (refused when it has "
        "neither)",
    )
    args = parser.parse_args(argv)
    if not args.runs_dirs and not args.csv:
        parser.error("give at least one RUNS_DIR or --csv FILE")
    return args


# the README's blocks, by their markers: the speedup tables, then the learning ones
README_BLOCKS = (report.README_MARKERS, markdown.LEARNING_MARKERS)
PATH_OPTIONS = ("--out", "--csv", "--env-timing", "--readme-block", "--previous", "--update-readme")


def named_paths(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(option, path) of every path given, the folders to search as RUNS_DIR."""
    paths = [("RUNS_DIR", path) for path in args.runs_dirs]
    for flag in PATH_OPTIONS:
        value = getattr(args, flag[2:].replace("-", "_"))
        paths += [
            (flag, path)
            for path in (value if isinstance(value, list) else [value])
            if path is not None
        ]
    return paths


def check_paths(args: argparse.Namespace, study: Study) -> None:
    """BadInput for a named input that is missing, or an output that cannot be written, before
    anything is read. An empty path names no file (it would mean the current folder)."""
    common.generated_at()  # a bad SOURCE_DATE_EPOCH, before anything is read
    for flag, path in named_paths(args):
        if path == "":
            raise BadInput(f"{flag} '': an empty path names no file or folder")
    for path in args.runs_dirs:
        if not Path(path).is_dir():
            raise BadInput(f"RUNS_DIR {path} is not a folder")
    files = [("--csv", path) for path in args.csv]
    files += [
        (flag, path)
        for flag, path in (("--env-timing", args.env_timing), ("--previous", args.previous))
        if path
    ]
    for flag, path in files:
        if not Path(path).is_file():
            raise BadInput(f"{flag} {path}: no such file")
    readmes = {"--update-readme": args.update_readme, "--readme-block": args.readme_block}
    for flag, path in readmes.items():
        if path is not None:
            # --update-readme's README is there already; --readme-block's file may be new
            owned.check_target(flag, path, new=flag == "--readme-block")
            owned.check_readme(flag, path, README_BLOCKS)
    names = [*TABLES, output.REPORT, *sorted(figures.figure_files(study))]
    owned.check_out(Path(args.out), names, owned.its_own)


def sweep_timing(runs_dirs: list[str]):
    """The env_timing.json that bench.sh wrote in a runs folder (its --log-dir), of the first
    RUNS_DIR that has one."""
    found = [
        Path(folder) / TIMING_FILE for folder in runs_dirs if (Path(folder) / TIMING_FILE).is_file()
    ]
    return str(found[0]) if found else None


def readme_blocks(results, study: Study, previous, previous_name) -> dict[tuple[str, str], str]:
    """The README blocks this analysis has data for, by their markers: the speedup tables when the
    experiments of study.tables have pairs of runs, the learning tables when there are learning
    runs. A block without data is left as it is in the README."""
    blocks = {}
    if not headline(results.speedups, study).empty:
        few = few_runs_cells(results.pairs, results.speedups)
        blocks[report.README_MARKERS] = report.readme_markdown(
            results.speedups, study, previous, previous_name, few
        )
    if not results.learning.empty:
        blocks[markdown.LEARNING_MARKERS] = markdown.learning_markdown(results)
    return blocks


def run(args: argparse.Namespace, study: Study) -> None:
    figures.check_figures(study)
    check_paths(args, study)
    out = Path(args.out)
    previous = read_previous(args.previous, SPEEDUP_COLUMNS) if args.previous else None
    sources = [*args.runs_dirs, *args.csv]
    timing_path = args.env_timing or sweep_timing(args.runs_dirs)
    if timing_path and not args.env_timing:
        print(f"note: env costs from {timing_path} (bench.sh's; --env-timing to choose another)")
    timing, timing_info = read_env_timing(timing_path)
    runs, skipped = load_runs(args.runs_dirs, args.csv, study)
    for run in skipped:
        print(f"warning: skipped {run.path}: {run.reason}", file=sys.stderr)
    if runs.empty:  # before anything is created or overwritten
        raise BadInput(
            f"no completed run in {', '.join(sources)} ({len(skipped)} skipped); nothing written"
        )
    results = analyse(runs, timing, study)
    blocks = readme_blocks(results, study, previous, args.previous)
    if not blocks and (args.update_readme or args.readme_block):
        raise BadInput(
            "no pairs of runs to compare and no learning runs: the README's tables would be empty; "
            "nothing written "
            "(drop --update-readme/--readme-block to write the rest)"
        )
    readme = output.readme_with(Path(args.update_readme), blocks) if args.update_readme else None
    block_file = (
        output.readme_with(Path(args.readme_block), blocks, "--readme-block", add=True)
        if args.readme_block
        else None
    )
    tables = [
        runs,
        results.summary,
        results.speedups,
        results.env_cost,
        results.learning,
        results.learning_speedups,
        results.dtype_speedups,
    ]
    tables = dict(zip(TABLES, tables))
    losses = [] if args.force else output.lost_rows(out, tables)
    if losses:  # before the figures are drawn: they take the longest
        output.refuse(out, losses)
    drawn, notes = (
        figures.draw_figures(results)
        if args.figures
        else ([], ["figures not drawn (--no-figures)"])
    )
    stale = output.stale_figures(
        out, figures.figure_files(study), {figure.file for figure, _ in drawn}
    )
    if stale and not args.force:
        figures.discard(drawn)
        output.refuse(out, [f"figures this call does not draw: {', '.join(stale)}"])
    notes += [
        f"{name} removed: left in {out} by an earlier call and not drawn by this one"
        for name in stale
    ]
    for note in notes:
        print(f"note: {note}")
    edition = (
        report.edition_markdown(previous, results.speedups, args.previous, study)
        if previous is not None
        else ""
    )
    with output.staged(out, remove=stale) as stage:
        for name, table in tables.items():
            common.write_csv(table, stage / name)  # text a spreadsheet would run is quoted
        for figure, fig in drawn:
            figures.save_figure(fig, stage / figure.file)
        learning = markdown.report_markdown(results)
        text = report.report_text(
            results, skipped, [f for f, _ in drawn], notes, sources, timing_info, edition, learning
        )
        # the mark first (an HTML comment, not shown): the next call knows the file as its own
        (stage / output.REPORT).write_text(f"{md_mark(owned.TOOL)}\n{text}")
    # the files the user named are followed wherever they lead (given: the path itself)
    if block_file is not None:
        write_file(args.readme_block, block_file, given=args.readme_block)
    if readme is not None:
        write_file(args.update_readme, readme, given=args.update_readme)
    print(
        f"{len(results.summary)} runs ({len(skipped)} skipped), {len(drawn)} figures -> "
        f"{out}/REPORT.md"
    )


def main(argv=None) -> None:
    """plot_results.py's command line. A stop signal (atomic.py: SIGINT, SIGTERM, SIGHUP) stops
    it at once, anywhere (no JAX here): the staged files removed, --out left as it was unless it was
    already replaced, one line, exit code 130."""
    stop = atomic.Interrupts(at_checks=False)
    # the handlers put back after a call of main(argv) (a test's), not after the command line's
    for_good = argv is None
    left = "no file is left half-written"
    stop.run(lambda: analysis_command(argv), "plot_results.py", left, for_good)


def analysis_command(argv) -> None:
    """main(), under the signal policy."""
    args = parse_args(argv)
    try:
        run(args, load_study())  # the study, loaded once and passed down
    except BadInput as e:
        fail(str(e))
    except OSError as e:  # a write that failed (a full disk): one line, and no temporary file left
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

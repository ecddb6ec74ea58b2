"""How long the README's quick-start lines take: each one timed from a fresh clone, for the README to state.

    python -m benchmarks.quickstart --update-readme README.md      # -> results/quickstart/, and README's block
    python -m benchmarks.quickstart --steps templates --dry-run    # print the commands, run nothing
    python -m benchmarks.quickstart --render-only --update-readme README.md   # again from quickstart.json

It clones the repository (--repo; default: the one this file is in) into a temporary folder (--work-dir), so that
nothing made before is reused: no .venv, an empty pip cache (--pip-cache: the user's own), an empty TorchInductor
cache and no JAX compilation cache; the variables that would reuse one (or point into another venv) are dropped.
There it runs these steps (--steps, comma-separated; they run in this order), one at a time, each timed by
time.perf_counter() around the whole command:

  demo       ./setup.sh demo: sets .venv up, then trains ppo_nnx.py on Acrobot-v1 (small model); split into the
             run (summary.json total_s, from the script's first line) and the rest, outside the script: the
             set-up (and the interpreter's start and exit);
  templates  ./setup.sh run python ppo_<framework>.py --env Acrobot-v1 --model-size small, each framework of the
             study: the wall time, the final return and the compile time: time/iteration of iteration 0 less the
             median of the later iterations (the run's TensorBoard events);
  pendulum   the command of README.md's "Continuous control" block (read in the clone), as ./setup.sh run CMD;
  tests      ./setup.sh test, the whole test suite and the longest step: only with --with-tests or when named.

Without demo, a plain ./setup.sh runs first, so that no other step pays for the set-up. Each command's output goes
to OUT/logs/STEP.log, and a line per step (with the time it took and the time so far) to the terminal. After every
step OUT/quickstart.json is rewritten (atomically) with what is measured so far: each step's command, wall time,
exit code, final return and compile time, the machine, the date (UTC) and the commit cloned. A failed step is
recorded and the next one runs. Then OUT/README.md gets a table of the steps and, with --update-readme FILE, the
text between <!-- quickstart:start --> and <!-- quickstart:end --> in FILE becomes the line that states the
durations. Ctrl-C stops (exit status 130) and keeps what was written, and leaves FILE as it was.

OUT's quickstart.json, README.md and logs/*.log are replaced only when this tool wrote them (the record's command,
the README's title, the logs the record lists); any other file there is refused, `--out .` (the repository's
README) among them.

Exit status: 0 when every step succeeded, 1 when one failed, 2 for bad input (one line, before anything is cloned
or written), 130 when interrupted. Time it on an otherwise quiet machine: anything else running slows every step.
"""

import argparse
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Optional

from analysis import runlog
from analysis.common import BadInput
from analysis.output import check_out, check_target, readme_with
from atomic import OutputRefused, check_replaceable
from benchmarks.common import ROOT
from benchmarks.quickstart_clone import CLONE, committed_readme
from benchmarks.quickstart_measure import measure
from benchmarks.quickstart_report import (
    MARKERS,
    RESULTS,
    foreign_logs,
    readme_why_not,
    record_why_not,
    render,
)
from benchmarks.quickstart_steps import STEP_GROUPS, plan_steps, step_groups

DEFAULT_STEPS = "demo,templates,pendulum"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.quickstart",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--steps",
        default=DEFAULT_STEPS,
        help=f"comma-separated, of {', '.join(STEP_GROUPS)} (default: {DEFAULT_STEPS})",
    )
    parser.add_argument(
        "--with-tests", action="store_true", help="also ./setup.sh test (the longest step)"
    )
    parser.add_argument(
        "--repo", default=str(ROOT), help="the repository to clone (default: %(default)s)"
    )
    parser.add_argument(
        "--out", default="results/quickstart", help="output folder (default: %(default)s)"
    )
    parser.add_argument(
        "--update-readme",
        metavar="FILE",
        help=f"replace the text between {MARKERS[0]} and {MARKERS[1]} in FILE with the durations",
    )
    parser.add_argument(
        "--pip-cache",
        action="store_true",
        help="let pip use the user's cache (default: an empty one)",
    )
    parser.add_argument("--work-dir", help="where the temporary clone goes (default: the system's)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="run nothing: OUT/README.md (and --update-readme's block) again from OUT/quickstart.json",
    )
    args = parser.parse_args(argv)
    args.groups = step_groups(args.steps, args.with_tests)
    return args


def check_paths(args) -> None:
    """BadInput or OutputRefused, before anything is cloned or written, for an --out or README that cannot be
    written, or an --out whose quickstart.json, README.md or logs/*.log this tool did not write (`--out .`: the
    repository's README)."""
    out = Path(args.out)
    check_out(out, [RESULTS, "README.md"])
    check_replaceable("--out", out / RESULTS, record_why_not)
    check_replaceable("--out", out / "README.md", readme_why_not)
    foreign = [] if args.render_only else foreign_logs(out)
    if foreign:
        raise OutputRefused(
            f"--out {args.out}: logs/ holds logs this tool did not write ({', '.join(foreign[:5])}): "
            "nothing is run; give another --out or move them away"
        )
    if args.update_readme:
        check_target("--update-readme", args.update_readme, new=False)
        readme_with(Path(args.update_readme), {MARKERS: ""})  # BadInput without the markers
    if args.work_dir and not Path(args.work_dir).is_dir():
        raise BadInput(f"--work-dir {args.work_dir}: no such folder")


def dry_run(args) -> int:
    clone = Path(args.work_dir or tempfile.gettempdir()) / "quickstart-XXXX" / CLONE
    print(shlex.join(["git", "clone", "--quiet", args.repo, str(clone)]))
    for step in plan_steps(args.groups, committed_readme(args.repo)):
        print(f"(cd {shlex.quote(str(clone))} && {shlex.join(step.command)})")
    return 0


def render_only(args) -> int:
    path = Path(args.out) / RESULTS
    try:
        record = runlog.read_json(path)
    except runlog.RunError as e:
        raise BadInput(f"--render-only: {path}: {e}") from None
    render(Path(args.out), record, args.update_readme)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse_args(argv)
        if args.dry_run:
            return dry_run(args)
        check_paths(args)
        if args.render_only:
            return render_only(args)
        return measure(args, argv)
    except (BadInput, OutputRefused) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the first step (while cloning)
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

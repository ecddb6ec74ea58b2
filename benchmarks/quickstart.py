"""How long the README's quick-start lines take: each one timed from a fresh clone, for the README
to state.

    python -m benchmarks.quickstart --update-readme README.md     # -> results/quickstart/, README
    python -m benchmarks.quickstart --steps templates --dry-run   # print the commands, run nothing
    python -m benchmarks.quickstart --render-only --update-readme README.md  # from quickstart.json
    python -m benchmarks.quickstart --busy 1 --out results/quickstart-loaded  # a loaded machine
    python -m benchmarks.quickstart --render-only --with-record results/quickstart-loaded \
        --update-readme README.md                     # the README's line: quiet to loaded

It clones the repository (--repo; default: the one this file is in) into a temporary folder
(--work-dir), so that nothing made before is reused: no .venv, an empty pip cache (--pip-cache: the
user's own), an empty TorchInductor cache and no JAX compilation cache; the variables that would
reuse one (or point into another venv) are dropped. There it runs these steps (--steps,
comma-separated; they run in this order), one at a time, each timed by time.perf_counter() around
the whole command:

  demo       ./setup.sh demo: sets .venv up, then trains ppo_nnx.py on Acrobot-v1 (small model);
             split into the run (summary.json total_s, from the script's first line) and the rest,
             outside the script: the set-up (and the interpreter's start and exit);
  templates  ./setup.sh run python ppo_<framework>.py --env Acrobot-v1 --model-size small, each
             framework of the study: the wall time, the final return and the compile time:
             time/iteration of iteration 0 less the median of the later iterations (the run's
             TensorBoard events);
  pendulum   the command of README.md's "Continuous control" block (read in the clone), as
             ./setup.sh run CMD;
  smoke      ./setup.sh run ./bench.sh --smoke: the README's smoke sweep (every framework once);
  tests      ./setup.sh test, the whole test suite and the longest step: only with --with-tests or
             when named.

--busy N runs N busy loops (CPU-bound Python processes) beside every step, started before it and
killed after it: a loaded machine, as a user's often is; the record says how many. With
--with-record DIR (repeatable), the README's line gives each duration as the range over this record
and DIR's quickstart.json, each record's load named and linked.

Without demo, a plain ./setup.sh runs first, so that no other step pays for the set-up. Each
command's output goes to OUT/logs/STEP.log, and a line per step (with the time it took and the time
so far) to the terminal. After every step OUT/quickstart.json is rewritten (atomically) with what is
measured so far: each step's command, wall time, exit code, final return and compile time, the
machine, the date (UTC) and the commit cloned. A failed step is recorded and the next one runs.
Then OUT/README.md gets a table of the steps and, with --update-readme FILE, the text between
<!-- quickstart:start --> and <!-- quickstart:end --> in FILE becomes the line that states the
durations. Ctrl-C stops (exit status 130) and keeps what was written, and leaves FILE as it was.

OUT's quickstart.json, README.md and logs/*.log are replaced only when this tool wrote them (the
record's command, the README's title, the logs the record lists); any other file there is refused,
`--out .` (the repository's README) among them.

Exit status: 0 when every step succeeded, 1 when one failed, 2 for bad input (one line, before
anything is cloned or written), 130 when interrupted. Time it on an otherwise quiet machine:
anything else running slows every step.
"""

import argparse
import os
import shlex
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

from analysis.common import BadInput
from analysis.output import readme_with
from analysis.owned import check_out, check_target
from atomic import OutputRefused, check_inside, check_replaceable
from benchmarks.common import (
    ROOT,
    busy_loops,
    fresh_environment,
    git,
    git_out,
    human,
    machine,
    run_logged,
)
from benchmarks.quickstart_steps import (
    MARKERS,
    RESULTS,
    STEP_GROUPS,
    Step,
    foreign_logs,
    outcome,
    plan_steps,
    readme_why_not,
    record_reason,
    record_why_not,
    render,
    run_folders,
    step_groups,
    with_pytest_counts,
    with_training,
    write_results,
    written_logs,
)
from core import runlog
from core.option_checks import BadOption, bounded_int

DEFAULT_STEPS = "demo,templates,pendulum,smoke"
CLONE = "benchback-rl"  # the clone's folder, in the temporary folder
PIP_VARIABLES = ("PIP_CACHE_DIR", "PIP_NO_CACHE_DIR")  # kept with --pip-cache


# ----------------------------------------------------------------------------------------- options
def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.quickstart",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    steps = f"comma-separated, of {', '.join(STEP_GROUPS)} (default: {DEFAULT_STEPS})"
    parser.add_argument("--steps", default=DEFAULT_STEPS, help=steps)
    tests = "also ./setup.sh test (the longest step)"
    parser.add_argument("--with-tests", action="store_true", help=tests)
    repo = "the repository to clone (default: %(default)s)"
    parser.add_argument("--repo", default=str(ROOT), help=repo)
    out = "output folder (default: %(default)s)"
    parser.add_argument("--out", default="results/quickstart", help=out)
    readme = f"replace the text between {MARKERS[0]} and {MARKERS[1]} in FILE with the durations"
    parser.add_argument("--update-readme", metavar="FILE", help=readme)
    pip = "let pip use the user's cache (default: an empty one)"
    parser.add_argument("--pip-cache", action="store_true", help=pip)
    busy = "N busy loops (CPU-bound processes) beside every step: a loaded machine (default: 0)"
    parser.add_argument("--busy", default="0", metavar="N", help=busy)
    also = (
        "with --update-readme: the README states the range over this record and DIR's "
        "quickstart.json (another machine state, e.g. --busy 2); repeatable"
    )
    parser.add_argument("--with-record", action="append", default=[], metavar="DIR", help=also)
    parser.add_argument("--work-dir", help="where the temporary clone goes (default: the system's)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    again = (
        "run nothing: OUT/README.md (and --update-readme's block) again from OUT/quickstart.json"
    )
    parser.add_argument("--render-only", action="store_true", help=again)
    args = parser.parse_args(argv)
    args.groups = step_groups(args.steps, args.with_tests)
    args.busy = busy_count(args.busy)
    return args


def busy_count(text: str) -> int:
    """--busy's count, of ASCII digits, 0 to 64; BadInput naming the value otherwise."""
    try:
        return bounded_int("--busy", text, 0, 64)
    except BadOption as e:
        raise BadInput(str(e)) from None


def check_paths(args) -> None:
    """BadInput or OutputRefused, before anything is cloned or written, for an --out or README that
    cannot be written, or an --out whose quickstart.json, README.md or logs/*.log this tool did not
    write (`--out .`: the repository's README)."""
    out = Path(args.out)
    check_out(out, [RESULTS, "README.md"])
    check_inside(out, out / "logs", "--out")  # the logs are written below it, never through a link
    check_replaceable("--out", out / RESULTS, record_why_not)
    check_replaceable("--out", out / "README.md", readme_why_not)
    foreign = [] if args.render_only else foreign_logs(out)
    if foreign:
        raise OutputRefused(
            f"--out {args.out}: logs/ holds logs this tool did not write "
            f"({', '.join(foreign[:5])}): nothing is run; give another --out or move them away"
        )
    if args.update_readme:
        check_target("--update-readme", args.update_readme, new=False)
        readme_with(Path(args.update_readme), {MARKERS: ""})  # BadInput without the markers
    if args.with_record and not args.update_readme:
        raise BadInput("--with-record: only with --update-readme (it adds to the README's line)")
    other_records(args)  # BadInput for a DIR without a readable quickstart.json
    if args.work_dir and not Path(args.work_dir).is_dir():
        raise BadInput(f"--work-dir {args.work_dir}: no such folder")


# ------------------------------------------------------------------- the clone and its environment
def clone_repo(repo: str, folder: Path) -> tuple[Path, str]:
    """A fresh clone of repo in folder, and its commit; BadInput with git's last line when it
    fails."""
    clone = folder / CLONE
    git_out(
        "clone", "--quiet", repo, str(clone), why=f"--repo {repo}: cannot clone it", error=BadInput
    )
    return clone, git("-C", str(clone), "rev-parse", "HEAD").stdout.strip()


def uncommitted(repo: str) -> bool:
    """Whether repo (a local git repository) has changes to tracked files, which its clone lacks."""
    proc = git("-C", repo, "status", "--porcelain", "--untracked-files=no")
    return proc.returncode == 0 and bool(proc.stdout.strip())


def committed_readme(repo: str) -> str:
    """README.md as the clone would have it (the repo's HEAD), for --dry-run; BadInput when it
    cannot be read."""
    why = f"--repo {repo}: cannot read its README.md at HEAD (a local git repository?)"
    return git_out("-C", repo, "show", "HEAD:README.md", why=why, error=BadInput)


def without_venv(path: str) -> str:
    """PATH without the folders of the venv this tool runs in (if any): the clone's set-up finds
    its own Python."""
    if sys.prefix == sys.base_prefix:
        return path
    venv = Path(sys.prefix).resolve()
    kept = [p for p in path.split(os.pathsep) if p and not Path(p).resolve().is_relative_to(venv)]
    return os.pathsep.join(kept)


def step_environment(scratch: Path, pip_cache: bool) -> dict:
    """The steps' environment: common.fresh_environment without this venv; empty caches in scratch
    (pip's own as it is with pip_cache)."""
    env = fresh_environment(scratch, keep=PIP_VARIABLES if pip_cache else ())
    env["PATH"] = without_venv(env.get("PATH", ""))
    if not pip_cache:
        env["PIP_CACHE_DIR"] = str(scratch / "pip-cache")
    return env


# ---------------------------------------------------------------------------- the steps, measured
class StepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a step: the step's record so far (its wall time until then, no exit code)."""

    def __init__(self, result: dict):
        super().__init__()
        self.result = result


def run_step(step: Step, clone: Path, log: Path, env: dict) -> dict:
    """Runs the step's command in the clone, its output to log; its record. StepInterrupted on
    Ctrl-C."""
    before = run_folders(clone)
    result = {"step": step.name, "group": step.group, "command": shlex.join(step.command)}
    try:
        logged = run_logged(step.command, clone, env, log)
    except OSError as e:  # a command that cannot be started
        result.update(wall_s=None, exit_code=None, error=f"not started: {e}")
        return result
    if logged.interrupted:
        result.update(wall_s=logged.wall_s, exit_code=None, interrupted=True)
        raise StepInterrupted(result)
    result.update(wall_s=logged.wall_s, exit_code=logged.returncode)
    return with_pytest_counts(with_training(result, step, clone, before), log)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_record(argv: list[str], commit: str, pip_cache: bool, busy: int) -> dict:
    return {
        "command": shlex.join(["python", "-m", "benchmarks.quickstart", *argv]),
        "status": "running",
        "started": now(),
        "commit": commit,
        "machine": machine(),
        "busy_loops": busy,
        "caches": {
            "pip": "the user's" if pip_cache else "empty",
            "torchinductor": "empty",
            "jax_compilation": "none",
        },
        "steps": [],
    }


def progress(index: int, count: int, result: dict, started: float) -> str:
    return (
        f"[{index}/{count}] {result['step']}: {outcome(result)} in {human(result['wall_s'])} "
        f"(elapsed {human(time.perf_counter() - started)})"
    )


def run_all(steps: list[Step], clone: Path, out: Path, record: dict, env: dict) -> None:
    """Each step in turn (beside the record's busy loops, started anew for each), quickstart.json
    rewritten after each; StepInterrupted (recorded) on Ctrl-C."""
    started = time.perf_counter()
    for index, step in enumerate(steps, 1):
        log = out / "logs" / f"{step.name}.log"
        command = shlex.join(step.command)
        print(f"[{index}/{len(steps)}] {step.name}: {command} (output: {log})", flush=True)
        try:
            with busy_loops(record["busy_loops"]):
                result = run_step(step, clone, log, env)
        except StepInterrupted as e:
            record["steps"].append({**e.result, "log": str(log.relative_to(out))})
            raise
        record["steps"].append({**result, "log": str(log.relative_to(out))})
        write_results(out, record)
        failed = outcome(result) != "done"
        said = progress(index, len(steps), result, started) + ("; continuing" if failed else "")
        print(said, flush=True)


def fresh_logs(out: Path) -> None:
    """OUT/logs made, without the logs of an earlier call (they would be taken for this one's):
    those its quickstart.json lists, never another file (check_paths refuses an OUT/logs that
    holds one)."""
    old = written_logs(out)
    # never a folder a link leads to: the logs are written below --out
    check_inside(out, out / "logs", "--out").mkdir(parents=True, exist_ok=True)
    for log in old:
        log.unlink(missing_ok=True)


def measure(
    args, argv: list[str], plan: Callable[[list[str], str], list[Step]] = plan_steps
) -> int:
    """Clones, runs the planned steps, writes quickstart.json and the READMEs; the exit status: 0
    when every step succeeded, 1 when one failed, 130 when interrupted (what was measured is kept,
    the README left as it was)."""
    out = Path(args.out)
    with tempfile.TemporaryDirectory(prefix="quickstart-", dir=args.work_dir) as scratch:
        clone, commit = clone_repo(args.repo, Path(scratch))
        steps = plan(args.groups, (clone / "README.md").read_text())
        fresh_logs(out)
        record = new_record(argv, commit, args.pip_cache, args.busy)
        write_results(out, record)
        print(f"fresh clone of {commit[:12]} in {clone}; results: {out / RESULTS}", flush=True)
        if uncommitted(args.repo):
            print(f"note: {args.repo} has uncommitted changes, which the clone lacks", flush=True)
        try:
            run_all(steps, clone, out, record, step_environment(Path(scratch), args.pip_cache))
            record["status"] = "finished"
        except KeyboardInterrupt:
            record["status"] = "interrupted"
        record["ended"] = now()
        write_results(out, record)
    if record["status"] == "interrupted":
        render(out, record, None)
        print(
            f"interrupted: what was measured is kept in {out / RESULTS}; the README is left as it "
            "was (--render-only --update-readme FILE writes it from that)",
            file=sys.stderr,
        )
        return 130
    render(out, record, args.update_readme, other_records(args))
    return 0 if all(outcome(step) == "done" for step in record["steps"]) else 1


# ---------------------------------------------------------------------------------------- the tool
def dry_run(args) -> int:
    clone = Path(args.work_dir or tempfile.gettempdir()) / "quickstart-XXXX" / CLONE
    print(shlex.join(["git", "clone", "--quiet", args.repo, str(clone)]))
    for step in plan_steps(args.groups, committed_readme(args.repo)):
        print(f"(cd {shlex.quote(str(clone))} && {shlex.join(step.command)})")
    return 0


def read_record(out: str, option: str) -> dict:
    """OUT/quickstart.json; BadInput naming the option when it cannot be read or is not this
    tool's."""
    path = Path(out) / RESULTS
    try:
        record = runlog.read_json(path)
    except runlog.RunError as e:
        raise BadInput(f"{option} {out}: {path}: {e}") from None
    why = record_reason(record)
    if why:
        raise BadInput(f"{option} {out}: {path} {why}")
    return record


def other_records(args) -> list[tuple[Path, dict]]:
    """The --with-record folders and their records."""
    return [(Path(out), read_record(out, "--with-record")) for out in args.with_record]


def render_only(args) -> int:
    record = read_record(args.out, "--render-only: --out")
    # a tests step of an earlier version of this tool: its pytest counts read from its log
    logs = {log.name: log for log in written_logs(Path(args.out))}
    record["steps"] = [
        with_pytest_counts(step, logs.get(Path(str(step.get("log", ""))).name, Path("-")))
        for step in record["steps"]
    ]
    if any("pytest" in step for step in record["steps"]):
        write_results(Path(args.out), record)
    render(Path(args.out), record, args.update_readme, other_records(args))
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

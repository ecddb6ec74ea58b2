"""The quick start measured, for benchmarks/quickstart.py: a fresh clone made, the planned steps run in it one at a
time (a line per step on the terminal, its output to OUT/logs/STEP.log), quickstart.json rewritten after every step
with what is measured so far (and the commit, the machine, the date), then OUT/README.md and the README's block;
Ctrl-C keeps what was measured and leaves the README as it was. measure returns the tool's exit status: 0 when every
step succeeded, 1 when one failed, 130 when interrupted."""

import shlex
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from benchmarks.quickstart_clone import clone_repo, machine, step_environment, uncommitted
from benchmarks.quickstart_report import (
    RESULTS,
    human,
    outcome,
    render,
    write_results,
    written_logs,
)
from benchmarks.quickstart_steps import Step, StepInterrupted, plan_steps, run_step


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_record(argv: list[str], commit: str, pip_cache: bool) -> dict:
    return {
        "command": shlex.join(["python", "-m", "benchmarks.quickstart", *argv]),
        "status": "running",
        "started": now(),
        "commit": commit,
        "machine": machine(),
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
    """Each step in turn, quickstart.json rewritten after each; StepInterrupted (recorded) on Ctrl-C."""
    started = time.perf_counter()
    for index, step in enumerate(steps, 1):
        log = out / "logs" / f"{step.name}.log"
        print(
            f"[{index}/{len(steps)}] {step.name}: {shlex.join(step.command)} (output: {log})",
            flush=True,
        )
        try:
            result = run_step(step, clone, log, env)
        except StepInterrupted as e:
            record["steps"].append({**e.result, "log": str(log.relative_to(out))})
            raise
        record["steps"].append({**result, "log": str(log.relative_to(out))})
        write_results(out, record)
        failed = outcome(result) != "done"
        print(
            progress(index, len(steps), result, started) + ("; continuing" if failed else ""),
            flush=True,
        )


def fresh_logs(out: Path) -> None:
    """OUT/logs made, without the logs of an earlier call (they would be taken for this one's): those its
    quickstart.json lists, never another file (quickstart.py refuses an OUT/logs that holds one)."""
    old = written_logs(out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    for log in old:
        log.unlink(missing_ok=True)


def measure(
    args, argv: list[str], plan: Callable[[list[str], str], list[Step]] = plan_steps
) -> int:
    """Clones, runs the planned steps, writes quickstart.json and the READMEs; the exit status."""
    out = Path(args.out)
    with tempfile.TemporaryDirectory(prefix="quickstart-", dir=args.work_dir) as scratch:
        clone, commit = clone_repo(args.repo, Path(scratch))
        steps = plan(args.groups, (clone / "README.md").read_text())
        fresh_logs(out)
        record = new_record(argv, commit, args.pip_cache)
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
            f"interrupted: what was measured is kept in {out / RESULTS}; the README is left as it was "
            "(--render-only --update-readme FILE writes it from that)",
            file=sys.stderr,
        )
        return 130
    render(out, record, args.update_readme)
    return 0 if all(outcome(step) == "done" for step in record["steps"]) else 1

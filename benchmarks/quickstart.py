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

Exit status: 0 when every step succeeded, 1 when one failed, 2 for bad input (one line, before anything is cloned
or written), 130 when interrupted. Time it on an otherwise quiet machine: anything else running slows every step.
"""

import argparse
import os
import platform
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

import pandas as pd

import runlog
import study
from analysis.errors import BadInput
from analysis.escape import md_code, md_text
from analysis.markdown import markdown_table
from analysis.output import check_out, check_target
from analysis.readme_block import readme_with
from atomic import write_file, write_json
from benchmarks.common import ROOT, run_series

STEP_GROUPS = ("demo", "templates", "pendulum", "tests")  # --steps names, in the order they run
DEFAULT_STEPS = "demo,templates,pendulum"
DEMO_ENV, DEMO_SIZE = (
    "Acrobot-v1",
    "small",
)  # what ./setup.sh demo trains (setup.sh); the templates too
STATED_COMPILE = "torch"  # the framework whose compile time the README states
PENDULUM_HEADING = "**Continuous control.**"  # README.md's paragraph before the Pendulum code block
MARKERS = ("<!-- quickstart:start -->", "<!-- quickstart:end -->")
PLACEHOLDER = (
    "How long each line takes: not measured yet "
    "(`python -m benchmarks.quickstart --update-readme README.md` measures it from a fresh clone)."
)
RESULTS = "quickstart.json"
CLONE = "benchback-rl"  # the clone's folder, in the temporary folder
# variables a first-time user lacks, that would reuse what was made before or run in another venv
DROPPED_VARIABLES = (
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONHOME",
    "PIP_CACHE_DIR",
    "PIP_NO_CACHE_DIR",
    "TORCHINDUCTOR_CACHE_DIR",
    "JAX_COMPILATION_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES",
    "OMP_NUM_THREADS",
)
PIP_VARIABLES = ("PIP_CACHE_DIR", "PIP_NO_CACHE_DIR")  # kept with --pip-cache


@dataclass(frozen=True)
class Step:
    name: str  # its key in quickstart.json and its log's name: demo, setup, linen, ..., pendulum, tests
    group: str  # the --steps name it belongs to
    command: tuple[str, ...]  # run in the clone
    trains: bool = True  # whether it makes a run folder (under the clone's runs/) to read


class StepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a step: the step's record so far (its wall time until then, no exit code)."""

    def __init__(self, result: dict):
        super().__init__()
        self.result = result


# ------------------------------------------------------------------------------------------------ the steps
def step_groups(text: str, with_tests: bool = False) -> list[str]:
    """The --steps names (comma-separated), in the order they run; BadInput naming an unknown one."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in STEP_GROUPS]
    if unknown or not names:
        bad = ", ".join(repr(name) for name in unknown) or repr(text)
        raise BadInput(
            f"--steps {text!r}: unknown step {bad} (choose from {', '.join(STEP_GROUPS)}, comma-separated)"
        )
    chosen = set(names) | ({"tests"} if with_tests else set())
    return [group for group in STEP_GROUPS if group in chosen]


def pendulum_command(readme: str) -> list[str]:
    """The `python ...` line of README.md's "Continuous control" code block, as words."""
    after = readme.partition(PENDULUM_HEADING)[2]
    block = after.partition("```bash\n")[2].partition("```")[0]
    lines = [line for line in block.splitlines() if line.startswith("python ")]
    if not lines:
        raise BadInput(f"README.md has no {PENDULUM_HEADING} code block with a `python ...` line")
    return shlex.split(lines[0])


def template_steps() -> list[Step]:
    """Each framework's script of the study on the demo's task, inside the venv."""
    return [
        Step(
            name,
            "templates",
            (
                "./setup.sh",
                "run",
                "python",
                framework.script,
                "--env",
                DEMO_ENV,
                "--model-size",
                DEMO_SIZE,
            ),
        )
        for name, framework in study.load().frameworks.items()
    ]


def plan_steps(groups: list[str], readme: str) -> list[Step]:
    """The commands of the chosen step groups; readme: the clone's README.md (for the Pendulum line)."""
    steps = [] if "demo" in groups else [Step("setup", "setup", ("./setup.sh",), trains=False)]
    for group in groups:
        if group == "demo":
            steps.append(Step("demo", "demo", ("./setup.sh", "demo")))
        elif group == "templates":
            steps += template_steps()
        elif group == "pendulum":
            steps.append(
                Step("pendulum", "pendulum", ("./setup.sh", "run", *pendulum_command(readme)))
            )
        else:
            steps.append(Step("tests", "tests", ("./setup.sh", "test"), trains=False))
    return steps


# ---------------------------------------------------------------------------------------- what is measured
def compile_seconds(iteration_times) -> Optional[float]:
    """time/iteration of iteration 0 less the median of the later iterations: the first iteration's compile."""
    times = [float(t) for t in iteration_times]
    if len(times) < 2:
        return None
    return times[0] - statistics.median(times[1:])


def run_folders(clone: Path) -> set[Path]:
    runs = clone / "runs"
    return set(runlog.run_dirs([runs])) if runs.is_dir() else set()


def training(run_dirs: list[Path], clone: Path) -> dict:
    """What the step's one new run folder says: its status, total_s, final return, compile time and versions."""
    if len(run_dirs) != 1:
        return {"error": f"{len(run_dirs)} new run folders under runs/, not one"}
    run_dir = run_dirs[0]
    found = {"run_dir": str(run_dir.relative_to(clone))}
    try:
        run = run_series(run_dir)
        versions = runlog.read_json(run_dir / "config.json").get("versions")
    except runlog.RunError as e:
        return {**found, "error": f"run folder unreadable: {e}"}
    summary, times = run["summary"], run["series"].get("time/iteration", [])
    return {
        **found,
        "status": summary.get("status"),
        "iterations": len(times),
        "total_s": summary.get("total_s"),
        "final_return": summary.get("final_return"),
        "compile_s": compile_seconds(times),
        "versions": versions,
    }


def with_training(result: dict, step: Step, clone: Path, before: set[Path]) -> dict:
    """result with the step's run read, and the wall time outside the script (its set-up, in the demo)."""
    if not step.trains:
        return result
    result.update(training(sorted(run_folders(clone) - before), clone))
    total = result.get("total_s")
    if isinstance(total, (int, float)) and result["wall_s"] is not None:
        result["outside_script_s"] = result["wall_s"] - total
    return result


def run_step(step: Step, clone: Path, log: Path, env: dict) -> dict:
    """Runs the step's command in the clone, its output to log; its record. StepInterrupted on Ctrl-C."""
    before = run_folders(clone)
    result = {"step": step.name, "group": step.group, "command": shlex.join(step.command)}
    started = time.perf_counter()
    try:
        with open(log, "w") as output:
            code = subprocess.run(
                step.command, cwd=clone, stdout=output, stderr=subprocess.STDOUT, env=env
            ).returncode
    except KeyboardInterrupt:
        result.update(wall_s=time.perf_counter() - started, exit_code=None, interrupted=True)
        raise StepInterrupted(result) from None
    except OSError as e:  # a command that cannot be started
        result.update(wall_s=None, exit_code=None, error=f"not started: {e}")
        return result
    result.update(wall_s=time.perf_counter() - started, exit_code=code)
    return with_training(result, step, clone, before)


# ------------------------------------------------------------------------------------ the machine and clone
def cpu_info() -> dict:
    """The CPU's model and whether it is a virtual machine's, from /proc/cpuinfo (Linux); else platform's."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    fields = {}
    for line in lines:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return {
        "cpu_model": fields.get("model name") or platform.processor() or platform.machine(),
        "virtual_machine": "hypervisor" in fields.get("flags", "").split(),
    }


def machine() -> dict:
    """The machine the steps ran on: cores, CPU, memory, OS, this Python, host."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cores": cores,
        **cpu_info(),
        "memory_gib": round(memory / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),  # this tool's; the venv's is in each run's versions
        "hostname": socket.gethostname(),
    }


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True)


def clone_repo(repo: str, folder: Path) -> tuple[Path, str]:
    """A fresh clone of repo in folder, and its commit; BadInput with git's last line when it fails."""
    clone = folder / CLONE
    proc = git("clone", "--quiet", repo, str(clone))
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["git clone failed"])[-1]
        raise BadInput(f"--repo {repo}: cannot clone it ({why})")
    return clone, git("-C", str(clone), "rev-parse", "HEAD").stdout.strip()


def uncommitted(repo: str) -> bool:
    """Whether repo (a local git repository) has changes to tracked files, which its clone lacks."""
    proc = git("-C", repo, "status", "--porcelain", "--untracked-files=no")
    return proc.returncode == 0 and bool(proc.stdout.strip())


def committed_readme(repo: str) -> str:
    """README.md as the clone would have it (the repo's HEAD), for --dry-run; BadInput when it cannot be read."""
    proc = git("-C", repo, "show", "HEAD:README.md")
    if proc.returncode != 0:
        raise BadInput(
            f"--repo {repo}: cannot read its README.md at HEAD (a local git repository?)"
        )
    return proc.stdout


def without_venv(path: str) -> str:
    """PATH without the folders of the venv this tool runs in (if any): the clone's set-up finds its own Python."""
    if sys.prefix == sys.base_prefix:
        return path
    venv = Path(sys.prefix).resolve()
    kept = [p for p in path.split(os.pathsep) if p and not Path(p).resolve().is_relative_to(venv)]
    return os.pathsep.join(kept)


def step_environment(scratch: Path, pip_cache: bool) -> dict:
    """The steps' environment: this one without DROPPED_VARIABLES and this venv; empty caches in scratch (pip's
    own as it is with pip_cache)."""
    kept = PIP_VARIABLES if pip_cache else ()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in DROPPED_VARIABLES or key in kept
    }
    env["PATH"] = without_venv(env.get("PATH", ""))
    env["TORCHINDUCTOR_CACHE_DIR"] = str(scratch / "torchinductor-cache")
    if not pip_cache:
        env["PIP_CACHE_DIR"] = str(scratch / "pip-cache")
    return env


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


# -------------------------------------------------------------------------------------------------- the run
def human(seconds) -> str:
    """A duration as a person reads it: 4.2 s, 55 s, 2m58s, 1h05m; '-' when unknown."""
    if seconds is None:
        return "-"
    if abs(seconds) < 9.95:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def outcome(result: dict) -> str:
    """How a step ended, in words: done, failed (exit N), interrupted, or why it did not run or cannot be read."""
    if result.get("interrupted"):
        return "interrupted"
    if result.get("exit_code") is None:
        return result.get("error", "not run")
    if result["exit_code"] != 0:
        return f"failed (exit {result['exit_code']})"
    return f"run unreadable: {result['error']}" if result.get("error") else "done"


def progress(index: int, count: int, result: dict, started: float) -> str:
    return (
        f"[{index}/{count}] {result['step']}: {outcome(result)} in {human(result['wall_s'])} "
        f"(elapsed {human(time.perf_counter() - started)})"
    )


def write_results(out: Path, record: dict) -> None:
    write_json(out / RESULTS, record)


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
    """OUT/logs made, without the logs of an earlier call (they would be taken for this one's)."""
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for old in logs.glob("*.log"):
        old.unlink()


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


# ------------------------------------------------------------------------------------------ the READMEs
def machine_text(machine_info: dict) -> str:
    vm = ", a VM" if machine_info.get("virtual_machine") else ""
    return (
        f"{machine_info['cores']} cores ({md_text(machine_info['cpu_model'])}{vm}; "
        f"{machine_info['memory_gib']:.0f} GiB)"
    )


def step_text(result: dict) -> str:
    """A step's duration, or how it ended when it did not succeed."""
    said = outcome(result)
    return human(result["wall_s"]) if said == "done" else said


def demo_text(result: dict) -> str:
    text = f"`./setup.sh demo` {step_text(result)}"
    if outcome(result) == "done":
        text += f" (set-up {human(result.get('outside_script_s'))}, the run {human(result.get('total_s'))})"
    return text


def templates_text(results: list[dict]) -> str:
    said = []
    for result in results:
        text = f"{result['step']} {step_text(result)}"
        if result["step"] == STATED_COMPILE and result.get("compile_s") is not None:
            text += f" (of which compile {human(result['compile_s'])})"
        said.append(text)
    return f"{DEMO_ENV} {DEMO_SIZE}, `./setup.sh run python ppo_<framework>.py`: " + ", ".join(said)


def readme_line(record: dict, link: str) -> str:
    """The README's sentence: how long each quick-start line took, where, when, and where the results are."""
    steps = record["steps"]
    by_group = {
        group: [s for s in steps if s["group"] == group] for group in ("setup", *STEP_GROUPS)
    }
    if not steps:
        return PLACEHOLDER
    parts = [f"`./setup.sh` (set-up only) {step_text(s)}" for s in by_group["setup"]]
    parts += [demo_text(s) for s in by_group["demo"]]
    if by_group["templates"]:
        parts.append(templates_text(by_group["templates"]))
    parts += [f"the Pendulum line {step_text(s)}" for s in by_group["pendulum"]]
    tests = by_group["tests"]
    parts.append(
        f"`./setup.sh test` {step_text(tests[0])}" if tests else "`./setup.sh test` not timed"
    )
    where = f"{machine_text(record['machine'])}, {record['started'][:10]}, [{Path(link).parent}]({link})"
    interrupted = " (interrupted before the end)" if record["status"] == "interrupted" else ""
    cache = f"pip's cache: {record['caches']['pip']}"
    return (
        f"Measured from a fresh clone ({cache}) on {where}{interrupted}: " + "; ".join(parts) + "."
    )


def steps_table(steps: list[dict]) -> str:
    rows = [
        {
            "step": s["step"],
            "command": md_code(s["command"]),
            "outcome": outcome(s),
            "wall time": human(s.get("wall_s")),
            "outside the script": human(s.get("outside_script_s")),
            "the run (total_s)": human(s.get("total_s")),
            "final return": s.get("final_return"),
            "compile": human(s.get("compile_s")),
        }
        for s in steps
    ]
    return markdown_table(pd.DataFrame(rows)) if rows else "_No step measured._"


def results_markdown(record: dict) -> str:
    """OUT/README.md: the steps' table, the machine, the commit and what each column means."""
    machine_info, caches = record["machine"], record["caches"]
    venv_python = next((s["versions"]["python"] for s in record["steps"] if s.get("versions")), "-")
    return f"""# The quick start, timed

The README's quick-start lines, one at a time, in a fresh clone of commit `{record["commit"]}` (no `.venv`; pip's
cache: {caches["pip"]}; TorchInductor's cache: {caches["torchinductor"]}; JAX's compilation cache:
{caches["jax_compilation"]}), on {machine_text(machine_info)}, {md_text(machine_info["os"])}, the venv's Python
{md_text(venv_python)}; started {record["started"]} (UTC), status {record["status"]}. Made by {md_code(record["command"])}.

{steps_table(record["steps"])}

Wall time: time.perf_counter() around the whole command. The run: its summary.json `total_s`, from the script's
first line to its end; outside the script: the wall time less that (setup.sh's set-up, the interpreter's start and
exit). Final return: summary.json's (the mean episodic return of the last 10 iterations). Compile: `time/iteration`
of iteration 0 less the median of the later iterations (TensorBoard). Each step's output: `logs/STEP.log`.
"""


def render(out: Path, record: dict, readme: Optional[str]) -> None:
    """OUT/README.md, and the README's block (readme) when given."""
    write_file(out / "README.md", results_markdown(record))
    if readme:
        link = os.path.relpath((out / "README.md").resolve(), Path(readme).resolve().parent)
        line = readme_line(record, Path(link).as_posix())
        write_file(readme, readme_with(Path(readme), {MARKERS: line + "\n"}))
        print(f"{readme}: {line}")


def render_only(args) -> int:
    path = Path(args.out) / RESULTS
    try:
        record = runlog.read_json(path)
    except runlog.RunError as e:
        raise BadInput(f"--render-only: {path}: {e}") from None
    render(Path(args.out), record, args.update_readme)
    return 0


# ------------------------------------------------------------------------------------------------ the tool
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
    """BadInput, before anything is cloned or written, for an --out or README that cannot be written."""
    check_out(Path(args.out), [RESULTS, "README.md"])
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
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the first step (while cloning)
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""The quick start's steps, for benchmarks/quickstart.py: which commands run (the --steps groups, each framework's
template on the demo's task, the README's Pendulum line), each one run and timed in the clone (time.perf_counter()
around the whole command, its output to a log), and what its run folder says (status, total_s, final return, the
compile time from its TensorBoard events); StepInterrupted carries a step's record when Ctrl-C stops it."""

import shlex
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from analysis import runlog
from analysis.common import BadInput
from benchmarks.common import run_series
from sweep import study

STEP_GROUPS = ("demo", "templates", "pendulum", "tests")  # --steps names, in the order they run
# what ./setup.sh demo trains (setup.sh); the templates too
DEMO_ENV, DEMO_SIZE = "Acrobot-v1", "small"
PENDULUM_HEADING = "**Continuous control.**"  # README.md's paragraph before the Pendulum code block


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

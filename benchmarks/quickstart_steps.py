"""The quick start's steps and what they are written as, for benchmarks/quickstart.py: which
commands run (the --steps groups, each framework's template on the demo's task, the README's
Pendulum line), what a step's run folder says (status, total_s, final return, the compile time from
its TensorBoard events), how a step ended in words, and what the record is written as:
quickstart.json (rewritten after every step), OUT/README.md (a table of the steps, the machine, the
commit and what each column means) and the README's sentence between its
<!-- quickstart:start --> and <!-- quickstart:end --> markers (how long each quick-start line took,
where and when)."""

import os
import re
import shlex
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pandas as pd

from analysis.common import BadInput, md_code, md_text
from analysis.markdown import markdown_table
from analysis.output import readme_with
from atomic import BadJson, parse_json, read_json, write_file, write_json
from benchmarks.common import human, machine_text, run_series
from core import runlog, study

STEP_GROUPS = (
    "demo",
    "templates",
    "pendulum",
    "smoke",
    "tests",
)  # --steps names, in the order they run
# what ./setup.sh demo trains (setup.sh); the templates too
DEMO_ENV, DEMO_SIZE = "Acrobot-v1", "small"
PENDULUM_HEADING = "**Continuous control.**"  # README.md's paragraph before the Pendulum code block
STATED_COMPILE = "torch"  # the framework whose compile time the README states
MARKERS = ("<!-- quickstart:start -->", "<!-- quickstart:end -->")
PLACEHOLDER = (
    "How long each line takes: not measured yet "
    "(`python -m benchmarks.quickstart --update-readme README.md` measures it from a fresh clone)."
)
RESULTS = "quickstart.json"
TITLE = "# The quick start, timed"  # OUT/README.md's first line: what tells it is this tool's
COMMAND = "python -m benchmarks.quickstart"  # how quickstart.json's "command" starts: the same


@dataclass(frozen=True)
class Step:
    name: str  # its key in quickstart.json and its log's name: demo, setup, linen, ..., tests
    group: str  # the --steps name it belongs to
    command: tuple[str, ...]  # run in the clone
    trains: bool = True  # whether it makes a run folder (under the clone's runs/) to read


# --------------------------------------------------------------------------------------- the steps
def step_groups(text: str, with_tests: bool = False) -> list[str]:
    """The --steps names (comma-separated), in the order they run; BadInput naming an unknown
    one."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in STEP_GROUPS]
    if unknown or not names:
        bad = ", ".join(repr(name) for name in unknown) or repr(text)
        raise BadInput(
            f"--steps {text!r}: unknown step {bad} "
            f"(choose from {', '.join(STEP_GROUPS)}, comma-separated)"
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
    task = ("--env", DEMO_ENV, "--model-size", DEMO_SIZE)
    return [
        Step(name, "templates", ("./setup.sh", "run", "python", framework.script, *task))
        for name, framework in study.load().frameworks.items()
    ]


def plan_steps(groups: list[str], readme: str) -> list[Step]:
    """The commands of the chosen step groups; readme: the clone's README.md (for the Pendulum
    line)."""
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
        elif group == "smoke":
            smoke = ("./setup.sh", "run", "./bench.sh", "--smoke")
            steps.append(Step("smoke", "smoke", smoke, trains=False))
        else:
            steps.append(Step("tests", "tests", ("./setup.sh", "test"), trains=False))
    return steps


# ------------------------------------------------------------------------------- what is measured
def compile_seconds(iteration_times) -> Optional[float]:
    """time/iteration of iteration 0 less the median of the later iterations: the first
    iteration's compile."""
    times = [float(t) for t in iteration_times]
    if len(times) < 2:
        return None
    return times[0] - statistics.median(times[1:])


def run_folders(clone: Path) -> set[Path]:
    runs = clone / "runs"
    return set(runlog.run_dirs([runs])) if runs.is_dir() else set()


def training(run_dirs: list[Path], clone: Path) -> dict:
    """What the step's one new run folder says: its status, total_s, final return, compile time
    and versions."""
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
    """result with the step's run read, and the wall time outside the script (its set-up, in the
    demo)."""
    if not step.trains:
        return result
    result.update(training(sorted(run_folders(clone) - before), clone))
    total = result.get("total_s")
    if isinstance(total, (int, float)) and result["wall_s"] is not None:
        result["outside_script_s"] = result["wall_s"] - total
    return result


# pytest's last line: "1 failed, 1586 passed, 8 skipped, 90 warnings in 3685.49s (1:01:25)"
PYTEST_LAST_LINE = re.compile(r"^=*\s*(\d+ [a-z]+(?:, \d+ [a-z]+)*) in [\d.]+s\b", re.MULTILINE)


def pytest_counts(log: Path) -> Optional[str]:
    """The counts of pytest's last line in a test step's log (failed, passed, skipped; warnings
    left out), or None when the log holds none."""
    if not log.is_file() or log.is_symlink():
        return None
    found = PYTEST_LAST_LINE.findall(log.read_text(errors="replace")[-20_000:])
    if not found:
        return None
    counts = [part for part in found[-1].split(", ") if not part.endswith("warnings")]
    return ", ".join(counts)


def with_pytest_counts(result: dict, log: Path) -> dict:
    """A tests step's result with its pytest counts (read from its log) when it has none yet."""
    if result.get("group") != "tests" or result.get("pytest"):
        return result
    counts = pytest_counts(log)
    return {**result, "pytest": counts} if counts else result


def outcome(result: dict) -> str:
    """How a step ended, in words: done, failed (exit N), interrupted, or why it did not run or
    cannot be read."""
    if result.get("interrupted"):
        return "interrupted"
    if result.get("exit_code") is None:
        return result.get("error", "not run")
    if result["exit_code"] != 0:
        return f"failed (exit {result['exit_code']})"
    return f"run unreadable: {result['error']}" if result.get("error") else "done"


# ------------------------------------------------------- what in --out this tool wrote (atomic.py)
def record_why_not(text: str) -> Optional[str]:
    """None when the text is a quickstart.json of this tool (its "command" is this tool's); else
    why not."""
    try:
        record = parse_json(text, RESULTS)
    except BadJson:
        return "is not JSON, so not a quickstart.json of this tool"
    return record_reason(record)


def record_reason(record) -> Optional[str]:
    """record_why_not of a JSON value read already."""
    if not isinstance(record, dict) or not str(record.get("command", "")).startswith(COMMAND):
        return f'holds no "command" of {COMMAND}, so this tool did not write it'
    return None


def readme_why_not(text: str) -> Optional[str]:
    """None when the text is an OUT/README.md of this tool (its title first); else why not."""
    if text.partition("\n")[0] != TITLE:
        return f"does not start with {TITLE!r}, so this tool did not write it"
    return None


def written_logs(out: Path) -> list[Path]:
    """The logs of OUT/logs/ that OUT/quickstart.json lists (this tool's, of an earlier call): only
    plain names in OUT/logs/, whatever the record says."""
    path = out / RESULTS
    try:
        # atomic's reader: a record too large or too deep is no record of this tool
        record = read_json(path) if path.is_file() and not path.is_symlink() else None
    except (OSError, BadJson):
        record = None
    if record is None or record_reason(record):
        return []
    steps = record.get("steps")
    logs = [s.get("log") for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []
    return [
        out / log
        for log in logs
        if isinstance(log, str) and re.fullmatch(r"logs/[A-Za-z0-9_.-]+\.log", log)
    ]


def foreign_logs(out: Path) -> list[str]:
    """The logs in OUT/logs/ that this tool did not write (a call removes its earlier logs: never
    these)."""
    ours = set(written_logs(out))
    return sorted(p.name for p in (out / "logs").glob("*.log") if p not in ours)


# ----------------------------------------------------------------------------- what is written
def write_results(out: Path, record: dict) -> None:
    write_json(out / RESULTS, record)


def span(values, say=human) -> Optional[str]:
    """Values measured in several records, as one or a range (low–high); None when there are
    none."""
    if not values:
        return None
    low, high = say(min(values)), say(max(values))
    return low if low == high else f"{low}–{high}"


def step_text(results: list[dict], key: str = "wall_s") -> str:
    """A step's duration over the records (one, or a range), or how it ended when it did not
    succeed in any."""
    done = [r[key] for r in results if outcome(r) == "done" and r.get(key) is not None]
    return span(done) or outcome(results[0])


def demo_text(results: list[dict]) -> str:
    text = f"`./setup.sh demo` {step_text(results)}"
    done = [r for r in results if outcome(r) == "done"]
    if done:
        returns = [r["final_return"] for r in done if r.get("final_return") is not None]
        final = span(returns, lambda value: f"{value:.1f}".replace("-", "−"))
        text += (
            f" (set-up {step_text(done, 'outside_script_s')}, the run {step_text(done, 'total_s')}"
        )
        text += f"; final return {final})" if final else ")"
    return text


def templates_text(by_step: dict[str, list[dict]], names: list[str]) -> str:
    said = []
    for name in names:
        results = by_step[name]
        text = f"{name} {step_text(results)}"
        compiled = [r["compile_s"] for r in results if r.get("compile_s") is not None]
        if name == STATED_COMPILE and compiled:
            text += f" (of which compile {span(compiled)})"
        said.append(text)
    command = "`./setup.sh run python ppo_<framework>.py`"
    return f"{DEMO_ENV} {DEMO_SIZE}, {command}: " + ", ".join(said)


def tests_text(results: list[dict]) -> Optional[str]:
    """The test steps' wall times with pytest's counts, whatever their exit code; None when no
    record has the counts."""
    said = [
        f"{human(r['wall_s'])} ({r['pytest']})"
        for r in results
        if r.get("pytest") and r.get("wall_s") is not None
    ]
    return "; ".join(said) or None


def load_text(record: dict) -> str:
    busy = record.get("busy_loops", 0)
    if not busy:
        return "quiet"
    return f"beside {busy} busy loop{'s' if busy > 1 else ''}"


def where_text(records: list[tuple[str, dict]]) -> str:
    """The machine, the dates and each record's load, linked to its results."""
    machines = list(dict.fromkeys(machine_text(record["machine"]) for _, record in records))
    dates = list(dict.fromkeys(record["started"][:10] for _, record in records))
    loads = []
    for link, record in records:
        interrupted = ", interrupted" if record["status"] == "interrupted" else ""
        loads.append(f"[{load_text(record)}{interrupted}]({link})")
    return f"{' and '.join(machines)}, {', '.join(dates)}, {' and '.join(loads)}"


def readme_line(records: list[tuple[str, dict]]) -> str:
    """The README's sentence: how long each quick-start line took, where, when, under what load
    (a range over the records), and where the results are; records: (link, record) pairs."""
    by_step: dict[str, list[dict]] = {}
    loads: dict[str, list[str]] = {}  # the loads of the records that timed each step
    for _, record in records:
        for step in record["steps"]:
            by_step.setdefault(step["step"], []).append(step)
            loads.setdefault(step["step"], []).append(load_text(record))
    if not by_step:
        return PLACEHOLDER
    groups: dict[str, list[str]] = {}
    for name, results in by_step.items():
        groups.setdefault(results[0]["group"], []).append(name)

    def timed(name: str) -> str:
        """The step's time, and which records timed it when not all of them did."""
        text = step_text(by_step[name])
        if len(by_step[name]) < len(records):
            text += f" ({' and '.join(loads[name])} only)"
        return text

    parts = [f"`./setup.sh` (set-up only) {timed(n)}" for n in groups.get("setup", [])]
    parts += [demo_text(by_step[name]) for name in groups.get("demo", [])]
    if groups.get("templates"):
        parts.append(templates_text(by_step, groups["templates"]))
    parts += [f"the Pendulum line {timed(n)}" for n in groups.get("pendulum", [])]
    parts += [f"`./bench.sh --smoke` {timed(n)}" for n in groups.get("smoke", [])]
    tests = groups.get("tests")
    parts.append(
        f"`./setup.sh test` {tests_text(by_step[tests[0]]) or timed(tests[0])}"
        if tests
        else "`./setup.sh test` not timed"
    )
    pip = sorted({record["caches"]["pip"] for _, record in records})
    cache = f"pip's cache: {' or '.join(pip)}"
    return (
        f"Measured from a fresh clone ({cache}) on {where_text(records)}: " + "; ".join(parts) + "."
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
            "pytest": s.get("pytest", ""),
        }
        for s in steps
    ]
    return markdown_table(pd.DataFrame(rows)) if rows else "_No step measured._"


# what each column means, below the table (its lines as they were first written)
COLUMNS_MEANING = (
    "Wall time: time.perf_counter() around the whole command. The run: its summary.json "
    "`total_s`, from the script's\n"
    "first line to its end; outside the script: the wall time less that (setup.sh's set-up, "
    "the interpreter's start and\n"
    "exit). Final return: summary.json's (the mean episodic return of the last 10 iterations). "
    "Compile: `time/iteration`\n"
    "of iteration 0 less the median of the later iterations (TensorBoard). Each step's output: "
    "`logs/STEP.log`.\n"
)


def busy_text(record: dict) -> str:
    busy = record.get("busy_loops", 0)
    if not busy:
        return "nothing else running"
    loops = "busy loop (a CPU-bound process" if busy == 1 else "busy loops (CPU-bound processes"
    return f"beside {busy} {loops} started before each step, `--busy`)"


def results_markdown(record: dict) -> str:
    """OUT/README.md: the steps' table, the machine, the commit and what each column means."""
    machine, caches = record["machine"], record["caches"]
    venv_python = next((s["versions"]["python"] for s in record["steps"] if s.get("versions")), "-")
    about = (
        "The README's quick-start lines, one at a time, in a fresh clone of commit "
        f"`{record['commit']}` (no `.venv`; pip's\n"
        f"cache: {caches['pip']}; TorchInductor's cache: {caches['torchinductor']}; "
        "JAX's compilation cache:\n"
        f"{caches['jax_compilation']}), on {machine_text(machine)}, {md_text(machine['os'])}, "
        "the venv's Python\n"
        f"{md_text(venv_python)}; {busy_text(record)}; started {record['started']} (UTC), "
        f"status {record['status']}. "
        f"Made by {md_code(record['command'])}.\n"
    )
    return f"{TITLE}\n\n{about}\n{steps_table(record['steps'])}\n\n{COLUMNS_MEANING}"


def render(out: Path, record: dict, readme: Optional[str], others=()) -> None:
    """OUT/README.md, and the README's block (readme) when given, over the record and the others
    ((folder, record) pairs)."""
    write_file(out / "README.md", results_markdown(record))
    if readme:
        records = []
        for folder, each in [(out, record), *others]:
            link = os.path.relpath((folder / "README.md").resolve(), Path(readme).resolve().parent)
            records.append((Path(link).as_posix(), each))
        line = readme_line(records)
        # --update-readme is the user's: followed wherever it leads
        write_file(readme, readme_with(Path(readme), {MARKERS: line + "\n"}), given=readme)
        print(f"{readme}: {line}")

"""What the quick start's measurements are written as, for benchmarks/quickstart.py: quickstart.json (the record,
rewritten after every step), OUT/README.md (a table of the steps, the machine, the commit and what each column
means) and the README's sentence between its <!-- quickstart:start --> and <!-- quickstart:end --> markers (how long
each quick-start line took, where and when); durations as a person reads them, and how each step ended, in words."""

import json
import os
import re
from pathlib import Path
from typing import Optional

import pandas as pd

from analysis.common import md_code, md_text
from analysis.markdown import markdown_table
from analysis.output import readme_with
from atomic import write_file, write_json
from benchmarks.quickstart_steps import DEMO_ENV, DEMO_SIZE, STEP_GROUPS

STATED_COMPILE = "torch"  # the framework whose compile time the README states
MARKERS = ("<!-- quickstart:start -->", "<!-- quickstart:end -->")
PLACEHOLDER = (
    "How long each line takes: not measured yet "
    "(`python -m benchmarks.quickstart --update-readme README.md` measures it from a fresh clone)."
)
RESULTS = "quickstart.json"
TITLE = "# The quick start, timed"  # OUT/README.md's first line: what tells it is this tool's
COMMAND = "python -m benchmarks.quickstart"  # how quickstart.json's "command" starts: what tells it is this tool's


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


def write_results(out: Path, record: dict) -> None:
    write_json(out / RESULTS, record)


# ------------------------------------------------------------------- what in --out this tool wrote (atomic.py)
def record_why_not(text: str) -> Optional[str]:
    """None when the text is a quickstart.json of this tool (its "command" is this tool's); else why not."""
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return "is not JSON, so not a quickstart.json of this tool"
    if not isinstance(record, dict) or not str(record.get("command", "")).startswith(COMMAND):
        return f'holds no "command" of {COMMAND}, so this tool did not write it'
    return None


def readme_why_not(text: str) -> Optional[str]:
    """None when the text is an OUT/README.md of this tool (its title first); else why not."""
    if text.partition("\n")[0] != TITLE:
        return f"does not start with {TITLE!r}, so this tool did not write it"
    return None


def written_logs(out: Path) -> list[Path]:
    """The logs of OUT/logs/ that OUT/quickstart.json lists (this tool's, of an earlier call): only plain names in
    OUT/logs/, whatever the record says."""
    path = out / RESULTS
    if not path.is_file() or record_why_not(path.read_text(errors="replace")):
        return []
    steps = json.loads(path.read_text()).get("steps")
    logs = (
        [step.get("log") for step in steps if isinstance(step, dict)]
        if isinstance(steps, list)
        else []
    )
    return [
        out / log
        for log in logs
        if isinstance(log, str) and re.fullmatch(r"logs/[A-Za-z0-9_.-]+\.log", log)
    ]


def foreign_logs(out: Path) -> list[str]:
    """The logs in OUT/logs/ that this tool did not write (a call removes its earlier logs: never these)."""
    ours = set(written_logs(out))
    return sorted(p.name for p in (out / "logs").glob("*.log") if p not in ours)


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
    return f"""{TITLE}

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

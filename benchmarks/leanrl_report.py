"""What benchmarks/leanrl.py writes: medians over rounds of each configuration's steady steps per second, whole-run
wall time and iteration 0, each against ppo_torch.py's; whether ppo_torch.py meets the goal (at least as fast as
LeanRL's best mode at steady state); and the markdown beside the JSON: the table, the machine, the versions, the
LeanRL commit, the shims and the commands."""

import shlex
import statistics
from typing import Optional

from benchmarks.common import ROOT, STEADY_FROM
from benchmarks.leanrl_runs import BASELINE, CONFIGS, TORCH
from benchmarks.quickstart_report import human

COLUMNS = ("steady_sps", "wall_s", "iter0_s")


def medians(results: dict) -> dict:
    """{config: the medians of its successful runs (and their count), or None when it has none}."""
    summary = {}
    for name, runs in results.items():
        done = [run for run in runs if "error" not in run]
        if not done:
            summary[name] = None
            continue
        med = {column: statistics.median(run[column] for run in done) for column in COLUMNS}
        reported = [run["reported_sps"] for run in done if run.get("reported_sps") is not None]
        med["reported_sps"] = statistics.median(reported) if reported else None
        med["runs"], med["failed"] = len(done), len(runs) - len(done)
        summary[name] = med
    return summary


def ratio(value: float, base: Optional[dict], column: str) -> str:
    return f"{value / base[column]:.2f}x" if base else "-"


def table(results: dict, baseline: str) -> str:
    """Medians per configuration; the ratios are to baseline's medians (ppo_torch.py)."""
    med = medians(results)
    base = med.get(baseline)
    lines = [
        "| config | runs | steady steps/s | steady vs torch | whole run | whole run vs torch "
        "| iteration 0 | LeanRL's own steps/s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, m in med.items():
        if m is None:
            failed = len(results[name])
            lines.append(f"| {name} | 0 of {failed} | failed | | | | | |")
            continue
        runs = f"{m['runs']}" + (f" of {m['runs'] + m['failed']}" if m["failed"] else "")
        reported = f"{m['reported_sps']:.0f}" if m["reported_sps"] is not None else ""
        cells = [
            name,
            runs,
            f"{m['steady_sps']:.0f}",
            ratio(m["steady_sps"], base, "steady_sps"),
            human(m["wall_s"]),
            ratio(m["wall_s"], base, "wall_s"),
            human(m["iter0_s"]),
            reported,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best(med: dict, names) -> Optional[str]:
    """The one of names with the most steady steps per second, among those measured."""
    measured = [name for name in names if med.get(name)]
    return max(measured, key=lambda name: med[name]["steady_sps"], default=None)


def goal_line(results: dict) -> str:
    """Whether ppo_torch.py (its best mode) is at least as fast as LeanRL's best mode at steady state."""
    med = medians(results)
    goal = "Goal (ppo_torch.py at least as fast as LeanRL's best mode at steady state)"
    theirs = best(med, [name for name in med if name in CONFIGS and CONFIGS[name].leanrl])
    ours = best(
        med, [name for name in med if name in CONFIGS and CONFIGS[name].script == TORCH.script]
    )
    if theirs is None or ours is None:
        return f"{goal}: not measured."
    rate, their_rate = med[ours]["steady_sps"], med[theirs]["steady_sps"]
    verdict = "met" if rate >= their_rate else "not met"
    return (
        f"{goal}: {verdict}. LeanRL's best is {theirs}, {their_rate:.0f} steps/s; ppo_torch.py's is {ours}, "
        f"{rate:.0f} steps/s ({rate / their_rate:.2f}x)."
    )


def shown(cmd: list[str]) -> str:
    """A command as the markdown shows it: paths inside the project relative to it."""
    return shlex.join(cmd).replace(f"{ROOT}/", "")


def shims_text(shims: list[dict]) -> str:
    return "\n".join(
        f"{i}. `{s['file']}`: `{s['old'].strip()}` becomes `{s['new'].strip()}`. Why: {s['why']}"
        for i, s in enumerate(shims, 1)
    )


def versions_text(versions: dict) -> str:
    return ", ".join(f"{name} {version}" for name, version in versions.items())


def markdown(record: dict) -> str:
    """The .md beside the JSON."""
    opts, machine = record["options"], record["machine"]
    gpu = f"; GPU: {machine['gpu']}" if machine.get("gpu") else "; no GPU"
    commands = "\n".join(f"- {name}: `{shown(cmd)}`" for name, cmd in record["commands"].items())
    n, steady = opts["num_iterations"], opts["num_iterations"] - STEADY_FROM
    return f"""# LeanRL side by side: HalfCheetah-v4, CleanRL's PPO settings

Medians of {record["rounds_done"]} rounds (of {opts["rounds"]}; status {record["status"]}), {n} iterations of
{record["batch_size"]} steps per run, on cores {opts["cpus"]} (OMP_NUM_THREADS={record["threads"]}) of
{machine["cores"]} ({machine["cpu_model"]}{", a VM" if machine.get("virtual_machine") else ""}{gpu}); started
{record["started"]} (UTC). Made by `{record["command"]}`.

{table(record["results"], BASELINE)}

{goal_line(record["results"])}

Steady steps/s: iterations {STEADY_FROM}+ (0-based; {steady} of them), by the loop's wall time, logging included.
LeanRL prints no time per iteration: its tqdm bar is timed as it arrives (the first time the bar shows n/{n} is the
end of the n-th iteration), from count {STEADY_FROM} to count {n}. Ours: time/elapsed at the end of iteration
{STEADY_FROM - 1} and of the last. LeanRL's own steps/s: the last `speed` it printed (every 10th iteration, over its
iterations {STEADY_FROM + 1}+ counted from 1: `--measure-burnin {STEADY_FROM + 1}`). Whole run: the process's wall
time from its start to its exit (imports, set-up, compile, every iteration). Iteration 0: the first iteration, which
compiles. Every run is a fresh process with empty TorchInductor and Triton caches and no JAX cache (a first run),
pinned to the cores above; the configurations alternate in a rotating order round by round. Ratios: a
configuration's median over {BASELINE}'s (ppo_torch.py); steady above 1 is faster than it, whole run above 1 slower.

LeanRL: {record["leanrl_repo"]} at `{record["leanrl_commit"]}`, run as it is but for these shims:

{shims_text(record["shims"])}

Versions. LeanRL's venv: {versions_text(record["versions"]["leanrl"])}. Ours:
{versions_text(record["versions"]["ours"])}.

Commands (SCRATCH: the run's own temporary folder, its working folder for LeanRL):

{commands}
"""


def header(record: dict) -> str:
    """What the terminal shows before the first run: LeanRL's commit, the shims, the versions."""
    return (
        f"LeanRL at {record['leanrl_commit'][:12]} ({record['leanrl_repo']}), run as it is but for these shims:\n"
        f"{shims_text(record['shims'])}\n"
        f"LeanRL's venv: {versions_text(record['versions']['leanrl'])}\n"
        f"ours: {versions_text(record['versions']['ours'])}"
    )

"""How much slower does each framework run when another process competes for its cores?

Each configuration (a script, its compile mode, and the environment variables it runs under) runs
the same short training twice per round: alone, and beside one CPU-bound process (a Python busy
loop) pinned to the same cores. Every run is a fresh process pinned to --cpus cores, with
OMP_NUM_THREADS set to their number unless the configuration sets it. Configurations and conditions
alternate in a rotating order, so that a machine that gets busier or quieter slows all of them
alike; the table reports medians over rounds.

Columns: wall = the run's total_s (summary.json); cpu = the user + system CPU seconds of the run's
process (its own, not the competitor's); steady = the mean time/iteration over the study's steady
iterations. The growth columns divide the busy median by the alone median, and "vs linen" divides a
configuration's wall growth by Linen's: more than 1.00x means that it degrades more than Linen does.

    python -m benchmarks.busy_machine --cpus 0-1 --rounds 3 --num-iterations 20
    python -m benchmarks.busy_machine --configs "linen jit" "torch compile" "torch compile passive"
"""

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from atomic import check_outputs, write_outputs, write_record
from benchmarks.common import (
    ROOT,
    busy_loops,
    check_choices,
    check_envs,
    check_or_exit,
    run_series,
    steady_mean,
)
from core import study
from tools import launch

TOOL = "benchmarks.busy_machine"
# name: (script, compile mode, extra environment)
CONFIGS = {
    "linen jit": ("ppo_linen.py", "jit", {}),
    "torch compile": ("ppo_torch.py", "compile", {}),
    "torch compile 1 thread": ("ppo_torch.py", "compile", {"OMP_NUM_THREADS": "1"}),
    "torch compile passive": ("ppo_torch.py", "compile", {"OMP_WAIT_POLICY": "passive"}),
}
CONDITIONS = ("alone", "busy")
COLUMNS = ("wall_s", "cpu_s", "steady_s")
BASELINE = "linen jit"


def core_set(text: str) -> set[int]:
    """The cores of a `taskset -c` list such as 0-1 or 0,2-3."""
    cores = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cores.update(range(int(first), int(last or first) + 1))
    return cores


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(name: str, busy: bool, opts) -> dict:
    """One run of the configuration, alone or beside the busy loop; its wall, CPU and steady
    seconds."""
    script, mode, extra_env = CONFIGS[name]
    env = {"OMP_NUM_THREADS": str(len(opts.cores)), **extra_env}
    args = ["--env", opts.env, "--model-size", opts.model_size, "--compile", mode]
    args += ["--num-iterations", str(opts.num_iterations), "--seed", "1"]
    with busy_loops(1 if busy else 0), tempfile.TemporaryDirectory() as log_dir:
        # counted before the competitor is reaped: RUSAGE_CHILDREN holds only waited-for children
        cpu_before = children_cpu_seconds()
        proc = launch.run_script(script, *args, log_dir=log_dir, env=env, timeout=opts.timeout)
        cpu_s = children_cpu_seconds() - cpu_before
        if proc.returncode != 0:
            raise RuntimeError(f"{name} ({script}) failed:\n{proc.stderr[-2000:]}")
        (run_dir,) = Path(log_dir).iterdir()
        run = run_series(run_dir)
    return {
        "wall_s": run["summary"]["total_s"],
        "cpu_s": cpu_s,
        "steady_s": steady_mean(run),
    }


def medians(results: dict) -> dict:
    """{config: {condition: {column: median over rounds}}}."""
    return {
        name: {
            condition: {column: statistics.median(r[column] for r in runs) for column in COLUMNS}
            for condition, runs in by_condition.items()
        }
        for name, by_condition in results.items()
    }


def growth(median: dict, column: str) -> float:
    return median["busy"][column] / median["alone"][column]


def table(results: dict, title: str) -> str:
    med = medians(results)
    lines = [
        title,
        "",
        "| config | wall alone s | wall busy s | cpu alone s | cpu busy s | steady alone s/it "
        "| steady busy s/it | wall growth | steady growth | wall growth vs linen |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, m in med.items():
        cells = [f"{m[c][column]:.2f}" for column in COLUMNS for c in CONDITIONS]
        cells += [f"{growth(m, 'wall_s'):.2f}x", f"{growth(m, 'steady_s'):.2f}x"]
        versus = ""
        if BASELINE in med and name != BASELINE:
            versus = f"{growth(m, 'wall_s') / growth(med[BASELINE], 'wall_s'):.2f}x"
        cells.append(versus)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def rotated(items: list, shift: int) -> list:
    shift %= len(items)
    return items[shift:] + items[:shift]


def run_all(opts) -> dict:
    """Every configuration alone and busy, round after round, in a rotating order; saved after each
    run."""
    results = {name: {condition: [] for condition in CONDITIONS} for name in opts.configs}
    pairs = [(name, condition) for name in opts.configs for condition in CONDITIONS]
    started = time.perf_counter()
    done, total = 0, opts.rounds * len(pairs)
    for round_index in range(opts.rounds):
        for name, condition in rotated(pairs, round_index):
            result = run_once(name, condition == "busy", opts)
            results[name][condition].append(result)
            done += 1
            eta = (time.perf_counter() - started) / done * (total - done)
            numbers = " ".join(f"{column} {result[column]:.2f}" for column in COLUMNS)
            print(f"[{done}/{total}] {name} {condition}: {numbers} | ETA {eta:.0f}s", flush=True)
            write_record(TOOL, opts.out, {"options": opts.recorded, "results": results}, opts.out)
    return results


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--env", default="Acrobot-v1")
    parser.add_argument("--model-size", default="small")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--num-iterations", type=int, default=20)
    parser.add_argument("--cpus", default="0-1", help="pin everything to these cores (e.g. 0-1)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run at most")
    parser.add_argument(
        "--out",
        default=str(ROOT / "runs" / f"busy_machine_{int(time.time())}.json"),
        help="the results as JSON, after each run (a .json file); the table beside it as .md",
    )
    opts = parser.parse_args(argv)
    if opts.rounds < 1 or opts.num_iterations < 1:
        parser.error("--rounds and --num-iterations must be positive integers")
    try:
        opts.cores = core_set(opts.cpus)
    except ValueError:
        parser.error(f"--cpus must be a core list such as 0-1 or 0,2, got {opts.cpus!r}")
    opts.recorded = {k: v for k, v in vars(opts).items() if k != "cores"}
    check_or_exit(lambda: check_paths_and_names(opts))
    return opts


def check_paths_and_names(opts) -> None:
    """BadOption or OutputRefused (atomic.py) for an env, size or --out the runs would fail on or
    lose data by."""
    if not opts.timeout > 0:
        raise ValueError(f"--timeout {opts.timeout}: give a positive number of seconds")
    check_envs("--env", [opts.env])
    check_choices("--model-size", [opts.model_size], list(study.load().sizes))
    check_outputs(TOOL, opts.out)


def main(argv=None) -> int:
    opts = parse_args(argv)
    # inherited by every run and the competitor: the same cores for all
    os.sched_setaffinity(0, opts.cores)
    results = run_all(opts)
    title = (
        f"**{opts.env}, {opts.model_size}**: medians of {opts.rounds} rounds of "
        f"{opts.num_iterations} iterations on cores {opts.cpus}, alone and beside one busy loop"
    )
    text = table(results, title)
    write_outputs(TOOL, opts.out, {"options": opts.recorded, "results": results}, text, opts.out)
    print("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

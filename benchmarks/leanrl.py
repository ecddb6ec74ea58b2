"""LeanRL side by side: LeanRL's PPO for continuous actions (its torchcompile script with --compile,
without, with --compile --cudagraphs on a GPU; its plain script, CleanRL's) against ppo_torch.py and
ppo_linen.py (--env-backend envpool, the same MuJoCo model) on HalfCheetah-v4 under CleanRL's
settings (study.toml's exp9), each run a fresh process with no compile cache, pinned to --cpus with
one OMP thread per core, the configurations in a rotating order round by round. Reported, medians
over rounds: steady steps per second (LeanRL's progress bar timed as it arrives), whole-run wall
time and iteration 0, each against ppo_torch.py's. LeanRL's files at --leanrl-commit are shimmed for
today's packages (listed in the output) and run in a venv of their own from
benchmarks/leanrl-requirements.txt (made once in --work-dir, unless --leanrl-python is given).

    python -m benchmarks.leanrl             # 5 rounds of 20 iterations on cores 0-1 (~70 minutes)
    python -m benchmarks.leanrl --dry-run   # the shims and the commands; runs nothing
    python -m benchmarks.leanrl --rounds 1 --configs "leanrl eager" "torch compile"

Output: --out (default results/benchmarks/leanrl_cpu.json, _gpu with a GPU) and the .md beside it,
rewritten after every run (files there this tool did not write are refused); each run's output in
--work-dir/logs/. Exit status: 0; 1 when a run failed (the others go on) or LeanRL cannot be set
up; 2 for bad input (one line, before anything is made); 130 when interrupted (what was measured is
kept).
"""

import argparse
import os
import re
import shlex
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Optional

from analysis.common import BadInput
from atomic import OutputRefused, check_inside, check_outputs, write_outputs
from benchmarks import leanrl_runs as runs
from benchmarks.busy_machine import core_set, rotated
from benchmarks.common import (
    ROOT,
    STEADY_FROM,
    VENV_PYTHON,
    Parser,
    gpus,
    human,
    interpreter_versions,
    machine,
    run_recorded,
)
from benchmarks.leanrl_runs import COMPILED, PLAIN, Config, Plan
from core import study

TOOL = "benchmarks.leanrl"
HEX = re.compile(r"[0-9a-f]{7,40}")
COLUMNS = ("steady_sps", "wall_s", "iter0_s")


def our_config(framework: str, mode: str, gpu_only: bool = False) -> Config:
    script = study.load().frameworks[framework].script
    return Config(f"{framework} {mode}", script, ("--compile", mode), False, gpu_only)


TORCH = our_config("torch", study.load().default_compile("torch"))
CONFIG_LIST = (
    Config("leanrl compile", COMPILED, ("--compile",), True),
    Config("leanrl eager", COMPILED, (), True),
    Config("leanrl plain", PLAIN, (), True),
    Config("leanrl cudagraphs", COMPILED, ("--compile", "--cudagraphs"), True, gpu_only=True),
    TORCH,
    our_config("torch", "cudagraphs", gpu_only=True),
    our_config("linen", study.load().default_compile("linen")),
)
CONFIGS = {config.name: config for config in CONFIG_LIST}
BASELINE = TORCH.name


# ------------------------------------------------------------------------------------- options
def parser() -> Parser:
    p = Parser(prog="python -m " + TOOL, description=__doc__)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--configs", nargs="+", choices=list(CONFIGS), help="default: all it can run")
    p.add_argument("--rounds", type=int, default=5)
    iterations = "per run; a multiple of 10 lets LeanRL's own speed cover the same iterations"
    p.add_argument("--num-iterations", type=int, default=20, help=iterations)
    p.add_argument("--cpus", default="0-1", help="pin every run to these cores (e.g. 0-1)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run at most")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--leanrl-dir", help="a LeanRL checkout to read its files from")
    source.add_argument("--leanrl-repo", default=runs.LEANRL_REPO, help="cloned into --work-dir")
    p.add_argument("--leanrl-commit", default=runs.LEANRL_COMMIT, help="default: %(default)s")
    p.add_argument("--leanrl-python", help="an interpreter with LeanRL's packages (no venv made)")
    p.add_argument("--work-dir", default=str(ROOT / "runs" / "leanrl"), help="default: %(default)s")
    p.add_argument("--out", help="JSON, the .md beside it (default: see above)")
    p.add_argument("--dry-run", action="store_true", help="print the shims and commands only")
    return p


def checked(opts: argparse.Namespace, gpu: bool) -> argparse.Namespace:
    """opts with cores, configs and out settled; BadInput naming the bad value and what would do."""
    if opts.rounds < 1:
        raise BadInput(f"--rounds {opts.rounds}: give 1 or more")
    if opts.num_iterations < STEADY_FROM + 2:
        raise BadInput(
            f"--num-iterations {opts.num_iterations}: give {STEADY_FROM + 2} or more "
            f"(steady state is iterations {STEADY_FROM}+)"
        )
    if not opts.timeout > 0:
        raise BadInput(f"--timeout {opts.timeout}: give a positive number of seconds")
    if not HEX.fullmatch(opts.leanrl_commit):
        commit = opts.leanrl_commit
        raise BadInput(f"--leanrl-commit {commit!r}: give a commit hash (7 to 40 hex digits)")
    if opts.leanrl_repo.startswith("-"):
        raise BadInput(f"--leanrl-repo {opts.leanrl_repo!r}: give a git URL or path")
    if opts.leanrl_dir and not Path(opts.leanrl_dir, ".git").exists():
        raise BadInput(f"--leanrl-dir {opts.leanrl_dir}: not a git checkout")
    if opts.leanrl_python and not os.access(opts.leanrl_python, os.X_OK):
        raise BadInput(f"--leanrl-python {opts.leanrl_python}: no such executable")
    opts.cores = checked_cores(opts.cpus)
    opts.configs = checked_configs(opts.configs, gpu)
    device = "gpu" if gpu else "cpu"
    opts.out = opts.out or str(ROOT / "results" / "benchmarks" / f"leanrl_{device}.json")
    return opts


def checked_cores(text: str) -> set[int]:
    available = os.sched_getaffinity(0)
    try:
        cores = core_set(text)
    except ValueError:
        raise BadInput(f"--cpus {text!r}: give a core list such as 0-1 or 0,2") from None
    if not cores or not cores <= available:
        raise BadInput(f"--cpus {text}: not among this process's cores {sorted(available)}")
    return cores


def checked_configs(names: Optional[list[str]], gpu: bool) -> list[str]:
    if names is None:
        return [name for name, config in CONFIGS.items() if gpu or not config.gpu_only]
    needing = [name for name in names if CONFIGS[name].gpu_only and not gpu]
    if needing:
        needs = "needs an NVIDIA GPU (nvidia-smi lists none)"
        raise BadInput(f"--configs {', '.join(needing)}: {needs}")
    return list(dict.fromkeys(names))


# -------------------------------------------------------------------------------- the rounds
def eta_seconds(durations: dict[str, list[float]], remaining: list[str]) -> float:
    """The remaining runs' time: each configuration's mean so far, else the mean of all runs."""
    every = [d for runs in durations.values() for d in runs]
    overall = statistics.mean(every) if every else 0.0
    means = {name: statistics.mean(runs) for name, runs in durations.items() if runs}
    return sum(means.get(name, overall) for name in remaining)


def outcome(result: dict) -> str:
    """A run's result in one line: its numbers, or why it failed and where its output is."""
    if "error" in result:
        return f"failed ({result['error'].splitlines()[0][:200]}; log {result['log']})"
    return (
        f"steady {result['steady_sps']:.0f} steps/s, whole run {human(result['wall_s'])}, "
        f"iteration 0 {human(result['iter0_s'])}"
    )


def run_rounds(opts, plan: Plan, record: dict) -> None:
    """Every configuration once a round, in a rotating order; the record saved after every run."""
    order = [(r, name) for r in range(opts.rounds) for name in rotated(opts.configs, r)]
    durations = {name: [] for name in opts.configs}
    for done, (r, name) in enumerate(order, 1):
        # the line is finished when the run is: one line per run
        print(f"[{done}/{len(order)}] round {r + 1}/{opts.rounds}, {name}:", end=" ", flush=True)
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="leanrl-run-") as scratch:
            log_name = f"round{r + 1}-{name.replace(' ', '-')}.log"
            result = runs.run_config(CONFIGS[name], plan, log_name, Path(scratch))
        durations[name].append(time.perf_counter() - started)
        record["results"][name].append(result)
        record["rounds_done"] = r + (done % len(opts.configs) == 0)
        write_outputs(TOOL, opts.out, record, markdown(record), opts.out)
        eta = eta_seconds(durations, [n for _, n in order[done:]])
        print(f"{outcome(result)} | ETA {human(eta)}", flush=True)


def versions(python) -> dict:
    return interpreter_versions(python, runs.PACKAGES, error=runs.SetupError)


def plan_commands(opts, plan: Plan) -> dict[str, list[str]]:
    """Each configuration's command, its run's own temporary folder shown as SCRATCH."""
    return {
        name: runs.command(CONFIGS[name], plan, Path("SCRATCH", "runs")) for name in opts.configs
    }


def new_record(opts, argv, commit: str, plan: Plan) -> dict:
    python = plan.leanrl_python
    return {
        "command": shlex.join(["python", "-m", TOOL, *argv]),
        "status": "running",
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {**machine(), "cores": os.cpu_count(), "gpu": (gpus() or [None])[0]},
        "options": {k: v for k, v in vars(opts).items() if k != "cores"},
        "threads": len(opts.cores),
        "batch_size": runs.batch_size(),
        "leanrl_repo": opts.leanrl_dir or opts.leanrl_repo,
        "leanrl_commit": commit,
        "shims": runs.shim_records(),
        "versions": {"leanrl": versions(python), "ours": versions(sys.executable)},
        "commands": plan_commands(opts, plan),
        "rounds_done": 0,
        "results": {name: [] for name in opts.configs},
    }


def measure(opts, argv: list[str]) -> int:
    """Fetches and shims LeanRL, sets its venv up, runs every round; the exit status."""
    work = Path(opts.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    leanrl_dir = Path(opts.leanrl_dir) if opts.leanrl_dir else None
    commit, scripts = runs.fetch_scripts(work, opts.leanrl_commit, opts.leanrl_repo, leanrl_dir)
    python = opts.leanrl_python or str(runs.ensure_venv(work / "venv"))
    logs = work / "logs" / time.strftime("%Y%m%d-%H%M%S")
    check_inside(work, logs, "--work-dir").mkdir(parents=True)  # no link below --work-dir
    plan = Plan(opts.num_iterations, len(opts.cores), opts.timeout, logs, python, scripts)
    record = new_record(opts, argv, commit, plan)
    print(leanrl_text(record), flush=True)
    print(f"results: {opts.out}; each run's output: {logs}", flush=True)
    if not run_recorded(TOOL, opts.out, record, markdown, partial(run_rounds, opts, plan, record)):
        return 130
    failed = any("error" in run for done in record["results"].values() for run in done)
    return 1 if failed else 0


def dry_run(opts) -> int:
    """The shims and each configuration's command, as measure would run them; runs nothing."""
    work = Path(opts.work_dir)
    folder = work / f"leanrl-{opts.leanrl_commit[:12]}"
    scripts = {path: folder / Path(path).name for path in runs.SCRIPTS}
    python = opts.leanrl_python or str(work / "venv" / VENV_PYTHON)
    plan = Plan(opts.num_iterations, len(opts.cores), opts.timeout, work / "logs", python, scripts)
    for i, shim in enumerate(runs.SHIMS, 1):
        print(f"shim {i}: {shim.file}: {shim.old.strip()!r} -> {shim.new.strip()!r}")
    for name, cmd in plan_commands(opts, plan).items():
        print(f"{name}: {shlex.join(cmd)}")
    return 0


# ---------------------------------------------------------------------------------- the report
def medians(results: dict) -> dict:
    """{config: the medians of its successful runs (and their count), or None when it has none}."""
    summary = {}
    for name, done in results.items():
        ok = [run for run in done if "error" not in run]
        if not ok:
            summary[name] = None
            continue
        med = {column: statistics.median(run[column] for run in ok) for column in COLUMNS}
        reported = [run["reported_sps"] for run in ok if run.get("reported_sps") is not None]
        med["reported_sps"] = statistics.median(reported) if reported else None
        med["runs"], med["failed"] = len(ok), len(done) - len(ok)
        summary[name] = med
    return summary


def table(results: dict, baseline: str) -> str:
    """Medians per configuration; the ratios are to baseline's medians (ppo_torch.py)."""
    med = medians(results)
    base = med.get(baseline)

    def ratio(m: dict, column: str) -> str:
        return f"{m[column] / base[column]:.2f}x" if base else "-"

    lines = [
        "| config | runs | steady steps/s | steady vs torch | whole run | whole run vs torch "
        "| iteration 0 | LeanRL's own steps/s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, m in med.items():
        if m is None:
            lines.append(f"| {name} | 0 of {len(results[name])} | failed | | | | | |")
            continue
        runs_done = f"{m['runs']}" + (f" of {m['runs'] + m['failed']}" if m["failed"] else "")
        reported = f"{m['reported_sps']:.0f}" if m["reported_sps"] is not None else ""
        cells = [name, runs_done, f"{m['steady_sps']:.0f}", ratio(m, "steady_sps")]
        cells += [human(m["wall_s"]), ratio(m, "wall_s"), human(m["iter0_s"]), reported]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best(med: dict, names) -> Optional[str]:
    """The one of names with the most steady steps per second, among those measured."""
    measured = [name for name in names if med.get(name)]
    return max(measured, key=lambda name: med[name]["steady_sps"], default=None)


def goal_line(results: dict) -> str:
    """Whether ppo_torch.py's best mode is as fast as LeanRL's best at steady state, or faster."""
    med = medians(results)
    goal = "Goal (ppo_torch.py at least as fast as LeanRL's best mode at steady state)"
    known = [CONFIGS[name] for name in med if name in CONFIGS]
    theirs = best(med, [config.name for config in known if config.leanrl])
    ours = best(med, [config.name for config in known if config.script == TORCH.script])
    if theirs is None or ours is None:
        return f"{goal}: not measured."
    rate, their_rate = med[ours]["steady_sps"], med[theirs]["steady_sps"]
    verdict = "met" if rate >= their_rate else "not met"
    return (
        f"{goal}: {verdict}. LeanRL's best is {theirs}, {their_rate:.0f} steps/s; ppo_torch.py's "
        f"is {ours}, {rate:.0f} steps/s ({rate / their_rate:.2f}x)."
    )


def shims_text(shims: list[dict]) -> str:
    return "\n".join(
        f"{i}. `{s['file']}`: `{s['old'].strip()}` becomes `{s['new'].strip()}`. Why: {s['why']}"
        for i, s in enumerate(shims, 1)
    )


def versions_text(versions: dict) -> str:
    return ", ".join(f"{name} {version}" for name, version in versions.items())


def markdown(record: dict) -> str:
    """The .md beside the JSON: the table, the goal, how it was measured, LeanRL's commit and
    shims, the versions and the commands (paths inside the project relative to it)."""
    r, opts, box = record, record["options"], record["machine"]
    gpu = f"; GPU: {box['gpu']}" if box.get("gpu") else "; no GPU"
    vm = ", a VM" if box.get("virtual_machine") else ""
    commands = "\n".join(
        f"- {name}: `{shlex.join(cmd).replace(f'{ROOT}/', '')}`"
        for name, cmd in r["commands"].items()
    )
    n, steady, first = opts["num_iterations"], opts["num_iterations"] - STEADY_FROM, STEADY_FROM
    return f"""# LeanRL side by side: HalfCheetah-v4, CleanRL's PPO settings

Medians of {r["rounds_done"]} rounds (of {opts["rounds"]}; status {r["status"]}), {n} iterations of
{r["batch_size"]} steps per run, on cores {opts["cpus"]} (OMP_NUM_THREADS={r["threads"]}) of
{box["cores"]} ({box["cpu_model"]}{vm}{gpu}); started
{r["started"]} (UTC). Made by `{r["command"]}`.

{table(r["results"], BASELINE)}

{goal_line(r["results"])}

Steady steps/s: iterations {first}+ (0-based; {steady} of them), by the loop's wall time, logging
included. LeanRL prints no time per iteration: its tqdm bar is timed as it arrives (the first time
the bar shows n/{n} is the end of the n-th iteration), from count {first} to count {n}. Ours:
time/elapsed at the end of iteration {first - 1} and of the last. LeanRL's own steps/s: the last
`speed` it printed (every 10th iteration, over its iterations {first + 1}+ counted from 1:
`--measure-burnin {first + 1}`). Whole run: the process's wall time from its start to its exit
(imports, set-up, compile, every iteration). Iteration 0: the first iteration, which compiles.
Every run is a fresh process with empty TorchInductor and Triton caches and no JAX cache (a first
run), pinned to the cores above; the configurations alternate in a rotating order round by round.
Ratios: a configuration's median over {BASELINE}'s (ppo_torch.py); steady above 1 is faster than
it, whole run above 1 slower.

{leanrl_text(r)}

Commands (SCRATCH: the run's own temporary folder, its working folder for LeanRL):

{commands}
"""


def leanrl_text(record: dict) -> str:
    """LeanRL's commit, the shims and the versions: in the .md and before the first run."""
    repo, commit, versions = record["leanrl_repo"], record["leanrl_commit"], record["versions"]
    return f"""LeanRL: {repo} at `{commit}`, run as it is but for these shims:

{shims_text(record["shims"])}

Versions. LeanRL's venv: {versions_text(versions["leanrl"])}. Ours:
{versions_text(versions["ours"])}."""


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = checked(parser().parse_args(argv), bool(gpus()))
        if opts.dry_run:
            return dry_run(opts)
        check_outputs(TOOL, opts.out)
    except (BadInput, OutputRefused) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # inherited by every run: the same cores for all
    os.sched_setaffinity(0, opts.cores)
    try:
        return measure(opts, argv)
    except runs.SetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted before the first run", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

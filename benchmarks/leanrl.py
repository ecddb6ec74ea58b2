"""LeanRL side by side: LeanRL's PPO for continuous actions against ppo_torch.py and ppo_linen.py on HalfCheetah-v4.

What runs (benchmarks/leanrl_runs.py): LeanRL's ppo_continuous_action_torchcompile.py with --compile ("leanrl
compile"), without it ("leanrl eager": LeanRL's own code, eager) and, where there is an NVIDIA GPU, with --compile
--cudagraphs ("leanrl cudagraphs", the mode of LeanRL's GPU numbers); its ppo_continuous_action.py, CleanRL's
script ("leanrl plain"); ppo_torch.py in its default mode (and --compile cudagraphs on a GPU) and ppo_linen.py in
its own, both with --env-backend envpool (the same MuJoCo model). All train CleanRL's configuration of
ppo_continuous_action.py (1 env x 2048 steps, 32 minibatches x 10 epochs), read from study.toml's exp9, for
--num-iterations iterations, in a fresh process each, pinned to --cpus with one OMP thread per core, in a rotating
order round by round. Reported (medians over rounds): steady steps per second (iterations 8+, by the loop's wall
time: LeanRL prints no time per iteration, so its progress bar is timed as it arrives), whole-run wall time and
iteration 0, each against ppo_torch.py's. No compile cache is kept from run to run (TorchInductor's, Triton's and
JAX's start empty), on either side: a whole run is a first run, compile included (about 6 minutes for LeanRL's
--compile on 2 cores), and the steady state does not depend on it.

LeanRL (benchmarks/leanrl_source.py): its two files at --leanrl-commit (default: pinned), read from --leanrl-dir (a
checkout) or a clone of --leanrl-repo in --work-dir, with the shims today's packages need, listed in the output;
its venv (benchmarks/leanrl_env.py): --work-dir/venv from benchmarks/leanrl-requirements.txt (torch's CPU build
without a GPU), made once, unless --leanrl-python names an interpreter that has them.

    python -m benchmarks.leanrl                  # 5 rounds of 20 iterations on cores 0-1 (about 70 minutes here)
    python -m benchmarks.leanrl --dry-run        # the shims and the commands; runs nothing
    python -m benchmarks.leanrl --rounds 1 --configs "leanrl eager" "torch compile"

Output: --out (default results/benchmarks/leanrl_cpu.json, leanrl_gpu.json with a GPU) and the .md beside it,
rewritten after every run (files there that this tool did not write, its mark absent, are refused: atomic.py's
check_outputs; the committed, hand-annotated leanrl_cpu.* among them); each run's output in --work-dir/logs/. A line per run with an ETA. Exit status: 0, 1 when
a run failed (recorded, the others go on) or LeanRL cannot be fetched or set up, 2 for bad input (one line, before
anything is created), 130 when interrupted (what was measured is kept).
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
from pathlib import Path
from typing import Optional

from analysis.common import BadInput
from atomic import OutputRefused, check_outputs, write_outputs
from benchmarks.busy_machine import core_set, rotated
from benchmarks.common import ROOT, STEADY_FROM
from benchmarks.leanrl_env import EnvError, ensure_venv, gpus, venv_python, versions
from benchmarks.leanrl_report import header, markdown
from benchmarks.leanrl_runs import CONFIGS, Plan, batch_size, command, run_config
from benchmarks.leanrl_source import (
    LEANRL_COMMIT,
    LEANRL_REPO,
    SCRIPTS,
    ShimMismatch,
    SourceError,
    fetch_scripts,
    shim_records,
)
from benchmarks.quickstart_clone import machine
from benchmarks.quickstart_report import human

TOOL = "benchmarks.leanrl"
HEX = re.compile(r"[0-9a-f]{7,40}")


class Parser(argparse.ArgumentParser):
    """argparse's complaints as BadInput: one line, exit status 2."""

    def error(self, message):
        raise BadInput(message)


def parser() -> Parser:
    p = Parser(
        prog="python -m benchmarks.leanrl",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--configs", nargs="+", choices=list(CONFIGS), help="default: all (GPU ones with a GPU)"
    )
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument(
        "--num-iterations",
        type=int,
        default=20,
        help="per run; a multiple of 10 lets LeanRL's own speed cover the same iterations",
    )
    p.add_argument("--cpus", default="0-1", help="pin every run to these cores (e.g. 0-1)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run at most")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--leanrl-dir", help="a LeanRL checkout to read its files from")
    source.add_argument(
        "--leanrl-repo", default=LEANRL_REPO, help="cloned into --work-dir otherwise"
    )
    p.add_argument("--leanrl-commit", default=LEANRL_COMMIT, help="default: %(default)s")
    p.add_argument(
        "--leanrl-python", help="an interpreter with LeanRL's packages (no venv is made)"
    )
    p.add_argument("--work-dir", default=str(ROOT / "runs" / "leanrl"), help="default: %(default)s")
    p.add_argument(
        "--out", help="JSON; the .md beside it (default: results/benchmarks/leanrl_cpu.json)"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the shims and commands, run nothing"
    )
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
        raise BadInput(
            f"--leanrl-commit {opts.leanrl_commit!r}: give a commit hash (7 to 40 hex digits)"
        )
    if opts.leanrl_repo.startswith("-"):
        raise BadInput(f"--leanrl-repo {opts.leanrl_repo!r}: give a git URL or path")
    if opts.leanrl_dir and not Path(opts.leanrl_dir, ".git").exists():
        raise BadInput(f"--leanrl-dir {opts.leanrl_dir}: not a git checkout")
    if opts.leanrl_python and not os.access(opts.leanrl_python, os.X_OK):
        raise BadInput(f"--leanrl-python {opts.leanrl_python}: no such executable")
    opts.cores = checked_cores(opts.cpus)
    opts.configs = checked_configs(opts.configs, gpu)
    opts.out = opts.out or str(
        ROOT / "results" / "benchmarks" / f"leanrl_{'gpu' if gpu else 'cpu'}.json"
    )
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
        raise BadInput(
            f"--configs {', '.join(needing)}: needs an NVIDIA GPU (nvidia-smi lists none)"
        )
    return list(dict.fromkeys(names))


def parse_args(argv: list[str]) -> argparse.Namespace:
    return checked(parser().parse_args(argv), bool(gpus()))


# ---------------------------------------------------------------------------------------------- running
def eta_seconds(durations: dict[str, list[float]], remaining: list[str]) -> float:
    """The time the remaining runs should take: each configuration's mean so far, else the mean of all runs."""
    every = [d for runs in durations.values() for d in runs]
    overall = statistics.mean(every) if every else 0.0
    return sum(
        statistics.mean(durations[name]) if durations.get(name) else overall for name in remaining
    )


def outcome(result: dict) -> str:
    """A run's result in one line: its numbers, or why it failed and where its output is."""
    if "error" in result:
        return f"failed ({result['error'].splitlines()[0][:200]}; log {result['log']})"
    return (
        f"steady {result['steady_sps']:.0f} steps/s, whole run {human(result['wall_s'])}, "
        f"iteration 0 {human(result['iter0_s'])}"
    )


def save(opts, record: dict) -> None:
    write_outputs(TOOL, opts.out, record, markdown(record))


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
            result = run_config(CONFIGS[name], plan, log_name, Path(scratch))
        durations[name].append(time.perf_counter() - started)
        record["results"][name].append(result)
        record["rounds_done"] = r + (done % len(opts.configs) == 0)
        save(opts, record)
        eta = eta_seconds(durations, [n for _, n in order[done:]])
        print(f"{outcome(result)} | ETA {human(eta)}", flush=True)


def new_record(opts, argv, commit: str, leanrl_python: str, plan: Plan) -> dict:
    return {
        "command": shlex.join(["python", "-m", "benchmarks.leanrl", *argv]),
        "status": "running",
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {**machine(), "cores": os.cpu_count(), "gpu": (gpus() or [None])[0]},
        "options": {k: v for k, v in vars(opts).items() if k != "cores"},
        "threads": len(opts.cores),
        "batch_size": batch_size(),
        "leanrl_repo": opts.leanrl_dir or opts.leanrl_repo,
        "leanrl_commit": commit,
        "shims": shim_records(),
        "versions": {"leanrl": versions(leanrl_python), "ours": versions(sys.executable)},
        "commands": {name: plan_command(name, plan) for name in opts.configs},
        "rounds_done": 0,
        "results": {name: [] for name in opts.configs},
    }


def plan_command(name: str, plan: Plan) -> list[str]:
    return command(CONFIGS[name], plan, Path("SCRATCH", "runs"))


def measure(opts, argv: list[str]) -> int:
    """Fetches and shims LeanRL, sets its venv up, runs every round; the exit status."""
    work = Path(opts.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    commit, scripts = fetch_scripts(work, opts.leanrl_commit, opts.leanrl_repo, leanrl_dir(opts))
    python = opts.leanrl_python or str(ensure_venv(work / "venv"))
    logs = work / "logs" / time.strftime("%Y%m%d-%H%M%S")
    logs.mkdir(parents=True)
    plan = Plan(opts.num_iterations, len(opts.cores), opts.timeout, logs, python, scripts)
    record = new_record(opts, argv, commit, python, plan)
    print(header(record), flush=True)
    print(f"results: {opts.out}; each run's output: {logs}", flush=True)
    save(opts, record)
    try:
        run_rounds(opts, plan, record)
        record["status"] = "finished"
    except KeyboardInterrupt:
        record["status"] = "interrupted"
    save(opts, record)
    print("\n" + markdown(record), flush=True)
    if record["status"] == "interrupted":
        print(f"interrupted: what was measured is kept in {opts.out}", file=sys.stderr)
        return 130
    failed = any("error" in run for runs in record["results"].values() for run in runs)
    return 1 if failed else 0


def leanrl_dir(opts) -> Optional[Path]:
    return Path(opts.leanrl_dir) if opts.leanrl_dir else None


def dry_run(opts) -> int:
    """The shims and each configuration's command, as measure would run them; nothing is fetched or run."""
    work = Path(opts.work_dir)
    folder = work / f"leanrl-{opts.leanrl_commit[:12]}"
    scripts = {path: folder / Path(path).name for path in SCRIPTS}
    python = opts.leanrl_python or str(venv_python(work / "venv"))
    plan = Plan(opts.num_iterations, len(opts.cores), opts.timeout, work / "logs", python, scripts)
    for i, shim in enumerate(shim_records(), 1):
        print(f"shim {i}: {shim['file']}: {shim['old'].strip()!r} -> {shim['new'].strip()!r}")
    for name in opts.configs:
        print(f"{name}: {shlex.join(plan_command(name, plan))}")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = parse_args(argv)
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
    except (SourceError, ShimMismatch, EnvError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted before the first run", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""Where an accelerator starts to pay: one PPO script on one env at growing --num-envs, a fresh
process each, on the device at hand (a TPU chip, or its host's CPU with JAX_PLATFORMS=cpu). For
each batch: the whole process (total_s), its setup, iteration 0, the steady iteration, and env
steps per second over the steady iterations and over the whole process.

    python -m benchmarks.batch_sweep --out results/tpu-v5e/batch/chip.json
    JAX_PLATFORMS=cpu python -m benchmarks.batch_sweep --out results/tpu-v5e/batch/host.json

A record already at --out is taken up again: the batches it holds are kept and not run again, so
a sweep stopped by its --deadline (a lent chip's window) goes on where it stopped when the same
command is run again. A batch whose run would start after the deadline is left for that next
call; a run still going at the deadline is stopped and left out. Exit status 2 for bad input (one
line, before anything runs), 130 when interrupted (what was measured is kept).
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from atomic import check_outputs, write_outputs
from benchmarks.common import (
    STEADY_FROM,
    BadOption,
    check_counts,
    check_or_exit,
    machine,
    machine_text,
    run_series,
    steady_mean,
)
from core import runlog
from tools import launch

TOOL = "benchmarks.batch_sweep"
NUM_ENVS = (4, 16, 64, 256, 1024, 4096, 16384)
# a run is not started with less time left than this before the deadline: the chip's opening, the
# imports and the compile alone take about 40 s
LEAST_S = 60


def run_batch(opts, num_envs: int, timeout: float) -> dict:
    """One fresh run of opts.script at num_envs: its row of the table."""
    args = ["--env", opts.env, "--model-size", opts.model_size, "--num-envs", str(num_envs)]
    args += ["--num-steps", str(opts.num_steps), "--num-iterations", str(opts.iterations)]
    args += ["--no-sync-timing"]
    with tempfile.TemporaryDirectory() as log_dir:
        # no JAX cache: each batch compiles, as a user's first run does
        env = {"JAX_COMPILATION_CACHE_DIR": ""}
        proc = launch.run_script(opts.script, *args, log_dir=log_dir, env=env, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{opts.script} {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
        (run_dir,) = Path(log_dir).iterdir()
        device = runlog.read_json(run_dir / "config.json").get("device_name")
        run = run_series(run_dir)
    summary = run["summary"]
    batch_size = num_envs * opts.num_steps
    steady_s = steady_mean(run)
    return {
        "num_envs": num_envs,
        "batch_size": batch_size,
        "device": device,
        "setup_s": summary["setup_s"],
        "iteration0_s": float(run["series"]["time/iteration"][0]),
        "steady_iteration_s": steady_s,
        "total_s": summary["total_s"],
        "steady_steps_per_s": batch_size / steady_s,
        "whole_steps_per_s": batch_size * opts.iterations / summary["total_s"],
        "peak_device_bytes": summary.get("peak_device_bytes"),
        "final_return": summary.get("final_return"),
    }


def command_of(opts) -> list[str]:
    """The command every batch shares (each adds its --num-envs)."""
    command = [opts.script, "--env", opts.env, "--model-size", opts.model_size]
    return command + ["--num-steps", str(opts.num_steps), "--num-iterations", str(opts.iterations)]


def taken_up(out: str, command: list[str]) -> list[dict]:
    """The rows of an earlier record at out of the same command (none when there is no record);
    BadOption when it is unreadable or of another command."""
    if not Path(out).exists():
        return []
    try:
        record = runlog.read_json(Path(out))
    except runlog.RunError as e:
        raise BadOption(f"--out {out}: {e}") from None
    if record.get("command") != command:
        raise BadOption(
            f"--out {out} holds a sweep of another command ({record.get('command')}); give "
            "another --out"
        )
    return list(record.get("rows", []))


def markdown(record: dict) -> str:
    lines = [
        f"# Batch sweep: `{' '.join(record['command'])}`",
        "",
        f"Machine: {machine_text(record['machine'])}; status: {record['status']}. One fresh "
        f"process per batch; steady: iterations {STEADY_FROM}+; whole: every iteration's env "
        "steps over total_s.",
        "",
        "| num_envs | batch | device | setup_s | iteration 0 (s) | steady iteration (s) | "
        "total_s | steady steps/s | whole steps/s |",
        "|-:|-:|-|-:|-:|-:|-:|-:|-:|",
    ]
    for row in record["rows"]:
        lines.append(
            f"| {row['num_envs']:,} | {row['batch_size']:,} | {row['device']} | "
            f"{row['setup_s']:.1f} | {row['iteration0_s']:.2f} | {row['steady_iteration_s']:.4f} | "
            f"{row['total_s']:.1f} | {row['steady_steps_per_s']:,.0f} | "
            f"{row['whole_steps_per_s']:,.0f} |"
        )
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", default="ppo_linen.py", help="the PPO script run")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--model-size", default="small", choices=("small", "medium", "large"))
    parser.add_argument("--num-envs", type=int, nargs="+", default=list(NUM_ENVS))
    parser.add_argument("--num-steps", type=int, default=128, help="each env's steps a rollout")
    parser.add_argument("--iterations", type=int, default=12, help="each run's iterations")
    parser.add_argument("--deadline", type=float, default=540, help="seconds for the whole sweep")
    parser.add_argument("--out", default="results/benchmarks/batch_sweep.json")
    return parser.parse_args(argv)


def check(opts) -> list[dict]:
    """BadOption for bad input; the rows of the record that --out holds of this command."""
    check_counts(opts, "num_steps", "iterations")
    for num_envs in opts.num_envs:
        if num_envs <= 0:
            raise BadOption(f"--num-envs {num_envs}: give positive integers")
    if opts.deadline < LEAST_S:
        raise BadOption(f"--deadline {opts.deadline}: give at least {LEAST_S} seconds")
    if opts.iterations <= STEADY_FROM:
        raise BadOption(
            f"--iterations {opts.iterations}: give more than {STEADY_FROM}, so that the steady "
            f"iterations ({STEADY_FROM}+) are measured"
        )
    if opts.script not in ("ppo_linen.py", "ppo_nnx.py", "ppo_equinox.py"):
        raise BadOption(
            f"--script {opts.script}: give one of ppo_linen.py, ppo_nnx.py, ppo_equinox.py"
        )
    check_outputs(TOOL, opts.out)
    return taken_up(opts.out, command_of(opts))


def main(argv=None) -> None:
    start = time.monotonic()
    opts = parse(sys.argv[1:] if argv is None else argv)
    # read once, with the checks: the record is taken up before anything runs
    rows = []
    check_or_exit(lambda: rows.extend(check(opts)))
    command = command_of(opts)
    record = {"command": command, "machine": machine(), "rows": rows, "status": "running"}
    done = {row["num_envs"] for row in rows}
    todo = [n for n in opts.num_envs if n not in done]
    try:
        for k, num_envs in enumerate(todo):
            left = opts.deadline - (time.monotonic() - start)
            if left < LEAST_S:
                print(f"--num-envs {num_envs} and on: left for the next call (the deadline)")
                break
            print(f"[{k + 1}/{len(todo)}] --num-envs {num_envs} ({left:.0f} s left)", flush=True)
            try:
                row = run_batch(opts, num_envs, timeout=left)
            except subprocess.TimeoutExpired:
                print(f"--num-envs {num_envs}: stopped at the deadline, left out", flush=True)
                break
            rows.append(row)
            rows.sort(key=lambda row: row["num_envs"])
            # each batch kept as soon as it is measured: a stopped sweep loses none
            write_outputs(TOOL, opts.out, record, markdown(record), given=opts.out)
        finished = {row["num_envs"] for row in rows} >= set(opts.num_envs)
        record["status"] = "finished" if finished else "stopped at the deadline"
    except KeyboardInterrupt:
        record["status"] = "interrupted"
    write_outputs(TOOL, opts.out, record, markdown(record), given=opts.out)
    print("\n" + markdown(record), flush=True)
    if record["status"] == "interrupted":
        sys.exit(130)


if __name__ == "__main__":
    main()

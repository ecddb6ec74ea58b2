"""ppo_torch.py in every compile mode side by side with ppo_linen.py: rollout, update and compile
time.

Each run is a fresh process (as in bench.sh) with a fresh, empty TorchInductor cache, so that
iteration 0 pays the whole torch.compile cost as a first run does. Configurations alternate round by
round in a rotating order, so that a busy machine slows all of them alike; the tables report medians
over rounds.

Columns: iter0 = time/iteration of iteration 0 (compilation); rollout and update = the mean of
time/rollout and time/update over iterations 8+ (sync timing on); total = summary.json total_s. The
`none` modes run --none-iterations iterations of --none-steps steps per env (stated in the table
title) to fit the time.

With --cpus 0-1 every run is pinned with `taskset -c 0-1` and torch gets OMP_NUM_THREADS = that many
cores (JAX uses the same cores); --torch-script also runs another copy of ppo_torch.py (e.g. the
committed one) as "torch before".

    python -m benchmarks.torch_vs_linen --envs Acrobot-v1 Breakout-MinAtar \\
        --model-sizes small medium --rounds 3
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from atomic import check_record, write_record
from benchmarks.common import (
    ROOT,
    STEADY_FROM,
    check_choices,
    check_counts,
    check_envs,
    check_or_exit,
    run_and_read,
)
from core import study

TOOL = "benchmarks.torch_vs_linen"
CONFIGS = {  # name: (script, compile mode)
    "linen jit": ("ppo_linen.py", "jit"),
    "torch compile": ("ppo_torch.py", "compile"),
    "torch env-jit": ("ppo_torch.py", "env-jit"),
    "torch torchscript": ("ppo_torch.py", "torchscript"),
    "linen none": ("ppo_linen.py", "none"),
    "torch none": ("ppo_torch.py", "none"),
}
COLUMNS = ("iter0_s", "rollout_s", "update_s", "total_s")


def run_config(name: str, env: str, size: str, opts) -> dict:
    script, mode = CONFIGS[name]
    # pinned as `taskset -c` pins (the child inherits it): the same cores for every framework
    if opts.cpus:
        cores = {
            c
            for part in opts.cpus.split(",")
            for c in range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1)
        }
        os.sched_setaffinity(0, cores)
        # torch: one thread per core; XLA sees the same cores
        os.environ["OMP_NUM_THREADS"] = str(len(cores))
    length = (
        ["--num-iterations", str(opts.none_iterations), "--num-steps", str(opts.none_steps)]
        if mode == "none"
        else ["--num-iterations", str(opts.num_iterations)]
    )
    with tempfile.TemporaryDirectory() as cache_dir:
        # inherited by the run: no compiled kernels from before
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
        run = run_and_read(
            script,
            "--env",
            env,
            "--model-size",
            size,
            "--compile",
            mode,
            "--seed",
            str(opts.seed),
            "--tag",
            "torch_vs_linen",
            *length,
        )
    series, summary = run["series"], run["summary"]
    steady = slice(STEADY_FROM if len(series["time/iteration"]) > STEADY_FROM else 1, None)
    return {
        "iter0_s": float(series["time/iteration"][0]),
        "rollout_s": float(series["time/rollout"][steady].mean()),
        "update_s": float(series["time/update"][steady].mean()),
        "total_s": summary["total_s"],
        "final_return": summary["final_return"],
    }


def table(results: dict, title: str) -> str:
    """Medians per config; the ratios are to linen in the same mode (jit, or none for the `none`
    modes). steady = rollout + update of iterations 8+, the issue's steady-state target."""
    med = {
        name: {c: statistics.median(r[c] for r in runs) for c in COLUMNS}
        for name, runs in results.items()
    }
    lines = [
        title,
        "",
        "| config | iter0 s | rollout s/it | update s/it | total s | rollout vs linen | update vs "
        "linen "
        "| steady vs linen |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, m in med.items():
        base = med.get("linen none" if name.endswith("none") else "linen jit")
        steady = lambda x: x["rollout_s"] + x["update_s"]  # noqa: E731
        ratios = [
            f"{a / b:.2f}x" if base and not name.startswith("linen") else ""
            for a, b in (
                (m["rollout_s"], base and base["rollout_s"]),
                (m["update_s"], base and base["update_s"]),
                (steady(m), base and steady(base)),
            )
        ]
        lines.append(
            f"| {name} | {m['iter0_s']:.1f} | {m['rollout_s']:.3f} | {m['update_s']:.3f} | "
            f"{m['total_s']:.1f} | " + " | ".join(ratios) + " |"
        )
    return "\n".join(lines)


def per_step_line(env: str, size: str, results: dict) -> str:
    """Where torch's rollout time goes: its cost per env step against Linen's, and the pieces of a
    Python-loop step from the profile of benchmarks.dlpack_crossing, run here on the same cores."""
    # imports torch (OMP_NUM_THREADS already set) and JAX: only when asked
    from benchmarks import dlpack_crossing

    num_steps = dlpack_crossing.ppo.Args.num_steps  # the runs keep the default
    torch_step, linen_step = (
        statistics.median(r["rollout_s"] for r in results[name]) / num_steps * 1e6
        for name in ("torch compile", "linen jit")
    )
    p = dlpack_crossing.measure(env, size)
    pieces = ", ".join(f"{k} {p[k]:.0f}" for k in dlpack_crossing.SCRIPT_STEP)
    return (
        f"Per env step: torch compile {torch_step:.0f} us, linen jit {linen_step:.0f} us (a jitted "
        "scan). A Python "
        f"loop step, profiled: {pieces} = {p['script step']:.0f} us; the env step alone takes "
        f"{p['env step alone']:.0f} us a call, and {p['env step in a scan']:.0f} us inside a scan."
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["Acrobot-v1", "Breakout-MinAtar"])
    parser.add_argument("--model-sizes", nargs="+", default=["small", "medium"])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--num-iterations", type=int, default=12)
    parser.add_argument("--none-iterations", type=int, default=10)
    parser.add_argument(
        "--none-steps", type=int, default=256, help="--num-steps of the `none` runs"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cpus", help="pin every run to these cores (taskset -c syntax, e.g. 0-1)")
    parser.add_argument(
        "--torch-script", help='another ppo_torch.py to run too, as "torch before" (compile mode)'
    )
    parser.add_argument(
        "--out", default=str(ROOT / "runs" / f"torch_vs_linen_{int(time.time())}.json")
    )
    opts = parser.parse_args()
    check_or_exit(lambda: check_options(opts))

    all_results, tables = {}, []
    with tempfile.TemporaryDirectory() as before_dir:
        # copied out of the repo, where no ppo_*.py appears while others lint and test
        if opts.torch_script:
            before = Path(before_dir, "ppo_torch_before.py")
            shutil.copy(opts.torch_script, before)
            # it imports the repo's helpers (bookkeeping.py, env_adapters.py) as the scripts do from
            # beside them
            os.environ["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
            )
            # an absolute path: run_and_read runs it where it is
            CONFIGS["torch before"] = (str(before), "compile")
            opts.configs = [*opts.configs, "torch before"]
        run_all(opts, all_results, tables)
    print("\n\n".join(tables))


def run_all(opts, all_results: dict, tables: list):
    for env in opts.envs:
        for size in opts.model_sizes:
            results = {name: [] for name in opts.configs}
            for r in range(opts.rounds):
                shift = r % len(opts.configs)
                # rotate the order each round
                for name in opts.configs[shift:] + opts.configs[:shift]:
                    res = run_config(name, env, size, opts)
                    results[name].append(res)
                    print(
                        f"{env} {size} round {r + 1}/{opts.rounds} {name:<14} "
                        + " ".join(f"{c} {res[c]:.3f}" for c in COLUMNS),
                        flush=True,
                    )
            all_results[f"{env}/{size}"] = results
            tables.append(
                table(
                    results,
                    f"**{env}, {size}**: medians of {opts.rounds} rounds; {opts.num_iterations} "
                    f"iterations, `none` modes {opts.none_iterations} x {opts.none_steps} steps",
                )
            )
            if {"linen jit", "torch compile"} <= set(results):
                tables[-1] += "\n\n" + per_step_line(env, size, results)
            print("\n" + tables[-1] + "\n", flush=True)
            write_record(TOOL, opts.out, all_results, opts.out)


def check_options(opts) -> None:
    """BadOption or OutputRefused (atomic.py), before anything is measured."""
    check_counts(opts, "rounds", "num_iterations", "none_iterations", "none_steps")
    check_envs("--envs", opts.envs)
    check_choices("--model-sizes", opts.model_sizes, list(study.load().sizes))
    check_record(TOOL, opts.out)


if __name__ == "__main__":
    main()

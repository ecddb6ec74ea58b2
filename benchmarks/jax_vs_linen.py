"""Does Flax NNX, or Equinox, cost more than Flax Linen? ppo_nnx.py or ppo_equinox.py (--framework)
in every compile mode of the study side by side with ppo_linen.py.

Each run is a fresh process (as in bench.sh). Configurations alternate round by round in a rotating
order, so that a busy machine slows all of them alike; the table reports medians over rounds, and
"paired" ratios are the median over rounds of the ratio within one round.

Columns: total and setup = summary.json total_s and setup_s; iter0 = time/iteration of iteration 0
(compilation); warm-up = mean time/iteration over iterations 1-7; steady = mean over iterations 8+.
Ratios divide a median of the framework by the Linen median of the same kind: `linen jit` for every
compiled mode (nnx cached_partial and jit; equinox filter_jit and partition), `linen none` for none.
The `none` modes run only --none-iterations iterations (op by op is ~200x slower); their "steady" is
the mean over iterations 1+.

    python -m benchmarks.jax_vs_linen --framework nnx --env Acrobot-v1 --model-size small --rounds 3
    python -m benchmarks.jax_vs_linen --framework equinox --env Breakout-MinAtar --model-size medium
"""

import argparse
import statistics
import time

from atomic import check_record, write_record
from benchmarks.common import (
    ROOT,
    STEADY_FROM,
    check_counts,
    check_envs,
    check_or_exit,
    run_and_read,
)
from core import study

STUDY = study.load()
TOOL = "benchmarks.jax_vs_linen"
JAX_FRAMEWORKS = ("nnx", "equinox")  # the JAX frameworks besides Linen


def configs(framework: str) -> dict:
    """{name: (script, compile mode, baseline)}: Linen's modes, then every mode of the framework,
    from the study."""
    linen, other = STUDY.frameworks["linen"], STUDY.frameworks[framework]
    out = {f"linen {mode}": (linen.script, mode, None) for mode in linen.compile}
    out.update(
        {
            f"{framework} {mode}": (
                other.script,
                mode,
                "linen none" if mode == "none" else "linen jit",
            )
            for mode in other.compile
        }
    )
    return out


CONFIGS = {
    name: config for framework in JAX_FRAMEWORKS for name, config in configs(framework).items()
}
COLUMNS = ("total_s", "setup_s", "iter0_s", "warmup_s", "steady_s")


def run_config(name: str, opts) -> dict:
    script, mode, _ = CONFIGS[name]
    iterations = opts.none_iterations if mode == "none" else opts.num_iterations
    run = run_and_read(
        script,
        "--env",
        opts.env,
        "--model-size",
        opts.model_size,
        "--compile",
        mode,
        "--seed",
        str(opts.seed),
        "--num-iterations",
        str(iterations),
        "--tag",
        "jax_vs_linen",
        *opts.extra,
    )
    times, summary = run["series"]["time/iteration"], run["summary"]
    return {
        "total_s": summary["total_s"],
        "setup_s": summary["setup_s"],
        "iter0_s": float(times[0]),
        "warmup_s": float(times[1:STEADY_FROM].mean()),
        "steady_s": float(times[STEADY_FROM if len(times) > STEADY_FROM else 1 :].mean()),
        "final_return": summary["final_return"],
    }


def table(results: dict, title: str) -> str:
    med = {
        name: {c: statistics.median(r[c] for r in runs) for c in COLUMNS}
        for name, runs in results.items()
    }

    def ratio(name, base, c):
        paired = statistics.median(a[c] / b[c] for a, b in zip(results[name], results[base]))
        return f"{med[name][c] / med[base][c]:.3f} ({paired:.3f})"

    lines = [
        title,
        "",
        "| config | total s | setup s | iter0 s | warm-up s/it | steady s/it | total ratio "
        "(paired) "
        "| steady ratio (paired) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, m in med.items():
        base = CONFIGS[name][2]
        ratios = [ratio(name, base, c) if base in results else "" for c in ("total_s", "steady_s")]
        lines.append(
            f"| {name} | {m['total_s']:.2f} | {m['setup_s']:.2f} | {m['iter0_s']:.2f} | "
            f"{m['warmup_s']:.4f} "
            f"| {m['steady_s']:.4f} | {ratios[0]} | {ratios[1]} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", default="nnx", choices=JAX_FRAMEWORKS)
    parser.add_argument("--env", default="Acrobot-v1")
    parser.add_argument("--model-size", default="small", choices=["small", "medium", "large"])
    parser.add_argument(
        "--configs",
        nargs="+",
        choices=list(CONFIGS),
        help="default: linen's and --framework's modes",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--num-iterations", type=int, default=100, help="iterations of the compiled runs"
    )
    parser.add_argument(
        "--none-iterations", type=int, default=3, help="iterations of the `none` runs"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--out", default=str(ROOT / "runs" / f"jax_vs_linen_{int(time.time())}.json")
    )
    parser.add_argument(
        "extra", nargs="*", help="more flags for every run, after --, e.g. -- --no-sync-timing"
    )
    opts = parser.parse_args()
    opts.configs = opts.configs or list(configs(opts.framework))
    check_or_exit(lambda: check_options(opts))

    results = {name: [] for name in opts.configs}
    for r in range(opts.rounds):
        shift = r % len(opts.configs)
        for name in opts.configs[shift:] + opts.configs[:shift]:  # rotate the order each round
            res = run_config(name, opts)
            results[name].append(res)
            print(
                f"round {r + 1}/{opts.rounds} {name:<18} "
                + " ".join(f"{c} {res[c]:.4f}" for c in COLUMNS),
                flush=True,
            )
            write_record(TOOL, opts.out, results, opts.out)
    none = (
        f", `none` modes {opts.none_iterations}"
        if any(CONFIGS[n][1] == "none" for n in opts.configs)
        else ""
    )
    flags = f", flags `{' '.join(opts.extra)}`" if opts.extra else ""
    print(
        "\n"
        + table(
            results,
            f"**{opts.env}, {opts.model_size}**: medians of {opts.rounds} rounds; "
            f"{opts.num_iterations} iterations{none}{flags}",
        )
    )


def check_options(opts) -> None:
    """BadOption or OutputRefused (atomic.py), before anything is measured."""
    check_counts(opts, "rounds", "num_iterations", "none_iterations")
    check_envs("--env", [opts.env])
    check_record(TOOL, opts.out)


if __name__ == "__main__":
    main()

"""What JAX's persistent compilation cache saves a user's repeated runs: a script run twice with
JAX_COMPILATION_CACHE_DIR set to a fresh folder, the first run filling the cache, the second reading
it; setup_s, iteration 0 (time/iteration) and total_s of each, per pair, and their medians.

    python -m benchmarks.compile_cache --pairs 3 --out results/benchmarks/compile_cache_cpu.json

The cache is opt-in (JAX's own variable, unset by default); a sweep's and a benchmark's runs never
use it (bench.sh clears it, benchmarks.common.run_and_read too): each of them must compile. Every
other run here gets an empty variable. Exit status 2 for bad input (one line, before anything
runs), 130 when interrupted (what was measured is kept).
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from atomic import check_outputs
from benchmarks.common import check_counts, check_or_exit, machine, run_recorded, run_series
from tools import launch

TOOL = "benchmarks.compile_cache"
MEASURES = ("setup_s", "iteration0_s", "total_s")
RUNS = ("first", "second")  # the run that fills the cache, the one that reads it


def run_once(script: str, args: list[str], cache_dir: Path) -> dict:
    """One run of script with the cache in cache_dir: its setup_s, iteration 0 and total_s."""
    with tempfile.TemporaryDirectory() as log_dir:
        # compile everything into the cache, however quick (JAX keeps only compiles over 1 s)
        env = {
            "JAX_COMPILATION_CACHE_DIR": str(cache_dir),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        }
        proc = launch.run_script(script, *args, log_dir=log_dir, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"{script} failed:\n{proc.stderr[-2000:]}")
        (run_dir,) = Path(log_dir).iterdir()
        run = run_series(run_dir)
    summary = run["summary"]
    return {
        "setup_s": summary["setup_s"],
        "iteration0_s": float(run["series"]["time/iteration"][0]),
        "total_s": summary["total_s"],
    }


def run_pair(script: str, args: list[str]) -> dict:
    """The same run twice with one fresh cache folder: {"first": ..., "second": ...}."""
    with tempfile.TemporaryDirectory() as cache_dir:
        return {name: run_once(script, args, Path(cache_dir)) for name in RUNS}


def medians(pairs: list[dict]) -> dict:
    """{run: {measure: the median over the pairs}}."""
    return {
        name: {m: statistics.median(pair[name][m] for pair in pairs) for m in MEASURES}
        for name in RUNS
    }


def markdown(record: dict) -> str:
    lines = [
        f"# JAX's persistent compilation cache: `{' '.join(record['command'])}`, run twice",
        "",
        f"{record['note']}",
        "",
        "| run | setup_s | iteration 0 (s) | total_s |",
        "|-|-|-|-|",
    ]
    for k, pair in enumerate(record["pairs"]):
        for name in RUNS:
            row = pair[name]
            lines.append(
                f"| pair {k + 1}, {name} | {row['setup_s']:.2f} | {row['iteration0_s']:.2f} | "
                f"{row['total_s']:.2f} |"
            )
    if record["pairs"]:
        for name, row in medians(record["pairs"]).items():
            lines.append(
                f"| median, {name} | {row['setup_s']:.2f} | {row['iteration0_s']:.2f} | "
                f"{row['total_s']:.2f} |"
            )
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", default="ppo_linen.py", help="the PPO script run")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--pairs", type=int, default=3, help="pairs of runs, each a fresh cache")
    parser.add_argument("--out", default="results/benchmarks/compile_cache_cpu.json")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    opts = parse(sys.argv[1:] if argv is None else argv)
    check_or_exit(lambda: check_counts(opts, "pairs"))
    check_or_exit(lambda: check_outputs(TOOL, opts.out))
    args = ["--env", opts.env, "--model-size", "small"]
    record = {
        "command": [opts.script, *args],
        "machine": machine(),
        "note": (
            "Measured on a shared machine, other engineers' tests running beside it: the times "
            "vary; the first run of each pair fills a fresh cache, the second reads it."
        ),
        "pairs": [],
        "status": "running",
    }

    def run():
        for _ in range(opts.pairs):
            pair = run_pair(opts.script, args)
            record["pairs"].append(pair)
            said = (f"{name} total {pair[name]['total_s']:.1f} s" for name in RUNS)
            print(f"pair {len(record['pairs'])}: {', '.join(said)}", flush=True)
        record["medians"] = medians(record["pairs"])

    if not run_recorded(TOOL, opts.out, record, markdown, run):
        sys.exit(130)


if __name__ == "__main__":
    main()

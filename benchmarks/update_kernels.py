"""The update alone: ppo_torch.py's update under torch.compile's modes beside ppo_linen.py's jitted
update.

Both run their script's own `update` (update_epochs x num_minibatches optimizer steps) on the same
random batch of the default shape (32 envs x 256 steps, 6 observations, 3 actions: Acrobot-v1's), so
the timing holds no env, no rollout and no logging: what is left is the frameworks' kernels and
their per-step dispatch. Each configuration runs in a fresh process with empty caches (its first
call compiles); configurations alternate in a rotating order round by round, and the table reports
medians over rounds.

    OMP_NUM_THREADS=2 taskset -c 0,1 python -m benchmarks.update_kernels \\
        --model-sizes small medium --rounds 3
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial

import numpy as np

from atomic import check_outputs, parse_json
from benchmarks.common import OUT_HELP, ROOT, check_counts, check_or_exit, show_table
from core import study

TOOL = "benchmarks.update_kernels"
CONFIGS = {  # name: (framework, torch.compile options; None: eager, as --compile env-jit)
    "linen jit": ("linen", None),
    "torch compile": ("torch", {}),
    "torch max-autotune": ("torch", {"mode": "max-autotune"}),
    "torch eager": ("torch", None),
}
OBS_DIM, NUM_ACTIONS = 6, 3


def random_batch(batch_size: int) -> list[np.ndarray]:
    """obs, actions, logprobs, values, advantages, returns: the fields of both scripts' Batch, in
    their order."""
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((batch_size, OBS_DIM), np.float32)
    actions = rng.integers(0, NUM_ACTIONS, batch_size).astype(np.int32)
    logprobs = np.full(batch_size, -np.log(NUM_ACTIONS), np.float32)
    values, advantages, returns = rng.standard_normal((3, batch_size), np.float32)
    return [obs, actions, logprobs, values, advantages, returns]


def linen_update(size: str):
    """A function of no argument that runs one jitted update of ppo_linen.py and waits for it."""
    import jax
    from flax.training.train_state import TrainState

    import ppo_linen as ppo

    args = ppo.Args(model_size=size)
    agent = ppo.Agent(ppo.MODEL_SIZES[size], NUM_ACTIONS, False)
    batch = ppo.Batch(*[jax.numpy.asarray(x) for x in random_batch(args.batch_size)])
    tx, _ = ppo.make_optimizer(args)
    params = jax.jit(agent.init)(jax.random.key(0), batch.obs[: args.num_envs])
    carry = {
        "state": TrainState.create(apply_fn=agent.apply, params=params, tx=tx),
        "key": jax.random.key(1),
    }
    update_fn = jax.jit(partial(ppo.update, args))

    def run():
        carry["state"], carry["key"], losses = update_fn(carry["state"], batch, carry["key"])
        jax.block_until_ready(losses)

    return run


def torch_update(size: str, options):
    """A function of no argument that runs one update of ppo_torch.py, its minibatch step compiled
    with options."""
    import torch

    import ppo_torch as ppo

    args = ppo.Args(model_size=size, compile="env-jit" if options is None else "compile")
    torch.manual_seed(0)
    # one agent, on the agents' axis as the script trains it
    agent = ppo.Agent(OBS_DIM, ppo.MODEL_SIZES[size], NUM_ACTIONS, False, seeds=[0])
    batch = ppo.Batch(*[torch.from_numpy(x)[None] for x in random_batch(args.batch_size)])
    optimizer, lr_schedule = ppo.make_optimizer(args, agent)
    step_fn = ppo.minibatch_step
    if options is not None:  # as the script's compiled modes do
        torch._dynamo.config.trace_autograd_ops = True
        step_fn = torch.compile(step_fn, dynamic=False, **options)
    step_fn = partial(step_fn, agent, optimizer, args)
    generator = torch.Generator().manual_seed(0)
    # the policy step is not timed here
    state = ppo.TrainState(agent, [generator], agent.get_action_and_value, step_fn)
    return partial(ppo.update, args, lr_schedule, state, batch, 0)


def child(config: str, size: str, repeats: int) -> dict:
    """Times one configuration in this process: its first call (compiling), then the median of
    repeats calls."""
    framework, options = CONFIGS[config]
    run = linen_update(size) if framework == "linen" else torch_update(size, options)
    start = time.perf_counter()
    run()
    first_s = time.perf_counter() - start
    run()  # warm
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return {"first_s": first_s, "update_s": statistics.median(times)}


def in_fresh_process(config: str, size: str, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as cache_dir:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir, "JAX_COMPILATION_CACHE_DIR": ""}
        command = [
            sys.executable,
            "-m",
            "benchmarks.update_kernels",
            "--child",
            config,
            size,
            str(repeats),
        ]
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, check=True
        )
    return parse_json(done.stdout.strip().splitlines()[-1], "the child's timings")


def measure(sizes: list[str], configs: list[str], rounds: int, repeats: int) -> list[dict]:
    """One row per (size, config): the medians over rounds; configs rotate their order each
    round."""
    rows = []
    for size in sizes:
        results = {config: [] for config in configs}
        for round_index in range(rounds):
            order = configs[round_index % len(configs) :] + configs[: round_index % len(configs)]
            for config in order:
                results[config].append(in_fresh_process(config, size, repeats))
                print(
                    f"{size} round {round_index + 1}/{rounds} {config}: {results[config][-1]}",
                    flush=True,
                )
        for config, runs in results.items():
            row = {"size": size, "config": config, "rounds": rounds}
            for column in ("first_s", "update_s"):
                row[column] = statistics.median(run[column] for run in runs)
                row[f"{column}_all"] = [run[column] for run in runs]
            rows.append(row)
    return rows


def markdown(rows: list[dict]) -> str:
    lines = []
    for size in dict.fromkeys(row["size"] for row in rows):
        sized = [row for row in rows if row["size"] == size]
        linen = next((row["update_s"] for row in sized if row["config"] == "linen jit"), None)
        lines += [
            f"\n**{size}**: medians of {sized[0]['rounds']} rounds (each round's value in "
            "brackets)\n"
        ]
        lines += [
            "| config | first call s | update s/it | vs linen |",
            "| --- | ---: | ---: | ---: |",
        ]
        for row in sized:
            ratio = f"{row['update_s'] / linen:.2f}x" if linen else ""
            each = ", ".join(f"{value:.3f}" for value in row["update_s_all"])
            lines.append(
                f"| {row['config']} | {row['first_s']:.1f} | {row['update_s']:.3f} ({each}) | "
                f"{ratio} |"
            )
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model-sizes", nargs="+", default=["small", "medium"], choices=study.load().sizes
    )
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--repeats", type=int, default=5, help="updates timed per process (the median is kept)"
    )
    parser.add_argument("--out", help=OUT_HELP)
    parser.add_argument(
        "--child", nargs=3, metavar=("CONFIG", "SIZE", "REPEATS"), help=argparse.SUPPRESS
    )
    opts = parser.parse_args()
    check_or_exit(lambda: check_options(opts))
    if opts.child:
        config, size, repeats = opts.child
        print(json.dumps(child(config, size, int(repeats))))
        return
    rows = measure(opts.model_sizes, opts.configs, opts.rounds, opts.repeats)
    table = markdown(rows)
    show_table(TOOL, opts.out, rows, table)


def check_options(opts) -> None:
    """BadOption or OutputRefused (atomic.py), before anything is measured."""
    check_counts(opts, "rounds", "repeats")
    if opts.out:
        check_outputs(TOOL, opts.out)


if __name__ == "__main__":
    main()

"""How should a script step envpool? The cost of one env step of a batch, call pattern by call
pattern.

envpool's envs run in C++ on the CPU. A JAX rollout (one jitted lax.scan) can reach them in two
ways, and a torch rollout (a Python loop) in one. This times, in microseconds per env step of
num_envs envs:
- "numpy step": the bare NumPy API, `pool.step(actions)`: envpool's own cost and the floor of any
  pattern;
- "step_host": env_adapters.Envpool.step_host, the NumPy step plus the same-step reset of the done
  envs;
- "torch host step": env_adapters.host_step_envs, what ppo_torch.py calls per step (the episode
  counts too);
- "torch jitted step": ppo_torch.step_envs jitted and called per step, what ppo_torch.py would call
  without host_step_envs;
- "adapter in scan": env_adapters.Envpool.step inside a jitted 256-step lax.scan, what the JAX
  scripts run (step_host through buffer_callback);
- "io_callback in scan": the same step_host through jax.experimental.io_callback instead;
- "xla in scan": envpool's own XLA op (`pool.xla()`) inside the same scan, without the same-step
  reset (it cannot reset a subset of envs; classic control only: MuJoCo's float64 actions need
  jax_enable_x64). It runs in processes of its own: it segfaults once another pool of its process
  has been stepped on the host, and now and then alone too, and it hangs with 2 threads; the table
  says "crashed" or "hung", with the median of the rounds before;
- "gymnax in scan": the same env in JAX, for scale (classic control only).
Patterns alternate within each round; the table gives the median over rounds, per env and per
--threads.

    python -m benchmarks.envpool_calls --envs CartPole-v1 HalfCheetah-v4 --threads 1 2 --rounds 7 \
        --out results/benchmarks/envpool_calls_cpu.json
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from functools import partial
from importlib.metadata import version

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

import env_adapters
import ppo_torch
from atomic import BadJson, check_outputs, parse_json, write_outputs
from benchmarks.common import check_counts, check_envs, check_or_exit
from core.option_checks import check_int

TOOL = "benchmarks.envpool_calls"
SCAN_STEPS = 256
CHILD_TIMEOUT_S = 120  # one round of one family: about 10 s
CLASSIC = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1")


def per_step_us(fn, repeats: int, steps_per_call: int = 1) -> float:
    """Microseconds per env step of fn, which runs steps_per_call env steps per call."""
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / (repeats * steps_per_call) * 1e6


def scanned(step, carry):
    """A function that runs a jitted SCAN_STEPS-step scan of step(carry) -> carry, from where its
    last call ended (envpool's XLA handle must be the one the last call returned), and blocks."""
    scan = jax.jit(
        lambda carry: jax.lax.scan(lambda c, _: (step(c), None), carry, length=SCAN_STEPS)[0]
    )
    last = [carry]

    def run():
        last[0] = jax.block_until_ready(scan(last[0]))

    return run


def host_patterns(env_id: str, num_envs: int, threads: int) -> dict:
    """name -> (a no-argument function that runs its env steps and blocks, its env steps per call),
    for the patterns that step a pool on the host."""
    env, _ = env_adapters.make_envpool(env_id, num_envs, seed=0, num_threads=threads)
    actions = random_actions(env, num_envs)
    # one reset for every pattern: the torch ones carry their own episode counts over the same pool
    runner = ppo_torch.reset_envs(env, None, jax.random.key(0), num_envs)
    steps = runner.env_state
    # torch's host step takes the agents' axis (of one), as ppo_torch.py steps a pool
    runners = {"host": jax.tree.map(lambda x: x[None], runner), "jitted": runner}
    jitted_step = jax.jit(partial(ppo_torch.step_envs, env, None))

    def torch_host_step():
        runners["host"] = env_adapters.host_step_envs(env, runners["host"], actions[None])[0]

    def torch_jitted_step():
        runners["jitted"], fields = jitted_step(runners["jitted"], actions)
        jax.block_until_ready(fields)

    return {
        "numpy step": (lambda: env.pool.step(actions.astype(env.action_dtype)), 1),
        "step_host": (lambda: env.step_host(actions), 1),
        "torch host step": (torch_host_step, 1),
        "torch jitted step": (torch_jitted_step, 1),
        "adapter in scan": (
            scanned(lambda s: env.step(None, s, jnp.asarray(actions))[1], steps),
            SCAN_STEPS,
        ),
        "io_callback in scan": (
            scanned(lambda s: io_callback_step(env, s, actions), steps),
            SCAN_STEPS,
        ),
    }


def io_callback_step(env, steps, actions):
    """The adapter's step, by io_callback instead of buffer_callback: the other way to call the host
    from JAX."""
    return io_callback(env.step_host, env.step_shapes(), jnp.asarray(actions), ordered=True)[1]


def xla_patterns(env_id: str, num_envs: int, threads: int) -> dict:
    """The same for envpool's XLA op, and the gymnax twin of the env (where there is one)."""
    import gymnax

    env, _ = env_adapters.make_envpool(env_id, num_envs, seed=0, num_threads=threads)
    actions = random_actions(env, num_envs)
    handle, _, _, xla_step = env.pool.xla()
    env.pool.async_reset()
    env_ids = jnp.arange(num_envs, dtype=jnp.int32)
    found = {
        "xla in scan": (
            scanned(lambda h: xla_step(h, jnp.asarray(actions), env_ids)[0], handle),
            SCAN_STEPS,
        )
    }
    if env_id in gymnax.registered_envs:
        gym_env, params = gymnax.make(env_id)
        keys = jax.random.split(jax.random.key(0), num_envs)
        _, states = jax.vmap(gym_env.reset, in_axes=(0, None))(keys, params)
        step = jax.vmap(gym_env.step, in_axes=(0, 0, 0, None))
        gym_scan = scanned(lambda s: step(keys, s, jnp.asarray(actions), params)[1], states)
        found["gymnax in scan"] = (gym_scan, SCAN_STEPS)
    return found


FAMILIES = {"host": host_patterns, "xla": xla_patterns}


def random_actions(env, num_envs: int):
    rng = np.random.default_rng(0)
    if env.continuous:
        low, high = env.action_bounds
        return rng.uniform(low, high, (num_envs, env.num_actions)).astype(np.float32)
    return rng.integers(0, env.num_actions, num_envs).astype(np.int32)


def time_family(family: str, env_id: str, num_envs: int, threads: int, steps: int) -> dict:
    """One round of a family's patterns in this process: microseconds per env step of each, in
    turn."""
    found = FAMILIES[family](env_id, num_envs, threads)
    for fn, _ in found.values():  # compile and warm up
        fn()
        fn()
    return {
        name: per_step_us(fn, max(1, steps // per_call), per_call)
        for name, (fn, per_call) in found.items()
    }


def measure(env_id: str, num_envs: int, threads: int, rounds: int, steps: int) -> dict:
    """The median over rounds of each pattern's microseconds per env step. Each family runs in a
    fresh process, the families alternating round by round: envpool's XLA op segfaults once another
    pool of the same process has been stepped on the host. MuJoCo skips the XLA family (its float64
    actions need jax_enable_x64)."""
    families = ["host"] if env_id not in CLASSIC else ["host", "xla"]
    times, failed = {}, {}
    for _ in range(rounds):
        for family in [f for f in families if f not in failed]:
            command = [
                sys.executable,
                "-W",
                "ignore",
                "-m",
                "benchmarks.envpool_calls",
                "--child",
                family,
            ]
            command += ["--envs", env_id, "--threads", str(threads), "--num-envs", str(num_envs)]
            try:
                out = subprocess.run(
                    command + ["--steps", str(steps)],
                    capture_output=True,
                    text=True,
                    timeout=CHILD_TIMEOUT_S,
                )
            # envpool's XLA op hangs with 2 threads here: no number, not a crash
            except subprocess.TimeoutExpired:
                failed[family] = "hung"
                continue
            # envpool's XLA op segfaults now and then, even alone in its process
            if out.returncode != 0:
                failed[family] = (
                    "crashed" if out.returncode < 0 else f"failed: {out.stderr.strip()[-300:]}"
                )
                continue
            try:
                said = parse_json((out.stdout.splitlines() or [""])[-1], f"{family}'s child")
            except BadJson as e:
                failed[family] = f"failed: {e}"
                continue
            for name, value in said.items() if isinstance(said, dict) else ():
                times.setdefault(name, []).append(value)
    medians = {name: statistics.median(t) for name, t in times.items()}
    for family, how in failed.items():
        print(f"{env_id}, {threads} threads: the {family} patterns {how}", flush=True)
    return {
        "env": env_id,
        "threads": threads,
        **medians,
        **{family: how for family, how in failed.items()},
    }


def cell(value) -> str:
    if isinstance(value, str):  # a family that hung or crashed
        return value
    return "" if value is None else f"{value:.1f}"


def table(rows: list) -> str:
    names = list(
        dict.fromkeys(name for row in rows for name in row if name not in ("env", "threads"))
    )
    lines = [
        "| env | threads | " + " | ".join(names) + " |",
        "| --- | ---: |" + " ---: |" * len(names),
    ]
    for row in rows:
        cells = [cell(row.get(name)) for name in names]
        lines.append(f"| {row['env']} | {row['threads']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--envs", nargs="+", default=["CartPole-v1", "Acrobot-v1", "HalfCheetah-v4"]
    )
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=1024, help="env steps per pattern per round")
    parser.add_argument(
        "--out", help="also write the rows as JSON here, and the table beside it (.md)"
    )
    # one round, in a fresh process
    parser.add_argument("--child", choices=list(FAMILIES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    check_or_exit(lambda: check_options(args))
    if args.child:
        print(
            json.dumps(
                time_family(args.child, args.envs[0], args.num_envs, args.threads[0], args.steps)
            )
        )
        return
    rows = []
    for env_id in args.envs:
        for threads in args.threads:
            rows.append(measure(env_id, args.num_envs, threads, args.rounds, args.steps))
            print(rows[-1], flush=True)
    title = (
        f"microseconds per env step of {args.num_envs} envs, median of {args.rounds} alternating "
        "rounds of "
        f"{args.steps} steps; jax {jax.__version__}, envpool {version('envpool')}, "
        f"{os.cpu_count()} cores "
        f"({platform.machine()}, {platform.platform()}). "
        f"Command: `python -m benchmarks.envpool_calls {' '.join(sys.argv[1:])}`"
    )
    print(f"\n{title}\n\n{table(rows)}")
    if args.out:
        text = f"# benchmarks.envpool_calls\n\n{title}\n\n{table(rows)}"
        write_outputs(TOOL, args.out, {"title": title, "rows": rows}, text, args.out)


def check_options(args) -> None:
    """BadOption or OutputRefused (atomic.py), before anything is measured."""
    check_counts(args, "num_envs", "rounds", "steps")
    check_int("--threads", min(args.threads), 1)
    check_envs("--envs", args.envs, env_adapters.ENVPOOL_ENVS)
    if args.out:
        check_outputs(TOOL, args.out)


if __name__ == "__main__":
    main()

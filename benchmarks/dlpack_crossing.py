"""What does one rollout step of ppo_torch.py cost, piece by piece? A micro-benchmark of the per-step floor.

ppo_torch.py's rollout is a Python loop: per env step, a policy call, a hand-over of the actions to JAX, one jitted
env call and a hand-over of its packed output back to torch. Linen's rollout is one jitted scan. This times each
piece for the shapes a rollout step uses (num_envs envs), in microseconds per call, the median of --blocks blocks
of --calls calls:
- the policy step, eager (what `--compile compile` runs on a CPU) and torch.compile'd (what it runs on a GPU);
- torch -> JAX: NumPy's DLPack reader (what ppo_torch.py does on a CPU) and JAX's (on a GPU);
- the jitted env call (ppo_torch.env_step_packed, with a barrier) and JAX -> torch by DLPack;
- the same env step inside a jitted lax.scan, per step: the env's own work, without the cost of a call.
floor = eager policy + np.from_dlpack + env call + DLPack back: what a rollout step costs before any bookkeeping.

    python -m benchmarks.dlpack_crossing --envs Acrobot-v1 Breakout-MinAtar --model-sizes small medium
"""

import argparse
import statistics
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import torch

import ppo_torch as ppo

FLOOR = ("policy eager", "torch->jax np.from_dlpack", "env call (jit)", "jax->torch dlpack")


def per_call_us(fn, calls: int, blocks: int) -> float:
    for _ in range(max(10, calls // 10)):
        fn()
    times = []
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def measure(env_id: str, size: str, num_envs: int = 32, calls: int = 300, blocks: int = 9) -> dict:
    """The per-call cost of each piece of a rollout step, in microseconds, and their sum (floor_us)."""
    env, env_params = ppo.make_env(env_id)
    runner = ppo.reset_envs(env, env_params, jax.random.key(0), num_envs)
    env_call = jax.jit(partial(ppo.env_step_packed, env, env_params))
    agent = ppo.Agent(runner.obs.shape[-1], ppo.MODEL_SIZES[size], env.num_actions, env.continuous)
    obs, noise = torch.from_dlpack(runner.obs), torch.rand(num_envs, env.num_actions)
    action = agent.get_action_and_value(obs, noise)[0]
    compiled_policy = torch.compile(agent.get_action_and_value, dynamic=False, fullgraph=True)
    packed = env_call(runner, np.from_dlpack(action))[1]

    def scanned(runner):  # num_steps env steps in one call: the env's own cost per step
        return jax.lax.scan(
            lambda r, _: (ppo.env_step_packed(env, env_params, r, np.from_dlpack(action))[0], None), runner, length=256
        )[0]

    scan = jax.jit(scanned)

    with torch.no_grad():
        row = {
            "policy eager": per_call_us(lambda: agent.get_action_and_value(obs, noise), calls, blocks),
            "policy compiled": per_call_us(lambda: compiled_policy(obs, noise), calls, blocks),
            "torch->jax np.from_dlpack": per_call_us(lambda: np.from_dlpack(action), calls, blocks),
            "torch->jax dlpack": per_call_us(lambda: jnp.from_dlpack(action), calls, blocks),
            "env call (jit)": per_call_us(
                lambda: jax.block_until_ready(env_call(runner, np.from_dlpack(action))), calls, blocks
            ),
            "jax->torch dlpack": per_call_us(lambda: torch.from_dlpack(packed), calls, blocks),
            "env step in a scan": per_call_us(lambda: jax.block_until_ready(scan(runner)), 3, blocks) / 256,
        }
    return {"env": env_id, "size": size, **row, "floor_us": sum(row[k] for k in FLOOR)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["Acrobot-v1", "Breakout-MinAtar"])
    parser.add_argument("--model-sizes", nargs="+", default=["small", "medium"])
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--blocks", type=int, default=9)
    args = parser.parse_args()
    rows = [
        measure(env_id, size, args.num_envs, args.calls, args.blocks)
        for env_id in args.envs
        for size in args.model_sizes
    ]
    print(
        f"microseconds per call, median of {args.blocks} blocks of {args.calls} calls, {args.num_envs} envs; "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), jax {jax.__version__} on {jax.devices()[0]}\n"
    )
    print("| " + " | ".join(rows[0]) + " |")
    print("| --- " * len(rows[0]) + "|")
    for row in rows:
        print("| " + " | ".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row.values()) + " |")


if __name__ == "__main__":
    main()

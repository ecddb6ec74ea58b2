"""What does ppo_torch.py pay per rollout step to cross between JAX and torch? A micro-benchmark.

Times, for the shapes a rollout step uses (num_envs x obs_dim observations, num_envs int32 actions):
the DLPack hand-overs JAX -> torch (`torch.from_dlpack`) and torch -> JAX (`jnp.from_dlpack`), a NumPy
round trip for comparison, the jitted env step itself (ppo_torch.step_envs, with a barrier) and the eager
policy step. Each figure is the median over --blocks blocks of --calls calls, in microseconds per call.

    python -m benchmarks.dlpack_crossing --envs Acrobot-v1 Breakout-MinAtar
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


def measure(env_id: str, num_envs: int, calls: int, blocks: int) -> dict:
    env, env_params = ppo.make_env(env_id)
    runner = ppo.reset_envs(env, env_params, jax.random.key(0), num_envs)
    obs = runner.obs
    action = torch.zeros(num_envs, dtype=torch.int32)
    env_step = jax.jit(partial(ppo.step_envs, env, env_params))
    jax_action = jnp.from_dlpack(action)
    agent = ppo.Agent(obs.shape[-1], ppo.MODEL_SIZES["small"], env.num_actions)
    torch_obs, noise = torch.from_dlpack(obs), torch.rand(num_envs, env.num_actions)
    assert torch_obs.data_ptr() == obs.unsafe_buffer_pointer(), "JAX -> torch copied"
    assert jax_action.unsafe_buffer_pointer() == action.data_ptr(), "torch -> JAX copied"

    def policy():
        with torch.no_grad():
            agent.get_action_and_value(torch_obs, noise)

    timings = {
        "jax->torch obs": lambda: torch.from_dlpack(obs),
        "torch->jax action": lambda: jnp.from_dlpack(action),
        "numpy round trip obs+action": lambda: (torch.from_numpy(np.asarray(obs)), jnp.asarray(action.numpy())),
        "env step (jit, blocked)": lambda: jax.block_until_ready(env_step(runner, jax_action)),
        "policy step (eager, small)": policy,
    }
    row = {name: per_call_us(fn, calls, blocks) for name, fn in timings.items()}
    row["crossing / env step"] = (row["jax->torch obs"] + row["torch->jax action"]) / row["env step (jit, blocked)"]
    return {"env": env_id, "obs shape": f"{num_envs}x{obs.shape[-1]}", **row}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["Acrobot-v1", "Breakout-MinAtar"])
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--blocks", type=int, default=9)
    args = parser.parse_args()
    rows = [measure(env_id, args.num_envs, args.calls, args.blocks) for env_id in args.envs]
    print(f"microseconds per call, median of {args.blocks} blocks of {args.calls} calls; "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads), jax {jax.__version__} on {jax.devices()[0]}\n")
    print("| " + " | ".join(rows[0]) + " |")
    print("| --- " * len(rows[0]) + "|")
    for row in rows:
        print("| " + " | ".join(f"{v:.2f}" if isinstance(v, float) and k.startswith("crossing") else
                                f"{v:.1f}" if isinstance(v, float) else str(v) for k, v in row.items()) + " |")


if __name__ == "__main__":
    main()

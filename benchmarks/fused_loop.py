"""ppo_linen.py as a user trains it (--no-sync-timing: calls of up to 128 iterations, a second's
worth each, logging between them) vs the same training as ONE jitted loop over all iterations
(PureJaxRL style).

The script pays a host round trip per call (dispatch, one metrics transfer, the calls' logging);
the fused loop pays none. Both use ppo_linen's own rollout and update, so the math is identical.
Target: the script keeps >= 90 % of the fused loop's steady-state throughput.

    python -m benchmarks.fused_loop --env Acrobot-v1 --model-size small --repeats 2
"""

import time
from dataclasses import dataclass

import jax
import pandas as pd
import tyro

import ppo_linen as ppo
from benchmarks.common import STEADY_FROM, run_and_read, steady_mean


@dataclass
class Options:
    env: str = "Acrobot-v1"
    """the gymnax env"""
    model_size: str = "small"
    """small | medium | large"""
    num_iterations: int = 100
    """iterations per run"""
    repeats: int = 2
    """runs of each design, alternated"""


def fused_seconds_per_iteration(args: ppo.Args) -> tuple[float, float]:
    """(compile seconds, steady seconds per iteration) of the whole training as one jitted
    lax.scan."""
    env, env_params = ppo.make_env(args.env)
    # as ppo_linen.main()
    env_key, init_key, update_key = jax.random.split(jax.random.key(args.seed), 3)
    runner = ppo.reset_envs(env, env_params, env_key, args.num_envs)
    agent = ppo.Agent(ppo.MODEL_SIZES[args.model_size], env.num_actions, env.continuous)
    tx, _ = ppo.make_optimizer(args)
    params = jax.jit(agent.init)(init_key, runner.obs)
    state = ppo.TrainState.create(apply_fn=agent.apply, params=params, tx=tx)

    def train(state, runner, update_key):
        def iteration(carry, _):
            state, runner, update_key = carry
            runner, batch, episode_stats = ppo.rollout(env, env_params, args, state, runner)
            state, update_key, losses = ppo.update(args, state, batch, update_key)
            return (state, runner, update_key), {**episode_stats, **losses}

        return jax.lax.scan(iteration, (state, runner, update_key), length=args.num_iterations)

    start = time.perf_counter()
    compiled = jax.jit(train).lower(state, runner, update_key).compile()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    jax.block_until_ready(compiled(state, runner, update_key))
    return compile_s, (time.perf_counter() - start) / args.num_iterations


def main():
    opts = tyro.cli(Options)
    args = ppo.Args(
        env=opts.env,
        model_size=opts.model_size,
        num_iterations=opts.num_iterations,
        sync_timing=False,
    )
    rows = []
    for repeat in range(opts.repeats):
        run = run_and_read(
            "ppo_linen.py",
            "--env",
            opts.env,
            "--model-size",
            opts.model_size,
            "--num-iterations",
            str(opts.num_iterations),
            "--no-sync-timing",
        )
        rows.append(
            {
                "design": "script",
                "repeat": repeat,
                "compile_s": float(run["series"]["time/iteration"][0]),
                "steady_s_per_iter": steady_mean(run),
                "total_s": run["summary"]["total_s"],
            }
        )
        compile_s, per_iteration = fused_seconds_per_iteration(args)
        rows.append(
            {
                "design": "fused",
                "repeat": repeat,
                "compile_s": compile_s,
                "steady_s_per_iter": per_iteration,
                "total_s": compile_s + per_iteration * opts.num_iterations,
            }
        )
    table = pd.DataFrame(rows)
    print(table.to_string(index=False, float_format="%.4f"))
    medians = table.groupby("design")["steady_s_per_iter"].median()
    batch = args.batch_size
    # as steady_mean: 1+ in a shorter run
    steady = STEADY_FROM if opts.num_iterations > STEADY_FROM else 1
    print(
        f"\n{opts.env} {opts.model_size}, {opts.num_iterations} iterations, steady state = "
        f"iterations {steady}+ "
        f"(fused: whole loop / iterations)"
    )
    print(
        f"steady SPS: script {batch / medians['script']:,.0f}, fused "
        f"{batch / medians['fused']:,.0f}"
    )
    print(
        f"the script keeps {medians['fused'] / medians['script']:.1%} of the fused "
        "throughput (target >= 90%)"
    )


if __name__ == "__main__":
    main()

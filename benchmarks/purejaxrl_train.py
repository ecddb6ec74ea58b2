"""PureJaxRL's own PPO trained in this process, for benchmarks/purejaxrl.py: its checkout's
purejaxrl/ppo.py imported as it is (make_train, with its own wrappers.py), nothing of it copied or
changed. Run with PureJaxRL's interpreter (its own venv, benchmarks/purejaxrl-requirements.txt),
so it imports nothing of this project: the standard library, jax and PureJaxRL only. With --shims
it runs on this project's interpreter instead, with benchmarks/purejaxrl_shims.py's stand-ins.

    python benchmarks/purejaxrl_train.py --purejaxrl-dir CHECKOUT --agents 4 --iterations 12
    python benchmarks/purejaxrl_train.py --purejaxrl-dir CHECKOUT --whole --iterations 100

Steady (the default): `jax.jit(jax.vmap(make_train(config)))` over --agents seeds, as PureJaxRL's
README runs it; compiled ahead of time (timed apart), run once as a warm-up, then run and timed to
its end (block_until_ready): every iteration of that run is a steady one. --whole: one agent as a
user runs it, `jax.jit(make_train(config))(key)` (compiled, then run: its compile timed apart),
its metrics fetched to the host. Prints one JSON line last: the times in seconds from this
process's start.
"""

import time

START = time.perf_counter()  # the imports count from here, as the templates' import_s does

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--purejaxrl-dir", required=True, help="a PureJaxRL checkout")
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--num-envs", type=int, default=32)
    p.add_argument("--num-steps", type=int, default=256)
    p.add_argument("--update-epochs", type=int, default=10)
    p.add_argument("--num-minibatches", type=int, default=8)
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--agents", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--whole", action="store_true", help="one agent, compile included")
    p.add_argument(
        "--shims",
        action="store_true",
        help="on this project's JAX: stand-ins for distrax, gymnax 0.0.x's step and the missing "
        "brax and navix (benchmarks/purejaxrl_shims.py)",
    )
    return p


def config(opts) -> dict:
    """PureJaxRL's config for CartPole-v1 (its ppo.py's __main__), with the batch and the update
    of opts and TOTAL_TIMESTEPS giving --iterations updates; DEBUG off (no callback per update)."""
    return {
        "LR": 2.5e-4,
        "NUM_ENVS": opts.num_envs,
        "NUM_STEPS": opts.num_steps,
        "TOTAL_TIMESTEPS": opts.iterations * opts.num_envs * opts.num_steps,
        "UPDATE_EPOCHS": opts.update_epochs,
        "NUM_MINIBATCHES": opts.num_minibatches,
        "GAMMA": 0.99,
        "GAE_LAMBDA": 0.95,
        "CLIP_EPS": 0.2,
        "ENT_COEF": 0.01,
        "VF_COEF": 0.5,
        "MAX_GRAD_NORM": 0.5,
        "ACTIVATION": "tanh",
        "ENV_NAME": opts.env,
        "ANNEAL_LR": True,
        "DEBUG": False,
    }


def since_start() -> float:
    return time.perf_counter() - START


def main() -> None:
    opts = parser().parse_args()
    # ppo.py imports its wrappers as a top-level module: its folder goes first on the path
    sys.path.insert(0, str(Path(opts.purejaxrl_dir, "purejaxrl").resolve()))
    shims = []
    if opts.shims:
        # a sibling of this file, which runs as a script
        import purejaxrl_shims

        shims = purejaxrl_shims.install()
    import jax
    from ppo import make_train

    result = {"import_s": since_start(), "device": str(jax.devices()[0]), "shims": shims}
    if opts.whole:
        key = jax.random.PRNGKey(opts.seed)
        # the work of jax.jit(train)(key), in two steps so that the record can tell them apart
        started = time.perf_counter()
        compiled = jax.jit(make_train(config(opts))).lower(key).compile()
        result["compile_s"] = time.perf_counter() - started
        result["setup_s"] = since_start()  # to its first iteration, as the templates' setup_s
        out = compiled(key)
        returns = jax.device_get(out["metrics"]["returned_episode_returns"])
        result["final_return"] = float(returns[-10:].mean())
    else:
        keys = jax.random.split(jax.random.PRNGKey(opts.seed), opts.agents)
        train = jax.jit(jax.vmap(make_train(config(opts))))
        started = time.perf_counter()
        compiled = train.lower(keys).compile()
        result["compile_s"] = time.perf_counter() - started
        jax.block_until_ready(compiled(keys))  # the warm-up run
        started = time.perf_counter()
        jax.block_until_ready(compiled(keys))
        result["train_s"] = time.perf_counter() - started
    result["total_s"] = since_start()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

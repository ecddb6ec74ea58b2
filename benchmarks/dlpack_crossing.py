"""What does one rollout step of ppo_torch.py cost, piece by piece? The per-call floor and the
script's calls.

ppo_torch.py's rollout is a Python loop: per env step, a policy call, a hand-over of the actions to
JAX, one jitted env call (step_envs) and a hand-over of the next observation back to torch (the
other env fields cross once per rollout, stacked by torch_glue.stack_steps). Linen's rollout is one
jitted scan. This times each piece for the shapes a rollout step uses (num_envs envs), in
microseconds per call, the median of --rounds rounds (the pieces alternate within each round) of the
median of --blocks blocks of --calls calls:
- floors: a trivial jitted call (`x + 1`); the vmapped gymnax step alone (keys split beforehand;
  obs, state, reward, terminated, truncated out); the same env step inside a jitted 256-step
  lax.scan, per step (the env's own work);
- the env call: the script's (step_envs jitted, the Runner pytree in and out), and an alternative
  not in the script: the Runner carried as one flat array of 32-bit words (fewer arrays per call),
  donated; each blocked;
- the policy step: eager, traced (torch_glue.compiled_steps': what ppo_torch.py runs on a CPU) and
  compiled (what it runs on a GPU);
- the crossings: torch -> NumPy by DLPack (the script's on a CPU) and by `.numpy()`; JAX -> torch by
  DLPack through NumPy's view (the script's on a CPU) and by JAX's DLPack, each on a fresh JAX
  result (less the trivial call).
script step = traced policy + np.from_dlpack + env call + DLPack through NumPy: a rollout step,
  the loop aside.
env call / floor = the script's env call over the env step alone: what the call adds to the env's
  own call.

    python -m benchmarks.dlpack_crossing --envs CartPole-v1 Acrobot-v1 --model-sizes small medium
"""

import argparse
import statistics
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax.flatten_util import ravel_pytree

import ppo_torch as ppo
import torch_glue
from atomic import check_outputs
from benchmarks.common import (
    OUT_HELP,
    check_choices,
    check_counts,
    check_envs,
    check_or_exit,
    show_table,
)

TOOL = "benchmarks.dlpack_crossing"
SCRIPT_STEP = (
    "policy traced",
    "torch->numpy np.from_dlpack",
    "env call (Runner pytree)",
    "jax->torch via numpy",
)
# timed with the trivial call that makes a fresh result
FRESH = ("jax->torch dlpack", "jax->torch via numpy")


# a leaf as 32-bit words (a key as its data, bool and small ints widened): exact, reversible
def to_words(x):
    x = jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x
    return (
        jax.lax.bitcast_convert_type(x, jnp.uint32)
        if x.dtype.itemsize == 4
        else x.astype(jnp.uint32)
    )


def from_words(words, like):  # to_words undone, given a leaf of the same shape and dtype
    if jnp.issubdtype(like.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(words)
    return (
        jax.lax.bitcast_convert_type(words, like.dtype)
        if like.dtype.itemsize == 4
        else words.astype(like.dtype)
    )


def words_env_call(env, env_params, runner):
    """(start, step): the Runner as one flat uint32 array, and step_envs on it, jitted with the
    words donated."""
    unravel = ravel_pytree(jax.tree.map(to_words, runner))[1]

    def start(runner):
        return ravel_pytree(jax.tree.map(to_words, runner))[0]

    def step(words, action):
        runner_in = jax.tree.map(from_words, unravel(words), runner)
        runner_out, fields = ppo.step_envs(env, env_params, runner_in, action)
        return start(runner_out), fields

    return jax.jit(start), jax.jit(step, donate_argnums=0)


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


def env_pieces(env_id: str, num_envs: int) -> dict:
    """name: (a function of no argument, calls per timing) for the env's floors and calls."""
    env, env_params = ppo.make_env(env_id)
    runner = ppo.reset_envs(env, env_params, jax.random.key(0), num_envs)
    action = np.zeros(
        (num_envs, env.num_actions) if env.continuous else num_envs,
        np.float32 if env.continuous else np.int32,
    )
    step_keys = jax.random.split(jax.random.key(1), num_envs)
    env_alone = jax.jit(lambda keys, state, action: env.step(keys, state, action, env_params)[:5])
    pytree_call = jax.jit(partial(ppo.step_envs, env, env_params))
    start_words, words_call = words_env_call(env, env_params, runner)
    trivial, x = jax.jit(lambda x: x + 1), jnp.zeros(4)
    scan = jax.jit(
        lambda r: jax.lax.scan(
            lambda r, _: (ppo.step_envs(env, env_params, r, action)[0], None), r, length=256
        )[0]
    )
    # each call takes the last call's output
    carried = {"runner": runner, "words": start_words(runner)}

    def call_pytree():
        carried["runner"], fields = pytree_call(carried["runner"], action)
        jax.block_until_ready(fields)

    def call_words():
        carried["words"], fields = words_call(carried["words"], action)
        jax.block_until_ready(fields)

    return {
        "trivial jit call": (lambda: jax.block_until_ready(trivial(x)), 1),
        "env step alone": (
            lambda: jax.block_until_ready(env_alone(step_keys, runner.env_state, action)),
            1,
        ),
        # per step of 256
        "env step in a scan": (lambda: jax.block_until_ready(scan(runner)), 1 / 256),
        "env call (Runner pytree)": (call_pytree, 1),
        "env call (Runner as words)": (call_words, 1),
        # a fresh result each call, as in a rollout
        "jax->torch dlpack": (lambda: torch.from_dlpack(trivial(x)), 1),
        "jax->torch via numpy": (lambda: torch.from_dlpack(np.asarray(trivial(x))), 1),
    }


def policy_pieces(env_id: str, size: str, num_envs: int) -> dict:
    env, env_params = ppo.make_env(env_id)
    obs_dim = ppo.reset_envs(env, env_params, jax.random.key(0), num_envs).obs.shape[-1]
    # one agent, on the agents' axis as the script trains it
    agent = ppo.Agent(obs_dim, ppo.MODEL_SIZES[size], env.num_actions, env.continuous, seeds=[0])
    obs, noise = torch.randn(1, num_envs, obs_dim), torch.rand(1, num_envs, env.num_actions)
    # the policy that ppo_torch.py traces for --compile torchscript (and compile on a CPU)
    traced = torch_glue.compiled_steps("torchscript", agent, ppo.minibatch_step, obs)[0]
    compiled = torch.compile(agent.get_action_and_value, dynamic=False, fullgraph=True)
    action = agent.get_action_and_value(obs, noise)[0].detach()
    return {
        "policy eager": (lambda: agent.get_action_and_value(obs, noise), 1),
        "policy traced": (lambda: traced(obs, noise), 1),
        "policy compiled": (lambda: compiled(obs, noise), 1),
        "torch->numpy .numpy()": (lambda: action.numpy(), 1),
        "torch->numpy np.from_dlpack": (lambda: np.from_dlpack(action), 1),
    }


def measure(
    env_id: str, size: str, num_envs: int = 32, calls: int = 300, blocks: int = 5, rounds: int = 3
) -> dict:
    """Each piece's cost per call in microseconds (pieces alternate within a round; the median over
    rounds), their script step sum, and the env call's ratio to the env step alone."""
    with torch.no_grad():
        pieces = {**env_pieces(env_id, num_envs), **policy_pieces(env_id, size, num_envs)}
        times = {name: [] for name in pieces}
        for _ in range(rounds):
            for name, (fn, per_call) in pieces.items():
                n = max(3, int(calls * per_call))
                times[name].append(per_call_us(fn, n, blocks) * per_call)
    row = {name: statistics.median(values) for name, values in times.items()}
    for name in FRESH:
        row[name] -= row["trivial jit call"]
    row["script step"] = sum(row[name] for name in SCRIPT_STEP)
    row["env call / floor"] = row["env call (Runner pytree)"] / row["env step alone"]
    return {"env": env_id, "size": size, **row}


def markdown(rows: list[dict], header: str) -> str:
    lines = [header, "", "| " + " | ".join(rows[0]) + " |", "| --- " * len(rows[0]) + "|"]
    for row in rows:
        lines.append(
            "| "
            + " | ".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row.values())
            + " |"
        )
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    """The options, checked before anything is measured: a bad one ends the program in one line,
    exit status 2."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Acrobot-v1"])
    parser.add_argument("--model-sizes", nargs="+", default=["small", "medium"])
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", help=OUT_HELP)
    args = parser.parse_args(argv)

    def check():
        check_counts(args, "num_envs", "calls", "blocks", "rounds")
        check_envs("--envs", args.envs)
        check_choices("--model-sizes", args.model_sizes, list(ppo.MODEL_SIZES))
        if args.out:
            check_outputs(TOOL, args.out)

    check_or_exit(check)
    return args


def main(argv=None):
    args = parse_args(argv)
    rows = [
        measure(env_id, size, args.num_envs, args.calls, args.blocks, args.rounds)
        for env_id in args.envs
        for size in args.model_sizes
    ]
    header = (
        f"microseconds per call, {args.num_envs} envs, the median of {args.rounds} alternating "
        "rounds of the median of "
        f"{args.blocks} blocks of {args.calls} calls; torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), "
        f"jax {jax.__version__} on {jax.devices()[0]}"
    )
    table = markdown(rows, header)
    show_table(TOOL, args.out, {"header": header, "rows": rows}, table)


if __name__ == "__main__":
    main()

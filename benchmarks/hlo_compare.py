"""Do ppo_linen.py, ppo_nnx.py and ppo_equinox.py hand XLA the same program? Lowers and compiles the
rollout and the update of each script for one configuration, the way its compiled modes do (linen
jax.jit; nnx nnx.jit, in graph mode and in tree mode; equinox both: its default `partition`, a
plain jax.jit, and `filter_jit`); then compares, per function:

- XLA's cost_analysis() of the compiled executable: flops and bytes accessed;
- a histogram of the op kinds of the optimized HLO (fusions counted as one op, their insides
  separately);
- the size of the compiled module (instructions, characters of the optimized HLO text);
- whether the optimized HLO is identical to Linen's up to names (instruction names, metadata, module
  name).

Nothing is timed, so it needs no quiet machine.

    python -m benchmarks.hlo_compare --env Acrobot-v1 --model-size small
"""

import argparse
import re
from collections import Counter
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
from flax import nnx

import ppo_equinox
import ppo_linen
import ppo_nnx

# `%name = type opcode(`
OP = re.compile(r"^\s*(?:ROOT )?%?[\w.\-]+ = [^=]*?\s([a-z][\w\-]*)\(", re.M)


def zero_batch(args, obs_dim: int) -> ppo_linen.Batch:
    """The update's input, of the configuration's shape: zeros."""
    return ppo_linen.Batch(
        jnp.zeros((args.batch_size, obs_dim)),
        jnp.zeros(args.batch_size, jnp.int32),
        *(jnp.zeros(args.batch_size) for _ in range(4)),
    )


def inputs_of(args, env, env_params) -> tuple:
    """What the lowerers take after args, made as the scripts' main() makes it (one agent): env,
    env_params, a reset runner, a batch of zeros, the init key and the update key."""
    env_key, init_key, update_key = jax.random.split(jax.random.key(args.seed), 3)
    runner = ppo_linen.reset_envs(env, env_params, env_key, args.num_envs)
    batch = zero_batch(args, runner.obs.shape[-1])
    return env, env_params, runner, batch, init_key, update_key


def lowerers_linen(args, env, env_params, runner, batch, init_key, update_key):
    """{function: a callable that lowers it}, each lowered only when called."""
    agent = ppo_linen.Agent(ppo_linen.MODEL_SIZES[args.model_size], env.num_actions, env.continuous)
    tx, _ = ppo_linen.make_optimizer(args)
    state = ppo_linen.TrainState.create(
        apply_fn=agent.apply, params=agent.init(init_key, runner.obs), tx=tx
    )
    return {
        "rollout": partial(
            jax.jit(partial(ppo_linen.rollout, env, env_params, args)).lower, state, runner
        ),
        "update": partial(jax.jit(partial(ppo_linen.update, args)).lower, state, batch, update_key),
    }


def lowerers_nnx(args, env, env_params, runner, batch, init_key, update_key, graph=True):
    """graph=False: ppo_nnx.py's `tree` mode, Flax's tree mode (modules flattened as pytrees)."""
    # each script's own NamedTuple types
    runner, batch = (ppo_nnx.Runner(*runner), ppo_nnx.Batch(*batch))
    agent = ppo_nnx.Agent(
        runner.obs.shape[-1],
        ppo_nnx.MODEL_SIZES[args.model_size],
        env.num_actions,
        env.continuous,
        rngs=nnx.Rngs(init_key),
    )
    optimizer = nnx.Optimizer(agent, ppo_nnx.make_optimizer(args)[0], wrt=nnx.Param)
    rollout_fn = nnx.jit(partial(ppo_nnx.rollout, env, env_params, args), graph=graph)
    update_fn = nnx.jit(partial(ppo_nnx.update, args), graph=graph)
    return {
        "rollout": partial(rollout_fn.lower, agent, runner),
        "update": partial(update_fn.lower, agent, optimizer, batch, update_key),
    }


def lowerers_equinox(args, env, env_params, runner, batch, init_key, update_key, mode):
    runner, batch = ppo_equinox.Runner(*runner), ppo_equinox.Batch(*batch)
    agent = ppo_equinox.Agent(
        runner.obs.shape[-1],
        ppo_equinox.MODEL_SIZES[args.model_size],
        env.num_actions,
        env.continuous,
        key=init_key,
    )
    tx, _ = ppo_equinox.make_optimizer(args)
    opt_state = tx.init(eqx.filter(agent, eqx.is_array))
    rollout_fn, update_fn = (
        partial(ppo_equinox.rollout, env, env_params, args),
        partial(ppo_equinox.update, args, tx),
    )
    # partition: ppo_equinox.py's plain jax.jit (every leaf of its agent is an array)
    jit = eqx.filter_jit if mode == "filter_jit" else jax.jit
    return {
        "rollout": partial(jit(rollout_fn).lower, agent, runner),
        "update": partial(jit(update_fn).lower, agent, opt_state, batch, update_key),
    }


def normalized(hlo: str) -> str:
    """The optimized HLO without what differs between identical programs: metadata, the module name,
    identifiers."""
    hlo = re.sub(r",? metadata=\{[^}]*\}", "", hlo)
    hlo = re.sub(r"^HloModule \S+", "HloModule m", hlo, flags=re.M)
    names = {}
    return re.sub(r"%[\w.\-]+", lambda m: names.setdefault(m.group(0), f"%v{len(names)}"), hlo)


def describe(lowered) -> dict:
    compiled = lowered.compile()
    compiled = getattr(compiled, "compiled", compiled)  # eqx.filter_jit's Compiled wraps jax's
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost  # a list of one dict in older JAX
    hlo = compiled.as_text()
    ops = Counter(OP.findall(hlo))
    return {
        "flops": cost.get("flops", float("nan")),
        "bytes": cost.get("bytes accessed", float("nan")),
        "ops": ops,
        "instructions": sum(ops.values()),
        "chars": len(hlo),
        "hlo": normalized(hlo),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="Acrobot-v1")
    parser.add_argument("--model-size", default="small", choices=list(ppo_linen.MODEL_SIZES))
    parser.add_argument("--top", type=int, default=12, help="op kinds shown in the histogram")
    opts = parser.parse_args()

    args = ppo_linen.Args(env=opts.env, model_size=opts.model_size)
    env, env_params = ppo_linen.make_env(args.env)
    inputs = inputs_of(args, env, env_params)
    lowerers = {
        "linen jit": lowerers_linen(args, *inputs),
        "nnx jit": lowerers_nnx(ppo_nnx.Args(**_shared(args)), *inputs),
        "nnx tree": lowerers_nnx(ppo_nnx.Args(**_shared(args)), *inputs, graph=False),
        **{
            f"equinox {mode}": lowerers_equinox(ppo_equinox.Args(**_shared(args)), *inputs, mode)
            for mode in ("filter_jit", "partition")
        },
    }
    steps = f"{args.num_envs} envs x {args.num_steps} steps"
    shape = f"{steps}, {args.update_epochs} epochs x {args.num_minibatches}"
    print(
        f"**{args.env}, {args.model_size}**: {shape} minibatches; "
        f"jax {jax.__version__}, backend {jax.default_backend()}\n"
    )
    for fn in ("rollout", "update"):
        info = {name: describe(lower[fn]()) for name, lower in lowerers.items()}
        ref = info["linen jit"]
        print(f"{fn}\n")
        print(
            "| framework | GFLOP | ratio | MB accessed | ratio | instructions | HLO chars | "
            "identical to linen |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for name, d in info.items():
            same = "yes" if d["hlo"] == ref["hlo"] else "no"
            print(
                f"| {name} | {d['flops'] / 1e9:.4f} | {d['flops'] / ref['flops']:.3f} | "
                f"{d['bytes'] / 1e6:.2f} "
                f"| {d['bytes'] / ref['bytes']:.3f} | {d['instructions']} | {d['chars']} | {same} |"
            )
        kinds = [
            k for k, _ in sum((d["ops"] for d in info.values()), Counter()).most_common(opts.top)
        ]
        print(f"\nop kinds ({fn}, the {len(kinds)} most frequent; differences from linen below)\n")
        print("| op | " + " | ".join(info) + " |\n| --- |" + " ---: |" * len(info))
        for k in kinds:
            print(f"| {k} | " + " | ".join(str(d["ops"][k]) for d in info.values()) + " |")
        for name, d in info.items():
            diff = {
                k: d["ops"][k] - ref["ops"][k]
                for k in set(d["ops"]) | set(ref["ops"])
                if d["ops"][k] != ref["ops"][k]
            }
            if name != "linen jit":
                print(f"\n{name} - linen jit: {dict(sorted(diff.items())) or 'the same op counts'}")
        print()


def _shared(args) -> dict:
    """The Args fields every script shares (all but the compile mode, which has other choices in
    each script)."""
    return {k: v for k, v in vars(args).items() if k not in ("compile", "exp_name")}


if __name__ == "__main__":
    main()

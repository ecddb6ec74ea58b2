"""Where a run's compilation goes: lowers and compiles, in one process, on the default device, the
pieces of ppo_linen.py's iteration 0 (the init, the rollout, the update) and parts of the update,
then the rollout and update of ppo_nnx.py and ppo_equinox.py, and prints each one's compile time
and the size of its optimized HLO. The shuffles of the update's epochs are compiled both ways:
drawn one call per epoch (as before 2026-12) and vmapped (the templates' way since).

Nothing runs a training step; each piece compiles once, in a fixed order, after a warm-up compile,
so the times are one measurement each (the chip's compiler is deterministic enough that one says
where the seconds go; repeat the tool for a spread).

    python -m benchmarks.compile_parts --env CartPole-v1 --model-size small --out DIR/parts.json
"""

import argparse
import sys
import time
from functools import partial

import gymnax
import jax
import jax.numpy as jnp

import ppo_equinox
import ppo_linen
import ppo_nnx
from atomic import check_outputs
from benchmarks.common import check_choices, check_envs, check_or_exit, machine, run_recorded
from benchmarks.hlo_compare import _shared, inputs_of, lowerers_equinox, lowerers_nnx, zero_batch

TOOL = "benchmarks.compile_parts"
# the pieces lowered are the gymnax backend's
GYMNAX_ENVS = tuple(gymnax.registered_envs)


def draws(args):
    """The epochs' shuffles, one call per epoch and vmapped: the same permutations."""

    def per_epoch(key):
        keys = jax.random.split(key, args.update_epochs)
        return jnp.stack([jax.random.permutation(k, args.batch_size) for k in keys])

    def vmapped(key):
        keys = jax.random.split(key, args.update_epochs)
        return jax.vmap(partial(jax.random.permutation, x=args.batch_size))(keys)

    def argsort(key):
        # other orders than permutation's (one sort of random bits, not its rounds of sorts)
        bits = jax.random.bits(key, (args.update_epochs, args.batch_size))
        return jnp.argsort(bits, axis=-1)

    return per_epoch, vmapped, argsort


def linen_pieces(args, env, env_params):
    """{name: a function that lowers the piece}: ppo_linen.py's, as its main() jits them (vmapped
    over one agent)."""
    keys = jax.random.split(jax.random.key(args.seed), 3)
    runner = jax.vmap(partial(ppo_linen.reset_envs, env, env_params, num_envs=args.num_envs))(
        keys[None, 0]
    )
    sizes = ppo_linen.MODEL_SIZES[args.model_size]
    agent = ppo_linen.Agent(sizes, env.num_actions, env.continuous, args.dtype)
    tx, _ = ppo_linen.make_optimizer(args)

    def init_agent(key):
        return agent.init(key, runner.obs[0])

    init = jax.jit(partial(jax.lax.map, init_agent))
    create = partial(ppo_linen.TrainState.create, apply_fn=agent.apply, tx=tx)
    # shapes only: lowering needs no values, and running the init would compile it before its turn
    params = jax.eval_shape(init, keys[None, 1])
    state = jax.eval_shape(jax.vmap(lambda params: create(params=params)), params)
    batch = jax.tree.map(lambda x: x[None], zero_batch(args, runner.obs.shape[-1]))
    update_key = keys[None, 2]
    orders = jnp.zeros((1, args.update_epochs, args.batch_size), jnp.int32)
    rollout = jax.jit(jax.vmap(partial(ppo_linen.rollout, env, env_params, args)))
    update = jax.jit(jax.vmap(partial(ppo_linen.update, args)))
    per_epoch, vmapped, argsort = draws(args)
    host_key = jax.device_put(keys[None, 1], jax.devices("cpu")[0])
    return {
        "linen init": lambda: init.lower(keys[None, 1]),
        "linen init, on the host's CPU": lambda: init.lower(host_key),
        "linen rollout": lambda: rollout.lower(state, runner),
        "linen update": lambda: update.lower(state, batch, update_key),
        "linen update, the orders given": lambda: update.lower(state, batch, update_key, orders),
        "shuffles, a call per epoch": lambda: jax.jit(per_epoch).lower(keys[2]),
        "shuffles, vmapped": lambda: jax.jit(vmapped).lower(keys[2]),
        "shuffles, an argsort of random bits": lambda: jax.jit(argsort).lower(keys[2]),
    }


def other_pieces(args, env, env_params):
    """ppo_nnx.py's and ppo_equinox.py's rollout and update (hlo_compare's lowering: one agent)."""
    inputs = inputs_of(args, env, env_params)
    nnx_lowerers = lowerers_nnx(ppo_nnx.Args(**_shared(args)), *inputs)
    equinox_args = ppo_equinox.Args(**_shared(args))
    equinox_lowerers = lowerers_equinox(equinox_args, *inputs, "partition")
    pieces = {}
    for framework, lowerers in (("nnx", nnx_lowerers), ("equinox", equinox_lowerers)):
        for fn, lower in lowerers.items():
            pieces[f"{framework} {fn}"] = lower
    return pieces


def compile_piece(lower) -> dict:
    """Lowers and compiles one piece: seconds of each, and the optimized HLO's characters."""
    start = time.perf_counter()
    lowered = lower()
    lowered_at = time.perf_counter()
    compiled = lowered.compile()
    end = time.perf_counter()
    compiled = getattr(compiled, "compiled", compiled)
    return {
        "lower_s": lowered_at - start,
        "compile_s": end - lowered_at,
        "hlo_chars": len(compiled.as_text()),
    }


def markdown(record: dict) -> str:
    lines = [
        f"# Compile time by piece: {record['env']}, {record['model_size']}",
        "",
        f"JAX {record['jax']}, backend {record['backend']}, device {record['device']}; "
        f"one compile each, in this order, after a warm-up.",
        "",
        "| piece | lower (s) | compile (s) | optimized HLO (characters) |",
        "|-|-:|-:|-:|",
    ]
    for name, row in record["pieces"].items():
        lines.append(
            f"| {name} | {row['lower_s']:.2f} | {row['compile_s']:.2f} | {row['hlo_chars']:,} |"
        )
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1", help="a gymnax env id")
    parser.add_argument("--model-size", default="small")
    parser.add_argument("--out", default="results/benchmarks/compile_parts.json")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    opts = parse(sys.argv[1:] if argv is None else argv)
    check_or_exit(lambda: check_choices("--model-size", [opts.model_size], ppo_linen.MODEL_SIZES))
    check_or_exit(lambda: check_envs("--env", [opts.env], GYMNAX_ENVS))
    check_or_exit(lambda: check_outputs(TOOL, opts.out))
    args = ppo_linen.Args(env=opts.env, model_size=opts.model_size)
    env, env_params = ppo_linen.make_env(args.env)
    device = jax.devices()[0]
    record = {
        "env": args.env,
        "model_size": args.model_size,
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "device": device.device_kind,
        "machine": machine(),
        "pieces": {},
        "status": "running",
    }

    def run():
        # the first compile of a process also starts the compiler
        jax.jit(lambda x: x + 1).lower(1.0).compile()
        pieces = linen_pieces(args, env, env_params) | other_pieces(args, env, env_params)
        for name, lower in pieces.items():
            record["pieces"][name] = row = compile_piece(lower)
            print(f"{name}: compile {row['compile_s']:.2f} s", flush=True)

    if not run_recorded(TOOL, opts.out, record, markdown, run):
        sys.exit(130)


if __name__ == "__main__":
    main()

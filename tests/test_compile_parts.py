"""What the JAX templates hand the compiler for their update's shuffles, and the tool that times the
compilation piece by piece (benchmarks/compile_parts.py), on the CPU."""

import json
import os
import re
import subprocess
import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppo_linen
from benchmarks import compile_parts
from benchmarks.hlo_compare import _shared, inputs_of, lowerers_equinox, lowerers_nnx
from helpers import ROOT

FRAMEWORKS = ("linen", "nnx", "equinox")
# an instruction of the optimized HLO whose opcode is sort
SORT = re.compile(r"= [^=]*? sort\(")


def lowered_update(framework: str, update_epochs: int):
    """The framework's update for a small CartPole-v1 batch, lowered (not compiled)."""
    args = ppo_linen.Args(num_envs=4, num_steps=16, num_minibatches=2, update_epochs=update_epochs)
    env, env_params = ppo_linen.make_env(args.env)
    inputs = inputs_of(args, env, env_params)
    if framework == "linen":
        return compile_parts.linen_pieces(args, env, env_params)["linen update"]()
    if framework == "nnx":
        import ppo_nnx

        return lowerers_nnx(ppo_nnx.Args(**_shared(args)), *inputs)["update"]()
    import ppo_equinox

    return lowerers_equinox(ppo_equinox.Args(**_shared(args)), *inputs, "partition")["update"]()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_update_sorts_as_often_with_ten_epochs_as_with_two(framework):
    # one vmapped shuffle for all epochs: a call per epoch made XLA compile a sort per epoch (on a
    # TPU, most of the update's compile time)
    sorts = {}
    for epochs in (2, 10):
        # XLA's program (calls inlined): the lowered one calls a shuffle defined once
        hlo = lowered_update(framework, epochs).compile().as_text()
        sorts[epochs] = len(SORT.findall(hlo))
    assert sorts[2] > 0
    assert sorts[10] == sorts[2]


# an instruction of the optimized HLO that moves data without computing: a transpose or a copy
MOVE = re.compile(r"= [^=]*? (?:transpose|copy)\(")


def one_agent(tree):
    """The tree with a leading agent axis of 1, as main() vmaps every agent's state."""
    return jax.tree.map(lambda x: jnp.asarray(x)[None], tree)


def test_equinox_update_moves_no_more_data_than_linen_with_the_agents_vmapped():
    # a vmapped eqx.nn.Linear (a matvec per sample) inside main()'s vmap over agents handed XLA
    # transposed dots: 141 moves against Linen's 125, and a CPU update 1.6x slower than Linen's
    import equinox as eqx

    import ppo_equinox

    args = ppo_linen.Args(num_envs=4, num_steps=16, num_minibatches=2, update_epochs=2)
    env, env_params = ppo_linen.make_env(args.env)
    _, _, runner, batch, init_key, update_key = inputs_of(args, env, env_params)
    sizes = ppo_linen.MODEL_SIZES["small"]
    agent = ppo_linen.Agent(sizes, env.num_actions, env.continuous)
    tx, _ = ppo_linen.make_optimizer(args)
    params = agent.init(init_key, runner.obs)
    state = ppo_linen.TrainState.create(apply_fn=agent.apply, params=params, tx=tx)
    linen = jax.jit(jax.vmap(partial(ppo_linen.update, args)))
    linen = linen.lower(one_agent(state), one_agent(batch), one_agent(update_key))
    eqx_args = ppo_equinox.Args(**_shared(args))
    obs_dim = runner.obs.shape[-1]
    eqx_agent = ppo_equinox.Agent(obs_dim, sizes, env.num_actions, env.continuous, key=init_key)
    eqx_tx, _ = ppo_equinox.make_optimizer(eqx_args)
    opt_state = eqx_tx.init(eqx.filter(eqx_agent, eqx.is_array))
    equinox = jax.jit(jax.vmap(partial(ppo_equinox.update, eqx_args, eqx_tx)))
    eqx_inputs = (eqx_agent, opt_state, ppo_equinox.Batch(*batch), update_key)
    equinox = equinox.lower(*map(one_agent, eqx_inputs))
    moves = {}
    for name, lowered in (("linen", linen), ("equinox", equinox)):
        moves[name] = len(MOVE.findall(lowered.compile().as_text()))
    assert 0 < moves["equinox"] <= moves["linen"], moves


def test_the_update_trains_each_epoch_in_an_order_drawn_from_its_key():
    # the orders: an argsort of random bits per epoch (one sort to compile), each a permutation of
    # the batch; the update with them drawn equals the update given them
    args = ppo_linen.Args(num_envs=4, num_steps=16, num_minibatches=2, update_epochs=3)
    env, env_params = ppo_linen.make_env(args.env)
    keys = jax.random.split(jax.random.key(7), 3)
    runner = ppo_linen.reset_envs(env, env_params, keys[0], args.num_envs)
    agent = ppo_linen.Agent(ppo_linen.MODEL_SIZES["small"], env.num_actions, env.continuous)
    tx, _ = ppo_linen.make_optimizer(args)
    params = agent.init(keys[1], runner.obs)
    state = ppo_linen.TrainState.create(apply_fn=agent.apply, params=params, tx=tx)
    rng = np.random.default_rng(0)
    batch = ppo_linen.Batch(
        jnp.asarray(rng.normal(size=(args.batch_size, 4)), jnp.float32),
        jnp.asarray(rng.integers(0, 2, args.batch_size), jnp.int32),
        *(jnp.asarray(rng.normal(size=args.batch_size), jnp.float32) for _ in range(4)),
    )
    drawn, key_after, _ = ppo_linen.update(args, state, batch, keys[2])
    key, shuffle_key = jax.random.split(keys[2])
    bits = jax.random.bits(shuffle_key, (args.update_epochs, args.batch_size))
    orders = np.argsort(np.asarray(bits), axis=-1, kind="stable")
    for order in orders:
        np.testing.assert_array_equal(np.sort(order), np.arange(args.batch_size))
    # three epochs, three different orders
    assert len({tuple(order) for order in orders}) == args.update_epochs
    given, _, _ = ppo_linen.update(args, state, batch, None, jnp.asarray(orders))
    for a, b in zip(jax.tree.leaves(drawn.params), jax.tree.leaves(given.params)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(jax.random.key_data(key_after), jax.random.key_data(key))
    # another key, other orders: the update's result moves with them
    other, _, _ = ppo_linen.update(args, state, batch, keys[1])
    moved = [
        not np.array_equal(a, b)
        for a, b in zip(jax.tree.leaves(drawn.params), jax.tree.leaves(other.params))
    ]
    assert any(moved)


def test_a_bad_model_size_is_refused_in_one_line_before_anything(tmp_path):
    out = tmp_path / "parts.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.compile_parts", "--model-size", "huge", "--out", out],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr == "error: --model-size 'huge' is not one of small, medium, large\n"
    assert not out.exists()


@pytest.mark.slow
def test_every_piece_is_compiled_and_recorded(tmp_path):
    out = tmp_path / "parts.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.compile_parts", "--out", out],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.read_text())
    assert record["status"] == "finished"
    assert record["backend"] == "cpu"
    pieces = record["pieces"]
    for name in ("linen init", "linen rollout", "linen update", "nnx update", "equinox update"):
        assert pieces[name]["compile_s"] > 0
    # the vmapped shuffles: a smaller program than one shuffle per epoch
    per_epoch, vmapped = pieces["shuffles, a call per epoch"], pieces["shuffles, vmapped"]
    assert vmapped["hlo_chars"] < per_epoch["hlo_chars"]
    table = out.with_suffix(".md").read_text()
    assert all(f"| {name} |" in table for name in pieces)


# programs that the seeds' arithmetic and an eager reset of the envs compiled one op at a time
EAGER_OPS = ("iota", "add", "slice", "squeeze", "broadcast_in_dim", "_threefry_split")


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_set_up_compiles_whole_programs_not_one_op_at_a_time(tmp_path, framework):
    # on a TPU each program compiled took 0.1-0.8 s: the reset is one jitted program, the seeds are
    # NumPy's
    env = {**os.environ, "JAX_LOG_COMPILES": "1", "JAX_COMPILATION_CACHE_DIR": ""}
    done = subprocess.run(
        [sys.executable, f"ppo_{framework}.py", "--num-envs", "4", "--num-steps", "16"]
        + ["--num-iterations", "1", "--num-agents", "2", "--log-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    compiled = re.findall(r"Finished XLA compilation of jit\(([^)]*)\)", done.stderr)
    assert compiled.count("reset_envs") == 1, compiled
    assert not set(EAGER_OPS) & set(compiled), compiled

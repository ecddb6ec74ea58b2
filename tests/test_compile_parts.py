"""What the JAX templates hand the compiler for their update's shuffles, and the tool that times the
compilation piece by piece (benchmarks/compile_parts.py), on the CPU."""

import json
import re
import subprocess
import sys

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


def test_the_update_shuffles_each_epoch_as_a_key_of_its_own_would():
    # the same orders as before the shuffles were vmapped: runs of the same seed train the same
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
    key, *epoch_keys = jax.random.split(keys[2], args.update_epochs + 1)
    orders = jnp.stack([jax.random.permutation(k, args.batch_size) for k in epoch_keys])
    given, _, _ = ppo_linen.update(args, state, batch, None, orders)
    for a, b in zip(jax.tree.leaves(drawn.params), jax.tree.leaves(given.params)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(jax.random.key_data(key_after), jax.random.key_data(key))


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

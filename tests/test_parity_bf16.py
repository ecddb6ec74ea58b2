"""--dtype bfloat16 means the same in the four scripts: mixed precision, with float32 parameters,
optimizer state, log-probabilities, loss, GAE and advantages, and the networks' matrix products and
tanh in bfloat16.

Tolerances. bfloat16 keeps 8 bits of mantissa: one rounding moves a value by up to 2**-9 of itself
(0.2 %). The frameworks round at slightly different points (torch's Linear adds the bias before its
one rounding, Flax and Equinox round the product and then the sum), so their outputs differ by a
rounding here and there, and agree with a NumPy emulation of the casts (numpy_forward_bf16) within 2
% of the outputs' scale, where float32 ones agree within 1e-5. The loss is a mean over the
minibatch, where those roundings average out: the four agree within 1e-3 of it, tighter than a loss
computed in bfloat16 itself would. The backward passes round differently: Linen's, NNX's and
Equinox's gradients are the same bits, torch's differ from theirs by up to 16 % (L2, a layer's
kernel) on Pendulum-v1's actor, where its own are within 1 % of float32's; so the gradients agree
within 25 %. Adam's steps follow the gradients' signs, which those differences flip where a gradient
is near 0: after an update each array's change agrees within 35 % (L2) with Linen's (up to 23 % for
torch's compiled step on Reacher-misc; torch's largest entry differs by 6-10 % of the largest
change, as much as bfloat16's from float32's); parameters kept or stepped in bfloat16 are caught by
their values, which would all lie on bfloat16's grid."""

import equinox as eqx
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import parity_sides
import pytest
import torch
from flax import nnx
from parity_sides import (
    CONTINUOUS,
    DISCRETE,
    MLPS,
    OTHERS,
    SPECS,
    UPDATE_OVERRIDES,
    TorchSide,
    build_all,
    highest_matmul_precision,  # noqa: F401 (autouse: the float32 references in full float32)
    make_batch,
    numpy_forward,
    update_inputs,
)

import ppo_equinox
import ppo_linen
import ppo_nnx
import ppo_torch

BF16 = dict(dtype="bfloat16")


def rounded(x):
    """x rounded to bfloat16, as float32."""
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def numpy_forward_bf16(weights: dict, obs):
    """The MLPs as --dtype bfloat16 runs them, in NumPy: the observations, kernels and biases
    rounded to bfloat16; each product summed in float32 and rounded, the bias added and rounded,
    tanh rounded; the output as float32."""

    def mlp(layers, x):
        x = rounded(x)
        for i, (w, b) in enumerate(layers):
            x = rounded(rounded(x @ rounded(w)) + rounded(b))
            if i < len(layers) - 1:
                x = rounded(np.tanh(x))
        return x

    return mlp(weights["actor"], obs), mlp(weights["critic"], obs)[:, 0]


def scale(x) -> float:
    return float(np.abs(x).max())


@pytest.mark.parametrize(
    "env_id, size", [(DISCRETE[0], "small"), (DISCRETE[1], "medium"), (CONTINUOUS[-1], "small")]
)
def test_bfloat16_forward_agrees(env_id, size):
    """Every framework's bfloat16 forward pass: float32 outputs, within 2 % of their scale of the
    NumPy emulation of the casts, and away from the float32 pass (bfloat16 is really on)."""
    _, weights, sides = build_all(env_id, size, **BF16)
    obs = np.random.default_rng(2).normal(size=(64, SPECS[env_id].obs_dim)).astype(np.float32)
    emulated = numpy_forward_bf16(weights, obs)
    exact = numpy_forward(weights, obs)
    for name, side in sides.items():
        for what, actual, expected, full in zip(
            ("actor output", "values"), side.forward(obs), emulated, exact
        ):
            assert actual.dtype == np.float32, f"{name} {what}: {actual.dtype}"
            tolerance = 0.02 * scale(expected)
            np.testing.assert_allclose(
                actual, expected, rtol=0, atol=tolerance, err_msg=f"{name} {what} ({size})"
            )
            off = scale(actual - full)
            assert off > 1e-3 * scale(full), f"{name} {what}: as float32 ({off})"


@pytest.mark.parametrize("env_id", [DISCRETE[0], CONTINUOUS[0]])
def test_bfloat16_loss_and_gradients_agree(env_id):
    """The loss, its parts and the gradients (float32) of every framework in bfloat16 against
    Linen's: the loss and its parts within 1e-3, each layer's kernel gradient within 25 % (L2; see
    the module's docstring); and the loss away from float32's."""
    _, weights, sides = build_all(env_id, "small", **BF16)
    _, _, full_sides = build_all(env_id, "small", weights=weights)
    mb = make_batch(weights, 256)
    results = {name: side.loss_and_grads(mb) for name, side in sides.items()}
    loss_ref, metrics_ref, grads_ref = results["linen"]
    full_loss = full_sides["linen"].loss_and_grads(mb)[0]
    assert abs(loss_ref - full_loss) > 1e-5 * abs(full_loss), "Linen's bfloat16 loss is float32's"
    for name in OTHERS:
        loss, metrics, grads = results[name]
        assert loss == pytest.approx(loss_ref, rel=1e-3, abs=1e-5), name
        for key, value in metrics_ref.items():
            # clipfrac counts samples: a ratio at the clip's edge may fall either side
            tolerance = 3 / len(mb["obs"]) if key == "clipfrac" else 2e-3
            assert metrics[key] == pytest.approx(value, rel=1e-3, abs=tolerance), f"{name} {key}"
        for mlp in MLPS:
            for i, ((w, b), (w_ref, b_ref)) in enumerate(zip(grads[mlp], grads_ref[mlp])):
                assert w.dtype == np.float32 and b.dtype == np.float32, f"{name} {mlp} {i}"
                error = np.linalg.norm(w - w_ref) / np.linalg.norm(w_ref)
                assert error < 0.25, f"{name} {mlp} layer {i} kernel gradient: {error:.3f} off"


def weight_arrays(weights: dict) -> list:
    return [x for mlp in MLPS for layer in weights[mlp] for x in layer]


def assert_float32_weights(weights: dict, what: str):
    """float32 arrays, and values off bfloat16's grid: parameters kept or stepped in bfloat16 would
    lie on it."""
    arrays = weight_arrays(weights)
    assert all(x.dtype == np.float32 for x in arrays), what
    flat = np.concatenate([x.ravel() for x in arrays])
    assert (rounded(flat) != flat).mean() > 0.9, f"{what}: weights on bfloat16's grid"


def assert_updates_agree(new: dict, reference: dict, start: dict, what: str):
    """Each array's update (new - start) within 35 % (L2) of the reference's: Adam's steps follow
    the gradients' signs, which bfloat16 flips where a gradient is near 0, so a few entries differ
    more."""
    pairs = zip(weight_arrays(new), weight_arrays(reference), weight_arrays(start))
    for i, (actual, expected, before) in enumerate(pairs):
        off = np.linalg.norm(actual - expected) / np.linalg.norm(expected - before)
        assert off < 0.35, f"{what}: array {i} ({expected.shape}) {off:.3f} off"


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_bfloat16_update_keeps_float32_parameters(env_id):
    """One full update in bfloat16: every framework's new weights are float32 and not bfloat16
    values (parameters kept, or stepped, in bfloat16 would be), and their updates agree with Linen's
    (assert_updates_agree)."""
    args, weights, sides = build_all(env_id, "small", **UPDATE_OVERRIDES, **BF16)
    batch, permutations = update_inputs(args, weights)
    results = {name: side.update(batch, permutations) for name, side in sides.items()}
    new = {name: new_weights for name, (new_weights, _) in results.items()}
    for name, updated in new.items():
        assert_float32_weights(updated, name)
    moved = max(
        np.abs(a - b).max() for a, b in zip(weight_arrays(new["linen"]), weight_arrays(weights))
    )
    assert moved > 1e-3, moved
    for name in OTHERS:
        assert_updates_agree(new[name], new["linen"], weights, f"{name} after a bf16 update")


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Reacher-misc"])
def test_bfloat16_compiled_update_agrees(env_id):
    """ppo_torch.py's --compile compile path in bfloat16 (autocast inside the compiled step) gives
    Linen's update."""
    args, weights, sides = build_all(env_id, "small", **UPDATE_OVERRIDES, **BF16)
    torch_args = ppo_torch.Args(env=env_id, model_size="small", **UPDATE_OVERRIDES, **BF16)
    compiled = TorchSide(weights, torch_args, compiled=True)
    batch, permutations = update_inputs(args, weights)
    expected, _ = sides["linen"].update(batch, permutations)
    actual, _ = compiled.update(batch, permutations)
    assert_updates_agree(actual, expected, weights, "torch compiled bf16 update")
    assert_float32_weights(actual, "torch compiled")


@pytest.mark.parametrize("env_id", ["Breakout-MinAtar", "Reacher-misc"])
def test_bfloat16_traced_rollout_agrees_with_eager(env_id):
    """ppo_torch.py's policy step traced (--compile compile on a CPU, and torchscript) keeps
    autocast: its rollout gives the eager bfloat16 rollout's Batch, in float32, and values away from
    a float32 rollout's."""
    sizes = dict(num_envs=4, num_steps=8)
    _, _, sides = build_all(env_id, "small", **sizes, **BF16)
    _, _, full_sides = build_all(env_id, "small", **sizes)
    env, env_params = parity_sides.make_env(ppo_torch, env_id)
    runner = ppo_torch.reset_envs(env, env_params, jax.random.key(7), 4)
    eager, traced = (sides["torch"].run_rollout(env, env_params, runner, traced=t) for t in (0, 1))
    full = full_sides["torch"].run_rollout(env, env_params, runner)
    for key, value in eager._asdict().items():
        assert getattr(traced, key).dtype == value.dtype, key
        np.testing.assert_allclose(
            getattr(traced, key).numpy(), value.numpy(), rtol=1e-5, atol=1e-6, err_msg=key
        )
    assert eager.values.dtype == torch.float32
    assert not torch.allclose(eager.values, full.values, rtol=1e-4, atol=1e-5)


def test_bfloat16_is_a_choice_of_every_script():
    """The same option, default and choices in the four scripts (tyro reads the Literal)."""
    fields = {
        name: side.module.Args.__dataclass_fields__["dtype"]
        for name, side in parity_sides.SIDES.items()
    }
    for name, field in fields.items():
        assert field.default == "float32", name
        assert field.type == fields["linen"].type, name
    assert ppo_linen.Args(dtype="bfloat16").dtype == "bfloat16"


def own_parameters(name: str, spec, hidden) -> list:
    """The parameters of a script's own Agent, built as its main() builds it with --dtype
    bfloat16."""
    shape = (spec.obs_dim, hidden, spec.num_actions, spec.continuous)
    key = jax.random.key(0)
    if name == "linen":
        agent = ppo_linen.Agent(hidden, spec.num_actions, spec.continuous, "bfloat16")
        return jax.tree.leaves(agent.init(key, jnp.zeros((1, spec.obs_dim))))
    if name == "nnx":
        agent = ppo_nnx.Agent(*shape, nnx.Rngs(0), "bfloat16")
        return jax.tree.leaves(nnx.state(agent, nnx.Param))
    if name == "equinox":
        agent = ppo_equinox.Agent(*shape, key, "bfloat16")
        return jax.tree.leaves(eqx.filter(agent, eqx.is_array))
    return [p.detach() for p in ppo_torch.Agent(*shape, "bfloat16").parameters()]


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("name", parity_sides.SIDES)
def test_bfloat16_agents_keep_float32_parameters(name, env_id):
    """Each script's own Agent with --dtype bfloat16 (its own init, which the parity sides bypass)
    holds float32 parameters, all of them."""
    parameters = own_parameters(name, SPECS[env_id], (64, 64))
    assert len(parameters) == 12 + SPECS[env_id].continuous
    dtypes = {str(p.dtype).removeprefix("torch.") for p in parameters}
    assert dtypes == {"float32"}, f"{name}: {dtypes}"

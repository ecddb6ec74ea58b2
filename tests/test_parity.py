"""Parity: the Linen, NNX, Equinox and Torch scripts compute the same PPO.

One set of weights (NumPy, fixed seed) is loaded into every framework's agent; forward pass, the rollout's
log-probabilities and values, the env glue, GAE, loss, gradients and a whole update (with the minibatch order handed
in) must agree to float32 tolerance, and so must the Args defaults. Each framework is wrapped in a small adapter with
one interface, so every check is written once; SIDES must cover the study's frameworks.
"""

from dataclasses import fields, replace
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

import ppo_equinox
import ppo_linen
import ppo_nnx
import ppo_torch
from helpers import ENV_FIELDS, STUDY, numpy_gae, only_run_dir, read_json, run_script

OBS = {"CartPole-v1": 4, "Breakout-MinAtar": 10 * 10 * 4}  # a classic-control and a flattened MinAtar batch
NUM_ACTIONS = 3
GAINS = {"hidden": np.sqrt(2), "actor": 0.01, "critic": 1.0}


def make_weights(obs_dim: int, hidden, seed: int = 0) -> dict:
    """{"actor"|"critic": [(kernel (in, out), bias), ...]}: random, biases non-zero, float32."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, out_dim in (("actor", NUM_ACTIONS), ("critic", 1)):
        sizes = [obs_dim, *hidden, out_dim]
        weights[name] = [
            (rng.normal(0, 1 / np.sqrt(i), (i, o)).astype(np.float32), rng.normal(0, 0.1, o).astype(np.float32))
            for i, o in zip(sizes[:-1], sizes[1:])
        ]
    return weights


def make_batch(obs_dim: int, size: int, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    values = rng.normal(size=size).astype(np.float32)
    return {
        "obs": rng.normal(size=(size, obs_dim)).astype(np.float32),
        "actions": rng.integers(0, NUM_ACTIONS, size).astype(np.int32),
        "logprobs": np.log(rng.uniform(0.2, 0.5, size)).astype(np.float32),
        "values": values,
        "advantages": rng.normal(size=size).astype(np.float32),
        "returns": (values + rng.normal(0, 0.5, size)).astype(np.float32),
    }


# -------------------------------------------------------------------------------------- adapters
class LinenSide:
    module = ppo_linen

    def __init__(self, weights, args):
        self.args = args
        hidden = tuple(w.shape[1] for w, _ in weights["actor"][:-1])
        self.agent = ppo_linen.Agent(hidden, NUM_ACTIONS)
        params = {
            name: {f"Dense_{i}": {"kernel": jnp.asarray(w), "bias": jnp.asarray(b)} for i, (w, b) in enumerate(layers)}
            for name, layers in weights.items()
        }
        tx, self.lr_schedule = ppo_linen.make_optimizer(args)
        self.state = ppo_linen.TrainState.create(apply_fn=self.agent.apply, params={"params": params}, tx=tx)

    def forward(self, obs):
        logits, values = self.state.apply_fn(self.state.params, jnp.asarray(obs))
        return np.asarray(logits), np.asarray(jax.nn.log_softmax(logits)), np.asarray(values)

    def policy(self, obs, actions=None):
        """The rollout's policy step: (actions, log-probs, values), for the given actions or sampled ones."""
        actions = None if actions is None else jnp.asarray(actions)
        out = self.state.apply_fn(
            self.state.params, jnp.asarray(obs), jax.random.key(5), actions, method=ppo_linen.Agent.get_action_and_value
        )
        return tuple(np.asarray(x) for x in out)

    def loss_and_grads(self, mb):
        batch = ppo_linen.Batch(**{k: jnp.asarray(v) for k, v in mb.items()})
        (loss, metrics), grads = jax.value_and_grad(ppo_linen.ppo_loss, has_aux=True)(
            self.state.params, self.state.apply_fn, self.args, batch
        )
        return float(loss), {k: float(v) for k, v in metrics.items()}, self.weights_of(grads)

    def update(self, batch, permutations):
        batch = ppo_linen.Batch(**{k: jnp.asarray(v) for k, v in batch.items()})
        self.state, _, metrics = ppo_linen.update(self.args, self.state, batch, None, jnp.asarray(permutations))
        return self.weights_of(self.state.params), {k: float(v) for k, v in metrics.items()}

    @staticmethod
    def weights_of(params) -> dict:
        out = {}
        for name in ("actor", "critic"):
            layers = params["params"][name]
            out[name] = [
                (np.asarray(layers[f"Dense_{i}"]["kernel"]), np.asarray(layers[f"Dense_{i}"]["bias"]))
                for i in range(len(layers))
            ]
        return out

    @staticmethod
    def own_init(obs_dim, hidden):
        agent = ppo_linen.Agent(hidden, NUM_ACTIONS)
        return LinenSide.weights_of(agent.init(jax.random.key(0), jnp.zeros((1, obs_dim))))


class CallableAgentSide:
    """forward and policy of an agent called directly with JAX arrays (NNX, Equinox)."""

    def forward(self, obs):
        logits, values = self.agent(jnp.asarray(obs))
        return np.asarray(logits), np.asarray(jax.nn.log_softmax(logits)), np.asarray(values)

    def policy(self, obs, actions=None):
        actions = None if actions is None else jnp.asarray(actions)
        out = self.agent.get_action_and_value(jnp.asarray(obs), jax.random.key(5), actions)
        return tuple(np.asarray(x) for x in out)


class NnxSide(CallableAgentSide):
    module = ppo_nnx

    def __init__(self, weights, args):
        self.args = args
        hidden = tuple(w.shape[1] for w, _ in weights["actor"][:-1])
        self.agent = ppo_nnx.Agent(weights["actor"][0][0].shape[0], hidden, NUM_ACTIONS, rngs=nnx.Rngs(0))
        for name, layers in weights.items():
            for linear, (w, b) in zip(self.linears(getattr(self.agent, name)), layers):
                linear.kernel.value, linear.bias.value = jnp.asarray(w), jnp.asarray(b)
        tx, self.lr_schedule = ppo_nnx.make_optimizer(args)
        self.optimizer = nnx.Optimizer(self.agent, tx, wrt=nnx.Param)

    @staticmethod
    def linears(mlp):
        return [*mlp.hidden, mlp.head]

    def loss_and_grads(self, mb):
        batch = ppo_nnx.Batch(**{k: jnp.asarray(v) for k, v in mb.items()})
        (loss, metrics), grads = nnx.value_and_grad(ppo_nnx.ppo_loss, has_aux=True)(self.agent, self.args, batch)
        return float(loss), {k: float(v) for k, v in metrics.items()}, self.weights_of(grads)

    def update(self, batch, permutations):
        batch = ppo_nnx.Batch(**{k: jnp.asarray(v) for k, v in batch.items()})
        _, metrics = ppo_nnx.update(self.args, self.agent, self.optimizer, batch, None, jnp.asarray(permutations))
        return self.weights_of(nnx.state(self.agent, nnx.Param)), {k: float(v) for k, v in metrics.items()}

    @staticmethod
    def weights_of(state) -> dict:
        out = {}
        for name in ("actor", "critic"):
            mlp = state[name]
            layers = [mlp["hidden"][i] for i in sorted(mlp["hidden"])] + [mlp["head"]]
            out[name] = [(np.asarray(layer["kernel"].value), np.asarray(layer["bias"].value)) for layer in layers]
        return out

    @staticmethod
    def own_init(obs_dim, hidden):
        return NnxSide.weights_of(nnx.state(ppo_nnx.Agent(obs_dim, hidden, NUM_ACTIONS, rngs=nnx.Rngs(0)), nnx.Param))


class EquinoxSide(CallableAgentSide):
    module = ppo_equinox

    def __init__(self, weights, args):
        self.args = args
        hidden = tuple(w.shape[1] for w, _ in weights["actor"][:-1])
        agent = ppo_equinox.Agent(weights["actor"][0][0].shape[0], hidden, NUM_ACTIONS, key=jax.random.key(0))
        self.agent = eqx.tree_at(
            lambda a: [
                leaf for mlp in (a.actor, a.critic) for layer in mlp.layers for leaf in (layer.weight, layer.bias)
            ],
            agent,
            [jnp.asarray(x) for name in ("actor", "critic") for w, b in weights[name] for x in (w.T, b)],
        )
        self.tx, self.lr_schedule = ppo_equinox.make_optimizer(args)
        self.opt_state = self.tx.init(eqx.filter(self.agent, eqx.is_array))

    def loss_and_grads(self, mb):
        batch = ppo_equinox.Batch(**{k: jnp.asarray(v) for k, v in mb.items()})
        (loss, metrics), grads = eqx.filter_value_and_grad(ppo_equinox.ppo_loss, has_aux=True)(
            self.agent, self.args, batch
        )
        return float(loss), {k: float(v) for k, v in metrics.items()}, self.weights_of(grads)

    def update(self, batch, permutations):
        batch = ppo_equinox.Batch(**{k: jnp.asarray(v) for k, v in batch.items()})
        self.agent, self.opt_state, _, metrics = ppo_equinox.update(
            self.args, self.tx, self.agent, self.opt_state, batch, None, jnp.asarray(permutations)
        )
        return self.weights_of(self.agent), {k: float(v) for k, v in metrics.items()}

    @staticmethod
    def weights_of(agent) -> dict:
        """Kernels as (in, out), like Linen's: eqx.nn.Linear keeps its weight as (out, in)."""
        return {
            name: [(np.asarray(layer.weight).T, np.asarray(layer.bias)) for layer in getattr(agent, name).layers]
            for name in ("actor", "critic")
        }

    @staticmethod
    def own_init(obs_dim, hidden):
        return EquinoxSide.weights_of(ppo_equinox.Agent(obs_dim, hidden, NUM_ACTIONS, key=jax.random.key(0)))


class TorchSide:
    module = ppo_torch

    def __init__(self, weights, args, compiled: bool = False):
        # eager (env-jit) unless asked: the compiled whole minibatch step has its own test, test_compiled_update_agrees
        self.args = args = replace(args, compile="compile" if compiled else "env-jit")
        hidden = tuple(w.shape[1] for w, _ in weights["actor"][:-1])
        self.agent = ppo_torch.Agent(weights["actor"][0][0].shape[0], hidden, NUM_ACTIONS)
        with torch.no_grad():
            for name, layers in weights.items():
                for linear, (w, b) in zip(self.linears(getattr(self.agent, name)), layers):
                    linear.weight.copy_(torch.as_tensor(w.T))
                    linear.bias.copy_(torch.as_tensor(b))
        self.optimizer, self.lr_schedule = ppo_torch.make_optimizer(args, self.agent)

    @staticmethod
    def linears(mlp):
        return [m for m in mlp.modules() if isinstance(m, torch.nn.Linear)]

    def forward(self, obs):
        with torch.no_grad():
            logits, values = self.agent(torch.as_tensor(obs))
        return logits.numpy(), logits.log_softmax(-1).numpy(), values.numpy()

    def policy(self, obs, actions=None):
        noise = torch.rand(len(obs), NUM_ACTIONS, generator=torch.Generator().manual_seed(5)).clamp(min=1e-30)
        with torch.no_grad():
            actions = None if actions is None else torch.as_tensor(actions)
            out = self.agent.get_action_and_value(torch.as_tensor(obs), noise, actions)
        return tuple(x.numpy() for x in out)

    def loss_and_grads(self, mb):
        batch = ppo_torch.Batch(**{k: torch.as_tensor(v) for k, v in mb.items()})
        self.agent.zero_grad()
        loss, metrics = ppo_torch.ppo_loss(self.agent, self.args, batch)
        loss.backward()
        loss, metrics = loss.detach(), {k: v.detach() for k, v in metrics.items()}
        grads = {
            name: [(m.weight.grad.numpy().T, m.bias.grad.numpy()) for m in self.linears(getattr(self.agent, name))]
            for name in ("actor", "critic")
        }
        return float(loss), {k: float(v) for k, v in metrics.items()}, grads

    def update(self, batch, permutations):
        batch = ppo_torch.Batch(**{k: torch.as_tensor(v) for k, v in batch.items()})
        step_fn = partial(ppo_torch.minibatch_step, self.agent, self.optimizer, self.args)
        if self.args.compile == "compile":  # as main() compiles it
            torch._dynamo.config.trace_autograd_ops = True
            step_fn = torch.compile(step_fn, dynamic=False)
        metrics = ppo_torch.update(
            self.args, self.lr_schedule, step_fn, None, batch, 0, torch.as_tensor(permutations, dtype=torch.int64)
        )
        return self.own_weights(self.agent), {k: float(v) for k, v in metrics.items()}

    @staticmethod
    def own_weights(agent) -> dict:
        return {
            name: [
                (m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy())
                for m in TorchSide.linears(getattr(agent, name))
            ]
            for name in ("actor", "critic")
        }

    @staticmethod
    def own_init(obs_dim, hidden):
        torch.manual_seed(0)
        return TorchSide.own_weights(ppo_torch.Agent(obs_dim, hidden, NUM_ACTIONS))


SIDES = {"linen": LinenSide, "nnx": NnxSide, "equinox": EquinoxSide, "torch": TorchSide}
OTHERS = [name for name in SIDES if name != "linen"]  # each compared with linen


def test_sides_cover_the_study():
    assert set(SIDES) == set(STUDY.frameworks), "a framework of the study has no parity adapter (or one is left over)"
    for name, side in SIDES.items():
        assert side.module.__file__.endswith(STUDY.frameworks[name].script)


def assert_weights_close(actual: dict, expected: dict, rtol: float, atol: float, what: str):
    for name in ("actor", "critic"):
        for i, ((w, b), (w_ref, b_ref)) in enumerate(zip(actual[name], expected[name], strict=True)):
            np.testing.assert_allclose(w, w_ref, rtol=rtol, atol=atol, err_msg=f"{what}: {name} layer {i} kernel")
            np.testing.assert_allclose(b, b_ref, rtol=rtol, atol=atol, err_msg=f"{what}: {name} layer {i} bias")


def build_all(env_id: str, size: str, **arg_overrides):
    args = ppo_linen.Args(env=env_id, model_size=size, **arg_overrides)
    weights = make_weights(OBS[env_id], ppo_linen.MODEL_SIZES[size])
    sides = {
        name: side(weights, getattr(side.module, "Args")(env=env_id, model_size=size, **arg_overrides))
        for name, side in SIDES.items()
    }
    return args, weights, sides


# -------------------------------------------------------------------------------------- the checks
@pytest.mark.parametrize("env_id", OBS)
@pytest.mark.parametrize("size", ["small", "medium", "large"])
def test_forward_pass_agrees(env_id, size):
    _, _, sides = build_all(env_id, size)
    obs = np.random.default_rng(2).normal(size=(64, OBS[env_id])).astype(np.float32)
    outputs = {name: side.forward(obs) for name, side in sides.items()}
    for name in OTHERS:
        for what, actual, expected in zip(("logits", "log-probs", "values"), outputs[name], outputs["linen"]):
            np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5, err_msg=f"{name} {what} ({size})")
    entropy = {name: -(np.exp(lp) * lp).sum(-1) for name, (_, lp, _) in outputs.items()}
    np.testing.assert_allclose(entropy["torch"], entropy["linen"], rtol=1e-5)
    assert outputs["linen"][0].shape == (64, NUM_ACTIONS) and outputs["linen"][2].shape == (64,)


def test_gae_agrees_across_frameworks_and_numpy():
    rng = np.random.default_rng(3)
    steps, envs = 64, 8
    rewards, values, final_values = (rng.normal(size=(steps, envs)).astype(np.float32) for _ in range(3))
    terminated = rng.random((steps, envs)) < 0.05
    truncated = (rng.random((steps, envs)) < 0.05) & ~terminated
    expected = numpy_gae(rewards, values, final_values, terminated, truncated, 0.99, 0.95)
    inputs = (rewards, values, final_values, terminated, truncated)
    for name, side in SIDES.items():
        convert = torch.as_tensor if name == "torch" else jnp.asarray
        advantages, returns = side.module.compute_gae(*map(convert, inputs), 0.99, 0.95)
        np.testing.assert_allclose(np.asarray(advantages), expected[0], rtol=1e-6, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(np.asarray(returns), expected[1], rtol=1e-6, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("clip_vloss", [True, False])
@pytest.mark.parametrize("env_id", OBS)
def test_loss_and_gradients_agree(env_id, clip_vloss):
    _, _, sides = build_all(env_id, "small", clip_vloss=clip_vloss)
    mb = make_batch(OBS[env_id], 256)
    results = {name: side.loss_and_grads(mb) for name, side in sides.items()}
    loss_ref, metrics_ref, grads_ref = results["linen"]
    assert set(metrics_ref) == {"policy_loss", "value_loss", "entropy", "old_approx_kl", "approx_kl", "clipfrac"}
    assert 0 < metrics_ref["clipfrac"] < 1  # the batch exercises both sides of the clip
    for name in OTHERS:
        loss, metrics, grads = results[name]
        assert loss == pytest.approx(loss_ref, rel=1e-5, abs=1e-6), name
        for key, value in metrics_ref.items():
            assert metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-6), f"{name} {key}"
        assert_weights_close(grads, grads_ref, rtol=1e-4, atol=1e-6, what=f"{name} gradients")


@pytest.mark.parametrize("anneal_lr", [True, False])
def test_one_full_update_agrees(anneal_lr):
    """All epochs x minibatches on the same batch and minibatch order: the new parameters agree.

    A large learning rate and a small max_grad_norm make the clipping and the schedule matter.
    """
    overrides = dict(
        num_envs=8,
        num_steps=32,
        update_epochs=3,
        num_minibatches=4,
        num_iterations=2,
        learning_rate=1e-2,
        max_grad_norm=0.1,
        anneal_lr=anneal_lr,
    )
    args, weights, sides = build_all("CartPole-v1", "small", **overrides)
    batch = make_batch(OBS["CartPole-v1"], args.batch_size)
    rng = np.random.default_rng(4)
    permutations = np.stack([rng.permutation(args.batch_size) for _ in range(args.update_epochs)]).astype(np.int32)
    results = {name: side.update(batch, permutations) for name, side in sides.items()}
    new = {name: weights for name, (weights, _) in results.items()}
    moved = np.abs(new["linen"]["actor"][0][0] - weights["actor"][0][0]).max()
    assert moved > 1e-3, "the update did not change the weights"
    for name in OTHERS:
        assert_weights_close(new[name], new["linen"], rtol=1e-4, atol=1e-5, what=f"{name} after one update")
        for key, value in results["linen"][1].items():
            assert results[name][1][key] == pytest.approx(value, rel=1e-3, abs=1e-5), f"{name} {key}"


@pytest.mark.slow
def test_compiled_update_agrees():
    """ppo_torch.py's --compile compile path: the whole minibatch step (forward, loss, backward, clipping, Adam with the
    tensor learning rate) compiled, from the same weights and minibatch order as Linen, gives the same new weights."""
    overrides = dict(
        num_envs=8,
        num_steps=32,
        update_epochs=3,
        num_minibatches=4,
        num_iterations=2,
        learning_rate=1e-2,
        max_grad_norm=0.1,
    )
    args, weights, sides = build_all("CartPole-v1", "small", **overrides)
    compiled = TorchSide(weights, ppo_torch.Args(env="CartPole-v1", model_size="small", **overrides), compiled=True)
    batch = make_batch(OBS["CartPole-v1"], args.batch_size)
    rng = np.random.default_rng(4)
    permutations = np.stack([rng.permutation(args.batch_size) for _ in range(args.update_epochs)]).astype(np.int32)
    (expected, expected_metrics), (actual, metrics) = (
        sides["linen"].update(batch, permutations),
        compiled.update(batch, permutations),
    )
    assert_weights_close(actual, expected, rtol=1e-4, atol=1e-5, what="torch compiled update")
    for key, value in expected_metrics.items():
        assert metrics[key] == pytest.approx(value, rel=1e-3, abs=1e-5), key


def test_learning_rate_schedules_agree():
    overrides = dict(num_iterations=3, update_epochs=2, num_minibatches=4)
    _, _, sides = build_all("CartPole-v1", "small", **overrides)
    steps = [0, 1, 11, 23]  # 24 optimizer steps in all
    rates = {name: [float(side.lr_schedule(step)) for step in steps] for name, side in sides.items()}
    assert rates["linen"][0] == pytest.approx(2.5e-4) and rates["linen"][-1] == pytest.approx(2.5e-4 / 24)
    for name in OTHERS:
        np.testing.assert_allclose(rates[name], rates["linen"], rtol=1e-6)


@pytest.mark.parametrize("framework", SIDES)
def test_own_init_is_orthogonal_with_the_right_gains(framework):
    hidden = ppo_linen.MODEL_SIZES["medium"]
    weights = SIDES[framework].own_init(OBS["Breakout-MinAtar"], hidden)
    for name in ("actor", "critic"):
        layers = weights[name]
        out_dim = NUM_ACTIONS if name == "actor" else 1
        assert [w.shape for w, _ in layers] == [(i, o) for i, o in zip([400, *hidden], [*hidden, out_dim])]
        for i, (w, b) in enumerate(layers):
            gain = GAINS["hidden"] if i < len(layers) - 1 else GAINS[name]
            # a (semi-)orthogonal matrix scaled by gain has every singular value equal to gain
            np.testing.assert_allclose(
                np.linalg.svd(w, compute_uv=False), gain, rtol=1e-3, err_msg=f"{framework} {name} {i}"
            )
            assert not np.any(b), f"{framework} {name} layer {i} bias is not zero"


@pytest.mark.slow
def test_learning_parity_on_acrobot(tmp_path):
    """Every framework learns Acrobot-v1 with the default configuration, to the same ballpark."""
    finals = {}
    for script in (fw.script for fw in STUDY.frameworks.values()):
        log_dir = tmp_path / script
        proc = run_script(script, "--env", "Acrobot-v1", log_dir=log_dir)
        assert proc.returncode == 0, proc.stderr[-2000:]
        finals[script] = read_json(only_run_dir(log_dir) / "summary.json")["final_return"]
    print("Acrobot-v1 final returns:", finals)
    assert all(r > -200 for r in finals.values()), finals  # random play scores about -500
    assert max(finals.values()) - min(finals.values()) < 100, finals


# ------------------------------------------------------------------------- Args, rollout, env glue
def test_shared_args_have_the_same_defaults():
    defaults = {name: {f.name: f.default for f in fields(side.module.Args)} for name, side in SIDES.items()}
    shared = set.intersection(*(set(d) for d in defaults.values())) - {"exp_name", "compile"}
    assert len(shared) >= 20, shared
    for name in OTHERS:
        for field in sorted(shared):
            assert defaults[name][field] == defaults["linen"][field], f"{name}: --{field} default differs"


@pytest.mark.parametrize("env_id", OBS)
def test_rollout_log_probs_and_values_agree(env_id):
    """The rollout's policy step: given the same weights, observations and actions, the same log-probs and values;
    with its own sampled actions, each framework's log-probs and values are those of its forward pass."""
    _, _, sides = build_all(env_id, "small")
    rng = np.random.default_rng(6)
    obs = rng.normal(size=(64, OBS[env_id])).astype(np.float32)
    actions = rng.integers(0, NUM_ACTIONS, 64).astype(np.int32)
    given = {name: side.policy(obs, actions) for name, side in sides.items()}
    for name in OTHERS:
        np.testing.assert_array_equal(given[name][0], actions)
        np.testing.assert_allclose(given[name][1], given["linen"][1], rtol=1e-5, atol=1e-6, err_msg=f"{name} log-probs")
        np.testing.assert_allclose(given[name][2], given["linen"][2], rtol=1e-5, atol=1e-6, err_msg=f"{name} values")
    for name, side in sides.items():
        sampled, logprob, value = side.policy(obs)
        _, log_probs, values = side.forward(obs)
        assert sampled.dtype == np.int32 and set(np.unique(sampled)) <= set(range(NUM_ACTIONS))
        np.testing.assert_allclose(logprob, log_probs[np.arange(64), sampled], rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(value, values, rtol=1e-5, atol=1e-6, err_msg=name)


def env_glue_transitions(name: str, env_id: str, actions: np.ndarray) -> list[dict]:
    """reset_envs, then step_envs once per row of actions (jitted, as in the scripts); every field as NumPy.
    ppo_torch.py hands actions and observations across with DLPack, so its side does the same."""
    module = SIDES[name].module
    env, env_params = module.make_env(env_id)
    env_params = env_params.replace(max_steps_in_episode=12)  # short episodes: truncations too
    to_jax = (lambda a: jnp.from_dlpack(torch.as_tensor(a))) if name == "torch" else jnp.asarray
    to_numpy = (lambda x: torch.from_dlpack(x).numpy()) if name == "torch" else np.asarray
    step = jax.jit(partial(module.step_envs, env, env_params))
    runner = module.reset_envs(env, env_params, jax.random.key(7), actions.shape[1])
    out = [{"obs": to_numpy(runner.obs)}]
    for action in actions:
        runner, env_fields = step(runner, to_jax(action))
        fields = {name: to_numpy(value) for name, value in zip(ENV_FIELDS, env_fields, strict=True)}
        out.append({"obs": to_numpy(runner.obs), **fields})
    return out


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Breakout-MinAtar"])
def test_env_glue_agrees(env_id):
    actions = np.random.default_rng(8).integers(0, 3, (40, 6)).astype(np.int32)
    runs = {name: env_glue_transitions(name, env_id, actions) for name in SIDES}
    expected = runs["linen"]
    assert any(t["terminated"].any() for t in expected[1:]) and any(t["truncated"].any() for t in expected[1:])
    assert set(expected[1]) == {
        "obs",
        "reward",
        "terminated",
        "truncated",
        "final_obs",
        "episode_return",
        "episode_length",
    }
    for name in OTHERS:
        for step, (actual, reference) in enumerate(zip(runs[name], expected, strict=True)):
            assert set(actual) == set(reference)
            for key in reference:
                np.testing.assert_array_equal(actual[key], reference[key], err_msg=f"{name} step {step} {key}")


def test_explained_variance_is_nan_for_constant_returns():
    """No crash and no inf when the returns have zero variance: explained variance is NaN in every framework."""
    overrides = dict(num_envs=4, num_steps=8, update_epochs=1, num_minibatches=2, num_iterations=1)
    args, _, sides = build_all("CartPole-v1", "small", **overrides)
    batch = make_batch(OBS["CartPole-v1"], args.batch_size)
    batch["returns"] = np.full(args.batch_size, 1.5, np.float32)
    permutations = np.arange(args.batch_size, dtype=np.int32)[None]
    for name, side in sides.items():
        _, metrics = side.update(batch, permutations)
        assert np.isnan(metrics["explained_variance"]), name
        assert all(np.isfinite(v) for k, v in metrics.items() if k != "explained_variance"), (name, metrics)

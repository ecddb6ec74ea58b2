"""The four scripts side by side, for the parity tests: the networks of each env's spec (SPECS),
weights made once and loaded into every framework (make_weights, the Side adapters, build_all),
NumPy references (numpy_forward, numpy_log_prob_and_entropy), a minibatch (make_batch) and an
update's inputs (update_inputs); highest_matmul_precision keeps the float32 references in full
float32 in a module that imports it (autouse)."""

from dataclasses import replace
from functools import partial
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
import scipy.stats
import torch
from flax import nnx

import ppo_equinox
import ppo_linen
import ppo_nnx
import ppo_torch
import torch_glue


@pytest.fixture(autouse=True, scope="module")
def highest_matmul_precision():
    """float32 matmuls in full float32, as --matmul-precision highest runs them: at JAX's default a
    TPU's is one bfloat16 pass, which these float32 tolerances do not allow."""
    with jax.default_matmul_precision("highest"):
        yield


class Spec(NamedTuple):
    obs_dim: int
    # discrete: the choices (3, whatever the env has); continuous: the action vector's length
    num_actions: int
    continuous: bool = False


SPECS = {
    "CartPole-v1": Spec(4, 3),  # a classic-control batch
    "Breakout-MinAtar": Spec(10 * 10 * 4, 3),  # a flattened MinAtar batch
    # 1-D actions in [-2, 2], which gymnax clips itself too
    "Pendulum-v1": Spec(3, 1, continuous=True),
    # 2-D actions in [-1, 1], which gymnax does not clip
    "Reacher-misc": Spec(8, 2, continuous=True),
}
DISCRETE = [env_id for env_id, spec in SPECS.items() if not spec.continuous]
CONTINUOUS = [env_id for env_id, spec in SPECS.items() if spec.continuous]
MLPS = ("actor", "critic")


def make_weights(spec: Spec, hidden, seed: int = 0) -> dict:
    """{"actor"|"critic": [(kernel (in, out), bias), ...], "log_std" (continuous): (num_actions,)}:
    random, biases and log std non-zero, float32."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, out_dim in zip(MLPS, (spec.num_actions, 1)):
        sizes = [spec.obs_dim, *hidden, out_dim]
        weights[name] = [
            (
                rng.normal(0, 1 / np.sqrt(i), (i, o)).astype(np.float32),
                rng.normal(0, 0.1, o).astype(np.float32),
            )
            for i, o in zip(sizes[:-1], sizes[1:])
        ]
    if spec.continuous:
        weights["log_std"] = rng.normal(0, 0.5, spec.num_actions).astype(np.float32)
    return weights


def architecture(weights: dict) -> tuple[int, tuple[int, ...], int, bool]:
    """(obs_dim, hidden sizes, num_actions, continuous) of a set of weights."""
    actor = weights["actor"]
    return (
        actor[0][0].shape[0],
        tuple(w.shape[1] for w, _ in actor[:-1]),
        actor[-1][0].shape[1],
        "log_std" in weights,
    )


# ------------------------------------------------------------------------------ NumPy references
def numpy_forward(weights: dict, obs):
    """The tanh MLPs in float64: (actor output, values)."""

    def mlp(layers, x):
        for i, (w, b) in enumerate(layers):
            x = x @ w.astype(np.float64) + b
            x = np.tanh(x) if i < len(layers) - 1 else x
        return x

    obs = np.asarray(obs, np.float64)
    return mlp(weights["actor"], obs), mlp(weights["critic"], obs)[:, 0]


def numpy_log_prob_and_entropy(actor_out, actions, log_std=None):
    """SciPy's: the chosen action's log-softmax and the categorical's entropy per state; or (log_std
    given) the diagonal Gaussian's log-density summed over the action's dimensions, and its entropy
    (one for every state)."""
    actor_out = np.asarray(actor_out, np.float64)
    if log_std is None:
        log_probs = scipy.special.log_softmax(actor_out, -1)
        return log_probs[np.arange(len(actions)), actions], scipy.stats.entropy(
            np.exp(log_probs), axis=-1
        )
    std = np.exp(np.asarray(log_std, np.float64))
    return scipy.stats.norm.logpdf(actions, actor_out, std).sum(-1), scipy.stats.norm.entropy(
        scale=std
    ).sum()


def torch_noise(num_envs: int, num_actions: int, seed: int = 5):
    """Uniform noise in (0, 1) as ppo_torch.rollout draws it for one step."""
    noise = torch.rand(num_envs, num_actions, generator=torch.Generator().manual_seed(seed))
    return noise.clamp(min=torch.finfo(noise.dtype).tiny)


def make_batch(weights: dict, size: int, seed: int = 1) -> dict:
    """A minibatch; continuous actions are samples of the policy (wider), their old log-probs near
    the new ones, so that the ratio clips on both sides; discrete ones random, with random old
    log-probs."""
    obs_dim, _, num_actions, continuous = architecture(weights)
    rng = np.random.default_rng(seed)
    values = rng.normal(size=size).astype(np.float32)
    obs = rng.normal(size=(size, obs_dim)).astype(np.float32)
    if continuous:
        mean, _ = numpy_forward(weights, obs)
        actions = (mean + 1.5 * np.exp(weights["log_std"]) * rng.normal(size=mean.shape)).astype(
            np.float32
        )
        logprobs, _ = numpy_log_prob_and_entropy(mean, actions, weights["log_std"])
        logprobs = (logprobs + rng.normal(0, 0.3, size)).astype(np.float32)
    else:
        actions = rng.integers(0, num_actions, size).astype(np.int32)
        logprobs = np.log(rng.uniform(0.2, 0.5, size)).astype(np.float32)
    return {
        "obs": obs,
        "actions": actions,
        "logprobs": logprobs,
        "values": values,
        "advantages": rng.normal(size=size).astype(np.float32),
        "returns": (values + rng.normal(0, 0.5, size)).astype(np.float32),
    }


def make_env(module, env_id: str, max_steps: int = 12):
    """A script's batched env, with short episodes (truncations too)."""
    env, env_params = module.make_env(env_id)
    return env, env_params.replace(max_steps_in_episode=max_steps)


# -------------------------------------------------------------------------------------- adapters
class Side:
    """What every adapter shares: the architecture of the weights it was built from, and the
    rollout's setup."""

    module = None

    def __init__(self, weights, args):
        self.args = args
        self.obs_dim, self.hidden, self.num_actions, self.continuous = architecture(weights)

    def rollout(self) -> dict:
        """One rollout of the script's own rollout function, from a fixed reset: its Batch, as
        NumPy."""
        env, env_params = make_env(self.module, self.args.env)
        runner = self.module.reset_envs(env, env_params, jax.random.key(7), self.args.num_envs)
        batch = self.run_rollout(env, env_params, runner)
        return {key: np.asarray(value) for key, value in batch._asdict().items()}


def assert_all_set(tree):
    """Every array of an agent built by eval_shape was set from the shared weights."""
    abstract = [x for x in jax.tree.leaves(tree) if isinstance(x, jax.ShapeDtypeStruct)]
    assert not abstract, f"leaves not set from the shared weights: {abstract}"


class LinenSide(Side):
    module = ppo_linen
    jit = staticmethod(jax.jit)

    def __init__(self, weights, args):
        super().__init__(weights, args)
        self.agent = ppo_linen.Agent(self.hidden, self.num_actions, self.continuous, args.dtype)
        params = {
            name: {
                f"Dense_{i}": {"kernel": jnp.asarray(w), "bias": jnp.asarray(b)}
                for i, (w, b) in enumerate(weights[name])
            }
            for name in MLPS
        }
        if self.continuous:
            params["log_std"] = jnp.asarray(weights["log_std"])
        tx, self.lr_schedule = ppo_linen.make_optimizer(args)
        self.state = ppo_linen.TrainState.create(
            apply_fn=self.agent.apply, params={"params": params}, tx=tx
        )

    def forward(self, obs):
        """(actor output: logits or mean, values)."""
        actor_out, values = self.state.apply_fn(self.state.params, jnp.asarray(obs))
        return np.asarray(actor_out), np.asarray(values)

    def log_probs(self, actor_out, actions):
        """log_prob_and_entropy's (log-probs, entropy) for given actions: the rollout's and the
        loss's."""
        apply = partial(
            self.state.apply_fn, self.state.params, jnp.asarray(actor_out), jnp.asarray(actions)
        )
        return tuple(np.asarray(x) for x in apply(method=ppo_linen.Agent.log_prob_and_entropy))

    def policy(self, obs, actions=None):
        """The rollout's policy step: (actions, log-probs, values), for the given actions or sampled
        ones."""
        actions = None if actions is None else jnp.asarray(actions)
        out = self.state.apply_fn(
            self.state.params,
            jnp.asarray(obs),
            jax.random.key(5),
            actions,
            method=ppo_linen.Agent.get_action_and_value,
        )
        return tuple(np.asarray(x) for x in out)

    def run_rollout(self, env, env_params, runner):
        # as main() does
        return jax.jit(partial(ppo_linen.rollout, env, env_params, self.args))(self.state, runner)[
            1
        ]

    def loss_and_grads(self, mb):
        batch = ppo_linen.Batch(**{k: jnp.asarray(v) for k, v in mb.items()})
        (loss, metrics), grads = jax.value_and_grad(ppo_linen.ppo_loss, has_aux=True)(
            self.state.params, self.state.apply_fn, self.args, batch
        )
        return float(loss), {k: float(v) for k, v in metrics.items()}, self.weights_of(grads)

    def update(self, batch, permutations):
        batch = ppo_linen.Batch(**{k: jnp.asarray(v) for k, v in batch.items()})
        self.state, _, metrics = ppo_linen.update(
            self.args, self.state, batch, None, jnp.asarray(permutations)
        )
        return self.weights_of(self.state.params), {k: float(v) for k, v in metrics.items()}

    def training(self) -> tuple:
        """What update() takes before the batch, as main() passes it; update_fn: the update."""
        return (self.state,)

    def update_fn(self):
        return partial(ppo_linen.update, self.args)

    @staticmethod
    def trained_weights(training) -> dict:
        return LinenSide.weights_of(training[0].params)

    @staticmethod
    def weights_of(params) -> dict:
        params = params["params"]
        out = {}
        for name in MLPS:
            layers = params[name]
            out[name] = [
                (
                    np.asarray(layers[f"Dense_{i}"]["kernel"]),
                    np.asarray(layers[f"Dense_{i}"]["bias"]),
                )
                for i in range(len(layers))
            ]
        if "log_std" in params:
            out["log_std"] = np.asarray(params["log_std"])
        return out

    @staticmethod
    def own_init(spec: Spec, hidden):
        agent = ppo_linen.Agent(hidden, spec.num_actions, spec.continuous)
        return LinenSide.weights_of(agent.init(jax.random.key(0), jnp.zeros((1, spec.obs_dim))))


class CallableAgentSide(Side):
    """forward, log_probs and policy of an agent called directly with JAX arrays (NNX, Equinox)."""

    def forward(self, obs):
        actor_out, values = self.agent(jnp.asarray(obs))
        return np.asarray(actor_out), np.asarray(values)

    def log_probs(self, actor_out, actions):
        actor_out, actions = jnp.asarray(actor_out), jnp.asarray(actions)
        return tuple(np.asarray(x) for x in self.agent.log_prob_and_entropy(actor_out, actions))

    def policy(self, obs, actions=None):
        actions = None if actions is None else jnp.asarray(actions)
        out = self.agent.get_action_and_value(jnp.asarray(obs), jax.random.key(5), actions)
        return tuple(np.asarray(x) for x in out)

    def run_rollout(self, env, env_params, runner):
        # as main()
        return self.jit(partial(self.module.rollout, env, env_params, self.args))(
            self.agent, runner
        )[1]


class NnxSide(CallableAgentSide):
    module = ppo_nnx
    jit = staticmethod(nnx.jit)

    def __init__(self, weights, args):
        super().__init__(weights, args)
        shape = (self.obs_dim, self.hidden, self.num_actions, self.continuous)
        # no init: every leaf is set
        self.agent = nnx.eval_shape(lambda: ppo_nnx.Agent(*shape, nnx.Rngs(0), args.dtype))
        for name in MLPS:
            for linear, (w, b) in zip(
                self.linears(getattr(self.agent, name)), weights[name], strict=True
            ):
                linear.kernel.value, linear.bias.value = jnp.asarray(w), jnp.asarray(b)
        if self.continuous:
            self.agent.log_std.value = jnp.asarray(weights["log_std"])
        assert_all_set(nnx.state(self.agent))
        tx, self.lr_schedule = ppo_nnx.make_optimizer(args)
        self.optimizer = nnx.Optimizer(self.agent, tx, wrt=nnx.Param)

    @staticmethod
    def linears(mlp):
        return list(mlp.layers)

    def loss_and_grads(self, mb):
        batch = ppo_nnx.Batch(**{k: jnp.asarray(v) for k, v in mb.items()})
        (loss, metrics), grads = nnx.value_and_grad(ppo_nnx.ppo_loss, has_aux=True)(
            self.agent, self.args, batch
        )
        return float(loss), {k: float(v) for k, v in metrics.items()}, self.weights_of(grads)

    def update(self, batch, permutations):
        batch = ppo_nnx.Batch(**{k: jnp.asarray(v) for k, v in batch.items()})
        _, metrics = ppo_nnx.update(
            self.args, self.agent, self.optimizer, batch, None, jnp.asarray(permutations)
        )
        return self.weights_of(nnx.state(self.agent, nnx.Param)), {
            k: float(v) for k, v in metrics.items()
        }

    def training(self) -> tuple:
        return (self.agent, self.optimizer)

    def update_fn(self):
        return partial(ppo_nnx.update, self.args)

    @staticmethod
    def trained_weights(training) -> dict:
        return NnxSide.weights_of(nnx.state(training[0], nnx.Param))

    @staticmethod
    def weights_of(state) -> dict:
        out = {}
        for name in MLPS:
            mlp = state[name]
            layers = [mlp["layers"][i] for i in sorted(mlp["layers"])]
            out[name] = [
                (np.asarray(layer["kernel"].value), np.asarray(layer["bias"].value))
                for layer in layers
            ]
        if "log_std" in state:
            out["log_std"] = np.asarray(state["log_std"].value)
        return out

    @staticmethod
    def own_init(spec: Spec, hidden):
        agent = ppo_nnx.Agent(
            spec.obs_dim, hidden, spec.num_actions, spec.continuous, rngs=nnx.Rngs(0)
        )
        return NnxSide.weights_of(nnx.state(agent, nnx.Param))


class EquinoxSide(CallableAgentSide):
    module = ppo_equinox
    jit = staticmethod(eqx.filter_jit)

    def __init__(self, weights, args):
        super().__init__(weights, args)
        shape = (self.obs_dim, self.hidden, self.num_actions, self.continuous)
        # no init: every leaf is set
        agent = eqx.filter_eval_shape(ppo_equinox.Agent, *shape, jax.random.key(0), args.dtype)
        extra = ["log_std"] if self.continuous else []  # the Gaussian's log std: a leaf of its own

        def leaves(a):
            layers = [layer for mlp in (a.actor, a.critic) for layer in mlp.layers]
            return [leaf for layer in layers for leaf in (layer.weight, layer.bias)] + [
                getattr(a, x) for x in extra
            ]

        values = [x for name in MLPS for w, b in weights[name] for x in (w.T, b)] + [
            weights[x] for x in extra
        ]
        self.agent = eqx.tree_at(leaves, agent, [jnp.asarray(x) for x in values])
        assert_all_set(self.agent)
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

    def training(self) -> tuple:
        return (self.agent, self.opt_state)

    def update_fn(self):
        return partial(ppo_equinox.update, self.args, self.tx)

    @staticmethod
    def trained_weights(training) -> dict:
        return EquinoxSide.weights_of(training[0])

    @staticmethod
    def weights_of(agent) -> dict:
        """Kernels as (in, out), like Linen's: eqx.nn.Linear keeps its weight as (out, in)."""
        out = {
            name: [
                (np.asarray(layer.weight).T, np.asarray(layer.bias))
                for layer in getattr(agent, name).layers
            ]
            for name in MLPS
        }
        if agent.log_std is not None:
            out["log_std"] = np.asarray(agent.log_std)
        return out

    @staticmethod
    def own_init(spec: Spec, hidden):
        agent = ppo_equinox.Agent(
            spec.obs_dim, hidden, spec.num_actions, spec.continuous, key=jax.random.key(0)
        )
        return EquinoxSide.weights_of(agent)


class TorchSide(Side):
    """ppo_torch.py's side: its Agent of one seed, whose parameters, inputs and outputs carry the
    agents' axis (of one here); its methods take and give one agent's arrays, as the others do."""

    module = ppo_torch

    def __init__(self, weights, args, compiled: bool = False):
        # eager (env-jit) unless asked: the compiled whole minibatch step has its own test,
        # test_compiled_update_agrees
        super().__init__(weights, replace(args, compile="compile" if compiled else "env-jit"))
        with torch.device("meta"):  # no init: every parameter is set below
            shape = (self.obs_dim, self.hidden, self.num_actions, self.continuous)
            agent = ppo_torch.Agent(*shape, self.args.dtype, seeds=[0])
        self.agent = agent.to_empty(device="cpu")
        assert (
            len(list(agent.parameters()))
            == 2 * sum(len(weights[name]) for name in MLPS) + self.continuous
        )
        with torch.no_grad():  # copy_ broadcasts into the agent's axis (and a bias's row axis)
            for name in MLPS:
                for linear, (w, b) in zip(
                    self.linears(getattr(self.agent, name)), weights[name], strict=True
                ):
                    linear.weight.copy_(torch.as_tensor(w))
                    linear.bias.copy_(torch.as_tensor(b))
            if self.continuous:
                self.agent.log_std.copy_(torch.as_tensor(weights["log_std"]))
        self.optimizer, self.lr_schedule = ppo_torch.make_optimizer(self.args, self.agent)

    @staticmethod
    def linears(mlp):
        return [m for m in mlp.modules() if isinstance(m, ppo_torch.Linear)]

    def forward(self, obs):
        with torch.no_grad():
            actor_out, values = self.agent(torch.as_tensor(obs)[None])
        return actor_out[0].numpy(), values[0].numpy()

    def log_probs(self, actor_out, actions):
        actor_out, actions = torch.as_tensor(actor_out)[None], torch.as_tensor(actions)[None]
        with torch.no_grad():
            log_prob, entropy = self.agent.log_prob_and_entropy(actor_out, actions)
        # a Gaussian's entropy: one for all states, (1, 1) here
        return log_prob[0].numpy(), (entropy[0, 0] if self.continuous else entropy[0]).numpy()

    def policy(self, obs, actions=None):
        with torch.no_grad():
            actions = None if actions is None else torch.as_tensor(actions)[None]
            out = self.agent.get_action_and_value(
                torch.as_tensor(obs)[None], torch_noise(len(obs), self.num_actions)[None], actions
            )
        return tuple(x[0].numpy() for x in out)

    def train_state(self, args, generator, obs) -> ppo_torch.TrainState:
        """The TrainState as main() builds it, with the steps that args.compile sets up
        (torch_glue.compiled_steps); obs: the agents' (1, num_envs, obs_dim)."""
        policy, step = torch_glue.compiled_steps(
            args.compile, self.agent, ppo_torch.minibatch_step, obs
        )
        minibatch_step = partial(step, self.agent, self.optimizer, args)
        return ppo_torch.TrainState(self.agent, [generator], policy, minibatch_step)

    def run_rollout(self, env, env_params, runner, traced: bool = False):
        """As main() sets it up: eager (env-jit), or with the policy step traced (torchscript;
        compile on a CPU); runner: one agent's, given the agents' axis here."""
        runner = jax.tree.map(lambda x: x[None], runner)
        env_step = torch_glue.env_step(env, env_params, ppo_torch.step_envs)
        args = replace(self.args, compile="torchscript" if traced else "env-jit")
        state = self.train_state(args, torch.Generator().manual_seed(5), runner.obs)
        batch = ppo_torch.rollout(env_step, args, state, runner)[1]
        return ppo_torch.Batch(*[x[0] for x in batch])

    def loss_and_grads(self, mb):
        batch = ppo_torch.Batch(**{k: torch.as_tensor(v)[None] for k, v in mb.items()})
        self.agent.zero_grad()
        loss, metrics = ppo_torch.ppo_loss(self.agent, self.args, batch)
        loss.sum().backward()
        loss, metrics = loss.detach(), {k: v.detach() for k, v in metrics.items()}
        grads = self.own_weights(self.agent, of=lambda param: param.grad)
        return float(loss), {k: float(v) for k, v in metrics.items()}, grads

    def update(self, batch, permutations):
        batch = ppo_torch.Batch(**{k: torch.as_tensor(v)[None] for k, v in batch.items()})
        obs = batch.obs[:, : self.args.num_envs]
        # as main() sets it up (compiled with --compile compile); the generator's device is the
        # update's, the permutations are given: (update_epochs, 1 agent, batch_size)
        state = self.train_state(self.args, torch.Generator(), obs)
        permutations = torch.as_tensor(permutations, dtype=torch.int64)[:, None]
        metrics = ppo_torch.update(self.args, self.lr_schedule, state, batch, 0, permutations)
        return self.own_weights(self.agent), {k: float(v) for k, v in metrics.items()}

    @staticmethod
    def own_weights(agent, of=lambda param: param) -> dict:
        """The parameters (or, with of, e.g. their gradients) in the shared layout: the one
        agent's, without the agents' axis (and a bias's row axis)."""

        def read(param):
            return of(param).detach().numpy()[0].copy()

        out = {
            name: [
                (read(m.weight), read(m.bias)[0]) for m in TorchSide.linears(getattr(agent, name))
            ]
            for name in MLPS
        }
        if agent.continuous:
            out["log_std"] = read(agent.log_std)[0]
        return out

    @staticmethod
    def own_init(spec: Spec, hidden):
        """As main() initialises an agent of seed 0."""
        return TorchSide.own_weights(
            ppo_torch.Agent(spec.obs_dim, hidden, spec.num_actions, spec.continuous, seeds=[0])
        )


SIDES = {"linen": LinenSide, "nnx": NnxSide, "equinox": EquinoxSide, "torch": TorchSide}
OTHERS = [name for name in SIDES if name != "linen"]  # each compared with linen


def build_all(env_id: str, size: str, weights: dict | None = None, **arg_overrides):
    """Every framework's side, from the same weights (default: make_weights's for the env and
    size)."""
    args = ppo_linen.Args(env=env_id, model_size=size, **arg_overrides)
    weights = (
        make_weights(SPECS[env_id], ppo_linen.MODEL_SIZES[size]) if weights is None else weights
    )
    sides = {
        name: side(
            weights, getattr(side.module, "Args")(env=env_id, model_size=size, **arg_overrides)
        )
        for name, side in SIDES.items()
    }
    return args, weights, sides


# a large learning rate and a small max_grad_norm make the clipping and the schedule matter
UPDATE_OVERRIDES = dict(
    num_envs=8,
    num_steps=32,
    update_epochs=3,
    num_minibatches=4,
    num_iterations=2,
    learning_rate=1e-2,
    max_grad_norm=0.1,
)


def update_inputs(args, weights):
    batch = make_batch(weights, args.batch_size)
    rng = np.random.default_rng(4)
    permutations = np.stack(
        [rng.permutation(args.batch_size) for _ in range(args.update_epochs)]
    ).astype(np.int32)
    return batch, permutations

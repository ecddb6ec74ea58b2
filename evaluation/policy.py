"""A kept policy run by each framework's own network (part of benchback-rl): evaluate.py's policy,
and the network that evaluation/share.py exports. build_agent loads the shared tensors
(evaluation/model_file.py's layers_of) into a template's own Agent, the inverse of its to_shared;
make_policy turns raw observations into the actions the env gets, as in training: normalised with
the checkpoint's statistics, the actor, the argmax or a sample, clipped to the action bounds.

    from evaluation import model_file, policy
    ckpt = model_file.load(run_dir)
    act = policy.make_policy(policy.load_actor(ckpt, "torch"), ckpt, bounds, rng=None)
    actions = act(raw_observations)
"""

import importlib
from typing import Callable, Optional

import numpy as np

from evaluation import model_file


def actor_function(framework: str, agent) -> Callable[[np.ndarray], np.ndarray]:
    """Observations (n, obs_dim) float32 -> the actor's output (n, num_actions) float32, run by the
    framework's own network (build_agent's agent): the logits, or the Gaussian's mean. Jitted in the
    JAX frameworks."""
    if framework == "torch":
        import torch

        def torch_actor(obs):
            # a view of a JAX array (the env's observations) is read-only, which torch.from_numpy
            # warns of at every call: such an array is copied, any other shared
            obs = np.require(obs, requirements="W")
            with torch.no_grad():
                return agent(torch.from_numpy(obs))[0].numpy()

        return torch_actor
    import jax

    if framework == "linen":
        net, params = agent
        linen_actor = jax.jit(lambda params, obs: net.apply(params, obs)[0])
        return lambda obs: np.asarray(linen_actor(params, obs))
    if framework == "nnx":
        from flax import nnx

        graphdef, state = nnx.split(agent)
        nnx_actor = jax.jit(lambda state, obs: nnx.merge(graphdef, state)(obs)[0])
        return lambda obs: np.asarray(nnx_actor(state, obs))
    import equinox as eqx

    equinox_actor = eqx.filter_jit(lambda agent, obs: agent(obs)[0])
    return lambda obs: np.asarray(equinox_actor(agent, obs))


def build_agent(framework: str, net: model_file.Layers, continuous: bool, dtype: str = "float32"):
    """framework's own Agent (its template's class) holding the network net
    (model_file.layers_of's), built without an init: the inverse of the template's to_shared.
    Linen's: (the Agent module, its params)."""
    module = importlib.import_module(f"ppo_{framework}")
    shape = (net.obs_dim, net.hidden_sizes, net.num_actions, continuous)
    if framework == "torch":
        return torch_agent(module.Agent, net, continuous, dtype)
    import jax
    import jax.numpy as jnp

    if framework == "linen":
        params = {"log_std": net.log_std} if continuous else {}
        for mlp, layers in (("actor", net.actor), ("critic", net.critic)):
            params[mlp] = {
                f"Dense_{i}": {"kernel": k, "bias": b} for i, (k, b) in enumerate(layers)
            }
        agent = module.Agent(net.hidden_sizes, net.num_actions, continuous, dtype)
        return agent, jax.tree.map(jnp.asarray, {"params": params})
    if framework == "nnx":
        from flax import nnx

        agent = nnx.eval_shape(lambda: module.Agent(*shape, nnx.Rngs(0), dtype))
        for mlp, layers in ((agent.actor, net.actor), (agent.critic, net.critic)):
            for dense, (kernel, bias) in zip(mlp.layers, layers, strict=True):
                dense.kernel.value, dense.bias.value = jnp.asarray(kernel), jnp.asarray(bias)
        if continuous:
            agent.log_std.value = jnp.asarray(net.log_std)
        return agent
    import equinox as eqx

    agent = eqx.filter_eval_shape(module.Agent, *shape, jax.random.key(0), dtype)
    # its leaves in order: each Linear's weight (out, in) and bias, actor then critic; log_std
    leaves = [x for kernel, bias in net.actor + net.critic for x in (kernel.T, bias)]
    leaves += [net.log_std] if continuous else []
    return jax.tree.unflatten(jax.tree.structure(agent), [jnp.asarray(x) for x in leaves])


def torch_agent(agent_type, net: model_file.Layers, continuous: bool, dtype: str):
    """ppo_torch.py's Agent (agent_type) that holds net, one agent without the agent axis, on the
    CPU: the inverse of torch_glue.host_layers. Built on the meta device, no init: load_state_dict
    assigns every parameter, and refuses a missing one or a wrong shape."""
    import torch

    with torch.device("meta"):
        agent = agent_type(net.obs_dim, net.hidden_sizes, net.num_actions, continuous, dtype)
    # biases and log std with an axis of one, which broadcasts over the batch
    state = {"log_std": net.log_std[None]} if continuous else {}
    for mlp, layers in (("actor", net.actor), ("critic", net.critic)):
        for i, (kernel, bias) in enumerate(layers):  # Linear, Tanh, Linear, ...: 0, 2, ...
            state[f"{mlp}.{2 * i}.weight"], state[f"{mlp}.{2 * i}.bias"] = kernel, bias[None]
    state = {name: torch.tensor(x).contiguous() for name, x in state.items()}
    agent.load_state_dict(state, assign=True)
    return agent


def load_actor(ckpt, framework: str) -> Callable[[np.ndarray], np.ndarray]:
    """The actor of ckpt (model_file.load's) in framework's network."""
    continuous = ckpt.meta["action_kind"] == "continuous"
    net = model_file.layers_of(ckpt.params)
    agent = build_agent(framework, net, continuous, ckpt.meta["dtype"])
    return actor_function(framework, agent)


def normaliser(ckpt) -> Callable[[np.ndarray], np.ndarray]:
    """Raw observations -> the network's input: flattened, float32, and normalised with the
    checkpoint's statistics (frozen) by env_normalize's scale, as in training."""
    import env_normalize

    stats = None
    if ckpt.obs_norm is not None:
        parts = (np.asarray(ckpt.obs_norm[name], np.float32) for name in ("mean", "var", "count"))
        stats = env_normalize.RunningStats(*parts)

    def normalise(obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, np.float32).reshape(len(obs), -1)
        return obs if stats is None else env_normalize.scale(obs, stats).astype(np.float32)

    return normalise


def choose(out: np.ndarray, log_std, bounds, rng: Optional[np.random.Generator]) -> np.ndarray:
    """The actions from the actor's output. Discrete (log_std None): the argmax of the logits, or
    (rng given) a sample (Gumbel-max); continuous: the Gaussian's mean, or a sample, clipped to the
    env's bounds as in training."""
    if log_std is None:
        if rng is not None:
            out = out + rng.gumbel(size=out.shape)
        return out.argmax(-1).astype(np.int32)
    if rng is not None:
        out = out + np.exp(log_std) * rng.standard_normal(out.shape, np.float32)
    return np.clip(out, *bounds).astype(np.float32)


def make_policy(actor, ckpt, bounds, rng: Optional[np.random.Generator]):
    """A batch of raw observations -> the actions the env gets: normalised, the actor, chosen
    (sampled with rng, when given)."""
    normalise, log_std = normaliser(ckpt), ckpt.params.get("log_std")
    return lambda obs: choose(actor(normalise(obs)), log_std, bounds, rng)

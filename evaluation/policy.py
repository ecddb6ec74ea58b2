"""A kept policy run by each framework's own network (part of benchback-rl): evaluate.py's policy,
and the network that evaluation/share.py exports. from_shared loads the shared tensors
(evaluation/model_file.py's layers_of) into a template's own Agent, by the template's own
from_shared (the inverse of its to_shared, beside its Agent): nothing here knows a framework;
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


def from_shared(framework: str, net: model_file.Layers, continuous: bool, dtype: str = "float32"):
    """(agent, actor) of framework's template (ppo_FRAMEWORK.py's from_shared, the inverse of its
    to_shared): its own Agent holding the network net (model_file.layers_of's), built without an
    init (Linen's: its params), and the function that runs the agent's actor, observations
    (n, obs_dim) float32 -> the logits or the Gaussian's mean (n, num_actions) float32."""
    template = importlib.import_module(f"ppo_{framework}")
    return template.from_shared(net, continuous, dtype)


def load_actor(ckpt, framework: str) -> Callable[[np.ndarray], np.ndarray]:
    """The actor of ckpt (model_file.load's) in framework's network: observations -> its output."""
    continuous = ckpt.meta["action_kind"] == "continuous"
    net = model_file.layers_of(ckpt.params)
    _, actor = from_shared(framework, net, continuous, ckpt.meta["dtype"])
    return lambda obs: np.asarray(actor(obs))


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

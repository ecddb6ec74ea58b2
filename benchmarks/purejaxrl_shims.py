"""Stand-ins that let PureJaxRL's own purejaxrl/ppo.py run unmodified on this project's JAX, where
its pinned environment (benchmarks/purejaxrl-requirements.txt: jax 0.4.35) cannot be installed: on
an accelerator machine whose image carries one JAX, and to put both sides of the comparison on one
JAX. benchmarks/purejaxrl_train.py installs them with --shims, before it imports ppo.py; nothing of
PureJaxRL is copied or changed. Three gaps, each filled with what ppo.py uses of it:

- distrax (which needs tensorflow-probability, broken on newer JAX): `Categorical(logits=...)` and
  the three methods ppo.py calls, sample, log_prob and entropy;
- gymnax 1.x steps with six values (obs, state, reward, terminated, truncated, info), where ppo.py
  and its wrappers.py unpack gymnax 0.0.x's five: the env that `gymnax.make` returns steps with
  done = terminated or truncated, what gymnax 0.0.x's done was;
- wrappers.py imports chex for its annotations, and brax and navix for the wrappers of their envs:
  a stand-in for each one that is not installed (chex's two type names; brax and navix empty: a
  CartPole run never uses them).
"""

import importlib
import sys
import types

import gymnax
import jax
import jax.numpy as jnp

# the modules wrappers.py imports that this project need not have, and what it takes from them:
# chex's type names for its annotations, brax and navix for the wrappers of their envs
OPTIONAL_MODULES = {
    "chex": {"Array": jax.Array, "PRNGKey": jax.Array},
    "brax": {},
    "brax.envs": {},
    "brax.envs.wrappers": {},
    "brax.envs.wrappers.training": {"EpisodeWrapper": None, "AutoResetWrapper": None},
    "navix": {},
}


class Categorical:
    """distrax.Categorical on logits, as far as ppo.py uses it."""

    def __init__(self, logits):
        self.logits = logits

    def sample(self, seed):
        return jax.random.categorical(seed, self.logits)

    def log_prob(self, value):
        log_probs = jax.nn.log_softmax(self.logits)
        return jnp.take_along_axis(log_probs, value[..., None], axis=-1)[..., 0]

    def entropy(self):
        log_probs = jax.nn.log_softmax(self.logits)
        return -(jnp.exp(log_probs) * log_probs).sum(-1)


class FiveValueStep:
    """A gymnax 1.x env whose step returns gymnax 0.0.x's five values."""

    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        return getattr(self._env, name)

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        return obs, state, reward, terminated | truncated, info


def make_five_value(make):
    """gymnax.make whose env steps with five values."""

    def make_env(env_id, **kwargs):
        env, env_params = make(env_id, **kwargs)
        return FiveValueStep(env), env_params

    return make_env


def stand_in(name: str, attributes: dict) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__doc__ = "a stand-in (benchmarks/purejaxrl_shims.py): not installed here"
    for attribute, value in attributes.items():
        setattr(module, attribute, value)
    return module


def install() -> list[str]:
    """Installs the shims; returns what each one replaced, for the record."""
    done = ["distrax.Categorical (sample, log_prob, entropy)", "gymnax.make: a five-value step"]
    distrax = stand_in("distrax", {"Categorical": Categorical})
    sys.modules["distrax"] = distrax
    gymnax.make = make_five_value(gymnax.make)
    for name, attributes in OPTIONAL_MODULES.items():
        try:
            importlib.import_module(name)
        except ImportError:
            sys.modules[name] = stand_in(name, attributes)
            parent, _, child = name.rpartition(".")
            if parent:
                # `from brax import envs` finds it as the parent's attribute
                setattr(sys.modules[parent], child, sys.modules[name])
            done.append(f"{name}: a stand-in")
    return done

"""Environments beyond plain gymnax, adapted to the batched contract of the ppo_*.py scripts (part of benchback-rl).

The scripts import this module lazily, only for the env ids it adapts, so a copy of one script that trains on
gymnax needs no other file. Every adapter, like the scripts' `GymnaxBatch`, gives:

    env.num_actions                                    the number of discrete actions
    env.reset(keys, params) -> (obs, states)           one key per env
    env.step(keys, states, actions, params) -> (obs, states, reward, terminated, truncated, info)

with gymnax's auto-reset: `terminated` apart from `truncated` (the time limit alone), the observation reached
before any reset in `info["final_observation"]`, and no reset-only transition.

    import env_adapters
    env, params = env_adapters.make("Craftax-Classic-Symbolic-v1")
"""

from typing import Optional

import jax
import jax.numpy as jnp

ACTION_KINDS = "Discrete actions and 1-D Box actions (a diagonal Gaussian policy)"
CRAFTAX_ENVS = ("Craftax-Classic-Symbolic-v1", "Craftax-Symbolic-v1")  # expensive JAX envs (pip package craftax)


def adapted_envs() -> tuple[str, ...]:
    """The env ids this module adapts."""
    return CRAFTAX_ENVS


def make(env_id: str):
    """(env, params) of an adapted env; ValueError (one line that lists the usable envs) for any other id."""
    if env_id in CRAFTAX_ENVS:
        env = Craftax(env_id)
        return env, env.default_params
    problem = gymnax_problem(env_id) or "has no adapter"
    raise ValueError(f"env {env_id!r} {problem}; usable envs: {', '.join(usable_envs())}")


# ------------------------------------------------------------------------------------- what can be trained
def gymnax_problem(env_id: str) -> Optional[str]:
    """Why the scripts cannot train this gymnax env (None: they can); the same check as their make_env."""
    import gymnax

    if env_id not in gymnax.registered_envs:
        return "is unknown"
    try:
        env, params = gymnax.make(env_id)
    except Exception as e:  # an env that must download its data (MNISTBandit) without network
        return f"cannot be made ({type(e).__name__}: {e})"
    space = env.action_space(params)
    if isinstance(space, gymnax.environments.spaces.Discrete):
        return None
    if isinstance(space, gymnax.environments.spaces.Box) and len(space.shape) == 1:
        return None
    return f"has a {type(space).__name__} action space; the scripts train {ACTION_KINDS}"


def why_untrainable(env_id: str) -> Optional[str]:
    """None when the scripts can train on this env id, else why not (e.g. "has a Box action space")."""
    if env_id in adapted_envs():
        return None
    return gymnax_problem(env_id)


def usable_envs() -> list[str]:
    """Every env id the scripts can train on: gymnax's envs with a usable action space, then the adapted ones."""
    import gymnax

    usable = [env_id for env_id in gymnax.registered_envs if gymnax_problem(env_id) is None]
    return usable + list(adapted_envs())


# ------------------------------------------------------------------------------------------------ Craftax
def pick_where(done, new, old):
    """new where an env is done, else old; done has one entry per env (the leading axis)."""
    done = done.reshape(-1, *[1] * (old.ndim - 1))
    return jnp.where(done, new, old)


class Craftax:
    """Craftax with gymnax's contract. Its step has one `done` for a death and for the time limit, and a reset
    generates a world (about 7 steps' cost). So step splits `done` into terminated and truncated (the time limit
    alone), and resets optimistically, as Craftax_Baselines does: only NUM_RESETS fresh worlds a step, shared by
    the envs that are done."""

    NUM_RESETS = 4  # 32 envs under a random policy end about 0.2 episodes a step: sharing a world is rare

    def __init__(self, env_id: str):
        from craftax.craftax_env import make_craftax_env_from_name

        self.env = make_craftax_env_from_name(env_id, auto_reset=False)
        self.num_actions = self.env.num_actions
        self.default_params = self.env.default_params

    def reset(self, keys, params):
        return jax.vmap(self.env.reset, in_axes=(0, None))(keys, params)

    def step(self, keys, states, actions, params):
        step = jax.vmap(self.env.step, in_axes=(0, 0, 0, None))
        obs, states, reward, done, info = step(keys, states, actions, params)
        # Craftax's own ends (death, lava, the boss) without the time limit: the terminated envs
        no_limit = params.replace(max_timesteps=jnp.iinfo(jnp.int32).max)
        terminated = jax.vmap(self.env.is_terminal, in_axes=(0, None))(states, no_limit)
        num_resets = min(self.NUM_RESETS, len(keys))
        reset_keys = jax.random.split(jax.random.fold_in(keys[0], 1), num_resets)
        fresh_obs, fresh_states = self.reset(reset_keys, params)
        world = (jnp.cumsum(done) - 1) % num_resets  # the k-th done env takes fresh world k mod num_resets
        fresh = jax.tree.map(lambda x: x[world], (fresh_obs, fresh_states))
        next_obs, states = jax.tree.map(lambda new, old: pick_where(done, new, old), fresh, (obs, states))
        info = {**info, "final_observation": obs}
        return next_obs, states, reward, terminated, done & ~terminated, info

"""ppo_torch.py's envpool glue: the pool stepped in NumPy on the host, as CleanRL steps it.

Only ppo_torch.py --env-backend envpool (without --norm-obs/--norm-reward) imports this file; with
gymnax, ppo_torch.py needs no other file.
"""

from typing import NamedTuple

import numpy as np


class HostRunner(NamedTuple):
    """ppo_torch.Runner's fields that the host keeps: no JAX env states, no key."""

    obs: np.ndarray
    episode_return: np.ndarray
    episode_length: np.ndarray


def host_reset(env, num_envs: int) -> HostRunner:
    """ppo_torch.reset_envs for envpool on the host."""
    obs, _ = env.reset_host()
    zeros = np.zeros(num_envs, np.float32)
    return HostRunner(obs.reshape(num_envs, -1), zeros, np.zeros(num_envs, np.int32))


def host_step_packed(env, runner: HostRunner, action):
    """ppo_torch.env_step_packed on the host: step_envs' arithmetic, PACKED_FIELDS' layout."""
    action = np.asarray(action)
    num_envs = action.shape[0]
    if env.continuous:
        action = np.clip(action, *env.action_bounds)
    obs, _, reward, terminated, truncated, final_obs = env.step_host(action)
    done = terminated | truncated
    episode_return = runner.episode_return + reward
    episode_length = runner.episode_length + 1
    running_return = np.where(done, np.float32(0), episode_return)
    running_length = np.where(done, np.int32(0), episode_length)
    next_runner = HostRunner(obs.reshape(num_envs, -1), running_return, running_length)
    ended_return = np.where(done, episode_return, np.float32(0))
    ended_length = np.where(done, episode_length, np.int32(0))
    fields = (next_runner.obs, reward, terminated, truncated, final_obs, ended_return, ended_length)
    return next_runner, np.concatenate([np.ravel(x).astype(np.float32) for x in fields])

"""Running normalisation of observations and rewards for any batched env of the ppo_*.py scripts'
contract (part of benchback-rl): `--norm-obs` and `--norm-reward`, as PureJaxRL's
NormalizeVecObservation and NormalizeVecReward, clipped as CleanRL's wrappers clip.

The scripts import this module lazily, only with those flags, so a copy of one script that trains on
gymnax without them needs no other file. The contract is env_adapters.py's (and the scripts'
`GymnaxBatch`'s).

    import env_normalize
    env = env_normalize.normalize(env, obs=True, reward=True, gamma=0.99)
"""

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

CLIP = 10.0  # normalised observations and rewards are clipped to [-CLIP, CLIP]


class RunningStats(NamedTuple):
    """The running mean and variance of a quantity, over count samples."""

    mean: jax.Array
    var: jax.Array
    count: jax.Array


def start_stats(shape) -> RunningStats:
    """No samples yet: mean 0, variance 1, and a count of 1e-4 (PureJaxRL's), which the first batch
    outweighs."""
    return RunningStats(
        jnp.zeros(shape, jnp.float32), jnp.ones(shape, jnp.float32), jnp.asarray(1e-4, jnp.float32)
    )


def merge(stats: RunningStats, batch) -> RunningStats:
    """stats updated with a batch (its leading axis): the parallel merge of two means and variances
    (Chan et al.), PureJaxRL's update rule."""
    batch_mean, batch_var, batch_count = batch.mean(axis=0), batch.var(axis=0), batch.shape[0]
    delta = batch_mean - stats.mean
    count = stats.count + batch_count
    mean = stats.mean + delta * batch_count / count
    m2 = (
        stats.var * stats.count
        + batch_var * batch_count
        + delta**2 * stats.count * batch_count / count
    )
    return RunningStats(mean, m2 / count, count)


def scale(x, stats: RunningStats, center: bool = True):
    """x in units of the running standard deviation (centred on the running mean for observations),
    clipped to +-CLIP as CleanRL's wrappers and SB3's VecNormalize clip it: an outlier early on,
    when the statistics have seen few samples, cannot reach the network as a huge input or the value
    loss as a huge reward."""
    # NumPy arrays stay NumPy (host_step); JAX arrays, traced or not, go through jnp
    xp = np if isinstance(x, np.ndarray) else jnp
    return xp.clip(((x - stats.mean) if center else x) / xp.sqrt(stats.var + 1e-8), -CLIP, CLIP)


class NormalizeState(NamedTuple):
    """The wrapped env's states and the running statistics (None where that normalisation is
    off)."""

    env_state: object
    obs_stats: Optional[RunningStats]  # over the observations each env returns
    return_stats: Optional[RunningStats]  # over the per-env discounted returns
    returns: Optional[jax.Array]  # each env's discounted return so far


class Normalize:
    """Any batched env of this contract, with its observations and/or rewards normalised, as
    PureJaxRL's NormalizeVecObservation and NormalizeVecReward: running statistics over the batch,
    in the states.

    - observations: the statistics start from the reset batch and take in each step's returned
      observations; the returned observations and info["final_observation"] are both
      (obs - mean) / sqrt(var + 1e-8), with the statistics after that update, clipped to +-CLIP;
    - rewards: each env's discounted return, return * gamma * (1 - done) + reward (done:
      terminated or truncated, of this step); the reward is divided by sqrt(var + 1e-8) of those
      returns' running variance, not centred, and clipped to +-CLIP.

    info["raw_reward"] is always the env's own reward (the scripts log episode returns from it)."""

    def __init__(self, env, obs: bool, reward: bool, gamma: float):
        self.env, self.obs, self.reward, self.gamma = env, obs, reward, gamma
        self.num_actions, self.continuous, self.action_bounds = (
            env.num_actions,
            env.continuous,
            env.action_bounds,
        )
        if hasattr(env, "host_step"):
            # an envpool pool's NumPy step, normalised in NumPy: the torch template steps it with no
            # JAX call
            self.host_step = self.normalized_host_step

    def reset(self, keys, params):
        obs, env_state = self.env.reset(keys, params)
        obs_stats = merge(start_stats(obs.shape[1:]), obs.astype(jnp.float32)) if self.obs else None
        return_stats = start_stats(()) if self.reward else None
        returns = jnp.zeros(len(keys), jnp.float32) if self.reward else None
        state = NormalizeState(env_state, obs_stats, return_stats, returns)
        return (scale(obs, obs_stats) if self.obs else obs), state

    def step(self, keys, state: NormalizeState, actions, params):
        stepped = self.env.step(keys, state.env_state, actions, params)
        return self.normalized(state, *stepped)

    def normalized_host_step(self, state: NormalizeState, actions):
        """step in NumPy, for an env with a NumPy host_step (env_adapters.Envpool): no JAX call, the
        same arithmetic in float32. The state and actions lead with the agents' axis: one pool steps
        every agent's envs, then each agent's outputs are normalised by its own statistics."""
        stepped = self.env.host_step(state.env_state, actions)
        state = jax.tree.map(np.asarray, state)
        agents = []
        for k in range(len(actions)):
            agent_state, agent_stepped = jax.tree.map(lambda x: x[k], (state, stepped))
            agents.append(self.normalized(agent_state, *agent_stepped))
        return jax.tree.map(lambda *xs: np.stack(xs), *agents)

    def normalized(
        self, state: NormalizeState, obs, env_state, reward, terminated, truncated, info
    ):
        """The wrapped env's step, normalised: step's outputs, and the statistics updated."""
        info = {**info, "raw_reward": reward}
        obs_stats, return_stats, returns = state.obs_stats, state.return_stats, state.returns
        if self.obs:
            obs_stats = merge(obs_stats, obs.astype(np.float32))
            obs, info["final_observation"] = (
                scale(obs, obs_stats),
                scale(info["final_observation"], obs_stats),
            )
        if self.reward:
            done = terminated | truncated
            not_done = 1 - done.astype(np.float32)
            returns = returns * self.gamma * not_done + reward.astype(np.float32)
            return_stats = merge(return_stats, returns)
            reward = scale(reward, return_stats, center=False)
        state = NormalizeState(env_state, obs_stats, return_stats, returns)
        return obs, state, reward, terminated, truncated, info


def normalize(env, obs: bool = True, reward: bool = True, gamma: float = 0.99):
    """env (any batched env: gymnax's through the scripts' GymnaxBatch, Craftax, Brax) with its
    observations and/or rewards normalised; the env itself when both are off (its reward is then the
    raw one, and its info has no "raw_reward")."""
    return Normalize(env, obs, reward, gamma) if obs or reward else env


def obs_norms(stats: RunningStats, num_agents: int) -> list[dict]:
    """Each agent's observation statistics, flattened as the network sees the observations, as
    float32 NumPy copies: what a model file keeps of --norm-obs (checkpoint.py)."""
    mean, var = (np.array(x, np.float32).reshape(num_agents, -1) for x in (stats.mean, stats.var))
    count = np.array(stats.count, np.float32).reshape(num_agents)
    return [{"mean": mean[k], "var": var[k], "count": count[k]} for k in range(num_agents)]

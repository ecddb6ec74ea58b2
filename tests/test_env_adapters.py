"""env_adapters.py beyond Craftax (tests/test_craftax.py): the Brax adapter's batched contract
(terminated apart from truncated, the pre-reset final observation, fresh resets, one compile, stable
types), the observation and reward normalisation against a NumPy reference of PureJaxRL's update
rule, and sweep/env_timing.py on continuous and Brax envs.

Brax compiles slowly on a CPU (tens of seconds): its tests share one adapter of a few envs and one
jitted step, and are marked slow.
"""

import subprocess
import sys

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import env_adapters
import env_normalize
from helpers import ROOT, assert_stepped_contract
from sweep import env_timing
from sweep import options as sweep_options

GAMMA = 0.9


class Batch:
    """A gymnax env stepped as a batch, one key per env: the scripts' GymnaxBatch, with the
    contract's attributes."""

    def __init__(self, env_id: str, **params):
        self.env, params_ = gymnax.make(env_id)
        self.params = params_.replace(**params)
        space = self.env.action_space(self.params)
        self.continuous = not hasattr(space, "n")
        self.num_actions = space.shape[0] if self.continuous else space.n
        self.action_bounds = None
        if self.continuous:
            self.action_bounds = tuple(
                np.full(self.num_actions, b, np.float32) for b in (space.low, space.high)
            )

    def reset(self, keys, params):
        return jax.vmap(self.env.reset, in_axes=(0, None))(keys, params)

    def step(self, keys, states, actions, params):
        return jax.vmap(self.env.step, in_axes=(0, 0, 0, None))(keys, states, actions, params)


# ------------------------------------------------------------------------------------ normalisation
def rollout(env, params, num_envs: int, actions):
    """reset, then one step per row of actions, with keys from seed 0: [(obs, reward, terminated,
    truncated, info)]."""
    key = jax.random.key(0)
    obs, state = env.reset(jax.random.split(key, num_envs), params)
    out = [(obs, None, None, None, None)]
    for t, action in enumerate(actions):
        keys = jax.random.split(jax.random.fold_in(key, t + 1), num_envs)
        obs, state, reward, terminated, truncated, info = env.step(
            keys, state, jnp.asarray(action), params
        )
        out.append((obs, reward, terminated, truncated, info))
    return out, state


def numpy_merge(mean, var, count, batch):
    """PureJaxRL's running mean and variance update, in float64."""
    batch_mean, batch_var, batch_count = batch.mean(0), batch.var(0), batch.shape[0]
    delta = batch_mean - mean
    total = count + batch_count
    m2 = var * count + batch_var * batch_count + delta**2 * count * batch_count / total
    return mean + delta * batch_count / total, m2 / total, total


def clipped(x):
    """CleanRL's and SB3's clip of normalised observations and rewards."""
    return np.clip(x, -10.0, 10.0)


def test_normalize_follows_purejaxrls_update_rule():
    """Over a few steps of CartPole with a 3-step time limit (so returns restart), the normalised
    observations, final observations and rewards match a NumPy reference; info["raw_reward"] is the
    env's reward."""
    env = Batch("CartPole-v1", max_steps_in_episode=3)
    num_envs, actions = 5, np.random.default_rng(0).integers(0, 2, (7, 5)).astype(np.int32)
    raw, _ = rollout(env, env.params, num_envs, actions)
    normed, _ = rollout(
        env_normalize.normalize(env, obs=True, reward=True, gamma=GAMMA),
        env.params,
        num_envs,
        actions,
    )
    # the time limit was reached: the discounted returns restarted
    assert any(r[3].any() for r in raw[1:])

    obs0 = np.asarray(raw[0][0], np.float64)
    mean, var, count = numpy_merge(np.zeros(4), np.ones(4), 1e-4, obs0)
    np.testing.assert_allclose(
        normed[0][0], clipped((obs0 - mean) / np.sqrt(var + 1e-8)), rtol=1e-5, atol=1e-5
    )
    r_mean, r_var, r_count, returns = 0.0, 1.0, 1e-4, np.zeros(num_envs)
    for (obs, reward, terminated, truncated, info), (
        n_obs,
        n_reward,
        n_term,
        n_trunc,
        n_info,
    ) in zip(raw[1:], normed[1:], strict=True):
        obs, final_obs = (
            np.asarray(obs, np.float64),
            np.asarray(info["final_observation"], np.float64),
        )
        mean, var, count = numpy_merge(mean, var, count, obs)
        np.testing.assert_allclose(
            n_obs, clipped((obs - mean) / np.sqrt(var + 1e-8)), rtol=1e-5, atol=1e-5
        )
        final_normed = clipped((final_obs - mean) / np.sqrt(var + 1e-8))
        np.testing.assert_allclose(n_info["final_observation"], final_normed, 1e-5, 1e-5)
        done = np.asarray(terminated | truncated)
        returns = returns * GAMMA * (1 - done) + np.asarray(reward, np.float64)
        r_mean, r_var, r_count = numpy_merge(r_mean, r_var, r_count, returns)
        np.testing.assert_allclose(
            n_reward, clipped(np.asarray(reward) / np.sqrt(r_var + 1e-8)), rtol=1e-5
        )
        np.testing.assert_array_equal(n_info["raw_reward"], reward)
        np.testing.assert_array_equal(n_term, terminated)
        np.testing.assert_array_equal(n_trunc, truncated)


class Outlier:
    """A batched env whose observations and rewards are standard normal for 10 steps, then huge in
    env 0: against the 700 samples of the running statistics, that one is about 26 standard
    deviations out, unclipped."""

    num_actions, continuous, action_bounds = 2, False, None

    def reset(self, keys, params):
        return jnp.zeros((len(keys), 3)), jnp.zeros(len(keys), jnp.int32)

    def step(self, keys, steps, actions, params):
        noise = jax.vmap(lambda key: jax.random.normal(key, (4,)))(keys)
        outlier = jnp.where((steps >= 10) & (jnp.arange(len(keys)) == 0), 1e6, 0.0)
        obs = noise[:, :3] + outlier[:, None]
        done = jnp.zeros(len(keys), bool)
        return obs, steps + 1, noise[:, 3] + outlier, done, done, {"final_observation": obs}


def test_normalized_observations_and_rewards_are_clipped_to_ten():
    """CleanRL's continuous PPO (and SB3's VecNormalize) clip both at +-10; so does the wrapper, and
    the raw reward stays in info for the episode returns."""
    env = env_normalize.normalize(Outlier(), obs=True, reward=True, gamma=0.99)
    _, state = env.reset(jnp.zeros(64), None)
    for step in range(11):
        keys = jax.random.split(jax.random.key(step), 64)
        obs, state, reward, *_, info = env.step(keys, state, jnp.zeros(64, jnp.int32), None)
    assert (
        float(jnp.abs(obs).max()) == 10.0
        and float(jnp.abs(info["final_observation"]).max()) == 10.0
    )
    assert float(reward.max()) == 10.0 and float(info["raw_reward"].max()) > 1e5
    assert float(jnp.abs(obs[1:]).max()) < 10.0  # the others, inside the clip


def test_normalize_each_part_alone_and_off():
    """obs only: rewards untouched; reward only: observations untouched; both off: the env
    itself."""
    env = Batch("CartPole-v1", max_steps_in_episode=3)
    actions = np.ones((4, 3), np.int32)
    raw, _ = rollout(env, env.params, 3, actions)
    obs_only, state = rollout(
        env_normalize.normalize(env, obs=True, reward=False), env.params, 3, actions
    )
    reward_only, _ = rollout(
        env_normalize.normalize(env, obs=False, reward=True), env.params, 3, actions
    )
    assert (
        state.return_stats is None and state.returns is None and state.obs_stats.mean.shape == (4,)
    )
    for (obs, reward, *_, info), (_, o_reward, *_), (r_obs, *_, r_info) in zip(
        raw[1:], obs_only[1:], reward_only[1:], strict=True
    ):
        np.testing.assert_array_equal(o_reward, reward)
        np.testing.assert_array_equal(r_obs, obs)
        np.testing.assert_array_equal(r_info["final_observation"], info["final_observation"])
    assert env_normalize.normalize(env, obs=False, reward=False) is env


def test_normalize_passes_the_action_space_through_and_keeps_its_types():
    """A continuous env keeps num_actions, continuous and action_bounds; a jitted step of the
    wrapper compiles once over repeated calls (no weak types in its statistics) and works op by op
    under jax.disable_jit() too."""
    env = Batch("Pendulum-v1")
    wrapped = env_normalize.normalize(env, obs=True, reward=True, gamma=0.99)
    assert (wrapped.num_actions, wrapped.continuous) == (1, True)
    np.testing.assert_array_equal(wrapped.action_bounds[0], [-2.0])
    np.testing.assert_array_equal(wrapped.action_bounds[1], [2.0])
    discrete = env_normalize.normalize(Batch("CartPole-v1"), obs=True, reward=True)
    assert (discrete.num_actions, discrete.continuous, discrete.action_bounds) == (2, False, None)

    keys = jax.random.split(jax.random.key(1), 4)
    obs, state = jax.jit(wrapped.reset)(keys, env.params)
    # the statistics
    assert not any(x.weak_type for x in jax.tree.leaves(state._replace(env_state=None)))
    # gymnax's weak types, cast as the scripts do
    state = jax.tree.map(lambda x: jnp.asarray(x, x.dtype), state)
    step = jax.jit(wrapped.step)
    actions = jnp.full((4, 1), 0.5, jnp.float32)
    jitted = []
    for _ in range(3):
        obs, after, reward, *_ = step(keys, state, actions, env.params)
        assert jax.tree.map(jax.typeof, after) == jax.tree.map(jax.typeof, state)
        jitted.append((obs, reward))
        state = after
    assert step._cache_size() == 1 and obs.dtype == reward.dtype == jnp.float32
    with jax.disable_jit():
        obs, state = wrapped.reset(keys, env.params)
        for jitted_obs, jitted_reward in jitted[:2]:  # op by op: two steps suffice
            obs, state, reward, *_ = wrapped.step(keys, state, actions, env.params)
            np.testing.assert_allclose(obs, jitted_obs, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(reward, jitted_reward, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------ the ids
def test_brax_ids_are_adapted_and_usable_and_unknown_ids_refused():
    assert {"brax-halfcheetah", "brax-ant"} <= set(env_adapters.adapted_envs())
    assert {"brax-halfcheetah", "brax-ant", "Pendulum-v1"} <= set(env_adapters.usable_envs())
    assert sweep_options.why_untrainable("brax-ant") is None
    with pytest.raises(ValueError) as e:
        env_adapters.make("brax-humanoid")
    assert (
        "\n" not in str(e.value)
        and "brax-halfcheetah" in str(e.value)
        and "'brax-humanoid'" in str(e.value)
    )


def test_the_module_imports_no_brax():
    """The scripts import env_adapters for any adapted id: Brax (and MuJoCo) load only when a Brax
    env is made."""
    code = (
        "import sys, env_adapters; "
        "print(sorted(m for m in ('brax', 'mujoco', 'craftax') if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# --------------------------------------------------------------------------------------------- Brax
NUM_ENVS = 3
LIMIT = 4  # a short time limit, to reach it in a few steps


@pytest.fixture(scope="module")
def ant():
    """brax-ant with a 4-step time limit and its jitted batched step: compiled once for the
    module."""
    env = env_adapters.Brax("brax-ant", episode_length=LIMIT)
    return env, jax.jit(env.step)


def flip(states, envs):
    """The states with these envs' torsos lifted to 2 m: above ant's healthy range, so they end at
    the next step."""
    pipeline = states.pipeline_state
    lifted = jnp.isin(jnp.arange(NUM_ENVS), jnp.asarray(envs, jnp.int32))
    q = pipeline.q.at[:, 2].set(jnp.where(lifted, 2.0, pipeline.q[:, 2]))
    # MJX steps from its Data's qpos
    positions = {"q": q, "qpos": q} if hasattr(pipeline, "qpos") else {"q": q}
    return states.replace(pipeline_state=pipeline.replace(**positions))


def step_keys(t: int):
    return jax.random.split(jax.random.key(100 + t), NUM_ENVS)


@pytest.mark.slow
def test_brax_contract_attributes_and_types(ant):
    env, step = ant
    assert_stepped_contract(env, step, flip, step_keys, LIMIT, num_actions=8, obs_dim=27)


@pytest.mark.slow
def test_brax_time_limit_truncates_unless_the_env_ends_itself(ant):
    """An env that ends itself (ant out of its healthy range) is terminated, also at the time limit;
    the others are truncated at the limit; each done env restarts its step count."""
    env, step = ant
    obs, states = env.reset(jax.random.split(jax.random.key(1), NUM_ENVS), None)
    actions = jnp.zeros((NUM_ENVS, 8), jnp.float32)
    for t in range(1, LIMIT + 1):
        states = flip(states, [0]) if t == LIMIT else states
        obs, states, reward, terminated, truncated, _ = step(step_keys(t), states, actions, None)
        if t < LIMIT:
            assert not (terminated | truncated).any()
    assert terminated.tolist() == [True, False, False] and truncated.tolist() == [False, True, True]
    assert states.info["steps"].tolist() == [0] * NUM_ENVS
    states = flip(states, [2])  # a termination before the limit: env 2 alone ends
    obs, states, reward, terminated, truncated, _ = step(step_keys(9), states, actions, None)
    assert terminated.tolist() == [False, False, True] and not truncated.any()
    assert states.info["steps"].tolist() == [1, 1, 0]


@pytest.mark.slow
def test_brax_final_observation_is_the_pre_reset_one_and_done_envs_get_a_fresh_state(ant):
    """final_observation is the step's own observation: for the env that ended (its torso lifted to
    2 m, the first entry of ant's observation), the height it reached, not its reset's; a done env
    continues from the reset of its step key (not the first reset state, which AutoResetWrapper
    would replay); the others go on, without a reset."""
    env, step = ant
    first_obs, states = env.reset(jax.random.split(jax.random.key(2), NUM_ENVS), None)
    keys = step_keys(0)
    obs, after, _, terminated, _, info = step(
        keys, flip(states, [1]), jnp.full((NUM_ENVS, 8), 0.3, jnp.float32), None
    )
    obs, final_obs = np.asarray(obs), np.asarray(info["final_observation"])
    assert terminated.tolist() == [False, True, False]
    # the torso's height: before the reset, and after it
    assert final_obs[1, 0] > 1.9 and obs[1, 0] < 1.0
    fresh_obs, _ = env.reset(keys, None)
    np.testing.assert_array_equal(obs[1], fresh_obs[1])  # the fresh reset of its key...
    assert not np.allclose(obs[1], first_obs[1])  # ...not a replay of the first one
    np.testing.assert_array_equal(final_obs[[0, 2]], obs[[0, 2]])  # the others: no reset
    assert after.info["steps"].tolist() == [1, 0, 1]


# --------------------------------------------------------------------------------------- env timing
def test_env_timing_times_a_continuous_gymnax_env():
    """Pendulum-v1: random actions are float32 vectors within its bounds; num_actions is the
    vector's length."""
    args = env_timing.Args(num_envs=8, warmup_steps=2, timed_steps=3)
    env = env_timing.make_env("Pendulum-v1")
    inputs = env_timing.random_inputs(jax.random.key(0), env, 8, 10)
    actions = np.stack([a for _, a in inputs])
    assert actions.dtype == np.float32 and actions.shape == (10, 8, 1)
    # spread over ±2
    assert actions.min() >= -2.0 and actions.max() <= 2.0 and actions.max() - actions.min() > 3.0
    result = env_timing.time_env("Pendulum-v1", args)
    assert (result["action_space"], result["num_actions"], result["obs_dim"]) == ("Box", 1, 3)
    assert result["num_envs"] == 8 and result["ms_per_step"] > 0


@pytest.mark.slow
def test_env_timing_times_brax_halfcheetah():
    """brax-halfcheetah through its adapter: a Box of 6 actions within ±1, 17 observations."""
    args = env_timing.Args(num_envs=2, expensive_num_envs=2, warmup_steps=1, timed_steps=2)
    env = env_timing.make_env("brax-halfcheetah")
    assert env.action_space.shape == (6,) and env.action_space.dtype == np.float32
    np.testing.assert_array_equal(env.action_space.low, -1.0)
    result = env_timing.time_env("brax-halfcheetah", args)
    assert (
        result["action_space"],
        result["num_actions"],
        result["obs_dim"],
        result["num_envs"],
    ) == ("Box", 6, 17, 2)
    assert result["ms_per_step"] > 0

"""The envpool backend (env_adapters.Envpool, `--env-backend envpool`): the adapter's contract on
scripted CartPole episodes against gymnax's own CartPole (terminated / truncated, the pre-reset
final observation, the same-step reset that is no reset-only transition, the time limit), the JAX
path (a host callback inside jit and lax.scan) against the NumPy one, tiny runs of every script and
its bad input, the same transitions in every script's env glue (clipped continuous actions
included), and CartPole learnt on envpool.

envpool's CartPole-v1 has gymnax's dynamics, observations, rewards and limits: stepped from the same
state, they agree to about 1e-6. envpool's pools are seeded when made, so two pools of one seed give
the same episodes.
"""

import importlib
import os
from functools import partial

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import script_runs
import torch
from gymnax.environments.classic_control.cartpole import EnvState
from script_runs import (
    FIRST_FAST,
    FRAMEWORKS,
    assert_one_line_refusal,
    check_tiny_run,
    default_mode,
    script,
)

import env_adapters
import env_normalize
import torch_glue
from helpers import (
    ENV_FIELDS,
    STUDY,
    TINY,
    only_run_dir,
    read_json,
    run_script,
    scalar_series,
)

# envpool's spaces
pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered by casting:UserWarning")

MODULES = {name: importlib.import_module(fw.script[:-3]) for name, fw in STUDY.frameworks.items()}
GYMNAX_CARTPOLE, GYMNAX_PARAMS = gymnax.make("CartPole-v1")
# CartPole's reset draws each of (x, x_dot, theta, theta_dot) from U(-0.05, 0.05)
RESET_RANGE = 0.05
# envpool's CartPole against gymnax's, over an episode stepped from the same start state
ATOL = 1e-5


# ------------------------------------------------------------------------------------------ helpers
def cartpole_state(obs, steps) -> EnvState:
    """gymnax's CartPole state of these observations: CartPole's state is its observation plus the
    step count."""
    obs = jnp.asarray(obs, jnp.float32)
    return EnvState(
        x=obs[:, 0], x_dot=obs[:, 1], theta=obs[:, 2], theta_dot=obs[:, 3], time=jnp.asarray(steps)
    )


@jax.jit
def gymnax_step(state: EnvState, action):
    """gymnax's CartPole step of every env, without its auto-reset: (obs, state, reward, terminated,
    truncated)."""
    # CartPole's step draws no randomness
    step = jax.vmap(GYMNAX_CARTPOLE.step_env, in_axes=(None, 0, 0, None))
    obs, state, reward, terminated, _ = step(jax.random.key(0), state, action, GYMNAX_PARAMS)
    return obs, state, reward, terminated, GYMNAX_CARTPOLE.is_truncated(state, GYMNAX_PARAMS)


def balance(obs):
    """A linear controller that keeps CartPole's pole up and its cart in bounds for 500 steps and
    more."""
    return (np.asarray(obs) @ np.array([0.1, 0.5, 10.0, 1.0]) > 0).astype(np.int32)


def assert_reset_obs(obs):
    assert obs.shape[-1] == 4 and (np.abs(obs) <= RESET_RANGE).all(), obs


# ------------------------------------------------------------------- 1. the contract against gymnax
def test_scripted_cartpole_episodes_match_gymnax_and_reset_in_the_same_step():
    """Every env pushes right, so its pole falls within about ten steps, three times over. gymnax
    steps from the same start state (set from envpool's reset observation) with the same actions:
    terminated, truncated, reward and the final observation agree at every step. At the ending step
    the returned observation is a fresh reset one; the next step is that episode's first (step count
    1, reward 1, the action applied to the reset state), never envpool's reset-only transition
    (reward 0, the action ignored)."""
    num_envs, num_steps = 3, 40
    env, params = env_adapters.make_envpool("CartPole-v1", num_envs=num_envs, seed=3, num_threads=1)
    assert params is None and (env.num_actions, env.continuous, env.action_bounds) == (
        2,
        False,
        None,
    )
    obs, steps = env.reset_host()
    assert obs.dtype == np.float32 and steps.tolist() == [0] * num_envs
    assert_reset_obs(obs)
    state = cartpole_state(obs, steps)  # gymnax steps freely from here until an episode ends
    action = np.ones(num_envs, np.int32)  # push right
    ended_at = [[] for _ in range(num_envs)]
    for t in range(num_steps):
        g_obs, g_state, g_reward, g_terminated, g_truncated = gymnax_step(
            state, jnp.asarray(action)
        )
        obs, steps, reward, terminated, truncated, final_obs = env.step_host(action)
        np.testing.assert_array_equal(terminated, g_terminated, err_msg=f"step {t}")
        np.testing.assert_array_equal(truncated, g_truncated, err_msg=f"step {t}")
        assert not truncated.any()
        # 1: no reset-only transition, whose reward is 0
        np.testing.assert_array_equal(reward, g_reward)
        assert reward.dtype == np.float32 and final_obs.dtype == obs.dtype == np.float32
        # before any reset
        np.testing.assert_allclose(final_obs, g_obs, atol=ATOL, err_msg=f"step {t}")
        for i in range(num_envs):
            if terminated[i]:  # reset in this same step: a fresh episode's first observation
                assert_reset_obs(obs[i])
                assert steps[i] == 0 and not np.array_equal(obs[i], final_obs[i])
                # the pole fell
                assert np.abs(final_obs[i, 2]) > GYMNAX_PARAMS.theta_threshold_radians
                ended_at[i].append(t)
            else:  # no reset: the observation reached is the final one, and the step count runs on
                np.testing.assert_array_equal(obs[i], final_obs[i])
                assert steps[i] == int(g_state.time[i])
                # the first step after an end: the action applied
                if ended_at[i] and ended_at[i][-1] == t - 1:
                    assert steps[i] == 1 and reward[i] == 1
        # gymnax continues from its own state, and from envpool's reset state where an episode ended
        state = jax.tree.map(
            lambda g, e: jnp.where(terminated, e, g), g_state, cartpole_state(obs, steps)
        )
    # three episodes (and more) in every env
    assert all(len(ends) >= 3 for ends in ended_at), ended_at
    assert all(ends[-1] < num_steps - 1 for ends in ended_at)  # each checked beyond its last end


def test_cartpole_time_limit_is_truncated_not_terminated():
    """A balancing controller keeps the pole up: at step 500 (envpool's CartPole-v1 limit, as
    gymnax's) the episode is truncated, not terminated, as gymnax says from the same state; its
    final observation is the state reached, the returned observation a fresh reset one, and the
    env's step count starts again."""
    num_envs = 2
    env, _ = env_adapters.make_envpool("CartPole-v1", num_envs=num_envs, seed=4, num_threads=1)
    obs, steps = env.reset_host()
    for t in range(1, 503):
        action = balance(obs)
        _, _, g_reward, g_terminated, g_truncated = gymnax_step(
            cartpole_state(obs, steps), jnp.asarray(action)
        )
        obs, steps, reward, terminated, truncated, final_obs = env.step_host(action)
        np.testing.assert_array_equal(terminated, g_terminated, err_msg=f"step {t}")
        np.testing.assert_array_equal(truncated, g_truncated, err_msg=f"step {t}")
        np.testing.assert_array_equal(reward, g_reward)
        assert not terminated.any(), f"the controller dropped the pole at step {t}"
        if t == 500:
            assert truncated.all() and not terminated.any()
            assert_reset_obs(obs)
            assert steps.tolist() == [0] * num_envs and not np.array_equal(obs, final_obs)
            # the pole still up
            assert (np.abs(final_obs[:, 2]) < GYMNAX_PARAMS.theta_threshold_radians).all()
        else:
            assert not truncated.any(), f"truncated at step {t}, not 500"
            np.testing.assert_array_equal(obs, final_obs)
            assert steps.tolist() == [t % 500] * num_envs
    # the steps after the limit: a fresh episode, not a reset-only transition
    assert (reward == 1).all()


# ---------------------------------------------------------------------------------- 2. the JAX path
@pytest.mark.parametrize("threads", [1, 2])
def test_the_jax_path_inside_jit_and_scan_steps_as_the_host_path(threads):
    """Envpool.reset and .step called from JAX (jit, lax.scan, the host callback) give the same
    transitions, bit for bit and of the same dtypes, as reset_host and step_host on a second pool of
    the same seed and actions (a pool of 1 thread: the worker threads change nothing). Each call
    steps the pool once: a second call of the compiled scan carries on where the first stopped (no
    recompile), and a jitted step whose outputs are all discarded still steps the pool."""
    num_envs, num_steps = 4, 30
    actions = np.random.default_rng(0).integers(0, 2, (2, num_steps, num_envs)).astype(np.int32)
    env, _ = env_adapters.make_envpool(
        "CartPole-v1", num_envs=num_envs, seed=7, num_threads=threads
    )
    host, _ = env_adapters.make_envpool("CartPole-v1", num_envs=num_envs, seed=7, num_threads=1)
    keys = jax.random.split(jax.random.key(0), num_envs)

    @jax.jit
    def rollout(states, actions):
        def body(states, action):
            obs, states, reward, terminated, truncated, info = env.step(keys, states, action)
            return states, (obs, states, reward, terminated, truncated, info["final_observation"])

        return jax.lax.scan(body, states, actions)

    obs, states = jax.jit(env.reset)(keys)
    host_obs, host_steps = host.reset_host()
    np.testing.assert_array_equal(obs, host_obs)
    np.testing.assert_array_equal(states, host_steps)
    ends = 0
    for chunk in actions:
        states, out = rollout(states, jnp.asarray(chunk))
        for t, action in enumerate(chunk):
            # obs, steps, reward, terminated, truncated, final_obs
            expected = host.step_host(action)
            for name, actual, want in zip(
                ("obs", "steps", "reward", "term", "trunc", "final"), out, expected
            ):
                assert np.asarray(actual[t]).dtype == want.dtype, name
                np.testing.assert_array_equal(actual[t], want, err_msg=f"step {t} {name}")
            ends += int(expected[3].sum())
    assert rollout._cache_size() == 1 and ends >= 8  # episodes ended, and reset within the scan

    discard = jax.jit(lambda states, action: (env.step(keys, states, action), 0)[1])
    jax.block_until_ready(discard(states, jnp.zeros(num_envs, jnp.int32)))
    host.step_host(np.zeros(num_envs, np.int32))
    action = np.ones(num_envs, np.int32)
    np.testing.assert_array_equal(
        jax.jit(env.step)(keys, states, jnp.asarray(action))[0], host.step_host(action)[0]
    )


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_one_pool_steps_every_agent_as_a_pool_of_its_own_seed(env_id):
    """--num-agents N on envpool: one pool of N x num_envs envs, reset and stepped from a jitted
    rollout vmapped over the agents, is called once a step for every agent at once (the host call's
    batch, not N calls), and gives agent k, bit for bit, the transitions of a one-agent pool of
    seed + k under the same actions: agent k's envs are the single-agent run's. The actions do not
    depend on the observations: the calls keep their order by the states alone."""
    num_agents, num_envs, num_steps, seed = 3, 2, 60, 5
    env, _ = env_adapters.make_envpool(env_id, num_envs, seed, 1, num_agents)
    calls = []
    step_host = env.step_host

    def counted_step_host(actions, states):
        calls.append(actions.shape[:2])
        return step_host(actions, states)

    env.step_host = counted_step_host
    rng = np.random.default_rng(0)
    if env.continuous:
        actions = rng.uniform(-2, 2, (num_agents, num_steps, num_envs, 1)).astype(np.float32)
    else:
        actions = rng.integers(0, 2, (num_agents, num_steps, num_envs)).astype(np.int32)

    def rollout(keys, actions):
        obs, states = env.reset(keys)

        def body(states, action):
            obs, states, reward, terminated, truncated, info = env.step(keys, states, action)
            return states, (obs, states, reward, terminated, truncated, info["final_observation"])

        return obs, jax.lax.scan(body, states, actions)[1]

    agent_keys = jax.random.split(jax.random.key(0), num_agents)
    keys = jax.vmap(lambda key: jax.random.split(key, num_envs))(agent_keys)
    obs, stepped = jax.jit(jax.vmap(rollout))(keys, jnp.asarray(actions))
    assert calls == [(num_agents, num_envs)] * num_steps
    for k in range(num_agents):
        single, _ = env_adapters.make_envpool(env_id, num_envs, seed + k, num_threads=1)
        np.testing.assert_array_equal(obs[k], single.reset_host()[0])
        for t in range(num_steps):
            for actual, want in zip(stepped, single.step_host(actions[k, t]), strict=True):
                np.testing.assert_array_equal(actual[k, t], want, err_msg=f"agent {k} step {t}")
    # the agents' envs differ: each agent's seeded apart
    assert not np.array_equal(obs[0], obs[1])


def test_make_envpool_refuses_a_seed_beyond_its_envs_int32_seeds():
    """Env i of agent k is seeded (seed + k) x num_envs + i, an int32 in envpool: a seed that would
    overflow it is refused in one line that says how far the seed may go."""
    highest = 2**31 // 64 - 4
    env_adapters.make_envpool("CartPole-v1", 64, highest, num_threads=1, num_agents=4)
    with pytest.raises(ValueError, match=f"--seed must be 0 to {highest} .*got {highest + 1}"):
        env_adapters.make_envpool("CartPole-v1", 64, highest + 1, num_threads=1, num_agents=4)


# -------------------------------------------------------------------- 3. tiny runs and bad input
@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_tiny_run_cartpole_on_envpool(framework, log_dir):
    """The whole run-output contract on envpool; config.json records the backend and the worker
    threads. Issue 42, item 6: neither gymnasium's float32 cast of envpool's float64 space bounds
    (CartPole's as Pendulum's) nor torch.compile's notice that it ignores the optimizer's profiler
    span (torch's default mode) reaches stderr."""
    args = [*TINY, "--env", "CartPole-v1", "--env-backend", "envpool", "--env-threads", "2"]
    proc = run_script(script(framework), *args, log_dir=log_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "precision lowered" not in proc.stderr, proc.stderr[-3000:]
    assert "Profiler record function" not in proc.stderr, proc.stderr[-3000:]
    run_dir, summary = check_tiny_run(
        log_dir, framework, default_mode(framework), "CartPole-v1", args
    )
    config = read_json(run_dir / "config.json")
    assert config["env_backend"] == "envpool" and config["env_threads"] == 2
    assert summary["final_return"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["linen", "torch"])  # a JAX scan and torch's NumPy loop
def test_tiny_run_halfcheetah_on_envpool(framework, log_dir, monkeypatch):
    """A continuous MuJoCo env (6 action dimensions, float64 in envpool): the whole run-output
    contract, with a Gaussian policy of log std 0 at the start. No episode ends in 3 x 16 steps (the
    limit is 1000)."""
    no_episode = (*script_runs.NO_EPISODE_IN_TINY_RUN, "HalfCheetah-v4")
    monkeypatch.setattr(script_runs, "NO_EPISODE_IN_TINY_RUN", no_episode)
    args = [*TINY, "--env", "HalfCheetah-v4", "--env-backend", "envpool"]
    proc = run_script(script(framework), *args, log_dir=log_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir, summary = check_tiny_run(
        log_dir, framework, default_mode(framework), "HalfCheetah-v4", args
    )
    config = read_json(run_dir / "config.json")
    # the default: envpool's, one per core
    assert config["env_backend"] == "envpool" and config["env_threads"] == 0
    assert summary["final_return"] is None  # no episode ended
    entropy = scalar_series(run_dir, "losses/entropy")[0][1]
    assert entropy == pytest.approx(6 * (0.5 + 0.5 * np.log(2 * np.pi)), abs=0.1)


ENVPOOL_BAD_INPUTS = {
    "envpool env without the backend": (
        ["--env", "HalfCheetah-v4"],
        ["'HalfCheetah-v4'", "--env-backend envpool"],
    ),
    "unknown envpool env": (
        ["--env", "Foo", "--env-backend", "envpool"],
        ["'Foo'", "CartPole-v1", "HalfCheetah-v4"],
    ),
    "negative threads": (
        ["--env-threads", "-1", "--env-backend", "envpool"],
        ["--env-threads", "-1"],
    ),
    # it aborted with "terminate called without an active exception", exit 134 (issue 54 item 11)
    "more threads than cores": (
        ["--env-threads", "100000", "--env-backend", "envpool"],
        ["--env-threads", "100000", f"to {len(os.sched_getaffinity(0))}"],
    ),
}


@pytest.mark.parametrize("case", ENVPOOL_BAD_INPUTS)
@pytest.mark.parametrize("framework", FIRST_FAST)
def test_envpool_bad_input_is_refused_in_one_line_before_any_work(framework, case, log_dir):
    args, words = ENVPOOL_BAD_INPUTS[case]
    proc = run_script(script(framework), *args, log_dir=log_dir, timeout=120)
    assert_one_line_refusal(proc, words)
    assert not log_dir.exists(), "a run folder was created for bad input"
    if case == "unknown envpool env":  # the list is envpool's envs, not gymnax's
        assert "Breakout-MinAtar" not in proc.stderr


def test_make_envpool_refuses_more_threads_than_cores():
    """The scripts' --env-threads and sweep/env_timing.py's are checked against the cores here,
    where the pool is made (the scripts' Args check only that it is 0 or more)."""
    cores = len(os.sched_getaffinity(0))
    # past envpool's int too: refused here, before envpool sees it
    for threads in (cores + 1, 99999999999):
        match = f"--env-threads must be 0 .* to {cores}, got {threads}"
        with pytest.raises(ValueError, match=match):
            env_adapters.make_envpool("CartPole-v1", num_envs=4, seed=1, num_threads=threads)


@pytest.mark.parametrize("framework", FIRST_FAST)
def test_negative_env_threads_is_refused_with_the_gymnax_backend_too(framework, log_dir):
    """--env-threads -1 is bad input whatever the backend: the gymnax backend ignores the flag, but
    a run started with it would record env_threads -1 in config.json."""
    proc = run_script(script(framework), *TINY, "--env-threads", "-1", log_dir=log_dir, timeout=120)
    assert_one_line_refusal(proc, ["--env-threads", "-1"])
    assert not log_dir.exists(), "a run folder was created for bad input"


# ---------------------------------------------------------------------------------------- 4. parity
PARITY_NUM_ENVS, PARITY_SEED = 3, 5
PARITY_FIELDS = ("obs", *ENV_FIELDS)  # the next observation, then the env fields of a Transition


def parity_actions(env_id: str):
    """(num_steps, num_envs, ...) actions: CartPole random (episodes end); Pendulum past its
    200-step limit and HalfCheetah, normal with std 3, far out of their bounds (±2, ±1), which every
    script must clip."""
    rng = np.random.default_rng(1)
    if env_id == "CartPole-v1":
        return rng.integers(0, 2, (60, PARITY_NUM_ENVS)).astype(np.int32)
    steps, dims = {"Pendulum-v1": (205, 1), "HalfCheetah-v4": (20, 6)}[env_id]
    return (3 * rng.normal(size=(steps, PARITY_NUM_ENVS, dims))).astype(np.float32)


def parity_env(module, env_id: str, normalized: bool):
    """A script's make_env on envpool, wrapped as --norm-obs --norm-reward wrap it where
    normalized."""
    env, params = module.make_env(env_id, "envpool", PARITY_NUM_ENVS, PARITY_SEED, 1)
    if normalized:
        env = env_normalize.normalize(env, obs=True, reward=True, gamma=0.99)
    return env, params


def jax_glue_rollout(module, env_id: str, actions, normalized=False):
    """A JAX script's make_env, reset_envs and step_envs, stepped in a jitted lax.scan as its
    rollout does: the reset observation and the stacked (num_steps, ...) fields, NumPy."""
    env, params = parity_env(module, env_id, normalized)
    runner = module.reset_envs(env, params, jax.random.key(0), PARITY_NUM_ENVS)

    @jax.jit
    def scan(runner, actions):
        def body(runner, action):
            runner, fields = module.step_envs(env, params, runner, action)
            return runner, (runner.obs, *fields)

        return jax.lax.scan(body, runner, actions)[1]

    return np.asarray(runner.obs), [np.asarray(x) for x in scan(runner, jnp.asarray(actions))]


def torch_env_rollout(env, params, env_step, actions, agents: bool = False):
    """ppo_torch.rollout's env side: reset_envs, env_step per step (NumPy actions, as
    torch_glue.to_jax gives them on a CPU), every step's next obs and env fields stacked by
    torch_glue.stack_steps and crossed by to_torch. agents: as ppo_torch.py steps a pool, the
    runner (torch_glue.reset_agents') and the actions with the agents' axis (of one), which the
    arrays returned are without."""
    module = MODULES["torch"]
    if agents:
        runner = torch_glue.reset_agents(env, params, module.reset_envs, [0], PARITY_NUM_ENVS)
    else:
        runner = module.reset_envs(env, params, jax.random.key(0), PARITY_NUM_ENVS)
    reset_obs, steps = np.asarray(runner.obs), []
    for action in actions:
        action = np.asarray(action)
        runner, fields = env_step(runner, action[None] if agents else action)
        steps.append((runner.obs, *fields))
    stacked = torch_glue.stack_steps(steps)
    out = [torch_glue.to_torch(x, torch.device("cpu")).numpy() for x in stacked]
    if agents:  # one agent's
        return reset_obs[0], [x[:, 0] for x in out]
    return reset_obs, out


def torch_host_rollout(env_id: str, actions, normalized=False):
    """ppo_torch.py's envpool path: torch_glue.env_step picks env_adapters.host_step_envs, NumPy on
    the host, for a pool, raw or normalised."""
    module = MODULES["torch"]
    env, params = parity_env(module, env_id, normalized)
    env_step = torch_glue.env_step(env, params, module.step_envs)
    assert env_step.func is env_adapters.host_step_envs
    return torch_env_rollout(env, params, env_step, actions, agents=True)


def torch_jit_rollout(env_id: str, actions):
    """ppo_torch.py's other path (the one every env wrapped by env_normalize takes): its step_envs,
    jitted, called step by step."""
    module = MODULES["torch"]
    env, params = module.make_env(env_id, "envpool", PARITY_NUM_ENVS, PARITY_SEED, 1)
    env_step = jax.jit(partial(module.step_envs, env, params))
    return torch_env_rollout(env, params, env_step, actions)


def raw_pool_rewards(env_id: str, actions):
    """The rewards of a bare envpool pool seeded as make_envpool seeds one agent's (seed x
    num_envs: its env i has seed x num_envs + i), stepped with these actions as they are
    (float64)."""
    import envpool

    seed = PARITY_SEED * PARITY_NUM_ENVS
    pool = envpool.make(
        env_id, env_type="gymnasium", num_envs=PARITY_NUM_ENVS, seed=seed, num_threads=1
    )
    pool.reset()
    return np.stack([pool.step(np.asarray(action, np.float64))[1] for action in actions]).astype(
        np.float32
    )


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "HalfCheetah-v4"])
def test_every_script_steps_envpool_identically(env_id):
    """Fresh pools of one seed and one action sequence through each script's env glue (the JAX
    scripts' jitted scan of step_envs; torch's NumPy env_adapters.host_step_envs, and its step_envs
    jitted) give the same reset observation and the same next obs, reward, terminated, truncated,
    final obs, ended return and ended length at every step, bit for bit. The out-of-bounds
    continuous actions are clipped to the bounds: HalfCheetah's reward (its control cost) is that of
    the clipped actions, not of the raw ones."""
    actions = parity_actions(env_id)
    runs = {
        name: jax_glue_rollout(module, env_id, actions)
        for name, module in MODULES.items()
        if name != "torch"
    }
    runs["torch"] = torch_host_rollout(env_id, actions)
    runs["torch jitted step_envs"] = torch_jit_rollout(env_id, actions)
    assert len(runs) == len(MODULES) + 1
    reference_obs, reference = runs["linen"]
    for name, (reset_obs, fields) in runs.items():
        np.testing.assert_array_equal(reset_obs, reference_obs, err_msg=f"{name} reset obs")
        for field, actual, expected in zip(PARITY_FIELDS, fields, reference, strict=True):
            actual, expected = (
                actual.reshape(len(actions), -1),
                expected.astype(np.float32).reshape(len(actions), -1),
            )
            np.testing.assert_array_equal(actual, expected, err_msg=f"{env_id}: {name} {field}")

    fields = dict(zip(PARITY_FIELDS, reference, strict=True))
    done = fields["terminated"] | fields["truncated"]
    if env_id == "CartPole-v1":
        assert fields["terminated"].sum() >= 5 and not fields["truncated"].any()
    # every env truncated once, at its 200th step, with the episode's return
    if env_id == "Pendulum-v1":
        assert fields["truncated"][199].all() and fields["truncated"].sum() == PARITY_NUM_ENVS
        assert not fields["terminated"].any()
        assert fields["episode_length"][199].tolist() == [200] * PARITY_NUM_ENVS
        np.testing.assert_allclose(
            fields["episode_return"][199], fields["reward"][:200].sum(0), rtol=1e-5
        )
    assert (fields["episode_return"][~done] == 0).all() and (
        fields["episode_length"][~done] == 0
    ).all()
    if env_id != "CartPole-v1":
        low, high = MODULES["linen"].make_env(env_id, "envpool", 1, PARITY_SEED, 1)[0].action_bounds
        assert ((actions < low) | (actions > high)).mean() > 0.3  # many actions out of bounds
    # no episode ends in 20 steps: the bare pool's rewards compare step by step
    if env_id == "HalfCheetah-v4":
        clipped = raw_pool_rewards(env_id, np.clip(actions, low, high))
        np.testing.assert_array_equal(fields["reward"], clipped)
        # the clip changes the reward
        assert not np.allclose(raw_pool_rewards(env_id, actions), clipped)


# -------------------------------------------------------------------------------------- 5. learning
@pytest.mark.slow
# the JAX scan's callback, torch's NumPy loop
@pytest.mark.parametrize("framework", ["linen", "torch"])
def test_learns_cartpole_on_envpool(framework, log_dir):
    """The default (benchmark) configuration solves envpool's CartPole-v1 within 100 iterations, as
    it does gymnax's (measured on 2 busy cores: Linen 45 s, final return 500; torch 84 s, 494)."""
    proc = run_script(
        script(framework), "--env", "CartPole-v1", "--env-backend", "envpool", log_dir=log_dir
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = only_run_dir(log_dir)
    assert read_json(run_dir / "config.json")["env_backend"] == "envpool"
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "completed" and summary["iterations_completed"] == 100
    assert summary["final_return"] >= 400, summary
    returns = [value for _, value in scalar_series(run_dir, "charts/episodic_return")][-10:]
    assert summary["final_return"] == pytest.approx(np.mean(returns), rel=1e-6)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "HalfCheetah-v4"])
def test_torch_steps_a_normalised_pool_on_the_host_as_jax_does(env_id):
    """With --norm-obs --norm-reward, ppo_torch.py steps an envpool pool through env_normalize's
    NumPy host_step (no JAX call a step: a JAX call cost 542 against 209 us a step,
    benchmarks/envpool_calls.py), and it gives what a JAX script's jitted scan gives: the same
    normalised obs, rewards and final obs, within float32 rounding (the two sum the statistics in
    different orders), and the same raw episode returns and done flags."""
    actions = parity_actions(env_id)
    reset_obs, fields = torch_host_rollout(env_id, actions, normalized=True)
    expected_obs, expected = jax_glue_rollout(MODULES["linen"], env_id, actions, normalized=True)
    np.testing.assert_allclose(reset_obs, expected_obs, rtol=1e-5, atol=1e-6)
    for field, actual, wanted in zip(PARITY_FIELDS, fields, expected, strict=True):
        actual = actual.reshape(len(actions), -1)
        wanted = wanted.astype(np.float32).reshape(len(actions), -1)
        np.testing.assert_allclose(actual, wanted, rtol=1e-4, atol=1e-5, err_msg=field)
    raw_obs, raw = torch_host_rollout(env_id, actions)
    # normalised: the observations and rewards are not the raw ones
    assert not np.allclose(fields[0], raw[0]) and not np.allclose(fields[1], raw[1])

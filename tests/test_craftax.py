"""The Craftax adapter (env_adapters.py) behind the scripts' env glue: terminated / truncated /
final observation at a death and at the time limit, optimistic resets, stable types, and the same
transitions in every framework's script.

Craftax is slow to compile on a CPU: the checks use a few envs and share one jitted step per env id.
"""

import importlib
from functools import cache, partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import env_adapters
from helpers import ENV_FIELDS, STUDY

MODULES = {name: importlib.import_module(fw.script[:-3]) for name, fw in STUDY.frameworks.items()}
CRAFTAX_ENVS = env_adapters.CRAFTAX_ENVS
# Every test here compiles Craftax's jitted reset and step (setup), each env id's once per process:
# whichever test of an env comes first pays that long compile. So every test is slow, and all run on
# one xdist worker, where each compile is made once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_craftax")]
# one more than the fresh worlds of a step: two envs may share one
NUM_ENVS = env_adapters.Craftax.NUM_RESETS + 1


@cache
def setup(module_name: str, env_id: str, max_timesteps: int | None = None):
    """The env, params, a jitted reset of NUM_ENVS envs and the script's jitted step_envs."""
    module = MODULES[module_name]
    env, params = module.make_env(env_id)
    if max_timesteps:
        params = params.replace(max_timesteps=max_timesteps)
    reset = jax.jit(partial(module.reset_envs, env, params, num_envs=NUM_ENVS))
    step = jax.jit(partial(module.step_envs, env, params))

    def step_named(runner, action):  # the env fields by name
        runner, fields = step(runner, action)
        return runner, dict(zip(ENV_FIELDS, fields, strict=True))

    return env, params, reset, step_named


def kill(runner, envs):
    """The Runner with the health of these envs set to 0: they die at the next step."""
    state = runner.env_state
    which = jnp.isin(jnp.arange(NUM_ENVS), jnp.asarray(list(envs), jnp.int32))
    health = jnp.where(which, 0, state.player_health).astype(state.player_health.dtype)
    return runner._replace(env_state=state.replace(player_health=health))


def noop(n: int = NUM_ENVS):
    return jnp.zeros(n, jnp.int32)


@cache
def without_reset(env_id: str):
    """The step every env of setup("linen", env_id) takes before any reset, with the keys
    step_envs draws: (runner, action) -> obs and states. Jitted, as the script's step it is compared
    with: run op by op, Craftax's vmapped step is thousands of dispatches of small ops."""
    env, params, _, _ = setup("linen", env_id)

    def step(runner, action):
        step_key = jax.random.split(runner.key)[1]
        return jax.vmap(env.env.step, in_axes=(0, 0, 0, None))(
            jax.random.split(step_key, action.shape[0]), runner.env_state, action, params
        )[:2]

    return jax.jit(step)


@pytest.mark.parametrize("env_id", CRAFTAX_ENVS)
def test_a_death_is_terminated_and_the_env_gets_a_fresh_world(env_id):
    _, _, reset, step = setup("linen", env_id)
    runner = kill(reset(jax.random.key(0)), [0])
    stepped_obs, _ = without_reset(env_id)(runner, noop())
    next_runner, fields = step(runner, noop())
    assert (
        fields["terminated"].tolist() == [True] + [False] * (NUM_ENVS - 1)
        and not fields["truncated"].any()
    )
    # before the reset: what V bootstraps from
    np.testing.assert_array_equal(fields["final_obs"], stepped_obs)
    assert not np.array_equal(next_runner.obs[0], stepped_obs[0])  # a fresh world...
    assert (
        int(next_runner.env_state.timestep[0]) == 0 and next_runner.env_state.player_health[0] > 0
    )
    # ...only where the episode ended
    np.testing.assert_array_equal(next_runner.obs[1:], stepped_obs[1:])
    assert next_runner.env_state.timestep[1:].tolist() == [1] * (NUM_ENVS - 1)
    assert fields["episode_length"].tolist() == [1] + [0] * (NUM_ENVS - 1)


def at_timestep(runner, timestep: int):
    """The Runner with every env's clock set to timestep (its episode counters left as they are)."""
    clock = runner.env_state.timestep
    state = runner.env_state.replace(timestep=jnp.full_like(clock, timestep))
    return runner._replace(env_state=state)


@pytest.mark.parametrize("env_id", CRAFTAX_ENVS)
def test_the_time_limit_truncates_unless_the_agent_dies_then(env_id):
    # the env's own limit, 5 steps ahead: the jitted step of the other tests, not one compiled again
    # for a short limit (the slow test below steps one)
    _, params, reset, step = setup("linen", env_id)
    runner = at_timestep(reset(jax.random.key(2)), params.max_timesteps - 5)
    for t in range(1, 6):
        if t == 5:  # env 2 dies at the time limit: terminated, not truncated
            runner = kill(runner, [2])
        runner, fields = step(runner, noop())
        if t < 5:
            assert not (fields["terminated"] | fields["truncated"]).any()
    assert fields["terminated"].tolist() == [i == 2 for i in range(NUM_ENVS)]
    assert fields["truncated"].tolist() == [i != 2 for i in range(NUM_ENVS)]
    assert (
        runner.env_state.timestep.tolist() == [0] * NUM_ENVS
        and fields["episode_length"].tolist() == [5] * NUM_ENVS
    )


def test_more_done_envs_than_fresh_worlds_share_them():
    """Optimistic resets: NUM_RESETS fresh worlds a step; the k-th done env takes world k mod
    NUM_RESETS."""
    env, _, reset, step = setup("linen", CRAFTAX_ENVS[0])
    runner, fields = step(kill(reset(jax.random.key(3)), range(NUM_ENVS)), noop())
    assert fields["terminated"].all() and NUM_ENVS == env.NUM_RESETS + 1
    # the first fresh world, twice
    np.testing.assert_array_equal(runner.obs[0], runner.obs[env.NUM_RESETS])
    # distinct worlds
    assert len({bytes(np.asarray(o)) for o in runner.obs[: env.NUM_RESETS]}) == env.NUM_RESETS


@pytest.mark.parametrize("env_id", CRAFTAX_ENVS)
def test_types_do_not_change_across_a_step(env_id):
    """The jitted rollout takes the Runner the last one returned: another type (weak types too)
    would recompile."""
    _, _, reset, step = setup("linen", env_id)
    runner = reset(jax.random.key(4))
    after, _ = step(runner, noop())
    assert jax.tree.map(jax.typeof, runner) == jax.tree.map(jax.typeof, after)


def test_every_framework_steps_craftax_identically():
    """The same keys and actions through each script's glue give the same transitions, bit for bit,
    deaths, time limits and optimistic resets included."""
    actions = np.random.default_rng(5).integers(0, 17, (7, NUM_ENVS)).astype(np.int32)
    runs = {}
    for name in MODULES:
        _, _, reset, step = setup(name, CRAFTAX_ENVS[0], max_timesteps=6)
        runner, out = reset(jax.random.key(6)), []
        for t, action in enumerate(actions):
            runner = kill(runner, [1]) if t == 2 else runner
            runner, fields = step(runner, jnp.asarray(action))
            out.append(
                {"obs": np.asarray(runner.obs), **{k: np.asarray(v) for k, v in fields.items()}}
            )
        runs[name] = out
    reference = runs["linen"]
    assert any(t["terminated"].any() for t in reference) and any(
        t["truncated"].any() for t in reference
    )
    for name, out in runs.items():
        for step_index, (actual, expected) in enumerate(zip(out, reference, strict=True)):
            for key in expected:
                np.testing.assert_array_equal(
                    actual[key], expected[key], err_msg=f"{name} step {step_index} {key}"
                )

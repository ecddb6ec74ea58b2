"""env_adapters.py's MuJoCo Playground envs (playground-<Name>, its DM Control suite): the ids, the
one-line error without the package, a quiet load (no warp lines, no MUJOCO_LOG.TXT), and the
batched contract on CartpoleBalance as the Brax adapter's (tests/test_env_adapters.py): terminated
apart from truncated, the pre-reset final observation, fresh resets, one compile, stable types.

MJX compiles slowly on a CPU: the contract's tests share one adapter of a few envs and one jitted
step, and are marked slow.
"""

import importlib.metadata
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import env_adapters
from evaluation import model_file
from helpers import ROOT, assert_stepped_contract
from sweep import env_timing
from sweep import options as sweep_options


# ----------------------------------------------------------------------------- the ids, the package
def test_playground_ids_are_the_suites_envs_and_usable():
    """The fixed list (the scripts, the sweep and a checkpoint's check know the ids without the
    package) is the package's own DM Control suite."""
    from mujoco_playground import dm_control_suite

    names = {env_id.removeprefix("playground-") for env_id in env_adapters.PLAYGROUND_ENVS}
    assert names == set(dm_control_suite.ALL_ENVS)
    assert set(env_adapters.PLAYGROUND_ENVS) <= set(env_adapters.adapted_envs())
    assert sweep_options.why_untrainable("playground-CartpoleBalance") is None
    assert model_file.unknown_env("playground-CheetahRun", "gymnax") is None


def test_env_timing_records_playgrounds_version():
    meta = env_timing.metadata(env_timing.Args(), ["CartPole-v1", "playground-CheetahRun"])
    assert meta["versions"]["playground"] == importlib.metadata.version("playground")
    # Playground's envs are Brax's, on MuJoCo's MJX (core/env_ids.py's packages)
    assert {"brax", "mujoco", "mujoco-mjx"} <= set(meta["versions"])
    assert "craftax" not in meta["versions"] and "envpool" not in meta["versions"]


def test_a_missing_package_is_one_line_that_says_how_to_install_it(monkeypatch):
    # None in sys.modules: `import mujoco_playground` raises ImportError, as when not installed
    monkeypatch.setitem(sys.modules, "mujoco_playground", None)
    with pytest.raises(ValueError) as e:
        env_adapters.make("playground-CartpoleBalance")
    message = str(e.value)
    assert "\n" not in message and "'playground-CartpoleBalance'" in message
    assert "./setup.sh" in message and env_adapters.PLAYGROUND_INSTALL in message


def test_an_env_loads_quietly(tmp_path):
    """CheetahRun in a fresh process (mujoco.mjx prints its warp lines on its first import): nothing
    on stdout, MuJoCo's warning (its XML's deprecated settotalmass) a Python warning on stderr, and
    no MUJOCO_LOG.TXT in the working folder."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); import env_adapters; "
        "env_adapters.make('playground-CheetahRun')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert "UserWarning: MuJoCo: compiler attribute 'settotalmass'" in proc.stderr
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------ the contract
NUM_ENVS = 3
LIMIT = 4  # a short time limit, to reach it in a few steps


@pytest.fixture(scope="module")
def cartpole():
    """playground-CartpoleBalance with a 4-step time limit and its jitted batched step: compiled
    once for the module."""
    env = env_adapters.Playground("playground-CartpoleBalance", episode_length=LIMIT)
    return env, jax.jit(env.step)


def broken(states, envs):
    """The states with these envs' pole angles NaN: Playground ends an episode before its time
    limit only on a NaN state, so they end at the next step."""
    data = states.data
    nan = jnp.isin(jnp.arange(NUM_ENVS), jnp.asarray(envs, jnp.int32))
    qpos = data.qpos.at[:, 1].set(jnp.where(nan, jnp.nan, data.qpos[:, 1]))
    return states.replace(data=data.replace(qpos=qpos))


def step_keys(t: int):
    return jax.random.split(jax.random.key(100 + t), NUM_ENVS)


@pytest.mark.slow
def test_playground_contract_attributes_types_and_one_compile(cartpole):
    env, step = cartpole
    # Playground's reset leaves data.time weak-typed: the adapter casts it
    assert_stepped_contract(env, step, broken, step_keys, LIMIT, num_actions=1, obs_dim=5)


@pytest.mark.slow
def test_playground_time_limit_truncates_a_nan_state_terminates_and_the_final_obs_is_kept(
    cartpole,
):
    """At the time limit the envs are truncated, an env that ends itself (a NaN state) terminated;
    final_observation is the step's own observation (the NaN one), a done env continues from the
    reset of its step key (not the first reset state, which Playground's auto-reset would replay),
    the others go on without a reset; each done env restarts its step count."""
    env, step = cartpole
    first_obs, states = env.reset(jax.random.split(jax.random.key(1), NUM_ENVS), None)
    actions = jnp.full((NUM_ENVS, 1), 0.3, jnp.float32)
    for t in range(1, LIMIT + 1):
        states = broken(states, [0]) if t == LIMIT else states
        obs, states, _, terminated, truncated, _ = step(step_keys(t), states, actions, None)
        if t < LIMIT:
            assert not (terminated | truncated).any()
    assert terminated.tolist() == [True, False, False] and truncated.tolist() == [False, True, True]
    assert states.info["steps"].tolist() == [0] * NUM_ENVS

    keys = step_keys(9)
    obs, states, _, terminated, truncated, info = step(keys, broken(states, [2]), actions, None)
    obs, final_obs = np.asarray(obs), np.asarray(info["final_observation"])
    assert terminated.tolist() == [False, False, True] and not truncated.any()
    assert np.isnan(final_obs[2]).any() and np.isfinite(obs).all()
    fresh_obs, _ = env.reset(keys, None)
    np.testing.assert_array_equal(obs[2], fresh_obs[2])  # the fresh reset of its key...
    assert not np.allclose(obs[2], first_obs[2])  # ...not a replay of the first one
    np.testing.assert_array_equal(final_obs[:2], obs[:2])  # the others: no reset
    assert states.info["steps"].tolist() == [1, 1, 0]

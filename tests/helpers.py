"""Helpers shared by the tests: run a script in a fresh process, find its run folder, read its
events."""

import signal
import time
from pathlib import Path

import numpy as np

from core import study
from core.events import read_scalars  # noqa: F401  (re-exported for the tests)
from core.runlog import read_json  # noqa: F401  (re-exported for the tests)
from tools.launch import run_script  # noqa: F401  (re-exported for the tests)

ROOT = Path(__file__).resolve().parents[1]
# the sweep's programs, as bench.sh runs them (python -m, the repository on PYTHONPATH: conftest.py
# sets it)
SWEEP_MODULE = ["-m", "sweep"]
ENV_TIMING_MODULE = ["-m", "sweep.env_timing"]
RUN_CHECK_MODULE = ["-m", "sweep.run_check"]
STUDY = study.load()

# The env fields of a Transition, in the order the scripts' step_envs returns them
ENV_FIELDS = ("reward", "terminated", "truncated", "final_obs", "episode_return", "episode_length")

# Tiny runs: 4 envs x 16 steps, 3 iterations, 2 epochs of 2 minibatches.
TINY = [
    "--num-envs",
    "4",
    "--num-steps",
    "16",
    "--num-iterations",
    "3",
    "--update-epochs",
    "2",
    "--num-minibatches",
    "2",
]


def one_cell(exp: str = "exp1", env: str = "CartPole-v1") -> list[str]:
    """bench.sh options that select one linen cell: one experiment and env, small, seed 1."""
    return [
        "--experiments",
        exp,
        "--frameworks",
        "linen",
        "--envs",
        env,
        "--sizes",
        "small",
        "--seeds",
        "1",
    ]


def only_run_dir(log_dir: Path) -> Path:
    runs = [p for p in log_dir.iterdir() if (p / "config.json").exists()]
    assert len(runs) == 1, f"expected one run folder in {log_dir}, found {runs}"
    return runs[0]


def scalar_series(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    """[(step, value), ...] of one TensorBoard tag of a run, skipping steps where it was not
    logged."""
    scalars = read_scalars(run_dir)
    rows = scalars[["step", tag]].dropna()
    return [(int(step), float(value)) for step, value in rows.itertuples(index=False)]


def numpy_gae(rewards, values, final_values, terminated, truncated, gamma, lam):
    """Textbook GAE with one loop per env: bootstrap unless terminated, reset the trace on any
    episode end."""
    advantages = np.zeros_like(rewards)
    for env in range(rewards.shape[1]):
        gae = 0.0
        for t in reversed(range(rewards.shape[0])):
            if terminated[t, env]:
                delta, gae = rewards[t, env] - values[t, env], 0.0
            else:
                delta = rewards[t, env] + gamma * final_values[t, env] - values[t, env]
                if truncated[t, env]:
                    gae = 0.0
            gae = delta + gamma * lam * gae
            advantages[t, env] = gae
    return advantages, advantages + values


def alive(pid: int) -> bool:
    """Whether process pid is running: it exists and is no zombie."""
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except FileNotFoundError:
        return False


def wait_until(condition, timeout: float = 60, what: str = "") -> None:
    """A safety net for a stuck process, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def as_from_a_shell() -> None:
    """A child's preexec_fn: SIGINT and SIGHUP unblocked and at their defaults, as a shell starts a
    command in the foreground. A suite started in the background of a script (`./setup.sh test &`,
    nohup) runs with SIGINT (and under nohup SIGHUP) ignored, which every child and exec keeps, and
    Python then installs no KeyboardInterrupt: a plain script would run through every Ctrl-C, and
    the scripts leave a SIGHUP inherited ignored as it is (atomic.py)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGHUP})
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def assert_stepped_contract(
    env, step, end_envs, step_keys, limit: int, num_actions: int, obs_dim: int
):
    """A batched JAX env adapter (Brax's, Playground's) and its jitted step: its action kind and
    bounds, float32 observations, states with no weak types, a step over two time limits and an
    env ended by end_envs(states, envs) at step 2 that changes no type (weak types included), the
    outputs' dtypes, and one compile over every call."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    assert (env.num_actions, env.continuous) == (num_actions, True)
    low, high = env.action_bounds
    assert low.dtype == high.dtype == np.float32 and low.shape == high.shape == (num_actions,)
    np.testing.assert_array_equal(low, -1.0)
    np.testing.assert_array_equal(high, 1.0)
    num_envs = len(step_keys(0))
    obs, states = env.reset(jax.random.split(jax.random.key(0), num_envs), None)
    assert obs.dtype == jnp.float32 and obs.shape == (num_envs, obs_dim)
    assert not any(getattr(x, "weak_type", False) for x in jax.tree.leaves(states))
    actions = jnp.zeros((num_envs, num_actions), jnp.float32)
    for t in range(2 * limit + 1):  # two time limits and a termination: both branches of the reset
        states = end_envs(states, [1]) if t == 2 else states
        obs, after, reward, terminated, truncated, _ = step(step_keys(t), states, actions, None)
        # weak types included
        assert jax.tree.map(jax.typeof, after) == jax.tree.map(jax.typeof, states)
        states = after
    dtypes = (obs.dtype, reward.dtype, terminated.dtype, truncated.dtype)
    assert dtypes == (jnp.float32, jnp.float32, bool, bool)
    assert step._cache_size() == 1  # one compile over every call

"""Environments beyond plain gymnax, adapted to the batched contract of the ppo_*.py scripts (part
of benchback-rl).

The scripts import this module lazily, only for the env ids it adapts, so a copy of one script that
trains on gymnax needs no other file. Every adapter, like the scripts' `GymnaxBatch`, gives:

    env.reset(keys, params) -> (obs, states)           one key per env
    env.step(keys, states, actions, params) -> (obs, states, reward, terminated, truncated, info)
    env.num_actions      discrete: the number of choices; continuous: the action vector's length
    env.continuous       bool
    env.action_bounds    continuous: (low, high), float32 NumPy arrays of shape (num_actions,);
                         discrete: None

with gymnax's auto-reset: `terminated` apart from `truncated` (the time limit alone), the
observation reached before any reset in `info["final_observation"]`, and no reset-only transition. A
continuous env gets float32 actions of shape (num_envs, num_actions), already clipped to
action_bounds by the scripts.

    env, params = env_adapters.make("Craftax-Classic-Symbolic-v1")  # or ("Hopper-v4", "envpool")
    env, params = env_adapters.make("playground-CartpoleBalance")  # MuJoCo Playground's DM Control
"""

import contextlib
import difflib
import io
import os
import warnings
from functools import partial
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap
from jax.experimental import io_callback
from jax.experimental.buffer_callback import buffer_callback

# the env ids: fixed lists, which the command line checks before JAX loads
from core.env_ids import BRAX_ENVS, CRAFTAX_ENVS, ENVPOOL_ENVS, PLAYGROUND_ENVS, REFUSED

ACTION_KINDS = "Discrete actions and 1-D Box actions (a diagonal Gaussian policy)"


def adapted_envs() -> tuple[str, ...]:
    """The env ids this module adapts."""
    return CRAFTAX_ENVS + tuple(BRAX_ENVS) + PLAYGROUND_ENVS


def make(env_id: str, backend="gymnax", num_envs=32, seed=1, threads=0, num_agents=1):
    """(env, params) of an adapted env; ValueError (one line that lists the usable envs) for any
    other id. With backend "envpool", one pool of num_agents x num_envs envpool envs (make_envpool);
    the JAX envs take the agents by vmap, and ignore num_agents."""
    if backend == "envpool":
        return make_envpool(env_id, num_envs, seed, threads, num_agents)
    if env_id in CRAFTAX_ENVS:
        env = Craftax(env_id)
        return env, env.default_params
    if env_id in BRAX_ENVS:
        return Brax(env_id), None  # a Brax env has no params: reset and step ignore them
    if env_id in PLAYGROUND_ENVS:
        return Playground(env_id), None
    problem = gymnax_problem(env_id) or "has no adapter"
    if env_id in ENVPOOL_ENVS and problem == "is unknown":  # to gymnax
        raise ValueError(f"env {env_id!r} is an envpool env: add --env-backend envpool")
    usable = usable_envs()
    nearest = difflib.get_close_matches(env_id, [*usable, *ENVPOOL_ENVS], n=1, cutoff=0.6)
    if problem == "is unknown" and nearest:
        problem = f"is unknown (did you mean {nearest[0]!r}?)"
    raise ValueError(f"env {env_id!r} {problem}; usable envs: {', '.join(usable)}")


# ------------------------------------------------------------------------------ what can be trained
def gymnax_problem(env_id: str) -> Optional[str]:
    """Why the scripts cannot train this gymnax env (None: they can), as their make_env checks."""
    import gymnax

    if env_id not in gymnax.registered_envs:
        return "is unknown"
    if env_id in REFUSED:
        # never made: making it would download its data
        return REFUSED[env_id]
    try:
        env, params = gymnax.make(env_id)
    except Exception as e:  # a gymnax update's env that cannot be made here
        return f"cannot be made ({type(e).__name__}: {e})"
    space = env.action_space(params)
    if isinstance(space, gymnax.environments.spaces.Discrete):
        return None
    if isinstance(space, gymnax.environments.spaces.Box) and len(space.shape) == 1:
        return None
    return f"has a {type(space).__name__} action space; the scripts train {ACTION_KINDS}"


def usable_envs() -> list[str]:
    """Every env id the scripts train on: gymnax's with a usable action space, then the adapted."""
    import gymnax

    usable = [env_id for env_id in gymnax.registered_envs if gymnax_problem(env_id) is None]
    return usable + list(adapted_envs())


# ------------------------------------------------------------------------------------------ Craftax
def pick_where(done, new, old):
    """new where an env is done, else old; done has one entry per env (the leading axis)."""
    done = done.reshape(-1, *[1] * (old.ndim - 1))
    return jnp.where(done, new, old)


class Craftax:
    """Craftax with gymnax's contract. Its step has one `done` for a death and for the time limit,
    and a reset generates a world (about 7 steps' cost). So step splits `done` into terminated and
    truncated (the time limit alone), and resets optimistically, as Craftax_Baselines does: only
    NUM_RESETS fresh worlds a step, shared by the envs that are done."""

    # 32 envs under a random policy end about 0.2 episodes a step: sharing a world is rare
    NUM_RESETS = 4

    def __init__(self, env_id: str):
        from craftax.craftax_env import make_craftax_env_from_name

        self.env = make_craftax_env_from_name(env_id, auto_reset=False)
        self.num_actions, self.continuous, self.action_bounds = self.env.num_actions, False, None
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
        # the k-th done env takes fresh world k mod num_resets
        world = (jnp.cumsum(done) - 1) % num_resets
        fresh = jax.tree.map(lambda x: x[world], (fresh_obs, fresh_states))
        next_obs, states = jax.tree.map(
            lambda new, old: pick_where(done, new, old), fresh, (obs, states)
        )
        info = {**info, "final_observation": obs}
        return next_obs, states, reward, terminated, done & ~terminated, info


# --------------------------------------------------------------------------------------------- Brax
def cast_like(tree, like):
    """tree with the dtypes of like, leaf by leaf, and no weak types: ant's step returns weak-typed
    leaves, and a jitted step fed a state of other types would compile again at every call."""
    return jax.tree.map(lambda x, y: jnp.asarray(x, y.dtype), tree, like)


@contextlib.contextmanager
def quiet_mujoco():
    """MuJoCo kept out of the console and the working folder while its envs load: mujoco.mjx prints
    on stdout that it has no warp (on import), and MuJoCo writes its warnings (half_cheetah.xml's
    deprecated settotalmass) to MUJOCO_LOG.TXT in the working folder; here they become Python
    warnings."""
    with contextlib.redirect_stdout(io.StringIO()):
        import mujoco.mjx  # noqa: F401

    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(lambda message: warnings.warn(f"MuJoCo: {message}", stacklevel=2))
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        mujoco.set_mju_user_warning(previous)


def load_brax(name: str, backend: str):
    """The Brax env, loaded quietly (quiet_mujoco)."""
    with quiet_mujoco():
        from brax import envs

        return envs.get_environment(name, backend=backend)


class Brax:
    """A Brax env with gymnax's contract. Only Brax's EpisodeWrapper (the time limit; action_repeat
    1): its AutoResetWrapper replays the first reset state and overwrites the final observation, so
    done envs are reset here, with the step's fresh keys. Brax's `done` includes the time limit;
    info["truncation"] is the time limit alone. The states are Brax States, with the time limit's
    step count in state.info["steps"]."""

    def __init__(self, env_id: str, episode_length: int = 1000):
        name, backend = BRAX_ENVS[env_id]
        env = load_brax(name, backend)
        self.wrap(env, env.sys.actuator.ctrl_range, episode_length)

    def wrap(self, env, ctrl_range, episode_length: int):
        """Adapts env (a Brax env, or one with Brax's reset, step and State), whose actions are
        bounded by ctrl_range (one (low, high) row per action), with a time limit of
        episode_length steps."""
        from brax.envs.wrappers.training import EpisodeWrapper

        self.env = EpisodeWrapper(env, episode_length, action_repeat=1)
        self.num_actions, self.continuous = self.env.action_size, True
        low, high = np.asarray(ctrl_range, np.float32).T
        self.action_bounds = (low, high)
        self.default_params = None
        # jitted: an eager MJX reset takes about 60 s
        self.reset_batch = jax.jit(jax.vmap(self.env.reset))

    def reset(self, keys, params=None):
        states = self.reset_batch(keys)
        states = cast_like(states, states)  # no weak types
        return states.obs, states

    def step(self, keys, states, actions, params=None):
        stepped = cast_like(jax.vmap(self.env.step)(states, actions), states)
        done = stepped.done.astype(bool)
        # the time limit, unless the env also ended itself
        truncated = stepped.info["truncation"].astype(bool)

        def reset_done(stepped):
            # a Brax step draws no randomness: its keys are fresh for the reset
            fresh = self.reset(keys)[1]
            return cast_like(
                jax.tree.map(lambda new, old: pick_where(done, new, old), fresh, stepped), stepped
            )

        # the reset costs nothing on a step where no episode ends (halfcheetah ends them all at
        # once, every 1000)
        states = jax.lax.cond(done.any(), reset_done, lambda stepped: stepped, stepped)
        info = {"final_observation": stepped.obs}
        return states.obs, states, stepped.reward, done & ~truncated, truncated, info


# ------------------------------------------------------------------------------- MuJoCo Playground
PLAYGROUND_INSTALL = "pip install --no-deps playground==0.2.0 lxml"


class Playground(Brax):
    """A MuJoCo Playground DM Control env (pip package playground) with gymnax's contract, as Brax's
    (Playground's envs have Brax's reset, step and State): pure-JAX MJX (impl "jax"; every config
    defaults to "warp", which needs the warp-lang package), the config's time limit (1,000 steps).
    An episode ends before the limit only on a NaN state (terminated). The reset draws from the
    step's keys, where Playground's auto-reset replays a cached first state."""

    def __init__(self, env_id: str, episode_length: Optional[int] = None):
        env, config = load_playground(env_id.removeprefix("playground-"))
        limit = episode_length or config.episode_length
        self.wrap(env, env.mj_model.actuator_ctrlrange, limit)


def load_playground(name: str):
    """The DM Control env of Playground and its config, loaded quietly (quiet_mujoco); ValueError
    (one line that says how to install it) when the package is missing."""
    try:
        with quiet_mujoco():
            from mujoco_playground import dm_control_suite
    except ImportError as e:
        # the package, or a dependency of it (lxml), is missing
        raise ValueError(
            f"env 'playground-{name}' needs MuJoCo Playground, which cannot be imported here "
            f"({e}): ./setup.sh installs it, or `{PLAYGROUND_INSTALL}`"
        ) from None
    config = dm_control_suite.get_default_config(name)
    with quiet_mujoco():
        return dm_control_suite.load(name, config, config_overrides={"impl": "jax"}), config


# ------------------------------------------------------------------------------------------ envpool
# envpool's CPU simulators (pip package envpool, imported lazily: about 6 s): the classic-control
# twins of gymnax's envs, and MuJoCo (float64 in envpool, float32 here): ENVPOOL_ENVS.
# gymnasium warns that it casts envpool's float64 space bounds to float32 (Pendulum, MuJoCo)
warnings.filterwarnings(
    "ignore",
    message=r".*Box (low|high)'s precision lowered by casting to float32",
    category=UserWarning,
    module=r"gymnasium\.spaces\.box",
)


def make_envpool(env_id: str, num_envs: int, seed: int, num_threads: int = 0, num_agents: int = 1):
    """(env, params) of an envpool env: one pool of num_agents x num_envs envs (Envpool), stepped by
    num_threads threads (0: envpool's default, one per core up to the pool's size); ValueError (one
    line) for an env id it does not have or a seed it cannot take."""
    if env_id not in ENVPOOL_ENVS:
        raise ValueError(
            f"env {env_id!r} is not an envpool env here; usable envpool envs: "
            f"{', '.join(ENVPOOL_ENVS)}"
        )
    # by the cores: envpool aborts the process when it cannot start its threads (100000)
    cores = len(os.sched_getaffinity(0))
    if not 0 <= num_threads <= cores:
        raise ValueError(
            f"--env-threads must be 0 (envpool's default) to {cores}, got {num_threads}"
        )
    # every env's seed (Envpool's) is an int32
    highest = 2**31 // num_envs - num_agents
    if not 0 <= seed <= highest:
        raise ValueError(
            f"--seed must be 0 to {highest} with envpool at {num_envs} envs and {num_agents} "
            f"agents (env i of agent k is seeded (seed + k) x num-envs + i), got {seed}"
        )
    # params: none, the pool holds its config
    return Envpool(env_id, num_envs, seed, num_threads, num_agents), None


class Envpool:
    """An envpool pool with gymnax's contract, stepped on the host (its NumPy API): by reset_host,
    step_host and host_step (step's contract; the torch template's loop steps it by
    host_step_envs, as CleanRL steps envpool), and by reset and step from JAX through a host call
    (host_call), so a jitted lax.scan rollout steps it.

    One pool serves all agents: num_agents x num_envs envs. envpool seeds its env i with the pool's
    seed + i, so a pool seeded seed x num_envs gives agent k the envs of a one-agent pool of seed +
    k. Its arrays lead with (num_agents, num_envs), or (num_envs,): vmapped over the agents, the
    scripts' rollout makes one host call a step for all (host_call), which steps the pool once.

    envpool resets an env one call late: the call after the one that ends an episode resets it,
    ignores its action and returns reward 0 (envpool#194). So step_host resets the done envs itself
    (`pool.reset(done_ids)`), and returns the observation reached before the reset as the final
    observation: no reset-only transition. terminated and truncated are envpool's own (at the time
    limit, truncated only, even where the episode also ended: gymnax says both). The env states
    live in the pool; the JAX states are each env's step count (they cannot replay a step)."""

    def __init__(self, env_id: str, num_envs: int, seed: int, num_threads: int, num_agents=1):
        import envpool

        # batch_size defaults to the pool's size: synchronous, every call steps every env
        pool = dict(num_envs=num_agents * num_envs, seed=seed * num_envs, num_threads=num_threads)
        self.pool = envpool.make(env_id, env_type="gymnasium", **pool)
        self.num_envs, self.num_agents = num_envs, num_agents
        self.obs_shape = self.pool.observation_space.shape
        space = self.pool.action_space
        self.continuous = not hasattr(space, "n")
        self.num_actions = space.shape[0] if self.continuous else int(space.n)
        self.action_bounds = None
        if self.continuous:
            self.action_bounds = (space.low.astype(np.float32), space.high.astype(np.float32))
        self.action_dtype = space.dtype  # MuJoCo: float64; classic control: int64 or float32
        self.default_params = None

    # --------------------------------------------------------------------------- NumPy, on the host
    def reset_host(self, like=None):
        """Every env reset: (obs, steps), float32 observations and each env's step count (0), with
        the shape of like (an array of one number per env) before their own; default: the pool's
        (num_envs,) for one agent, (num_agents, num_envs) for more."""
        lead = (self.num_envs,) if self.num_agents == 1 else (self.num_agents, self.num_envs)
        lead = lead if like is None else np.shape(like)
        obs, info = self.pool.reset()
        steps = info["elapsed_step"].astype(np.int32)
        return obs.astype(np.float32).reshape(*lead, *self.obs_shape), steps.reshape(lead)

    def step_host(self, actions, states=None):
        """One step of every env, done envs reset in the same step: (obs, steps, reward, terminated,
        truncated, final_obs), NumPy, with float32 observations and rewards, and the leading axes
        of actions ((num_envs,) or (num_agents, num_envs)); the states are not read."""
        actions = np.asarray(actions, self.action_dtype)
        lead = actions.shape[: actions.ndim - (1 if self.continuous else 0)]
        actions = actions.reshape(self.num_agents * self.num_envs, *actions.shape[len(lead) :])
        final_obs, reward, terminated, truncated, info = self.pool.step(actions)
        final_obs, steps = final_obs.astype(np.float32), info["elapsed_step"].astype(np.int32)
        done = terminated | truncated
        obs = final_obs.copy()
        if done.any():
            done_ids = np.flatnonzero(done).astype(np.int32)
            obs[done_ids], reset_info = self.pool.reset(done_ids)
            steps[done_ids] = reset_info["elapsed_step"]
        stepped = (obs, steps, reward.astype(np.float32), terminated, truncated & ~terminated)
        return tuple(x.reshape(*lead, *x.shape[1:]) for x in (*stepped, final_obs))

    def host_step(self, states, actions):
        """step's contract in NumPy, with no JAX call (host_step_envs steps it): (obs, states,
        reward, terminated, truncated, info), the states each env's step count, as step's."""
        *stepped, final_obs = self.step_host(actions)
        return (*stepped, {"final_observation": final_obs})

    # ---------------------------------------------------------------------- JAX, by a host callback
    def step_shapes(self):
        """One agent's shapes and dtypes of step_host's outputs: obs, steps, reward, terminated,
        truncated, final obs."""
        obs = jax.ShapeDtypeStruct((self.num_envs, *self.obs_shape), jnp.float32)
        vector = [jax.ShapeDtypeStruct((self.num_envs,), t) for t in (jnp.int32, jnp.float32, bool)]
        return (obs, *vector, vector[-1], obs)

    def reset(self, keys, params=None):
        """(obs, states); the keys only stand for the batch (the pool was seeded when made): a
        number drawn from each carries the agents' axis into the call when vmapped."""
        obs, steps = self.step_shapes()[:2]
        like = jax.vmap(jax.random.bits)(keys)
        return host_call(self.reset_host, (obs, steps), like)

    def step(self, keys, states, actions, params=None):
        # the states go in too, unused: each call waits for the one that gave them
        *stepped, final_obs = host_call(self.step_host, self.step_shapes(), actions, states)
        return (*stepped, {"final_observation": final_obs})


def host_call(fn, shapes, *args):
    """fn(*args) run on the host from JAX, once per call (a side effect: never dropped or repeated),
    with NumPy arrays in and out, also inside jit and lax.scan. Vmapped, fn gets the whole batch
    at once (every input with the batch's leading axis), as one pool steps every agent's envs. On a
    CPU by buffer_callback: io_callback took about 140 us a call more here
    (the project's envpool_calls benchmark); io_callback on other devices."""

    @custom_vmap
    def call(*args):
        if jax.default_backend() != "cpu":
            return io_callback(fn, shapes, *args)
        return buffer_callback(partial(write_outputs, fn), shapes, has_side_effect=True)(*args)

    @call.def_vmap
    def call_batched(axis_size, in_batched, *args):
        args = [
            x if batched else jnp.stack([x] * axis_size) for x, batched in zip(args, in_batched)
        ]
        batched = jax.tree.map(
            lambda s: jax.ShapeDtypeStruct((axis_size, *s.shape), s.dtype), shapes
        )
        # host_call again: under a vmap of a vmap, the call is batched once more
        return host_call(fn, batched, *args), jax.tree.map(lambda _: True, shapes)

    return call(*args)


def write_outputs(fn, context, outputs, *inputs):
    """buffer_callback's callback: fn's results written into XLA's own buffers, with no copy out."""
    results = fn(*[np.asarray(x) for x in inputs])
    for output, result in zip(outputs, results):
        np.asarray(output)[...] = result


def host_step_envs(env, runner, action):
    """The torch template's step_envs in NumPy for an env with a host_step (an Envpool, raw or
    normalised), its runner and action along an agent axis: every agent's envs stepped at once, as
    one pool. The next runner (its key passed on unused: the pool holds the states) and the env
    fields."""
    action = np.asarray(action)
    num_agents, num_envs = action.shape[:2]
    if env.continuous:
        action = np.clip(action, *env.action_bounds)
    env_state = jax.tree.map(np.asarray, runner.env_state)
    obs, env_state, reward, terminated, truncated, info = env.host_step(env_state, action)
    done = terminated | truncated
    # unscaled, even with --norm-reward
    episode_return = np.asarray(runner.episode_return) + info.get("raw_reward", reward)
    episode_length = np.asarray(runner.episode_length) + 1
    running_return = np.where(done, np.float32(0), episode_return)
    running_length = np.where(done, np.int32(0), episode_length)
    carried = dict(env_state=env_state, obs=obs.reshape(num_agents, num_envs, -1))
    carried.update(episode_return=running_return, episode_length=running_length)
    final_obs = info["final_observation"].reshape(num_agents, num_envs, -1)
    ended_return = np.where(done, episode_return, np.float32(0))
    ended_length = np.where(done, episode_length, np.int32(0))
    fields = (reward, terminated, truncated, final_obs, ended_return, ended_length)
    return runner._replace(**carried), fields

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

    import env_adapters
    env, params = env_adapters.make("Craftax-Classic-Symbolic-v1")
    # a CPU simulator (envpool)
    env, params = env_adapters.make_envpool("CartPole-v1", num_envs=32, seed=1)
"""

import contextlib
import io
import os
import warnings
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback
from jax.experimental.buffer_callback import buffer_callback

ACTION_KINDS = "Discrete actions and 1-D Box actions (a diagonal Gaussian policy)"
# expensive JAX envs (pip package craftax)
CRAFTAX_ENVS = ("Craftax-Classic-Symbolic-v1", "Craftax-Symbolic-v1")
# Brax envs (pip package brax) and the physics backend of each, chosen by measurement on a CPU (2
# busy cores): the compile of the jitted reset + the jitted step, then a step's median, at 4 / 32
# (the scripts' default) / 256 envs:
#                 generalized                              mjx
#   halfcheetah   21 + 22 s; 4.6 / 16 / 121 ms             36 + 40 s; 10.7 / 26 / 144 ms
#   ant           22 + 18 s; 4.0 / 14 / 50 ms              46 + 62 s; 4.2 / 5.2 / 31 ms
# halfcheetah: generalized wins both; ant: MJX steps 2.6x faster at 32 envs, for about 40 s more
# compile.
BRAX_ENVS = {"brax-halfcheetah": ("halfcheetah", "generalized"), "brax-ant": ("ant", "mjx")}


def adapted_envs() -> tuple[str, ...]:
    """The env ids this module adapts."""
    return CRAFTAX_ENVS + tuple(BRAX_ENVS)


def make(env_id: str, backend: str = "gymnax", num_envs: int = 32, seed: int = 1, threads: int = 0):
    """(env, params) of an adapted env; ValueError (one line that lists the usable envs) for any
    other id. With backend "envpool", a pool of num_envs envpool envs (make_envpool)."""
    if backend == "envpool":
        return make_envpool(env_id, num_envs, seed, threads)
    if env_id in CRAFTAX_ENVS:
        env = Craftax(env_id)
        return env, env.default_params
    if env_id in BRAX_ENVS:
        return Brax(env_id), None  # a Brax env has no params: reset and step ignore them
    problem = gymnax_problem(env_id) or "has no adapter"
    if env_id in ENVPOOL_ENVS and problem == "is unknown":  # to gymnax
        raise ValueError(f"env {env_id!r} is an envpool env: add --env-backend envpool")
    raise ValueError(f"env {env_id!r} {problem}; usable envs: {', '.join(usable_envs())}")


# ------------------------------------------------------------------------------ what can be trained
def gymnax_problem(env_id: str) -> Optional[str]:
    """Why the scripts cannot train this gymnax env (None: they can); the same check as their
    make_env."""
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
    """None when the scripts can train on this env id, else why not (e.g. "has a Box action
    space")."""
    if env_id in adapted_envs():
        return None
    return gymnax_problem(env_id)


def usable_envs() -> list[str]:
    """Every env id the scripts can train on: gymnax's envs with a usable action space, then the
    adapted ones."""
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
        self.num_actions = self.env.num_actions
        self.continuous = False
        self.action_bounds = None
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


def load_brax(name: str, backend: str):
    """The Brax env, loaded quietly: mujoco.mjx prints on stdout that it has no warp, and MuJoCo
    writes its warnings (half_cheetah.xml's deprecated settotalmass) to MUJOCO_LOG.TXT in the
    working folder; here they become Python warnings."""
    with contextlib.redirect_stdout(io.StringIO()):
        import mujoco
        from brax import envs

    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(lambda message: warnings.warn(f"MuJoCo: {message}", stacklevel=2))
    try:
        return envs.get_environment(name, backend=backend)
    finally:
        mujoco.set_mju_user_warning(previous)


class Brax:
    """A Brax env with gymnax's contract. Only Brax's EpisodeWrapper (the time limit; action_repeat
    1): its AutoResetWrapper replays the first reset state and overwrites the final observation, so
    done envs are reset here, with the step's fresh keys. Brax's `done` includes the time limit;
    info["truncation"] is the time limit alone. The states are Brax States, with the time limit's
    step count in state.info["steps"]."""

    def __init__(self, env_id: str, episode_length: int = 1000):
        from brax.envs.wrappers.training import EpisodeWrapper

        name, backend = BRAX_ENVS[env_id]
        self.env = EpisodeWrapper(load_brax(name, backend), episode_length, action_repeat=1)
        self.num_actions = self.env.action_size
        self.continuous = True
        low, high = np.asarray(self.env.sys.actuator.ctrl_range, np.float32).T
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


# ------------------------------------------------------------------------------------------ envpool
# envpool's CPU simulators (pip package envpool, imported lazily: about 6 s): the classic-control
# twins of gymnax's envs, and MuJoCo (float64 in envpool, float32 here).
ENVPOOL_ENVS = (
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Pendulum-v1",
)
ENVPOOL_ENVS += tuple(
    f"{name}-v4" for name in ("Ant", "HalfCheetah", "Hopper", "Humanoid", "HumanoidStandup")
)
ENVPOOL_ENVS += tuple(
    f"{name}-v4" for name in ("InvertedDoublePendulum", "InvertedPendulum", "Pusher", "Reacher")
)
ENVPOOL_ENVS += ("Swimmer-v4", "Walker2d-v4")


# gymnasium warns that it casts envpool's float64 space bounds to float32 (Pendulum, MuJoCo)
warnings.filterwarnings(
    "ignore",
    message=r".*Box (low|high)'s precision lowered by casting to float32",
    category=UserWarning,
    module=r"gymnasium\.spaces\.box",
)


def make_envpool(env_id: str, num_envs: int, seed: int, num_threads: int = 0):
    """(env, params) of an envpool env: a pool of num_envs envs seeded by seed, stepped by
    num_threads threads (0: envpool's default, one per core up to num_envs); ValueError (one line)
    for an env id it does not have."""
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
    # params: none, the pool holds its config
    return Envpool(env_id, num_envs, seed, num_threads), None


class Envpool:
    """An envpool pool with gymnax's contract, stepped on the host (its NumPy API) in two ways:

    - reset_host / step_host: NumPy in, NumPy out; host_step: step_host with step's contract
      (ppo_torch.py steps it in its Python loop by host_step_envs, as CleanRL steps envpool);
    - reset / step: the same from JAX, through a host callback (host_call), so a jitted lax.scan
      rollout steps it.

    envpool resets an env one call late: the call after the one that ends an episode resets it,
    ignores its action and returns reward 0 (envpool#194). So step_host resets the done envs itself,
    within the same step (`pool.reset(done_ids)`), and returns the observation reached before the
    reset as the final observation: no reset-only transition is ever returned. terminated and
    truncated are envpool's own; at the time limit envpool says truncated only, even where the
    episode also ended there (gymnax: both). The env states live in the pool; the JAX states are
    each env's step count in its episode (they cannot replay a step)."""

    def __init__(self, env_id: str, num_envs: int, seed: int, num_threads: int):
        import envpool

        # batch_size defaults to num_envs: synchronous, every call steps every env
        self.pool = envpool.make(
            env_id, env_type="gymnasium", num_envs=num_envs, seed=seed, num_threads=num_threads
        )
        self.num_envs = num_envs
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
    def reset_host(self):
        """Every env reset: (obs, steps), float32 observations and each env's step count (0)."""
        obs, info = self.pool.reset()
        return obs.astype(np.float32), info["elapsed_step"].astype(np.int32)

    def step_host(self, actions):
        """One step of every env, done envs reset in the same step: (obs, steps, reward, terminated,
        truncated, final_obs), NumPy, with float32 observations and rewards."""
        final_obs, reward, terminated, truncated, info = self.pool.step(
            np.asarray(actions, self.action_dtype)
        )
        final_obs, steps = final_obs.astype(np.float32), info["elapsed_step"].astype(np.int32)
        done = terminated | truncated
        obs = final_obs.copy()
        if done.any():
            done_ids = np.flatnonzero(done).astype(np.int32)
            obs[done_ids], reset_info = self.pool.reset(done_ids)
            steps[done_ids] = reset_info["elapsed_step"]
        return obs, steps, reward.astype(np.float32), terminated, truncated & ~terminated, final_obs

    def host_step(self, states, actions):
        """step's contract in NumPy, with no JAX call (host_step_envs steps it): (obs, states,
        reward, terminated, truncated, info), the states each env's step count, as step's."""
        obs, steps, reward, terminated, truncated, final_obs = self.step_host(actions)
        return obs, steps, reward, terminated, truncated, {"final_observation": final_obs}

    # ---------------------------------------------------------------------- JAX, by a host callback
    def step_shapes(self):
        """The shapes and dtypes of step_host's outputs: obs, steps, reward, terminated, truncated,
        final obs."""
        n = self.num_envs
        obs = jax.ShapeDtypeStruct((n, *self.obs_shape), jnp.float32)
        vector = [
            jax.ShapeDtypeStruct((n,), dtype) for dtype in (jnp.int32, jnp.float32, bool, bool)
        ]
        return (obs, *vector, obs)

    def reset(self, keys, params=None):
        """(obs, states); the keys only stand for the batch: the pool was seeded when made."""
        obs, steps = self.step_shapes()[:2]
        return host_call(self.reset_host, (obs, steps))

    def step(self, keys, states, actions, params=None):
        obs, steps, reward, terminated, truncated, final_obs = host_call(
            self.step_host, self.step_shapes(), actions
        )
        return obs, steps, reward, terminated, truncated, {"final_observation": final_obs}


def host_call(fn, shapes, *args):
    """fn(*args) run on the host from JAX, once per call (a side effect: never dropped or repeated),
    with NumPy arrays in and out, also inside jit and lax.scan. On a CPU, by buffer_callback:
    io_callback took about 140 us a call more here (benchmarks/envpool_calls.py); io_callback on
    other devices."""
    # the scripts vmap their rollout over the agents, of which envpool takes one (Args refuses
    # more): a vmapped call is made once per agent, in order. Unordered: vmap refuses an ordered
    # callback, and each call's input is the one before's output, which orders them anyway.
    if jax.default_backend() != "cpu":
        return io_callback(fn, shapes, *args)

    # XLA's own buffers, written in place: no copy out
    def write_outputs(context, outputs, *inputs):
        results = fn(*[np.asarray(x) for x in inputs])
        for output, result in zip(outputs, results):
            np.asarray(output)[...] = result

    call = buffer_callback(write_outputs, shapes, has_side_effect=True, vmap_method="sequential")
    return call(*args)


def host_step_envs(env, runner, action):
    """ppo_torch.py's step_envs in NumPy for an env with a host_step (an Envpool, raw or normalised)
    and one agent (Args refuses more), its runner and action along an agent axis of one: the next
    runner (its key passed on unused: the pool holds the states) and the env fields."""
    action = np.asarray(action)[0]
    num_envs = action.shape[0]
    if env.continuous:
        action = np.clip(action, *env.action_bounds)
    env_state = jax.tree.map(lambda x: np.asarray(x)[0], runner.env_state)
    obs, env_state, reward, terminated, truncated, info = env.host_step(env_state, action)
    done = terminated | truncated
    # unscaled, even with --norm-reward
    episode_return = np.asarray(runner.episode_return)[0] + info.get("raw_reward", reward)
    episode_length = np.asarray(runner.episode_length)[0] + 1
    running_return = np.where(done, np.float32(0), episode_return)
    running_length = np.where(done, np.int32(0), episode_length)
    carried = dict(env_state=env_state, obs=obs.reshape(num_envs, -1))
    carried.update(episode_return=running_return, episode_length=running_length)
    final_obs = info["final_observation"].reshape(num_envs, -1)
    ended_return = np.where(done, episode_return, np.float32(0))
    ended_length = np.where(done, episode_length, np.int32(0))
    fields = (reward, terminated, truncated, final_obs, ended_return, ended_length)
    # the agent axis back
    carried, fields = jax.tree.map(lambda x: np.asarray(x)[None], (carried, fields))
    return runner._replace(**carried), fields

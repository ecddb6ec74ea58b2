"""ppo_torch.py's systems side, a piece the script owns: the device torch shares with JAX, the
DLPack crossings between them, and what each --compile mode compiles, traces or graphs.

A copy of ppo_torch.py that trains on gymnax needs this file and no other.
"""

import logging
import os
import time
import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import torch

# JAX shares the GPU with torch: no 75 % grab (read when JAX first uses a device, not on import)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# --compile torchscript is deprecated in torch 2.13, and still the cheapest policy step on a CPU
warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", DeprecationWarning)
# torch.compile says it ignores the optimizer's profiler span: nothing a user can act on
logging.getLogger("torch._dynamo.variables.ctx_manager").addFilter(
    lambda record: not record.getMessage().startswith("Profiler record function")
)

# the --compile modes that torch.compile the minibatch step, and its options for each
COMPILED = {"compile": {}, "cudagraphs": dict(mode="reduce-overhead")}


def shared_device(requested: str, compile_mode: str) -> torch.device:
    """torch's device, made JAX's default too, so that DLPack crosses without a copy: cuda when
    both see a GPU, unless --device cpu. ValueError (one line) when the flags need a GPU."""
    gpu = torch.cuda.is_available() and jax.default_backend() == "gpu"
    device = torch.device("cuda" if gpu and requested != "cpu" else "cpu")
    if device.type == "cpu" and (requested == "cuda" or compile_mode == "cudagraphs"):
        flags = f"--device {requested} --compile {compile_mode}"
        raise ValueError(f"{flags}: no GPU for torch and JAX; use --device cpu --compile compile")
    jax_device = jax.devices("gpu" if device.type == "cuda" else "cpu")[0]
    jax.config.update("jax_default_device", jax_device)
    return device


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def synchronize(device: torch.device, *jax_values) -> None:
    """Waits for JAX's values and torch's queued work, so that a timer reads finished work."""
    jax.block_until_ready(jax_values)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def env_step(env, env_params, step_envs):
    """What rollout calls each step: the script's step_envs, jitted; for an envpool pool, raw or
    normalised by env_normalize (an env with host_step), host_step: NumPy only, as CleanRL steps
    envpool, with no JAX call per step (benchmarks/envpool_calls.py times both)."""
    if hasattr(env, "host_step"):
        return partial(host_step, env)
    return jax.jit(partial(step_envs, env, env_params))


def host_step(env, runner, action):
    """The script's step_envs in NumPy for an env with a NumPy host_step (env_adapters.Envpool): the
    next runner (its key passed on unused: the pool holds the states) and the env fields."""
    action = np.asarray(action)
    num_envs = action.shape[0]
    if env.continuous:
        action = np.clip(action, *env.action_bounds)
    stepped = env.host_step(runner.env_state, action)
    obs, env_state, reward, terminated, truncated, info = stepped
    done = terminated | truncated
    # unscaled, even with --norm-reward
    episode_return = np.asarray(runner.episode_return) + info.get("raw_reward", reward)
    episode_length = np.asarray(runner.episode_length) + 1
    running_return = np.where(done, np.float32(0), episode_return)
    running_length = np.where(done, np.int32(0), episode_length)
    obs = obs.reshape(num_envs, -1)
    next_runner = runner._replace(
        env_state=env_state,
        obs=obs,
        episode_return=running_return,
        episode_length=running_length,
    )
    final_obs = info["final_observation"].reshape(num_envs, -1)
    ended_return = np.where(done, episode_return, np.float32(0))
    ended_length = np.where(done, episode_length, np.int32(0))
    return next_runner, (reward, terminated, truncated, final_obs, ended_return, ended_length)


def to_torch(x, device: torch.device) -> torch.Tensor:
    """A JAX or NumPy array (or a tensor) on torch's device, without a copy where DLPack allows."""
    if device.type == "cpu":
        # through NumPy: a faster crossing than from JAX's array
        x = np.asarray(x)
    return torch.from_dlpack(x).to(device)


def to_jax(x: torch.Tensor):
    """A tensor for a jitted JAX call: NumPy on a CPU (a faster argument), a JAX array on a GPU."""
    return np.from_dlpack(x) if x.is_cpu else jnp.from_dlpack(x)


def to_host(scalars: dict) -> dict:
    """A dict of scalar tensors as Python floats, in one transfer."""
    floats = torch.stack(list(scalars.values())).tolist()
    return dict(zip(scalars, floats))


@jax.jit
def stack_steps(steps: list):
    """Per-step pytrees stacked into one of (num_steps, ...) arrays, in one call."""
    return jax.tree.map(lambda *fields: jnp.stack(fields), *steps)


def adam_options(compile_mode: str) -> dict:
    """torch.optim.Adam's options: eager, the fused Adam; compiled, one torch.compile captures."""
    if compile_mode in COMPILED:
        return dict(foreach=False, capturable=True)
    return dict(fused=True)


def compiled_steps(compile_mode: str, agent: torch.nn.Module, minibatch_step, obs):
    """The agent's policy step and the minibatch step, as compile_mode sets them up; obs: a batch
    of observations (a JAX or NumPy array, or a tensor), which a traced policy is traced with."""
    obs = to_torch(obs, next(agent.parameters()).device)
    policy, step = agent.get_action_and_value, minibatch_step
    if compile_mode in COMPILED:
        # static shapes: compiled once, in iteration 0, the backward in the forward's graph;
        # compiled before partial binds its arguments: one code object for every agent
        torch._dynamo.config.trace_autograd_ops = True
        options = dict(dynamic=False, **COMPILED[compile_mode])
        step = torch.compile(step, **options)
        if obs.is_cuda:
            policy = torch.compile(policy, fullgraph=True, **options)
    if compile_mode == "torchscript" or (compile_mode == "compile" and obs.is_cpu):
        # on a CPU, a compiled call's ~40 us overhead outweighs its gain: traced, the cheapest;
        # traced, not frozen: the trace reads the weights as they change
        noise = torch.rand(len(obs), agent.num_actions, device=obs.device)
        policy = torch.jit.trace_module(agent, {"get_action_and_value": (obs, noise)})
        policy = policy.get_action_and_value
    if compile_mode == "cudagraphs":
        # a CUDA graph's outputs are overwritten by its next replay: keep copies
        policy = partial(cloned_outputs, policy)
    return policy, step


class ThreadGovernor:
    """torch's intra-op threads, iteration by iteration: all of them (torch's default, or
    OMP_NUM_THREADS), or one while other processes take the cores and one thread is faster. OpenMP
    splits each op evenly between its threads and waits for the last one: when a competing process
    deschedules one, every op waits for it (benchmarks/busy_machine.py: steady iterations 3x slower
    on 2 cores beside one busy loop), where a single thread never waits. JAX's pool steals work.

    After each iteration it reads how much CPU other processes took on this process's cores
    (Linux's /proc/stat; elsewhere it does nothing). From `busy` cores' worth on, it tries one
    thread and keeps it if an iteration on it is faster than the last on all threads (the first
    iteration on a new thread count recompiles: not compared); a lost try waits `retry_every`
    iterations. All threads come back once the others take less than `busy` cores."""

    def __init__(self, busy: float = 0.5, retry_every: int = 10):
        self.all = torch.get_num_threads()
        self.busy, self.retry_every = busy, retry_every
        self.active = self.all > 1 and os.path.exists("/proc/stat")
        self.cores = os.sched_getaffinity(0) if self.active else set()
        self.compiled = {self.all}  # thread counts that torch.compile has compiled for
        self.since_switch = retry_every  # iterations since the last switch
        # the iteration before a try (0 when none is on), iterations of the try not to compare
        self.before, self.skip = 0.0, 0
        # the first call only starts the count: compiling is done by TorchInductor's subprocesses
        self.last = None

    def cpu_seconds(self):
        """(wall, this process's CPU, every process's busy CPU on its cores), in seconds now."""
        if not self.active:
            return 0.0, 0.0, 0.0
        with open("/proc/stat") as stat:
            busy_ticks = cores_busy_ticks(stat.read(), self.cores)
        own = os.times()
        return time.monotonic(), own.user + own.system, busy_ticks / os.sysconf("SC_CLK_TCK")

    def iteration_done(self, seconds: float) -> None:
        """Counts an iteration (not one that compiles) and sets the threads of the next."""
        now, last = self.cpu_seconds(), self.last
        self.last = now
        if last is None:
            return
        wall, own, busy = [b - a for a, b in zip(last, now)]
        if self.active and wall > 0:
            self.decide(seconds, others=max(0.0, busy - own) / wall)

    def decide(self, seconds: float, others: float) -> None:
        """The next iteration's threads, from this one's seconds and the cores others took."""
        threads = torch.get_num_threads()
        self.since_switch += 1
        if self.skip > 0:
            self.skip -= 1
        elif self.before > 0:
            lost = seconds >= self.before
            self.before = 0.0
            if lost:
                self.switch(self.all, f"one thread no faster ({seconds:.2f}s)")
        elif threads == self.all and others >= self.busy and self.since_switch > self.retry_every:
            self.before = seconds
            self.switch(1, f"other processes take {others:.1f} of its cores, trying one")
        elif threads < self.all and others < self.busy:
            self.switch(self.all, f"other processes take {others:.1f} of its cores")

    def switch(self, threads: int, why: str) -> None:
        print(f"torch threads {torch.get_num_threads()} -> {threads}: {why}", flush=True)
        torch.set_num_threads(threads)
        self.since_switch = 0
        if threads not in self.compiled:
            self.compiled.add(threads)
            self.skip = 1


def cores_busy_ticks(proc_stat: str, cores: set) -> int:
    """The clock ticks that the given cores spent busy (not idle, not waiting for I/O), from the
    text of Linux's /proc/stat."""
    ticks = 0
    for line in proc_stat.splitlines():
        name, *fields = line.split()
        if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores):
            continue
        # user nice system idle iowait irq softirq steal (guest time is within user)
        values = [int(field) for field in fields[:8]]
        ticks += sum(values) - values[3] - values[4]
    return ticks


def cloned_outputs(fn, *args):
    return [output.clone() for output in fn(*args)]

"""ppo_torch.py's systems side, a piece the script owns: the device torch shares with JAX, the
DLPack crossings between them, what each --compile mode compiles, traces or graphs, each agent's
random numbers and gradient clipping, the state that --save-every keeps, and the thread governor.

A copy of ppo_torch.py that trains on gymnax needs this file and no other.
"""

import logging
import os
import time
import warnings
from functools import partial
from typing import Callable, NamedTuple

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


def uniform_noise(shape: tuple, generators: list) -> torch.Tensor:
    """Uniform noise of shape for each agent, from its own generator (as a single agent draws it),
    stacked along the second axis: (shape[0], num_agents, *shape[1:]). log(0) and ndtri(0) would be
    -inf in the sampling: at least float32's smallest normal."""
    noise = [torch.rand(shape, generator=g, device=g.device) for g in generators]
    return torch.stack(noise, 1).clamp_(min=2**-126)


def randperms(generators: list, num_epochs: int, size: int) -> torch.Tensor:
    """Each epoch's order of each agent's batch, (num_epochs, num_agents, size), each agent's drawn
    by its own generator (after its rollout's noise), as a single agent draws them."""

    def epoch():
        return torch.stack([torch.randperm(size, generator=g, device=g.device) for g in generators])

    return torch.stack([epoch() for _ in range(num_epochs)])


def clip_each_agent(params: list, grads: tuple, max_norm: float) -> None:
    """Sets each parameter's grad: grads, every agent's along the first axis, each agent's scaled by
    nn.utils.clip_grad_norm_'s factor for its own global norm, max_norm / (norm + 1e-6), at most 1:
    no agent's gradient shrinks for another's."""
    norms = torch.stack([grad.flatten(1).norm(dim=1) for grad in grads]).norm(dim=0)
    factors = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for param, grad in zip(params, grads):
        param.grad = grad * factors.view(-1, *[1] * (grad.dim() - 1))


def linear_decay(learning_rate: float, num_updates: int, anneal: bool, step):
    """The learning rate at optimizer step (an int or a tensor): decayed linearly to 0 over
    num_updates steps with anneal, else constant, as optax's linear_schedule."""
    return learning_rate * (1.0 - anneal * step / num_updates)


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


def synchronize(enabled: bool, device: torch.device, *jax_values) -> None:
    """Where enabled (--sync-timing), waits for JAX's values and torch's queued work, so that a
    timer reads finished work."""
    if enabled:
        jax.block_until_ready(jax_values)
        if device.type == "cuda":
            torch.cuda.synchronize(device)


def reset_agents(env, env_params, reset_envs, seeds: list, num_envs: int):
    """The script's reset_envs of each agent's envs with its seed's key, along a first axis (an
    envpool pool resets every agent's envs in one call)."""
    keys = jax.vmap(jax.random.key)(jnp.asarray(seeds))
    return jax.vmap(partial(reset_envs, env, env_params, num_envs=num_envs))(keys)


def env_step(env, env_params, step_envs):
    """What rollout calls each step: the script's step_envs, jitted and vmapped over the agents;
    for an envpool pool (an env with host_step), env_adapters.host_step_envs: NumPy only, with no
    JAX call per step, as CleanRL steps envpool (the project's envpool_calls benchmark times
    both)."""
    if hasattr(env, "host_step"):
        import env_adapters  # here only: a gymnax run needs no env_adapters.py

        return partial(env_adapters.host_step_envs, env)
    return jax.jit(jax.vmap(partial(step_envs, env, env_params)))


def to_torch(x, device: torch.device) -> torch.Tensor:
    """A JAX or NumPy array (or a tensor) on torch's device, without a copy where DLPack allows."""
    if device.type == "cpu":
        # through NumPy: a faster crossing than from JAX's array
        x = np.asarray(x)
    return torch.from_dlpack(x).to(device)


def on_numpy(fn: Callable) -> Callable:
    """fn, a function of a tensor on the CPU, as one of a NumPy array, without gradients. A
    read-only array (a view of a JAX one) is copied: torch.from_numpy warns of it at every call."""

    @torch.no_grad()
    def numpy_fn(x: np.ndarray) -> np.ndarray:
        return fn(torch.from_numpy(np.require(x, requirements="W"))).numpy()

    return numpy_fn


def to_jax(x: torch.Tensor):
    """A tensor for a jitted JAX call: NumPy on a CPU (a faster argument), a JAX array on a GPU."""
    return np.from_dlpack(x) if x.is_cpu else jnp.from_dlpack(x)


def to_host(values: dict) -> dict:
    """A dict of tensors of one shape (a value per agent) as NumPy arrays, in one transfer."""
    arrays = torch.stack(list(values.values())).numpy(force=True)
    return dict(zip(values, arrays))


@jax.jit
def stack_steps(steps: list):
    """Per-step pytrees stacked into one of (num_steps, ...) arrays, in one call."""
    return jax.tree.map(lambda *fields: jnp.stack(fields), *steps)


def adam(agent: torch.nn.Module, learning_rate: float, eps: float, compile_mode: str):
    """torch.optim.Adam over the agent's parameters, at a rate held in a tensor (set in place each
    step, which a compiled step reads as data: no recompile). Eager, the fused Adam; compiled, the
    one that torch.compile captures."""
    lr = torch.tensor(learning_rate, device=next(agent.parameters()).device)
    options = dict(foreach=False, capturable=True) if compile_mode in COMPILED else dict(fused=True)
    return torch.optim.Adam(agent.parameters(), lr, eps=eps, **options)


class TrainState(NamedTuple):
    """What the script's rollout and update run with: the agents, the generator of each one's
    random numbers, and the policy step and the minibatch step as compiled_steps sets them up."""

    agent: torch.nn.Module
    generators: list
    policy: Callable
    minibatch_step: Callable


def arrays(agent: torch.nn.Module, optimizer, generators: list) -> dict[str, np.ndarray]:
    """What --save-every keeps of the torch side, as NumPy copies: the agents' parameters, Adam's
    step and moments of each (zeros before its first step) and each agent's generator's state."""
    state = {f"agent.{name}": x.numpy(force=True) for name, x in agent.state_dict().items()}
    for i, param in enumerate(optimizer.param_groups[0]["params"]):
        adam = optimizer.state.get(param, {})
        state[f"adam.{i}.step"] = np.float32(adam["step"].item() if adam else 0.0)
        for key in ("exp_avg", "exp_avg_sq"):
            moment = adam[key].numpy(force=True) if adam else np.zeros(param.shape, np.float32)
            state[f"adam.{i}.{key}"] = moment
    for k, generator in enumerate(generators):
        state[f"generator.{k}"] = generator.get_state().numpy()
    return state


def load_arrays(agent: torch.nn.Module, optimizer, generators: list, state: dict) -> None:
    """arrays' inverse: the saved values copied into the agents' own parameters (which a compiled
    or traced step reads), Adam's state and the generators."""
    params = {name[len("agent.") :]: x for name, x in state.items() if name.startswith("agent.")}
    agent.load_state_dict({name: torch.from_numpy(x) for name, x in params.items()})
    saved = {**optimizer.state_dict(), "state": {}}
    for i in range(len(optimizer.param_groups[0]["params"])):
        adam = {"step": torch.tensor(float(state[f"adam.{i}.step"]))}
        for key in ("exp_avg", "exp_avg_sq"):
            adam[key] = torch.from_numpy(state[f"adam.{i}.{key}"])
        saved["state"][i] = adam
    optimizer.load_state_dict(saved)
    for k, generator in enumerate(generators):
        generator.set_state(torch.from_numpy(state[f"generator.{k}"]))


def resume(saver, writer, agent: torch.nn.Module, optimizer, generators: list, runner):
    """(runner, iterations completed) of --resume: the saved run's state put back into the agents,
    Adam and the generators (saving.Saver.resume), bit for bit."""
    training, runner, start = saver.resume(arrays(agent, optimizer, generators), runner, writer)
    load_arrays(agent, optimizer, generators, training)
    return runner, start


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
        noise = torch.rand(*obs.shape[:-1], agent.num_actions, device=obs.device)
        policy = torch.jit.trace_module(agent, {"get_action_and_value": (obs, noise)})
        policy = policy.get_action_and_value
    if compile_mode == "cudagraphs":
        # a CUDA graph's outputs are overwritten by its next replay: keep copies
        policy = partial(cloned_outputs, policy)
    return policy, step


class ThreadGovernor:
    """torch's intra-op threads, iteration by iteration: the cores of this process that other
    processes leave free (all of them on a quiet machine: torch's default, or OMP_NUM_THREADS).
    OpenMP splits each op evenly between its threads and waits for the last one: when a competing
    process deschedules one, every op waits for it (the project's busy_machine benchmark: steady
    iterations 3x slower on 2 cores beside one busy loop). JAX's pool steals the work instead.

    It reads how much CPU other processes take on this process's cores (Linux's /proc/stat;
    elsewhere, or where the file cannot be read or parsed, it switches itself off and leaves
    the threads as they are): for sample_s before the first iteration, so that a machine busy
    from the start compiles for the right count, then over windows of whole iterations (the
    first one left out) of at least window_s. Each thread count is a graph of its own for
    torch.compile (recompiled once, on first use): at most max_counts of them, and one thread."""

    def __init__(
        self,
        sample_s: float = 0.1,
        max_counts: int = 4,
        window_s: float = 0.5,
        stat_path: str = "/proc/stat",
    ):
        self.all = torch.get_num_threads()
        self.max_counts = max_counts
        # /proc/stat counts in clock ticks (10 ms): over a 35 ms iteration, rounding alone can
        # read as half a core taken by others
        self.window_s = window_s
        self.stat_path = stat_path
        self.active = self.all > 1 and os.path.exists(stat_path)
        self.cores = os.sched_getaffinity(0) if self.active else set()
        self.compiled = {self.all}
        # the first iteration_done (iteration 0's) only starts the count: TorchInductor compiles
        # in subprocesses, which would count as others
        self.last = None
        start = self.reading() if self.active else None
        if start is not None:
            time.sleep(sample_s)
            end = self.reading()
            if end is not None:
                self.set_threads(self.others_between(start, end))

    def cpu_seconds(self):
        """(wall, this process's CPU, every process's busy CPU on its cores), in seconds now."""
        with open(self.stat_path) as stat:
            busy_ticks = cores_busy_ticks(stat.read(), self.cores)
        own = os.times()
        return time.monotonic(), own.user + own.system, busy_ticks / os.sysconf("SC_CLK_TCK")

    def reading(self):
        """cpu_seconds(), or None, with the governor switched off, where the stat file cannot be
        read (a container that hides it) or is not /proc/stat's format: it only tunes the speed,
        and must never fail a run that is under way."""
        try:
            return self.cpu_seconds()
        except (OSError, IndexError, ValueError) as e:
            self.active = False
            why = f"{self.stat_path} unreadable ({type(e).__name__}: {e})"
            print(f"torch threads stay at {torch.get_num_threads()}: {why}", flush=True)
            return None

    def others_between(self, start, end) -> float:
        """The cores' worth of CPU that other processes took on this process's cores between two
        readings of cpu_seconds."""
        wall, own, busy = [b - a for a, b in zip(start, end)]
        if wall <= 0:
            return 0.0
        return max(0.0, busy - own) / wall

    def iteration_done(self) -> None:
        """Counts an iteration; once the window since the last choice is window_s long, sets the
        threads of the next iterations from it."""
        if not self.active:
            return
        now = self.reading()
        if now is None:
            return
        if self.last is None:
            self.last = now
            return
        if now[0] - self.last[0] < self.window_s:
            return
        self.set_threads(self.others_between(self.last, now))
        self.last = now

    def set_threads(self, others: float) -> None:
        """As many threads as the cores that others leave free, rounded; at least one."""
        threads = max(1, self.all - round(others))
        if threads not in self.compiled and len(self.compiled) >= self.max_counts:
            # the largest count already compiled that fits, or one thread
            threads = max([count for count in self.compiled if count <= threads], default=1)
        if threads == torch.get_num_threads():
            return
        print(threads_line(torch.get_num_threads(), threads, others, self.all), flush=True)
        torch.set_num_threads(threads)
        self.compiled.add(threads)


def threads_line(before: int, after: int, others: float, cores: int) -> str:
    """The governor's line for a newcomer: what changed, and why."""
    return (
        f"torch threads {before} -> {after}: other programs keep {others:.1f} of the {cores} "
        "cores this run may use busy, and an op split over threads waits for the slowest"
    )


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

"""PPO in PyTorch on gymnax environments (or envpool's CPU ones): a starter in two files, with
torch_glue.py. Read it top to bottom: Args, network, env glue, rollout, GAE, loss, update, main().
The four ppo_*.py templates are parallel: a diff of two shows only the framework."""

import math
import os
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from functools import partial
from typing import Annotated, Literal, NamedTuple, Optional

START = time.perf_counter()  # import_s, setup_s and total_s count from here
import tyro  # before Args: its CleanRL names are tyro aliases

FRAMEWORK = "torch"
MODEL_SIZES = {"small": (64, 64), "medium": (256, 256, 256), "large": (1024,) * 6}


@dataclass(frozen=True)
class Args:
    """PPO in PyTorch on gymnax (or envpool's CPU envs): trains agents, logs to TensorBoard"""

    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment (with --track, the W&B group is this name and the env)"""
    env: Annotated[str, tyro.conf.arg(aliases=("--env-id",))] = "CartPole-v1"
    """the env id: gymnax (discrete or Box actions), or Craftax, Brax, Playground (env_adapters)"""
    env_backend: Literal["gymnax", "envpool"] = "gymnax"
    """gymnax: JAX envs; envpool: CPU simulators (classic control, MuJoCo), via env_adapters.py"""
    env_threads: int = 0
    """envpool's worker threads (0: envpool's default, one per core up to the pool's envs)"""
    model_size: Literal["small", "medium", "large"] = "small"
    """hidden layers of actor and critic: small (64, 64), medium (256,) * 3, large (1024,) * 6"""
    dtype: Literal["float32", "bfloat16"] = "float32"
    """the networks' compute type; bfloat16: mixed precision (parameters, loss, GAE: float32)"""
    matmul_precision: Literal["default", "high", "highest"] = "default"
    """float32 matmuls: default (JAX's: one bfloat16 pass on a TPU), high (3 passes), highest"""
    seed: int = 1
    """seed of the experiment (JAX keys for the environment, torch's for the init and sampling)"""
    num_agents: int = 1
    """independent agents trained at once, seeds seed .. seed+N-1, each on its own num_envs envs"""
    num_envs: int = 32
    """the number of parallel environments"""
    num_steps: int = 256
    """the number of steps per environment in each rollout"""
    num_iterations: int = 100
    """the number of iterations (rollout + update)"""
    total_timesteps: Optional[int] = None
    """CleanRL's run length, env steps per agent: when given, num_iterations = N // the batch"""
    update_epochs: int = 10
    """the number of epochs over the batch in each update"""
    num_minibatches: int = 8
    """the number of minibatches per epoch"""
    learning_rate: float = 2.5e-4
    """the learning rate of the Adam optimizer"""
    anneal_lr: bool = True
    """anneal the learning rate linearly to 0, per optimizer step"""
    gamma: float = 0.99
    """the discount factor"""
    gae_lambda: float = 0.95
    """the lambda of generalized advantage estimation"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """clip the value loss around the old values"""
    ent_coef: float = 0.01
    """the entropy coefficient"""
    vf_coef: float = 0.5
    """the value loss coefficient"""
    max_grad_norm: float = 0.5
    """the maximum global norm of the gradients"""
    norm_adv: bool = True
    """normalise the advantages of each minibatch"""
    norm_obs: bool = False
    """normalise the observations by their running mean and variance (env_normalize.py)"""
    norm_reward: bool = False
    """scale the rewards by the running std of their discounted return (env_normalize.py)"""
    compile: Literal["compile", "env-jit", "torchscript", "none", "cudagraphs"] = "compile"
    """compile: torch.compile the update; env-jit: eager, env jitted; torchscript: traced policy;
    none: op by op; cudagraphs: compile with CUDA graphs (needs a GPU)"""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """where torch and JAX run (one device: DLPack is zero-copy); auto: cuda when both see a GPU"""
    sync_timing: bool = True
    """block on the device after the rollout and after the update, so that both timers are exact"""
    log_dir: str = "runs"
    """the folder that receives one subfolder per run"""
    save_model: bool = False
    """save the last finished iteration's policy as model.safetensors in the run folder"""
    save_every: int = 0
    """every N iterations, save the run's state for --resume (0: never; the gymnax backend only)"""
    resume: Optional[str] = None
    """the folder of a run stopped after a --save-every save: continue it there (same flags)"""
    track: bool = False
    """log to Weights & Biases too (the same scalars, once per iteration)"""
    wandb_project_name: str = "benchback-rl"
    """the W&B project"""
    wandb_entity: Optional[str] = None
    """the W&B entity (team); None is your default entity"""
    tag: str = "default"
    """a free label for the run, e.g. the machine or the OS, used to compare platforms"""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    def __post_init__(self):
        """Refuses what no PPO run can use, in one line: tyro prints it and exits with code 2."""
        if self.total_timesteps is not None and self.batch_size > 0:
            object.__setattr__(self, "num_iterations", self.total_timesteps // self.batch_size)
        runs = self.total_timesteps is None or self.num_iterations > 0
        num_updates = self.num_iterations * self.update_epochs * self.num_minibatches
        steps = f"at most {2**31 - 1:,} optimizer steps, not {num_updates:,}"
        divides = self.num_minibatches > 0 and self.batch_size % self.num_minibatches == 0
        counts = ("num_envs", "num_steps", "num_iterations", "update_epochs", "num_minibatches")
        counts += ("num_agents",)
        nonnegative = ("clip_coef", "ent_coef", "vf_coef", "save_every", "env_threads")
        floats = [name for name, value in asdict(self).items() if isinstance(value, float)]

        def is_name(text):
            # one folder's name, never a path, short: the run folder's name must fit 255 bytes
            path_like = any(part in text for part in ("/", "\\", ".."))
            return 0 < len(os.fsencode(text)) <= 128 and not path_like

        a_name = "a name of 1 to 128 bytes, without / \\ or .."
        local = "a local folder, not a URL (s3://, gs://): ./NAME for a NAME with a colon"
        folders = [len(os.fsencode(folder)) <= 255 for folder in self.log_dir.split("/")]
        rules = [("total_timesteps", runs, f"at least the batch, {self.batch_size}")]
        rules += [(name, math.isfinite(getattr(self, name)), "a finite number") for name in floats]
        rules += [(name, getattr(self, name) > 0, "a positive integer") for name in counts]
        rules += [(name, getattr(self, name) >= 0, "0 or more") for name in nonnegative]
        rules += [
            ("learning_rate", self.learning_rate > 0, "positive"),
            ("gamma", 0 <= self.gamma <= 1, "in [0, 1]"),
            ("gae_lambda", 0 <= self.gae_lambda <= 1, "in [0, 1]"),
            ("max_grad_norm", self.max_grad_norm > 0, "positive (0 would stop every update)"),
            # the range that JAX keys, torch generators and envpool all take
            ("seed", 0 <= self.seed <= 2**31 - self.num_agents, "in [0, 2**31 - num_agents]"),
            ("log_dir", self.log_dir != "", "a folder, not empty"),
            # tensorboardX's writer sends a path with a scheme (s3:, gs:) to the cloud
            ("log_dir", ":" not in self.log_dir.split("/")[0], local),
            ("log_dir", all(folders), "a path of folder names of at most 255 bytes each"),
            ("exp_name", is_name(self.exp_name), a_name),
            ("tag", is_name(self.tag), a_name),
            ("resume", self.resume is None or os.path.isdir(self.resume), "a run folder"),
            ("save_every", self.save_every == 0 or self.env_backend == "gymnax", "0 with envpool"),
            # the optimizer's step count, which the learning-rate schedule reads, is an int32
            ("num_iterations", num_updates < 2**31, steps),
            ("num_minibatches", divides, f"a divisor of num_envs x num_steps, {self.batch_size}"),
        ]
        for name, ok, rule in rules:
            if not ok:
                value = getattr(self, name)
                raise ValueError(f"--{name.replace('_', '-')} must be {rule}, got {value!r}")


if __name__ == "__main__":
    # the benchmark's bookkeeping (config.json, summary.json) where it is, else a copy's plain one
    try:
        from bookkeeping import Bookkeeping as Book
    except ModuleNotFoundError:
        from core.plain_bookkeeping import PlainBook as Book
    book = Book(START, Args, FRAMEWORK)  # the stop signals held until book.run
    print("ppo_torch.py: importing PyTorch, JAX and gymnax...", flush=True)

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.nn as nn
from tensorboardX import SummaryWriter
from tensorboardX.proto.summary_pb2 import Summary

import torch_glue
from torch_glue import TrainState


# ---------------------------------------------------------------------------------------- network
class Linear(nn.Module):
    """Every agent's dense layer: weights (N, in, out), biases (N, 1, out), one batched matmul for
    N agents; orthogonal weights, each agent's from its generator (None: one, without the axis)."""

    def __init__(self, size_in: int, size_out: int, gain: float, generators=None):
        super().__init__()
        shape, draw = (size_in, size_out), partial(nn.init.orthogonal_, gain=gain)
        weights = [draw(torch.empty(shape), generator=g) for g in generators or [None]]
        weight = weights[0] if generators is None else torch.stack(weights)
        self.weight = nn.Parameter(weight)
        self.bias = nn.Parameter(torch.zeros(*weight.shape[:-2], 1, size_out))

    def forward(self, x):
        if x.dim() == 3:  # (N, batch, in): bias + x @ weight of every agent, one fused call
            return torch.baddbmm(self.bias, x, self.weight)
        return x @ self.weight + self.bias


class MLP(nn.Sequential):
    """tanh MLP, orthogonal init (sqrt(2) on hidden layers), zero biases; float32, run in dtype."""

    def __init__(self, in_dim: int, hidden_sizes, out_dim: int, out_gain: float, dtype, generators):
        sizes = (in_dim, *hidden_sizes, out_dim)
        gains = [np.sqrt(2)] * len(hidden_sizes) + [out_gain]
        layers = []
        for size_in, size_out, gain in zip(sizes, sizes[1:], gains):
            layers += [Linear(size_in, size_out, gain, generators), nn.Tanh()]
        super().__init__(*layers[:-1])
        self.dtype = getattr(torch, dtype)

    def forward(self, x):
        with torch.autocast(x.device.type, self.dtype, enabled=self.dtype != torch.float32):
            return super().forward(x).float()


class Agent(nn.Module):
    """Separate actor and critic MLPs; the actor gives logits, or a Gaussian's mean. seeds: an agent
    each, along a first axis, initialised as a single agent of that seed; None: one, without it."""

    def __init__(self, obs_dim, hidden_sizes, num_actions, continuous, dtype="float32", seeds=None):
        super().__init__()
        self.num_actions, self.continuous = num_actions, continuous
        generators = None if seeds is None else [torch.Generator().manual_seed(s) for s in seeds]
        self.actor = MLP(obs_dim, hidden_sizes, num_actions, 0.01, dtype, generators)
        self.critic = MLP(obs_dim, hidden_sizes, 1, 1.0, dtype, generators)
        if continuous:  # (N, 1, num_actions), the shape of the actor's last bias
            self.log_std = nn.Parameter(torch.zeros_like(self.actor[-1].bias))

    def forward(self, obs):
        return self.actor(obs), self.critic(obs)[..., 0]

    def get_value(self, obs):
        return self.critic(obs)[..., 0]

    def log_prob_and_entropy(self, actor_out, action):
        """The actions' log-probabilities and the policy's entropy, from one log-softmax."""
        if self.continuous:
            z = (action - actor_out) / self.log_std.exp()
            log_prob = (-0.5 * z**2 - self.log_std - 0.5 * np.log(2 * np.pi)).sum(-1)
            # the Gaussian's entropy is the same for every state
            return log_prob, (self.log_std + 0.5 + 0.5 * np.log(2 * np.pi)).sum(-1)
        log_probs = actor_out.log_softmax(-1)
        log_prob = log_probs.gather(-1, action[..., None].long())[..., 0]
        return log_prob, -(log_probs.exp() * log_probs).sum(-1)

    def get_action_and_value(self, obs, noise, action=None):
        """Actions from uniform noise (unless given), their log-probabilities, the values."""
        actor_out, value = self(obs)
        if action is None and self.continuous:
            # normal noise by the inverse CDF; unbounded: step_envs clips what the env gets
            action = actor_out + self.log_std.exp() * torch.special.ndtri(noise)
        elif action is None:
            # Gumbel-max; int32: JAX runs without x64
            action = (actor_out - torch.log(-torch.log(noise))).argmax(-1).to(torch.int32)
        log_prob, _ = self.log_prob_and_entropy(actor_out, action)
        return action, log_prob, value


def to_shared(agent) -> tuple:
    """(actor, critic, log_std) of agent in checkpoint.py's layout, [(kernel (in, out), bias)], as
    NumPy; a bias or log std without its axis of one (which broadcasts over the batch)."""
    layers = [list(mlp)[::2] for mlp in (agent.actor, agent.critic)]  # Linear, Tanh, Linear, ...
    mlps = [[(d.weight, d.bias[..., 0, :]) for d in mlp] for mlp in layers]
    log_std = agent.log_std[..., 0, :] if agent.continuous else None
    return jax.tree.map(lambda x: x.numpy(force=True), (*mlps, log_std))


def from_shared(net, continuous: bool, dtype="float32"):
    """to_shared's inverse: an Agent holding net (its layers, sizes) on the CPU, and its actor."""
    with torch.device("meta"):  # no init: load_state_dict assigns every parameter
        agent = Agent(net.obs_dim, net.hidden_sizes, net.num_actions, continuous, dtype)
    state = {"log_std": net.log_std[None]} if continuous else {}
    for mlp, layers in (("actor", net.actor), ("critic", net.critic)):
        for i, (kernel, bias) in enumerate(layers):  # Linear, Tanh, Linear, ...: 0, 2, ...
            state[f"{mlp}.{2 * i}.weight"], state[f"{mlp}.{2 * i}.bias"] = kernel, bias[None]
    agent.load_state_dict({k: torch.tensor(x).contiguous() for k, x in state.items()}, assign=True)
    return agent, torch_glue.on_numpy(lambda obs: agent(obs)[0])


# ------------------------------------------------------------------------------- environment glue
class GymnaxBatch:
    """A gymnax env stepped as a batch, one key per env: the contract of env_adapters.py's."""

    def __init__(self, env, space):
        self.reset = jax.vmap(env.reset, in_axes=(0, None))
        self.step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
        self.num_actions = env.num_actions
        self.continuous = isinstance(space, gymnax.environments.spaces.Box)
        self.action_bounds = (space.low, space.high) if self.continuous else None


def make_env(env_id: str, backend="gymnax", num_envs=32, seed=1, threads=0, num_agents=1):
    """The batched env and its params; ValueError (one line) when this script cannot train on it."""
    spaces = gymnax.environments.spaces
    try:
        env, env_params = gymnax.make(env_id)
        space = env.action_space(env_params) if backend == "gymnax" else None
    except Exception:
        # not a gymnax id, or one that must download its data (MNISTBandit) without network
        space = None
    vector_box = isinstance(space, spaces.Box) and len(space.shape) == 1
    if isinstance(space, spaces.Discrete) or vector_box:
        return GymnaxBatch(env, space), env_params
    # Craftax, Brax, envpool: beside this script; a copy for gymnax needs no other file
    import env_adapters

    return env_adapters.make(env_id, backend, num_envs, seed, threads, num_agents)


# what carries over from one env step, and from one rollout, to the next
class Runner(NamedTuple):
    env_state: object
    obs: jax.Array
    episode_return: jax.Array
    episode_length: jax.Array
    key: jax.Array


def reset_envs(env, env_params, key, num_envs: int) -> Runner:
    key, reset_key = jax.random.split(key)
    obs, env_state = env.reset(jax.random.split(reset_key, num_envs), env_params)
    # no weak types, which a step would change (and so compile the scan again)
    env_state = jax.tree.map(lambda x: jnp.asarray(x, x.dtype), env_state)
    # flattened: MinAtar observations are (10, 10, C)
    obs = obs.reshape(num_envs, -1)
    return Runner(env_state, obs, jnp.zeros(num_envs), jnp.zeros(num_envs, jnp.int32), key)


def step_envs(env, env_params, runner: Runner, action):
    """Steps every env (auto-reset), counts episodes: the next Runner, a Transition's env fields."""
    num_envs = action.shape[0]
    key, step_key = jax.random.split(runner.key)
    step_keys = jax.random.split(step_key, num_envs)
    if env.continuous:
        # the env gets the sample clipped to its bounds; the Transition keeps the sample itself
        action = jnp.clip(action, *env.action_bounds)
    stepped = env.step(step_keys, runner.env_state, action, env_params)
    obs, env_state, reward, terminated, truncated, info = stepped
    done = terminated | truncated
    # unscaled, even with --norm-reward
    episode_return = runner.episode_return + info.get("raw_reward", reward)
    episode_length = runner.episode_length + 1
    running_return = jnp.where(done, 0.0, episode_return)
    running_length = jnp.where(done, 0, episode_length)
    next_runner = Runner(env_state, obs.reshape(num_envs, -1), running_return, running_length, key)
    final_obs = info["final_observation"].reshape(num_envs, -1)
    ended_return = jnp.where(done, episode_return, 0.0)
    ended_length = jnp.where(done, episode_length, 0)
    return next_runner, (reward, terminated, truncated, final_obs, ended_return, ended_length)


# -------------------------------------------------------------------------------- rollout and GAE
class Transition(NamedTuple):
    """One step of every env. final_obs: before any auto-reset; episode_*: of an ended one, or 0."""

    obs: torch.Tensor
    action: torch.Tensor
    logprob: torch.Tensor
    value: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor
    episode_return: torch.Tensor
    episode_length: torch.Tensor


# each agent's rollout flattened to (num_agents, batch_size, ...), plus advantages and returns
class Batch(NamedTuple):
    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor


@torch.no_grad()
def rollout(env_step, args: Args, state: TrainState, runner: Runner):
    """Collects num_steps x num_envs transitions, a step at a time where JAX scans; then GAE."""
    device = state.generators[0].device
    shape = (args.num_steps, args.num_envs, state.agent.num_actions)
    noise = torch_glue.uniform_noise(shape, state.generators)  # (num_steps, num_agents, ...)
    obs = torch_glue.to_torch(runner.obs, device)
    policy_steps, env_steps = [], []
    for step in range(args.num_steps):
        action, logprob, value = state.policy(obs, noise[step])
        policy_steps.append((obs, action, logprob, value))
        runner, env_fields = env_step(runner, torch_glue.to_jax(action))
        env_steps.append(env_fields)
        # the next obs crosses now, for the policy; the env's other fields once, below
        obs = torch_glue.to_torch(runner.obs, device)
    policy_fields = [torch.stack(x) for x in zip(*policy_steps)]
    env_fields = [torch_glue.to_torch(x, device) for x in torch_glue.stack_steps(env_steps)]
    t = Transition(*policy_fields, *env_fields)
    # V(pre-reset next observation): the next value within an episode, the bootstrap when truncated;
    # agent-major (N, num_steps x num_envs, obs_dim): one batched matmul a layer, where steps-first
    # inputs would broadcast, copying each agent's weights once a step (GiBs for the medium model)
    num_steps, num_agents, num_envs = t.reward.shape
    final_obs = t.final_obs.transpose(0, 1).reshape(num_agents, num_steps * num_envs, -1)
    final_values = state.agent.get_value(final_obs).view(num_agents, num_steps, num_envs)
    final_values = final_values.transpose(0, 1)
    advantages, returns = compute_gae(
        t.reward, t.value, final_values, t.terminated, t.truncated, args.gamma, args.gae_lambda
    )
    steps = (t.obs, t.action, t.logprob, t.value, advantages, returns)
    batch = Batch(*[x.transpose(0, 1).flatten(1, 2) for x in steps])
    # 0 episodes: NaN statistics, and main() logs no episodic point
    num_episodes = (t.terminated | t.truncated).sum((0, 2))
    episode_stats = {"episodic_return": t.episode_return.sum((0, 2)) / num_episodes}
    episode_stats["episodic_length"] = t.episode_length.sum((0, 2)) / num_episodes
    return runner, batch, episode_stats


def compute_gae(rewards, values, final_values, terminated, truncated, gamma, gae_lambda):
    """GAE over (num_steps, ...); final_values: V(pre-reset next obs), not for a terminated one."""
    deltas = rewards + gamma * final_values * ~terminated - values
    discounts = gamma * gae_lambda * ~(terminated | truncated)
    gae = torch.zeros_like(deltas[0])
    advantages = []
    for t in reversed(range(len(deltas))):
        gae = deltas[t] + discounts[t] * gae
        advantages.append(gae)
    advantages = torch.stack(advantages[::-1])
    return advantages, advantages + values


# -------------------------------------------------------------------------------- loss and update
def ppo_loss(agent: Agent, args: Args, mb: Batch):
    """Each agent's clipped PPO objective (means over the last axis): its loss and the parts."""
    actor_out, new_values = agent(mb.obs)
    new_logprobs, entropy = agent.log_prob_and_entropy(actor_out, mb.actions)
    entropy = entropy.mean(-1)
    logratio = new_logprobs - mb.logprobs
    ratio = logratio.exp()
    advantages = mb.advantages
    if args.norm_adv:
        # population std (ddof=0) in every framework
        mean = advantages.mean(-1, keepdim=True)
        advantages = (advantages - mean) / (advantages.std(-1, correction=0, keepdim=True) + 1e-8)
    clipped_ratio = ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
    pg_loss = torch.max(-advantages * ratio, -advantages * clipped_ratio).mean(-1)
    v_loss_unclipped = (new_values - mb.returns) ** 2
    if args.clip_vloss:
        v_clipped = mb.values + (new_values - mb.values).clamp(-args.clip_coef, args.clip_coef)
        v_loss = 0.5 * torch.max(v_loss_unclipped, (v_clipped - mb.returns) ** 2).mean(-1)
    else:
        v_loss = 0.5 * v_loss_unclipped.mean(-1)
    loss = pg_loss - args.ent_coef * entropy + args.vf_coef * v_loss
    metrics = {"policy_loss": pg_loss, "value_loss": v_loss, "entropy": entropy}
    metrics["old_approx_kl"] = (-logratio).mean(-1)
    metrics["approx_kl"] = ((ratio - 1) - logratio).mean(-1)
    metrics["clipfrac"] = ((ratio - 1).abs() > args.clip_coef).float().mean(-1)
    return loss, metrics


def make_optimizer(args: Args, agent: Agent):
    """Adam; its rate a tensor set in place, which a compiled step reads as data (no recompile)."""
    num_updates = args.num_iterations * args.update_epochs * args.num_minibatches
    lr_schedule = partial(torch_glue.linear_decay, args.learning_rate, num_updates, args.anneal_lr)
    return torch_glue.adam(agent, args.learning_rate, 1e-5, args.compile), lr_schedule


def minibatch_step(agent: Agent, optimizer: torch.optim.Optimizer, args: Args, mb: Batch, lr):
    """Forward, loss, backward, clipping by each agent's global norm, Adam's step at rate lr."""
    loss, metrics = ppo_loss(agent, args, mb)
    # detached before the backward consumes their graph
    metrics = {name: value.detach() for name, value in metrics.items()}
    params = list(agent.parameters())
    # autograd.grad, not backward(): Dynamo traces it into the compiled step; the agents share no
    # parameter, so the gradient of their sum is each agent's own
    grads = torch.autograd.grad(loss.sum(), params)
    torch_glue.clip_each_agent(params, grads, args.max_grad_norm)
    optimizer.param_groups[0]["lr"].copy_(lr)
    optimizer.step()
    return metrics


def update(args: Args, lr_schedule, state: TrainState, batch: Batch, first_step, permutations=None):
    """update_epochs epochs of num_minibatches minibatches, in the given orders (or random). The
    optimizer's step count (first_step) is the host's: the JAX scripts keep it in their state."""
    device = state.generators[0].device
    if permutations is None:
        permutations = torch_glue.randperms(state.generators, args.update_epochs, args.batch_size)
    step_ids = first_step + torch.arange(args.update_epochs * args.num_minibatches, device=device)
    lrs = lr_schedule(step_ids)
    agents = torch.arange(len(state.generators), device=device)[:, None]
    metrics = []
    for perm in permutations:
        # (num_minibatches, num_agents, minibatch_size): every agent's next minibatch at once
        ids = perm.reshape(len(agents), args.num_minibatches, -1).transpose(0, 1)
        minibatches = Batch(*[x[agents, ids] for x in batch])
        for mb in zip(*minibatches):
            mb_metrics = state.minibatch_step(Batch(*mb), lrs[len(metrics)])
            metrics.append(torch.stack(list(mb_metrics.values())))
    metrics = dict(zip(mb_metrics, torch.stack(metrics).mean(0)))
    var_returns = batch.returns.var(-1, correction=0)
    explained = 1 - (batch.returns - batch.values).var(-1, correction=0) / var_returns
    # NaN where the returns have zero variance
    metrics["explained_variance"] = torch.where(var_returns > 0, explained, torch.nan)
    return metrics


def log_scalars(writer, scalars: dict, metrics: dict, step: int) -> dict:
    """Logs the process's scalars, the agents' means and (N > 1) agent k's own under agent_k/, at
    step (one agent's env steps), in one event of the run's events file. Returns them, for W&B."""
    logged = dict(scalars)
    for name, values in metrics.items():
        tag = f"charts/{name}" if name.startswith("episodic") else f"losses/{name}"
        # a NaN return: none of the agent's episodes ended in this rollout, so no point
        ended = ~np.isnan(values) if tag.startswith("charts") else np.ones(len(values), bool)
        if ended.any():
            logged[tag] = values[ended].mean()
        if len(values) > 1:
            for k in np.flatnonzero(ended):
                logged[f"agent_{k}/{tag}"] = values[k]
    # one event for them all: an add_scalar each costs the host ~0.1 ms, N x 9 a step for N agents;
    # the values are NumPy already (the one transfer): float() unwraps what protobuf refuses
    every = [Summary.Value(tag=tag, simple_value=float(value)) for tag, value in logged.items()]
    writer.file_writer.add_summary(Summary(value=every), step)
    return logged


# ------------------------------------------------------------------------------------------- main
def main():
    args = tyro.cli(Args)
    precision = None if args.matmul_precision == "default" else args.matmul_precision
    jax.config.update("jax_default_matmul_precision", precision)  # float32 matmuls, as Args says
    torch.set_float32_matmul_precision(precision or "highest")  # torch's default: highest
    env_args = (args.env, args.env_backend, args.num_envs, args.seed, args.env_threads)
    env, env_params = make_env(*env_args, args.num_agents)
    if args.norm_obs or args.norm_reward:
        import env_normalize

        env = env_normalize.normalize(env, args.norm_obs, args.norm_reward, args.gamma)
    device = torch_glue.shared_device(args.device, args.compile)
    run_name = book.run_name(args, FRAMEWORK)  # env__[exp_name__]framework__...; --resume's own
    run_dir = book.make_run_dir(os.path.join(args.log_dir, run_name), args.resume)
    config = {**asdict(args), "framework": FRAMEWORK, "batch_size": args.batch_size}
    config["minibatch_size"] = args.batch_size // args.num_minibatches
    config["device_name"] = torch_glue.device_name(device)
    saver = nullcontext()
    if args.save_model or args.save_every or args.resume:
        from core import saving

        saver = saving.Saver(run_dir, config, __file__)
    book.start(config, run_dir)  # config.json: the config, the command line, versions, machine
    if args.track:
        import wandb

        # grouped by experiment and env; the scalars are logged below, once per iteration
        group = f"{args.exp_name}__{args.env}"
        tags = [FRAMEWORK, args.model_size, args.env, args.env_backend, args.compile]
        run = dict(name=run_name, dir=run_dir, group=group, tags=tags, config=config)
        wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, **run, save_code=True)
    no_jit = jax.disable_jit(args.compile == "none")
    with SummaryWriter(run_dir, max_queue=100) as writer, no_jit, saver:
        table = "\n".join(f"|{key}|{value}|" for key, value in asdict(args).items())
        writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{table}")
        # every agent's keys from its own seed: agent k is the single-agent run of seed + k
        seeds = [args.seed + k for k in range(args.num_agents)]
        generators = [torch.Generator(device).manual_seed(seed) for seed in seeds]
        runner = torch_glue.reset_agents(env, env_params, reset_envs, seeds, args.num_envs)
        sizes, obs_dim = MODEL_SIZES[args.model_size], runner.obs.shape[-1]
        agent = Agent(obs_dim, sizes, env.num_actions, env.continuous, args.dtype, seeds).to(device)
        optimizer, lr_schedule = make_optimizer(args, agent)
        start = 0
        if args.resume:
            runner, start = torch_glue.resume(saver, writer, agent, optimizer, generators, runner)
        policy, step = torch_glue.compiled_steps(args.compile, agent, minibatch_step, runner.obs)
        state = TrainState(agent, generators, policy, partial(step, agent, optimizer, args))
        rollout_fn = partial(rollout, torch_glue.env_step(env, env_params, step_envs), args)
        threads = torch_glue.ThreadGovernor()
        before_s = saver.before_s if args.resume else 0.0
        book.setup_done(before_s)
        setup_s = time.perf_counter() - START
        print(f"{run_name}: setup {setup_s:.1f}s on {config['device_name']}", flush=True)
        for iteration in range(start, args.num_iterations):
            book.check_signals()  # a SIGINT or SIGTERM stops the run here...
            # the rate of this iteration's last optimizer step, read before the timer starts
            last_step = (iteration + 1) * args.update_epochs * args.num_minibatches - 1
            learning_rate = lr_schedule(last_step)
            iteration_start = time.perf_counter()
            runner, batch, episode_stats = rollout_fn(state, runner)
            torch_glue.synchronize(args.sync_timing, device, runner)
            rollout_end = time.perf_counter()
            book.check_signals()  # ...or here
            first_step = iteration * args.update_epochs * args.num_minibatches
            losses = update(args, lr_schedule, state, batch, first_step)
            torch_glue.synchronize(args.sync_timing, device)
            update_end = time.perf_counter()
            # the one transfer to the host, within the iteration's time
            metrics = torch_glue.to_host({**episode_stats, **losses})
            iteration_time = time.perf_counter() - iteration_start
            scalars = {
                "time/rollout": rollout_end - iteration_start,
                "time/update": update_end - rollout_end,
                "time/iteration": iteration_time,
                "time/elapsed": before_s + time.perf_counter() - START,
                # every agent's env steps: agent-steps per second
                "charts/SPS": args.num_agents * args.batch_size / iteration_time,
                "charts/learning_rate": learning_rate,
            }
            global_step = (iteration + 1) * args.batch_size
            scalars = log_scalars(writer, scalars, metrics, global_step)
            if args.track:
                wandb.log(scalars, step=global_step)
            returns = metrics["episodic_return"]
            if args.save_model or args.save_every:
                training = partial(torch_glue.arrays, agent, optimizer, generators)
                saver.iteration_done(to_shared(agent), runner, returns, training, writer)
            book.iteration_done(iteration, returns, writer, scalars)  # and the progress line
            threads.iteration_done()
    if args.track:
        wandb.finish()


if __name__ == "__main__":
    book.run(main, Args)  # bad input in one line, exit code 2; the stops; the last line

"""PPO in Flax NNX on gymnax environments (or envpool's CPU ones): a single-file starter.
Read it top to bottom: Args, network, env glue, rollout, GAE, loss, update, main().
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

FRAMEWORK = "nnx"
MODEL_SIZES = {"small": (64, 64), "medium": (256, 256, 256), "large": (1024,) * 6}


@dataclass(frozen=True)
class Args:
    """PPO in Flax NNX on gymnax (or envpool's CPU envs): trains agents, logs to TensorBoard"""

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
    """seed of the experiment (JAX keys for the environment, the init and the sampling)"""
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
    compile: Literal["cached_partial", "jit", "tree", "none"] = "cached_partial"
    """cached_partial: nnx.jit, modules bound once; jit: passed at each call; tree: graph=False"""
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
    print("ppo_nnx.py: importing JAX, Flax NNX and gymnax...", flush=True)

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from tensorboardX import SummaryWriter
from tensorboardX.proto.summary_pb2 import Summary


# ---------------------------------------------------------------------------------------- network
class MLP(nnx.Module):
    """tanh MLP, orthogonal init (sqrt(2) on hidden layers), zero biases; float32, run in dtype."""

    def __init__(self, in_dim: int, hidden_sizes, out_dim: int, out_gain: float, rngs, dtype):
        sizes = (in_dim, *hidden_sizes, out_dim)
        gains = [np.sqrt(2)] * len(hidden_sizes) + [out_gain]
        zeros, layers = nnx.initializers.zeros, []
        for size_in, size_out, gain in zip(sizes, sizes[1:], gains):
            init = dict(kernel_init=nnx.initializers.orthogonal(gain), bias_init=zeros)
            # Linear casts its input and kernel to dtype; its parameters stay float32 (param_dtype)
            layers.append(nnx.Linear(size_in, size_out, **init, dtype=dtype, rngs=rngs))
        self.layers = nnx.List(layers)

    def __call__(self, x):
        for dense in self.layers[:-1]:
            x = nnx.tanh(dense(x))
        return self.layers[-1](x).astype(jnp.float32)


class Agent(nnx.Module):
    """Separate actor and critic MLPs; the actor gives logits, or a Gaussian's mean."""

    def __init__(self, obs_dim, hidden_sizes, num_actions, continuous, rngs, dtype="float32"):
        self.continuous = continuous
        self.actor = MLP(obs_dim, hidden_sizes, num_actions, 0.01, rngs, dtype)
        self.critic = MLP(obs_dim, hidden_sizes, 1, 1.0, rngs, dtype)
        if continuous:
            self.log_std = nnx.Param(jnp.zeros(num_actions))

    def __call__(self, obs):
        return self.actor(obs), self.critic(obs)[..., 0]

    def get_value(self, obs):
        return self.critic(obs)[..., 0]

    def log_prob_and_entropy(self, actor_out, action):
        """The actions' log-probabilities and the policy's entropy, from one log-softmax."""
        if self.continuous:
            z = (action - actor_out) / jnp.exp(self.log_std)
            log_prob = (-0.5 * z**2 - self.log_std - 0.5 * np.log(2 * np.pi)).sum(-1)
            # the Gaussian's entropy is the same for every state
            return log_prob, (self.log_std + 0.5 + 0.5 * np.log(2 * np.pi)).sum()
        log_probs = jax.nn.log_softmax(actor_out)
        log_prob = jnp.take_along_axis(log_probs, action[:, None], axis=-1)[:, 0]
        return log_prob, -(jnp.exp(log_probs) * log_probs).sum(-1)

    def get_action_and_value(self, obs, key, action=None):
        """Actions sampled with a JAX key (unless given), their log-probabilities, the values."""
        actor_out, value = self(obs)
        if action is None and self.continuous:
            # unbounded: step_envs clips what the env gets
            action = actor_out + jnp.exp(self.log_std) * jax.random.normal(key, actor_out.shape)
        elif action is None:
            action = jax.random.categorical(key, actor_out)
        log_prob, _ = self.log_prob_and_entropy(actor_out, action)
        return action, log_prob, value


def to_shared(agent) -> tuple:
    """(actor, critic, log_std) of agent in checkpoint.py's layout, [(kernel (in, out), bias)]."""
    actor, critic = ([(d.kernel, d.bias) for d in m.layers] for m in (agent.actor, agent.critic))
    return actor, critic, agent.log_std if agent.continuous else None


def from_shared(net, continuous: bool, dtype="float32"):
    """to_shared's inverse: an Agent holding net (its layers, sizes), and its jitted actor."""
    shape = (net.obs_dim, net.hidden_sizes, net.num_actions, continuous)
    agent = nnx.eval_shape(lambda: Agent(*shape, nnx.Rngs(0), dtype))
    for mlp, layers in ((agent.actor, net.actor), (agent.critic, net.critic)):
        for dense, (kernel, bias) in zip(mlp.layers, layers, strict=True):
            dense.kernel.value, dense.bias.value = jnp.asarray(kernel), jnp.asarray(bias)
    if continuous:
        agent.log_std.value = jnp.asarray(net.log_std)
    return agent, nnx.cached_partial(nnx.jit(lambda agent, obs: agent(obs)[0]), agent)


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

    obs: jax.Array
    action: jax.Array
    logprob: jax.Array
    value: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array
    episode_return: jax.Array
    episode_length: jax.Array


# the rollout flattened to (batch_size, ...), plus advantages and returns: the update's input
class Batch(NamedTuple):
    obs: jax.Array
    actions: jax.Array
    logprobs: jax.Array
    values: jax.Array
    advantages: jax.Array
    returns: jax.Array


def rollout(env, env_params, args: Args, agent: Agent, runner: Runner):
    """Collects num_steps x num_envs transitions, then computes GAE; all on the device."""

    def rollout_step(runner: Runner, _):
        key, action_key = jax.random.split(runner.key)
        action, logprob, value = agent.get_action_and_value(runner.obs, action_key)
        next_runner, env_fields = step_envs(env, env_params, runner._replace(key=key), action)
        return next_runner, Transition(runner.obs, action, logprob, value, *env_fields)

    runner, t = jax.lax.scan(rollout_step, runner, length=args.num_steps)
    # V(pre-reset next observation): the next value within an episode, the bootstrap when truncated
    final_values = agent.get_value(t.final_obs)
    advantages, returns = compute_gae(
        t.reward, t.value, final_values, t.terminated, t.truncated, args.gamma, args.gae_lambda
    )
    steps = (t.obs, t.action, t.logprob, t.value, advantages, returns)
    batch = Batch(*[x.reshape(args.batch_size, *x.shape[2:]) for x in steps])
    # 0 episodes: NaN statistics, and main() logs no episodic point
    num_episodes = (t.terminated | t.truncated).sum()
    episode_stats = {"episodic_return": t.episode_return.sum() / num_episodes}
    episode_stats["episodic_length"] = t.episode_length.sum() / num_episodes
    return runner, batch, episode_stats


def compute_gae(rewards, values, final_values, terminated, truncated, gamma, gae_lambda):
    """GAE over (num_steps, ...); final_values: V(pre-reset next obs), not for a terminated one."""
    deltas = rewards + gamma * final_values * (1.0 - terminated) - values
    discounts = gamma * gae_lambda * (1.0 - (terminated | truncated))

    def backward(gae, x):
        delta, discount = x
        gae = delta + discount * gae
        return gae, gae

    gae = jnp.zeros_like(deltas[0])
    _, advantages = jax.lax.scan(backward, gae, (deltas, discounts), reverse=True)
    return advantages, advantages + values


# -------------------------------------------------------------------------------- loss and update
def ppo_loss(agent: Agent, args: Args, mb: Batch):
    """Each agent's clipped PPO objective (means over the last axis): its loss and the parts."""
    actor_out, new_values = agent(mb.obs)
    new_logprobs, entropy = agent.log_prob_and_entropy(actor_out, mb.actions)
    entropy = entropy.mean()
    logratio = new_logprobs - mb.logprobs
    ratio = jnp.exp(logratio)
    advantages = mb.advantages
    if args.norm_adv:
        # population std (ddof=0) in every framework
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    clipped_ratio = jnp.clip(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
    pg_loss = jnp.maximum(-advantages * ratio, -advantages * clipped_ratio).mean(-1)
    v_loss_unclipped = (new_values - mb.returns) ** 2
    if args.clip_vloss:
        v_clipped = mb.values + jnp.clip(new_values - mb.values, -args.clip_coef, args.clip_coef)
        v_loss = 0.5 * jnp.maximum(v_loss_unclipped, (v_clipped - mb.returns) ** 2).mean(-1)
    else:
        v_loss = 0.5 * v_loss_unclipped.mean(-1)
    loss = pg_loss - args.ent_coef * entropy + args.vf_coef * v_loss
    metrics = {"policy_loss": pg_loss, "value_loss": v_loss, "entropy": entropy}
    metrics["old_approx_kl"] = (-logratio).mean(-1)
    metrics["approx_kl"] = ((ratio - 1) - logratio).mean(-1)
    metrics["clipfrac"] = (jnp.abs(ratio - 1) > args.clip_coef).mean(-1)
    return loss, metrics


def make_optimizer(args: Args):
    """Adam after global-norm clipping; the rate decays linearly to 0 (jitted: main() reads it)."""
    num_updates = args.num_iterations * args.update_epochs * args.num_minibatches
    end_value = 0.0 if args.anneal_lr else args.learning_rate
    lr_schedule = jax.jit(optax.linear_schedule(args.learning_rate, end_value, num_updates))
    adam = optax.adam(lr_schedule, eps=1e-5)
    return optax.chain(optax.clip_by_global_norm(args.max_grad_norm), adam), lr_schedule


def update(args: Args, agent: Agent, optimizer, batch: Batch, key, permutations=None):
    """update_epochs epochs of num_minibatches minibatches, in the given orders (or random)."""
    if permutations is None:
        key, shuffle_key = jax.random.split(key)
        # an argsort of random bits per epoch: one sort, half permutation's compile on a TPU
        bits = jax.random.bits(shuffle_key, (args.update_epochs, args.batch_size))
        permutations = jnp.argsort(bits, axis=-1)
    graphdef, state = nnx.split((agent, optimizer))

    def minibatch_step(state: nnx.State, mb: Batch):
        agent, optimizer = nnx.merge(graphdef, state)
        grads, metrics = nnx.grad(ppo_loss, has_aux=True)(agent, args, mb)
        optimizer.update(agent, grads)
        return nnx.state((agent, optimizer)), metrics

    def epoch(state: nnx.State, perm):
        shape = (args.num_minibatches, -1)
        minibatches = jax.tree.map(lambda x: x[perm].reshape(*shape, *x.shape[1:]), batch)
        return jax.lax.scan(minibatch_step, state, minibatches)

    state, metrics = jax.lax.scan(epoch, state, permutations)
    nnx.update((agent, optimizer), state)
    metrics = jax.tree.map(jnp.mean, metrics)
    var_returns = jnp.var(batch.returns)
    explained = 1 - jnp.var(batch.returns - batch.values) / var_returns
    # NaN where the returns have zero variance
    metrics["explained_variance"] = jnp.where(var_returns > 0, explained, np.nan)
    return key, metrics


def iterations(rollout_fn, update_fn, args, lr_schedule, agent, optimizer, runner, key, first, n):
    """Iterations first .. first + n - 1 (traced: arrays) in one call, one program for any n."""
    graphdef, state = nnx.split((agent, optimizer))

    def iteration(carry, i):
        state, runner, key = carry
        agent, optimizer = nnx.merge(graphdef, state)
        runner, batch, episode_stats = rollout_fn(agent, runner)
        key, losses = update_fn(agent, optimizer, batch, key)
        lr = lr_schedule((first + i + 1) * args.update_epochs * args.num_minibatches - 1)
        metrics = {**episode_stats, **losses, "learning_rate": lr}
        return (nnx.state((agent, optimizer)), runner, key), metrics

    skipped = jax.tree.map(jnp.zeros_like, jax.eval_shape(iteration, (state, runner, key), 0)[1])

    def step(carry, i):
        # the steps from n on skipped; n is one for all agents: a branch, not a select of both
        return jax.lax.cond(i < n, iteration, lambda carry, i: (carry, skipped), carry, i)

    carry, out = jax.lax.scan(step, (state, runner, key), jnp.arange(128))
    nnx.update((agent, optimizer), carry[0])
    return carry[1:], out


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
    env_args = (args.env, args.env_backend, args.num_envs, args.seed, args.env_threads)
    env, env_params = make_env(*env_args, args.num_agents)
    if args.norm_obs or args.norm_reward:
        import env_normalize

        env = env_normalize.normalize(env, args.norm_obs, args.norm_reward, args.gamma)
    run_name = book.run_name(args, FRAMEWORK)  # env__[exp_name__]framework__...; --resume's own
    run_dir = book.make_run_dir(os.path.join(args.log_dir, run_name), args.resume)
    config = {**asdict(args), "framework": FRAMEWORK, "batch_size": args.batch_size}
    config["minibatch_size"] = args.batch_size // args.num_minibatches
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
        split = jax.jit(jax.vmap(lambda seed: tuple(jax.random.split(jax.random.key(seed), 3))))
        env_key, init_key, update_key = split(args.seed + np.arange(args.num_agents))
        reset = jax.jit(jax.vmap(partial(reset_envs, env, env_params, num_envs=args.num_envs)))
        runner = reset(env_key)
        sizes, obs_dim = MODEL_SIZES[args.model_size], runner.obs.shape[-1]
        shape = (obs_dim, sizes, env.num_actions, env.continuous)

        def init_agent(key):
            return nnx.split(Agent(*shape, nnx.Rngs(key), args.dtype))[1]

        # jitted, an agent per key in turn (jax.lax.map: vmapped, it can hang on a CPU, jax 0.10),
        # on the host's CPU (a TPU compiles the QRs for up to 28 s); moved at the first jitted call
        with jax.default_device(jax.devices("cpu")[0]):
            params = jax.jit(partial(jax.lax.map, init_agent))(init_key)
        graphdef = nnx.graphdef(nnx.eval_shape(lambda: Agent(*shape, nnx.Rngs(0), args.dtype)))
        agent = nnx.merge(graphdef, params)
        tx, lr_schedule = make_optimizer(args)
        # vmapped: an Adam state per agent; jitted, as the init
        optimizer = nnx.jit(nnx.vmap(lambda agent: nnx.Optimizer(agent, tx, wrt=nnx.Param)))(agent)
        start = 0
        if args.resume:
            training = (nnx.state((agent, optimizer)), update_key)
            (trained, update_key), runner, start = saver.resume(training, runner, writer)
            nnx.update((agent, optimizer), trained)
        # every agent in one call: the batch of each agent's envs, the update of each agent's state
        graph = args.compile != "tree"
        rollout_fn = nnx.vmap(partial(rollout, env, env_params, args), graph=graph)
        update_fn = nnx.vmap(partial(update, args), graph=graph)
        chunk_fn = partial(iterations, rollout_fn, update_fn, args, lr_schedule)
        if args.compile != "none":
            jit = partial(nnx.jit, graph=graph)
            rollout_fn, update_fn, chunk_fn = map(jit, (rollout_fn, update_fn, chunk_fn))
        bind = nnx.cached_partial if args.compile == "cached_partial" else partial
        rollout_fn = bind(rollout_fn, agent)
        update_fn, chunk_fn = bind(update_fn, agent, optimizer), bind(chunk_fn, agent, optimizer)
        before_s = saver.before_s if args.resume else 0.0
        book.setup_done(before_s)
        setup_s = time.perf_counter() - START
        print(f"{run_name}: setup {setup_s:.1f}s on {config['device_name']}", flush=True)
        first, n, iteration_time = start, 0, math.inf
        for iteration in range(start, args.num_iterations):
            if iteration == first + n:
                book.check_signals()  # a SIGINT or SIGTERM stops the run here...
                # the call: a second's iterations at the last one's pace, at most 128, to a save
                to_save = args.save_every - iteration % args.save_every if args.save_every else 128
                most = 1 if args.sync_timing else min(128, args.num_iterations - iteration, to_save)
                first, n = np.int32([iteration, max(1, int(min(1 / iteration_time, most)))])
                # the rate of this iteration's last optimizer step, read before the timer starts
                last_step = (iteration + 1) * args.update_epochs * args.num_minibatches - 1
                learning_rate = lr_schedule(last_step)
                iteration_start = rollout_end = time.perf_counter()
                if args.sync_timing:
                    runner, batch, episode_stats = rollout_fn(runner)
                    jax.block_until_ready(batch)
                    rollout_end = time.perf_counter()
                    book.check_signals()  # ...or here
                    update_key, losses = update_fn(batch, update_key)
                    jax.block_until_ready((agent, optimizer))
                    out = {**episode_stats, **losses, "learning_rate": learning_rate}
                else:
                    (runner, update_key), out = chunk_fn(runner, update_key, first, n)
                update_end = time.perf_counter()
                # the one transfer to the host, within the call's time
                out = jax.device_get(out)
                iteration_time = (time.perf_counter() - iteration_start) / n
            metrics = out if args.sync_timing else jax.tree.map(lambda x: x[iteration - first], out)
            scalars = {
                "time/rollout": (rollout_end - iteration_start) / n,
                "time/update": (update_end - rollout_end) / n,
                "time/iteration": iteration_time,
                "time/elapsed": before_s + time.perf_counter() - START,
                # every agent's env steps: agent-steps per second
                "charts/SPS": args.num_agents * args.batch_size / iteration_time,
                "charts/learning_rate": metrics.pop("learning_rate"),
            }
            global_step = (iteration + 1) * args.batch_size
            scalars = log_scalars(writer, scalars, metrics, global_step)
            if args.track:
                wandb.log(scalars, step=global_step)
            returns = metrics["episodic_return"]
            if args.save_model or args.save_every:
                training = (nnx.state((agent, optimizer)), update_key)
                saver.iteration_done(to_shared(agent), runner, returns, training, writer)
            book.iteration_done(iteration, returns, writer, scalars)  # and the progress line
    if args.track:
        wandb.finish()


if __name__ == "__main__":
    book.run(main, Args)  # bad input in one line, exit code 2; the stops; the last line

"""PPO in Flax NNX on gymnax environments: a single-file starter, part of benchback-rl. Read it top to bottom: Args,
the network, the environment glue, rollout, GAE, loss, update, main(); a copy can drop the bookkeeping at the bottom.
The ppo_*.py files are written in parallel: `diff ppo_linen.py ppo_nnx.py` shows only what the framework changes.

    python ppo_nnx.py --env Acrobot-v1 --model-size small
"""

import time

START = time.perf_counter()  # import_s, setup_s and total_s count from this first line

import json
import os
import platform
import signal
import socket
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from functools import partial
from importlib.metadata import version
from pathlib import Path
from typing import Literal, NamedTuple, Optional, Sequence, get_args, get_origin, get_type_hints

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax
import tyro
from flax import nnx
from tensorboardX import SummaryWriter

FRAMEWORK = "nnx"
MODEL_SIZES = {"small": (64, 64), "medium": (256, 256, 256), "large": (1024,) * 6}


@dataclass(frozen=True)
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment (with --track, the W&B group when set; else the group is --tag)"""
    env: str = "CartPole-v1"
    """the gymnax environment id (discrete actions)"""
    model_size: Literal["small", "medium", "large"] = "small"
    """hidden layers of actor and critic: small (64, 64), medium (256,) * 3, large (1024,) * 6"""
    seed: int = 1
    """seed of the experiment (JAX keys for the environment, the init and the sampling)"""
    num_envs: int = 32
    """the number of parallel environments"""
    num_steps: int = 256
    """the number of steps per environment in each rollout"""
    num_iterations: int = 100
    """the number of iterations (rollout + update)"""
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
    compile: Literal["cached_partial", "jit", "none"] = "cached_partial"
    """cached_partial: nnx.jit the rollout and the update, modules bound once with nnx.cached_partial;
    jit: the same nnx.jit functions, modules passed on every call; none: op by op under jax.disable_jit()"""
    sync_timing: bool = True
    """block on the device after the rollout and after the update, so that both timers are exact; --no-sync-timing drops
    these two barriers, but the one metrics transfer that ends each iteration is still a barrier: iterations never overlap"""
    log_dir: str = "runs"
    """the folder that receives one subfolder per run"""
    track: bool = False
    """log to Weights & Biases too (the TensorBoard events are synced)"""
    wandb_project_name: str = "benchback-rl"
    """the W&B project"""
    wandb_entity: Optional[str] = None
    """the W&B entity (team); None is your default entity"""
    tag: str = "default"
    """a free label for the run, e.g. the machine or the OS, used to compare platforms"""

    batch_size = property(lambda self: self.num_envs * self.num_steps)
    minibatch_size = property(lambda self: self.batch_size // self.num_minibatches)


def parse_args(argv: list[str]) -> Args:
    """Args from the command line; bad input raises ValueError, one line naming the value and the valid choices."""
    choices = {
        f"--{name.replace('_', '-')}": get_args(hint)
        for name, hint in get_type_hints(Args).items()
        if get_origin(hint) is Literal
    }  # checked before tyro, which reports a bad choice in a multi-line box
    for flag, value in [*zip(argv, argv[1:]), *(arg.split("=", 1) for arg in argv if "=" in arg)]:
        flag = flag.replace("_", "-")
        if flag in choices and value not in choices[flag]:
            raise ValueError(f"{flag} {value!r} is not one of: {', '.join(choices[flag])}")
    args = tyro.cli(Args, args=argv)
    for name in ("num_envs", "num_steps", "num_iterations", "update_epochs", "num_minibatches"):
        if getattr(args, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(args, name)}")
    if args.batch_size % args.num_minibatches:
        raise ValueError(
            f"--num-minibatches {args.num_minibatches} does not divide the batch size {args.batch_size} "
            f"(num_envs x num_steps); choose a divisor of {args.batch_size}"
        )
    return args


# ---------------------------------------------------------------------------------------- network
class MLP(nnx.Module):
    """tanh MLP, orthogonal init (gain sqrt(2) on hidden layers), zero biases."""

    def __init__(self, in_dim: int, hidden_sizes: Sequence[int], out_dim: int, out_gain: float, rngs: nnx.Rngs):
        sizes = (in_dim, *hidden_sizes)
        self.hidden = nnx.List(
            [
                nnx.Linear(
                    i,
                    o,
                    kernel_init=nnx.initializers.orthogonal(np.sqrt(2)),
                    bias_init=nnx.initializers.zeros,
                    rngs=rngs,
                )
                for i, o in zip(sizes, sizes[1:])
            ]
        )
        self.head = nnx.Linear(
            sizes[-1],
            out_dim,
            kernel_init=nnx.initializers.orthogonal(out_gain),
            bias_init=nnx.initializers.zeros,
            rngs=rngs,
        )

    def __call__(self, x):
        for dense in self.hidden:
            x = nnx.tanh(dense(x))
        return self.head(x)


class Agent(nnx.Module):
    """Separate actor and critic networks."""

    def __init__(self, obs_dim: int, hidden_sizes: Sequence[int], num_actions: int, rngs: nnx.Rngs):
        self.actor = MLP(obs_dim, hidden_sizes, num_actions, out_gain=0.01, rngs=rngs)
        self.critic = MLP(obs_dim, hidden_sizes, 1, out_gain=1.0, rngs=rngs)

    def __call__(self, obs):
        """Action logits and state values."""
        return self.actor(obs), self.critic(obs)[..., 0]

    def get_value(self, obs):
        return self.critic(obs)[..., 0]

    def get_action_and_value(self, obs, key, action=None):
        """Samples actions (unless given) with a JAX key; returns them, their log-probabilities and the values."""
        logits, value = self(obs)
        if action is None:
            action = jax.random.categorical(key, logits)
        return action, jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=-1)[:, 0], value


# ------------------------------------------------------------------------------- environment glue
CRAFTAX_ENVS = ("Craftax-Classic-Symbolic-v1", "Craftax-Symbolic-v1")  # expensive JAX envs (pip package craftax)


def make_env(env_id: str, explain: bool = True):
    """The env and its params; ValueError (one line that lists the usable envs) when this script cannot train on it."""
    if env_id in CRAFTAX_ENVS:
        return (env := Craftax(env_id)), env.default_params
    try:
        env, env_params = gymnax.make(env_id)
        space = type(env.action_space(env_params))
        problem = None if space is gymnax.environments.spaces.Discrete else f"has a {space.__name__} action space"
    except Exception as e:  # an unknown id; an env that must download its data (MNISTBandit) without network
        problem = f"cannot be made ({type(e).__name__}: {e})" if env_id in gymnax.registered_envs else "is unknown"
    if problem and explain:  # on this error path only, make every registered env to list the usable ones
        usable = [other for other in gymnax.registered_envs if make_env(other, explain=False)] + list(CRAFTAX_ENVS)
        raise ValueError(f"env {env_id!r} {problem}; usable envs (discrete actions): {', '.join(usable)}")
    return None if problem else (env, env_params)


class Craftax:
    """Craftax with gymnax's contract. Its step has one `done` for a death and for the time limit, and a reset generates
    a world (~7 steps' cost): step_batch splits `done` into terminated and truncated (the time limit alone) and resets
    optimistically, as Craftax_Baselines does: only NUM_RESETS fresh worlds a step, shared by the envs that are done."""

    NUM_RESETS = 4  # 32 envs under a random policy end ~0.2 episodes a step: sharing a world is rare

    def __init__(self, env_id: str):
        from craftax.craftax_env import make_craftax_env_from_name  # here: the gymnax envs do not import craftax

        self.env = make_craftax_env_from_name(env_id, auto_reset=False)
        self.num_actions, self.default_params, self.reset = (
            self.env.num_actions,
            self.env.default_params,
            self.env.reset,
        )

    def step_batch(self, keys, states, actions, params):
        """Steps a batch of envs, one key each; returns gymnax's (obs, states, reward, terminated, truncated, info)."""
        obs, states, reward, done, info = jax.vmap(self.env.step, in_axes=(0, 0, 0, None))(
            keys, states, actions, params
        )
        no_limit = params.replace(max_timesteps=jnp.iinfo(jnp.int32).max)  # Craftax's own end: death, lava, the boss
        terminated = jax.vmap(self.env.is_terminal, in_axes=(0, None))(states, no_limit)
        reset_keys = jax.random.split(jax.random.fold_in(keys[0], 1), min(self.NUM_RESETS, len(keys)))
        world = (jnp.cumsum(done) - 1) % len(reset_keys)  # the k-th done env takes fresh world k mod NUM_RESETS
        pick = lambda new, old: jnp.where(done.reshape(-1, *[1] * (old.ndim - 1)), new[world], old)  # noqa: E731
        next_obs, states = jax.tree.map(
            pick, jax.vmap(self.reset, in_axes=(0, None))(reset_keys, params), (obs, states)
        )
        return next_obs, states, reward, terminated, done & ~terminated, {**info, "final_observation": obs}


class Runner(NamedTuple):
    """What carries over from one env step, and from one rollout, to the next."""

    env_state: object
    obs: jax.Array
    episode_return: jax.Array
    episode_length: jax.Array
    key: jax.Array


def reset_envs(env, env_params, key, num_envs: int) -> Runner:
    key, reset_key = jax.random.split(key)  # obs flattened: MinAtar observations are (10, 10, C)
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, num_envs), env_params)
    env_state = jax.tree.map(lambda x: jnp.asarray(x, x.dtype), env_state)  # no weak type, which a step would change
    return Runner(env_state, obs.reshape(num_envs, -1), jnp.zeros(num_envs), jnp.zeros(num_envs, jnp.int32), key)


def step_envs(env, env_params, runner: Runner, action):
    """Steps every env (auto-reset) and counts episodes: the next Runner, and the env's fields of a Transition."""
    num_envs = action.shape[0]
    key, step_key = jax.random.split(runner.key)
    step = env.step_batch if isinstance(env, Craftax) else jax.vmap(env.step, in_axes=(0, 0, 0, None))
    obs, env_state, reward, terminated, truncated, info = step(
        jax.random.split(step_key, num_envs), runner.env_state, action, env_params
    )
    done = terminated | truncated
    episode_return, episode_length = runner.episode_return + reward, runner.episode_length + 1
    next_runner = Runner(
        env_state,
        obs.reshape(num_envs, -1),
        jnp.where(done, 0.0, episode_return),
        jnp.where(done, 0, episode_length),
        key,
    )
    final_obs = info["final_observation"].reshape(num_envs, -1)  # before the auto-reset, for bootstrapping
    return next_runner, dict(
        reward=reward,
        terminated=terminated,
        truncated=truncated,
        final_obs=final_obs,
        episode_return=jnp.where(done, episode_return, 0.0),  # of the episode ended here, else 0
        episode_length=jnp.where(done, episode_length, 0),
    )


# ---------------------------------------------------------------------------------------- rollout
class Transition(NamedTuple):
    """One step of every env; the rollout stacks num_steps of them."""

    obs: jax.Array
    action: jax.Array
    logprob: jax.Array
    value: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array  # the observation reached before any auto-reset
    episode_return: jax.Array  # of the episode that ended at this step, else 0
    episode_length: jax.Array


# The rollout flattened to (batch_size, ...), with its advantages and returns: what the update trains on.
Batch = NamedTuple("Batch", [(f, jax.Array) for f in ("obs", "actions", "logprobs", "values", "advantages", "returns")])


def rollout(env, env_params, args: Args, agent: Agent, runner: Runner):
    """Collects num_steps x num_envs transitions, then computes GAE. Everything stays on the device."""

    def rollout_step(runner: Runner, _):
        key, action_key = jax.random.split(runner.key)
        action, logprob, value = agent.get_action_and_value(runner.obs, action_key)
        next_runner, env_fields = step_envs(env, env_params, runner._replace(key=key), action)
        return next_runner, Transition(runner.obs, action, logprob, value, **env_fields)

    runner, t = jax.lax.scan(rollout_step, runner, length=args.num_steps)
    # V(pre-reset next observation): the next value within an episode, the bootstrap when truncated.
    final_values = agent.get_value(t.final_obs)
    advantages, returns = compute_gae(
        t.reward, t.value, final_values, t.terminated, t.truncated, args.gamma, args.gae_lambda
    )
    batch = Batch(
        *(
            x.reshape(args.batch_size, *x.shape[2:])  # (num_steps, num_envs, ...) -> (batch_size, ...)
            for x in (t.obs, t.action, t.logprob, t.value, advantages, returns)
        )
    )
    num_episodes = (t.terminated | t.truncated).sum()  # NaN statistics when 0: main() then logs no episodic point
    return (
        runner,
        batch,
        {
            "episodic_return": t.episode_return.sum() / num_episodes,
            "episodic_length": t.episode_length.sum() / num_episodes,
        },
    )


# -------------------------------------------------------------------------------------------- GAE
def compute_gae(rewards, values, final_values, terminated, truncated, gamma: float, gae_lambda: float):
    """GAE over (num_steps, num_envs) arrays of auto-resetting envs. final_values[t]: V of the observation step t reached
    before any reset; a terminated step does not bootstrap, a truncated one does, and either ends the GAE trace."""
    deltas = rewards + gamma * final_values * (1.0 - terminated) - values
    continues = 1.0 - (terminated | truncated)

    def backward(gae, x):
        delta, cont = x
        gae = delta + gamma * gae_lambda * cont * gae
        return gae, gae

    _, advantages = jax.lax.scan(backward, jnp.zeros_like(deltas[0]), (deltas, continues), reverse=True)
    return advantages, advantages + values


# ------------------------------------------------------------------------------------------- loss
def ppo_loss(agent: Agent, args: Args, mb: Batch):
    """Clipped PPO objective; returns the total loss and its parts."""
    logits, new_values = agent(mb.obs)
    log_probs = jax.nn.log_softmax(logits)
    new_logprobs = jnp.take_along_axis(log_probs, mb.actions[:, None], axis=-1)[:, 0]
    entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
    logratio = new_logprobs - mb.logprobs
    ratio = jnp.exp(logratio)
    advantages = mb.advantages
    if args.norm_adv:  # population std (ddof=0) in every framework
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    pg_loss = jnp.maximum(
        -advantages * ratio, -advantages * jnp.clip(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
    ).mean()
    v_loss_unclipped = (new_values - mb.returns) ** 2
    if args.clip_vloss:
        v_clipped = mb.values + jnp.clip(new_values - mb.values, -args.clip_coef, args.clip_coef)
        v_loss = 0.5 * jnp.maximum(v_loss_unclipped, (v_clipped - mb.returns) ** 2).mean()
    else:
        v_loss = 0.5 * v_loss_unclipped.mean()
    loss = pg_loss - args.ent_coef * entropy + args.vf_coef * v_loss
    return loss, {
        "policy_loss": pg_loss,
        "value_loss": v_loss,
        "entropy": entropy,
        "old_approx_kl": (-logratio).mean(),
        "approx_kl": ((ratio - 1) - logratio).mean(),
        "clipfrac": (jnp.abs(ratio - 1) > args.clip_coef).mean(),
    }


# ----------------------------------------------------------------------------------------- update
def make_optimizer(args: Args):
    """Adam after global-norm clipping; the learning rate decays linearly to 0 over all optimizer steps."""
    num_updates = args.num_iterations * args.update_epochs * args.num_minibatches
    lr_schedule = (
        optax.linear_schedule(args.learning_rate, 0.0, num_updates)
        if args.anneal_lr
        else optax.constant_schedule(args.learning_rate)
    )
    return optax.chain(optax.clip_by_global_norm(args.max_grad_norm), optax.adam(lr_schedule, eps=1e-5)), lr_schedule


def update(args: Args, agent: Agent, optimizer: nnx.Optimizer, batch: Batch, key, permutations=None):
    """update_epochs epochs, one per row of permutations (default: fresh random orders), each in num_minibatches minibatches
    (explained variance: NaN for zero-variance returns). In place: jax.lax.scan carries the split state of both."""
    if permutations is None:
        key, *epoch_keys = jax.random.split(key, args.update_epochs + 1)
        permutations = jnp.stack([jax.random.permutation(k, args.batch_size) for k in epoch_keys])
    graphdef, state = nnx.split((agent, optimizer))

    def minibatch_step(state: nnx.State, mb: Batch):
        agent, optimizer = nnx.merge(graphdef, state)
        grads, metrics = nnx.grad(ppo_loss, has_aux=True)(agent, args, mb)
        optimizer.update(agent, grads)
        return nnx.state((agent, optimizer)), metrics

    def epoch(state: nnx.State, perm):
        minibatches = jax.tree.map(lambda x: x[perm].reshape(args.num_minibatches, -1, *x.shape[1:]), batch)
        return jax.lax.scan(minibatch_step, state, minibatches)

    state, metrics = jax.lax.scan(epoch, state, permutations)
    nnx.update((agent, optimizer), state)
    metrics = jax.tree.map(jnp.mean, metrics)  # mean over all epochs and minibatches
    var_returns = jnp.var(batch.returns)
    metrics["explained_variance"] = jnp.where(
        var_returns > 0, 1 - jnp.var(batch.returns - batch.values) / var_returns, np.nan
    )
    return key, metrics


# ------------------------------------------------------------------------------------------- main
def main():
    book = Bookkeeping()  # first, so that no signal is lost
    try:
        args = parse_args(sys.argv[1:])
        env, env_params = make_env(args.env)
        run_name = f"{args.env}__{FRAMEWORK}__{args.model_size}__{args.compile}__{args.seed}__{int(time.time())}"
        run_dir = os.path.join(args.log_dir, run_name)
        os.makedirs(run_dir, exist_ok=True)  # OSError when --log-dir is a file or cannot be created
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)

    wandb_run = None
    with book.run(args, run_dir, device_name=jax.devices()[0].device_kind) as config:
        if args.track:
            import wandb

            wandb_run = wandb.init(
                project=args.wandb_project_name,
                entity=args.wandb_entity,
                sync_tensorboard=True,
                group=args.exp_name if args.exp_name != Args.exp_name else args.tag,
                tags=[FRAMEWORK, args.model_size, args.env, args.compile],
                config=config,
                name=run_name,
                dir=run_dir,
                save_code=True,
            )
        with SummaryWriter(run_dir) as writer, jax.disable_jit(args.compile == "none"):
            table = "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items())
            writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{table}")
            key, env_key, init_key, update_key = jax.random.split(jax.random.key(args.seed), 4)
            runner = reset_envs(env, env_params, env_key, args.num_envs)
            agent = nnx.jit(
                lambda: Agent(
                    runner.obs.shape[-1], MODEL_SIZES[args.model_size], env.num_actions, rngs=nnx.Rngs(init_key)
                )
            )()  # jitted: one program to compile, not one per op
            tx, lr_schedule = make_optimizer(args)
            optimizer = nnx.Optimizer(agent, tx, wrt=nnx.Param)
            rollout_fn = partial(rollout, env, env_params, args)
            update_fn = partial(update, args)
            if args.compile != "none":
                rollout_fn, update_fn = nnx.jit(rollout_fn), nnx.jit(update_fn)
            bind = (
                nnx.cached_partial if args.compile == "cached_partial" else partial
            )  # cached: graph walked once, here
            rollout_fn, update_fn = bind(rollout_fn, agent), bind(update_fn, agent, optimizer)
            book.summary["setup_s"] = time.perf_counter() - START
            print(f"{run_name}: setup {book.summary['setup_s']:.1f}s on {config['device_name']}", flush=True)

            for iteration in range(args.num_iterations):
                book.check_signals()  # a SIGINT or SIGTERM stops the run here...
                iteration_start = time.perf_counter()
                runner, batch, episode_stats = rollout_fn(runner)
                if args.sync_timing:
                    jax.block_until_ready(batch)
                rollout_end = time.perf_counter()
                book.check_signals()  # ...or here
                update_key, losses = update_fn(batch, update_key)  # updates agent and optimizer in place
                if args.sync_timing:
                    jax.block_until_ready((agent, optimizer))
                update_end = time.perf_counter()

                metrics = jax.device_get({**episode_stats, **losses})  # the one host transfer per iteration
                iteration_time = (
                    time.perf_counter() - iteration_start
                )  # up to the metrics on the host; the writes follow
                optimizer_steps = (iteration + 1) * args.update_epochs * args.num_minibatches
                episodic = {f"charts/{k}": metrics.pop(k) for k in ("episodic_return", "episodic_length")}
                scalars = {
                    "time/rollout": rollout_end - iteration_start,
                    "time/update": update_end - rollout_end,
                    "time/iteration": iteration_time,
                    "time/elapsed": time.perf_counter() - START,
                    "charts/SPS": args.batch_size / iteration_time,
                    "charts/learning_rate": float(lr_schedule(optimizer_steps - 1)),  # the rate of the last step
                    **{tag: v for tag, v in episodic.items() if not np.isnan(v)},  # NaN: no episode ended, no point
                    **{f"losses/{k}": v for k, v in metrics.items()},
                }
                for tag, value in scalars.items():
                    writer.add_scalar(tag, float(value), (iteration + 1) * args.batch_size)  # step: env steps so far
                book.iteration_done(args, iteration, scalars)
    if wandb_run is not None:
        wandb_run.finish(exit_code=0 if book.summary["status"] == "completed" else 1)
    if book.summary["status"] == "interrupted":
        sys.exit(130)


# =======================================================================================================
# Benchmark bookkeeping: signals, config.json metadata, summary.json, progress and ETA. bench.sh and
# plot_results.py rely on it; a starter copy can drop this section and the `book.` lines of main().
class Bookkeeping:
    """SIGINT/SIGTERM set a flag that main() checks between phases (no signal gets lost in a compiler; a run started
    with SIGINT ignored still stops); a second signal stops at once. Then status "interrupted", exit 130."""

    packages = ("jax", "jaxlib", "flax", "optax", "gymnax")

    def __init__(self):
        self.running, self.returns, self.times = False, [], []  # running: a run folder without its summary.json
        self.summary = {
            "status": "failed",
            "iterations_completed": 0,
            "import_s": time.perf_counter() - START,
            "setup_s": None,
            "total_s": None,
            "final_return": None,
            "signals": [],
        }
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self.on_signal)

    def on_signal(self, signum, frame):
        self.summary["signals"].append(signal.Signals(signum).name)
        os.write(
            2, f"{self.summary['signals'][-1]}: stopping at the next iteration boundary (again: at once)\n".encode()
        )
        if len(self.summary["signals"]) > 1 and self.running:
            raise KeyboardInterrupt

    def check_signals(self):
        if self.summary["signals"]:
            raise KeyboardInterrupt

    @contextmanager
    def run(self, args: Args, run_dir: str, **machine):
        """config.json (Args as given, command, versions, machine), the body, then summary.json whatever happens."""
        self.running = True
        config = {
            **asdict(args),
            "command": sys.argv,
            "framework": FRAMEWORK,
            "batch_size": args.batch_size,
            "minibatch_size": args.minibatch_size,
            **machine,
            "platform": platform.platform(),
            "versions": {"python": platform.python_version(), **{p: version(p) for p in self.packages}},
            "cpu_affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,  # Linux
            "hostname": socket.gethostname(),
            "start_time": datetime.now(timezone.utc).isoformat(),
        }
        Path(run_dir, "config.json").write_text(json.dumps(config, indent=2))
        try:
            yield config
            self.summary["status"] = "completed"
        except KeyboardInterrupt:
            self.summary["status"] = "interrupted"
        except Exception as e:
            self.summary["error"] = f"{type(e).__name__}: {e}"
            raise
        finally:
            self.running = False  # a signal from here on must not stop the writing
            last = [r for r in self.returns[-10:] if not np.isnan(r)]  # final_return: of the last 10 iterations
            self.summary.update(
                total_s=time.perf_counter() - START, final_return=float(np.mean(last)) if last else None
            )
            Path(run_dir, "summary.json").write_text(json.dumps(self.summary, indent=2))
            print(
                f"{self.summary['status']}: {self.summary['iterations_completed']}/{args.num_iterations} iterations, "
                f"total {self.summary['total_s']:.1f}s, final return {self.summary['final_return']}, logs in {run_dir}"
            )

    def iteration_done(self, args: Args, iteration: int, scalars: dict):
        self.summary["iterations_completed"] = iteration + 1
        self.returns.append(float(scalars.get("charts/episodic_return", np.nan)))  # NaN: no episode ended
        self.times.append(scalars["time/iteration"])  # the ETA leaves out iteration 0, which compiles
        eta = np.mean(self.times[1:] or self.times) * (args.num_iterations - iteration - 1)
        print(
            f"iter {iteration + 1}/{args.num_iterations} | SPS {scalars['charts/SPS']:,.0f} | "
            f"return {self.returns[-1]:.1f} | rollout {scalars['time/rollout']:.3f}s update {scalars['time/update']:.3f}s | "
            f"elapsed {scalars['time/elapsed']:.1f}s ETA {eta:.1f}s",
            flush=True,
        )


if __name__ == "__main__":
    main()

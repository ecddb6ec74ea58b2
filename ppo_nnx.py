"""PPO in Flax NNX on gymnax environments: a single-file starter, part of benchback-rl.

Read it top to bottom: Args, the network, the environment glue, rollout, GAE, loss, update, main().
ppo_linen.py and ppo_torch.py are written in parallel with this file, so `diff ppo_linen.py ppo_nnx.py`
shows only what the framework changes.

    python ppo_nnx.py --env Acrobot-v1 --model-size small
"""

import json
import os
import platform
import signal
import socket
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from functools import partial
from importlib.metadata import version
from typing import Literal, NamedTuple, Optional, Sequence

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
    """the name of this experiment"""
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
    """block on the device after the rollout and after the update so that both timers are exact"""
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

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches


def check_args(args: Args) -> None:
    """Refuses bad input before any work, with one line naming the bad value and the valid choices."""
    if args.env not in gymnax.registered_envs:
        raise ValueError(f"unknown env {args.env!r}; valid envs: {', '.join(gymnax.registered_envs)}")
    for name in ("num_envs", "num_steps", "num_iterations", "update_epochs", "num_minibatches"):
        if getattr(args, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(args, name)}")
    if args.batch_size % args.num_minibatches:
        raise ValueError(
            f"--num-minibatches {args.num_minibatches} does not divide the batch size {args.batch_size} "
            f"(num_envs x num_steps); choose a divisor of {args.batch_size}"
        )


# ---------------------------------------------------------------------------------------- network
class MLP(nnx.Module):
    """tanh MLP, orthogonal init (gain sqrt(2) on hidden layers), zero biases."""

    def __init__(self, in_dim: int, hidden_sizes: Sequence[int], out_dim: int, out_gain: float, rngs: nnx.Rngs):
        sizes = (in_dim, *hidden_sizes)
        self.hidden = nnx.List([
            nnx.Linear(i, o, kernel_init=nnx.initializers.orthogonal(np.sqrt(2)), bias_init=nnx.initializers.zeros, rngs=rngs)
            for i, o in zip(sizes[:-1], sizes[1:])
        ])
        self.head = nnx.Linear(sizes[-1], out_dim, kernel_init=nnx.initializers.orthogonal(out_gain),
                               bias_init=nnx.initializers.zeros, rngs=rngs)

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


# ------------------------------------------------------------------------------- environment glue
def make_env(env_id: str):
    env, env_params = gymnax.make(env_id)
    if not isinstance(env.action_space(env_params), gymnax.environments.spaces.Discrete):
        kind = type(env.action_space(env_params)).__name__
        raise ValueError(f"env {env_id!r} has a {kind} action space; only Discrete action spaces are supported")
    return env, env_params


def reset_envs(env, env_params, key, num_envs: int):
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, num_envs), env_params)
    return obs.reshape(num_envs, -1), env_state  # flatten: MinAtar observations are (10, 10, C)


def step_envs(env, env_params, key, env_state, action):
    """Steps every env (auto-reset); also returns the pre-reset observation for bootstrapping."""
    num_envs = action.shape[0]
    obs, env_state, reward, terminated, truncated, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
        jax.random.split(key, num_envs), env_state, action, env_params
    )
    final_obs = info["final_observation"].reshape(num_envs, -1)
    return obs.reshape(num_envs, -1), env_state, reward, terminated, truncated, final_obs


# ---------------------------------------------------------------------------------------- rollout
class Runner(NamedTuple):
    """What carries over from one rollout to the next."""

    env_state: object
    obs: jax.Array
    episode_return: jax.Array
    episode_length: jax.Array
    key: jax.Array


class Batch(NamedTuple):
    obs: jax.Array
    actions: jax.Array
    logprobs: jax.Array
    values: jax.Array
    advantages: jax.Array
    returns: jax.Array


def rollout(env, env_params, args: Args, agent: Agent, runner: Runner):
    """Collects num_steps x num_envs transitions, then computes GAE. Everything stays on the device."""

    def env_step(runner: Runner, _):
        key, action_key, env_key = jax.random.split(runner.key, 3)
        logits, value = agent(runner.obs)
        action = jax.random.categorical(action_key, logits)
        logprob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=-1)[:, 0]
        obs, env_state, reward, terminated, truncated, final_obs = step_envs(
            env, env_params, env_key, runner.env_state, action
        )
        done = terminated | truncated
        episode_return = runner.episode_return + reward
        episode_length = runner.episode_length + 1
        transition = (runner.obs, action, logprob, value, reward, terminated, truncated, final_obs,
                      done, jnp.where(done, episode_return, 0.0), jnp.where(done, episode_length, 0))
        runner = Runner(env_state, obs, jnp.where(done, 0.0, episode_return), jnp.where(done, 0, episode_length), key)
        return runner, transition

    runner, (obs, actions, logprobs, values, rewards, terminated, truncated, final_obs,
             done, done_return, done_length) = jax.lax.scan(env_step, runner, length=args.num_steps)
    # V(pre-reset next observation): the next value within an episode, the bootstrap when truncated.
    final_values = agent.get_value(final_obs)
    advantages, returns = compute_gae(rewards, values, final_values, terminated, truncated, args.gamma, args.gae_lambda)
    flat = lambda x: x.reshape(args.batch_size, *x.shape[2:])
    batch = Batch(flat(obs), flat(actions), flat(logprobs), flat(values), flat(advantages), flat(returns))
    num_episodes = done.sum()
    episode_stats = {  # NaN when no episode ended in this rollout
        "episodic_return": done_return.sum() / num_episodes,
        "episodic_length": done_length.sum() / num_episodes,
    }
    return runner, batch, episode_stats


# -------------------------------------------------------------------------------------------- GAE
def compute_gae(rewards, values, final_values, terminated, truncated, gamma: float, gae_lambda: float):
    """Generalized advantage estimation over (num_steps, num_envs) arrays from auto-resetting envs.

    final_values[t] is V of the observation reached by step t before any reset: a terminated step
    does not bootstrap, a truncated one bootstraps from it, and either ends the GAE trace.
    """
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
    pg_loss = jnp.maximum(-advantages * ratio, -advantages * jnp.clip(ratio, 1 - args.clip_coef, 1 + args.clip_coef)).mean()

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
    lr_schedule = (optax.linear_schedule(args.learning_rate, 0.0, num_updates) if args.anneal_lr
                   else optax.constant_schedule(args.learning_rate))
    return optax.chain(optax.clip_by_global_norm(args.max_grad_norm), optax.adam(lr_schedule, eps=1e-5)), lr_schedule


def update(args: Args, agent: Agent, optimizer: nnx.Optimizer, batch: Batch, key):
    """update_epochs passes over the batch, each in a fresh random order. Updates agent and optimizer in place."""
    key, *epoch_keys = jax.random.split(key, args.update_epochs + 1)
    permutations = jnp.stack([jax.random.permutation(k, args.batch_size) for k in epoch_keys])
    metrics = train_epochs(args, agent, optimizer, batch, permutations)
    return key, metrics


def train_epochs(args: Args, agent: Agent, optimizer: nnx.Optimizer, batch: Batch, permutations):
    """One epoch per row of permutations: the batch in that order, cut into num_minibatches minibatches.

    jax.lax.scan carries the state of agent and optimizer: split once, merged in each step, updated at the end.
    """
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
    metrics["explained_variance"] = 1 - jnp.var(batch.returns - batch.values) / jnp.var(batch.returns)
    return metrics


# ------------------------------------------------------------------------------------------- main
def run_config(args: Args) -> dict:
    packages = ("jax", "jaxlib", "flax", "optax", "gymnax")
    return {
        **asdict(args),
        "framework": FRAMEWORK,
        "batch_size": args.batch_size,
        "minibatch_size": args.minibatch_size,
        "versions": {"python": platform.python_version(), **{p: version(p) for p in packages}},
        "device": jax.devices()[0].device_kind,
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "start_time": datetime.now(timezone.utc).isoformat(),
    }


def write_json(path: str, data: dict) -> None:
    with open(path, "w") as f:
        json.dump(data, f, indent=2)


def raise_interrupt(signum, frame):
    raise KeyboardInterrupt  # SIGTERM (e.g. from `timeout`) ends the run like Ctrl-C


def main():
    args = tyro.cli(Args)
    try:
        check_args(args)
        env, env_params = make_env(args.env)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)

    run_start = time.perf_counter()
    run_name = f"{args.env}__{FRAMEWORK}__{args.model_size}__{args.compile}__{args.seed}__{int(time.time())}"
    run_dir = os.path.join(args.log_dir, run_name)
    os.makedirs(run_dir, exist_ok=True)
    config = run_config(args)
    write_json(os.path.join(run_dir, "config.json"), config)
    summary = {"status": "failed", "iterations_completed": 0, "setup_s": None, "total_s": None, "final_return": None}
    episodic_returns = []
    signal.signal(signal.SIGTERM, raise_interrupt)
    writer = wandb_run = None
    try:
        if args.track:
            import wandb

            wandb_run = wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, sync_tensorboard=True,
                       config=config, name=run_name, dir=run_dir, save_code=True)
        writer = SummaryWriter(run_dir)
        writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items()))

        with jax.disable_jit(args.compile == "none"):
            key = jax.random.key(args.seed)
            key, env_key, init_key, runner_key, update_key = jax.random.split(key, 5)
            obs, env_state = reset_envs(env, env_params, env_key, args.num_envs)
            agent = Agent(obs.shape[-1], MODEL_SIZES[args.model_size], env.num_actions, rngs=nnx.Rngs(init_key))
            tx, lr_schedule = make_optimizer(args)
            optimizer = nnx.Optimizer(agent, tx, wrt=nnx.Param)
            runner = Runner(env_state, obs, jnp.zeros(args.num_envs), jnp.zeros(args.num_envs, jnp.int32), runner_key)
            rollout_fn = partial(rollout, env, env_params, args)
            update_fn = partial(update, args)
            if args.compile != "none":
                rollout_fn, update_fn = nnx.jit(rollout_fn), nnx.jit(update_fn)
            # bind the modules: cached_partial walks their graph once, here; with partial nnx.jit walks it every call
            bind = nnx.cached_partial if args.compile == "cached_partial" else partial
            rollout_fn, update_fn = bind(rollout_fn, agent), bind(update_fn, agent, optimizer)
            summary["setup_s"] = time.perf_counter() - run_start
            print(f"{run_name}: setup {summary['setup_s']:.1f}s on {config['device']}", flush=True)

            iteration_times = []
            for iteration in range(args.num_iterations):
                iteration_start = time.perf_counter()
                runner, batch, episode_stats = rollout_fn(runner)
                if args.sync_timing:
                    jax.block_until_ready(batch)
                rollout_end = time.perf_counter()
                update_key, losses = update_fn(batch, update_key)  # updates agent and optimizer in place
                if args.sync_timing:
                    jax.block_until_ready((agent, optimizer))
                update_end = time.perf_counter()

                metrics = jax.device_get({**episode_stats, **losses})  # the one host transfer per iteration
                global_step = (iteration + 1) * args.batch_size
                optimizer_steps = (iteration + 1) * args.update_epochs * args.num_minibatches
                scalars = {
                    "time/rollout": rollout_end - iteration_start,
                    "time/update": update_end - rollout_end,
                    "charts/episodic_return": metrics.pop("episodic_return"),
                    "charts/episodic_length": metrics.pop("episodic_length"),
                    "charts/learning_rate": float(lr_schedule(optimizer_steps - 1)),  # the rate of the last step
                    **{f"losses/{k}": v for k, v in metrics.items()},
                }
                for tag, value in scalars.items():
                    writer.add_scalar(tag, float(value), global_step)
                iteration_time = time.perf_counter() - iteration_start
                elapsed = time.perf_counter() - run_start
                writer.add_scalar("time/iteration", iteration_time, global_step)
                writer.add_scalar("time/elapsed", elapsed, global_step)
                writer.add_scalar("charts/SPS", args.batch_size / iteration_time, global_step)

                summary["iterations_completed"] = iteration + 1
                episodic_returns.append(float(scalars["charts/episodic_return"]))
                iteration_times.append(iteration_time)
                steady = iteration_times[1:] or iteration_times  # iteration 0 includes compilation
                eta = np.mean(steady) * (args.num_iterations - iteration - 1)
                print(f"iter {iteration + 1}/{args.num_iterations} | step {global_step} | "
                      f"SPS {args.batch_size / iteration_time:,.0f} | return {episodic_returns[-1]:.1f} | "
                      f"rollout {scalars['time/rollout']:.3f}s update {scalars['time/update']:.3f}s | "
                      f"elapsed {elapsed:.1f}s ETA {eta:.1f}s", flush=True)
        summary["status"] = "completed"
    except KeyboardInterrupt:
        summary["status"] = "interrupted"
    except Exception as e:
        summary["error"] = f"{type(e).__name__}: {e}"
        raise
    finally:
        summary["total_s"] = time.perf_counter() - run_start
        last_returns = [r for r in episodic_returns[-10:] if not np.isnan(r)]
        summary["final_return"] = float(np.mean(last_returns)) if last_returns else None
        write_json(os.path.join(run_dir, "summary.json"), summary)
        if writer is not None:
            writer.close()
        if wandb_run is not None:
            wandb_run.finish(exit_code=0 if summary["status"] == "completed" else 1)
        print(f"{summary['status']}: {summary['iterations_completed']}/{args.num_iterations} iterations, "
              f"total {summary['total_s']:.1f}s, final return {summary['final_return']}, logs in {run_dir}", flush=True)
    if summary["status"] == "interrupted":
        sys.exit(130)


if __name__ == "__main__":
    main()

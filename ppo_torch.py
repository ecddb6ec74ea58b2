"""PPO in PyTorch on gymnax environments: a single-file starter, part of benchback-rl.

Read it top to bottom: Args, the network, the environment glue, rollout, GAE, loss, update, main().
ppo_linen.py and ppo_nnx.py are written in parallel with this file, so `diff ppo_linen.py ppo_torch.py`
shows only what the framework changes. The environments are JAX (gymnax): each rollout step calls the
jitted, vmapped env once, and arrays cross between JAX and torch with DLPack, zero-copy, both ways.

    python ppo_torch.py --env Acrobot-v1 --model-size small
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

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX shares the GPU with torch: no 75 % grab

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.nn as nn
import tyro
from tensorboardX import SummaryWriter

FRAMEWORK = "torch"
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
    """seed of the experiment (JAX keys for the environment, torch generators for the init and the sampling)"""
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
    compile: Literal["compile", "env-jit", "none"] = "compile"
    """compile: torch.compile the policy step and the loss, jax.jit the env; env-jit: eager torch, jitted env; none: eager torch, env op by op"""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """where torch and JAX run (always the same device, so DLPack is zero-copy); auto: cuda when both see a GPU"""
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
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device cuda: torch {torch.__version__} sees no CUDA GPU; use --device cpu or auto")


def pick_devices(requested: str):
    """The torch device and the JAX device on the same chip: DLPack hands over buffers, it does not move them."""
    jax_gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if requested == "cpu" or (requested == "auto" and not (torch.cuda.is_available() and jax_gpus)):
        return torch.device("cpu"), jax.devices("cpu")[0]
    if not jax_gpus:
        raise ValueError("--device cuda: JAX sees no GPU (install jax[cuda12]); torch and JAX must share the device")
    index = torch.cuda.current_device()
    return torch.device("cuda", index), next(d for d in jax_gpus if d.local_hardware_id == index)


# ---------------------------------------------------------------------------------------- network
class MLP(nn.Sequential):
    """tanh MLP, orthogonal init (gain sqrt(2) on hidden layers), zero biases."""

    def __init__(self, in_dim: int, hidden_sizes: Sequence[int], out_dim: int, out_gain: float):
        sizes = [in_dim, *hidden_sizes, out_dim]
        layers = [nn.Linear(size_in, size_out) for size_in, size_out in zip(sizes[:-1], sizes[1:])]
        for layer, gain in zip(layers, [np.sqrt(2)] * len(hidden_sizes) + [out_gain]):
            nn.init.orthogonal_(layer.weight, gain)
            nn.init.zeros_(layer.bias)
        super().__init__(*[m for layer in layers[:-1] for m in (layer, nn.Tanh())], layers[-1])


class Agent(nn.Module):
    """Separate actor and critic networks."""

    def __init__(self, obs_dim: int, hidden_sizes: Sequence[int], num_actions: int):
        super().__init__()
        self.num_actions = num_actions
        self.actor = MLP(obs_dim, hidden_sizes, num_actions, out_gain=0.01)
        self.critic = MLP(obs_dim, hidden_sizes, 1, out_gain=1.0)

    def forward(self, obs):
        """Action logits and state values."""
        return self.actor(obs), self.critic(obs)[..., 0]

    def get_value(self, obs):
        return self.critic(obs)[..., 0]

    def get_action_and_value(self, obs, noise):
        """Samples actions by Gumbel-max from uniform noise (drawn outside, with a seeded torch.Generator)."""
        logits, value = self(obs)
        action = (logits - torch.log(-torch.log(noise))).argmax(-1)
        logprob = logits.log_softmax(-1).gather(-1, action[:, None])[:, 0]
        return action.to(torch.int32), logprob, value  # int32: JAX runs without x64


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


def step_envs(env, env_params, carry, action):
    """The JAX half of a rollout step, one (jitted) call: steps every env (auto-reset) and keeps episode
    statistics; the transition holds the pre-reset observation for bootstrapping."""
    env_state, episode_return, episode_length, key = carry
    key, env_key = jax.random.split(key)
    num_envs = action.shape[0]
    obs, env_state, reward, terminated, truncated, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
        jax.random.split(env_key, num_envs), env_state, action, env_params
    )
    final_obs = info["final_observation"].reshape(num_envs, -1)
    done = terminated | truncated
    episode_return = episode_return + reward
    episode_length = episode_length + 1
    transition = (reward, terminated, truncated, final_obs, done,
                  jnp.where(done, episode_return, 0.0), jnp.where(done, episode_length, 0))
    carry = (env_state, jnp.where(done, 0.0, episode_return), jnp.where(done, 0, episode_length), key)
    return carry, obs.reshape(num_envs, -1), transition


# ---------------------------------------------------------------------------------------- rollout
class Runner(NamedTuple):
    """What carries over from one rollout to the next: the JAX side of the env loop, and torch obs."""

    env_state: object
    obs: torch.Tensor
    episode_return: jax.Array
    episode_length: jax.Array
    key: jax.Array


class Batch(NamedTuple):
    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor


@torch.no_grad()
def rollout(env_step_fn, stack_fn, args: Args, agent: Agent, policy_fn, generator: torch.Generator, runner: Runner):
    """Collects num_steps x num_envs transitions, then computes GAE. Everything stays on the device."""
    noise = torch.rand(args.num_steps, args.num_envs, agent.num_actions, generator=generator, device=runner.obs.device)
    noise.clamp_(min=torch.finfo(noise.dtype).tiny)  # log(0) would be -inf in the Gumbel-max sampling
    carry, next_obs = (runner.env_state, runner.episode_return, runner.episode_length, runner.key), runner.obs
    steps, transitions = [], []
    for step in range(args.num_steps):
        action, logprob, value = policy_fn(next_obs, noise[step])
        steps.append((next_obs, action, logprob, value))
        carry, next_obs, transition = env_step_fn(carry, jnp.from_dlpack(action))  # torch -> JAX, zero-copy
        next_obs = torch.from_dlpack(next_obs)  # JAX -> torch, zero-copy
        transitions.append(transition)
    runner = Runner(carry[0], next_obs, *carry[1:])

    obs, actions, logprobs, values = (torch.stack(x) for x in zip(*steps))
    rewards, terminated, truncated, final_obs, done, done_return, done_length = map(torch.from_dlpack, stack_fn(transitions))
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
    deltas = rewards + gamma * final_values * ~terminated - values
    discounts = gamma * gae_lambda * ~(terminated | truncated)

    gae, advantages = torch.zeros_like(deltas[0]), []
    for t in reversed(range(len(deltas))):
        gae = deltas[t] + discounts[t] * gae
        advantages.append(gae)
    advantages = torch.stack(advantages[::-1])
    return advantages, advantages + values


# ------------------------------------------------------------------------------------------- loss
def ppo_loss(agent: Agent, args: Args, mb: Batch):
    """Clipped PPO objective; returns the total loss and its parts."""
    logits, new_values = agent(mb.obs)
    log_probs = logits.log_softmax(-1)
    new_logprobs = log_probs.gather(-1, mb.actions[:, None].long())[:, 0]
    entropy = -(log_probs.exp() * log_probs).sum(-1).mean()
    logratio = new_logprobs - mb.logprobs
    ratio = logratio.exp()

    advantages = mb.advantages
    if args.norm_adv:  # population std (ddof=0) in every framework
        advantages = (advantages - advantages.mean()) / (advantages.std(correction=0) + 1e-8)
    pg_loss = torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()

    v_loss_unclipped = (new_values - mb.returns) ** 2
    if args.clip_vloss:
        v_clipped = mb.values + (new_values - mb.values).clamp(-args.clip_coef, args.clip_coef)
        v_loss = 0.5 * torch.max(v_loss_unclipped, (v_clipped - mb.returns) ** 2).mean()
    else:
        v_loss = 0.5 * v_loss_unclipped.mean()

    loss = pg_loss - args.ent_coef * entropy + args.vf_coef * v_loss
    return loss, {
        "policy_loss": pg_loss,
        "value_loss": v_loss,
        "entropy": entropy,
        "old_approx_kl": (-logratio).mean(),
        "approx_kl": ((ratio - 1) - logratio).mean(),
        "clipfrac": ((ratio - 1).abs() > args.clip_coef).float().mean(),
    }


# ----------------------------------------------------------------------------------------- update
def make_optimizer(args: Args, agent: Agent):
    """Adam (global-norm clipping is in train_epochs); the learning rate decays linearly to 0 over all optimizer steps."""
    num_updates = args.num_iterations * args.update_epochs * args.num_minibatches
    lr_schedule = lambda step: args.learning_rate * (1.0 - step / num_updates if args.anneal_lr else 1.0)  # noqa: E731
    return torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True), lr_schedule  # fused: one kernel per tensor


def update(args: Args, agent: Agent, optimizer: torch.optim.Optimizer, lr_schedule, loss_fn,
           generator: torch.Generator, batch: Batch, optimizer_step: int):
    """update_epochs passes over the batch, each in a fresh random order."""
    permutations = torch.stack([torch.randperm(args.batch_size, generator=generator, device=batch.obs.device)
                                for _ in range(args.update_epochs)])
    return train_epochs(args, agent, optimizer, lr_schedule, loss_fn, batch, permutations, optimizer_step)


def train_epochs(args: Args, agent: Agent, optimizer: torch.optim.Optimizer, lr_schedule, loss_fn,
                 batch: Batch, permutations: torch.Tensor, optimizer_step: int):
    """One epoch per row of permutations: the batch in that order, cut into num_minibatches minibatches."""
    metrics = []
    for perm in permutations:
        minibatches = Batch(*(x[perm].reshape(args.num_minibatches, -1, *x.shape[1:]) for x in batch))
        for mb in zip(*minibatches):
            loss, mb_metrics = loss_fn(Batch(*mb))
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.param_groups[0]["lr"] = lr_schedule(optimizer_step)
            optimizer.step()
            optimizer_step += 1
            metrics.append(torch.stack(list(mb_metrics.values())).detach())

    metrics = dict(zip(mb_metrics, torch.stack(metrics).mean(0)))  # mean over all epochs and minibatches
    metrics["explained_variance"] = 1 - (batch.returns - batch.values).var(correction=0) / batch.returns.var(correction=0)
    return metrics


# ------------------------------------------------------------------------------------------- main
def run_config(args: Args, device: torch.device) -> dict:
    packages = ("torch", "jax", "jaxlib", "gymnax")
    return {
        **asdict(args),
        "framework": FRAMEWORK,
        "batch_size": args.batch_size,
        "minibatch_size": args.minibatch_size,
        "versions": {"python": platform.python_version(), **{p: version(p) for p in packages}},
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch_threads": torch.get_num_threads(),
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
        device, jax_device = pick_devices(args.device)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    jax.config.update("jax_default_device", jax_device)  # env arrays live where torch computes
    if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)  # small nets: OpenMP barriers cost more than they save, and stall on busy cores

    run_start = time.perf_counter()
    run_name = f"{args.env}__{FRAMEWORK}__{args.model_size}__{args.compile}__{args.seed}__{int(time.time())}"
    run_dir = os.path.join(args.log_dir, run_name)
    os.makedirs(run_dir, exist_ok=True)
    config = run_config(args, device)
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
            torch.manual_seed(args.seed)
            generator = torch.Generator(device).manual_seed(args.seed)  # action sampling and minibatch order
            key = jax.random.key(args.seed)
            key, env_key, runner_key = jax.random.split(key, 3)
            obs, env_state = reset_envs(env, env_params, env_key, args.num_envs)
            obs = torch.from_dlpack(obs)
            agent = Agent(obs.shape[-1], MODEL_SIZES[args.model_size], env.num_actions).to(device)
            optimizer, lr_schedule = make_optimizer(args, agent)
            runner = Runner(env_state, obs, jnp.zeros(args.num_envs), jnp.zeros(args.num_envs, jnp.int32), runner_key)
            env_step_fn = partial(step_envs, env, env_params)
            stack_fn = lambda transitions: jax.tree.map(lambda *x: jnp.stack(x), *transitions)  # one call per rollout
            policy_fn, loss_fn = agent.get_action_and_value, partial(ppo_loss, agent, args)
            if args.compile != "none":
                env_step_fn, stack_fn = jax.jit(env_step_fn), jax.jit(stack_fn)
            if args.compile == "compile":
                # torch.compile what dominates: the policy step (every env step) and the minibatch loss
                # (forward + the backward that AOTAutograd compiles with it). Static shapes, so each compiles
                # once. Clipping and the fused Adam stay eager: compiling them too was slower on CPU.
                policy_fn = torch.compile(policy_fn, dynamic=False)
                loss_fn = torch.compile(loss_fn, dynamic=False)
            rollout_fn = partial(rollout, env_step_fn, stack_fn, args, agent, policy_fn, generator)
            update_fn = partial(update, args, agent, optimizer, lr_schedule, loss_fn, generator)
            summary["setup_s"] = time.perf_counter() - run_start
            print(f"{run_name}: setup {summary['setup_s']:.1f}s on {config['device']}", flush=True)

            iteration_times = []
            for iteration in range(args.num_iterations):
                iteration_start = time.perf_counter()
                runner, batch, episode_stats = rollout_fn(runner)
                if args.sync_timing:
                    jax.block_until_ready((runner.env_state, runner.key))
                    if device.type == "cuda":
                        torch.cuda.synchronize(device)
                rollout_end = time.perf_counter()
                losses = update_fn(batch, iteration * args.update_epochs * args.num_minibatches)
                if args.sync_timing and device.type == "cuda":
                    torch.cuda.synchronize(device)
                update_end = time.perf_counter()

                metrics = {**episode_stats, **losses}
                metrics = dict(zip(metrics, torch.stack(list(metrics.values())).tolist()))  # the one host transfer per iteration
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

"""One iteration of a script in-process: its own make_env (with env_normalize's wrapper, as main()
wraps it for --norm-obs/--norm-reward), reset_envs, rollout and update, on an agent of its own
init (parity_sides' adapters build it as main() does). What a tiny run of the script proves about
an env (the batch's shapes and dtypes, the action kind, the episode statistics, finite losses),
without a process: its import and compile are the test process's, once."""

from functools import partial
from typing import NamedTuple

import jax
import numpy as np
import torch
from parity_sides import SIDES, Spec
from script_runs import script_module

import env_normalize
import ppo_linen
import ppo_torch
import torch_glue

# TINY's shapes: 4 envs x 16 steps, 2 epochs of 2 minibatches
TINY_ARGS = dict(num_envs=4, num_steps=16, update_epochs=2, num_minibatches=2)


class Iteration(NamedTuple):
    spec: Spec
    before: dict  # the agent's weights before the update (parity_sides' shared layout)
    after: dict
    batch: dict  # the rollout's Batch, as NumPy
    episode_stats: dict  # episodic_return, episodic_length: NaN where no episode ended
    losses: dict  # the update's metrics


def one_iteration(framework: str, env_id: str, norm: bool = False) -> Iteration:
    module = script_module(framework)
    args = module.Args(env=env_id, norm_obs=norm, norm_reward=norm, **TINY_ARGS)
    env, env_params = module.make_env(env_id, num_envs=args.num_envs)
    env = env_normalize.normalize(env, norm, norm, args.gamma)
    runner = module.reset_envs(env, env_params, jax.random.key(1), args.num_envs)
    spec = Spec(runner.obs.shape[-1], env.num_actions, env.continuous)
    side_type = SIDES[framework]
    before = side_type.own_init(spec, ppo_linen.MODEL_SIZES[args.model_size])
    side = side_type(before, args)
    if framework == "torch":
        # as TorchSide.run_rollout, with the agents' axis (of one), keeping the episode statistics
        runner = jax.tree.map(lambda x: x[None], runner)
        env_step = torch_glue.env_step(env, env_params, ppo_torch.step_envs)
        state = side.train_state(side.args, torch.Generator().manual_seed(5), runner.obs)
        _, batch, stats = ppo_torch.rollout(env_step, side.args, state, runner)
        batch, stats = (
            batch._replace(**{k: v[0] for k, v in batch._asdict().items()}),
            {k: v[0] for k, v in stats.items()},
        )
    else:
        rollout = side.jit(partial(module.rollout, env, env_params, args))
        _, batch, stats = rollout(side.training()[0], runner)
    batch = {key: np.asarray(value) for key, value in batch._asdict().items()}
    stats = {key: float(value) for key, value in stats.items()}
    permutations = np.stack([np.random.default_rng(e).permutation(args.batch_size) for e in (0, 1)])
    after, losses = side.update(batch, permutations.astype(np.int32))
    return Iteration(spec, before, after, batch, stats, losses)

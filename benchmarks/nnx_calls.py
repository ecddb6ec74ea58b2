"""What a call costs the host in each way of calling ppo_nnx.py's jitted rollout and update, beside
ppo_linen.py's jax.jit: NNX's graph mode (`jit`: the modules walked at every call;
`cached_partial`: walked once, at binding), its tree mode (`tree`: the modules flattened as
pytrees) and the functional path of Flax's performance guide (`nnx.split` once, `jax.jit` over the
pure state, `nnx.merge` inside: this benchmark's, not a --compile mode).

Each way is built as the scripts' main() builds it (an agents axis of one, the functions vmapped,
then jitted), on CleanRL ppo.py's batch, where a call is short. One process holds every way, each
compiled and warmed before it is timed; rounds take the ways in a rotating order. Per iteration (a
rollout, then an update on its batch): "dispatch", the time until both calls have handed back their
(still running) results, the host's own work around the device's; "iteration", the time until both
are done. The table gives the medians over rounds of each round's median.

    python -m benchmarks.nnx_calls --rounds 7 --out results/benchmarks/nnx_calls_cpu.json
"""

import argparse
import statistics
import time
from dataclasses import asdict
from functools import partial

import jax
import pandas as pd
from flax import nnx

import ppo_linen
import ppo_nnx
from analysis.common import markdown_table
from atomic import check_outputs
from benchmarks.common import (
    OUT_HELP,
    check_choices,
    check_counts,
    check_envs,
    check_or_exit,
    machine,
    show_table,
)
from benchmarks.purejaxrl_runs import SETTINGS

TOOL = "benchmarks.nnx_calls"
WAYS = ("linen jit", "nnx jit", "nnx cached_partial", "nnx tree", "nnx functional")
# CleanRL ppo.py's batch: 4 envs x 128 steps, 4 epochs of 4 minibatches
CLEANRL = SETTINGS["cleanrl"]


def reset(module, env, env_params, args, key):
    return jax.jit(jax.vmap(partial(module.reset_envs, env, env_params, num_envs=args.num_envs)))(
        key
    )


def linen_calls(args, env, env_params, keys):
    """(rollout(runner) -> (runner, batch), update(batch) -> what to wait for, the first runner)."""
    env_key, init_key, update_key = keys
    runner = reset(ppo_linen, env, env_params, args, env_key)
    agent = ppo_linen.Agent(ppo_linen.MODEL_SIZES[args.model_size], env.num_actions, env.continuous)
    tx, _ = ppo_linen.make_optimizer(args)
    params = jax.jit(jax.vmap(lambda key: agent.init(key, runner.obs[0])))(init_key)
    create = partial(ppo_linen.TrainState.create, apply_fn=agent.apply, tx=tx)
    state = jax.jit(jax.vmap(lambda p: create(params=p)))(params)
    rollout_fn = jax.jit(jax.vmap(partial(ppo_linen.rollout, env, env_params, args)))
    update_fn = jax.jit(jax.vmap(partial(ppo_linen.update, args)))
    return (*state_calls(rollout_fn, update_fn, state, update_key), runner)


def state_calls(rollout_fn, update_fn, state, key):
    """rollout and update over functions of the state, which the update hands back:
    rollout_fn(state, runner) -> (runner, batch, stats), update_fn(state, batch, key) -> (state,
    key, losses)."""
    carry = {"state": state, "key": key}

    def rollout(runner):
        runner, batch, _ = rollout_fn(carry["state"], runner)
        return runner, batch

    def update(batch):
        carry["state"], carry["key"], losses = update_fn(carry["state"], batch, carry["key"])
        return carry["state"], losses

    return rollout, update


def nnx_calls(way: str, args, env, env_params, keys):
    """As linen_calls, for ppo_nnx.py's functions called in one of the ways."""
    env_key, init_key, update_key = keys
    runner = reset(ppo_nnx, env, env_params, args, env_key)
    shape = (runner.obs.shape[-1], ppo_nnx.MODEL_SIZES[args.model_size], env.num_actions)
    tx, _ = ppo_nnx.make_optimizer(args)

    @nnx.jit
    @nnx.vmap
    def build(key):
        agent = ppo_nnx.Agent(*shape, env.continuous, nnx.Rngs(key))
        return agent, nnx.Optimizer(agent, tx, wrt=nnx.Param)

    agent, optimizer = build(init_key)
    graph = way != "nnx tree"
    rollout_fn = nnx.vmap(partial(ppo_nnx.rollout, env, env_params, args), graph=graph)
    update_fn = nnx.vmap(partial(ppo_nnx.update, args), graph=graph)
    if way == "nnx functional":
        graphdef, state = nnx.split((agent, optimizer))
        return (*functional_calls(graphdef, rollout_fn, update_fn, state, update_key), runner)
    carry = {"key": update_key}
    bind = nnx.cached_partial if way == "nnx cached_partial" else partial
    rollout_fn = bind(nnx.jit(rollout_fn, graph=graph), agent)
    update_fn = bind(nnx.jit(update_fn, graph=graph), agent, optimizer)

    def rollout(runner):
        runner, batch, _ = rollout_fn(runner)
        return runner, batch

    def update(batch):
        carry["key"], losses = update_fn(batch, carry["key"])
        return (agent, optimizer), losses

    return rollout, update, runner


def functional_calls(graphdef, rollout_fn, update_fn, state, key):
    """The functional path: jax.jit over the state, the modules merged inside each call."""

    @jax.jit
    def rollout_state(state, runner):
        agent, _ = nnx.merge(graphdef, state)
        return rollout_fn(agent, runner)

    @jax.jit
    def update_state(state, batch, key):
        agent, optimizer = nnx.merge(graphdef, state)
        key, losses = update_fn(agent, optimizer, batch, key)
        return nnx.state((agent, optimizer)), key, losses

    return state_calls(rollout_state, update_state, state, key)


def timed_iterations(rollout, update, runner, iterations: int) -> tuple:
    """The last runner, and the medians of `iterations` iterations' dispatch and whole times, in
    seconds."""
    dispatch, whole = [], []
    for _ in range(iterations):
        start = time.perf_counter()
        runner, batch = rollout(runner)
        pending = update(batch)
        dispatched = time.perf_counter()
        jax.block_until_ready(pending)
        dispatch.append(dispatched - start)
        whole.append(time.perf_counter() - start)
    timing = {"dispatch_s": statistics.median(dispatch), "iteration_s": statistics.median(whole)}
    return runner, timing


def built(way: str, opts) -> tuple:
    """(rollout, update, the first runner) of one way, for the options' env and size, seed 1."""
    shared = dict(env=opts.env, model_size=opts.model_size, **asdict(CLEANRL))
    env, env_params = ppo_nnx.make_env(opts.env)
    seeds = jax.numpy.arange(1, 2)
    keys = jax.vmap(lambda seed: tuple(jax.random.split(jax.random.key(seed), 3)))(seeds)
    if way == "linen jit":
        return linen_calls(ppo_linen.Args(**shared), env, env_params, keys)
    return nnx_calls(way, ppo_nnx.Args(**shared), env, env_params, keys)


def measure(opts) -> list[dict]:
    """One row per way: the medians over rounds; the ways rotate their order each round."""
    calls, runners = {}, {}
    for way in opts.ways:
        *calls[way], runner = built(way, opts)
        # compiled and warmed before any timing
        runners[way], _ = timed_iterations(*calls[way], runner, 3)
    results = {way: [] for way in opts.ways}
    for index in range(opts.rounds):
        shift = index % len(opts.ways)
        for way in opts.ways[shift:] + opts.ways[:shift]:
            runners[way], timing = timed_iterations(*calls[way], runners[way], opts.iterations)
            results[way].append(timing)
            print(f"round {index + 1}/{opts.rounds} {way}: {timing}", flush=True)
    rows = []
    for way, timings in results.items():
        row = {"way": way, "rounds": opts.rounds, "iterations": opts.iterations}
        for column in ("dispatch_s", "iteration_s"):
            row[column] = statistics.median(timing[column] for timing in timings)
            row[f"{column}_all"] = [timing[column] for timing in timings]
        rows.append(row)
    return rows


def markdown(rows: list[dict], opts) -> str:
    table = pd.DataFrame(rows).set_index("way")
    columns = {"dispatch ms/it": "dispatch_s", "iteration ms/it": "iteration_s"}
    shown = pd.DataFrame({name: table[column] * 1e3 for name, column in columns.items()})
    if "linen jit" in table.index:
        for name, column in columns.items():
            shown[f"{name.split()[0]} vs linen"] = table[column] / table.loc["linen jit", column]
    batch = f"{CLEANRL.num_envs} envs x {CLEANRL.num_steps} steps"
    update = f"{CLEANRL.update_epochs} epochs x {CLEANRL.num_minibatches} minibatches"
    title = (
        f"**{opts.env}, {opts.model_size}**, CleanRL's batch ({batch}, {update}), one agent; "
        f"medians of {opts.rounds} rounds of {opts.iterations} iterations; "
        f"jax {jax.__version__}, backend {jax.default_backend()}"
    )
    return f"{title}\n\n{markdown_table(shown.reset_index())}\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--model-size", default="small", help=", ".join(ppo_nnx.MODEL_SIZES))
    parser.add_argument("--ways", nargs="+", default=list(WAYS), help=", ".join(WAYS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=50, help="iterations timed per round")
    parser.add_argument("--out", help=OUT_HELP)
    opts = parser.parse_args()
    check_or_exit(lambda: check_options(opts))
    rows = measure(opts)
    record = {"machine": machine(), "jax": jax.__version__, "rows": rows}
    show_table(TOOL, opts.out, record, markdown(rows, opts))


def check_options(opts) -> None:
    """BadOption or OutputRefused (atomic.py), before anything is measured."""
    check_counts(opts, "rounds", "iterations")
    check_choices("--model-size", [opts.model_size], list(ppo_nnx.MODEL_SIZES))
    check_choices("--ways", opts.ways, WAYS)
    check_envs("--env", [opts.env])
    if opts.out:
        check_outputs(TOOL, opts.out)


if __name__ == "__main__":
    main()

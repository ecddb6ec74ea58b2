"""Measures the step cost of each gymnax environment: the "env complexity" axis of benchback-rl.

For each env: the jitted, vmapped `env.step` over `--num-envs` envs with random actions, 10 warm-up and
100 timed calls, each behind `jax.block_until_ready`. The per-step time is summarised by a 10 % trimmed
mean (and the median, IQR, mean, std, min, max); `ratio` is the trimmed mean over that of the fastest env.
Keys and actions are drawn before timing, so only the env step itself is timed.

    python env_timing.py                                  # the study's envs -> results/env_timing.json
    python env_timing.py --envs CartPole-v1,Acrobot-v1 --num-envs 64 --out /tmp/timing.json
"""

import json
import os
import platform
import socket
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import version

import gymnax
import jax
import numpy as np
import tyro
from scipy import stats

import study

TRIM = 0.1  # cut 10 % at each end for the trimmed mean


@dataclass(frozen=True)
class Args:
    envs: tyro.conf.UseAppendAction[tuple[str, ...]] = ()
    """gymnax env ids, comma-separated or repeated (--envs A,B --envs C); empty: the envs of the study (study.toml)"""
    num_envs: int = 4096
    """the number of environments stepped at once (vmapped)"""
    warmup_steps: int = 10
    """untimed steps before timing (the first one compiles)"""
    timed_steps: int = 100
    """timed steps per env, each ended by jax.block_until_ready"""
    seed: int = 0
    """seed of the keys for the resets, the steps and the random actions"""
    out: str = "results/env_timing.json"
    """the JSON file to write"""


def env_list(args: Args) -> list[str]:
    """The envs asked for, in order, without duplicates; the study's envs when none are given."""
    names = [name.strip() for item in args.envs for name in item.split(",") if name.strip()]
    return list(dict.fromkeys(names)) or list(study.load().envs)


def check_args(args: Args, envs: list[str]) -> None:
    """Refuses bad input with one line naming the bad value and the valid choices."""
    unknown = [name for name in envs if name not in gymnax.registered_envs]
    if unknown:
        raise ValueError(f"unknown env {', '.join(map(repr, unknown))}; valid envs: {', '.join(gymnax.registered_envs)}")
    for name in ("num_envs", "warmup_steps", "timed_steps"):
        if getattr(args, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(args, name)}")


def make_stepper(env, env_params):
    """The jitted, vmapped step: (keys, states, actions) -> (obs, states, reward, terminated, truncated, info)."""
    vmapped_step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    return jax.jit(lambda keys, state, action: vmapped_step(keys, state, action, env_params))


def random_inputs(key, env, env_params, num_envs: int, num_calls: int):
    """Per call: num_envs step keys and num_envs random actions, sliced before any timing starts."""
    key_key, action_key = jax.random.split(key)
    keys = jax.random.split(key_key, (num_calls, num_envs))
    sample = jax.vmap(jax.vmap(env.action_space(env_params).sample))
    actions = sample(jax.random.split(action_key, (num_calls, num_envs)))
    return jax.block_until_ready([(keys[i], actions[i]) for i in range(num_calls)])


def time_env(env_id: str, args: Args) -> dict:
    """Step times (ms) of one env, plus its observation and action sizes."""
    env, env_params = gymnax.make(env_id)
    reset_key, input_key = jax.random.split(jax.random.key(args.seed))
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, args.num_envs), env_params)
    step = make_stepper(env, env_params)
    num_calls = args.warmup_steps + args.timed_steps
    inputs = random_inputs(input_key, env, env_params, args.num_envs, num_calls)
    times_ms = []
    for i, (keys, actions) in enumerate(inputs):
        start = time.perf_counter()
        obs, state, *_ = jax.block_until_ready(step(keys, state, actions))
        if i >= args.warmup_steps:
            times_ms.append((time.perf_counter() - start) * 1e3)
    action_space = env.action_space(env_params)
    summary = summarise(np.array(times_ms))
    return {
        "obs_shape": list(obs.shape[1:]),
        "obs_dim": int(np.prod(obs.shape[1:])),
        "action_space": type(action_space).__name__,
        "num_actions": int(action_space.n) if hasattr(action_space, "n") else None,
        **summary,
        "env_steps_per_s": args.num_envs / summary["ms_per_step"] * 1e3,
    }


def summarise(times_ms: np.ndarray) -> dict:
    q1, median, q3 = np.percentile(times_ms, [25, 50, 75])
    return {
        "ms_per_step": float(stats.trim_mean(times_ms, TRIM)),
        "median_ms": float(median),
        "iqr_ms": float(q3 - q1),
        "mean_ms": float(times_ms.mean()),
        "std_ms": float(times_ms.std(ddof=1)),
        "min_ms": float(times_ms.min()),
        "max_ms": float(times_ms.max()),
    }


def add_ratios(results: dict) -> None:
    """ratio = ms_per_step / that of the fastest env (1.0 for the fastest)."""
    fastest = min(r["ms_per_step"] for r in results.values())
    for r in results.values():
        r["ratio"] = r["ms_per_step"] / fastest


def metadata(args: Args) -> dict:
    return {
        "device": jax.devices()[0].device_kind,
        "backend": jax.default_backend(),
        "versions": {"python": platform.python_version(), **{p: version(p) for p in ("jax", "jaxlib", "gymnax", "scipy")}},
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "date": datetime.now(timezone.utc).isoformat(),
        "num_envs": args.num_envs,
        "warmup_steps": args.warmup_steps,
        "timed_steps": args.timed_steps,
        "trim": TRIM,
        "seed": args.seed,
    }


def print_table(results: dict) -> None:
    print(f"{'env':<24} {'obs':>5} {'act':>4} {'ms/step':>9} {'median':>9} {'IQR':>8} {'ratio':>7}")
    for name, r in results.items():
        num_actions = "-" if r["num_actions"] is None else r["num_actions"]
        print(f"{name:<24} {r['obs_dim']:>5} {num_actions:>4} {r['ms_per_step']:>9.4f} "
              f"{r['median_ms']:>9.4f} {r['iqr_ms']:>8.4f} {r['ratio']:>7.2f}")


def main():
    args = tyro.cli(Args)
    envs = env_list(args)
    try:
        check_args(args, envs)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"timing {len(envs)} envs x {args.num_envs} on {jax.devices()[0].device_kind}: "
          f"{args.warmup_steps} warm-up + {args.timed_steps} timed steps each", flush=True)
    results = {}
    for env_id in envs:
        results[env_id] = time_env(env_id, args)
        print(f"  {env_id}: {results[env_id]['ms_per_step']:.4f} ms/step", flush=True)
    add_ratios(results)
    print_table(results)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({**metadata(args), "envs": results}, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""Measures the step cost of each environment of the study: the "env complexity" axis of
benchback-rl.

For each env: the jitted batched step over `--num-envs` envs with random actions, as the PPO scripts
step them (gymnax: the vmapped `env.step`; Craftax, Brax and envpool: their adapter's batched step,
from env_adapters.py), 10 warm-up and 100 timed calls, each behind `jax.block_until_ready`. All
include their auto-reset (Brax's halfcheetah ends its episodes at step 1000 only, so its timed steps
reset nothing). Random actions are uniform: over the choices of a discrete env, within the bounds of
a continuous (Box) one, as float32 vectors. The per-step time is summarised by a 10 % trimmed mean
(and the median, IQR, mean, std, min, max). Keys and actions are drawn before timing, so only the
env step itself is timed.

`ratio` compares the cost of one env step: the trimmed mean over the env's num_envs
(`us_per_env_step`), over that of the cheapest env. Every env is stepped --num-envs at once (4096),
but on a CPU the study's expensive envs (Craftax, Brax) --expensive-num-envs at once (256): a timing
at 4096 Craftax worlds took over 9 GB there (2 cores), Craftax-Symbolic ~1.2 s a call; at 256, 2 GB
and 60 ms a call. The cost per env step hardly depends on the batch from 256 envs up (Classic 75,
70, 80 us at 256, 1024, 4096 envs; Craftax 232, 286 us at 256, 1024), while the cheap envs need the
large batch for their cost per env step to be compute rather than call overhead. On a GPU every env
gets --num-envs. Each env's num_envs is recorded with its times. num_actions: a discrete env's
number of choices, a continuous env's action length.

An env on envpool (CPU simulators, whatever JAX's device) is named by its env label, "{id}@envpool"
(core/study.py), the key of its times in the file, beside the gymnax env of the same id: the
adapter's batched step through its host callback, inside the same jitted call and timing loop,
--envpool-num-envs at once (1024) with --env-threads threads (0, the scripts' default: envpool's
own, one a core; bench.sh --cpus N gives N). Its cost per env step is that of a C++ loop over the
envs: flat from about a thousand envs (CartPole-v1, 1 thread: 23, 5.1, 3.4, 3.8 us at 32, 256, 1024,
4096 envs, where the call's fixed cost fades), and MuJoCo's 60-115 us would take 40 s an env at
4096. Random actions as above.

    # the study's envs -> results/env_timing.json
    python -m sweep.env_timing
    python -m sweep.env_timing --envs CartPole-v1,Acrobot-v1 --num-envs 64 --out /tmp/timing.json
    # both backends
    python -m sweep.env_timing --envs CartPole-v1,CartPole-v1@envpool --out /tmp/timing.json

--out replaces only an env-timing file (core/env_timing_file.py) whose envs this call all times
again: another file there (notes, a file with a nonsense cost) or one with more envs is refused in
one line, exit status 2, before any timing."""

import os
import platform
import socket
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import version
from typing import Callable, NamedTuple, Optional

import gymnax
import jax
import numpy as np
import tyro
from scipy import stats

import env_adapters
from atomic import MAX_JSON_BYTES, check_inside, check_replaceable, write_json
from core import env_ids, env_timing_file, study
from core.option_checks import check_int

TRIM = 0.1  # cut 10 % at each end for the trimmed mean
CPU_EXPENSIVE_NUM_ENVS = 256  # the default --expensive-num-envs on a CPU (see the docstring)


@dataclass(frozen=True)
class Args:
    envs: tyro.conf.UseAppendAction[tuple[str, ...]] = ()
    """env labels (gymnax, Craftax or Brax ids; ID@envpool on envpool), comma-separated or repeated
    (--envs A,B --envs C); empty: every env of the study (study.toml: envs, continuous_envs,
    expensive_envs, envpool_envs)"""
    num_envs: int = 4096
    """the number of environments stepped at once (vmapped)"""
    expensive_num_envs: Optional[int] = None
    """the number stepped at once for the study's expensive envs (Craftax, Brax); default: 256 on a
    CPU, else --num-envs"""
    envpool_num_envs: int = 1024
    """the number stepped at once for an env on envpool (a CPU simulator on any device)"""
    env_threads: int = 0
    """envpool's worker threads (0: envpool's default, one per core), as the scripts' --env-threads
    """
    warmup_steps: int = 10
    """untimed steps before timing (the first one compiles)"""
    timed_steps: int = 100
    """timed steps per env, each ended by jax.block_until_ready"""
    seed: int = 0
    """seed of the keys for the resets, the steps and the random actions"""
    out: str = "results/env_timing.json"
    """the JSON file to write"""


def env_list(args: Args) -> list[str]:
    """The envs asked for, in order, without duplicates; every env of the study when none are
    given."""
    names = [name.strip() for item in args.envs for name in item.split(",") if name.strip()]
    return list(dict.fromkeys(names)) or list(study.load().every_env)


def check_timing_args(args: Args, envs: list[str]) -> None:
    """Refuses bad input (ValueError, option_checks.BadOption among them) with one line naming the
    bad value and the valid choices."""
    envpool = [study.env_label(env, "envpool") for env in env_adapters.ENVPOOL_ENVS]
    valid = [*gymnax.registered_envs, *env_adapters.adapted_envs(), *envpool]
    unknown = [name for name in envs if name not in valid]
    if unknown:
        raise ValueError(
            f"unknown env {', '.join(map(repr, unknown))}; valid envs: {', '.join(valid)}"
        )
    counts = ("num_envs", "warmup_steps", "timed_steps", "expensive_num_envs", "envpool_num_envs")
    for name in counts:
        value = getattr(args, name)
        if value is not None:
            check_int(f"--{name.replace('_', '-')}", value, 1)
    # 0: envpool's default, one thread per core
    check_int("--env-threads", args.env_threads, 0)
    # the range that JAX keys and envpool both take
    check_int("--seed", args.seed, 0, 2**31 - 1)


def read_head(path) -> bytes:
    """The file's first bytes, one more than the JSON reader takes: a larger file is refused, never
    read whole."""
    with open(path, "rb") as f:
        return f.read(MAX_JSON_BYTES + 1)


def check_out_file(out: str, envs: list[str]) -> None:
    """Refuses (ValueError), before any timing, an --out that cannot be written, or that holds a
    file this call must not replace: one that is not a usable env-timing file, or one with envs this
    call does not time (it would be replaced by fewer)."""
    if not out:
        raise ValueError("--out '' is empty; give a JSON file name")
    if os.path.isdir(out):
        raise ValueError(f"--out {out!r} is a folder; give a JSON file name")

    def why_not(text: str) -> Optional[str]:
        try:
            have = env_timing_file.loads(text, out)["envs"]
        except env_timing_file.BadTiming as e:
            return f"is not a file sweep/env_timing.py wrote ({e.reason})"
        dropped = [env for env in have if env not in envs]
        if dropped:
            return (
                f"holds envs this call does not time ({', '.join(dropped)}; give them to --envs "
                "too)"
            )
        return None

    check_replaceable("--out", out, why_not, read=read_head)


def expensive_num_envs(args: Args) -> int:
    if args.expensive_num_envs is not None:
        return args.expensive_num_envs
    return CPU_EXPENSIVE_NUM_ENVS if jax.default_backend() == "cpu" else args.num_envs


def on_envpool(label: str) -> bool:
    return study.split_label(label)[1] == "envpool"


def batch_size(env_id: str, args: Args) -> int:
    """How many envs of this env (an env label) are stepped at once."""
    if on_envpool(env_id):
        return args.envpool_num_envs
    return expensive_num_envs(args) if env_id in study.load().expensive_envs else args.num_envs


class BatchedEnv(NamedTuple):
    """An env as the PPO scripts step it: a batch at a time, one key per env."""

    reset: Callable  # (keys, params) -> (obs, states)
    # (keys, states, actions, params) -> (obs, states, reward, terminated, truncated, info)
    step: Callable
    action_space: object
    params: object


def adapter_space(env):
    """The gymnax space of an adapted env's actions: a Box within its action_bounds (float32), else
    Discrete."""
    spaces = gymnax.environments.spaces
    if env.continuous:
        low, high = env.action_bounds
        return spaces.Box(low, high, (env.num_actions,), np.float32)
    return spaces.Discrete(env.num_actions)


def make_env(env_id: str, num_envs: int = 0, seed: int = 0, env_threads: int = 0) -> BatchedEnv:
    """An env label's env: on envpool, a pool of num_envs envs (seed, env_threads threads), an
    adapted env (Craftax, Brax) from env_adapters.py, else the gymnax env, vmapped as the scripts'
    GymnaxBatch."""
    if on_envpool(env_id):
        env, params = env_adapters.make_envpool(
            study.split_label(env_id)[0], num_envs, seed, env_threads
        )
        return BatchedEnv(env.reset, env.step, adapter_space(env), params)
    if env_id in env_adapters.adapted_envs():
        env, params = env_adapters.make(env_id)
        return BatchedEnv(env.reset, env.step, adapter_space(env), params)
    env, params = gymnax.make(env_id)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    return BatchedEnv(reset, step, env.action_space(params), params)


def make_stepper(env: BatchedEnv):
    """The jitted batched step: (keys, states, actions) -> (obs, states, reward, terminated,
    truncated, info)."""

    def step(keys, states, actions):
        return env.step(keys, states, actions, env.params)

    return jax.jit(step)


def reset_envs(env: BatchedEnv, key, num_envs: int):
    """(obs, states) of num_envs envs, jitted (not timed; Craftax's world generation and Brax's
    resets are slow op by op)."""
    return jax.jit(env.reset)(jax.random.split(key, num_envs), env.params)


def random_inputs(key, env: BatchedEnv, num_envs: int, num_calls: int):
    """Per call: num_envs step keys and num_envs random actions, sliced before any timing starts."""
    key_key, action_key = jax.random.split(key)
    keys = jax.random.split(key_key, (num_calls, num_envs))
    sample = jax.vmap(jax.vmap(env.action_space.sample))
    actions = sample(jax.random.split(action_key, (num_calls, num_envs)))
    return jax.block_until_ready([(keys[i], actions[i]) for i in range(num_calls)])


def time_env(env_id: str, args: Args) -> dict:
    """Step times (ms) of one env, plus its observation and action sizes."""
    num_envs = batch_size(env_id, args)
    env = make_env(env_id, num_envs, args.seed, args.env_threads)
    reset_key, input_key = jax.random.split(jax.random.key(args.seed))
    obs, state = reset_envs(env, reset_key, num_envs)
    step = make_stepper(env)
    num_calls = args.warmup_steps + args.timed_steps
    inputs = random_inputs(input_key, env, num_envs, num_calls)
    times_ms = []
    for i, (keys, actions) in enumerate(inputs):
        start = time.perf_counter()
        obs, state, *_ = jax.block_until_ready(step(keys, state, actions))
        if i >= args.warmup_steps:
            times_ms.append((time.perf_counter() - start) * 1e3)
    space = env.action_space
    summary = summarise(np.array(times_ms))
    threads = {"env_threads": args.env_threads} if on_envpool(env_id) else {}
    return {
        **threads,
        "obs_shape": list(obs.shape[1:]),
        "obs_dim": int(np.prod(obs.shape[1:])),
        "action_space": type(space).__name__,
        "num_actions": num_actions(space),
        "num_envs": num_envs,
        **summary,
        "us_per_env_step": summary["ms_per_step"] * 1e3 / num_envs,
        "env_steps_per_s": num_envs / summary["ms_per_step"] * 1e3,
    }


def num_actions(space) -> Optional[int]:
    """Discrete: the number of choices; a 1-D Box: the length of the action vector; else None."""
    if hasattr(space, "n"):
        return int(space.n)
    shape = getattr(space, "shape", ())
    return int(shape[0]) if len(shape) == 1 else None


def summarise(times_ms: np.ndarray) -> dict:
    q1, median, q3 = np.percentile(times_ms, [25, 50, 75])
    return {
        "ms_per_step": float(stats.trim_mean(times_ms, TRIM)),
        "median_ms": float(median),
        "iqr_ms": float(q3 - q1),
        "mean_ms": float(times_ms.mean()),
        # None: one timed step
        "std_ms": float(times_ms.std(ddof=1)) if len(times_ms) > 1 else None,
        "min_ms": float(times_ms.min()),
        "max_ms": float(times_ms.max()),
    }


def add_ratios(results: dict) -> None:
    """ratio = us_per_env_step / that of the cheapest env (1.0 for the cheapest)."""
    cheapest = min(r["us_per_env_step"] for r in results.values())
    for r in results.values():
        r["ratio"] = r["us_per_env_step"] / cheapest


def metadata(args: Args, envs: list[str]) -> dict:
    # each timed env's own packages (core/env_ids.py), once
    own = (name for env in envs for name in env_ids.packages(*study.split_label(env)))
    packages = ["jax", "jaxlib", "gymnax", "scipy", *dict.fromkeys(own)]
    return {
        "device": jax.devices()[0].device_kind,
        "backend": jax.default_backend(),
        "versions": {"python": platform.python_version(), **{p: version(p) for p in packages}},
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "date": datetime.now(timezone.utc).isoformat(),
        "num_envs": args.num_envs,
        "expensive_num_envs": expensive_num_envs(args),
        "envpool_num_envs": args.envpool_num_envs,
        "env_threads": args.env_threads,
        "warmup_steps": args.warmup_steps,
        "timed_steps": args.timed_steps,
        "trim": TRIM,
        "seed": args.seed,
    }


def print_table(results: dict) -> None:
    print(
        f"{'env':<28} {'obs':>5} {'act':>4} {'envs':>5} {'ms/step':>9} {'median':>9} {'IQR':>8} "
        f"{'us/env-step':>11} {'ratio':>7}"
    )
    for name, r in results.items():
        num_actions = "-" if r["num_actions"] is None else r["num_actions"]
        print(
            f"{name:<28} {r['obs_dim']:>5} {num_actions:>4} {r['num_envs']:>5} "
            f"{r['ms_per_step']:>9.4f} {r['median_ms']:>9.4f} {r['iqr_ms']:>8.4f} "
            f"{r['us_per_env_step']:>11.4f} {r['ratio']:>7.2f}"
        )


def main():
    args = tyro.cli(Args)
    envs = env_list(args)
    try:
        check_timing_args(args, envs)
        check_out_file(args.out, envs)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(
        f"timing {len(envs)} envs ({args.num_envs} at once; expensive ones "
        f"{expensive_num_envs(args)}; on envpool {args.envpool_num_envs} with {args.env_threads} "
        f"threads) on {jax.devices()[0].device_kind}: {args.warmup_steps} warm-up + "
        f"{args.timed_steps} timed steps each",
        flush=True,
    )
    results = {}
    for env_id in envs:
        results[env_id] = time_env(env_id, args)
        print(f"  {env_id}: {results[env_id]['ms_per_step']:.4f} ms/step", flush=True)
    add_ratios(results)
    print_table(results)
    # renamed into place: an interrupted write leaves the old file whole; its folder made only now.
    # --out is the user's: followed wherever it leads (given), as check_out_file checked it
    check_inside(args.out, args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, {**metadata(args, envs), "envs": results}, given=args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

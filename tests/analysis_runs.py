"""Made-up inputs of the analysis (plot_results.py), every number known in advance: run folders as
the ppo_*.py scripts write them (write_run, with durations from the factors below), runs.csv files
(csv_run, write_csv, write_runs_csv), env timings (write_timing); and plot_results run as from the
command line (analyse), what it drew (analysis_of, has_data) and the files it left (snapshot)."""

import io
import itertools
import json
import statistics
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from tensorboardX import SummaryWriter

import plot_results
from analysis import figures, plotting, results
from analysis.loading import load_runs, read_env_timing
from core import study
from helpers import STUDY

NUM_ENVS, NUM_STEPS, ITERATIONS = 4, 8, 11  # iterations 0, 1-7 and 8-10: every window is populated
BATCH = NUM_ENVS * NUM_STEPS
DEFAULT_MODES = [(name, framework.default_compile) for name, framework in STUDY.frameworks.items()]

# Duration factors: each run's times are products of these, so every speedup is known.
FRAMEWORK_FACTOR = {"linen": 1.0, "nnx": 1.25, "equinox": 1.5, "torch": 5.0, "fake": 2.0}
SEED_FACTOR = {1: 1.0, 2: 1.2}
# three envs: enough for an interval
ENV_FACTOR = {"CartPole-v1": 1.0, "Acrobot-v1": 2.0, "MountainCar-v0": 3.0}
EXPENSIVE_FACTOR = dict(zip(STUDY.expensive_envs, [6.0, 9.0]))  # exp5's envs
# their step cost in the synthetic env timing
EXPENSIVE_COST = dict(zip(STUDY.expensive_envs, [500.0, 2000.0]))
CONTINUOUS_FACTOR = dict(zip(STUDY.continuous_envs, [1.5, 2.5, 3.5, 4.5]))  # exp6's envs
CONTINUOUS_COST = dict(zip(STUDY.continuous_envs, [1.5, 2.5, 4.0, 6.0]))
MUJOCO_FACTOR = {"HalfCheetah-v4": 4.0, "Hopper-v4": 5.0}  # exp8's envs (on envpool)
# an envpool run's times, relative to its gymnax twin's: the CPU env costs the JAX frameworks more
# than torch
ENVPOOL_FACTOR = {"linen": 3.0, "nnx": 3.0, "equinox": 3.0, "torch": 1.5, "fake": 2.0}
ENVPOOL_COST = {
    **{f"{env}@envpool": 30.0 + 5 * i for i, env in enumerate(ENV_FACTOR)},  # exp7's envpool envs
    **{f"{env}@envpool": cost for env, cost in zip(MUJOCO_FACTOR, [800.0, 1200.0])},  # exp8's
}
# a bfloat16 run's times, relative to its float32 twin's: slower for JAX, faster for torch (the
# ranking flips)
DTYPE_FACTOR = {"linen": 2.0, "nnx": 2.0, "equinox": 2.5, "torch": 0.5, "fake": 1.0}
SIZE_FACTOR = {"small": 1.0, "medium": 2.0, "large": 4.0}
TAG_FACTOR = {"linux": 1.0, "mac": 3.0}
# time/iteration relative to the steady state: iteration 0 compiles, 1-7 warm up, 8+ drift a little
WINDOW_SHAPE = [20.0] + [3.0] * 7 + [1.0 + 0.1 * (i - 8) for i in range(8, ITERATIONS)]


def own_figure() -> bytes:
    """A PNG as plot_results saves a figure (with its text chunk): a figure of an earlier call."""
    fig = plotting.plt.figure(figsize=(1, 1))
    data = io.BytesIO()
    figures.save_figure(fig, data)
    return data.getvalue()


def known_durations(env, framework, size, seed, tag, factor=1.0) -> dict:
    """time/iteration per iteration, rollout/update shares and total_s of a synthetic run."""
    env_factor = {**ENV_FACTOR, **CONTINUOUS_FACTOR, **EXPENSIVE_FACTOR, **MUJOCO_FACTOR}.get(
        env, 1.0
    )
    base = (
        0.01
        * factor
        * FRAMEWORK_FACTOR[framework]
        * SEED_FACTOR.get(seed, 1.0)
        * env_factor
        * SIZE_FACTOR[size]
        * TAG_FACTOR[tag]
    )
    iteration = [base * w for w in WINDOW_SHAPE]
    return {
        "iteration": iteration,
        "rollout": [0.4 * t for t in iteration],
        "update": [0.5 * t for t in iteration],
        "total_s": 1.5 + sum(iteration),
    }


# each run written starts an hour after the one before
START, STARTS = datetime(2025, 1, 1, tzinfo=timezone.utc), itertools.count()


def tie_events(run_dir: Path, config: dict) -> Path:
    """The events file of run_dir renamed as tensorboardX names it on config.json's host at its
    start_time (runlog ties a run's events file to its config.json by both)."""
    (events,) = run_dir.glob("events.out.tfevents.*")
    start = int(datetime.fromisoformat(config["start_time"]).timestamp())
    return events.rename(run_dir / f"events.out.tfevents.{start}.{config['hostname']}")


def write_run(
    root: Path,
    env,
    framework,
    size,
    compile_mode,
    seed,
    sync,
    tag="linux",
    status="completed",
    iterations=ITERATIONS,
    events=True,
    factor=1.0,
    old_config=False,
    backend=None,
    dtype=None,
) -> dict:
    """One run folder as ppo_*.py writes it; returns its config plus its known durations and its env
    label. old_config: as the scripts wrote it before "device_name", "command" and "import_s"
    existed; backend: its --env-backend (config.json env_backend; None: a run of before the
    backends, with none); dtype: its --dtype (config.json dtype and cpu_bf16; None: a run of before
    --dtype, with neither)."""
    label = study.env_label(env, backend or "gymnax")
    backend_args = ["--env-backend", backend] if backend else []
    backend_args += ["--dtype", dtype] if dtype else []
    number = len(list(root.rglob("config.json")))
    name = f"{label}__{framework}__{size}__{compile_mode}__{seed}__{1_700_000_000 + number}"
    run_dir = root / tag / name
    run_dir.mkdir(parents=True)
    config = {
        "exp_name": "two words",  # as its command says
        "env": env,
        "model_size": size,
        "seed": seed,
        "num_envs": NUM_ENVS,
        "num_steps": NUM_STEPS,
        "num_iterations": ITERATIONS,
        "compile": compile_mode,
        "sync_timing": sync,
        "tag": tag,
        "framework": framework,
        "batch_size": BATCH,
        "minibatch_size": BATCH // 2,
        "versions": {"python": "3.11.0", "jax": "0.6.0"},
        "platform": "Linux-test",
        "hostname": f"{tag}-host",
        # a start of its own: one command started on one host at one time is one run
        "start_time": (START + timedelta(hours=next(STARTS))).isoformat(),
    }
    if old_config:
        config["device"] = "cpu"
    else:
        config.update(
            device="auto",
            device_name="Test GPU 9000",
            command=[f"ppo_{framework}.py", "--env", env, *backend_args, "--exp-name", "two words"],
        )
    if backend is not None:
        config["env_backend"] = backend
        factor *= ENVPOOL_FACTOR[framework] if backend == "envpool" else 1.0
    if dtype is not None:
        config.update(dtype=dtype, cpu_bf16=["avx512_bf16"])
        factor *= DTYPE_FACTOR[framework] if dtype == "bfloat16" else 1.0
    durations = known_durations(env, framework, size, seed, tag, factor)
    (run_dir / "config.json").write_text(json.dumps(config))
    if events:
        writer = SummaryWriter(str(run_dir))
        wall = datetime.fromisoformat(config["start_time"]).timestamp() + 1.5  # after the setup
        for i in range(iterations):
            step = (i + 1) * BATCH
            # the run's own clock: its events are written within total_s
            wall += durations["iteration"][i]
            for part in ("iteration", "rollout", "update"):
                writer.add_scalar(f"time/{part}", durations[part][i], step, walltime=wall)
            # the scripts skip the episode points of an iteration in which no episode ended
            if i % 3 == 2:
                writer.add_scalar("charts/episodic_return", 10.0 * i, step, walltime=wall)
        writer.close()
        tie_events(run_dir, config)
    # the mean return of the last 10 iterations with an episode's end, as bookkeeping.py makes
    # final_return
    returns = [10.0 * i for i in range(iterations)[-10:] if i % 3 == 2]
    summary = {
        "status": status,
        "iterations_completed": iterations,
        "setup_s": 1.5,
        "total_s": durations["total_s"],
        "final_return": statistics.mean(returns) if returns else None,
    }
    if not old_config:
        summary["import_s"] = 0.7
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return {
        **config,
        **durations,
        "dtype": dtype or "float32",
        "label": label,
        "run_dir": run_dir,
        "steady": statistics.mean(durations["iteration"][8:]),
        "rollout8": statistics.mean(durations["rollout"][8:]),
        "update8": statistics.mean(durations["update"][8:]),
    }


def write_timing(path: Path) -> Path:
    envs = {
        "CartPole-v1": {"obs_dim": 4, "num_actions": 2, "ms_per_step": 0.1, "ratio": 1.0},
        "Acrobot-v1": {"obs_dim": 6, "num_actions": 3, "ms_per_step": 0.3, "ratio": 3.0},
        "MountainCar-v0": {"obs_dim": 2, "num_actions": 3, "ms_per_step": 0.2, "ratio": 2.0},
        **{
            env: {"obs_dim": 1345, "num_actions": 17, "ms_per_step": 0.1 * cost, "ratio": cost}
            for env, cost in EXPENSIVE_COST.items()
        },
        **{
            env: {"obs_dim": 8, "num_actions": 2, "ms_per_step": 0.1 * cost, "ratio": cost}
            for env, cost in {**CONTINUOUS_COST, **ENVPOOL_COST}.items()
        },
    }
    path.write_text(
        json.dumps({"device": "cpu", "versions": {"jax": "0.6.0"}, "num_envs": 4096, "envs": envs})
    )
    return path


def write_runs_csv(path: Path, runs: list[tuple[str, str, int, float]]) -> Path:
    """A runs.csv of exp1 runs (env, framework, seed, total_s), every iteration taking 0.1 s (within
    total_s)."""
    rows = [
        {
            "run": f"{env}__{framework}__{seed}",
            "sweep": "exp1",  # bench.sh's exp1 folder: in exp1 alone (by the matrix, exp7 too)
            "iteration": i,
            "time/iteration": 0.1,
            "env": env,
            "framework": framework,
            "model_size": "small",
            "compile": STUDY.default_compile(framework),
            "seed": seed,
            "sync_timing": False,
            "batch_size": BATCH,
            "num_iterations": 10,
            "tag": "t",
            "status": "completed",
            "total_s": total,
        }
        for env, framework, seed, total in runs
        for i in range(10)
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def analysis_of(runs_csv: Path, timing: Path | None) -> results.Results:
    """The Results plot_results.main draws its figures from."""
    runs, _ = load_runs([], [str(runs_csv)], STUDY)
    timing_table, _ = read_env_timing(str(timing) if timing else None)
    return results.analyse(runs, timing_table, STUDY)


ENVS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "DiscountingChain-bsuite"]
NNX_RATIO = {
    "CartPole-v1": 1.0,
    "Acrobot-v1": 1.5,
    "MountainCar-v0": 2.0,
    "DiscountingChain-bsuite": 3.0,
}


def csv_run(
    env, framework, seed, iterations=10, batch=BATCH, tag="t", host="h", completed=None
) -> list[dict]:
    """The rows of one exp1 run in a runs.csv: every iteration takes 0.1 s; nnx is NNX_RATIO[env]
    times slower."""
    total = 10.0 * (NNX_RATIO[env] if framework == "nnx" else 1.0) * (1.0 + 0.1 * seed)
    # a start time of its own
    start = f"2025-01-01T00:00:00 {env} {framework} {seed} {iterations} {batch}"
    return [
        {
            "run": f"{env}__{framework}__small__{STUDY.default_compile(framework)}__{seed}"
            "__1700000000",
            "iteration": i,
            "step": (i + 1) * batch,
            "time/iteration": 0.1,  # within total_s, even for 20 iterations
            "sweep": "exp1",  # bench.sh's exp1 folder: in exp1 alone (by the matrix, exp7 too)
            "env": env,
            "framework": framework,
            "model_size": "small",
            "compile": STUDY.default_compile(framework),
            "seed": seed,
            "tag": tag,
            "sync_timing": False,
            "num_iterations": iterations,
            "batch_size": batch,
            "hostname": host,
            "command": f"ppo_{framework}.py --env {env} --seed {seed} --tag {tag}",
            "start_time": start,
            "status": "completed",
            "iterations_completed": iterations if completed is None else completed,
            "total_s": total,
        }
        for i in range(iterations)
    ]


def write_csv(path: Path, runs: list[list[dict]]) -> Path:
    pd.DataFrame([row for run in runs for row in run]).to_csv(path, index=False)
    return path


def linen_nnx(envs, seeds=(1, 2), **options) -> list[list[dict]]:
    return [
        csv_run(env, fw, seed, **options)
        for env in envs
        for fw in ("linen", "nnx")
        for seed in seeds
    ]


class Outcome(NamedTuple):
    code: int  # exit status
    errors: list[str]  # the error lines on stderr
    stdout: str


def analyse(capsys, *args) -> Outcome:
    """plot_results.main(args), as from the command line."""
    capsys.readouterr()
    try:
        plot_results.main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = e.code
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return Outcome(
        code,
        [line for line in captured.err.splitlines() if line.startswith("error:")],
        captured.out,
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def has_data(ax) -> bool:
    """Whether a panel draws data: points, boxes or bars, or a line through data (not a reference
    line)."""
    points = any(len(collection.get_offsets()) for collection in ax.collections)
    lines = any(
        line.get_transform() is ax.transData
        and np.isfinite(np.asarray(line.get_ydata(), float)).any()
        for line in ax.lines
    )
    return bool(ax.patches) or points or lines

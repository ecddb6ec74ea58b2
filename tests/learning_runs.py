"""Made-up rows of the learning analysis (analysis/learning.py): runs of exp9's configuration for
CartPole-v1, their per-iteration rows (run_rows) and summary rows (summary_row), every number
known."""

import shlex

import numpy as np
import pandas as pd

from helpers import STUDY

EXP = "exp9"
ENV = "CartPole-v1"  # reference 490.04 +- 6.12
BATCH = 512


def run_rows(
    name: str, framework: str, seed: int, returns, seconds_per_iteration: float
) -> pd.DataFrame:
    """The per-iteration rows of one run: 10 s of setup, then seconds_per_iteration per
    iteration."""
    iterations = np.arange(len(returns))
    return pd.DataFrame(
        {
            "run": name,
            "iteration": iterations,
            "step": (iterations + 1) * BATCH,
            "time/elapsed": 10.0 + (iterations + 1) * seconds_per_iteration,
            "charts/episodic_return": returns,
        }
    )


# the runs of exp9's configuration for CartPole-v1, as bench.sh makes them
CONFIG_ARGS = STUDY.experiments[EXP].env_args(ENV)


def summary_row(
    name: str, framework: str, seed: int, final_return: float, args=CONFIG_ARGS
) -> dict:
    """The summary row of one run of exp9 (args: its configuration's flags), on one host, started at
    its own time."""
    command = [f"ppo_{framework}.py", "--env", ENV, "--seed", str(seed), *args]
    return dict(
        run=name,
        env=ENV,
        framework=framework,
        seed=seed,
        final_return=final_return,
        model_size="small",
        command=shlex.join(command),
        hostname="h",
        device_name="cpu",
        start_time=f"2025-01-01T00:00:{len(name) % 60:02d} {name}",
    )


def made_up_runs(never_reached: int = 1):
    """linen (1 s an iteration) and torch (3 s) over 3 seeds; returns 100 for 10 iterations, then
    500 for 10; `never_reached` torch seeds stay at 100."""
    late = [100.0] * 10 + [500.0] * 10
    runs, summary = [], []
    for framework, seconds in (("linen", 1.0), ("torch", 3.0)):
        for seed in (1, 2, 3):
            stuck = framework == "torch" and seed <= never_reached
            returns = [100.0] * 20 if stuck else late
            name = f"{ENV}__{framework}__{seed}"
            runs.append(run_rows(name, framework, seed, returns, seconds))
            summary.append(summary_row(name, framework, seed, float(np.mean(returns[-10:]))))
    summary = pd.DataFrame(summary).assign(
        tag="t", dtype="float32", num_iterations=20, batch_size=BATCH
    )
    masks = {name: pd.Series(name == EXP, index=summary.index) for name in STUDY.experiments}
    return pd.concat(runs, ignore_index=True), summary, masks

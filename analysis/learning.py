"""The learning experiments (study.toml: an experiment with configs): each run's final return and the time it took
to reach the reference's published return, per framework and env, and the speedups of those times.

A run's return at an iteration is smoothed: the mean episodic return over the last SMOOTHING iterations that ended
an episode (the scripts' final_return is that mean at the last iteration). Its time to a target is `time/elapsed`
(seconds from the process's first line: imports and compilation included, as total_s) at the first iteration whose
smoothed return reaches the target. Two targets per env: the reference's mean, and within 10 % of it (mean - 0.1 x
|mean|: a lower bar, also for a negative return). A run that never reaches a target is kept, as not reaching it:
the median over seeds counts it as infinitely slow, and the speedups pair only runs that both reached it.
"""

import numpy as np
import pandas as pd

from analysis.speedups import CELL_STATISTICS, PAIR_KEYS, cell_statistics, pairwise
from study import Study

RETURN = "charts/episodic_return"
ELAPSED = "time/elapsed"
SMOOTHING = 10  # iterations, as summary.json's final_return
# target -> the fraction of |mean| below the reference's mean
TARGETS = {"reference": 0.0, "within_10pct": 0.1}
TARGET_LABELS = {"reference": "the reference's mean", "within_10pct": "within 10 % of it"}
RUN_COLUMNS = [
    "experiment",
    "config",
    "env",
    "framework",
    "seed",
    "run",
    "final_return",
    "reference_mean",
    "reference_std",
    *[f"{what}_{target}" for target in TARGETS for what in ("s_to", "steps_to")],
]
TABLE_COLUMNS = [
    "experiment",
    "env",
    "framework",
    "n_runs",
    "final_mean",
    "final_std",
    "reference_mean",
    "reference_std",
    "meets_reference",
    *[f"{what}_{target}" for target in TARGETS for what in ("reached", "median_s_to")],
]


def learning_experiments(study: Study) -> list[str]:
    """The experiments read against a reference: those with configs."""
    return [name for name, exp in study.experiments.items() if exp.configs]


def target_return(mean: float, target: str) -> float:
    return mean - TARGETS[target] * abs(mean)


def smoothed_returns(rows: pd.DataFrame) -> pd.DataFrame:
    """One run's iterations (step, elapsed seconds) with its smoothed return: the mean over the last SMOOTHING
    iterations that logged a return (NaN before the first)."""
    rows = rows.sort_values("iteration")
    returns = rows[RETURN] if RETURN in rows else pd.Series(np.nan, index=rows.index)
    smoothed = returns.rolling(SMOOTHING, min_periods=1).mean()  # NaN iterations are skipped
    # never reached without it
    elapsed = rows[ELAPSED] if ELAPSED in rows else pd.Series(np.nan, index=rows.index)
    return pd.DataFrame(
        {"step": rows["step"], "elapsed": elapsed, "smoothed": smoothed}
    ).reset_index(drop=True)


def first_reach(curve: pd.DataFrame, target: float) -> tuple[float, float]:
    """(seconds, env steps) at the first iteration whose smoothed return reaches target; NaN, NaN when none does."""
    reached = curve[(curve["smoothed"] >= target) & curve["elapsed"].notna()]
    if reached.empty:
        return float("nan"), float("nan")
    first = reached.iloc[0]
    return float(first["elapsed"]), float(first["step"])


def run_row(experiment: str, config, run: pd.Series, curve: pd.DataFrame) -> dict:
    reference = config.references[run["env"]]
    row = {
        "experiment": experiment,
        "config": config.name,
        "env": run["env"],
        "framework": run["framework"],
        "seed": run["seed"],
        "run": run["run"],
        "final_return": run["final_return"],
        "reference_mean": reference.mean,
        "reference_std": reference.std,
    }
    for target in TARGETS:
        seconds, steps = first_reach(curve, target_return(reference.mean, target))
        row[f"s_to_{target}"], row[f"steps_to_{target}"] = seconds, steps
    return row


def learning_runs(runs: pd.DataFrame, summary: pd.DataFrame, masks: dict, study: Study):
    """(a row per run of a learning experiment (RUN_COLUMNS, with the PAIR_KEYS the speedups pair runs by), and
    their smoothed curves: experiment, env, framework, seed, step, elapsed, smoothed)."""
    rows, curves = [], []
    iterations = {run: group for run, group in runs.groupby("run", sort=False)}
    for experiment in learning_experiments(study):
        exp = study.experiments[experiment]
        for _, run in summary[masks[experiment]].iterrows():
            config = exp.config(run["env"])
            if config is None or run["run"] not in iterations:
                continue
            curve = smoothed_returns(iterations[run["run"]])
            keys = {key: run[key] for key in PAIR_KEYS if key != "experiment"}
            rows.append({**run_row(experiment, config, run, curve), **keys})
            names = {
                "experiment": experiment,
                "env": run["env"],
                "framework": run["framework"],
                "seed": run["seed"],
            }
            curves.append(curve.assign(**names))
    columns = [*RUN_COLUMNS, *[key for key in PAIR_KEYS if key not in RUN_COLUMNS]]
    curve_columns = ["experiment", "env", "framework", "seed", "step", "elapsed", "smoothed"]
    curves = (
        pd.concat(curves, ignore_index=True)[curve_columns]
        if curves
        else pd.DataFrame(columns=curve_columns)
    )
    return pd.DataFrame(rows, columns=columns), curves


def median_time(seconds: pd.Series) -> float:
    """The median over seeds, a run that never reached the target counted as infinitely slow: NaN when fewer than
    half of the runs reached it."""
    median = float(np.median(seconds.fillna(np.inf))) if len(seconds) else np.nan
    return median if np.isfinite(median) else float("nan")


def learning_table(learned: pd.DataFrame, study: Study) -> pd.DataFrame:
    """Per learning experiment, env and framework (TABLE_COLUMNS): the final return's mean and std over seeds
    beside the reference's, whether the mean is at least the reference's mean minus its std, and per target the
    runs that reached it and their median time."""
    rows = []
    for (experiment, env, framework), group in learned.groupby(
        ["experiment", "env", "framework"], sort=False
    ):
        row = {
            "experiment": experiment,
            "env": env,
            "framework": framework,
            "n_runs": len(group),
            "final_mean": group["final_return"].mean(),
            "final_std": group["final_return"].std(ddof=1) if len(group) > 1 else float("nan"),
            "reference_mean": group["reference_mean"].iloc[0],
            "reference_std": group["reference_std"].iloc[0],
        }
        row["meets_reference"] = bool(
            row["final_mean"] >= row["reference_mean"] - row["reference_std"]
        )
        for target in TARGETS:
            row[f"reached_{target}"] = int(group[f"s_to_{target}"].notna().sum())
            row[f"median_s_to_{target}"] = median_time(group[f"s_to_{target}"])
        rows.append(row)
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    ranks = [study_rank(row, study) for row in table.itertuples()]
    return table.iloc[sorted(range(len(table)), key=ranks.__getitem__)].reset_index(drop=True)


def study_rank(row, study: Study) -> tuple[int, int, int]:
    """A row's place in the study's orders: experiment, its env, framework."""
    experiments = list(study.experiments)
    envs = study.experiments[row.experiment].envs
    return (
        experiments.index(row.experiment),
        envs.index(row.env),
        list(study.frameworks).index(row.framework),
    )


def learning_speedups(learned: pd.DataFrame, study: Study) -> pd.DataFrame:
    """Per learning experiment, target and framework pair A -> B: the time-to-target speedups (time of A / time of
    B) over the pairs of runs that both reached it, pooled over envs (clusters) with cell_statistics' columns."""
    rows = []
    for target in TARGETS:
        column = f"s_to_{target}"
        masks = {name: learned["experiment"] == name for name in learning_experiments(study)}
        pairs = pairwise(learned, column, masks, study)
        for (experiment, pair), cell in pairs.groupby(["experiment", "pair"], sort=False):
            rows.append(
                {"target": target, "experiment": experiment, "pair": pair, **cell_statistics(cell)}
            )
    return pd.DataFrame(rows, columns=["target", "experiment", "pair", *CELL_STATISTICS])

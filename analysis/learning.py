"""The learning experiments (study.toml: an experiment with configs): each run's final return and
the time it took to reach the reference's published return, per framework and env, and the speedups
of those times.

A run's return at an iteration is smoothed: the mean episodic return over the last SMOOTHING
iterations that ended an episode (the scripts' final_return is that mean at the last iteration). Its
time to a target is `time/elapsed` (seconds from the process's first line: imports and compilation
included, as total_s) at the first iteration whose smoothed return reaches the target. Two targets
per env: the reference's mean, and within 10 % of it (mean - 0.1 x |mean|: a lower bar, also for a
negative return). A run that never reaches a target is kept, as not reaching it: the median over
seeds counts it as infinitely slow, and the speedups pair only runs that both reached it; a run that
ended no episode has no return, reaches no target, and is counted in the table as a run without a
final return. A resumed run (analysis/loading.py's is_timed) counts for its final return and its
steps to a target, but has no time to it: the times to a target (their medians, the runs that
reached it, the speedups) are of the timed runs alone.

Only the runs of an experiment's configuration count (learning_selection): a run whose command gives
hyperparameters (run_args.HYPERPARAMETERS) other than its configuration's in study.toml, or other
values of its configuration's flags (--num-steps 16, --num-iterations 12), is left out, with its
reason; so is a seed run again with the same env, framework and tag (the first run of it is kept).
The runs of two tags are never pooled: the table has a row per tag.

Agents as seeds: a run of N agents (--num-agents) counts each agent as a seed of its cell (a row
per number of agents per process): agent k is seed seed + k, its final return final_returns[k], its
curve its own return (core/events.agent_column); its time to a target is its process's. The
final return's table gives the mean ± std over seeds and the interquartile mean (IQM) with its
stratified-bootstrap 95 % interval (analysis/stats.py: scipy's trim_mean, as rliable computes it;
rliable itself cannot be installed beside pandas 3: its arch fails to import).
"""

import shlex

import numpy as np
import pandas as pd

from analysis.common import CELL_STATISTICS
from analysis.loading import is_timed
from analysis.speedups import PAIR_KEYS, cell_statistics, pairwise
from analysis.stats import iqm, iqm_interval
from atomic import parse_json
from core import run_args
from core.events import RETURN, agent_column
from core.study import Study

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
    "timed",  # not resumed: its seconds are one process's
]
LEFT_OUT_COLUMNS = ["experiment", "env", "framework", "tag", "seed", "run", "reason"]
TABLE_COLUMNS = [
    "experiment",
    "env",
    "tag",
    "num_agents",
    "framework",
    "n_runs",  # the seeds: each agent of a run of several
    "n_returns",  # the runs that ended an episode: those with a final return
    "n_timed",  # the runs whose times to a target count: those not resumed
    "final_mean",
    "final_std",
    "final_iqm",
    "iqm_low",
    "iqm_high",
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
    """One run's iterations (step, elapsed seconds) with its smoothed return: the mean over the last
    SMOOTHING iterations that logged a return (NaN before the first)."""
    rows = rows.sort_values("iteration")
    returns = rows[RETURN] if RETURN in rows else pd.Series(np.nan, index=rows.index)
    smoothed = returns.rolling(SMOOTHING, min_periods=1).mean()  # NaN iterations are skipped
    # never reached without it
    elapsed = rows[ELAPSED] if ELAPSED in rows else pd.Series(np.nan, index=rows.index)
    return pd.DataFrame(
        {"step": rows["step"], "elapsed": elapsed, "smoothed": smoothed}
    ).reset_index(drop=True)


def first_reach(curve: pd.DataFrame, target: float, timed: bool = True) -> tuple[float, float]:
    """(seconds, env steps) at the first iteration whose smoothed return reaches target; NaN, NaN
    when none does. A timed run without time/elapsed reaches none; a run not timed (its elapsed NaN)
    reaches it in steps alone."""
    reached = curve[curve["smoothed"] >= target]
    if timed:
        reached = reached[reached["elapsed"].notna()]
    if reached.empty:
        return float("nan"), float("nan")
    first = reached.iloc[0]
    return float(first["elapsed"]), float(first["step"])


def run_row(experiment: str, config, run: pd.Series, curve: pd.DataFrame, timed: bool) -> dict:
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
        "timed": timed,
    }
    for target in TARGETS:
        seconds, steps = first_reach(curve, target_return(reference.mean, target), timed)
        row[f"s_to_{target}"], row[f"steps_to_{target}"] = seconds, steps
    return row


def configuration_gap(run: pd.Series, config) -> str:
    """Why a run is not one of a learning configuration ("" when it is): its command (a shell
    command line, as in the summary) gives flags that change what it learns other than the
    configuration's, or other values."""
    command = run.get("command")
    if not isinstance(command, str) or not command:
        return "no command to check its configuration's flags against"
    try:
        differing = run_args.differing_flags(shlex.split(command), ["", *config.args])
    except ValueError as e:
        return f"its command is not one of the scripts' ({e})"
    if not differing:
        return ""
    flags = ", ".join(f"--{name.replace('_', '-')}" for name in differing)
    return f"not configuration {config.name} of study.toml: its command differs in {flags}"


def learning_selection(summary: pd.DataFrame, masks: dict, study: Study):
    """(the runs of each learning experiment that count: (experiment, configuration, summary row),
    in the summary's order; those left out, a row each (LEFT_OUT_COLUMNS) with the reason): a run
    counts with its env's configuration, and once per seed, env, framework and tag (the first
    started)."""
    kept, left_out, seen = [], [], set()
    for experiment in learning_experiments(study):
        exp = study.experiments[experiment]
        runs = summary[masks[experiment]]
        if "start_time" in runs:  # the first started of a seed counts
            runs = runs.sort_values("start_time", kind="stable")
        for _, run in runs.iterrows():
            config = exp.config(run["env"])
            if config is None:
                continue
            agents = run.get("num_agents", 1)
            seed = (experiment, run["env"], run["framework"], run["tag"], agents, run["seed"])
            reason = configuration_gap(run, config)
            if not reason and seed in seen:
                reason = f"seed {run['seed']} again: its first run counts"
            if reason:
                names = {key: run[key] for key in LEFT_OUT_COLUMNS if key in run}
                left_out.append({**names, "experiment": experiment, "reason": reason})
                continue
            seen.add(seed)
            kept.append((experiment, config, run))
    order = {index: i for i, index in enumerate(summary.index)}
    kept.sort(key=lambda item: (learning_experiments(study).index(item[0]), order[item[2].name]))
    return kept, pd.DataFrame(left_out, columns=LEFT_OUT_COLUMNS)


def learning_runs(runs: pd.DataFrame, summary: pd.DataFrame, masks: dict, study: Study):
    """(a row per run that counts (learning_selection) of a learning experiment (RUN_COLUMNS, with
    the PAIR_KEYS the speedups pair runs by), and their smoothed curves: experiment, env, framework,
    seed, step, elapsed, smoothed)."""
    rows, curves = [], []
    iterations = {run: group for run, group in runs.groupby("run", sort=False)}
    timed = is_timed(summary)
    summary = summary.assign(num_agents=summary.get("num_agents", 1))  # before it: one agent
    for experiment, config, run in learning_selection(summary, masks, study)[0]:
        if run["run"] not in iterations:
            continue
        for agent, returns in agents_of(run, iterations[run["run"]]):
            curve = smoothed_returns(returns)
            if not timed[run.name]:  # a resumed run: its time/elapsed restarted with each process
                curve["elapsed"] = np.nan
            keys = {key: agent[key] for key in PAIR_KEYS if key != "experiment"}
            rows.append({**run_row(experiment, config, agent, curve, timed[run.name]), **keys})
            names = {key: agent[key] for key in ("env", "framework", "seed")}
            curves.append(curve.assign(experiment=experiment, **names))
    columns = [*RUN_COLUMNS, *[key for key in PAIR_KEYS if key not in RUN_COLUMNS]]
    curve_columns = ["experiment", "env", "framework", "seed", "step", "elapsed", "smoothed"]
    curves = (
        pd.concat(curves, ignore_index=True)[curve_columns]
        if curves
        else pd.DataFrame(columns=curve_columns)
    )
    return pd.DataFrame(rows, columns=columns), curves


def agents_of(run: pd.Series, rows: pd.DataFrame) -> list[tuple[pd.Series, pd.DataFrame]]:
    """Each agent of a run as a seed of its cell: (its summary row, seed + k and final_returns[k],
    its iterations, its own return as RETURN); a run of one agent is itself."""
    agents = int(run["num_agents"])
    if agents == 1:
        return [(run, rows)]
    # checked when the run was read (runlog.final_returns): a list of a return per agent
    finals, agents_rows = parse_json(run["final_returns"], "final_returns"), []
    for k in range(agents):
        agent = run.copy()
        agent["seed"], agent["final_return"] = (
            run["seed"] + k,
            np.nan if finals[k] is None else finals[k],
        )
        agents_rows.append((agent, rows.assign(**{RETURN: rows[agent_column(k)]})))
    return agents_rows


def median_time(seconds: pd.Series) -> float:
    """The median over seeds, a run that never reached the target counted as infinitely slow: NaN
    when fewer than half of the runs reached it."""
    median = float(np.median(seconds.fillna(np.inf))) if len(seconds) else np.nan
    return median if np.isfinite(median) else float("nan")


def learning_table(learned: pd.DataFrame, study: Study) -> pd.DataFrame:
    """Per learning experiment, env and framework (TABLE_COLUMNS): the final return's mean and std
    over seeds beside the reference's, whether the mean is at least the reference's mean minus its
    std, and per target the runs that reached it and their median time (of the timed runs:
    n_timed)."""
    rows = []
    # a row per tag: two tags (two platforms) are never pooled
    learned = learned.assign(num_agents=learned.get("num_agents", 1))  # before it: one agent
    for (experiment, env, tag, agents, framework), group in learned.groupby(
        ["experiment", "env", "tag", "num_agents", "framework"], sort=False, dropna=False
    ):
        returns = group["final_return"].dropna()
        timed = group[group["timed"].astype(bool)]
        low, high = iqm_interval([returns])
        row = {
            "experiment": experiment,
            "env": env,
            "tag": tag,
            "num_agents": agents,
            "framework": framework,
            "n_runs": len(group),
            "n_returns": len(returns),
            "n_timed": len(timed),
            "final_mean": returns.mean(),
            "final_std": returns.std(ddof=1) if len(returns) > 1 else float("nan"),
            "final_iqm": iqm(returns) if len(returns) else float("nan"),
            "iqm_low": low,
            "iqm_high": high,
            "reference_mean": group["reference_mean"].iloc[0],
            "reference_std": group["reference_std"].iloc[0],
        }
        # a run without a return is not known to meet it
        row["meets_reference"] = bool(
            row["n_returns"] == row["n_runs"]
            and row["final_mean"] >= row["reference_mean"] - row["reference_std"]
        )
        for target in TARGETS:
            row[f"reached_{target}"] = int(timed[f"s_to_{target}"].notna().sum())
            row[f"median_s_to_{target}"] = median_time(timed[f"s_to_{target}"])
        rows.append(row)
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    ranks = [study_rank(row, study) for row in table.itertuples()]
    return table.iloc[sorted(range(len(table)), key=ranks.__getitem__)].reset_index(drop=True)


def study_rank(row, study: Study) -> tuple:
    """A row's place in the study's orders: experiment, its env, tag (by name), agents per process,
    framework."""
    experiments = list(study.experiments)
    envs = study.experiments[row.experiment].envs
    return (
        experiments.index(row.experiment),
        envs.index(row.env),
        str(row.tag),
        row.num_agents,
        list(study.frameworks).index(row.framework),
    )


def learning_speedups(learned: pd.DataFrame, study: Study) -> pd.DataFrame:
    """Per learning experiment, target and framework pair A -> B: the time-to-target speedups (time
    of A / time of B) over the pairs of runs that both reached it, pooled over envs (clusters) with
    cell_statistics' columns."""
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

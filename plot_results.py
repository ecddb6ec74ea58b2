"""Turns benchmark runs into the study's tables, figures and REPORT.md (part of benchback-rl).

    python plot_results.py runs/ --out results/ --env-timing results/env_timing.json
    python plot_results.py --csv linux/runs.csv --csv mac/runs.csv --out results/   # merge machines
    python plot_results.py runs/ --out new/ --previous old/speedups.csv   # an edition next to the one before

The study (frameworks, compile modes, envs, sizes, experiments, iteration windows) is read from study.toml
through study.py. Every folder holding a config.json (at any depth under the given folders) is a run.
Completed runs are read (config.json, summary.json, TensorBoard scalars, through runlog.py); the others are
skipped and listed in the report. Written to --out:

    runs.csv      one row per run x iteration: the run's config, its summary and every scalar
    summary.csv   one row per run: config, durations, iteration windows, the experiments it belongs to
    speedups.csv  speedups A->B = time_A / time_B per metric, experiment, model size and framework pair
    env_cost.csv  per metric, model size and pair: does the speedup shrink with env cost? (Spearman's rho, the
                  log-log slope, bootstrap intervals over envs; needs --env-timing)
    *.png         the figures of each experiment (skipped when the experiment has no runs)
    REPORT.md     the tables, the figures, the machines and versions, the skipped runs (and, with --previous,
                  the headline speedups of both editions side by side)

Nothing is written (exit status 2) when no completed run is found, and a README block is never replaced
by an empty one. Figures of this tool left in --out by an earlier call and not drawn now are removed.
"""

import argparse
import json
import re
import shlex
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, NamedTuple, Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402
from scipy.stats import gmean, rankdata  # noqa: E402

import study  # noqa: E402
from runlog import RunError, read_json, read_scalars  # noqa: E402

# The study itself (frameworks, compile modes, pairs, envs, sizes, windows, experiments) comes from
# study.load(), called where it is used, so that $BENCHBACK_STUDY can point at another study file.

# Runs are paired when these match (within one experiment); iterations and batch size only guard against
# mixing different sweeps.
PAIR_KEYS = ["experiment", "env", "model_size", "tag", "num_iterations", "batch_size"]
BOOTSTRAP_SEED = 0
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_LEVEL = 0.95
MIN_CLUSTERS = 3  # fewer envs than this: no interval ("–" in the tables, NaN in speedups.csv)
NO_INTERVAL = "–"
SPEEDUP_COLUMNS = [
    "metric",
    "experiment",
    "size",
    "pair",
    "geomean",
    "median",
    "ci_low",
    "ci_high",
    "n_pairs",
    "n_clusters",
]

# ------------------------------------------------------------------------------------ the tables
CONFIG_COLUMNS = [
    "env",
    "framework",
    "model_size",
    "compile",
    "seed",
    "tag",
    "sync_timing",
    "num_iterations",
    "num_envs",
    "num_steps",
    "batch_size",
    "exp_name",
    "device_name",
    "hostname",
    "platform",
    "versions",
    "command",
    "start_time",
]
SUMMARY_JSON_COLUMNS = ["status", "iterations_completed", "setup_s", "import_s", "total_s", "final_return"]
RUN_COLUMNS = ["run", "run_dir", "sweep", *CONFIG_COLUMNS, *SUMMARY_JSON_COLUMNS]
REQUIRED_CONFIG = ["env", "framework", "model_size", "compile", "seed", "sync_timing", "batch_size"]


class SkippedRun(NamedTuple):
    path: str
    reason: str


def fail(message: str) -> None:
    """Stops with exit status 2 and one line on stderr."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


# ------------------------------------------------------------------------------- windows, metrics
def window_column(window: study.Window, what: str = "") -> str:
    """The summary column of a window: iter0_s, iters1_7_s, iters8plus_s (or rollout8plus_s with what='rollout')."""
    if window.last is None:
        name = f"iters{window.first}plus_s"
    elif window.first == window.last:
        name = f"iter{window.first}_s"
    else:
        name = f"iters{window.first}_{window.last}_s"
    return name.replace("iters", what, 1) if what else name


def window_columns() -> dict[str, study.Window]:
    """summary column -> window, in the study's order."""
    return {window_column(w): w for w in study.load().windows.values()}


def metric_columns() -> dict[str, str]:
    """speedup metric -> summary column."""
    steady = study.load().steady
    return {
        "total": "total_s",
        "steady": window_column(steady),
        "rollout": window_column(steady, "rollout"),
        "update": window_column(steady, "update"),
    }


def metric_sync(metric: str) -> bool:
    """The sync setting a metric is measured under: rollout and update need synchronised timers, total time and the
    steady state are measured without them (the timers' waits would slow the runs)."""
    return metric in ("rollout", "update")


def metric_experiments(metric: str) -> list[str]:
    """The experiments a metric is compared in, each on its own: those with runs under the metric's sync setting
    (total and steady: exp1 and exp5's sync-off runs; rollout and update: exp2, exp3 and exp5's sync-on runs)."""
    return [name for name, exp in study.load().experiments.items() if metric_sync(metric) in exp.syncs]


def metric_name(metric: str) -> str:
    steady = study.load().steady.label
    return {
        "total": "Total time",
        "steady": f"Steady state, mean time/iteration over {steady}",
        "rollout": f"Rollout, mean over {steady}",
        "update": f"Update, mean over {steady}",
    }[metric]


def metric_title(metric: str, experiment: str) -> str:
    exp = study.load().experiments[experiment]
    what = metric_name(metric)
    modes = "; speedups between default compile modes" if exp.all_compile_modes else ""
    return f"{what} ({experiment}: {exp.title}; sync {'on' if metric_sync(metric) else 'off'}{modes})"


# ---------------------------------------------------------------------------------- reading runs
def flat(value):
    """A config value as one CSV cell: a dict as 'key value, ...', a list (argv) as a shell command line."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return shlex.join(str(v) for v in value)
    return value


def read_run(run_dir: Path) -> pd.DataFrame:
    """The rows of one completed run; raises RunError for anything else."""
    config = read_json(run_dir / "config.json")
    summary = read_json(run_dir / "summary.json")
    if summary.get("status") != "completed":
        raise RunError(f"status {summary.get('status')!r}")
    missing = [key for key in REQUIRED_CONFIG if key not in config]
    if missing:
        raise RunError(f"config.json lacks {', '.join(missing)}")
    if summary.get("total_s") is None:
        raise RunError("summary.json lacks total_s")
    scalars = read_scalars(run_dir)
    if "time/iteration" not in scalars:
        raise RunError("no time/iteration scalar")
    expected = summary.get("iterations_completed") or config.get("num_iterations") or 0
    logged = int(scalars["time/iteration"].notna().sum())
    if logged < expected:
        raise RunError(f"events hold {logged} of {expected} iterations")
    # bench.sh writes each experiment into its own folder (exp2 and exp3 both hold Acrobot-v1 small runs)
    sweep = run_dir.parent.name if re.fullmatch(r"exp\d+", run_dir.parent.name) else ""
    config = {**config, "device_name": config.get("device_name", config.get("device"))}  # "device" in older runs
    info = {
        "run": run_dir.name,
        "run_dir": str(run_dir),
        "sweep": sweep,
        **{key: flat(config.get(key)) for key in CONFIG_COLUMNS},
        **{key: summary.get(key) for key in SUMMARY_JSON_COLUMNS},
    }
    iteration = scalars["step"] // config["batch_size"] - 1
    return pd.concat([pd.DataFrame({**info, "iteration": iteration}), scalars], axis=1)


def read_run_dirs(roots: list[str]) -> tuple[list[pd.DataFrame], list[SkippedRun]]:
    """Every run folder (one holding config.json) at any depth under roots."""
    frames, skipped = [], []
    for root in roots:
        for run_dir in sorted(path.parent for path in Path(root).rglob("config.json")):
            try:
                frames.append(read_run(run_dir))
            except Exception as e:  # one broken run never stops the analysis
                reason = str(e) if isinstance(e, RunError) else f"{type(e).__name__}: {e}"
                skipped.append(SkippedRun(str(run_dir), reason))
    return frames, skipped


def read_runs_csv(path: str) -> pd.DataFrame:
    runs = pd.read_csv(path)
    if "device_name" not in runs and "device" in runs:  # a runs.csv of an older plot_results.py
        runs = runs.rename(columns={"device": "device_name"})
    missing = [
        column for column in ["run", "iteration", "time/iteration", *REQUIRED_CONFIG, "total_s"] if column not in runs
    ]
    if missing:
        fail(f"{path} is not a runs.csv of plot_results.py (no column {', '.join(missing)})")
    return runs


def as_bool(values: pd.Series) -> pd.Series:
    return values.map(lambda v: str(v).strip().lower() in ("true", "1", "yes"))


def load_runs(roots: list[str], csvs: list[str]) -> tuple[pd.DataFrame, list[SkippedRun]]:
    """The tidy table of all completed runs (one row per run x iteration), and the skipped runs."""
    frames, skipped = read_run_dirs(roots)
    frames += [read_runs_csv(path) for path in csvs]
    if not frames:
        return pd.DataFrame(columns=[*RUN_COLUMNS, "iteration", "step", "time/iteration"]), skipped
    runs = pd.concat(frames, ignore_index=True)
    runs["sync_timing"] = as_bool(runs["sync_timing"])
    for run, status in runs.loc[runs["status"] != "completed"].groupby("run")["status"].first().items():
        skipped.append(SkippedRun(run, f"status {status!r}"))
    runs = runs[runs["status"] == "completed"]
    duplicated = runs.duplicated(["run", "iteration"])
    if duplicated.any():
        print(f"note: {runs.loc[duplicated, 'run'].nunique()} runs were given more than once; kept the first copy")
    runs = runs[~duplicated]
    first = [*RUN_COLUMNS, "iteration", "step"]
    columns = [c for c in first if c in runs] + sorted(c for c in runs if c not in first)
    return runs[columns].sort_values(["run", "iteration"]).reset_index(drop=True), skipped


def window_mean(values: pd.Series, window: study.Window) -> float:
    """Mean of a per-iteration series (indexed by iteration) over the window's iterations (inclusive)."""
    selected = values.dropna()
    selected = selected[selected.index >= window.first]
    if window.last is not None:
        selected = selected[selected.index <= window.last]
    return float(selected.mean()) if len(selected) else float("nan")


def summarize_run(rows: pd.DataFrame) -> dict:
    rows = rows.set_index("iteration")
    row = {column: rows[column].iloc[0] for column in RUN_COLUMNS if column in rows}
    for column, window in window_columns().items():
        row[column] = window_mean(rows["time/iteration"], window)
    steady = study.load().steady
    for part in ("rollout", "update"):  # only meaningful when the timers were synchronised
        exact = row["sync_timing"] and f"time/{part}" in rows
        row[window_column(steady, part)] = window_mean(rows[f"time/{part}"], steady) if exact else float("nan")
    return row


# The experiments of the study, as membership tests on a summary row. A run can be in several, unless bench.sh
# put it in an experiment's folder (exp1/, exp2/, ...): then it belongs to that experiment only.
def in_experiment(run, experiment: study.Experiment) -> bool:
    """A run in bench.sh's folder of the experiment belongs to it whatever its env and size (bench.sh chose them,
    perhaps outside the study with --envs); any other run must match the experiment's whole matrix."""
    sweep = run.get("sweep")
    swept = isinstance(sweep, str) and sweep != ""
    if swept and sweep != experiment.name:
        return False
    framework = study.load().frameworks.get(run["framework"])
    in_matrix = swept or (run["env"] in experiment.envs and run["model_size"] in experiment.sizes)
    return (
        framework is not None
        and bool(run["sync_timing"]) in experiment.syncs
        and in_matrix
        and run["compile"] in experiment.compile_modes(framework)
    )


def experiment_masks(summary: pd.DataFrame) -> dict[str, pd.Series]:
    """The study's experiments (exp1, exp2, ...), exp4 -> boolean mask over summary rows.
    exp4 (platforms) = the exp1 runs when they span several tags."""
    masks = {
        name: pd.Series([in_experiment(row, exp) for _, row in summary.iterrows()], index=summary.index, dtype=bool)
        for name, exp in study.load().experiments.items()
    }
    if "exp1" in masks:
        masks["exp4"] = masks["exp1"] & (summary.loc[masks["exp1"], "tag"].nunique() > 1)
    return masks


def summarize(runs: pd.DataFrame, timing: pd.DataFrame) -> pd.DataFrame:
    """One row per run: config, durations, window means and the experiments it belongs to."""
    steady = study.load().steady
    columns = [*RUN_COLUMNS, *window_columns(), window_column(steady, "rollout"), window_column(steady, "update")]
    summary = pd.DataFrame([summarize_run(rows) for _, rows in runs.groupby("run", sort=True)], columns=columns)
    summary["env_cost"] = summary["env"].map(timing["ratio"]) if "ratio" in timing else float("nan")
    masks = experiment_masks(summary)
    summary["experiments"] = [" ".join(name for name, mask in masks.items() if mask[i]) for i in summary.index]
    return summary


# ------------------------------------------------------------------------------------- speedups
def pairwise(summary: pd.DataFrame, column: str, masks: dict[str, pd.Series], op=np.divide) -> pd.DataFrame:
    """op(A, B) over every pair of runs of frameworks A and B with the same PAIR_KEYS, for each pair A->B.
    masks: experiment -> the runs of that experiment to pair; runs are never paired across experiments."""
    columns = [*PAIR_KEYS, "pair", "run_a", "run_b", "a", "b", "value"]
    frames = []
    for experiment, mask in masks.items():
        keys = [key for key in PAIR_KEYS if key != "experiment"]
        data = summary.loc[mask & summary[column].notna(), [*keys, "framework", "run", column]]
        data = data.assign(experiment=experiment).sort_values("run")
        for a, b in study.load().pairs:
            both = data[data["framework"] == a].merge(data[data["framework"] == b], on=PAIR_KEYS, suffixes=("_a", "_b"))
            if both.empty:
                continue
            values_a, values_b = both[f"{column}_a"].to_numpy(float), both[f"{column}_b"].to_numpy(float)
            frames.append(
                both[[*PAIR_KEYS, "run_a", "run_b"]].assign(
                    pair=f"{a}->{b}", a=values_a, b=values_b, value=op(values_a, values_b)
                )
            )
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def cluster_bootstrap_ci(
    clusters: list[tuple[np.ndarray, np.ndarray]],
    level: float = BOOTSTRAP_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile interval of the geometric mean of the ratios A / B over every pair of runs within a cluster.

    clusters: per cluster (an env), the times of the runs of A and of B. Two-stage bootstrap: draw as many
    clusters with replacement, within each drawn cluster draw its runs of A and its runs of B with
    replacement, and recompute the geometric mean over that cluster's pairs (each cluster weighted by its
    number of pairs, as in the point estimate). NaN when there are fewer than MIN_CLUSTERS clusters.
    Seeded, so deterministic.
    """
    if len(clusters) < MIN_CLUSTERS:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    logs = [(np.log(np.asarray(a, float)), np.log(np.asarray(b, float))) for a, b in clusters]
    weights = np.array([len(a) * len(b) for a, b in logs], dtype=float)
    chosen = rng.integers(0, len(logs), size=(resamples, len(logs)))
    # the mean log-ratio over a cluster's pairs (i, j) is mean(log a) - mean(log b)
    cluster_means = np.empty(chosen.shape)
    for index, (a, b) in enumerate(logs):
        slots = chosen == index
        draws = int(slots.sum())
        cluster_means[slots] = a[rng.integers(0, len(a), size=(draws, len(a)))].mean(axis=1) - b[
            rng.integers(0, len(b), size=(draws, len(b)))
        ].mean(axis=1)
    w = weights[chosen]
    means = (w * cluster_means).sum(axis=1) / w.sum(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(np.exp(low)), float(np.exp(high))


def clusters_of(ratios: pd.DataFrame) -> list[tuple[np.ndarray, np.ndarray]]:
    """The runs of A and of B of each cluster (same PAIR_KEYS: one env, tag and experiment) of some pair rows."""
    clusters = []
    for _, group in ratios.groupby(PAIR_KEYS, sort=True, dropna=False):
        runs_a = group.drop_duplicates("run_a").sort_values("run_a")["a"].to_numpy(float)
        runs_b = group.drop_duplicates("run_b").sort_values("run_b")["b"].to_numpy(float)
        clusters.append((runs_a, runs_b))
    return clusters


def speedup_masks(summary: pd.DataFrame, metric: str, masks: Optional[dict] = None) -> dict[str, pd.Series]:
    """experiment -> the runs a speedup metric is computed from: the default compile mode of each framework, under the
    metric's sync setting (exp5 has runs of both)."""
    S = study.load()
    masks = experiment_masks(summary) if masks is None else masks
    chosen = (summary["compile"] == summary["framework"].map(S.default_compile)) & (
        summary["sync_timing"].astype(bool) == metric_sync(metric)
    )
    return {name: masks[name] & chosen for name in metric_experiments(metric) if name in masks}


def speedup_ratios(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    return pairwise(summary, metric_columns()[metric], speedup_masks(summary, metric))


def speedup_table(summary: pd.DataFrame, metrics=("total", "steady", "rollout", "update")) -> pd.DataFrame:
    """A row per metric, experiment, size and pair (combinations without pairs are left out): geomean, median,
    ci_low, ci_high (cluster bootstrap; NaN under MIN_CLUSTERS clusters), n_pairs, n_clusters."""
    S = study.load()
    rows = []
    for metric in metrics:
        ratios = speedup_ratios(summary, metric)
        for experiment in metric_experiments(metric):
            for size in S.sizes:
                for pair in S.pair_names:
                    cell = ratios[
                        (ratios["experiment"] == experiment) & (ratios["model_size"] == size) & (ratios["pair"] == pair)
                    ]
                    if cell.empty:
                        continue
                    values = cell["value"].to_numpy(float)
                    clusters = clusters_of(cell)
                    low, high = cluster_bootstrap_ci(clusters)
                    rows.append(
                        {
                            "metric": metric,
                            "experiment": experiment,
                            "size": size,
                            "pair": pair,
                            "geomean": float(gmean(values)),
                            "median": float(np.median(values)),
                            "ci_low": low,
                            "ci_high": high,
                            "n_pairs": len(values),
                            "n_clusters": len(clusters),
                        }
                    )
    return pd.DataFrame(rows, columns=SPEEDUP_COLUMNS)


# ------------------------------------------------------------------------------------ env timing
def read_env_timing(path: Optional[str]) -> tuple[pd.DataFrame, dict]:
    """Per env obs_dim, num_actions, ms_per_step, ratio (from env_timing.py), and the file's device/versions."""
    columns = ["obs_dim", "num_actions", "ms_per_step", "ratio"]
    empty = pd.DataFrame(columns=columns, dtype=float)
    if path is None:
        return empty, {}
    try:
        with open(path) as f:
            data = json.load(f)
        envs = data["envs"]
        table = pd.DataFrame(
            {
                env: {c: pd.to_numeric(values.get(c), errors="coerce") for c in columns}
                for env, values in envs.items()
                if isinstance(values, dict)
            }
        ).T
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        print(f"warning: cannot use env timing {path} ({type(e).__name__}: {e}); envs are ordered by name")
        return empty, {}
    return table.reindex(columns=columns).astype(float), {
        "device": data.get("device"),
        "versions": data.get("versions"),
    }


def env_order(envs, timing: pd.DataFrame) -> list[str]:
    """Cheapest env first when timed; envs without timing follow in the study's order (others by name)."""
    cost = timing["ratio"].dropna() if "ratio" in timing else pd.Series(dtype=float)
    timed = sorted((env for env in set(envs) if env in cost), key=lambda env: (cost[env], env))
    return timed + present(study.load().every_env, [env for env in set(envs) if env not in cost])


# ------------------------------------------------------------------------------ speedup against env cost
ENV_COST_METRICS = ("total", "steady")  # sync off: exp1 and exp5 together cover every env of the study
MIN_CORRELATION_ENVS = 5  # fewer envs: no correlation (with 4, even a perfect rank order has p > 0.05)
ENV_COST_COLUMNS = [
    "metric",
    "size",
    "pair",
    "n_envs",
    "geomean",
    "rho",
    "rho_low",
    "rho_high",
    "slope",
    "slope_low",
    "slope_high",
    "trend",
]


def env_costs(timing: pd.DataFrame) -> pd.Series:
    """env -> its step cost relative to the cheapest env (env_timing.py's ratio); empty without timing."""
    return timing["ratio"].dropna() if "ratio" in timing else pd.Series(dtype=float)


def env_speedups(summary: pd.DataFrame, timing: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One point per env (per tag) of the experiments the metric is compared in, per pair and size: the geometric
    mean speedup over the env's pairs of runs, and the env's step cost. Envs without a measured cost are left out."""
    ratios = speedup_ratios(summary, metric)
    cost = env_costs(timing)
    ratios = ratios[ratios["env"].isin(cost.index)].assign(log=lambda r: np.log(r["value"].astype(float)))
    points = ratios.groupby([*PAIR_KEYS, "pair"], dropna=False)["log"].mean().reset_index()
    return points.assign(speedup=np.exp(points["log"]), cost=points["env"].map(cost)).drop(columns="log")


def row_correlations(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Spearman's rho and the least-squares slope of y on x, for each row of x and y (NaN where x or y is constant)."""

    def centred(a):
        return a - a.mean(axis=1, keepdims=True)

    rx, ry, cx, cy = (centred(a) for a in (rankdata(x, axis=1), rankdata(y, axis=1), x, y))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (rx * ry).sum(axis=1) / np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
        slope = (cx * cy).sum(axis=1) / (cx * cx).sum(axis=1)
    return rho, slope


def cost_correlation(
    cost: np.ndarray,
    speedup: np.ndarray,
    level: float = BOOTSTRAP_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict:
    """Spearman's rho of speedup and env cost, and the slope of log10 speedup on log10 cost, each with a percentile
    bootstrap interval (envs resampled with replacement; seeded). All NaN under MIN_CORRELATION_ENVS envs."""
    names = ["rho", "rho_low", "rho_high", "slope", "slope_low", "slope_high"]
    x = np.log10(np.asarray(cost, float))
    y = np.round(np.log10(np.asarray(speedup, float)), 9)  # speedups equal but for float rounding are ties
    rho, slope = row_correlations(x[None], y[None])
    if len(x) < MIN_CORRELATION_ENVS or np.isnan(rho[0]):  # too few envs; or every env has the same speedup or cost
        return dict.fromkeys(names, float("nan"))
    chosen = np.random.default_rng(seed).integers(0, len(x), size=(resamples, len(x)))
    rhos, slopes = row_correlations(x[chosen], y[chosen])
    quantiles = [(1 - level) / 2, (1 + level) / 2]
    return dict(
        zip(names, map(float, [rho[0], *np.nanquantile(rhos, quantiles), slope[0], *np.nanquantile(slopes, quantiles)]))
    )


def cost_trend(row) -> str:
    """Words for a correlation: named only when the interval of rho excludes 0; "shrinks" = towards 1x."""
    if row["n_envs"] < MIN_CORRELATION_ENVS:
        return f"too few envs (under {MIN_CORRELATION_ENVS})"
    if np.isnan(row["rho"]):
        return "no correlation: every env has the same speedup (or cost)"
    if row["rho_low"] <= 0 <= row["rho_high"]:
        return "no clear trend (the interval of rho holds 0)"
    falls = row["rho_high"] < 0
    towards_one = falls == (row["geomean"] > 1)
    return (
        f"{'falls' if falls else 'rises'} with env cost: {'shrinks towards' if towards_one else 'grows away from'} 1×"
    )


def env_cost_table(summary: pd.DataFrame, timing: pd.DataFrame) -> pd.DataFrame:
    """A row per metric, size and pair with points: n_envs, geomean over the envs, rho and slope with intervals, trend."""
    S = study.load()
    rows = []
    for metric in ENV_COST_METRICS:
        points = env_speedups(summary, timing, metric)
        for size, pair in ((size, pair) for size in S.sizes for pair in S.pair_names):
            cell = points[(points["model_size"] == size) & (points["pair"] == pair)]
            if cell.empty:
                continue
            row = {
                "metric": metric,
                "size": size,
                "pair": pair,
                "n_envs": len(cell),
                "geomean": float(gmean(cell["speedup"])),
                **cost_correlation(cell["cost"], cell["speedup"]),
            }
            rows.append({**row, "trend": cost_trend(row)})
    return pd.DataFrame(rows, columns=ENV_COST_COLUMNS)


# ------------------------------------------------------------------------------------- figures
MARKERS = ("o", "s", "^", "D", "v", "P")


def framework_order() -> list[str]:
    return list(study.load().frameworks)


def size_order() -> tuple[str, ...]:
    return study.load().sizes


def framework_colors() -> dict[str, str]:
    return {name: framework.color for name, framework in study.load().frameworks.items()}


def size_markers() -> dict[str, str]:
    return {size: MARKERS[i % len(MARKERS)] for i, size in enumerate(size_order())}


def size_shades() -> dict[str, float]:
    """Smallest model lightest: >0 towards white, <0 towards black."""
    return dict(zip(size_order(), np.linspace(0.45, -0.35, len(size_order())) if len(size_order()) > 1 else [0.0]))


def size_palette() -> dict:
    return dict(zip(size_order(), sns.color_palette("Blues", len(size_order()) + 1)[1:]))


def pair_palette() -> dict:
    names = study.load().pair_names
    return dict(zip(names, sns.color_palette("Dark2", len(names))))


SPEEDUP_LABEL = "speedup A → B = time A / time B\n(above 1×: B is faster)"


def shade(color, amount: float):
    rgb = np.array(matplotlib.colors.to_rgb(color))
    return tuple(rgb + (1 - rgb) * amount if amount > 0 else rgb * (1 + amount))


def mode_name(framework: str, compile_mode: str) -> str:
    return f"{framework}/{compile_mode}"


def mode_palette() -> dict[str, tuple]:
    """Each compile mode in its framework's color; the default mode darkest, the others lighter."""
    return {
        mode_name(name, mode): shade(framework.color, 0.3 * i - 0.2)
        for name, framework in study.load().frameworks.items()
        for i, mode in enumerate(framework.compile)
    }


def present(order, values) -> list:
    """The members of order found in values (then any others, sorted), so that categories keep a fixed order."""
    values = set(values)
    return [v for v in order if v in values] + sorted(v for v in values if v not in order)


def pretty_pair(pair: str) -> str:
    return pair.replace("->", " → ")


def log_axis(ax, label: str, suffix: str = "", axis: str = "y") -> None:
    """Log scale with plain-number ticks: 1-2-5 per decade on short ranges, finer on very short ones."""
    getattr(ax, f"set_{axis}scale")("log")
    low, high = getattr(ax, f"get_{axis}lim")()
    decades = np.log10(high / low)
    subs = (1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 7.0) if decades < 0.6 else (1.0, 2.0, 5.0) if decades < 3 else (1.0,)
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_locator(LogLocator(base=10, subs=subs))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}{suffix}"))
    target.set_minor_formatter(NullFormatter())
    getattr(ax, f"set_{axis}label")(label)


def ratio_axis(ax) -> None:
    """Speedups: log scale in '×' with a dashed line at 1× (no difference)."""
    ax.axhline(1.0, color="0.3", lw=1, ls="--", zorder=0)
    log_axis(ax, SPEEDUP_LABEL, suffix="×")


def symlog_axis(ax, values: pd.Series, label: str) -> None:
    """Differences that span decades and may change sign: linear below the decade of the 10th percentile of |values|."""
    smallest = max(float(np.nanpercentile(values.abs(), 10)), 1e-4)
    ax.set_yscale("symlog", linthresh=10 ** np.floor(np.log10(smallest)))
    ax.axhline(0, color="0.3", lw=1, ls="--", zorder=0)
    if values.min() >= 0:
        ax.set_ylim(bottom=0)
    elif values.max() <= 0:
        ax.set_ylim(top=0)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylabel(label)


def rotate_xticks(ax) -> None:
    ax.tick_params(axis="x", labelrotation=35)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")


def empty_panel(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def row_legend(axes_row, title: str, rename: Callable[[str], str] = str, handles=None) -> None:
    """One legend per row of panels, outside on the right of the last panel."""
    for ax in axes_row:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    last = axes_row[-1]
    handles = handles or last.get_legend_handles_labels()[0]
    last.legend(
        handles,
        [rename(h.get_label()) for h in handles],
        title=title,
        loc="upper left",
        bbox_to_anchor=(1.02, 1),
        frameon=False,
        fontsize=10,
        title_fontsize=11,
    )


def new_figure(ncols: int, nrows: int = 1, width: float = 6.0, height: float = 4.8, title: str = ""):
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    fig.suptitle(title, fontsize=15, fontweight="bold")
    return fig, axes


def box_with_points(ax, data, x, y, order, hue, hue_order, palette, log=True) -> None:
    """A box per (x, hue) with every run (or pair of runs) drawn on top."""
    palette = {h: palette.get(h, "0.6") for h in hue_order}  # grey for a framework or mode not listed above
    sns.boxplot(
        data=data,
        x=x,
        y=y,
        order=order,
        hue=hue,
        hue_order=hue_order,
        palette=palette,
        ax=ax,
        showfliers=False,
        log_scale=log,
        boxprops={"alpha": 0.8},
    )
    sns.stripplot(
        data=data,
        x=x,
        y=y,
        order=order,
        hue=hue,
        hue_order=hue_order,
        palette={h: "0.2" for h in hue_order},
        dodge=True,
        size=3,
        alpha=0.6,
        ax=ax,
        legend=False,
        log_scale=log,
    )
    ax.set_xlabel("")


def modes_pointplot(ax, data, x, part: str, order, title: str, joined: bool) -> None:
    """The steady-state time of part (rollout or update): median over seeds per (x, compile mode), bars min to max."""
    modes = present(mode_palette(), data["mode"])
    palette = {mode: mode_palette().get(mode, "0.6") for mode in modes}
    sns.pointplot(
        data=data,
        x=x,
        y=window_column(study.load().steady, part),
        order=order,
        hue="mode",
        hue_order=modes,
        palette=palette,
        ax=ax,
        estimator="median",
        errorbar=("pi", 100),
        dodge=0.5 if len(modes) > 1 else False,
        markersize=6,
        linewidth=1.5,
        linestyle="-" if joined else "none",
        log_scale=True,
    )
    log_axis(ax, f"{part} time per iteration (s)")
    ax.set_title(title)
    ax.set_xlabel("")


def speedup_boxes(ax, ratios: pd.DataFrame, hue: str, hue_order, palette, title: str) -> None:
    """Box plots of speedup ratios per framework pair, split by hue."""
    box_with_points(
        ax, ratios, "pair", "value", present(study.load().pair_names, ratios["pair"]), hue, hue_order, palette
    )
    ax.set_xticks(ax.get_xticks(), [pretty_pair(label.get_text()) for label in ax.get_xticklabels()])
    ratio_axis(ax)
    ax.set_title(title)


@dataclass
class Analysis:
    """What the figures and the report are drawn from."""

    summary: pd.DataFrame
    masks: dict[str, pd.Series]
    envs: list[str]  # cheapest first when timed, else by name
    timing: pd.DataFrame

    def runs(self, experiment: str) -> pd.DataFrame:
        runs = self.summary[self.masks[experiment]]
        return runs.assign(mode=[mode_name(f, c) for f, c in zip(runs["framework"], runs["compile"])])

    def metric_runs(self, metric: str) -> pd.DataFrame:
        """The runs a speedup metric compares, from all its experiments (total: exp1 and exp5's sync-off runs)."""
        masks = list(speedup_masks(self.summary, metric, self.masks).values())
        return self.summary[np.logical_or.reduce(masks)] if masks else self.summary.iloc[:0]


def analysis(summary: pd.DataFrame, timing: pd.DataFrame) -> Analysis:
    return Analysis(summary, experiment_masks(summary), env_order(summary["env"], timing), timing)


def env_positions(an: Analysis, envs: pd.Series) -> tuple[pd.Series, bool]:
    """x of each env: its measured step cost when every env has one, else its rank."""
    cost = an.timing["ratio"].dropna()
    if envs.isin(cost.index).all():
        return envs.map(cost), True
    return envs.map({env: i for i, env in enumerate(an.envs)}), False


def draw_against_env_cost(ax, an: Analysis, runs: pd.DataFrame, y: str) -> list[Line2D]:
    """Every run against its env's step cost; framework = color, size = marker and shade; lines join medians.
    Returns the legend handles."""
    x, timed = env_positions(an, runs["env"])
    for (framework, size), group in runs.groupby(["framework", "model_size"]):
        color = shade(framework_colors().get(framework, "0.5"), size_shades().get(size, 0.0))
        ax.scatter(x[group.index], group[y], color=color, marker=size_markers().get(size, "o"), s=28, alpha=0.75)
        medians = group.groupby(x[group.index])[y].median().sort_index()
        ax.plot(medians.index, medians.to_numpy(), color=color, lw=1.2)
    if timed:
        log_axis(ax, "env step cost relative to the cheapest env", suffix="×", axis="x")
    else:
        envs = present(an.envs, runs["env"])
        ax.set_xticks([an.envs.index(env) for env in envs], envs)
        rotate_xticks(ax)
        ax.set_xlabel("env (no env timing given: by name)")
    handles = [
        Line2D([], [], color=framework_colors().get(f, "0.5"), lw=3, label=f)
        for f in present(framework_order(), runs["framework"])
    ]
    return handles + [
        Line2D([], [], color="0.3", marker=size_markers().get(s, "o"), ls="", label=s)
        for s in present(size_order(), runs["model_size"])
    ]


def fig_exp1_total(an: Analysis):
    runs = an.runs("exp1")
    fig, axes = new_figure(2, width=6.5, title="Exp1: total run duration per framework (sync off, default compile)")
    box_with_points(
        axes[0, 0],
        runs,
        "model_size",
        "total_s",
        present(size_order(), runs["model_size"]),
        "framework",
        present(framework_order(), runs["framework"]),
        framework_colors(),
    )
    log_axis(axes[0, 0], "total duration (s)")
    axes[0, 0].set_title("all envs and seeds, by model size")
    every_env = an.metric_runs("total")  # exp1's envs and exp5's expensive ones
    handles = draw_against_env_cost(axes[0, 1], an, every_env, "total_s")
    log_axis(axes[0, 1], "total duration (s)")
    axes[0, 1].set_title(f"against env complexity ({' + '.join(metric_experiments('total'))}; lines: medians)")
    row_legend(axes[0], "framework / size", handles=handles)
    return fig


def speedup_figure(an: Analysis, metric: str, title: str):
    ratios = speedup_ratios(an.summary, metric)
    if ratios.empty:
        return None
    fig, axes = new_figure(1, width=9, title=title)
    speedup_boxes(
        axes[0, 0],
        ratios,
        "model_size",
        present(size_order(), ratios["model_size"]),
        size_palette(),
        "every pair of runs with the same env, size and tag",
    )
    row_legend(axes[0], "model size")
    return fig


def fig_exp1_speedups(an: Analysis):
    return speedup_figure(an, "total", "Exp1: total-time speedups per framework pair and model size")


def fig_steady_speedups(an: Analysis):
    label = study.load().steady.label
    return speedup_figure(an, "steady", f"Steady state: speedups of the mean time/iteration over {label} (exp1)")


def fig_overhead_windows(an: Analysis):
    """Top: mean time/iteration per window and framework. Bottom: A - B per pair (symlog)."""
    runs = an.runs("exp1")
    sizes = present(size_order(), runs["model_size"])
    windows = window_columns()
    title = "Overhead by iteration window: " + ", ".join(f"{w.label} = {w.name}" for w in windows.values()) + " (exp1)"
    fig, axes = new_figure(len(sizes), 2, width=6, height=5, title=title)
    means = runs.melt(id_vars=["model_size", "framework"], value_vars=list(windows), var_name="window", value_name="s")
    differences = pd.concat(
        [pairwise(an.summary, w, {"exp1": an.masks["exp1"]}, np.subtract).assign(window=w) for w in windows]
    )
    labels = [w.label.replace("iterations", "iters") for w in windows.values()]
    for col, size in enumerate(sizes):
        top, bottom = axes[0, col], axes[1, col]
        box_with_points(
            top,
            means[means["model_size"] == size].dropna(),
            "window",
            "s",
            list(windows),
            "framework",
            present(framework_order(), runs["framework"]),
            framework_colors(),
        )
        top.set_xticks(range(len(labels)), labels)
        top.set_title(f"{size} model")
        log_axis(top, "mean time per iteration (s)")
        diffs = differences[differences["model_size"] == size].dropna()
        if diffs.empty:
            empty_panel(bottom, "no pairs of runs")
            continue
        box_with_points(
            bottom,
            diffs,
            "window",
            "value",
            list(windows),
            "pair",
            present(study.load().pair_names, diffs["pair"]),
            pair_palette(),
            log=False,
        )
        bottom.set_xticks(range(len(labels)), labels)
        symlog_axis(bottom, diffs["value"], "time A - time B per iteration (s)")
    row_legend(axes[0], "framework")
    row_legend(axes[1], "pair A → B", rename=pretty_pair)
    return fig


def fig_exp2_rollout_update(an: Analysis):
    """Top: rollout and update time by env and compile mode. Bottom: speedups between default modes, by env."""
    runs = an.runs("exp2")
    envs = present(an.envs, runs["env"])
    fig, axes = new_figure(
        2,
        2,
        width=max(6.0, 0.6 * len(envs) + 2.5),
        height=5.2,
        title=f"Exp2: rollout vs update, small model, sync on (mean over {study.load().steady.label})",
    )
    for col, part in enumerate(("rollout", "update")):
        modes_pointplot(axes[0, col], runs, "env", part, envs, f"{part}, every compile mode", joined=False)
        rotate_xticks(axes[0, col])
        axes[0, col].set_xlabel("env, cheapest step first" if an.timing["ratio"].notna().any() else "env, by name")
        ratios = speedup_ratios(an.summary, part)
        ratios = ratios[ratios["experiment"] == "exp2"]
        ax = axes[1, col]
        ax.set_title(f"{part} speedups, default compile modes")
        if ratios.empty:
            empty_panel(ax, "no pairs of default-compile runs")
            continue
        pairs = present(study.load().pair_names, ratios["pair"])
        sns.pointplot(
            data=ratios,
            x="env",
            y="value",
            order=present(envs, ratios["env"]),
            hue="pair",
            hue_order=pairs,
            palette=pair_palette(),
            estimator="mean",  # of the logs (log_scale): the geometric mean
            errorbar=("pi", 100),
            dodge=0.4 if len(pairs) > 1 else False,
            linestyle="none",
            markersize=7,
            log_scale=True,
            ax=ax,
        )
        ratio_axis(ax)
        rotate_xticks(ax)
        ax.set_xlabel("")
    row_legend(axes[0], "framework/compile\n(median, min-max)")
    row_legend(axes[1], "pair A → B\n(geomean, min-max)", rename=pretty_pair)
    return fig


def fig_exp3_compile_modes(an: Analysis):
    runs = an.runs("exp3")
    envs = ", ".join(study.load().experiments["exp3"].envs)
    fig, axes = new_figure(2, width=6, title=f"Exp3: compile modes by model size ({envs}, sync on)")
    for col, part in enumerate(("rollout", "update")):
        modes_pointplot(
            axes[0, col],
            runs,
            "model_size",
            part,
            present(size_order(), runs["model_size"]),
            f"{part} (mean over {study.load().steady.label})",
            joined=True,
        )
        axes[0, col].set_xlabel("model size")
    row_legend(axes[0], "framework/compile\n(median, min-max)")
    return fig


def fig_exp4_tags(an: Analysis):
    """Total duration per framework under each tag (one panel per size), then total-time speedups per tag."""
    runs = an.runs("exp4")
    sizes = present(size_order(), runs["model_size"])
    tags = sorted(runs["tag"].unique())
    palette = dict(zip(tags, sns.color_palette("Set2", len(tags))))
    fig, axes = new_figure(len(sizes) + 1, width=5, title="Exp4: platforms (tags) compared on the exp1 runs")
    for col, size in enumerate(sizes):
        ax = axes[0, col]
        box_with_points(
            ax,
            runs[runs["model_size"] == size],
            "framework",
            "total_s",
            present(framework_order(), runs["framework"]),
            "tag",
            tags,
            palette,
        )
        log_axis(ax, "total duration (s)")
        ax.set_title(f"{size} model: total duration")
    speedup_boxes(axes[0, -1], speedup_ratios(an.summary, "total"), "tag", tags, palette, "total-time speedups")
    row_legend(axes[0], "tag")
    return fig


def mark_expensive_envs(ax, an: Analysis, envs) -> None:
    """A dotted line and the name of each expensive env (Craftax) on an env-cost x axis."""
    cost = env_costs(an.timing)
    for env in (env for env in study.load().expensive_envs if env in set(envs) and env in cost):
        ax.axvline(cost[env], color="0.6", ls=":", lw=1, zorder=0)
        ax.text(
            cost[env],
            0.02,
            f" {env}",
            transform=ax.get_xaxis_transform(),
            rotation=90,
            fontsize=8,
            color="0.4",
            va="bottom",
        )


def fig_speedup_vs_env_cost(an: Analysis):
    """Per metric (row) and size (column): each pair's speedup per env against the env's step cost, with the log-log fit."""
    if env_costs(an.timing).empty:
        return "no env timing (--env-timing)"
    points = {metric: env_speedups(an.summary, an.timing, metric) for metric in ENV_COST_METRICS}
    if all(p.empty for p in points.values()):
        return None
    sizes = present(size_order(), pd.concat(points.values())["model_size"])
    experiments = " + ".join(metric_experiments("total"))
    fig, axes = new_figure(
        len(sizes),
        len(ENV_COST_METRICS),
        width=5.5,
        height=4.8,
        title=f"Speedup against env step cost ({experiments}, sync off, default compile modes)",
    )
    for row, (metric, data) in enumerate(points.items()):
        for col, size in enumerate(sizes):
            ax, cell = axes[row, col], data[data["model_size"] == size]
            ax.set_title(f"{metric}, {size} model")
            if cell.empty:
                empty_panel(ax, "no pairs of runs")
                continue
            for pair in present(study.load().pair_names, cell["pair"]):
                group = cell[cell["pair"] == pair]
                color = pair_palette().get(pair, "0.5")
                ax.scatter(group["cost"], group["speedup"], color=color, s=24, alpha=0.8, label=pair)
                if len(group) >= MIN_CORRELATION_ENVS:
                    slope, intercept = np.polyfit(np.log10(group["cost"]), np.log10(group["speedup"]), 1)
                    x = np.array([group["cost"].min(), group["cost"].max()])
                    ax.plot(x, 10 ** (intercept + slope * np.log10(x)), color=color, lw=1.2)
            ratio_axis(ax)
            log_axis(ax, "env step cost relative to the cheapest env", suffix="×", axis="x")
            mark_expensive_envs(ax, an, cell["env"])
        row_legend(axes[row], "pair A → B\n(a point per env;\nlines: log-log fit)", rename=pretty_pair)
    return fig


class FigureSpec(NamedTuple):
    file: str
    experiments: tuple[str, ...]  # drawn when any of them has runs
    caption: str
    draw: Callable[[Analysis], "plt.Figure | str | None"]  # None: no pairs of runs; a string: why it was not drawn


FIGURES = (
    FigureSpec(
        "exp1_total.png",
        ("exp1",),
        "Exp1: total duration per framework, and against env complexity (with exp5)",
        fig_exp1_total,
    ),
    FigureSpec("exp1_speedups.png", ("exp1",), "Exp1: total-time speedups per pair and model size", fig_exp1_speedups),
    FigureSpec(
        "overhead_windows.png",
        ("exp1",),
        "Overhead by iteration window (compile, warm-up, steady) and pairwise differences",
        fig_overhead_windows,
    ),
    FigureSpec("steady_speedups.png", ("exp1",), "Steady-state speedups (steady window)", fig_steady_speedups),
    FigureSpec(
        "exp2_rollout_update.png",
        ("exp2",),
        "Exp2: rollout and update durations and speedups by env",
        fig_exp2_rollout_update,
    ),
    FigureSpec("exp3_compile_modes.png", ("exp3",), "Exp3: compile modes by model size", fig_exp3_compile_modes),
    FigureSpec("exp4_tags.png", ("exp4",), "Exp4: platforms (tags) compared", fig_exp4_tags),
    FigureSpec(
        "speedup_vs_env_cost.png",
        ("exp1", "exp5"),
        "Speedups against env step cost (exp1 and exp5)",
        fig_speedup_vs_env_cost,
    ),
)


def draw_figures(an: Analysis, out: Path) -> tuple[list[FigureSpec], list[str]]:
    """Saves each figure whose experiment has runs; returns the drawn figures and a note per skipped one."""
    sns.set_theme(context="notebook", style="whitegrid", font_scale=1.15)
    drawn, notes = [], []
    for spec in FIGURES:
        if not any(an.masks.get(name, pd.Series(dtype=bool)).any() for name in spec.experiments):
            why = (
                "runs of exp1 under at least two tags"
                if spec.experiments == ("exp4",)
                else f"{' or '.join(spec.experiments)} runs"
            )
            notes.append(f"{spec.file} skipped: no {why}")
            continue
        fig = spec.draw(an)
        if fig is None or isinstance(fig, str):
            notes.append(f"{spec.file} skipped: {fig or 'no pairs of runs to compare'}")
            continue
        fig.tight_layout()
        fig.savefig(out / spec.file, dpi=110, bbox_inches="tight")
        plt.close(fig)
        drawn.append(spec)
    return drawn, notes


def remove_stale_figures(out: Path, drawn: list[FigureSpec]) -> list[str]:
    """Removes the figures of this tool in out that this call did not draw (left from an earlier call)."""
    notes = []
    for spec in FIGURES:
        path = out / spec.file
        if spec not in drawn and path.exists():
            path.unlink()
            notes.append(f"{spec.file} removed: left in {out} by an earlier call and not drawn by this one")
    return notes


# ---------------------------------------------------------------------------------------- report
def markdown_table(table: pd.DataFrame) -> str:
    """A DataFrame as a markdown table (floats to 3 significant digits, missing as '-')."""
    cells = table.map(lambda v: v.replace("|", "\\|") if isinstance(v, str) else v)
    cells = cells.astype(object).where(table.notna(), None)
    return cells.to_markdown(index=False, floatfmt=".3g", missingval="-")


def speedup_intro() -> str:
    S = study.load()
    unsynced, synced = ", ".join(metric_experiments("total")), ", ".join(metric_experiments("rollout"))
    return (
        "Speedup A → B = time of A / time of B (above 1×: B is faster), over every pair of runs of A and B with the "
        "same env, model size and tag within one experiment (runs are never paired across experiments), each "
        f"framework in its default compile mode. Total time and steady state ({S.steady.label}) come from each sync-off "
        f"experiment on its own ({unsynced}), rollout and update from each sync-on one ({synced}); never pooled. "
        f"Cells: geometric mean of the ratios [{BOOTSTRAP_LEVEL:.0%} cluster-bootstrap interval]; median; "
        "pairs / envs (an env measured under several tags counts once per tag). The interval resamples envs with "
        "replacement, then, within each drawn env, the runs of A and of B with replacement, recomputes the geometric "
        f"mean ({BOOTSTRAP_RESAMPLES:,} resamples, seeded) and takes its 2.5th and 97.5th percentiles; "
        f"{NO_INTERVAL} = fewer than {MIN_CLUSTERS} envs, too few for an interval."
    )


def speedup_cell(row) -> str:
    interval = NO_INTERVAL if np.isnan(row.ci_low) else f"{row.ci_low:.2f}, {row.ci_high:.2f}"
    pairs, envs = int(row.n_pairs), int(row.n_clusters)
    counts = f"{pairs} pair{'s' * (pairs != 1)} / {envs} env{'s' * (envs != 1)}"
    return f"**{row.geomean:.2f}×** [{interval}]; median {row.median:.2f}; {counts}"


def speedup_markdown(speedups: pd.DataFrame, intro: bool = True) -> str:
    """The speedup tables: per metric and experiment, a row per pair and a column per size."""
    if speedups.empty:
        return "_No pairs of runs to compare._\n"
    blocks = [speedup_intro()] if intro else []
    for (metric, experiment), table in speedups.groupby(["metric", "experiment"], sort=False):
        blocks.append(f"**{metric_title(metric, experiment)}**\n\n" + pair_by_size_table(table, speedup_cell))
    return "\n\n".join(blocks) + "\n"


def pair_by_size_table(rows: pd.DataFrame, cell) -> str:
    """A markdown table of cell(row) per pair (rows) and model size (columns), both in the study's order."""
    S = study.load()
    wide = rows.assign(cell=[cell(r) for r in rows.itertuples()]).pivot(index="pair", columns="size", values="cell")
    wide = wide.reindex(index=present(S.pair_names, wide.index), columns=present(S.sizes, wide.columns))
    wide.index = [pretty_pair(p) for p in wide.index]
    return markdown_table(wide.rename_axis("pair").reset_index())


def env_cost_intro() -> str:
    experiments = " and ".join(metric_experiments("total"))
    return (
        f"Does a speedup shrink as the env's step gets more expensive? Per pair and model size, one point per env of "
        f"{experiments} (sync off, default compile modes; an env under several tags counts once per tag): its geometric "
        "mean speedup, against the env's step cost measured by env_timing.py. **ρ**: Spearman's rank correlation of "
        "speedup and env cost (below 0: the speedup falls as the env gets costlier); **slope**: the least-squares fit of "
        "log speedup on log cost, as the factor by which the speedup changes per tenfold env cost (the few expensive "
        "envs weigh heavily on it; ρ, on ranks, does not). Intervals: "
        f"{BOOTSTRAP_LEVEL:.0%} percentile bootstrap, envs resampled with replacement ({BOOTSTRAP_RESAMPLES:,} "
        "resamples, seeded). The trend is named only when the interval of ρ excludes 0; *shrinks* = moves towards 1×. "
        f"{NO_INTERVAL} = fewer than {MIN_CORRELATION_ENVS} envs."
    )


def env_cost_cell(row) -> str:
    envs = f"{int(row.n_envs)} env{'s' * (row.n_envs != 1)}"
    if np.isnan(row.rho):
        return f"{NO_INTERVAL} ({envs}: {row.trend}); geomean {row.geomean:.2f}×"
    return (
        f"ρ **{row.rho:+.2f}** [{row.rho_low:+.2f}, {row.rho_high:+.2f}]; ×{10**row.slope:.2f} per 10× cost "
        f"[{10**row.slope_low:.2f}, {10**row.slope_high:.2f}]; {envs}: {row.trend}"
    )


def env_cost_markdown(table: pd.DataFrame, timed: bool) -> str:
    """The correlation tables: per metric, a row per pair and a column per size."""
    if not timed:
        return "_No env timing given (`--env-timing`): no env costs to correlate with._\n"
    if table.empty:
        return f"_No pairs of runs of {' or '.join(metric_experiments('total'))} with a measured env cost._\n"
    blocks = [env_cost_intro()]
    for metric, rows in table.groupby("metric", sort=False):
        blocks.append(f"**{metric_name(metric)}**\n\n" + pair_by_size_table(rows, env_cost_cell))
    return "\n\n".join(blocks) + "\n"


HEADLINE_METRICS = ("total", "steady")  # the README's tables; REPORT.md has every metric and experiment
HEADLINE_EXPERIMENT = "exp1"  # every env, size and framework


def headline(speedups: pd.DataFrame) -> pd.DataFrame:
    return speedups[speedups["metric"].isin(HEADLINE_METRICS) & (speedups["experiment"] == HEADLINE_EXPERIMENT)]


def readme_markdown(speedups: pd.DataFrame, previous: Optional[pd.DataFrame] = None, previous_name: str = "") -> str:
    """The README's headline: exp1's total-time and steady-state tables, with a short intro (REPORT.md has the long
    one), then the comparison with a previous edition when one is given."""
    intro = (
        f"Speedup A → B = time of A / time of B (above 1×: B is faster), each framework in its default compile "
        f"mode. Cells: geometric mean [{BOOTSTRAP_LEVEL:.0%} cluster-bootstrap interval over envs, then runs; "
        f"{NO_INTERVAL} below {MIN_CLUSTERS} envs]; median; pairs / envs. METHODOLOGY.md explains the statistics."
    )
    text = intro + "\n\n" + speedup_markdown(headline(speedups), intro=False)
    if previous is not None:
        text += "\n" + edition_markdown(previous, speedups, previous_name)
    return text


def edition_table(previous: pd.DataFrame, speedups: pd.DataFrame) -> pd.DataFrame:
    """The headline speedups measured in both editions: a row per metric, size and pair, previous and now."""
    return headline(previous)[SPEEDUP_COLUMNS].merge(
        headline(speedups)[SPEEDUP_COLUMNS], suffixes=("_previous", ""), on=["metric", "experiment", "size", "pair"]
    )


def edition_cell(row) -> str:
    def speedup(geomean, low, high):
        interval = NO_INTERVAL if np.isnan(low) else f"{low:.2f}, {high:.2f}"
        return f"{geomean:.2f}× [{interval}]"

    return (
        f"{speedup(row.geomean_previous, row.ci_low_previous, row.ci_high_previous)} → "
        f"**{speedup(row.geomean, row.ci_low, row.ci_high)}**"
    )


def edition_markdown(previous: pd.DataFrame, speedups: pd.DataFrame, previous_name: str) -> str:
    """Previous edition -> this one: one table, a row per pair measured in both, a column per headline metric and
    size."""
    table = edition_table(previous, speedups)
    if table.empty:
        return f"_No pair of the headline tables was measured in the previous edition ({previous_name})._\n"
    S = study.load()
    table = table.assign(
        column=table["metric"] + ", " + table["size"], cell=[edition_cell(r) for r in table.itertuples()]
    )
    columns = [f"{metric}, {size}" for metric in HEADLINE_METRICS for size in S.sizes]
    wide = table.pivot(index="pair", columns="column", values="cell")
    wide = wide.reindex(index=present(S.pair_names, wide.index), columns=present(columns, wide.columns))
    wide.index = [pretty_pair(p) for p in wide.index]
    return (
        f"**Since the previous edition** ({previous_name}): geometric mean [interval], previous → now; total time "
        f"and steady state ({S.steady.label}), per model size.\n\n"
        + markdown_table(wide.rename_axis("pair").reset_index())
        + "\n"
    )


def machines_table(summary: pd.DataFrame) -> pd.DataFrame:
    columns = ["tag", "hostname", "device_name", "platform", "framework", "versions"]
    cells = summary[columns].astype(object).where(summary[columns].notna(), "")
    table = cells.groupby(columns).size().rename("runs").reset_index()
    return table.rename(columns={"device_name": "device"})


def windows_table(an: Analysis) -> pd.DataFrame:
    runs = an.runs("exp1")
    columns = {
        "setup_s": "setup (s)",
        **{c: f"{w.label} (s/iter)" for c, w in window_columns().items()},
        "total_s": "total (s)",
    }
    table = runs.groupby(["framework", "model_size"])[list(columns)].median().rename(columns=columns).reset_index()
    key = {v: i for i, v in enumerate([*framework_order(), *size_order()])}
    return table.sort_values(["model_size", "framework"], key=lambda s: s.map(key)).rename(
        columns={"model_size": "size"}
    )


def env_table(an: Analysis) -> pd.DataFrame:
    table = an.timing.reindex(an.envs).reset_index(names="env")
    runs = an.summary.groupby("env").size()
    # integers stay integers, and a cost in the thousands reads 8,027×, not 8.03e+03
    table = table.astype({"obs_dim": "Int64", "num_actions": "Int64"})
    table["ratio"] = table["ratio"].map(lambda r: r if pd.isna(r) else f"{r:.3g}×" if r < 1000 else f"{r:,.0f}×")
    return table.assign(runs=table["env"].map(runs).fillna(0).astype(int)).rename(
        columns={"obs_dim": "obs dim", "num_actions": "actions", "ms_per_step": "ms per step", "ratio": "relative cost"}
    )


def write_report(
    path: Path,
    an: Analysis,
    speedups: pd.DataFrame,
    env_cost: pd.DataFrame,
    skipped: list[SkippedRun],
    drawn,
    notes,
    sources: list[str],
    timing_info: dict,
    edition: str = "",
) -> None:
    summary = an.summary
    counts = ", ".join(f"{name}: {int(mask.sum())}" for name, mask in an.masks.items())
    parts = [
        "# benchback-rl results",
        f"Generated by `plot_results.py` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from "
        f"{', '.join(f'`{s}`' for s in sources)}: {len(summary)} completed runs ({counts}); "
        f"{len(skipped)} skipped (listed at the end).",
        "## Machines and versions",
        markdown_table(machines_table(summary)) if len(summary) else "_No runs._",
        "## Speedups",
        speedup_markdown(speedups),
        *([edition] if edition else []),
    ]
    if an.masks.get("exp4", pd.Series(dtype=bool)).any():
        per_tag = [
            f"Tag `{tag}`:\n\n" + speedup_markdown(speedup_table(runs, ["total"]), intro=False)
            for tag, runs in summary.groupby("tag")
        ]
        parts += ["### Total-time speedups per tag (exp4)", *per_tag]
    parts += ["## Speedup against env cost", env_cost_markdown(env_cost, not env_costs(an.timing).empty)]
    if an.masks.get("exp1", pd.Series(dtype=bool)).any():
        parts += ["## Iteration windows (exp1, median over runs)", markdown_table(windows_table(an))]
    timing_note = (
        f"Measured by env_timing.py on {timing_info.get('device') or 'an unnamed device'} "
        f"({flat(timing_info.get('versions')) or 'versions not recorded'})."
        if timing_info
        else "No env timing given (`--env-timing`): envs are in the study's order."
    )
    parts += ["## Environment complexity", timing_note, markdown_table(env_table(an))]
    parts += ["## Figures"]
    parts += [f"### {spec.caption}\n\n![{spec.caption}]({spec.file})" for spec in drawn]
    parts += [f"- {note}" for note in notes]
    parts += ["## Skipped runs"]
    parts += [markdown_table(pd.DataFrame(skipped, columns=["run", "reason"])) if skipped else "None."]
    path.write_text("\n\n".join(parts) + "\n")


# ------------------------------------------------------------------------------------------ main
README_MARKERS = ("<!-- speedups:start -->", "<!-- speedups:end -->")


def readme_with(path: Path, block: str) -> str:
    """The text of the file at path with block between its README_MARKERS (the markers stay); exit 2 without them."""
    text = path.read_text()
    start, end = (text.find(marker) for marker in README_MARKERS)
    if start < 0 or end < start:
        fail(f"{path} has no {README_MARKERS[0]} ... {README_MARKERS[1]} block; nothing written")
    return text[: start + len(README_MARKERS[0])] + "\n" + block + text[end:]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "runs_dirs",
        nargs="*",
        metavar="RUNS_DIR",
        help="folders searched (at any depth) for run folders, i.e. folders holding config.json",
    )
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder (created if needed)")
    parser.add_argument(
        "--csv",
        action="append",
        default=[],
        metavar="FILE",
        help="a runs.csv written earlier (e.g. on another machine) to merge in; repeatable",
    )
    parser.add_argument(
        "--env-timing",
        metavar="FILE",
        help="env_timing.json from env_timing.py: orders envs by step cost (else in the study's order)",
    )
    parser.add_argument(
        "--no-figures",
        dest="figures",
        action="store_false",
        help="write the tables and REPORT.md only (fast, e.g. to merge the CSVs of several machines); "
        "figures of an earlier call in --out are removed",
    )
    parser.add_argument(
        "--readme-block",
        type=Path,
        metavar="FILE",
        help="also write just the speedup tables (markdown) to FILE, for the README",
    )
    parser.add_argument(
        "--previous",
        metavar="FILE",
        help="the speedups.csv of a previous edition: its headline pairs, side by side with this "
        "one's, are added to REPORT.md and the README tables",
    )
    parser.add_argument(
        "--update-readme",
        type=Path,
        metavar="FILE",
        help=f"replace the text between {README_MARKERS[0]} and {README_MARKERS[1]} in FILE "
        "with the speedup tables (refused when there are no pairs of runs to compare)",
    )
    args = parser.parse_args(argv)
    if not args.runs_dirs and not args.csv:
        parser.error("give at least one RUNS_DIR or --csv FILE")
    for path in args.runs_dirs:
        if not Path(path).is_dir():
            parser.error(f"RUNS_DIR {path} is not a folder")
    for path in [*args.csv, *(path for path in (args.env_timing, args.previous) if path)]:
        if not Path(path).is_file():
            parser.error(f"no file {path}")
    if args.previous:
        missing = [c for c in SPEEDUP_COLUMNS if c not in pd.read_csv(args.previous, nrows=0).columns]
        if missing:
            parser.error(
                f"--previous {args.previous} is not a speedups.csv of plot_results.py: no column {', '.join(missing)}"
            )
    if args.update_readme and not args.update_readme.is_file():
        parser.error(f"no file {args.update_readme}")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    sources = [*args.runs_dirs, *args.csv]
    timing, timing_info = read_env_timing(args.env_timing)
    runs, skipped = load_runs(args.runs_dirs, args.csv)
    for run in skipped:
        print(f"warning: skipped {run.path}: {run.reason}", file=sys.stderr)
    if runs.empty:  # before anything is created or overwritten
        fail(f"no completed run in {', '.join(sources)} ({len(skipped)} skipped); nothing written")
    summary = summarize(runs, timing)
    an = analysis(summary, timing)
    speedups = speedup_table(summary)
    env_cost = env_cost_table(summary, timing)
    previous = pd.read_csv(args.previous) if args.previous else None
    block = readme_markdown(speedups, previous, args.previous)
    if speedups.empty and (args.update_readme or args.readme_block):
        fail(
            "no pairs of runs to compare: the README speedup tables would be empty; nothing written "
            "(drop --update-readme/--readme-block to write the rest)"
        )
    readme = readme_with(args.update_readme, block) if args.update_readme else None

    args.out.mkdir(parents=True, exist_ok=True)
    runs.to_csv(args.out / "runs.csv", index=False)
    summary.to_csv(args.out / "summary.csv", index=False)
    speedups.to_csv(args.out / "speedups.csv", index=False)
    env_cost.to_csv(args.out / "env_cost.csv", index=False)
    drawn, notes = draw_figures(an, args.out) if args.figures else ([], ["figures not drawn (--no-figures)"])
    notes += remove_stale_figures(args.out, drawn)
    for note in notes:
        print(f"note: {note}")
    edition = edition_markdown(previous, speedups, args.previous) if previous is not None else ""
    write_report(args.out / "REPORT.md", an, speedups, env_cost, skipped, drawn, notes, sources, timing_info, edition)
    if args.readme_block:
        args.readme_block.write_text(block)
    if readme is not None:
        args.update_readme.write_text(readme)
    print(f"{len(summary)} runs ({len(skipped)} skipped), {len(drawn)} figures -> {args.out}/REPORT.md")


if __name__ == "__main__":
    main()

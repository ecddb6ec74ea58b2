"""Turns benchmark runs into the study's tables, figures and REPORT.md (part of benchback-rl).

    python plot_results.py runs/ --out results/ --env-timing results/env_timing.json
    python plot_results.py --csv linux/runs.csv --csv mac/runs.csv --out results/   # merge machines

Every folder holding a config.json (at any depth under the given folders) is a run. Completed runs are
read (config.json, summary.json, TensorBoard scalars); the others are skipped and listed in the report.
Written to --out:

    runs.csv      one row per run x iteration: the run's config, its summary and every scalar
    summary.csv   one row per run: config, durations, iteration windows, the experiments it belongs to
    speedups.csv  speedups A->B = time_A / time_B per metric, model size and framework pair
    *.png         the figures of each experiment (skipped when the experiment has no runs)
    REPORT.md     the tables, the figures, the machines and versions, the skipped runs
"""

import argparse
import json
import re
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

# ------------------------------------------------------------------------------------ the study
FRAMEWORKS = ("linen", "nnx", "torch")
SIZES = ("small", "medium", "large")
COMPILE_MODES = {"linen": ("jit", "none"), "nnx": ("cached_partial", "jit", "none"), "torch": ("compile", "env-jit", "none")}
DEFAULT_COMPILE = {framework: modes[0] for framework, modes in COMPILE_MODES.items()}
PAIRS = (("nnx", "linen"), ("torch", "linen"), ("torch", "nnx"))  # A->B = time_A / time_B
PAIR_NAMES = tuple(f"{a}->{b}" for a, b in PAIRS)
# Runs are paired when these match; iterations and batch size only guard against mixing different sweeps.
PAIR_KEYS = ["env", "model_size", "tag", "num_iterations", "batch_size"]
EXP3_ENV = "Acrobot-v1"

# Mean time/iteration over iteration windows (first, last), last None = to the end.
WINDOWS = {"iter0_s": (0, 0), "iters1_7_s": (1, 7), "iters8plus_s": (8, None)}
WINDOW_LABELS = {"iter0_s": "iteration 0", "iters1_7_s": "iterations 1-7", "iters8plus_s": "iterations 8+"}
STEADY_START = 8
# speedup metric -> summary column
SPEEDUP_METRICS = {"total": "total_s", "steady": "iters8plus_s", "rollout": "rollout8plus_s", "update": "update8plus_s"}
METRIC_TITLES = {
    "total": "Total time (exp1: sync off, default compile)",
    "steady": "Steady state, mean time/iteration over iterations 8+ (exp1)",
    "rollout": "Rollout, mean over iterations 8+ (sync on, default compile)",
    "update": "Update, mean over iterations 8+ (sync on, default compile)",
}
BOOTSTRAP_SEED = 0
BOOTSTRAP_RESAMPLES = 10_000

# ------------------------------------------------------------------------------------ the tables
CONFIG_COLUMNS = ["env", "framework", "model_size", "compile", "seed", "tag", "sync_timing", "num_iterations",
                  "num_envs", "num_steps", "batch_size", "exp_name", "device", "hostname", "platform", "versions",
                  "start_time"]
SUMMARY_JSON_COLUMNS = ["status", "iterations_completed", "setup_s", "total_s", "final_return"]
RUN_COLUMNS = ["run", "run_dir", "sweep", *CONFIG_COLUMNS, *SUMMARY_JSON_COLUMNS]
REQUIRED_CONFIG = ["env", "framework", "model_size", "compile", "seed", "sync_timing", "batch_size"]


class RunError(Exception):
    """A run folder that cannot be used; the message says why."""


class SkippedRun(NamedTuple):
    path: str
    reason: str


def read_json(path: Path) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise RunError(f"no {path.name}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RunError(f"unreadable {path.name} ({e})") from None
    if not isinstance(data, dict):
        raise RunError(f"{path.name} is not a JSON object")
    return data


def read_scalars(run_dir: Path) -> pd.DataFrame:
    """One row per logged step, one column per scalar tag."""
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    accumulator = EventAccumulator(str(run_dir), size_guidance={SCALARS: 0})  # 0 = keep every event
    accumulator.Reload()
    tags = accumulator.Tags()["scalars"]
    if not tags:
        raise RunError("no TensorBoard scalars")
    columns = {tag: pd.Series({event.step: event.value for event in accumulator.Scalars(tag)}) for tag in sorted(tags)}
    return pd.DataFrame(columns).rename_axis("step").reset_index()


def format_versions(versions) -> str:
    if not isinstance(versions, dict):
        return "" if versions is None else str(versions)
    return ", ".join(f"{name} {version}" for name, version in versions.items())


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
    if len(scalars) < expected:
        raise RunError(f"events hold {len(scalars)} of {expected} iterations")
    # bench.sh writes each experiment into its own folder (exp2 and exp3 both hold Acrobot-v1 small runs)
    sweep = run_dir.parent.name if re.fullmatch(r"exp\d+", run_dir.parent.name) else ""
    info = {"run": run_dir.name, "run_dir": str(run_dir), "sweep": sweep,
            **{key: config.get(key) for key in CONFIG_COLUMNS}, **{key: summary.get(key) for key in SUMMARY_JSON_COLUMNS}}
    info["versions"] = format_versions(config.get("versions"))
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
    missing = [column for column in ["run", "iteration", "time/iteration", *REQUIRED_CONFIG, "total_s"] if column not in runs]
    if missing:
        sys.exit(f"error: {path} is not a runs.csv of plot_results.py (no column {', '.join(missing)})")
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


def window_mean(values: pd.Series, first: int, last: Optional[int]) -> float:
    """Mean of a per-iteration series (indexed by iteration) over iterations first..last (inclusive)."""
    selected = values[values.index >= first]
    if last is not None:
        selected = selected[selected.index <= last]
    return float(selected.mean()) if len(selected) else float("nan")


def summarize_run(rows: pd.DataFrame) -> dict:
    rows = rows.set_index("iteration")
    row = {column: rows[column].iloc[0] for column in RUN_COLUMNS if column in rows}
    for column, (first, last) in WINDOWS.items():
        row[column] = window_mean(rows["time/iteration"], first, last)
    for part in ("rollout", "update"):  # only meaningful when the timers were synchronised
        exact = row["sync_timing"] and f"time/{part}" in rows
        row[f"{part}8plus_s"] = window_mean(rows[f"time/{part}"], STEADY_START, None) if exact else float("nan")
    return row


# The experiments of DESIGN.md, as membership tests on a summary row. A run can be in several, unless
# bench.sh put it in an experiment's folder.
def swept_for(run, experiment: str) -> bool:
    sweep = run.get("sweep")
    return not isinstance(sweep, str) or sweep in ("", experiment)


def in_exp1(run) -> bool:
    """Overall comparison: sync off, each framework's default compile mode."""
    return swept_for(run, "exp1") and not run["sync_timing"] and run["compile"] == DEFAULT_COMPILE.get(run["framework"])


def in_exp2(run) -> bool:
    """Rollout vs update: sync on, small model, every compile mode."""
    return swept_for(run, "exp2") and bool(run["sync_timing"]) and run["model_size"] == "small"


def in_exp3(run) -> bool:
    """Model size: sync on, Acrobot-v1, every size and compile mode."""
    return swept_for(run, "exp3") and bool(run["sync_timing"]) and run["env"] == EXP3_ENV


def experiment_masks(summary: pd.DataFrame) -> dict[str, pd.Series]:
    """exp1..exp4 -> boolean mask over summary rows. exp4 (platforms) = exp1 when it spans several tags."""
    masks = {name: pd.Series([bool(test(row)) for _, row in summary.iterrows()], index=summary.index, dtype=bool)
             for name, test in (("exp1", in_exp1), ("exp2", in_exp2), ("exp3", in_exp3))}
    masks["exp4"] = masks["exp1"] & (summary.loc[masks["exp1"], "tag"].nunique() > 1)
    return masks


def summarize(runs: pd.DataFrame, timing: pd.DataFrame) -> pd.DataFrame:
    """One row per run: config, durations, window means and the experiments it belongs to."""
    summary = pd.DataFrame([summarize_run(rows) for _, rows in runs.groupby("run", sort=True)],
                           columns=[*RUN_COLUMNS, *WINDOWS, "rollout8plus_s", "update8plus_s"])
    summary["env_cost"] = summary["env"].map(timing["ratio"]) if "ratio" in timing else float("nan")
    masks = experiment_masks(summary)
    summary["experiments"] = [" ".join(name for name, mask in masks.items() if mask[i]) for i in summary.index]
    return summary


# ------------------------------------------------------------------------------------- speedups
def pairwise(summary: pd.DataFrame, column: str, mask: pd.Series, op=np.divide) -> pd.DataFrame:
    """op(A, B) over every pair of runs of frameworks A and B with the same PAIR_KEYS, for each pair A->B."""
    data = summary.loc[mask & summary[column].notna(), [*PAIR_KEYS, "framework", "run", column]]
    frames = []
    for (a, b), name in zip(PAIRS, PAIR_NAMES):
        both = data[data["framework"] == a].merge(data[data["framework"] == b], on=PAIR_KEYS, suffixes=("_a", "_b"))
        value = op(both[f"{column}_a"].to_numpy(float), both[f"{column}_b"].to_numpy(float))
        frames.append(both[PAIR_KEYS].assign(pair=name, value=value))
    return pd.concat(frames, ignore_index=True)


def geomean(values) -> float:
    return float(np.exp(np.mean(np.log(values))))


def geomean_ci(values, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the geometric mean (resampling pairs; seeded, so deterministic)."""
    logs = np.log(np.asarray(values, dtype=float))
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = logs[rng.integers(0, len(logs), size=(BOOTSTRAP_RESAMPLES, len(logs)))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(np.exp(low)), float(np.exp(high))


def metric_runs(summary: pd.DataFrame, metric: str) -> pd.Series:
    """The runs a speedup metric is computed from: exp1 for total/steady, synced default-compile runs otherwise."""
    if metric in ("total", "steady"):
        return experiment_masks(summary)["exp1"]
    return summary["sync_timing"].astype(bool) & (summary["compile"] == summary["framework"].map(DEFAULT_COMPILE))


def speedup_ratios(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    return pairwise(summary, SPEEDUP_METRICS[metric], metric_runs(summary, metric))


def speedup_table(summary: pd.DataFrame, metrics=tuple(SPEEDUP_METRICS)) -> pd.DataFrame:
    """metric, size, pair, geomean, median, ci_low, ci_high, n_pairs; combinations without pairs are left out."""
    rows = []
    for metric in metrics:
        ratios = speedup_ratios(summary, metric)
        for size in SIZES:
            for pair in PAIR_NAMES:
                values = ratios.loc[(ratios["model_size"] == size) & (ratios["pair"] == pair), "value"].to_numpy()
                if len(values):
                    low, high = geomean_ci(values)
                    rows.append({"metric": metric, "size": size, "pair": pair, "geomean": geomean(values),
                                 "median": float(np.median(values)), "ci_low": low, "ci_high": high,
                                 "n_pairs": len(values)})
    return pd.DataFrame(rows, columns=["metric", "size", "pair", "geomean", "median", "ci_low", "ci_high", "n_pairs"])


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
        table = pd.DataFrame({env: {c: pd.to_numeric(values.get(c), errors="coerce") for c in columns}
                              for env, values in envs.items() if isinstance(values, dict)}).T
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        print(f"warning: cannot use env timing {path} ({type(e).__name__}: {e}); envs are ordered by name")
        return empty, {}
    return table.reindex(columns=columns).astype(float), {"device": data.get("device"), "versions": data.get("versions")}


def env_order(envs, timing: pd.DataFrame) -> list[str]:
    """Cheapest env first when timed; envs without timing follow, by name."""
    cost = timing["ratio"].dropna() if "ratio" in timing else pd.Series(dtype=float)
    timed = sorted((env for env in set(envs) if env in cost), key=lambda env: (cost[env], env))
    return timed + sorted(env for env in set(envs) if env not in cost)


# ------------------------------------------------------------------------------------- figures
FRAMEWORK_COLORS = {"linen": "#1f77b4", "nnx": "#2ca02c", "torch": "#d62728"}
SIZE_MARKERS = {"small": "o", "medium": "s", "large": "^"}
SIZE_SHADES = {"small": 0.45, "medium": 0.0, "large": -0.35}  # >0 towards white, <0 towards black
SIZE_PALETTE = dict(zip(SIZES, sns.color_palette("Blues", 4)[1:]))
PAIR_PALETTE = dict(zip(PAIR_NAMES, sns.color_palette("Dark2", 3)))
SPEEDUP_LABEL = "speedup A → B = time A / time B\n(above 1×: B is faster)"


def shade(color, amount: float):
    rgb = np.array(matplotlib.colors.to_rgb(color))
    return tuple(rgb + (1 - rgb) * amount if amount > 0 else rgb * (1 + amount))


def mode_name(framework: str, compile_mode: str) -> str:
    return f"{framework}/{compile_mode}"


def mode_palette() -> dict[str, tuple]:
    """Each compile mode in its framework's color; the default mode darkest, the others lighter."""
    return {mode_name(framework, mode): shade(FRAMEWORK_COLORS[framework], 0.3 * i - 0.2)
            for framework, modes in COMPILE_MODES.items() for i, mode in enumerate(modes)}


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
    last.legend(handles, [rename(h.get_label()) for h in handles], title=title, loc="upper left",
                bbox_to_anchor=(1.02, 1), frameon=False, fontsize=10, title_fontsize=11)


def new_figure(ncols: int, nrows: int = 1, width: float = 6.0, height: float = 4.8, title: str = ""):
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    fig.suptitle(title, fontsize=15, fontweight="bold")
    return fig, axes


def box_with_points(ax, data, x, y, order, hue, hue_order, palette, log=True) -> None:
    """A box per (x, hue) with every run (or pair of runs) drawn on top."""
    palette = {h: palette.get(h, "0.6") for h in hue_order}  # grey for a framework or mode not listed above
    sns.boxplot(data=data, x=x, y=y, order=order, hue=hue, hue_order=hue_order, palette=palette, ax=ax,
                showfliers=False, log_scale=log, boxprops={"alpha": 0.8})
    sns.stripplot(data=data, x=x, y=y, order=order, hue=hue, hue_order=hue_order, palette={h: "0.2" for h in hue_order},
                  dodge=True, size=3, alpha=0.6, ax=ax, legend=False, log_scale=log)
    ax.set_xlabel("")


def modes_pointplot(ax, data, x, part: str, order, title: str, joined: bool) -> None:
    """The steady-state time of part (rollout or update): median over seeds per (x, compile mode), bars min to max."""
    modes = present(mode_palette(), data["mode"])
    palette = {mode: mode_palette().get(mode, "0.6") for mode in modes}
    sns.pointplot(data=data, x=x, y=f"{part}8plus_s", order=order, hue="mode", hue_order=modes, palette=palette, ax=ax, estimator="median", errorbar=("pi", 100), dodge=0.5, markersize=6,
                  linewidth=1.5, linestyle="-" if joined else "none", log_scale=True)
    log_axis(ax, f"{part} time per iteration (s)")
    ax.set_title(title)
    ax.set_xlabel("")


def speedup_boxes(ax, ratios: pd.DataFrame, hue: str, hue_order, palette, title: str) -> None:
    """Box plots of speedup ratios per framework pair, split by hue."""
    box_with_points(ax, ratios, "pair", "value", present(PAIR_NAMES, ratios["pair"]), hue, hue_order, palette)
    ax.set_xticks(ax.get_xticks(), [pretty_pair(label.get_text()) for label in ax.get_xticklabels()])
    ratio_axis(ax)
    ax.set_title(title)


@dataclass
class Study:
    """What the figures and the report are drawn from."""

    summary: pd.DataFrame
    masks: dict[str, pd.Series]
    envs: list[str]  # cheapest first when timed, else by name
    timing: pd.DataFrame

    def runs(self, experiment: str) -> pd.DataFrame:
        runs = self.summary[self.masks[experiment]]
        return runs.assign(mode=[mode_name(f, c) for f, c in zip(runs["framework"], runs["compile"])])


def env_positions(study: Study, envs: pd.Series) -> tuple[pd.Series, bool]:
    """x of each env: its measured step cost when every env has one, else its rank."""
    cost = study.timing["ratio"].dropna()
    if envs.isin(cost.index).all():
        return envs.map(cost), True
    return envs.map({env: i for i, env in enumerate(study.envs)}), False


def draw_against_env_cost(ax, study: Study, runs: pd.DataFrame, y: str) -> list[Line2D]:
    """Every run against its env's step cost; framework = color, size = marker and shade; lines join medians.
    Returns the legend handles."""
    x, timed = env_positions(study, runs["env"])
    for (framework, size), group in runs.groupby(["framework", "model_size"]):
        color = shade(FRAMEWORK_COLORS.get(framework, "0.5"), SIZE_SHADES.get(size, 0.0))
        ax.scatter(x[group.index], group[y], color=color, marker=SIZE_MARKERS.get(size, "o"), s=28, alpha=0.75)
        medians = group.groupby(x[group.index])[y].median().sort_index()
        ax.plot(medians.index, medians.to_numpy(), color=color, lw=1.2)
    if timed:
        log_axis(ax, "env step cost relative to the cheapest env", suffix="×", axis="x")
    else:
        envs = present(study.envs, runs["env"])
        ax.set_xticks([study.envs.index(env) for env in envs], envs)
        rotate_xticks(ax)
        ax.set_xlabel("env (no env timing given: by name)")
    handles = [Line2D([], [], color=FRAMEWORK_COLORS[f], lw=3, label=f) for f in present(FRAMEWORKS, runs["framework"])]
    return handles + [Line2D([], [], color="0.3", marker=SIZE_MARKERS[s], ls="", label=s)
                      for s in present(SIZES, runs["model_size"])]


def fig_exp1_total(study: Study):
    runs = study.runs("exp1")
    fig, axes = new_figure(2, width=6.5, title="Exp1: total run duration per framework (sync off, default compile)")
    box_with_points(axes[0, 0], runs, "model_size", "total_s", present(SIZES, runs["model_size"]), "framework",
                    present(FRAMEWORKS, runs["framework"]), FRAMEWORK_COLORS)
    log_axis(axes[0, 0], "total duration (s)")
    axes[0, 0].set_title("all envs and seeds, by model size")
    handles = draw_against_env_cost(axes[0, 1], study, runs, "total_s")
    log_axis(axes[0, 1], "total duration (s)")
    axes[0, 1].set_title("against env complexity (lines: medians)")
    row_legend(axes[0], "framework / size", handles=handles)
    return fig


def speedup_figure(study: Study, metric: str, title: str):
    ratios = speedup_ratios(study.summary, metric)
    if ratios.empty:
        return None
    fig, axes = new_figure(1, width=9, title=title)
    speedup_boxes(axes[0, 0], ratios, "model_size", present(SIZES, ratios["model_size"]), SIZE_PALETTE,
                  "every pair of runs with the same env, size and tag")
    row_legend(axes[0], "model size")
    return fig


def fig_exp1_speedups(study: Study):
    return speedup_figure(study, "total", "Exp1: total-time speedups per framework pair and model size")


def fig_steady_speedups(study: Study):
    return speedup_figure(study, "steady", "Steady state: speedups of the mean time/iteration over iterations 8+ (exp1)")


def fig_overhead_windows(study: Study):
    """Top: mean time/iteration per window and framework. Bottom: A - B per pair (symlog)."""
    runs = study.runs("exp1")
    sizes = present(SIZES, runs["model_size"])
    fig, axes = new_figure(len(sizes), 2, width=6, height=5,
                           title="Overhead by iteration window: 0 = compilation, 1-7 = warm-up, 8+ = steady state (exp1)")
    windows = runs.melt(id_vars=["model_size", "framework"], value_vars=list(WINDOWS), var_name="window", value_name="s")
    differences = pd.concat([pairwise(study.summary, w, study.masks["exp1"], np.subtract).assign(window=w) for w in WINDOWS])
    labels = [WINDOW_LABELS[w].replace("iterations", "iters") for w in WINDOWS]
    for col, size in enumerate(sizes):
        top, bottom = axes[0, col], axes[1, col]
        box_with_points(top, windows[windows["model_size"] == size].dropna(), "window", "s", list(WINDOWS), "framework",
                        present(FRAMEWORKS, runs["framework"]), FRAMEWORK_COLORS)
        top.set_xticks(range(len(labels)), labels)
        top.set_title(f"{size} model")
        log_axis(top, "mean time per iteration (s)")
        diffs = differences[differences["model_size"] == size].dropna()
        if diffs.empty:
            empty_panel(bottom, "no pairs of runs")
            continue
        box_with_points(bottom, diffs, "window", "value", list(WINDOWS), "pair", present(PAIR_NAMES, diffs["pair"]),
                        PAIR_PALETTE, log=False)
        bottom.set_xticks(range(len(labels)), labels)
        symlog_axis(bottom, diffs["value"], "time A - time B per iteration (s)")
    row_legend(axes[0], "framework")
    row_legend(axes[1], "pair A → B", rename=pretty_pair)
    return fig


def fig_exp2_rollout_update(study: Study):
    """Top: rollout and update time by env and compile mode. Bottom: speedups between default modes, by env."""
    runs = study.runs("exp2")
    envs = present(study.envs, runs["env"])
    fig, axes = new_figure(2, 2, width=max(6.0, 0.6 * len(envs) + 2.5), height=5.2,
                           title="Exp2: rollout vs update, small model, sync on (mean over iterations 8+)")
    for col, part in enumerate(("rollout", "update")):
        modes_pointplot(axes[0, col], runs, "env", part, envs, f"{part}, every compile mode", joined=False)
        rotate_xticks(axes[0, col])
        axes[0, col].set_xlabel("env, cheapest step first" if study.timing["ratio"].notna().any() else "env, by name")
        ratios = speedup_ratios(study.summary, part)
        ratios = ratios[ratios["model_size"] == "small"]
        ax = axes[1, col]
        ax.set_title(f"{part} speedups, default compile modes")
        if ratios.empty:
            empty_panel(ax, "no pairs of default-compile runs")
            continue
        sns.pointplot(data=ratios, x="env", y="value", order=present(envs, ratios["env"]), hue="pair",
                      hue_order=present(PAIR_NAMES, ratios["pair"]), palette=PAIR_PALETTE, estimator="mean",  # of logs: geomean
                      errorbar=("pi", 100), dodge=0.4, linestyle="none", markersize=7, log_scale=True, ax=ax)
        ratio_axis(ax)
        rotate_xticks(ax)
        ax.set_xlabel("")
    row_legend(axes[0], "framework/compile\n(median, min-max)")
    row_legend(axes[1], "pair A → B\n(geomean, min-max)", rename=pretty_pair)
    return fig


def fig_exp3_compile_modes(study: Study):
    runs = study.runs("exp3")
    fig, axes = new_figure(2, width=6, title=f"Exp3: compile modes by model size ({EXP3_ENV}, sync on)")
    for col, part in enumerate(("rollout", "update")):
        modes_pointplot(axes[0, col], runs, "model_size", part, present(SIZES, runs["model_size"]),
                        f"{part} (mean over iterations 8+)", joined=True)
        axes[0, col].set_xlabel("model size")
    row_legend(axes[0], "framework/compile\n(median, min-max)")
    return fig


def fig_exp4_tags(study: Study):
    """Total duration per framework under each tag (one panel per size), then total-time speedups per tag."""
    runs = study.runs("exp4")
    sizes = present(SIZES, runs["model_size"])
    tags = sorted(runs["tag"].unique())
    palette = dict(zip(tags, sns.color_palette("Set2", len(tags))))
    fig, axes = new_figure(len(sizes) + 1, width=5, title="Exp4: platforms (tags) compared on the exp1 runs")
    for col, size in enumerate(sizes):
        ax = axes[0, col]
        box_with_points(ax, runs[runs["model_size"] == size], "framework", "total_s",
                        present(FRAMEWORKS, runs["framework"]), "tag", tags, palette)
        log_axis(ax, "total duration (s)")
        ax.set_title(f"{size} model: total duration")
    speedup_boxes(axes[0, -1], speedup_ratios(study.summary, "total"), "tag", tags, palette, "total-time speedups")
    row_legend(axes[0], "tag")
    return fig


class FigureSpec(NamedTuple):
    file: str
    experiment: str
    caption: str
    draw: Callable[[Study], Optional[plt.Figure]]


FIGURES = (
    FigureSpec("exp1_total.png", "exp1", "Exp1: total duration per framework, and against env complexity", fig_exp1_total),
    FigureSpec("exp1_speedups.png", "exp1", "Exp1: total-time speedups per pair and model size", fig_exp1_speedups),
    FigureSpec("overhead_windows.png", "exp1", "Overhead windows (iteration 0, 1-7, 8+) and pairwise differences",
               fig_overhead_windows),
    FigureSpec("steady_speedups.png", "exp1", "Steady-state speedups (iterations 8+)", fig_steady_speedups),
    FigureSpec("exp2_rollout_update.png", "exp2", "Exp2: rollout and update durations and speedups by env",
               fig_exp2_rollout_update),
    FigureSpec("exp3_compile_modes.png", "exp3", "Exp3: compile modes by model size", fig_exp3_compile_modes),
    FigureSpec("exp4_tags.png", "exp4", "Exp4: platforms (tags) compared", fig_exp4_tags),
)


def draw_figures(study: Study, out: Path) -> tuple[list[FigureSpec], list[str]]:
    """Saves each figure whose experiment has runs; returns the drawn figures and a note per skipped one."""
    sns.set_theme(context="notebook", style="whitegrid", font_scale=1.15)
    drawn, notes = [], []
    for spec in FIGURES:
        if not study.masks[spec.experiment].any():
            why = "runs of exp1 under at least two tags" if spec.experiment == "exp4" else f"{spec.experiment} runs"
            notes.append(f"{spec.file} skipped: no {why}")
            continue
        fig = spec.draw(study)
        if fig is None:
            notes.append(f"{spec.file} skipped: no pairs of runs to compare")
            continue
        fig.tight_layout()
        fig.savefig(out / spec.file, dpi=110, bbox_inches="tight")
        plt.close(fig)
        drawn.append(spec)
    for note in notes:
        print(f"note: {note}")
    return drawn, notes


# ---------------------------------------------------------------------------------------- report
def markdown_table(table: pd.DataFrame) -> str:
    """A DataFrame as a GitHub markdown table (floats to 3 significant digits, missing as '-')."""
    def cell(value) -> str:
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return "-"
        return f"{value:.3g}" if isinstance(value, float) else str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(map(str, table.columns)) + " |", "|" + " --- |" * len(table.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)


SPEEDUP_INTRO = ("Speedup A → B = time of A / time of B over every pair of runs with the same env, model size and tag "
                 "(above 1×: B is faster). Cells: geometric mean [95 % bootstrap interval]; median; number of pairs.")


def speedup_markdown(speedups: pd.DataFrame, intro: bool = True) -> str:
    """The speedup tables: per metric, a row per pair and a column per size, 'geomean× [95 % CI]; median; n'."""
    if speedups.empty:
        return "_No pairs of runs to compare._\n"
    blocks = [SPEEDUP_INTRO] if intro else []
    for metric, table in speedups.groupby("metric", sort=False):
        cells = table.assign(cell=[f"**{r.geomean:.2f}×** [{r.ci_low:.2f}, {r.ci_high:.2f}]; median {r.median:.2f}; "
                                   f"n={r.n_pairs}" for r in table.itertuples()])
        wide = cells.pivot(index="pair", columns="size", values="cell")
        wide = wide.reindex(index=present(PAIR_NAMES, wide.index), columns=present(SIZES, wide.columns))
        wide.index = [pretty_pair(p) for p in wide.index]
        blocks.append(f"**{METRIC_TITLES[metric]}**\n\n" + markdown_table(wide.rename_axis("pair").reset_index()))
    return "\n\n".join(blocks) + "\n"


def machines_table(summary: pd.DataFrame) -> pd.DataFrame:
    columns = ["tag", "hostname", "device", "platform", "framework", "versions"]
    return summary.fillna({c: "" for c in columns}).groupby(columns).size().rename("runs").reset_index()


def windows_table(study: Study) -> pd.DataFrame:
    runs = study.runs("exp1")
    columns = {"setup_s": "setup (s)", **{w: f"{WINDOW_LABELS[w]} (s/iter)" for w in WINDOWS}, "total_s": "total (s)"}
    table = runs.groupby(["framework", "model_size"])[list(columns)].median().rename(columns=columns).reset_index()
    key = {v: i for i, v in enumerate(FRAMEWORKS + SIZES)}
    return table.sort_values(["model_size", "framework"], key=lambda s: s.map(key)).rename(columns={"model_size": "size"})


def env_table(study: Study) -> pd.DataFrame:
    table = study.timing.reindex(study.envs).reset_index(names="env")
    runs = study.summary.groupby("env").size()
    return table.assign(runs=table["env"].map(runs).fillna(0).astype(int)).rename(
        columns={"obs_dim": "obs dim", "num_actions": "actions", "ms_per_step": "ms per step", "ratio": "relative cost"})


def write_report(path: Path, study: Study, speedups: pd.DataFrame, skipped: list[SkippedRun], drawn, notes,
                 sources: list[str], timing_info: dict) -> None:
    summary = study.summary
    counts = ", ".join(f"{name}: {int(mask.sum())}" for name, mask in study.masks.items())
    parts = [
        "# benchback-rl results",
        f"Generated by `plot_results.py` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from "
        f"{', '.join(f'`{s}`' for s in sources)}: {len(summary)} completed runs ({counts}); "
        f"{len(skipped)} skipped (listed at the end).",
        "## Machines and versions",
        markdown_table(machines_table(summary)) if len(summary) else "_No runs._",
        "## Speedups",
        speedup_markdown(speedups),
    ]
    if study.masks["exp4"].any():
        per_tag = [f"Tag `{tag}`:\n\n" + speedup_markdown(speedup_table(runs, ["total"]), intro=False)
                   for tag, runs in summary.groupby("tag")]
        parts += ["### Total-time speedups per tag (exp4)", *per_tag]
    if study.masks["exp1"].any():
        parts += ["## Iteration windows (exp1, median over runs)", markdown_table(windows_table(study))]
    timing_note = (f"Measured by env_timing.py on {timing_info.get('device') or 'an unnamed device'} "
                   f"({format_versions(timing_info.get('versions'))})."
                   if timing_info else "No env timing given (`--env-timing`): envs are ordered by name.")
    parts += ["## Environment complexity", timing_note, markdown_table(env_table(study))]
    parts += ["## Figures"]
    parts += [f"### {spec.caption}\n\n![{spec.caption}]({spec.file})" for spec in drawn]
    parts += [f"- {note}" for note in notes]
    parts += ["## Skipped runs"]
    parts += [markdown_table(pd.DataFrame(skipped, columns=["run", "reason"])) if skipped else "None."]
    path.write_text("\n\n".join(parts) + "\n")


# ------------------------------------------------------------------------------------------ main
README_MARKERS = ("<!-- speedups:start -->", "<!-- speedups:end -->")


def update_readme(path: Path, block: str) -> None:
    """Puts block between the README_MARKERS of the file at path (the markers stay)."""
    text = path.read_text()
    start, end = (text.find(marker) for marker in README_MARKERS)
    if start < 0 or end < start:
        sys.exit(f"error: {path} has no {README_MARKERS[0]} ... {README_MARKERS[1]} block")
    path.write_text(text[:start + len(README_MARKERS[0])] + "\n" + block + text[end:])


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs_dirs", nargs="*", metavar="RUNS_DIR",
                        help="folders searched (at any depth) for run folders, i.e. folders holding config.json")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder (created if needed)")
    parser.add_argument("--csv", action="append", default=[], metavar="FILE",
                        help="a runs.csv written earlier (e.g. on another machine) to merge in; repeatable")
    parser.add_argument("--env-timing", metavar="FILE",
                        help="env_timing.json from env_timing.py: orders envs by step cost (else by name)")
    parser.add_argument("--no-figures", dest="figures", action="store_false",
                        help="write the tables and REPORT.md only (fast, e.g. to merge the CSVs of several machines)")
    parser.add_argument("--readme-block", type=Path, metavar="FILE",
                        help="also write just the speedup tables (markdown) to FILE, for the README")
    parser.add_argument("--update-readme", type=Path, metavar="FILE",
                        help=f"replace the text between {README_MARKERS[0]} and {README_MARKERS[1]} in FILE "
                             "with the speedup tables")
    args = parser.parse_args(argv)
    if not args.runs_dirs and not args.csv:
        parser.error("give at least one RUNS_DIR or --csv FILE")
    for path in args.runs_dirs:
        if not Path(path).is_dir():
            parser.error(f"RUNS_DIR {path} is not a folder")
    for path in [*args.csv, *([args.env_timing] if args.env_timing else [])]:
        if not Path(path).is_file():
            parser.error(f"no file {path}")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    timing, timing_info = read_env_timing(args.env_timing)
    runs, skipped = load_runs(args.runs_dirs, args.csv)
    for run in skipped:
        print(f"warning: skipped {run.path}: {run.reason}", file=sys.stderr)
    summary = summarize(runs, timing)
    study = Study(summary, experiment_masks(summary), env_order(summary["env"], timing), timing)
    speedups = speedup_table(summary)

    runs.to_csv(args.out / "runs.csv", index=False)
    summary.to_csv(args.out / "summary.csv", index=False)
    speedups.to_csv(args.out / "speedups.csv", index=False)
    drawn, notes = draw_figures(study, args.out) if args.figures else ([], ["figures not drawn (--no-figures)"])
    write_report(args.out / "REPORT.md", study, speedups, skipped, drawn, notes, [*args.runs_dirs, *args.csv], timing_info)
    if args.readme_block:
        args.readme_block.write_text(speedup_markdown(speedups))
    if args.update_readme:
        update_readme(args.update_readme, speedup_markdown(speedups))
    print(f"{len(summary)} runs ({len(skipped)} skipped), {len(drawn)} figures -> {args.out}/REPORT.md")


if __name__ == "__main__":
    main()

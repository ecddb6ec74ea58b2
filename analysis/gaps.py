"""Why a figure's panel or a table has no data, in the words that panel or REPORT.md shows instead of empty axes.

A time of an iteration window is missing when the runs end before the window starts; a rollout or update time when
the run's timers were not synchronised (sync off) or it logged none, and every time of a run resumed after a stop
(analysis/summary.py's is_timed); a speedup when the experiment has no runs of
the metric's sync setting in default compile modes, none with a time for it, or no second framework to pair with.
"""

import pandas as pd

from analysis.names import in_order
from analysis.speedups import metric_columns, metric_sync, speedup_masks
from analysis.summary import is_timed, window_columns
from sweep.study import Study, Window


def window_of(column: str, study: Study) -> Window:
    """The iteration window of a summary column: its own (iters8plus_s), else the steady one (rollout8plus_s)."""
    return window_columns(study).get(column, study.steady)


def counts(runs: pd.DataFrame) -> str:
    """The runs' numbers of iterations, in words: "6", "2 to 6"."""
    low, high = int(runs["num_iterations"].min()), int(runs["num_iterations"].max())
    return str(low) if low == high else f"{low} to {high}"


def too_short(runs: pd.DataFrame, window: Window) -> str:
    """Why no run reaches a window, e.g. "the steady window (iterations 8+) needs runs of 9 or more iterations;
    these have 6"."""
    return (
        f"the {window.name} window ({window.label}) needs runs of {window.first + 1} or more iterations; "
        f"these have {counts(runs)}"
    )


def short_note(runs: pd.DataFrame, window: Window) -> str:
    """too_short in a few words, for a column of a panel."""
    have = counts(runs)
    return (
        f"no run reaches\niteration {window.first}\n({have} iteration{'' if have == '1' else 's'})"
    )


def missing_time(runs: pd.DataFrame, column: str, study: Study) -> str:
    """Why none of `runs` (not empty) has a time in `column` (a window's, or the steady rollout or update)."""
    window = window_of(column, study)
    if not is_timed(runs).any():
        return "these runs were resumed after a stop: a second start is in their times, which are not compared"
    if (runs["num_iterations"] <= window.first).all():
        return too_short(runs, window)
    if column not in window_columns(study) and not runs["sync_timing"].astype(bool).any():
        return "rollout and update are timed only in sync-on runs (--sync-timing)"
    return f"no run logged a time for {window.label}"


def missing_pairs(runs: pd.DataFrame, column: str, study: Study) -> str:
    """Why `runs` (not empty: those a comparison could pair) give no pair of runs with a time in `column`."""
    timed = runs[runs[column].notna()]
    if timed.empty:
        return missing_time(runs, column, study)
    frameworks = in_order(study.frameworks, timed["framework"])
    if len(frameworks) < 2:
        return f"only {frameworks[0]} has runs; a pair needs two frameworks"
    return (
        "no runs of two frameworks share an env, model size, tag, number of iterations, batch size and "
        "machine (host and device)"
    )


def sync_words(metric: str) -> str:
    return f"sync-{'on' if metric_sync(metric) else 'off'}"


def speedup_gap(results, experiment: str, metric: str, size: str = "") -> str:
    """Why an experiment (of one model size, when given) has no speedups of a metric."""
    study = results.study
    masks = speedup_masks(results.summary, results.masks, study, metric)
    if experiment not in masks:
        return f"{experiment} has no {sync_words(metric)} runs"
    runs = results.summary[masks[experiment]]
    runs = runs[runs["model_size"] == size] if size else runs
    if runs.empty:
        return f"no {sync_words(metric)} runs of {experiment} in default compile modes"
    return missing_pairs(runs, metric_columns(study)[metric], study)


def env_cost_gap(results, metric: str, size: str = "") -> str:
    """Why the speedup-against-env-cost figure has no point of a metric (of one model size, when given)."""
    pairs = results.pairs[metric]
    pairs = pairs[pairs["model_size"] == size] if size else pairs
    if not pairs.empty:
        return "no env of these pairs of runs has a measured step cost (env_timing.json)"
    runs = results.metric_runs(metric)
    runs = runs[runs["model_size"] == size] if size else runs
    if runs.empty:
        return f"no {sync_words(metric)} runs in default compile modes"
    return missing_pairs(runs, metric_columns(results.study)[metric], results.study)

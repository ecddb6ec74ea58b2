"""One row per run: its config, durations, the mean time per iteration window, and the experiments it belongs to.

A run belongs to an experiment of the study when it matches the experiment's matrix (envs, sizes, compile modes,
sync setting, data type), or, when bench.sh put it in the experiment's folder, to that experiment only. A platform
comparison holds the runs of the experiment it repeats when they span two or more tags.

A resumed run (summary.json resumed_at, the scripts' --resume) is not timed (is_timed): a second start (its imports,
its compilation, its machine perhaps) is in its times, and its total_s is its last process's alone. It counts for
learning (its returns are those of one run, bit for bit) but its summary row's times are left empty (TIMES), so that
no timed result (speedups, pairs, dtype and platform tables, time figures, the report's time tables) takes it; the
learning analysis leaves its time to a return out too (analysis/learning.py).
"""

import pandas as pd

from analysis.loading import RUN_COLUMNS, run_keys, text_column
from sweep.study import Experiment, Study, Window


def window_column(window: Window, what: str = "") -> str:
    """The summary column of a window: iter0_s, iters1_7_s, iters8plus_s (or rollout8plus_s with what='rollout')."""
    if window.last is None:
        name = f"iters{window.first}plus_s"
    elif window.first == window.last:
        name = f"iter{window.first}_s"
    else:
        name = f"iters{window.first}_{window.last}_s"
    return name.replace("iters", what, 1) if what else name


def window_columns(study: Study) -> dict[str, Window]:
    """summary column -> window, in the study's order."""
    return {window_column(w): w for w in study.windows.values()}


def time_columns(study: Study) -> list[str]:
    """The summary columns of a run's times: those a resumed run leaves empty."""
    parts = [window_column(study.steady, part) for part in ("rollout", "update")]
    return ["setup_s", "import_s", "total_s", *window_columns(study), *parts]


def is_timed(runs: pd.DataFrame) -> pd.Series:
    """Per row of a runs or summary table, whether its run's times are one process's: it was never resumed. The one
    split of the runs into timed ones and the others (which count for learning only)."""
    return text_column(runs, "resumed_at") == ""


def window_mean(values: pd.Series, window: Window) -> float:
    """Mean of a per-iteration series (indexed by iteration) over the window's iterations (inclusive)."""
    selected = values.dropna()
    selected = selected[selected.index >= window.first]
    if window.last is not None:
        selected = selected[selected.index <= window.last]
    return float(selected.mean()) if len(selected) else float("nan")


def summarize_run(rows: pd.DataFrame, study: Study) -> dict:
    rows = rows.set_index("iteration")
    row = {column: rows[column].iloc[0] for column in RUN_COLUMNS if column in rows}
    for column, window in window_columns(study).items():
        row[column] = window_mean(rows["time/iteration"], window)
    for part in ("rollout", "update"):  # only meaningful when the timers were synchronised
        exact = row["sync_timing"] and f"time/{part}" in rows
        mean = window_mean(rows[f"time/{part}"], study.steady) if exact else float("nan")
        row[window_column(study.steady, part)] = mean
    if not is_timed(rows.iloc[:1]).iloc[0]:  # a resumed run: no times
        row.update(dict.fromkeys(time_columns(study), float("nan")))
    return row


def in_experiment(run, experiment: Experiment, study: Study) -> bool:
    """A run in bench.sh's folder of the experiment belongs to it whatever its env and size (bench.sh chose them,
    perhaps outside the study with --envs); any other run must match the experiment's whole matrix. A learning
    experiment (one with configs) holds only the runs of its folder: its matrix is also the flags of its
    configurations, which a run elsewhere was not made with."""
    folder = run.get("experiment_folder")
    in_a_folder = isinstance(folder, str) and folder != ""
    if (in_a_folder and folder != experiment.name) or (experiment.configs and not in_a_folder):
        return False
    framework = study.frameworks.get(run["framework"])
    in_matrix = in_a_folder or (
        run["env"] in experiment.envs and run["model_size"] in experiment.sizes
    )
    return (
        framework is not None
        and bool(run["sync_timing"]) in experiment.syncs
        and run["dtype"] in experiment.dtypes
        and in_matrix
        and run["compile"] in experiment.compile_modes(framework)
    )


def experiment_masks(summary: pd.DataFrame, study: Study) -> dict[str, pd.Series]:
    """Each experiment of the study, then each platform comparison -> a boolean mask over the summary's rows."""
    rows = [row for _, row in summary.iterrows()]
    masks = {
        name: pd.Series(
            [in_experiment(row, exp, study) for row in rows], index=summary.index, dtype=bool
        )
        for name, exp in study.experiments.items()
    }
    for name, platform in study.platforms.items():
        repeated = masks[platform.repeats]
        masks[name] = repeated & (summary.loc[repeated, "tag"].nunique() > 1)
    return masks


def summarize(
    runs: pd.DataFrame, timing: pd.DataFrame, study: Study
) -> tuple[pd.DataFrame, dict[str, pd.Series]]:
    """One row per run (config, durations, window means, the experiments it belongs to), and the experiments'
    masks over those rows."""
    steady = study.steady
    columns = [
        *RUN_COLUMNS,
        *window_columns(study),
        window_column(steady, "rollout"),
        window_column(steady, "update"),
    ]
    groups = runs.assign(run_key=run_keys(runs)).groupby(["run", "run_key"], sort=True)
    summary = pd.DataFrame([summarize_run(rows, study) for _, rows in groups], columns=columns)
    summary["env_cost"] = summary["env"].map(timing["ratio"]) if "ratio" in timing else float("nan")
    masks = experiment_masks(summary, study)
    summary["experiments"] = [
        " ".join(name for name, mask in masks.items() if mask[i]) for i in summary.index
    ]
    return summary, masks

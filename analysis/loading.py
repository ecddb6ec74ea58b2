"""The runs: run folders and runs.csv files -> one tidy table of the completed runs (a row per run x
iteration), then a row per run (summarize); and the other inputs (env timing, --previous).

A run is a folder holding config.json, at any depth under the given folders.
runlog.read_completed_run reads it and says why it cannot be used: the one definition of a usable
completed run (checked against the study, and its events file against its config), shared with
bench.sh's resume. The runs of a runs.csv written earlier go through the same check
(runlog.check_completed, without an events file), run by run; its text columns are read as text (a
tag "007" or "NA" stays one). Unusable runs are skipped with their reason, never stop the analysis.

A run's dtype is its config.json dtype (float32 for runs made before the scripts had --dtype). A
run's env is its env label (study.env_label): the env id, with "@envpool" for a run on envpool
(config.json env_backend; runs made before the scripts had backends lack it, and ran on gymnax), so
that the env column, and every table and figure keyed by it, never merges the two backends of one
env id.

A resumed run (the scripts' --resume) is read by runlog as one run, its events files merged; its
resumed_at column holds summary.json's resumed_at as words ("4 8"; "" for a run never resumed), and
is read back from a runs.csv, so that the analysis keeps it out of its timings there too (is_timed).

Runs are told apart by their content: the config's command, hostname and start time (with the folder
name only for a run of an older runs.csv without a start time). Runs of other tags or machines that
share a folder name are all kept; the same run given twice (a copied folder, cp -a B B-2; a folder
and a runs.csv) counts once: the first copy is kept, the others are listed as skipped. Run folders
are found as bench.sh's resume finds them (runlog.find_runs): a link to a folder is not followed,
and is listed as skipped.

A run's summary row: its config, durations, the mean time per iteration window, and the experiments
it belongs to. A run of N agents (config.json num_agents; 1 before --num-agents) is one row, its
times the process's; its row adds its agent-steps per second over the steady window (N x batch_size
/ the window's mean time) and its peak memory per agent (peak / N). A run belongs to an experiment
of the study when it matches the experiment's matrix (envs, sizes, compile modes, sync setting, data
type, agents; an experiment with configs or args: only from its folder), or, when bench.sh put it in
the experiment's folder, to that experiment only. A platform comparison holds the runs of the
experiment it repeats when they span two or more tags.

A resumed run (summary.json resumed_at, the scripts' --resume) is not timed (is_timed): a second
start (its imports, its compilation, its machine perhaps) is in its times, and its total_s is
every process's. It counts for learning (its returns are those of one run, bit for bit) but its
summary row's times are left empty (TIMES), so that no timed result (speedups, pairs, dtype and
platform tables, time figures, the report's time tables) takes it; the learning analysis leaves its
time to a return out too (analysis/learning.py).
"""

import json
from typing import Optional

import pandas as pd

from analysis.common import (
    ADDED_KEYS,
    CONFIG_COLUMNS,
    RUN_COLUMNS,
    SUMMARY_JSON_COLUMNS,
    VARIANTS,
    BadInput,
    SkippedRun,
    compile_seconds,
    config_cell,
    numeric_columns,
    read_csv,
    run_keys,
    text_column,
    without_empty_optional,
)
from analysis.output import as_bool, read_runs_csv
from core import env_timing_file, runlog
from core.study import BACKENDS, RUN_AXES, Experiment, Study, Window, env_label


# -------------------------------------------------------------------------------------- run folders
def resumed_words(summary: dict) -> str:
    """summary.json's resumed_at (runlog.resumed_at: checked) as one cell: "4 8", "" for a run never
    resumed."""
    return " ".join(str(k) for k in runlog.resumed_at(summary))


def run_env(config: dict) -> str:
    """A run's env label: its env on its env_backend (gymnax where config.json has none)."""
    return env_label(config["env"], config.get("env_backend") or BACKENDS[0])


def bf16_words(flags) -> Optional[str]:
    """config.json cpu_bf16 (the CPU's native bfloat16 flags) in words: the flags, "none (emulated)"
    for none, None where it was not recorded (a run of before --dtype, a machine without
    /proc/cpuinfo)."""
    if not isinstance(flags, list):
        return None
    return " ".join(str(flag) for flag in flags) or "none (emulated)"


def run_rows(run: runlog.Run, study: Study) -> pd.DataFrame:
    """The rows of one completed run: its config and summary on every row, its scalars one row per
    logged step."""
    config, summary, scalars = run.config, run.summary, run.scalars
    # bench.sh writes each experiment's runs into a folder of its name (two experiments may run the
    # same cell)
    parent = run.path.parent.name
    experiment_folder = parent if parent in study.experiments else ""
    # "device" in older runs
    config = {**config, "device_name": config.get("device_name", config.get("device"))}
    config["env"] = run_env(config)
    for axis in RUN_AXES:  # a run of before the option: the scripts' default then
        config[axis.key] = config.get(axis.key) or axis.default
    config["cpu_bf16"] = bf16_words(config.get("cpu_bf16"))
    finals = runlog.final_returns(summary, config["num_agents"])  # checked: a list, one per agent
    info = {
        "run": run.path.name,
        "run_dir": str(run.path),
        "experiment_folder": experiment_folder,
        **{key: config_cell(config.get(key)) for key in CONFIG_COLUMNS},
        **{key: summary.get(key) for key in SUMMARY_JSON_COLUMNS},
        "resumed_at": resumed_words(summary),
        "final_returns": json.dumps(finals),
        **compile_seconds(summary),
    }
    iteration = scalars["step"] // config["batch_size"] - 1
    return pd.concat([pd.DataFrame({**info, "iteration": iteration}), scalars], axis=1)


def read_run_dirs(roots: list[str], study: Study) -> tuple[list[pd.DataFrame], list[SkippedRun]]:
    """Every run folder (one holding config.json) at any depth under roots: the completed ones, and
    the skipped."""
    found, links = runlog.find_runs(roots)
    frames = []
    skipped = [
        SkippedRun(str(link), "a link to a folder: not followed (nor by bench.sh's resume)")
        for link in links
    ]
    for run_dir in found:
        try:
            frames.append(run_rows(runlog.read_completed_run(run_dir, study), study))
        except Exception as e:  # one broken run never stops the analysis
            reason = str(e) if isinstance(e, runlog.RunError) else f"{type(e).__name__}: {e}"
            skipped.append(SkippedRun(str(run_dir), reason))
    return frames, skipped


# ---------------------------------------------------------------------------------------- the table


def load_runs(
    roots: list[str], csvs: list[str], study: Study
) -> tuple[pd.DataFrame, list[SkippedRun]]:
    """The tidy table of all completed runs (one row per run x iteration), and the skipped runs."""
    frames, skipped = read_run_dirs(roots, study)
    # where each run was read: its folder, or its folder name in a runs.csv
    frames = [frame.assign(source=frame["run_dir"]) for frame in frames]
    for path in csvs:
        runs, bad = read_runs_csv(path, study)
        name = text_column(runs, "run_dir").where(text_column(runs, "run_dir") != "", runs["run"])
        # a frame per run, as for the folders
        runs = runs.assign(source=name + f" (in {path})")
        frames += [rows for _, rows in runs.groupby(["source", run_keys(runs)], sort=False)]
        skipped += bad
    frames = [frame.assign(frame=number) for number, frame in enumerate(frames)]
    if not frames:
        return pd.DataFrame(columns=[*RUN_COLUMNS, "iteration", "step", "time/iteration"]), skipped
    runs = pd.concat(frames, ignore_index=True)
    runs["sync_timing"] = as_bool(runs["sync_timing"])
    runs = runs.assign(run_key=run_keys(runs))
    runs, copies = first_copies(runs)
    skipped += copies
    first = [*RUN_COLUMNS, "iteration", "step"]
    columns = [c for c in first if c in runs] + sorted(
        c for c in runs if c not in first and c not in ("run_key", "source", "frame")
    )
    # by folder name, then (folder names shared by runs of other tags or machines) by identity
    runs = runs.sort_values(["run", "run_key", "iteration"], kind="stable")
    return without_empty_optional(runs[columns].reset_index(drop=True)), skipped


def first_copies(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[SkippedRun]]:
    """The rows of each run's first copy (by run_key; runs: with the frame each row was read in and
    its source), and the other copies as skipped."""
    first = runs.groupby("run_key", sort=False)["frame"].transform("first")
    again = runs["frame"] != first
    copies = runs[again].drop_duplicates("frame")
    if len(copies):
        print(
            f"note: {copies['run_key'].nunique()} runs were given more than once; kept the first "
            "copy"
        )
    kept = runs[~again].drop_duplicates("run_key").set_index("run_key")["source"]
    skipped = [
        SkippedRun(
            f"{source} (again)" if source == kept[key] else source,
            f"a copy of {kept[key]}: the same command, host and start time are one run, counted "
            "once",
        )
        for source, key in zip(copies["source"], copies["run_key"])
    ]
    return runs[~again], skipped


# --------------------------------------------------------------------------------------- env timing


def window_column(window: Window, what: str = "") -> str:
    """The summary column of a window: iter0_s, iters1_7_s, iters8plus_s (or rollout8plus_s with
    what='rollout')."""
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
    parts = [window_column(study.steady, part) for part in ("rollout", "update", "elapsed")]
    return ["setup_s", "import_s", "total_s", *window_columns(study), *parts]


def is_timed(runs: pd.DataFrame) -> pd.Series:
    """Per row of a runs or summary table, whether its run's times are one process's: it was never
    resumed. The one split of the runs into timed ones and the others (which count for learning
    only)."""
    return text_column(runs, "resumed_at") == ""


def window_mean(values: pd.Series, window: Window) -> float:
    """Mean of a per-iteration series (indexed by iteration) over the window's iterations
    (inclusive)."""
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
    # whole iterations: the steps of time/elapsed, which also hold the host's work between the
    # timed calls (each agent's scalars, the progress line) that time/iteration leaves out
    elapsed = rows["time/elapsed"].diff() if "time/elapsed" in rows else pd.Series(dtype=float)
    row[window_column(study.steady, "elapsed")] = window_mean(elapsed, study.steady)
    if not is_timed(rows.iloc[:1]).iloc[0]:  # a resumed run: no times
        row.update(dict.fromkeys(time_columns(study), float("nan")))
    # its agents' env steps per second (charts/SPS's), and each agent's share of its peak memory
    agents = row.get("num_agents", 1)
    row["agent_steps_s"] = agents * row["batch_size"] / row[window_column(study.steady)]
    whole = row[window_column(study.steady, "elapsed")]
    row["agent_steps_whole_s"] = agents * row["batch_size"] / whole
    for memory in ("peak_rss_bytes", "peak_device_bytes"):
        row[memory.replace("bytes", "per_agent")] = pd.to_numeric(row.get(memory)) / agents
    return row


# summarize's columns of a run's agents (agents_scaling)
AGENT_COLUMNS = [
    "agent_steps_s",
    "agent_steps_whole_s",
    "peak_rss_per_agent",
    "peak_device_per_agent",
]


def agents_scaling(runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per keys (framework and agents per process) of runs (summary rows), the medians over runs of
    the peak memory (bytes), the agent-steps per second in the steady window and the peak memory
    per agent."""
    columns = ["peak_rss_bytes", "peak_device_bytes", *AGENT_COLUMNS]
    numbers = runs[keys].assign(
        **{
            c: pd.to_numeric(runs.get(c, pd.Series(index=runs.index)), errors="coerce")
            for c in columns
        }
    )
    return numbers.groupby(keys)[columns].median().reset_index()


def in_experiment(run, experiment: Experiment, study: Study) -> bool:
    """A run in bench.sh's folder of the experiment belongs to it whatever its env and size
    (bench.sh chose them, perhaps outside the study with --envs); any other run must match the
    experiment's whole matrix. A learning experiment (one with configs), or one with args (exp11's
    batch), holds only the runs of its folder: its matrix is also those flags, which a run elsewhere
    was not made with."""
    folder = run.get("experiment_folder")
    in_a_folder = isinstance(folder, str) and folder != ""
    flags = experiment.configs or getattr(experiment, "args", ())
    if (in_a_folder and folder != experiment.name) or (flags and not in_a_folder):
        return False
    framework = study.frameworks.get(run["framework"])
    in_matrix = in_a_folder or (
        run["env"] in experiment.envs and run["model_size"] in experiment.sizes
    )
    return (
        framework is not None
        and bool(run["sync_timing"]) in experiment.syncs
        and all(
            run.get(axis.key, axis.default) in getattr(experiment, axis.field) for axis in RUN_AXES
        )
        and in_matrix
        and run["compile"] in experiment.compile_modes(framework)
    )


def experiment_masks(summary: pd.DataFrame, study: Study) -> dict[str, pd.Series]:
    """Each experiment of the study, then each platform comparison -> a boolean mask over the
    summary's rows."""
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
    """One row per run (config, durations, window means, the experiments it belongs to), and the
    experiments' masks over those rows."""
    steady = study.steady
    columns = [
        *RUN_COLUMNS,
        *window_columns(study),
        window_column(steady, "rollout"),
        window_column(steady, "update"),
        window_column(steady, "elapsed"),
        *AGENT_COLUMNS,
    ]
    groups = runs.assign(run_key=run_keys(runs)).groupby(["run", "run_key"], sort=True)
    summary = pd.DataFrame([summarize_run(rows, study) for _, rows in groups], columns=columns)
    summary = without_empty_optional(summary)
    summary["env_cost"] = summary["env"].map(timing["ratio"]) if "ratio" in timing else float("nan")
    masks = experiment_masks(summary, study)
    summary["experiments"] = [
        " ".join(name for name, mask in masks.items() if mask[i]) for i in summary.index
    ]
    return summary, masks


TIMING_COLUMNS = ["obs_dim", "num_actions", "ms_per_step", "ratio"]


def read_env_timing(path: Optional[str]) -> tuple[pd.DataFrame, dict]:
    """Per env obs_dim, num_actions, ms_per_step, ratio (from sweep/env_timing.py), and the file's
    device and versions. A file that is not a usable env-timing file (core/env_timing_file.py: a
    step cost of -1, 0, NaN or "x" among others) is refused, not used: BadInput, one line naming the
    file, the env and the value."""
    if path is None:
        return pd.DataFrame(columns=TIMING_COLUMNS, dtype=float), {}
    try:
        data = env_timing_file.read(path)
    except FileNotFoundError:
        raise BadInput(f"env timing {path}: no such file") from None
    except env_timing_file.BadTiming as e:
        raise BadInput(f"{e}; nothing written: fix it, or give --env-timing another file") from None
    table = pd.DataFrame(
        {env: {c: values.get(c) for c in TIMING_COLUMNS} for env, values in data["envs"].items()}
    ).T
    return table.reindex(columns=TIMING_COLUMNS).astype(float), {
        "device": data.get("device"),
        "versions": data.get("versions"),
    }


def read_previous(path: str, columns: list[str]) -> pd.DataFrame:
    """The speedups.csv of a previous edition; BadInput when the file is not one."""
    previous = read_csv("--previous", path, "speedups.csv")
    for before, column in zip(["experiment", *VARIANTS], VARIANTS):
        if column not in previous.columns and before in previous.columns:
            # an edition of before the env backends (or a run axis): its runs had the default
            previous.insert(list(previous.columns).index(before) + 1, column, ADDED_KEYS[column])
    missing = [c for c in columns if c not in previous.columns]
    if missing:
        raise BadInput(
            f"--previous {path} is not a speedups.csv of plot_results.py: no column "
            f"{', '.join(missing)}"
        )
    numeric = ["geomean", "median", "ci_low", "ci_high", "n_pairs", "n_clusters"]
    return numeric_columns(previous, numeric, "--previous", path, "speedups.csv")

"""The data types compared: each framework's time in one data type against its time in another.

Speedup A -> B between data types = a framework's time in A / its time in B, as between frameworks: bfloat16 ->
float32 above 1× means that the framework is faster in float32. In an experiment of several dtypes (study.toml),
every run of a framework in A is paired with every run of the same framework in B with the same other PAIR_KEYS (env,
model size, tag, iterations and batch size), each in the framework's default compile mode under the metric's sync
setting (speedups.speedup_masks), one run configuration per experiment and size (speedups.one_configuration). A cell
(metric, experiment, backend, size, framework, pair) has the speedup tables' statistics (speedups.cell_statistics).
The framework pairs within each data type are in the speedup tables (their dtype column).
"""

import itertools

import numpy as np
import pandas as pd

from analysis.speedups import (
    CELL_STATISTICS,
    METRICS,
    PAIR_KEYS,
    backends_of,
    experiment_data,
    metric_columns,
    one_configuration,
    paired,
    speedup_masks,
    table_rows,
)
from sweep.study import DTYPES, Study

DTYPE_COLUMNS = ["metric", "experiment", "backend", "size", "framework", "pair", *CELL_STATISTICS]


def dtype_pair_names(dtypes: tuple[str, ...]) -> list[tuple[str, str]]:
    """Every pair A -> B of an experiment's data types with B listed before A in DTYPES (bfloat16 -> float32)."""
    ordered = [dtype for dtype in DTYPES if dtype in dtypes]
    return [(a, b) for b, a in itertools.combinations(ordered, 2)]


def dtype_pairs(summary: pd.DataFrame, masks: dict, study: Study, metric: str) -> pd.DataFrame:
    """The pairs of runs (one framework, two data types) of a metric, from each experiment of several dtypes. Their
    dtype column holds the pair, "bfloat16->float32", so that speedups.clusters_of groups them by env and tag."""
    column = metric_columns(study)[metric]
    keys = [key for key in PAIR_KEYS if key != "dtype"] + ["framework"]
    frames = []
    for experiment, mask in speedup_masks(summary, masks, study, metric).items():
        data = experiment_data(summary, mask, column, experiment)
        for a, b in dtype_pair_names(study.experiments[experiment].dtypes):
            frame = paired(data, column, "dtype", a, b, keys, np.divide)
            frames.append(frame.assign(dtype=frame["pair"]))
    frames = [frame for frame in frames if not frame.empty]
    if not frames:
        return pd.DataFrame(columns=[*keys, "dtype", "pair", "run_a", "run_b", "a", "b", "value"])
    return one_configuration(pd.concat(frames, ignore_index=True))[0]


def dtype_table(summary: pd.DataFrame, masks: dict, study: Study) -> pd.DataFrame:
    """dtype_speedups.csv: a row per metric, experiment, backend, size, framework and data-type pair with pairs of
    runs, in the study's orders, with cell_statistics' columns."""
    rows = []
    for metric in METRICS:
        ratios = dtype_pairs(summary, masks, study, metric)
        ratios = ratios.assign(backend=backends_of(ratios))
        for experiment, exp in study.experiments.items():
            names = [f"{a}->{b}" for a, b in dtype_pair_names(exp.dtypes)]
            cells = itertools.product(exp.backends, study.sizes, study.frameworks, names)
            keys = (
                {
                    "experiment": experiment,
                    "backend": backend,
                    "size": size,
                    "framework": fw,
                    "pair": pair,
                }
                for backend, size, fw, pair in cells
            )
            rows += table_rows(metric, ratios, keys)
    return pd.DataFrame(rows, columns=DTYPE_COLUMNS)


def dtype_experiments(study: Study) -> list[str]:
    """The experiments of several data types, in the study's order."""
    return [name for name, exp in study.experiments.items() if len(exp.dtypes) > 1]

"""Everything the figures and the report are drawn from, computed once from the runs: the Results."""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.dtypes import dtype_table
from analysis.learning import learning_runs, learning_speedups, learning_table
from analysis.names import in_order, mode_name
from analysis.speedups import (
    METRICS,
    env_cost_table,
    env_costs,
    left_out,
    metric_pairs,
    speedup_masks,
    speedup_table,
)
from analysis.summary import summarize
from sweep.study import Study, split_label


@dataclass
class Results:
    study: Study
    summary: pd.DataFrame  # a row per run
    masks: dict[str, pd.Series]  # experiment or platform comparison -> its rows of summary
    envs: list[str]  # cheapest first when timed, else in the study's order
    timing: pd.DataFrame  # sweep/env_timing.py's table (empty without --env-timing)
    pairs: dict[str, pd.DataFrame]  # metric -> the pairs of runs its speedups come from
    speedups: pd.DataFrame  # speedups.csv
    env_cost: pd.DataFrame  # env_cost.csv
    left_out: pd.DataFrame  # runs a metric could use but does not, with the reason
    # dtype_speedups.csv: each framework's time in one data type / in another, per metric and size
    dtype_speedups: pd.DataFrame
    # platform comparison -> tag -> its total-time speedups
    platform_speedups: dict[str, dict[str, pd.DataFrame]]
    # a row per run of a learning experiment: final return, times to the reference's
    learning_runs: pd.DataFrame
    learning_curves: pd.DataFrame  # their smoothed returns per iteration
    # learning.csv: per learning experiment, env and framework, against the reference
    learning: pd.DataFrame
    # learning_speedups.csv: time-to-return speedups per target and pair
    learning_speedups: pd.DataFrame

    def dtype_cells(self, metric: str, experiment: str) -> pd.DataFrame:
        """The rows of dtype_speedups.csv of one metric and experiment."""
        table = self.dtype_speedups
        return table[(table["metric"] == metric) & (table["experiment"] == experiment)]

    def runs(self, experiment: str) -> pd.DataFrame:
        """The summary rows of an experiment (or platform comparison), with their framework/compile mode."""
        runs = self.summary[self.masks[experiment]]
        return runs.assign(
            mode=[mode_name(f, c) for f, c in zip(runs["framework"], runs["compile"])]
        )

    def backend_runs(self, experiment: str) -> pd.DataFrame:
        """An experiment's sync-on runs in default compile modes, with each run's env id and backend (from its
        label)."""
        runs = self.runs(experiment)
        default = runs["compile"] == runs["framework"].map(self.study.default_compile)
        runs = runs[runs["sync_timing"].astype(bool) & default]
        labels = [split_label(label) for label in runs["env"]]
        return runs.assign(
            env_id=[env for env, _ in labels], backend=[backend for _, backend in labels]
        )

    def metric_runs(self, metric: str) -> pd.DataFrame:
        """The runs a speedup metric compares, from all its experiments."""
        masks = list(speedup_masks(self.summary, self.masks, self.study, metric).values())
        return self.summary[np.logical_or.reduce(masks)] if masks else self.summary.iloc[:0]

    def compared(self, metric: str) -> list[str]:
        """The experiments a speedup metric compares that have runs for it (metric_runs' experiments), in the
        study's order: what a figure drawn over all of them names."""
        masks = speedup_masks(self.summary, self.masks, self.study, metric)
        return [name for name, mask in masks.items() if mask.any()]

    def cells(self, metric: str, experiment: str) -> pd.DataFrame:
        """The rows of speedups.csv of one metric and experiment."""
        return self.speedups[
            (self.speedups["metric"] == metric) & (self.speedups["experiment"] == experiment)
        ]

    def has_runs(self, name: str) -> bool:
        return bool(self.masks.get(name, pd.Series(dtype=bool)).any())


def env_order(envs, timing: pd.DataFrame, study: Study) -> list[str]:
    """Cheapest env first when timed; envs without timing follow in the study's order (others by name)."""
    cost = env_costs(timing)
    timed = sorted((env for env in set(envs) if env in cost), key=lambda env: (cost[env], env))
    return timed + in_order(study.every_env, [env for env in set(envs) if env not in cost])


def platform_tables(
    summary, masks, study: Study, pairs: dict
) -> dict[str, dict[str, pd.DataFrame]]:
    """Per platform comparison with runs, per tag: the total-time speedups of the experiment it repeats."""
    tables = {}
    for name, platform in study.platforms.items():
        if not masks[name].any():
            continue
        total = pairs["total"][pairs["total"]["experiment"] == platform.repeats]
        tags = sorted(summary.loc[masks[name], "tag"].unique())
        tables[name] = {
            tag: speedup_table({"total": total[total["tag"] == tag]}, study) for tag in tags
        }
    return tables


def analyse(runs: pd.DataFrame, timing: pd.DataFrame, study: Study) -> Results:
    """The summary, the pairs, the speedup and env-cost tables and what was left out, from the tidy runs table."""
    summary, masks = summarize(runs, timing, study)
    split = {metric: metric_pairs(summary, masks, study, metric) for metric in METRICS}
    pairs = {metric: pooled for metric, (pooled, _) in split.items()}
    not_pooled = {metric: rest for metric, (_, rest) in split.items()}
    learned, curves = learning_runs(runs, summary, masks, study)
    return Results(
        study=study,
        summary=summary,
        masks=masks,
        envs=env_order(summary["env"], timing, study),
        timing=timing,
        pairs=pairs,
        speedups=speedup_table(pairs, study),
        env_cost=env_cost_table(pairs, timing, study),
        left_out=left_out(summary, masks, study, pairs, not_pooled),
        dtype_speedups=dtype_table(summary, masks, study),
        platform_speedups=platform_tables(summary, masks, study, pairs),
        learning_runs=learned,
        learning_curves=curves,
        learning=learning_table(learned, study),
        learning_speedups=learning_speedups(learned, study),
    )

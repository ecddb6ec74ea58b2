"""The learning figure of a learning experiment: per env (a row), each framework's smoothed return against env
steps (left) and against seconds from the process's first line (right): the mean over seeds as a line, their
range as a band; the reference's published mean +- std as a grey band. A resumed run is drawn in steps only: its
seconds are not one process's."""

import pandas as pd

from analysis.common import in_order
from analysis.learning import SMOOTHING
from analysis.plotting import framework_colors, new_figure, row_legend
from sweep.study import Study


def mean_curve(curves: pd.DataFrame) -> pd.DataFrame:
    """Per env step, over a framework's seeds: the mean, min and max smoothed return and the mean elapsed time
    (every seed of one configuration logs the same steps)."""
    grouped = curves.groupby("step")
    return pd.DataFrame(
        {
            "mean": grouped["smoothed"].mean(),
            "low": grouped["smoothed"].min(),
            "high": grouped["smoothed"].max(),
            "elapsed": grouped["elapsed"].mean(),
        }
    ).reset_index()


def draw_reference(ax, mean: float, std: float) -> None:
    ax.axhspan(mean - std, mean + std, color="0.6", alpha=0.3, lw=0)
    ax.axhline(mean, color="0.3", ls="--", lw=1, label="reference (mean ± std)")


def draw_env(axes_row, curves: pd.DataFrame, reference, colors: dict, study: Study) -> None:
    for framework in in_order(study.frameworks, curves["framework"]):
        mine = curves[curves["framework"] == framework]
        seeds = mine["seed"].nunique()
        label = f"{framework} ({seeds} seed{'s' if seeds > 1 else ''})"
        for ax, x in zip(axes_row, ("step", "elapsed")):
            # in seconds, the timed runs alone: a resumed run's elapsed is NaN (analysis/learning.py)
            curve = mean_curve(mine.dropna(subset=[x]))
            color = colors.get(framework, "0.5")
            ax.plot(curve[x], curve["mean"], color=color, lw=1.8, label=label)
            ax.fill_between(curve[x], curve["low"], curve["high"], color=color, alpha=0.15, lw=0)
    for ax in axes_row:
        draw_reference(ax, reference.mean, reference.std)


def learning_figure(curves: pd.DataFrame, experiment: str, study: Study):
    """The figure of one learning experiment's curves (learning.learning_runs' second table); without any, why."""
    curves = curves[curves["experiment"] == experiment]
    exp = study.experiments[experiment]
    if curves.empty:
        return f"no run of {experiment} is of an env of its configurations ({', '.join(exp.envs)})"
    envs = [env for env in exp.envs if env in set(curves["env"])]
    fig, axes = new_figure(2, len(envs), width=6.5, height=3.6, title=f"{experiment}: {exp.title}")
    colors = framework_colors(study)
    for axes_row, env in zip(axes, envs):
        reference = exp.config(env).references[env]
        draw_env(axes_row, curves[curves["env"] == env], reference, colors, study)
        axes_row[0].set_ylabel(f"{env}\nreturn (last {SMOOTHING} iterations)")
        axes_row[0].set_xlabel("env steps")
        axes_row[1].set_xlabel("seconds from the process's first line")
        # the setup (imports, compilation) shows as the gap before a curve starts
        axes_row[1].set_xlim(left=0)
        row_legend(axes_row, "framework")
    return fig

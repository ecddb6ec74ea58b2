"""The figures study.toml asks for: each experiment (and platform comparison) lists the kinds it
gets.

A kind's file name holds the experiment's name where it has "{experiment}"; a kind with a fixed file
name may be listed by one experiment only, except speedup_vs_env_cost, drawn once over every
sync-off experiment when any experiment that lists it has runs. The speedup figures draw the tables'
cells: the geometric mean with its cluster-bootstrap interval, over every pair of runs drawn as
faint dots.

This module is the list of kinds and what draws them, the agents figure (an experiment of several
agents per process: agent-steps per second in the steady window and peak host memory per agent
against N, log axes, a line per framework in its default compile mode, medians over runs), and the
learning figure: per env (a row), each
framework's smoothed return against env steps (left) and against seconds from the process's first
line (right): the mean over seeds as a line, their range as a band; the reference's published mean
+- std as a grey band. A resumed run is drawn in steps only: its seconds are not one process's. The
other figures are drawn by time_figures.py (times) and speedup_figures.py (speedups), from
plotting.py's helpers.
"""

from typing import Callable, NamedTuple

import numpy as np
import pandas as pd
import seaborn as sns

from analysis import speedup_figures, time_figures
from analysis.common import BadInput, capitalised, in_order
from analysis.learning import SMOOTHING
from analysis.owned import FIGURE_METADATA
from analysis.plotting import fit_layout, framework_colors, new_figure, plt, row_legend
from analysis.results import Results
from core.study import Study


class Kind(NamedTuple):
    file: str  # "{experiment}" is replaced by the experiment's name
    caption: Callable[[Results, str], str]
    # None: no pairs of runs; a string: why not drawn
    draw: Callable[[Results, str], "plt.Figure | str | None"]
    platform: bool = False  # a kind of the platform comparisons ([platforms.*] in study.toml)


class Figure(NamedTuple):
    kind: str
    file: str
    # the experiments (or platform comparison) that list it: drawn when any has runs
    owners: tuple[str, ...]
    caption: str


def other_experiments(results: Results, name: str) -> str:
    """The other experiments a figure over every sync-off experiment draws, as " (with A and B)"."""
    rest = [e for e in results.compared("total") if e != name]
    return f" (with {' and '.join(rest)})" if rest else ""


# Every kind, in the order the report lists the figures.
KINDS = {
    "total": Kind(
        "{experiment}_total.png",
        lambda results, name: (
            f"{capitalised(name)}: total duration per framework, and against env "
            f"complexity{other_experiments(results, name)}"
        ),
        time_figures.fig_total,
    ),
    "speedups": Kind(
        "{experiment}_speedups.png",
        lambda results, name: f"{capitalised(name)}: total-time speedups per pair and model size",
        speedup_figures.fig_speedups,
    ),
    "overhead_windows": Kind(
        "overhead_windows.png",
        lambda results, name: (
            "Overhead by iteration window (compile, warm-up, steady) and pairwise differences"
        ),
        time_figures.fig_overhead_windows,
    ),
    "steady_speedups": Kind(
        "steady_speedups.png",
        lambda results, name: "Steady-state speedups (steady window)",
        speedup_figures.fig_steady_speedups,
    ),
    "rollout_update": Kind(
        "{experiment}_rollout_update.png",
        lambda results, name: (
            f"{capitalised(name)}: rollout and update durations and speedups by env"
        ),
        time_figures.fig_rollout_update,
    ),
    "compile_modes": Kind(
        "{experiment}_compile_modes.png",
        lambda results, name: f"{capitalised(name)}: compile modes by model size",
        time_figures.fig_compile_modes,
    ),
    "tags": Kind(
        "{experiment}_tags.png",
        lambda results, name: f"{capitalised(name)}: platforms (tags) compared",
        speedup_figures.fig_tags,
        True,
    ),
    "backends": Kind(
        "{experiment}_backends.png",
        lambda results, name: (
            f"{capitalised(name)}: rollout and update time per framework on each env backend "
            "(gymnax, envpool)"
        ),
        time_figures.fig_backends,
    ),
    "dtypes": Kind(
        "{experiment}_dtypes.png",
        lambda results, name: (
            f"{capitalised(name)}: rollout and update time per framework in each data type "
            "(float32, bfloat16)"
        ),
        time_figures.fig_dtypes,
    ),
    "learning": Kind(
        "{experiment}_learning.png",
        lambda results, name: (
            f"{capitalised(name)}: return against env steps and seconds, per framework, beside the "
            "reference's"
        ),
        lambda results, name: learning_figure(results.learning_curves, name, results.study),
    ),
    "agents": Kind(
        "{experiment}_agents.png",
        lambda results, name: (
            f"{capitalised(name)}: agent-steps per second and peak memory per agent against "
            "agents per process"
        ),
        lambda results, name: agents_figure(results, name),
    ),
    "speedup_vs_env_cost": Kind(
        "speedup_vs_env_cost.png",
        lambda results, name: (
            f"Speedups against env step cost ({' and '.join(results.compared('total'))})"
        ),
        speedup_figures.fig_speedup_vs_env_cost,
    ),
}
ONCE_OVER_EXPERIMENTS = {"speedup_vs_env_cost"}  # one figure, however many experiments list it
# the kinds that tell data types apart: the others would draw an experiment's float32 and bfloat16
# runs as one
DTYPE_KINDS = {"dtypes"}


def listed_figures(study: Study) -> list[tuple[str, str]]:
    """(kind, owner) for every figure kind an experiment or platform comparison lists in
    study.toml."""
    owners = [*study.experiments.values(), *study.platforms.values()]
    return [(kind, owner.name) for owner in owners for kind in owner.figures]


def check_figures(study: Study) -> None:
    """BadInput for a figure kind study.toml lists that does not exist, in the wrong place (one that
    would mix data types included), or twice to one file."""
    files: dict[str, str] = {}
    for kind, owner in listed_figures(study):
        platform = owner in study.platforms
        valid = [k for k, spec in KINDS.items() if spec.platform == platform]
        if not platform and len(study.experiments[owner].dtypes) > 1:
            valid = [k for k in valid if k in DTYPE_KINDS]
        if kind not in valid:
            where = "platform comparison" if platform else "experiment"
            raise BadInput(
                f"{study.path}: {where} {owner} lists figure {kind!r}; valid: {', '.join(valid)}"
            )
        file = KINDS[kind].file.format(experiment=owner)
        if file in files and kind not in ONCE_OVER_EXPERIMENTS:
            raise BadInput(
                f"{study.path}: figure {kind!r} ({file}) is listed by {files[file]} and {owner}; "
                "one only"
            )
        files[file] = owner


def study_figures(results: Results) -> list[Figure]:
    """The figures the study asks for, in KINDS order, then in the study's order of experiments."""
    figures = []
    for kind, spec in KINDS.items():
        owners = [owner for k, owner in listed_figures(results.study) if k == kind]
        if kind in ONCE_OVER_EXPERIMENTS and owners:
            figures.append(Figure(kind, spec.file, tuple(owners), spec.caption(results, owners[0])))
            continue
        figures += [
            Figure(kind, spec.file.format(experiment=o), (o,), spec.caption(results, o))
            for o in owners
        ]
    return figures


def no_runs(results: Results, figure: Figure) -> str:
    """Why a figure is not drawn when none of its owners has runs."""
    platforms = [results.study.platforms[o] for o in figure.owners if o in results.study.platforms]
    if platforms:
        return f"runs of {platforms[0].repeats} under at least two tags"
    return f"{' or '.join(figure.owners)} runs"


def seeded(draw, *args):
    """draw(*args) with numpy's global generator seeded (seaborn's strip jitter draws from it), so
    that the same runs give the same PNG bytes; the generator's state is put back after."""
    state = np.random.get_state()
    np.random.seed(0)
    try:
        return draw(*args)
    finally:
        np.random.set_state(state)


def draw_figures(results: Results) -> tuple[list[tuple[Figure, "plt.Figure"]], list[str]]:
    """Draws each figure whose owners have runs (not saved yet); returns them and a note per figure
    not drawn."""
    sns.set_theme(context="notebook", style="whitegrid", font_scale=1.15)
    drawn, notes = [], []
    for figure in study_figures(results):
        if not any(results.has_runs(owner) for owner in figure.owners):
            notes.append(f"{figure.file} skipped: no {no_runs(results, figure)}")
            continue
        fig = seeded(KINDS[figure.kind].draw, results, figure.owners[0])
        if fig is None or isinstance(fig, str):
            notes.append(f"{figure.file} skipped: {fig or 'no pairs of runs to compare'}")
            continue
        fit_layout(fig)
        drawn.append((figure, fig))
    return drawn, notes


def save_figure(fig, path) -> None:
    """The figure as a PNG marked as this tool's (a text chunk: the next call replaces it)."""
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata=FIGURE_METADATA)
    plt.close(fig)


def discard(drawn: list) -> None:
    """Closes figures drawn but not saved."""
    for _, fig in drawn:
        plt.close(fig)


def figure_files(study: Study) -> set[str]:
    """Every file name a figure of this study can have: the files of this tool in --out."""
    return {KINDS[kind].file.format(experiment=owner) for kind, owner in listed_figures(study)}


def mean_curve(curves: pd.DataFrame) -> pd.DataFrame:
    """Per env step, over a framework's seeds: the mean, min and max smoothed return and the mean
    elapsed time (every seed of one configuration logs the same steps)."""
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
            # in seconds, the timed runs alone: a resumed run's elapsed is NaN
            # (analysis/learning.py)
            curve = mean_curve(mine.dropna(subset=[x]))
            color = colors.get(framework, "0.5")
            ax.plot(curve[x], curve["mean"], color=color, lw=1.8, label=label)
            ax.fill_between(curve[x], curve["low"], curve["high"], color=color, alpha=0.15, lw=0)
    for ax in axes_row:
        draw_reference(ax, reference.mean, reference.std)


def learning_figure(curves: pd.DataFrame, experiment: str, study: Study):
    """The figure of one learning experiment's curves (learning.learning_runs' second table);
    without any, why."""
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


def agents_figure(results: Results, name: str):
    """The figure of an experiment's agents per process (agents_scaling's medians over the runs in
    default compile modes); without runs of two numbers of agents, why."""
    cells = results.agents_cells(name)
    counts = sorted(cells["num_agents"].unique())
    sizes = in_order(results.study.sizes, cells["model_size"])
    # a line per framework and size: solid, dashed, dotted in the study's order of sizes
    styles = dict(zip(sizes, ["o-", "s--", "^:", "d-."]))
    if len(counts) < 2:
        return "its runs in default compile modes are of one number of agents per process"
    fig, axes = new_figure(2, width=5.5, height=4.4, title=f"{name}: agents per process")
    colors = framework_colors(results.study)
    panels = {  # column -> (its unit, title)
        "agent_steps_s": (1, "agent-steps per second (steady window)"),
        "peak_rss_per_agent": (2**20, "peak host memory per agent (MiB)"),
    }
    for ax, (column, (unit, title)) in zip(axes[0], panels.items()):
        for framework in in_order(results.study.frameworks, cells["framework"]):
            color = colors.get(framework, "0.5")
            for size in sizes:
                mine = cells[(cells["framework"] == framework) & (cells["model_size"] == size)]
                mine = mine[mine[column].notna()]
                label = framework if len(sizes) == 1 else f"{framework} {size}"
                x, y = mine["num_agents"], mine[column] / unit
                ax.plot(x, y, styles.get(size, "o-"), lw=2, color=color, label=label)
        ax.set(xscale="log", yscale="log", title=title, xlabel="agents per process (N)")
        ax.set_xticks(counts, [str(n) for n in counts])
        ax.set_xticks([], minor=True)  # N's own ticks only
    row_legend(axes[0], "framework")
    return fig

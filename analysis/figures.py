"""The figures study.toml asks for: each experiment (and platform comparison) lists the kinds it gets.

A kind's file name holds the experiment's name where it has "{experiment}"; a kind with a fixed file name may be
listed by one experiment only, except speedup_vs_env_cost, drawn once over every sync-off experiment when any
experiment that lists it has runs. The speedup figures draw the tables' cells: the geometric mean with its
cluster-bootstrap interval, over every pair of runs drawn as faint dots.
"""

import itertools
from typing import Callable, NamedTuple

import numpy as np
import pandas as pd
import seaborn as sns

from analysis.learning_figure import learning_figure
from analysis.loading import BadInput
from analysis.plotting import (
    INTERVAL,
    backend_bars,
    backend_legend,
    capitalised,
    draw_against_env_cost,
    empty_panel,
    framework_colors,
    intervals,
    log_axis,
    mark_expensive_envs,
    modes_pointplot,
    new_figure,
    pair_palette,
    plt,
    pretty_pair,
    ratio_axis,
    rotate_xticks,
    row_legend,
    same_y_range,
    size_palette,
    speedup_cells,
    symlog_axis,
)
from analysis.plotting import box_with_points as boxes
from analysis.results import Results, present
from analysis.speedups import ENV_COST_METRICS, backends_of, env_costs, env_speedups, pairwise
from analysis.stats import MIN_CORRELATION_ENVS
from analysis.summary import window_column, window_columns
from study import BACKENDS, Study, split_label


class Kind(NamedTuple):
    file: str  # "{experiment}" is replaced by the experiment's name
    caption: Callable[[Results, str], str]
    draw: Callable[
        [Results, str], "plt.Figure | str | None"
    ]  # None: no pairs of runs; a string: why not drawn
    platform: bool = False  # a kind of the platform comparisons ([platforms.*] in study.toml)


class Figure(NamedTuple):
    kind: str
    file: str
    owners: tuple[
        str, ...
    ]  # the experiments (or platform comparison) that list it: drawn when any has runs
    caption: str


# --------------------------------------------------------------------------------------- the figures
def others(r: Results, name: str, metric: str = "total") -> list[str]:
    return [e for e in r.compared(metric) if e != name]


def fig_total(r: Results, name: str):
    S, runs = r.study, r.runs(name)
    runs = runs[
        ~runs["sync_timing"].astype(bool)
    ]  # an experiment of sync "both" has its totals sync off
    if runs.empty:
        return "no sync-off runs"
    title = f"{capitalised(name)}: total run duration per framework (sync off, default compile)"
    fig, axes = new_figure(2, width=6.5, title=title)
    frameworks = present(S.frameworks, runs["framework"])
    sizes = present(S.sizes, runs["model_size"])
    boxes(
        axes[0, 0],
        runs,
        "model_size",
        "total_s",
        sizes,
        "framework",
        frameworks,
        framework_colors(S),
    )
    log_axis(axes[0, 0], "total duration (s)")
    axes[0, 0].set_title("all envs and seeds, by model size")
    handles = draw_against_env_cost(
        axes[0, 1], r, r.metric_runs("total"), "total_s"
    )  # every sync-off experiment
    log_axis(axes[0, 1], "total duration (s)")
    axes[0, 1].set_title(
        f"against env complexity ({' + '.join(r.compared('total'))}; lines: medians)"
    )
    row_legend(axes[0], "framework / size", handles=handles)
    return fig


def speedup_figure(r: Results, name: str, metric: str, title: str):
    """The speedups of one metric and experiment per pair and size: the table's cells and every pair of runs; a panel
    per env backend when the experiment has several (as its tables do)."""
    ratios, cells = r.pairs[metric], r.cells(metric, name)
    ratios = ratios[ratios["experiment"] == name]
    if cells.empty:
        return None
    S = r.study
    ratios = ratios.assign(size=ratios["model_size"], backend=backends_of(ratios))
    backends = present(S.experiments[name].backends, cells["backend"])
    fig, axes = new_figure(len(backends), width=10, title=title)
    sizes, pairs = present(S.sizes, cells["size"]), present(S.pair_names, cells["pair"])
    for ax, backend in zip(axes[0], backends):
        mine = ratios[ratios["backend"] == backend]
        speedup_cells(
            ax, mine, cells[cells["backend"] == backend], "size", sizes, size_palette(S), pairs
        )
        ratio_axis(ax)
        where = f"envs on {backend}: " if len(S.experiments[name].backends) > 1 else ""
        ax.set_title(
            f"{where}as in the tables: geometric mean, {INTERVAL}; dots: pairs of runs", fontsize=12
        )
    same_y_range(axes[0])
    row_legend(axes[0], "model size")
    return fig


def fig_speedups(r: Results, name: str):
    title = f"{capitalised(name)}: total-time speedups per framework pair and model size"
    return speedup_figure(r, name, "total", title)


def fig_steady_speedups(r: Results, name: str):
    label = r.study.steady.label
    return speedup_figure(
        r,
        name,
        "steady",
        f"Steady state: speedups of the mean time/iteration over {label} ({name})",
    )


def fig_overhead_windows(r: Results, name: str):
    """Top: mean time/iteration per window and framework. Bottom: A - B per pair (symlog)."""
    S, runs = r.study, r.runs(name)
    sizes = present(S.sizes, runs["model_size"])
    windows = window_columns(S)
    labels = ", ".join(f"{w.label} = {w.name}" for w in windows.values())
    fig, axes = new_figure(
        len(sizes), 2, width=6, height=5, title=f"Overhead by iteration window: {labels} ({name})"
    )
    means = runs.melt(
        id_vars=["model_size", "framework"],
        value_vars=list(windows),
        var_name="window",
        value_name="s",
    )
    differences = pd.concat(
        [
            pairwise(r.summary, w, {name: r.masks[name]}, S, np.subtract).assign(window=w)
            for w in windows
        ]
    )
    ticks = [w.label.replace("iterations", "iters") for w in windows.values()]
    frameworks = present(S.frameworks, runs["framework"])
    for col, size in enumerate(sizes):
        top, bottom = axes[0, col], axes[1, col]
        size_means = means[means["model_size"] == size].dropna()
        boxes(
            top,
            size_means,
            "window",
            "s",
            list(windows),
            "framework",
            frameworks,
            framework_colors(S),
        )
        top.set_xticks(range(len(ticks)), ticks)
        top.set_title(f"{size} model")
        log_axis(top, "mean time per iteration (s)")
        diffs = differences[differences["model_size"] == size].dropna()
        if diffs.empty:
            empty_panel(bottom, "no pairs of runs")
            continue
        pairs = present(S.pair_names, diffs["pair"])
        boxes(
            bottom,
            diffs,
            "window",
            "value",
            list(windows),
            "pair",
            pairs,
            pair_palette(S),
            log=False,
        )
        bottom.set_xticks(range(len(ticks)), ticks)
        symlog_axis(bottom, diffs["value"], "time A - time B per iteration (s)")
    row_legend(axes[0], "framework")
    row_legend(axes[1], "pair A → B", rename=pretty_pair)
    return fig


def fig_rollout_update(r: Results, name: str):
    """Top: rollout and update time by env and compile mode. Bottom: each env's speedup between default modes, and the
    table's cell over all envs with its interval."""
    S, runs = r.study, r.runs(name)
    envs = present(r.envs, runs["env"])
    sizes = ", ".join(present(S.sizes, runs["model_size"]))
    title = f"{capitalised(name)}: rollout vs update, {sizes} model, sync on (mean over {S.steady.label})"
    fig, axes = new_figure(
        2, 2, width=max(6.0, 0.6 * (len(envs) + 1) + 2.5), height=5.2, title=title
    )
    for col, part in enumerate(("rollout", "update")):
        top, ax = axes[0, col], axes[1, col]
        y = window_column(S.steady, part)
        modes_pointplot(
            top, runs, "env", y, envs, f"{part}, every compile mode", joined=False, study=S
        )
        log_axis(top, f"{part} time per iteration (s)")
        rotate_xticks(top)
        top.set_xlabel(
            "env, cheapest step first" if r.timing["ratio"].notna().any() else "env, by name"
        )
        ratios = r.pairs[part][r.pairs[part]["experiment"] == name]
        ax.set_title(f"{part} speedups, default compile modes")
        if ratios.empty:
            empty_panel(ax, "no pairs of default-compile runs")
            continue
        columns = [*present(envs, ratios["env"]), "all envs"]
        pairs = present(S.pair_names, ratios["pair"])
        cells = r.cells(part, name)
        width = 0.8 / len(pairs)
        for i, pair in enumerate(pairs):
            offset = (i - (len(pairs) - 1) / 2) * width
            color = pair_palette(S).get(pair, "0.5")
            per_env = (
                ratios[ratios["pair"] == pair]
                .groupby("env")["value"]
                .apply(lambda v: np.exp(np.log(v).mean()))
            )
            x = [columns.index(env) + offset for env in per_env.index]
            ax.scatter(x, per_env.to_numpy(), color=color, s=30, alpha=0.8, label=pair)
            for _, cell in cells[cells["pair"] == pair].iterrows():  # one per size
                x = [len(columns) - 1 + offset]
                intervals(
                    ax, x, [cell["geomean"]], [cell["ci_low"]], [cell["ci_high"]], color, marker="D"
                )
        ax.set_xticks(range(len(columns)), columns)
        ratio_axis(ax)
        rotate_xticks(ax)
        ax.set_xlabel("")
    row_legend(axes[0], "framework/compile\n(median, min-max)")
    row_legend(axes[1], f"pair A → B\n(geomean per env;\nall envs: {INTERVAL})", rename=pretty_pair)
    return fig


def fig_compile_modes(r: Results, name: str):
    S, runs = r.study, r.runs(name)
    envs = ", ".join(S.experiments[name].envs)
    fig, axes = new_figure(
        2, width=6, title=f"{capitalised(name)}: compile modes by model size ({envs}, sync on)"
    )
    sizes = present(S.sizes, runs["model_size"])
    for col, part in enumerate(("rollout", "update")):
        ax, y = axes[0, col], window_column(S.steady, part)
        modes_pointplot(
            ax,
            runs,
            "model_size",
            y,
            sizes,
            f"{part} (mean over {S.steady.label})",
            joined=True,
            study=S,
        )
        log_axis(ax, f"{part} time per iteration (s)")
        ax.set_xlabel("model size")
    row_legend(axes[0], "framework/compile\n(median, min-max)")
    return fig


def fig_tags(r: Results, name: str):
    """Top: total duration per framework under each tag, a panel per size. Bottom: each tag's total-time speedups of
    the repeated experiment, its tables' cells with their intervals."""
    S, runs = r.study, r.runs(name)
    repeats = S.platforms[name].repeats
    sizes = present(S.sizes, runs["model_size"])
    tags = sorted(runs["tag"].unique())
    palette = dict(zip(tags, sns.color_palette("Set2", len(tags))))
    title = f"{capitalised(name)}: platforms (tags) compared on the {repeats} runs"
    fig, axes = new_figure(len(sizes), 2, width=5.5, title=title)
    frameworks = present(S.frameworks, runs["framework"])
    ratios = r.pairs["total"][r.pairs["total"]["experiment"] == repeats]
    tables = r.platform_speedups.get(name, {})
    cells = (
        pd.concat([table.assign(tag=tag) for tag, table in tables.items()])
        if tables
        else pd.DataFrame()
    )
    for col, size in enumerate(sizes):
        top, bottom = axes[0, col], axes[1, col]
        boxes(
            top,
            runs[runs["model_size"] == size],
            "framework",
            "total_s",
            frameworks,
            "tag",
            tags,
            palette,
        )
        log_axis(top, "total duration (s)")
        top.set_title(f"{size} model: total duration")
        size_cells = cells[cells["size"] == size] if len(cells) else cells
        if size_cells.empty:
            empty_panel(bottom, "no pairs of runs")
            continue
        pairs = present(S.pair_names, size_cells["pair"])
        speedup_cells(
            bottom, ratios[ratios["model_size"] == size], size_cells, "tag", tags, palette, pairs
        )
        ratio_axis(bottom)
        bottom.set_title(f"{size} model: total-time speedups per tag")
    row_legend(axes[0], "tag")
    row_legend(axes[1], f"tag\n(geometric mean,\n{INTERVAL})")
    return fig


def fig_speedup_vs_env_cost(r: Results, name: str = ""):
    """Per metric (row) and size (column): each pair's speedup per env against the env's step cost, and the log-log
    fit."""
    if env_costs(r.timing).empty:
        return "no env timing (--env-timing)"
    S = r.study
    points = {metric: env_speedups(r.pairs[metric], r.timing) for metric in ENV_COST_METRICS}
    if all(p.empty for p in points.values()):
        return None
    sizes = present(S.sizes, pd.concat(points.values())["model_size"])
    experiments = " + ".join(r.compared("total"))
    title = f"Speedup against env step cost ({experiments}, sync off, default compile modes)"
    fig, axes = new_figure(len(sizes), len(ENV_COST_METRICS), width=5.5, height=4.8, title=title)
    for row, (metric, data) in enumerate(points.items()):
        for col, size in enumerate(sizes):
            ax, cell = axes[row, col], data[data["model_size"] == size]
            ax.set_title(f"{metric}, {size} model")
            if cell.empty:
                empty_panel(ax, "no pairs of runs")
                continue
            for pair in present(S.pair_names, cell["pair"]):
                group = cell[cell["pair"] == pair]
                color = pair_palette(S).get(pair, "0.5")
                ax.scatter(
                    group["cost"], group["speedup"], color=color, s=24, alpha=0.8, label=pair
                )
                if len(group) >= MIN_CORRELATION_ENVS:
                    slope, intercept = np.polyfit(
                        np.log10(group["cost"]), np.log10(group["speedup"]), 1
                    )
                    x = np.array([group["cost"].min(), group["cost"].max()])
                    ax.plot(x, 10 ** (intercept + slope * np.log10(x)), color=color, lw=1.2)
            ratio_axis(ax)
            log_axis(ax, "env step cost relative to the cheapest env", suffix="×", axis="x")
            mark_expensive_envs(ax, r, cell["env"])
        row_legend(
            axes[row], "pair A → B\n(a point per env;\nlines: log-log fit)", rename=pretty_pair
        )
    return fig


def fig_backends(r: Results, name: str):
    """Per env (column) and model size (row): each framework's rollout and update time per iteration (sync on,
    default compile modes, the steady window's mean; the median over seeds) as one stacked bar per env backend,
    gymnax beside envpool, and over an envpool bar its rollout time / the gymnax one's."""
    S, runs = r.study, r.backend_runs(name)
    if runs.empty:
        return "no sync-on runs in default compile modes"
    parts = [window_column(S.steady, part) for part in ("rollout", "update")]
    envs = present(dict.fromkeys(split_label(label)[0] for label in r.envs), runs["env_id"])
    sizes, frameworks = (
        present(S.sizes, runs["model_size"]),
        present(S.frameworks, runs["framework"]),
    )
    backends = present(BACKENDS, runs["backend"])
    medians = runs.groupby(["env_id", "model_size", "framework", "backend"])[parts].median()
    title = (
        f"{capitalised(name)}: time per iteration on each env backend ({' vs '.join(backends)}; sync on, default "
        f"compile, mean over {S.steady.label})"
    )
    fig, axes = new_figure(len(envs), len(sizes), width=5.6, height=4.4, title=title)
    cells = set(zip(runs["env_id"], runs["model_size"]))
    for (row, size), (col, env) in itertools.product(enumerate(sizes), enumerate(envs)):
        ax = axes[row, col]
        ax.set_title(f"{env}, {size} model")
        if (env, size) not in cells:
            empty_panel(ax, "no runs")
            continue
        backend_bars(ax, medians.loc[(env, size)], parts, frameworks, backends, S)
    for row in range(len(sizes)):
        backend_legend(axes[row], backends)
    return fig


def with_others(r: Results, name: str) -> str:
    rest = others(r, name)
    return f" (with {' and '.join(rest)})" if rest else ""


# Every kind, in the order the report lists the figures.
KINDS = {
    "total": Kind(
        "{experiment}_total.png",
        lambda r, n: (
            f"{capitalised(n)}: total duration per framework, and against env complexity{with_others(r, n)}"
        ),
        fig_total,
    ),
    "speedups": Kind(
        "{experiment}_speedups.png",
        lambda r, n: f"{capitalised(n)}: total-time speedups per pair and model size",
        fig_speedups,
    ),
    "overhead_windows": Kind(
        "overhead_windows.png",
        lambda r, n: (
            "Overhead by iteration window (compile, warm-up, steady) and pairwise differences"
        ),
        fig_overhead_windows,
    ),
    "steady_speedups": Kind(
        "steady_speedups.png",
        lambda r, n: "Steady-state speedups (steady window)",
        fig_steady_speedups,
    ),
    "rollout_update": Kind(
        "{experiment}_rollout_update.png",
        lambda r, n: f"{capitalised(n)}: rollout and update durations and speedups by env",
        fig_rollout_update,
    ),
    "compile_modes": Kind(
        "{experiment}_compile_modes.png",
        lambda r, n: f"{capitalised(n)}: compile modes by model size",
        fig_compile_modes,
    ),
    "tags": Kind(
        "{experiment}_tags.png",
        lambda r, n: f"{capitalised(n)}: platforms (tags) compared",
        fig_tags,
        True,
    ),
    "backends": Kind(
        "{experiment}_backends.png",
        lambda r, n: (
            f"{capitalised(n)}: rollout and update time per framework on each env backend (gymnax, envpool)"
        ),
        fig_backends,
    ),
    "learning": Kind(
        "{experiment}_learning.png",
        lambda r, n: (
            f"{capitalised(n)}: return against env steps and seconds, per framework, beside the reference's"
        ),
        lambda r, n: learning_figure(r.learning_curves, n, r.study),
    ),
    "speedup_vs_env_cost": Kind(
        "speedup_vs_env_cost.png",
        lambda r, n: f"Speedups against env step cost ({' and '.join(r.compared('total'))})",
        fig_speedup_vs_env_cost,
    ),
}
ONCE_OVER_EXPERIMENTS = {"speedup_vs_env_cost"}  # one figure, however many experiments list it


def listed(study: Study) -> list[tuple[str, str]]:
    """(kind, owner) for every figure kind an experiment or platform comparison lists in study.toml."""
    owners = [*study.experiments.values(), *study.platforms.values()]
    return [(kind, owner.name) for owner in owners for kind in owner.figures]


def check_figures(study: Study) -> None:
    """BadInput for a figure kind study.toml lists that does not exist, in the wrong place, or twice to one file."""
    files: dict[str, str] = {}
    for kind, owner in listed(study):
        platform = owner in study.platforms
        valid = [k for k, spec in KINDS.items() if spec.platform == platform]
        if kind not in valid:
            where = "platform comparison" if platform else "experiment"
            raise BadInput(
                f"{study.path}: {where} {owner} lists figure {kind!r}; valid: {', '.join(valid)}"
            )
        file = KINDS[kind].file.format(experiment=owner)
        if file in files and kind not in ONCE_OVER_EXPERIMENTS:
            raise BadInput(
                f"{study.path}: figure {kind!r} ({file}) is listed by {files[file]} and {owner}; one only"
            )
        files[file] = owner


def study_figures(r: Results) -> list[Figure]:
    """The figures the study asks for, in KINDS order, then in the study's order of experiments."""
    figures = []
    for kind, spec in KINDS.items():
        owners = [owner for k, owner in listed(r.study) if k == kind]
        if kind in ONCE_OVER_EXPERIMENTS and owners:
            figures.append(Figure(kind, spec.file, tuple(owners), spec.caption(r, owners[0])))
            continue
        figures += [
            Figure(kind, spec.file.format(experiment=o), (o,), spec.caption(r, o)) for o in owners
        ]
    return figures


def no_runs(r: Results, figure: Figure) -> str:
    """Why a figure is not drawn when none of its owners has runs."""
    platforms = [r.study.platforms[o] for o in figure.owners if o in r.study.platforms]
    if platforms:
        return f"runs of {platforms[0].repeats} under at least two tags"
    return f"{' or '.join(figure.owners)} runs"


def seeded(draw, *args):
    """draw(*args) with numpy's global generator seeded (seaborn's strip jitter draws from it), so that the same runs
    give the same PNG bytes; the generator's state is put back after."""
    state = np.random.get_state()
    np.random.seed(0)
    try:
        return draw(*args)
    finally:
        np.random.set_state(state)


def draw_figures(r: Results) -> tuple[list[tuple[Figure, "plt.Figure"]], list[str]]:
    """Draws each figure whose owners have runs (not saved yet); returns them and a note per figure not drawn."""
    sns.set_theme(context="notebook", style="whitegrid", font_scale=1.15)
    drawn, notes = [], []
    for figure in study_figures(r):
        if not any(r.has_runs(owner) for owner in figure.owners):
            notes.append(f"{figure.file} skipped: no {no_runs(r, figure)}")
            continue
        fig = seeded(KINDS[figure.kind].draw, r, figure.owners[0])
        if fig is None or isinstance(fig, str):
            notes.append(f"{figure.file} skipped: {fig or 'no pairs of runs to compare'}")
            continue
        fig.tight_layout()
        drawn.append((figure, fig))
    return drawn, notes


def save_figure(fig, path) -> None:
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def discard(drawn: list) -> None:
    """Closes figures drawn but not saved."""
    for _, fig in drawn:
        plt.close(fig)


def figure_files(study: Study) -> set[str]:
    """Every file name a figure of this study can have: the files of this tool in --out."""
    return {KINDS[kind].file.format(experiment=owner) for kind, owner in listed(study)}

"""The figures of times: total durations, iteration windows, rollout against update, compile modes,
env backends and data types, each drawn from an experiment's runs (figures.py lists them as
kinds)."""

import itertools
from typing import NamedTuple

import numpy as np
import pandas as pd

from analysis.common import capitalised, in_order, pretty_pair
from analysis.loading import window_column, window_columns
from analysis.plotting import (
    BACKEND_HATCHES,
    DTYPE_HATCHES,
    empty_panel,
    framework_boxes,
    framework_colors,
    interval_words,
    intervals,
    log_axis,
    mode_palette,
    modes_pointplot,
    new_figure,
    note_at,
    pair_palette,
    ratio_axis,
    rotate_xticks,
    row_legend,
    say_single_runs,
    single_runs,
    symlog_axis,
    variant_bars,
    variant_legend,
)
from analysis.plotting import box_with_points as boxes
from analysis.results import Results, missing_pairs, missing_time, short_note, speedup_gap
from analysis.speedup_figures import draw_against_env_cost
from analysis.speedups import env_costs, pairwise
from analysis.stats import geometric_mean
from core.study import BACKENDS, DTYPES, Study, Window, split_label


def fig_total(results: Results, name: str):
    study, runs = results.study, results.runs(name)
    # an experiment of sync "both" has its totals sync off
    runs = runs[~runs["sync_timing"].astype(bool)]
    if runs.empty:
        return "no sync-off runs"
    title = f"{capitalised(name)}: total run duration per framework (sync off, default compile)"
    fig, axes = new_figure(2, width=6.5, title=title)
    frameworks = in_order(study.frameworks, runs["framework"])
    sizes = in_order(study.sizes, runs["model_size"])
    framework_boxes(axes[0, 0], runs, "total_s", frameworks, sizes, study)
    log_axis(axes[0, 0], "total duration (s)")
    axes[0, 0].set_title("all envs and seeds, a box per size")
    # every sync-off experiment
    compared, handles, joined = results.metric_runs("total"), None, False
    if compared.empty:
        empty_panel(axes[0, 1], "no sync-off runs in default compile modes")
    else:
        costs = env_costs(results.timing)
        handles, joined = draw_against_env_cost(
            axes[0, 1], compared, "total_s", costs, results.envs, study
        )
        log_axis(axes[0, 1], "total duration (s)")
    lines = "; lines: medians" if joined else ""
    axes[0, 1].set_title(f"against env complexity ({' + '.join(results.compared('total'))}{lines})")
    row_legend(axes[0], "framework / size", handles=handles)
    if single_runs(runs, ["framework", "model_size", "env"]):
        say_single_runs(fig, "a run per framework, size and env")
    return fig


def note_missing_windows(ax, runs: pd.DataFrame, windows: dict[str, Window], drawn: set) -> None:
    """A note at each window of a panel (x: its position) that has no time: no run reached it."""
    for x, (column, window) in enumerate(windows.items()):
        if column not in drawn:
            note_at(ax, x, short_note(runs, window))


def fig_overhead_windows(results: Results, name: str):
    """Top: mean time/iteration per window and framework. Bottom: A - B per pair (symlog)."""
    study, runs = results.study, results.runs(name)
    sizes = in_order(study.sizes, runs["model_size"])
    windows = window_columns(study)
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
            pairwise(results.summary, w, {name: results.masks[name]}, study, np.subtract).assign(
                window=w
            )
            for w in windows
        ]
    )
    ticks = [w.label.replace("iterations", "iters") for w in windows.values()]
    frameworks = in_order(study.frameworks, runs["framework"])
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
            framework_colors(study),
        )
        top.set_xticks(range(len(ticks)), ticks)
        top.set_title(f"{size} model")
        log_axis(top, "mean time per iteration (s)")
        size_runs = runs[runs["model_size"] == size]
        note_missing_windows(top, size_runs, windows, set(size_means["window"]))
        diffs = differences[differences["model_size"] == size].dropna(subset=["value"])
        if diffs.empty:
            empty_panel(bottom, missing_pairs(size_runs, next(iter(windows)), study))
            continue
        pairs = in_order(study.pair_names, diffs["pair"])
        boxes(
            bottom,
            diffs,
            "window",
            "value",
            list(windows),
            "pair",
            pairs,
            pair_palette(study),
            log=False,
        )
        bottom.set_xticks(range(len(ticks)), ticks)
        symlog_axis(bottom, diffs["value"], "time A - time B per iteration (s)")
        note_missing_windows(bottom, size_runs, windows, set(diffs["window"]))
    row_legend(axes[0], "framework")
    row_legend(axes[1], "pair A → B", rename=pretty_pair)
    return fig


def steady_parts(study: Study) -> dict[str, str]:
    """rollout and update -> their summary columns (the steady window's mean)."""
    return {part: window_column(study.steady, part) for part in ("rollout", "update")}


def no_part_times(runs: pd.DataFrame, study: Study) -> str:
    """Why runs have neither a rollout nor an update time (the figure is then not drawn); "" when
    they have some."""
    columns = list(steady_parts(study).values())
    return missing_time(runs, columns[0], study) if runs[columns].isna().all().all() else ""


def fig_rollout_update(results: Results, name: str):
    """Top: rollout and update time by env and compile mode. Bottom: each env's speedup between
    default modes, and the table's cell over all envs with its interval."""
    study, runs = results.study, results.runs(name)
    gap = no_part_times(runs, study)
    if gap:  # nothing to draw
        return gap
    envs = in_order(results.envs, runs["env"])
    sizes = ", ".join(in_order(study.sizes, runs["model_size"]))
    title = f"{capitalised(name)}: rollout vs update, {sizes} model, sync on "
    title += f"(mean over {study.steady.label})"
    fig, axes = new_figure(
        2, 2, width=max(6.0, 0.6 * (len(envs) + 1) + 2.5), height=5.2, title=title
    )
    drawn = []  # the speedup cells drawn in the bottom row
    for col, (part, y) in enumerate(steady_parts(study).items()):
        top, ax = axes[0, col], axes[1, col]
        heading = f"{part}, every compile mode"
        if time_panel(top, results, runs, ("env", envs), (part, y), heading, joined=False):
            rotate_xticks(top)
            top.set_xlabel(
                "env, cheapest step first"
                if results.timing["ratio"].notna().any()
                else "env, by name"
            )
        ratios = results.pairs[part][results.pairs[part]["experiment"] == name]
        ax.set_title(f"{part} speedups, default compile modes")
        if ratios.empty:
            empty_panel(ax, speedup_gap(results, name, part))
            continue
        columns = [*in_order(envs, ratios["env"]), "all envs"]
        pairs = in_order(study.pair_names, ratios["pair"])
        cells = results.cells(part, name)
        drawn.append(cells)
        width = 0.8 / len(pairs)
        for i, pair in enumerate(pairs):
            offset = (i - (len(pairs) - 1) / 2) * width
            color = pair_palette(study).get(pair, "0.5")
            per_env = ratios[ratios["pair"] == pair].groupby("env")["value"].apply(geometric_mean)
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
    drawn = pd.concat(drawn) if drawn else pd.DataFrame()
    every = "all envs: geomean" + interval_words(drawn, ",\n")
    row_legend(axes[1], f"pair A → B\n(geomean per env;\n{every})", rename=pretty_pair)
    return fig


def time_panel(ax, results: Results, runs, x: tuple, part: tuple, title: str, joined: bool) -> bool:
    """One steady-time panel: every framework/compile mode's time of part (its name, its column)
    against x (a column, its order) on a log axis; or, with no such time, why not. True if drawn."""
    study, (name, y) = results.study, part
    if runs[y].isna().all():
        empty_panel(ax, missing_time(runs, y, study))
        return False
    colors = mode_palette(study)
    modes_pointplot(ax, runs, x[0], y, x[1], title, joined=joined, mode_colors=colors)
    log_axis(ax, f"{name} time per iteration (s)")
    return True


def fig_compile_modes(results: Results, name: str):
    study, runs = results.study, results.runs(name)
    gap = no_part_times(runs, study)
    if gap:  # nothing to draw
        return gap
    envs = ", ".join(study.experiments[name].envs)
    fig, axes = new_figure(
        2, width=6, title=f"{capitalised(name)}: compile modes by model size ({envs}, sync on)"
    )
    sizes = in_order(study.sizes, runs["model_size"])
    for col, (part, y) in enumerate(steady_parts(study).items()):
        ax = axes[0, col]
        heading = f"{part} (mean over {study.steady.label})"
        if time_panel(ax, results, runs, ("model_size", sizes), (part, y), heading, joined=True):
            ax.set_xlabel("model size")
    row_legend(axes[0], "framework/compile\n(median, min-max)")
    return fig


class Variants(NamedTuple):
    """What a variant figure (fig_backends, fig_dtypes) puts beside each framework's bar: one bar
    per variant."""

    column: str  # the runs' column of the variant: "backend", "dtype"
    order: tuple[str, ...]  # the variants, the one the others are compared with first
    hatches: dict  # variant -> its bars' hatch
    env_column: str  # the runs' column a panel's env is read from
    ratio: (
        str  # over a bar: its "rollout" or its "time" (rollout + update) over the first variant's
    )
    preposition: str  # "on" a backend, "in" a data type
    what: str  # the title's words: "env backend", "data type"
    sizes_in_rows: bool  # a row per size and a column per env, or the other way round


BACKEND_VARIANTS = Variants(
    "backend", BACKENDS, BACKEND_HATCHES, "env_id", "rollout", "on", "env backend", True
)
DTYPE_VARIANTS = Variants("dtype", DTYPES, DTYPE_HATCHES, "env", "time", "in", "data type", False)


def variant_panel(ax, cell: pd.DataFrame, medians: pd.DataFrame, key: tuple, parts, study, draw):
    """One panel of a variant figure, of an (env, size) key: draw(ax, its medians by framework and
    variant), or why there are none. cell: the panel's runs; medians: indexed by (env, size,
    framework, variant)."""
    env, size = key
    ax.set_title(f"{env}, {size} model")
    if cell.empty:
        empty_panel(ax, "no runs")
    elif key not in medians.index.droplevel([2, 3]):
        empty_panel(ax, missing_time(cell, parts[0], study))
    else:
        draw(ax, medians.loc[key])


def variant_figure(results: Results, name: str, spec: Variants):
    """Per env and model size: each framework's rollout and update time per iteration (sync on,
    default compile modes, the steady window's mean; the median over seeds) as one stacked bar per
    variant, and over each bar but the first variant's its rollout (or whole time) / the first
    variant's."""
    study, runs = results.study, results.backend_runs(name)
    parts = list(steady_parts(study).values())
    if runs.empty:
        return f"no sync-on runs of {name} in default compile modes"
    timed = runs.dropna(subset=parts)
    if timed.empty:
        return missing_time(runs, parts[0], study)
    order = results.envs
    if spec.env_column == "env_id":  # a panel per env id: its backends' bars side by side
        order = dict.fromkeys(split_label(label)[0] for label in results.envs)
    envs = in_order(order, runs[spec.env_column])
    sizes, frameworks = (
        in_order(study.sizes, runs["model_size"]),
        in_order(study.frameworks, runs["framework"]),
    )
    variants = in_order(spec.order, runs[spec.column])
    keys = [spec.env_column, "model_size", "framework", spec.column]
    medians = timed.groupby(keys)[parts].median()
    title = (
        f"{capitalised(name)}: time per iteration {spec.preposition} each {spec.what} "
        f"({' vs '.join(variants)}; "
        f"sync on, default compile, mean over {study.steady.label})"
    )
    rows, columns = (sizes, envs) if spec.sizes_in_rows else (envs, sizes)
    fig, axes = new_figure(len(columns), len(rows), width=5.6, height=4.4, title=title)
    colors = framework_colors(study)
    ratio_parts = parts[:1] if spec.ratio == "rollout" else parts

    def draw(ax, bars):
        variant_bars(ax, bars, parts, frameworks, variants, colors, spec.hatches, ratio_parts)

    for (row, first), (col, second) in itertools.product(enumerate(rows), enumerate(columns)):
        size, env = (first, second) if spec.sizes_in_rows else (second, first)
        cell = runs[(runs[spec.env_column] == env) & (runs["model_size"] == size)]
        variant_panel(axes[row, col], cell, medians, (env, size), parts, study, draw)
    ratio = ""
    if len(variants) > 1:
        on = spec.preposition
        ratio = f"\n×: {spec.ratio} {on} {variants[1]} /\n{spec.ratio} {on} {variants[0]}"
    for row in range(len(rows)):
        variant_legend(axes[row], variants, spec.hatches, ratio)
    return fig


def fig_backends(results: Results, name: str):
    """Per model size (row) and env (column): a bar per env backend, gymnax beside envpool, and over
    an envpool bar its rollout time / the gymnax one's (variant_figure)."""
    return variant_figure(results, name, BACKEND_VARIANTS)


def fig_dtypes(results: Results, name: str):
    """Per env (row) and model size (column): a bar per data type, float32 beside bfloat16, and over
    a bfloat16 bar its whole time (rollout + update) / the float32 one's (variant_figure)."""
    return variant_figure(results, name, DTYPE_VARIANTS)

"""The figures of speedups: the tables' cells (geometric mean with its cluster-bootstrap interval)
over every pair of runs as faint dots, per experiment, per platform tag, and against the env's step
cost (figures.py lists them as kinds)."""

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from analysis.common import (
    capitalised,
    in_order,
    pretty_pair,
)
from analysis.plotting import (
    FIT_GID,
    MEDIAN_GID,
    box_with_points,
    empty_panel,
    framework_colors,
    interval_words,
    intervals,
    log_axis,
    new_figure,
    pair_palette,
    ratio_axes,
    ratio_axis,
    rotate_xticks,
    row_legend,
    say_single_runs,
    shade,
    single_pairs,
    single_runs,
    size_markers,
    size_palette,
    size_shades,
)
from analysis.results import Results, env_cost_gap, speedup_gap
from analysis.speedups import ENV_COST_METRICS, backends_of, env_costs, env_speedups
from analysis.stats import MIN_CORRELATION_ENVS
from core.study import Study  # noqa: E402


def speedup_figure(results: Results, name: str, metric: str, title: str):
    """The speedups of one metric and experiment per pair and size: the table's cells and every pair
    of runs; a panel per env backend when the experiment has several (as its tables do)."""
    ratios, cells = results.pairs[metric], results.cells(metric, name)
    ratios = ratios[ratios["experiment"] == name]
    if cells.empty:
        return speedup_gap(results, name, metric)
    study = results.study
    ratios = ratios.assign(size=ratios["model_size"], backend=backends_of(ratios))
    backends = in_order(study.experiments[name].backends, cells["backend"])
    fig, axes = new_figure(len(backends), width=10, title=title)
    sizes, pairs = in_order(study.sizes, cells["size"]), in_order(study.pair_names, cells["pair"])
    for ax, backend in zip(axes[0], backends):
        mine, drawn = ratios[ratios["backend"] == backend], cells[cells["backend"] == backend]
        speedup_cells(ax, mine, drawn, "size", sizes, size_palette(study), pairs)
        where = f"envs on {backend}: " if len(study.experiments[name].backends) > 1 else ""
        ax.set_title(f"{where}{cells_subtitle(drawn)}", fontsize=12)
    ratio_axes(axes[0])
    if single_runs(ratios, ["pair", "size", "env"]):
        say_single_runs(fig, "one pair of runs per framework pair, size and env")
    row_legend(axes[0], "model size")
    return fig


def cells_subtitle(cells: pd.DataFrame) -> str:
    """What a panel of speedup_cells draws: the tables' geometric means, their interval where one is
    drawn, and the pairs of runs, or that each point is one pair."""
    if single_pairs(cells):
        return "a point per pair of runs (as in the tables)"
    return f"as in the tables: geometric mean{interval_words(cells)}; dots: pairs of runs"


def fig_speedups(results: Results, name: str):
    title = f"{capitalised(name)}: total-time speedups per framework pair and model size"
    return speedup_figure(results, name, "total", title)


def fig_steady_speedups(results: Results, name: str):
    label = results.study.steady.label
    return speedup_figure(
        results,
        name,
        "steady",
        f"Steady state: speedups of the mean time/iteration over {label} ({name})",
    )


def fig_tags(results: Results, name: str):
    """Top: total duration per framework under each tag, a panel per size. Bottom: each tag's
    total-time speedups of the repeated experiment, its tables' cells with their intervals."""
    study, runs = results.study, results.runs(name)
    repeats = study.platforms[name].repeats
    sizes = in_order(study.sizes, runs["model_size"])
    tags = sorted(runs["tag"].unique())
    palette = dict(zip(tags, sns.color_palette("Set2", len(tags))))
    title = f"{capitalised(name)}: platforms (tags) compared on the {repeats} runs"
    fig, axes = new_figure(len(sizes), 2, width=5.5, title=title)
    frameworks = in_order(study.frameworks, runs["framework"])
    ratios = results.pairs["total"][results.pairs["total"]["experiment"] == repeats]
    tables = results.platform_speedups.get(name, {})
    cells = (
        pd.concat([table.assign(tag=tag) for tag, table in tables.items()])
        if tables
        else pd.DataFrame()
    )
    for col, size in enumerate(sizes):
        top, bottom = axes[0, col], axes[1, col]
        box_with_points(
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
            empty_panel(bottom, speedup_gap(results, repeats, "total", size))
            continue
        pairs = in_order(study.pair_names, size_cells["pair"])
        speedup_cells(
            bottom, ratios[ratios["model_size"] == size], size_cells, "tag", tags, palette, pairs
        )
        ratio_axis(bottom)
        bottom.set_title(f"{size} model: total-time speedups per tag")
    row_legend(axes[0], "tag")
    interval = interval_words(cells, ",\n")
    row_legend(axes[1], f"tag\n(geometric mean{interval})")
    if single_runs(runs, ["framework", "model_size", "env", "tag"]):
        say_single_runs(fig, "a run per framework, size, env and tag")
    return fig


def fig_speedup_vs_env_cost(results: Results, name: str = ""):
    """Per metric (row) and size (column): each pair's speedup per env against the env's step cost,
    and the log-log fit of a pair of MIN_CORRELATION_ENVS envs or more."""
    if env_costs(results.timing).empty:
        return "no env timing (--env-timing)"
    study = results.study
    points = {
        metric: env_speedups(results.pairs[metric], results.timing) for metric in ENV_COST_METRICS
    }
    if all(p.empty for p in points.values()):
        return env_cost_gap(results, "total")
    sizes = in_order(study.sizes, pd.concat(points.values())["model_size"])
    experiments = " + ".join(results.compared("total"))
    title = f"Speedup against env step cost ({experiments}, sync off, default compile modes)"
    fig, axes = new_figure(len(sizes), len(ENV_COST_METRICS), width=5.5, height=4.8, title=title)
    for row, (metric, data) in enumerate(points.items()):
        # a fit needs MIN_CORRELATION_ENVS envs: the legend names lines only where some are drawn
        fitted = False
        for col, size in enumerate(sizes):
            ax, cell = axes[row, col], data[data["model_size"] == size]
            ax.set_title(f"{metric}, {size} model")
            if cell.empty:
                empty_panel(ax, env_cost_gap(results, metric, size))
                continue
            for pair in in_order(study.pair_names, cell["pair"]):
                group = cell[cell["pair"] == pair]
                color = pair_palette(study).get(pair, "0.5")
                ax.scatter(
                    group["cost"], group["speedup"], color=color, s=24, alpha=0.8, label=pair
                )
                if len(group) >= MIN_CORRELATION_ENVS:
                    slope, intercept = np.polyfit(
                        np.log10(group["cost"]), np.log10(group["speedup"]), 1
                    )
                    x = np.array([group["cost"].min(), group["cost"].max()])
                    fit = 10 ** (intercept + slope * np.log10(x))
                    ax.plot(x, fit, color=color, lw=1.2, gid=FIT_GID)
                    fitted = True
            ratio_axis(ax)
            log_axis(ax, "env step cost relative to the cheapest env", suffix="×", axis="x")
            mark_expensive_envs(ax, env_costs(results.timing), study.expensive_envs, cell["env"])
        lines = ";\nlines: log-log fit" if fitted else ""
        row_legend(axes[row], f"pair A → B\n(a point per env{lines})", rename=pretty_pair)
    compared = results.compared("total")
    if all(
        single_runs(ratios[ratios["experiment"].isin(compared)], ["pair", "env", "model_size"])
        for ratios in (results.pairs[metric] for metric in ENV_COST_METRICS)
    ):
        say_single_runs(fig, "one pair of runs per framework pair, size and env")
    return fig


def speedup_cells(
    ax, ratios: pd.DataFrame, cells: pd.DataFrame, hue: str, order, palette, pairs
) -> None:
    """Per framework pair (x), one group per hue value (a model size or a tag): every pair of runs
    as a faint dot, and the table's cell as a marker at the geometric mean with its
    cluster-bootstrap interval. ratios: the pairs of runs (column hue); cells: speedups.csv rows
    (column hue too)."""
    position = {pair: i for i, pair in enumerate(pairs)}
    width = 0.8 / max(len(order), 1)
    jitter = np.random.default_rng(0)  # the dots spread a little, the same way every time
    for i, value in enumerate(order):
        offset = (i - (len(order) - 1) / 2) * width
        color = palette.get(value, "0.5")
        dots = ratios[ratios[hue] == value]
        x = dots["pair"].map(position).to_numpy(float) + offset
        x += jitter.uniform(-0.25, 0.25, len(x)) * width
        ax.scatter(
            x, dots["value"].astype(float), color=color, s=9, alpha=0.4, linewidths=0, zorder=1
        )
        row = cells[cells[hue] == value]
        x = row["pair"].map(position).to_numpy(float) + offset
        intervals(ax, x, row["geomean"], row["ci_low"], row["ci_high"], color, label=str(value))
    ax.set_xticks(range(len(pairs)), [pretty_pair(p) for p in pairs])
    ax.set_xlim(-0.6, len(pairs) - 0.4)
    rotate_xticks(ax)


def draw_against_env_cost(
    ax, runs: pd.DataFrame, y: str, costs: pd.Series, env_order: list[str], study: Study
) -> tuple[list, bool]:
    """Every run (a row of runs) against its env's step cost (costs: env -> cost); framework =
    color, size = marker and shade; lines join the medians of a framework and size measured on two
    envs or more. Without a cost for every env, the envs are placed in env_order instead. Returns
    the legend handles and whether a line was drawn."""
    timed = runs["env"].isin(costs.index).all()
    x = (
        runs["env"].map(costs)
        if timed
        else runs["env"].map({env: i for i, env in enumerate(env_order)})
    )
    colors, shades, markers = framework_colors(study), size_shades(study), size_markers(study)
    joined = False
    for (framework, size), group in runs.groupby(["framework", "model_size"]):
        color = shade(colors.get(framework, "0.5"), shades.get(size, 0.0))
        ax.scatter(
            x[group.index], group[y], color=color, marker=markers.get(size, "o"), s=28, alpha=0.75
        )
        medians = group.groupby(x[group.index])[y].median().sort_index()
        if len(medians) > 1:  # one env: a point, no line
            ax.plot(medians.index, medians.to_numpy(), color=color, lw=1.2, gid=MEDIAN_GID)
            joined = True
    if timed:
        log_axis(ax, "env step cost relative to the cheapest env", suffix="×", axis="x")
    else:
        envs = in_order(env_order, runs["env"])
        ax.set_xticks([env_order.index(env) for env in envs], envs)
        rotate_xticks(ax)
        ax.set_xlabel("env (no env timing given: by name)")
    handles = [
        Patch(facecolor=colors.get(f, "0.5"), edgecolor="0.25", label=f)
        for f in in_order(study.frameworks, runs["framework"])
    ]
    handles += [
        Line2D([], [], color="0.3", marker=markers.get(s, "o"), ls="", label=s)
        for s in in_order(study.sizes, runs["model_size"])
    ]
    return handles, joined


def mark_expensive_envs(ax, costs: pd.Series, expensive_envs, envs) -> None:
    """A dotted line and the name of each expensive env (Craftax) among envs on an env-cost x axis
    (costs: env -> cost)."""
    for env in (env for env in expensive_envs if env in set(envs) and env in costs):
        ax.axvline(costs[env], color="0.6", ls=":", lw=1, zorder=0)
        transform = ax.get_xaxis_transform()
        ax.text(
            costs[env],
            0.02,
            f" {env}",
            transform=transform,
            rotation=90,
            fontsize=8,
            color="0.4",
            va="bottom",
        )

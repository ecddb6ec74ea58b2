"""Axes, palettes, legends and interval markers shared by the figures (matplotlib and seaborn)."""

import itertools
import textwrap
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from analysis.common import in_order, mode_name  # noqa: E402
from analysis.stats import BOOTSTRAP_LEVEL  # noqa: E402
from core.study import Study  # noqa: E402

MARKERS = ("o", "s", "^", "D", "v", "P")
SPEEDUP_LABEL = "speedup A → B = time A / time B\n(above 1×: B is faster)"
INTERVAL = f"{BOOTSTRAP_LEVEL:.0%} cluster-bootstrap interval"
# the words under the title of a figure drawn from single runs (say_single_runs)
SINGLE_RUNS = "Single runs"
# the gids of the tables' intervals and estimates, found by tests
INTERVAL_GID, CENTRE_GID = ("interval", "centre")
# the gids of the lines through medians (draw_against_env_cost) and of the log-log fits: a legend or
# title promises lines only where some are drawn
MEDIAN_GID = "median"
FIT_GID = "fit"
# a bar's env backend; its colour is its framework's
BACKEND_HATCHES = {"gymnax": "", "envpool": "///"}
DTYPE_HATCHES = {"float32": "", "bfloat16": "xx"}
UPDATE_SHADE = 0.55  # an update bar: its framework's colour, this much towards white
EMPTY_PANEL_WIDTH = 28  # characters per line of an empty panel's words: narrow panels hold them
# major ticks of a log axis per decade, finest first: 1-2-5 or finer on short ranges, decades on
# long ones
LOG_SUBS = ((1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 7.0), (1.0, 2.0, 5.0), (1.0,))
# of a log axis' range (log space), beyond its outermost ticks: their labels are drawn in full
TICK_ROOM = 0.02
MAX_X_TICKS = 5  # labels such as "0.5×" side by side: more on a panel's width run into each other
DATA_MARGIN = (
    0.05  # of a symlog panel's height, above and below its data: no point sits on the edge
)


# ----------------------------------------------------------------------------------------- palettes
def framework_colors(study: Study) -> dict[str, str]:
    return {name: framework.color for name, framework in study.frameworks.items()}


def size_markers(study: Study) -> dict[str, str]:
    return {size: MARKERS[i % len(MARKERS)] for i, size in enumerate(study.sizes)}


def size_shades(study: Study) -> dict[str, float]:
    """Smallest model lightest: >0 towards white, <0 towards black."""
    sizes = study.sizes
    return dict(zip(sizes, np.linspace(0.45, -0.35, len(sizes)) if len(sizes) > 1 else [0.0]))


def size_palette(study: Study) -> dict:
    return dict(zip(study.sizes, sns.color_palette("Blues", len(study.sizes) + 2)[2:]))


def pair_palette(study: Study) -> dict:
    return dict(zip(study.pair_names, sns.color_palette("Dark2", len(study.pair_names))))


def shade(color, amount: float):
    rgb = np.array(matplotlib.colors.to_rgb(color))
    return tuple(rgb + (1 - rgb) * amount if amount > 0 else rgb * (1 + amount))


def mode_palette(study: Study) -> dict[str, tuple]:
    """Each compile mode in its framework's color; the default mode darkest, the others lighter."""
    return {
        mode_name(name, mode): shade(framework.color, 0.3 * i - 0.2)
        for name, framework in study.frameworks.items()
        for i, mode in enumerate(framework.compile)
    }


# --------------------------------------------------------------------------------------------- axes
def log_ticks(low: float, high: float, subs) -> np.ndarray:
    """The major ticks a LogLocator of subs puts from a decade below low to a decade above high."""
    decades = np.arange(np.floor(np.log10(low)) - 1, np.ceil(np.log10(high)) + 2)
    return np.sort(np.outer(10.0**decades, subs).ravel())


def covering_limits(low: float, high: float, subs) -> tuple[float, float]:
    """The limits low..high widened to the nearest ticks of subs at or beyond them, with a little
    room (TICK_ROOM of the range in log space) so the outermost tick labels are drawn in full."""
    ticks = log_ticks(low, high, subs)
    bottom, top = ticks[ticks <= low * (1 + 1e-9)].max(), ticks[ticks >= high * (1 - 1e-9)].min()
    room = TICK_ROOM * np.log10(top / bottom)
    return bottom / 10**room, top * 10**room


def log_axis(ax, label: str, suffix: str = "", axis: str = "y") -> None:
    """Log scale with plain-number ticks: 1-2-5 per decade on short ranges, finer on very short
    ones; on an x axis no more than MAX_X_TICKS of them (its labels stand side by side). The limits
    reach a tick at or beyond each end of the data: the labels cover every point drawn."""
    getattr(ax, f"set_{axis}scale")("log")
    low, high = getattr(ax, f"get_{axis}lim")()
    decades = np.log10(high / low)
    choice = 0 if decades < 0.6 else 1 if decades < 3 else 2
    limits = covering_limits(low, high, LOG_SUBS[choice])
    while axis == "x" and choice < 2 and tick_count(limits, LOG_SUBS[choice]) > MAX_X_TICKS:
        choice += 1
        limits = covering_limits(low, high, LOG_SUBS[choice])
    subs = LOG_SUBS[choice]
    getattr(ax, f"set_{axis}lim")(*limits)
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_locator(LogLocator(base=10, subs=subs))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}{suffix}"))
    target.set_minor_formatter(NullFormatter())
    getattr(ax, f"set_{axis}label")(label)


def tick_count(limits: tuple[float, float], subs) -> int:
    """How many major ticks a LogLocator of subs puts within limits."""
    ticks = log_ticks(*limits, subs)
    return int(((ticks >= limits[0]) & (ticks <= limits[1])).sum())


def ratio_axis(ax) -> None:
    """Speedups: log scale in '×' with a dashed line at 1× (no difference)."""
    ax.axhline(1.0, color="0.3", lw=1, ls="--", zorder=0)
    log_axis(ax, SPEEDUP_LABEL, suffix="×")


def ratio_axes(axes_row) -> None:
    """ratio_axis on panels read side by side, one y range over them all (each panel's range from
    its data on the log scale, widened to cover them all, then to ticks: alike on every panel)."""
    for ax in axes_row:
        ax.axhline(1.0, color="0.3", lw=1, ls="--", zorder=0)
        ax.set_yscale("log")
    same_y_range(axes_row)
    for ax in axes_row:
        log_axis(ax, SPEEDUP_LABEL, suffix="×")


def symlog_axis(ax, values: pd.Series, label: str) -> None:
    """Differences that span decades and may change sign: linear below the decade of the 10th
    percentile of |values|."""
    smallest = max(float(np.nanpercentile(values.abs(), 10)), 1e-4)
    ax.set_yscale("symlog", linthresh=10 ** np.floor(np.log10(smallest)))
    ax.axhline(0, color="0.3", lw=1, ls="--", zorder=0)
    # the limits from the data, padded on the symlog scale (matplotlib pads on the linear one: the
    # largest differences would sit on the panel's edge)
    scale = ax.yaxis.get_transform()
    low, high = scale.transform([min(values.min(), 0.0), max(values.max(), 0.0)])
    pad = DATA_MARGIN * (high - low)
    bottom, top = scale.inverted().transform([low - pad, high + pad])
    ax.set_ylim(0 if values.min() >= 0 else bottom, 0 if values.max() <= 0 else top)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylabel(label)


def rotate_xticks(ax) -> None:
    ax.tick_params(axis="x", labelrotation=35)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")


def empty_panel(ax, message: str) -> None:
    """A panel without data: why, in its middle (wrapped to the panel's width), instead of empty
    axes."""
    text = textwrap.fill(message, EMPTY_PANEL_WIDTH)
    where = dict(ha="center", va="center", transform=ax.transAxes)
    ax.text(0.5, 0.5, text, **where, color="0.4", fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])


def note_at(ax, x: float, message: str) -> None:
    """Words at x (data coordinates) halfway up a panel: a category of it (an x tick) without data
    says why."""
    transform = ax.get_xaxis_transform()
    ax.text(x, 0.5, message, ha="center", va="center", transform=transform, color="0.4", fontsize=9)


def same_y_range(axes_row) -> None:
    """One y range for panels read side by side (each panel's own range, widened to cover them
    all)."""
    lows, highs = zip(*(ax.get_ylim() for ax in axes_row))
    for ax in axes_row:
        ax.set_ylim(min(lows), max(highs))


def row_legend(axes_row, title: str, rename: Callable[[str], str] = str, handles=None) -> None:
    """One legend per row of panels, outside on the right of the last panel."""
    for ax in axes_row:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    last = axes_row[-1]
    handles = handles or last.get_legend_handles_labels()[0]
    last.legend(
        handles,
        [rename(h.get_label()) for h in handles],
        title=title,
        loc="upper left",
        bbox_to_anchor=(1.02, 1),
        frameon=False,
        fontsize=10,
        title_fontsize=11,
    )


def has_interval(cells: pd.DataFrame) -> bool:
    """Whether intervals() draws a bar for any of these speedup cells (speedups.csv rows)."""
    return bool(len(cells)) and bool(cells["ci_low"].notna().any())


def interval_words(cells: pd.DataFrame, before: str = ", ") -> str:
    """INTERVAL after `before` where some cell has one drawn, else nothing: words say only what is
    drawn."""
    return f"{before}{INTERVAL}" if has_interval(cells) else ""


def single_pairs(cells: pd.DataFrame) -> bool:
    """Whether each of these speedup cells comes from one pair of runs (one env, one seed)."""
    return bool(len(cells)) and bool((cells["n_pairs"] == 1).all())


def single_runs(runs: pd.DataFrame, keys: list[str]) -> bool:
    """Whether the runs hold one run (one seed) per value of keys, e.g. framework, size and env."""
    return bool(len(runs)) and bool((runs.groupby(keys).size() == 1).all())


def say_single_runs(fig, what: str) -> None:
    """A line under the figure's title: it is drawn from single runs (what: of what each is one),
    a measurement each, not an estimate (as REPORT.md says of such cells)."""
    title = fig._suptitle  # noqa: SLF001 (matplotlib has no getter for it)
    title.set_text(f"{title.get_text()}\n{SINGLE_RUNS} ({what}): measurements, not estimates")


def new_figure(
    ncols: int, nrows: int = 1, width: float = 6.0, height: float = 4.8, title: str = ""
):
    """A figure of nrows x ncols panels, each about width x height inches (fit_layout adds the
    legends' room)."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    fig.suptitle(title, fontsize=15, fontweight="bold")
    return fig, axes


def fit_layout(fig) -> None:
    """The figure widened by its legends (row_legend puts them right of the panels, which keep their
    width) and its title wrapped to the figure's width, then laid out: the panels fill the image,
    not a column in a margin."""
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    room = max((legend.get_window_extent(renderer).width for legend in legends), default=0.0)
    fig.set_figwidth(fig.get_figwidth() + room / fig.dpi)
    title = fig._suptitle  # noqa: SLF001 (matplotlib has no getter for it)
    if title is not None and title.get_text():
        ratio = title.get_window_extent(renderer).width / (0.95 * fig.bbox.width)
        if ratio > 1:
            # each line (a title, then say_single_runs' words) wrapped on its own
            lines = title.get_text().splitlines()
            width = int(max(map(len, lines)) / ratio)
            title.set_text("\n".join(textwrap.fill(line, width) for line in lines))
    fig.tight_layout()


# -------------------------------------------------------------------------------------------- marks
def box_with_points(ax, data, x, y, order, hue, hue_order, palette, log=True) -> None:
    """A box per (x, hue) with every run (or pair of runs) drawn on top in the box's colour (a box
    of one run is a line: its point shows whose it is)."""
    # grey for a framework or mode not listed above
    palette = {h: palette.get(h, "0.6") for h in hue_order}
    common = dict(
        data=data, x=x, y=y, order=order, hue=hue, hue_order=hue_order, ax=ax, log_scale=log
    )
    # saturation 1: the boxes (and the legend) in the palette's colours, those of the points
    sns.boxplot(**common, palette=palette, saturation=1, showfliers=False, boxprops={"alpha": 0.8})
    sns.stripplot(
        **common, palette=palette, dodge=True, size=4, edgecolor="0.2", linewidth=0.6, legend=False
    )
    ax.set_xlabel("")


def framework_boxes(ax, runs: pd.DataFrame, y: str, frameworks, sizes, study: Study) -> None:
    """Per framework (an x tick), a box per model size of the runs' y, with every run on top; colour
    = framework, shade and marker = size (as draw_against_env_cost draws them)."""
    colors, shades, markers = framework_colors(study), size_shades(study), size_markers(study)
    width = 0.8 / len(sizes)
    jitter = np.random.default_rng(0)  # the points spread a little, the same way every time
    for (i, framework), (j, size) in itertools.product(enumerate(frameworks), enumerate(sizes)):
        values = runs.loc[(runs["framework"] == framework) & (runs["model_size"] == size), y]
        values = values.dropna().to_numpy(float)
        if not len(values):
            continue
        x = i + (j - (len(sizes) - 1) / 2) * width
        color = shade(colors.get(framework, "0.5"), shades.get(size, 0.0))
        box = ax.boxplot(
            values, positions=[x], widths=0.85 * width, patch_artist=True, showfliers=False
        )
        for patch in box["boxes"]:
            patch.set(facecolor=color, alpha=0.8, edgecolor="0.25")
        for line in box["medians"]:
            line.set_color("0.2")
        spread = x + jitter.uniform(-0.2, 0.2, len(values)) * width
        marker = markers.get(size, "o")
        ax.scatter(
            spread,
            values,
            color=color,
            marker=marker,
            s=30,
            edgecolors="0.2",
            linewidths=0.6,
            zorder=3,
        )
    ax.set_xticks(range(len(frameworks)), frameworks)
    ax.set_xlim(-0.6, len(frameworks) - 0.4)
    ax.set_yscale("log")


def modes_pointplot(ax, data, x, y, order, title: str, joined: bool, mode_colors: dict) -> None:
    """A time (column y) per (x, compile mode: column "mode"): the median over seeds, bars from min
    to max. mode_colors: mode -> colour (mode_palette), its order the legend's; a mode not in it is
    grey."""
    modes = in_order(mode_colors, data["mode"])
    palette = {mode: mode_colors.get(mode, "0.6") for mode in modes}
    sns.pointplot(
        data=data,
        x=x,
        y=y,
        order=order,
        hue="mode",
        hue_order=modes,
        palette=palette,
        ax=ax,
        estimator="median",
        errorbar=("pi", 100),
        dodge=0.5 if len(modes) > 1 else False,
        markersize=6,
        linewidth=1.5,
        linestyle="-" if joined else "none",
        log_scale=True,
    )
    ax.set_title(title)
    ax.set_xlabel("")


def intervals(ax, x, centre, low, high, color, label=None, marker="o") -> None:
    """Markers at centre with a bar from low to high where there is an interval (low not NaN): the
    tables' cells."""
    x, centre, low, high = (np.asarray(v, float) for v in (x, centre, low, high))
    dark = shade(color, -0.45)
    has = ~np.isnan(low)
    if has.any():
        bars = ax.vlines(x[has], low[has], high[has], color=dark, lw=2.2, zorder=3)
        bars.set_gid(INTERVAL_GID)
        for end in (low[has], high[has]):
            ax.hlines(end, x[has] - 0.06, x[has] + 0.06, color=dark, lw=1.6, zorder=3)
    marks = ax.scatter(
        x,
        centre,
        color=color,
        marker=marker,
        s=50,
        zorder=4,
        edgecolors=dark,
        linewidths=1,
        label=label,
    )
    marks.set_gid(CENTRE_GID)


def variant_bars(
    ax, cell: pd.DataFrame, parts: list[str], frameworks, variants, colors: dict, hatches, ratio
) -> None:
    """Per framework (x), one stacked bar per variant (an env backend, a data type): rollout (the
    framework's colour), then update (lighter), hatched by variant; gid "{variant} {rollout|update}"
    on each bar. Over a bar of any variant but the first, the sum of its `ratio` parts over the
    first variant's, e.g. "×3.1". cell: medians indexed by (framework, variant), columns parts;
    colors: framework -> colour."""
    width = 0.8 / len(variants)
    for i, framework in enumerate(frameworks):
        color = colors.get(framework, "0.5")
        for j, variant in enumerate(variants):
            if (framework, variant) not in cell.index:
                continue
            rollout, update = (float(cell.at[(framework, variant), part]) for part in parts)
            x = i + (j - (len(variants) - 1) / 2) * width
            hatch = hatches.get(variant, "..")
            common = dict(width=width * 0.92, hatch=hatch, edgecolor="0.25", linewidth=0.6)
            ax.bar(x, rollout, color=color, gid=f"{variant} rollout", **common)
            ax.bar(
                x,
                update,
                bottom=rollout,
                color=shade(color, UPDATE_SHADE),
                gid=f"{variant} update",
                **common,
            )
            first = (framework, variants[0])
            ratio_value = np.nan
            if j and first in cell.index:
                ratio_value = parts_sum(cell, (framework, variant), ratio) / parts_sum(
                    cell, first, ratio
                )
            if np.isfinite(ratio_value):
                ax.text(
                    x,
                    rollout + update,
                    f"×{ratio_value:.1f}",
                    ha="center",
                    va="bottom",
                    fontsize=9,
                    color="0.2",
                )
    # rotated: they never overlap
    ax.set_xticks(range(len(frameworks)), frameworks, rotation=30, ha="right")
    ax.set_xlim(-0.6, len(frameworks) - 0.4)
    tops = cell[parts].sum(axis=1, min_count=len(parts))
    ax.set_ylim(0, 1.15 * float(tops.max()) if tops.notna().any() else 1.0)  # room for the ratios
    ax.set_ylabel("time per iteration (s)")


def parts_sum(cell: pd.DataFrame, key: tuple, parts: list[str]) -> float:
    """The sum of some parts (rollout, update) of one bar of variant_bars."""
    return sum(float(cell.at[key, part]) for part in parts)


def variant_legend(axes_row, variants, hatches, ratio: str) -> None:
    """The legend of variant_bars: the parts (shades), the variants (hatches) and what the ratio
    over a bar is."""
    handles = [
        Patch(facecolor="0.35", edgecolor="0.25", label="rollout"),
        Patch(facecolor=shade("0.35", UPDATE_SHADE), edgecolor="0.25", label="update"),
        *(
            Patch(facecolor="white", edgecolor="0.25", hatch=hatches.get(v, ".."), label=v)
            for v in variants
        ),
    ]
    row_legend(axes_row, "bar: rollout + update\n(median over seeds)" + ratio, handles=handles)

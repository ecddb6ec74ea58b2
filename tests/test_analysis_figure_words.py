"""The figures say only what they draw: log axes labelled over their whole data range, an interval
named only where one is drawn, and a figure of single runs (one pair, one seed) says so (issue 68
item 7)."""

import itertools

import numpy as np
import pytest
from analysis_runs import analysis_of, write_runs_csv, write_timing
from matplotlib.collections import PathCollection

from analysis import figures, plotting, speedup_figures, time_figures

# totals (s) far apart: torch's 42 s is above a 30 label, its speedups reach 3.5x and more
TOTALS = {"linen": 12.0, "nnx": 12.6, "equinox": 14.0, "torch": 42.0}
ENVS = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0")


def exp1(tmp_path, envs=ENVS[:1], seeds=(1,)):
    """The Results of exp1 runs of every framework on envs, a run per seed (times apart)."""
    rows = [
        (env, framework, seed, total * (1 + 0.03 * seed + 0.05 * e))
        for (e, env), seed, (framework, total) in itertools.product(
            enumerate(envs), seeds, TOTALS.items()
        )
    ]
    tmp_path.mkdir(exist_ok=True)
    timing = write_timing(tmp_path / "timing.json")
    return analysis_of(write_runs_csv(tmp_path / "runs.csv", rows), timing)


def title(fig) -> str:
    return fig._suptitle.get_text()  # noqa: SLF001 (matplotlib has no getter for it)


def labelled(ax) -> np.ndarray:
    """The major ticks of a log y axis within its limits: the labels shown."""
    low, high = ax.get_ylim()
    ticks = ax.yaxis.get_majorticklocs()
    return ticks[(ticks >= low * (1 - 1e-9)) & (ticks <= high * (1 + 1e-9))]


def plotted(ax) -> tuple[float, float]:
    """The smallest and largest y of the points drawn on a panel."""
    points = [c for c in ax.collections if isinstance(c, PathCollection)]
    ys = np.concatenate([c.get_offsets()[:, 1] for c in points])
    return float(ys.min()), float(ys.max())


def drawn(fig):
    """The figure laid out as plot_results saves it, its ticks computed."""
    figures.fit_layout(fig)
    fig.canvas.draw()
    return fig


@pytest.mark.parametrize("envs", [ENVS[:1], ENVS])
def test_the_labels_of_a_log_axis_cover_every_point(tmp_path, envs):
    results = exp1(tmp_path, envs)
    speedups = drawn(speedup_figures.fig_speedups(results, "exp1"))
    total = drawn(time_figures.fig_total(results, "exp1"))
    panels = [*speedups.axes[:1], *total.axes[:2]]
    for ax in panels:
        assert ax.get_yscale() == "log"
        ticks, (low, high) = labelled(ax), plotted(ax)
        assert ticks.max() >= high and ticks.min() <= low, (ax.get_title(), ticks, low, high)
    # the smoke sweep's figures: speedups of 3.5x under a top label of 2x, torch's 42 s under 30
    assert plotted(speedups.axes[0])[1] > 3
    assert plotted(total.axes[0])[1] > 40
    figures.plt.close("all")


def test_log_axis_on_a_short_range_reaches_the_next_tick(tmp_path):
    fig, ax = figures.plt.subplots()
    ax.scatter([0, 1], [7.3, 21.5])
    plotting.log_axis(ax, "total duration (s)")
    fig.canvas.draw()
    ticks = labelled(ax)
    assert ticks.min() <= 7.3 and ticks.max() >= 21.5
    assert [t.get_text() for t in ax.get_yticklabels() if t.get_position()[1] == ticks.max()]
    figures.plt.close(fig)


def test_an_interval_is_named_only_where_one_is_drawn(tmp_path):
    one_env = drawn(speedup_figures.fig_speedups(exp1(tmp_path / "one", seeds=(1, 2)), "exp1"))
    panel = one_env.axes[0]
    assert not [c for c in panel.collections if c.get_gid() == plotting.INTERVAL_GID]
    assert "interval" not in panel.get_title() and "interval" not in title(one_env)
    three = drawn(speedup_figures.fig_speedups(exp1(tmp_path / "three", ENVS, (1, 2)), "exp1"))
    panel = three.axes[0]
    assert [c for c in panel.collections if c.get_gid() == plotting.INTERVAL_GID]
    assert plotting.INTERVAL in panel.get_title()
    figures.plt.close("all")


def single_run_figures(results) -> list:
    return [
        speedup_figures.fig_speedups(results, "exp1"),
        time_figures.fig_total(results, "exp1"),
        speedup_figures.fig_speedup_vs_env_cost(results),
    ]


@pytest.mark.parametrize("envs", [ENVS[:1], ENVS])
def test_a_figure_of_single_runs_says_so(tmp_path, envs):
    for fig in single_run_figures(exp1(tmp_path / "single", envs)):
        assert plotting.SINGLE_RUNS in title(drawn(fig)), title(fig)
    for fig in single_run_figures(exp1(tmp_path / "seeds", envs, seeds=(1, 2))):
        assert plotting.SINGLE_RUNS not in title(drawn(fig)), title(fig)
    figures.plt.close("all")

"""What a user reads of an analysis (issue 54, items 18, 23 and 24): the README block updated only
when it is unambiguous, REPORT.md and the README block saying when their speedups come from too few
runs to be a result, and figures that draw what their legends and titles say, with readable ticks
and every point inside its panel.

The input is the committed smoke sweep (results/smoke-cpu/runs: `./bench.sh --smoke`, one run a
framework of one env), what a new user sees first; the full sweep's runs are drawn from synthetic
runs.csv files."""

import itertools
from pathlib import Path

import matplotlib.colors
import pandas as pd
import pytest
from analysis_runs import write_timing
from matplotlib.collections import PathCollection
from matplotlib.transforms import Bbox

import plot_results
from analysis import figures, results
from analysis.loading import load_runs, read_env_timing
from analysis.report import README_MARKERS
from atomic import md_mark
from helpers import STUDY

SMOKE = Path(__file__).resolve().parent.parent / "results" / "smoke-cpu" / "runs"


@pytest.fixture(scope="module")
def smoke() -> results.Results:
    """The analysis of the committed smoke sweep, as plot_results.main makes it."""
    runs, skipped = load_runs([str(SMOKE)], [], STUDY)
    assert not skipped and len(runs["run"].unique()) == len(STUDY.frameworks)
    timing, _ = read_env_timing(str(SMOKE / plot_results.TIMING_FILE))
    return results.analyse(runs, timing, STUDY)


def shown(report: str) -> str:
    """REPORT.md less its first line, the tool's mark (an HTML comment, not shown): what a reader
    sees first."""
    mark, _, rest = report.partition("\n")
    assert mark == md_mark("plot_results.py")
    return rest


def run_main(capsys, *argv) -> tuple[int, str]:
    """plot_results.main's exit status and stderr."""
    capsys.readouterr()
    try:
        plot_results.main([str(a) for a in argv])
        code = 0
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


# ---------------------------------------------------------------- item 18: the README's block twice
@pytest.mark.parametrize("twice", ["start", "end", "both"])
def test_a_readme_with_the_block_twice_is_refused_as_ambiguous(tmp_path, capsys, twice):
    start, end = README_MARKERS
    block = {"start": f"{start}\nA\n{start}\nB\n{end}\n", "end": f"{start}\nA\n{end}\nB\n{end}\n"}
    block["both"] = f"{start}\nA\n{end}\n\n{start}\nB\n{end}\n"
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n{block[twice]}tail\n")
    before = readme.read_bytes()
    out = tmp_path / "out"
    code, err = run_main(capsys, SMOKE, "--out", out, "--no-figures", "--update-readme", readme)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1, err
    assert "ambiguous" in errors[0] and str(readme) in errors[0]
    assert readme.read_bytes() == before and not out.exists()


def test_a_readme_with_one_block_is_still_updated(tmp_path, capsys):
    start, end = README_MARKERS
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n{start}\nold\n{end}\ntail\n")
    code, err = run_main(
        capsys, SMOKE, "--out", tmp_path / "out", "--no-figures", "--update-readme", readme
    )
    assert code == 0, err
    text = readme.read_text()
    assert "old" not in text and text.count(start) == text.count(end) == 1


# ----------------------------------------------------------- item 23: a smoke sweep is not a result
def test_the_smoke_sweeps_report_says_first_that_it_is_not_a_result(tmp_path, capsys):
    block = tmp_path / "block.md"
    code, err = run_main(
        capsys, SMOKE, "--out", tmp_path / "out", "--no-figures", "--readme-block", block
    )
    assert code == 0, err
    report = (tmp_path / "out" / "REPORT.md").read_text()
    cells = len(pd.read_csv(tmp_path / "out" / "speedups.csv"))
    first = shown(report).splitlines()[0]
    assert first.startswith("**Not a result:**") and f"all {cells} speedup cells" in first
    assert "fewer than 3 runs a framework" in first and "smoke sweep" in first
    # the README block made from such runs carries the same warning, over its own (headline) cells,
    # first after its opening marker
    assert block.read_text().splitlines()[1].startswith("**Not a result:**")


def csv_runs(path: Path, seeds: dict[str, int]) -> Path:
    """A runs.csv of exp1 (three envs, every framework) and exp5 (its two envs): seeds[experiment]
    seeds each."""
    envs = {
        "exp1": ["CartPole-v1", "Acrobot-v1", "MountainCar-v0"],
        "exp5": list(STUDY.experiments["exp5"].envs[:2]),
    }
    rows = [
        {
            "run": f"{exp}__{env}__{framework}__{seed}",
            "sweep": exp,
            "iteration": i,
            "time/iteration": 0.1,
            "env": env,
            "framework": framework,
            "model_size": "small",
            "compile": STUDY.default_compile(framework),
            "seed": seed,
            "sync_timing": False,
            "batch_size": 32,
            "num_iterations": 10,
            "tag": "t",
            "status": "completed",
            "total_s": 2.0 + 0.1 * seed + list(STUDY.frameworks).index(framework),
        }
        for exp, n in seeds.items()
        for env in envs[exp]
        for framework in STUDY.frameworks
        for seed in range(1, n + 1)
        for i in range(10)
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_a_report_with_some_cells_of_too_few_runs_names_them_first(tmp_path, capsys):
    """exp1's cells have 3 runs a framework (3 envs), exp5's 2 (2 envs, one seed): the first line
    names exp5's."""
    csv = csv_runs(tmp_path / "runs.csv", {"exp1": 1, "exp5": 1})
    code, err = run_main(capsys, "--csv", csv, "--out", tmp_path / "out", "--no-figures")
    assert code == 0, err
    first = shown((tmp_path / "out" / "REPORT.md").read_text()).splitlines()[0]
    speedups = pd.read_csv(tmp_path / "out" / "speedups.csv")
    few = speedups[speedups["experiment"] == "exp5"]
    assert first.startswith("**Not a result, in part:**")
    assert f"{len(few)} of the {len(speedups)} speedup cells" in first and "exp5: total" in first
    assert "exp1" not in first


def test_a_report_of_enough_runs_has_no_warning(tmp_path, capsys):
    csv = csv_runs(tmp_path / "runs.csv", {"exp1": 1, "exp5": 2})
    block = tmp_path / "block.md"
    code, err = run_main(
        capsys, "--csv", csv, "--out", tmp_path / "out", "--no-figures", "--readme-block", block
    )
    assert code == 0, err
    report = shown((tmp_path / "out" / "REPORT.md").read_text())
    assert report.startswith("# benchback-rl results") and "Not a result" not in report
    assert "Not a result" not in block.read_text()


# ----------------------------------------------------- item 24: a figure draws what its legend says
FIT, MEDIAN = "fit", "median"  # the gids of the lines a legend or a title may promise


@pytest.fixture(scope="module")
def smoke_figures(smoke) -> dict:
    """The smoke sweep's figures as plot_results.main draws them (laid out, not saved): file name ->
    figure."""
    drawn, _ = figures.draw_figures(smoke)
    saved = {figure.file: fig for figure, fig in drawn}
    for fig in saved.values():
        fig.canvas.draw()
    yield saved
    figures.discard(drawn)


def upright_labels(ax, axis: str) -> list:
    """The tick labels of an axis that show (in the panel's range, with text, not rotated)."""
    low, high = sorted(getattr(ax, f"get_{axis}lim")())
    ticks = getattr(ax, f"{axis}axis").get_major_ticks()
    labels = [tick.label1 for tick in ticks if low <= tick.get_loc() <= high]
    return [label for label in labels if label.get_text() and label.get_visible()]


def test_no_tick_labels_of_the_smoke_figures_run_into_each_other(smoke_figures):
    assert {"speedup_vs_env_cost.png", "overhead_windows.png", "exp1_total.png"} <= set(
        smoke_figures
    )
    for name, fig in smoke_figures.items():
        renderer = fig.canvas.get_renderer()
        for ax, axis in itertools.product(fig.axes, "xy"):
            labels = [
                label for label in upright_labels(ax, axis) if label.get_rotation() % 360 == 0
            ]
            boxes = [label.get_window_extent(renderer) for label in labels]
            for (a, box_a), (b, box_b) in itertools.combinations(zip(labels, boxes), 2):
                assert not box_a.overlaps(box_b), (name, ax.get_title(), a.get_text(), b.get_text())


def test_every_point_of_the_smoke_figures_is_inside_its_panel(smoke_figures):
    """No point on (or past) a panel's top or bottom edge: the y range holds every run with a
    margin."""
    for name, fig in smoke_figures.items():
        for ax in fig.axes:
            for points in (c for c in ax.collections if isinstance(c, PathCollection)):
                offsets = points.get_offset_transform().transform(points.get_offsets())
                heights = ax.transAxes.inverted().transform(offsets)[:, 1]
                assert ((heights > 0.02) & (heights < 0.98)).all(), (name, ax.get_title(), heights)


def test_the_smoke_figures_fill_their_image(smoke_figures):
    """The panels span at least half the saved image's width (not a narrow column in a margin made
    by a title wider than the figure), and the title fits the figure."""
    for name, fig in smoke_figures.items():
        renderer = fig.canvas.get_renderer()
        panels = Bbox.union([ax.get_window_extent(renderer) for ax in fig.axes])
        image = fig.get_tightbbox(renderer)  # inches: what savefig(bbox_inches="tight") keeps
        assert panels.width / fig.dpi >= 0.5 * image.width, name
        assert fig._suptitle.get_window_extent(renderer).width <= fig.bbox.width, name


def rgb(color) -> tuple:
    return tuple(round(c, 3) for c in matplotlib.colors.to_rgb(color))


def test_the_overhead_figures_points_have_their_legends_colours(smoke_figures):
    """A box of one run is a line: its point, in the box's colour, says whose it is; every colour of
    the legend of a row of panels is that of some of the row's points."""
    fig = smoke_figures["overhead_windows.png"]
    rows = fig.axes[0].get_gridspec().nrows
    for row in range(rows):
        panels = [ax for ax in fig.axes if ax.get_subplotspec().rowspan.start == row]
        colours = {
            rgb(colour)
            for ax in panels
            for points in ax.collections
            if isinstance(points, PathCollection)
            for colour in points.get_facecolors()
        }
        (legend,) = [ax.get_legend() for ax in panels if ax.get_legend()]
        wanted = {rgb(handle.get_facecolor()) for handle in legend.legend_handles}
        assert len(wanted) > 1 and wanted <= colours, (row, wanted - colours)


def lines(ax, gid: str) -> list:
    """The lines of a panel with gid that join two points or more."""
    return [line for line in ax.lines if line.get_gid() == gid and len(set(line.get_xdata())) > 1]


def test_the_total_figure_labels_its_boxes_by_framework_and_promises_only_drawn_lines(
    smoke, tmp_path
):
    fig = figures.KINDS["total"].draw(smoke, "exp1")
    boxes, against = fig.axes
    assert [label.get_text() for label in upright_labels(boxes, "x")] == list(STUDY.frameworks)
    # one env: a point per framework, no line through medians, and the title names none
    assert not lines(against, MEDIAN) and "lines" not in against.get_title()
    figures.plt.close(fig)
    # three envs: the lines are drawn, and named
    csv = csv_runs(tmp_path / "runs.csv", {"exp1": 1})
    runs, _ = load_runs([], [str(csv)], STUDY)
    fig = figures.KINDS["total"].draw(
        results.analyse(runs, read_env_timing(None)[0], STUDY), "exp1"
    )
    boxes, against = fig.axes
    assert len(lines(against, MEDIAN)) == len(STUDY.frameworks)
    assert "lines: medians" in against.get_title()
    figures.plt.close(fig)


def fit_legends(fig) -> list[tuple[bool, str]]:
    """Per row of the env-cost figure: whether a log-log fit is drawn in it, and its legend's
    title."""
    rows = {}
    for ax in fig.axes:
        row = rows.setdefault(ax.get_subplotspec().rowspan.start, [False, ""])
        row[0] = row[0] or bool(lines(ax, FIT))
        if ax.get_legend() is not None:
            row[1] = ax.get_legend().get_title().get_text()
    return [tuple(row) for row in rows.values()]


def test_the_env_cost_figure_promises_fits_only_where_drawn(smoke_figures, tmp_path):
    one_env = fit_legends(smoke_figures["speedup_vs_env_cost.png"])
    assert one_env and all(not fitted and "lines" not in title for fitted, title in one_env)
    # five envs (exp1's three, exp5's two): a fit per pair, and the legend says so
    csv = csv_runs(tmp_path / "runs.csv", {"exp1": 1, "exp5": 1})
    runs, _ = load_runs([], [str(csv)], STUDY)
    timing, _ = read_env_timing(str(write_timing(tmp_path / "timing.json")))
    fig = figures.KINDS["speedup_vs_env_cost"].draw(results.analyse(runs, timing, STUDY), "exp1")
    five_envs = fit_legends(fig)
    assert five_envs and all(
        fitted and "lines: log-log fit" in title for fitted, title in five_envs
    )
    figures.plt.close(fig)

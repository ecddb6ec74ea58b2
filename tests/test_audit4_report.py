"""What a user reads of an analysis (issue 54, items 18, 23 and 24): the README block updated only when it is
unambiguous, REPORT.md and the README block saying when their speedups come from too few runs to be a result, and
figures that draw what their legends and titles say, with readable ticks and every point inside its panel.

The input is the committed smoke sweep (results/smoke-cpu/runs: `./bench.sh --smoke`, one run a framework of one
env), what a new user sees first; the full sweep's runs are drawn from synthetic runs.csv files."""

from pathlib import Path

import pandas as pd
import pytest

import plot_results
from analysis import results
from analysis.loading import load_runs, read_env_timing
from analysis.readme_block import README_MARKERS
from helpers import STUDY

SMOKE = Path(__file__).resolve().parent.parent / "results" / "smoke-cpu" / "runs"


@pytest.fixture(scope="module")
def smoke() -> results.Results:
    """The analysis of the committed smoke sweep, as plot_results.main makes it."""
    runs, skipped = load_runs([str(SMOKE)], [], STUDY)
    assert not skipped and len(runs["run"].unique()) == len(STUDY.frameworks)
    timing, _ = read_env_timing(str(SMOKE / plot_results.TIMING_FILE))
    return results.analyse(runs, timing, STUDY)


def run_main(capsys, *argv) -> tuple[int, str]:
    """plot_results.main's exit status and stderr."""
    capsys.readouterr()
    try:
        plot_results.main([str(a) for a in argv])
        code = 0
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


# ------------------------------------------------------------------------------ item 18: the README's block twice
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


# ------------------------------------------------------------------------ item 23: a smoke sweep is not a result
def test_the_smoke_sweeps_report_says_first_that_it_is_not_a_result(tmp_path, capsys):
    block = tmp_path / "block.md"
    code, err = run_main(
        capsys, SMOKE, "--out", tmp_path / "out", "--no-figures", "--readme-block", block
    )
    assert code == 0, err
    report = (tmp_path / "out" / "REPORT.md").read_text()
    cells = len(pd.read_csv(tmp_path / "out" / "speedups.csv"))
    first = report.splitlines()[0]
    assert first.startswith("**Not a result:**") and f"all {cells} speedup cells" in first
    assert "fewer than 3 runs a framework" in first and "smoke sweep" in first
    # the README block made from such runs carries the same warning, over its own (headline) cells
    assert block.read_text().splitlines()[0].startswith("**Not a result:**")


def csv_runs(path: Path, seeds: dict[str, int]) -> Path:
    """A runs.csv of exp1 (three envs, every framework) and exp5 (its two envs): seeds[experiment] seeds each."""
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
    """exp1's cells have 3 runs a framework (3 envs), exp5's 2 (2 envs, one seed): the first line names exp5's."""
    csv = csv_runs(tmp_path / "runs.csv", {"exp1": 1, "exp5": 1})
    code, err = run_main(capsys, "--csv", csv, "--out", tmp_path / "out", "--no-figures")
    assert code == 0, err
    first = (tmp_path / "out" / "REPORT.md").read_text().splitlines()[0]
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
    report = (tmp_path / "out" / "REPORT.md").read_text()
    assert report.startswith("# benchback-rl results") and "Not a result" not in report
    assert "Not a result" not in block.read_text()

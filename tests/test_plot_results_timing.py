"""plot_results.py finds the env timing that bench.sh wrote beside the runs (its --log-dir), unless
told another."""

import itertools

import pandas as pd
from analysis_runs import DEFAULT_MODES, ENV_FACTOR, write_run, write_timing

import plot_results


def sweep(root):
    """exp1-like runs of every framework on three envs, small, one seed."""
    for env, (framework, mode) in itertools.product(ENV_FACTOR, DEFAULT_MODES):
        write_run(root, env, framework, "small", mode, 1, sync=False)
    return root


def test_the_env_timing_bench_sh_wrote_in_the_runs_folder_is_used(tmp_path, capsys):
    runs = sweep(tmp_path / "runs")
    write_timing(runs / "env_timing.json")
    (tmp_path / "empty").mkdir()  # a first RUNS_DIR without one
    plot_results.main(
        [str(tmp_path / "empty"), str(runs), "--out", str(tmp_path / "out"), "--no-figures"]
    )
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert summary["env_cost"].notna().all() and set(summary["env_cost"]) == {1.0, 2.0, 3.0}
    assert f"env costs from {runs / 'env_timing.json'}" in capsys.readouterr().out
    assert "_No env timing given" not in (tmp_path / "out" / "REPORT.md").read_text()


def test_without_one_the_envs_have_no_cost(tmp_path):
    runs = sweep(tmp_path / "runs")
    plot_results.main([str(runs), "--out", str(tmp_path / "out"), "--no-figures"])
    assert pd.read_csv(tmp_path / "out" / "summary.csv")["env_cost"].isna().all()

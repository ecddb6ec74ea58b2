"""plot_results.py on synthetic run folders with known durations.

The runs are written like the ppo_*.py scripts write them (config.json, summary.json, tensorboardX events
at step (i + 1) * batch_size), with durations chosen so that every speedup is known in advance.
"""

import itertools
import json
import math
import statistics
import sys
from pathlib import Path

import pandas as pd
import pytest
from tensorboardX import SummaryWriter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import plot_results  # noqa: E402

NUM_ENVS, NUM_STEPS, ITERATIONS = 4, 8, 11  # iterations 0, 1-7 and 8-10: every window is populated
BATCH = NUM_ENVS * NUM_STEPS
MODES = [(f, c) for f, modes in plot_results.COMPILE_MODES.items() for c in modes]
DEFAULT_MODES = [(f, plot_results.DEFAULT_COMPILE[f]) for f in plot_results.FRAMEWORKS]
ALL_FIGURES = {spec.file for spec in plot_results.FIGURES}

# Duration factors: each run's times are products of these, so every speedup is known.
FRAMEWORK_FACTOR = {"linen": 1.0, "nnx": 1.25, "torch": 5.0}
SEED_FACTOR = {1: 1.0, 2: 1.2}
ENV_FACTOR = {"CartPole-v1": 1.0, "Acrobot-v1": 2.0}
SIZE_FACTOR = {"small": 1.0, "medium": 2.0, "large": 4.0}
TAG_FACTOR = {"linux": 1.0, "mac": 3.0}
# time/iteration relative to the steady state: iteration 0 compiles, 1-7 warm up, 8+ drift a little
WINDOW_SHAPE = [20.0] + [3.0] * 7 + [1.0 + 0.1 * (i - 8) for i in range(8, ITERATIONS)]


def known_durations(env, framework, size, seed, tag) -> dict:
    """time/iteration per iteration, rollout/update shares and total_s of a synthetic run."""
    base = 0.01 * FRAMEWORK_FACTOR[framework] * SEED_FACTOR.get(seed, 1.0) * ENV_FACTOR[env] * SIZE_FACTOR[size] * TAG_FACTOR[tag]
    iteration = [base * w for w in WINDOW_SHAPE]
    return {"iteration": iteration, "rollout": [0.4 * t for t in iteration], "update": [0.5 * t for t in iteration],
            "total_s": 1.5 + sum(iteration)}


def write_run(root: Path, env, framework, size, compile_mode, seed, sync, tag="linux", status="completed",
              iterations=ITERATIONS, events=True) -> dict:
    """One run folder as ppo_*.py writes it; returns its config plus its known durations."""
    name = f"{env}__{framework}__{size}__{compile_mode}__{seed}__{1_700_000_000 + len(list(root.rglob('config.json')))}"
    run_dir = root / tag / name
    run_dir.mkdir(parents=True)
    config = {"exp_name": f"ppo_{framework}", "env": env, "model_size": size, "seed": seed, "num_envs": NUM_ENVS,
              "num_steps": NUM_STEPS, "num_iterations": ITERATIONS, "compile": compile_mode, "sync_timing": sync,
              "tag": tag, "framework": framework, "batch_size": BATCH, "minibatch_size": BATCH // 2,
              "versions": {"python": "3.11.0", "jax": "0.6.0"}, "device": "cpu", "platform": "Linux-test",
              "hostname": f"{tag}-host", "start_time": "2025-01-01T00:00:00+00:00"}
    durations = known_durations(env, framework, size, seed, tag)
    (run_dir / "config.json").write_text(json.dumps(config))
    if events:
        writer = SummaryWriter(str(run_dir))
        for i in range(iterations):
            step = (i + 1) * BATCH
            for part in ("iteration", "rollout", "update"):
                writer.add_scalar(f"time/{part}", durations[part][i], step)
            writer.add_scalar("charts/episodic_return", 10.0 * i, step)
        writer.close()
    summary = {"status": status, "iterations_completed": iterations, "setup_s": 1.5, "total_s": durations["total_s"],
               "final_return": 95.0}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return {**config, **durations, "run_dir": run_dir, "steady": statistics.mean(durations["iteration"][8:]),
            "rollout8": statistics.mean(durations["rollout"][8:]), "update8": statistics.mean(durations["update"][8:])}


def write_study(root: Path) -> list[dict]:
    """exp1 (linux) + a small exp4 repeat (mac) + exp2 + exp3, and three runs that must be skipped."""
    runs = []
    for env, size, (framework, mode), seed in itertools.product(ENV_FACTOR, ["small", "large"], DEFAULT_MODES, SEED_FACTOR):
        runs.append(write_run(root, env, framework, size, mode, seed, sync=False))
    for (framework, mode), seed in itertools.product(DEFAULT_MODES, SEED_FACTOR):
        runs.append(write_run(root, "CartPole-v1", framework, "small", mode, seed, sync=False, tag="mac"))
    for env, (framework, mode) in itertools.product(ENV_FACTOR, MODES):
        runs.append(write_run(root, env, framework, "small", mode, 1, sync=True))
    for framework, mode in MODES:
        runs.append(write_run(root, "Acrobot-v1", framework, "large", mode, 1, sync=True))
    write_run(root, "CartPole-v1", "linen", "small", "jit", 7, sync=False, status="interrupted", iterations=5)
    write_run(root, "CartPole-v1", "nnx", "small", "cached_partial", 8, sync=False, events=False)
    corrupt = write_run(root, "CartPole-v1", "torch", "small", "compile", 9, sync=False)
    (corrupt["run_dir"] / "config.json").write_text("{not json")
    return runs


def write_timing(path: Path) -> Path:
    envs = {"CartPole-v1": {"obs_dim": 4, "num_actions": 2, "ms_per_step": 0.1, "ratio": 1.0},
            "Acrobot-v1": {"obs_dim": 6, "num_actions": 3, "ms_per_step": 0.3, "ratio": 3.0}}
    path.write_text(json.dumps({"device": "cpu", "versions": {"jax": "0.6.0"}, "num_envs": 4096, "envs": envs}))
    return path


def expected_speedups(runs: list[dict], metric: str, selects) -> dict:
    """(size, pair) -> (geomean, median, n) by plain math over every pair with the same env, size and tag."""
    expected = {}
    for size in plot_results.SIZES:
        for a, b in plot_results.PAIRS:
            ratios = [ra[metric] / rb[metric] for ra, rb in itertools.product(runs, runs)
                      if selects(ra) and selects(rb) and ra["framework"] == a and rb["framework"] == b
                      and ra["model_size"] == rb["model_size"] == size
                      and (ra["env"], ra["tag"]) == (rb["env"], rb["tag"])]
            if ratios:
                geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
                expected[(size, f"{a}->{b}")] = (geomean, statistics.median(ratios), len(ratios))
    return expected


def is_default(run) -> bool:
    return run["compile"] == plot_results.DEFAULT_COMPILE[run["framework"]]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The synthetic study, analysed once: (its runs, the output folder)."""
    root = tmp_path_factory.mktemp("study")
    runs = write_study(root / "runs")
    out = root / "out"
    plot_results.main([str(root / "runs"), "--out", str(out), "--env-timing", str(write_timing(root / "timing.json")),
                       "--readme-block", str(root / "block.md")])
    return runs, out


def test_speedups_match_hand_computed_values(study):
    runs, out = study
    speedups = pd.read_csv(out / "speedups.csv")
    assert list(speedups.columns) == ["metric", "size", "pair", "geomean", "median", "ci_low", "ci_high", "n_pairs"]
    selections = {"total": ("total_s", lambda r: not r["sync_timing"] and is_default(r)),
                  "steady": ("steady", lambda r: not r["sync_timing"] and is_default(r)),
                  "rollout": ("rollout8", lambda r: r["sync_timing"] and is_default(r)),
                  "update": ("update8", lambda r: r["sync_timing"] and is_default(r))}
    for metric, (key, selects) in selections.items():
        expected = expected_speedups(runs, key, selects)
        got = speedups[speedups["metric"] == metric].set_index(["size", "pair"])
        assert set(got.index) == set(expected), metric
        for (size, pair), (geomean, median, n) in expected.items():
            row = got.loc[(size, pair)]
            assert row["geomean"] == pytest.approx(geomean, rel=1e-5), (metric, size, pair)
            assert row["median"] == pytest.approx(median, rel=1e-5), (metric, size, pair)
            assert row["n_pairs"] == n
            assert row["ci_low"] <= row["geomean"] * (1 + 1e-9) and row["geomean"] <= row["ci_high"] * (1 + 1e-9)
    # The same numbers by hand: seeds 1.0/1.2 give ratios 1.25 x {1, 1.2, 1/1.2, 1} -> geomean and median 1.25
    steady = speedups.set_index(["metric", "size", "pair"])
    assert steady.loc[("steady", "large", "nnx->linen"), "geomean"] == pytest.approx(1.25, rel=1e-5)
    assert steady.loc[("steady", "large", "nnx->linen"), "median"] == pytest.approx(1.25, rel=1e-5)
    assert steady.loc[("steady", "large", "nnx->linen"), "n_pairs"] == 2 * 4  # 2 envs x 2 x 2 seeds
    assert steady.loc[("rollout", "large", "torch->linen"), "geomean"] == pytest.approx(5.0, rel=1e-5)


def test_summary_windows_and_experiments(study):
    runs, out = study
    summary = pd.read_csv(out / "summary.csv").set_index("run")
    assert len(summary) == len(runs)
    one = runs[0]  # exp1, sync off
    row = summary[(summary["env"] == one["env"]) & (summary["framework"] == one["framework"])
                  & (summary["model_size"] == one["model_size"]) & (summary["seed"] == one["seed"])
                  & (summary["tag"] == one["tag"]) & ~summary["sync_timing"]].iloc[0]
    assert row["iter0_s"] == pytest.approx(one["iteration"][0], rel=1e-6)
    assert row["iters1_7_s"] == pytest.approx(statistics.mean(one["iteration"][1:8]), rel=1e-6)
    assert row["iters8plus_s"] == pytest.approx(one["steady"], rel=1e-6)
    assert math.isnan(row["rollout8plus_s"])  # rollout/update timers are not exact without sync
    assert row["env_cost"] == 1.0 and row["experiments"] == "exp1 exp4"
    acrobot_small = summary[(summary["env"] == "Acrobot-v1") & (summary["model_size"] == "small") & summary["sync_timing"]]
    assert set(acrobot_small["experiments"]) == {"exp2 exp3"}  # a run can belong to two experiments
    assert (summary["experiments"] == "exp3").sum() == len(MODES)  # Acrobot large


def test_broken_runs_are_skipped_and_counted(study):
    runs, out = study
    report = (out / "REPORT.md").read_text()
    assert "3 skipped" in report
    assert "status 'interrupted'" in report and "no TensorBoard scalars" in report and "unreadable config.json" in report
    assert pd.read_csv(out / "runs.csv")["run"].nunique() == len(runs)


def test_every_figure_and_the_report(study):
    runs, out = study
    assert ALL_FIGURES <= {p.name for p in out.glob("*.png")}
    report = (out / "REPORT.md").read_text()
    for name in ALL_FIGURES:
        assert f"]({name})" in report
    assert "linux-host" in report and "mac-host" in report and "jax 0.6.0" in report
    block = (out.parent / "block.md").read_text()
    assert "nnx → linen" in block and block in report


def test_csv_round_trip(study, tmp_path):
    runs, out = study
    again = tmp_path / "again"
    # runs.csv alone, and runs.csv given twice (as from two machines with overlapping runs)
    plot_results.main(["--csv", str(out / "runs.csv"), "--csv", str(out / "runs.csv"), "--out", str(again),
                       "--env-timing", str(out.parent / "timing.json"), "--no-figures"])
    for table in ("summary.csv", "speedups.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(again / table), pd.read_csv(out / table))
    assert not list(again.glob("*.png"))


def test_figures_of_absent_experiments_are_skipped(tmp_path):
    for (framework, mode), seed in itertools.product(MODES, SEED_FACTOR):  # exp2 only
        write_run(tmp_path / "runs", "CartPole-v1", framework, "small", mode, seed, sync=True)
    (tmp_path / "timing.json").write_text('{"envs": {"CartPole-v1": {"ratio": "fast"}, "Acrobot-v1": 3}}')  # unusable
    plot_results.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--env-timing", str(tmp_path / "timing.json")])
    assert {p.name for p in (tmp_path / "out").glob("*.png")} == {"exp2_rollout_update.png"}
    report = (tmp_path / "out" / "REPORT.md").read_text()
    for name in ALL_FIGURES - {"exp2_rollout_update.png"}:
        assert f"{name} skipped" in report
    speedups = pd.read_csv(tmp_path / "out" / "speedups.csv")
    assert set(speedups["metric"]) == {"rollout", "update"}


def test_no_runs_gives_an_empty_report(tmp_path):
    (tmp_path / "runs").mkdir()
    plot_results.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
    assert "0 completed runs" in (tmp_path / "out" / "REPORT.md").read_text()
    assert not list((tmp_path / "out").glob("*.png"))


def test_experiment_folder_of_bench_sh_decides_membership(tmp_path):
    """bench.sh runs Acrobot-v1 small twice, into exp2/ and exp3/: each copy belongs to its own experiment."""
    for experiment in ("exp2", "exp3"):
        run_dir = write_run(tmp_path / experiment, "Acrobot-v1", "linen", "small", "jit", 1, sync=True)["run_dir"]
        (tmp_path / "runs" / experiment).mkdir(parents=True)
        run_dir.rename(tmp_path / "runs" / experiment / f"{run_dir.name}{experiment[-1]}")  # started at another time
    plot_results.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--no-figures"])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert sorted(summary["experiments"]) == ["exp2", "exp3"]
    assert sorted(summary["sweep"]) == ["exp2", "exp3"]


def test_update_readme_replaces_only_the_marked_block(study, tmp_path):
    runs, out = study
    readme = tmp_path / "README.md"
    start, end = plot_results.README_MARKERS
    readme.write_text(f"# title\n{start}\nold numbers\n{end}\ntail\n")
    plot_results.main(["--csv", str(out / "runs.csv"), "--out", str(tmp_path / "out"), "--no-figures",
                       "--update-readme", str(readme)])
    text = readme.read_text()
    block = plot_results.speedup_markdown(pd.read_csv(out / "speedups.csv"))
    assert text == f"# title\n{start}\n{block}{end}\ntail\n"
    assert "old numbers" not in text and "nnx → linen" in text

"""Resumed runs, the analysis and sweep side (issue 55 item 7): a run stopped after a --save-every
save and resumed in its folder is read by runlog as one completed run, each iteration once; a forged
summary.json resumed_at is refused; the analysis counts it for learning and keeps it out of every
timed result (and REPORT.md says so); bench.sh continues a stopped run with --resume, and passes
--save-every to its gymnax runs.

The slow tests share one real sweep (module fixture `sweep`): a learning experiment of one linen run
(CartPole-v1, 8 envs x 64 steps, 20 iterations, --save-every 2), started with bench.sh's planned
command, stopped by SIGINT after its first save, then continued by bench.sh itself."""

import json
import math
import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import pytest
from sweep_runs import bench, fake_run, other_study, planned

from core import events, runlog
from helpers import ROOT, STUDY, one_cell, only_run_dir, read_json
from sweep import resume as sweep_resume

SHORT = "resume9"
ITERATIONS, BATCH = 20, 8 * 64
LEARNING = f"""
[experiments.{SHORT}]
title = "learning, resumed: a configuration of {ITERATIONS} iterations"
reference = "CleanRL's PPO benchmark"
sizes = ["small"]
compile = "default"
sync = false
figures = ["learning"]

[experiments.{SHORT}.configs.ppo]
title = "{ITERATIONS} iterations of 8 envs x 64 steps"
args = ["--num-envs", "8", "--num-steps", "64", "--num-iterations", "{ITERATIONS}"]
returns = {{ "CartPole-v1" = [490.04, 6.12] }}
"""
SWEEP = [*one_cell(SHORT), "--save-every", "2", "--no-env-timing"]


class Sweep(NamedTuple):
    env: dict  # $BENCHBACK_STUDY: the study with SHORT
    log_dir: Path
    run_dir: Path  # the one run, stopped, then resumed by bench.sh
    stopped: dict  # its summary.json when it was stopped
    dry_run: list[str]  # bench.sh --dry-run's command of it, once stopped
    bench_out: str


def dry_run_commands(log_dir: Path, env: dict) -> list[list[str]]:
    proc = bench("--dry-run", "--log-dir", str(log_dir), *SWEEP, env=env)
    assert proc.returncode == 0, proc.stderr
    return [shlex.split(line) for line in proc.stdout.splitlines()[:-1]]


def stop_after_a_save(command: list[str], env: dict) -> None:
    """Runs command until its third iteration is logged (its first save, of --save-every 2, came
    before), then SIGINT: it stops at its next iteration boundary."""
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out = []
    for line in proc.stdout:
        out.append(line)
        if line.startswith(f"iter 3/{ITERATIONS}"):
            proc.send_signal(signal.SIGINT)
            break
    out.append(proc.communicate(timeout=300)[0])
    assert proc.returncode == 130, "".join(out)[-3000:]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Sweep:
    root = tmp_path_factory.mktemp("resumed")
    env = other_study(root, LEARNING)
    log_dir = root / "runs"
    (command,) = dry_run_commands(log_dir, env)
    assert command[-2:] == ["--save-every", "2"]
    stop_after_a_save(command, env)
    run_dir = only_run_dir(log_dir / SHORT)
    stopped = read_json(run_dir / "summary.json")
    (dry,) = dry_run_commands(log_dir, env)
    proc = bench("--log-dir", str(log_dir), *SWEEP, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return Sweep(env, log_dir, run_dir, stopped, dry, proc.stdout)


def copy_into_short_folder(run_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / SHORT / run_dir.name))


def with_summary(run_dir: Path, **changes) -> Path:
    summary = read_json(run_dir / "summary.json") | changes
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


# ---------------------------------------------------------------------------------------- the sweep
@pytest.mark.slow
def test_bench_sh_continues_a_stopped_run_in_its_folder_with_resume(sweep):
    """The stopped run (interrupted after a save) is planned with --resume FOLDER, and bench.sh
    completes it there: no second folder, summary.json completed with the iteration it went on
    from."""
    assert sweep.stopped["status"] == "interrupted" and sweep.stopped["iterations_completed"] >= 3
    assert (sweep.run_dir / "resume.safetensors").is_file()
    assert sweep.dry_run[-2:] == ["--resume", str(sweep.run_dir)]
    assert "1 completed, 0 failed, 0 skipped" in sweep.bench_out
    assert only_run_dir(sweep.log_dir / SHORT) == sweep.run_dir
    summary = read_json(sweep.run_dir / "summary.json")
    (after,) = summary["resumed_at"]
    assert summary["status"] == "completed" and summary["iterations_completed"] == ITERATIONS
    # the last save before the stop: an even iteration, at most the last one it finished
    assert after % 2 == 0 and 2 <= after <= sweep.stopped["iterations_completed"]
    # config.json is the first start's: its command has no --resume, and the sweep finds the run
    # done by it
    assert "--resume" not in read_json(sweep.run_dir / "config.json")["command"]
    proc = bench("--dry-run", "--log-dir", str(sweep.log_dir), *SWEEP, env=sweep.env)
    assert proc.stdout.startswith("# done: ") and "(1 already completed)" in proc.stdout


# ------------------------------------------------------------------------------------------- runlog
@pytest.mark.slow
def test_a_resumed_run_is_read_as_one_completed_run_with_every_iteration_once(sweep):
    run = runlog.read_completed_run(sweep.run_dir)
    assert runlog.is_completed(sweep.run_dir)
    assert list(run.scalars["step"]) == [BATCH * (i + 1) for i in range(ITERATIONS)]
    assert run.scalars["time/iteration"].notna().all() and len(run.segments) >= 2
    # after the save it went on from, each value is the resumed process's (its events file's), not
    # the stopped one's
    (after,) = run.summary["resumed_at"]
    last = sorted(sweep.run_dir.glob("events.out.tfevents.*"))[-1]
    assert run.events.name == last.name and run.events is run.segments[-1]
    long = events.read_events_file(last)[0]
    resumed = long[long["tag"] == "time/iteration"].set_index("step")["value"]
    assert list(resumed.index) == [BATCH * (i + 1) for i in range(after, ITERATIONS)]
    merged = run.scalars.set_index("step")["time/iteration"]
    assert np.array_equal(merged[resumed.index].to_numpy(), resumed.to_numpy())
    # the stopped process logged every iteration it finished, those after the save too (when the
    # signal came after it): the resume trims them from its events file, so each step is read once
    first = events.read_events_file(sorted(sweep.run_dir.glob("events.out.tfevents.*"))[0])[1]
    assert max(first.steps) == after * BATCH <= sweep.stopped["iterations_completed"] * BATCH
    # the resumed process's time/elapsed and total_s count on from the stopped run's total_s (they
    # restarted from 0: 42.0 -> 34.2 s, issue 84 item 7); process_total_s is its own
    elapsed = long[long["tag"] == "time/elapsed"]["value"]
    assert elapsed.min() > sweep.stopped["total_s"] > 0
    total, own = run.summary["total_s"], run.summary["process_total_s"]
    assert total == pytest.approx(sweep.stopped["total_s"] + own) and elapsed.max() <= total


@pytest.mark.slow
def test_a_resume_stopped_before_its_first_iteration_leaves_a_file_the_run_is_read_with(
    sweep, tmp_path
):
    """A resume attempt stopped before it logged anything leaves an events file without scalars: one
    more than resumed_at counts, which the run is read with."""
    from tensorboardX import SummaryWriter

    run_dir = copy_into_short_folder(sweep.run_dir, tmp_path)
    last = runlog.read_completed_run(run_dir).events
    with SummaryWriter(str(tmp_path / "attempt")) as writer:
        writer.flush()
    (empty,) = (tmp_path / "attempt").glob("events.out.tfevents.*")
    host = read_json(run_dir / "config.json")["hostname"]
    # made between the stop and the resume that completed it
    empty.rename(run_dir / f"events.out.tfevents.{int(last.first) - 1}.{host}")
    run = runlog.read_completed_run(run_dir)
    assert len(run.segments) == 3 and run.events.name == last.name
    assert list(run.scalars["step"]) == [BATCH * (i + 1) for i in range(ITERATIONS)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "forged",
    ["4", [4.0], [0], [-2], [], [True], [4, 2], [2, 2], [ITERATIONS], [ITERATIONS + 5], "wrong"],
)
def test_a_forged_resumed_at_is_refused(sweep, tmp_path, forged):
    """Not a list of increasing positive ints below the iterations, or not the iteration the last
    process went on from: a RunError naming resumed_at, and the analysis and the sweep's resume skip
    the run."""
    run_dir = copy_into_short_folder(sweep.run_dir, tmp_path)
    if forged == "wrong":  # well formed, but not where its last process went on from
        (after,) = read_json(run_dir / "summary.json")["resumed_at"]
        forged = [after - 1]
    with_summary(run_dir, resumed_at=forged)
    with pytest.raises(runlog.RunError, match="resumed_at"):
        runlog.read_completed_run(run_dir)
    assert not runlog.is_completed(run_dir)


# ----------------------------------------------------------------------------------------- analysis
@pytest.mark.slow
def test_the_analysis_counts_a_resumed_run_for_learning_and_not_for_time(
    sweep, tmp_path, monkeypatch
):
    """plot_results: the resumed run is a seed of its learning cell (its final return, its steps),
    with no time to a return; its summary row has no times, no speedup or pair takes it, and
    REPORT.md says it was resumed; the same from its runs.csv (--csv)."""
    import plot_results

    monkeypatch.setenv(*next(iter(sweep.env.items())))
    out = tmp_path / "out"
    plot_results.main([str(sweep.log_dir), "--out", str(out)])
    summary = pd.read_csv(out / "summary.csv")
    (row,) = summary.itertuples()
    final = read_json(sweep.run_dir / "summary.json")["final_return"]
    (after,) = read_json(sweep.run_dir / "summary.json")["resumed_at"]
    assert str(row.resumed_at) == str(after) and row.final_return == pytest.approx(final)
    assert all(
        math.isnan(getattr(row, column)) for column in ("total_s", "setup_s", "iters8plus_s")
    )
    learning = pd.read_csv(out / "learning.csv")
    (cell,) = learning.itertuples()
    assert (cell.experiment, cell.framework, cell.n_runs, cell.n_timed) == (SHORT, "linen", 1, 0)
    assert cell.final_mean == pytest.approx(final) and math.isnan(cell.median_s_to_reference)
    assert pd.read_csv(out / "speedups.csv").empty
    runs = pd.read_csv(out / "runs.csv")
    assert list(runs["iteration"]) == list(range(ITERATIONS))
    line = (
        "1 run was resumed after a stop (summary.json resumed_at): in the learning results, "
        "not in the timings"
    )
    assert line in (out / "REPORT.md").read_text()
    assert (out / f"{SHORT}_learning.png").exists()
    again = tmp_path / "again"
    plot_results.main(["--csv", str(out / "runs.csv"), "--out", str(again), "--no-figures"])
    assert line in (again / "REPORT.md").read_text()
    assert pd.read_csv(again / "learning.csv")["n_timed"].tolist() == [0]


def test_a_resumed_run_is_kept_out_of_the_pairs_of_runs(tmp_path):
    """The same two runs of exp1 (linen, nnx) give a total-time pair; once one of them was resumed,
    none, and its summary row has no times."""
    from analysis.loading import load_runs, read_env_timing
    from analysis.results import analyse
    from analysis.speedups import metric_columns

    log_dir = tmp_path / "runs"
    for framework in ("linen", "nnx"):
        script = STUDY.frameworks[framework]
        command = [script.script, "--compile", script.default_compile, "--no-sync-timing"]
        fake_run(log_dir, "exp1", "completed", command, framework)
    runs, skipped = load_runs([str(log_dir)], [], STUDY)
    assert not skipped and runs["resumed_at"].fillna("").eq("").all()
    timing = read_env_timing(None)[0]
    assert len(analyse(runs, timing, STUDY).pairs["total"]) == 1  # the pair of linen and nnx
    resumed = runs.assign(resumed_at=np.where(runs["framework"] == "nnx", "1", ""))
    results = analyse(resumed, timing, STUDY)
    assert results.pairs["total"].empty and results.speedups.empty
    nnx = results.summary.set_index("framework").loc["nnx"]
    times = ["setup_s", "import_s", *metric_columns(STUDY).values()]
    assert all(math.isnan(nnx[column]) for column in times)


# ---------------------------------------------------------------------------------------- the sweep
def stopped_run(log_dir: Path, command: list[str], name: str, saved: int) -> Path:
    """A run folder stopped after `saved` iterations, with the resume file of a save
    (core/resuming.py's own writer); saved 0: none."""
    from core import resuming

    run_dir = fake_run(log_dir, "exp2", "interrupted", command, name)
    if saved:
        returns = tuple((float(i),) for i in range(saved))  # one agent's
        state = resuming.Resume(saved, returns, (), {"framework": "linen"})
        resuming.save_resume(run_dir, [np.zeros(3, np.float32)], state)
    return run_dir


def test_the_sweep_continues_a_stopped_run_from_its_furthest_save(tmp_path):
    """Of the stopped folders of a run, the one saved furthest on is continued (--resume FOLDER
    added to its command); a run without a resume file, with a broken one, or completed, starts
    afresh or is done."""
    log_dir = tmp_path / "runs"
    jit, none = planned(log_dir)
    stopped_run(log_dir, jit, "a", 2)
    furthest = stopped_run(log_dir, jit, "b", 4)
    stopped_run(log_dir, none, "c", 0)  # stopped before its first save
    broken = stopped_run(log_dir, none, "d", 6)
    (broken / "resume.safetensors").write_bytes(b"not a resume file")
    assert planned(log_dir) == [[*jit, "--resume", str(furthest)], none]
    fake_run(log_dir, "exp2", "completed", jit, "e")  # completed since: done, not resumed
    proc = bench("--dry-run", "--log-dir", str(log_dir), *one_cell("exp2"))
    assert proc.stdout.splitlines()[0].startswith("# done: ") and "--resume" not in proc.stdout


def test_the_resume_flag_does_not_make_another_run():
    """bench.sh's cell lock checks the planned commands again, --resume FOLDER among them: a run is
    known by its command without it (config.json's, the first start's, has none)."""
    command = ["ppo_linen.py", "--env", "CartPole-v1", "--log-dir", "runs/exp2", "--seed", "1"]
    key = sweep_resume.run_key(command)
    assert sweep_resume.run_key([*command, "--resume", "runs/exp2/x"]) == key
    assert sweep_resume.run_key([*command, "--resume=runs/exp2/x"]) == key
    assert sweep_resume.run_key([*command, "--seed", "2"]) != key


def test_save_every_reaches_the_gymnax_runs_only(tmp_path):
    """bench.sh --save-every N: every gymnax run's command gives --save-every N, no envpool run's
    (the scripts save a run's state on gymnax only); refused after -- beside it, and when not a
    count."""
    envs = ["--envs", "CartPole-v1,CartPole-v1@envpool", "--sizes", "small", "--seeds", "1"]
    args = ["--dry-run", "--log-dir", str(tmp_path / "runs"), "--experiments", "exp7", *envs]
    proc = bench(*args, "--frameworks", "linen", "--save-every", "3")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()[:-1]
    gymnax = [line for line in lines if "--env-backend envpool" not in line]
    assert gymnax and all(shlex.split(line)[-2:] == ["--save-every", "3"] for line in gymnax)
    assert len(gymnax) < len(lines) and not any(
        "--save-every" in line for line in lines if line not in gymnax
    )
    refused = bench(*args, "--save-every", "3", "--", "--save-every", "4")
    assert refused.returncode == 2 and "--save-every" in refused.stderr
    bad = bench(*args, "--save-every", "-1")
    assert bad.returncode == 2 and "--save-every must be an integer from 0" in bad.stderr
    assert "--save-every N" in bench("--help").stdout

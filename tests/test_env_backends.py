"""The study's env backends (gymnax, envpool) in the sweep, bench.sh --cpus, sweep/env_timing.py and
the analysis.

An env on envpool is named "{id}@envpool" (study.env_label) in the sweep's cells and log names,
bench.sh --envs, the env timing and the analysis' env column, so that it is never taken for the
gymnax env of the same id: exp7 runs CartPole-v1, Acrobot-v1 and MountainCar-v0 on both, exp8 two
MuJoCo envs on envpool alone."""

import json
import socket
import subprocess
import sys
from itertools import product
from pathlib import Path

import pandas as pd
import pytest
from analysis_runs import write_run
from sweep_runs import (
    FAKE_SCRIPT,
    bench,
    done_lines,
    dry_run,
    env_of,
    fake_run,
    framework_of,
    one_line_refusal,
    option,
    plan_rows,
    planned,
    timing_file,
)

import plot_results
from core import study
from helpers import ENV_TIMING_MODULE, ROOT, STUDY, SWEEP_MODULE, read_json
from sweep import env_timing_check as sweep_env_timing
from sweep import options as sweep_options

EXP7, EXP8 = STUDY.experiments["exp7"], STUDY.experiments["exp8"]


def synced(line: str) -> bool:
    return not line.endswith("--no-sync-timing")


# --------------------------------------------------------------------------------------- the sweep
def test_exp7_dry_run_lists_every_run_with_its_backend(tmp_path):
    """Each env on gymnax, then on envpool (a cell each): every size x framework, sync off then on;
    an envpool run says --env-backend envpool, a gymnax run names no backend (its command is what it
    was before the backends)."""
    lines = dry_run(tmp_path, "--experiments", "exp7", "--seeds", "1")
    frameworks = {name: fw.default_compile for name, fw in STUDY.frameworks.items()}
    expected = set(product(EXP7.envs, EXP7.sizes, frameworks.items(), (False, True)))
    got = {
        (
            env_of(line),
            option(line, "--model-size"),
            (framework_of(line), option(line, "--compile")),
            synced(line),
        )
        for line in lines
    }
    assert got == expected and len(lines) == len(expected)
    for line in lines:
        on_envpool = env_of(line).endswith("@envpool")
        assert (
            line.count(" --env-backend ") == on_envpool
            and (" --env-backend envpool" in line) == on_envpool
        )
        assert " --env-threads " not in line  # without --cpus: the scripts' own
    # env by env, gymnax first
    assert list(dict.fromkeys(env_of(line) for line in lines)) == list(EXP7.envs)
    cells = list(dict.fromkeys((env_of(line), option(line, "--model-size")) for line in lines))
    for cell in cells:  # each cell: every framework sync off, then every one sync on
        syncs = [
            synced(line) for line in lines if (env_of(line), option(line, "--model-size")) == cell
        ]
        assert syncs == [False] * len(frameworks) + [True] * len(frameworks)
    assert {study.split_label(env)[0] for env, _ in cells} == {
        "CartPole-v1",
        "Acrobot-v1",
        "MountainCar-v0",
    }


def test_exp8_runs_mujoco_on_envpool_only_and_the_whole_study_lists_both(tmp_path):
    lines = dry_run(tmp_path, "--experiments", "exp8", "--seeds", "1")
    assert {option(line, "--env") for line in lines} == {"HalfCheetah-v4", "Hopper-v4"}
    assert all(option(line, "--env-backend") == "envpool" for line in lines)
    assert len(lines) == len(EXP8.envs) * len(EXP8.sizes) * len(STUDY.frameworks) * 2
    every = dry_run(tmp_path, "--seeds", "1")
    envpool = {option(line, "--exp-name") for line in every if " --env-backend envpool" in line}
    # and the learning experiments' MuJoCo (exp9, exp13 at 10 agents), the agents per process on
    # MuJoCo (exp14); no other runs on envpool
    assert envpool == {"exp7", "exp8", "exp9", "exp13", "exp14"}


def test_the_plan_names_the_backend_in_descriptions_log_stems_and_cells(tmp_path):
    cmd = [
        sys.executable,
        *SWEEP_MODULE,
        "plan",
        "--experiments",
        "exp7",
        "--frameworks",
        "linen",
    ]
    cmd += [
        "--sizes",
        "small",
        "--seeds",
        "1",
        "--envs",
        "CartPole-v1,CartPole-v1@envpool",
        "--log-dir",
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = plan_rows(proc.stdout)
    assert [row[2] for row in rows] == [
        "logs/exp7/CartPole-v1__linen__small__jit__nosync__1",
        "logs/exp7/CartPole-v1__linen__small__jit__sync__1",
        "logs/exp7/CartPole-v1@envpool__linen__small__jit__nosync__1",
        "logs/exp7/CartPole-v1@envpool__linen__small__jit__sync__1",
    ]
    assert rows[2][1] == "exp7 CartPole-v1@envpool linen small jit sync off seed 1"
    assert proc.stdout.split("\0")[2] == "2"  # two cells: a shard may hold one without the other


def test_resume_never_takes_an_envpool_run_for_the_gymnax_one(tmp_path):
    log_dir = tmp_path / "runs"
    gymnax_off, _ = planned(log_dir, "exp7", "CartPole-v1")
    envpool_off, _ = planned(log_dir, "exp7", "CartPole-v1@envpool")
    assert envpool_off == [*gymnax_off[:-1], "--env-backend", "envpool", "--no-sync-timing"]
    fake_run(log_dir, "exp7", "completed", envpool_off, "on-envpool")
    (done,) = done_lines(log_dir, exp="exp7", env="CartPole-v1@envpool")
    assert "--env-backend envpool" in done and done.endswith("--no-sync-timing")
    assert done_lines(log_dir, exp="exp7", env="CartPole-v1") == []  # the gymnax run is still to do
    fake_run(log_dir, "exp7", "completed", gymnax_off, "on-gymnax")
    assert len(done_lines(log_dir, exp="exp7", env="CartPole-v1")) == 1


@pytest.mark.parametrize(
    "env_id,words",
    [
        ("Nope-v0@envpool", ["'Nope-v0@envpool' is not an envpool env here"]),
        ("Humanoid-v4", ["'Humanoid-v4' is unknown to gymnax (on envpool: Humanoid-v4@envpool)"]),
        ("CartPole-v1@gymnax", ["'CartPole-v1@gymnax' is a gymnax env, named 'CartPole-v1' alone"]),
        ("CartPole-v1@brax", ["names backend 'brax'; backends: gymnax, envpool"]),
    ],
)
def test_an_env_no_backend_can_train_is_refused_in_one_line(tmp_path, env_id, words):
    proc = bench(
        "--dry-run", "--log-dir", str(tmp_path / "runs"), "--envs", f"CartPole-v1,{env_id}"
    )
    one_line_refusal(
        proc, *words, "ID@envpool (ID one of CartPole-v1", "Walker2d-v4", "Catch-bsuite"
    )
    assert proc.stdout == ""


def test_why_untrainable_reads_env_labels():
    assert [env for env in STUDY.every_env if sweep_options.why_untrainable(env)] == []
    assert (
        sweep_options.why_untrainable("Humanoid-v4@envpool") is None
        and sweep_options.why_untrainable("Catch-bsuite") is None
    )
    assert sweep_options.why_untrainable("Catch-bsuite@envpool") == "is not an envpool env here"


def test_an_envpool_env_outside_the_study_joins_the_envpool_experiments(tmp_path):
    """Like a gymnax env outside the study joins the experiments of envs "all", an envpool one joins
    those on envpool alone (exp8, and exp14's agents per process), as an env of its own."""
    lines = dry_run(
        tmp_path,
        "--seeds",
        "1",
        "--frameworks",
        "linen",
        "--envs",
        "Humanoid-v4@envpool,CartPole-v1",
    )
    outside = [line for line in lines if option(line, "--env") == "Humanoid-v4"]
    exp14 = STUDY.experiments["exp14"]
    in_exp8 = [line for line in outside if option(line, "--exp-name") == "exp8"]
    assert {option(line, "--exp-name") for line in outside} == {"exp8", "exp14"}
    assert len(in_exp8) == len(EXP8.sizes) * 2
    assert len(outside) - len(in_exp8) == len(exp14.sizes) * len(exp14.agents)
    assert all(option(line, "--env-backend") == "envpool" for line in outside)
    on_gymnax = {option(line, "--exp-name") for line in lines if env_of(line) == "CartPole-v1"}
    assert on_gymnax == {"exp1", "exp2", "exp7", "exp9", "exp11", "exp12", "exp13"}


def test_the_backend_after_dashdash_is_refused(tmp_path):
    proc = bench(
        "--dry-run",
        "--log-dir",
        str(tmp_path / "runs"),
        "--experiments",
        "exp3",
        "--",
        "--env-backend=envpool",
    )
    one_line_refusal(proc, "'--env-backend=envpool' after --", "--envs ID@envpool")


# --------------------------------------------------------------------------------- bench.sh --cpus
ONE_ENV_EACH = [
    "--experiments",
    "exp1,exp7",
    "--frameworks",
    "linen",
    "--sizes",
    "small",
    "--seeds",
    "1",
]
ONE_ENV_EACH += ["--envs", "CartPole-v1,CartPole-v1@envpool"]


def test_cpus_gives_every_envpool_run_as_many_env_threads(tmp_path):
    """--cpus N: an envpool run gets --env-threads N; a gymnax run keeps its command (it has no use
    for the threads, and its runs of before stay done); without --cpus the scripts' default holds.
    """
    lines = dry_run(tmp_path, *ONE_ENV_EACH, "--cpus", "1")
    # exp7: CartPole-v1 on both backends, sync off and on; exp1: on gymnax
    assert len(lines) == 2 + 2 + 1
    for line in lines:
        assert (" --env-threads 1" in line) == env_of(line).endswith("@envpool"), line
    assert not any(" --env-threads " in line for line in dry_run(tmp_path, *ONE_ENV_EACH))


def test_env_threads_after_dashdash_are_refused_only_with_cpus(tmp_path):
    args = ("--dry-run", "--log-dir", str(tmp_path / "runs"), *ONE_ENV_EACH)
    one_line_refusal(
        bench(*args, "--cpus", "1", "--", "--env-threads", "2"),
        "'--env-threads' after --",
        "--cpus",
    )
    alone = bench(*args, "--", "--env-threads", "2")
    assert alone.returncode == 0, alone.stderr
    assert all(line.endswith("--env-threads 2") for line in alone.stdout.splitlines()[:-1])


def test_the_slurm_tasks_plan_the_same_env_threads(tmp_path):
    """--slurm --cpus N: every task's bench.sh gets --cpus N (so its envpool runs --env-threads
    N)."""
    proc = bench(
        "--slurm", "--dry-run", "--cpus", "1", "--log-dir", str(tmp_path / "runs"), *ONE_ENV_EACH
    )
    assert proc.returncode == 0, proc.stderr
    assert "--cpus 1" in proc.stdout and "5 runs" in proc.stdout


# A stand-in interpreter: notes sweep/env_timing.py's arguments (and times nothing), real Python for
# everything else.
NOTING_PYTHON = """#!/usr/bin/env bash
case ${1:-} in
  -m) if [[ $2 == sweep.env_timing ]]; then echo "$*" >> "$TIMING_MARKS"
      else exec "$REAL_PYTHON" "$@"; fi ;;
  *) exec "$REAL_PYTHON" "$@" ;;
esac
"""


def test_a_sweep_with_cpus_gives_its_envpool_runs_and_the_env_timing_the_threads(tmp_path):
    """A real sweep (a stand-in framework, a stand-in env timing): the env timing gets --env-threads
    N for the sweep's env labels, the envpool runs --env-threads N, the gymnax runs none."""
    script = tmp_path / "ppo_fake.py"
    script.write_text(FAKE_SCRIPT.format(root=str(ROOT)))
    study_file = tmp_path / "study.toml"
    fake = f'\n[frameworks.fake]\nscript = "{script.name}"\ncompile = ["fast"]\ncolor = "#000"\n'
    study_file.write_text((ROOT / "study.toml").read_text() + fake)
    python = tmp_path / "python"
    python.write_text(NOTING_PYTHON)
    python.chmod(0o755)
    env = {
        study.PATH_VARIABLE: str(study_file),
        "FAKE_MARKS": str(tmp_path / "marks"),
        "TIMING_MARKS": str(tmp_path / "timing_marks"),
        "REAL_PYTHON": sys.executable,
    }
    args = ["--experiments", "exp7", "--frameworks", "fake", "--sizes", "small", "--seeds", "1"]
    args += ["--envs", "CartPole-v1,CartPole-v1@envpool", "--cpus", "1"]
    proc = bench(
        "--log-dir", str(tmp_path / "runs"), *args, env=env, python=str(python), timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "4 completed, 0 failed, 0 skipped"
    (timing,) = (tmp_path / "timing_marks").read_text().splitlines()
    assert "--envs=CartPole-v1,CartPole-v1@envpool " in timing and timing.endswith(
        "--env-threads=1"
    )
    runs = [json.loads(line)["argv"] for line in (tmp_path / "marks").read_text().splitlines()]
    assert len(runs) == 4
    for argv in runs:
        on_envpool = "--env-backend" in argv
        assert (
            (argv[argv.index("--env-threads") + 1] == "1")
            if on_envpool
            else "--env-threads" not in argv
        )
    assert sum("--env-backend" in argv for argv in runs) == 2


# -------------------------------------------------------------------------------------- env timing
def test_env_timing_is_redone_for_other_envpool_threads(tmp_path):
    import jax

    device, host = jax.devices()[0].device_kind, socket.gethostname()
    envs = ["CartPole-v1", "CartPole-v1@envpool"]
    path = timing_file(tmp_path / "env_timing.json", host, device, envs)
    reason, _ = sweep_env_timing.env_timing_reason(
        path, ["CartPole-v1@envpool", "Hopper-v4@envpool"]
    )
    assert "lacks Hopper-v4@envpool" in reason
    # no env_threads in the file: the scripts' default (0, envpool's)
    default = sweep_env_timing.DEFAULT_ENV_THREADS
    assert sweep_env_timing.env_timing_reason(path, envs) is None
    assert sweep_env_timing.env_timing_reason(path, envs, default) is None
    reason, again = sweep_env_timing.env_timing_reason(path, envs, 2)
    assert f"with {default} threads, this sweep's runs get 2" in reason and again == envs
    # no envpool env: its threads do not matter
    assert sweep_env_timing.env_timing_reason(path, ["CartPole-v1"], 2) is None
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "env_threads": 2}))
    assert sweep_env_timing.env_timing_reason(path, envs, 2) is None


def test_env_timing_times_envpool_envs_beside_their_gymnax_twins(tmp_path):
    """A real tiny timing: CartPole-v1 on gymnax and on envpool (its adapter's batched step in the
    same timing loop), and Hopper-v4 on envpool (Box actions), each under its label."""
    out = tmp_path / "timing.json"
    cmd = [
        sys.executable,
        *ENV_TIMING_MODULE,
        "--envs",
        "CartPole-v1,CartPole-v1@envpool,Hopper-v4@envpool",
    ]
    cmd += [
        "--num-envs",
        "64",
        "--envpool-num-envs",
        "8",
        "--env-threads",
        "1",
        "--warmup-steps",
        "2",
    ]
    cmd += ["--timed-steps", "3", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = read_json(out)
    assert (
        data["envpool_num_envs"] == 8 and data["env_threads"] == 1 and "envpool" in data["versions"]
    )
    envs = data["envs"]
    assert list(envs) == ["CartPole-v1", "CartPole-v1@envpool", "Hopper-v4@envpool"]
    gymnax, envpool, hopper = envs.values()
    assert gymnax["num_envs"] == 64 and "env_threads" not in gymnax
    assert envpool["num_envs"] == hopper["num_envs"] == 8 and envpool["env_threads"] == 1
    assert (envpool["obs_dim"], envpool["num_actions"], envpool["action_space"]) == (
        4,
        2,
        "Discrete",
    )
    assert (hopper["obs_dim"], hopper["num_actions"], hopper["action_space"]) == (11, 3, "Box")
    for r in envs.values():
        assert (
            r["us_per_env_step"] == pytest.approx(r["ms_per_step"] * 1e3 / r["num_envs"])
            and r["ratio"] >= 1.0
        )
    assert min(r["ratio"] for r in envs.values()) == 1.0
    assert "CartPole-v1@envpool" in proc.stdout  # the table


def test_env_timing_refuses_an_env_envpool_lacks():
    cmd = [
        sys.executable,
        *ENV_TIMING_MODULE,
        "--envs",
        "CartPole-v1@envpool,Nope-v0@envpool",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "'Nope-v0@envpool'" in proc.stderr and "Hopper-v4@envpool" in proc.stderr


# ---------------------------------------------------------------------------------------- analysis
def summary_and_speedups(tmp_path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    out = tmp_path / "out"
    plot_results.main([str(tmp_path / "runs"), "--out", str(out), "--no-figures"])
    return pd.read_csv(out / "summary.csv"), pd.read_csv(out / "speedups.csv")


def test_the_backends_of_one_env_are_never_merged(tmp_path):
    """Runs of CartPole-v1 on gymnax (one of before the backends, without env_backend, one with it)
    and on envpool: two envs in every table, no pair crosses backends, and exp7 has a cell per
    backend."""
    for framework, backend in product(("linen", "nnx"), (None, "gymnax", "envpool")):
        seed = 2 if backend == "gymnax" else 1
        write_run(
            tmp_path / "runs",
            "CartPole-v1",
            framework,
            "small",
            STUDY.default_compile(framework),
            seed,
            sync=False,
            backend=backend,
        )
    summary, speedups = summary_and_speedups(tmp_path)
    assert sorted(summary["env"]) == ["CartPole-v1"] * 4 + ["CartPole-v1@envpool"] * 2
    # not exp1
    assert set(summary.loc[summary["env"] == "CartPole-v1@envpool", "experiments"]) == {"exp7"}
    runs = pd.read_csv(tmp_path / "out" / "runs.csv")
    assert set(runs["env"]) == {"CartPole-v1", "CartPole-v1@envpool"}
    cells = speedups[(speedups["metric"] == "total") & (speedups["pair"] == "nnx->linen")]
    cells = cells.set_index(["experiment", "backend"])
    assert (
        cells.loc[("exp7", "gymnax"), "n_clusters"] == 1
        and cells.loc[("exp7", "gymnax"), "n_pairs"] == 4
    )
    assert (
        cells.loc[("exp7", "envpool"), "n_clusters"] == 1
        and cells.loc[("exp7", "envpool"), "n_pairs"] == 1
    )
    assert (
        cells.loc[("exp1", "gymnax"), "n_clusters"] == 1
        and cells.loc[("exp1", "gymnax"), "n_pairs"] == 4
    )
    assert ("exp1", "envpool") not in cells.index


def test_no_pair_crosses_backends(tmp_path):
    """linen on gymnax and nnx on envpool only: nothing to compare, both runs left out as
    unpaired."""
    write_run(tmp_path / "runs", "CartPole-v1", "linen", "small", "jit", 1, sync=False)
    write_run(
        tmp_path / "runs",
        "CartPole-v1",
        "nnx",
        "small",
        "cached_partial",
        1,
        sync=False,
        backend="envpool",
    )
    summary, speedups = summary_and_speedups(tmp_path)
    assert speedups.empty and len(summary) == 2
    left_out = (
        (tmp_path / "out" / "REPORT.md").read_text().split("### Left out of the speedup tables")[1]
    )
    assert "CartPole-v1@envpool" in left_out and "unpaired" in left_out


def test_learning_curves_draw_each_backend_apart(tmp_path):
    from analysis import learning_curves

    for backend in (None, "envpool"):
        write_run(
            tmp_path / "runs",
            "CartPole-v1",
            "linen",
            "small",
            "jit",
            1,
            sync=False,
            backend=backend,
        )
    runs = learning_curves.completed_runs([str(tmp_path / "runs")])
    assert set(learning_curves.curves(runs)) == {"CartPole-v1", "CartPole-v1@envpool"}
    assert "| CartPole-v1@envpool | linen |" in learning_curves.final_returns(runs)

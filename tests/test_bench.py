"""Tests of bench.sh (the experiment matrix: counts, options, shards, resume, failures) and env_timing.py.

The mini sweeps use the frameworks whose script exists, so they grow as ppo_*.py files are added.
"""

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from helpers import ROOT, read_json

FRAMEWORKS = [name for name in ("linen", "nnx", "torch") if (ROOT / f"ppo_{name}.py").exists()]
COUNTS = {"exp1": 108, "exp2": 96, "exp3": 24}  # per seed, DESIGN.md
TINY = ["--", "--num-envs", "4", "--num-steps", "16"]
MINI_ENVS = "CartPole-v1,MemoryChain-bsuite"


def bench(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    cmd = ["bash", str(ROOT / "bench.sh"), "--python", sys.executable, *args]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def dry_run(tmp_path: Path, *args: str) -> list[str]:
    """The command lines of a dry run (into an empty log dir); checks the count line."""
    proc = bench("--dry-run", "--log-dir", str(tmp_path / "runs"), *args)
    assert proc.returncode == 0, proc.stderr
    *lines, count_line = proc.stdout.splitlines()
    assert re.match(rf"dry run: {len(lines)} runs \(0 already completed\)", count_line), count_line
    return lines


def option(line: str, name: str) -> str:
    return line.split(f" {name} ")[1].split()[0]


def last_line(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout.strip().splitlines()[-1]


# ------------------------------------------------------------------------------------------ matrix
@pytest.mark.parametrize("exp,count", COUNTS.items())
def test_dry_run_counts(tmp_path, exp, count):
    assert len(dry_run(tmp_path, "--experiments", exp, "--seeds", "1")) == count
    assert len(dry_run(tmp_path, "--experiments", exp)) == 3 * count  # seeds 1..3 by default


def test_dry_run_all_experiments(tmp_path):
    lines = dry_run(tmp_path, "--seeds", "1")
    assert len(lines) == sum(COUNTS.values())
    assert len(set(lines)) == len(lines)  # exp2 and exp3 overlap in settings but not in log dir


def test_dry_run_matrix_contents(tmp_path):
    lines = dry_run(tmp_path, "--seeds", "1")
    by_exp = {exp: [line for line in lines if option(line, "--log-dir") == f"{tmp_path}/runs/{exp}"] for exp in COUNTS}
    assert {exp: len(v) for exp, v in by_exp.items()} == COUNTS
    assert all("--no-sync-timing" in line for line in by_exp["exp1"])
    assert not any("sync-timing" in line for line in by_exp["exp2"] + by_exp["exp3"])
    modes = lambda ls: {(re.search(r"ppo_(\w+)\.py", l)[1], option(l, "--compile")) for l in ls}
    assert modes(by_exp["exp1"]) == {("linen", "jit"), ("nnx", "cached_partial"), ("torch", "compile")}
    assert len(modes(by_exp["exp2"])) == len(modes(by_exp["exp3"])) == 8
    assert {option(l, "--model-size") for l in by_exp["exp2"]} == {"small"}
    assert {option(l, "--env") for l in by_exp["exp3"]} == {"Acrobot-v1"}
    envs = list(dict.fromkeys(option(l, "--env") for l in by_exp["exp1"]))
    assert envs == list(study_envs())


def study_envs() -> tuple[str, ...]:
    """STUDY_ENVS of env_timing.py, read without importing jax."""
    tree = ast.parse((ROOT / "env_timing.py").read_text())
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "STUDY_ENVS")
    return ast.literal_eval(node.value)


@pytest.mark.parametrize(
    "args,count",
    [
        (["--frameworks", "linen", "--envs", "CartPole-v1,Acrobot-v1", "--sizes", "small,large", "--seeds", "2"],
         8 + 8 + 8),  # exp1 2x2x1, exp2 2x1x2, exp3 1x2x2; x2 seeds
        (["--experiments", "exp3", "--envs", "CartPole-v1"], 0),  # exp3 is Acrobot-v1 only
        (["--experiments", "exp2", "--sizes", "medium,large"], 0),  # exp2 is small only
        (["--experiments", "exp1,exp2", "--frameworks", "nnx,torch", "--sizes", "medium", "--seeds", "1"], 24),
        (["--experiments", "exp2,exp3", "--frameworks", "torch", "--seeds", "1"], 36 + 9),
    ],
)
def test_dry_run_narrowed(tmp_path, args, count):
    assert len(dry_run(tmp_path, *args)) == count


def test_dry_run_passes_options(tmp_path):
    lines = dry_run(tmp_path, "--experiments", "exp1", "--seeds", "2", "--iterations", "7", "--tag", "mac",
                    "--envs", "CartPole-v1", "--frameworks", "linen", "--sizes", "small", *TINY)
    assert len(lines) == 2
    for seed, line in enumerate(lines, 1):
        assert line.startswith(f"{sys.executable} {ROOT}/ppo_linen.py --env CartPole-v1 --model-size small ")
        assert f"--seed {seed} " in line and "--num-iterations 7 " in line and "--tag mac " in line
        assert line.endswith("--no-sync-timing --num-envs 4 --num-steps 16")


@pytest.mark.parametrize("shards", [2, 3, 5])
def test_shards_are_disjoint_and_cover_the_matrix(tmp_path, shards):
    whole = dry_run(tmp_path, "--seeds", "1", "--experiments", "exp2,exp3")
    parts = [dry_run(tmp_path, "--seeds", "1", "--experiments", "exp2,exp3", "--shard", f"{k}/{shards}")
             for k in range(shards)]
    assert sum(len(part) for part in parts) == len(whole)
    assert sorted(line for part in parts for line in part) == sorted(whole)
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


@pytest.mark.parametrize(
    "args,bad",
    [
        (["--experiments", "exp1,exp9"], "exp9"),
        (["--frameworks", "jax"], "jax"),
        (["--sizes", "huge"], "huge"),
        (["--seeds", "0"], "0"),
        (["--iterations", "ten"], "ten"),
        (["--shard", "3/3"], "3/3"),
        (["--timeout", "soon"], "soon"),
        (["--bogus"], "--bogus"),
        (["--seeds"], "--seeds"),
    ],
)
def test_bad_options_exit_2_with_one_line(tmp_path, args, bad):
    proc = bench("--dry-run", "--log-dir", str(tmp_path), *args)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and bad in proc.stderr
    assert not (tmp_path / "exp1").exists()


def test_help():
    proc = bench("--help")
    assert proc.returncode == 0 and "--shard K/N" in proc.stdout and "exp4" in proc.stdout


# ------------------------------------------------------------------------------------------ resume
def fake_run(log_dir: Path, exp: str, status: str, **config) -> Path:
    """A linen run folder like the script writes it, without running it."""
    import ppo_linen

    args = asdict(ppo_linen.Args(**config))
    name = f"{args['env']}__linen__{args['model_size']}__{args['compile']}__{args['seed']}__1700000000"
    run_dir = log_dir / exp / name
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({**args, "framework": "linen", "device": "cpu"}))
    (run_dir / "summary.json").write_text(json.dumps({"status": status}))
    return run_dir


def done_lines(log_dir: Path, *args: str, exp: str = "exp2", env: str = "CartPole-v1") -> list[str]:
    proc = bench("--dry-run", "--log-dir", str(log_dir), "--experiments", exp, "--frameworks", "linen",
                 "--envs", env, "--sizes", "small", "--seeds", "1", *args)
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if line.startswith("# done: ")]


def test_resume_needs_a_completed_run_with_the_same_settings(tmp_path):
    log_dir = tmp_path / "runs"
    fake_run(log_dir, "exp2", "completed", num_iterations=5, num_envs=4)
    fake_run(log_dir, "exp2", "failed", compile="none", num_iterations=5, num_envs=4)
    fake_run(log_dir, "exp3", "completed", env="Acrobot-v1", num_iterations=5, num_envs=4)
    matching = done_lines(log_dir, "--iterations", "5", "--", "--num-envs", "4")
    assert len(matching) == 1 and "--compile jit" in matching[0]  # the failed run is not done
    assert done_lines(log_dir, "--iterations", "5", "--", "--num-envs=4", "--anneal-lr", "--learning-rate", "2.5e-4")
    assert not done_lines(log_dir, "--iterations", "6", "--", "--num-envs", "4")  # other num_iterations
    assert not done_lines(log_dir, "--iterations", "5")  # num_envs: the default 32, not 4
    assert not done_lines(log_dir, "--iterations", "5", "--tag", "mac", "--", "--num-envs", "4")
    assert not done_lines(log_dir, "--iterations", "5", "--", "--num-envs", "4", "--no-anneal-lr")
    same = ("--iterations", "5", "--", "--num-envs", "4")
    assert len(done_lines(log_dir, *same, exp="exp3", env="Acrobot-v1")) == 1
    assert not done_lines(log_dir, *same, exp="exp2", env="Acrobot-v1")  # exp2 and exp3 runs are told apart


# -------------------------------------------------------------------------------------------- sweeps
def mini_sweep(log_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return bench("--log-dir", str(log_dir), "--experiments", "exp1", "--sizes", "small", "--seeds", "1",
                 "--iterations", "2", "--no-env-timing", *args, *TINY, timeout=1800)


@pytest.mark.slow
def test_mini_sweep_completes_then_skips_every_run(tmp_path):
    log_dir = tmp_path / "runs"
    frameworks = ",".join(FRAMEWORKS)
    num_runs = 2 * len(FRAMEWORKS)
    first = mini_sweep(log_dir, "--envs", MINI_ENVS, "--frameworks", frameworks)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert last_line(first) == f"{num_runs} completed, 0 failed, 0 skipped"
    assert len(re.findall(rf"^\[\d+/{num_runs}\] .* completed in .* \| ETA ", first.stdout, re.M)) == num_runs
    summaries = sorted((log_dir / "exp1").glob("*/summary.json"))
    assert len(summaries) == num_runs
    for path in summaries:
        assert read_json(path)["status"] == "completed" and read_json(path)["iterations_completed"] == 2
        assert read_json(path.parent / "config.json")["sync_timing"] is False
    assert len(list((log_dir / "logs" / "exp1").glob("*.log"))) == num_runs

    again = mini_sweep(log_dir, "--envs", MINI_ENVS, "--frameworks", frameworks)
    assert again.returncode == 0, again.stderr
    assert last_line(again) == f"0 completed, 0 failed, {num_runs} skipped"


@pytest.mark.slow
def test_a_failed_run_is_reported_and_the_sweep_goes_on(tmp_path):
    log_dir = tmp_path / "runs"
    proc = mini_sweep(log_dir, "--envs", "Nope-v0,CartPole-v1", "--frameworks", "linen")
    assert proc.returncode == 1
    assert last_line(proc) == "1 completed, 1 failed, 0 skipped"
    assert re.search(r"\[1/2\] exp1 Nope-v0 .* failed \(exit 2\)", proc.stdout)
    log = re.search(r"log: (\S+Nope-v0\S+\.log)", proc.stdout)[1]
    assert "unknown env 'Nope-v0'" in Path(log).read_text()
    assert re.search(r"\[2/2\] exp1 CartPole-v1 .* completed", proc.stdout)


# ---------------------------------------------------------------------------------------- env_timing
def test_env_timing_writes_json(tmp_path):
    out = tmp_path / "timing.json"
    cmd = [sys.executable, str(ROOT / "env_timing.py"), "--envs", "CartPole-v1,MemoryChain-bsuite", "--num-envs", "64",
           "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = read_json(out)
    assert data["num_envs"] == 64 and data["device"] and {"jax", "gymnax"} <= set(data["versions"]) and data["date"]
    envs = data["envs"]
    assert list(envs) == ["CartPole-v1", "MemoryChain-bsuite"]
    assert (envs["CartPole-v1"]["obs_dim"], envs["CartPole-v1"]["num_actions"]) == (4, 2)
    assert sorted(r["ratio"] for r in envs.values())[0] == 1.0
    assert all(r["ratio"] >= 1.0 and r["ms_per_step"] > 0 and r["median_ms"] > 0 for r in envs.values())
    assert "CartPole-v1" in proc.stdout and "ratio" in proc.stdout  # the table


def test_env_timing_bad_env_exits_2():
    cmd = [sys.executable, str(ROOT / "env_timing.py"), "--envs", "CartPole-v1,Nope-v0"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Nope-v0" in proc.stderr and "Acrobot-v1" in proc.stderr

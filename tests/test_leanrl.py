"""benchmarks/leanrl.py without LeanRL or torch: the shims (each old text exactly once; LeanRL's
files fetched at a commit, from a stand-in repository), the commands read from study.toml's exp9,
the pins of LeanRL's venv, and the refusals of bad input (test_leanrl_measure.py: what it measures
and reports)."""

import os
import subprocess
import sys

import pytest

from benchmarks import common, leanrl, leanrl_runs
from benchmarks.common import STEADY_FROM
from benchmarks.leanrl import CONFIGS
from benchmarks.leanrl_runs import COMPILED, PLAIN, SCRIPTS, SHIMS, ShimMismatch
from core import study
from helpers import ROOT


# ---------------------------------------------------------------------------------------- the shims
def sources() -> dict[str, str]:
    """Each script as a stand-in holding the text of each of its shims once (LeanRL's files are
    not copied here)."""
    return {
        path: "".join(f"before\n{shim.old}\nafter\n" for shim in SHIMS if shim.file == path)
        for path in SCRIPTS
    }


def test_every_shim_is_applied_once():
    shimmed = leanrl_runs.apply_shims(sources())
    for shim in SHIMS:
        assert shimmed[shim.file].count(shim.new) == 1
    assert "env.observation_space)" in shimmed[PLAIN]
    assert "agent_inference.requires_grad_(False)" in shimmed[COMPILED]
    assert "requires_grad_" not in shimmed[PLAIN]


@pytest.mark.parametrize("times", [0, 2])
def test_a_file_that_changed_is_refused(times):
    texts = sources()
    old = SHIMS[0].old
    texts[PLAIN] = texts[PLAIN].replace(
        old, old.replace("-10, 10", "-5, 5") if times == 0 else old * 2
    )
    with pytest.raises(ShimMismatch, match=f"{PLAIN}: a shim's text occurs {times} times"):
        leanrl_runs.apply_shims(texts)


def test_every_shim_says_why_and_is_recorded():
    records = leanrl_runs.shim_records()
    assert len(records) == len(SHIMS) == 3
    assert all(r["why"] and r["file"] in SCRIPTS and r["old"] != r["new"] for r in records)


def git(folder, *args) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def stand_in_repo(tmp_path):
    """A git repository holding stand-ins of LeanRL's two files; its commit."""
    repo = tmp_path / "LeanRL-stand-in"
    (repo / "leanrl").mkdir(parents=True)
    for path, text in sources().items():
        (repo / path).write_text(text)
    git(repo, "init", "--quiet")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "stand-in")
    return repo, git(repo, "rev-parse", "HEAD")


def test_the_scripts_are_cloned_at_the_commit_and_shimmed(tmp_path):
    repo, commit = stand_in_repo(tmp_path)
    work = tmp_path / "work"
    full, paths = leanrl_runs.fetch_scripts(work, commit[:7], str(repo), None)
    assert full == commit and (work / "LeanRL" / ".git").exists()
    assert (
        paths[COMPILED] == work / f"leanrl-{commit[:12]}" / "ppo_continuous_action_torchcompile.py"
    )
    assert paths[COMPILED].read_text() == leanrl_runs.apply_shims(sources())[COMPILED]
    # from a checkout instead: nothing cloned
    _, from_dir = leanrl_runs.fetch_scripts(tmp_path / "other", commit, "unused", repo)
    assert from_dir[PLAIN].read_text() == paths[PLAIN].read_text()
    assert not (tmp_path / "other" / "LeanRL").exists()


def test_a_commit_that_is_not_there_is_an_error(tmp_path):
    repo, _ = stand_in_repo(tmp_path)
    with pytest.raises(leanrl_runs.SetupError, match="commit 0123456 is not in"):
        leanrl_runs.fetch_scripts(tmp_path / "work", "0123456", str(repo), None)


# ------------------------------------------------------------------------------------- the commands
def test_both_sides_run_cleanrls_configuration_from_exp9():
    ours = leanrl_runs.our_args(CONFIGS["torch compile"], 20, 2)
    theirs = leanrl_runs.leanrl_args(CONFIGS["leanrl compile"], 20)
    exp9 = study.load().experiments["exp9"].env_args("HalfCheetah-v4@envpool")
    assert leanrl_runs.batch_size() == 2048
    for flag, value in [("--num-envs", "1"), ("--num-steps", "2048"), ("--num-minibatches", "32")]:
        assert ours[ours.index(flag) + 1] == theirs[theirs.index(flag) + 1] == value
    for flag in ("--update-epochs", "--learning-rate", "--ent-coef"):
        assert ours[ours.index(flag) + 1] == theirs[theirs.index(flag) + 1]
        assert ours[ours.index(flag) + 1] == exp9[exp9.index(flag) + 1]
    assert ours.count("--num-iterations") == 1 and ours[ours.index("--num-iterations") + 1] == "20"
    assert ours[ours.index("--env-backend") + 1] == "envpool"
    assert ours[ours.index("--env-threads") + 1] == "2"
    assert {"--norm-obs", "--norm-reward", "--no-sync-timing"} <= set(ours)
    assert theirs[theirs.index("--total-timesteps") + 1] == str(20 * 2048)
    assert theirs[theirs.index("--measure-burnin") + 1] == str(STEADY_FROM + 1)
    assert theirs[-1] == "--compile" and "--norm-obs" not in theirs


def test_each_leanrl_mode_adds_its_own_flags_only():
    flags = {name: c.flags for name, c in CONFIGS.items() if c.leanrl}
    assert flags == {
        "leanrl compile": ("--compile",),
        "leanrl eager": (),
        "leanrl plain": (),
        "leanrl cudagraphs": ("--compile", "--cudagraphs"),
    }
    assert CONFIGS["leanrl plain"].script == PLAIN and CONFIGS["leanrl cudagraphs"].gpu_only


def test_an_exp9_flag_leanrl_lacks_is_an_error(monkeypatch):
    options = {"--num-envs": "1", "--num-steps": "2048", "--clip-coef": "0.1"}
    monkeypatch.setattr(leanrl_runs, "reference_options", lambda: dict(options))
    with pytest.raises(ValueError, match="--clip-coef: no LeanRL counterpart"):
        leanrl_runs.leanrl_args(CONFIGS["leanrl eager"], 20)


def test_runs_start_from_empty_caches_on_the_pinned_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere/warm")
    monkeypatch.setenv("VIRTUAL_ENV", "/the/project/venv")
    env = leanrl_runs.run_environment(2, tmp_path)
    assert env["OMP_NUM_THREADS"] == "2" and env["WANDB_MODE"] == "disabled"
    assert env["TORCHINDUCTOR_CACHE_DIR"].startswith(str(tmp_path)) and "VIRTUAL_ENV" not in env
    assert env["JAX_COMPILATION_CACHE_DIR"] == ""


# ------------------------------------------------------------------------------- LeanRL's venv pins
def pins(text: str) -> dict[str, str]:
    return dict(
        line.split("#")[0].strip().lower().split("==")
        for line in text.splitlines()
        if "==" in line.split("#")[0]
    )


def test_leanrls_venv_shares_the_projects_pins():
    theirs = pins(leanrl_runs.REQUIREMENTS.read_text())
    lock = pins((ROOT / "requirements.lock").read_text())
    assert theirs["torch"] == pins((ROOT / "requirements.txt").read_text())["torch"]
    assert {name: theirs[name] for name in theirs if name in lock} == {
        name: lock[name] for name in theirs if name in lock
    }
    assert {"tensordict", "gymnasium", "mujoco", "tqdm", "tyro", "wandb"} <= set(theirs)


def test_torchs_cpu_build_comes_first_from_setup_shs_index(tmp_path):
    first, rest = leanrl_runs.install_commands(tmp_path / "python", "cpu")
    assert first[-1] == "torch==" + pins(leanrl_runs.REQUIREMENTS.read_text())["torch"]
    assert first[first.index("--index-url") + 1] == leanrl_runs.cpu_index()
    assert leanrl_runs.cpu_index().endswith("/cpu")
    assert "--no-deps" in first and "--no-deps" in rest
    cuda_first, _ = leanrl_runs.install_commands(tmp_path / "python", "cuda")
    assert "--index-url" not in cuda_first


# ---------------------------------------------------------------------------------------- bad input
BAD = [
    (["--rounds", "0"], "--rounds 0"),
    (["--rounds", "two"], "invalid int value: 'two'"),
    (["--num-iterations", str(STEADY_FROM)], f"--num-iterations {STEADY_FROM}"),
    (["--configs", "leanrl turbo"], "invalid choice: 'leanrl turbo' (choose from "),
    (["--cpus", "a-b"], "--cpus 'a-b'"),
    (["--cpus", "999"], "--cpus 999: not among"),
    (["--leanrl-commit", "main"], "--leanrl-commit 'main'"),
    (["--leanrl-repo=--upload-pack=x"], "--leanrl-repo '--upload-pack=x'"),
    (["--timeout", "0"], "--timeout 0.0"),
    (["--leanrl-dir", "{tmp}", "--leanrl-repo", "x"], "not allowed with argument"),
    (["--leanrl-dir", "{tmp}"], "not a git checkout"),
    (["--leanrl-python", "{tmp}/python"], "no such executable"),
    (["--out", "{tmp}/leanrl.md"], "give a .json file"),
    (["--out", "/proc/no-folder/leanrl.json"], "cannot write into /proc"),
]


# a core this process may use: the default 0-1 is not on every machine
FIRST_CORE = str(min(os.sched_getaffinity(0)))


@pytest.mark.parametrize("argv, said", BAD)
def test_bad_input_is_one_line_and_exit_2_before_anything_is_made(tmp_path, capsys, argv, said):
    argv = [arg.format(tmp=tmp_path) for arg in argv] + ["--work-dir", str(tmp_path / "work")]
    argv += [] if "--out" in argv else ["--out", str(tmp_path / "leanrl.json")]
    argv += [] if "--cpus" in argv else ["--cpus", FIRST_CORE]
    code = leanrl.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert said in err[0]
    if "choose from" in said:
        assert all(name in err[0] for name in CONFIGS)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(bool(common.gpus()), reason="a GPU is here")
def test_a_gpu_mode_without_a_gpu_is_refused(tmp_path, capsys):
    argv = ["--configs", "leanrl cudagraphs", "--cpus", FIRST_CORE]
    code = leanrl.main(argv + ["--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err.strip().splitlines()
    needs = "error: --configs leanrl cudagraphs: needs an NVIDIA GPU (nvidia-smi lists none)"
    assert code == 2 and err == [needs]


def test_the_command_line_refuses_in_one_line(tmp_path):
    cmd = [sys.executable, "-m", "benchmarks.leanrl", "--rounds", "0"]
    cmd += ["--work-dir", str(tmp_path / "w")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.strip() == "error: --rounds 0: give 1 or more"
    assert not (tmp_path / "w").exists()


def test_a_dry_run_prints_the_shims_and_commands_and_makes_nothing(tmp_path, capsys):
    work = tmp_path / "work"
    argv = ["--dry-run", "--work-dir", str(work), "--cpus", FIRST_CORE]
    code = leanrl.main(argv + ["--configs", "leanrl eager", "linen jit"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and not work.exists()
    said = [line.split(":")[0] for line in out]
    assert said == ["shim 1", "shim 2", "shim 3", "leanrl eager", "linen jit"]
    assert "ppo_continuous_action_torchcompile.py --env-id HalfCheetah-v4" in out[3]
    assert str(work / "venv" / "bin" / "python") in out[3]
    assert "ppo_linen.py --env HalfCheetah-v4 --env-backend envpool" in out[4]

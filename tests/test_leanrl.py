"""benchmarks/leanrl.py without LeanRL or torch: the shims (each old text exactly once), LeanRL's progress bar timed
as it arrives (a sample written from its code: tqdm's bar, its `speed` description), the commands read from
study.toml's exp9, the pins of LeanRL's venv, the medians, ratios, goal and table, and the refusals of bad input."""

import os
import subprocess
import sys
import textwrap

import pytest

import study
from benchmarks import leanrl, leanrl_env, leanrl_report, leanrl_runs, leanrl_source
from benchmarks.common import STEADY_FROM
from benchmarks.leanrl_runs import CONFIGS, Progress
from benchmarks.leanrl_source import COMPILED, PLAIN, SCRIPTS, SHIMS, ShimMismatch
from helpers import ROOT


# ------------------------------------------------------------------------------------------------ the shims
def sources() -> dict[str, str]:
    """Each script as a stand-in holding the text of each of its shims once (LeanRL's files are not copied here)."""
    return {
        path: "".join(f"before\n{shim.old}\nafter\n" for shim in SHIMS if shim.file == path)
        for path in SCRIPTS
    }


def test_every_shim_is_applied_once():
    shimmed = leanrl_source.apply_shims(sources())
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
        leanrl_source.apply_shims(texts)


def test_every_shim_says_why_and_is_recorded():
    records = leanrl_source.shim_records()
    assert len(records) == len(SHIMS) == 3
    assert all(r["why"] and r["file"] in SCRIPTS and r["old"] != r["new"] for r in records)


# ------------------------------------------------------------------------------- LeanRL's progress, timed
# tqdm's bar as LeanRL's loop draws it on stderr: "\r{desc}: {pct}%|{bar}| {n}/{N} [{elapsed}<{left}, {rate}]",
# after every iteration; every 10th iteration the torchcompile script first sets its description to
# f"speed: {speed: 4.1f} sps, reward avg: {r :4.2f}, reward max: ..., returns: {..: 4.2f},lr: {lr: 4.2f}"
# (which redraws the bar at the count before), the plain one to f"speed: {speed: 4.1f} sps, " + desc.
def bar(n: int, desc: str = "") -> bytes:
    done = "\u2588" * (n // 2)
    return f"\r{desc}{100 * n // 20:3d}%|{done:<10}| {n}/20 [00:{n:02d}<00:40,  2.00s/it]".encode()


SPEED_DESC = "speed:  1523.4 sps, reward avg: 0.05, reward max: 1.23, returns:  nan,lr:  0.00: "
PLAIN_DESC = "speed:  987.0 sps, : "


def sample() -> list[tuple[float, bytes]]:
    """(time it arrives, bytes): count 0 at 1 s, count 1 (the compile) at 381 s, then one count every 2 s; count
    9 redrawn with the speed at the 10th iteration's end, count 19 likewise."""
    arrivals = [(1.0, bar(0))] + [(381.0 + 2 * (n - 1), bar(n)) for n in range(1, 21)]
    arrivals.insert(10, (398.5, bar(9, SPEED_DESC)))
    arrivals.insert(21, (418.5, bar(19, PLAIN_DESC)))
    return arrivals


def fed(arrivals) -> Progress:
    progress = Progress()
    for at, data in arrivals:
        progress.feed(data, at)
    return progress


def test_each_count_is_timed_when_it_first_arrives():
    seen = fed(sample()).first_seen
    assert sorted(seen) == list(range(21))
    assert seen[0] == 1.0 and seen[1] == 381.0 and seen[9] == 397.0 and seen[20] == 419.0


def test_a_bar_split_across_reads_is_timed_when_its_count_is_whole():
    data = bar(12)
    # a cut inside the count, then one inside the bar's UTF-8 character
    cut = data.index(b"12/20") + 1
    progress = fed([(1.0, data[:cut]), (2.0, data[cut:])])
    assert progress.first_seen == {12: 2.0}
    char = data.index("\u2588".encode()) + 1
    progress = fed([(1.0, data[:char]), (2.0, data[char:])])
    assert progress.first_seen == {12: 2.0} and "\ufffd" not in progress.text


def test_steady_rate_runs_from_the_steady_count_to_the_last():
    seen = fed(sample()).first_seen
    # counts STEADY_FROM..20 arrive 2 s apart: 2048 steps every 2 s
    assert leanrl_runs.steady_rate(seen, 2048) == pytest.approx(1024.0)
    with pytest.raises(leanrl_runs.RunFailed, match="fewer than two"):
        leanrl_runs.steady_rate({0: 1.0, 1: 2.0}, 2048)


def test_leanrls_own_speed_is_the_last_it_printed():
    text = fed(sample()).text
    assert leanrl_runs.reported_speed(text) == 987.0
    assert leanrl_runs.reported_speed(bar(3).decode()) is None


def test_a_leanrl_result_reads_compile_steady_and_its_own_speed():
    finished = leanrl_runs.Finished(0, 430.0, fed(sample()))
    result = leanrl_runs.leanrl_result(finished, 2048)
    assert result == {
        "wall_s": 430.0,
        "iter0_s": 380.0,
        "steady_sps": pytest.approx(1024.0),
        "reported_sps": 987.0,
    }


STAND_IN = textwrap.dedent(
    """
    import sys, time
    for n in range(4):
        sys.stderr.write(f"\\r{25 * n:3d}%|   | {n}/3 [00:00<?, ?it/s]")
        sys.stderr.flush()
        time.sleep(0.3)
    """
)


def test_a_process_output_is_timed_as_it_arrives(tmp_path):
    cmd = [sys.executable, "-c", STAND_IN]
    finished = leanrl_runs.run_timed(cmd, tmp_path, {}, timeout=60)
    seen = finished.progress.first_seen
    assert finished.returncode == 0 and sorted(seen) == [0, 1, 2, 3]
    assert seen[0] < seen[1] < seen[2] < seen[3]
    # three sleeps of 0.3 s between count 0 and count 3, four before the exit
    assert seen[3] - seen[0] > 0.6 and finished.wall_s >= 1.2


def test_a_process_past_its_timeout_is_killed(tmp_path):
    cmd = [sys.executable, "-c", "import time; time.sleep(60)"]
    finished = leanrl_runs.run_timed(cmd, tmp_path, {}, timeout=0.5)
    assert finished.returncode is None and finished.wall_s < 10
    assert "killed after" in leanrl_runs.failure(finished, 0.5)


# ------------------------------------------------------------------------------------------- the commands
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
    args = ("--num-envs", "1", "--num-steps", "2048", "--clip-coef", "0.1")
    monkeypatch.setattr(leanrl_runs, "reference_args", lambda: args)
    with pytest.raises(ValueError, match="--clip-coef: no LeanRL counterpart"):
        leanrl_runs.leanrl_args(CONFIGS["leanrl eager"], 20)


def test_runs_start_from_empty_caches_on_the_pinned_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere/warm")
    monkeypatch.setenv("VIRTUAL_ENV", "/the/project/venv")
    env = leanrl_runs.run_environment(2, tmp_path)
    assert env["OMP_NUM_THREADS"] == "2" and env["WANDB_MODE"] == "disabled"
    assert env["TORCHINDUCTOR_CACHE_DIR"].startswith(str(tmp_path)) and "VIRTUAL_ENV" not in env
    assert env["JAX_COMPILATION_CACHE_DIR"] == ""


# ------------------------------------------------------------------------------------ LeanRL's venv pins
def pins(text: str) -> dict[str, str]:
    return dict(
        line.split("#")[0].strip().lower().split("==")
        for line in text.splitlines()
        if "==" in line.split("#")[0]
    )


def test_leanrls_venv_shares_the_projects_pins():
    theirs = pins(leanrl_env.REQUIREMENTS.read_text())
    lock = pins((ROOT / "requirements.lock").read_text())
    assert theirs["torch"] == pins((ROOT / "requirements.txt").read_text())["torch"]
    assert {name: theirs[name] for name in theirs if name in lock} == {
        name: lock[name] for name in theirs if name in lock
    }
    assert {"tensordict", "gymnasium", "mujoco", "tqdm", "tyro", "wandb"} <= set(theirs)


def test_torchs_cpu_build_comes_first_from_setup_shs_index(tmp_path):
    first, rest = leanrl_env.install_commands(tmp_path / "python", "cpu")
    assert first[-1] == "torch==" + pins(leanrl_env.REQUIREMENTS.read_text())["torch"]
    assert first[first.index("--index-url") + 1] == leanrl_env.cpu_index()
    assert leanrl_env.cpu_index().endswith("/cpu")
    assert "--no-deps" in first and "--no-deps" in rest
    cuda_first, _ = leanrl_env.install_commands(tmp_path / "python", "cuda")
    assert "--index-url" not in cuda_first


# ------------------------------------------------------------------------------ medians, ratios and table
def run(sps, wall, iter0, reported=None) -> dict:
    return {"steady_sps": sps, "wall_s": wall, "iter0_s": iter0, "reported_sps": reported}


FAILED = {"error": "exit status 1: ...", "log": "round1.log"}
RESULTS = {
    "leanrl compile": [run(1000, 400, 380, 990), run(1200, 410, 385, 1190), run(1100, 420, 390)],
    "leanrl plain": [FAILED],
    "torch compile": [run(800, 200, 60)] * 3,
    "linen jit": [run(3000, 50, 20), FAILED],
}


def rows(text: str) -> dict[str, list[str]]:
    cells = [line.strip("| ").split(" | ") for line in text.splitlines()[2:]]
    return {row[0]: row[1:] for row in cells}


def test_medians_and_ratios_to_ppo_torch():
    table = rows(leanrl_report.table(RESULTS, "torch compile"))
    # steady 1100 / 800; whole run 410 / 200
    assert table["leanrl compile"][:6] == ["3", "1100", "1.38x", "6m50s", "2.05x", "6m25s"]
    assert table["leanrl compile"][6] == "1090"
    assert table["torch compile"][:5] == ["3", "800", "1.00x", "3m20s", "1.00x"]
    assert table["linen jit"][:3] == ["1 of 2", "3000", "3.75x"]
    assert table["leanrl plain"][:2] == ["0 of 1", "failed"]


def test_the_goal_compares_ppo_torchs_best_with_leanrls_best():
    line = leanrl_report.goal_line(RESULTS)
    assert ": not met." in line and "leanrl compile, 1100 steps/s" in line and "(0.73x)" in line
    faster = {**RESULTS, "torch compile": [run(1500, 200, 60)]}
    assert ": met." in leanrl_report.goal_line(faster)
    assert "not measured" in leanrl_report.goal_line({"torch compile": [FAILED]})


def test_the_markdown_lists_the_shims_versions_and_commands():
    record = {
        "command": "python -m benchmarks.leanrl",
        "status": "finished",
        "started": "2026-12-03T18:00:00+00:00",
        "machine": {"cores": 2, "cpu_model": "AMD EPYC", "virtual_machine": True, "gpu": None},
        "options": {"num_iterations": 20, "rounds": 5, "cpus": "0-1"},
        "threads": 2,
        "batch_size": 2048,
        "leanrl_repo": leanrl_source.LEANRL_REPO,
        "leanrl_commit": leanrl_source.LEANRL_COMMIT,
        "shims": leanrl_source.shim_records(),
        "versions": {"leanrl": {"torch": "2.13.0+cpu"}, "ours": {"torch": "2.13.0+cpu"}},
        "commands": {
            "torch compile": ["/usr/bin/python3", str(ROOT / "ppo_torch.py"), "--env", "X"]
        },
        "rounds_done": 5,
        "results": RESULTS,
    }
    text = leanrl_report.markdown(record)
    assert leanrl_source.LEANRL_COMMIT in text and "requires_grad_(False)" in text
    assert "`/usr/bin/python3 ppo_torch.py --env X`" in text
    assert "Goal (" in text and "| leanrl compile | 3 | 1100 |" in text


def test_the_eta_uses_each_configurations_own_mean():
    durations = {"a": [10.0, 30.0], "b": [], "c": [40.0]}
    # a: 20; b: none yet, the mean of every run so far (80 / 3); c: 40
    assert leanrl.eta_seconds(durations, ["a", "b", "c"]) == pytest.approx(20 + 80 / 3 + 40)
    assert leanrl.eta_seconds({"a": []}, ["a"]) == 0.0


# ------------------------------------------------------------------------------------------- bad input
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
    (["--out", "{tmp}/no-folder/leanrl.json"], "no folder"),
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


@pytest.mark.skipif(bool(leanrl_env.gpus()), reason="a GPU is here")
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

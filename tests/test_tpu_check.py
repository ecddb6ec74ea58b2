"""benchmarks/tpu_check.sh, the accelerator edition's runner, planned on the CPU (DRY_RUN=1): its
steps' commands, and the sweeps they run as bench.sh plans them. The chip is never needed here."""

import os
import re
import shlex
import subprocess
import sys
import tarfile

from helpers import ROOT

RUNNER = ROOT / "benchmarks" / "tpu_check.sh"


def plan(tmp_path, *steps: str) -> dict[str, list[str]]:
    env = {**os.environ, "DRY_RUN": "1", "OUT": str(tmp_path / "out")}
    done = subprocess.run(
        ["bash", str(RUNNER), *steps], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    commands = {}
    for line in done.stdout.splitlines():
        name, _, command = line.partition(": ")
        commands[name] = shlex.split(command)
    return commands


def planned_runs(command: list[str], env: dict | None = None) -> int:
    """How many runs bench.sh plans for command (its dry run)."""
    assert command[0] == "./bench.sh"
    # bench.sh's own options end at "--": what follows goes to every run
    end = command.index("--") if "--" in command else len(command)
    done = subprocess.run(
        ["bash", str(ROOT / "bench.sh"), *command[1:end], "--dry-run", *command[end:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    return int(re.search(r"dry run: (\d+) runs", done.stdout).group(1))


def test_the_plan_smokes_each_jax_script_then_sweeps_the_chip_and_the_host(tmp_path):
    commands = plan(tmp_path)
    assert list(commands) == [
        "machine",
        "smoke_ppo_linen",
        "smoke_ppo_nnx",
        "smoke_ppo_equinox",
        "chip",
        "host",
    ]
    # exp1's core: 2 envs x 3 sizes x the JAX frameworks x 3 seeds on the chip; torch too on a CPU
    assert planned_runs(commands["chip"]) == 2 * 3 * 3 * 3
    assert planned_runs(commands["host"]) == 2 * 3 * 4 * 3
    chip, host = commands["chip"], commands["host"]
    assert chip[chip.index("--tag") + 1] == "tpu-v5e"
    assert host[host.index("--tag") + 1] == "tpu-v5e-host"


def test_the_host_step_keeps_jax_off_the_chip():
    source = RUNNER.read_text()
    host = source[source.index("host() {") :]
    assert "JAX_PLATFORMS=cpu step host" in host.split("\n}")[0]


def test_an_unknown_step_is_refused_before_anything(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out)}
    done = subprocess.run(
        ["bash", str(RUNNER), "chip", "bogus"], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert done.returncode == 2
    steps = "machine smoke chip host parts purejaxrl purejaxrl_many playground anchor batch"
    steps += " learning nnx"
    assert done.stderr == f"tpu_check.sh: unknown step 'bogus'; steps: {steps}\n"
    assert not out.exists()


def test_the_parts_step_compiles_the_pieces_small_and_large_when_asked(tmp_path):
    commands = plan(tmp_path, "parts")
    assert list(commands) == ["parts_small", "parts_large"]
    for size, command in zip(("small", "large"), commands.values()):
        assert command[1:3] == ["-m", "benchmarks.compile_parts"]
        assert command[command.index("--model-size") + 1] == size
        assert command[command.index("--out") + 1].endswith(f"parts/CartPole-v1-{size}.json")


def test_the_purejaxrl_step_runs_purejaxrl_on_our_jax_beside_the_templates(tmp_path, monkeypatch):
    (tmp_path / "pjx" / "purejaxrl").mkdir(parents=True)
    (tmp_path / "pjx" / "purejaxrl" / "ppo.py").write_text("# stand-in\n")
    monkeypatch.setenv("PUREJAXRL_DIR", str(tmp_path / "pjx"))
    commands = plan(tmp_path, "purejaxrl", "purejaxrl_many")
    assert list(commands) == ["purejaxrl_whole", "purejaxrl_one_agent", "purejaxrl_many"]
    for command in commands.values():
        assert command[1:3] == ["-m", "benchmarks.purejaxrl"] and "--shims" in command
        assert command[command.index("--purejaxrl-dir") + 1] == str(tmp_path / "pjx")
    whole = commands["purejaxrl_whole"]
    assert whole[whole.index("--mode") + 1] == "whole"
    one, many = commands["purejaxrl_one_agent"], commands["purejaxrl_many"]
    # ours as a user trains only: a window holds about a dozen processes
    assert "--fast-only" in one and "--fast-only" in many
    assert one[one.index("--agents") + 1 : one.index("--agents") + 3] == ["1", "--iterations"]
    agents = many.index("--agents")
    # to 4,096 agents (a run that does not fit the chip's memory fails alone)
    assert many[agents + 1 : agents + 4] == ["256", "1024", "4096"]


def test_the_playground_steps_sweep_its_envs_and_run_brax_s_ppo_beside(tmp_path):
    commands = plan(tmp_path, "playground", "anchor")
    assert list(commands) == ["playground", "anchor_CartpoleBalance", "anchor_CheetahRun"]
    sweep = commands["playground"]
    assert sweep[sweep.index("--preset") + 1] == "playground"
    # exp5 on 3 Playground envs x the JAX frameworks x 3 seeds, sync off and on
    assert planned_runs(sweep) == 3 * 3 * 3 * 2
    for env in ("CartpoleBalance", "CheetahRun"):
        anchor = commands[f"anchor_{env}"]
        assert anchor[1:3] == ["-m", "benchmarks.brax_ppo"]
        assert anchor[anchor.index("--env") + 1] == env


def test_the_purejaxrl_step_needs_a_checkout(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PUREJAXRL_DIR"}
    env |= {"DRY_RUN": "1", "OUT": str(tmp_path / "out")}
    done = subprocess.run(
        ["bash", str(RUNNER), "purejaxrl"], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert done.returncode == 2
    assert done.stderr == (
        "tpu_check.sh: the purejaxrl step needs PUREJAXRL_DIR, a PureJaxRL checkout (got '')\n"
    )
    assert not (tmp_path / "out").exists()


def test_the_batch_step_sweeps_the_chip_then_the_host_cpu(tmp_path):
    commands = plan(tmp_path, "batch")
    assert list(commands) == ["batch_chip", "batch_host"]
    for command in commands.values():
        assert command[1:3] == ["-m", "benchmarks.batch_sweep"]
        # the sweep stops itself before the step's timeout, keeping what it measured
        assert 0 < int(command[command.index("--deadline") + 1]) < 540
    chip, host = commands["batch_chip"], commands["batch_host"]
    # kept in the runs folder: the archive carries them, and a later call takes them up again
    assert chip[chip.index("--out") + 1] == str(tmp_path / "out" / "runs" / "batch" / "chip.json")
    assert host[host.index("--out") + 1] == str(tmp_path / "out" / "runs" / "batch" / "host.json")
    source = RUNNER.read_text()
    batch = source[source.index("batch() {") :].split("\n}")[0]
    assert "JAX_PLATFORMS=cpu step batch_host" in batch
    assert "JAX_PLATFORMS=cpu step batch_chip" not in batch


def test_the_learning_step_runs_cleanrls_config_at_both_precisions(tmp_path):
    commands = plan(tmp_path, "learning")
    assert list(commands) == ["learning_default", "learning_highest"]
    default, highest = commands["learning_default"], commands["learning_highest"]
    # CleanRL ppo.py's configuration on CartPole-v1 and Acrobot-v1 x the JAX frameworks x 3 seeds
    assert planned_runs(default) == 2 * 3 * 3
    assert planned_runs(highest) == 2 * 3 * 3
    assert default[default.index("--tag") + 1] == "tpu-v5e"
    assert highest[highest.index("--tag") + 1] == "tpu-v5e-highest"
    assert "--matmul-precision" not in default
    assert highest[highest.index("--") + 1 :] == ["--matmul-precision", "highest"]
    assert default[default.index("--log-dir") + 1] != highest[highest.index("--log-dir") + 1]


def test_archives_only_leaves_check_txt_and_two_archives_that_hold_every_record(tmp_path):
    out = tmp_path / "out"
    env = {
        **os.environ,
        "OUT": str(out),
        "PYTHON": sys.executable,
        "RESUME_FROM": str(tmp_path / "none"),
        "ARCHIVES_ONLY": "1",
        "JAX_PLATFORMS": "cpu",
    }
    done = subprocess.run(
        ["bash", str(RUNNER), "machine"], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["check.txt", "records.tar.gz", "runs.tar.gz"]
    with tarfile.open(out / "records.tar.gz") as records:
        names = records.getnames()
        machine = records.extractfile("./machine.log").read().decode()
    assert "./check.txt" in names and not any(n.startswith("./runs") for n in names)
    assert "CpuDevice" in machine


def test_the_nnx_step_sets_nnxs_modes_beside_linen_on_cleanrls_batch(tmp_path):
    (command,) = plan(tmp_path, "nnx").values()
    assert command[1:3] == ["-m", "benchmarks.jax_vs_linen"]
    configs = command.index("--configs")
    assert command[configs + 1 : configs + 4] == ["linen jit", "nnx cached_partial", "nnx tree"]
    # CleanRL ppo.py's batch, where a call is short and the host's work around it shows
    extra = command[command.index("--") + 1 :]
    assert extra[extra.index("--num-envs") + 1] == "4"
    assert extra[extra.index("--num-steps") + 1] == "128"
    assert "--no-sync-timing" in extra
    assert command[command.index("--out") + 1] == str(tmp_path / "out" / "nnx" / "cleanrl.json")

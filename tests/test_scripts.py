"""End-to-end and unit tests of the PPO scripts, written once and parametrised over every framework.

A new framework adds one line to SCRIPTS: its file and its compile modes (default first).
"""

import importlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from helpers import ROOT, TINY, numpy_gae, only_run_dir, read_json, read_scalars, run_script

SCRIPTS = {
    "ppo_linen.py": ["jit", "none"],
    "ppo_nnx.py": ["cached_partial", "jit", "none"],
    "ppo_torch.py": ["compile", "env-jit", "none"],
}

TAGS = [
    "time/rollout", "time/update", "time/iteration", "time/elapsed",
    "charts/SPS", "charts/episodic_return", "charts/episodic_length", "charts/learning_rate",
    "losses/value_loss", "losses/policy_loss", "losses/entropy", "losses/approx_kl",
    "losses/old_approx_kl", "losses/clipfrac", "losses/explained_variance",
]
ARGS_FIELDS = [
    "exp_name", "env", "model_size", "seed", "num_envs", "num_steps", "num_iterations", "update_epochs",
    "num_minibatches", "learning_rate", "anneal_lr", "gamma", "gae_lambda", "clip_coef", "clip_vloss",
    "ent_coef", "vf_coef", "max_grad_norm", "norm_adv", "compile", "sync_timing", "log_dir", "track",
    "wandb_project_name", "wandb_entity", "tag",
]
CONFIG_EXTRAS = ["framework", "batch_size", "minibatch_size", "versions", "device", "platform", "hostname", "start_time"]
SUMMARY_KEYS = ["status", "iterations_completed", "setup_s", "total_s", "final_return"]

SCRIPT_MODES = [(script, mode) for script, modes in SCRIPTS.items() for mode in modes]


def framework(script: str) -> str:
    return script[len("ppo_"):-len(".py")]


def check_tiny_run(log_dir, script, compile_mode, env_id):
    run_dir = only_run_dir(log_dir)
    assert run_dir.name.startswith(f"{env_id}__{framework(script)}__small__{compile_mode}__1__")

    config = read_json(run_dir / "config.json")
    for key in ARGS_FIELDS + CONFIG_EXTRAS:
        assert key in config, f"config.json lacks {key}"
    assert config["framework"] == framework(script) and config["compile"] == compile_mode
    assert config["batch_size"] == 64 and config["minibatch_size"] == 32
    assert {"python", "jax", "gymnax"} <= set(config["versions"])

    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "completed" and summary["iterations_completed"] == 3
    assert 0 < summary["setup_s"] < summary["total_s"]
    assert set(SUMMARY_KEYS) <= set(summary)

    scalars = read_scalars(run_dir)
    for tag in TAGS:
        assert tag in scalars, f"TensorBoard tag {tag} missing"
        assert [step for step, _ in scalars[tag]] == [64, 128, 192], tag
    assert all(value > 0 for _, value in scalars["time/iteration"])
    elapsed = [value for _, value in scalars["time/elapsed"]]
    assert elapsed == sorted(elapsed)
    assert all(value > 0 for _, value in scalars["charts/learning_rate"])


@pytest.mark.slow
@pytest.mark.parametrize("script,compile_mode", SCRIPT_MODES)
def test_tiny_run_every_compile_mode(script, compile_mode, log_dir):
    proc = run_script(script, *TINY, "--env", "CartPole-v1", "--compile", compile_mode, log_dir=log_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "iter 3/3" in proc.stdout and "completed" in proc.stdout
    check_tiny_run(log_dir, script, compile_mode, "CartPole-v1")


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_tiny_run_minatar(script, log_dir):
    proc = run_script(script, *TINY, "--env", "Breakout-MinAtar", log_dir=log_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_tiny_run(log_dir, script, SCRIPTS[script][0], "Breakout-MinAtar")


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_learns_cartpole(script, log_dir):
    """The default (benchmark) configuration solves CartPole-v1 within 100 iterations."""
    proc = run_script(script, "--env", "CartPole-v1", log_dir=log_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_json(only_run_dir(log_dir) / "summary.json")
    assert summary["final_return"] >= 400, summary


BAD_INPUTS = {
    "unknown env": (["--env", "Nope-v9"], ["Nope-v9", "CartPole-v1"]),
    "continuous env": (["--env", "Pendulum-v1"], ["Pendulum-v1", "Discrete"]),
    "minibatches": (["--num-minibatches", "7"], ["7", "8192"]),
    "zero envs": (["--num-envs", "0"], ["--num-envs", "0"]),
    "negative iterations": (["--num-iterations", "-1"], ["--num-iterations", "-1"]),
    "model size": (["--model-size", "huge"], ["huge", "small"]),
    "compile mode": (["--compile", "fast"], ["fast"]),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
@pytest.mark.parametrize("script", SCRIPTS)
def test_bad_input_is_refused_before_any_work(script, case, log_dir):
    args, words = BAD_INPUTS[case]
    proc = run_script(script, *args, log_dir=log_dir, timeout=120)
    assert proc.returncode == 2, proc.stderr[-3000:]
    for word in words:
        assert word in proc.stderr, f"{word!r} not in: {proc.stderr}"
    assert not log_dir.exists(), "a run folder was created for bad input"


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_sigint_leaves_interrupted_summary(script, log_dir):
    cmd = [sys.executable, str(ROOT / script), *TINY[:4], "--num-iterations", "100000", "--log-dir", str(log_dir)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**__import__("os").environ, "WANDB_MODE": "disabled"})
    deadline = time.time() + 300
    for line in proc.stdout:  # wait until a few iterations are logged
        if line.startswith("iter 3/") or time.time() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    run_dir = only_run_dir(log_dir)
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "interrupted"
    assert summary["iterations_completed"] >= 3
    steps = [step for step, _ in read_scalars(run_dir)["time/iteration"]]
    assert len(steps) >= 3 and steps[:3] == [64, 128, 192]


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_track_writes_offline_wandb_run(script, log_dir):
    proc = run_script(script, *TINY, "--track", log_dir=log_dir, env={"WANDB_MODE": "offline", "WANDB_SILENT": "true"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = only_run_dir(log_dir)
    offline_runs = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 1, list(run_dir.rglob("*"))[:20]
    assert any(offline_runs[0].glob("*.wandb"))


# ------------------------------------------------------------------------------------------ GAE
def to_framework(module, array):
    if module.FRAMEWORK == "torch":
        import torch

        return torch.as_tensor(array)
    import jax.numpy as jnp

    return jnp.asarray(array)


@pytest.mark.parametrize("script", SCRIPTS)
def test_gae_matches_numpy_reference(script):
    module = importlib.import_module(script[:-3])
    rng = np.random.default_rng(0)
    steps, envs = 12, 3
    rewards = rng.normal(size=(steps, envs)).astype(np.float32)
    values = rng.normal(size=(steps, envs)).astype(np.float32)
    final_values = rng.normal(size=(steps, envs)).astype(np.float32)
    terminated = np.zeros((steps, envs), bool)
    truncated = np.zeros((steps, envs), bool)
    terminated[4, 0] = terminated[9, 1] = True
    truncated[6, 0] = truncated[2, 2] = True
    terminated[11, 2] = True  # the last step of the rollout

    expected = numpy_gae(rewards, values, final_values, terminated, truncated, 0.99, 0.95)
    args = [to_framework(module, x) for x in (rewards, values, final_values, terminated, truncated)]
    advantages, returns = module.compute_gae(*args, 0.99, 0.95)
    np.testing.assert_allclose(np.asarray(advantages), expected[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(returns), expected[1], rtol=1e-5, atol=1e-5)

    # The truncated step bootstraps from its final value; a terminated one ignores it.
    bumped = final_values.copy()
    bumped[6, 0] += 1.0
    bumped[4, 0] += 1.0
    args[2] = to_framework(module, bumped)
    advantages_bumped, _ = module.compute_gae(*args, 0.99, 0.95)
    diff = np.asarray(advantages_bumped) - np.asarray(advantages)
    assert diff[6, 0] == pytest.approx(0.99, rel=1e-5)
    assert diff[5, 0] == pytest.approx(0.99 * 0.99 * 0.95, rel=1e-4)
    assert diff[4, 0] == 0.0


def test_torch_device_cuda_without_gpu_is_refused(log_dir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    proc = run_script("ppo_torch.py", "--device", "cuda", log_dir=log_dir, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "--device cuda" in proc.stderr and "cpu" in proc.stderr
    assert not log_dir.exists()

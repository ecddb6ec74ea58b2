"""The ppo_*.py scripts run as the tests run them: by their study name (script, script_path,
script_module, FRAMEWORKS, FIRST_FAST), in a fresh process (run, run_evaluate), in the background
and stopped by a signal (start, wait_for, interrupted, stopped_after_first_save), their starter
copies (stripped_copy), what a tiny run must leave (check_tiny_run), and their one-line refusals."""

import importlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import safetensors.numpy

import checkpoint
import evaluate
from helpers import ROOT, STUDY, as_from_a_shell, only_run_dir, read_json, scalar_series
from tools.starter import write_starter

FRAMEWORKS = list(STUDY.frameworks)

TAGS = [
    "time/rollout",
    "time/update",
    "time/iteration",
    "time/elapsed",
    "charts/SPS",
    "charts/episodic_return",
    "charts/episodic_length",
    "charts/learning_rate",
    "losses/value_loss",
    "losses/policy_loss",
    "losses/entropy",
    "losses/approx_kl",
    "losses/old_approx_kl",
    "losses/clipfrac",
    "losses/explained_variance",
]
EPISODIC_TAGS = ["charts/episodic_return", "charts/episodic_length"]
ARGS_FIELDS = [
    "exp_name",
    "env",
    "model_size",
    "seed",
    "num_envs",
    "num_steps",
    "num_iterations",
    "update_epochs",
    "num_minibatches",
    "learning_rate",
    "anneal_lr",
    "gamma",
    "gae_lambda",
    "clip_coef",
    "clip_vloss",
    "ent_coef",
    "vf_coef",
    "max_grad_norm",
    "norm_adv",
    "compile",
    "sync_timing",
    "log_dir",
    "track",
    "wandb_project_name",
    "wandb_entity",
    "tag",
]
CONFIG_EXTRAS = [
    "command",
    "framework",
    "batch_size",
    "minibatch_size",
    "versions",
    "device_name",
    "platform",
    "hostname",
    "start_time",
]
NO_EPISODE_IN_TINY_RUN = (
    "MountainCar-v0",
    "Craftax-Classic-Symbolic-v1",
    "Pendulum-v1",
    "Reacher-misc",
    "brax-halfcheetah",
)
SUMMARY_KEYS = [
    "status",
    "iterations_completed",
    "import_s",
    "setup_s",
    "total_s",
    "final_return",
    "signals",
]


def script(framework: str) -> str:
    return STUDY.frameworks[framework].script


def default_mode(framework: str) -> str:
    return STUDY.frameworks[framework].default_compile


def check_tiny_run(log_dir, framework, compile_mode, env_id, args, exp_name=None):
    """exp_name: the run's --exp-name, when given (its folder's name then holds it)."""
    run_dir = only_run_dir(Path(log_dir))
    named = f"__{exp_name}" if exp_name else ""
    assert run_dir.name.startswith(f"{env_id}{named}__{framework}__small__{compile_mode}__1__")

    config = read_json(run_dir / "config.json")
    for key in ARGS_FIELDS + CONFIG_EXTRAS:
        assert key in config, f"config.json lacks {key}"
    assert config["framework"] == framework and config["compile"] == compile_mode
    assert config["batch_size"] == 64 and config["minibatch_size"] == 32
    assert {"python", "jax", "gymnax"} <= set(config["versions"])
    assert config["command"] == [str(ROOT / script(framework)), *args, "--log-dir", str(log_dir)]
    assert config["device_name"] == "cpu" or config["device_name"].startswith("NVIDIA")
    module = importlib.import_module(script(framework)[:-3])
    if "device" in module.Args.__dataclass_fields__:
        assert config["device"] == module.Args.device, (
            "config.json must keep the --device flag as given"
        )
    else:
        assert "device" not in config

    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "completed" and summary["iterations_completed"] == 3
    assert 0 < summary["import_s"] < summary["setup_s"] < summary["total_s"]
    assert set(SUMMARY_KEYS) <= set(summary) and summary["signals"] == []
    # the peak resident set: at least the interpreter with JAX (and torch) loaded; no device on a
    # CPU
    assert 200 * 2**20 < summary["peak_rss_bytes"] < 64 * 2**30
    assert summary["peak_device_bytes"] is None

    for tag in TAGS:
        if tag in EPISODIC_TAGS and env_id in NO_EPISODE_IN_TINY_RUN:
            continue  # no episode ends in 3 x 16 steps
        assert [step for step, _ in scalar_series(run_dir, tag)] == [64, 128, 192], tag
    assert all(value > 0 for _, value in scalar_series(run_dir, "time/iteration"))
    elapsed = [value for _, value in scalar_series(run_dir, "time/elapsed")]
    assert elapsed == sorted(elapsed) and elapsed[-1] <= summary["total_s"]
    assert all(value > 0 for _, value in scalar_series(run_dir, "charts/learning_rate"))
    return run_dir, summary


def assert_one_line_refusal(proc, words):
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    for word in words:
        assert word in lines[0], f"{word!r} not in: {lines[0]}"


# each script's fastest --compile for a tiny run (torch.compile would take a minute to compile)
FAST_COMPILE = {"linen": "jit", "nnx": "cached_partial", "equinox": "partition", "torch": "env-jit"}

# One process per case and script: the first script's cases stay in the quick check, the others are
# marked slow.
FIRST_FAST = [
    pytest.param(f, marks=() if i == 0 else pytest.mark.slow) for i, f in enumerate(FRAMEWORKS)
]


def start(framework: str, *args: str, log_dir, ignore_sigint: bool = False):
    """The script in the background, as a shell would start it; a thread reads its output (stderr
    merged)."""
    cmd = [sys.executable, str(ROOT / script(framework)), *args, "--log-dir", str(log_dir)]
    # as `cmd &` in a script: the shell starts it with SIGINT ignored, which exec keeps
    if ignore_sigint:
        cmd = ["bash", "-c", 'trap "" INT; exec "$@"', "bash", *cmd]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "WANDB_MODE": "disabled"},
        preexec_fn=as_from_a_shell,
    )
    proc.lines, proc.output = queue.Queue(), []

    def read():
        for line in proc.stdout:
            proc.output.append(line)
            proc.lines.put(line)
        proc.lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return proc


def wait_for(proc, text: str, timeout: float = 300):
    """Blocks until a line of output contains text; fails (with the output) if the process ends
    first."""
    while True:
        line = proc.lines.get(timeout=timeout)
        assert line is not None, "".join(proc.output)[-3000:]
        if text in line:
            return


# 6 iterations, saved every 2: a stop after the first save is resumed from iteration 2 (or 4)
RUN = ["--num-envs", "4", "--num-steps", "32", "--num-iterations", "6", "--update-epochs", "2"]
RUN += ["--num-minibatches", "2", "--save-every", "2", "--save-model"]


def script_path(framework: str) -> str:
    return str(ROOT / STUDY.frameworks[framework].script)


def run(framework: str, *args: str, log_dir=None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, script_path(framework), *args]
    if log_dir is not None:
        cmd += ["--log-dir", str(log_dir)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def arrays(run_dir: Path, name: str) -> dict:
    return safetensors.numpy.load_file(str(run_dir / name))


def interrupted(
    framework: str,
    args: list,
    log_dir: Path,
    line: str,
    signum=signal.SIGINT,
    repeats: int = 1,
    settle: float = 0.0,
    apart: float = 0.0,
):
    """The run's process, sent signum once it has printed line (after settle seconds; `repeats`
    times, apart seconds apart), and ended."""
    proc = start(framework, *args, log_dir=log_dir)
    try:
        wait_for(proc, line)
        for k in range(repeats):
            time.sleep(settle if k == 0 else apart)
            proc.send_signal(signum)
        proc.wait(timeout=300)
    finally:
        proc.kill()
        proc.wait()
    return proc


def stopped_after_first_save(framework: str, args: list, log_dir: Path) -> Path:
    """The run, stopped by SIGINT once it has printed iteration 2's line (saved just before it)."""
    proc = interrupted(framework, args, log_dir, "iter 2/")
    assert proc.returncode == 130, "".join(proc.output)[-3000:]
    return only_run_dir(log_dir)


def run_evaluate(*args: str):
    """`python evaluate.py args` in a fresh process, as a user runs it (one torch thread, as
    run_script's)."""
    env = {"OMP_NUM_THREADS": "1", **os.environ}
    cmd = [sys.executable, str(ROOT / "evaluate.py"), *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)


def save_untrained(folder, env_id, backend, obs_dim, num_actions, continuous):
    """folder/model.safetensors: an untrained nnx agent's checkpoint for env_id, as --save-model
    writes one."""
    from flax import nnx

    import ppo_nnx

    agent = ppo_nnx.Agent(obs_dim, (64, 64), num_actions, continuous, nnx.Rngs(0))
    meta = dict(framework="nnx", env=env_id, env_backend=backend, model_size="small")
    meta |= dict(obs_shape=[obs_dim], num_actions=num_actions, dtype="float32", norm_obs=False)
    meta |= dict(action_kind="continuous" if continuous else "discrete", iteration=1)
    meta |= dict(final_return=None, commit="unknown", command=["ppo_nnx.py"], seed=1)
    folder.mkdir(exist_ok=True)
    checkpoint.save(
        folder / "model.safetensors",
        checkpoint.shared(*ppo_nnx.to_shared(agent)),
        None,
        meta,
    )
    return folder


def evaluated_replay(folder, steps: int):
    """The Replay of an evaluation of folder's checkpoint (one episode, in nnx), cut to its first
    steps."""
    from evaluation import model_file

    setup = evaluate.prepare(model_file.load(folder), "nnx", 1, 0, False)
    replay = evaluate.evaluate(setup, 0, keep=True).replay
    assert len(replay.states) >= steps
    return replay._replace(states=replay.states[:steps])


def stripped_copy(framework: str, folder: Path) -> Path:
    """The framework's starter as `./setup.sh starter` writes it (tools/starter.py): the script as
    it is, alone in folder with the pieces it imports (its plain bookkeeping among them). Returns
    the copy's path."""
    write_starter(framework, folder)
    return folder / STUDY.frameworks[framework].script


def script_module(framework: str):
    return importlib.import_module(STUDY.frameworks[framework].script[: -len(".py")])

"""Checkpoints made without training (random_checkpoint: random parameters of the small model's
shapes, written by checkpoint.save), the run config beside one and what its Hub folder may and may
not publish, Runner, a stand-in for the scripts' runner that saving.Saver saves, and a stopped
run folder made by a Saver without training (stopped_folder, events_file), and the observation count
of a run's normalisation statistics (stats_count)."""

from pathlib import Path
from typing import NamedTuple

import numpy as np

import atomic
import checkpoint
from core import saving
from evaluation import model_file

# env -> (trained by, action kind, obs_dim, num_actions): a discrete and a continuous env, each
# trained (so the checkpoint says) by a JAX framework, so the ONNX graph (PyTorch's network) is
# checked against another framework
CHECKPOINT_ENVS = {
    "CartPole-v1": ("linen", "discrete", 4, 2),
    "Pendulum-v1": ("nnx", "continuous", 3, 1),
}


def random_checkpoint(path: Path, env_id: str, seed: int = 0, command=None) -> Path:
    """A --norm-obs checkpoint of env_id with random parameters of the small model's shapes, written
    by checkpoint.save. The actor's head is scaled up (3 / sqrt(fan_in)) so that the logits stand
    apart (no near-tie that float32 rounding could flip) and the Gaussian's mean often leaves
    Pendulum's bounds (the clip is used). command: its metadata's (default: a plain one)."""
    framework, kind, obs_dim, num_actions = CHECKPOINT_ENVS[env_id]
    rng = np.random.default_rng(seed)
    sizes = (obs_dim, *model_file.MODEL_SIZES["small"])
    params = {}
    for mlp, out_dim in (("actor", num_actions), ("critic", 1)):
        layers = list(zip((*sizes,), (*sizes[1:], out_dim)))
        for i, (size_in, size_out) in enumerate(layers):
            gain = 3.0 if (mlp, i) == ("actor", len(layers) - 1) else 1.0
            kernel = rng.normal(0, gain / np.sqrt(size_in), (size_in, size_out))
            params[f"{mlp}.{i}.kernel"] = kernel.astype(np.float32)
            params[f"{mlp}.{i}.bias"] = rng.normal(0, 0.1, size_out).astype(np.float32)
    if kind == "continuous":
        params["log_std"] = np.full(num_actions, -0.5, np.float32)
    obs_norm = {
        "mean": rng.normal(0, 1, obs_dim).astype(np.float32),
        "var": rng.uniform(0.5, 4.0, obs_dim).astype(np.float32),
        "count": np.array(1000.0, np.float32),
    }
    meta = {
        "framework": framework,
        "env": env_id,
        "env_backend": "gymnax",
        "model_size": "small",
        "obs_shape": [obs_dim],
        "action_kind": kind,
        "num_actions": num_actions,
        "dtype": "float32",
        "norm_obs": True,
        "iteration": 3,
        "final_return": 12.5,
        "commit": "unknown",
        "command": command
        or [f"ppo_{framework}.py", "--env", env_id, "--norm-obs", "--save-model"],
        "seed": 1,
    }
    path.mkdir(parents=True, exist_ok=True)
    checkpoint.save(path / checkpoint.FILENAME, params, obs_norm, meta)
    return path / checkpoint.FILENAME


# a run's config.json (a part of one), beside the checkpoint: the scripts' fields of the run that
# wrote the checkpoint (random_checkpoint's CartPole one), and what the card must not publish
RUN_CONFIG = {
    "framework": "linen",
    "env": "CartPole-v1",
    "env_backend": "gymnax",
    "seed": 1,
    "model_size": "small",
    "dtype": "float32",
    "norm_obs": True,
    "learning_rate": 0.00025,
    "versions": {"python": "3.11.7", "jax": "0.10.2"},
    "command": [
        "/home/someone/benchback-rl/ppo_linen.py",
        "--env",
        "CartPole-v1",
        "--log-dir",
        "/home/someone/runs",
        "--norm-obs",
    ],
}
PRIVATE = {
    "hostname": "someones-laptop",
    "platform": "Linux-6.1-x86_64",
    "log_dir": "/home/someone/runs",
    "environment_variables": {"HOME": "/home/someone"},
    "hf_token": "hf_secret",
    "wandb_api_key": "secret",
}
# what the Hub folder publishes of RUN_CONFIG: its fields, the command's script by its name and no
# path
PUBLISHED_CONFIG = {
    **RUN_CONFIG,
    "command": ["ppo_linen.py", "--env", "CartPole-v1", "--norm-obs"],
}


class Runner(NamedTuple):
    """A runner as the scripts' (iteration_done reads env_state): here, no env state and some
    observations."""

    env_state: object
    obs: np.ndarray


# this run's flags (its Args and framework, as the scripts hand them to the Saver); the run's own
# are config.json's
FLAGS = {"framework": "linen", "learning_rate": 0.00025, "seed": 1, "num_iterations": 12}
FLAGS |= {"batch_size": 64, "save_every": 1, "env": "CartPole-v1", "env_backend": "gymnax"}
FLAGS |= {"model_size": "small", "dtype": "float32", "norm_obs": False}


def stopped_folder(tmp_path: Path, agents: int = 1, flags: dict = FLAGS) -> Path:
    """A run folder as a run of flags stopped after iteration 1 leaves it: config.json, a resume
    file, an events file, an "interrupted" summary.json, and agent_k folders with more agents."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    saver = saving.Saver(str(run_dir), flags, __file__)
    # a script's to_shared of its agents: (actor, critic, log_std), [(kernel, bias)] per MLP
    dense = [(np.ones((agents, 2, 1), np.float32), np.zeros((agents, 1), np.float32))]
    layers = (dense, dense, None)
    saver.iteration_done(layers, Runner(None, np.zeros(2)), [5.0] * agents, {"w": np.ones(2)})
    atomic.write_json(run_dir / "config.json", {**flags, "command": ["ppo_linen.py"]})
    atomic.write_json(run_dir / "summary.json", {"status": "interrupted"})
    (run_dir / "events.out.tfevents.1.host.1.0").write_bytes(b"events")
    for k in range(agents if agents > 1 else 0):
        (run_dir / f"agent_{k}").mkdir()
        (run_dir / f"agent_{k}" / "events.out.tfevents.1.host.1.0").write_bytes(b"events")
    # the run has ended: its folder's lock is lifted
    atomic.release_folder(run_dir)
    return run_dir


def resume_flags(run_dir: Path, **changes) -> dict:
    return {**FLAGS, "resume": str(run_dir), **changes}


def events_file(path: Path, steps, data: bytes = b"") -> Path:
    """An events file at path as a run writes it: a record per step, each an event with the
    iteration's time/iteration scalar; data: a last record of these bytes (framed as TFRecord)."""
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.proto.summary_pb2 import Summary
    from tensorboardX.record_writer import RecordWriter

    writer = RecordWriter(str(path))
    for step in steps:
        scalar = Summary(value=[Summary.Value(tag="time/iteration", simple_value=0.5)])
        writer.write(Event(step=step, wall_time=1.0, summary=scalar).SerializeToString())
    if data:
        writer.write(data)
    writer.close()
    return path


def stats_count(iterations: int, num_envs: int = 4, num_steps: int = 16) -> float:
    """env_normalize's observation count after that many iterations: 1e-4, the reset batch, every
    step's batch."""
    return 1e-4 + num_envs * (1 + num_steps * iterations)

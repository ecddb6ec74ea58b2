"""model.safetensors, as the ppo_*.py scripts write it with --save-model: a trained policy kept in
one format that the four frameworks share (part of benchback-rl). save writes it, whole or not at
all; checkpoint_file checks a path to read one; core/saving.py's Saver calls save when a run ends.

The layout (float32 tensors in JAX's layout, whatever framework trained them; each template's
to_shared writes its parameters in it, its from_shared reads them back):
    actor.{i}.kernel (in, out), actor.{i}.bias (out,)   i = 0 .. L: the L hidden layers, then head
    critic.{i}.kernel, critic.{i}.bias                   likewise, the head's out = 1
    log_std (num_actions,)                               continuous action spaces only
    obs_norm.mean, obs_norm.var (obs_dim,)               with --norm-obs: env_normalize's running
    obs_norm.count ()                                    statistics
and metadata (safetensors' header holds strings: a str as it is, anything else as JSON). A policy
gone NaN is not saved (check_finite).
"""

import json
import os
import stat
from typing import Optional

import numpy as np
import safetensors.numpy

from atomic import write_file

FORMAT, FILENAME = "benchback-rl/1", "model.safetensors"
OBS_NORM = ("mean", "var", "count")


# the keys whose value is kept as the string it is; the others are JSON
STRING_KEYS = {"format", "framework", "env", "env_backend", "model_size", "action_kind", "dtype"}
STRING_KEYS |= {"commit"}


def is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class BadCheckpoint(ValueError):
    """A checkpoint that cannot be used: one line, the path and what is wrong."""


# --------------------------------------------------------------------------------------- the layout
def architecture(params: dict) -> tuple[int, tuple[int, ...], int]:
    """(obs_dim, hidden sizes, num_actions) of a set of shared tensors (the actor's kernels)."""
    kernels = []
    while f"actor.{len(kernels)}.kernel" in params:
        kernels.append(params[f"actor.{len(kernels)}.kernel"])
    return kernels[0].shape[0], tuple(k.shape[1] for k in kernels[:-1]), kernels[-1].shape[1]


def shared(actor: list, critic: list, log_std=None) -> dict[str, np.ndarray]:
    """The shared tensors of an agent's two MLPs, each a list of (kernel (in, out), bias), and a
    Gaussian's log std (None for discrete actions): float32 NumPy copies, which the training that
    goes on cannot change. A template's from_shared is its inverse."""
    tensors = {} if log_std is None else {"log_std": log_std}
    for mlp, layers in (("actor", actor), ("critic", critic)):
        for i, (kernel, bias) in enumerate(layers):
            tensors[f"{mlp}.{i}.kernel"], tensors[f"{mlp}.{i}.bias"] = kernel, bias
    return {name: np.array(x, np.float32) for name, x in tensors.items()}


# ------------------------------------------------------------------------------------------ writing
def encode(meta: dict) -> dict[str, str]:
    return {key: value if key in STRING_KEYS else json.dumps(value) for key, value in meta.items()}


def check_finite(path, tensors: dict) -> None:
    """BadCheckpoint unless every tensor is finite: a policy gone NaN is nothing worth keeping."""
    for name, tensor in tensors.items():
        if bad := int(np.size(tensor) - np.isfinite(tensor).sum()):
            raise BadCheckpoint(f"{path}: tensor {name} holds {bad} non-finite values (NaN or inf)")


def save(path, params: dict, obs_norm: Optional[dict], meta: dict, given=None) -> None:
    """Writes the checkpoint at path, whole or not at all (atomic.write_file, never through a link
    below given: by default path's folder); meta: the metadata but format. BadCheckpoint, and
    nothing written, for a tensor that is not finite."""
    write_file(path, checkpoint_bytes(path, params, obs_norm, meta), given)


def checkpoint_bytes(path, params: dict, obs_norm: Optional[dict], meta: dict) -> bytes:
    """The bytes of the checkpoint file that save writes at path; BadCheckpoint (naming path) for a
    tensor that is not finite."""
    # copies in C order (np.ascontiguousarray would make the () count a (1,))
    tensors = {name: np.array(x, np.float32, order="C") for name, x in params.items()}
    if obs_norm is not None:
        tensors |= {f"obs_norm.{k}": np.array(obs_norm[k], np.float32, order="C") for k in OBS_NORM}
    header = encode({"format": FORMAT, **meta})
    check_finite(path, tensors)
    return safetensors.numpy.save(tensors, metadata=header)


def checkpoint_file(path) -> str:
    """path itself, or a run folder's model.safetensors; BadCheckpoint unless it is a regular file
    (a FIFO would block the read)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, FILENAME)
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise BadCheckpoint(f"{path}: cannot be read ({e.strerror})") from None
    if not stat.S_ISREG(mode):
        raise BadCheckpoint(f"{path}: not a regular file")
    return path

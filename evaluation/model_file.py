"""model.safetensors read back and checked whole, and its network in the shared layout (part of
benchback-rl): what evaluate.py, evaluation/share.py and benchmarks/policies.py load; the ppo_*.py
scripts write it with checkpoint.py (its layout is described there and in METHODOLOGY.md,
"Checkpoints"). Loading a policy needs the standard library, NumPy and safetensors only: no JAX, no
torch, no pickle, nothing executed on load.

    from evaluation import model_file
    # a run folder, or its model.safetensors
    ckpt = model_file.load("runs/CartPole-v1__nnx__small__cached_partial__1__1700000000")
    agent = policy.build_agent("nnx", model_file.layers_of(ckpt.params), continuous=False)
    obs = model_file.normalize_obs(obs, ckpt.obs_norm)

Anything wrong is checkpoint.BadCheckpoint, one line that names the file and what is wrong.
"""

import json
import math
from typing import NamedTuple, Optional

import numpy as np
import safetensors

from checkpoint import (
    FORMAT,
    OBS_NORM,
    STRING_KEYS,
    BadCheckpoint,
    architecture,
    check_finite,
    checkpoint_file,
    is_count,
)

FRAMEWORKS = ("linen", "nnx", "equinox", "torch")
# the scripts' own MODEL_SIZES (a test checks that they agree): a checkpoint's hidden layers must be
# its model_size's
MODEL_SIZES = {"small": (64, 64), "medium": (256, 256, 256), "large": (1024,) * 6}
CLIP, EPSILON = 10.0, 1e-8  # env_normalize.scale's (a test checks normalize_obs against it)


def is_str(value) -> bool:
    return isinstance(value, str) and value != ""


def is_finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# metadata key -> (what it must be, its check on the decoded value)
META_KEYS = {
    "format": (repr(FORMAT), lambda v: v == FORMAT),
    "framework": (f"one of {', '.join(FRAMEWORKS)}", lambda v: v in FRAMEWORKS),
    "env": ("an env id", is_str),
    "env_backend": ("gymnax or envpool", lambda v: v in ("gymnax", "envpool")),
    "model_size": (f"one of {', '.join(MODEL_SIZES)}", lambda v: v in MODEL_SIZES),
    "obs_shape": (
        "[obs_dim], a positive integer",
        lambda v: isinstance(v, list) and len(v) == 1 and is_count(v[0]),
    ),
    "action_kind": ("discrete or continuous", lambda v: v in ("discrete", "continuous")),
    "num_actions": ("a positive integer", is_count),
    "dtype": ("float32 or bfloat16", lambda v: v in ("float32", "bfloat16")),
    "norm_obs": ("true or false", lambda v: isinstance(v, bool)),
    "iteration": ("a positive integer (iterations completed)", is_count),
    "final_return": ("a finite number or null", lambda v: v is None or is_finite_number(v)),
    "commit": ("a git commit or unknown", is_str),
    "command": (
        "a JSON list of strings",
        lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v),
    ),
    "seed": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
}


class Checkpoint(NamedTuple):
    params: dict  # shared name -> float32 array: actor.*, critic.*, log_std (continuous)
    obs_norm: Optional[dict]  # "mean", "var", "count" (with --norm-obs), else None
    meta: dict  # META_KEYS, decoded: obs_shape a list, num_actions an int, norm_obs a bool, ...


def hidden_sizes(params: dict) -> tuple[int, ...]:
    return architecture(params)[1]


class Layers(NamedTuple):
    """A network of shared tensors, as evaluation/policy.py's build_agent builds each framework's
    from it."""

    obs_dim: int
    hidden_sizes: tuple[int, ...]
    num_actions: int
    actor: list  # [(kernel (in, out), bias), ...]: the hidden layers, then the head
    critic: list  # likewise, the head's out = 1
    log_std: Optional[np.ndarray]  # None for discrete actions


def layers_of(params: dict) -> Layers:
    """The network of shared tensors (load's params): shared's inverse."""
    obs_dim, hidden, num_actions = architecture(params)
    actor, critic = (
        [(params[f"{mlp}.{i}.kernel"], params[f"{mlp}.{i}.bias"]) for i in range(len(hidden) + 1)]
        for mlp in ("actor", "critic")
    )
    return Layers(obs_dim, hidden, num_actions, actor, critic, params.get("log_std"))


def expected_shapes(meta: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor a checkpoint with this (decoded, checked) metadata holds, and its shape."""
    obs_dim, num_actions = meta["obs_shape"][0], meta["num_actions"]
    shapes = {}
    for mlp, out_dim in (("actor", num_actions), ("critic", 1)):
        sizes = (obs_dim, *MODEL_SIZES[meta["model_size"]], out_dim)
        for i, (size_in, size_out) in enumerate(zip(sizes, sizes[1:])):
            shapes[f"{mlp}.{i}.kernel"] = (size_in, size_out)
            shapes[f"{mlp}.{i}.bias"] = (size_out,)
    if meta["action_kind"] == "continuous":
        shapes["log_std"] = (num_actions,)
    if meta["norm_obs"]:
        shapes |= {"obs_norm.mean": (obs_dim,), "obs_norm.var": (obs_dim,), "obs_norm.count": ()}
    return shapes


def normalize_obs(obs: np.ndarray, obs_norm: Optional[dict]) -> np.ndarray:
    """Flattened observations (..., obs_dim) as the network saw them in training:
    env_normalize.scale with the checkpoint's statistics (centred, divided by sqrt(var + 1e-8),
    clipped to +-10); as they are without."""
    if obs_norm is None:
        return obs
    return np.clip((obs - obs_norm["mean"]) / np.sqrt(obs_norm["var"] + EPSILON), -CLIP, CLIP)


# ------------------------------------------------------------------------------------------ reading
def decode(header: dict[str, str]) -> dict:
    """The metadata as Python values; a value that is not JSON where JSON is due stays the string it
    is (check_meta then names it)."""
    meta = {}
    for key, value in header.items():
        meta[key] = value
        if key not in STRING_KEYS:
            try:
                meta[key] = json.loads(value)
            except ValueError:
                pass
    return meta


def check_meta(path, header: Optional[dict]) -> dict:
    """The decoded metadata, every key of META_KEYS present and well-formed; else BadCheckpoint."""
    if not header or "format" not in header:
        raise BadCheckpoint(f"{path}: no {FORMAT} metadata: not a checkpoint of --save-model")
    meta = decode(header)
    for key, (rule, ok) in META_KEYS.items():
        if key not in meta:
            raise BadCheckpoint(f"{path}: the metadata has no {key}")
        try:
            good = ok(meta[key])
        except TypeError:  # an unhashable JSON value
            good = False
        if not good:
            raise BadCheckpoint(f"{path}: metadata {key} must be {rule}, not {header[key]!r}")
    return meta


def describe(names) -> str:
    return ", ".join(sorted(names)[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def check_tensors(path, meta: dict, tensors: dict) -> None:
    """The tensors exactly those the metadata implies (names, shapes), float32 and finite; else
    BadCheckpoint."""
    shapes = expected_shapes(meta)
    says = f"model_size {meta['model_size']}, obs_shape {meta['obs_shape']}"
    says += f", {meta['action_kind']} actions ({meta['num_actions']})"
    says += f", norm_obs {str(meta['norm_obs']).lower()}"
    if unknown := set(tensors) - set(shapes):
        raise BadCheckpoint(
            f"{path}: unknown tensors {describe(unknown)} (the metadata says {says})"
        )
    if missing := set(shapes) - set(tensors):
        raise BadCheckpoint(
            f"{path}: missing tensors {describe(missing)} (the metadata says {says})"
        )
    for name, shape in shapes.items():
        tensor = tensors[name]
        if tensor.dtype != np.float32:
            raise BadCheckpoint(f"{path}: tensor {name} is {tensor.dtype}, not float32")
        if tensor.shape != shape:
            raise BadCheckpoint(
                f"{path}: tensor {name} has shape {list(tensor.shape)}, not {list(shape)} as the "
                "metadata says"
                f" ({says})"
            )
    check_finite(path, {name: tensors[name] for name in shapes})
    if meta["norm_obs"] and (tensors["obs_norm.var"].min() < 0 or tensors["obs_norm.count"] <= 0):
        raise BadCheckpoint(
            f"{path}: obs_norm holds a negative variance or a count that is not positive"
        )


def load(
    path, obs_dim: Optional[int] = None, action_space: Optional[tuple[str, int]] = None
) -> Checkpoint:
    """The checkpoint at path (a file, or a run folder holding model.safetensors), checked whole: a
    readable safetensors file of this format, its metadata, its tensors those the metadata implies,
    float32 and finite. With obs_dim or action_space (("discrete" | "continuous", num_actions)), it
    must be a checkpoint of such an env. Anything else: BadCheckpoint, one line naming what is
    wrong."""
    path = checkpoint_file(path)
    try:
        with safetensors.safe_open(path, "np") as f:
            header = f.metadata()
            for name in f.keys():
                if (dtype := f.get_slice(name).get_dtype()) != "F32":
                    raise BadCheckpoint(f"{path}: tensor {name} is {dtype}, not F32 (float32)")
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except (safetensors.SafetensorError, OSError) as e:
        why = " ".join(str(e).split())  # one line
        raise BadCheckpoint(f"{path}: not a readable safetensors file ({why})") from None
    meta = check_meta(path, header)
    if "obs_norm.count" in tensors and tensors["obs_norm.count"].shape == (1,):
        tensors["obs_norm.count"] = tensors["obs_norm.count"].reshape(())  # a count saved as (1,)
    check_tensors(path, meta, tensors)
    if obs_dim is not None and meta["obs_shape"] != [obs_dim]:
        raise BadCheckpoint(
            f"{path}: a checkpoint of {meta['env']}, whose observations have "
            f"{meta['obs_shape'][0]} values, not"
            f" {obs_dim}: another env's"
        )
    actions = (meta["action_kind"], meta["num_actions"])
    if action_space is not None and actions != tuple(action_space):
        kind, num = action_space
        raise BadCheckpoint(
            f"{path}: a checkpoint of {meta['env']}, with {meta['num_actions']} "
            f"{meta['action_kind']} actions,"
            f" not {num} {kind}: another env's"
        )
    obs_norm = {k: tensors.pop(f"obs_norm.{k}") for k in OBS_NORM} if meta["norm_obs"] else None
    return Checkpoint(tensors, obs_norm, meta)

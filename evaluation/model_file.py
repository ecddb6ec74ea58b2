"""model.safetensors read back and checked whole, and its network in the shared layout (part of
benchback-rl): what evaluate.py, evaluation/share.py and benchmarks/policies.py load; the ppo_*.py
scripts write it with checkpoint.py (its layout is described there and in METHODOLOGY.md,
"Checkpoints"). Loading a policy runs no code of the file: no pickle, no torch; the header is read
and checked whole first (atomic.parse_json: bounded in size and depth), then only the tensors it
names and the metadata implies, of their expected shapes, are read; the env id is checked against
the project's fixed lists (unknown_env) before any library sees it.

    from evaluation import model_file
    # a run folder, or its model.safetensors
    ckpt = model_file.load("runs/CartPole-v1__nnx__small__cached_partial__1__1700000000")
    agent, actor = policy.from_shared("nnx", model_file.layers_of(ckpt.params), continuous=False)
    obs = model_file.normalize_obs(obs, ckpt.obs_norm)

Anything wrong is checkpoint.BadCheckpoint, one line that names the file and what is wrong.
"""

import hashlib
import math
import os
import re
from typing import NamedTuple, Optional

import numpy as np
import safetensors

import atomic
from checkpoint import (
    FILENAME,
    FORMAT,
    OBS_NORM,
    STRING_KEYS,
    BadCheckpoint,
    architecture,
    check_finite,
    checkpoint_file,
    is_count,
)
from core import env_ids

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
    # the file it was read from: its name and the sha256 of its bytes (eval.json names it by them)
    file: str = ""
    sha256: str = ""


def hidden_sizes(params: dict) -> tuple[int, ...]:
    return architecture(params)[1]


class Layers(NamedTuple):
    """A network of shared tensors, as each template's from_shared builds its Agent from it
    (evaluation/policy.py)."""

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


# ----------------------------------------------------------------------------------------- env ids
def unknown_env(env: str, backend: str) -> Optional[str]:
    """Why env (an env id, as a checkpoint's metadata or an option names it) on backend is not an
    env the scripts know, in words; None when it is one. Checked against fixed lists only
    (core/env_ids.py: gymnax's registered ids, the Craftax, Brax, Playground and envpool ones),
    never by handing the id to a library: gymnasium imports whatever module is named before a ':'
    of an id."""
    return env_ids.unknown(env, backend)


# ------------------------------------------------------------------------------------------ reading
def shown(value: str, limit: int = 80) -> str:
    """A value from the file, quoted, cut to limit characters: a message stays one short line."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(value):,} characters)"


def decode(header: dict[str, str]) -> dict:
    """The metadata as Python values, each JSON one read by atomic.parse_json (bounded in size and
    depth); a value that is not such JSON where JSON is due stays the string it is (check_meta then
    names it)."""
    meta = {}
    for key, value in header.items():
        meta[key] = value
        if key not in STRING_KEYS:
            try:
                meta[key] = atomic.parse_json(value, key)
            except atomic.BadJson:
                pass
    return meta


def check_meta(path, header: Optional[dict]) -> dict:
    """The decoded metadata, every key of META_KEYS present and well-formed, its env a known one
    (unknown_env); else BadCheckpoint."""
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
            raise BadCheckpoint(f"{path}: metadata {key} must be {rule}, not {shown(header[key])}")
    if why := unknown_env(meta["env"], meta["env_backend"]):
        raise BadCheckpoint(f"{path}: metadata env {shown(meta['env'])} {why}")
    return meta


def describe(names) -> str:
    names = [shown(name, 60)[1:-1] for name in names]
    return ", ".join(sorted(names)[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


class Header(NamedTuple):
    """A safetensors file's header, read and parsed, not yet checked against the metadata."""

    metadata: Optional[dict]  # "__metadata__": str -> str
    entries: dict  # tensor name -> {"dtype", "shape", "data_offsets"}
    data_bytes: int  # the bytes after the header: where the tensors' data_offsets point


def unreadable(path, why: str) -> BadCheckpoint:
    return BadCheckpoint(f"{path}: not a readable safetensors file ({why})")


def read_header(path) -> Header:
    """The header of the safetensors file at path (an 8-byte little-endian length, then as many
    bytes of JSON), read alone: no tensor is read. BadCheckpoint for a header longer than
    atomic.MAX_JSON_BYTES or than the file, or not a JSON object of tensor entries."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            prefix = f.read(8)
            length = int.from_bytes(prefix, "little")
            if len(prefix) < 8 or 8 + length > size:
                raise unreadable(
                    path, f"its header length says {length:,} bytes, the file has {size:,}"
                )
            if length > atomic.MAX_JSON_BYTES:
                raise unreadable(
                    path, f"a header of {length:,} bytes, more than {atomic.MAX_JSON_BYTES:,}"
                )
            text = f.read(length)
    except OSError as e:
        raise unreadable(path, e.strerror or str(e)) from None
    try:
        header = atomic.parse_json(text, "header")
    except atomic.BadJson as e:
        raise unreadable(path, str(e)) from None
    if not isinstance(header, dict):
        raise unreadable(path, "its header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (
        isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())
    ):
        raise unreadable(path, "its __metadata__ is not an object of strings")
    return Header(metadata, header, size - 8 - length)


def tensor_bytes(entry: dict, shape: tuple, data_bytes: int) -> Optional[str]:
    """Why a header entry of a float32 tensor of shape does not describe one within the data (None:
    it does)."""
    offsets = entry.get("data_offsets")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(is_int(o) for o in offsets)):
        return "has no data_offsets [begin, end]"
    begin, end = offsets
    if not 0 <= begin <= end <= data_bytes:
        return f"lies at bytes {begin:,} to {end:,} of data {data_bytes:,} bytes long"
    if end - begin != 4 * math.prod(shape):
        return f"holds {end - begin:,} bytes, not the {4 * math.prod(shape):,} of its shape"
    return None


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def entry_shape(entry) -> Optional[tuple]:
    shape = entry.get("shape") if isinstance(entry, dict) else None
    if isinstance(shape, list) and all(is_int(n) and n >= 0 for n in shape):
        return tuple(shape)
    return None


def check_entries(path, meta: dict, header: Header) -> dict[str, tuple[int, ...]]:
    """The tensors the header lists exactly those the metadata implies (names, shapes), each float32
    and inside the file; else BadCheckpoint. Returns each tensor's expected shape (obs_norm.count:
    (), which a file may hold as (1,))."""
    shapes = expected_shapes(meta)
    says = f"model_size {meta['model_size']}, obs_shape {meta['obs_shape']}"
    says += f", {meta['action_kind']} actions ({meta['num_actions']})"
    says += f", norm_obs {str(meta['norm_obs']).lower()}"
    if unknown := set(header.entries) - set(shapes):
        raise BadCheckpoint(
            f"{path}: unknown tensors {describe(unknown)} (the metadata says {says})"
        )
    if missing := set(shapes) - set(header.entries):
        raise BadCheckpoint(
            f"{path}: missing tensors {describe(missing)} (the metadata says {says})"
        )
    for name, shape in shapes.items():
        entry = header.entries[name]
        if (dtype := entry.get("dtype") if isinstance(entry, dict) else None) != "F32":
            raise BadCheckpoint(f"{path}: tensor {name} is {dtype}, not F32 (float32)")
        found = entry_shape(entry)
        if found is None:
            raise unreadable(path, f"tensor {name} has no shape")
        if found != shape and not (name == "obs_norm.count" and found == (1,)):
            raise BadCheckpoint(
                f"{path}: tensor {name} has shape {list(found)}, not {list(shape)} as the metadata "
                f"says ({says})"
            )
        if why := tensor_bytes(entry, found, header.data_bytes):
            raise unreadable(path, f"tensor {name} {why}")
    return shapes


def read_tensors(path, shapes: dict) -> dict[str, np.ndarray]:
    """The tensors of shapes (checked by check_entries), each read alone, in its expected shape."""
    try:
        with safetensors.safe_open(path, "np") as f:
            return {name: f.get_tensor(name).reshape(shape) for name, shape in shapes.items()}
    except (safetensors.SafetensorError, OSError) as e:
        raise unreadable(path, " ".join(str(e).split())) from None


def check_values(path, meta: dict, tensors: dict) -> None:
    """The tensors finite, the statistics possible; else BadCheckpoint."""
    check_finite(path, tensors)
    if meta["norm_obs"] and (tensors["obs_norm.var"].min() < 0 or tensors["obs_norm.count"] <= 0):
        raise BadCheckpoint(
            f"{path}: obs_norm holds a negative variance or a count that is not positive"
        )


def sha256_of(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(2**20):
            digest.update(chunk)
    return digest.hexdigest()


def check_space(path, meta, obs_dim: Optional[int], action_space) -> None:
    """BadCheckpoint when the checkpoint is not one of an env of obs_dim or action_space."""
    if obs_dim is not None and meta["obs_shape"] != [obs_dim]:
        raise BadCheckpoint(
            f"{path}: a checkpoint of {meta['env']}, whose observations have "
            f"{meta['obs_shape'][0]} values, not {obs_dim}: another env's"
        )
    actions = (meta["action_kind"], meta["num_actions"])
    if action_space is not None and actions != tuple(action_space):
        kind, num = action_space
        raise BadCheckpoint(
            f"{path}: a checkpoint of {meta['env']}, with {meta['num_actions']} "
            f"{meta['action_kind']} actions, not {num} {kind}: another env's"
        )


def agent_folders(path) -> list[str]:
    """The agent_k folders that hold a model.safetensors in a run folder of --num-agents N (the run
    folder holds none), in k's order; [] for anything else."""
    if not os.path.isdir(path) or os.path.lexists(os.path.join(path, FILENAME)):
        return []
    names = [
        name
        for name in os.listdir(path)
        if re.fullmatch(r"agent_[0-9]+", name)
        and os.path.lexists(os.path.join(path, name, FILENAME))
    ]
    return sorted(names, key=lambda name: int(name.removeprefix("agent_")))


def check_not_agents_run(path) -> None:
    """BadCheckpoint for a run folder of N agents: it names the agent_k folders to give instead."""
    agents = agent_folders(path)
    if not agents:
        return
    names = agents[0] if len(agents) == 1 else f"{agents[0]} to {agents[-1]}"
    raise BadCheckpoint(
        f"{path}: a run of {len(agents)} agents, each kept in its own folder ({names}) with its "
        f"{FILENAME}: give one of them, e.g. {os.path.join(path, agents[0])}"
    )


def load(
    path, obs_dim: Optional[int] = None, action_space: Optional[tuple[str, int]] = None
) -> Checkpoint:
    """The checkpoint at path (a file, or a run folder holding model.safetensors), checked before
    any tensor is read: its header (read_header), its metadata (check_meta, the env id among it),
    its tensors exactly those the metadata implies, float32, of their shapes (check_entries); then
    only those are read, and must be finite. With obs_dim or action_space (("discrete" |
    "continuous", num_actions)), it must be a checkpoint of such an env. Anything else:
    BadCheckpoint, one line naming what is wrong; for a run folder of N agents, the agent_k
    folders to give instead."""
    check_not_agents_run(path)
    path = checkpoint_file(path)
    header = read_header(path)
    meta = check_meta(path, header.metadata)
    shapes = check_entries(path, meta, header)
    check_space(path, meta, obs_dim, action_space)
    tensors = read_tensors(path, shapes)
    check_values(path, meta, tensors)
    obs_norm = {k: tensors.pop(f"obs_norm.{k}") for k in OBS_NORM} if meta["norm_obs"] else None
    return Checkpoint(tensors, obs_norm, meta, os.path.basename(path), sha256_of(path))

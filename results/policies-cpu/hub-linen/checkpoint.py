"""model.safetensors: a trained policy kept in one format that the four frameworks share (part of benchback-rl).

The one place that writes, reads and validates a checkpoint: `--save-model` in the ppo_*.py scripts (Saver), and
whatever loads one (evaluate.py). Each script adds only its own mapping of its parameters to the shared layout
(to_shared); evaluate.py's build_agent loads them back into each framework's network. The standard library, NumPy and safetensors only: no JAX, no torch, no pickle, nothing
executed on load. The scripts import it lazily, only with --save-model, so a copy of one that trains without it needs
no other file.

The layout (METHODOLOGY.md, "Checkpoints"): float32 tensors in JAX's layout, whatever framework trained them,
    actor.{i}.kernel (in, out), actor.{i}.bias (out,)   i = 0 .. L: the L hidden layers, then the head
    critic.{i}.kernel, critic.{i}.bias                   likewise, the head's out = 1
    log_std (num_actions,)                               continuous action spaces only
    obs_norm.mean, obs_norm.var (obs_dim,), obs_norm.count ()   with --norm-obs: env_normalize's running statistics
and the metadata of META_KEYS (safetensors' header holds strings: a str as it is, anything else as JSON).

    import checkpoint
    ckpt = checkpoint.load("runs/CartPole-v1__nnx__small__cached_partial__1__1700000000")  # or .../model.safetensors
    agent = evaluate.build_agent("nnx", checkpoint.layers_of(ckpt.params), continuous=False)
    obs = checkpoint.normalize_obs(obs, ckpt.obs_norm)
"""

import json
import math
import os
import stat
import subprocess
import sys
from typing import NamedTuple, Optional

import numpy as np
import safetensors
import safetensors.numpy

from atomic import write_file

FORMAT = "benchback-rl/1"
FILENAME = "model.safetensors"
FRAMEWORKS = ("linen", "nnx", "equinox", "torch")
# the scripts' own MODEL_SIZES (a test checks that they agree): a checkpoint's hidden layers must be its model_size's
MODEL_SIZES = {"small": (64, 64), "medium": (256, 256, 256), "large": (1024,) * 6}
OBS_NORM = ("mean", "var", "count")
CLIP, EPSILON = 10.0, 1e-8  # env_normalize.scale's (a test checks normalize_obs against it)


def is_str(value) -> bool:
    return isinstance(value, str) and value != ""


def is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


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
# the keys whose value is kept as the string it is; the others are JSON
STRING_KEYS = {
    "format",
    "framework",
    "env",
    "env_backend",
    "model_size",
    "action_kind",
    "dtype",
    "commit",
}


class BadCheckpoint(ValueError):
    """A checkpoint that cannot be used: one line, the path and what is wrong."""


class Checkpoint(NamedTuple):
    params: dict  # shared name -> float32 array: actor.*, critic.*, log_std (continuous)
    obs_norm: Optional[dict]  # "mean", "var", "count" (with --norm-obs), else None
    meta: dict  # META_KEYS, decoded: obs_shape a list, num_actions an int, norm_obs a bool, ...


# --------------------------------------------------------------------------------------------- the layout
def architecture(params: dict) -> tuple[int, tuple[int, ...], int]:
    """(obs_dim, hidden sizes, num_actions) of a set of shared tensors, read from the actor's kernels."""
    kernels = []
    while f"actor.{len(kernels)}.kernel" in params:
        kernels.append(params[f"actor.{len(kernels)}.kernel"])
    return kernels[0].shape[0], tuple(k.shape[1] for k in kernels[:-1]), kernels[-1].shape[1]


def hidden_sizes(params: dict) -> tuple[int, ...]:
    return architecture(params)[1]


def shared(actor: list, critic: list, log_std=None) -> dict[str, np.ndarray]:
    """The shared tensors of an agent's two MLPs, each a list of (kernel (in, out), bias), the hidden layers then
    the head, and a Gaussian's log std (None for discrete actions): float32 NumPy copies, which the training that
    goes on cannot change. Of what the scripts' to_shared returns; layers_of is its inverse."""
    tensors = {} if log_std is None else {"log_std": log_std}
    for mlp, layers in (("actor", actor), ("critic", critic)):
        for i, (kernel, bias) in enumerate(layers):
            tensors[f"{mlp}.{i}.kernel"], tensors[f"{mlp}.{i}.bias"] = kernel, bias
    return {name: np.array(x, np.float32) for name, x in tensors.items()}


class Layers(NamedTuple):
    """A network of shared tensors, as evaluate.build_agent builds each framework's from it."""

    obs_dim: int
    hidden_sizes: tuple[int, ...]
    num_actions: int
    actor: list  # [(kernel (in, out), bias), ...]: the hidden layers, then the head
    critic: list  # likewise, the head's out = 1
    log_std: Optional[np.ndarray]  # None for discrete actions


def layers_of(params: dict) -> Layers:
    """The network of shared tensors (checkpoint.load's params): shared's inverse."""
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
    """Flattened observations (..., obs_dim) as the network saw them in training: env_normalize.scale with the
    checkpoint's statistics (centred, divided by sqrt(var + 1e-8), clipped to +-10); as they are without."""
    if obs_norm is None:
        return obs
    return np.clip((obs - obs_norm["mean"]) / np.sqrt(obs_norm["var"] + EPSILON), -CLIP, CLIP)


# ------------------------------------------------------------------------------------------------- writing
def encode(meta: dict) -> dict[str, str]:
    return {key: value if key in STRING_KEYS else json.dumps(value) for key, value in meta.items()}


def save(path, params: dict, obs_norm: Optional[dict], meta: dict) -> None:
    """Writes the checkpoint at path, whole or not at all (atomic.write_file). meta: META_KEYS but format, as Python
    values. BadCheckpoint, and nothing written, when it would not load (checked by load's own checks)."""
    # copies in C order (np.ascontiguousarray would make the () count a (1,))
    tensors = {name: np.array(x, np.float32, order="C") for name, x in params.items()}
    if obs_norm is not None:
        tensors |= {f"obs_norm.{k}": np.array(obs_norm[k], np.float32, order="C") for k in OBS_NORM}
    header = encode({"format": FORMAT, **meta})
    check_tensors(path, check_meta(path, header), tensors)
    write_file(path, safetensors.numpy.save(tensors, metadata=header))


def commit_of(folder: str) -> str:
    """The git HEAD of the folder's repository, or "unknown" (no git, not a repository)."""
    try:
        done = subprocess.run(
            ["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"


def obs_norm_of(env_state) -> Optional[dict]:
    """The observations' running statistics in a runner's env state (env_normalize.NormalizeState), flattened as the
    network sees the observations, as float32 copies; None without --norm-obs."""
    stats = getattr(env_state, "obs_stats", None)
    if stats is None:
        return None
    flat = {"mean": stats.mean, "var": stats.var}
    return {k: np.array(v, np.float32).reshape(-1) for k, v in flat.items()} | {
        "count": np.array(stats.count, np.float32).reshape(())
    }


class Snapshot(NamedTuple):
    """What a Saver keeps of the last finished iteration."""

    params: dict  # shared(*the script's to_shared(agent))
    obs_norm: Optional[dict]
    returns: tuple  # each finished iteration's mean episodic return, NaN where no episode ended


class Saver:
    """--save-model: model.safetensors in the run folder when the run ends, however it ends (completed, stopped by a
    signal, failed): the policy of the last finished iteration, as iteration_done last received it; nothing when no
    iteration finished. A context manager around the training loop; it needs no bookkeeping."""

    def __init__(self, run_dir: str, config: dict, script: str):
        """config: the script's Args as a dict, with "framework"; script: its __file__ (its repository's commit)."""
        self.path = os.path.join(run_dir, FILENAME)
        self.config = config
        self.commit = commit_of(os.path.dirname(os.path.abspath(script)))
        self.command = list(sys.argv)
        # one attribute, replaced whole: a signal cannot stop the run between a policy and its count
        self.last = Snapshot({}, None, ())

    def iteration_done(self, layers: tuple, env_state, scalars: dict) -> None:
        """layers: the script's to_shared(agent) after the iteration's update (named and copied here: training goes
        on); env_state: the runner's (its observation statistics, with --norm-obs); scalars: the iteration's logged
        values."""
        episodic_return = float(scalars.get("charts/episodic_return", math.nan))
        params = shared(*layers)
        self.last = Snapshot(params, obs_norm_of(env_state), (*self.last.returns, episodic_return))

    def metadata(self) -> dict:
        params, _, returns = self.last
        obs_dim, _, num_actions = architecture(params)
        last_10 = [r for r in returns[-10:] if not math.isnan(r)]  # as summary.json's final_return
        keys = ("framework", "env", "env_backend", "model_size", "dtype", "norm_obs", "seed")
        return {key: self.config[key] for key in keys} | {
            "obs_shape": [obs_dim],
            "action_kind": "continuous" if "log_std" in params else "discrete",
            "num_actions": num_actions,
            "iteration": len(returns),
            "final_return": float(np.mean(last_10)) if last_10 else None,
            "commit": self.commit,
            "command": self.command,
        }

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if not self.last.returns:  # no iteration finished
            return
        try:
            save(self.path, self.last.params, self.last.obs_norm, self.metadata())
        except BadCheckpoint as e:
            # a policy gone NaN: nothing worth keeping; the run ends as it would have
            print(f"error: {FILENAME} not written: {e}", file=sys.stderr)
            return
        iteration = len(self.last.returns)
        print(f"{FILENAME}: the policy of iteration {iteration}, in {self.path}", flush=True)


# ------------------------------------------------------------------------------------------------- reading
def decode(header: dict[str, str]) -> dict:
    """The metadata as Python values; a value that is not JSON where JSON is due stays the string it is (check_meta
    then names it)."""
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
    """The tensors exactly those the metadata implies (names, shapes), float32 and finite; else BadCheckpoint."""
    shapes = expected_shapes(meta)
    says = f"model_size {meta['model_size']}, obs_shape {meta['obs_shape']}, {meta['action_kind']} actions"
    says += f" ({meta['num_actions']}), norm_obs {str(meta['norm_obs']).lower()}"
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
                f"{path}: tensor {name} has shape {list(tensor.shape)}, not {list(shape)} as the metadata says"
                f" ({says})"
            )
        if bad := int(np.size(tensor) - np.isfinite(tensor).sum()):
            raise BadCheckpoint(f"{path}: tensor {name} holds {bad} non-finite values (NaN or inf)")
    if meta["norm_obs"] and (tensors["obs_norm.var"].min() < 0 or tensors["obs_norm.count"] <= 0):
        raise BadCheckpoint(
            f"{path}: obs_norm holds a negative variance or a count that is not positive"
        )


def checkpoint_file(path) -> str:
    """path itself, or a run folder's model.safetensors; BadCheckpoint unless it is a regular file (a FIFO would
    block the read)."""
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


def load(
    path, obs_dim: Optional[int] = None, action_space: Optional[tuple[str, int]] = None
) -> Checkpoint:
    """The checkpoint at path (a file, or a run folder holding model.safetensors), checked whole: a readable
    safetensors file of this format, its metadata, its tensors those the metadata implies, float32 and finite. With
    obs_dim or action_space (("discrete" | "continuous", num_actions)), it must be a checkpoint of such an env.
    Anything else: BadCheckpoint, one line naming what is wrong."""
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
            f"{path}: a checkpoint of {meta['env']}, whose observations have {meta['obs_shape'][0]} values, not"
            f" {obs_dim}: another env's"
        )
    actions = (meta["action_kind"], meta["num_actions"])
    if action_space is not None and actions != tuple(action_space):
        kind, num = action_space
        raise BadCheckpoint(
            f"{path}: a checkpoint of {meta['env']}, with {meta['num_actions']} {meta['action_kind']} actions,"
            f" not {num} {kind}: another env's"
        )
    obs_norm = {k: tensors.pop(f"obs_norm.{k}") for k in OBS_NORM} if meta["norm_obs"] else None
    return Checkpoint(tensors, obs_norm, meta)

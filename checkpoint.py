"""model.safetensors and resume.safetensors, as the ppo_*.py scripts write them: a trained policy
kept in one format that the four frameworks share, and a run's whole state, to continue it (part of
benchback-rl).

The one place that writes them (Saver): `--save-model`, `--save-every` and `--resume` of the
ppo_*.py scripts, which import it lazily, only with those flags (a copy that saves needs it and
atomic.py beside it). evaluation/model_file.py loads a policy back and checks it whole.

A resume file holds the run's state as the script hands it over (parameters, Adam's state, the envs'
state with the normalisation statistics, the random keys) in jax.tree.leaves' order, with the
iterations completed, their returns and the run's flags; Saver.resume puts it back, bit for bit,
once the stopped run is read and checked whole (check_resumable, then its arrays against the fresh
state): a refused resume writes nothing. A run folder has one writer at a time (atomic.hold_folder).

The layout of model.safetensors (METHODOLOGY.md, "Checkpoints"; evaluation/model_file.py checks it):
float32 tensors in JAX's layout, whatever framework trained them,
    actor.{i}.kernel (in, out), actor.{i}.bias (out,)   i = 0 .. L: the L hidden layers, then head
    critic.{i}.kernel, critic.{i}.bias                   likewise, the head's out = 1
    log_std (num_actions,)                               continuous action spaces only
    obs_norm.mean, obs_norm.var (obs_dim,)               with --norm-obs: env_normalize's running
    obs_norm.count ()                                    statistics
and metadata (safetensors' header holds strings: a str as it is, anything else as JSON). A policy
gone NaN is not saved (check_finite).
"""

import json
import math
import os
import stat
import struct
import subprocess
import sys
from contextlib import suppress
from typing import NamedTuple, Optional

import numpy as np
import safetensors
import safetensors.numpy

from atomic import (
    MISSING,
    BadJson,
    check_inside,
    field,
    hold_folder,
    parse_json,
    read_json,
    write_file,
)

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
    goes on cannot change. evaluation/model_file.py's layers_of is its inverse."""
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


def commit_of(folder: str) -> str:
    """The git HEAD of the folder's repository, or "unknown" (no git, not a repository)."""
    try:
        done = subprocess.run(
            ["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"


class Snapshot(NamedTuple):
    """What a Saver keeps of the last finished iteration, a value per agent."""

    params: list  # each agent's shared tensors
    obs_norm: list  # each agent's observation statistics (env_normalize.obs_norms), or Nones
    returns: tuple  # each finished iteration's mean episodic returns, one per agent


class Saver:
    """--save-model: each agent's model.safetensors when the run ends, however it ends: the policy
    of the last finished iteration (none when none finished). --save-every: the run's whole state
    in resume.safetensors every N iterations; --resume: that state put back. A context manager
    around the training loop; it needs no bookkeeping."""

    def __init__(self, run_dir: str, config: dict, script: str):
        """config: the script's Args as a dict, with "framework"; script: its __file__ (for the
        commit). The run folder is held (atomic.hold_folder) for the process's life: one writer at a
        time. With --resume, the folder must be a stopped run of the same flags, read whole and
        checked here (check_resumable), before anything is written; Saver.resume checks its arrays
        against the run's fresh state."""
        self.run_dir = run_dir
        self.config = dict(config)  # as it is now: the bookkeeping adds the machine's keys later
        self.commit = commit_of(os.path.dirname(os.path.abspath(script)))
        self.command = list(sys.argv)
        # one attribute, replaced whole: a signal cannot stop the run between a policy and its count
        self.last = Snapshot([], [], ())
        self.resumed_at = ()
        self.saved = 0  # the iteration that the run folder's resume file holds
        self.stopped = None  # with --resume: the stopped run, as check_resumable read it
        # with --resume: the seconds the stopped run ran (time_before), time/elapsed's start
        self.before_s = 0.0
        if not config.get("resume"):
            hold_folder(run_dir, "--log-dir")
            return
        hold_folder(run_folder(run_dir), "--resume")
        self.stopped = check_resumable(run_dir, self.config)
        resume = self.stopped.resume
        self.last = Snapshot([], [], resume.returns)
        self.resumed_at = (*resume.resumed_at, resume.iteration)
        self.saved = resume.iteration
        self.before_s = time_before(run_dir, self.stopped.events)

    @property
    def iteration(self) -> int:
        """The iterations completed, those before a resume included."""
        return len(self.last.returns)

    def resume(self, training, runner, writer=None):
        """(training, runner, iterations completed): the run's fresh state with the resume file's
        arrays in it, bit for bit; BadCheckpoint, and the run folder as it was (the events file
        that writer made removed), when they are not of its shapes and dtypes. writer: the run's
        SummaryWriter, whose TensorBoard then hides what the stopped run logged after its save (a
        purge mark at the next iteration's step)."""
        # read and checked, its flags too, when this Saver was made
        stopped, path = self.stopped, resume_file(self.run_dir)
        try:
            training, runner = tree_with(path, (training, runner), stopped.arrays)
        except BadCheckpoint:
            if writer is not None:
                discard_events(writer)
            raise
        iteration = stopped.iteration
        # the first write: what the stopped run logged after its save is logged again, and
        # TensorBoard and tbparse then read each step once
        trim_events(self.run_dir, stopped.events, iteration * self.config["batch_size"])
        self.stopped = None  # its arrays and events are not needed again
        if writer is not None:
            from tensorboardX.proto.event_pb2 import Event, SessionLog

            step = (iteration + 1) * self.config["batch_size"]
            start = SessionLog(status=SessionLog.START)
            writer._get_file_writer().add_event(Event(step=step, session_log=start))
        print(f"{RESUME_FILE}: resumed after iteration {iteration}", flush=True)
        return training, runner, iteration

    def iteration_done(self, layers, runner, returns, training, writer=None) -> None:
        """After each iteration. layers: the script's to_shared of its agents, (actor, critic,
        log_std) with the agent axis first (copied here: training goes on); runner: the envs'
        state; returns: each agent's mean episodic return (NaN: none ended); training: the rest of
        the run's state (a pytree of JAX or NumPy arrays, or a function that returns one), saved
        with the runner every save_every iterations; writer: the run's SummaryWriter, whose events
        are all written out before each save, so that the events hold every iteration that the
        resume file holds, however the run ends after it."""
        returns = tuple(float(r) for r in returns)
        import jax

        # to the host once, then each agent's slice
        layers = jax.tree.map(np.asarray, layers)
        params = [shared(*jax.tree.map(lambda x: x[k], layers)) for k in range(len(returns))]
        obs_norm = [None] * len(returns)
        if hasattr(runner.env_state, "obs_stats"):  # --norm-obs: its statistics go with the policy
            import env_normalize

            obs_norm = env_normalize.obs_norms(runner.env_state.obs_stats, len(returns))
        self.last = Snapshot(params, obs_norm, (*self.last.returns, returns))
        every = self.config.get("save_every") or 0
        if every and self.iteration % every == 0:
            if callable(training):
                training = training()
            if writer is not None:
                flush_events(writer)
            flags = {k: v for k, v in self.config.items() if k not in WHERE_FLAGS}
            resume = Resume(self.iteration, self.last.returns, self.resumed_at, flags)
            save_resume(self.run_dir, tree_arrays((training, runner)), resume)
            self.saved = self.iteration
            print(f"{RESUME_FILE}: iteration {self.saved} saved in {self.run_dir}", flush=True)

    def path(self, k: int) -> str:
        """Agent k's model file: in the run folder, or its agent_k folder when there are more."""
        folder = self.run_dir if len(self.last.params) == 1 else f"{self.run_dir}/agent_{k}"
        return os.path.join(folder, FILENAME)

    def metadata(self, k: int) -> dict:
        """Agent k's metadata: its seed is the run's seed + k."""
        params, returns = self.last.params[k], [agent[k] for agent in self.last.returns]
        obs_dim, _, num_actions = architecture(params)
        last_10 = [r for r in returns[-10:] if not math.isnan(r)]  # as summary.json's final_return
        keys = ("framework", "env", "env_backend", "model_size", "dtype", "norm_obs")
        return {key: self.config[key] for key in keys} | {
            "seed": self.config["seed"] + k,
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

    def __exit__(self, exc_type, *exc_info):
        if exc_type is KeyboardInterrupt and self.saved:
            script = os.path.basename(self.command[0]) if self.command else "ppo_*.py"
            print(
                f"{RESUME_FILE} holds iteration {self.saved}: continue with `python {script} "
                f"--resume {self.run_dir}`",
                flush=True,
            )
        # no iteration finished (since the resume), or no --save-model
        if not self.last.params or not self.config.get("save_model", True):
            return
        for k, (params, obs_norm) in enumerate(zip(self.last.params, self.last.obs_norm)):
            path = self.path(k)
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                # never through a link in the run folder (an agent_k folder or the file itself)
                save(path, params, obs_norm, self.metadata(k), given=self.run_dir)
            except BadCheckpoint as e:
                # a policy gone NaN: nothing worth keeping; the run ends as it would have
                print(f"error: {FILENAME} not written: {e}", file=sys.stderr)
                continue
            print(f"{FILENAME}: the policy of iteration {self.iteration}, in {path}", flush=True)


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


# ------------------------------------------------------------------------------------------- resume
RESUME_FILE = "resume.safetensors"
RESUME_FORMAT = "benchback-rl-resume/2"
# the flags that a resumed run may give otherwise than the run it continues: where it runs from, how
# often it saves, where it reports; any other flag changes the training, and --resume refuses it
FREE_FLAGS = (
    *("resume", "save_every", "save_model", "log_dir", "device_name"),
    *("track", "wandb_project_name", "wandb_entity"),
)
# where a run runs: --resume names its folder, and its --log-dir is no longer read; a resume file
# keeps the run's other flags (a starter's copy, without config.json, continues with them)
WHERE_FLAGS = ("resume", "log_dir")


class Resume(NamedTuple):
    """What a resume file says of the run it saved (its tensors are read by Saver.resume only)."""

    iteration: int  # the iterations completed when it was saved
    returns: tuple  # each one's mean episodic return per agent, NaN where no episode ended
    resumed_at: tuple  # the iterations that the run was resumed after, one per resume, in order
    flags: dict  # the run's Args (but WHERE_FLAGS) and framework


class Stopped(NamedTuple):
    """A run folder that --resume may continue, as check_resumable read it, whole."""

    resume: Resume
    arrays: list  # the resume file's arrays, in order (Saver.resume checks them against the run's)
    events: dict  # each events file's path: its records (EventRecord), in order

    @property
    def iteration(self) -> int:
        return self.resume.iteration


def is_key(leaf) -> bool:
    import jax

    return hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def tree_arrays(tree) -> list[np.ndarray]:
    """The arrays of a pytree (JAX arrays, NumPy arrays) as NumPy copies, in jax.tree.leaves' order;
    a typed JAX random key as its key data."""
    import jax

    arrays = []
    for leaf in jax.tree.leaves(tree):
        if is_key(leaf):
            leaf = jax.random.key_data(leaf)
        arrays.append(np.array(leaf, order="C"))
    return arrays


def tree_with(path, like, arrays: list[np.ndarray]):
    """like (a pytree of this run's state) with its arrays replaced by the saved ones, bit for bit;
    BadCheckpoint when they are not of its shapes and dtypes (another env, size or framework)."""
    import jax

    leaves, treedef = jax.tree.flatten(like)
    if len(arrays) != len(leaves):
        raise BadCheckpoint(
            f"{path}: {len(arrays)} arrays, not the {len(leaves)} of this run's state"
        )
    restored = []
    for i, (leaf, array) in enumerate(zip(leaves, arrays)):
        data = np.asarray(jax.random.key_data(leaf) if is_key(leaf) else leaf)
        want = f"{data.dtype} {list(data.shape)}"
        # a Python number (a fresh TrainState's step) is saved as the array it has become
        same_kind = not hasattr(leaf, "dtype") and data.dtype.kind == array.dtype.kind
        if f"{array.dtype} {list(array.shape)}" != want and not same_kind:
            raise BadCheckpoint(
                f"{path}: array {i} is {array.dtype} {list(array.shape)}, not {want} as in this "
                "run's state"
            )
        if is_key(leaf):
            restored.append(jax.random.wrap_key_data(array, impl=jax.random.key_impl(leaf)))
        elif isinstance(leaf, np.ndarray):
            restored.append(array)
        else:
            restored.append(jax.device_put(array))
    return jax.tree.unflatten(treedef, restored)


def resume_file(run_dir) -> str:
    return os.path.join(os.fspath(run_dir), RESUME_FILE)


def save_resume(run_dir, arrays: list[np.ndarray], state: Resume) -> None:
    """The run's state (tree_arrays) and what Resume says of it, written whole or not at all."""
    header = {
        "format": RESUME_FORMAT,
        "iteration": json.dumps(state.iteration),
        # NaN (no episode ended) as null: JSON has no NaN
        "returns": json.dumps([[None if math.isnan(r) else r for r in rs] for rs in state.returns]),
        "resumed_at": json.dumps(list(state.resumed_at)),
        "flags": json.dumps(state.flags),
    }
    tensors = {str(i): array for i, array in enumerate(arrays)}
    data = safetensors.numpy.save(tensors, metadata=header)
    write_file(resume_file(run_dir), data, given=run_dir)


def read_resume(run_dir, flags: Optional[dict] = None, tensors: bool = False):
    """The Resume of a run folder's resume file (and, with tensors, its arrays in order);
    BadCheckpoint, one line, when there is none, it cannot be read, its metadata is not of the types
    save_resume writes, or flags (this run's Args) differ from the saved run's in a flag that
    changes the training (all but FREE_FLAGS)."""
    path = resume_file(run_folder(run_dir))
    if not os.path.lexists(path):
        raise BadCheckpoint(
            f"--resume {os.fspath(run_dir)}: no {RESUME_FILE} (a run saves one with --save-every)"
        )
    path = checkpoint_file(path)
    try:
        with safetensors.safe_open(path, "np") as f:
            header = f.metadata() or {}
            arrays = [f.get_tensor(str(i)) for i in range(len(f.keys()))] if tensors else []
        if header.get("format") != RESUME_FORMAT:
            raise ValueError(f"no {RESUME_FORMAT} metadata")
        state = resume_of(header, f"{path}'s metadata")
    except BadJson as e:
        raise BadCheckpoint(f"not a resume file of --save-every: {e}") from None
    except (safetensors.SafetensorError, OSError, ValueError, KeyError, TypeError) as e:
        why = " ".join(str(e).split())  # one line
        raise BadCheckpoint(f"{path}: not a resume file of --save-every ({why})") from None
    if not is_count(state.iteration) or len(state.returns) != state.iteration:
        raise BadCheckpoint(
            f"{path}: iteration {state.iteration!r} and {len(state.returns)} returns disagree"
        )
    flags = flags or {}
    trained_by = state.flags.get("framework")
    if "framework" in flags and trained_by != flags["framework"]:
        raise BadCheckpoint(
            f"--resume {os.fspath(run_dir)}: a {trained_by} run, not {flags['framework']}: resume "
            "it with its script"
        )
    for name, value in flags.items():
        if name not in FREE_FLAGS and state.flags.get(name, value) != value:
            saved = state.flags[name]
            flag = f"--{name.replace('_', '-')}"
            raise BadCheckpoint(
                f"--resume {os.fspath(run_dir)}: that run has {flag} {saved!r}, not {value!r}: "
                "give it its own flags"
            )
    return (state, arrays) if tensors else state


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def resume_of(header: dict, where: str) -> Resume:
    """The Resume that a resume file's metadata holds (each value JSON, as save_resume writes it,
    read by atomic's one reader); BadJson, one line, for a value missing or not of its type: the
    returns a list of lists of numbers or nulls, one per agent, the same number in each."""
    keys = ("iteration", "returns", "resumed_at", "flags")
    values = {key: parse_json(header[key], f"{where} {key}") for key in keys if key in header}
    iteration = field(values, "iteration", int, where)
    rows = field(values, "returns", list, where)
    resumed_at = field(values, "resumed_at", list, where)
    flags = field(values, "flags", dict, where)
    if not all(isinstance(row, list) for row in rows) or len({len(row) for row in rows}) > 1:
        raise BadJson(f"{where}: 'returns' is not a list of equally long lists (one per agent)")
    if not all(r is None or is_number(r) for row in rows for r in row):
        raise BadJson(f"{where}: 'returns' holds a value that is neither a number nor null")
    if not all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in resumed_at):
        raise BadJson(f"{where}: 'resumed_at' is not a list of positive integers")
    returns = tuple(tuple(math.nan if r is None else float(r) for r in row) for row in rows)
    return Resume(iteration, returns, tuple(resumed_at), flags)


# ------------------------------------------------------------------------ a run folder to resume
CONFIG_FILE, SUMMARY_FILE = "config.json", "summary.json"


def run_folder(run_dir) -> str:
    """run_dir, --resume's folder; BadCheckpoint (one line) unless it is a folder."""
    folder = os.fspath(run_dir)
    if not os.path.isdir(folder):
        raise BadCheckpoint(f"--resume {folder}: not a run folder")
    return folder


def check_run_folder(run_dir) -> None:
    """LinkRefused (one line) when an entry of the run folder (config.json, summary.json, the
    checkpoints, the events files, an agent_k folder) or of an agent_k folder is a symbolic link:
    the resumed run would write through it, or TensorBoard read through it. The folder itself, which
    the user named, may be one; W&B's folder (wandb/, its own links inside) is not looked into."""
    run_dir = os.fspath(run_dir)
    for entry in os.scandir(run_dir):
        check_inside(run_dir, entry.path, "--resume")
        if entry.name.startswith("agent_") and entry.is_dir(follow_symlinks=False):
            for inner in os.scandir(entry.path):
                check_inside(run_dir, inner.path, "--resume")


def read_run_json(run_dir, name: str) -> Optional[dict]:
    """The JSON object in the run folder's file name (atomic's one reader), None when there is none;
    BadCheckpoint (or BadJson), one line, when it is not a regular file or not such an object."""
    path = os.path.join(os.fspath(run_dir), name)
    if not os.path.lexists(path):
        return None
    return read_json(checkpoint_file(path))


def canonical(value) -> str:
    """value as JSON, keys sorted: the same for a flag and its copy in a JSON file (a tuple and its
    list), different for 1 and true or 1 and 1.0."""
    return json.dumps(value, sort_keys=True)


def check_framework(folder: str, flags: dict, config: dict) -> None:
    """BadCheckpoint unless the run of config (config.json's, or its resume file's flags) was
    trained by flags' framework (this script's): checked before any other flag, whose values
    another framework's script may not even take (--compile jit)."""
    ran = field(config, "framework", str, f"{folder}/{CONFIG_FILE}", default=None)
    if "framework" in flags and ran != flags["framework"]:
        raise BadCheckpoint(
            f"--resume {folder}: a {ran} run, not {flags['framework']}: resume it with its script"
        )


def check_flags(run_dir, flags: dict, config: dict, resume: Resume) -> None:
    """BadCheckpoint unless this run's flags (its Args and framework) are config.json's, which are
    the run's, in every flag that changes the training, and the resume file says the same."""
    folder = os.fspath(run_dir)
    check_framework(folder, flags, config)
    for name, value in flags.items():
        if name in FREE_FLAGS:
            continue
        flag = f"--{name.replace('_', '-')}"
        first = config.get(name, MISSING)
        if first is MISSING:
            raise BadCheckpoint(f"{folder}/{CONFIG_FILE}: no {name!r}: not a run of this script")
        if canonical(first) != canonical(value):
            raise BadCheckpoint(
                f"--resume {folder}: that run has {flag} {first!r}, not {value!r}: give it its own "
                "flags"
            )
        saved = resume.flags.get(name, MISSING)
        if saved is MISSING or canonical(saved) != canonical(first):
            saved = "none" if saved is MISSING else repr(saved)
            raise BadCheckpoint(
                f"{resume_file(folder)}: {flag} {saved}, where {CONFIG_FILE} has {first!r}: not "
                "this run's resume file"
            )


def model_iteration(folder: str) -> int:
    """The iteration whose policy the run folder's model file holds (its agent_0's with more
    agents), from its metadata; 0 when there is none or it cannot be read (it is never read back
    by a resume, which writes it anew)."""
    for path in (os.path.join(folder, FILENAME), os.path.join(folder, "agent_0", FILENAME)):
        try:
            with safetensors.safe_open(checkpoint_file(path), "np") as f:
                iteration = parse_json((f.metadata() or {}).get("iteration", "0"), path)
        except (BadCheckpoint, BadJson, safetensors.SafetensorError, OSError, ValueError):
            continue
        if is_count(iteration):
            return iteration
    return 0


def check_resumable(run_dir, flags: dict) -> Stopped:
    """The Stopped run of a run folder that --resume may continue with flags (this run's Args and
    framework), read whole and checked before anything is written: its resume file's metadata and
    arrays (every one finite), its events files (read_run_events). Else, one line, LinkRefused (a
    link in the folder, check_run_folder) or BadCheckpoint: no readable resume file or events, a
    config.json or resume file of another framework or other flags (check_flags, the framework
    first), an array not finite, or a run that completed: its summary.json says so, or its resume
    file, its model file or its events hold its last iteration (resuming it would only log it
    again and replace its summary). Without a config.json (a starter's copy writes none), the
    resume file's flags are the run's."""
    folder = run_folder(run_dir)
    check_run_folder(folder)
    config = read_run_json(folder, CONFIG_FILE)
    if config is not None:
        check_framework(folder, flags, config)
    resume, arrays = read_resume(folder, tensors=True)
    if config is None:
        # a starter's copy (tools/starter.py) writes no config.json: its resume file holds its flags
        config = resume.flags
    check_flags(folder, flags, config, resume)
    summary = read_run_json(folder, SUMMARY_FILE) or {}
    status = field(summary, "status", str, f"{folder}/{SUMMARY_FILE}", default=None)
    total = field(config, "num_iterations", int, f"{folder}/{CONFIG_FILE}")
    events = read_run_events(folder, config)
    batch = field(config, "batch_size", int, f"{folder}/{CONFIG_FILE}")
    logged = max((r.step for rs in events.values() for r in rs if r.iteration), default=0)
    done = max(resume.iteration, model_iteration(folder), logged // max(batch, 1))
    if status == "completed" or done >= total:
        raise BadCheckpoint(
            f"--resume {folder}: that run completed (its {total} iterations): there is nothing to "
            "resume, and it is left as it is"
        )
    check_finite(resume_file(folder), {str(i): array for i, array in enumerate(arrays)})
    return Stopped(resume, arrays, events)


def time_before(run_dir, events: Optional[dict] = None) -> float:
    """The seconds a stopped run ran before --resume continues it, from which the resumed process's
    time/elapsed and summary.json's total_s count on: its summary.json's total_s (every process's
    before, each resume adding its own), else (a process killed, no summary.json) the last
    time/elapsed its events hold up to its save (events: read_run_events' records, read here when
    None; the same before and after trim_events), else 0."""
    folder = run_folder(run_dir)
    total = (read_run_json(folder, SUMMARY_FILE) or {}).get("total_s")
    if isinstance(total, (int, float)) and not isinstance(total, bool) and math.isfinite(total):
        return max(float(total), 0.0)
    from tensorboardX.proto.event_pb2 import Event

    resume = read_resume(folder)
    config = read_run_json(folder, CONFIG_FILE) or resume.flags
    if events is None:
        events = read_run_events(folder, config)
    batch = config.get("batch_size") or config["num_envs"] * config["num_steps"]
    saved = resume.iteration * batch
    elapsed = [
        value.simple_value
        for records in events.values()
        for record in records
        if record.iteration and record.step <= saved
        for value in Event.FromString(record.data[12:-4]).summary.value
        if value.tag == "time/elapsed" and math.isfinite(value.simple_value)
    ]
    return max(elapsed, default=0.0)


# ------------------------------------------------------------------- --resume RUN_DIR alone
def given_flags(argv: list[str]) -> set[str]:
    """The fields that argv names: num_envs and anneal_lr for --num-envs=4 --no-anneal-lr."""
    names = set()
    for token in argv:
        if token.startswith("--"):
            name = token[2:].partition("=")[0].replace("-", "_")
            names |= {name, name.removeprefix("no_")}
    return names


def flag_tokens(name: str, value) -> list[str]:
    """The command line tokens that set field name to value, as tyro reads them: --flag=value, one
    token, so that a value that starts with dashes (--tag=--fast) is not read as a flag."""
    flag = f"--{name.replace('_', '-')}"
    if isinstance(value, bool):
        return [flag if value else f"--no-{name.replace('_', '-')}"]
    return [f"{flag}={'None' if value is None else value}"]


def resumed_argv(field_names, argv: list[str], framework: Optional[str] = None) -> list[str]:
    """argv (a script's arguments) with, after --resume RUN_DIR, the run's own flags put first for
    every field of field_names that argv leaves out, so that `--resume RUN_DIR` alone continues the
    run as it was started (saving as it did); a flag given that differs is refused later
    (check_resumable) unless it is free (FREE_FLAGS: --save-every, --track, ...). The run's
    flags are its config.json's, else (a starter's copy) its resume file's. argv as it is without
    --resume; BadCheckpoint or LinkRefused, one line, for a folder that cannot be read so, or
    (framework: the script's) a run of another framework, before its flags are read as this
    script's."""
    resume = None
    for i, token in enumerate(argv):
        if token.startswith("--resume="):
            resume = token.partition("=")[2]
        elif token == "--resume" and i + 1 < len(argv):
            resume = argv[i + 1]
    if resume is None:
        return argv
    check_run_folder(run_folder(resume))
    config = read_run_json(resume, CONFIG_FILE) or read_resume(resume).flags
    if framework is not None:
        check_framework(resume, {"framework": framework}, config)
    given = given_flags(argv)
    own = []
    for name in field_names:
        # the free flags too (--save-every, --save-model: the run keeps saving), but where it
        # runs: --resume names it, and its --log-dir is no longer read
        if name not in WHERE_FLAGS and name not in given and name in config:
            own += flag_tokens(name, config[name])
    return own + argv


# ------------------------------------------------------------------ a resumed run's events files
EVENTS_PREFIX = "events.out.tfevents."


# the most bytes an events file of a run may hold: its first events (the file's version, the
# hyperparameters' table, a resume's purge mark), then per iteration and agent the scalars of one
# event (~0.6 kB for a run, ~0.5 kB more per agent of several under agent_k/)
EVENTS_HEAD_BYTES, EVENTS_ITERATION_BYTES = 2**16, 2**11


class EventRecord(NamedTuple):
    """A record of an events file: the step of its event, whether it logged an iteration (its
    time/iteration), and its bytes."""

    step: int
    iteration: bool
    data: bytes


def event_records(data: bytes) -> list[bytes]:
    """The records of an events file (TFRecord: a length, its CRC, the data, its CRC), each as its
    bytes; a record cut short (the run stopped while writing it) is left out."""
    records, at = [], 0
    while at + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[at : at + 8])
        end = at + 12 + length + 4
        if end > len(data):
            break
        records.append(data[at:end])
        at = end
    return records


def events_paths(run_dir: str) -> list[str]:
    """The events files of a run folder and of its agent_k folders (an older run's)."""
    folders = [run_dir] + [
        entry.path
        for entry in os.scandir(run_dir)
        if entry.name.startswith("agent_") and entry.is_dir(follow_symlinks=False)
    ]
    return [
        entry.path
        for folder in folders
        for entry in sorted(os.scandir(folder), key=lambda entry: entry.name)
        if entry.name.startswith(EVENTS_PREFIX) and entry.is_file()
    ]


def read_run_events(run_dir: str, config: dict) -> dict[str, list[EventRecord]]:
    """Each events file of a run folder (events_paths): its records, each read as the TensorBoard
    event it must be. BadCheckpoint, one line, for a file larger than the run's config (its
    num_iterations, num_agents) can have logged (read no further), or a record that is no event."""
    from google.protobuf.message import DecodeError
    from tensorboardX.proto.event_pb2 import Event

    agents = config.get("num_agents", 1)
    agents = agents if is_count(agents) else 1
    bound = EVENTS_HEAD_BYTES + EVENTS_ITERATION_BYTES * config["num_iterations"] * (1 + agents)
    events = {}
    for path in events_paths(run_dir):
        with open(path, "rb") as f:
            data = f.read(bound + 1)
        if len(data) > bound:
            raise BadCheckpoint(
                f"{path}: more than the {bound:,} bytes that a run of {config['num_iterations']} "
                "iterations logs: not this run's events"
            )
        records = []
        for record in event_records(data):
            try:
                event = Event.FromString(record[12:-4])
            except DecodeError:
                raise BadCheckpoint(
                    f"{path}: a record that is not a TensorBoard event: not this run's events"
                ) from None
            logged = any(value.tag == "time/iteration" for value in event.summary.value)
            records.append(EventRecord(event.step, logged, record))
        events[path] = records
    return events


def trim_events(run_dir, events: dict[str, list[EventRecord]], last_step: int) -> None:
    """Rewrites each events file of events (read_run_events: those of the stopped run, not the
    resumed one's) without the events logged after last_step (the resume file's): the resumed run
    logs them again, and each step is then read once (tbparse, TensorBoard). Never through a link
    (write_file)."""
    for path, records in events.items():
        kept = [record.data for record in records if record.step <= last_step]
        if len(kept) < len(records):
            write_file(path, b"".join(kept), given=os.fspath(run_dir))


# ---------------------------------------------------------------- the run's SummaryWriter
def flush_events(writer) -> None:
    """Every event given to writer (a tensorboardX SummaryWriter) written to its file: its flush()
    writes the file's buffer out, but not the events still queued for its thread (which writes
    them out every flush_secs, 120 s). The thread is stopped once it has written them all (stop()
    queues its mark after them), the file flushed, and a new thread started on the same queue.
    OSError when the thread has died (a full disk): no save then, the events would lack it."""
    events = writer._get_file_writer().event_writer
    worker = events._worker
    if not worker.is_alive():
        raise OSError(
            f"{RESUME_FILE} not saved: the TensorBoard writer stopped (is the disk full?)"
        )
    worker.stop()
    events.flush()
    again = type(worker)(events._event_queue, events._ev_writer, events._flush_secs)
    again.start()
    events._worker = again


def discard_events(writer) -> None:
    """writer (a tensorboardX SummaryWriter) closed, and the events file it made removed: a resume
    refused leaves the run folder as it was."""
    path = writer._get_file_writer().event_writer._ev_writer._file_name
    writer.close()
    with suppress(FileNotFoundError):
        os.remove(path)

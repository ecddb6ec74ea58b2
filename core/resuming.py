"""resume.safetensors, as the ppo_*.py scripts write it with --save-every, and --resume, which
continues the run it saved (part of benchback-rl).

A resume file holds the run's state as the script hands it over (parameters, Adam's state, the envs'
state with the normalisation statistics, the random keys) in jax.tree.leaves' order, with the
iterations completed, their returns and the run's flags. A stopped run is read and checked whole
(check_resumable) before anything is written, and core/saving.py's Saver puts its arrays back, bit
for bit, once they match the fresh state's: a refused resume writes nothing. `--resume RUN_DIR`
alone takes the run's own flags (resumed_argv).
"""

import json
import math
import os
from typing import NamedTuple, Optional

import numpy as np
import safetensors
import safetensors.numpy

from atomic import MISSING, BadJson, check_inside, field, parse_json, read_json, write_file
from checkpoint import FILENAME, BadCheckpoint, check_finite, checkpoint_file, is_count
from core.event_files import event_of, read_run_events

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
        if first is MISSING and value is None and name not in resume.flags:
            # a flag the run predates (added to Args since), not given now: the same training
            continue
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
        # a starter's copy writes no config.json: its resume file holds its flags
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


def time_before(run_dir, events: dict) -> float:
    """The seconds a stopped run ran before --resume continues it, from which the resumed process's
    time/elapsed and summary.json's total_s count on: its summary.json's total_s (every process's
    before, each resume adding its own), else (a process killed, no summary.json) the last
    time/elapsed its events hold up to its save (events: read_run_events' records, the same before
    and after trim_events), else 0."""
    folder = run_folder(run_dir)
    total = (read_run_json(folder, SUMMARY_FILE) or {}).get("total_s")
    if isinstance(total, (int, float)) and not isinstance(total, bool) and math.isfinite(total):
        return max(float(total), 0.0)
    resume = read_resume(folder)
    config = read_run_json(folder, CONFIG_FILE) or resume.flags
    batch = config.get("batch_size") or config["num_envs"] * config["num_steps"]
    saved = resume.iteration * batch
    elapsed = [
        value.simple_value
        for records in events.values()
        for record in records
        if record.iteration and record.step <= saved
        for value in event_of(record.data).summary.value
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

"""eval.json, the record of evaluate.py's evaluations (part of benchback-rl): beside a checkpoint,
and in a Hub folder.

    eval_file.check(path, flag)                  # before anything runs: ValueError, one line
    record = eval_file.merged(path, result)      # the record with result in it

Each entry names its checkpoint (its file name and the sha256 of its bytes): two checkpoints in one
folder, or evaluated in the same framework, mode, episodes and seed, each keep their entry; an
evaluation replaces only an entry of the same checkpoint, framework, mode, episodes and seed (the
same evaluation, run again). An eval.json is read by the one JSON reader (atomic.read_json), and
one that is not this tool's, or whose evaluations are not a list of objects, is refused before
anything runs, and so is one whose entry names its checkpoint otherwise than as an object of a file
name and a sha256 (strings): the merge compares them.
"""

from pathlib import Path

import atomic

TOOL = "evaluate.py"  # the writer of eval.json, its "written_by"
NAME = "eval.json"
KEY = ("framework", "mode", "episodes", "seed")


def checkpoint_entry(ckpt) -> dict:
    """How an entry names its checkpoint (model_file.load's): file name and sha256."""
    return {"file": ckpt.file, "sha256": ckpt.sha256}


def entry_key(entry: dict) -> tuple:
    named = entry.get("checkpoint")
    named = (named.get("file"), named.get("sha256")) if isinstance(named, dict) else None
    return (named, *(repr(entry.get(name)) for name in KEY))


def entries(path: Path, flag: str = NAME) -> list[dict]:
    """The evaluations of the eval.json at path ([] when there is none); ValueError (one line) when
    it is not this tool's, its evaluations are not a list of objects, or one names its checkpoint
    otherwise than checkpoint_entry does (strings, or none of them)."""
    if not path.exists():
        return []
    where = f"{flag} {path}"
    record = atomic.read_json(path)
    if record.get(atomic.WRITTEN_BY) != TOOL:
        raise atomic.OutputRefused(f"{where} was not written by {TOOL}: move it away")
    evaluations = atomic.field(record, "evaluations", list, where)
    for i, entry in enumerate(evaluations):
        if not isinstance(entry, dict):
            raise atomic.BadJson(
                f"{where}: evaluation {i} is {atomic.json_type(entry)}, not an object: move it away"
            )
        named = entry.get("checkpoint")
        if named is not None and not (
            isinstance(named, dict)
            and all(isinstance(named.get(k), (str, type(None))) for k in ("file", "sha256"))
        ):
            raise atomic.BadJson(
                f"{where}: evaluation {i}'s checkpoint is not an object of a file name and a "
                "sha256 (strings): move it away"
            )
    return evaluations


def check(path: Path, flag: str = NAME) -> None:
    """ValueError (one line) unless an eval.json can be written at path: not through a link in its
    folder, absent or this tool's, with a list of evaluations (objects)."""
    path = Path(path)
    atomic.check_inside(path.parent, path, flag)
    atomic.check_record(TOOL, path, flag)
    entries(path, flag)


def merged(path: Path, result: dict, earlier: tuple = ()) -> dict:
    """eval.json's record with result in it: the entries at path (and earlier ones, from another
    eval.json), less one of result's own key; nothing else is dropped."""
    kept = {}
    for entry in [*earlier, *entries(Path(path)), result]:
        kept.pop(entry_key(entry), None)
        kept[entry_key(entry)] = entry
    return {atomic.WRITTEN_BY: TOOL, "evaluations": list(kept.values())}

"""The env-timing file (sweep/env_timing.py's JSON) read and checked one way by each of its readers:
bench.sh's check (sweep/env_timing_check.py), sweep/env_timing.py's --out and the analysis
(analysis/loading.py). Standard library only.

A file is usable when it is a JSON object whose "envs" object holds, per env label, an object with a
"ratio" (the env's cost, which the analysis uses) whose step costs ("ratio", "ms_per_step",
"us_per_env_step") are finite positive numbers where given, as are its sizes ("obs_dim",
"num_actions", "num_envs") unless null (num_actions is null for an action that is not one vector).
Anything else is refused (BadTiming) in one line naming the file and, for a bad value, the env, the
field and the value: a cost of -1, 0, NaN or "x" would order and scale the envs by nonsense. The
file is read by atomic.py's one JSON reader: at most atomic.MAX_JSON_BYTES, nested at most
atomic.MAX_JSON_DEPTH deep (a hostile file is one line, never a traceback)."""

import json
import math
from pathlib import Path

from atomic import MAX_JSON_BYTES, BadJson, parse_json

REQUIRED = "ratio"  # what the analysis orders and scales the envs by
COSTS = (REQUIRED, "ms_per_step", "us_per_env_step")  # where given: positive numbers
SIZES = ("obs_dim", "num_actions", "num_envs")  # where given: null or positive numbers


class BadTiming(ValueError):
    """An env-timing file that cannot be used; the message, one line, names the file and what is
    wrong (reason)."""

    def __init__(self, path, reason: str):
        super().__init__(f"env timing {path}: {reason}")
        self.reason = reason


def positive_number(value) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def check_env(path, env: str, entry) -> None:
    if not isinstance(entry, dict):
        raise BadTiming(path, f"env {env!r} holds {json.dumps(entry)[:40]}, not an object of times")
    for field in COSTS + SIZES:
        given = field in entry or field == REQUIRED
        value = entry.get(field)
        if given and (field in COSTS or value is not None) and not positive_number(value):
            shown = "no value" if field not in entry else json.dumps(value)[:40]
            raise BadTiming(path, f"env {env!r} has {field} {shown}, not a positive number")


def loads(text: str | bytes, path) -> dict:
    """The env-timing file of this text (read from path); BadTiming unless it is usable."""
    try:
        data = parse_json(text, "its text")
    except BadJson as e:
        raise BadTiming(path, str(e).removeprefix("its text: ")) from None
    envs = data.get("envs") if isinstance(data, dict) else None
    if not isinstance(envs, dict) or not envs:
        raise BadTiming(path, 'no "envs" object of times')
    for env, entry in envs.items():
        check_env(path, env, entry)
    return data


def read(path) -> dict:
    """The env-timing file at path; BadTiming unless it can be read and is usable
    (FileNotFoundError: none)."""
    if Path(path).exists() and not Path(path).is_file():
        # a FIFO would be waited on forever
        raise BadTiming(path, "not a regular file")
    try:
        with open(path, "rb") as f:
            # one byte more than the reader takes: a larger file is refused, not read whole
            text = f.read(MAX_JSON_BYTES + 1)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise BadTiming(path, f"cannot be read ({e.strerror or e})") from None
    return loads(text, path)

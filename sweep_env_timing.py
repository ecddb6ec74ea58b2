"""Whether a sweep must (re)measure the env step costs (env_timing.py) before its runs, and of which envs.

bench.sh asks before a sweep (sweep.py env-timing): a file measured on another host or device, or lacking an env of
the sweep, or with envpool's threads other than the sweep's, is measured again.
"""

import json
import socket
from pathlib import Path
from typing import Optional

import study

# the scripts' --env-threads default (and env_timing.py's): 0, envpool's own (one thread per core)
DEFAULT_ENV_THREADS = 0


def env_timing_reason(
    path: Path, envs: list[str], env_threads: Optional[int] = None
) -> Optional[tuple[str, list[str]]]:
    """Why the env timing at `path` must be (re)done on this machine, and which envs to time; None if usable.

    Usable: it exists, comes from this hostname and device (jax.devices()[0].device_kind), holds every env (label)
    of the sweep, and, when the sweep has envpool envs, timed them with the sweep's --env-threads (`env_threads`;
    None: the scripts' default, 0: envpool's own). Re-timing on the same machine keeps the envs the file already has."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return f"{path} is missing", envs
    except (OSError, ValueError) as e:
        return f"{path} is unreadable ({e})", envs
    host = socket.gethostname()
    if data.get("hostname") != host:
        return f"{path} comes from host {data.get('hostname')!r}, this is {host!r}", envs
    import jax  # only when the hostname matches: importing it takes a few seconds

    device = jax.devices()[0].device_kind
    if data.get("device") != device:
        return (
            f"{path} was measured on {data.get('device')!r}, this machine's device is {device!r}",
            envs,
        )
    have = list(data.get("envs") or {})
    missing = [env for env in envs if env not in have]
    if missing:
        return f"{path} lacks {', '.join(missing)}", list(dict.fromkeys(have + envs))
    threads, timed = (
        env_threads or DEFAULT_ENV_THREADS,
        data.get("env_threads", DEFAULT_ENV_THREADS),
    )
    if timed != threads and any(study.split_label(env)[1] == "envpool" for env in envs):
        return (
            f"{path} timed the envpool envs with {timed} threads, this sweep's runs get {threads}",
            have,
        )
    return None

"""Whether a sweep must (re)measure the env step costs (sweep/env_timing.py) before its runs, and of
which envs.

bench.sh asks before a sweep (python -m sweep env-timing): a file measured on another host or
device, or lacking an env of the sweep, or with envpool's threads other than the sweep's, is
measured again, with every env it holds (a file never ends up with fewer envs: one machine's times
of the envs of both). A file that is not a usable env-timing file (core/env_timing_file.py: a step
cost of -1, 0, NaN or "x") is refused (BadTiming, one line naming the file, the env and the value):
bench.sh then says so and goes on without env timing, the file left as it is."""

import socket
from pathlib import Path
from typing import Optional

from core import env_timing_file, study

# the scripts' --env-threads default (and sweep/env_timing.py's): 0, envpool's own (one thread per
# core)
DEFAULT_ENV_THREADS = 0


def env_timing_reason(
    path: Path, envs: list[str], env_threads: Optional[int] = None
) -> Optional[tuple[str, list[str]]]:
    """Why the env timing at `path` must be (re)done on this machine, and which envs to time; None
    if usable.

    Usable: it exists, comes from this hostname and device (jax.devices()[0].device_kind), holds
    every env (label) of the sweep, and, when the sweep has envpool envs, timed them with the
    sweep's --env-threads (`env_threads`; None: the scripts' default, 0: envpool's own). Re-timing
    keeps the envs the file already has. BadTiming when the file is not a usable env-timing file."""
    try:
        data = env_timing_file.read(path)
    except FileNotFoundError:
        return f"{path} is missing", envs
    have = list(data["envs"])
    every = list(dict.fromkeys(have + envs))
    kept = f" (timing here its {len(have)} envs and the sweep's: the file keeps every env)"
    host = socket.gethostname()
    if data.get("hostname") != host:
        return f"{path} comes from host {data.get('hostname')!r}, this is {host!r}{kept}", every
    import jax  # only when the hostname matches: importing it takes a few seconds

    device = jax.devices()[0].device_kind
    if data.get("device") != device:
        return (
            f"{path} was measured on {data.get('device')!r}, this machine's device is "
            f"{device!r}{kept}",
            every,
        )
    missing = [env for env in envs if env not in have]
    if missing:
        return f"{path} lacks {', '.join(missing)}", every
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

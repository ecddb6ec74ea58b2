"""Files written whole or not at all: the one atomic write of benchback-rl (the standard library only).

Every file the project writes goes through write_file (or write_json): the scripts' config.json and summary.json
(bookkeeping.py), env_timing.json, the benchmarks' JSON files, and the analysis' tables, figures, REPORT.md, README
blocks and learning curves (analysis/output.py). It imports nothing of the project and no third-party package, so
that the scripts, env_timing.py, benchmarks/ and the analysis can all import it.

A write goes into a temporary file beside the file it replaces, is given that file's mode (and, where allowed, its
owner; a new file gets the usual mode under the umask), and is renamed over it: the file is never half-written, and
the temporary file is removed on any failure. SIGINT and SIGTERM are held back meanwhile, so that an interruption
never leaves the temporary file behind. A path that is a symbolic link is written through it: the write lands in
the file it leads to, the link stays.
"""

import json
import math
import os
import signal
import stat
import tempfile
from contextlib import contextmanager, suppress
from pathlib import Path


def target(path) -> Path:
    """The file a write to path lands in: path itself (absolute), or the file its symbolic links lead to."""
    return Path(os.path.realpath(path))


@contextmanager
def deferred_signals():
    """SIGINT and SIGTERM held back (delivered after the block), so that a replacement is never cut in two."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def old_stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def keep_owner_and_mode(path: Path, old: os.stat_result | None) -> None:
    """path given the mode (and, where allowed, the owner) of the file it replaces; a new file's usual mode."""
    os.chmod(path, stat.S_IMODE(old.st_mode) if old else 0o666 & ~current_umask())
    if old and (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
        # only root may give a file away: others keep theirs
        with suppress(OSError):
            os.chown(path, old.st_uid, old.st_gid)


def write_file(path, data: str | bytes) -> None:
    """data written to the file at path, through its links: into a temporary file beside that file, with its
    mode, renamed over it; the temporary file is removed on any failure."""
    real = target(path)
    data = data.encode() if isinstance(data, str) else data
    with deferred_signals():
        fd, partial = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".partial", dir=real.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            keep_owner_and_mode(Path(partial), old_stat(real))
            os.replace(partial, real)
        except BaseException:
            with suppress(OSError):
                os.unlink(partial)
            raise


def finite_json(value):
    """value with every NaN or infinity replaced by None, so that the JSON holds null: NaN is not JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    return value


def write_json(path, data) -> None:
    """data as indented JSON (NaN and infinities as null), written by write_file."""
    write_file(path, json.dumps(finite_json(data), indent=2, allow_nan=False))

"""Files written whole or not at all: the one atomic write of benchback-rl (the standard library
only).

Every file the project writes goes through write_file (or write_json): the scripts' model and
resume files, config.json and summary.json, the env timing, the benchmarks' JSON files, and the
analysis' tables, figures, reports and learning curves. It imports the standard library only, so
that the scripts, the sweep, the benchmarks and the analysis can all import it.

A write goes into a temporary file beside the file it replaces, is given that file's mode (and,
where allowed, its owner; a new file gets the usual mode under the umask), and is renamed over it:
the file is never half-written, and the temporary file is removed on any failure. The stop signals
(SIGINT, SIGTERM, SIGHUP: STOP_SIGNALS) are held back meanwhile, so that an interruption never
leaves the temporary file behind.

A write never goes through a symbolic link it did not make (check_inside, LinkRefused): the part of
a path that the user named (an --out file or folder, a --log-dir, --resume's run folder, a Hub
folder) is followed wherever it leads, but below it no folder and no file may be a link. By
default the file's folder is that part, and the file itself must not be a link: a tool writing
into a folder that holds links to files elsewhere (a Hugging Face cache, a planted link) refuses
rather than replacing what they lead to.

Every JSON file and header the project reads goes through one reader (read_json, parse_json,
field): at most MAX_JSON_BYTES and MAX_JSON_DEPTH levels, and typed where a field is used, so that
a hostile or broken file is refused in one line (BadJson) rather than a traceback or a memory blow.

A tool replaces only files it wrote (check_replaceable, the one check of every output path: the
env timing's --out, the benchmarks' outputs, the quick start's): before anything is
measured, a file already at an output path is read and recognised as this tool's (by the mark it
wrote: "written_by" in a JSON object, a first line MARK in a Markdown file; or by its content), else
refused in one line (OutputRefused) and left as it is. A benchmark's outputs are a JSON record and
its table beside it as .md (check_outputs, write_outputs).

A run folder has one writer at a time (hold_folder): a run, its resume or an evaluation holds an
fcntl.flock on the folder's LOCK_FILE while it writes there, and a second one is refused in one line
(FolderBusy); the kernel lifts the lock when its process ends, however it ends, so that a killed run
leaves no stale lock.

The stop signals: one policy for every entry point (the ppo_*.py scripts through their
bookkeeping, the evaluation and the plots), since a stop must come where nothing is cut in two.

    stop = Interrupts("the next iteration boundary")
    with stop.installed():        # SIGINT, SIGTERM and SIGHUP caught from here on
        try:
            main()                # which calls check_stop() at its safe points
        except KeyboardInterrupt:
            ...                   # its cleanup: partial files removed, a summary written
            stop.exit("interrupted")    # one line, exit code 130

SIGINT, SIGTERM and SIGHUP (STOP_SIGNALS) stop the process at its next safe point: a signal sets a
flag, and check_stop() raises KeyboardInterrupt there. A second signal stops it at once, wherever
the main thread is (a compile may take minutes). Code that is safe to stop anywhere (no JAX: the
analysis) takes the first signal at once (at_checks=False), as Python takes a Ctrl-C. No
traceback either way: the entry point cleans up and ends with one line and exit code 130.

A stop raised at once inside JAX may leave a compile running on XLA's threads, which the
interpreter's exit then races: a segfault (exit -11), in 4 of 6 trials of two SIGINTs during
iteration 0's compile (issue 79). Such a process ends with os._exit once its own cleanup is done.

A SIGHUP inherited ignored (nohup) stays ignored: the user asked the process to outlive its
terminal. SIGINT and SIGTERM are caught even when inherited ignored, so that a run started in the
background of a script still stops. The stop signals are held where a stop would cut something in
two (atomic.deferred_signals: delivered when the block ends), and from an entry point's first
lines (hold_stop_signals(): the ppo_*.py scripts, the evaluation and the plots, whose imports
take seconds) until its policy is installed, which takes what came meanwhile as a first signal:
the first check stops it.
"""

import errno
import fcntl
import json
import math
import os
import signal
import stat
import sys
import tempfile
import threading
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Callable, NoReturn, Optional

# ------------------------------------------------------------------------------- stop signals
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_CODE = 130  # a shell's code for a process stopped by SIGINT

# the policy installed in this process (installed()), which check_stop() asks
current: Optional["Interrupts"] = None


def hold_stop_signals() -> None:
    """The stop signals held from here on: a script's first lines, until its policy is installed
    (which delivers what came meanwhile)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def caught() -> list[signal.Signals]:
    """The stop signals this process catches: SIGHUP only when it was not inherited ignored."""
    return [s for s in STOP_SIGNALS if s != signal.SIGHUP or signal.getsignal(s) != signal.SIG_IGN]


def check_stop() -> None:
    """A safe point: KeyboardInterrupt when a stop signal came (nothing without a policy)."""
    if current is not None:
        current.check()


class Interrupts:
    def __init__(
        self,
        at: str = "the next safe point",
        at_checks: bool = True,
        armed: Callable[[], bool] = lambda: True,
        received: Optional[list] = None,
    ):
        """at: where a signal stops the process, in the line that answers it; at_checks: False for
        code that may stop anywhere (the first signal at once); armed: whether a second signal may
        stop it at once now (the bookkeeping's: not before the run starts); received: the list that
        the signals' names are appended to (summary.json's)."""
        self.at = at
        self.at_checks = at_checks
        self.armed = armed
        self.received = [] if received is None else received
        self.raised = False  # a stop raised by the handler, not at a check: at most one
        # while install() delivers the signals held since the process's first lines: noted only
        # (the code's first check, or run()'s, stops it)
        self.installing = False

    def on_signal(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        self.received.append(name)
        at_once = not self.at_checks or (len(self.received) > 1 and self.armed())
        at_once = at_once and not self.installing
        if self.raised:
            os.write(2, f"{name}: already stopping\n".encode())
            return
        if not at_once:
            if self.at_checks:
                os.write(2, f"{name}: stopping at {self.at} (again: at once)\n".encode())
            return
        self.raised = True
        if self.at_checks:
            os.write(2, f"{name}: stopping at once\n".encode())
        raise KeyboardInterrupt

    def check(self) -> None:
        if self.received:
            raise KeyboardInterrupt

    def install(self) -> None:
        """The handler of the stop signals from here on (a process's whole life), and those held
        since its first lines (hold) delivered."""
        global current
        for signum in caught():
            signal.signal(signum, self.on_signal)
        current = self
        self.installing = True
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        finally:
            self.installing = False

    @contextmanager
    def installed(self, for_good: bool = False):
        """install() for a block, then the handlers and the mask as they were (a tool's main()
        called by other code: a test's); for_good: left installed (the process's own command line,
        whose exit must stay caught). Outside the main thread, no policy: Python lets only the main
        thread set a handler."""
        global current
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        if for_good:
            self.install()
            yield self
            return
        before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        outer = current
        self.install()
        try:
            yield self
        finally:
            for signum, handler in before.items():
                signal.signal(signum, handler)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            current = outer

    def said(self) -> str:
        """The signals received, for the last line: " by SIGTERM", or "" (none: Python's own
        KeyboardInterrupt)."""
        return f" by {', '.join(dict.fromkeys(self.received))}" if self.received else ""

    def exit(self, line: Optional[str] = None) -> NoReturn:
        """The process's end after a stop, its cleanup done: line (on stderr), exit code 130; by
        os._exit when the stop was raised at once in code that checks, with JAX loaded (a compile
        may still run). The stop signals are ignored from here: the interpreter's exit puts back the
        default action of a caught one, and one more signal would end the process by it, not with
        130."""
        for signum in caught():
            signal.signal(signum, signal.SIG_IGN)
        if line:
            print(line, file=sys.stderr)
        # (at_checks=False: code that is safe to stop anywhere, and runs no JAX)
        if self.raised and self.at_checks and "jax" in sys.modules:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_CODE)
        sys.exit(EXIT_CODE)

    def run(self, main: Callable[[], object], tool: str, left: str, for_good: bool = False):
        """main() under the policy, for a tool: its result, or after a stop (main's own cleanup
        done as the KeyboardInterrupt went up) one line, "tool: interrupted by SIGTERM; left", and
        exit code 130. for_good: as installed()'s."""
        with self.installed(for_good):
            try:
                self.check()  # a signal held since the process's first lines
                return main()
            except KeyboardInterrupt:
                self.exit(f"{tool}: interrupted{self.said()}; {left}")


# ------------------------------------------------------------------------------ atomic writes
def target(path) -> Path:
    """The file a write to path lands in: path itself (absolute), or the file its symbolic links
    lead to."""
    return Path(os.path.realpath(path))


@contextmanager
def deferred_signals():
    """The stop signals held back (delivered after the block), so that a replacement is never cut
    in two."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
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
    """path given the mode (and, where allowed, the owner) of the file it replaces; a new file's
    usual mode."""
    os.chmod(path, stat.S_IMODE(old.st_mode) if old else 0o666 & ~current_umask())
    if old and (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
        # only root may give a file away: others keep theirs
        with suppress(OSError):
            os.chown(path, old.st_uid, old.st_gid)


class OutputRefused(ValueError):
    """An output path that holds what the tool did not write, or that it cannot write: the message,
    one line, names the option, the path and why."""


class LinkRefused(OutputRefused, OSError):
    """A path below the part the user named that is a symbolic link: one line. An OSError too, so
    that a run whose folder gets a link planted mid-run fails with its summary.json (exit 1)."""


def check_inside(given, path, flag: str = "") -> Path:
    """The file that a write to path lands in; LinkRefused when a folder or the file of path below
    given (the part the user named, followed wherever it leads) is a symbolic link. path is given
    itself, or lies below it."""
    given = Path(given)
    path = Path(path)
    try:
        below = path.relative_to(given)
    except ValueError:
        raise ValueError(f"{path} does not lie in {given}") from None
    current = given
    for part in below.parts:
        current = current / part
        if os.path.islink(current):
            named = f"{flag} " if flag else ""
            raise LinkRefused(
                f"{named}{current} is a symbolic link: benchback-rl writes no file through a link "
                f"it did not make; remove the link or give another {flag or 'path'}"
            )
    return Path(os.path.realpath(given)) / below


LOCK_FILE = ".lock"  # in a run folder: its writer's lock (the analysis reads no such file)
# the folders this process holds (hold_folder): each one's real path -> its lock file's descriptor
HELD: dict[str, int] = {}


class FolderBusy(ValueError):
    """A folder that another process writes in (it holds the folder's lock): one line."""


def hold_folder(folder, who: str) -> bool:
    """Makes folder this process's to write in until it ends (or release_folder): an exclusive
    fcntl.flock on its LOCK_FILE, made if missing, never through a link. The kernel lifts it when
    the process ends, however it ends: a killed run leaves no stale lock. FolderBusy (one line, who
    first: "--resume", "--log-dir") when another process holds it; LinkRefused when the lock file
    is a link. True when this call took the lock, False when this process held it already or the
    file system keeps no locks (some network mounts: the folder is then used unlocked)."""
    real = os.path.realpath(folder)
    if real in HELD:
        return False
    path = os.path.join(real, LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        raise LinkRefused(
            f"{who} {path} is a symbolic link: benchback-rl writes no file through a link it did "
            "not make; remove the link"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise FolderBusy(
            f"{who} {folder}: another process writes there (a run, a resume or an evaluation holds "
            f"its {LOCK_FILE}): wait for it to end"
        ) from None
    except OSError:  # no locks on this file system
        os.close(fd)
        return False
    HELD[real] = fd
    return True


def release_folder(folder) -> None:
    """The lock of hold_folder lifted before the process ends (a tool that called it in a process
    that goes on: evaluate.main in the tests)."""
    fd = HELD.pop(os.path.realpath(folder), None)
    if fd is not None:
        os.close(fd)


def write_file(path, data: str | bytes, given=None) -> None:
    """data written to the file at path: into a temporary file beside that file, with its mode,
    renamed over it; the temporary file is removed on any failure. given: the part of path the user
    named, followed (default: path's folder, so that path itself must not be a link); LinkRefused,
    and nothing written, when a part of path below it is a link (check_inside)."""
    path = Path(path)
    real = check_inside(path.parent if given is None else given, path)
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
    """value with every NaN or infinity replaced by None, so that the JSON holds null: NaN is not
    JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    return value


def write_json(path, data, given=None) -> None:
    """data as indented JSON (NaN and infinities as null), written by write_file."""
    write_file(path, json.dumps(finite_json(data), indent=2, allow_nan=False), given)


# ------------------------------------------------------------------------------ the one JSON reader
MAX_JSON_BYTES = 2**20  # no file the project reads as JSON is near this: config.json is ~3 kB
MAX_JSON_DEPTH = 32  # the deepest the project writes is 4


class BadJson(ValueError):
    """A JSON file or text that cannot be used: one line, where it is and what is wrong."""


def json_depth(value) -> int:
    """How deep lists and objects nest in value (a number or a string: 0), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in item)
    return deepest


def parse_json(text: str | bytes, where: str, max_bytes: int = MAX_JSON_BYTES):
    """The value of a JSON text; BadJson (one line, naming where) when it is longer than max_bytes,
    nested deeper than MAX_JSON_DEPTH, not JSON, or holds NaN or infinities (not JSON)."""
    if len(text) > max_bytes:
        size = f"{len(text):,} bytes"
        raise BadJson(f"{where}: {size}, more than the {max_bytes:,} a JSON file here may hold")
    if isinstance(text, bytes):
        try:
            text = text.decode()
        except UnicodeDecodeError as e:
            raise BadJson(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    too_deep = BadJson(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(text, parse_constant=refuse_constant)
    except RecursionError:
        raise too_deep from None
    except ValueError as e:
        raise BadJson(f"{where}: not JSON ({str(e).splitlines()[0]})") from None
    if json_depth(value) > MAX_JSON_DEPTH:
        raise too_deep
    return value


def refuse_constant(name: str):
    """NaN, Infinity and -Infinity are not JSON: the project writes null for them."""
    raise ValueError(f"{name} is not JSON")


def read_json(path, kind: type | tuple = dict, max_bytes: int = MAX_JSON_BYTES):
    """The JSON value in the file at path, of type kind (an object by default); BadJson, one line,
    when the file is larger than max_bytes (not read), not JSON, too deep or of another type.
    OSError when it cannot be read."""
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    value = parse_json(data, str(path), max_bytes)
    if not isinstance(value, kind):
        raise BadJson(f"{path}: holds {json_type(value)}, not {json_type_name(kind)}")
    return value


JSON_TYPES = {dict: "an object", list: "a list", str: "a string", bool: "true or false"}
JSON_TYPES |= {int: "an integer", float: "a number", type(None): "null"}


def json_type(value) -> str:
    """What a JSON value is, in words."""
    return JSON_TYPES.get(type(value), type(value).__name__)


def json_type_name(kind: type | tuple) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(JSON_TYPES.get(k, k.__name__) for k in kinds)


MISSING = object()


def field(data: dict, key: str, kind: type | tuple, where: str, default=MISSING):
    """data[key] when it is of type kind (bool is never taken for an int; an int is a float);
    BadJson, one line naming where and key, when it is not; default when the key is absent and a
    default is given."""
    if key not in data:
        if default is not MISSING:
            return default
        raise BadJson(f"{where}: no {key!r}")
    value = data[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds and int not in kinds:
        kinds = (*kinds, int)
    wrong_bool = isinstance(value, bool) and bool not in kinds
    if wrong_bool or not isinstance(value, kinds):
        raise BadJson(f"{where}: {key!r} is {json_type(value)}, not {json_type_name(kind)}")
    return value


# ---------------------------------------------------------------------------- files this tool wrote
WRITTEN_BY = "written_by"  # the key of a JSON record that names the tool that wrote it


def md_mark(tool: str) -> str:
    """The first line of a Markdown file that tool wrote (an HTML comment: not shown)."""
    return f"<!-- written by {tool}; its next run with the same --out replaces this file -->"


def check_writable_folder(flag: str, path, real: Path) -> None:
    """OutputRefused unless a file can be made in the folder of real, or in its nearest folder that
    exists (where the missing ones would be made): a file made there and removed at once tells, for
    root too."""
    folder = next(p for p in real.parents if p.exists())
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise OutputRefused(
            f"{flag} {path}: cannot write into {folder} ({e.strerror or e})"
        ) from None


def check_replaceable(
    flag: str,
    path,
    why_not: Callable[[str], Optional[str]],
    read: Callable = Path.read_text,
    given=None,
) -> None:
    """OutputRefused unless a write to path (through its links) makes a new file in a folder that is
    or can be made writable, or replaces a regular file of whose text (or bytes:
    read=Path.read_bytes) why_not says nothing (None: this tool's own; else why not). given: the
    part the user named (path itself by default); LinkRefused for a link below it."""
    real = check_inside(path if given is None else given, path, flag)
    check_writable_folder(flag, path, real)
    if not os.path.lexists(real):
        return
    if not real.is_file():
        raise OutputRefused(
            f"{flag} {path} is not a regular file: nothing is run; give a file name"
        )
    try:
        reason = why_not(read(real))
    except (OSError, UnicodeDecodeError) as e:
        reason = f"cannot be read ({e})"
    if reason:
        raise OutputRefused(
            f"{flag} {path} {reason}: it is left as it is and nothing is run; give another {flag} "
            "or move that file away"
        )


def json_by(tool: str) -> Callable[[str], Optional[str]]:
    """why_not for a JSON record of tool: an object whose "written_by" is tool."""

    def why_not(text: str) -> Optional[str]:
        try:
            data = parse_json(text, str(tool))
        except BadJson:
            return f"is not JSON, so not written by {tool}"
        if not isinstance(data, dict) or data.get(WRITTEN_BY) != tool:
            return f'holds no "{WRITTEN_BY}": "{tool}", so {tool} did not write it'
        return None

    return why_not


def md_by(tool: str) -> Callable[[str], Optional[str]]:
    """why_not for a Markdown file of tool: its first line is md_mark(tool)."""

    def why_not(text: str) -> Optional[str]:
        if text.partition("\n")[0] != md_mark(tool):
            return f"does not start with the mark of {tool}, so {tool} did not write it"
        return None

    return why_not


def table_path(out) -> Path:
    """Where a benchmark's table goes: beside its JSON record, as .md."""
    return Path(out).with_suffix(".md")


def check_record(tool: str, out, flag: str = "--out") -> None:
    """OutputRefused unless tool's JSON record can be written at out without replacing a file tool
    did not write."""
    check_replaceable(flag, out, json_by(tool))


def check_outputs(tool: str, out, flag: str = "--out") -> None:
    """OutputRefused unless out names a .json file and both it and the .md beside it can be written
    without replacing a file that tool did not write."""
    if Path(out).suffix != ".json":
        raise OutputRefused(f"{flag} {out}: give a .json file (the table goes beside it as .md)")
    check_record(tool, out, flag)
    # the table is the tool's, beside the record: never written through a link (write_outputs)
    check_replaceable(flag, table_path(out), md_by(tool), given=Path(out).parent)


def write_record(tool: str, out, record, given=None) -> None:
    """A benchmark's record as JSON at out, marked as tool's (a list of rows goes under "rows").
    given: as write_file's (out itself when the user named it: --out, followed as check_record
    checked it)."""
    record = record if isinstance(record, dict) else {"rows": record}
    check_inside(Path(out).parent if given is None else given, out).parent.mkdir(
        parents=True, exist_ok=True
    )
    write_json(out, {WRITTEN_BY: tool, **record}, given)


def write_outputs(tool: str, out, record, table: str, given=None) -> None:
    """A benchmark's record at out (JSON) and its table beside it (.md), each marked as tool's.
    given: the record's, as write_record's; the table's folder is followed, the table never."""
    write_record(tool, out, record, given)
    write_file(table_path(out), f"{md_mark(tool)}\n{table.rstrip()}\n")

"""The one signal policy of benchback-rl's entry points (the standard library only): the ppo_*.py
scripts (through bookkeeping.py), evaluate.py, plot_results.py and a starter copy
(tools/starter.py carries this file into it).

    stop = Interrupts("the next iteration boundary")
    with stop.installed():        # SIGINT, SIGTERM and SIGHUP caught from here on
        try:
            main()                # which calls check() at its safe points
        except KeyboardInterrupt:
            ...                   # its cleanup: partial files removed, a summary written
            stop.exit("interrupted")    # one line, exit code 130

SIGINT, SIGTERM and SIGHUP (STOP_SIGNALS) stop the process at its next safe point: a signal sets a
flag, and check() raises KeyboardInterrupt there. A second signal stops it at once, wherever the
main thread is (a compile may take minutes). Code that is safe to stop anywhere (no JAX: the
analysis) takes the first signal at once (at_checks=False), as Python takes a Ctrl-C. No
traceback either way: the entry point cleans up and ends with one line and exit code 130.

A stop raised at once inside JAX may leave a compile running on XLA's threads, which the
interpreter's exit then races: a segfault (exit -11), in 4 of 6 trials of two SIGINTs during
iteration 0's compile (issue 79). Such a process ends with os._exit once its own cleanup is done.

A SIGHUP inherited ignored (nohup) stays ignored: the user asked the process to outlive its
terminal. SIGINT and SIGTERM are caught even when inherited ignored, so that a run started in the
background of a script still stops. The stop signals are held where a stop would cut something in
two (atomic.deferred_signals: delivered when the block ends), and from an entry point's first
lines (hold(): the ppo_*.py scripts, evaluate.py and plot_results.py, whose imports take seconds)
until its policy is installed, which takes what came meanwhile as a first signal: the first check
stops it.
"""

import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Callable, NoReturn, Optional

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_CODE = 130  # a shell's code for a process stopped by SIGINT

# the policy installed in this process (installed()), which check() asks
current: Optional["Interrupts"] = None


def hold() -> None:
    """The stop signals held from here on: a script's first lines, until its policy is installed
    (which delivers what came meanwhile)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def caught() -> list[signal.Signals]:
    """The stop signals this process catches: SIGHUP only when it was not inherited ignored."""
    return [s for s in STOP_SIGNALS if s != signal.SIGHUP or signal.getsignal(s) != signal.SIG_IGN]


def check() -> None:
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

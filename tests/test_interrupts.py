"""The one signal policy of the entry points (atomic.py, issue 79): SIGINT, SIGTERM and SIGHUP
stop at the next safe point (check), a second signal at once, and a stop raised inside JAX's
compile ends by os._exit, never by a segfault; evaluate.py's stops. In this process, but for the
compile (plot_results.py's: tests/test_plot_results_inputs.py; the scripts':
tests/test_bookkeeping.py, tests/test_scripts.py)."""

import os
import signal
import subprocess
import sys
import threading

import pytest
from script_runs import save_untrained

import atomic
import evaluate
from evaluation import policy, video
from helpers import ROOT, read_json


@pytest.fixture
def sighup_ignored():
    """SIGHUP ignored, as nohup starts a command."""
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGHUP, before)


def test_a_signal_stops_at_the_next_check_a_second_at_once(sighup_ignored):
    """The first signal is noted and stops the code at its next check(); a second stops it at once
    (a KeyboardInterrupt where the main thread is); a third, during the cleanup, stops nothing. A
    SIGHUP inherited ignored (nohup) stays ignored; the handlers are put back after the block."""
    before = signal.getsignal(signal.SIGTERM)
    stop = atomic.Interrupts("the next step")
    with stop.installed():
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == stop.on_signal
        atomic.check_stop()  # nothing came: nothing happens
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.received == ["SIGTERM"]
        with pytest.raises(KeyboardInterrupt):
            atomic.check_stop()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.received == ["SIGTERM", "SIGINT", "SIGINT"] and stop.raised
    assert signal.getsignal(signal.SIGTERM) == before and atomic.current is None
    atomic.check_stop()  # no policy: nothing


@pytest.fixture
def sighup_default():
    """SIGHUP at its default action, as a shell starts a command in the foreground (not nohup)."""
    before = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGHUP, before)


def test_sighup_is_caught_unless_inherited_ignored(sighup_default):
    with atomic.Interrupts().installed() as stop:
        assert signal.getsignal(signal.SIGHUP) == stop.on_signal
        os.kill(os.getpid(), signal.SIGHUP)
        with pytest.raises(KeyboardInterrupt):
            atomic.check_stop()


def test_code_safe_to_stop_anywhere_stops_at_the_first_signal_once():
    """at_checks=False (the analysis): the first signal raises at once, as Python's Ctrl-C; a
    second, during the cleanup that follows, does not."""
    with atomic.Interrupts(at_checks=False).installed() as stop:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.received == ["SIGTERM", "SIGTERM"]


# two SIGINTs 0.5 s apart once the function's lowering is done (jax.monitoring's event), so that the
# second lands in XLA's backend compile: 300 unrolled ops compile for seconds (38 s on a busy
# 2-core CPU)
COMPILE_STOPPED = """
import os, signal, threading
import jax, jax.monitoring, jax.numpy as jnp
import atomic

def lowered(event, duration_s, **metadata):
    if event.endswith("jaxpr_to_mlir_module_duration") and "long" in str(metadata):
        os.kill(os.getpid(), signal.SIGINT)
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()

def long(x):
    for i in range(300):
        x = jnp.sin(x) @ x + i
    return x

jax.monitoring.register_event_duration_secs_listener(lowered)
stop = atomic.Interrupts("the next check")
stop.install()
try:
    jax.jit(long)(jnp.ones((64, 64))).block_until_ready()
    print("compiled: the signals came too late")
except KeyboardInterrupt:
    stop.exit("interrupted")
"""


def test_a_stop_at_once_inside_the_compile_exits_130_not_by_a_segfault():
    """The second SIGINT stops the process inside XLA's compile, which goes on on XLA's threads:
    the interpreter's exit raced them (exit -11, issue 79); the policy's exit does not."""
    proc = subprocess.run(
        [sys.executable, "-c", COMPILE_STOPPED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "JAX_ENABLE_COMPILATION_CACHE": "false"},
    )
    assert proc.returncode == 130, proc.stdout + proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        "SIGINT: stopping at the next check (again: at once)",
        "SIGINT: stopping at once",
        "interrupted",
    ], proc.stderr[-3000:]


# ------------------------------------------------------------------------------------- evaluate.py
def test_sigterm_while_evaluate_draws_stops_it_at_the_next_frame_in_one_line(tmp_path, capfd):
    """A SIGTERM while the video is drawn (issue 79: pygame's SDL took it and evaluate.py drew on
    through three): the drawing stops at the next frame, no video written, eval.json (written
    before) whole; the signal answered, then one line, exit code 130."""
    folder = save_untrained(tmp_path / "run", "CartPole-v1", "gymnax", 4, 2, False)
    path = tmp_path / "replay.gif"
    drawn = []
    real = video.captioned

    def captioned(frame, text, colour=(0, 0, 0)):
        drawn.append(text)
        if len(drawn) == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(frame, text, colour)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(video, "captioned", captioned)
        with pytest.raises(SystemExit) as stopped:
            evaluate.main([str(folder), "--episodes", "1", "--video", str(path)])
    assert stopped.value.code == 130 and len(drawn) == 3
    assert not path.exists() and not list(tmp_path.glob("*.partial"))
    assert read_json(folder / "eval.json")["evaluations"]
    assert capfd.readouterr().err.splitlines() == [
        "SIGTERM: stopping at the next step (again: at once)",
        "evaluate.py: interrupted by SIGTERM; no file is left half-written",
    ]


def test_ctrl_c_in_evaluates_episodes_stops_it_in_one_line(tmp_path, capfd, monkeypatch):
    """A SIGINT while the episodes run (issue 79: a traceback of 30-40 lines): they stop at the next
    step, eval.json is not written; the signal answered, then one line, exit code 130."""
    folder = save_untrained(tmp_path / "run", "CartPole-v1", "gymnax", 4, 2, False)
    make_policy = policy.make_policy

    def interrupted_policy(*args):
        act = make_policy(*args)

        def acted(obs):
            os.kill(os.getpid(), signal.SIGINT)
            return act(obs)

        return acted

    monkeypatch.setattr(policy, "make_policy", interrupted_policy)
    with pytest.raises(SystemExit) as stopped:
        evaluate.main([str(folder), "--episodes", "1"])
    assert stopped.value.code == 130 and not (folder / "eval.json").exists()
    assert capfd.readouterr().err.splitlines() == [
        "SIGINT: stopping at the next step (again: at once)",
        "evaluate.py: interrupted by SIGINT; no file is left half-written",
    ]


def test_a_signal_during_the_imports_stops_the_analysis_before_anything_in_one_line(
    tmp_path, capsys
):
    """plot_results.py holds the stop signals from its first line (its imports take seconds): one
    that came then is taken when main() starts, and stops it at once, before anything is read or
    made: one line, exit code 130."""
    import plot_results

    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    # (were main() to take no signal, this one would, and the test fail)
    before = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    atomic.hold_stop_signals()  # as `python plot_results.py` does before its imports
    try:
        # to this thread: pending while held (other threads here, JAX's, would take a signal to
        # the process: a process's first lines hold it for every thread it then starts)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        with pytest.raises(SystemExit) as stopped:
            plot_results.main(["--csv", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "out")])
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGTERM, before)
    assert stopped.value.code == 130 and not (tmp_path / "out").exists()
    assert capsys.readouterr().err.splitlines() == [
        "plot_results.py: interrupted by SIGTERM; no file is left half-written"
    ]

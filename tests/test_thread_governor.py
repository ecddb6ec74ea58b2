"""torch_glue.ThreadGovernor: ppo_torch.py's intra-op threads, iteration by iteration. Its decisions are fed the
iterations' seconds and the cores other processes took; its reading of /proc/stat is checked against a busy loop
on the same core. benchmarks/busy_machine.py measures what it changes."""

import os
import subprocess
import sys
import time

import pytest
import torch

import torch_glue

linux = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads Linux's /proc/stat")


@pytest.fixture
def two_threads():
    """torch on 2 threads for the test, whatever the machine; restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def feed(governor, iterations: list) -> list:
    """The thread count each iteration ran on, the iterations given as (seconds, others' cores)."""
    counts = []
    for seconds, others in iterations:
        counts.append(torch.get_num_threads())
        governor.decide(seconds, others)
    return counts


def test_a_quiet_machine_keeps_every_thread(two_threads, capsys):
    """Others under half a core: all threads, whatever the iterations' times."""
    governor = torch_glue.ThreadGovernor()
    counts = feed(governor, [(1.0, 0.0), (3.0, 0.2), (0.9, 0.49), (5.0, 0.0)] * 5)
    assert counts == [2] * 20 and capsys.readouterr().out == ""


def test_a_busy_machine_moves_to_one_thread_while_it_pays(two_threads, capsys):
    """Others take a core: one thread is tried; its first iteration (a recompile) is not compared, its second
    is faster than the last on two threads, so it stays until the others leave; then two threads, and one at once
    (already compiled: its first iteration counts) when they come back."""
    governor = torch_glue.ThreadGovernor(busy=0.5, retry_every=3)
    iterations = [(1.0, 0.0), (3.0, 0.7), (2.5, 1.0), (1.6, 1.0), (1.6, 1.0)]
    iterations += [
        (1.6, 0.1),
        (1.0, 0.0),
        (1.0, 0.0),
        (1.0, 0.0),
        (1.0, 0.0),
        (3.0, 0.8),
        (1.6, 1.0),
    ]
    counts = feed(governor, iterations)
    assert counts == [2, 2, 1, 1, 1, 1, 2, 2, 2, 2, 2, 1]
    printed = capsys.readouterr().out
    assert "torch threads 2 -> 1: other processes take 0.7 of its cores, trying one" in printed
    assert "torch threads 1 -> 2: other processes take 0.1 of its cores" in printed


def test_a_try_that_one_thread_loses_goes_back_and_waits(two_threads, capsys):
    """A model that needs both threads even when shared: one thread's second iteration is slower, so all threads
    come back, and the next try waits retry_every iterations."""
    governor = torch_glue.ThreadGovernor(busy=0.5, retry_every=3)
    iterations = [(2.0, 0.8), (9.0, 1.0), (4.0, 1.0)] + [(2.0, 0.8)] * 5
    counts = feed(governor, iterations)
    assert counts == [2, 1, 1, 2, 2, 2, 2, 1]
    assert "torch threads 1 -> 2: one thread no faster (4.00s)" in capsys.readouterr().out


def test_one_thread_from_the_start_is_left_alone():
    """OMP_NUM_THREADS=1, or one core: nothing to switch."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        governor = torch_glue.ThreadGovernor()
        assert not governor.active
        governor.iteration_done(1.0)
        governor.iteration_done(1.0)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_busy_ticks_count_the_given_cores_and_not_their_idle_time():
    stat = "\n".join(
        [
            "cpu  900 0 90 9000 9 0 0 0 0 0",
            "cpu0 100 1 10 1000 50 2 3 4 0 0",
            "cpu1 200 0 20 2000 60 0 0 0 7 0",
            "cpu12 5 0 0 10 0 0 0 0 0 0",
            "intr 123 4 5",
        ]
    )
    assert torch_glue.cores_busy_ticks(stat, {0}) == 100 + 1 + 10 + 2 + 3 + 4
    assert torch_glue.cores_busy_ticks(stat, {0, 1}) == 120 + 220
    assert torch_glue.cores_busy_ticks(stat, {1, 2}) == 220
    assert torch_glue.cores_busy_ticks(stat, {12}) == 5


@linux
def test_a_busy_loop_on_the_same_core_counts_as_another_process(two_threads):
    """Pinned to one core beside a busy loop pinned there too, the governor sees most of a core taken by another
    process while this one sleeps, and one thread is tried; without the loop, nothing is taken."""
    before = os.sched_getaffinity(0)
    core = min(before)
    os.sched_setaffinity(0, {core})
    seen = []
    try:
        governor = torch_glue.ThreadGovernor()
        governor.decide = lambda seconds, others: seen.append(others)
        governor.iteration_done(1.0)
        loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(2.0)
            governor.iteration_done(1.0)
        finally:
            loop.kill()
            loop.wait()
    finally:
        os.sched_setaffinity(0, before)
    assert len(seen) == 1 and seen[0] > 0.5

"""torch_glue.ThreadGovernor: ppo_torch.py's intra-op threads, set from how much CPU other processes
take on its cores. Its choices are fed the others' share; its reading of /proc/stat is checked
against a busy loop on the same core. benchmarks/busy_machine.py measures what it changes."""

import os
import subprocess
import sys

import pytest
import torch

import torch_glue

linux = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads Linux's /proc/stat")


@pytest.fixture
def threads():
    """Sets torch's thread count for the test, whatever the machine; restored after."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def quiet_governor(all_threads: int, set_threads, monkeypatch):
    """A governor of all_threads threads that found the machine quiet at its start (others took
    nothing)."""
    set_threads(all_threads)
    monkeypatch.setattr(torch_glue.ThreadGovernor, "others_between", lambda self, start, end: 0.0)
    return torch_glue.ThreadGovernor(sample_s=0.0)


def chosen(governor, others: list) -> list:
    """The thread count chosen after each share of the cores that others took."""
    counts = []
    for share in others:
        governor.set_threads(share)
        counts.append(torch.get_num_threads())
    return counts


def test_threads_are_the_cores_others_leave_free(threads, capsys, monkeypatch):
    governor = quiet_governor(2, threads, monkeypatch)
    assert chosen(governor, [0.0, 0.3, 0.8, 1.0, 1.4, 2.0, 0.2, 0.0]) == [2, 2, 1, 1, 1, 1, 2, 2]
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "torch threads 2 -> 1: other programs keep 0.8 of the 2 cores this run may use busy, and "
        "an op split over threads waits for the slowest",
        "torch threads 1 -> 2: other programs keep 0.2 of the 2 cores this run may use busy, and "
        "an op split over threads waits for the slowest",
    ]


def test_at_most_max_counts_thread_counts_are_compiled(threads, monkeypatch):
    """Each count is a graph of its own for torch.compile: past max_counts, the largest compiled
    count that fits, or one thread."""
    governor = quiet_governor(16, threads, monkeypatch)
    governor.max_counts = 3
    assert chosen(governor, [1.0, 3.0, 2.0, 5.0, 0.0, 15.6]) == [15, 13, 13, 1, 16, 1]
    assert governor.compiled == {16, 15, 13, 1}


def fed_readings(monkeypatch, iterations: list) -> list:
    """The thread count after each iteration of a governor of two threads, given each iteration's
    (wall seconds, other processes' CPU seconds): the clock readings that cpu_seconds returns (this
    process's own CPU as much as its wall time, all of it on its cores; nothing before the first
    iteration)."""
    clock = [0.0, 0.0, 0.0]  # wall, own, busy
    monkeypatch.setattr(torch_glue.ThreadGovernor, "cpu_seconds", lambda self: tuple(clock))
    governor = torch_glue.ThreadGovernor(sample_s=0.0)
    assert governor.active and governor.window_s == 0.5
    counts = []
    for seconds, others in iterations:
        clock = [clock[0] + seconds, clock[1] + seconds, clock[2] + seconds + others]
        governor.iteration_done()
        counts.append(torch.get_num_threads())
    return counts


def test_short_iterations_are_judged_over_a_longer_window(threads, capsys, monkeypatch):
    """A 35 ms iteration in which /proc/stat's clock ticks (10 ms) put 20 ms on others reads as 0.6
    of a core taken: one such reading is no reason to drop a thread (its recompile costs seconds).
    The governor judges at least window_s at a time: the same 20 ms over 0.5 s is 0.04 of a core; a
    competitor that takes a core for the whole window still costs torch its thread."""
    threads(2)
    # iteration 0 starts the count; 15 quick ones (0.525 s), one with a 20 ms rounding; then 15
    # beside a busy loop
    quick = [(0.035, 0.02 if i == 3 else 0.0) for i in range(15)]
    busy = [(0.035, 0.035)] * 15
    counts = fed_readings(monkeypatch, [(1.0, 0.0), *quick, *busy])
    assert counts == [2] * 30 + [1]
    assert capsys.readouterr().out == (
        "torch threads 2 -> 1: other programs keep 1.0 of the 2 cores this run may use busy, and "
        "an op split over threads waits for the slowest\n"
    )


def test_one_thread_from_the_start_is_left_alone(threads):
    """OMP_NUM_THREADS=1, or one core: nothing to choose."""
    threads(1)
    governor = torch_glue.ThreadGovernor()
    assert not governor.active
    governor.iteration_done()
    governor.iteration_done()
    assert torch.get_num_threads() == 1


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
def test_a_busy_loop_on_its_cores_gives_torch_one_thread_from_the_start(threads):
    """Pinned to one core beside a busy loop pinned there too: the governor's look before the first
    iteration sees most of a core taken, and torch starts on one thread of its two. (Not the quiet
    case: the tests run side by side.)"""
    threads(2)
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            governor = torch_glue.ThreadGovernor(sample_s=1.0)
        finally:
            loop.kill()
            loop.wait()
    finally:
        os.sched_setaffinity(0, before)
    assert governor.active and governor.all == 2
    assert torch.get_num_threads() == 1


GOOD_STAT = (
    "cpu  900 0 90 9000 9 0 0 0 0 0\n"
    "cpu0 100 1 10 1000 50 2 3 4 0 0\n"
    "cpu1 200 0 20 2000 60 0 0 0 7 0\n"
)
# a stat file that cannot be read or parsed -> what reading it raises (issue 54 item 10)
BAD_STATS = {
    "a folder": None,  # IsADirectoryError, an OSError as a PermissionError is
    "a short line": "cpu0 100 1 10\n",  # IndexError
    "a word for a count": "cpu0 100 x 10 1000 50 2 3 4 0 0\n",  # ValueError
    "an empty line": "cpu0 100 1 10 1000 50 2 3 4 0 0\n\n",  # ValueError (nothing to unpack)
}


def bad_stat(tmp_path, case: str) -> str:
    path = tmp_path / "stat"
    if BAD_STATS[case] is None:
        path.mkdir()
    else:
        path.write_text(BAD_STATS[case])
    return str(path)


@pytest.mark.parametrize("case", BAD_STATS)
def test_an_unreadable_stat_file_switches_the_governor_off(case, threads, tmp_path, capsys):
    """The run folder exists by then: the governor only tunes the speed, so it leaves the threads as
    they are and says so in one line, rather than failing the run."""
    threads(2)
    governor = torch_glue.ThreadGovernor(sample_s=0.0, stat_path=bad_stat(tmp_path, case))
    assert not governor.active
    governor.iteration_done()
    assert torch.get_num_threads() == 2
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 and printed[0].startswith("torch threads stay at 2: "), printed


@pytest.mark.parametrize("case", BAD_STATS)
def test_a_stat_file_that_goes_bad_mid_run_switches_the_governor_off(
    case, threads, tmp_path, capsys
):
    threads(2)
    path = tmp_path / "stat"
    path.write_text(GOOD_STAT)
    governor = torch_glue.ThreadGovernor(sample_s=0.0, stat_path=str(path))
    assert governor.active
    path.unlink()
    bad_stat(tmp_path, case)
    for _ in range(3):
        governor.iteration_done()
    assert not governor.active and torch.get_num_threads() == 2
    assert len(capsys.readouterr().out.splitlines()) == 1

"""benchmarks/leanrl.py's measuring without LeanRL or torch: LeanRL's progress bar timed as it
arrives (a sample written from its code: tqdm's bar, its `speed` description; a stand-in process),
and the medians, ratios, goal, table and progress lines of the report."""

import sys
import textwrap

import pytest

from benchmarks import leanrl, leanrl_runs
from benchmarks.leanrl_runs import Progress
from helpers import ROOT


# ------------------------------------------------------------------------- LeanRL's progress, timed
# tqdm's bar as LeanRL's loop draws it on stderr, after every iteration:
#   "\r{desc}: {pct}%|{bar}| {n}/{N} [{elapsed}<{left}, {rate}]"
# every 10th iteration the torchcompile script first sets its description to
#   f"speed: {speed: 4.1f} sps, reward avg: {r :4.2f}, reward max: ..., returns: {..: 4.2f},lr: ..."
# (which redraws the bar at the count before), the plain one to
#   f"speed: {speed: 4.1f} sps, " + desc.
def bar(n: int, desc: str = "") -> bytes:
    done = "\u2588" * (n // 2)
    return f"\r{desc}{100 * n // 20:3d}%|{done:<10}| {n}/20 [00:{n:02d}<00:40,  2.00s/it]".encode()


SPEED_DESC = "speed:  1523.4 sps, reward avg: 0.05, reward max: 1.23, returns:  nan,lr:  0.00: "
PLAIN_DESC = "speed:  987.0 sps, : "


def sample() -> list[tuple[float, bytes]]:
    """(time it arrives, bytes): count 0 at 1 s, count 1 (the compile) at 381 s, then one count
    every 2 s; count 9 redrawn with the speed at the 10th iteration's end, count 19 likewise."""
    arrivals = [(1.0, bar(0))] + [(381.0 + 2 * (n - 1), bar(n)) for n in range(1, 21)]
    arrivals.insert(10, (398.5, bar(9, SPEED_DESC)))
    arrivals.insert(21, (418.5, bar(19, PLAIN_DESC)))
    return arrivals


def fed(arrivals) -> Progress:
    progress = Progress()
    for at, data in arrivals:
        progress.feed(data, at)
    return progress


def test_each_count_is_timed_when_it_first_arrives():
    seen = fed(sample()).first_seen
    assert sorted(seen) == list(range(21))
    assert seen[0] == 1.0 and seen[1] == 381.0 and seen[9] == 397.0 and seen[20] == 419.0


def test_a_bar_split_across_reads_is_timed_when_its_count_is_whole():
    data = bar(12)
    # a cut inside the count, then one inside the bar's UTF-8 character
    cut = data.index(b"12/20") + 1
    progress = fed([(1.0, data[:cut]), (2.0, data[cut:])])
    assert progress.first_seen == {12: 2.0}
    char = data.index("\u2588".encode()) + 1
    progress = fed([(1.0, data[:char]), (2.0, data[char:])])
    assert progress.first_seen == {12: 2.0} and "\ufffd" not in progress.text


def test_steady_rate_runs_from_the_steady_count_to_the_last():
    seen = fed(sample()).first_seen
    # counts STEADY_FROM..20 arrive 2 s apart: 2048 steps every 2 s
    assert leanrl_runs.steady_rate(seen, 2048) == pytest.approx(1024.0)
    with pytest.raises(leanrl_runs.RunFailed, match="fewer than two"):
        leanrl_runs.steady_rate({0: 1.0, 1: 2.0}, 2048)


def test_leanrls_own_speed_is_the_last_it_printed():
    text = fed(sample()).text
    assert leanrl_runs.reported_speed(text) == 987.0
    assert leanrl_runs.reported_speed(bar(3).decode()) is None


def test_a_leanrl_result_reads_compile_steady_and_its_own_speed():
    finished = leanrl_runs.Finished(0, 430.0, fed(sample()))
    result = leanrl_runs.leanrl_result(finished, 2048)
    assert result == {
        "wall_s": 430.0,
        "iter0_s": 380.0,
        "steady_sps": pytest.approx(1024.0),
        "reported_sps": 987.0,
    }


STAND_IN = textwrap.dedent(
    """
    import sys, time
    for n in range(4):
        sys.stderr.write(f"\\r{25 * n:3d}%|   | {n}/3 [00:00<?, ?it/s]")
        sys.stderr.flush()
        time.sleep(0.3)
    """
)


def test_a_process_output_is_timed_as_it_arrives(tmp_path):
    cmd = [sys.executable, "-c", STAND_IN]
    finished = leanrl_runs.run_timed(cmd, tmp_path, {}, 60, tmp_path / "run.log")
    seen = finished.progress.first_seen
    assert finished.returncode == 0 and sorted(seen) == [0, 1, 2, 3]
    assert seen[0] < seen[1] < seen[2] < seen[3]
    # three sleeps of 0.3 s between count 0 and count 3, four before the exit
    assert seen[3] - seen[0] > 0.6 and finished.wall_s >= 1.2
    assert (tmp_path / "run.log").read_bytes().decode() == finished.progress.text  # all of it


def test_a_process_past_its_timeout_is_killed(tmp_path):
    cmd = [sys.executable, "-c", "import time; time.sleep(60)"]
    finished = leanrl_runs.run_timed(cmd, tmp_path, {}, 0.5, tmp_path / "run.log")
    assert finished.returncode is None and finished.wall_s < 10
    assert "killed after" in leanrl_runs.failure(finished, 0.5)


# ------------------------------------------------------------------------ medians, ratios and table
def run(sps, wall, iter0, reported=None) -> dict:
    return {"steady_sps": sps, "wall_s": wall, "iter0_s": iter0, "reported_sps": reported}


FAILED = {"error": "exit status 1: ...", "log": "round1.log"}
RESULTS = {
    "leanrl compile": [run(1000, 400, 380, 990), run(1200, 410, 385, 1190), run(1100, 420, 390)],
    "leanrl plain": [FAILED],
    "torch compile": [run(800, 200, 60)] * 3,
    "linen jit": [run(3000, 50, 20), FAILED],
}


def rows(text: str) -> dict[str, list[str]]:
    cells = [line.strip("| ").split(" | ") for line in text.splitlines()[2:]]
    return {row[0]: row[1:] for row in cells}


def test_medians_and_ratios_to_ppo_torch():
    table = rows(leanrl.table(RESULTS, "torch compile"))
    # steady 1100 / 800; whole run 410 / 200
    assert table["leanrl compile"][:6] == ["3", "1100", "1.38x", "6m50s", "2.05x", "6m25s"]
    assert table["leanrl compile"][6] == "1090"
    assert table["torch compile"][:5] == ["3", "800", "1.00x", "3m20s", "1.00x"]
    assert table["linen jit"][:3] == ["1 of 2", "3000", "3.75x"]
    assert table["leanrl plain"][:2] == ["0 of 1", "failed"]


def test_the_goal_compares_ppo_torchs_best_with_leanrls_best():
    line = leanrl.goal_line(RESULTS)
    assert ": not met." in line and "leanrl compile, 1100 steps/s" in line and "(0.73x)" in line
    faster = {**RESULTS, "torch compile": [run(1500, 200, 60)]}
    assert ": met." in leanrl.goal_line(faster)
    assert "not measured" in leanrl.goal_line({"torch compile": [FAILED]})


def test_the_markdown_lists_the_shims_versions_and_commands():
    record = {
        "command": "python -m benchmarks.leanrl",
        "status": "finished",
        "started": "2026-12-03T18:00:00+00:00",
        "machine": {"cores": 2, "cpu_model": "AMD EPYC", "virtual_machine": True, "gpu": None},
        "options": {"num_iterations": 20, "rounds": 5, "cpus": "0-1"},
        "threads": 2,
        "batch_size": 2048,
        "leanrl_repo": leanrl_runs.LEANRL_REPO,
        "leanrl_commit": leanrl_runs.LEANRL_COMMIT,
        "shims": leanrl_runs.shim_records(),
        "versions": {"leanrl": {"torch": "2.13.0+cpu"}, "ours": {"torch": "2.13.0+cpu"}},
        "commands": {
            "torch compile": ["/usr/bin/python3", str(ROOT / "ppo_torch.py"), "--env", "X"]
        },
        "rounds_done": 5,
        "results": RESULTS,
    }
    text = leanrl.markdown(record)
    assert leanrl_runs.LEANRL_COMMIT in text and "requires_grad_(False)" in text
    assert "`/usr/bin/python3 ppo_torch.py --env X`" in text
    assert "Goal (" in text and "| leanrl compile | 3 | 1100 |" in text


def test_a_run_is_told_in_one_line():
    said = leanrl.outcome(run(1523.4, 430.0, 380.0))
    assert said == "steady 1523 steps/s, whole run 7m10s, iteration 0 6m20s"
    assert leanrl.outcome(FAILED) == "failed (exit status 1: ...; log round1.log)"


def test_the_eta_uses_each_configurations_own_mean():
    durations = {"a": [10.0, 30.0], "b": [], "c": [40.0]}
    # a: 20; b: none yet, the mean of every run so far (80 / 3); c: 40
    assert leanrl.eta_seconds(durations, ["a", "b", "c"]) == pytest.approx(20 + 80 / 3 + 40)
    assert leanrl.eta_seconds({"a": []}, ["a"]) == 0.0

"""benchmarks/batch_sweep.py: a script at growing --num-envs, a fresh process each, the whole
process counted; a record taken up again by the next call; bad input refused before anything."""

import json
import subprocess
import sys

import pytest

from helpers import ROOT

TINY = ["--num-steps", "16", "--iterations", "9"]


def sweep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.batch_sweep", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize(
    "args, named",
    [
        (["--iterations", "5"], "--iterations 5"),
        (["--num-envs", "4", "0"], "--num-envs 0"),
        (["--deadline", "10"], "--deadline 10"),
        (["--script", "ppo_torch.py"], "--script ppo_torch.py"),
        (["--num-steps", "0"], "--num-steps"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_anything(tmp_path, args, named):
    out = tmp_path / "sweep" / "batch.json"
    done = sweep(*args, "--out", str(out))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and named in done.stderr, done.stderr
    assert not out.parent.exists()


def test_another_commands_record_is_not_taken_up(tmp_path):
    out = tmp_path / "batch.json"
    earlier = {"written_by": "benchmarks.batch_sweep", "command": ["ppo_nnx.py"], "rows": []}
    out.write_text(json.dumps(earlier))
    done = sweep("--out", str(out))
    assert done.returncode == 2
    assert "holds a sweep of another command" in done.stderr and done.stderr.count("\n") == 1
    assert json.loads(out.read_text()) == earlier


@pytest.mark.slow
def test_a_sweep_measures_each_batch_and_the_next_call_goes_on_from_it(tmp_path):
    out = tmp_path / "batch.json"
    first = sweep(*TINY, "--num-envs", "4", "--out", str(out))
    assert first.returncode == 0, first.stderr
    record = json.loads(out.read_text())
    assert record["status"] == "finished"
    (row,) = record["rows"]
    assert (row["num_envs"], row["batch_size"], row["device"]) == (4, 64, "cpu")
    # the whole process, set-up and compile included, is slower than its steady iterations
    assert row["whole_steps_per_s"] < row["steady_steps_per_s"]
    assert row["total_s"] > row["setup_s"] + row["iteration0_s"]
    # the same command with one batch more: the first kept as measured, only the new one run
    second = sweep(*TINY, "--num-envs", "4", "8", "--out", str(out))
    assert second.returncode == 0, second.stderr
    assert "[1/1] --num-envs 8" in second.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [r["num_envs"] for r in rows] == [4, 8]
    assert rows[0] == row
    assert "| 8 | 128 | cpu |" in out.with_suffix(".md").read_text()

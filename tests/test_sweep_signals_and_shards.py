"""bench.sh and python -m sweep, signals and shards (issue 39):
--slurm-args resolved as sbatch resolves it, a signal that reaches any child of bench.sh, no run
twice at once whatever the shards, bounded sizes, and values that start with "-".

The sweeps run the stand-in framework of tests/sweep_runs.py (FAKE_SCRIPT, through a study file
of their own)."""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sweep_runs import FAKE_SWEEP, marks, one_line_refusal, run_bench

from core import option_checks
from helpers import ROOT, SWEEP_MODULE, alive, wait_until
from sweep import sbatch


# ----------------------------------------------------- 11: a value that starts with "-" is a value
@pytest.mark.parametrize(
    "args,value",
    [
        (["--shard", "-1/2"], "-1/2"),
        (["--experiments", "-x"], "-x"),
        (["--frameworks", "-x"], "-x"),
        (["--envs", "-x"], "-x"),
        (["--sizes", "-x"], "-x"),
        (["--compile-modes", "--x"], "--x"),
        (["--seeds", "-x"], "-x"),
        (["--iterations", "-x"], "-x"),
        (["--python", "-x"], "-x"),
        (["--cpus", "-x"], "-x"),
        (["--timeout", "-x"], "-x"),
        (["--timeout", "9", "--kill-after", "-x"], "-x"),
        (["--slurm", "--slurm-tasks", "-x"], "-x"),
        (["--slurm", "--slurm-parallel", "-x"], "-x"),
    ],
)
def test_a_bad_value_that_starts_with_a_dash_is_named(tmp_path, args, value):
    proc = run_bench("--dry-run", "--log-dir", str(tmp_path / "runs"), *args, env={**os.environ})
    one_line_refusal(proc, repr(value))
    assert proc.stdout == "" and not (tmp_path / "runs").exists()


# ----------------------------------------------------------------- 7: an empty value names nothing
@pytest.mark.parametrize(
    "option", ["--log-dir", "--env-timing-file", "--python", "--tag", "--timeout", "--cpus"]
)
def test_an_empty_value_is_refused_in_one_line_before_anything(tmp_path, option):
    proc = run_bench(
        "--dry-run",
        "--experiments",
        "exp1",
        "--seeds",
        "1",
        option,
        "",
        env={**os.environ},
        cwd=tmp_path,
    )
    one_line_refusal(proc, f"{option} is empty")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("action", ["dry-run", "plan", "check", "sbatch"])
def test_sweep_py_names_a_bad_value_that_starts_with_a_dash(action):
    proc = subprocess.run(
        [sys.executable, *SWEEP_MODULE, action, "--shard", "-1/2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    one_line_refusal(proc, "'-1/2'")


def test_a_tag_a_log_dir_and_a_timing_file_that_start_with_a_dash_are_used_as_given(tmp_path, fake):
    proc = run_bench(
        "--log-dir", "-runs", *FAKE_SWEEP, "--seeds", "1", "--tag", "-x", env=fake, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (mark,) = marks(tmp_path)
    assert "--tag=-x" in mark["argv"] and "--log-dir=-runs/exp1" in mark["argv"]
    (config,) = (tmp_path / "-runs" / "exp1").glob("*/config.json")
    assert json.loads(config.read_text())["command"] == mark["argv"]
    again = run_bench(
        "--log-dir", "-runs", *FAKE_SWEEP, "--seeds", "1", "--tag", "-x", env=fake, cwd=tmp_path
    )
    # resumed: the same run
    assert again.stdout.strip().splitlines()[-1] == "0 completed, 0 failed, 1 skipped"
    timing = subprocess.run(
        [
            sys.executable,
            *SWEEP_MODULE,
            "env-timing",
            "--file",
            "-t.json",
            "--experiments",
            "exp3",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert timing.returncode == 0 and timing.stdout.startswith("-t.json is missing"), (
        timing.stdout + timing.stderr
    )


# -------------------------------------------------------------------------- 10: sizes with a bound
HUGE = "9" * 30


@pytest.mark.parametrize(
    "args,value",
    [
        (["--seeds", "99999999999999999999999"], "99999999999999999999999"),
        (["--seeds", "2000000"], "2000000"),
        (["--seeds", "9" * 5000], "9" * 5000),  # past the digits Python's int() takes from a string
        (["--iterations", HUGE], HUGE),
        (["--shard", f"0/{HUGE}"], f"0/{HUGE}"),
        # 2**64 + 1: bash's arithmetic reads 1
        (["--cpus", "18446744073709551617"], "18446744073709551617"),
        (["--timeout", "9" * 400], "9" * 400),
        (["--timeout", "9", "--kill-after", HUGE], HUGE),
        (["--slurm", "--slurm-tasks", "9" * 5000], "9" * 5000),
        (["--slurm", "--slurm-parallel", HUGE], HUGE),
        (["--slurm", "--timeout", "9" * 400], "9" * 400),
        (["--slurm", "--cpus", "18446744073709551617"], "18446744073709551617"),
    ],
)
def test_a_size_past_its_bound_is_refused_with_one_line(tmp_path, args, value):
    proc = run_bench("--dry-run", "--log-dir", str(tmp_path / "runs"), *args, env={**os.environ})
    one_line_refusal(
        proc, value if len(value) <= 40 else f"{value[:20]!r}... ({len(value)} characters)"
    )
    assert proc.stdout == "" and not (tmp_path / "runs").exists()


def test_the_largest_sweep_that_can_be_planned_is_planned_and_one_seed_more_is_refused(tmp_path):
    per_seed = (
        len(planned_runs(tmp_path, "--experiments", "exp3", "--seeds", "1").stdout.splitlines()) - 1
    )
    most = option_checks.MAX_RUNS // per_seed
    largest = planned_runs(tmp_path, "--experiments", "exp3", "--seeds", str(most))
    assert largest.stdout.splitlines()[-1].startswith(
        f"dry run: {most * per_seed} runs (0 already completed)"
    )
    one_line_refusal(
        run_bench(
            "--dry-run", "--experiments", "exp3", "--seeds", str(most + 1), env={**os.environ}
        ),
        f"--seeds {most + 1}",
        f"valid: 1 to {most}",
    )


def planned_runs(tmp_path, *args: str) -> subprocess.CompletedProcess:
    proc = run_bench("--dry-run", "--log-dir", str(tmp_path / "runs"), *args, env={**os.environ})
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.parametrize(
    "args,value",
    [
        (["--timeout", "1e400"], "1e400"),
        (["--timeout", "nan"], "nan"),
        (["--timeout", "9", "--kill-after", "inf"], "inf"),
        (["--timeout", "9", "--kill-after", "-1"], "-1"),
        (["--slurm-tasks", "9" * 5000], "(5000 characters)"),
    ],
)
def test_sweep_py_sbatch_refuses_a_size_past_its_bound(args, value):
    proc = subprocess.run(
        [sys.executable, *SWEEP_MODULE, "sbatch", "--experiments", "exp3", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    one_line_refusal(proc, value)


@pytest.mark.parametrize("option", ["--timeout", "--kill-after"])
def test_bench_sh_and_sweep_py_bound_the_seconds_alike(tmp_path, option):
    """Both take option_checks.MAX_SECONDS and refuse one second more, each naming the value."""
    bound = option_checks.MAX_SECONDS
    timeout = [] if option == "--timeout" else ["--timeout", "9"]
    for seconds, accepted in ((bound, True), (bound + 1, False)):
        bench = run_bench(
            *("--dry-run", "--experiments", "exp3", "--log-dir", str(tmp_path / "runs")),
            *(*timeout, option, str(seconds)),
            env={**os.environ},
        )
        sweep = subprocess.run(
            [sys.executable, *SWEEP_MODULE, "sbatch", "--experiments", "exp3"]
            + [*timeout, option, str(seconds)],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        for proc in (bench, sweep):
            if accepted:
                assert proc.returncode == 0, proc.stderr
            else:
                one_line_refusal(proc, str(seconds))


# -------------------------------------------------- 2: --slurm-args resolved as sbatch resolves it
@pytest.mark.parametrize(
    "slurm_args,option",
    [
        ("-a5", "--array"),
        ("-o/tmp/x.out", "--output"),
        ("--arr=0-99", "--array"),
        ("--outp=/x", "--output"),
        ("--err=/x", "--error"),
        ("--wra=true", "--wrap"),
        ("--sig=KILL@1", "--signal"),
        ("--signal B:USR1@60", "--signal"),
        ("-Ha5", "--array"),  # after a letter without a value
        ("-Ho /tmp/x.out", "--output"),
        ("--partition=gpu -N2", "--nodes"),
        ("-n 4", "--ntasks"),
        ("--overs", "--oversubscribe"),
        ("-s", "--oversubscribe"),
        ("--exclusive=user", "--exclusive"),
        ("--ex", "ambiguous"),
        ("--no=1", "ambiguous"),
    ],
)
def test_slurm_args_refuses_any_spelling_of_an_option_bench_sh_sets(tmp_path, slurm_args, option):
    proc = run_bench(
        "--dry-run",
        "--slurm",
        "--log-dir",
        str(tmp_path / "runs"),
        "--slurm-args",
        slurm_args,
        env={**os.environ},
    )
    one_line_refusal(proc, "--slurm-args", option)
    assert proc.stdout == ""


def test_slurm_args_reads_a_value_that_looks_like_an_option_as_a_value():
    lines = sbatch.sbatch_lines(
        "--comment -a5 -J -o/x --hold -p gpu --mail-user=:me --newer-option value"
    )
    assert lines == [
        "--comment -a5",
        "-J -o/x",
        "--hold",
        "-p gpu",
        '--mail-user=":me"',
        "--newer-option value",
    ]
    with pytest.raises(option_checks.BadOption, match="'user'"):  # --hold takes no value
        sbatch.sbatch_lines("--hold user")


# ------------------------------------------------------ 3: a signal reaches whatever bench.sh runs
# Each phase of bench.sh, made to hang: a stand-in interpreter (bench.sh --python) runs the real
# one, but for the command of that phase (found by its words) notes its pid and becomes a `sleep
# 600`.
STALLING_PYTHON = """#!/bin/bash
if [[ " $* " == *"$STALL"* ]]; then echo $$ > "$STALLED"; exec sleep 600; fi
exec {python} "$@"
"""
PHASES = {  # the words of the phase's command, and the options that reach it
    "check": ("-m sweep check ", ["--no-env-timing"]),
    "lock": ("-m sweep lock ", ["--no-env-timing"]),
    "plan": ("-m sweep plan ", ["--no-env-timing"]),
    "env timing check": ("-m sweep env-timing ", []),
    "env timing": ("-m sweep.env_timing ", []),
    "dry run": ("-m sweep dry-run ", ["--dry-run"]),
    "sbatch script": ("-m sweep sbatch ", ["--dry-run", "--slurm"]),
}


@pytest.mark.parametrize("phase", PHASES)
def test_sigterm_to_bench_sh_stops_the_command_of_any_phase_at_once(tmp_path, fake, phase):
    words, options = PHASES[phase]
    python = tmp_path / "python"
    python.write_text(STALLING_PYTHON.format(python=shlex.quote(sys.executable)))
    python.chmod(0o755)
    stalled = tmp_path / "stalled"
    env = {**fake, "STALL": words, "STALLED": str(stalled)}
    sweep_args = [arg for arg in FAKE_SWEEP if arg != "--no-env-timing"]
    args = ["--log-dir", str(tmp_path / "runs"), *sweep_args, "--seeds", "1", *options]
    args += ["--env-timing-file", str(tmp_path / "timing.json")] if "--slurm" not in options else []
    cmd = ["bash", str(ROOT / "bench.sh"), *args, "--python", str(python)]
    with open(tmp_path / "out", "w") as out:
        proc = subprocess.Popen(
            cmd, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    child = None
    try:
        wait_until(
            lambda: stalled.exists() and stalled.read_text().strip(), what=f"the {phase} command"
        )
        child = int(stalled.read_text())
        # to bench.sh alone, as Slurm's --signal=B:TERM@120 sends it
        os.kill(proc.pid, signal.SIGTERM)
        # a safety net, not a timing: without the signal passed on, bench.sh waits for the sleep's
        # 600 s
        wait_until(
            lambda: proc.poll() is not None and not alive(child),
            timeout=30,
            what="bench.sh and its child",
        )
    finally:
        for pid in (proc.pid, child):
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=60)
    output = (tmp_path / "out").read_text()
    assert proc.returncode == 130, output
    assert "interrupted: run the same command again to resume" in output
    assert marks(tmp_path) == []  # no run started


# ---------------------------------------------------- 5: no run twice at once, whatever the shards
def test_overlapping_shards_of_different_counts_never_run_a_run_twice_at_once(tmp_path, fake):
    """The issue's case: --shard 0/1 and --shard 0/2 on one log dir. Each holds the one cell (seed
    1) in turn: the second waits while the first runs it, then skips the run the first completed."""
    hold = tmp_path / "hold"
    hold.touch()
    args = ("--log-dir", str(tmp_path / "runs"), *FAKE_SWEEP, "--seeds", "1")
    env = {**fake, "FAKE_HOLD": str(hold)}
    outputs = [tmp_path / "out-0-of-1", tmp_path / "out-0-of-2"]
    sweeps = []

    def start(shard: str, out: Path) -> None:
        with open(out, "w") as f:
            cmd = [
                "bash",
                str(ROOT / "bench.sh"),
                "--python",
                sys.executable,
                *args,
                "--shard",
                shard,
            ]
            sweeps.append(
                subprocess.Popen(cmd, cwd=tmp_path, stdout=f, stderr=subprocess.STDOUT, env=env)
            )

    try:
        start("0/1", outputs[0])
        wait_until(lambda: len(marks(tmp_path)) == 1, what="the first sweep's run")
        start("0/2", outputs[1])
        # the second waits, or (were the cells not locked) starts the same run beside the first
        # one's
        wait_until(
            lambda: "waiting for it" in outputs[1].read_text() or len(marks(tmp_path)) > 1,
            what="the second",
        )
        assert len(marks(tmp_path)) == 1, outputs[1].read_text()
    finally:
        hold.unlink()
        for proc in sweeps:
            try:
                proc.wait(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
    first, second = (path.read_text() for path in outputs)
    assert [proc.returncode for proc in sweeps] == [0, 0], first + second
    assert first.strip().splitlines()[-1] == "1 completed, 0 failed, 0 skipped", first
    assert (
        "another sweep is running the cell of exp1 CartPole-v1 fake small fast seed 1 (pid "
        in second
    )
    assert re.search(
        r"^\[1/1\] .* seed 1 \.\.\. skipped \(completed by another sweep\)$", second, re.M
    ), second
    assert second.strip().splitlines()[-1] == "0 completed, 0 failed, 1 skipped", second
    assert len(marks(tmp_path)) == 1  # one run, in all


def test_sweeps_of_overlapping_shards_run_each_run_once(tmp_path, fake):
    """Three sweeps at once on one log dir, --shard 0/1, 0/2 and 1/2, over four cells: every run
    runs once."""
    args = ("--log-dir", str(tmp_path / "runs"), *FAKE_SWEEP, "--seeds", "4")
    sweeps = [
        subprocess.Popen(
            ["bash", str(ROOT / "bench.sh"), "--python", sys.executable, *args, "--shard", shard],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=fake,
        )
        for shard in ("0/1", "0/2", "1/2")
    ]
    outputs = [proc.communicate(timeout=300)[0] for proc in sweeps]
    assert [proc.returncode for proc in sweeps] == [0, 0, 0], outputs
    seeds = sorted(mark["argv"][mark["argv"].index("--seed") + 1] for mark in marks(tmp_path))
    assert seeds == ["1", "2", "3", "4"], outputs

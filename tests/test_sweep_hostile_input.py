"""Tests of bench.sh and python -m sweep against hostile or unlucky input and starts (issue 25):
nothing a user types runs as code, a second sweep of a log dir is refused, resume counts only usable
runs, signals stop the sweep however it was started, timeouts are named, and bad values get one line
and exit 2 before anything is made.

Most sweeps here run a stand-in framework (FAKE_SCRIPT, through a study file of their own) that
starts in a fraction of a second, notes its argv and pid, writes a usable run folder, and can be
told to hold until signalled."""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweep_runs import (
    FAKE_SWEEP,
    bench_cmd,
    fake_run,
    marks,
    one_line_refusal,
    planned,
    run_bench,
)

from core import option_checks
from helpers import ROOT, STUDY, one_cell, read_json, wait_until
from sweep import options as sweep_options
from sweep import sbatch

# ------------------------------------------------------------- 1: nothing in an sbatch script runs
TINY_EXTRA = ["--", "--num-envs", "4", "--num-steps", "16"]


def sbatch_reads(line: str) -> list[str]:
    """The words sbatch reads from one #SBATCH line, as its parser does (_get_argument, Slurm's
    src/sbatch/opt.c): whitespace separates, ' or " quote, a backslash escapes the next character,
    an unquoted # ends the line."""
    assert line.startswith("#SBATCH"), line
    words, text, i = [], line[len("#SBATCH") :], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return words
        word, quote, escaped = "", "", False
        while i < len(text) and (quote or not text[i].isspace()):
            c, i = text[i], i + 1
            if escaped:
                word, escaped = word + c, False
            elif c == "\\":
                escaped = True
            elif quote:
                if c == quote:
                    quote = ""
                else:
                    word += c
            elif c in "\"'":
                quote = c
            elif c == "#":
                return words + [word] if word else words
            else:
                word += c
        assert not quote, f"unmatched quote in {line!r}"
        words.append(word)


def slurm_script(tmp_path: Path, log_dir: Path, *args: str) -> str:
    proc = run_bench(
        "--dry-run",
        "--slurm",
        "--log-dir",
        str(log_dir),
        "--experiments",
        "exp3",
        "--frameworks",
        "linen",
        "--seeds",
        "1",
        *args,
        env={**os.environ},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.rpartition("\ndry run: ")[0]


def test_a_newline_in_slurm_args_is_refused_never_a_command(tmp_path):
    """The issue's case: a quoted newline in --slurm-args would end the #SBATCH line and run the
    rest."""
    for value in (
        '--comment="x\ntouch ./pwned #"',
        "--comment 'a\rb'",
        "--comment '\t'",
        '--comment ""',
    ):
        proc = run_bench(
            "--dry-run",
            "--slurm",
            "--no-env-timing",
            "--experiments",
            "exp3",
            "--frameworks",
            "linen",
            "--sizes",
            "small",
            "--seeds",
            "1",
            "--log-dir",
            str(tmp_path / "runs"),
            "--slurm-args",
            value,
            env={**os.environ},
            cwd=tmp_path,
        )
        one_line_refusal(proc, "--slurm-args", "#SBATCH")
        assert proc.stdout == ""
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "runs").exists()


def test_slurm_args_become_sbatch_lines_that_sbatch_reads_back_as_given(tmp_path):
    # a newline between options is only a separator (shlex), each option one #SBATCH line
    value = (
        '--partition=gpu\n--comment "a b #c \'q\' \\"d\\" \\\\e $(touch pwned)" '
        "--mail-user=:me\n-J x"
    )
    script = slurm_script(tmp_path, tmp_path / "runs", "--slurm-args", value)
    lines = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert [sbatch_reads(line) for line in lines[-4:]] == [
        ["--partition=gpu"],
        ["--comment", "a b #c 'q' \"d\" \\e $(touch pwned)"],
        ["--mail-user=:me"],
        ["-J", "x"],
    ]
    # bash sees only comments there: every line before "set -euo pipefail" is a comment
    head = script.split("\nset -euo pipefail\n")[0].splitlines()
    assert all(line.startswith("#") for line in head), head


def test_a_log_dir_with_spaces_quotes_and_dollars_stays_a_path_in_the_sbatch_script(tmp_path):
    log_dir = tmp_path / "my runs $(touch pwned) `touch pwned` 'q' \"d\" %j #x"
    script = slurm_script(tmp_path, log_dir, *TINY_EXTRA)
    (output,) = [line for line in script.splitlines() if line.startswith("#SBATCH --output")]
    assert sbatch_reads(output) == [
        f"--output={str(log_dir).replace('%', '%%')}/logs/slurm/%A_%a.out"
    ]
    # the body, run as array task 0 would run it (its bench.sh call a dry run): the log dir is one
    # word, nothing runs
    probe = tmp_path / "task.sh"
    probe.write_text(
        script.replace('bench.sh --shard "$SHARD"', 'bench.sh --dry-run --shard "$SHARD"')
    )
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_JOB_ID": "1"}
    proc = subprocess.run(
        ["bash", str(probe)], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    commands = [line for line in proc.stdout.splitlines() if "ppo_linen.py" in line]
    assert commands and all(shlex.quote(f"{log_dir}/exp3") in line for line in commands)
    assert not list(tmp_path.glob("pwned*")) and not (ROOT / "pwned").exists()


@pytest.mark.parametrize("name", ["runs\nx", "runs\\x"])
def test_a_log_dir_that_cannot_be_an_sbatch_output_path_is_refused(tmp_path, name):
    proc = run_bench(
        "--dry-run",
        "--slurm",
        "--experiments",
        "exp3",
        "--seeds",
        "1",
        "--log-dir",
        str(tmp_path / name),
        env={**os.environ},
        cwd=tmp_path,
    )
    one_line_refusal(proc, "--log-dir", "#SBATCH --output")
    assert proc.stdout == "" and list(tmp_path.iterdir()) == []


# ---------------------------------------------------- 2: the plan is data, arguments stay as given
HOSTILE = [
    "x\ntodo\td\ts\t$(touch ./pwned)",
    "b1\nb2",
    'it\'s "q" \\ $HOME `touch pwned2` * ~',
    "--flag=a b\t c",
    " ",
    "",
    "ü²",
]
# each of them a flag's value (a flag the stand-in script takes, as it takes any)
HOSTILE_FLAGS = [word for value in HOSTILE for word in ["--note", value]]


def test_arguments_after_dashdash_reach_each_run_exactly_as_given(tmp_path, fake):
    """Any character (newline, tab, quotes, $(…), backquotes) reaches the run as it was given, in
    config.json's "command" too, and no extra run appears; the resume finds those runs by that
    command. Each word is a flag's value, as a run's command is (a word of no flag is no command
    line of the scripts, and no run)."""
    log_dir = tmp_path / "runs"
    proc = run_bench(
        "--log-dir",
        str(log_dir),
        *FAKE_SWEEP,
        "--seeds",
        "2",
        "--",
        *HOSTILE_FLAGS,
        env=fake,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "2 completed, 0 failed, 0 skipped"
    argvs = [mark["argv"] for mark in marks(tmp_path)]
    assert len(argvs) == 2 and [argv[argv.index("--seed") + 1] for argv in argvs] == ["1", "2"]
    assert all(argv[-len(HOSTILE_FLAGS) :] == HOSTILE_FLAGS for argv in argvs)
    commands = sorted(read_json(p)["command"] for p in (log_dir / "exp1").glob("*/config.json"))
    assert commands == sorted(argvs)
    assert not list(tmp_path.glob("pwned*")) and not list(ROOT.glob("pwned*"))
    again = run_bench(
        "--log-dir",
        str(log_dir),
        *FAKE_SWEEP,
        "--seeds",
        "2",
        "--",
        *HOSTILE_FLAGS,
        env=fake,
        cwd=tmp_path,
    )
    assert again.stdout.strip().splitlines()[-1] == "0 completed, 0 failed, 2 skipped", (
        again.stdout + again.stderr
    )


def test_the_dry_run_prints_one_line_per_run_that_bash_reads_back(tmp_path, fake):
    # the stand-in framework: a real script's parser refuses these words before the dry run
    proc = run_bench(
        "--dry-run",
        "--log-dir",
        str(tmp_path / "runs"),
        *FAKE_SWEEP,
        "--seeds",
        "2",
        "--",
        *HOSTILE,
        env=fake,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    *lines, count = proc.stdout.splitlines()
    assert count.startswith(f"dry run: {len(lines)} runs") and len(lines) == 2
    for line in lines:
        argv = subprocess.run(
            [
                "bash",
                "-c",
                f"{sys.executable} -c 'import json, sys; print(json.dumps(sys.argv[1:]))' {line}",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        assert json.loads(argv)[-len(HOSTILE) :] == HOSTILE
    assert not list(tmp_path.glob("pwned*"))


# A real run (linen, tiny) gets a hostile --tag as given, its config.json's "command" holding it:
# test_bench.py's test_mini_sweep_completes_then_skips_every_run


# -------------------------------------------------------------- 6: one sweep per log dir and shard
def test_a_second_sweep_of_the_same_log_dir_and_shard_is_refused(tmp_path, fake):
    log_dir, hold = tmp_path / "runs", tmp_path / "hold"
    hold.touch()
    args = ("--log-dir", str(log_dir), *FAKE_SWEEP, "--seeds", "2")
    first = subprocess.Popen(
        bench_cmd(*args, "--shard", "0/2"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**fake, "FAKE_HOLD": str(hold)},
        start_new_session=True,
    )
    try:
        wait_until(lambda: len(marks(tmp_path)) == 1, what="the first sweep's run")
        second = run_bench(*args, "--shard", "0/2", env=fake, cwd=tmp_path, timeout=30)
        one_line_refusal(second, "another sweep", "shard 0/2", f"pid {first.pid}")
        assert second.stdout == "" and len(marks(tmp_path)) == 1  # no header, no run
        # side by side
        other_shard = run_bench(*args, "--shard", "1/2", env=fake, cwd=tmp_path, timeout=60)
        assert other_shard.returncode == 0, other_shard.stdout + other_shard.stderr
        assert len(marks(tmp_path)) == 2
    finally:
        hold.unlink()
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, out + err
    assert out.strip().splitlines()[-1] == "1 completed, 0 failed, 0 skipped"
    # the first one is gone: the lock with it
    again = run_bench(*args, "--shard", "0/2", env=fake, cwd=tmp_path)
    assert (
        again.returncode == 0
        and again.stdout.strip().splitlines()[-1] == "0 completed, 0 failed, 1 skipped"
    )


# ----------------------------------------------------- 7: one definition of a usable completed run
def test_a_completed_run_whose_events_are_unusable_is_redone(tmp_path):
    log_dir = tmp_path / "runs"
    (jit, _none) = planned(log_dir, "exp2", "CartPole-v1")
    run_dir = fake_run(log_dir, "exp2", "completed", jit, "a")

    def done() -> list[bool]:
        return [
            ("--compile jit" in line) for line in dry_lines(log_dir) if line.startswith("# done: ")
        ]

    assert done() == [True]  # usable: skipped
    (events,) = run_dir.glob("events.out.tfevents.*")
    content = events.read_bytes()
    events.write_bytes(b"garbage, not a TFRecord" * 10)
    assert done() == []  # unreadable events: redone
    events.write_bytes(content)
    # two events files: neither series can be trusted
    (run_dir / f"{events.name}.2").write_bytes(content)
    assert done() == []
    (run_dir / f"{events.name}.2").unlink()
    assert done() == [True]
    summary = read_json(run_dir / "summary.json")
    # events hold 2
    (run_dir / "summary.json").write_text(json.dumps({**summary, "iterations_completed": 3}))
    assert done() == []
    (run_dir / "summary.json").write_text(json.dumps({**summary, "iterations_completed": 0}))
    assert done() == []


def dry_lines(log_dir: Path) -> list[str]:
    proc = run_bench(
        "--dry-run",
        "--log-dir",
        str(log_dir),
        *one_cell("exp2", "CartPole-v1"),
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()[:-1]


# ----------------------------------------------------- 8: arguments after -- the sweep sets itself
@pytest.mark.parametrize(
    "extra",
    [
        ["--seed", "7"],
        ["--seed=7"],
        ["--env", "Acrobot-v1"],
        ["--env=Acrobot-v1"],
        ["--model-size", "large"],
        ["--model_size=large"],
        ["--compile", "none"],
        ["--log-dir", "elsewhere"],
        ["--log_dir", "elsewhere"],
        ["--log-dir=elsewhere"],
        ["--exp-name", "mine"],
        ["--exp_name=mine"],
        ["--no-sync-timing"],
        ["--sync-timing"],
        ["--no_sync_timing"],
        ["--num-envs", "4", "--seed", "7"],
        ["--dtype", "bfloat16"],
        ["--dtype=float32"],
    ],
)
def test_an_argument_after_dashdash_that_the_sweep_sets_is_refused(tmp_path, extra):
    proc = run_bench(
        "--dry-run",
        "--log-dir",
        str(tmp_path / "runs"),
        "--experiments",
        "exp3",
        "--",
        *extra,
        env={**os.environ},
    )
    flag = next(arg for arg in extra if arg not in ("--num-envs", "4")).split("=")[0]
    one_line_refusal(proc, flag, "after --")
    assert proc.stdout == ""


def test_num_iterations_and_tag_after_dashdash_are_refused_only_when_the_sweep_sets_them(tmp_path):
    args = (
        "--dry-run",
        "--log-dir",
        str(tmp_path / "runs"),
        "--experiments",
        "exp3",
        "--seeds",
        "1",
    )
    one_line_refusal(
        run_bench(*args, "--iterations", "2", "--", "--num-iterations", "3", env={**os.environ}),
        "--num-iterations",
        "--iterations",
    )
    one_line_refusal(run_bench(*args, "--tag", "a", "--", "--tag=b", env={**os.environ}), "--tag")
    alone = run_bench(
        *args, "--", "--num-iterations", "3", "--tag", "b", "--num_envs", "8", env={**os.environ}
    )
    assert alone.returncode == 0, alone.stderr
    assert all(
        line.endswith("--num-iterations 3 --tag b --num_envs 8")
        for line in alone.stdout.splitlines()[:-1]
    )


# ------------------------------------------------------- 12: signals, however bench.sh was started
# Each starts bench.sh as a script or a service would, in a session of its own (which the test
# signals as a whole, like a Ctrl-C or a `kill -- -PGID`); the starter waits for bench.sh and notes
# its exit code.
STARTERS = {
    # a script's `./bench.sh &`: bash starts a background job with SIGINT (and SIGQUIT) ignored
    "background of a script": 'trap : INT TERM; "$@" & pid=$!',
    # `nohup ./bench.sh &` in a script: SIGHUP ignored too
    "nohup in a script": 'trap : INT TERM; nohup "$@" & pid=$!',
    # a parent that ignores SIGTERM (so does bench.sh then, at its start)
    "SIGTERM ignored at start": (
        f'trap : INT TERM; {shlex.quote(sys.executable)} -c "import os, signal, sys; '
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        'os.execvp(sys.argv[1], sys.argv[1:])" "$@" & pid=$!'
    ),
}
STARTER_TAIL = (
    '\necho $pid > "$PIDFILE"\n'
    "while :; do wait $pid; rc=$?; kill -0 $pid 2>/dev/null || break; done\n"
    + ('echo $rc > "$RCFILE"\n')
)


@pytest.mark.parametrize(
    "starter,signum",
    [
        ("background of a script", signal.SIGINT),
        ("nohup in a script", signal.SIGINT),
        ("background of a script", signal.SIGTERM),
        ("SIGTERM ignored at start", signal.SIGTERM),
    ],
)
def test_a_signal_stops_the_sweep_however_it_was_started(tmp_path, fake, starter, signum):
    hold = tmp_path / "hold"
    hold.touch()
    starter_script = tmp_path / "starter.sh"
    starter_script.write_text(STARTERS[starter] + STARTER_TAIL)
    env = {
        **fake,
        "FAKE_HOLD": str(hold),
        "PIDFILE": str(tmp_path / "pid"),
        "RCFILE": str(tmp_path / "rc"),
    }
    args = ("--log-dir", str(tmp_path / "runs"), *FAKE_SWEEP, "--seeds", "2")
    with open(tmp_path / "out", "w") as out:
        proc = subprocess.Popen(
            ["bash", str(starter_script), *bench_cmd(*args)],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        wait_until(lambda: len(marks(tmp_path)) == 1, what="the first run")
        os.killpg(proc.pid, signum)
        # the sweep stops; were the signal lost on bench.sh, the second run would start and hold
        wait_until(
            lambda: (tmp_path / "rc").exists() or len(marks(tmp_path)) > 1, what="the sweep's end"
        )
        time.sleep(0.2)  # a second run, if any, has time to note itself
        started = len(marks(tmp_path))
    finally:
        hold.unlink()
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    output = (tmp_path / "out").read_text()
    assert started == 1, output
    assert (tmp_path / "rc").read_text().strip() == "130", output
    assert re.search(
        r"^\[1/2\] exp1 CartPole-v1 fake small fast seed 1 \.\.\. interrupted in ", output, re.M
    ), output
    assert (
        "0 completed, 0 failed, 0 skipped" in output
        and "run the same command again to resume" in output
    )
    (summary,) = (tmp_path / "runs" / "exp1").glob("*/summary.json")
    assert read_json(summary)["status"] == "interrupted"


def test_a_run_stopped_by_a_signal_of_its_own_is_reported_interrupted_and_the_sweep_goes_on(
    tmp_path, fake
):
    hold = tmp_path / "hold"
    hold.touch()
    args = ("--log-dir", str(tmp_path / "runs"), *FAKE_SWEEP, "--seeds", "2")
    proc = subprocess.Popen(
        bench_cmd(*args),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**fake, "FAKE_HOLD": str(hold)},
        start_new_session=True,
    )
    try:
        wait_until(lambda: len(marks(tmp_path)) == 1, what="the first run")
        os.kill(marks(tmp_path)[0]["pid"], signal.SIGINT)  # to that run alone
        wait_until(lambda: len(marks(tmp_path)) == 2, what="the second run")
    finally:
        hold.unlink()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, out + err  # not every run completed
    assert re.search(r"^\[1/2\] .* seed 1 \.\.\. interrupted \(exit 130: .*\) in ", out, re.M), out
    assert re.search(r"^\[2/2\] .* seed 2 \.\.\. completed in ", out, re.M), out
    assert out.strip().splitlines()[-1] == "1 completed, 0 failed, 0 skipped, 1 interrupted"


# ------------------------------------------------------------------------- 14: the timeout's grace
# A timeout of 5 s, not 1: the fake imports pandas (runlog) before its SIGTERM handler, which takes
# over 1 s on a loaded machine, and a SIGTERM before the handler would leave no summary.
@pytest.mark.parametrize(
    "linger,words", [(False, "timed out (--timeout 5)"), (True, "timed out (--timeout 5, killed")]
)
def test_a_run_past_its_timeout_is_reported_timed_out_even_when_killed(
    tmp_path, fake, linger, words
):
    hold = tmp_path / "hold"
    hold.touch()
    env = {**fake, "FAKE_HOLD": str(hold), **({"FAKE_LINGER": "1"} if linger else {})}
    try:
        proc = run_bench(
            "--log-dir",
            str(tmp_path / "runs"),
            *FAKE_SWEEP,
            "--seeds",
            "1",
            "--timeout",
            "5",
            "--kill-after",
            "1",
            env=env,
            cwd=tmp_path,
            timeout=60,
        )
    finally:
        hold.unlink()
    assert re.search(rf"^\[1/1\] .* seed 1 \.\.\. {re.escape(words)}", proc.stdout, re.M), (
        proc.stdout + proc.stderr
    )
    (summary,) = (tmp_path / "runs" / "exp1").glob("*/summary.json")
    assert read_json(summary)["status"] == "interrupted"  # its summary, written after the SIGTERM
    assert (
        proc.returncode == 1
        and proc.stdout.strip().splitlines()[-1] == "0 completed, 1 failed, 0 skipped"
    )


def test_kill_after_sets_the_grace_and_the_slurm_time_limit(tmp_path):
    script = slurm_script(
        tmp_path, tmp_path / "runs", "--timeout", "100", "--kill-after", "20", "--slurm-tasks", "1"
    )
    runs = (
        len(STUDY.experiments["exp3"].envs)
        * len(STUDY.experiments["exp3"].sizes)
        * len(STUDY.frameworks["linen"].compile)
    )
    minutes = -(-(runs * (100 + 20) + sbatch.TIME_MARGIN_S) // 60)
    assert f"\n#SBATCH --time=0-{minutes // 60:02d}:{minutes % 60:02d}:00\n" in script
    assert "--timeout 100 --kill-after 20" in script  # each task's bench.sh gets it
    for args, bad in [
        (["--kill-after", "5"], "--kill-after needs --timeout"),
        (["--timeout", "9", "--kill-after", "soon"], "'soon'"),
    ]:
        one_line_refusal(run_bench("--dry-run", *args, env={**os.environ}), bad)


# ---------------------------------------------------------------------------- 16, 17, 18: refusals
@pytest.mark.parametrize(
    "args,bad",
    [
        (["--seeds", "²"], "²"),
        (["--seeds", "٣"], "٣"),
        (["--iterations", "²"], "²"),
        (["--shard", "²/3"], "²/3"),
        (["--shard", "0/³"], "0/³"),
        (["--slurm", "--slurm-tasks", "²"], "²"),
        (["--slurm", "--slurm-parallel", "²"], "²"),
    ],
)
def test_unicode_digits_are_refused_with_one_line(tmp_path, args, bad):
    proc = run_bench(
        "--dry-run",
        "--log-dir",
        str(tmp_path / "runs"),
        "--experiments",
        "exp3",
        *args,
        env={**os.environ},
    )
    one_line_refusal(proc, bad)


@pytest.mark.parametrize("env_id", ["Nope-v0", "cartpole-v1"])  # gymnax's ids are case-sensitive
def test_an_env_the_scripts_cannot_train_is_refused_before_the_sweep(tmp_path, fake, env_id):
    proc = run_bench(
        "--log-dir",
        str(tmp_path / "runs"),
        "--experiments",
        "exp1",
        "--frameworks",
        "fake",
        "--envs",
        f"CartPole-v1,{env_id}",
        "--no-env-timing",
        env=fake,
    )
    # names what can be trained: the study's envs, and the others of both action kinds (Catch:
    # Discrete, PointRobot: a 1-D Box)
    one_line_refusal(
        proc, f"{env_id!r} is unknown", "CartPole-v1", "Catch-bsuite", "PointRobot-misc", "1-D Box"
    )
    assert STUDY.expensive_envs[0] in proc.stderr and STUDY.continuous_envs[0] in proc.stderr
    assert proc.stdout == "" and not (tmp_path / "runs").exists() and marks(tmp_path) == []


def box_of_boxes(monkeypatch, env_id: str) -> None:
    """Gives a gymnax env a 2-D Box of actions, which the scripts cannot train (gymnax has no env of
    such a space)."""
    import gymnax
    from gymnax.environments import spaces

    env, _ = gymnax.make(env_id)
    monkeypatch.setattr(
        type(env), "action_space", lambda self, params=None: spaces.Box(-1.0, 1.0, (2, 2))
    )


def test_an_env_of_another_action_space_is_refused_naming_the_kinds(monkeypatch):
    box_of_boxes(monkeypatch, "PointRobot-misc")
    assert sweep_options.env_choices("CartPole-v1,Catch-bsuite", STUDY) == (
        "CartPole-v1",
        "Catch-bsuite",
    )
    with pytest.raises(option_checks.BadOption) as refusal:
        sweep_options.env_choices("CartPole-v1,PointRobot-misc", STUDY)
    message = str(refusal.value)
    assert "'PointRobot-misc' has a Box action space" in message and "1-D Box actions" in message
    study_envs, others = message.split("the scripts can train (Discrete or 1-D Box actions): ")
    assert all(env in study_envs for env in STUDY.every_env)
    assert "Catch-bsuite" in others.split(", ") and "PointRobot-misc" not in others.split(", ")


def test_why_untrainable_agrees_with_the_study(monkeypatch):
    assert [env for env in STUDY.every_env if sweep_options.why_untrainable(env)] == []
    assert (
        sweep_options.why_untrainable("Catch-bsuite") is None
        and sweep_options.why_untrainable("PointRobot-misc") is None
    )
    assert "unknown" in sweep_options.why_untrainable("Nope-v0")
    box_of_boxes(monkeypatch, "PointRobot-misc")
    assert "Box action space" in sweep_options.why_untrainable("PointRobot-misc")


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_log_dir_that_is_a_file_is_refused_before_anything(tmp_path, dry_run):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    for log_dir in (a_file, a_file / "runs"):
        proc = run_bench(
            *(["--dry-run"] if dry_run else []),
            "--log-dir",
            str(log_dir),
            "--experiments",
            "exp3",
            "--no-env-timing",
            env={**os.environ},
        )
        one_line_refusal(proc, str(a_file), "not a folder")
        assert proc.stdout == ""  # no header
    assert a_file.read_text() == "not a folder"

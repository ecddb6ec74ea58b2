"""`--resume RUN_DIR` alone (issue 68 item 3): a stopped run continues with its own flags
(config.json's), says when it saves, how to continue when stopped, names the folder it continues
in, and its events read as one clean series: each step once, as an uninterrupted run's."""

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Optional

import pytest
from script_runs import interrupted
from tbparse import SummaryReader

import checkpoint
from bookkeeping import Bookkeeping
from core import resuming
from helpers import ROOT, only_run_dir

# 6 iterations saved every 3: stopped after iteration 4's line, the run has logged iteration 4 (or
# 5) after its save at 3, which the resumed run logs again
RUN = ["--env", "CartPole-v1", "--num-envs", "4", "--num-steps", "16", "--num-iterations", "6"]
RUN += ["--update-epochs", "2", "--num-minibatches", "2", "--save-every", "3", "--seed", "3"]
# the scalars that do not depend on the clock
TIMED = ("time/", "charts/SPS")


def linen(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "ppo_linen.py"), *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def scalars(run_dir) -> dict:
    """{tag: [(step, value), ...]} of the run folder's events files, the clock's tags left out."""
    frame = SummaryReader(str(run_dir), pivot=False).scalars
    series = {}
    for tag, rows in frame.groupby("tag"):
        if not tag.startswith(TIMED):
            series[tag] = sorted(zip(rows["step"].tolist(), rows["value"].tolist()))
    return series


@pytest.mark.slow
def test_resume_alone_continues_the_run_as_an_uninterrupted_one(tmp_path):
    whole = linen(*RUN, "--log-dir", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr[-3000:]
    whole_dir = only_run_dir(tmp_path / "whole")

    proc = interrupted("linen", RUN, tmp_path / "stopped", "iter 4/")
    output = "".join(proc.output)
    assert proc.returncode == 130, output[-3000:]
    run_dir = only_run_dir(tmp_path / "stopped")
    # the save line, and the interrupt line with the iteration saved and the command to continue
    assert f"{resuming.RESUME_FILE}: iteration 3 saved in {run_dir}" in output
    assert (
        f"{resuming.RESUME_FILE} holds iteration 3: continue with `python ppo_linen.py "
        f"--resume {run_dir}`" in output
    )

    # no flag but --resume: the run's own flags
    resumed = linen("--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    # the header names the folder the run continues in
    assert f"{run_dir.name}: setup " in resumed.stdout
    # saving as it did: its last iteration saved, the state bit for bit the uninterrupted run's
    assert f"{resuming.RESUME_FILE}: iteration 6 saved in {run_dir}" in resumed.stdout
    got_arrays = resuming.read_resume(run_dir, tensors=True)[1]
    want_arrays = resuming.read_resume(whole_dir, tensors=True)[1]
    assert len(got_arrays) == len(want_arrays) > 0
    assert all((a == b).all() and a.dtype == b.dtype for a, b in zip(got_arrays, want_arrays))
    # each step once, the same series as the uninterrupted run's
    got, want = scalars(run_dir), scalars(whole_dir)
    assert got.keys() == want.keys() and "charts/episodic_return" in got
    # logged at every iteration (the episodes' tags only where one ended)
    assert [step for step, _ in got["charts/learning_rate"]] == [64 * i for i in range(1, 7)]
    for tag, series in got.items():
        steps = [step for step, _ in series]
        assert len(steps) == len(set(steps)), (tag, steps)
        assert series == want[tag], tag


@pytest.mark.slow
def test_a_flag_given_with_resume_alone_that_differs_is_refused(tmp_path):
    args = [*RUN[:-4], "--num-iterations", "2", "--save-every", "1"]
    done = linen(*args, "--log-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = only_run_dir(tmp_path)
    # the flags are checked before the run's completion: a flag that differs is named
    proc = linen("--resume", str(run_dir), "--num-envs", "8")
    assert proc.returncode == 2, proc.stderr
    assert "that run has --num-envs 4, not 8" in proc.stderr


def test_the_run_flags_fill_in_what_the_command_line_leaves_out(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = {"env": "Acrobot-v1", "num_envs": 4, "anneal_lr": False, "learning_rate": 2.5e-4}
    config |= {"resume": None, "log_dir": "elsewhere", "save_every": 3}
    (run_dir / "config.json").write_text(json.dumps(config))
    names = ["env", "num_envs", "anneal_lr", "learning_rate", "resume", "log_dir", "save_every"]
    names.append("seed")
    argv = ["--resume", str(run_dir), "--num-envs=8"]
    got = resuming.resumed_argv(names, argv)
    # the run's own flags first (its --save-every too), each one token, those given as they are
    # (refused later when they differ); where it runs (--resume, --log-dir) is not the run's
    assert got == [
        *("--env=Acrobot-v1", "--no-anneal-lr", "--learning-rate=0.00025", "--save-every=3"),
        *argv,
    ]
    # without --resume, argv as it is
    assert resuming.resumed_argv(names, ["--num-envs", "8"]) == ["--num-envs", "8"]
    with pytest.raises(checkpoint.BadCheckpoint, match="not a run folder"):
        resuming.resumed_argv(names, ["--resume", str(tmp_path / "nowhere")])


@dataclass
class Args:
    env: str = "CartPole-v1"
    exp_name: str = "ppo_linen"
    model_size: str = "small"
    compile: str = "jit"
    seed: int = 1
    num_agents: int = 1
    resume: Optional[str] = None


def test_the_run_name_holds_a_given_exp_name_where_cleanrl_puts_it():
    book = Bookkeeping.__new__(Bookkeeping)
    default = book.run_name(Args(), "linen").split("__")
    assert default[:5] == ["CartPole-v1", "linen", "small", "jit", "1"] and len(default) == 6
    named = book.run_name(Args(exp_name="tuned"), "linen").split("__")
    assert named[:6] == ["CartPole-v1", "tuned", "linen", "small", "jit", "1"]
    # N agents: said after the seeds' first (issue 84 item 7: the name did not say 8 agents)
    agents = book.run_name(Args(num_agents=8), "linen").split("__")
    assert agents[:6] == ["CartPole-v1", "linen", "small", "jit", "1", "8agents"]
    assert len(agents) == 7
    # resumed: the folder it continues in
    assert book.run_name(Args(resume="runs/a__b__1796495836/"), "linen") == "a__b__1796495836"

"""What a script prints while it runs: a first line before the heavy imports, progress lines whose
ETA comes from the iterations after compilation (none before two of them), "no episode ended" rather
than a NaN return, and the final return at the progress lines' precision."""

import re
import subprocess
import sys

import pytest
from script_runs import FAST_COMPILE

import bookkeeping
from helpers import ROOT, STUDY, TINY, run_script

FRAMEWORKS = list(STUDY.frameworks)
FIRST_FAST = [
    pytest.param(f, marks=() if i == 0 else pytest.mark.slow) for i, f in enumerate(FRAMEWORKS)
]
SCALARS = {"charts/SPS": 1000.0, "time/rollout": 0.5, "time/update": 0.25, "time/elapsed": 30.0}


def test_the_eta_is_the_mean_after_compilation_once_there_are_two():
    """bookkeeping.progress: the progress line every script prints (a starter copies it)."""
    scalars = {**SCALARS, "charts/episodic_return": 21.25}
    # iteration 0 compiles (9 s)
    assert bookkeeping.progress(10, 0, scalars, [9.0]).endswith("elapsed 30.0s ETA -")
    # one iteration after it: not yet
    assert bookkeeping.progress(10, 1, scalars, [9.0, 4.0]).endswith("ETA -")
    # iterations 1 and 2 took 4 s and 2 s: 3 s each for the 7 left
    line = bookkeeping.progress(10, 2, scalars, [9.0, 4.0, 2.0])
    assert (
        line
        == "iter 3/10 | SPS 1,000 | return 21.2 | rollout 0.500s update 0.250s | elapsed 30.0s ETA "
        "21s"
    )


def test_an_iteration_without_an_ended_episode_says_so():
    line = bookkeeping.progress(100, 4, SCALARS, [9.0, 1.0, 1.0])
    assert "| no episode ended |" in line and "nan" not in line.lower()


@pytest.mark.parametrize("framework", FIRST_FAST)
def test_a_run_prints_a_first_line_then_its_progress(framework, log_dir):
    """MountainCar-v0: no episode ends in 4 x 16 steps."""
    name = STUDY.frameworks[framework].script
    args = [*TINY[:4], "--num-iterations", "4", *TINY[6:], "--env", "MountainCar-v0"]
    # the progress lines are the point, not the compile: the fastest mode (torch.compile: ~1 min)
    args += ["--compile", FAST_COMPILE[framework]]
    proc = run_script(name, *args, log_dir=log_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"{name}: importing ")
    progress = [line for line in lines if line.startswith("iter ")]
    assert [line.split(" | ")[0] for line in progress] == [f"iter {i}/4" for i in range(1, 5)]
    assert all(line.endswith("ETA -") for line in progress[:2])
    assert all(re.search(r"ETA \d+s$", line) for line in progress[2:])
    assert (
        all("| no episode ended |" in line for line in progress)
        and "nan" not in proc.stdout.lower()
    )
    assert "final return none (the mean episodic return of the last 10 iterations)" in lines[-1]


def test_the_final_return_has_the_progress_lines_precision(log_dir):
    proc = run_script(STUDY.frameworks[FRAMEWORKS[0]].script, *TINY, log_dir=log_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(
        r"final return \d+\.\d \(the mean episodic return of the last 10 iterations\), logs in ",
        proc.stdout.splitlines()[-1],
    ), proc.stdout[-500:]


@pytest.mark.parametrize("framework", FIRST_FAST)
def test_help_says_what_the_script_does_and_torch_what_each_compile_mode_does(framework):
    name = STUDY.frameworks[framework].script
    cmd = [sys.executable, str(ROOT / name), "--help"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    described = proc.stdout.split("usage:", 1)[1].splitlines()
    assert described[2].startswith("PPO in ") and "trains agents" in described[2]
    if framework == "torch":
        text = " ".join(
            proc.stdout.split("--compile", 1)[1].split("--device")[0].replace("│", " ").split()
        )
        for mode in STUDY.frameworks["torch"].compile + ("cudagraphs",):
            assert f"{mode}:" in text
        assert "needs a GPU" in text


def test_the_last_line_gives_several_agents_mean_and_spread():
    assert bookkeeping.said_return([None]) == "none"
    assert bookkeeping.said_return([12.34]) == "12.3"
    # two of three agents ended an episode: their mean, their std, and how many
    assert bookkeeping.said_return([10.0, None, 20.0]) == "15.0 ± 5.0 over 2 of 3 agents"

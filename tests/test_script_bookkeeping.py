"""The training scripts' bookkeeping (issue 54 items 8, 13, 16 and
20): the JAX settings of the environment, a run stopped before its first iteration, and a full disk
at the writer's close. (Items 10 and 11: tests/test_thread_governor.py, tests/test_script_inputs.py
and tests/test_envpool.py.)"""

import os
import signal
import subprocess
import sys
import textwrap

import jax
import pytest
from script_runs import script_module

import bookkeeping
from core import run_checks
from helpers import ROOT, TINY, only_run_dir, read_json, run_script

SMALL = [*TINY[:4], "--num-iterations", "2", "--update-epochs", "1", "--num-minibatches", "1"]


def assert_refused_in_one_line(proc, words: list[str], log_dir) -> None:
    """Bad input: exit 2, one line on stderr naming words, and no folder made."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    assert all(word in lines[0] for word in words), lines[0]
    assert not log_dir.exists()


# ------------------------------------------------------------ item 8: the computation's environment
@pytest.mark.parametrize(
    "setting,variable",
    [("jax_enable_x64", "JAX_ENABLE_X64"), ("jax_disable_jit", "JAX_DISABLE_JIT")],
)
def test_a_jax_setting_config_json_would_misreport_is_refused(setting, variable):
    """x64 runs the networks in float64 where config.json says float32 (and the analysis compares it
    with torch as float32); disable_jit runs op by op where it says jit."""
    jax.config.update(setting, True)
    try:
        with pytest.raises(ValueError, match=variable):
            bookkeeping.check_args(script_module("linen").Args, [])
    finally:
        jax.config.update(setting, False)


@pytest.mark.slow
def test_jax_enable_x64_is_refused_before_any_folder(log_dir):
    proc = run_script("ppo_linen.py", *SMALL, log_dir=log_dir, env={"JAX_ENABLE_X64": "1"})
    assert_refused_in_one_line(proc, ["JAX_ENABLE_X64='1'", "float64"], log_dir)


def test_config_records_the_variables_that_change_the_computation(monkeypatch):
    recorded = {
        "XLA_FLAGS": "--xla_cpu_use_thunk_runtime=false",
        "JAX_DEFAULT_MATMUL_PRECISION": "highest",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }
    for name, value in recorded.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("UNRELATED_SETTING", "x")
    variables = run_checks.machine()["environment_variables"]
    assert recorded.items() <= variables.items()
    assert "UNRELATED_SETTING" not in variables and "PATH" not in variables


# ------------------------------------------------------------- item 16: a platform JAX cannot start
@pytest.mark.slow
def test_jax_platforms_without_its_device_is_one_line(log_dir):
    """JAX_PLATFORMS=cuda on a CPU machine failed in gymnax's import with JAX's 37-line
    traceback."""
    if jax.default_backend() == "gpu":
        pytest.skip("this machine has the GPU that JAX_PLATFORMS=cuda asks for")
    proc = run_script("ppo_linen.py", *SMALL, log_dir=log_dir, env={"JAX_PLATFORMS": "cuda"})
    assert_refused_in_one_line(proc, ["JAX_PLATFORMS='cuda'"], log_dir)


# ------------------------------------------------------ item 13: stopped before its first iteration
def start_script(log_dir, *args: str):
    """ppo_linen.py in the background, without the tests' compilation cache (so iteration 0 compiles
    for seconds); its output (stderr merged) read line by line."""
    cmd = [sys.executable, str(ROOT / "ppo_linen.py"), *args, "--log-dir", str(log_dir)]
    env = {**os.environ, "WANDB_MODE": "disabled", "JAX_COMPILATION_CACHE_DIR": ""}
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def sigterm_at(proc, words: str) -> str:
    """Sends SIGTERM once a line of output holds words; returns the whole output."""
    output = []
    for line in proc.stdout:
        output.append(line)
        if words in line:
            proc.send_signal(signal.SIGTERM)
            break
    try:
        rest, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
    return "".join(output) + rest


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["importing", ": setup "])
def test_a_run_stopped_before_its_first_iteration_leaves_no_folder(moment, tmp_path):
    """A SIGTERM in the imports (held until main() starts) or in iteration 0's compile: exit 130, a
    line that says nothing ran, and no run folder for bench.sh's resume or the analysis to find (the
    log folder it made for the run is gone too)."""
    log_dir = tmp_path / "logs" / "runs"
    proc = start_script(log_dir, *TINY[:4], "--num-iterations", "1000")
    output = sigterm_at(proc, moment)
    assert proc.returncode == 130, output[-3000:]
    assert "interrupted before the first iteration: nothing ran" in output, output[-3000:]
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- item 20: a full disk at the close
FULL_AT_CLOSE = """
    import os
    from dataclasses import dataclass

    import tyro
    from tensorboardX import SummaryWriter

    from bookkeeping import Bookkeeping


    @dataclass
    class Args:
        log_dir: str
        num_envs: int = 1
        num_steps: int = 1
        num_minibatches: int = 1
        model_size: str = "small"
        track: bool = False
        wandb_project_name: str = "p"
        wandb_entity: str = "e"

        @property
        def batch_size(self):
            return 1


    def full_disk():
        raise OSError(28, "No space left on device")


    def main():
        args = tyro.cli(Args)
        run_dir = book.make_run_dir(os.path.join(args.log_dir, "run"))
        book.start({"num_iterations": 1}, run_dir)
        with SummaryWriter(run_dir) as writer:
            writer.add_scalar("x", 1.0, 1)
            times = {"time/iteration": 1.0, "time/rollout": 0.5, "time/update": 0.5}
            scalars = {**times, "time/elapsed": 2.0, "charts/SPS": 1.0}
            book.iteration_done(0, [float("nan")], writer, scalars)
            # the disk is full when the writer flushes what it holds: on leaving `with`, and again
            # at exit
            writer._get_file_writer().event_writer._ev_writer.flush = full_disk


    book = Bookkeeping(0.0, packages=())
    book.wrap(main, Args)()
"""


def test_a_full_disk_at_the_writers_close_is_one_line_and_no_atexit_traceback(tmp_path):
    """The run's error line names the full disk; tensorboardX's writer, closing again at exit,
    printed "Exception ignored in atexit callback" and a traceback after it."""
    script = tmp_path / "stand_in.py"
    script.write_text(textwrap.dedent(FULL_AT_CLOSE))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(script), "--log-dir", str(tmp_path / "runs")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0], proc.stderr[-3000:]
    summary = read_json(only_run_dir(tmp_path / "runs") / "summary.json")
    assert summary["status"] == "failed" and "No space left" in summary["error"]

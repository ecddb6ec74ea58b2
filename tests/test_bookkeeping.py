"""The benchmark bookkeeping of the PPO scripts (bookkeeping.py): it goes by deletion, and with it a
run never loses its folder, its summary or a signal. Parametrised over the study's frameworks."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from script_runs import interrupted, script

import bookkeeping
from core import run_checks
from helpers import ROOT, STUDY, TINY, only_run_dir, read_json, run_script

FRAMEWORKS = list(STUDY.frameworks)


# --------------------------------------------------------------------------------- the starter copy


# -------------------------------------------------------------------------------------- run folders
def test_a_taken_run_folder_name_gets_a_suffix(tmp_path):
    book = bookkeeping.Bookkeeping(time.perf_counter(), packages=())
    name = str(tmp_path / "CartPole-v1__linen__small__jit__1__1700000000")
    made = [book.make_run_dir(name) for _ in range(3)]
    assert made == [name, f"{name}-2", f"{name}-3"]
    assert all(Path(path).is_dir() for path in made)


@pytest.mark.slow
def test_two_identical_runs_started_together_get_two_folders(log_dir):
    """Two runs of the same command, started in the same second: two folders, two events files, two
    summaries."""
    cmd = [sys.executable, str(ROOT / "ppo_linen.py"), *TINY, "--log-dir", str(log_dir)]
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in "ab"
    ]
    for proc in procs:
        assert proc.wait(timeout=600) == 0, proc.stderr.read().decode()[-3000:]
    run_dirs = sorted(log_dir.iterdir())
    assert len(run_dirs) == 2, run_dirs
    for run_dir in run_dirs:
        assert read_json(run_dir / "summary.json")["status"] == "completed"
        assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1


def temporary_files(folder: Path) -> list[Path]:
    """The temporary files of atomic.py's writes (".{name}.*.partial") left anywhere under
    folder."""
    return [path for path in folder.rglob("*") if path.name.endswith((".partial", ".tmp"))]


def test_json_files_are_written_atomically(tmp_path, monkeypatch):
    """A write that fails half way (its temporary file written, the rename refused) leaves the old
    file whole and no temporary file."""
    path = tmp_path / "summary.json"
    bookkeeping.write_json(str(path), {"status": "completed"})

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        bookkeeping.write_json(str(path), {"status": "failed"})
    assert json.loads(path.read_text()) == {"status": "completed"} and os.listdir(tmp_path) == [
        "summary.json"
    ]


# -------------------------------------------------------------------------------------- a full disk
@pytest.fixture
def tiny_disk(tmp_path):
    """A 40 KB tmpfs (root only; skipped elsewhere)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=40k", "tmpfs", str(mount_point)], capture_output=True
    )
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.decode().strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.mark.slow
def test_a_full_disk_mid_run_fails_the_run_in_one_line(tiny_disk):
    """The events outgrow the disk: the run ends (no hang), status failed if summary.json fits, one
    line, exit 1."""
    proc = run_script(
        "ppo_linen.py",
        *TINY[:-2],
        "--num-minibatches",
        "2",
        "--num-iterations",
        "400",
        log_dir=tiny_disk,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "disk" in lines[0], proc.stderr[
        -3000:
    ]
    run_dir = only_run_dir(tiny_disk)
    config = read_json(run_dir / "config.json")  # whole, never half-written
    assert config["framework"] == "linen"
    if (run_dir / "summary.json").exists():
        summary = read_json(run_dir / "summary.json")
        assert summary["status"] == "failed" and "error" in summary
        assert 0 < summary["iterations_completed"] < 400
    assert not temporary_files(run_dir)


@pytest.mark.slow
def test_a_full_disk_at_the_start_is_one_line_and_no_empty_config(tiny_disk):
    """No room for config.json: one line, exit 1, and no 0-byte or half-written config.json."""
    fd = os.open(tiny_disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 512)
    except OSError:  # the disk is full
        os.close(fd)
    proc = run_script("ppo_linen.py", *TINY, log_dir=tiny_disk, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    for path in tiny_disk.rglob("*.json"):
        json.loads(path.read_text())  # whatever JSON exists is whole
    assert not temporary_files(tiny_disk)


# ------------------------------------------------------------------------------------------ signals
@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_sigint_during_the_imports_is_not_lost(framework, log_dir):
    """Started with SIGINT ignored (a background job of a script), a SIGINT sent while the script
    still imports its packages stops the run before its first iteration: exit 130, and no run folder
    (nothing ran)."""
    cmd = [
        sys.executable,
        str(ROOT / script(framework)),
        *TINY[:4],
        "--num-iterations",
        "1000",
        "--log-dir",
        str(log_dir),
    ]
    cmd = ["bash", "-c", 'trap "" INT; exec "$@"', "bash", *cmd]
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    time.sleep(0.5)  # in the imports, which take seconds
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 130, output[-3000:]
    assert "nothing ran, no run folder made" in output, output[-3000:]
    assert ": setup " not in output and not log_dir.exists()


@pytest.mark.slow
def test_two_sigints_during_the_compile_stop_the_run_in_one_line_never_a_segfault(
    tmp_path, monkeypatch
):
    """Two SIGINTs 0.5 s apart while iteration 0 compiles: the second stops the run at once, inside
    JAX's compile, and ends it by os._exit once its cleanup is done (issue 79: the interpreter's
    exit raced XLA's compile threads, a segfault in 4 of 6 trials; test_interrupts.py stops a
    compile at a known moment). Twice: exit 130 each time, the two signals answered, then one
    line, no traceback."""
    # XLA compiles for seconds: the session's cache (conftest.py) would skip it
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv("JAX_ENABLE_COMPILATION_CACHE", "false")
    for trial in range(2):
        log_dir = tmp_path / str(trial)
        args = [*TINY[:4], "--num-iterations", "100000"]
        # 0.2 s after setup: past the check that starts iteration 0, on a busy machine too
        proc = interrupted("linen", args, log_dir, ": setup ", repeats=2, settle=0.2, apart=0.5)
        output = "".join(proc.output)
        assert proc.returncode == 130, output[-3000:]
        after = output.split(": setup ", 1)[1].splitlines()[1:]
        assert "Traceback" not in output and "Fatal" not in output, output[-3000:]
        answers = [line for line in after if line.startswith("SIGINT: ")]
        assert answers == [
            "SIGINT: stopping at the next iteration boundary (again: at once)",
            "SIGINT: stopping at once",
        ], output[-3000:]
        (last,) = [line for line in after if not line.startswith(("SIGINT: ", "iter "))]
        assert last.startswith("interrupted"), output[-3000:]


@pytest.mark.slow
def test_a_sighup_stops_the_run_with_its_summary(log_dir):
    """A SIGHUP (its terminal closed; issue 79: it killed the run, no summary.json) stops the run at
    its next iteration boundary: status interrupted, the signal listed, exit code 130, one line."""
    args = [*TINY[:4], "--num-iterations", "100000"]
    proc = interrupted("linen", args, log_dir, "iter 2/", signal.SIGHUP)
    output = "".join(proc.output)
    assert proc.returncode == 130, output[-3000:]
    summary = read_json(only_run_dir(log_dir) / "summary.json")
    assert summary["status"] == "interrupted" and summary["signals"] == ["SIGHUP"], summary
    assert summary["iterations_completed"] >= 2
    after = output.split("SIGHUP: ", 1)[1].splitlines()[1:]
    (last,) = [line for line in after if not line.startswith("iter ")]
    assert last.startswith("interrupted: ") and "Traceback" not in output, output[-3000:]


def test_cpu_bf16_flags_name_the_native_bfloat16_instructions(tmp_path):
    """config.json's cpu_bf16: the bfloat16 flags of every line of cpuinfo's flags, in a fixed
    order; [] for a CPU without them (bfloat16 emulated); None without a cpuinfo."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nflags\t\t: fpu avx2 amx_bf16 avx512f avx512_bf16\n\n"
        "processor\t: 1\nflags\t\t: fpu avx2 amx_bf16 avx512f avx512_bf16\n"
    )
    assert run_checks.cpu_bf16_flags(str(cpuinfo)) == ["avx512_bf16", "amx_bf16"]
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f\nbugs\t\t: avx512_bf16\n")
    assert run_checks.cpu_bf16_flags(str(cpuinfo)) == []
    assert run_checks.cpu_bf16_flags(str(tmp_path / "missing")) is None
    assert "cpu_bf16" in run_checks.machine()


@pytest.mark.parametrize("framework", list(STUDY.frameworks))
def test_only_the_torch_script_imports_torch(framework):
    """tensorboardX imports torch whenever it is installed (about 1 s): the JAX scripts import it
    with torch hidden, and never load torch (python -X importtime lists every module a run imports,
    here up to the refusal of a batch too large, after the imports)."""
    too_large = ["--num-envs", "1000000000", "--num-steps", "1000000"]
    imported = modules_imported(STUDY.frameworks[framework].script, *too_large)
    # (a hidden torch is listed too, as a failed import of no submodule)
    assert "tensorboardX" in imported
    assert ("torch._C" in imported) == (framework == "torch")


def modules_imported(script: str, *argv: str) -> set[str]:
    """Every module the script imports before it exits (python -X importtime)."""
    cmd = [sys.executable, "-X", "importtime", str(ROOT / script), *argv]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 2), proc.stderr[-3000:]
    return {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}


@pytest.mark.parametrize("framework", list(STUDY.frameworks))
@pytest.mark.parametrize("argv", [["--help"], ["--lr", "0.1"], ["--total-timesteps", "1000"]])
def test_help_and_a_bad_flag_are_answered_before_the_heavy_imports(framework, argv):
    """--help and a bad command line take a fraction of a second: no JAX, Flax, Equinox, gymnax or
    torch is imported before the answer."""
    imported = modules_imported(STUDY.frameworks[framework].script, *argv)
    heavy = {"jax", "flax", "equinox", "gymnax", "torch", "tensorboardX", "numpy"}
    assert "core.command_line" in imported and not heavy & imported


def test_the_peak_memory_is_the_process_own_not_its_parents():
    """summary.json's peak_rss_bytes: a run started by a process that held 600 MiB (a test runner,
    a benchmark) reports its own peak, not that parent's, which Linux's ru_maxrss passes on at the
    child's exec."""
    child = "import bookkeeping; print(bookkeeping.peak_rss_bytes())"
    parent = (
        "import subprocess, sys\n"
        "held = bytearray(600 * 2**20)\n"
        "held[::4096] = b'x' * len(held[::4096])\n"
        f"print(subprocess.run([sys.executable, '-c', {child!r}], capture_output=True, text=True,"
        " check=True).stdout)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", parent], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert 0 < int(done.stdout.split()[-1]) < 400 * 2**20

"""The suite's own set-up: a module-scoped fixture (trained runs, an analysed study) is made once
per run of the suite, on one xdist worker, however many workers share the module's tests."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parent / "conftest.py"
# the suite's conftest.py, loaded under another name (this folder's own is "conftest")
LOADER = f"""
import importlib.util
import sys

sys.path.insert(0, {str(CONFTEST.parent)!r})

spec = importlib.util.spec_from_file_location("suite_conftest", {str(CONFTEST)!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
pytest_collection_modifyitems = suite.pytest_collection_modifyitems
"""
TESTS = """
import os
import time

import pytest


@pytest.fixture(scope="module")
def made():
    with open(os.environ["MADE"], "a") as f:
        f.write("made\\n")


@pytest.mark.parametrize("i", range(6))
def test_uses_it(made, i):
    time.sleep(0.2)


@pytest.mark.parametrize("i", range(6))
def test_does_not(i):
    time.sleep(0.2)
"""


def test_a_module_fixture_is_made_once_by_two_workers(tmp_path):
    (tmp_path / "conftest.py").write_text(LOADER)
    (tmp_path / "test_shared.py").write_text(TESTS)
    made = tmp_path / "made.txt"
    env = {**os.environ, "MADE": str(made)}
    command = [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup"]
    command += ["-p", "no:cacheprovider", "test_shared.py"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "12 passed" in done.stdout
    # two workers would each make it once, as pytest 9.2 lets them (its node ids lose xdist's
    # groups: pytest-xdist#1386)
    assert made.read_text().splitlines() == ["made"]


TESTS_DIR = CONFTEST.parent
# One session of two xdist workers, for the cache of trained runs and the guard on unmarked tests:
# trained_runs' TrainedRuns, its script run replaced by one that writes a run folder and counts
# itself, and the suite's guard (suite_guard.py), its limit lowered to 0.3 s
INNER_CONFTEST = f"""
import os
import sys

import pytest

sys.path[:0] = [{str(TESTS_DIR)!r}, {str(TESTS_DIR.parent)!r}]
import suite_guard
import trained_runs
from suite_guard import (
    pytest_runtest_logreport,
    pytest_runtest_makereport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)

suite_guard.UNMARKED_LIMIT_S = 0.3


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: as the suite's")


def fake_run(script, *args, log_dir):
    with open(os.environ["MADE"], "a") as f:
        f.write(" ".join([script, *args]) + "\\n")
    (log_dir / "run").mkdir(parents=True)
    (log_dir / "run" / "config.json").write_text("{{}}")
    return type("Done", (), dict(returncode=0, stdout="trained", stderr=""))


trained_runs.run_script = fake_run


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    return trained_runs.TrainedRuns(tmp_path_factory.getbasetemp().parent / "trained-runs")
"""
CACHE_TESTS = """
def test_reads_it(trained_run, tmp_path):
    run_dir = trained_run("linen", "--num-envs", "4")
    assert run_dir.name == "run" and (run_dir / "config.json").exists()
    copy = trained_run("linen", "--num-envs", "4", copy_to=tmp_path)
    assert copy == tmp_path / "run" and copy != run_dir


def test_another(trained_run):
    assert trained_run.output("nnx", "--num-envs", "8") == "trained"
"""
GUARD_TESTS = """
import time

import pytest
import trained_runs


def test_quick():
    pass


def test_long_unmarked():
    time.sleep(0.6)


@pytest.fixture
def long_setup():
    time.sleep(0.4)


def test_long_with_its_setup(long_setup):
    time.sleep(0.2)


@pytest.mark.slow
def test_long_marked():
    time.sleep(0.6)


@pytest.mark.parametrize("i", [pytest.param(1, marks=pytest.mark.slow)])
def test_long_marked_by_its_parameter(i):
    time.sleep(0.6)


def test_long_in_a_shared_run():
    # as a test that waited 0.6 s in trained_run for a run another worker trained
    time.sleep(0.6)
    trained_runs.spent[0] += 0.6
"""


@pytest.fixture(scope="module")
def inner(tmp_path_factory):
    """The session's output and what its fake script runs trained."""
    root = tmp_path_factory.mktemp("inner")
    (root / "conftest.py").write_text(INNER_CONFTEST)
    (root / "test_a.py").write_text(CACHE_TESTS)
    (root / "test_b.py").write_text(CACHE_TESTS)
    (root / "test_guarded.py").write_text(GUARD_TESTS)
    env = {**os.environ, "MADE": str(root / "made.txt")}
    command = [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    return done, (root / "made.txt").read_text().splitlines()


def test_a_trained_run_is_trained_once_by_two_workers(inner):
    """trained_runs.TrainedRuns: the workers of one session share its folder; the first to ask
    trains a run, the others wait on its lock and read it; a run of other flags is another run."""
    done, made = inner
    assert "10 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(made) == ["ppo_linen.py --num-envs 4", "ppo_nnx.py --num-envs 8"]


def test_a_test_not_marked_slow_over_the_limit_fails_the_suite(inner):
    """Read from pytest's own report (setup, call and teardown), sent by xdist's workers: an
    unmarked test over the limit fails the run and is named; a test marked slow (or its parameter)
    may take longer, and so may one for the seconds it spent in trained_run."""
    done, _ = inner
    assert done.returncode == 1 and "10 passed" in done.stdout, done.stdout[-3000:]
    named = done.stdout.split("tests not marked slow that took over 0.3 s")[1]
    listed = [line.split()[-1] for line in named.splitlines() if " s test_" in line]
    assert sorted(listed) == [
        "test_guarded.py::test_long_unmarked",
        "test_guarded.py::test_long_with_its_setup",
    ], done.stdout

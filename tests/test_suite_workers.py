"""The suite's own set-up: a module-scoped fixture (trained runs, an analysed study) is made once
per run of the suite, on one xdist worker, however many workers share the module's tests."""

import os
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).resolve().parent / "conftest.py"
# the suite's conftest.py, loaded under another name (this folder's own is "conftest")
LOADER = f"""
import importlib.util

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

"""Fixtures, and the test session's JAX compilation cache. The builders the test files share live
beside them, each defined once: tests/helpers.py (processes, run folders, events, GAE),
analysis_runs.py and learning_runs.py (the analysis' made-up inputs), sweep_runs.py (bench.sh and
the sweep), setup_copy.py (setup.sh), script_runs.py (the ppo_*.py scripts), checkpoints.py
(checkpoints without training), trained_runs.py (tiny runs trained once per run of the suite,
the `trained_run` fixture), parity_sides.py (the parity tests' adapters) and env_contracts.py (one
iteration of a script in-process, on any env); a test file imports from them, never from another
test file."""

import os
import tempfile
from pathlib import Path

import pytest

# the guard on tests not marked slow: its hooks, run by pytest from here
from suite_guard import (  # noqa: F401
    pytest_runtest_logreport,
    pytest_runtest_makereport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)

# The tests run the scripts hundreds of times on the same tiny configurations: a persistent JAX
# compilation cache, shared by the session's processes, skips XLA's compile after the first (a tiny
# Linen run: ~23 s -> ~13 s here). Only the tests set it: a benchmark's or a sweep's run starts from
# an empty cache (METHODOLOGY.md).
CACHE = Path(tempfile.gettempdir()) / f"benchback-rl-tests-jax-cache-{os.getuid()}"
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(CACHE))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")


# the repository on the path of every child process: bench.sh and the tests run the sweep as python
# -m sweep
ROOT = Path(__file__).resolve().parents[1]
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """trained_run(framework, *args, copy_to=None): the folder of a tiny run trained once per run of
    the suite, shared by the xdist workers (tests/trained_runs.py)."""
    from trained_runs import TrainedRuns

    root = tmp_path_factory.getbasetemp()
    # a worker's base folder is one of the session's: their parent is the session's, shared
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    return TrainedRuns(root / "trained-runs")


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"


@pytest.fixture
def fake(tmp_path: Path) -> dict:
    """The environment of a bench.sh whose study has the stand-in framework "fake"
    (sweep_runs.fake_env): the sweep's tests run it."""
    from sweep_runs import fake_env

    return fake_env(tmp_path)


@pytest.fixture
def runs_csv(tmp_path: Path) -> Path:
    """A runs.csv of 4 envs, linen and nnx, 2 seeds (analysis_runs): pairs to compare, so README
    tables to write."""
    from analysis_runs import ENVS, linen_nnx, write_csv

    return write_csv(tmp_path / "runs.csv", linen_nnx(ENVS))


# first: xdist's own hook reads the groups to name the tests it deals out
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list) -> None:
    """Each test that uses a module-scoped fixture runs on the xdist worker of its module's others
    (a group per module, for --dist loadgroup), so that the fixture (trained runs, an analysed
    study) is made once per run of the suite, not once per worker. A test's own group is kept."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        definitions = item._fixtureinfo.name2fixturedefs.values()
        if any(defs[-1].scope == "module" for defs in definitions):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))

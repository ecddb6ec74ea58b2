"""setup.sh and requirements.lock: the lock pins every top-level requirement, and setup.sh installs
the lock once, chooses torch's build, falls back from an unreachable index at once and refuses bad
input. setup.sh runs in a copy of the repository's set-up files with a stub .venv whose pip records
what it is asked to do."""

import importlib.metadata
import os
import re
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from setup_copy import make_copy, pip_calls

import env_adapters

ROOT = Path(__file__).resolve().parent.parent


def locked_versions() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)", line)
        if match:
            pins[normalized(match.group(1))] = match.group(2)
    return pins


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_lock_pins_every_requirement_within_its_range():
    pins = locked_versions()
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        name = normalized(requirement.name)
        if name == "torch":
            # the one package setup.sh installs itself, by the machine's build
            assert name not in pins
            continue
        assert name in pins, f"requirements.lock does not pin {name}: ./setup.sh lock"
        assert requirement.specifier.contains(pins[name]), (name, pins[name])


def no_deps_pin() -> str:
    """The package setup.sh installs without its declared dependencies (NO_DEPS)."""
    match = re.search(r"^NO_DEPS=\((\S+)\)", (ROOT / "setup.sh").read_text(), re.MULTILINE)
    return match.group(1)


def test_playground_without_its_dependencies_has_the_others_in_the_lock():
    """setup.sh installs playground with --no-deps: every dependency it declares is pinned by the
    lock, but the two that setup.sh's header names as left out; the install line of env_adapters'
    one-line error is setup.sh's pin; the venv holds that version."""
    pin = no_deps_pin()
    name, version = pin.split("==")
    assert name == "playground" and f"--no-deps {pin} lxml" in env_adapters.PLAYGROUND_INSTALL
    declared = [Requirement(line) for line in importlib.metadata.requires(name)]
    needed = {normalized(r.name) for r in declared if r.marker is None}
    left_out = needed - set(locked_versions())
    assert left_out == {"warp-lang", "mediapy"}
    header = (ROOT / "setup.sh").read_text().split("\nset -euo pipefail")[0]
    assert all(package in header for package in left_out)
    assert importlib.metadata.version(name) == version


def run_setup(repo: Path, *args, torch="cpu"):
    env = dict(os.environ, BENCHBACK_TORCH=torch)
    return subprocess.run(
        ["bash", str(repo / "setup.sh"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_setup_installs_torch_then_the_lock_once(tmp_path):
    repo = make_copy(tmp_path)
    first = run_setup(repo, "run", "true")
    assert first.returncode == 0, first.stderr
    calls = pip_calls(repo)
    assert calls[0] == "pip install -q torch==2.13.0"
    assert calls[1].startswith(
        "pip install --progress-bar off -r requirements.lock -r requirements.txt"
    )
    assert calls[2] == f"pip install --progress-bar off --no-deps {no_deps_pin()}"
    # the CPU index did not answer the probe: one line says so, and pip never tried it
    assert "cannot be reached" in first.stderr
    assert not any("download.pytorch.org" in call for call in calls)

    again = run_setup(repo, "run", "true")
    assert again.returncode == 0, again.stderr
    assert pip_calls(repo) == calls, "an unchanged lock must not be installed again"

    with open(repo / "requirements.lock", "a") as lock:
        lock.write("# changed\n")
    changed = run_setup(repo, "run", "true")
    assert changed.returncode == 0, changed.stderr
    assert pip_calls(repo) == 2 * calls

    with open(repo / "requirements.txt", "a") as requirements:
        requirements.write("# changed\n")
    assert run_setup(repo, "run", "true").returncode == 0
    assert pip_calls(repo) == 3 * calls, "a changed requirements.txt is installed again"


def test_a_gpu_machine_gets_the_cuda_build_and_jax_plugin(tmp_path):
    repo = make_copy(tmp_path)
    result = run_setup(repo, torch="cuda")
    assert result.returncode == 0, result.stderr
    jax = locked_versions()["jax"]
    assert pip_calls(repo)[0] == f"pip install -q torch==2.13.0 jax[cuda12]=={jax}"


@pytest.mark.parametrize(
    "args, torch, message",
    [
        (("bogus",), "cpu", "unknown command 'bogus'"),
        ((), "gpu", "BENCHBACK_TORCH must be cpu or cuda, not 'gpu'"),
        (("run",), "cpu", "run needs a command"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_installing(tmp_path, args, torch, message):
    repo = make_copy(tmp_path)
    result = run_setup(repo, *args, torch=torch)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert pip_calls(repo) == []

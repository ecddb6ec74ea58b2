"""LeanRL's Python environment, for benchmarks/leanrl.py: a venv of its own (never the project's .venv), set up from
benchmarks/leanrl-requirements.txt as setup.sh sets up .venv: torch first (its CPU build from setup.sh's CPU_INDEX
where there is no NVIDIA GPU, PyPI's CUDA build where there is; BENCHBACK_TORCH=cpu|cuda chooses instead), then
every pinned package with --no-deps. A stamp in the venv (the requirements' hash and the build) lets a later call
reuse it; --leanrl-python skips all this. Also: the GPUs here, and the versions an interpreter has."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.common import ROOT

REQUIREMENTS = Path(__file__).with_name("leanrl-requirements.txt")
STAMP = ".benchback-leanrl"
# what the record lists of each side's interpreter (those it lacks are left out)
PACKAGES = ("torch", "tensordict", "gymnasium", "mujoco", "numpy", "tqdm", "jax", "flax", "envpool")
# run in the interpreter whose versions are wanted: no import of the packages themselves
VERSIONS_SNIPPET = """
import importlib.metadata as m, json, platform, sys
found = {"python": platform.python_version()}
for name in sys.argv[1:]:
    try:
        found[name] = m.version(name)
    except m.PackageNotFoundError:
        pass
print(json.dumps(found))
"""


class EnvError(Exception):
    """LeanRL's venv cannot be set up."""


def gpus() -> list[str]:
    """The GPUs nvidia-smi lists ("GPU 0: NVIDIA H200"), as setup.sh looks for one; none without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return []
    proc = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("GPU")]
    return [line.split(" (UUID")[0] for line in lines]


def torch_build() -> str:
    """cpu or cuda: BENCHBACK_TORCH when set (as setup.sh reads it), else cuda where there is a GPU."""
    choice = os.environ.get("BENCHBACK_TORCH", "")
    if choice in ("cpu", "cuda"):
        return choice
    if choice:
        raise EnvError(f"BENCHBACK_TORCH must be cpu or cuda, not {choice!r}")
    return "cuda" if gpus() else "cpu"


def pinned(name: str, text: str) -> str:
    """The NAME==VERSION line of a requirements text."""
    for line in text.splitlines():
        if line.split("==")[0].strip().lower() == name:
            return line.split("#")[0].strip()
    raise EnvError(f"{REQUIREMENTS.name} pins no {name}")


def cpu_index(setup_sh: Path = ROOT / "setup.sh") -> str:
    """setup.sh's CPU_INDEX: where torch's CPU build comes from (one place names it)."""
    for line in setup_sh.read_text().splitlines():
        if line.startswith("CPU_INDEX="):
            return line.partition("=")[2].strip().strip("'\"")
    raise EnvError(f"{setup_sh} sets no CPU_INDEX")


def stamp_text(build: str) -> str:
    return f"{hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()} torch {build}\n"


def install_commands(python: Path, build: str) -> list[list[str]]:
    """The pip commands that fill a fresh venv: torch of the build, then every pin without dependencies."""
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    torch = pinned("torch", REQUIREMENTS.read_text())
    if build == "cpu":
        # its dependencies are pinned in the file, installed next
        first = [*pip, "--no-deps", "--index-url", cpu_index(), torch]
    else:
        # the CUDA build's own dependencies (the NVIDIA libraries) come with it
        first = [*pip, torch]
    return [first, [*pip, "--no-deps", "--requirement", str(REQUIREMENTS)]]


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def ensure_venv(venv: Path) -> Path:
    """The python of venv, set up from REQUIREMENTS unless its stamp says it already is."""
    build = torch_build()
    stamp = venv / STAMP
    if stamp.is_file() and stamp.read_text() == stamp_text(build):
        return venv_python(venv)
    print(f"setting up LeanRL's venv in {venv} (torch {build} build; minutes)", flush=True)
    steps = [[sys.executable, "-m", "venv", "--clear", str(venv)]]
    steps += install_commands(venv_python(venv), build)
    for command in steps:
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise EnvError(f"{' '.join(command[:6])} ... failed: {tail}")
    stamp.write_text(stamp_text(build))
    return venv_python(venv)


def versions(python) -> dict:
    """The Python and PACKAGES versions of an interpreter, from its package metadata."""
    proc = subprocess.run(
        [str(python), "-c", VERSIONS_SNIPPET, *PACKAGES], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise EnvError(f"{python} cannot report its versions: {proc.stderr.strip()[-300:]}")
    return json.loads(proc.stdout)

"""Where the quick start's steps run, for benchmarks/quickstart.py: a fresh clone of the repository (git clone into
a temporary folder, and its commit; README.md at HEAD for --dry-run), the steps' environment (this one without the
variables that would reuse a cache or run in another venv, with empty caches in the temporary folder) and the
machine it all runs on (cores, CPU, memory, OS, Python, host)."""

import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

from analysis.common import BadInput

CLONE = "benchback-rl"  # the clone's folder, in the temporary folder
# variables a first-time user lacks, that would reuse what was made before or run in another venv
DROPPED_VARIABLES = (
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONHOME",
    "PIP_CACHE_DIR",
    "PIP_NO_CACHE_DIR",
    "TORCHINDUCTOR_CACHE_DIR",
    "JAX_COMPILATION_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES",
    "OMP_NUM_THREADS",
)
PIP_VARIABLES = ("PIP_CACHE_DIR", "PIP_NO_CACHE_DIR")  # kept with --pip-cache


def cpu_info() -> dict:
    """The CPU's model and whether it is a virtual machine's, from /proc/cpuinfo (Linux); else platform's."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    fields = {}
    for line in lines:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return {
        "cpu_model": fields.get("model name") or platform.processor() or platform.machine(),
        "virtual_machine": "hypervisor" in fields.get("flags", "").split(),
    }


def machine() -> dict:
    """The machine the steps ran on: cores, CPU, memory, OS, this Python, host."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cores": cores,
        **cpu_info(),
        "memory_gib": round(memory / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),  # this tool's; the venv's is in each run's versions
        "hostname": socket.gethostname(),
    }


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True)


def clone_repo(repo: str, folder: Path) -> tuple[Path, str]:
    """A fresh clone of repo in folder, and its commit; BadInput with git's last line when it fails."""
    clone = folder / CLONE
    proc = git("clone", "--quiet", repo, str(clone))
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["git clone failed"])[-1]
        raise BadInput(f"--repo {repo}: cannot clone it ({why})")
    return clone, git("-C", str(clone), "rev-parse", "HEAD").stdout.strip()


def uncommitted(repo: str) -> bool:
    """Whether repo (a local git repository) has changes to tracked files, which its clone lacks."""
    proc = git("-C", repo, "status", "--porcelain", "--untracked-files=no")
    return proc.returncode == 0 and bool(proc.stdout.strip())


def committed_readme(repo: str) -> str:
    """README.md as the clone would have it (the repo's HEAD), for --dry-run; BadInput when it cannot be read."""
    proc = git("-C", repo, "show", "HEAD:README.md")
    if proc.returncode != 0:
        raise BadInput(
            f"--repo {repo}: cannot read its README.md at HEAD (a local git repository?)"
        )
    return proc.stdout


def without_venv(path: str) -> str:
    """PATH without the folders of the venv this tool runs in (if any): the clone's set-up finds its own Python."""
    if sys.prefix == sys.base_prefix:
        return path
    venv = Path(sys.prefix).resolve()
    kept = [p for p in path.split(os.pathsep) if p and not Path(p).resolve().is_relative_to(venv)]
    return os.pathsep.join(kept)


def step_environment(scratch: Path, pip_cache: bool) -> dict:
    """The steps' environment: this one without DROPPED_VARIABLES and this venv; empty caches in scratch (pip's
    own as it is with pip_cache)."""
    kept = PIP_VARIABLES if pip_cache else ()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in DROPPED_VARIABLES or key in kept
    }
    env["PATH"] = without_venv(env.get("PATH", ""))
    env["TORCHINDUCTOR_CACHE_DIR"] = str(scratch / "torchinductor-cache")
    if not pip_cache:
        env["PIP_CACHE_DIR"] = str(scratch / "pip-cache")
    return env

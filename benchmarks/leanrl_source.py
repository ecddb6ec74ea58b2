"""LeanRL's two continuous-action PPO scripts at a named commit, for benchmarks/leanrl.py: read with git from a
checkout (--leanrl-dir) or from a clone of --leanrl-repo made in the work folder, then written beside each other with
the shims that today's packages need. The shims are data (SHIMS: file, exact old text, new text, why); each one's
old text must occur exactly once in its file, or nothing is run (ShimMismatch names the shim and the count). We run
LeanRL's own files: nothing of them is copied into this repository."""

import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

LEANRL_REPO = "https://github.com/meta-pytorch/LeanRL"
# 2024-09-27; the two scripts are the same at the repository's head (2025-08-22), which changed only Atari's
LEANRL_COMMIT = "8dbb6336b7f6cc65cdbbeb2e86637c38867e2677"
PLAIN = "leanrl/ppo_continuous_action.py"  # CleanRL's script, LeanRL's baseline
COMPILED = "leanrl/ppo_continuous_action_torchcompile.py"  # --compile, --cudagraphs, or neither
SCRIPTS = (PLAIN, COMPILED)


class SourceError(Exception):
    """LeanRL's files cannot be had: a clone, a commit or a file that git cannot give."""


class ShimMismatch(Exception):
    """A shim's old text is not in its file exactly once: the file is not the one the shim was written for."""


@dataclass(frozen=True)
class Shim:
    file: str  # one of SCRIPTS
    old: str  # exact text, exactly once in the file
    new: str
    why: str


CLIP_OBS = "env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10))"
CLIP_OBS_WITH_SPACE = (
    "env = gym.wrappers.TransformObservation("
    "env, lambda obs: np.clip(obs, -10, 10), env.observation_space)"
)
CLIP_OBS_WHY = (
    "gymnasium 1.x: TransformObservation takes the observation space as a third argument, with no default "
    "(clipping keeps the space's shape and dtype, so the wrapped env's space is the right one)"
)
INFERENCE_COPY = "    agent_inference_p.to_module(agent_inference)\n"
SHIMS = (
    Shim(PLAIN, CLIP_OBS, CLIP_OBS_WITH_SPACE, CLIP_OBS_WHY),
    Shim(COMPILED, CLIP_OBS, CLIP_OBS_WITH_SPACE, CLIP_OBS_WHY),
    Shim(
        COMPILED,
        INFERENCE_COPY,
        INFERENCE_COPY + "    agent_inference.requires_grad_(False)\n",
        "tensordict 0.15: to_module puts the detached copy of the parameters back as Parameters that require "
        "grad, so the rollout's actions carry a graph: .numpy() refuses them, and the update would backward "
        "through the rollout's graph a second time. The inference copy is meant to hold no grad.",
    ),
)


def shim_records(shims=SHIMS) -> list[dict]:
    """The shims as the JSON record and the table list them."""
    return [asdict(shim) for shim in shims]


def apply_shims(texts: dict[str, str], shims=SHIMS) -> dict[str, str]:
    """texts (file -> its text) with every shim applied; ShimMismatch unless each old text occurs exactly once."""
    shimmed = dict(texts)
    for shim in shims:
        count = shimmed[shim.file].count(shim.old)
        if count != 1:
            raise ShimMismatch(
                f"{shim.file}: a shim's text occurs {count} times, not once "
                f"({shim.old.strip()!r}; {shim.why.split(':')[0]}): not the file it was written for"
            )
        shimmed[shim.file] = shimmed[shim.file].replace(shim.old, shim.new)
    return shimmed


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True)


def last_line(proc: subprocess.CompletedProcess) -> str:
    return (proc.stderr.strip().splitlines() or ["git failed"])[-1]


def clone(repo: str, folder: Path) -> Path:
    """folder, a clone of repo (made unless it is one already)."""
    if not (folder / ".git").exists():
        print(f"cloning {repo} into {folder}", flush=True)
        proc = git("clone", "--quiet", "--", repo, str(folder))
        if proc.returncode != 0:
            raise SourceError(f"cannot clone {repo}: {last_line(proc)}")
    return folder


def resolve(checkout: Path, commit: str) -> str:
    """The full hash of commit in checkout, fetched from its origin if it is not there yet."""
    wanted = f"{commit}^{{commit}}"
    proc = git("-C", str(checkout), "rev-parse", "--verify", "--quiet", wanted)
    if proc.returncode != 0:
        git("-C", str(checkout), "fetch", "--quiet", "origin", commit)
        proc = git("-C", str(checkout), "rev-parse", "--verify", "--quiet", wanted)
    if proc.returncode != 0:
        raise SourceError(f"commit {commit} is not in {checkout} nor in its origin")
    return proc.stdout.strip()


def read_scripts(checkout: Path, commit: str) -> dict[str, str]:
    """SCRIPTS as they are at commit."""
    texts = {}
    for path in SCRIPTS:
        proc = git("-C", str(checkout), "show", f"{commit}:{path}")
        if proc.returncode != 0:
            raise SourceError(f"{path} at {commit[:12]}: {last_line(proc)}")
        texts[path] = proc.stdout
    return texts


def fetch_scripts(
    work: Path, commit: str, repo: str, leanrl_dir: Optional[Path]
) -> tuple[str, dict[str, Path]]:
    """The full commit, and SCRIPTS with the shims applied, written into work/leanrl-COMMIT/ under their own
    names (LeanRL names its runs after them)."""
    checkout = leanrl_dir or clone(repo, work / "LeanRL")
    full = resolve(checkout, commit)
    shimmed = apply_shims(read_scripts(checkout, full))
    folder = work / f"leanrl-{full[:12]}"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for path, text in shimmed.items():
        paths[path] = folder / Path(path).name
        paths[path].write_text(text)
    return full, paths

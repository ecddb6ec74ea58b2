"""Tiny runs trained once per run of the suite (the `trained_run` fixture of conftest.py): every
test that only reads a run (evaluates it, loads its checkpoint, forges copies of it) asks for it by
its script's flags, and the first to ask trains it, whichever xdist worker it runs on; the others
wait on its lock, then read the same folder.

A test must not change a shared run: one that writes into the folder (evaluate.py's eval.json, a
resume) asks for a copy of its own (copy_to). A run of other flags is another run: saved() gives
the usual one, so that tests share it."""

import fcntl
import hashlib
import json
import shutil
import time
from pathlib import Path

from script_runs import FAST_COMPILE, script

from helpers import TINY, only_run_dir, run_script

# the seconds this process has spent in trained_run, training or waiting for another worker's run:
# the suite's guard on unmarked tests (conftest.py) does not count them against the test that asked
spent = [0.0]


def seconds_spent() -> float:
    return spent[0]


def saved(framework: str, env: str = "CartPole-v1", *extra: str) -> list[str]:
    """The flags of the suite's usual run: TINY on env, with --norm-obs and --save-model, in the
    script's fastest compile mode (the default, but torch's)."""
    args = [*TINY, "--env", env, "--norm-obs", "--save-model"]
    return [*args, "--compile", FAST_COMPILE[framework], *extra]


class TrainedRuns:
    """trained_run(framework, *args): the run folder of `ppo_<framework>.py args`, trained at most
    once under root (a folder every xdist worker of the session shares)."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def folder(self, framework: str, *args: str) -> Path:
        key = hashlib.sha256(json.dumps([framework, *args]).encode()).hexdigest()[:16]
        return self.root / f"{framework}-{key}"

    def __call__(self, framework: str, *args: str, copy_to: Path | None = None) -> Path:
        folder = self.folder(framework, *args)
        start = time.monotonic()
        # one lock per run: two workers asking for the same run train it once, other runs go on
        with open(folder.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (folder / "done").exists():
                # a run that failed before (its test failed with its output) is trained again
                shutil.rmtree(folder, ignore_errors=True)
                proc = run_script(script(framework), *args, log_dir=folder / "runs")
                assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
                (folder / "stdout.txt").write_text(proc.stdout)
                (folder / "done").write_text(json.dumps([framework, *args]))
        spent[0] += time.monotonic() - start
        run_dir = only_run_dir(folder / "runs")
        if copy_to is None:
            return run_dir
        copy = Path(copy_to) / run_dir.name
        shutil.copytree(run_dir, copy)
        return copy

    def output(self, framework: str, *args: str) -> str:
        """What the run printed (its stdout), trained first if it was not."""
        self(framework, *args)
        return (self.folder(framework, *args) / "stdout.txt").read_text()

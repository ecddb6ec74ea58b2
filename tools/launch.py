"""Runs a ppo_*.py script in a fresh process, as the tests and benchmarks/ do; core/runlog.py
reads what it wrote.

from tools.launch import run_script
proc = run_script("ppo_linen.py", "--num-iterations", "3", log_dir=tmp_dir)
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_script(
    script: str, *args: str, log_dir, timeout: float = 600, env: dict | None = None, cwd=ROOT
):
    """Runs `python script args --log-dir log_dir` from `cwd` (the project root unless given);
    returns the CompletedProcess."""
    cmd = [sys.executable, str(ROOT / script), *args, "--log-dir", str(log_dir)]
    # one torch thread unless set: OpenMP threads stall on the busy cores of a shared machine
    full_env = {"OMP_NUM_THREADS": "1", **os.environ, "WANDB_MODE": "disabled", **(env or {})}
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env
    )

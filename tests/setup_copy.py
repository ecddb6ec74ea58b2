"""setup.sh in a copy of the repository's set-up files with a stub .venv, whose pip records what it
is asked to do (make_copy, pip_calls)."""

import shutil
import stat
from pathlib import Path

from helpers import ROOT

# A venv stand-in: pip appends its arguments to a log; python fails the index probe (no network
# here)
STUB_PIP = """#!/usr/bin/env bash
echo "pip $*" >> "$(dirname "$0")/../calls.log"
"""
STUB_PYTHON = """#!/usr/bin/env bash
echo "python $*" >> "$(dirname "$0")/../calls.log"
exit 1
"""


def make_copy(tmp_path: Path) -> Path:
    for name in ("setup.sh", "requirements.txt", "requirements.lock"):
        shutil.copy2(ROOT / name, tmp_path / name)
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("pip", STUB_PIP), ("python", STUB_PYTHON)):
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return tmp_path


def pip_calls(repo: Path) -> list[str]:
    log = repo / ".venv" / "calls.log"
    calls = log.read_text().splitlines() if log.exists() else []
    return [call for call in calls if call.startswith("pip ")]

"""Rules of the repository as a whole, checked over its tracked files."""

import subprocess

import pytest

from helpers import ROOT


def test_no_file_points_outside_the_repository():
    """Users have README.md and METHODOLOGY.md; no tracked file may send them to the developers'
    brief."""
    # spelled in two parts so that this file does not match itself
    brief = "DESIGN" + ".md"
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    offenders = [
        name
        for name in tracked
        if not name.startswith("results/")
        and (ROOT / name).is_file()
        and brief in (ROOT / name).read_text(errors="ignore")
    ]
    assert offenders == []

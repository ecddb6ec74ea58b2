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


def test_no_root_piece_evaluation_or_tools_module_is_over_400_lines():
    """A module a newcomer can hold in their head: the templates' pieces, evaluate.py, evaluation/
    and tools/ stay within 400 lines each (the templates have their own limit, 560 formatted)."""
    modules = [
        path
        for path in [*ROOT.glob("*.py"), *ROOT.glob("evaluation/*.py"), *ROOT.glob("tools/*.py")]
        if not path.name.startswith("ppo_")
    ]
    too_long = {
        path.relative_to(ROOT).as_posix(): n
        for path in modules
        if (n := len(path.read_text().splitlines())) > 400
    }
    assert too_long == {}

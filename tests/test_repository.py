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


# what a clone carries: small enough to copy to a lent accelerator machine (64 MiB a call, with the
# wheels it lacks), so an edition keeps its runs as runs.csv.gz, not as run folders
TRACKED_BYTES_BOUND = 40_000_000


def tracked_bytes() -> int:
    """The bytes of the tracked files, as `git ls-files -z | du -cb --files0-from=-` counts them."""
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    paths = [ROOT / name.decode() for name in names if name]
    return sum(path.lstat().st_size for path in paths if path.exists() or path.is_symlink())


def test_the_tracked_tree_stays_under_its_bound():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    size = tracked_bytes()
    assert 0 < size < TRACKED_BYTES_BOUND, f"tracked files: {size:,} bytes"

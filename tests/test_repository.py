"""Rules of the repository as a whole, checked over its tracked files."""

import ast
import subprocess
from pathlib import Path

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


# The house's floors. The shared floor (core/, and the pieces that the scripts and the tools share)
# imports nothing above it; the wings stand on it side by side and never import one another; the
# commands (the scripts, plot_results.py, evaluate.py, tools/, benchmarks/) stand on top.
FLOOR = ("core", "atomic", "checkpoint", "env_adapters")
FLOOR += ("env_normalize",)
FLOOR += ("torch_glue",)
WINGS = ("sweep", "analysis", "evaluation", "bookkeeping")
ABOVE = (
    "tools",
    "benchmarks",
    "plot_results",
    "evaluate",
    "ppo_linen",
    "ppo_nnx",
    "ppo_equinox",
    "ppo_torch",
)


def unit_of(path: Path) -> str:
    """The package a module belongs to, or the module itself at the top level."""
    parts = path.relative_to(ROOT).parts
    return parts[0] if len(parts) > 1 else path.stem


def imported_units(path: Path) -> set[str]:
    """The top-level names a module imports, lazily or not (__import__("x.y") too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "__import__"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            names.add(node.args[0].value)
    return {name.split(".")[0] for name in names}


def modules_of(unit: str) -> list[Path]:
    folder = ROOT / unit
    return sorted(folder.glob("*.py")) if folder.is_dir() else [ROOT / f"{unit}.py"]


def test_the_floor_imports_nothing_above_it_and_no_wing_imports_another():
    wrong = []
    for unit in FLOOR + WINGS:
        # the floor may import the floor; a wing the floor and itself
        allowed = set(FLOOR) | {unit}
        for path in modules_of(unit):
            banned = imported_units(path) & (set(WINGS) | set(ABOVE)) - allowed
            wrong += [f"{path.relative_to(ROOT)} imports {name}" for name in sorted(banned)]
    assert not wrong, wrong


def test_the_import_check_sees_a_lazy_import_of_another_wing(tmp_path):
    module = tmp_path / "resume.py"
    module.write_text("def done():\n    from analysis import loading\n    return loading\n")
    assert "analysis" in imported_units(module)
    module.write_text('__import__("sweep.matrix")\n')
    assert imported_units(module) == {"sweep"}


# a template reads in one sitting: its lines once ruff has formatted it (CI checks the format)
TEMPLATE_LINES_BOUND = 620


def test_each_template_fits_its_line_budget():
    templates = sorted(ROOT.glob("ppo_*.py"))
    assert len(templates) == 4
    lengths = {path.name: len(path.read_text().splitlines()) for path in templates}
    assert all(length <= TEMPLATE_LINES_BOUND for length in lengths.values()), lengths


def framework_branches(path: Path) -> list[str]:
    """The comparisons in a Python file of anything with a framework's name ("torch" ==, in
    ("linen", "nnx")): a branch on the framework."""
    names = {"linen", "nnx", "equinox", "torch"}
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            constants = {n.value for n in ast.walk(node) if isinstance(n, ast.Constant)}
            if constants & names:
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_model_file_and_evaluation_know_no_framework():
    """Each template's to_shared and from_shared (beside its Agent) hold its framework's knowledge
    of the shared checkpoint layout: checkpoint.py and evaluation/ branch on no framework."""
    files = [ROOT / "checkpoint.py", *sorted((ROOT / "evaluation").glob("*.py"))]
    assert [branch for path in files for branch in framework_branches(path)] == []


def test_the_framework_check_sees_a_branch(tmp_path):
    branch = tmp_path / "branch.py"
    branch.write_text('if framework == "torch":\n    pass\nok = name in ("linen", "nnx")\n')
    assert len(framework_branches(branch)) == 2

"""A starter project in one command: a ppo_*.py template, copied as it is, and the files it imports.

    python -m tools.starter FRAMEWORK DIR   # or ./setup.sh starter FRAMEWORK DIR
                                            # FRAMEWORK: linen, nnx, equinox or torch

DIR (new, or an empty folder) receives ppo_FRAMEWORK.py, byte for byte, and the pieces it imports:
core/plain_bookkeeping.py (the run folder, the progress line, the stops, bad input in one line: the
bookkeeping a script takes when bookkeeping.py, the benchmark's, is not beside it), atomic.py (the
project's signal policy and its safe writes), env_normalize.py (--norm-obs, --norm-reward),
core/saving.py (--save-model, --save-every, --resume: the model file of checkpoint.py, the
run's state of core/resuming.py, the events files of core/event_files.py), env_adapters.py and
core/env_ids.py (Craftax, Brax, envpool), torch_glue.py (ppo_torch.py). DIR is checked before
anything is made: a link to nothing, a file, a folder that is not empty or that cannot be written
is refused in one line, exit code 2. A file of the copy that imports a repository module the copy
lacks stops the tool with one line (exit 1) and nothing written, never a broken copy.
"""

import ast
import os
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

from atomic import write_file

ROOT = Path(__file__).resolve().parent.parent
# the pieces every copy gets, for the options it keeps; a framework's own (torch_glue.py) come from
# study.toml (core/ without its __init__.py: a namespace package, which env_adapters.py imports)
PIECES = ("core/plain_bookkeeping.py", "atomic.py", "env_normalize.py")
PIECES += ("core/saving.py", "checkpoint.py", "core/resuming.py", "core/event_files.py")
PIECES += ("env_adapters.py", "core/env_ids.py")
# the benchmark's bookkeeping, which a script takes when it is beside it, and is left out of a copy
OPTIONAL = {"bookkeeping"}


class TemplateChanged(Exception):
    """A file of the copy imports a repository module that the copy lacks: the tool must follow."""


class BadInput(Exception):
    """The command line: one line, exit code 2, nothing written."""


def expect(ok: bool, template: str, what: str) -> None:
    if not ok:
        raise TemplateChanged(f"{template} no longer has {what}: tools/starter.py must follow it")


def imported_modules(text: str) -> set[str]:
    """The dotted names of every module the text imports, at any depth (lazy imports too): `from
    core import env_ids` gives core and core.env_ids."""
    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def module_file(name: str) -> str | None:
    """The repository's file of the module name (core.env_ids: core/env_ids.py); None when it is
    not the repository's (a package's, the standard library's, or a repository folder)."""
    path = name.replace(".", "/") + ".py"
    return path if (ROOT / path).is_file() else None


def frameworks() -> dict[str, dict]:
    """study.toml's [frameworks.NAME] tables: each framework's script and its own pieces."""
    with open(ROOT / "study.toml", "rb") as file:
        return tomllib.load(file)["frameworks"]


def starter_files(framework: dict) -> dict[str, str]:
    """Each file of the starter and its text, the template's as it is; TemplateChanged when a file
    imports a repository module that the starter lacks."""
    script = framework["script"]
    files = {}
    for name in (script, *PIECES, *framework.get("pieces", ())):
        expect((ROOT / name).is_file(), name, "its place in the repository")
        files[name] = (ROOT / name).read_text()
    check_imports(files)
    return files


def check_imports(files: dict[str, str]) -> None:
    """TemplateChanged when a file imports a repository module that the starter lacks (but
    OPTIONAL's, which a script takes only when it is beside it)."""
    for name, text in files.items():
        wanted = {module_file(module) for module in imported_modules(text)}
        missing = sorted(
            path
            for path in wanted - {None} - set(files)
            if Path(path).parts[0].removesuffix(".py") not in OPTIONAL
        )
        expect(not missing, name, f"only imports of the starter's files (it imports {missing})")


def nearest_existing(folder: Path) -> Path:
    """folder, or its nearest parent that exists (where mkdir would start making folders);
    BadInput for a symbolic link to nothing on the way, which mkdir cannot make a folder at."""
    path = folder
    while not path.exists():
        if os.path.islink(path):
            raise BadInput(
                f"{path} is a symbolic link to nothing ({os.readlink(path)}): give a folder"
            )
        path = path.parent
    return path


def check_target(folder: Path) -> None:
    """BadInput (nothing made) unless folder is an empty folder, or one that can be made, in a
    folder that can be written."""
    nearest = nearest_existing(folder)
    if not nearest.is_dir():
        if nearest == folder:
            raise BadInput(f"{folder} is a file, not a folder for the starter")
        raise BadInput(f"{folder}: {nearest} is a file, not a folder to make it in")
    try:
        if nearest == folder and any(folder.iterdir()):
            raise BadInput(f"{folder} is not empty: give a new folder or an empty one")
        # a file made there and removed at once tells: a read-only file system, /proc, rights
        with tempfile.TemporaryFile(dir=nearest):
            pass
    except OSError as e:
        raise BadInput(f"{folder}: cannot write into {nearest} ({e.strerror or e})") from None


def write_starter(framework: str, folder: Path) -> list[str]:
    """The starter's files in folder, built and checked whole before the first is written."""
    known = frameworks()
    if framework not in known:
        raise BadInput(f"unknown framework {framework!r}: choose {', '.join(known)}")
    check_target(folder)
    files = starter_files(known[framework])
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).parent.mkdir(exist_ok=True)
            write_file(folder / name, text)
            shutil.copymode(ROOT / name, folder / name)
    except OSError as e:  # a full disk, or a folder changed since check_target
        raise BadInput(f"{folder}: cannot write the starter there ({e})") from None
    return list(files)


def main(argv: list[str]) -> int:
    usage = f"usage: python -m tools.starter FRAMEWORK DIR (FRAMEWORK: {', '.join(frameworks())})"
    if argv in (["-h"], ["--help"]):
        print(usage)
        return 0
    try:
        if len(argv) != 2:
            raise BadInput(f"{usage}; got {len(argv)} argument(s)")
        names = write_starter(argv[0], Path(argv[1]))
    except BadInput as e:
        print(f"starter: {e}", file=sys.stderr)
        return 2
    except TemplateChanged as e:
        print(f"starter: {e}", file=sys.stderr)
        return 1
    script, pieces = names[0], ", ".join(names[1:])
    print(f"starter: wrote {Path(argv[1]) / script} (with {pieces}); train in that folder with")
    print(f"  python {script} --env CartPole-v1  (in .venv: {ROOT / 'setup.sh'} run python ...)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

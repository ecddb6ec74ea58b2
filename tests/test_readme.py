"""README.md agrees with the editions it links and with the tools it shows (issue 84 item 5): every
number it quotes from a result is in the files of the edition (or the record) linked beside it,
copied, not rounded by hand; every command it shows names a script or module that exists and flags
that its --help lists."""

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

README = (ROOT / "README.md").read_text()
LINK = re.compile(r"\]\((results/[^)#\s]+)")
# a number as README quotes a result: a decimal, a time (3m00s), or a number with its unit; a plain
# integer (3 seeds, 64 agents, 2 cores) is a configuration, not a reading
NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:m(\d\d)s)?(\s?(?:×|s\b|ms\b|k/s|MiB|GiB|GB))?")
TEXT_SUFFIXES = (".md", ".txt", ".json", ".csv", ".log")


def statements(text: str) -> list[str]:
    """README cut where a statement ends: a blank line, a generated block's marker, a bold lead-in
    (**Data types**, ...): the numbers of a piece come from the results linked in it."""
    return [part for part in re.split(r"\n\s*\n|\n(?=<!--)|(?=\*\*[A-Z])", text) if part.strip()]


def record_files(link: str) -> list[Path]:
    """The files a link to results/ stands for: a benchmark's record, with its JSON; else the
    edition's text files (its run folders left out)."""
    path = ROOT / link
    if path.is_file() and path.parent.name == "benchmarks":
        return [path, path.with_suffix(".json")]
    folder = path if path.is_dir() else path.parent
    return [
        file
        for file in sorted(folder.rglob("*"))
        if file.suffix in TEXT_SUFFIXES and "runs" not in file.relative_to(folder).parts[:1]
    ]


@functools.cache
def records_text(links: tuple[str, ...]) -> str:
    files = {file for link in links for file in record_files(link) if file.is_file()}
    return "\n".join(file.read_text(errors="replace") for file in sorted(files))


def quoted_numbers(statement: str) -> list[str]:
    """The results a statement quotes (NUMBER), as they must appear in a record: 3m00s, 2.09."""
    found = []
    for match in NUMBER.finditer(statement):
        number, seconds, unit = match.groups()
        if seconds:
            found.append(f"{number}m{seconds}s")
        elif "." in number or unit:
            found.append(number)
    return found


def test_every_number_readme_quotes_is_in_the_edition_it_links():
    """A number README quotes beside a link to results/ is in that edition's (or record's) files as
    it is written there (30.6 and 6.6 were 30.60 and 6.61; the one-seed times were another
    edition's, then unlinked)."""
    checked, missing = 0, []
    for statement in statements(README):
        links = tuple(sorted(set(LINK.findall(statement))))
        if not links:
            continue
        text = records_text(links)
        for number in quoted_numbers(statement):
            checked += 1
            if not re.search(rf"(?<![\d.]){re.escape(number)}(?!\d)", text):
                missing.append((number, links))
    assert checked > 50 and not missing, missing


def test_the_numbers_are_checked_where_they_were_wrong():
    """The check reads a rounded number as missing: 30.6 is not the record's 30.60."""
    links = ("results/benchmarks/compile_cache_cpu.md",)
    assert re.search(r"(?<![\d.])30\.60(?!\d)", records_text(links))
    assert not re.search(r"(?<![\d.])30\.6(?!\d)", records_text(links))
    assert quoted_numbers("total 30.60 s -> 21.73 s, 3 pairs, 3m00s–3m21s, 6.3×") == [
        "30.60",
        "21.73",
        "3m00s",
        "3m21s",
        "6.3",
    ]


# ------------------------------------------------------------------------------------- commands
def shown_commands() -> list[list[str]]:
    """The commands README shows: each line of its bash blocks, and each inline `python ...`,
    `./setup.sh ...` or `./bench.sh ...`, as words (comments left out; `./setup.sh run` taken off
    the command it runs)."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        lines += [re.sub(r"\s+#.*", "", line) for line in block.splitlines()]
    for span in re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", README, flags=re.S)):
        if span.startswith(("python ", "python\n", "./setup.sh ", "./bench.sh ")):
            lines.append(span.replace("\n", " "))
    commands = []
    for line in lines:
        # optional flags in brackets; a placeholder framework: one of the four
        line = line.replace("[", " ").replace("]", " ").replace("<framework>", "linen")
        words = shlex.split(line)
        if words[:2] == ["./setup.sh", "run"]:
            words = words[2:]
        # a pattern of commands (python -m benchmarks.<name>), not one
        if words and not any("<" in word for word in words):
            commands.append(words)
    return commands


def tool_of(words: list[str]) -> tuple[str, ...]:
    """The command line that runs the tool of a command (its --help added), or () for another
    program (tensorboard, wandb)."""
    if words[0] == "python":
        if words[1] == "-m":
            return (sys.executable, "-m", words[2])
        return (sys.executable, words[1])
    if words[0] in ("./bench.sh", "./setup.sh"):
        return ("bash", words[0].removeprefix("./"))
    return ()


@functools.cache
def help_of(tool: tuple[str, ...]) -> str:
    """The tool's --help; plot_results.py's source instead (its --help waits for the analysis'
    imports, about 10 s; its argparse flags are literals there)."""
    if Path(tool[-1]).name == "plot_results.py":
        return (ROOT / "plot_results.py").read_text()
    done = subprocess.run([*tool, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (tool, done.stderr[-2000:])
    return done.stdout + done.stderr


def test_every_command_readme_shows_runs_its_help_with_its_flags():
    """Each command README shows names a script or module here, whose --help answers and lists
    every flag the command gives (./setup.sh: its subcommand); no stale `python env_timing.py`."""
    tools = set()
    for words in shown_commands():
        tool = tool_of(words)
        if not tool:
            continue
        tools.add(tool)
        text = help_of(tool)
        if words[0] == "./setup.sh":
            assert len(words) == 1 or f"./setup.sh {words[1]}" in text, words
            continue
        if words[0] == "python" and words[1] != "-m":
            assert (ROOT / words[1]).is_file(), words
        for flag in (word.partition("=")[0] for word in words if word.startswith("--")):
            assert flag in text, (flag, words)
    # the scripts, the analysis, the sweep, evaluate.py and setup.sh at least
    names = {Path(tool[-1]).name for tool in tools}
    assert {"ppo_linen.py", "plot_results.py", "bench.sh", "evaluate.py", "setup.sh"} <= names


@pytest.mark.parametrize("text", ["python env_timing.py --out x", "python -m tools.run_checks"])
def test_a_command_that_no_longer_exists_is_caught(text):
    words = shlex.split(text)
    tool = tool_of(words)
    if words[1] == "-m":
        import importlib.util

        assert importlib.util.find_spec(words[2]) is None
    else:
        assert not (ROOT / words[1]).is_file() and tool

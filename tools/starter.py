"""A starter project in one command: a ppo_*.py template without its benchmark bookkeeping, and the
files it needs.

    python -m tools.starter FRAMEWORK DIR   # or ./setup.sh starter FRAMEWORK DIR
                                            # FRAMEWORK: linen, nnx, equinox or torch

DIR (new, or an empty folder) receives ppo_FRAMEWORK.py and the pieces it imports: atomic.py
(the project's signal policy and its safe writes), env_normalize.py (--norm-obs, --norm-reward),
checkpoint.py (--save-model, --save-every, --resume), torch_glue.py (ppo_torch.py). env_adapters.py
(Craftax, Brax, envpool) is left out: the copy then refuses those ids in one line that lists
gymnax's envs and names the file to copy. DIR is checked before anything is made: a link to
nothing, a file, a folder that is not empty or that cannot be written is refused in one line, exit
code 2.

The copy is the template, changed by its structure, which is checked first: a template that no
longer has it stops the tool with one line (exit 1) and nothing written, never a broken copy.
  - the top block under `if __name__ == "__main__":` keeps only its "importing ..." line, now
    naming the copy's own file; the early check of the command line and its signal mask, which only
    the bookkeeping lifts (core/command_line.py: the copy's --help waits for its imports), and the
    environment check go;
  - each `book.` line is dropped or becomes the copy's own (BOOK_CALLS); main() ends with a
    "done: return X, logs in Y" line; SIGINT, SIGTERM and SIGHUP stop the copy's run at its next
    iteration boundary, as the template's (atomic.py), its model file written, one line, exit
    code 130;
  - `tyro.cli(Args)` becomes parse_args(), which says tyro's error box on one line;
  - make_env's `import env_adapters` becomes a one-line refusal (not_gymnax);
  - the `# Benchmark bookkeeping` section, to the end, becomes FOOTER: bad input is one line and
    exit code 2.
"""

import ast
import os
import re
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

from atomic import write_file

ROOT = Path(__file__).resolve().parent.parent
# the pieces every copy gets, for the options it keeps; a framework's own (torch_glue.py) come from
# study.toml
PIECES = ("env_normalize.py", "checkpoint.py", "atomic.py")
LEFT_OUT = "env_adapters"  # its one import in make_env becomes not_gymnax's refusal
BANNER = "# Benchmark bookkeeping"
BOOK_SECTION = (
    "from bookkeeping import Bookkeeping",
    "book = Bookkeeping(",
    "main = book.wrap(main, Args)",
    'if __name__ == "__main__":',
    "main()",
)
# each bookkeeping call in the template: how many times it must be there, and the copy's line (None:
# dropped) (make_run_dir: the copy's own, a new folder even for two runs in one second; start:
# config.json; check_signals: the copy's own policy's (atomic.py, FOOTER); iteration_done: its
# progress line, and history for its done line; a replacement may be several lines)
BOOK_CALLS = {
    "make_run_dir": (1, "make_run_dir"),
    "run_name": (1, "name_of_run"),
    "start": (
        1,
        'config.setdefault("device_name", jax.devices()[0].device_kind)  # torch names its own',
    ),
    "setup_done": (1, "history, iteration_times = [], []  # each iteration's returns and time"),
    "check_signals": (2, "stop.check()"),
    "iteration_done": (
        1,
        "history.append(returns)\n"
        'iteration_times.append(scalars["time/iteration"])\n'
        "print(progress(args.num_iterations, iteration, scalars, iteration_times), flush=True)",
    ),
}
IMPORTING = re.compile(r'^    print\("ppo_\w+\.py: (importing [^"]*)", flush=True\)$')
ADDED_IMPORTS = ("import io", "import sys")
# FOOTER's, and the progress line's (bookkeeping.py's progress, copied)
ADDED_FUNCTIONS = (
    "parse_args",
    "make_run_dir",
    "name_of_run",
    "not_gymnax",
    "done_line",
    "progress",
)
# bookkeeping.py's functions a copy keeps: its progress line
COPIED_FUNCTIONS = ("progress",)

MAIN_GUARD = '\n\nif __name__ == "__main__":'
FOOTER = '''

# ------------------------------------------------------------------------------- command line
def parse_args() -> Args:
    """tyro.cli(Args), with `--resume RUN_DIR` alone continuing the run with its own flags (its
    resume file's, checkpoint.resumed_argv, as the template's); bad input (a bad flag, a broken
    Args rule, a --resume folder): ValueError, on one line."""
    argv = sys.argv[1:]
    if any(token.partition("=")[0] == "--resume" for token in argv):
        import checkpoint

        argv = checkpoint.resumed_argv(list(Args.__dataclass_fields__), argv, FRAMEWORK)
    box = io.StringIO()
    try:
        with redirect_stderr(box):
            return tyro.cli(Args, args=argv)
    except SystemExit as e:
        if e.code == 0:  # --help
            raise
        message = []  # tyro's error box: a title, the message, a rule, then help
        for line in box.getvalue().splitlines()[1:]:
            line = line.strip("│ ")
            if not line.strip("─"):
                break
            message.append(line)
        message = " ".join(" ".join(message).split()).removeprefix("Error parsing Args: ")
        raise ValueError(message or "bad arguments (see --help)") from None


def name_of_run(args: Args, framework: str) -> str:
    """The run folder's name: {env}__{framework}__{model_size}__{compile}__{seed}__{unix time},
    --exp-name after the env (as CleanRL puts it) when it is not this file's name, {N}agents after
    the seed for N > 1 agents; with --resume, the name of the folder the run continues in."""
    if args.resume:
        return os.path.basename(os.path.normpath(args.resume))
    default = os.path.basename(__file__)[: -len(".py")]
    exp_name = f"__{args.exp_name}" if args.exp_name != default else ""
    agents = [f"{args.num_agents}agents"] if args.num_agents > 1 else []
    parts = (args.model_size, args.compile, args.seed, *agents, int(time.time()))
    return f"{args.env}{exp_name}__{framework}__" + "__".join(map(str, parts))


def make_run_dir(run_dir: str, resume: Optional[str]) -> str:
    """--resume's folder, or run_dir made new (run_dir-2, -3, ... when another run has it);
    ValueError (bad input, one line) when it cannot be made: a --log-dir that is a file, say."""
    if resume:
        return resume
    path, suffix = run_dir, 1
    while True:
        try:
            os.makedirs(path)
            return path
        except FileExistsError:
            suffix += 1
            path = f"{run_dir}-{suffix}"
        except OSError as e:
            raise ValueError(f"--log-dir: cannot make the folder {path} ({e.strerror})") from None


def not_gymnax(env_id: str, backend: str) -> str:
    """Why make_env cannot train on env_id here: env_adapters.py was left out of this starter."""
    left_out = "env_adapters.py (left out of this starter: copy it from benchback-rl beside this)"
    if backend != "gymnax":
        return f"--env-backend {backend} needs {left_out}"
    if env_id in gymnax.registered_envs:
        return f"{env_id}: this script trains gymnax envs of discrete or 1-d Box actions only"
    valid = ", ".join(gymnax.registered_envs)
    # envpool's ids (HalfCheetah-v4) are not unknown to the template: named, as it names them
    return (
        f"unknown env id {env_id!r} to gymnax, which has {valid} (Craftax, Brax and envpool's "
        f"envs, e.g. HalfCheetah-v4 with --env-backend envpool, need {left_out})"
    )


def done_line(history: list, run_dir: str) -> str:
    """The last line: the agents' mean of each one's mean episodic return over the last 10
    iterations (those that ended one of its episodes)."""
    finals = []
    for returns in np.transpose(history[-10:]):
        ended = returns[~np.isnan(returns)]
        if len(ended) > 0:
            finals.append(ended.mean())
    final = f"{np.mean(finals):.1f}" if finals else "none (no episode ended)"
    return f"done: return {final}, logs in {run_dir}"


import atomic

# SIGINT, SIGTERM, SIGHUP: main() stops at its next stop.check() (a second one: at once); the model
# file is written on the way out, as after the last iteration
stop = atomic.Interrupts("the next iteration boundary")


if __name__ == "__main__":
    stop.install()
    try:
        main()
    except ValueError as e:  # bad input: parse_args, make_env, a --resume folder
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:  # stop.check(), or a second SIGINT, SIGTERM or SIGHUP at once
        stop.exit("interrupted")  # exit code 130
'''


class TemplateChanged(Exception):
    """The template no longer has the structure this tool strips by: the tool must follow it."""


class BadInput(Exception):
    """The command line: one line, exit code 2, nothing written."""


def expect(ok: bool, template: str, what: str) -> None:
    if not ok:
        raise TemplateChanged(f"{template} no longer has {what}: tools/starter.py must follow it")


def index_of(lines: list[str], text: str, template: str, start: int = 0) -> int:
    """The index of the one line (from start on) that is text, stripped; TemplateChanged unless
    one."""
    found = [i for i in range(start, len(lines)) if lines[i].strip() == text]
    expect(len(found) == 1, template, f"one line {text!r}")
    return found[0]


def strip_top_block(lines: list[str], template: str) -> list[str]:
    """The `if __name__ == "__main__":` block above the heavy imports keeps only its "importing"
    line, naming the copy's file; the early check of the command line (and its signal mask) and
    the environment check go."""
    start = next((i for i, line in enumerate(lines) if line == 'if __name__ == "__main__":'), None)
    expect(start is not None, template, 'a top block under `if __name__ == "__main__":`')
    end = lines.index("", start) if "" in lines[start:] else start
    block = lines[start + 1 : end]
    kept = [line for line in block if IMPORTING.match(line)]
    expect(len(kept) == 1, template, 'one print("ppo_X.py: importing ...") line in its top block')
    removed = [line.strip() for line in block if line not in kept]
    expect(
        len(removed) == 3
        and removed[0].startswith("#")
        and removed[1].startswith('__import__("core.command_line")')
        and removed[2].startswith('__import__("bookkeeping")'),
        template,
        "a top block of a comment, the early check of the command line, the print and the "
        "bookkeeping's environment check",
    )
    printed = IMPORTING.match(kept[0]).group(1)
    line = f'    print(f"{{os.path.basename(__file__)}}: {printed}", flush=True)'
    lines = lines[: start + 1] + [line] + lines[end:]
    # io and sys for the footer, redirect_stderr for parse_args
    first = end = index_of(lines, "import math", template)
    while lines[end].startswith("import "):
        end += 1
    lines[first:end] = sorted(lines[first:end] + list(ADDED_IMPORTS))
    contextlib_line = index_of(lines, "from contextlib import nullcontext", template)
    lines[contextlib_line] = "from contextlib import nullcontext, redirect_stderr"
    return lines


def strip_book_lines(lines: list[str], template: str) -> list[str]:
    """Each `book.` call dropped or made the copy's own (BOOK_CALLS); any other one:
    TemplateChanged."""
    out, seen = [], {name: 0 for name in BOOK_CALLS}
    for line in lines:
        calls = re.findall(r"\bbook\.(\w+)\(", line)
        if not calls:
            out.append(line)
            continue
        expect(
            len(calls) == 1 and calls[0] in BOOK_CALLS,
            template,
            f"only known book. calls: {line!r}",
        )
        name = calls[0]
        seen[name] += 1
        replacement = BOOK_CALLS[name][1]
        if replacement in ("make_run_dir", "name_of_run"):
            # the copy's own function (name_of_run: the template's variable is run_name)
            out.append(line.replace(f"book.{name}(", f"{replacement}("))
        elif replacement is not None:
            indent = line[: len(line) - len(line.lstrip())]
            out += [indent + new for new in replacement.split("\n")]
    for name, (count, _) in BOOK_CALLS.items():
        expect(seen[name] == count, template, f"book.{name}( {count} time(s) (found {seen[name]})")
    return out


def replace_line(lines: list[str], old: str, new: str, template: str) -> list[str]:
    i = index_of(lines, old, template)
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    return lines[:i] + [indent + new] + lines[i + 1 :]


def refuse_left_out(lines: list[str], template: str) -> list[str]:
    """make_env's comment, `import env_adapters`, blank, `return env_adapters.make(...)`: a
    refusal."""
    i = index_of(lines, f"import {LEFT_OUT}", template)
    expect(
        lines[i - 1].strip().startswith("#")
        and lines[i + 1] == ""
        and lines[i + 2].strip().startswith(f"return {LEFT_OUT}.make(")
        and lines[i + 3] == "",
        template,
        f"make_env's `import {LEFT_OUT}` between a comment and `return {LEFT_OUT}.make(...)`",
    )
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    refusal = [
        f"{indent}# Craftax, Brax, envpool: {LEFT_OUT}.py, left out of this starter",
        f"{indent}raise ValueError(not_gymnax(env_id, backend))",
    ]
    return lines[: i - 1] + refusal + lines[i + 3 :]


def replace_book_section(lines: list[str], template: str) -> list[str]:
    """The `# Benchmark bookkeeping` banner to the end becomes FOOTER; main() ends with
    done_line."""
    start = [i for i, line in enumerate(lines) if line.startswith(BANNER)]
    expect(len(start) == 1, template, f"one {BANNER!r} banner")
    section = [line.strip() for line in lines[start[0] + 1 :] if line.strip()]
    expect(
        len(section) == len(BOOK_SECTION)
        and all(line.startswith(part) for line, part in zip(section, BOOK_SECTION)),
        template,
        f"a bookkeeping section of exactly {' / '.join(BOOK_SECTION)}",
    )
    body = lines[: start[0]]
    while body[-1] == "":
        body.pop()
    module = ast.parse("\n".join(body)).body
    main = [node for node in module if getattr(node, "name", None) == "main"]
    expect(
        len(main) == 1 and main[0].end_lineno == len(body), template, "main() just above its banner"
    )
    # the names the copy adds must be free: FOOTER's functions, and main's lists
    defined = {getattr(node, "name", None) for node in module}
    stored = {
        n.id for n in ast.walk(main[0]) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    taken = (defined & set(ADDED_FUNCTIONS)) | ({"history", "iteration_times"} & stored)
    expect(not taken, template, f"the names the starter adds free (it has {sorted(taken)})")
    done = "    print(done_line(history, run_dir), flush=True)"
    functions, main_guard = FOOTER.split(MAIN_GUARD)
    copied = []
    for name in COPIED_FUNCTIONS:
        copied += ["", ""] + bookkeeping_function(name)
    footer = functions.splitlines() + copied + (MAIN_GUARD + main_guard).splitlines()
    return body + [done] + footer


def bookkeeping_function(name: str) -> list[str]:
    """The lines of bookkeeping.py's function name, which a starter copies (its progress line)."""
    text = (ROOT / "bookkeeping.py").read_text()
    found = [n for n in ast.parse(text).body if getattr(n, "name", None) == name]
    expect(len(found) == 1, "bookkeeping.py", f"one function {name}")
    return ast.get_source_segment(text, found[0]).splitlines()


def strip(template: str, text: str) -> str:
    """The template's text without its bookkeeping (the module's docstring says what changes)."""
    lines = text.splitlines()
    lines = strip_top_block(lines, template)
    lines = replace_book_section(lines, template)
    lines = strip_book_lines(lines, template)
    lines = replace_line(lines, "args = tyro.cli(Args)", "args = parse_args()", template)
    lines = refuse_left_out(lines, template)
    copy = "\n".join(lines) + "\n"
    left = [word for word in ("book", "signal") if word in copy]
    expect(not left, template, f"no other mention of {', '.join(left)} (the copy would keep one)")
    ast.parse(copy)
    return copy


def imported_modules(text: str, lazy: bool = True) -> set[str]:
    """The top-level names of every module the text imports, at any depth (lazy imports too); with
    lazy False, only those it imports when it is imported (none inside a function)."""
    names = set()

    def visit(node):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
        if lazy or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for child in ast.iter_child_nodes(node):
                visit(child)

    visit(ast.parse(text))
    return names


def frameworks() -> dict[str, dict]:
    """study.toml's [frameworks.NAME] tables: each framework's script and its own pieces."""
    with open(ROOT / "study.toml", "rb") as file:
        return tomllib.load(file)["frameworks"]


def starter_files(framework: dict) -> dict[str, str]:
    """Each file of the starter and its text; TemplateChanged when a file imports a repository
    module that the starter lacks."""
    script = framework["script"]
    files = {script: strip(script, (ROOT / script).read_text())}
    for piece in (*PIECES, *framework.get("pieces", ())):
        expect((ROOT / piece).is_file(), piece, "its place at the repository's top level")
        files[piece] = (ROOT / piece).read_text()
    check_imports(files, script)
    return files


def check_imports(files: dict[str, str], script: str) -> None:
    """TemplateChanged when a file imports a repository module that the starter lacks. A piece may
    import LEFT_OUT inside a function (torch_glue's envpool step): only for the envs that LEFT_OUT
    makes, which the copy refuses first."""
    ours = {path.stem for path in ROOT.glob("*.py")}
    for name, text in files.items():
        missing = (imported_modules(text) & ours) - {Path(f).stem for f in files}
        if name != script and LEFT_OUT not in imported_modules(text, lazy=False):
            missing.discard(LEFT_OUT)
        expect(
            not missing, name, f"only imports of the starter's files (it imports {sorted(missing)})"
        )


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

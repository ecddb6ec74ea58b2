"""A ppo_*.py command line read as its user means it (part of benchback-rl): tyro's parse with its
error box on one line (parse_args, evaluate.py's too); CleanRL's flags that mean what ours mean
taken (a boolean's `--anneal-lr False`; --env-id and --total-timesteps are the scripts' own Args,
which tyro reads), those with no counterpart refused with what to use instead, and an unknown flag
answered with the nearest one. The standard library only at import (tyro is imported when a
command line is parsed), so that a script's first lines can answer --help, a bad flag or a missing
package before JAX starts, the stop signals held meanwhile (before_imports).
"""

import difflib
import importlib.util
import os
import sys
from dataclasses import fields

import atomic
from core import env_ids
from core.plain_bookkeeping import tyro_parse

# CleanRL's flags that have no counterpart here, and what to use instead
CLEANRL_INSTEAD = {
    "--capture-video": (
        "the scripts record no video while training: train with --save-model, then "
        "`python evaluate.py RUN_DIR --video replay.mp4` renders the policy"
    ),
    "--cuda": "ppo_torch.py takes --device cuda (or cpu, auto); JAX uses the GPU it finds",
    "--no-cuda": "ppo_torch.py takes --device cpu; JAX_PLATFORMS=cpu keeps JAX on the CPU",
    "--torch-deterministic": (
        "the scripts' random streams are seeded (--seed); torch's deterministic kernels are "
        "not switched on"
    ),
    "--target-kl": "this PPO has no early stop on the KL: every update runs --update-epochs",
}
CLEANRL_INSTEAD["--no-capture-video"] = CLEANRL_INSTEAD["--capture-video"]
CLEANRL_INSTEAD["--no-torch-deterministic"] = CLEANRL_INSTEAD["--torch-deterministic"]
# flags whose value "None" tyro reads as not given, which Args cannot tell from the default: an
# unset variable (--resume "$RUN") would start a new run in place of the stopped one
NOT_NONE = ("--resume",)


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def bool_flags(args_type) -> list[str]:
    """The flags of args_type's bool fields (tyro's --X, whose opposite is --no-X)."""
    bools = [field for field in fields(args_type) if field.type is bool or field.type == "bool"]
    return [flag_name(field.name) for field in bools]


def aliases(args_type) -> list[str]:
    """The other names args_type gives its flags (tyro.conf.arg(aliases=...): CleanRL's --env-id),
    which tyro takes as they are."""
    markers = [
        marker for field in fields(args_type) for marker in getattr(field.type, "__metadata__", ())
    ]
    return [alias for marker in markers for alias in getattr(marker, "aliases", None) or ()]


def known_flags(args_type) -> list[str]:
    """Every flag tyro takes for args_type: each field's, its aliases, --no-X for a bool field,
    --help."""
    known = ["--help", *(flag_name(field.name) for field in fields(args_type)), *aliases(args_type)]
    known += ["--no-" + flag.removeprefix("--") for flag in bool_flags(args_type)]
    return known


# CleanRL's spelling of a boolean's value (`--anneal-lr False`), which tyro takes as a stray word
BOOL_WORDS = {"true": True, "false": False}


def bool_value(argv: list[str], position: int, inline: str | None) -> tuple[bool | None, int]:
    """(the value, tokens taken) of a bool flag given CleanRL's way, `--X False` or `--X=False`;
    (None, 1) for tyro's own `--X`."""
    if inline is not None:
        return BOOL_WORDS.get(inline.lower()), 1
    following = argv[position + 1].lower() if position + 1 < len(argv) else ""
    if following in BOOL_WORDS:
        return BOOL_WORDS[following], 2
    return None, 1


def split_flag(token: str) -> tuple[str, str | None]:
    """(--name, value) of --name=value; (--name, None) of --name. Underscores read as dashes, as
    tyro reads them."""
    name, equals, value = token.partition("=")
    return name.replace("_", "-"), value if equals else None


def initials(flag: str) -> str:
    return "".join(word[0] for word in flag.removeprefix("--").split("-") if word)


def nearest_flag(flag: str, known: list[str]) -> str | None:
    """The known flag a mistyped one most likely meant: one it begins (--num-env), one whose words'
    initials it spells (--lr: --learning-rate), else the closest by difflib."""
    for candidate in known:
        if candidate.startswith(flag) and len(flag) > 3:
            return candidate
    letters = flag.removeprefix("--").replace("-", "")
    by_initials = [candidate for candidate in known if initials(candidate) == letters]
    if len(by_initials) == 1:
        return by_initials[0]
    close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_flag_message(flag: str, known: list[str]) -> str:
    if flag in CLEANRL_INSTEAD:
        return f"{flag} is CleanRL's: {CLEANRL_INSTEAD[flag]}"
    nearest = nearest_flag(flag, known)
    hint = f"did you mean {nearest}?" if nearest else "--help lists them"
    return f"unknown flag {flag}: {hint}"


def take_value(argv: list[str], position: int, inline: str | None, flag: str) -> tuple[str, int]:
    """The value of the flag at position (inline, or the next token) and how many tokens it took."""
    if inline is not None:
        return inline, 1
    if position + 1 >= len(argv) or argv[position + 1].startswith("--"):
        raise ValueError(f"{flag} needs a value")
    return argv[position + 1], 2


def translate(args_type, argv: list[str]) -> list[str]:
    """argv with a boolean given CleanRL's way as tyro's flag; ValueError, one line, for a flag
    CleanRL has and we do not (what to use instead), an unknown flag (the nearest one), or a
    --resume None (NOT_NONE)."""
    known = known_flags(args_type)
    bools = bool_flags(args_type)
    out, i = [], 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("--") or token == "--":
            out.append(token)
            i += 1
            continue
        flag, inline = split_flag(token)
        if flag in bools:
            value, taken = bool_value(argv, i, inline)
            if value is not None:
                # tyro's form: --X for True, --no-X for False
                out.append(flag if value else "--no-" + flag.removeprefix("--"))
                i += taken
                continue
        if flag not in known:
            raise ValueError(unknown_flag_message(flag, known))
        if flag in NOT_NONE and take_value(argv, i, inline, flag)[0] == "None":
            raise ValueError(f"{flag} must be a run folder, got 'None'")
        out.append(token)
        i += 1
    return out


def parse_args(args_type, argv: list[str]):
    """args_type from argv (CleanRL's flags translated), parsed by tyro; ValueError, one line, for
    bad input."""
    return tyro_parse(args_type, translate(args_type, argv))


# ----------------------------------------------------------------------- a script's first lines
# the packages a script needs before anything else, by framework (the torch script's JAX runs its
# envs)
NEEDED = {"linen": ("jax", "flax", "tyro"), "nnx": ("jax", "flax", "tyro")}
NEEDED |= {"equinox": ("jax", "equinox", "tyro"), "torch": ("jax", "torch", "tyro")}


def before_imports(args_type, framework: str) -> None:
    """A ppo_*.py script's first lines, before its heavy imports. The stop signals (SIGINT, SIGTERM,
    SIGHUP: atomic.py) are held until the bookkeeping's main() lifts the mask, so that none is
    lost while JAX loads (bench.sh stops runs with SIGTERM). A missing package (the environment not
    active) or a bad command line ends the process with one line and exit code 2, --help with the
    help and exit code 0, an env id not among core/env_ids.py's too, all before JAX is imported;
    then nothing happens."""
    atomic.hold_stop_signals()
    script = os.path.basename(sys.argv[0])
    missing = [name for name in NEEDED[framework] if importlib.util.find_spec(name) is None]
    if missing:
        print(
            f"error: {script} needs the project's packages (no {', '.join(missing)} here): run "
            f"`./setup.sh run python {script} ...`, or `source .venv/bin/activate` first",
            file=sys.stderr,
        )
        sys.exit(2)
    try:
        args = parse_args(args_type, sys.argv[1:])
        # a fixed list: a mistyped id is refused here, not after JAX's seconds of imports
        if why := env_ids.unknown(args.env, args.env_backend):
            raise ValueError(f"--env {args.env!r} {why}")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)

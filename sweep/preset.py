"""A sweep's preset (bench.sh --preset NAME; --smoke is the preset "smoke"): study.toml's
[presets.NAME], written into the sweep's options before they are checked.

A preset sets some of bench.sh's matrix options and adds arguments to every run, ahead of those
after bench.sh's --. An option it sets may not be given beside it, nor an argument after -- that
would override one of its run arguments: BadOption names the value and the preset."""

import argparse
import shlex

from core import study
from core.option_checks import BadOption


def attribute(option: str) -> str:
    """python -m sweep's name of a bench.sh option: "compile-modes" -> "compile_modes"."""
    return option.replace("-", "_")


def flag(arg: str) -> str:
    """A run argument's flag in one spelling: "--num_envs=4" -> "--num-envs"."""
    return arg.split("=", 1)[0].replace("_", "-")


def find_preset(name: str, the_study: study.Study) -> study.Preset:
    if name not in the_study.presets:
        known = ", ".join(the_study.presets) or "none"
        raise BadOption(f"--preset {name!r} is not in study.toml's [presets]; presets: {known}")
    return the_study.presets[name]


def check_given(preset: study.Preset, args: argparse.Namespace) -> None:
    """BadOption for a matrix option given beside the preset that sets it."""
    for option, value in preset.options.items():
        given = getattr(args, attribute(option))
        if given is not None:
            raise BadOption(
                f"--{option} {given!r} does not go with --preset {preset.name}, which sets "
                f"--{option} {value} (study.toml's [presets.{preset.name}]); drop one of them"
            )


def check_extra(preset: study.Preset, extra: list[str]) -> None:
    """BadOption for an argument after -- that sets a flag of the preset's run arguments."""
    owned = {flag(arg) for arg in preset.args if arg.startswith("--")}
    for arg in extra:
        if flag(arg) in owned:
            raise BadOption(
                f"{arg!r} after -- would override what --preset {preset.name} gives every run "
                f"({shlex.join(preset.args)}); leave {flag(arg)} out, or drop the preset"
            )


def apply_preset(args: argparse.Namespace, the_study: study.Study) -> argparse.Namespace:
    """args with the preset's options and run arguments (args.preset: its name; None: args as they
    are)."""
    if args.preset is None:
        return args
    preset = find_preset(args.preset, the_study)
    check_given(preset, args)
    check_extra(preset, args.extra)
    options = {attribute(option): value for option, value in preset.options.items()}
    return argparse.Namespace(**{**vars(args), **options, "extra": [*preset.args, *args.extra]})


def preset_words(preset: study.Preset) -> str:
    """The bench.sh options a preset stands for, e.g. "--experiments exp1 --seeds 1 -- --num-envs
    4"."""
    words = [word for option, value in preset.options.items() for word in (f"--{option}", value)]
    return shlex.join([*words, *(["--", *preset.args] if preset.args else [])])

"""study.toml's tables read and checked, one reader each (read_*; core/study.py's parse puts them
together): a reader refuses what it does not know in one line (ValueError) that names the file, the
table and the valid choices."""

import math
import re
from pathlib import Path

from core.study_types import (
    BACKENDS,
    RUN_AXES,
    Config,
    Framework,
    Platform,
    Preset,
    Reference,
    RunAxis,
    Window,
    env_label,
    split_label,
)

# the repository's top level: a framework's script is found there
ROOT = Path(__file__).resolve().parent.parent

# A name in the study (a framework, experiment, platform, preset, window, configuration, size, env,
# compile mode) becomes a folder, a file name, a W&B group or a script's flag value: a plain name,
# never a path
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
NAME_RULE = "letters, digits, _ and - (not first)"
# a framework's script and its pieces: plain file names, of the repository's top level (or of the
# study file's folder, for a study's own framework), run or copied from there
FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*\.py")

# The keys of each table (the study's top level, [windows.NAME], [frameworks.NAME], ...), the
# required ones first: any other key is refused (a misspelt key would be ignored, and change what
# runs without a word)
TOP_KEYS = (
    "sizes",
    "windows",
    "frameworks",
    "experiments",
    "envs",
    "continuous_envs",
    "expensive_envs",
)
TOP_KEYS += ("envpool_envs", "platforms", "presets", "analysis")
WINDOW_KEYS = ("first", "label", "last")
FRAMEWORK_KEYS = ("script", "compile", "color", "pieces")
EXPERIMENT_KEYS = ("title", "sizes", "compile", "sync", "envs", "backends", "figures", "configs")
EXPERIMENT_KEYS += ("reference", "args", *(axis.field for axis in RUN_AXES))
CONFIG_KEYS = ("title", "args", "returns")
PLATFORM_KEYS = ("repeats", "title", "figures")
ANALYSIS_KEYS = ("headline", "tables")
# an experiment's compile: each framework's default mode, or every mode
COMPILE_CHOICES = ("default", "all")


def read_table(value, where: str, valid: tuple[str, ...], required: int, path: Path) -> dict:
    """A TOML table of valid's keys, the first `required` of them present; ValueError names the
    table and the bad or missing key, and the valid keys. where: the table as TOML names it
    ("experiments.exp1"; "" the top level)."""
    table = f"[{where}]" if where else "the top level"
    if not isinstance(value, dict):
        raise ValueError(
            f"{path}: {where} = {value!r}; give a table [{where}] of {', '.join(valid)}"
        )
    unknown = [key for key in value if key not in valid]
    missing = [key for key in valid[:required] if key not in value]
    if unknown or missing:
        said = f"has an unknown key {unknown[0]!r}" if unknown else f"lacks the key {missing[0]!r}"
        raise ValueError(
            f"{path}: {table} {said}; valid keys: {', '.join(valid)} (required: "
            f"{', '.join(valid[:required])})"
        )
    return value


def read_name(
    value, what: str, path: Path, pattern: re.Pattern = NAME, rule: str = NAME_RULE
) -> str:
    """A plain name (NAME), or ValueError naming it and what it names."""
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ValueError(f"{path}: {what} {value!r} is not a plain name; give {rule}")
    return value


def read_named_tables(
    data: dict, key: str, valid: tuple[str, ...], required: int, path: Path, within: str = ""
) -> dict[str, dict]:
    """The tables [key.NAME] of data (none when it has no key), each of a plain NAME and of valid's
    keys, the first `required` of them present. within: the table data is, as TOML names it
    ("experiments.exp9.")."""
    tables = data.get(key, {})
    if not isinstance(tables, dict):
        raise ValueError(f"{path}: {within}{key} = {tables!r}; give tables [{within}{key}.NAME]")
    return {
        read_name(name, f"[{within}{key}] name", path): read_table(
            table, f"{within}{key}.{name}", valid, required, path
        )
        for name, table in tables.items()
    }


def read_choice(
    value, every: tuple[str, ...], what: str, path: Path, keywords: dict
) -> tuple[str, ...]:
    """An experiment's envs or sizes: a keyword ("all", ...) or a list drawn from `every`."""
    if isinstance(value, str) and value in keywords:
        return keywords[value]
    if isinstance(value, str):
        raise ValueError(
            f"{path}: {what}s = {value!r} in an experiment; give a list or one of "
            f"{', '.join(keywords)}"
        )
    unknown = [v for v in value if v not in every]
    if unknown:
        raise ValueError(
            f"{path}: unknown {what} {', '.join(unknown)} in an experiment; known: "
            f"{', '.join(every)}"
        )
    return tuple(value)


def read_syncs(value, path: Path) -> tuple[bool, ...]:
    """sync = false, true or "both" (off, then on)."""
    if value == "both":
        return (False, True)
    if isinstance(value, bool):
        return (value,)
    raise ValueError(f'{path}: sync = {value!r} in an experiment; give true, false or "both"')


# the study's env lists, each an experiment's envs keyword
ENV_LISTS = ("envs", "continuous_envs", "expensive_envs")
ENV_KEYWORDS = {"all": "envs", "continuous": "continuous_envs", "expensive": "expensive_envs"}


def read_envs(data: dict, path: Path) -> dict[str, tuple[str, ...]]:
    """Each env list of the study (ENV_LISTS; a list left out is empty): no env may be listed
    twice."""
    lists = {name: read_plain_names(data.get(name, []), name, path) for name in ENV_LISTS}
    every = [env for envs in lists.values() for env in envs]
    repeated = sorted({env for env in every if every.count(env) > 1})
    if repeated:
        raise ValueError(f"{path}: {', '.join(repeated)} listed twice in {', '.join(ENV_LISTS)}")
    return lists


def read_envpool_envs(data: dict, path: Path) -> tuple[str, ...]:
    """envpool_envs: envpool ids (another namespace than the gymnax lists: CartPole-v1 may be in
    both), each once."""
    envs = read_names(data.get("envpool_envs", []), "envpool_envs", path)
    bad = sorted({env for env in envs if envs.count(env) > 1 or "@" in env})
    if bad:
        raise ValueError(
            f"{path}: envpool_envs lists {', '.join(bad)} twice, or with an @ (an envpool id has "
            "none)"
        )
    return read_plain_names(list(envs), "envpool_envs", path)


def read_some_of(value, valid: tuple[str, ...], what: str, path: Path) -> tuple[str, ...]:
    """A list of some of valid's names, at least one, each once."""
    names = read_names(value, what, path)
    unknown = [name for name in names if name not in valid]
    if unknown or not names or len(set(names)) < len(names):
        raise ValueError(
            f"{path}: {what} = {list(names)}; give some of {', '.join(valid)}, each once"
        )
    return names


def read_backends(value, path: Path, name: str) -> tuple[str, ...]:
    """An experiment's backends: a list of BACKENDS, each once (default: gymnax alone)."""
    return read_some_of(value, BACKENDS, f"experiment {name}'s backends", path)


def read_axis(axis: RunAxis, exp: dict, name: str, path: Path) -> tuple:
    """An experiment's values of a run axis (default: the axis' default alone): a list of its
    choices, or of positive integers, each once."""
    value = exp.get(axis.field, [axis.default])
    if axis.choices:
        return read_some_of(value, axis.choices, f"experiment {name}'s {axis.field}", path)
    numbers = value if isinstance(value, list) and value else []
    bad = [n for n in numbers if isinstance(n, bool) or not isinstance(n, int) or n < 1]
    if bad or not numbers or len(set(numbers)) < len(numbers):
        said = f"lists {bad[0]!r}" if bad else f"= {value!r}"
        raise ValueError(
            f"{path}: experiment {name}'s {axis.field} {said}; give a list of positive integers "
            f"(its runs' {axis.flag}), each once"
        )
    return tuple(numbers)


def read_experiment_args(exp: dict, name: str, path: Path) -> tuple[str, ...]:
    """The run arguments of every run of an experiment without configs (whose configurations give
    their own)."""
    if "args" in exp and "configs" in exp:
        raise ValueError(f"{path}: experiment {name} has args and configs; give one of them")
    return read_names(exp.get("args", []), f"experiment {name}'s args", path)


def read_reference(value, where: str, path: Path) -> Reference:
    """A published return, [mean, std]: two finite numbers, the std not negative."""
    numbers = value if isinstance(value, list) and len(value) == 2 else []
    if not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
        for x in numbers
    ):
        numbers = []
    if not numbers or numbers[1] < 0:
        raise ValueError(f"{path}: {where} = {value!r}; give [mean, std] of the published return")
    return Reference(float(numbers[0]), float(numbers[1]))


def read_config_envs(labels: list, name: str, lists: dict, path: Path) -> None:
    """Each env label of a configuration names an env of the study on that backend."""
    gymnax = tuple(env for key in ENV_LISTS for env in lists[key])
    every = {"gymnax": gymnax, "envpool": lists["envpool_envs"]}
    for label in labels:
        env, backend = split_label(label)
        if env not in every.get(backend, ()):
            known = ", ".join(env_label(e, b) for b in BACKENDS for e in every[b])
            raise ValueError(
                f"{path}: {name} lists {label!r}, not an env of the study; known: {known}"
            )


def read_configs(exp: dict, name: str, lists: dict, path: Path) -> tuple[Config, ...]:
    """A learning experiment's configurations: [experiments.NAME.configs.CONFIG] tables of a title,
    the script flags (args) and the published returns of its envs (returns: env label -> [mean,
    std])."""
    configs = []
    for config_name, config in read_named_tables(
        exp, "configs", CONFIG_KEYS, 0, path, f"experiments.{name}."
    ).items():
        where = f"experiment {name}'s config {config_name}"
        returns = config.get("returns")
        if not isinstance(returns, dict) or not returns:
            raise ValueError(f"{path}: {where} has no returns (env label -> [mean, std])")
        read_config_envs(list(returns), where, lists, path)
        references = {
            env: read_reference(value, f"{where}'s returns of {env}", path)
            for env, value in returns.items()
        }
        args = read_names(config.get("args", []), f"{where}'s args", path)
        configs.append(Config(config_name, config.get("title", config_name), args, references))
    envs = [env for config in configs for env in config.references]
    repeated = sorted({env for env in envs if envs.count(env) > 1})
    if repeated:
        raise ValueError(f"{path}: experiment {name} lists {', '.join(repeated)} in two configs")
    return tuple(configs)


def read_experiment_envs(
    exp: dict, name: str, lists: dict, path: Path
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(env labels, backends) of an experiment: each env of its envs on each of its backends, env by
    env. Its envs are drawn from the study's gymnax lists (a keyword or a list) when gymnax is a
    backend, and must be in envpool_envs when envpool is one."""
    backends = read_backends(exp.get("backends", list(BACKENDS[:1])), path, name)
    gymnax = tuple(env for key in ENV_LISTS for env in lists[key])
    keywords = {keyword: lists[key] for keyword, key in ENV_KEYWORDS.items()}
    every = {"gymnax": gymnax, "envpool": lists["envpool_envs"]}
    envs = read_choice(
        exp["envs"], tuple(dict.fromkeys(gymnax + every["envpool"])), "env", path, keywords
    )
    for backend in backends:
        missing = [env for env in envs if env not in every[backend]]
        if missing:
            lists_of = ", ".join(ENV_LISTS) if backend == "gymnax" else "envpool_envs"
            raise ValueError(
                f"{path}: experiment {name} runs {', '.join(missing)} on {backend}, which the "
                f"study's {lists_of} lack; known: {', '.join(every[backend]) or 'none'}"
            )
    return tuple(env_label(env, backend) for env in envs for backend in backends), backends


def read_names(value, what: str, path: Path) -> tuple[str, ...]:
    """A list of strings (a configuration's or a preset's args: any run argument)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{path}: {what} = {value!r}; give a list of names")
    return tuple(value)


def read_plain_names(value, what: str, path: Path) -> tuple[str, ...]:
    """A list of plain names (NAME): envs, sizes, compile modes."""
    return tuple(read_name(name, f"{what} lists", path) for name in read_names(value, what, path))


def read_platforms(data: dict, experiments: dict, path: Path) -> dict[str, Platform]:
    platforms = {}
    for name, platform in read_named_tables(data, "platforms", PLATFORM_KEYS, 1, path).items():
        if name in experiments:
            raise ValueError(f"{path}: {name} is both an experiment and a platform comparison")
        repeats = platform.get("repeats")
        if repeats not in experiments:
            raise ValueError(
                f"{path}: platform {name} repeats {repeats!r}; experiments: "
                f"{', '.join(experiments)}"
            )
        figures = read_names(platform.get("figures", []), f"platform {name}'s figures", path)
        platforms[name] = Platform(name, platform.get("title", name), repeats, figures)
    return platforms


# a preset's keys: bench.sh's matrix options, each a list of names or a positive integer
PRESET_LISTS = ("experiments", "frameworks", "envs", "sizes", "compile-modes")
PRESET_NUMBERS = ("seeds", "iterations")
PRESET_KEYS = ("title", "args", *PRESET_LISTS, *PRESET_NUMBERS)


def read_preset_option(name: str, key: str, value, path: Path) -> str:
    """A preset's option, as bench.sh takes it: "a,b" of a list of names, the digits of a positive
    integer."""
    if key in PRESET_LISTS and read_names(value, f"preset {name}'s {key}", path):
        return ",".join(value)
    if (
        key in PRESET_NUMBERS
        and isinstance(value, int)
        and not isinstance(value, bool)
        and value > 0
    ):
        return str(value)
    raise ValueError(
        f"{path}: preset {name} sets {key} = {value!r}; a preset sets {', '.join(PRESET_LISTS)} (a "
        f"list of names), {', '.join(PRESET_NUMBERS)} (a positive integer), title and args (the "
        "arguments of every run)"
    )


def read_presets(data: dict, windows: dict[str, Window], path: Path) -> dict[str, Preset]:
    """[presets.NAME]: each a title, some of bench.sh's matrix options and the arguments of every
    run. Its iterations, when it sets them, reach the steady window: else the analysis would have no
    steady state to show."""
    presets, steady = {}, windows.get("steady")
    for name, preset in read_named_tables(data, "presets", PRESET_KEYS, 0, path).items():
        keys = [key for key in preset if key not in ("title", "args")]
        options = {key: read_preset_option(name, key, preset[key], path) for key in keys}
        if steady and preset.get("iterations", steady.first + 1) <= steady.first:
            raise ValueError(
                f"{path}: preset {name}'s iterations = {preset['iterations']} end before the "
                f"steady window ({steady.label}); give {steady.first + 1} or more"
            )
        args = read_names(preset.get("args", []), f"preset {name}'s args", path)
        read_check_preset_args(name, args, path)
        presets[name] = Preset(name, preset.get("title", name), options, args)
    return presets


def read_check_preset_args(name: str, args: tuple[str, ...], path: Path) -> None:
    """A preset's run arguments may not set the iterations (in any spelling the scripts take:
    --num-iterations 3, --num_iterations=3): its `iterations` sets them, where the steady-window
    check sees them."""
    for arg in args:
        if arg.split("=", 1)[0].replace("_", "-") == "--num-iterations":
            raise ValueError(
                f"{path}: [presets.{name}] args set {arg!r}; set the preset's iterations = N "
                "instead, which must reach the steady window"
            )


def read_script(value, what: str, path: Path) -> str:
    """A framework's script or piece: a file name of the repository's top level (FILE_NAME), never a
    path."""
    rule = "a .py file name (of the repository's top level, or beside the study file), not a path"
    return read_name(value, what, path, FILE_NAME, rule)


def read_frameworks(data: dict, path: Path) -> dict[str, Framework]:
    """[frameworks.NAME]: each a script, its compile modes (the default first), a color and its
    pieces."""
    frameworks = {}
    for name, fw in read_named_tables(data, "frameworks", FRAMEWORK_KEYS, 2, path).items():
        where = f"[frameworks.{name}]"
        pieces = read_names(fw.get("pieces", []), f"{where} pieces", path)
        script = read_script(fw["script"], f"{where} script", path)
        beside = path.parent.resolve()
        frameworks[name] = Framework(
            name,
            script,
            read_plain_names(fw["compile"], f"{where} compile", path),
            fw.get("color", "#7f7f7f"),
            tuple(read_script(piece, f"{where} pieces lists", path) for piece in pieces),
            beside if beside != ROOT and (beside / script).is_file() else None,
        )
    return frameworks


def read_compile(exp: dict, name: str, path: Path) -> bool:
    """An experiment's compile: True for "all" (every mode), False for "default" (each framework's
    first)."""
    if exp["compile"] not in COMPILE_CHOICES:
        raise ValueError(
            f"{path}: [experiments.{name}] compile = {exp['compile']!r}; give one of "
            f"{', '.join(COMPILE_CHOICES)}"
        )
    return exp["compile"] == "all"

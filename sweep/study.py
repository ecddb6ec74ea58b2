"""The study of benchback-rl, read from study.toml: frameworks, envs, model sizes, experiments, windows, presets.

Every tool reads the study through this module (no heavy imports, so bench.sh can call it quickly); the types it
reads into (Study, Experiment, ..., env_label) are sweep/study_types.py's, imported from here:

    from sweep import study
    S = study.load()                   # study.toml, or the file named by $BENCHBACK_STUDY
    S.frameworks["nnx"].compile        # ('cached_partial', 'jit', 'none'): the default first
    S.pairs                            # (('nnx', 'linen'), ('equinox', 'linen'), ('equinox', 'nnx'), ...)
    S.experiments["exp3"].envs         # ('Acrobot-v1',)
    S.continuous_envs                  # the cheap envs with 1-D Box actions: an experiment's envs "continuous"
    S.envpool_envs                     # the envpool ids of the study (an experiment's backends "envpool")
    S.every_env                        # envs, continuous_envs, expensive_envs, then "{id}@envpool" of envpool_envs:
                                       #   what sweep/env_timing.py times
    S.experiments["exp7"].envs         # ('CartPole-v1', 'CartPole-v1@envpool', ...): env labels (env_label)
    S.experiments["exp5"].syncs        # (False, True): runs with --sync-timing off and on
    S.experiments["exp10"].dtypes      # ('float32', 'bfloat16'): each run once per --dtype
    S.experiments["exp9"].env_args("CartPole-v1")  # the flags of its reference configuration (a learning experiment)
    S.experiments["exp9"].config("CartPole-v1").references["CartPole-v1"].mean  # the published return
    S.experiments["exp1"].figures      # what plot_results.py draws of its runs
    S.platforms["exp4"].repeats        # 'exp1': a platform comparison repeats an experiment under other tags
    S.headline                         # 'exp1': REPORT.md's iteration windows
    S.tables                           # ('exp1', 'exp6'): the README's tables, and those compared with an edition
    S.presets["smoke"].options         # {"experiments": "exp1", "seeds": "1", ...}: bench.sh --smoke's options
"""

import math
import os
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

from sweep.study_types import (
    BACKENDS,
    DTYPES,
    Config,
    Experiment,
    Framework,
    Platform,
    Preset,
    Reference,
    Study,
    Window,
    env_label,
    split_label,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PATH = ROOT / "study.toml"
PATH_VARIABLE = "BENCHBACK_STUDY"  # another study file, e.g. a test's

# A name in the study (a framework, experiment, platform, preset, window, configuration, size, env, compile mode)
# becomes a folder, a file name, a W&B group or a script's flag value: a plain name, never a path
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
NAME_RULE = "letters, digits, _ and - (not first)"
# a framework's script and its pieces: plain file names, of the repository's top level (or of the study file's
# folder, for a study's own framework), run or copied from there
FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*\.py")

# The keys of each table (the study's top level, [windows.NAME], [frameworks.NAME], ...), the required ones first:
# any other key is refused (a misspelt key would be ignored, and change what runs without a word)
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
EXPERIMENT_KEYS = ("title", "sizes", "compile", "sync", "envs", "backends", "dtypes", "figures")
EXPERIMENT_KEYS += ("configs", "reference")
CONFIG_KEYS = ("title", "args", "returns")
PLATFORM_KEYS = ("repeats", "title", "figures")
ANALYSIS_KEYS = ("headline", "tables")
# an experiment's compile: each framework's default mode, or every mode
COMPILE_CHOICES = ("default", "all")


def _table(value, where: str, valid: tuple[str, ...], required: int, path: Path) -> dict:
    """A TOML table of valid's keys, the first `required` of them present; ValueError names the table and the bad
    or missing key, and the valid keys. where: the table as TOML names it ("experiments.exp1"; "" the top level)."""
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
            f"{path}: {table} {said}; valid keys: {', '.join(valid)} (required: {', '.join(valid[:required])})"
        )
    return value


def _name(value, what: str, path: Path, pattern: re.Pattern = NAME, rule: str = NAME_RULE) -> str:
    """A plain name (NAME), or ValueError naming it and what it names."""
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ValueError(f"{path}: {what} {value!r} is not a plain name; give {rule}")
    return value


def _named_tables(
    data: dict, key: str, valid: tuple[str, ...], required: int, path: Path, within: str = ""
) -> dict[str, dict]:
    """The tables [key.NAME] of data (none when it has no key), each of a plain NAME and of valid's keys, the first
    `required` of them present. within: the table data is, as TOML names it ("experiments.exp9.")."""
    tables = data.get(key, {})
    if not isinstance(tables, dict):
        raise ValueError(f"{path}: {within}{key} = {tables!r}; give tables [{within}{key}.NAME]")
    return {
        _name(name, f"[{within}{key}] name", path): _table(
            table, f"{within}{key}.{name}", valid, required, path
        )
        for name, table in tables.items()
    }


def _choice(
    value, every: tuple[str, ...], what: str, path: Path, keywords: dict
) -> tuple[str, ...]:
    """An experiment's envs or sizes: a keyword ("all", ...) or a list drawn from `every`."""
    if isinstance(value, str) and value in keywords:
        return keywords[value]
    if isinstance(value, str):
        raise ValueError(
            f"{path}: {what}s = {value!r} in an experiment; give a list or one of {', '.join(keywords)}"
        )
    unknown = [v for v in value if v not in every]
    if unknown:
        raise ValueError(
            f"{path}: unknown {what} {', '.join(unknown)} in an experiment; known: {', '.join(every)}"
        )
    return tuple(value)


def _syncs(value, path: Path) -> tuple[bool, ...]:
    """sync = false, true or "both" (off, then on)."""
    if value == "both":
        return (False, True)
    if isinstance(value, bool):
        return (value,)
    raise ValueError(f'{path}: sync = {value!r} in an experiment; give true, false or "both"')


# the study's env lists, each an experiment's envs keyword
ENV_LISTS = ("envs", "continuous_envs", "expensive_envs")
ENV_KEYWORDS = {"all": "envs", "continuous": "continuous_envs", "expensive": "expensive_envs"}


def _envs(data: dict, path: Path) -> dict[str, tuple[str, ...]]:
    """Each env list of the study (ENV_LISTS; a list left out is empty): no env may be listed twice."""
    lists = {name: _plain_names(data.get(name, []), name, path) for name in ENV_LISTS}
    every = [env for envs in lists.values() for env in envs]
    repeated = sorted({env for env in every if every.count(env) > 1})
    if repeated:
        raise ValueError(f"{path}: {', '.join(repeated)} listed twice in {', '.join(ENV_LISTS)}")
    return lists


def _envpool_envs(data: dict, path: Path) -> tuple[str, ...]:
    """envpool_envs: envpool ids (another namespace than the gymnax lists: CartPole-v1 may be in both), each once."""
    envs = _names(data.get("envpool_envs", []), "envpool_envs", path)
    bad = sorted({env for env in envs if envs.count(env) > 1 or "@" in env})
    if bad:
        raise ValueError(
            f"{path}: envpool_envs lists {', '.join(bad)} twice, or with an @ (an envpool id has none)"
        )
    return _plain_names(list(envs), "envpool_envs", path)


def _some_of(value, valid: tuple[str, ...], what: str, path: Path) -> tuple[str, ...]:
    """A list of some of valid's names, at least one, each once."""
    names = _names(value, what, path)
    unknown = [name for name in names if name not in valid]
    if unknown or not names or len(set(names)) < len(names):
        raise ValueError(
            f"{path}: {what} = {list(names)}; give some of {', '.join(valid)}, each once"
        )
    return names


def _backends(value, path: Path, name: str) -> tuple[str, ...]:
    """An experiment's backends: a list of BACKENDS, each once (default: gymnax alone)."""
    return _some_of(value, BACKENDS, f"experiment {name}'s backends", path)


def _dtypes(value, path: Path, name: str) -> tuple[str, ...]:
    """An experiment's dtypes: a list of DTYPES, each once (default: float32 alone)."""
    return _some_of(value, DTYPES, f"experiment {name}'s dtypes", path)


def _reference(value, where: str, path: Path) -> Reference:
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


def _config_envs(labels: list, name: str, lists: dict, path: Path) -> None:
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


def _configs(exp: dict, name: str, lists: dict, path: Path) -> tuple[Config, ...]:
    """A learning experiment's configurations: [experiments.NAME.configs.CONFIG] tables of a title, the script
    flags (args) and the published returns of its envs (returns: env label -> [mean, std])."""
    configs = []
    for config_name, config in _named_tables(
        exp, "configs", CONFIG_KEYS, 0, path, f"experiments.{name}."
    ).items():
        where = f"experiment {name}'s config {config_name}"
        returns = config.get("returns")
        if not isinstance(returns, dict) or not returns:
            raise ValueError(f"{path}: {where} has no returns (env label -> [mean, std])")
        _config_envs(list(returns), where, lists, path)
        references = {
            env: _reference(value, f"{where}'s returns of {env}", path)
            for env, value in returns.items()
        }
        args = _names(config.get("args", []), f"{where}'s args", path)
        configs.append(Config(config_name, config.get("title", config_name), args, references))
    envs = [env for config in configs for env in config.references]
    repeated = sorted({env for env in envs if envs.count(env) > 1})
    if repeated:
        raise ValueError(f"{path}: experiment {name} lists {', '.join(repeated)} in two configs")
    return tuple(configs)


def _experiment_envs(
    exp: dict, name: str, lists: dict, path: Path
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(env labels, backends) of an experiment: each env of its envs on each of its backends, env by env. Its envs
    are drawn from the study's gymnax lists (a keyword or a list) when gymnax is a backend, and must be in
    envpool_envs when envpool is one."""
    backends = _backends(exp.get("backends", list(BACKENDS[:1])), path, name)
    gymnax = tuple(env for key in ENV_LISTS for env in lists[key])
    keywords = {keyword: lists[key] for keyword, key in ENV_KEYWORDS.items()}
    every = {"gymnax": gymnax, "envpool": lists["envpool_envs"]}
    envs = _choice(
        exp["envs"], tuple(dict.fromkeys(gymnax + every["envpool"])), "env", path, keywords
    )
    for backend in backends:
        missing = [env for env in envs if env not in every[backend]]
        if missing:
            lists_of = ", ".join(ENV_LISTS) if backend == "gymnax" else "envpool_envs"
            raise ValueError(
                f"{path}: experiment {name} runs {', '.join(missing)} on {backend}, which the study's {lists_of} "
                f"lack; known: {', '.join(every[backend]) or 'none'}"
            )
    return tuple(env_label(env, backend) for env in envs for backend in backends), backends


def _names(value, what: str, path: Path) -> tuple[str, ...]:
    """A list of strings (a configuration's or a preset's args: any run argument)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{path}: {what} = {value!r}; give a list of names")
    return tuple(value)


def _plain_names(value, what: str, path: Path) -> tuple[str, ...]:
    """A list of plain names (NAME): envs, sizes, compile modes."""
    return tuple(_name(name, f"{what} lists", path) for name in _names(value, what, path))


def _platforms(data: dict, experiments: dict, path: Path) -> dict[str, Platform]:
    platforms = {}
    for name, platform in _named_tables(data, "platforms", PLATFORM_KEYS, 1, path).items():
        if name in experiments:
            raise ValueError(f"{path}: {name} is both an experiment and a platform comparison")
        repeats = platform.get("repeats")
        if repeats not in experiments:
            raise ValueError(
                f"{path}: platform {name} repeats {repeats!r}; experiments: {', '.join(experiments)}"
            )
        figures = _names(platform.get("figures", []), f"platform {name}'s figures", path)
        platforms[name] = Platform(name, platform.get("title", name), repeats, figures)
    return platforms


# a preset's keys: bench.sh's matrix options, each a list of names or a positive integer
PRESET_LISTS = ("experiments", "frameworks", "envs", "sizes", "compile-modes")
PRESET_NUMBERS = ("seeds", "iterations")
PRESET_KEYS = ("title", "args", *PRESET_LISTS, *PRESET_NUMBERS)


def _preset_option(name: str, key: str, value, path: Path) -> str:
    """A preset's option, as bench.sh takes it: "a,b" of a list of names, the digits of a positive integer."""
    if key in PRESET_LISTS and _names(value, f"preset {name}'s {key}", path):
        return ",".join(value)
    if (
        key in PRESET_NUMBERS
        and isinstance(value, int)
        and not isinstance(value, bool)
        and value > 0
    ):
        return str(value)
    raise ValueError(
        f"{path}: preset {name} sets {key} = {value!r}; a preset sets {', '.join(PRESET_LISTS)} (a list of names), "
        f"{', '.join(PRESET_NUMBERS)} (a positive integer), title and args (the arguments of every run)"
    )


def _presets(data: dict, windows: dict[str, Window], path: Path) -> dict[str, Preset]:
    """[presets.NAME]: each a title, some of bench.sh's matrix options and the arguments of every run. Its
    iterations, when it sets them, reach the steady window: else the analysis would have no steady state to show."""
    presets, steady = {}, windows.get("steady")
    for name, preset in _named_tables(data, "presets", PRESET_KEYS, 0, path).items():
        keys = [key for key in preset if key not in ("title", "args")]
        options = {key: _preset_option(name, key, preset[key], path) for key in keys}
        if steady and preset.get("iterations", steady.first + 1) <= steady.first:
            raise ValueError(
                f"{path}: preset {name}'s iterations = {preset['iterations']} end before the steady window "
                f"({steady.label}); give {steady.first + 1} or more"
            )
        args = _names(preset.get("args", []), f"preset {name}'s args", path)
        _check_preset_args(name, args, path)
        presets[name] = Preset(name, preset.get("title", name), options, args)
    return presets


def _check_preset_args(name: str, args: tuple[str, ...], path: Path) -> None:
    """A preset's run arguments may not set the iterations (in any spelling the scripts take: --num-iterations 3,
    --num_iterations=3): its `iterations` sets them, where the steady-window check sees them."""
    for arg in args:
        if arg.split("=", 1)[0].replace("_", "-") == "--num-iterations":
            raise ValueError(
                f"{path}: [presets.{name}] args set {arg!r}; set the preset's iterations = N instead, which must "
                "reach the steady window"
            )


def _analysis(data: dict, path: Path) -> dict:
    """[analysis]: the roles of the experiments in the analysis (none given: the defaults)."""
    return _table(data.get("analysis", {}), "analysis", ANALYSIS_KEYS, 0, path)


def _headline(data: dict, experiments: dict, path: Path) -> str:
    """The headline experiment: [analysis] headline, else the first experiment."""
    headline = _analysis(data, path).get("headline", next(iter(experiments), ""))
    if headline not in experiments:
        raise ValueError(
            f"{path}: [analysis] headline = {headline!r}; known experiments: {', '.join(experiments)}"
        )
    return headline


def _tables(data: dict, experiments: dict, headline: str, path: Path) -> tuple[str, ...]:
    """The experiments of the README's tables: [analysis] tables, else the headline. Each must have sync-off runs
    (total time and steady state are timed without the timers' waits)."""
    tables = _names(_analysis(data, path).get("tables", [headline]), "[analysis] tables", path)
    for name in tables:
        if name not in experiments:
            raise ValueError(
                f"{path}: [analysis] tables lists {name!r}; known experiments: {', '.join(experiments)}"
            )
        if False not in experiments[name].syncs:
            raise ValueError(
                f"{path}: [analysis] tables lists {name}, which has no sync-off runs to tabulate"
            )
    return tables


def _script(value, what: str, path: Path) -> str:
    """A framework's script or piece: a file name of the repository's top level (FILE_NAME), never a path."""
    rule = "a .py file name (of the repository's top level, or beside the study file), not a path"
    return _name(value, what, path, FILE_NAME, rule)


def _frameworks(data: dict, path: Path) -> dict[str, Framework]:
    """[frameworks.NAME]: each a script, its compile modes (the default first), a color and its pieces."""
    frameworks = {}
    for name, fw in _named_tables(data, "frameworks", FRAMEWORK_KEYS, 2, path).items():
        where = f"[frameworks.{name}]"
        pieces = _names(fw.get("pieces", []), f"{where} pieces", path)
        script = _script(fw["script"], f"{where} script", path)
        beside = path.parent.resolve()
        frameworks[name] = Framework(
            name,
            script,
            _plain_names(fw["compile"], f"{where} compile", path),
            fw.get("color", "#7f7f7f"),
            tuple(_script(piece, f"{where} pieces lists", path) for piece in pieces),
            beside if beside != ROOT and (beside / script).is_file() else None,
        )
    return frameworks


def _compile(exp: dict, name: str, path: Path) -> bool:
    """An experiment's compile: True for "all" (every mode), False for "default" (each framework's first)."""
    if exp["compile"] not in COMPILE_CHOICES:
        raise ValueError(
            f"{path}: [experiments.{name}] compile = {exp['compile']!r}; give one of {', '.join(COMPILE_CHOICES)}"
        )
    return exp["compile"] == "all"


def parse(path: Path) -> Study:
    """The study of a study file; ValueError (one line) names what is wrong in it."""
    with open(path, "rb") as f:
        data = _table(tomllib.load(f), "", TOP_KEYS, 4, path)
    env_lists = _envs(data, path)
    envpool_envs = _envpool_envs(data, path)
    sizes = _plain_names(data["sizes"], "sizes", path)
    frameworks = _frameworks(data, path)
    windows = {
        name: Window(name, w["first"], w.get("last"), w["label"])
        for name, w in _named_tables(data, "windows", WINDOW_KEYS, 2, path).items()
    }
    lists = {**env_lists, "envpool_envs": envpool_envs}
    experiments = {}
    for name, exp in _named_tables(data, "experiments", EXPERIMENT_KEYS, 4, path).items():
        configs = _configs(exp, name, lists, path)
        if configs:  # the configurations name the envs, each with its backend
            envs = tuple(env for config in configs for env in config.references)
            backends = tuple(dict.fromkeys(split_label(env)[1] for env in envs))
        elif "envs" not in exp:
            raise ValueError(f"{path}: [experiments.{name}] has neither envs nor configs; give one")
        else:
            envs, backends = _experiment_envs(exp, name, lists, path)
        experiments[name] = Experiment(
            name,
            exp["title"],
            envs,
            _choice(exp["sizes"], sizes, "size", path, {"all": sizes}),
            _compile(exp, name, path),
            _syncs(exp["sync"], path),
            _names(exp.get("figures", []), f"experiment {name}'s figures", path),
            backends,
            configs,
            exp.get("reference", ""),
            _dtypes(exp.get("dtypes", list(DTYPES[:1])), path, name),
        )
    platforms = _platforms(data, experiments, path)
    headline = _headline(data, experiments, path)
    tables = _tables(data, experiments, headline, path)
    return Study(
        Path(path),
        frameworks,
        env_lists["envs"],
        env_lists["continuous_envs"],
        env_lists["expensive_envs"],
        envpool_envs,
        sizes,
        windows,
        experiments,
        platforms,
        headline,
        tables,
        _presets(data, windows, path),
    )


@cache
def _load(path: str) -> Study:
    return parse(Path(path))


def load() -> Study:
    """The study: study.toml next to this file, or the file named by $BENCHBACK_STUDY. Every tool reads it here: a
    bad study file (or none) is one line on stderr and exit 2, before the tool does anything."""
    path = os.environ.get(PATH_VARIABLE) or str(DEFAULT_PATH)
    try:
        return _load(path)
    except tomllib.TOMLDecodeError as e:  # says where in the file, not which file
        problem = f"{path}: {e}"
    except (ValueError, OSError) as e:
        problem = str(e)
    print(f"error: {problem}", file=sys.stderr)
    sys.exit(2)

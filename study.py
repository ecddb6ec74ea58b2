"""The study of benchback-rl, read from study.toml: frameworks, envs, model sizes, experiments, windows.

Every tool reads the study through this module (no heavy imports, so bench.sh can call it quickly):

    import study
    S = study.load()                   # study.toml, or the file named by $BENCHBACK_STUDY
    S.frameworks["nnx"].compile        # ('cached_partial', 'jit', 'none'): the default first
    S.pairs                            # (('nnx', 'linen'), ('equinox', 'linen'), ('equinox', 'nnx'), ...)
    S.experiments["exp3"].envs         # ('Acrobot-v1',)
    S.every_env                        # envs, then expensive_envs: what env_timing.py times
    S.experiments["exp5"].syncs        # (False, True): runs with --sync-timing off and on
    S.experiments["exp1"].figures      # what plot_results.py draws of its runs
    S.platforms["exp4"].repeats        # 'exp1': a platform comparison repeats an experiment under other tags
    S.headline                         # 'exp1': the README's tables
"""

import os
import tomllib
from dataclasses import dataclass
from functools import cache
from itertools import combinations
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent
DEFAULT_PATH = ROOT / "study.toml"
PATH_VARIABLE = "BENCHBACK_STUDY"  # another study file, e.g. a test's


@dataclass(frozen=True)
class Framework:
    name: str
    script: str
    compile: tuple[str, ...]  # the script's --compile choices, default first
    color: str

    @property
    def default_compile(self) -> str:
        return self.compile[0]


@dataclass(frozen=True)
class Window:
    name: str
    first: int
    last: Optional[int]  # inclusive; None = to the end of the run
    label: str


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    envs: tuple[str, ...]
    sizes: tuple[str, ...]
    all_compile_modes: bool  # False: each framework's default mode only
    syncs: tuple[bool, ...]  # the --sync-timing settings of its runs: (False,), (True,) or (False, True)
    figures: tuple[str, ...] = ()  # the figure kinds plot_results.py draws of its runs

    def compile_modes(self, framework: Framework) -> tuple[str, ...]:
        return framework.compile if self.all_compile_modes else framework.compile[:1]


@dataclass(frozen=True)
class Platform:
    """A platform comparison: an experiment's runs repeated under other --tag values; no runs of its own."""

    name: str
    title: str
    repeats: str  # the experiment it compares across tags
    figures: tuple[str, ...] = ()


@dataclass(frozen=True)
class Study:
    path: Path
    frameworks: dict[str, Framework]  # in the order of the figures and tables
    envs: tuple[str, ...]  # an experiment's envs "all"
    expensive_envs: tuple[str, ...]  # in the study (env timing, figures) but only in the experiments that name them
    sizes: tuple[str, ...]
    windows: dict[str, Window]
    experiments: dict[str, Experiment]
    platforms: dict[str, Platform]
    headline: str  # the experiment of the README's tables

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """Every framework pair A -> B (time of A / time of B) with B listed before A."""
        return tuple((a, b) for b, a in combinations(self.frameworks, 2))

    @property
    def pair_names(self) -> tuple[str, ...]:
        return tuple(f"{a}->{b}" for a, b in self.pairs)

    @property
    def every_env(self) -> tuple[str, ...]:
        return self.envs + self.expensive_envs

    @property
    def steady(self) -> Window:
        return self.windows["steady"]

    def default_compile(self, framework: str) -> Optional[str]:
        return self.frameworks[framework].default_compile if framework in self.frameworks else None


def _choice(value, every: tuple[str, ...], what: str, path: Path, keywords: dict) -> tuple[str, ...]:
    """An experiment's envs or sizes: a keyword ("all", ...) or a list drawn from `every`."""
    if isinstance(value, str) and value in keywords:
        return keywords[value]
    if isinstance(value, str):
        raise ValueError(f"{path}: {what}s = {value!r} in an experiment; give a list or one of {', '.join(keywords)}")
    unknown = [v for v in value if v not in every]
    if unknown:
        raise ValueError(f"{path}: unknown {what} {', '.join(unknown)} in an experiment; known: {', '.join(every)}")
    return tuple(value)


def _syncs(value, path: Path) -> tuple[bool, ...]:
    """sync = false, true or "both" (off, then on)."""
    if value == "both":
        return (False, True)
    if isinstance(value, bool):
        return (value,)
    raise ValueError(f'{path}: sync = {value!r} in an experiment; give true, false or "both"')


def _envs(data: dict, path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    envs, expensive = tuple(data["envs"]), tuple(data.get("expensive_envs", ()))
    every = envs + expensive
    repeated = sorted({env for env in every if every.count(env) > 1})
    if repeated:
        raise ValueError(f"{path}: {', '.join(repeated)} listed twice in envs and expensive_envs")
    return envs, expensive


def _names(value, what: str, path: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{path}: {what} = {value!r}; give a list of names")
    return tuple(value)


def _platforms(data: dict, experiments: dict, path: Path) -> dict[str, Platform]:
    platforms = {}
    for name, platform in data.get("platforms", {}).items():
        if name in experiments:
            raise ValueError(f"{path}: {name} is both an experiment and a platform comparison")
        repeats = platform.get("repeats")
        if repeats not in experiments:
            raise ValueError(f"{path}: platform {name} repeats {repeats!r}; experiments: {', '.join(experiments)}")
        figures = _names(platform.get("figures", []), f"platform {name}'s figures", path)
        platforms[name] = Platform(name, platform.get("title", name), repeats, figures)
    return platforms


def _headline(data: dict, experiments: dict, path: Path) -> str:
    """The headline experiment: [analysis] headline, else the first experiment."""
    headline = data.get("analysis", {}).get("headline", next(iter(experiments), ""))
    if headline not in experiments:
        raise ValueError(f"{path}: [analysis] headline = {headline!r}; known experiments: {', '.join(experiments)}")
    return headline


def parse(path: Path) -> Study:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    envs, expensive_envs = _envs(data, path)
    sizes = tuple(data["sizes"])
    frameworks = {
        name: Framework(name, fw["script"], tuple(fw["compile"]), fw.get("color", "#7f7f7f"))
        for name, fw in data["frameworks"].items()
    }
    windows = {name: Window(name, w["first"], w.get("last"), w["label"]) for name, w in data["windows"].items()}
    env_keywords = {"all": envs, "expensive": expensive_envs}
    experiments = {
        name: Experiment(
            name,
            exp["title"],
            _choice(exp["envs"], envs + expensive_envs, "env", path, env_keywords),
            _choice(exp["sizes"], sizes, "size", path, {"all": sizes}),
            exp["compile"] == "all",
            _syncs(exp["sync"], path),
            _names(exp.get("figures", []), f"experiment {name}'s figures", path),
        )
        for name, exp in data["experiments"].items()
    }
    platforms = _platforms(data, experiments, path)
    headline = _headline(data, experiments, path)
    return Study(Path(path), frameworks, envs, expensive_envs, sizes, windows, experiments, platforms, headline)


@cache
def _load(path: str) -> Study:
    return parse(Path(path))


def load() -> Study:
    """The study: study.toml next to this file, or the file named by $BENCHBACK_STUDY."""
    return _load(os.environ.get(PATH_VARIABLE) or str(DEFAULT_PATH))

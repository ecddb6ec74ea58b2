"""The study of benchback-rl, read from study.toml: frameworks, envs, model sizes, experiments, windows.

Every tool reads the study through this module (no heavy imports, so bench.sh can call it quickly):

    import study
    S = study.load()                   # study.toml, or the file named by $BENCHBACK_STUDY
    S.frameworks["nnx"].compile        # ('cached_partial', 'jit', 'none'): the default first
    S.pairs                            # (('nnx', 'linen'), ('equinox', 'linen'), ('equinox', 'nnx'), ...)
    S.experiments["exp3"].envs         # ('Acrobot-v1',)
    S.continuous_envs                  # the cheap envs with 1-D Box actions: an experiment's envs "continuous"
    S.every_env                        # envs, continuous_envs, then expensive_envs: what env_timing.py times
    S.experiments["exp5"].syncs        # (False, True): runs with --sync-timing off and on
    S.experiments["exp1"].figures      # what plot_results.py draws of its runs
    S.platforms["exp4"].repeats        # 'exp1': a platform comparison repeats an experiment under other tags
    S.headline                         # 'exp1': REPORT.md's iteration windows
    S.tables                           # ('exp1', 'exp6'): the README's tables, and those compared with an edition
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
    envs: tuple[str, ...]  # an experiment's envs "all": the cheap envs with discrete actions
    continuous_envs: tuple[str, ...]  # an experiment's envs "continuous": the cheap envs with 1-D Box actions
    expensive_envs: tuple[str, ...]  # in the study (env timing, figures) but only in the experiments that name them
    sizes: tuple[str, ...]
    windows: dict[str, Window]
    experiments: dict[str, Experiment]
    platforms: dict[str, Platform]
    headline: str  # the experiment of REPORT.md's iteration windows
    tables: tuple[str, ...]  # the experiments of the README's total-time and steady-state tables (and of --previous)

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """Every framework pair A -> B (time of A / time of B) with B listed before A."""
        return tuple((a, b) for b, a in combinations(self.frameworks, 2))

    @property
    def pair_names(self) -> tuple[str, ...]:
        return tuple(f"{a}->{b}" for a, b in self.pairs)

    @property
    def every_env(self) -> tuple[str, ...]:
        return self.envs + self.continuous_envs + self.expensive_envs

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


ENV_LISTS = ("envs", "continuous_envs", "expensive_envs")  # the study's env lists, each an experiment's envs keyword
ENV_KEYWORDS = {"all": "envs", "continuous": "continuous_envs", "expensive": "expensive_envs"}


def _envs(data: dict, path: Path) -> dict[str, tuple[str, ...]]:
    """Each env list of the study (ENV_LISTS; a list left out is empty): no env may be listed twice."""
    lists = {name: tuple(data.get(name, ())) for name in ENV_LISTS}
    every = [env for envs in lists.values() for env in envs]
    repeated = sorted({env for env in every if every.count(env) > 1})
    if repeated:
        raise ValueError(f"{path}: {', '.join(repeated)} listed twice in {', '.join(ENV_LISTS)}")
    return lists


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


def _tables(data: dict, experiments: dict, headline: str, path: Path) -> tuple[str, ...]:
    """The experiments of the README's tables: [analysis] tables, else the headline. Each must have sync-off runs
    (total time and steady state are timed without the timers' waits)."""
    tables = _names(data.get("analysis", {}).get("tables", [headline]), "[analysis] tables", path)
    for name in tables:
        if name not in experiments:
            raise ValueError(f"{path}: [analysis] tables lists {name!r}; known experiments: {', '.join(experiments)}")
        if False not in experiments[name].syncs:
            raise ValueError(f"{path}: [analysis] tables lists {name}, which has no sync-off runs to tabulate")
    return tables


def parse(path: Path) -> Study:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    env_lists = _envs(data, path)
    every_env = tuple(env for envs in env_lists.values() for env in envs)
    sizes = tuple(data["sizes"])
    frameworks = {
        name: Framework(name, fw["script"], tuple(fw["compile"]), fw.get("color", "#7f7f7f"))
        for name, fw in data["frameworks"].items()
    }
    windows = {name: Window(name, w["first"], w.get("last"), w["label"]) for name, w in data["windows"].items()}
    env_keywords = {keyword: env_lists[name] for keyword, name in ENV_KEYWORDS.items()}
    experiments = {
        name: Experiment(
            name,
            exp["title"],
            _choice(exp["envs"], every_env, "env", path, env_keywords),
            _choice(exp["sizes"], sizes, "size", path, {"all": sizes}),
            exp["compile"] == "all",
            _syncs(exp["sync"], path),
            _names(exp.get("figures", []), f"experiment {name}'s figures", path),
        )
        for name, exp in data["experiments"].items()
    }
    platforms = _platforms(data, experiments, path)
    headline = _headline(data, experiments, path)
    tables = _tables(data, experiments, headline, path)
    return Study(
        Path(path),
        frameworks,
        env_lists["envs"],
        env_lists["continuous_envs"],
        env_lists["expensive_envs"],
        sizes,
        windows,
        experiments,
        platforms,
        headline,
        tables,
    )


@cache
def _load(path: str) -> Study:
    return parse(Path(path))


def load() -> Study:
    """The study: study.toml next to this file, or the file named by $BENCHBACK_STUDY."""
    return _load(os.environ.get(PATH_VARIABLE) or str(DEFAULT_PATH))

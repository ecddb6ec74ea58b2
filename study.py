"""The study of benchback-rl, read from study.toml: frameworks, envs, model sizes, experiments, windows.

Every tool reads the study through this module (no heavy imports, so bench.sh can call it quickly):

    import study
    S = study.load()                   # study.toml, or the file named by $BENCHBACK_STUDY
    S.frameworks["nnx"].compile        # ('cached_partial', 'jit', 'none'): the default first
    S.pairs                            # (('nnx', 'linen'), ('equinox', 'linen'), ('equinox', 'nnx'), ...)
    S.experiments["exp3"].envs         # ('Acrobot-v1',)
    S.every_env                        # envs, then expensive_envs: what env_timing.py times
    S.experiments["exp5"].syncs        # (False, True): runs with --sync-timing off and on
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

    def compile_modes(self, framework: Framework) -> tuple[str, ...]:
        return framework.compile if self.all_compile_modes else framework.compile[:1]


@dataclass(frozen=True)
class Study:
    path: Path
    frameworks: dict[str, Framework]  # in the order of the figures and tables
    envs: tuple[str, ...]  # an experiment's envs "all"
    expensive_envs: tuple[str, ...]  # in the study (env timing, figures) but only in the experiments that name them
    sizes: tuple[str, ...]
    windows: dict[str, Window]
    experiments: dict[str, Experiment]

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
        )
        for name, exp in data["experiments"].items()
    }
    return Study(Path(path), frameworks, envs, expensive_envs, sizes, windows, experiments)


@cache
def _load(path: str) -> Study:
    return parse(Path(path))


def load() -> Study:
    """The study: study.toml next to this file, or the file named by $BENCHBACK_STUDY."""
    return _load(os.environ.get(PATH_VARIABLE) or str(DEFAULT_PATH))

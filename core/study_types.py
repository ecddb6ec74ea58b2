"""What a study is: its frameworks, iteration windows, experiments (their data types and agents per
process; a learning experiment with its reference configurations and their published returns),
platform comparisons, presets (a sweep by name), and the env labels that name an env on a backend.
core/study.py reads a study of these from study.toml; import them from there."""

from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Optional

BACKENDS = ("gymnax", "envpool")  # the scripts' --env-backend choices, the default first
DTYPES = ("float32", "bfloat16")  # the scripts' --dtype choices, the default first


@dataclass(frozen=True)
class RunAxis:
    """A script option each of whose values makes a cell of its own: runs of two values are never
    pooled. An experiment lists the values its runs take (study.toml's `field`). Declared once, in
    RUN_AXES, which the study's reader and the analysis read: a run's identity, the value of runs
    made before the option, the experiments a run belongs to, the columns a speedup table splits by.
    """

    key: str  # the scripts' Args field, config.json's key and the analysis' column: "dtype"
    field: str  # an experiment's values, in study.toml and Experiment: "dtypes"
    default: object  # the scripts' default, and the value of the runs made before the option
    choices: tuple = ()  # the values it takes, the default first; () for positive integers
    # a speedup table per value, whose title says which (the value in the braces); "": one table
    # for all, and the experiment's own figure sets the values side by side (agents)
    title: str = ""

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")


RUN_AXES = (
    RunAxis("dtype", "dtypes", DTYPES[0], DTYPES, title="in {}"),
    RunAxis("num_agents", "agents", 1),
)


def env_label(env: str, backend: str = BACKENDS[0]) -> str:
    """An env on a backend, as the sweep (cells, log names), the env timing and the analysis (its
    env column) name it: the env id on gymnax (the default backend, which also runs the Craftax and
    Brax adapters), "{id}@{backend}" on another, e.g. "CartPole-v1@envpool": never the same name as
    the gymnax run of the same env id."""
    return env if backend == BACKENDS[0] else f"{env}@{backend}"


def split_label(label: str) -> tuple[str, str]:
    """(env id, backend) of an env label (env_label's inverse)."""
    env, separator, backend = label.rpartition("@")
    return (env, backend) if separator else (label, BACKENDS[0])


@dataclass(frozen=True)
class Framework:
    name: str
    script: str
    compile: tuple[str, ...]  # the script's --compile choices, default first
    color: str
    # the files beside the script that it imports (its own pieces); a copy of it takes them along
    pieces: tuple[str, ...] = ()
    # where the script is: the repository's top level (None), or the folder of the study file that
    # names it when it is there (a study of one's own, e.g. a test's stand-in framework)
    folder: Optional[Path] = None

    @property
    def default_compile(self) -> str:
        return self.compile[0]

    def script_path(self, root: Path) -> Path:
        """The script's path; root: the repository's top level."""
        return (self.folder or root) / self.script


@dataclass(frozen=True)
class Window:
    name: str
    first: int
    last: Optional[int]  # inclusive; None = to the end of the run
    label: str


@dataclass(frozen=True)
class Reference:
    """A published result an experiment's runs are read against: the mean and std of a return over
    seeds."""

    mean: float
    std: float


@dataclass(frozen=True)
class Config:
    """A reference configuration of a learning experiment: the script flags of its envs, and the
    published return of each env under them."""

    name: str
    title: str
    args: tuple[str, ...]  # added to the command of each run of its envs
    references: dict[str, Reference]  # env label -> the published return


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    envs: tuple[str, ...]  # env labels (env_label): each env on each of its backends, env by env
    sizes: tuple[str, ...]
    all_compile_modes: bool  # False: each framework's default mode only
    # the --sync-timing settings of its runs: (False,), (True,) or (False, True)
    syncs: tuple[bool, ...]
    figures: tuple[str, ...] = ()  # the figure kinds plot_results.py draws of its runs
    backends: tuple[str, ...] = BACKENDS[:1]  # the --env-backend of its runs
    # a learning experiment's reference configurations, which name its envs
    configs: tuple[Config, ...] = ()
    reference: str = ""  # where its configurations' published returns come from
    # the --dtype of its runs, each run once per data type (in this order, the default first when
    # listed)
    dtypes: tuple[str, ...] = DTYPES[:1]
    # the --num-agents of its runs (agents per process), each a cell of its own, as sizes are
    agents: tuple[int, ...] = (1,)
    # the run arguments of every run of an experiment without configs (a timing experiment's batch
    # and length), as a configuration's args are of its envs' runs
    args: tuple[str, ...] = ()

    def compile_modes(self, framework: Framework) -> tuple[str, ...]:
        return framework.compile if self.all_compile_modes else framework.compile[:1]

    def config(self, env: str) -> Optional[Config]:
        """The reference configuration an env label runs under, if any."""
        return next((config for config in self.configs if env in config.references), None)

    def env_args(self, env: str) -> tuple[str, ...]:
        """The script flags of an env label's runs in this experiment (its configuration's, else the
        experiment's args)."""
        config = self.config(env)
        return config.args if config else self.args


@dataclass(frozen=True)
class Platform:
    """A platform comparison: an experiment's runs repeated under other --tag values; no runs of its
    own."""

    name: str
    title: str
    repeats: str  # the experiment it compares across tags
    figures: tuple[str, ...] = ()


@dataclass(frozen=True)
class Preset:
    """A sweep by name (bench.sh --preset NAME; --smoke is the preset "smoke"): the bench.sh matrix
    options it sets, and the arguments it adds to every run (before those after bench.sh's --)."""

    name: str
    title: str
    # bench.sh's option without its dashes ("seeds", "compile-modes") -> its value as bench.sh takes
    # it ("1", "a,b")
    options: dict[str, str]
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Study:
    path: Path
    frameworks: dict[str, Framework]  # in the order of the figures and tables
    envs: tuple[str, ...]  # an experiment's envs "all": the cheap envs with discrete actions
    # an experiment's envs "continuous": the cheap envs with 1-D Box actions
    continuous_envs: tuple[str, ...]
    # in the study (env timing, figures) but only in the experiments that name them
    expensive_envs: tuple[str, ...]
    # envpool ids: the envs an experiment with the envpool backend may list
    envpool_envs: tuple[str, ...]
    sizes: tuple[str, ...]
    windows: dict[str, Window]
    experiments: dict[str, Experiment]
    platforms: dict[str, Platform]
    headline: str  # the experiment of REPORT.md's iteration windows
    # the experiments of the README's total-time and steady-state tables (and of --previous)
    tables: tuple[str, ...]
    presets: dict[str, Preset] = field(default_factory=dict)  # bench.sh --preset NAME

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """Every framework pair A -> B (time of A / time of B) with B listed before A."""
        return tuple((a, b) for b, a in combinations(self.frameworks, 2))

    @property
    def pair_names(self) -> tuple[str, ...]:
        return tuple(f"{a}->{b}" for a, b in self.pairs)

    @property
    def every_env(self) -> tuple[str, ...]:
        """Every env label of the study: its gymnax envs, then its envpool envs ("{id}@envpool")."""
        envpool = tuple(env_label(env, "envpool") for env in self.envpool_envs)
        return self.envs + self.continuous_envs + self.expensive_envs + envpool

    @property
    def steady(self) -> Window:
        return self.windows["steady"]

    def default_compile(self, framework: str) -> Optional[str]:
        return self.frameworks[framework].default_compile if framework in self.frameworks else None

"""The study of benchback-rl, read from study.toml: frameworks, envs, model sizes, experiments,
windows, presets.

Every tool reads the study through this module (no heavy imports, so bench.sh can call it quickly);
the types it reads into (Study, Experiment, ..., env_label) are core/study_types.py's, imported
from here:

    from core import study
    S = study.load()               # study.toml, or the file named by $BENCHBACK_STUDY
    S.frameworks["nnx"].compile    # ('cached_partial', 'jit', 'tree', 'none'): the default first
    S.pairs                        # (('nnx', 'linen'), ('equinox', 'linen'), ...)
    S.experiments["exp3"].envs     # ('Acrobot-v1',)
    S.continuous_envs              # the cheap envs with 1-D Box actions: envs "continuous"
    S.envpool_envs                 # the envpool ids of the study (backends "envpool")
    S.every_env                    # envs, continuous_envs, expensive_envs, then "{id}@envpool"
                                   #   of envpool_envs: what sweep/env_timing.py times
    S.experiments["exp7"].envs     # ('CartPole-v1', 'CartPole-v1@envpool', ...): env labels
    S.experiments["exp5"].syncs    # (False, True): runs with --sync-timing off and on
    S.experiments["exp10"].dtypes  # ('float32', 'bfloat16'): each run once per --dtype
    S.experiments["exp11"].agents  # (1, 4, 16, 64): each a cell of its own, --num-agents N
    S.experiments["exp9"].env_args("CartPole-v1")  # its reference configuration's flags
    S.experiments["exp9"].config("CartPole-v1").references["CartPole-v1"].mean  # a return
    S.experiments["exp1"].figures  # what plot_results.py draws of its runs
    S.platforms["exp4"].repeats    # 'exp1': a platform comparison repeats an experiment
    S.headline                     # 'exp1': REPORT.md's iteration windows
    S.tables                       # ('exp1', 'exp6'): the README's tables
    S.presets["smoke"].options     # {"experiments": "exp1", ...}: bench.sh --smoke's options
"""

import os
import sys
import tomllib
from functools import cache
from pathlib import Path

from core import study_tables
from core.study_types import (  # noqa: F401 (the types, read through this module)
    BACKENDS,
    DTYPES,
    RUN_AXES,
    Config,
    Experiment,
    Framework,
    Platform,
    Preset,
    Reference,
    RunAxis,
    Study,
    Window,
    env_label,
    split_label,
)

ROOT = study_tables.ROOT
DEFAULT_PATH = ROOT / "study.toml"
PATH_VARIABLE = "BENCHBACK_STUDY"  # another study file, e.g. a test's


# [analysis]: what the analysis shows first (read here, beside the experiments it names)
def read_analysis(data: dict, path: Path) -> dict:
    """[analysis]: the roles of the experiments in the analysis (none given: the defaults)."""
    return study_tables.read_table(
        data.get("analysis", {}), "analysis", study_tables.ANALYSIS_KEYS, 0, path
    )


def read_headline(data: dict, experiments: dict, path: Path) -> str:
    """The headline experiment: [analysis] headline, else the first experiment."""
    headline = read_analysis(data, path).get("headline", next(iter(experiments), ""))
    if headline not in experiments:
        raise ValueError(
            f"{path}: [analysis] headline = {headline!r}; known experiments: "
            f"{', '.join(experiments)}"
        )
    return headline


def read_tables(data: dict, experiments: dict, headline: str, path: Path) -> tuple[str, ...]:
    """The experiments of the README's tables: [analysis] tables, else the headline. Each must have
    sync-off runs (total time and steady state are timed without the timers' waits)."""
    tables = study_tables.read_names(
        read_analysis(data, path).get("tables", [headline]), "[analysis] tables", path
    )
    for name in tables:
        if name not in experiments:
            raise ValueError(
                f"{path}: [analysis] tables lists {name!r}; known experiments: "
                f"{', '.join(experiments)}"
            )
        if False not in experiments[name].syncs:
            raise ValueError(
                f"{path}: [analysis] tables lists {name}, which has no sync-off runs to tabulate"
            )
    return tables


def parse(path: Path) -> Study:
    """The study of a study file; ValueError (one line) names what is wrong in it."""
    with open(path, "rb") as f:
        data = study_tables.read_table(tomllib.load(f), "", study_tables.TOP_KEYS, 4, path)
    env_lists = study_tables.read_envs(data, path)
    envpool_envs = study_tables.read_envpool_envs(data, path)
    sizes = study_tables.read_plain_names(data["sizes"], "sizes", path)
    frameworks = study_tables.read_frameworks(data, path)
    windows = {
        name: Window(name, w["first"], w.get("last"), w["label"])
        for name, w in study_tables.read_named_tables(
            data, "windows", study_tables.WINDOW_KEYS, 2, path
        ).items()
    }
    lists = {**env_lists, "envpool_envs": envpool_envs}
    experiments = {}
    for name, exp in study_tables.read_named_tables(
        data, "experiments", study_tables.EXPERIMENT_KEYS, 4, path
    ).items():
        configs = study_tables.read_configs(exp, name, lists, path)
        if configs:  # the configurations name the envs, each with its backend
            envs = tuple(env for config in configs for env in config.references)
            backends = tuple(dict.fromkeys(split_label(env)[1] for env in envs))
        elif "envs" not in exp:
            raise ValueError(f"{path}: [experiments.{name}] has neither envs nor configs; give one")
        else:
            envs, backends = study_tables.read_experiment_envs(exp, name, lists, path)
        experiments[name] = Experiment(
            name,
            exp["title"],
            envs,
            study_tables.read_choice(exp["sizes"], sizes, "size", path, {"all": sizes}),
            study_tables.read_compile(exp, name, path),
            study_tables.read_syncs(exp["sync"], path),
            study_tables.read_names(exp.get("figures", []), f"experiment {name}'s figures", path),
            backends,
            configs,
            exp.get("reference", ""),
            args=study_tables.read_experiment_args(exp, name, path),
            **{axis.field: study_tables.read_axis(axis, exp, name, path) for axis in RUN_AXES},
        )
    platforms = study_tables.read_platforms(data, experiments, path)
    headline = read_headline(data, experiments, path)
    tables = read_tables(data, experiments, headline, path)
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
        study_tables.read_presets(data, windows, path),
    )


@cache
def _load(path: str) -> Study:
    return parse(Path(path))


def load() -> Study:
    """The study: study.toml next to this file, or the file named by $BENCHBACK_STUDY. Every tool
    reads it here: a bad study file (or none) is one line on stderr and exit 2, before the tool does
    anything."""
    path = os.environ.get(PATH_VARIABLE) or str(DEFAULT_PATH)
    try:
        return _load(path)
    except tomllib.TOMLDecodeError as e:  # says where in the file, not which file
        problem = f"{path}: {e}"
    except (ValueError, OSError) as e:
        problem = str(e)
    print(f"error: {problem}", file=sys.stderr)
    sys.exit(2)

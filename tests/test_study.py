"""core/study.py: what it reads from a study file (a small study written here), what it refuses,
and that the committed study.toml holds together. No test restates study.toml: adding a framework,
an env or an experiment edits no test."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import study
from helpers import ROOT

# A small study of every kind of entry: env lists, frameworks (one without a color), experiments of
# each envs keyword, a list, both backends, envpool alone, a learning experiment with two
# configurations, a platform comparison and the analysis roles. Its parts are joined by study_text.
LISTS = """
sizes = ["s", "m"]
envs = ["Disc-a", "Disc-b"]
continuous_envs = ["Cont-a"]
expensive_envs = ["Costly-a"]
envpool_envs = ["Disc-a", "Disc-b", "Pool-only"]
"""
BASE = """
[windows]
compile = { first = 0, last = 0, label = "iteration 0" }
steady = { first = 2, label = "iterations 2+" }

[frameworks.first]
script = "ppo_first.py"
compile = ["fast", "slow"]
color = "#000001"

[frameworks.second]
script = "ppo_second.py"
compile = ["quick", "plain", "none"]

[frameworks.third]
script = "ppo_third.py"
compile = ["one", "none"]
color = "#000003"

[experiments.every]
title = "the discrete envs, every size, default modes, sync off"
envs = "all"
sizes = "all"
compile = "default"
sync = false
figures = ["total", "speedups"]
"""
OTHERS = """
[experiments.modes]
title = "every mode"
envs = ["Disc-b", "Costly-a"]
sizes = ["m"]
compile = "all"
sync = true
figures = ["compile_modes"]

[experiments.continuous]
title = "continuous"
envs = "continuous"
sizes = "all"
compile = "default"
sync = "both"
figures = ["total"]

[experiments.costly]
title = "expensive"
envs = "expensive"
sizes = ["s"]
compile = "default"
sync = "both"
figures = ["total"]

[experiments.pooled]
title = "both backends"
envs = ["Disc-b", "Disc-a"]
backends = ["gymnax", "envpool"]
sizes = ["s"]
compile = "default"
sync = "both"
figures = ["backends"]

[experiments.pool_only]
title = "envpool alone"
envs = ["Pool-only"]
backends = ["envpool"]
sizes = ["s"]
compile = "default"
sync = "both"
figures = ["backends"]

[experiments.learn]
title = "learning"
reference = "a paper"
sizes = ["s"]
compile = "default"
sync = false
figures = ["learning"]

[experiments.learn.configs.short]
title = "short runs"
args = ["--num-iterations", "3"]
returns = { "Disc-a" = [1.5, 0.5], "Cont-a" = [-2, 0] }

[experiments.learn.configs.pool]
args = ["--num-iterations", "5", "--norm-obs"]
returns = { "Pool-only@envpool" = [10, 1] }
"""
ROLES = """
[platforms.again]
title = "every, under another tag"
repeats = "every"
figures = ["tags"]

[analysis]
headline = "modes"
tables = ["every", "continuous"]
"""


def study_text(*parts: str) -> str:
    return "".join(parts)


def write_study(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path


def small_study(tmp_path: Path, old: str = "", new: str = "") -> study.Study:
    """The small study, with one piece of its text replaced when `old` is given."""
    text = study_text(LISTS, BASE, OTHERS, ROLES)
    assert old in text
    return study.parse(write_study(tmp_path, text.replace(old, new, 1)))


@pytest.fixture
def small(tmp_path) -> study.Study:
    return small_study(tmp_path)


# ----------------------------------------------------------------------------------- what it reads
def test_frameworks_sizes_and_windows_read_as_written(small, tmp_path):
    assert small.path == tmp_path / "study.toml"
    assert list(small.frameworks) == ["first", "second", "third"]
    second = small.frameworks["second"]
    assert (second.script, second.compile) == ("ppo_second.py", ("quick", "plain", "none"))
    assert second.default_compile == "quick" and small.default_compile("second") == "quick"
    assert small.default_compile("fourth") is None
    # a framework without a color gets a neutral one
    assert small.frameworks["first"].color == "#000001" and second.color.startswith("#")
    assert small.sizes == ("s", "m")
    assert small.steady == study.Window("steady", 2, None, "iterations 2+")
    assert small.windows["compile"] == study.Window("compile", 0, 0, "iteration 0")


def test_the_pairs_put_a_framework_against_each_one_listed_before_it(small):
    assert small.pairs == (("second", "first"), ("third", "first"), ("third", "second"))
    assert small.pair_names == ("second->first", "third->first", "third->second")


def test_a_new_framework_adds_its_pairs_and_keeps_the_others(small, tmp_path):
    fourth = '\n[frameworks.fourth]\nscript = "ppo_fourth.py"\ncompile = ["jit", "none"]\n'
    grown = study.parse(write_study(tmp_path, study_text(LISTS, BASE, fourth, OTHERS, ROLES)))
    assert list(grown.frameworks)[-1] == "fourth"
    added = [pair for pair in grown.pairs if pair not in small.pairs]
    assert added == [("fourth", name) for name in small.frameworks]
    assert set(small.pairs) < set(grown.pairs)


def test_the_env_keywords_draw_on_their_own_lists(small):
    """The keyword "all" is the discrete envs alone (neither the continuous nor the expensive ones),
    "continuous" and "expensive" their lists; a list may draw on any gymnax list."""
    experiments = small.experiments
    assert small.envs == ("Disc-a", "Disc-b") and experiments["every"].envs == small.envs
    assert experiments["continuous"].envs == small.continuous_envs == ("Cont-a",)
    assert experiments["costly"].envs == small.expensive_envs == ("Costly-a",)
    assert experiments["modes"].envs == ("Disc-b", "Costly-a")
    assert all(exp.backends == ("gymnax",) for exp in (experiments["every"], experiments["modes"]))


def test_sizes_and_compile_modes_of_an_experiment(small):
    every, modes = small.experiments["every"], small.experiments["modes"]
    assert every.sizes == small.sizes and modes.sizes == ("m",)
    for framework in small.frameworks.values():
        assert modes.compile_modes(framework) == framework.compile
        assert every.compile_modes(framework) == (framework.default_compile,)


@pytest.mark.parametrize(
    "value,syncs", [("true", (True,)), ("false", (False,)), ('"both"', (False, True))]
)
def test_sync_settings(tmp_path, value, syncs):
    """sync = false, true or "both" (off, then on)."""
    changed = small_study(tmp_path, "sync = true", f"sync = {value}")
    assert changed.experiments["modes"].syncs == syncs


def test_an_experiments_data_types(tmp_path, small):
    """dtypes: float32 alone when not given, else the scripts' --dtype choices as listed."""
    assert all(exp.dtypes == ("float32",) for exp in small.experiments.values())
    changed = small_study(tmp_path, "sync = true", 'sync = true\ndtypes = ["float32", "bfloat16"]')
    assert changed.experiments["modes"].dtypes == ("float32", "bfloat16")
    assert changed.experiments["every"].dtypes == ("float32",)


def test_each_env_runs_on_each_backend_env_by_env(small):
    """An env on envpool is labelled "{id}@envpool"; an experiment of two backends runs each env on
    both, one after the other; every_env is the gymnax lists, then the envpool envs."""
    assert small.experiments["pooled"].envs == (
        "Disc-b",
        "Disc-b@envpool",
        "Disc-a",
        "Disc-a@envpool",
    )
    assert small.experiments["pooled"].backends == ("gymnax", "envpool")
    pool_only = small.experiments["pool_only"]
    assert pool_only.envs == ("Pool-only@envpool",) and pool_only.backends == ("envpool",)
    assert small.envpool_envs == ("Disc-a", "Disc-b", "Pool-only")
    gymnax = ("Disc-a", "Disc-b", "Cont-a", "Costly-a")
    envpool = ("Disc-a@envpool", "Disc-b@envpool", "Pool-only@envpool")
    assert small.every_env == gymnax + envpool


def test_a_learning_experiment_takes_its_envs_flags_and_returns_from_its_configs(small):
    learn = small.experiments["learn"]
    assert learn.envs == ("Disc-a", "Cont-a", "Pool-only@envpool")
    assert learn.backends == ("gymnax", "envpool") and learn.reference == "a paper"
    short, pool = learn.configs
    assert (short.name, short.title, pool.title) == ("short", "short runs", "pool")
    assert learn.config("Cont-a") is short and learn.env_args("Cont-a") == ("--num-iterations", "3")
    assert learn.env_args("Pool-only@envpool") == ("--num-iterations", "5", "--norm-obs")
    assert short.references == {
        "Disc-a": study.Reference(1.5, 0.5),
        "Cont-a": study.Reference(-2.0, 0.0),
    }
    assert isinstance(pool.references["Pool-only@envpool"].mean, float)
    # an env of the configurations on another backend is not the experiment's
    assert learn.config("Disc-a@envpool") is None and learn.env_args("Disc-a@envpool") == ()
    assert (
        small.experiments["every"].env_args("Disc-a") == ()
        and not small.experiments["every"].configs
    )


def test_the_analysis_roles_as_written(small):
    assert small.headline == "modes" and small.tables == ("every", "continuous")
    assert list(small.platforms) == ["again"]
    assert small.platforms["again"] == study.Platform(
        "again", "every, under another tag", "every", ("tags",)
    )
    assert small.experiments["every"].figures == ("total", "speedups")


def test_the_roles_have_defaults(tmp_path):
    """No [analysis] table: the first experiment is the headline and the README's tables are its; no
    [platforms]: no platform comparison."""
    parsed = study.parse(write_study(tmp_path, study_text(LISTS, BASE, OTHERS)))
    assert parsed.headline == "every" and parsed.tables == ("every",) and parsed.platforms == {}


def test_a_study_without_continuous_expensive_or_envpool_envs(tmp_path):
    lists = 'sizes = ["s"]\nenvs = ["Disc-a"]\n'
    parsed = study.parse(write_study(tmp_path, study_text(lists, BASE)))
    assert parsed.continuous_envs == parsed.expensive_envs == parsed.envpool_envs == ()
    assert parsed.every_env == ("Disc-a",)
    assert all(exp.backends == ("gymnax",) for exp in parsed.experiments.values())


@pytest.mark.parametrize(
    "env,backend,label",
    [("CartPole-v1", "gymnax", "CartPole-v1"), ("Hopper-v4", "envpool", "Hopper-v4@envpool")],
)
def test_an_env_label_names_the_backend_except_gymnax(env, backend, label):
    assert study.env_label(env, backend) == label and study.split_label(label) == (env, backend)
    # gymnax, the scripts' default backend
    assert study.env_label(env) == env


# --------------------------------------------------------------------------------- what it refuses
@pytest.mark.parametrize(
    "old,new,named",
    [
        ("sync = false", 'sync = "sometimes"', "sometimes"),
        ("sync = false", "sync = 1", "sync = 1"),
        ('envs = "expensive"', 'envs = "cheap"', "cheap"),
        ('envs = "continuous"', 'envs = "continous"', "continous"),
        ('envs = ["Disc-b", "Costly-a"]', 'envs = ["Disc-c"]', "Disc-c"),
        ('expensive_envs = ["Costly-a"]', 'expensive_envs = ["Disc-a"]', "Disc-a listed twice"),
        ('continuous_envs = ["Cont-a"]', 'continuous_envs = ["Costly-a"]', "Costly-a listed twice"),
        (
            'backends = ["gymnax", "envpool"]',
            'backends = ["gymnax", "brax"]',
            r"pooled's backends = \['gymnax', 'brax'\]",
        ),
        (
            'backends = ["gymnax", "envpool"]',
            'backends = ["envpool", "envpool"]',
            "pooled's backends",
        ),
        (
            'backends = ["gymnax", "envpool"]',
            'backends = "envpool"',
            "pooled's backends = 'envpool'",
        ),
        ('envs = ["Disc-b", "Disc-a"]', 'envs = ["Disc-b", "Cont-a"]', "Cont-a on envpool"),
        ('backends = ["envpool"]', 'backends = ["gymnax"]', "runs Pool-only on gymnax"),
        ('"Pool-only"]', '"Pool-only", "Disc-a"]', "envpool_envs lists Disc-a twice"),
        ('"Pool-only"]', '"Pool-only@envpool"]', "Pool-only@envpool twice, or with an @"),
        # a learning experiment's configurations
        ('"Disc-a" = [1.5, 0.5]', '"Disc-a" = [1.5]', r"returns of Disc-a = \[1.5\]"),
        ('"Disc-a" = [1.5, 0.5]', '"Disc-a" = [1.5, -1]', "returns of Disc-a"),
        ('"Disc-a" = [1.5, 0.5]', '"Disc-a" = ["a", 1]', "returns of Disc-a"),
        ('"Disc-a" = [1.5, 0.5]', '"Disc-a" = [nan, 1]', "returns of Disc-a"),
        ('"Disc-a" = [1.5, 0.5]', '"Disc-c" = [1.5, 0.5]', "'Disc-c', not an env of the study"),
        ('"Pool-only@envpool" = [', '"Pool-only@brax" = [', "'Pool-only@brax', not an env of"),
        ('"Pool-only@envpool" = [', '"Cont-a" = [', "learn lists Cont-a in two configs"),
        ('returns = { "Pool-only@envpool" = [10, 1] }', "", "config pool has no returns"),
        ('args = ["--num-iterations", "3"]', 'args = "--num-iterations 3"', "short's args"),
        # the data types: the scripts' --dtype choices, each once
        ("sync = true", 'sync = true\ndtypes = ["float16"]', r"modes's dtypes = \['float16'\]"),
        ("sync = true", "sync = true\ndtypes = []", r"modes's dtypes = \[\]; give some of"),
        ("sync = true", 'sync = true\ndtypes = ["bfloat16", "bfloat16"]', "each once"),
        ("sync = true", 'sync = true\ndtypes = "bfloat16"', "modes's dtypes = 'bfloat16'"),
    ],
)
def test_a_bad_experiment_is_named(tmp_path, old, new, named):
    with pytest.raises(ValueError, match=named):
        small_study(tmp_path, old, new)


@pytest.mark.parametrize(
    "old,new,named",
    [
        ('headline = "modes"', 'headline = "exp99"', "headline = 'exp99'"),
        ('repeats = "every"', 'repeats = "again"', "platform again repeats 'again'"),
        ('figures = ["compile_modes"]', 'figures = "compile_modes"', "modes's figures"),
        ("[platforms.again]", "[platforms.every]", "both an experiment and a platform"),
        ('tables = ["every", "continuous"]', 'tables = ["every", "exp99"]', "tables lists 'exp99'"),
        ('tables = ["every", "continuous"]', 'tables = "every"', "tables = 'every'"),
        (
            'tables = ["every", "continuous"]',
            'tables = ["modes"]',
            "modes, which has no sync-off runs",
        ),
    ],
)
def test_a_bad_analysis_role_is_named(tmp_path, old, new, named):
    with pytest.raises(ValueError, match=named):
        small_study(tmp_path, old, new)


# ----------------------------------------------------------------------------- which file it reads
FAKE_FRAMEWORK = """
[frameworks.fake]
script = "ppo_linen.py"
compile = ["jit", "none"]
color = "#000000"
"""


def fake_study(tmp_path: Path) -> Path:
    """A copy of study.toml with a framework more appended (it reuses ppo_linen.py as its
    script)."""
    return write_study(tmp_path, study.DEFAULT_PATH.read_text() + FAKE_FRAMEWORK)


def test_the_study_file_can_be_swapped(tmp_path, monkeypatch):
    monkeypatch.delenv(study.PATH_VARIABLE, raising=False)
    assert study.load().path == study.DEFAULT_PATH
    monkeypatch.setenv(study.PATH_VARIABLE, str(write_study(tmp_path, study_text(LISTS, BASE))))
    assert study.load() == study.parse(tmp_path / "study.toml")


@pytest.mark.slow
def test_a_new_framework_is_parametrised_in_the_script_tests(tmp_path):
    """The script tests take their frameworks and compile modes from the study: one more is
    collected too, a twin of tests a framework of the study is a parameter of (the fake framework
    has linen's script and modes), in one collection: the committed study has no "fake" to
    collect."""
    frameworks = study.parse(study.DEFAULT_PATH).frameworks
    assert "fake" not in frameworks
    env = {**os.environ, study.PATH_VARIABLE: str(fake_study(tmp_path))}
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/test_scripts.py"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ids = [line for line in proc.stdout.splitlines() if line.startswith("tests/")]
    fakes = [line for line in ids if "fake" in line]
    assert fakes and len(fakes) == len(set(fakes))
    # each a parameter: in the id's brackets, where another framework stands in its twin
    for line in fakes:
        assert "fake" in line[line.index("[") :], line
        assert any(line.replace("fake", name) in ids for name in frameworks), line


# ----------------------------------------------------------------------------- the committed study
@pytest.fixture(scope="module")
def committed() -> study.Study:
    return study.parse(study.DEFAULT_PATH)


def test_each_framework_has_its_script_and_modes_to_compare(committed):
    for framework in committed.frameworks.values():
        assert (ROOT / framework.script).exists()
        assert len(set(framework.compile)) == len(framework.compile) >= 2


def test_every_env_of_the_study_is_one_the_adapters_make_and_an_experiment_runs(committed):
    """The env timing times every env of the study: each must be run by some experiment, and each
    envpool id be one the adapter can make."""
    import env_adapters

    assert set(committed.envpool_envs) <= set(env_adapters.ENVPOOL_ENVS)
    run = {env for exp in committed.experiments.values() for env in exp.envs}
    assert set(committed.every_env) == run


def test_the_iteration_windows_do_not_overlap(committed):
    windows = sorted(committed.windows.values(), key=lambda window: window.first)
    for window, following in zip(windows, windows[1:]):
        assert window.last is not None and window.first <= window.last < following.first
    assert committed.steady in windows


def test_each_learning_experiment_fixes_its_runs_and_draws_its_curves(committed):
    """A learning experiment (one with configs) draws the learning figure; each configuration fixes
    its own number of env steps."""
    learning = [exp for exp in committed.experiments.values() if exp.configs]
    assert learning
    for exp in learning:
        assert "learning" in exp.figures
        assert all("--num-iterations" in config.args for config in exp.configs)


def test_every_experiment_and_platform_draws_something(committed):
    assert all(exp.figures for exp in committed.experiments.values())
    assert all(platform.figures for platform in committed.platforms.values())

"""study.toml, read by study.py: the one definition of the study, and what a new framework changes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import study
from helpers import ROOT, STUDY

FAKE_FRAMEWORK = """
[frameworks.fake]
script = "ppo_linen.py"
compile = ["jit", "none"]
color = "#000000"
"""


def fake_study(tmp_path: Path) -> Path:
    """A copy of study.toml with a fifth framework appended (it reuses ppo_linen.py as its script)."""
    path = tmp_path / "study.toml"
    path.write_text(study.DEFAULT_PATH.read_text() + FAKE_FRAMEWORK)
    return path


def test_the_study_as_committed():
    assert list(STUDY.frameworks) == ["linen", "nnx", "equinox", "torch"]
    for framework in STUDY.frameworks.values():
        assert (ROOT / framework.script).exists()
        assert len(set(framework.compile)) == len(framework.compile) >= 2
    assert STUDY.pair_names == (
        "nnx->linen",
        "equinox->linen",
        "torch->linen",
        "equinox->nnx",
        "torch->nnx",
        "torch->equinox",
    )
    assert len(STUDY.envs) == 12 and STUDY.sizes == ("small", "medium", "large")
    assert STUDY.continuous_envs == (
        "Pendulum-v1",
        "MountainCarContinuous-v0",
        "Reacher-misc",
        "Swimmer-misc",
    )
    assert STUDY.expensive_envs == (
        *("Craftax-Classic-Symbolic-v1", "Craftax-Symbolic-v1"),
        *("brax-halfcheetah", "brax-ant"),
    )
    envpool = tuple(f"{env}@envpool" for env in STUDY.envpool_envs)
    assert STUDY.every_env == STUDY.envs + STUDY.continuous_envs + STUDY.expensive_envs + envpool
    assert (STUDY.steady.first, STUDY.steady.last) == (8, None)
    exp3 = STUDY.experiments["exp3"]
    assert (
        exp3.envs == ("Acrobot-v1",)
        and exp3.syncs == (True,)
        and exp3.compile_modes(STUDY.frameworks["nnx"]) == ("cached_partial", "jit", "none")
    )
    assert STUDY.experiments["exp1"].compile_modes(STUDY.frameworks["torch"]) == ("compile",)
    assert STUDY.experiments["exp1"].syncs == (False,) and STUDY.experiments["exp2"].syncs == (
        True,
    )


def test_the_expensive_envs_join_exp5_only():
    """exp1-exp3 keep the discrete gymnax envs ("all"); exp5 runs the Craftax and Brax envs, every size, default
    modes, sync off, on."""
    for name in ("exp1", "exp2"):
        assert STUDY.experiments[name].envs == STUDY.envs
    others = {env for exp in STUDY.experiments.values() if exp.name != "exp5" for env in exp.envs}
    assert not set(STUDY.expensive_envs) & others
    exp5 = STUDY.experiments["exp5"]
    assert (
        exp5.envs == STUDY.expensive_envs
        and exp5.sizes == STUDY.sizes
        and exp5.syncs == (False, True)
    )
    assert all(exp5.compile_modes(fw) == (fw.default_compile,) for fw in STUDY.frameworks.values())


def test_the_continuous_envs_join_exp6_only():
    """exp6, continuous control: the cheap continuous envs x every size x every framework, default modes, sync off
    and on; no other experiment runs them, and the README's tables hold exp6's beside exp1's."""
    exp6 = STUDY.experiments["exp6"]
    assert (
        exp6.envs == STUDY.continuous_envs
        and exp6.sizes == STUDY.sizes
        and exp6.syncs == (False, True)
    )
    assert all(exp6.compile_modes(fw) == (fw.default_compile,) for fw in STUDY.frameworks.values())
    others = {env for exp in STUDY.experiments.values() if exp.name != "exp6" for env in exp.envs}
    assert not set(STUDY.continuous_envs) & others and "PointRobot-misc" not in STUDY.every_env
    assert {"total", "speedups", "speedup_vs_env_cost"} <= set(exp6.figures)
    assert STUDY.tables == ("exp1", "exp6", "exp7")


def test_exp7_runs_the_classic_envs_on_both_backends_and_exp8_mujoco_on_envpool():
    """exp7: CartPole-v1, Acrobot-v1, MountainCar-v0 on gymnax and on envpool, small and medium, default modes, sync
    off and on, each env on both backends one after the other; exp8: HalfCheetah-v4 and Hopper-v4 on envpool alone.
    An env on envpool is named "{id}@envpool"; exp7 is in the README's tables, and both draw the backends figure."""
    import env_adapters

    exp7, exp8 = STUDY.experiments["exp7"], STUDY.experiments["exp8"]
    assert exp7.backends == ("gymnax", "envpool") and exp8.backends == ("envpool",)
    assert exp7.envs == tuple(
        label
        for env in ("CartPole-v1", "Acrobot-v1", "MountainCar-v0")
        for label in (env, f"{env}@envpool")
    )
    assert exp8.envs == ("HalfCheetah-v4@envpool", "Hopper-v4@envpool")
    for exp in (exp7, exp8):
        assert (
            exp.sizes == ("small", "medium")
            and exp.syncs == (False, True)
            and "backends" in exp.figures
        )
        assert all(
            exp.compile_modes(fw) == (fw.default_compile,) for fw in STUDY.frameworks.values()
        )
    assert set(STUDY.envpool_envs) <= set(
        env_adapters.ENVPOOL_ENVS
    )  # every one an env the adapter can make
    assert {study.split_label(env)[0] for env in exp7.envs + exp8.envs} <= set(STUDY.envpool_envs)
    plain = [
        exp
        for exp in STUDY.experiments.values()
        if exp.name not in ("exp7", "exp8") and not exp.configs
    ]
    assert not {
        env for exp in plain for env in exp.envs if "@" in env
    }  # no other timing experiment uses envpool
    assert "exp7" in STUDY.tables


def test_exp9_reads_each_framework_against_cleanrls_published_returns():
    """The learning experiment's envs come from its two configurations, each env on its backend; a run gets its
    configuration's flags, and the published return it is read against."""
    exp9 = STUDY.experiments["exp9"]
    assert (
        exp9.backends == ("gymnax", "envpool")
        and exp9.syncs == (False,)
        and "learning" in exp9.figures
    )
    assert all(exp9.compile_modes(fw) == (fw.default_compile,) for fw in STUDY.frameworks.values())
    assert exp9.envs == tuple(env for config in exp9.configs for env in config.references)
    for env in exp9.envs:
        config = exp9.config(env)
        assert exp9.env_args(env) == config.args and config.references[env].std >= 0
        assert (
            "--num-iterations" in config.args
        )  # each configuration fixes its own number of env steps
    assert (
        exp9.config("Hopper-v4") is None and exp9.env_args("Hopper-v4") == ()
    )  # another backend: not in exp9
    assert STUDY.experiments["exp1"].env_args("CartPole-v1") == ()


@pytest.mark.parametrize(
    "env,backend,label",
    [("CartPole-v1", "gymnax", "CartPole-v1"), ("Hopper-v4", "envpool", "Hopper-v4@envpool")],
)
def test_an_env_label_names_the_backend_except_gymnax(env, backend, label):
    assert study.env_label(env, backend) == label and study.split_label(label) == (env, backend)
    assert study.env_label(env) == env  # gymnax, the scripts' default backend


def edited_study(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of study.toml with one piece of text replaced."""
    text = study.DEFAULT_PATH.read_text()
    assert old in text
    path = tmp_path / "study.toml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    "value,syncs", [("true", (True,)), ("false", (False,)), ('"both"', (False, True))]
)
def test_sync_settings(tmp_path, value, syncs):
    path = edited_study(tmp_path, 'sync = "both"', f"sync = {value}")
    assert study.parse(path).experiments["exp5"].syncs == syncs


@pytest.mark.parametrize(
    "old,new,named",
    [
        ('sync = "both"', 'sync = "sometimes"', "sometimes"),
        ('sync = "both"', "sync = 1", "sync = 1"),
        ('envs = "expensive"', 'envs = "cheap"', "cheap"),
        ('envs = ["Acrobot-v1"]', 'envs = ["Acrobat-v1"]', "Acrobat-v1"),
        (
            'expensive_envs = ["Craftax-Classic-Symbolic-v1"',
            'expensive_envs = ["CartPole-v1"',
            "CartPole-v1 listed twice",
        ),
        (
            'continuous_envs = ["Pendulum-v1"',
            'continuous_envs = ["brax-ant"',
            "brax-ant listed twice",
        ),
        ('envs = "continuous"', 'envs = "continous"', "continous"),
        (
            'backends = ["gymnax", "envpool"]',
            'backends = ["gymnax", "brax"]',
            r"exp7's backends = \['gymnax', 'brax'\]",
        ),
        (
            'backends = ["gymnax", "envpool"]',
            'backends = ["envpool", "envpool"]',
            "exp7's backends",
        ),
        ('backends = ["gymnax", "envpool"]', 'backends = "envpool"', "exp7's backends = 'envpool'"),
        (
            'envs = ["HalfCheetah-v4", "Hopper-v4"]',
            'envs = ["HalfCheetah-v4", "Pendulum-v1"]',
            "Pendulum-v1 on envpool",
        ),
        (
            'backends = ["envpool"]',
            'backends = ["gymnax"]',
            "runs HalfCheetah-v4, Hopper-v4 on gymnax",
        ),
        ('"Walker2d-v4"]\n', '"Walker2d-v4", "Hopper-v4"]\n', "envpool_envs lists Hopper-v4 twice"),
        ('"Walker2d-v4"]\n', '"Walker2d-v4@envpool"]\n', "Walker2d-v4@envpool twice, or with an @"),
        # a learning experiment's configurations
        (
            '"Acrobot-v1" = [-86.36, 1.32]',
            '"Acrobot-v1" = [-86.36]',
            "returns of Acrobot-v1 = \\[-86.36\\]",
        ),
        ('"Acrobot-v1" = [-86.36, 1.32]', '"Acrobot-v1" = [-86.36, -1]', "returns of Acrobot-v1"),
        ('"Acrobot-v1" = [-86.36, 1.32]', '"Acrobot-v1" = ["a", 1]', "returns of Acrobot-v1"),
        ('"Acrobot-v1" = [-86.36, 1.32]', '"Acrobot-v1" = [nan, 1]', "returns of Acrobot-v1"),
        (
            '"Acrobot-v1" = [-86.36, 1.32]',
            '"Acrobat-v1" = [-86.36, 1.32]',
            "'Acrobat-v1', not an env of the study",
        ),
        (
            '"Hopper-v4@envpool" = [',
            '"Hopper-v4@brax" = [',
            "'Hopper-v4@brax', not an env of the study",
        ),
        ('"Hopper-v4@envpool" = [', '"CartPole-v1" = [', "exp9 lists CartPole-v1 in two configs"),
    ],
)
def test_a_bad_experiment_is_named(tmp_path, old, new, named):
    with pytest.raises(ValueError, match=named):
        study.parse(edited_study(tmp_path, old, new))


def test_the_analysis_roles_as_committed():
    """The headline experiment, the figures of each experiment and the platform comparison that repeats exp1."""
    assert STUDY.headline == "exp1"
    assert set(STUDY.platforms) == {"exp4"} and STUDY.platforms["exp4"].repeats == "exp1"
    assert (
        STUDY.platforms["exp4"].figures == ("tags",) and "exp4" not in STUDY.experiments
    )  # bench.sh runs no exp4
    assert STUDY.experiments["exp1"].figures[:2] == ("total", "speedups")
    assert all(exp.figures for exp in STUDY.experiments.values())


@pytest.mark.parametrize(
    "old,new,named",
    [
        ('headline = "exp1"', 'headline = "exp99"', "headline = 'exp99'"),
        ('repeats = "exp1"', 'repeats = "exp4"', "platform exp4 repeats 'exp4'"),
        ('figures = ["compile_modes"]', 'figures = "compile_modes"', "exp3's figures"),
        ("[platforms.exp4]", "[platforms.exp1]", "both an experiment and a platform"),
        ('tables = ["exp1", "exp6", "exp7"]', 'tables = ["exp1", "exp99"]', "tables lists 'exp99'"),
        ('tables = ["exp1", "exp6", "exp7"]', 'tables = "exp6"', "tables = 'exp6'"),
        (
            'tables = ["exp1", "exp6", "exp7"]',
            'tables = ["exp2"]',
            "exp2, which has no sync-off runs",
        ),
    ],
)
def test_a_bad_analysis_role_is_named(tmp_path, old, new, named):
    with pytest.raises(ValueError, match=named):
        study.parse(edited_study(tmp_path, old, new))


def test_the_roles_have_defaults(tmp_path):
    """No [analysis] table: the first experiment is the headline and the README's tables are its; no [platforms]: no
    platform comparison."""
    text = study.DEFAULT_PATH.read_text()
    text = text.split("# Platform comparisons")[
        0
    ]  # drops [platforms.exp4] and [analysis], the last tables
    path = tmp_path / "study.toml"
    path.write_text(text)
    parsed = study.parse(path)
    assert parsed.headline == next(iter(parsed.experiments)) and parsed.platforms == {}
    assert parsed.tables == (parsed.headline,)


def test_an_experiment_may_list_gymnax_and_expensive_envs(tmp_path):
    path = edited_study(
        tmp_path, 'envs = ["Acrobot-v1"]', 'envs = ["Acrobot-v1", "Craftax-Symbolic-v1"]'
    )
    assert study.parse(path).experiments["exp3"].envs == ("Acrobot-v1", "Craftax-Symbolic-v1")


def test_a_study_without_expensive_or_continuous_envs(tmp_path):
    text = study.DEFAULT_PATH.read_text().split("[experiments.exp5]")[
        0
    ]  # exp5, exp6 and the roles dropped
    path = tmp_path / "study.toml"
    for key in ("expensive_envs", "continuous_envs", "envpool_envs"):
        text = text.replace(f"\n{key} = [", f"\n# {key} = [")
    path.write_text(text)
    parsed = study.parse(path)
    assert parsed.expensive_envs == parsed.continuous_envs == parsed.envpool_envs == ()
    assert parsed.every_env == STUDY.envs and all(
        exp.backends == ("gymnax",) for exp in parsed.experiments.values()
    )


def test_a_new_framework_adds_its_pairs(tmp_path):
    fake = study.parse(fake_study(tmp_path))
    assert list(fake.frameworks)[-1] == "fake"
    assert {pair for pair in fake.pairs if "fake" in pair} == {
        ("fake", fw) for fw in STUDY.frameworks
    }
    assert len(fake.pairs) == len(STUDY.pairs) + len(STUDY.frameworks) and set(STUDY.pairs) < set(
        fake.pairs
    )


def test_the_study_file_can_be_swapped(tmp_path, monkeypatch):
    monkeypatch.setenv(study.PATH_VARIABLE, str(fake_study(tmp_path)))
    assert "fake" in study.load().frameworks


@pytest.mark.slow
def test_a_new_framework_is_parametrised_in_the_script_tests(tmp_path):
    """The script tests take their frameworks and compile modes from the study: a fifth one is collected too."""
    env = {**os.environ, study.PATH_VARIABLE: str(fake_study(tmp_path))}
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/test_scripts.py"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "fake" in proc.stdout
    plain = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "fake" not in plain.stdout


def test_no_file_points_outside_the_repository():
    """Users have README.md and METHODOLOGY.md; no tracked file may send them to the developers' brief."""
    brief = "DESIGN" + ".md"  # spelled in two parts so that this file does not match itself
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    offenders = [
        name
        for name in tracked
        if not name.startswith("results/")
        and (ROOT / name).is_file()
        and brief in (ROOT / name).read_text(errors="ignore")
    ]
    assert offenders == []

"""The sweep's inputs (issue 54): study.toml's names and keys (2), the run arguments
after -- checked before the first run (12), a selection of no runs (15), setup.sh run (17) and a
preset's run arguments against the steady window (21). Each bad input: one line, exit 2, nothing
made."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from setup_copy import make_copy, pip_calls
from sweep_runs import bench

from core import study
from helpers import ROOT, RUN_CHECK_MODULE, STUDY, one_cell


def changed_study(tmp_path, old: str, new: str):
    """study.toml with its first `old` replaced by `new`, written in tmp_path: its path."""
    text = (ROOT / "study.toml").read_text()
    assert old in text
    path = tmp_path / "study.toml"
    path.write_text(text.replace(old, new, 1))
    return path


def mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def refused_in_one_line(proc, *named: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for word in named:
        assert word in proc.stderr


# ------------------------------------------------------------------- 2: the study's names and keys
EXP10_DTYPES = 'dtypes = ["float32", "bfloat16"]'


@pytest.mark.parametrize(
    "old, new, named",
    [
        # a misspelt key, at each level: the table, the key and the valid keys named
        (
            EXP10_DTYPES,
            'dtype = ["float32", "bfloat16"]',
            ["[experiments.exp10]", "'dtype'", "dtypes"],
        ),
        (
            'sizes = ["small", "medium", "large"]',
            'colour = 1\nsizes = ["small", "medium", "large"]',
            ["the top level", "'colour'", "experiments"],
        ),
        (
            'script = "ppo_nnx.py"',
            'script = "ppo_nnx.py"\nscrip = "x.py"',
            ["[frameworks.nnx]", "'scrip'"],
        ),
        (
            "steady = { first = 8,",
            "steady = { frist = 8,",
            ["[windows.steady]", "'frist'", "first"],
        ),
        ('repeats = "exp1"', 'repeats = "exp1"\nrepeat = "exp2"', ["[platforms.exp4]", "'repeat'"]),
        ('headline = "exp1"', 'headlines = "exp1"', ["[analysis]", "'headlines'", "headline"]),
        (
            'title = "CleanRL ppo.py, 500k steps"',
            'titel = "CleanRL ppo.py, 500k steps"',
            ["[experiments.exp9.configs.ppo]", "'titel'", "returns"],
        ),
        ("[platforms.exp4]", "[platform.exp4]", ["the top level", "'platform'", "platforms"]),
        # names that are not plain: a path of a run's folder, or of the script that is run
        (
            "[experiments.exp3]",
            '[experiments."../../escape"]',
            ["'../../escape'", "not a plain name"],
        ),
        (
            'script = "ppo_linen.py"',
            'script = "../../../elsewhere/x.py"',
            ["[frameworks.linen]", "'../../../elsewhere/x.py'"],
        ),
        ('script = "ppo_linen.py"', 'script = "/tmp/ppo_linen.py"', ["top level"]),
        (
            'pieces = ["torch_glue.py"]',
            'pieces = ["../torch_glue.py"]',
            ["[frameworks.torch] pieces"],
        ),
        ("[frameworks.nnx]", '[frameworks."nn x"]', ["'nn x'"]),
        ("[presets.smoke]", '[presets."../smoke"]', ["'../smoke'"]),
        (
            'sizes = ["small", "medium", "large"]',
            'sizes = ["small", "../medium", "large"]',
            ["'../medium'"],
        ),
        (
            '"CartPole-v1", "Acrobot-v1", "MountainCar-v0",\n',
            '"CartPole-v1", "../Acrobot-v1",\n',
            ["'../Acrobot-v1'"],
        ),
        (
            'compile = ["jit", "none"]',
            'compile = ["jit", "no/ne"]',
            ["[frameworks.linen] compile", "'no/ne'"],
        ),
        (
            'compile = "default"',
            'compile = "defualt"',
            ["[experiments.exp1] compile = 'defualt'", "default, all"],
        ),
    ],
)
def test_a_bad_key_or_name_in_the_study_is_named(tmp_path, old, new, named):
    path = changed_study(tmp_path, old, new)
    with pytest.raises(ValueError) as error:
        study.parse(path)
    message = str(error.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    for word in named:
        assert word in message


def test_bench_sh_refuses_a_bad_study_in_one_line_and_makes_nothing(tmp_path):
    """exp10's `dtype =` for `dtypes =` ran 12 runs instead of 24, without a word."""
    path = changed_study(tmp_path, EXP10_DTYPES, 'dtype = ["float32", "bfloat16"]')
    log_dir = tmp_path / "runs"
    for dry in ([], ["--dry-run"]):
        proc = bench(
            *dry,
            "--experiments",
            "exp10",
            "--log-dir",
            str(log_dir),
            env={study.PATH_VARIABLE: str(path)},
        )
        refused_in_one_line(proc, str(path), "'dtype'", "dtypes")
        assert not log_dir.exists()


# ---------------------------------------------------------------------- 15: a selection of no runs
@pytest.mark.parametrize(
    "selection",
    [
        ["--experiments", "exp3", "--envs", "CartPole-v1"],  # exp3 runs Acrobot-v1 alone
        ["--experiments", "exp2", "--sizes", "large"],  # exp2 runs the small model alone
    ],
)
def test_a_selection_of_no_runs_is_refused_and_makes_nothing(tmp_path, selection):
    log_dir = tmp_path / "runs"
    for dry in ([], ["--dry-run"]):
        proc = bench(*dry, *selection, "--log-dir", str(log_dir))
        refused_in_one_line(proc, "selects no runs", " ".join(selection))
        assert not log_dir.exists()


# -------------------------------------------------------------------- 21: a preset's run arguments
@pytest.mark.parametrize("words", [["--num-iterations", "3"], ["--num_iterations=3"]])
def test_a_presets_args_may_not_set_the_iterations_past_the_steady_window_check(tmp_path, words):
    """A preset's iterations must reach the steady window; its args setting --num-iterations would
    escape that."""
    old = 'args = ["--num-envs", "4", "--num-steps", "16",'
    path = changed_study(
        tmp_path,
        old,
        f'args = [{", ".join(map(repr, words))}, "--num-envs", "4", "--num-steps", "16",',
    )
    with pytest.raises(ValueError, match=f"{words[0]!r}.*iterations = N"):
        study.parse(path)
    proc = bench(
        "--smoke",
        "--dry-run",
        "--log-dir",
        str(tmp_path / "runs"),
        env={study.PATH_VARIABLE: str(path)},
    )
    refused_in_one_line(proc, "[presets.smoke]", words[0])


# -------------------------------------------------------------------------------- 17: setup.sh run
def setup_sh(repo, *args, cwd, python=None):
    """setup.sh of a copy (setup_copy.make_copy: a stub .venv, nothing installed for real), run from
    cwd."""
    env = {**os.environ, "BENCHBACK_TORCH": "cpu"}
    env.pop("PYTHON", None)
    if python is not None:
        env["PYTHON"] = python
    cmd = ["bash", str(repo / "setup.sh"), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=60)


def test_setup_sh_run_runs_in_the_callers_folder(tmp_path):
    repo, caller = make_copy(mkdir(tmp_path / "repo")), mkdir(tmp_path / "caller")
    (caller / "notes.txt").write_text("mine\n")
    proc = setup_sh(repo, "run", "cat", "notes.txt", cwd=caller)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "mine\n"


def test_setup_sh_run_takes_the_venvs_python_in_a_path_with_a_colon(tmp_path):
    """PATH splits at ':': .venv/bin on PATH would name two folders that do not exist, and another
    python ran."""
    repo = make_copy(mkdir(tmp_path / "a:b" / "repo"))
    setup_sh(repo, "run", "python", "-c", "pass", cwd=tmp_path)
    calls = (repo / ".venv" / "calls.log").read_text().splitlines()
    assert "python -c pass" in calls  # the stub .venv/bin/python, not another


@pytest.mark.parametrize(
    "python, named", [("no-such-python-3.11", "is not found"), ("STUB", "3.10")]
)
def test_setup_sh_names_a_bad_python_and_makes_no_venv(tmp_path, python, named):
    repo = make_copy(mkdir(tmp_path / "repo"))
    (repo / ".venv" / "bin" / "python").unlink()  # no venv yet: setup.sh makes one with $PYTHON
    if python == "STUB":
        python = str(tmp_path / "python3.10")
        Path(python).write_text("#!/usr/bin/env bash\necho 3.10\n")
        Path(python).chmod(0o755)
    proc = setup_sh(repo, "run", "true", cwd=tmp_path, python=python)
    refused_in_one_line(proc, f"PYTHON='{python}'", named, "3.11")
    assert not (repo / ".venv" / "bin" / "python").exists() and pip_calls(repo) == []


# ------------------------------------------------------------------ 12: the run arguments after --
@pytest.mark.parametrize(
    "words, named",
    [
        (["--dtyp", "bfloat16"], "--dtyp"),  # misspelt: every run failed after its imports
        (["--num-minibatches", "7"], "--num-minibatches must be a divisor"),  # Args' own check
    ],
)
def test_a_bad_run_argument_after_the_dashes_is_refused_before_the_first_run(
    tmp_path, words, named
):
    log_dir = tmp_path / "runs"
    for dry in (["--dry-run"], []):
        proc = bench(*dry, *one_cell(), "--log-dir", str(log_dir), "--", *words)
        refused_in_one_line(proc, named, "ppo_linen.py")
        assert not log_dir.exists()


def test_the_studys_own_run_arguments_pass_every_scripts_parser():
    """A preset's args, a learning configuration's and an experiment's are not checked at each
    sweep (only those after -- are): they are checked here, by the child that checks those after
    --."""
    argvs = [list(preset.args) for preset in STUDY.presets.values()]
    argvs += [list(config.args) for exp in STUDY.experiments.values() for config in exp.configs]
    argvs += [list(exp.args) for exp in STUDY.experiments.values() if exp.args]
    # and the --num-agents of every experiment's agents (the sweep adds it above 1)
    agents = {n for exp in STUDY.experiments.values() for n in exp.agents if n > 1}
    argvs += [["--num-agents", str(n)] for n in sorted(agents)]
    scripts = {str(ROOT / fw.script): argvs for fw in STUDY.frameworks.values()}
    cmd = [sys.executable, *RUN_CHECK_MODULE, json.dumps(scripts)]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == {"refused": None, "unchecked": []}

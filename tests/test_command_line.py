"""A CleanRL user's command line (core/command_line.py): CleanRL's --env-id and --total-timesteps
taken as CleanRL means them, its flags with no counterpart refused with what to use, an unknown flag
or env id answered with the nearest one; one line and exit code 2 each, before any run folder."""

import subprocess
import sys

import pytest
import tyro

from core import command_line
from helpers import ROOT, only_run_dir, read_json


@pytest.fixture(scope="module")
def linen_args():
    import ppo_linen

    return ppo_linen.Args


@pytest.mark.parametrize(
    "typed,nearest",
    [
        ("--lr", "--learning-rate"),
        ("--num-env", "--num-envs"),
        ("--num-minibatch", "--num-minibatches"),
        ("--gae-lamda", "--gae-lambda"),
        ("--ent_coeff", "--ent-coef"),
    ],
)
def test_an_unknown_flag_names_the_nearest(linen_args, typed, nearest):
    with pytest.raises(
        ValueError, match=rf"^unknown flag {typed.replace('_', '-')}: did you mean "
    ):
        command_line.translate(linen_args, [typed, "1"])
    known = command_line.known_flags(linen_args)
    assert command_line.nearest_flag(typed.replace("_", "-"), known) == nearest


def test_cleanrls_own_flags_say_what_to_use(linen_args):
    for flag, words in [
        ("--capture-video", "evaluate.py RUN_DIR --video"),
        ("--cuda", "--device cuda"),
        ("--target-kl", "no early stop"),
    ]:
        with pytest.raises(ValueError, match=rf"^{flag} is CleanRL's: .*{words}"):
            command_line.translate(linen_args, [flag])


def test_env_id_and_total_timesteps_are_taken_as_cleanrl_means_them(linen_args):
    """Args' own (tyro's alias, a field with its rule in __post_init__): a starter's copy, which
    has no command line but tyro's, takes them as the template does."""
    argv = ["--env-id", "Acrobot-v1", "--num-envs", "4", "--num-steps", "128"]
    # the command line is left as it is
    assert command_line.translate(linen_args, [*argv, "--total-timesteps", "5120"]) == [
        *argv,
        "--total-timesteps",
        "5120",
    ]
    args = tyro.cli(linen_args, args=[*argv, "--total-timesteps", "5120"])
    assert (args.env, args.num_iterations, args.total_timesteps) == ("Acrobot-v1", 10, 5120)
    # the default batch, 32 x 256: whole iterations, rounded down as CleanRL's num_iterations
    assert tyro.cli(linen_args, args=["--total-timesteps=819200"]).num_iterations == 100
    assert tyro.cli(linen_args, args=["--total-timesteps", "50000"]).num_iterations == 6
    # the run's length is the total's, as in CleanRL, whatever --num-iterations says
    both = ["--total-timesteps", "16384", "--num-iterations", "3"]
    assert tyro.cli(linen_args, args=both).num_iterations == 2


def test_a_boolean_given_cleanrls_way_is_taken_as_tyros_flag(linen_args):
    argv = ["--anneal-lr", "False", "--norm-adv=false", "--track", "True", "--seed", "3"]
    translated = command_line.translate(linen_args, argv)
    assert translated == ["--no-anneal-lr", "--no-norm-adv", "--track", "--seed", "3"]
    # tyro's own form is left as it is
    assert command_line.translate(linen_args, ["--no-anneal-lr"]) == ["--no-anneal-lr"]


# Args' rule (the template's own, which its copy keeps): at least one whole iteration
WHOLE = "^--total-timesteps must be at least the batch, 8192"


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--total-timesteps", "100"], f"{WHOLE}, got 100$"),
        (["--total-timesteps", "0"], f"{WHOLE}, got 0$"),
        (["--total-timesteps", "-8192"], f"{WHOLE}, got -8192$"),
        # no batch to divide by: its own rule answers (no ZeroDivisionError)
        (["--total-timesteps", "8192", "--num-envs", "0"], "^--num-envs must be a positive"),
        # tyro's
        (["--total-timesteps", "1e6"], "1e6"),
        (["--total-timesteps"], "total-timesteps"),
    ],
)
def test_a_total_that_cannot_be_run_is_refused(linen_args, argv, message):
    with pytest.raises(ValueError, match=message) as refused:
        command_line.parse_args(linen_args, argv)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("argv", [["--resume", "None"], ["--resume=None"], ["--resume", ""]])
def test_a_resume_of_none_is_refused_not_a_new_run(linen_args, argv):
    """tyro reads --resume None as not given, and Args cannot tell it from the default: an unset
    variable (--resume "$RUN", or None written for it) trained a new run (issue 79 item 4). None is
    refused with the command line, "" by Args; and where the run's flags are read, neither is taken
    for no --resume."""
    import checkpoint
    from core import resuming

    with pytest.raises(ValueError, match=r"^--resume must be a run folder, got '(None)?'$"):
        command_line.parse_args(linen_args, argv)
    with pytest.raises(checkpoint.BadCheckpoint, match="not a run folder"):
        resuming.resumed_argv(["seed"], argv)


def run_script(tmp_path, *argv):
    cmd = [sys.executable, str(ROOT / "ppo_linen.py"), *argv, "--log-dir", str(tmp_path / "runs")]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_cleanrls_documented_command_is_answered_in_one_line(tmp_path):
    # CleanRL's docs: python cleanrl/ppo.py --seed 1 --env-id CartPole-v0 --total-timesteps 50000
    done = run_script(
        tmp_path, "--seed", "1", "--env-id", "CartPole-v0", "--total-timesteps", "50000"
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "did you mean 'CartPole-v1'?" in done.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_cleanrl_command_line_runs(tmp_path):
    argv = ["--env-id", "CartPole-v1", "--total-timesteps", "1024", "--num-envs", "4"]
    done = run_script(tmp_path, *argv, "--num-steps", "128", "--update-epochs", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    config = read_json(only_run_dir(tmp_path / "runs") / "config.json")
    assert config["env"] == "CartPole-v1" and config["num_iterations"] == 2
    # the command as typed
    assert config["command"][1:-2] == [*argv, "--num-steps", "128", "--update-epochs", "1"]


def test_a_mistyped_env_id_names_the_nearest():
    import env_adapters

    for typed, nearest in [("CartPol-v1", "CartPole-v1"), ("Breakout-Minatar", "Breakout-MinAtar")]:
        with pytest.raises(ValueError, match=rf"is unknown \(did you mean '{nearest}'\?\)"):
            env_adapters.make(typed)


def test_a_mistyped_env_id_is_refused_before_jax(tmp_path):
    """--env CartPol-v1 was refused by make_env, after 8-12 s of JAX's imports (issue 84 item 6):
    now by core/env_ids.py's fixed lists in the script's first lines, one line naming the nearest,
    exit 2, JAX never imported, no folder."""
    cmd = [sys.executable, "-X", "importtime", str(ROOT / "ppo_linen.py"), "--env", "CartPol-v1"]
    done = subprocess.run(
        [*cmd, "--log-dir", str(tmp_path / "runs")], cwd=ROOT, capture_output=True, text=True
    )
    errors = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-2000:]
    assert errors[0] == (
        "error: --env 'CartPol-v1' is not a gymnax, Craftax, Brax or Playground env (did you mean "
        "'CartPole-v1'?)"
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert not {"jax", "gymnax", "flax"} & imported
    assert not (tmp_path / "runs").exists()


def test_the_fixed_env_lists_are_the_libraries_and_the_adapters():
    """core/env_ids.py's lists, which the command line checks without importing gymnax, are
    gymnax's registered ids (a gymnax update that adds one shows here) and env_adapters' ids; an
    envpool id without its backend is told so."""
    import gymnax

    import env_adapters
    from core import env_ids

    assert list(env_ids.GYMNAX_ENVS) == list(gymnax.registered_envs)
    assert env_ids.unknown("brax-ant", "gymnax") is None
    assert all(env_ids.unknown(env, "gymnax") is None for env in env_adapters.adapted_envs())
    assert "add --env-backend envpool" in env_ids.unknown("Hopper-v4", "gymnax")
    assert (
        env_ids.unknown("Hoper-v4", "envpool")
        == "is not an envpool env (did you mean 'Hopper-v4'?)"
    )


def test_an_env_that_downloads_its_data_is_refused_by_the_fixed_lists(monkeypatch):
    """MNISTBandit-bsuite (gymnax downloads MNIST when it makes it) passed the fixed lists and was
    refused by make_env, after JAX's imports and a download tried: now the lists refuse it (the
    scripts' first lines say so, tests/test_scripts.py), naming every id the scripts train, and
    env_adapters never makes it to find out."""
    import gymnax

    import env_adapters
    from core import env_ids

    why = env_ids.unknown("MNISTBandit-bsuite", "gymnax")
    assert why is not None and why.startswith("cannot be made without downloading MNIST")
    trained = why.split("; the scripts train ")[1].split(", ")
    assert "MNISTBandit-bsuite" not in trained
    assert {"CartPole-v1", "SimpleBandit-bsuite", "brax-ant", "playground-CheetahRun"} <= {*trained}
    assert env_ids.unknown("MNISTBandit-bsuite", "envpool").startswith("is not an envpool env")
    monkeypatch.setattr(gymnax, "make", lambda *args, **kwargs: pytest.fail("gymnax.make called"))
    assert env_adapters.gymnax_problem("MNISTBandit-bsuite") == why.split(";")[0]


def test_evaluate_answers_help_before_the_heavy_imports():
    cmd = [sys.executable, "-X", "importtime", str(ROOT / "evaluate.py"), "--help"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "evaluate.py [-h]" in done.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "tyro" in imported and not {"jax", "torch", "flax", "gymnax"} & imported

"""The learning experiment in the sweep: each run gets its reference configuration's flags
(study.toml), and bench.sh refuses --iterations and the flags after -- that would change them."""

import pytest
from sweep_runs import bench, planned

from helpers import STUDY, one_cell


def test_a_learning_run_gets_its_configurations_flags(tmp_path):
    exp9 = STUDY.experiments["exp9"]
    for env in ("CartPole-v1", "Hopper-v4@envpool"):
        (command,) = planned(tmp_path / "runs", "exp9", env)
        args = list(exp9.env_args(env))
        start = command.index(args[0])
        assert command[start : start + len(args)] == args, command
        assert ("--env-backend" in command) == env.endswith("@envpool")


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--iterations", "10"], "--iterations 10"),
        (["--", "--num-envs", "6"], "--num-envs"),
        (["--", "--num_steps=16"], "--num-steps"),
        (["--", "--no-anneal-lr"], "--anneal-lr"),
    ],
)
def test_a_learning_experiment_refuses_what_would_change_its_configuration(tmp_path, args, flag):
    """Issue 54, item 7: --iterations, or a run argument that changes what a run learns, would make
    runs that are not the configuration's (which the analysis does not count): refused in one line,
    exit 2, nothing made."""
    log_dir = tmp_path / "runs"
    proc = bench("--dry-run", "--log-dir", str(log_dir), *one_cell("exp9", "CartPole-v1"), *args)
    errors = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr
    assert flag in errors[0] and "exp9" in errors[0] and "learning experiment" in errors[0]
    assert not log_dir.exists()


def test_a_learning_experiment_takes_run_arguments_that_leave_its_learning_as_it_is(tmp_path):
    (command,) = planned(tmp_path / "runs", "exp9", "CartPole-v1", "--", "--track")
    assert command[-1] == "--track"


def test_other_experiments_get_no_configuration(tmp_path):
    (command,) = planned(tmp_path / "runs", "exp1", "CartPole-v1")
    assert "--num-envs" not in command and "--learning-rate" not in command

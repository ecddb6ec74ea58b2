"""The learning experiment in the sweep: each run gets its reference configuration's flags (study.toml), and
bench.sh's --iterations and the flags after -- still come after them, so that they win."""

from test_bench import planned

from helpers import STUDY


def test_a_learning_run_gets_its_configurations_flags(tmp_path):
    exp9 = STUDY.experiments["exp9"]
    for env in ("CartPole-v1", "Hopper-v4@envpool"):
        (command,) = planned(tmp_path / "runs", "exp9", env)
        args = list(exp9.env_args(env))
        start = command.index(args[0])
        assert command[start : start + len(args)] == args, command
        assert ("--env-backend" in command) == env.endswith("@envpool")


def test_iterations_and_flags_after_dashdash_come_after_the_configuration(tmp_path):
    (command,) = planned(
        tmp_path / "runs", "exp9", "CartPole-v1", "--iterations", "2", "--", "--num-envs", "8"
    )
    iterations = [i for i, word in enumerate(command) if word == "--num-iterations"]
    # the script's parser keeps the last
    assert [command[i + 1] for i in iterations] == ["976", "2"]
    envs = [i for i, word in enumerate(command) if word == "--num-envs"]
    assert [command[i + 1] for i in envs] == ["4", "8"]


def test_other_experiments_get_no_configuration(tmp_path):
    (command,) = planned(tmp_path / "runs", "exp1", "CartPole-v1")
    assert "--num-envs" not in command and "--learning-rate" not in command

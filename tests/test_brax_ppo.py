"""benchmarks/brax_ppo.py, Brax's PPO on a Playground env beside our runs: its refusals, its JAX
shim, the call it makes to Brax's train (a stand-in for it: the real one compiles for minutes on a
CPU), and ours read beside it from a run of the suite's."""

import json
import os
import signal

import jax
import pytest
from trained_runs import saved

from benchmarks import brax_ppo

pytest.importorskip("mujoco_playground", reason="MuJoCo Playground is not installed")


@pytest.mark.parametrize(
    "args, said",
    [
        (["--env", "CartPole-v1"], "--env 'CartPole-v1': not a DM Control env of Playground ("),
        (["--env", "CheetahRun", "--num-timesteps", "0"], "--num-timesteps 0: give 1 or more"),
        (["--env", "CheetahRun", "--num-evals", "-2"], "--num-evals -2: give 1 or more"),
        (["--env", "CheetahRun", "--ours", "/no/run"], "--ours /no/run: no config.json in it"),
        (["--num-envs", "4"], "the following arguments are required: --env"),
    ],
)
def test_bad_input_is_refused_in_one_line_before_anything_is_made(tmp_path, capsys, args, said):
    out = tmp_path / "out" / "brax.json"
    assert brax_ppo.main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and said in err and len(err.strip().splitlines()) == 1
    assert not out.parent.exists()


def test_a_run_on_another_env_is_refused_as_ours(trained_run, tmp_path, capsys):
    run = trained_run("linen", *saved("linen"))
    argv = ["--env", "playground-CheetahRun", "--ours", str(run), "--out", str(tmp_path / "o.json")]
    assert brax_ppo.main(argv) == 2
    assert "a run on 'CartPole-v1', not on playground-CheetahRun" in capsys.readouterr().err


def test_the_shim_puts_jaxs_own_device_put_replicated_back(monkeypatch):
    from jax._src import api

    monkeypatch.delattr(jax, "device_put_replicated", raising=False)
    brax_ppo.restore_device_put_replicated()
    assert jax.device_put_replicated is api.device_put_replicated
    stacked = jax.device_put_replicated(jax.numpy.arange(3), jax.local_devices())
    assert stacked.shape == (len(jax.local_devices()), 3)


def test_brax_trains_with_playgrounds_config_and_each_evaluation_is_saved(monkeypatch, tmp_path):
    """Brax's train gets the published configuration with the overrides, the env loaded for MJX
    in pure JAX and Playground's wrapper; each evaluation is recorded and saved at once."""
    from brax.training.agents.ppo import train as ppo
    from mujoco_playground import wrapper

    called = {}

    def stand_in(environment, eval_env, wrap_env_fn, progress_fn, seed, **config):
        called.update(config, seed=seed, wrap=wrap_env_fn, impl=environment._config.impl)
        for step, reward in ((0, 10.0), (640, 30.0)):
            progress_fn(step, {"eval/episode_reward": reward, "eval/episode_reward_std": 1.0})

    monkeypatch.setattr(ppo, "train", stand_in)
    out = tmp_path / "brax.json"
    argv = ["--env", "CartpoleBalance", "--num-timesteps", "640", "--seed", "3", "--out", str(out)]
    assert brax_ppo.main(argv) == 0
    published = brax_ppo.published_config("CartpoleBalance")
    assert called == {**published, "num_timesteps": 640, "seed": 3, "wrap": called["wrap"]} | {
        "impl": "jax"
    }
    assert called["wrap"] is wrapper.wrap_for_brax_training
    record = json.loads(out.read_text())
    assert record["status"] == "finished" and record["overrides"] == {"num_timesteps": 640}
    assert [(e["env_steps"], e["return"]) for e in record["evals"]] == [(0, 10.0), (640, 30.0)]
    assert record["evals"][0]["elapsed_s"] <= record["evals"][1]["elapsed_s"]
    assert record["shim"] == brax_ppo.SHIM
    assert "| 640 | 30.0 ± 1.0 |" in out.with_suffix(".md").read_text()


def test_a_stop_signal_ends_the_run_at_an_evaluation_with_what_it_measured(monkeypatch, tmp_path):
    from brax.training.agents.ppo import train as ppo

    def stand_in(environment, eval_env, wrap_env_fn, progress_fn, seed, **config):
        progress_fn(0, {"eval/episode_reward": 10.0, "eval/episode_reward_std": 1.0})
        os.kill(os.getpid(), signal.SIGTERM)
        progress_fn(64, {"eval/episode_reward": 20.0, "eval/episode_reward_std": 1.0})
        raise AssertionError("trained on after the stop's evaluation")

    monkeypatch.setattr(ppo, "train", stand_in)
    out = tmp_path / "brax.json"
    with pytest.raises(SystemExit) as stopped:
        brax_ppo.main(["--env", "CartpoleBalance", "--out", str(out)])
    assert stopped.value.code == 130
    record = json.loads(out.read_text())
    assert record["status"] == "interrupted" and len(record["evals"]) == 2


def test_ours_is_read_at_brax_s_last_return_and_env_steps(trained_run):
    """A run of ours beside Brax's: time/elapsed at the first iteration whose training return
    reaches the target, and the return at the first iteration at or after Brax's env steps."""
    from core import runlog

    run_dir = trained_run("linen", *saved("linen"))
    scalars = runlog.read_run(run_dir).scalars
    ended = scalars[scalars["charts/episodic_return"].notna()]
    first = ended.iloc[0]
    target = float(first["charts/episodic_return"])
    row = brax_ppo.our_row(str(run_dir), target, int(first["step"]))
    assert row["framework"] == "linen" and row["reached_steps"] <= int(first["step"])
    reached = scalars[scalars["step"] == row["reached_steps"]].iloc[0]
    assert row["reached_s"] == pytest.approx(float(reached["time/elapsed"]))
    assert row["return_at_brax_steps"] == pytest.approx(target)
    never = brax_ppo.our_row(str(run_dir), float(ended["charts/episodic_return"].max()) + 1, None)
    assert never["reached_s"] is None and "return_at_brax_steps" not in never

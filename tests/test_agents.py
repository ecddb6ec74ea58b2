"""--num-agents N (issue 57): N independent agents in one process. Agent k of an N-agent run starts
as the single-agent run of seed + k, bit for bit (its initial parameters, from the same keys or
generators), then trains as it does within float rounding: the same losses and returns, iteration
by iteration, and the same policy at the end. Not bit for bit over a whole run: vmapped over the
agents (batched in torch), the network's products round otherwise than one agent's, and over
dozens of iterations the runs drift apart as two runs of one seed on two machines would; the
tolerance is float32 rounding over a few optimizer steps. The clip norm is kept small (every step
is clipped), so that one norm shared by the agents would show."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
from script_runs import FAST_COMPILE

from helpers import ROOT, STUDY, only_run_dir, read_json, scalar_series

FRAMEWORKS = [name for name in STUDY.frameworks if name in ("linen", "nnx", "equinox", "torch")]
RUN = ["--num-envs", "4", "--num-steps", "32", "--num-iterations", "3", "--update-epochs", "2"]
RUN += ["--num-minibatches", "2", "--max-grad-norm", "0.05", "--save-model"]
ENVS = {
    "discrete": ["--env", "CartPole-v1"],
    # 3 x 80 steps: the first 200-step episodes end
    "continuous, normalised": ["--env", "Pendulum-v1", "--norm-obs", "--norm-reward"]
    + ["--num-steps", "80"],
    # one pool of every agent's envs; each agent's statistics its own
    "envpool, continuous, normalised": ["--env", "Pendulum-v1", "--env-backend", "envpool"]
    + ["--norm-obs", "--norm-reward", "--num-steps", "80"],
}
AGENTS = 3
TAGS = ("charts/episodic_return", "losses/policy_loss", "losses/value_loss", "losses/approx_kl")
RTOL, ATOL = 1e-4, 1e-5


def train(script: Path, log_dir: Path, *args: str) -> Path:
    cmd = [sys.executable, str(script), *RUN, *args, "--log-dir", str(log_dir)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return only_run_dir(log_dir)


def script_of(framework: str) -> Path:
    return ROOT / STUDY.frameworks[framework].script


def assert_same_agent(single: Path, many: Path, k: int) -> None:
    """The single-agent run's scalars and policy against agent k's of a many-agent run (its
    agent_k/ tags in the run's events, its agent_k/ folder's model file)."""
    agent = many / f"agent_{k}"
    for tag in TAGS:
        ours, theirs = scalar_series(many, f"agent_{k}/{tag}"), scalar_series(single, tag)
        assert [step for step, _ in ours] == [step for step, _ in theirs], tag
        values = np.array([value for _, value in ours])
        np.testing.assert_allclose(values, [v for _, v in theirs], RTOL, ATOL, err_msg=tag)
    theirs = safetensors.numpy.load_file(str(single / "model.safetensors"))
    ours = safetensors.numpy.load_file(str(agent / "model.safetensors"))
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_allclose(ours[name], theirs[name], RTOL, ATOL, err_msg=name)


# Each framework's continuous, normalised runs (gymnax, envpool): their agents' state a superset of
# a discrete run's (the Gaussian's log std, each agent's normalisation statistics), in the same
# compile mode for the JAX scripts. The discrete runs stay for torch alone, whose default compile
# mode (torch.compile's step) is not the fast one.
AGENT_CASES = [(framework, env) for env in ENVS if env != "discrete" for framework in FRAMEWORKS]
AGENT_CASES += [("torch", "discrete")]


@pytest.mark.slow
@pytest.mark.parametrize("framework, env", AGENT_CASES, ids=[f"{f}-{e}" for f, e in AGENT_CASES])
def test_agent_k_of_a_run_is_the_single_agent_run_of_seed_plus_k(framework, env, trained_run):
    # the discrete run in the default compile mode (torch.compile's step of every agent, which the
    # clipping mutation below is caught in); the others in the fastest (torch.compile: ~1 min)
    flags = (
        [*ENVS[env]] if env == "discrete" else [*ENVS[env], "--compile", FAST_COMPILE[framework]]
    )
    many = trained_run(framework, *RUN, *flags, "--num-agents", str(AGENTS))
    last = AGENTS - 1
    single = trained_run(framework, *RUN, *flags, "--seed", str(1 + last))
    assert_same_agent(single, many, last)
    config, summary = read_json(many / "config.json"), read_json(many / "summary.json")
    assert config["num_agents"] == AGENTS
    assert len(summary["final_returns"]) == AGENTS
    assert summary["final_returns"][last] == pytest.approx(
        read_json(single / "summary.json")["final_return"], RTOL, ATOL
    )
    # the agents differ: each has its own seed
    first = scalar_series(many, "agent_0/losses/policy_loss")
    assert first != scalar_series(many, f"agent_{last}/losses/policy_loss")
    # the run's own events: the agents' mean, and every agent's steps per second
    mean = np.mean([summary["final_returns"]])
    assert summary["final_return"] == pytest.approx(mean)


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_agent_k_starts_bit_for_bit_as_the_single_agent_run_of_seed_plus_k(framework, tmp_path):
    # one iteration whose steps (1e-30 of the rate) are far below float32's resolution of a weight:
    # the saved kernels are the initial ones; the biases, zero at the start, move by ~1e-30
    frozen = ["--env", "CartPole-v1", "--num-envs", "4", "--num-steps", "16"]
    frozen += ["--num-iterations", "1", "--update-epochs", "1", "--num-minibatches", "1"]
    frozen += ["--learning-rate", "1e-30", "--no-anneal-lr", "--save-model"]
    # each agent's init is the point, not the compile: the fastest mode
    frozen += ["--compile", FAST_COMPILE[framework]]
    script = script_of(framework)
    many = run_folder(script, tmp_path / "many", *frozen, "--num-agents", str(AGENTS))
    last = AGENTS - 1
    single = run_folder(script, tmp_path / "single", *frozen, "--seed", str(1 + last))
    ours = safetensors.numpy.load_file(str(many / f"agent_{last}" / "model.safetensors"))
    theirs = safetensors.numpy.load_file(str(single / "model.safetensors"))
    first = safetensors.numpy.load_file(str(many / "agent_0" / "model.safetensors"))
    assert ours.keys() == theirs.keys()
    for name in ours:
        if name.endswith("kernel"):
            np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
            # each agent its own: agent 0's differ
            assert not np.array_equal(first[name], ours[name]), name
        else:
            np.testing.assert_allclose(ours[name], theirs[name], rtol=0, atol=1e-25, err_msg=name)


def run_folder(script: Path, log_dir: Path, *args: str) -> Path:
    """The run folder of script run with args alone (not RUN's)."""
    cmd = [sys.executable, str(script), *args, "--log-dir", str(log_dir)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return only_run_dir(log_dir)


@pytest.mark.slow
def test_torch_clipping_by_one_norm_across_agents_fails_the_parity_check(
    tmp_path, monkeypatch, trained_run
):
    """The mutation that the parity check must catch in torch, whose agents share one set of stacked
    parameters: one global norm over every agent's gradients (torch_glue.clip_each_agent's norm
    taken over all agents) couples them, so agent k is no longer the single-agent run of seed + k.
    The mutated copy runs from a folder of its own, the repository's other modules on the path."""
    source = (ROOT / "torch_glue.py").read_text()
    per_agent = "]).norm(dim=0)"  # each agent's norm of its parameters' norms
    assert source.count(per_agent) == 1
    (tmp_path / "torch_glue.py").write_text(source.replace(per_agent, "]).norm()"))
    script = tmp_path / "ppo_torch.py"
    script.write_text((ROOT / "ppo_torch.py").read_text())
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    many = train(script, tmp_path / "many", *ENVS["discrete"], "--num-agents", str(AGENTS))
    last = AGENTS - 1
    # the single-agent run test_agent_k_of_a_run_is_the_single_agent_run_of_seed_plus_k reads too
    single = trained_run("torch", *RUN, *ENVS["discrete"], "--seed", str(1 + last))
    with pytest.raises(AssertionError):
        assert_same_agent(single, many, last)


@pytest.mark.slow
def test_a_stopped_and_resumed_torch_run_of_agents_ends_as_an_uninterrupted_one(tmp_path):
    """torch's resume file holds every agent's parameters, Adam moments and generator (each agent's
    own: torch_glue.arrays): a 3-agent run stopped after a save and resumed ends bit for bit as the
    uninterrupted run, each agent's model file included."""
    from script_runs import RUN as RESUME_RUN
    from script_runs import arrays, run, stopped_after_first_save

    import checkpoint
    from core import resuming

    pendulum = ["--env", "Pendulum-v1", "--norm-obs", "--norm-reward"]
    # eager (env-jit): torch.compile's step resumed is test_resume.py's (discrete runs)
    args = [*RESUME_RUN, *pendulum, "--num-agents", str(AGENTS), "--compile", "env-jit"]
    whole = run("torch", *args, log_dir=tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr[-3000:]
    run_dir = stopped_after_first_save("torch", args, tmp_path / "stopped")
    resumed = run("torch", *args, "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    names = [resuming.RESUME_FILE] + [f"agent_{k}/{checkpoint.FILENAME}" for k in range(AGENTS)]
    for name in names:
        want, got = arrays(only_run_dir(tmp_path / "whole"), name), arrays(run_dir, name)
        assert want.keys() == got.keys() and want.keys()
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=f"{name} {key}")

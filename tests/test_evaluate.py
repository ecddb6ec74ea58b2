"""evaluate.py and a policy across frameworks (issue 55 items 2 and 3): a tiny run of every script
with --norm-obs
--save-model, on a discrete env (CartPole-v1) and a continuous one (Pendulum-v1), then each
checkpoint loaded by each of the four frameworks (a 4 x 4 matrix per env): the same actions on the
same observations, and the same episode returns under evaluate.py with the same seed; the command
line, eval.json, and bad input."""

import json

import numpy as np
import pytest
from script_runs import FRAMEWORKS, assert_one_line_refusal, run_evaluate
from trained_runs import saved

import checkpoint
import evaluate
from evaluation import model_file, policy

ENVS = ("CartPole-v1", "Pendulum-v1")
# The float32 tolerance of the actor's outputs, one checkpoint in two frameworks. The networks
# compute the same function with the same float32 parameters; only the order of the sums differs
# (XLA's dot products and PyTorch's, each blocked its own way) and each library's tanh (an ulp or
# two). A dot product of n terms then differs by about sqrt(n) ulps of the terms' magnitudes: for
# the small model (64 hidden units) ~1e-6 of the largest activation, which tanh keeps at most 1.
# 1e-5 relative (and 1e-6 absolute for outputs near 0) is ten times that; measured: ~2e-7 of the
# largest output (torch against the JAX three; the test prints it).
RTOL, ATOL = 1e-5, 1e-6
# Discrete actions: the argmax of logits that agree to that tolerance is the same action wherever
# the top two logits stand apart by more than twice it. Closer than that, float32 cannot say which
# is larger: such observations are left out, and the test checks that they are at most 1 % (none, in
# practice), so equal actions are a test of the outputs, not luck. Continuous actions (the
# Gaussian's mean, clipped) agree to the tolerance. Episode returns: equal actions give equal
# episodes (the same env and seed), so a discrete policy's returns are identical in the four
# frameworks; a continuous policy's actions differ by ~1e-7, which Pendulum carries over 200 steps
# into its returns' last float32 digits (measured: ~1e-7 relative).
RETURN_RTOL = 1e-5
EPISODES = 4


@pytest.fixture(scope="module")
def checkpoints(trained_run) -> dict:
    """{(framework, env): run folder} of tiny --norm-obs --save-model runs, trained once for the
    suite (trained_runs.saved)."""
    return {
        (framework, env_id): trained_run(framework, *saved(framework, env_id))
        for env_id in ENVS
        for framework in FRAMEWORKS
    }


def observations(ckpt, n: int = 1000) -> np.ndarray:
    """n raw observations around the checkpoint's normalisation statistics, out to several std (some
    clipped at +-10 once normalised), the same for every framework."""
    rng = np.random.default_rng(0)
    mean, var = ckpt.obs_norm["mean"], ckpt.obs_norm["var"]
    return (mean + 4 * np.sqrt(var) * rng.standard_normal((n, len(mean)))).astype(np.float32)


def tolerance(reference: np.ndarray) -> float:
    return ATOL + RTOL * float(np.abs(reference).max())


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ENVS)
def test_same_actions_in_every_framework(checkpoints, env_id):
    """The 4 x 4 matrix of one env: the checkpoint of each framework, loaded by each of the four,
    gives the same actor outputs (to RTOL and ATOL) and the same actions on the same 1,000
    observations."""
    worst = 0.0
    for trained_by in FRAMEWORKS:
        ckpt = model_file.load(checkpoints[trained_by, env_id])
        obs = policy.normaliser(ckpt)(observations(ckpt))
        outputs = {framework: policy.load_actor(ckpt, framework)(obs) for framework in FRAMEWORKS}
        own = outputs[trained_by]
        log_std = ckpt.params.get("log_std")
        bounds = (np.float32(-2), np.float32(2))  # Pendulum's; unused for discrete actions
        actions = policy.choose(own, log_std, bounds, rng=None)
        decided = np.ones(len(obs), bool)
        if log_std is None:
            top_two = np.sort(own, axis=-1)[:, -2:]
            decided = top_two[:, 1] - top_two[:, 0] > 2 * tolerance(own)
            assert decided.mean() >= 0.99, f"{trained_by}: {(~decided).sum()} near ties"
        for framework, out in outputs.items():
            where = f"{trained_by}'s {env_id} policy in {framework}"
            assert out.shape == own.shape and out.dtype == np.float32, where
            np.testing.assert_allclose(out, own, rtol=RTOL, atol=ATOL, err_msg=where)
            worst = max(worst, float(np.abs(out - own).max() / np.abs(own).max()))
            theirs = policy.choose(out, log_std, bounds, rng=None)
            if log_std is None:
                np.testing.assert_array_equal(theirs[decided], actions[decided], err_msg=where)
            else:
                np.testing.assert_allclose(theirs, actions, rtol=RTOL, atol=ATOL, err_msg=where)
    print(
        f"{env_id}: the largest difference of two frameworks' outputs: {worst:.1e} of the largest "
        "output"
    )


def evaluated(ckpt, framework: str, seed: int = 1, stochastic: bool = False) -> dict:
    """evaluate.py's result, in this process: what its command line runs between its checks and
    eval.json."""
    setup = evaluate.prepare(ckpt, framework, EPISODES, seed, stochastic)
    return evaluate.evaluate(setup, seed).result


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ENVS)
def test_same_returns_in_every_framework(checkpoints, env_id):
    """The 4 x 4 matrix of one env under evaluate.py with one seed: every framework's episodes of a
    checkpoint end as its own framework's do (the same lengths; the same returns, to RETURN_RTOL for
    a continuous policy); each runs to its end; another seed gives other episodes, and the same seed
    the same ones again."""
    for trained_by in FRAMEWORKS:
        ckpt = model_file.load(checkpoints[trained_by, env_id])
        own = evaluated(ckpt, trained_by)
        assert own["episodes"] == len(own["returns"]) == len(own["lengths"]) == EPISODES
        # Pendulum's time limit ends every episode; a CartPole pole falls (terminated) or stands to
        # 500
        assert all(
            1 <= length <= (200 if env_id == "Pendulum-v1" else 500) for length in own["lengths"]
        )
        if env_id == "Pendulum-v1":
            assert own["lengths"] == [200] * EPISODES
        assert own["mean_return"] == pytest.approx(np.mean(own["returns"]))
        assert own["std_return"] == pytest.approx(np.std(own["returns"]))
        for framework in FRAMEWORKS:
            result = evaluated(ckpt, framework)
            where = f"{trained_by}'s {env_id} policy in {framework}"
            assert result["framework"] == framework and result["trained_by"] == trained_by, where
            assert result["lengths"] == own["lengths"], where
            if env_id == "CartPole-v1":
                assert result["returns"] == own["returns"], where
            else:
                np.testing.assert_allclose(result["returns"], own["returns"], rtol=RETURN_RTOL)
        assert evaluated(ckpt, trained_by)["returns"] == own["returns"]
        assert evaluated(ckpt, trained_by, seed=2)["returns"] != own["returns"]


@pytest.mark.slow
def test_stochastic_is_seeded(checkpoints):
    """--stochastic samples the actions: the same seed gives the same episodes, and they differ from
    the deterministic policy's."""
    ckpt = model_file.load(checkpoints["nnx", "Pendulum-v1"])
    first, again = (evaluated(ckpt, "nnx", stochastic=True) for _ in range(2))
    assert first["mode"] == "stochastic" and first["returns"] == again["returns"]
    assert first["returns"] != evaluated(ckpt, "nnx")["returns"]


@pytest.mark.slow
def test_command_line_writes_eval_json(trained_run, tmp_path):
    """`python evaluate.py RUN_DIR`: the framework that trained it by default, the mean ± std
    printed, eval.json beside the checkpoint; another framework's evaluation (the checkpoint file
    given) is added to it, the first kept."""
    run_dir = trained_run("linen", *saved("linen"), copy_to=tmp_path)
    proc = run_evaluate(str(run_dir), "--episodes", "3", "--seed", "5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (
        "in linen: return" in proc.stdout
        and "±" in proc.stdout
        and "over 3 episodes" in proc.stdout
    )
    record = json.loads((run_dir / "eval.json").read_text())
    assert record["written_by"] == "evaluate.py"
    [first] = record["evaluations"]
    assert (first["framework"], first["episodes"], first["seed"]) == ("linen", 3, 5)
    proc = run_evaluate(
        str(run_dir / "model.safetensors"), "--episodes", "3", "--seed", "5", "--framework", "torch"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((run_dir / "eval.json").read_text())
    assert [entry["framework"] for entry in record["evaluations"]] == ["linen", "torch"]
    assert record["evaluations"][0] == first
    assert record["evaluations"][1]["returns"] == first["returns"]


def test_eval_json_keeps_other_evaluations(tmp_path):
    """An evaluation replaces only the entry of its own framework, mode, episodes and seed."""
    path = tmp_path / "eval.json"
    entry = {
        "framework": "nnx",
        "mode": "deterministic",
        "episodes": 10,
        "seed": 1,
        "mean_return": 1.0,
    }
    other = {**entry, "framework": "torch"}
    path.write_text(json.dumps(evaluate.merged_record(path, entry)))
    path.write_text(json.dumps(evaluate.merged_record(path, other)))
    record = evaluate.merged_record(path, {**entry, "mean_return": 2.0})
    assert record["evaluations"] == [other, {**entry, "mean_return": 2.0}]


def test_choose():
    """The deterministic actions: the argmax; the Gaussian's mean clipped to the bounds, as training
    clips."""
    logits = np.array([[0.1, 0.3, 0.2], [2.0, -1.0, 0.0]], np.float32)
    np.testing.assert_array_equal(policy.choose(logits, None, None, None), [1, 0])
    mean = np.array([[-3.0], [0.5]], np.float32)
    bounds = (np.array([-2.0], np.float32), np.array([2.0], np.float32))
    np.testing.assert_array_equal(policy.choose(mean, np.zeros(1), bounds, None), [[-2.0], [0.5]])
    rng = np.random.default_rng(0)
    samples = policy.choose(np.repeat(logits[:1], 4000, 0), None, None, rng)
    # Gumbel-max samples the softmax: about 30 %, 37 %, 33 %
    np.testing.assert_allclose(
        np.bincount(samples) / 4000, np.exp(logits[0]) / np.exp(logits[0]).sum(), atol=0.03
    )


# ---------------------------------------------------------------------------------------- bad input
def assert_refused(proc, words, folder=None, before=None):
    """One line, exit code 2, and (folder given) nothing written in it."""
    assert_one_line_refusal(proc, words)
    if folder is not None:
        assert sorted(p.name for p in folder.iterdir()) == before


def test_missing_path_is_refused(tmp_path):
    missing = tmp_path / "no-such-run"
    assert_refused(run_evaluate(str(missing)), [str(missing)])
    assert not missing.exists()


def test_framework_not_in_the_list_is_refused(tmp_path):
    proc = run_evaluate(str(tmp_path), "--framework", "jax")
    assert_refused(proc, ["'jax'", "--framework", *FRAMEWORKS], tmp_path, [])
    # the choices a user can give: None was one of them (issue 79 item 4)
    assert "None" not in proc.stderr and "'trained'" in proc.stderr


def test_bad_episodes_is_refused(tmp_path):
    proc = run_evaluate(str(tmp_path), "--episodes", "0")
    assert_refused(proc, ["--episodes", "from 1 to"], tmp_path, [])


def test_bad_checkpoint_is_refused(tmp_path):
    """A model.safetensors that is no safetensors file: one line naming it, exit 2, no eval.json."""
    (tmp_path / "model.safetensors").write_bytes(b"not a checkpoint")
    proc = run_evaluate(str(tmp_path))
    assert_refused(proc, ["model.safetensors"], tmp_path, ["model.safetensors"])


@pytest.fixture
def untrained_checkpoint(tmp_path):
    """A run folder with the checkpoint of an untrained nnx CartPole-v1 agent, as --save-model
    writes one."""
    from flax import nnx

    import ppo_nnx

    agent = ppo_nnx.Agent(4, (64, 64), 2, False, nnx.Rngs(0))
    meta = dict(framework="nnx", env="CartPole-v1", env_backend="gymnax", model_size="small")
    meta |= dict(
        obs_shape=[4], action_kind="discrete", num_actions=2, dtype="float32", norm_obs=False
    )
    meta |= dict(iteration=1, final_return=None, commit="unknown", command=["ppo_nnx.py"], seed=1)
    checkpoint.save(
        tmp_path / "model.safetensors",
        checkpoint.shared(*ppo_nnx.to_shared(agent)),
        None,
        meta,
    )
    return tmp_path


def test_eval_json_not_ours_is_refused(untrained_checkpoint):
    """An eval.json that evaluate.py did not write is left as it is: one line naming it, exit 2."""
    (untrained_checkpoint / "eval.json").write_text('{"mine": 1}')
    proc = run_evaluate(str(untrained_checkpoint), "--episodes", "1")
    assert_refused(proc, ["eval.json"], untrained_checkpoint, ["eval.json", "model.safetensors"])
    assert (untrained_checkpoint / "eval.json").read_text() == '{"mine": 1}'

"""model.safetensors (checkpoint.py, --save-model): one format that the four frameworks write and
read (issue 55 items 1 and 8). A checkpoint written and read back keeps every tensor and the
metadata; each framework's to_shared and from_shared are inverses; tensors loaded into any
framework's network give the same actions and values; a script's --save-model run leaves a
checkpoint of its last finished iteration however it ends; and every bad checkpoint is refused in
one line that names what is wrong."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
from checkpoints import stats_count
from script_runs import FAST_COMPILE, script_module, start, stripped_copy, wait_for
from trained_runs import saved

import checkpoint
from checkpoint import BadCheckpoint
from evaluation import model_file, policy
from helpers import ROOT, STUDY, TINY, only_run_dir, read_json

# A small continuous checkpoint: 3 observations, 2 actions, with --norm-obs
OBS_DIM, NUM_ACTIONS, HIDDEN = 3, 2, model_file.MODEL_SIZES["small"]


def shared_tensors(
    obs_dim=OBS_DIM, hidden=HIDDEN, num_actions=NUM_ACTIONS, continuous=True, seed=0
):
    """Random float32 tensors under the shared names, biases and log std non-zero."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for mlp, out_dim in (("actor", num_actions), ("critic", 1)):
        sizes = (obs_dim, *hidden, out_dim)
        for i, (size_in, size_out) in enumerate(zip(sizes, sizes[1:])):
            kernel = rng.normal(0, 1 / np.sqrt(size_in), (size_in, size_out))
            tensors[f"{mlp}.{i}.kernel"] = kernel.astype(np.float32)
            tensors[f"{mlp}.{i}.bias"] = rng.normal(0, 0.1, size_out).astype(np.float32)
    if continuous:
        tensors["log_std"] = rng.normal(0, 0.5, num_actions).astype(np.float32)
    return tensors


def obs_stats(obs_dim=OBS_DIM, seed=1) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "mean": rng.normal(size=obs_dim).astype(np.float32),
        "var": rng.uniform(0.5, 2, obs_dim).astype(np.float32),
        "count": np.array(1234.0, np.float32),
    }


def metadata(**changes) -> dict:
    meta = {
        "framework": "nnx",
        "env": "Pendulum-v1",
        "env_backend": "gymnax",
        "model_size": "small",
        "obs_shape": [OBS_DIM],
        "action_kind": "continuous",
        "num_actions": NUM_ACTIONS,
        "dtype": "float32",
        "norm_obs": True,
        "iteration": 3,
        "final_return": -1234.5,
        "commit": "0123abcd",
        "command": ["ppo_nnx.py", "--env", "Pendulum-v1", "--save-model"],
        "seed": 1,
    }
    return meta | changes


def write_raw(path: Path, tensors: dict, meta: dict | None) -> Path:
    """A safetensors file written as it is, with checkpoint.py's encoding of the metadata but none
    of its checks."""
    header = None if meta is None else checkpoint.encode({"format": checkpoint.FORMAT, **meta})
    safetensors.numpy.save_file(tensors, str(path), metadata=header)
    return path


def valid_raw(tmp_path: Path) -> tuple[dict, dict]:
    """The tensors (with obs_norm.*) and metadata of a valid checkpoint, to spoil one thing at a
    time."""
    tensors = shared_tensors() | {f"obs_norm.{k}": v for k, v in obs_stats().items()}
    return tensors, metadata()


def refused(path, *args, **kwargs) -> str:
    """load's one-line refusal, which names the file."""
    with pytest.raises(BadCheckpoint) as refusal:
        model_file.load(path, *args, **kwargs)
    message = str(refusal.value)
    assert "\n" not in message and str(path) in message, message
    return message


# --------------------------------------------------------------------------------------- the format
def test_saved_and_loaded_back_whole(tmp_path):
    params, stats, meta = shared_tensors(), obs_stats(), metadata()
    path = tmp_path / "model.safetensors"
    checkpoint.save(path, params, stats, meta)
    loaded = model_file.load(tmp_path)  # a run folder: its model.safetensors
    assert loaded.meta == {"format": checkpoint.FORMAT, **meta}
    assert sorted(loaded.params) == sorted(params) and sorted(loaded.obs_norm) == [
        "count",
        "mean",
        "var",
    ]
    for name, tensor in params.items():
        np.testing.assert_array_equal(loaded.params[name], tensor, err_msg=name)
        assert loaded.params[name].dtype == np.float32
    for name, tensor in stats.items():
        np.testing.assert_array_equal(loaded.obs_norm[name], tensor, err_msg=name)
    assert model_file.hidden_sizes(loaded.params) == HIDDEN
    assert checkpoint.architecture(loaded.params) == (OBS_DIM, HIDDEN, NUM_ACTIONS)
    # the header is plain strings that any safetensors reader shows
    with safetensors.safe_open(str(path), "np") as f:
        header = f.metadata()
    assert header["norm_obs"] == "true" and json.loads(header["obs_shape"]) == [OBS_DIM]
    assert header["framework"] == "nnx" and json.loads(header["command"])[0] == "ppo_nnx.py"


def test_a_discrete_checkpoint_without_norm_obs(tmp_path):
    params = shared_tensors(obs_dim=4, num_actions=2, continuous=False)
    meta = metadata(obs_shape=[4], action_kind="discrete", norm_obs=False, final_return=None)
    checkpoint.save(tmp_path / "model.safetensors", params, None, meta)
    loaded = model_file.load(
        tmp_path / "model.safetensors", obs_dim=4, action_space=("discrete", 2)
    )
    assert loaded.obs_norm is None and "log_std" not in loaded.params
    assert loaded.meta["final_return"] is None and loaded.meta["norm_obs"] is False


def test_a_count_saved_as_one_element_is_read_as_a_scalar(tmp_path):
    tensors, meta = valid_raw(tmp_path)
    tensors["obs_norm.count"] = tensors["obs_norm.count"].reshape(1)
    loaded = model_file.load(write_raw(tmp_path / "m.safetensors", tensors, meta))
    assert loaded.obs_norm["count"].shape == () and loaded.obs_norm["count"] == 1234.0


def test_normalize_obs_is_env_normalize_scale():
    """The observations evaluate.py feeds a network are those training fed it:
    env_normalize.scale's, clipped."""
    import env_normalize

    stats = obs_stats()
    obs = np.random.default_rng(3).normal(0, 20, (50, OBS_DIM)).astype(np.float32)
    running = env_normalize.RunningStats(stats["mean"], stats["var"], stats["count"])
    expected = np.asarray(env_normalize.scale(obs, running))
    np.testing.assert_array_equal(model_file.normalize_obs(obs, stats), expected)
    assert np.abs(expected).max() == env_normalize.CLIP  # some clipped
    assert model_file.normalize_obs(obs, None) is obs


def test_model_sizes_and_frameworks_are_the_scripts():
    import importlib

    assert set(model_file.FRAMEWORKS) == set(STUDY.frameworks)
    for name, framework in STUDY.frameworks.items():
        module = importlib.import_module(framework.script[: -len(".py")])
        assert module.MODEL_SIZES == model_file.MODEL_SIZES, name
        assert module.FRAMEWORK == name


def test_save_refuses_a_policy_gone_nan_and_writes_nothing(tmp_path):
    params = shared_tensors()
    params["critic.1.kernel"][3, 4] = np.nan
    path = tmp_path / "model.safetensors"
    with pytest.raises(BadCheckpoint, match="critic.1.kernel holds 1 non-finite value"):
        checkpoint.save(path, params, obs_stats(), metadata())
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------------- bad checkpoints
def test_a_truncated_file_is_refused(tmp_path):
    checkpoint.save(tmp_path / "model.safetensors", shared_tensors(), obs_stats(), metadata())
    data = (tmp_path / "model.safetensors").read_bytes()
    for size in (len(data) - 1, len(data) // 2, 20, 3, 0):
        path = tmp_path / f"cut{size}.safetensors"
        path.write_bytes(data[:size])
        assert "not a readable safetensors file" in refused(path)


def test_not_a_file_is_refused(tmp_path):
    assert "cannot be read (No such file or directory)" in refused(tmp_path)  # a folder without one
    (tmp_path / "text.safetensors").write_text('{"not": "safetensors"}')
    assert "not a readable safetensors file" in refused(tmp_path / "text.safetensors")
    os.mkfifo(tmp_path / "fifo")
    assert "not a regular file" in refused(tmp_path / "fifo")  # and no hang


def test_another_env_is_refused(tmp_path):
    checkpoint.save(tmp_path / "model.safetensors", shared_tensors(), obs_stats(), metadata())
    message = refused(tmp_path / "model.safetensors", obs_dim=4)
    assert "Pendulum-v1, whose observations have 3 values, not 4: another env's" in message
    message = refused(tmp_path / "model.safetensors", action_space=("discrete", 2))
    assert "with 2 continuous actions, not 2 discrete: another env's" in message
    message = refused(tmp_path / "model.safetensors", action_space=("continuous", 6))
    assert "not 6 continuous" in message
    model_file.load(tmp_path / "model.safetensors", obs_dim=3, action_space=("continuous", 2))


def test_unknown_and_missing_tensors_are_refused(tmp_path):
    tensors, meta = valid_raw(tmp_path)
    extra = write_raw(
        tmp_path / "extra.safetensors", tensors | {"actor.3.kernel": np.ones(2, np.float32)}, meta
    )
    assert "unknown tensors actor.3.kernel (the metadata says model_size small" in refused(extra)
    del tensors["critic.2.bias"]
    missing = write_raw(tmp_path / "missing.safetensors", tensors, meta)
    assert "missing tensors critic.2.bias" in refused(missing)
    optimizer = {f"adam.mu.{name}": x for name, x in shared_tensors().items()}
    many = write_raw(tmp_path / "many.safetensors", valid_raw(tmp_path)[0] | optimizer, meta)
    assert "unknown tensors adam.mu.actor.0.bias, " in refused(many) and "and 8 more" in refused(
        many
    )


def test_wrong_shapes_are_refused(tmp_path):
    tensors, meta = valid_raw(tmp_path)
    # torch's (out, in) layout, not transposed
    tensors["actor.0.kernel"] = np.ascontiguousarray(tensors["actor.0.kernel"].T)
    message = refused(write_raw(tmp_path / "torch_layout.safetensors", tensors, meta))
    assert "tensor actor.0.kernel has shape [64, 3], not [3, 64] as the metadata says" in message
    tensors, meta = valid_raw(tmp_path)
    tensors["obs_norm.mean"] = np.zeros(5, np.float32)
    assert "obs_norm.mean has shape [5], not [3]" in refused(
        write_raw(tmp_path / "m.safetensors", tensors, meta)
    )


@pytest.mark.parametrize("name", ["actor.2.bias", "log_std", "obs_norm.var"])
@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_non_finite_values_are_refused(tmp_path, name, value):
    tensors, meta = valid_raw(tmp_path)
    tensors[name] = tensors[name].copy()
    tensors[name].flat[0] = value
    message = refused(write_raw(tmp_path / "m.safetensors", tensors, meta))
    assert f"tensor {name} holds 1 non-finite values (NaN or inf)" in message


def test_statistics_that_cannot_be_are_refused(tmp_path):
    tensors, meta = valid_raw(tmp_path)
    tensors["obs_norm.var"] = -tensors["obs_norm.var"]
    assert "negative variance" in refused(write_raw(tmp_path / "m.safetensors", tensors, meta))


def test_tensors_not_float32_are_refused(tmp_path):
    tensors, meta = valid_raw(tmp_path)
    tensors["critic.0.kernel"] = tensors["critic.0.kernel"].astype(np.float64)
    assert "tensor critic.0.kernel is F64, not F32" in refused(
        write_raw(tmp_path / "m.safetensors", tensors, meta)
    )


@pytest.mark.parametrize(
    "changes, says",
    [
        # the tensors are a small model's, of 3 observations and 2 continuous actions, with obs_norm
        ({"obs_shape": [4]}, "actor.0.kernel has shape [3, 64], not [4, 64]"),
        ({"num_actions": 3}, "actor.2.kernel has shape [64, 2], not [64, 3]"),
        ({"model_size": "medium"}, "missing tensors actor.3.bias, actor.3.kernel, critic.3.bias"),
        ({"action_kind": "discrete"}, "unknown tensors log_std"),
        ({"norm_obs": False}, "unknown tensors obs_norm.count, obs_norm.mean, obs_norm.var"),
    ],
)
def test_metadata_that_disagrees_with_the_tensors_is_refused(tmp_path, changes, says):
    tensors, meta = valid_raw(tmp_path)
    assert says in refused(write_raw(tmp_path / "m.safetensors", tensors, meta | changes))


@pytest.mark.parametrize(
    "changes, says",
    [
        (
            {"framework": "jax"},
            "metadata framework must be one of linen, nnx, equinox, torch, not 'jax'",
        ),
        (
            {"iteration": 0},
            "metadata iteration must be a positive integer (iterations completed), not '0'",
        ),
        ({"num_actions": "two"}, "metadata num_actions must be a positive integer, not '\"two\"'"),
        ({"obs_shape": [10, 10, 4]}, "metadata obs_shape must be [obs_dim], a positive integer"),
        ({"norm_obs": "yes"}, "metadata norm_obs must be true or false"),
        (
            {"final_return": float("nan")},
            "metadata final_return must be a finite number or null, not 'NaN'",
        ),
        ({"command": "ppo_nnx.py"}, "metadata command must be a JSON list of strings"),
        (
            {"model_size": "huge"},
            "metadata model_size must be one of small, medium, large, not 'huge'",
        ),
    ],
)
def test_malformed_metadata_is_refused(tmp_path, changes, says):
    tensors, meta = valid_raw(tmp_path)
    assert says in refused(write_raw(tmp_path / "m.safetensors", tensors, meta | changes))


def test_missing_or_foreign_metadata_is_refused(tmp_path):
    tensors, meta = valid_raw(tmp_path)
    del meta["seed"]
    assert "the metadata has no seed" in refused(
        write_raw(tmp_path / "m.safetensors", tensors, meta)
    )
    foreign = write_raw(
        tmp_path / "foreign.safetensors", tensors, None
    )  # another tool's safetensors file
    assert "no benchback-rl/1 metadata: not a checkpoint of --save-model" in refused(foreign)
    path = tmp_path / "future.safetensors"
    header = checkpoint.encode({**valid_raw(tmp_path)[1], "format": "benchback-rl/2"})
    safetensors.numpy.save_file(tensors, str(path), metadata=header)
    assert "metadata format must be 'benchback-rl/1', not 'benchback-rl/2'" in refused(path)


# ------------------------------ the templates' mappings (to_shared, from_shared) and evaluation's
FRAMEWORKS = list(STUDY.frameworks)
# (obs_dim, model size, num_actions, continuous): a classic-control and a flattened MinAtar batch,
# and a Gaussian
ARCHITECTURES = [(4, "small", 2, False), (400, "medium", 6, False), (3, "small", 2, True)]


def from_shared(framework: str, tensors: dict, continuous: bool):
    """(agent, actor) of framework's template holding the shared tensors, as evaluate.py builds
    them (Linen's agent: its params)."""
    return policy.from_shared(framework, model_file.layers_of(tensors), continuous)


def to_shared(framework: str, agent) -> dict:
    """The shared tensors of framework's agent (from_shared's), as --save-model names and copies
    them: the template's own to_shared."""
    return checkpoint.shared(*script_module(framework).to_shared(agent))


def outputs(framework: str, tensors: dict, continuous: bool, obs: np.ndarray) -> tuple:
    """(actor output: logits or the Gaussian's mean, values) of framework's agent holding tensors
    (from_shared's), as NumPy: the actor output of the actor function that evaluate.py runs, the
    values of the agent's own call."""
    agent, actor = from_shared(framework, tensors, continuous)
    if framework == "linen":
        net = model_file.layers_of(tensors)
        module = script_module("linen").Agent(net.hidden_sizes, net.num_actions, continuous)
        return np.asarray(actor(obs)), np.asarray(module.apply(agent, obs)[1])
    if framework == "torch":
        import torch

        with torch.no_grad():
            return np.asarray(actor(obs)), agent(torch.as_tensor(obs))[1].numpy()
    return np.asarray(actor(obs)), np.asarray(agent(obs)[1])


def numpy_outputs(tensors: dict, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The tanh MLPs of the shared tensors, in float64."""
    hidden = model_file.hidden_sizes(tensors)

    def mlp(name, x):
        for i in range(len(hidden) + 1):
            x = x @ tensors[f"{name}.{i}.kernel"].astype(np.float64) + tensors[f"{name}.{i}.bias"]
            x = np.tanh(x) if i < len(hidden) else x
        return x

    obs = obs.astype(np.float64)
    return mlp("actor", obs), mlp("critic", obs)[:, 0]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("obs_dim, size, num_actions, continuous", ARCHITECTURES)
def test_from_shared_then_to_shared_gives_the_tensors_back(
    framework, obs_dim, size, num_actions, continuous
):
    module = script_module(framework)
    tensors = shared_tensors(obs_dim, module.MODEL_SIZES[size], num_actions, continuous)
    back = to_shared(framework, from_shared(framework, tensors, continuous)[0])
    assert sorted(back) == sorted(tensors)
    for name, tensor in tensors.items():
        assert back[name].dtype == np.float32, name
        np.testing.assert_array_equal(back[name], tensor, err_msg=f"{framework} {name}")


@pytest.mark.parametrize("obs_dim, size, num_actions, continuous", ARCHITECTURES)
def test_the_same_tensors_give_the_same_outputs_in_every_framework(
    obs_dim, size, num_actions, continuous
):
    """One checkpoint's tensors, loaded by each of the four: the same logits (or Gaussian means) and
    values as the float64 NumPy MLP, to float32 tolerance (the frameworks' matmuls sum in different
    orders)."""
    tensors = shared_tensors(obs_dim, model_file.MODEL_SIZES[size], num_actions, continuous)
    obs = np.random.default_rng(4).normal(size=(64, obs_dim)).astype(np.float32)
    expected = numpy_outputs(tensors, obs)
    for framework in FRAMEWORKS:
        for what, actual, reference in zip(
            ("actor output", "values"), outputs(framework, tensors, continuous, obs), expected
        ):
            assert actual.dtype == np.float32 and actual.shape == reference.shape, (framework, what)
            np.testing.assert_allclose(
                actual, reference, rtol=1e-4, atol=1e-5, err_msg=f"{framework} {what}"
            )


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_to_shared_copies_what_training_then_changes(framework):
    """The Saver keeps to_shared's tensors of the last finished iteration while training goes on:
    they must not be views of the parameters that the next update changes in place (torch's are
    updated in place)."""
    tensors = shared_tensors()
    agent, _ = from_shared(framework, tensors, True)
    first = to_shared(framework, agent)
    if framework == "torch":
        import torch

        with torch.no_grad():
            for param in agent.parameters():
                param.add_(1.0)
        assert not np.array_equal(
            to_shared(framework, agent)["actor.0.kernel"], first["actor.0.kernel"]
        )
    for name, tensor in tensors.items():
        np.testing.assert_array_equal(first[name], tensor, err_msg=name)
        assert first[name].flags.owndata, name


# ---------------------------------------------------------------------- --save-model in the scripts
# the first framework in the quick check, the others slow
FIRST_FAST = [
    pytest.param(f, marks=() if i == 0 else pytest.mark.slow) for i, f in enumerate(FRAMEWORKS)
]


@pytest.mark.parametrize("framework", FIRST_FAST)
def test_save_model_keeps_the_policy_of_the_run(framework, trained_run):
    """A completed --save-model run leaves model.safetensors that load accepts, with the run's
    metadata; the policy is the trained one (not the initial one: the final update changed it)."""
    # without --norm-obs: no statistics saved
    args = [*TINY, "--env", "CartPole-v1", "--seed", "3", "--save-model"]
    # the model file is the point, not the compile: the fastest mode (torch.compile: ~1 min)
    args += ["--compile", FAST_COMPILE[framework]]
    run_dir = trained_run(framework, *args)
    loaded = model_file.load(run_dir, obs_dim=4, action_space=("discrete", 2))
    summary, config = read_json(run_dir / "summary.json"), read_json(run_dir / "config.json")
    meta = loaded.meta
    assert meta["framework"] == framework and meta["env"] == "CartPole-v1" and meta["seed"] == 3
    assert (meta["env_backend"], meta["model_size"], meta["dtype"]) == (
        "gymnax",
        "small",
        "float32",
    )
    assert meta["iteration"] == summary["iterations_completed"] == 3
    assert meta["final_return"] == pytest.approx(summary["final_return"])
    assert meta["command"] == config["command"] and "--save-model" in meta["command"]
    # the repository's HEAD when the run started (a commit since then may have moved HEAD on)
    ancestor = ["git", "-C", str(ROOT), "merge-base", "--is-ancestor", meta["commit"], "HEAD"]
    assert len(meta["commit"]) == 40 and subprocess.run(ancestor).returncode == 0, meta["commit"]
    assert meta["norm_obs"] is False and loaded.obs_norm is None
    # the critic's head starts at zero biases in every framework: trained, they are not
    assert np.abs(loaded.params["critic.2.bias"]).max() > 0


@pytest.mark.slow
def test_save_model_keeps_the_observation_statistics(trained_run):
    """With --norm-obs the checkpoint holds the running statistics of the observations the network
    saw: those of the last iteration (their count says which), flattened as the network sees
    them."""
    run_dir = trained_run("linen", *saved("linen", "Pendulum-v1"))
    loaded = model_file.load(run_dir, obs_dim=3, action_space=("continuous", 1))
    assert loaded.meta["norm_obs"] is True and loaded.meta["iteration"] == 3
    assert float(loaded.obs_norm["count"]) == pytest.approx(stats_count(3))
    assert loaded.obs_norm["mean"].shape == (3,) and (loaded.obs_norm["var"] > 0).all()
    assert np.abs(loaded.obs_norm["mean"]).max() > 0  # Pendulum's observations are not centred


# stopped at the next boundary by one SIGTERM, each script: test_resume.py's
# test_a_stopped_and_resumed_run_ends_as_an_uninterrupted_one (its continuous runs, whose stopped
# run's checkpoint it checks as this does)
@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("signals", [[signal.SIGTERM, signal.SIGINT]], ids=["at-once"])
def test_a_stopped_run_saves_its_last_finished_iteration(framework, signals, log_dir):
    """Stopped at once by a second signal after a few iterations, perhaps in the middle of an
    update: the checkpoint holds the last finished iteration's policy and statistics, as many
    iterations as summary.json counts."""
    args = [
        *TINY[:4],
        "--num-iterations",
        "100000",
        "--env",
        "Pendulum-v1",
        "--norm-obs",
        "--save-model",
    ]
    proc = start(framework, *args, log_dir=log_dir)
    try:
        wait_for(proc, "iter 3/")
        for signum in signals:
            proc.send_signal(signum)
        proc.wait(timeout=300)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, "".join(proc.output)[-3000:]
    run_dir = only_run_dir(log_dir)
    summary = read_json(run_dir / "summary.json")
    loaded = model_file.load(run_dir)
    assert summary["status"] == "interrupted" and summary["iterations_completed"] >= 3
    assert loaded.meta["iteration"] == summary["iterations_completed"]
    assert float(loaded.obs_norm["count"]) == pytest.approx(stats_count(loaded.meta["iteration"]))
    assert "model.safetensors: the policy of iteration" in "".join(proc.output)


@pytest.mark.slow
def test_a_run_stopped_before_its_first_iteration_saves_nothing(log_dir):
    proc = start("nnx", *["--num-envs", "4", "--num-steps", "16", "--save-model"], log_dir=log_dir)
    try:
        wait_for(proc, ": setup ")  # iteration 0 compiles
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=300)
    finally:
        proc.kill()
        proc.wait()
    output = "".join(proc.output)
    assert proc.returncode == 130 and "model.safetensors" not in output, output[-3000:]
    assert not list(log_dir.rglob("model.safetensors"))


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_stripped_copy_saves_its_model_with_checkpoint_beside_it(framework, tmp_path):
    """The starter (./setup.sh starter, without the bookkeeping) keeps --save-model working: the
    copy, with the core/saving.py and checkpoint.py it comes with, saves a checkpoint that loads."""
    copy = stripped_copy(framework, tmp_path / "alone")
    cmd = [sys.executable, str(copy), *TINY, "--save-model", "--log-dir", str(tmp_path / "runs")]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled", "PYTHONPATH": ""}
    proc = subprocess.run(
        cmd, cwd=copy.parent, capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    loaded = model_file.load(run_dir)
    assert loaded.meta["framework"] == framework and loaded.meta["iteration"] == 3
    assert not (run_dir / "summary.json").exists()

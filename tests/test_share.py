"""evaluate.py --export-onnx and --hub-folder (issue 55 items 5 and 6, evaluation/share.py): the
actor as ONNX gives, under onnxruntime, the actions of the framework that trained it; the Hub
folder's model card is read by huggingface_hub's own reader, offline; outputs this tool did not
write are refused in one line.

The checkpoints are written by checkpoint.save from random parameters of the right shapes (no
training): what is checked is the path from a checkpoint to the ONNX graph and the folder, whatever
the weights."""

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from checkpoints import CHECKPOINT_ENVS, PRIVATE, PUBLISHED_CONFIG, RUN_CONFIG, random_checkpoint

import atomic
import evaluate
from evaluation import hub, model_file, policy, share
from helpers import ROOT

PENDULUM_BOUNDS = (-2.0, 2.0)  # gymnax's Pendulum-v1 action space
# float32 tolerance of a continuous action (the Gaussian's mean): the same float32 function, summed
# in another order by XLA and by onnxruntime (about sqrt(64) ulps of activations at most 1 after
# tanh: ~1e-6), ten times that
RTOL, ATOL = 1e-5, 1e-6


def raw_observations(ckpt, n: int = 1000) -> np.ndarray:
    """n raw observations around the checkpoint's statistics, out to several std: some are clipped
    at +-10 once normalised, which the graph must do as evaluate.py does."""
    rng = np.random.default_rng(1)
    mean, var = ckpt.obs_norm["mean"], ckpt.obs_norm["var"]
    return (mean + 5 * np.sqrt(var) * rng.standard_normal((n, len(mean)))).astype(np.float32)


def onnx_actions(path: Path, obs: np.ndarray) -> np.ndarray:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["obs"]
    assert [o.name for o in session.get_outputs()] == ["action"]
    return session.run(None, {"obs": obs})[0]


# --------------------------------------------------------------------------------------------- ONNX
@pytest.mark.parametrize("env_id", CHECKPOINT_ENVS)
def test_onnx_actions_equal_the_frameworks_own_on_1000_observations(tmp_path, env_id):
    """The exported graph, from raw observations (normalisation and clip inside), gives under
    onnxruntime the deterministic actions of evaluate.py's policy in the framework that trained the
    checkpoint: the same argmax (int64) for CartPole, the same clipped mean for Pendulum, on 1,000
    observations; one observation works too (the batch size is free)."""
    ckpt = model_file.load(random_checkpoint(tmp_path / "run", env_id))
    framework = ckpt.meta["framework"]
    continuous = ckpt.meta["action_kind"] == "continuous"
    bounds = PENDULUM_BOUNDS if continuous else None
    share.export_onnx(ckpt, tmp_path / "actor.onnx", bounds)

    obs = raw_observations(ckpt)
    expected = policy.make_policy(policy.load_actor(ckpt, framework), ckpt, bounds, None)(obs)
    actions = onnx_actions(tmp_path / "actor.onnx", obs)
    assert actions.shape == expected.shape
    if continuous:
        assert actions.dtype == np.float32
        # the clip is exercised: some means leave the bounds, some stay inside
        assert (np.abs(expected) == 2.0).any() and (np.abs(expected) < 2.0).any()
        np.testing.assert_allclose(actions, expected, rtol=RTOL, atol=ATOL)
    else:
        assert actions.dtype == np.int64
        assert len(np.unique(expected)) == 2  # both actions taken: argmax is exercised
        np.testing.assert_array_equal(actions, expected)
    # normalisation inside: raw observations outside +-10 std are clipped as in training
    assert (np.abs(policy.normaliser(ckpt)(obs)) == 10.0).any()
    np.testing.assert_array_equal(onnx_actions(tmp_path / "actor.onnx", obs[:1]), actions[:1])


def test_the_onnx_metadata_names_the_checkpoint_and_the_action(tmp_path):
    import onnx

    ckpt = model_file.load(random_checkpoint(tmp_path / "run", "CartPole-v1"))
    share.export_onnx(ckpt, tmp_path / "actor.onnx", None)
    props = {p.key: p.value for p in onnx.load(str(tmp_path / "actor.onnx")).metadata_props}
    assert props[atomic.WRITTEN_BY] == "evaluate.py"
    assert props["env"] == "CartPole-v1" and props["framework"] == "linen"
    assert props["action"].startswith("int64")


def test_an_onnx_path_is_refused_unless_this_tool_wrote_it(tmp_path):
    """A file that is not this tool's ONNX is refused in one line and left as it is; its own is
    replaced."""
    other = tmp_path / "notes.onnx"
    other.write_text("not a model")
    with pytest.raises(
        atomic.OutputRefused, match="not an ONNX file that evaluate.py wrote"
    ) as refusal:
        share.check_onnx(other)
    assert "\n" not in str(refusal.value)
    assert other.read_text() == "not a model"
    with pytest.raises(atomic.OutputRefused, match="not a regular file"):
        share.check_onnx(tmp_path)
    new = tmp_path / "new" / "actor.onnx"  # a new file, in a folder that is made
    share.check_onnx(new)
    ckpt = model_file.load(random_checkpoint(tmp_path / "run", "CartPole-v1"))
    share.export_onnx(ckpt, new, None)
    share.check_onnx(new)


# --------------------------------------------------------------------------------------- Hub folder


@pytest.fixture
def evaluated(tmp_path):
    """A CartPole checkpoint, evaluated over 2 episodes by evaluate.py's own functions: (path, ckpt,
    result)."""
    path = random_checkpoint(tmp_path / "run", "CartPole-v1")
    atomic.write_json(path.parent / "config.json", RUN_CONFIG | PRIVATE)
    ckpt = model_file.load(path)
    setup = evaluate.prepare(ckpt, "linen", episodes=2, seed=3, stochastic=False)
    return path, ckpt, evaluate.evaluate(setup, 3).result


def no_network(*args, **kwargs):
    raise OSError("no network in this test")


def test_the_hub_folder_is_built_offline_and_its_card_read_by_huggingface_hub(
    tmp_path, evaluated, monkeypatch
):
    """Built with every socket connection refused; huggingface_hub's ModelCard reads, offline, the
    metadata the Hub shows: model-index with the evaluation's mean_reward "x +/- y", the tags, the
    library; the folder holds the checkpoint, eval.json, config.json (command, run config, metadata)
    and the files that load the policy."""
    from huggingface_hub import ModelCard

    path, ckpt, result = evaluated
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", no_network)
    folder = tmp_path / "hub"
    hub.check_hub_folder(folder)
    hub.write_hub_folder(folder, path, ckpt, result, None)

    card = ModelCard.load(folder / "README.md")
    assert card.data.library_name == "benchback-rl"
    assert set(card.data.tags) == {
        "reinforcement-learning",
        "CartPole-v1",
        "flax-linen",
        "benchback-rl",
    }
    (eval_result,) = card.data.eval_results
    assert eval_result.task_type == "reinforcement-learning"
    assert eval_result.dataset_name == "CartPole-v1"
    assert eval_result.metric_type == "mean_reward"
    assert eval_result.metric_value == f"{result['mean_return']:.2f} +/- {result['std_return']:.2f}"

    # the checkpoint's tensors and metadata (its command public already), written anew
    published = model_file.load(folder / "model.safetensors")
    assert published.meta == ckpt.meta and published.obs_norm.keys() == ckpt.obs_norm.keys()
    for name in ckpt.params:
        np.testing.assert_array_equal(published.params[name], ckpt.params[name])
    # the evaluation names the checkpoint the folder publishes
    named = {"file": "model.safetensors", "sha256": published.sha256}
    assert json.loads((folder / "eval.json").read_text())["evaluations"] == [
        {**result, "checkpoint": named}
    ]
    config = json.loads((folder / "config.json").read_text())
    assert config["command"] == ckpt.meta["command"] and config["checkpoint"] == ckpt.meta
    assert config["training_config"] == PUBLISHED_CONFIG
    for name in (
        "evaluate.py",
        "checkpoint.py",
        "ppo_linen.py",
        "evaluation/share.py",
        "evaluation/model_file.py",
        "evaluation/policy.py",
    ):
        assert (folder / name).read_bytes() == (ROOT / name).read_bytes(), name
        assert f"`{name}`" in card.text
    # its own requirements.txt, what the policy needs (not the project's, nor its lock or setup.sh)
    lines = (folder / "requirements.txt").read_text().splitlines()
    assert [line for line in lines if not line.startswith("#")] == hub.requirements(ckpt.meta)
    assert "`requirements.txt`" in card.text and not (folder / "setup.sh").exists()
    assert not (folder / "tests").exists() and not (folder / ".venv").exists()
    assert not (folder / "replay.mp4").exists()  # no replay given, none claimed
    assert "replay.mp4" not in card.text


def test_a_hub_folder_this_tool_did_not_write_is_refused(tmp_path, evaluated):
    """A non-empty folder without this tool's config.json, or with another's, or a file: refused in
    one line, left as it is; an empty folder and this tool's own folder are written."""
    path, ckpt, result = evaluated
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    with pytest.raises(atomic.OutputRefused, match="holds files and no config.json") as refusal:
        hub.check_hub_folder(theirs)
    assert "\n" not in str(refusal.value)
    (theirs / "config.json").write_text('{"lr": 3}')
    with pytest.raises(atomic.OutputRefused, match="did not write it"):
        hub.check_hub_folder(theirs)
    assert sorted(p.name for p in theirs.iterdir()) == ["config.json", "notes.txt"]
    with pytest.raises(atomic.OutputRefused, match="is not a folder"):
        hub.check_hub_folder(theirs / "notes.txt")

    empty = tmp_path / "empty"
    empty.mkdir()
    hub.check_hub_folder(empty)
    hub.write_hub_folder(empty, path, ckpt, result, None)
    hub.check_hub_folder(empty)  # its own: replaced by the next write
    # shared again from the folder's own checkpoint: the run's training config is kept, not the
    # folder's mark
    again = tmp_path / "again"
    hub.write_hub_folder(again, empty / "model.safetensors", ckpt, result, None)
    assert json.loads((again / "config.json").read_text())["training_config"] == PUBLISHED_CONFIG


def test_evaluate_refuses_a_foreign_hub_folder_before_anything_is_written(tmp_path):
    """evaluate.py --hub-folder DIR, DIR not its own: one line, exit 2, no eval.json, DIR as it
    was."""
    path = random_checkpoint(tmp_path / "run", "CartPole-v1")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "README.md").write_text("my model")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "evaluate.py"), str(path), "--hub-folder", str(theirs)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(proc.stderr.strip().splitlines()) == 1 and "--hub-folder" in proc.stderr
    assert not (path.parent / "eval.json").exists()
    assert [p.name for p in theirs.iterdir()] == ["README.md"]


# a training command as typed (issue 79 item 5): what defines the policy, and what names the run,
# its owner and its machine
PRIVATE_FLAGS = [
    *("--exp-name", "secret-exp", "--tag", "someones-laptop", "--wandb-entity", "someone"),
    *("--wandb-project-name=private-project", "--track", "--log-dir", "/home/someone/runs"),
    "--resume=/home/someone/runs/x",
]
PRIVATE_WORDS = ("secret-exp", "someones-laptop", "someone", "private-project", "--track", "--tag")
POLICY_FLAGS = ["--env", "CartPole-v1", "--learning-rate", "0.001", "--no-anneal-lr"]
POLICY_FLAGS += ["--num-envs=8", "--norm-obs", "--save-model"]


def test_the_published_command_holds_the_flags_that_define_the_policy_only():
    command = ["/home/someone/ppo_linen.py", *PRIVATE_FLAGS[:6], *POLICY_FLAGS, *PRIVATE_FLAGS[6:]]
    assert hub.public_command(command) == ["ppo_linen.py", *POLICY_FLAGS]


def hand_result(ckpt, mean: float = 20.0) -> dict:
    """An evaluation's entry of eval.json, made by hand (no episodes)."""
    return {
        **dict(framework="linen", trained_by="linen", env="CartPole-v1", env_backend="gymnax"),
        **dict(mode="deterministic", episodes=2, seed=3, mean_return=mean, std_return=1.0),
        **dict(returns=[19.0, 21.0], lengths=[19, 21], iteration=3),
        "checkpoint": evaluate.eval_file.checkpoint_entry(ckpt),
    }


def test_the_hub_folder_publishes_no_name_tag_or_wandb_name_of_the_command(tmp_path):
    """The checkpoint's command and its run's config.json's, as typed with --wandb-entity,
    --wandb-project-name, --tag, --exp-name and paths: none of them in the card, config.json (three
    copies of the command there) or the model file's metadata, nor when shared again from the
    folder; the policy's flags are."""
    command = ["/home/someone/ppo_linen.py", *PRIVATE_FLAGS, *POLICY_FLAGS]
    path = random_checkpoint(tmp_path / "run", "CartPole-v1", command=command)
    atomic.write_json(path.parent / "config.json", {**RUN_CONFIG, "command": command})
    ckpt = model_file.load(path)
    hub.write_hub_folder(tmp_path / "hub", path, ckpt, hand_result(ckpt), None)
    hub.write_hub_folder(
        tmp_path / "again", tmp_path / "hub" / "model.safetensors", ckpt, hand_result(ckpt), None
    )
    for folder in ("hub", "again"):
        config = json.loads((tmp_path / folder / "config.json").read_text())
        published = ["ppo_linen.py", *POLICY_FLAGS]
        assert config["command"] == config["checkpoint"]["command"] == published
        assert config["training_config"]["command"] == published
        assert model_file.load(tmp_path / folder / "model.safetensors").meta["command"] == published
        for name in ("config.json", "README.md", "eval.json", "model.safetensors"):
            text = (tmp_path / folder / name).read_bytes().decode("latin-1")
            assert not [word for word in PRIVATE_WORDS if word in text], (folder, name)
    assert (
        "python ppo_linen.py --env CartPole-v1 --learning-rate 0.001"
        in (tmp_path / "hub" / "README.md").read_text()
    )


def test_a_nan_evaluation_is_not_published(tmp_path, monkeypatch):
    """A mean return of nan was published (mean_reward "nan +/- nan"): refused in one line, nothing
    written; by evaluate.py --hub-folder with exit code 1, not even eval.json beside the
    checkpoint."""
    path = random_checkpoint(tmp_path / "run", "CartPole-v1")
    ckpt = model_file.load(path)
    with pytest.raises(ValueError) as refusal:
        hub.write_hub_folder(tmp_path / "hub", path, ckpt, hand_result(ckpt, float("nan")), None)
    assert "mean_return is nan" in str(refusal.value) and "\n" not in str(refusal.value)
    assert not (tmp_path / "hub").exists()

    nan = evaluate.Evaluation(hand_result(ckpt, float("nan")), None)
    monkeypatch.setattr(evaluate, "prepare", lambda *args: None)
    monkeypatch.setattr(evaluate, "evaluate", lambda *args: nan)
    with pytest.raises(SystemExit) as done:
        evaluate.main([str(path), "--hub-folder", str(tmp_path / "hub")])
    assert done.value.code == 1
    # the folder's writer lock aside (atomic.hold_folder), no file is added
    names = sorted(p.name for p in path.parent.iterdir() if p.name != atomic.LOCK_FILE)
    assert names == ["model.safetensors"]
    assert not (tmp_path / "hub").exists()


@pytest.mark.slow
def test_evaluate_exports_onnx_and_a_hub_folder_that_loads_on_its_own(tmp_path):
    """evaluate.py --export-onnx --hub-folder on a Pendulum checkpoint: the ONNX actions are the
    evaluation's policy's; then a copy of the Hub folder, away from the project, evaluates its own
    model.safetensors with its own files in each of the four frameworks (as its card says) to the
    same returns, and exports it as ONNX (issue 66 item 14: only the trainer's script was copied, so
    --framework torch and --export-onnx failed with "No module named 'ppo_torch'")."""
    path = random_checkpoint(tmp_path / "run", "Pendulum-v1")
    hub, onnx_path = tmp_path / "hub", tmp_path / "actor.onnx"
    command = [sys.executable, "evaluate.py", str(path), "--episodes", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [*command, "--export-onnx", str(onnx_path), "--hub-folder", str(hub)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ckpt = model_file.load(path)
    obs = raw_observations(ckpt)
    expected = policy.make_policy(policy.load_actor(ckpt, "nnx"), ckpt, PENDULUM_BOUNDS, None)(obs)
    np.testing.assert_allclose(onnx_actions(onnx_path, obs), expected, rtol=RTOL, atol=ATOL)

    # Pendulum renders (gymnasium's drawing): the replay is there, and the module that recorded it
    assert (hub / "replay.mp4").stat().st_size > 0 and (hub / "evaluation" / "video.py").is_file()
    assert "`replay.mp4`" in (hub / "README.md").read_text()

    copy = shutil.copytree(hub, tmp_path / "elsewhere" / "downloaded")
    (copy / "eval.json").unlink()
    (ours,) = json.loads((path.parent / "eval.json").read_text())["evaluations"]
    # what the card promises runs from the copy alone: each of the four frameworks, and the export
    for framework in ("linen", "nnx", "equinox", "torch"):
        proc = run_in(copy, env, "model.safetensors", "--episodes", "2", "--framework", framework)
        assert proc.returncode == 0, (framework, proc.stderr[-3000:])
        theirs = json.loads((copy / "eval.json").read_text())["evaluations"][-1]
        assert theirs["framework"] == framework
        np.testing.assert_allclose(theirs["returns"], ours["returns"], rtol=1e-5)
    assert "any of the four frameworks runs it" in (copy / "README.md").read_text().lower()
    proc = run_in(copy, env, "model.safetensors", "--episodes", "1", "--export-onnx", "a.onnx")
    assert proc.returncode == 0, proc.stderr[-3000:]
    np.testing.assert_allclose(onnx_actions(copy / "a.onnx", obs), expected, rtol=RTOL, atol=ATOL)


def run_in(folder: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    """The folder's own evaluate.py, run in it, with nothing of the project on the path."""
    return subprocess.run(
        [sys.executable, "evaluate.py", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "PYTHONPATH": ""},
    )


# ------------------------------------------------------- the Hub folder's requirements (issue 84)
# A child that evaluates a checkpoint (argv 1) in one framework (argv 2) as on a machine with only
# the distributions whose top-level names argv 3 lists: any other module of site-packages is hidden
# (ModuleNotFoundError, as where it is not installed), the project's and the standard library not.
AS_IF_ONLY = """
import sys
from importlib.machinery import PathFinder

allowed = set(sys.argv[3].split(","))
roots = tuple(path + "/" for path in sys.path if path.endswith("site-packages"))


class Hide:
    def find_spec(self, name, path=None, target=None):
        if path is not None:  # a submodule: its package was allowed
            return None
        spec = PathFinder.find_spec(name)
        where = spec and (spec.origin or next(iter(spec.submodule_search_locations or []), ""))
        if where and where.startswith(roots) and name not in allowed:
            raise ModuleNotFoundError(f"No module named {name!r} (not required)", name=name)
        return None


sys.meta_path.insert(0, Hide())
import evaluate

evaluate.main([sys.argv[1], "--episodes", "1", "--framework", sys.argv[2]])
"""


def installed_closure(requirements: list[str]) -> set[str]:
    """The top-level module names of the distributions pip installs for requirements (name==version
    lines): each, and what it requires under this Python (extras left out), as installed here."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    todo, seen, names = [Requirement(line).name for line in requirements], set(), set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:  # not installed here: nothing here can load it
            continue
        names |= {file.parts[0].split(".")[0] for file in dist.files or []}
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return names


@pytest.mark.parametrize("framework", ["linen", "torch"])
def test_the_hub_folders_requirements_are_what_its_policy_loads(tmp_path, framework):
    """requirements.txt holds what the policy needs, pinned, and not the benchmark's other packages
    (issue 84 item 4: envpool, Brax, Craftax, pytest and ruff, 233 s and 3.2 GB for a 38 KB
    policy): evaluate.py runs it in the framework that trained it with every other distribution
    hidden, as on a machine that installed requirements.txt alone."""
    from packaging.utils import canonicalize_name

    path = random_checkpoint(tmp_path / "run", "CartPole-v1")
    meta = {**model_file.load(path).meta, "framework": framework}
    wanted = hub.requirements(meta)
    assert all("==" in line for line in wanted), wanted
    names = {canonicalize_name(line.partition("==")[0]) for line in wanted}
    other = {"flax", "equinox"} if framework == "torch" else {"torch", "equinox"}
    unwanted = {"envpool", "brax", "craftax", "pytest", "ruff", "wandb", "onnx", *other}
    assert not names & unwanted and {"gymnax", "safetensors", "tyro"} <= names
    allowed = ",".join(sorted(installed_closure(wanted)))
    child = [sys.executable, "-c", AS_IF_ONLY, str(path), framework, allowed]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(child, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "over 1 episodes" in proc.stdout, proc.stdout[-2000:]
    # an envpool env's policy: its own package too
    assert "envpool==1.2.5" in hub.requirements({**meta, "env_backend": "envpool"})


def test_a_playground_policys_requirements_install_playground_as_setup_sh_does():
    """A Playground policy's requirements.txt named no package of its env (issue 85). Now it holds
    what Playground's envs import, at the lock's versions: playground's declared dependencies but
    the two setup.sh leaves out (warp-lang, 149 MB, and mediapy), Brax's and MuJoCo's among them;
    playground itself, whose plain install would pull warp-lang, follows with --no-deps (which a
    requirements.txt cannot say of one package) at setup.sh's pin, in the file's comment and in the
    card's command. (evaluate.py ran such a policy with every other distribution hidden, as
    test_the_hub_folders_requirements_are_what_its_policy_loads does, once: 45 s, not kept.)"""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    meta = {"env": "playground-CartpoleBalance", "env_backend": "gymnax", "framework": "torch"}
    pins = dict(line.split("==") for line in hub.requirements(meta))
    # the venv's versions, the lock's (torch's build aside: 2.13.0+cpu)
    installed = {name: metadata.version(name).partition("+")[0] for name in pins}
    assert installed == pins
    declared = [Requirement(line) for line in metadata.requires("playground")]
    needed = {canonicalize_name(r.name) for r in declared if r.marker is None}
    assert needed - {canonicalize_name(name) for name in pins} == {"warp-lang", "mediapy"}
    assert "playground" not in pins and "torch" in pins and "flax" in pins
    apart = f"playground=={metadata.version('playground')}"
    assert hub.without_dependencies(meta) == [apart]
    assert hub.requirements_text(meta).splitlines()[-1].endswith(f"pip install --no-deps {apart}")
    command = next(line for line in hub.use_it(meta) if "-m venv" in line)
    assert command.endswith(f"-r requirements.txt && .venv/bin/pip install --no-deps {apart}")
    # Brax's env: MuJoCo's packages pinned too (brax's own pin would let pip take their newest)
    brax = hub.requirements({**meta, "env": "brax-ant"})
    assert {f"{name}=={metadata.version(name)}" for name in ("brax", "mujoco", "mujoco-mjx")} <= {
        *brax
    }
    gymnax = {**meta, "env": "CartPole-v1"}
    card = hub.requirements_text(gymnax) + "\n".join(hub.use_it(gymnax))
    assert hub.without_dependencies(gymnax) == [] and "--no-deps" not in card

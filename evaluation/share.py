"""Deploy and share a kept policy (part of benchback-rl): evaluate.py's --export-onnx and
--hub-folder.

    # before anything runs: OutputRefused, one line
    share.check_onnx(path); share.check_hub_folder(folder)
    # the actor as ONNX, through PyTorch
    share.export_onnx(ckpt, path, bounds)
    # a folder for `huggingface-cli upload`
    share.write_hub_folder(folder, ckpt_path, ckpt, result, replay)

The ONNX file is the deployable policy: raw observations in, the deterministic action out, whatever
framework trained it (ppo_torch.py's network, loaded by policy.build_agent, is what torch.onnx
exports). The Hub folder is built from local files only (no network): the checkpoint, a model card
whose metadata the Hub reads, eval.json, the training command and config, the files that load the
policy, and a replay video where the env can be rendered.

Each refuses an output it did not write, before anything runs: an ONNX file is recognised by the
"written_by" entry of its metadata, a Hub folder by its config.json (its "written_by" is
"evaluate.py --hub-folder").
"""

import importlib
import json
import logging
import os
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import atomic
import checkpoint
from evaluation import model_file, policy
from sweep import shell_quoting

# the mark of the ONNX files, and the writer of eval.json (as evaluate.py writes it)
TOOL = "evaluate.py"
HUB_TOOL = "evaluate.py --hub-folder"  # the mark of a Hub folder, in its config.json
ROOT = Path(__file__).resolve().parents[1]  # the project's folder: evaluate.py and the templates
# The Hub folder's files (besides the project's files that load the policy)
MARK_FILE, CARD, EVAL = "config.json", "README.md", "eval.json"
MODEL, VIDEO = "model.safetensors", "replay.mp4"
# what installs the packages of the folder's scripts, at the project's pinned versions
SETUP_FILES = ("requirements.txt", "requirements.lock", "setup.sh")
FRAMEWORK_NAMES = {
    "linen": "Flax Linen",
    "nnx": "Flax NNX",
    "equinox": "Equinox",
    "torch": "PyTorch",
}
FRAMEWORK_TAGS = {
    "linen": "flax-linen",
    "nnx": "flax-nnx",
    "equinox": "equinox",
    "torch": "pytorch",
}
# the action of the ONNX graph, as its metadata says it
ACTION_DOC = {
    "discrete": "int64 (batch,): the argmax of the logits",
    "continuous": "float32 (batch, num_actions): the Gaussian's mean, clipped to the env's action "
    "bounds",
}


def refused(flag: str, path, why: str) -> atomic.OutputRefused:
    return atomic.OutputRefused(
        f"{flag} {path} {why}: it is left as it is and nothing is run; give another {flag} or move "
        "it away"
    )


# --------------------------------------------------------------------------------------------- ONNX
def onnx_writer(path: Path):
    """The "written_by" of an ONNX file's metadata; None for a file that is not ONNX or has none."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # protobuf's DecodeError, or any file onnx cannot read
        return None
    return {prop.key: prop.value for prop in model.metadata_props}.get(atomic.WRITTEN_BY)


def check_onnx(path) -> None:
    """OutputRefused (one line) unless path is a new file in a folder that can be written, or an
    ONNX file this tool wrote (atomic.check_replaceable reads text; an ONNX file is binary)."""
    real = atomic.target(path)
    atomic.check_writable_folder("--export-onnx", path, real)
    if not os.path.lexists(real):
        return
    if not real.is_file():
        raise refused("--export-onnx", path, "is not a regular file")
    if onnx_writer(real) != TOOL:
        raise refused("--export-onnx", path, f"is not an ONNX file that {TOOL} wrote")


def deployed_actor(ckpt, bounds):
    """ppo_torch.py's actor, loaded with ckpt's parameters (policy.build_agent, in float32), as a
    torch module from raw observations (batch, obs_dim) float32 to the deterministic action: ckpt's
    observation normalisation first (env_normalize.scale's arithmetic, its statistics frozen), then
    the actor; discrete: the argmax of the logits (int64); continuous: the Gaussian's mean clipped
    to bounds (the env's (low, high)), as the env gets it."""
    import torch

    import env_normalize

    continuous = ckpt.meta["action_kind"] == "continuous"
    agent = policy.build_agent("torch", model_file.layers_of(ckpt.params), continuous)

    class DeployedActor(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.actor = agent.actor
            self.norm = ckpt.obs_norm is not None
            if self.norm:
                self.register_buffer("mean", torch.as_tensor(ckpt.obs_norm["mean"]))
                self.register_buffer("var", torch.as_tensor(ckpt.obs_norm["var"]))
            if continuous:
                shape = (int(ckpt.meta["num_actions"]),)
                low, high = (np.broadcast_to(np.asarray(b, np.float32), shape) for b in bounds)
                self.register_buffer("low", torch.tensor(low))
                self.register_buffer("high", torch.tensor(high))

        def forward(self, obs):
            if self.norm:
                clip = env_normalize.CLIP
                obs = torch.clamp((obs - self.mean) / torch.sqrt(self.var + 1e-8), -clip, clip)
            out = self.actor(obs)
            return torch.clamp(out, self.low, self.high) if continuous else out.argmax(-1)

    return DeployedActor().eval()


@contextmanager
def quiet_exporter():
    """torch.onnx's exporter without its warnings and log lines (torchvision's ops it skips,
    deprecations)."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def export_onnx(ckpt, path, bounds) -> None:
    """The actor of ckpt (model_file.load's) as an ONNX file at path, whatever framework trained it:
    input "obs", raw observations (batch, obs_dim) float32, flattened as the network sees them;
    output "action", the deterministic action: discrete, the argmax of the logits as int64 (batch,);
    continuous, the Gaussian's mean clipped to bounds, the env's action bounds (low, high), float32
    (batch, num_actions). The observation normalisation of --norm-obs (the checkpoint's statistics,
    and the clip at +-10) is inside the graph, so a deployer needs nothing else. It computes in
    float32 (the parameters are float32, under --dtype bfloat16 too). The metadata holds the
    checkpoint's, the action's meaning, and this tool's mark. Written atomically."""
    import torch

    module = deployed_actor(ckpt, bounds)
    obs_dim = ckpt.meta["obs_shape"][0]
    with quiet_exporter(), torch.no_grad():
        # torch.export's exporter (the default), which onnxscript backs; the batch size is free
        program = torch.onnx.export(
            module,
            (torch.zeros(2, obs_dim),),
            dynamo=True,
            input_names=["obs"],
            output_names=["action"],
            dynamic_shapes=({0: torch.export.Dim("batch")},),
            verbose=False,
        )
    model = program.model_proto
    kind = ckpt.meta["action_kind"]
    props = {**checkpoint.encode(ckpt.meta), "action": ACTION_DOC[kind], atomic.WRITTEN_BY: TOOL}
    for key, value in props.items():
        model.metadata_props.add(key=key, value=value)
    atomic.target(path).parent.mkdir(parents=True, exist_ok=True)  # check_onnx let it be made
    atomic.write_file(path, model.SerializeToString())


# --------------------------------------------------------------------------------------- Hub folder
def check_hub_folder(folder) -> None:
    """OutputRefused (one line) unless folder is absent, empty, or a Hub folder this tool wrote (its
    config.json says so), and can be written."""
    real = atomic.target(folder)
    if os.path.lexists(real) and not real.is_dir():
        raise refused("--hub-folder", folder, "is not a folder")
    atomic.check_writable_folder("--hub-folder", folder, real / MARK_FILE)
    if not real.exists() or not any(real.iterdir()):
        return
    mark = real / MARK_FILE
    if not mark.is_file():
        raise refused("--hub-folder", folder, f"holds files and no {MARK_FILE} of {HUB_TOOL}")
    atomic.check_replaceable("--hub-folder", mark, atomic.json_by(HUB_TOOL))


def loading_files(framework: str) -> list[str]:
    """The project's files that a copy of the Hub folder needs to load, evaluate and train the
    policy: the template that trained it and the project's modules loaded by now (evaluate.py has
    just loaded the policy and run it, the template has imported its own), as paths relative to the
    project, and what installs the pinned packages."""
    importlib.import_module(f"ppo_{framework}")
    files = {f"ppo_{framework}.py", "evaluate.py", *SETUP_FILES}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path:
            continue
        relative = Path(path).resolve()
        if not relative.is_relative_to(ROOT):
            continue
        relative = relative.relative_to(ROOT)
        # the venv's packages (.venv) and the tests are not the project's code for the folder
        if relative.parts[0] != "tests" and not any(p.startswith(".") for p in relative.parts):
            files.add(relative.as_posix())
    return sorted(name for name in files if (ROOT / name).is_file())


def training_config(ckpt_path: Path):
    """The run's config.json beside the checkpoint (the scripts' bookkeeping writes it), or None;
    beside a Hub folder's checkpoint (shared again), the training config that folder kept."""
    try:
        config = json.loads((ckpt_path.parent / MARK_FILE).read_text())
    except (OSError, ValueError):
        return None
    if isinstance(config, dict) and config.get(atomic.WRITTEN_BY) == HUB_TOOL:
        return config.get("training_config")
    return config


def mean_reward(result: dict) -> str:
    """The Hub's mean_reward: "mean +/- std" of the evaluation's returns."""
    return f"{result['mean_return']:.2f} +/- {result['std_return']:.2f}"


def card_metadata(meta: dict, result: dict) -> str:
    """The model card's YAML metadata (model-index with mean_reward, tags, library_name), as the Hub
    reads it: written by huggingface_hub's own ModelCardData."""
    from huggingface_hub import EvalResult, ModelCardData

    env = meta["env"]
    data = ModelCardData(
        library_name="benchback-rl",
        tags=["reinforcement-learning", env, FRAMEWORK_TAGS[meta["framework"]], "benchback-rl"],
        model_name="PPO",
        eval_results=[
            EvalResult(
                task_type="reinforcement-learning",
                task_name="reinforcement-learning",
                dataset_type=env,
                dataset_name=env,
                metric_type="mean_reward",
                metric_name="mean_reward",
                metric_value=mean_reward(result),
                verified=False,
            )
        ],
    )
    return data.to_yaml()


def card_text(meta: dict, result: dict, files: list[str]) -> str:
    """README.md: the metadata, then what the policy is, how it did, how to run it and how it was
    trained."""
    trained, evaluated = meta["framework"], result["framework"]
    command = " ".join(shell_quoting.shell_word(word) for word in meta["command"])
    lines = [
        "---",
        card_metadata(meta, result).rstrip(),
        "---",
        "",
        f"# PPO on {meta['env']} ({FRAMEWORK_NAMES[trained]}, benchback-rl)",
        "",
        f"A PPO policy trained by benchback-rl's `ppo_{trained}.py` ({FRAMEWORK_NAMES[trained]}) "
        "on "
        f"{meta['env']} ({meta['env_backend']} backend), model size {meta['model_size']}, "
        f"{meta['iteration']} iterations, seed {meta['seed']}, observation normalisation "
        f"{'on' if meta['norm_obs'] else 'off'}.",
        "",
        f"Evaluated by `evaluate.py` in {FRAMEWORK_NAMES[evaluated]}'s network: mean return "
        f"{mean_reward(result)} (population std) over {result['episodes']} episodes, "
        f"{result['mode']} "
        f"actions, seed {result['seed']} (`{EVAL}`)"
        + (f"; `{VIDEO}` replays its episode 0." if VIDEO in files else "."),
        "",
        "## Use it",
        "",
        "Any of the four frameworks runs it (the same networks, the tensors under one naming):",
        "",
        "    pip install -r requirements.txt   # or: bash setup.sh, the pinned versions in .venv",
        f"    python evaluate.py {MODEL} --framework torch   # or linen, nnx, equinox",
        f"    python evaluate.py {MODEL} --export-onnx actor.onnx   # raw observations in, actions "
        "out",
        "",
        f"`{MODEL}` holds the actor's and the critic's parameters, the observation-normalisation "
        "statistics (with --norm-obs) and the metadata; safetensors: no pickle, nothing executed "
        "on load.",
        "",
        "## Training",
        "",
        f"    python {command}",
        "",
        f"`{MARK_FILE}`: the command, the run's configuration and the checkpoint's metadata.",
        "",
        "## Files",
        "",
        *(f"- `{name}`" for name in files),
    ]
    return "\n".join(lines) + "\n"


def copy_file(source: Path, folder: Path, name: str) -> None:
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    atomic.write_file(folder / name, source.read_bytes())


def record_replay(replay, folder: Path, meta: dict) -> bool:
    """The evaluation's episode 0 as replay.mp4 in folder; False (and a line saying why) when the
    env cannot be rendered. A replay from an earlier write, of another policy maybe, goes first."""
    (folder / VIDEO).unlink(missing_ok=True)
    if replay is None:
        return False
    from evaluation import video

    try:
        video.check(str(folder / VIDEO), meta)
        video.record(replay, str(folder / VIDEO))
    except ValueError as e:  # video.CannotRecord among them
        print(f"{TOOL}: --hub-folder: no {VIDEO}: {e}", file=sys.stderr)
        return False
    return True


def write_hub_folder(folder, ckpt_path: Path, ckpt, result: dict, replay) -> None:
    """A folder for `huggingface-cli upload`, from local files only: the checkpoint
    (model.safetensors), the model card (README.md), config.json (the training command, the run's
    config, the checkpoint's metadata), eval.json (this evaluation, result), the files that load the
    policy, and replay.mp4 (episode 0 of the evaluation, where the env can be rendered).
    config.json, the folder's mark, is written first: a folder left half-written is still recognised
    as this tool's, and rewritten. Each file is written atomically."""
    real = atomic.target(folder)
    real.mkdir(parents=True, exist_ok=True)
    meta = ckpt.meta
    config = {
        atomic.WRITTEN_BY: HUB_TOOL,
        "command": meta["command"],
        "training_config": training_config(Path(ckpt_path)),
        "checkpoint": meta,
    }
    atomic.write_json(real / MARK_FILE, config)
    copy_file(Path(ckpt_path), real, MODEL)
    atomic.write_json(real / EVAL, {atomic.WRITTEN_BY: TOOL, "evaluations": [result]})
    has_video = record_replay(replay, real, meta)
    code = loading_files(meta["framework"])  # after the video: its module is one of them
    for name in code:
        copy_file(ROOT / name, real, name)
    files = sorted([CARD, MARK_FILE, MODEL, EVAL, *code, *([VIDEO] if has_video else [])])
    atomic.write_file(real / CARD, card_text(meta, result, files))

"""Deploy a kept policy (part of benchback-rl): evaluate.py's --export-onnx (its --hub-folder is
evaluation/hub.py).

    # before anything runs: OutputRefused, one line
    share.check_onnx(path)
    # the actor as ONNX, through PyTorch
    share.export_onnx(ckpt, path, bounds)

The ONNX file is the deployable policy: raw observations in, the deterministic action out, whatever
framework trained it (ppo_torch.py's network, loaded by policy.from_shared, is what torch.onnx
exports). It refuses an output it did not write, before anything runs: an ONNX file is recognised by
the "written_by" entry of its metadata. The path the user gave is followed if it is a link, as it
is named; a link below it is never written through (atomic.write_file).
"""

import logging
import os
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import atomic
import checkpoint
from evaluation import model_file, policy

# the mark of the ONNX files, and the writer of eval.json (as evaluate.py writes it)
TOOL = "evaluate.py"
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
    real = atomic.check_inside(path, path, "--export-onnx")
    atomic.check_writable_folder("--export-onnx", path, real)
    if not os.path.lexists(real):
        return
    if not real.is_file():
        raise refused("--export-onnx", path, "is not a regular file")
    if onnx_writer(real) != TOOL:
        raise refused("--export-onnx", path, f"is not an ONNX file that {TOOL} wrote")


def deployed_actor(ckpt, bounds):
    """ppo_torch.py's actor, loaded with ckpt's parameters (policy.from_shared, in float32), as a
    torch module from raw observations (batch, obs_dim) float32 to the deterministic action: ckpt's
    observation normalisation first (env_normalize.scale's arithmetic, its statistics frozen), then
    the actor; discrete: the argmax of the logits (int64); continuous: the Gaussian's mean clipped
    to bounds (the env's (low, high)), as the env gets it."""
    import torch

    import env_normalize

    continuous = ckpt.meta["action_kind"] == "continuous"
    agent, _ = policy.from_shared("torch", model_file.layers_of(ckpt.params), continuous)

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
    # check_onnx let it be made; the path as named is followed, nothing below it
    atomic.check_inside(path, path, "--export-onnx").parent.mkdir(parents=True, exist_ok=True)
    atomic.write_file(path, model.SerializeToString(), given=path)

"""evaluate.py --hub-folder: a folder for `huggingface-cli upload` (part of benchback-rl).

    # before anything runs: OutputRefused (or BadJson), one line
    hub.check_hub_folder(folder)
    # the folder, from local files only (no network)
    hub.write_hub_folder(folder, ckpt_path, ckpt, result, replay)

What the folder publishes, and nothing else:

- model.safetensors, the checkpoint: its tensors, and its metadata with the command reduced
  (public_command);
- README.md, the model card (its metadata the Hub reads: mean_reward, tags, library);
- eval.json, this evaluation and the folder's earlier ones (each names its checkpoint);
- config.json, the folder's mark: the training command reduced to the script's name and the flags
  that define the policy (PUBLIC_FLAGS: no path, run name, tag or W&B name), the checkpoint's
  metadata (its command reduced likewise), and
  the run's configuration, only when the config.json beside the checkpoint is one the scripts
  wrote for that run (its framework, env, backend, seed, model size, dtype and normalisation are
  the checkpoint's), and only its known fields (CONFIG_FIELDS: the hyperparameters and the package
  versions; not the host, the kernel, the paths or the environment);
- CODE, a fixed list of the project's files: enough to evaluate the checkpoint in each of the four
  frameworks and to export it as ONNX from a copy of the folder alone;
- requirements.txt, what the policy needs and nothing else (requirements): the packages evaluate.py
  imports to run it in the framework that trained it, its env's own packages where it has some
  (envpool, Craftax, Brax with MuJoCo's; Playground's dependencies, and playground itself after them
  with --no-deps, as setup.sh installs it: the file's last comment and the card's command), at the
  versions of the project's requirements.lock; the card says what to add for another framework or
  ONNX (never the benchmark's envs, tools and tests);
- replay.mp4, episode 0 of the evaluation, where the env can be rendered.

An evaluation whose mean or std return is not finite is refused (check_result): the card would
publish nan. Every file is checked before the first is written: no path below the folder may be a
symbolic link (the folder itself is followed, as named), nor a folder where a file goes; an
eval.json there must be this tool's. Each file is written atomically (atomic.write_file);
config.json, the folder's mark, first: a folder left half-written is still recognised as this
tool's, and rewritten. Each file written is announced by a "wrote PATH" line, the replay's frames
by a progress line every few seconds.
"""

import hashlib
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Optional

import atomic
import checkpoint
from core import env_ids, run_args
from core.run_args import HYPERPARAMETERS
from evaluation import eval_file, progress
from evaluation.share import FRAMEWORK_NAMES, TOOL, refused

HUB_TOOL = "evaluate.py --hub-folder"  # the mark of a Hub folder, in its config.json
FLAG = "--hub-folder"
ROOT = Path(__file__).resolve().parents[1]  # the project's folder: evaluate.py and the templates
MARK_FILE, CARD, EVAL = "config.json", "README.md", "eval.json"
MODEL, VIDEO, REQUIREMENTS = "model.safetensors", "replay.mp4", "requirements.txt"
# The project's files a copy of the folder runs: evaluate.py and what it imports to evaluate in
# each of the four frameworks (their templates, the torch glue, the env adapters) and to export
# ONNX. A fixed list: never whatever happens to be loaded (a virtual environment inside the project
# would be copied whole).
CODE = (
    "evaluate.py",
    "atomic.py",
    "bookkeeping.py",
    "core/plain_bookkeeping.py",
    "checkpoint.py",
    "env_adapters.py",
    "env_normalize.py",
    "torch_glue.py",
    "ppo_linen.py",
    "ppo_nnx.py",
    "ppo_equinox.py",
    "ppo_torch.py",
    "evaluation/__init__.py",
    "evaluation/eval_file.py",
    "evaluation/hub.py",
    "evaluation/model_file.py",
    "evaluation/policy.py",
    "evaluation/progress.py",
    "evaluation/share.py",
    "evaluation/video.py",
    "core/__init__.py",
    "core/command_line.py",
    "core/env_ids.py",
    "core/option_checks.py",
    "core/run_args.py",
    "core/run_checks.py",
    "core/shell_quoting.py",
)
FILES = (MARK_FILE, MODEL, EVAL, VIDEO, REQUIREMENTS, *CODE, CARD)
# The packages evaluate.py imports to run a policy (tests/test_share.py checks them against what it
# loads): through the template of the framework that trained it (JAX runs its envs, gymnax makes
# them; optax, tyro and tensorboardX at the template's top) and the checkpoint's reader
POLICY_PACKAGES = ("jax", "gymnax", "six", "optax", "tyro", "tensorboardX", "numpy", "safetensors")
FRAMEWORK_PACKAGES = {"linen": "flax", "nnx": "flax", "equinox": "equinox", "torch": "torch"}
ONNX_PACKAGES = ("onnx", "onnxscript")  # --export-onnx, with torch (evaluation/share.py)
# What pip installs instead of the declared dependencies of a package that the policy's env needs
# installed without them (setup.sh's NO_DEPS): Playground's but warp-lang (Warp's physics) and
# mediapy (notebook videos), which its envs never import here, on pure-JAX MJX (tests/test_share.py
# compares them with its declared ones)
DEPENDENCIES = {
    "playground": (
        "absl-py brax etils flax lxml ml-collections mujoco mujoco-mjx orbax-checkpoint tqdm"
    ).split()
}
# torch's CPU build (PyPI's, on Linux, is the CUDA one: several GB), as setup.sh installs it
TORCH_CPU = "--index-url https://download.pytorch.org/whl/cpu"
# the framework packages installed first, from their own index (pip would take PyPI's otherwise)
OWN_INDEX = {"torch": TORCH_CPU}
FRAMEWORK_TAGS = {
    "linen": "flax-linen",
    "nnx": "flax-nnx",
    "equinox": "equinox",
    "torch": "pytorch",
}
# The run config's fields a card's reader needs: what was trained, with which hyperparameters and
# which package versions. Not published: where and by whom it ran (hostname, platform, paths, the
# environment variables, W&B's names).
CONFIG_FIELDS = (
    ("framework", "env", "env_backend", "env_threads", "model_size", "dtype", "seed", "num_agents")
    + tuple(sorted(HYPERPARAMETERS))
    + ("compile", "save_every", "batch_size", "minibatch_size")
)
# the fields by which a config.json is the checkpoint's run's: the same values in its metadata
MATCH_FIELDS = ("framework", "env", "env_backend", "seed", "model_size", "dtype", "norm_obs")
# The flags of a run's command that the folder publishes, with their values: those of CONFIG_FIELDS
# (what was trained, and how) and --save-model (which wrote the checkpoint). Not the others: paths
# (--log-dir, --resume), the run's name and label (--exp-name, --tag), W&B's names, the device.
PUBLIC_FLAGS = frozenset(CONFIG_FIELDS) | {"save_model"}


# --------------------------------------------------------------------------------------- the checks
def check_hub_folder(folder) -> None:
    """OutputRefused (one line) unless folder is absent, empty, or a Hub folder this tool wrote (its
    config.json says so), and each file of FILES can be written in it: no link below the folder, no
    folder where a file goes; an eval.json there this tool's (else ValueError, one line)."""
    folder = Path(folder)
    real = atomic.check_inside(folder, folder, FLAG)
    if os.path.lexists(real) and not real.is_dir():
        raise refused(FLAG, folder, "is not a folder")
    atomic.check_writable_folder(FLAG, folder, real / MARK_FILE)
    if not real.exists():
        return
    for name in FILES:
        check_target(folder, name)
    if not any(real.iterdir()):
        return
    mark = real / MARK_FILE
    if not mark.is_file():
        raise refused(FLAG, folder, f"holds files and no {MARK_FILE} of {HUB_TOOL}")
    atomic.check_replaceable(FLAG, mark, atomic.json_by(HUB_TOOL))
    eval_file.entries(real / EVAL, f"{FLAG} {folder}:")


def check_target(folder: Path, name: str) -> None:
    """OutputRefused unless the file name can be written in folder: no link on its way below the
    folder (atomic.check_inside), and neither it nor a folder on its way something else."""
    path = folder / name
    atomic.check_inside(folder, path, FLAG)
    for parent in list(Path(name).parents)[:-1]:
        if (folder / parent).exists() and not (folder / parent).is_dir():
            raise refused(FLAG, folder, f"holds {parent} that is not a folder, where {name} goes")
    if os.path.lexists(path) and not path.is_file():
        raise refused(FLAG, folder, f"holds {name} that is not a regular file")


# ---------------------------------------------------------------------------- what gets published
def public_command(command: list) -> list[str]:
    """A run's command (its sys.argv) as the card shows it: the script's base name and the flags of
    PUBLIC_FLAGS (--flag, --no-flag, --flag=value, or --flag and the words of its value); every
    other flag is left out with its value."""
    if not command:
        return []
    words, public = [Path(command[0]).name], False
    for word in command[1:]:
        if word.startswith("--"):
            name = run_args.key(word.partition("=")[0])
            public = name in PUBLIC_FLAGS or name.removeprefix("no_") in PUBLIC_FLAGS
        if public:
            words.append(word)
    return words


def check_result(result: dict) -> None:
    """ValueError (one line) for an evaluation the card cannot publish: a mean or std return that is
    not a finite number (the card would say nan)."""
    for name in ("mean_return", "std_return"):
        if not math.isfinite(result[name]):
            raise ValueError(
                f"{FLAG}: the evaluation's {name} is {result[name]}, not a finite number: the "
                "folder is not written"
            )


def is_scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def run_config(config, meta: dict) -> Optional[dict]:
    """The fields of CONFIG_FIELDS (and "versions", "command") of config when it is the run config
    of the checkpoint whose metadata is meta (MATCH_FIELDS equal), else None."""
    if not isinstance(config, dict):
        return None
    if any(config.get(key) != meta.get(key) for key in MATCH_FIELDS):
        return None
    public = {key: config[key] for key in CONFIG_FIELDS if is_scalar(config.get(key, {}))}
    versions = config.get("versions")
    if isinstance(versions, dict) and all(is_scalar(v) for v in versions.values()):
        public["versions"] = {str(name): version for name, version in versions.items()}
    command = config.get("command")
    if isinstance(command, list) and all(isinstance(word, str) for word in command):
        public["command"] = public_command(command)
    return public


def training_config(ckpt_path: Path, meta: dict) -> Optional[dict]:
    """The public part of the run's config.json beside the checkpoint (run_config), or None when
    there is none, it cannot be read (atomic.read_json: a line on stderr), or it is not the
    checkpoint's run's. Beside a Hub folder's checkpoint (shared again), the training config that
    folder kept."""
    path = ckpt_path.parent / MARK_FILE
    if not path.is_file():
        return None
    try:
        config = atomic.read_json(path)
    except (OSError, ValueError) as e:
        print(
            f"{TOOL}: {FLAG}: {MARK_FILE} beside the checkpoint not published ({e})",
            file=sys.stderr,
        )
        return None
    if config.get(atomic.WRITTEN_BY) == HUB_TOOL:
        config = config.get("training_config")
    return run_config(config, meta)


def public_meta(meta: dict) -> dict:
    """The checkpoint's metadata as the folder publishes it: its command reduced
    (public_command)."""
    return {**meta, "command": public_command(meta["command"])}


def mean_reward(result: dict) -> str:
    """The Hub's mean_reward: "mean +/- std" of the evaluation's returns."""
    return f"{result['mean_return']:.2f} +/- {result['std_return']:.2f}"


def pinned() -> dict[str, str]:
    """The project's pinned versions, by package name in lower case: requirements.lock's closure,
    torch's pin of requirements.txt (the lock leaves torch out: its build is the machine's) and
    what setup.sh installs without its dependencies (no_deps_pins)."""
    pins = {}
    for name in ("requirements.lock", "requirements.txt"):
        for line in (ROOT / name).read_text().splitlines():
            package, is_pin, version = line.split("#")[0].strip().partition("==")
            if is_pin and version:
                pins.setdefault(package.strip().lower(), version.strip())
    return {**no_deps_pins(), **pins}


def no_deps_pins() -> dict[str, str]:
    """setup.sh's NO_DEPS, the packages it installs after the lock with --no-deps (playground), each
    by name in lower case with its pinned version."""
    found = re.search(r"^NO_DEPS=\(([^)]*)\)", (ROOT / "setup.sh").read_text(), re.MULTILINE)
    pins = (word.partition("==") for word in (found.group(1).split() if found else ()))
    return {package.lower(): version for package, _, version in pins}


def env_packages(meta: dict) -> tuple[str, ...]:
    """The packages of the checkpoint's env beyond gymnax (core/env_ids.py): envpool's, Craftax's,
    Brax's and MuJoCo's, Playground's with them."""
    return env_ids.packages(meta["env"], meta["env_backend"])


def without_dependencies(meta: dict) -> list[str]:
    """What the policy's env needs installed without its declared dependencies (pip's --no-deps,
    which a requirements.txt cannot say of one package), pinned as setup.sh installs it:
    playground, for a Playground env."""
    pins = no_deps_pins()
    return [f"{package}=={pins[package]}" for package in env_packages(meta) if package in pins]


def requirement(package: str, pins: dict) -> str:
    """package==version at the project's pin (the package alone where it has none)."""
    version = pins.get(package.lower())
    return f"{package}=={version}" if version else package


def requirements(meta: dict) -> list[str]:
    """What the policy of the checkpoint whose metadata is meta needs from pip, pinned: the packages
    evaluate.py imports to run it in the framework that trained it, and its env's own, but those
    installed without their dependencies (without_dependencies), whose DEPENDENCIES come here."""
    own = env_packages(meta)
    env = [package for package in own if package not in no_deps_pins()]
    env += [name for package in own for name in DEPENDENCIES.get(package, ())]
    packages = (*POLICY_PACKAGES, FRAMEWORK_PACKAGES[meta["framework"]], *env)
    return [requirement(package, pinned()) for package in dict.fromkeys(packages)]


def requirements_text(meta: dict) -> str:
    lines = [
        f"# What evaluate.py needs to run this policy in {FRAMEWORK_NAMES[meta['framework']]} "
        f"on {meta['env']} (Python 3.11); README.md says what another framework or ONNX adds",
        *requirements(meta),
    ]
    package = FRAMEWORK_PACKAGES[meta["framework"]]
    if package in OWN_INDEX:
        first = f"pip install {package} {OWN_INDEX[package]}"
        lines.insert(1, f"# {package}'s CPU build first (README.md): {first}")
    if apart := without_dependencies(meta):
        then = f"pip install --no-deps {' '.join(apart)}"
        lines.append(f"# then, without its declared dependencies (README.md): {then}")
    return "\n".join(lines) + "\n"


def use_it(meta: dict) -> list[str]:
    """The card's commands: a virtual environment with requirements.txt, the evaluation in the
    framework that trained the policy, then what each other framework and ONNX add."""
    pins, trained = pinned(), meta["framework"]
    pip, python = ".venv/bin/pip install", ".venv/bin/python evaluate.py"
    torch = requirement("torch", pins)
    adds = {
        "flax": f"{pip} {requirement('flax', pins)}   # --framework linen or nnx",
        "equinox": f"{pip} {requirement('equinox', pins)}   # --framework equinox",
        "torch": f"{pip} {torch} {TORCH_CPU}   # --framework torch, and ONNX",
    }
    others = [line for package, line in adds.items() if package != FRAMEWORK_PACKAGES[trained]]
    onnx = " ".join(requirement(package, pins) for package in ONNX_PACKAGES)
    # torch's CPU build before requirements.txt, whose torch pip would take from PyPI
    package = FRAMEWORK_PACKAGES[trained]
    first = ""
    if package in OWN_INDEX:
        first = f"{pip} {requirement(package, pins)} {OWN_INDEX[package]} && "
    apart = without_dependencies(meta)
    # pip's --no-deps for one package: a command of its own, after the requirements
    then = f" && {pip} --no-deps {' '.join(apart)}" if apart else ""
    names = ", ".join(package.partition("==")[0] for package in apart)
    env = [package for package in env_packages(meta) if package not in no_deps_pins()]
    return [
        f"Its `{REQUIREMENTS}` holds what the policy needs and nothing more (the framework, gymnax"
        f"{''.join(', ' + p for p in env)}, safetensors...), pinned"
        + (
            f"; then {names}, without its declared dependencies (pip's --no-deps), as the "
            f"project's setup.sh installs it: `{REQUIREMENTS}` holds those of them its env uses"
            if apart
            else ""
        )
        + "; on a fresh machine, with Python 3.11:",
        "",
        f"    python3.11 -m venv .venv && {first}{pip} -r {REQUIREMENTS}{then}",
        f"    {python} {MODEL}   # in {FRAMEWORK_NAMES[trained]}'s network, which trained it",
        "",
        "Any of the four frameworks runs it from this folder alone (the same networks, the tensors "
        "under one naming), once its package is installed; the actor exports as ONNX through "
        "PyTorch:",
        "",
        *(f"    {line}" for line in others),
        f"    {python} {MODEL} --framework torch   # or linen, nnx, equinox",
        f"    {pip} {onnx}   # with torch: --export-onnx",
        f"    {python} {MODEL} --export-onnx actor.onnx   # raw observations in, actions out",
    ]


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
    from core import shell_quoting

    trained, evaluated = meta["framework"], result["framework"]
    command = " ".join(shell_quoting.shell_word(word) for word in public_command(meta["command"]))
    lines = [
        "---",
        card_metadata(meta, result).rstrip(),
        "---",
        "",
        f"# PPO on {meta['env']} ({FRAMEWORK_NAMES[trained]}, benchback-rl)",
        "",
        f"A PPO policy trained by benchback-rl's `ppo_{trained}.py` ({FRAMEWORK_NAMES[trained]}) "
        f"on {meta['env']} ({meta['env_backend']} backend), model size {meta['model_size']}, "
        f"{meta['iteration']} iterations, seed {meta['seed']}, observation normalisation "
        f"{'on' if meta['norm_obs'] else 'off'}.",
        "",
        f"Evaluated by `evaluate.py` in {FRAMEWORK_NAMES[evaluated]}'s network: mean return "
        f"{mean_reward(result)} (population std) over {result['episodes']} episodes, "
        f"{result['mode']} actions, seed {result['seed']} (`{EVAL}`)"
        + (f"; `{VIDEO}` replays its episode 0." if VIDEO in files else "."),
        "",
        "## Use it",
        "",
        *use_it(meta),
        "",
        f"`{MODEL}` holds the actor's and the critic's parameters, the observation-normalisation "
        "statistics (with --norm-obs) and the metadata; safetensors: no pickle, nothing executed "
        "on load.",
        "",
        "## Training",
        "",
        f"    python {command}",
        "",
        f"`{MARK_FILE}`: the command, the run's configuration (its hyperparameters and package "
        "versions) and the checkpoint's metadata.",
        "",
        "## Files",
        "",
        *(f"- `{name}`" for name in files),
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------- the write
def write(folder: Path, name: str, data: str | bytes) -> None:
    """A file of the folder, never through a link below it (checked before, checked again)."""
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    atomic.write_file(folder / name, data, given=folder)
    progress.wrote(folder / name)


def json_text(data) -> str:
    """data as atomic.write_json writes it."""
    return json.dumps(atomic.finite_json(data), indent=2, allow_nan=False)


def record_replay(replay, folder: Path, meta: dict) -> bool:
    """The evaluation's episode 0 as replay.mp4 in folder; False (and a line saying why) when the
    env cannot be rendered. A replay from an earlier write, of another policy maybe, goes first."""
    (folder / VIDEO).unlink(missing_ok=True)
    if replay is None:
        return False
    from evaluation import video

    try:
        video.check(str(folder / VIDEO), meta)
        made = video.record(replay, str(folder / VIDEO))
    except ValueError as e:  # video.CannotRecord among them
        print(f"{TOOL}: {FLAG}: no {VIDEO}: {e}", file=sys.stderr)
        return False
    drawn = f"drawn by {made.renderer} in {made.seconds:.1f} s"
    progress.wrote(made.path, f"{made.frames} frames, {drawn}")
    return True


def write_hub_folder(folder, ckpt_path: Path, ckpt, result: dict, replay) -> None:
    """The Hub folder (the module's docstring says what it holds): everything it writes is read,
    made and checked first (check_hub_folder, check_result), then written, config.json first.
    result: this evaluation's entry of eval.json."""
    folder = Path(folder)
    check_hub_folder(folder)
    check_result(result)
    meta = ckpt.meta
    config = {
        atomic.WRITTEN_BY: HUB_TOOL,
        "command": public_command(meta["command"]),
        "training_config": training_config(Path(ckpt_path), meta),
        "checkpoint": public_meta(meta),
    }
    model = checkpoint.checkpoint_bytes(ckpt_path, ckpt.params, ckpt.obs_norm, public_meta(meta))
    # this evaluation names the checkpoint the folder publishes: the same tensors, another command
    published = ckpt._replace(file=MODEL, sha256=hashlib.sha256(model).hexdigest())
    result = {**result, "checkpoint": eval_file.checkpoint_entry(published)}
    record = eval_file.merged(folder / EVAL, result)
    code = {name: (ROOT / name).read_bytes() for name in CODE}
    code[REQUIREMENTS] = requirements_text(meta).encode()
    files = sorted([CARD, MARK_FILE, MODEL, EVAL, *code])
    # the card with and without the replay: made before anything is written, the video decides
    cards = {
        has: card_text(meta, result, sorted([*files, VIDEO]) if has else files)
        for has in (True, False)
    }
    folder.mkdir(parents=True, exist_ok=True)
    write(folder, MARK_FILE, json_text(config))
    write(folder, MODEL, model)
    write(folder, EVAL, json_text(record))
    for name, data in code.items():
        write(folder, name, data)
    write(folder, CARD, cards[record_replay(replay, folder, meta)])

"""A ppo_*.py script's input checked before its run starts, each bad input one line (part of
benchback-rl): parsed by core/command_line.py (parse_args: tyro, CleanRL's flags), the JAX
settings of the environment that config.json would misreport, an XLA_FLAGS that XLA would end the
process on, a batch that cannot fit (every agent's), and W&B names and a WANDB_MODE that W&B would
refuse once the run has started. bookkeeping.py runs check_args before main(); the sweep runs it
on every run's flags before the first run.
"""

import os
import platform
import resource
import socket
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as metadata_version
from pathlib import Path
from typing import Optional

import jax

from core.command_line import parse_args

# The memory of a run, measured (not derived) on a CPU, 2026-12-07: JAX 0.10.2's CPU client,
# ppo_linen.py, CartPole-v1, 2 iterations of 1 epoch; summary.json's peak_rss_bytes (and VmPeak of
# /proc/self/status for the address space):
#   a tiny run (4 x 16 samples): 580 MB resident, 1.99 GB of address space (torch: 909 MB, 2.58 GB)
#   small model, 8 minibatches: 262,144 samples 820 MB; 1,048,576 samples 1,186 MB, 2.75 GB of
#   address space (578 bytes a sample above the tiny run resident, 725 of address space); 1
#   minibatch: 1,048,576 samples 2,087 MB. 16 agents x 65,536 samples: 1,185 MB, as one agent's
#   1,048,576.
#   nnx, equinox: as linen (815-833 MB at 262,144 samples); torch 1,177 bytes a sample (2,144 MB at
#   1,048,576)
#   medium model, 262,144 samples: 1,456 MB with 8 minibatches, 2,523 MB with 1, 1,434 MB with 32;
#   1,048,576 samples, 8 minibatches: 3,883 MB (3,150 bytes a sample), 5.17 GB of address space
#   large model, 65,536 samples, 8 minibatches: 1,626 MB
#   Breakout-MinAtar (400 numbers an observation, CartPole's 4), small: 65,536 samples 952 MB
# A run's estimate: a tiny run's memory (RUN_BYTES resident, RUN_ADDRESS_BYTES of address space),
# plus every agent's samples times SAMPLE_BYTES and the samples of a minibatch (every agent's) times
# MINIBATCH_BYTES, of its model size, fitted to the runs above (small: 1 and 8 minibatches at
# 1,048,576 samples; medium: 8 at 1,048,576, 1 at 262,144), below each of them, resident and address
# space alike (the address space's base aside). Rounded down, and CartPole's (the smallest
# observations: an env of larger ones takes more) and linen's (torch takes twice as much), so that
# the check refuses a run that cannot fit, never one that can. large is taken as medium (its one
# run above, 16 kB a sample with its parameters in, is too small to fit). On an accelerator the
# batch is in its memory: the same arrays, the tiny run's memory left out (not measured on one). The
# audit's run of 64 agents x 1024 envs x 256 steps, small: 9.5 GB estimated; XLA asked for
# 8,875,492,272 bytes at once when it failed under ulimit -v 4000000.
RUN_BYTES = 500 * 2**20
RUN_ADDRESS_BYTES = 1900 * 2**20
SAMPLE_BYTES = {"small": 450, "medium": 2500, "large": 2500}
MINIBATCH_BYTES = {"small": 950, "medium": 4300, "large": 4300}
MAX_BATCH = 2**31 - 1  # the batch is indexed with int32 (the update's permutations)
WANDB_FORBIDDEN = "/\\#?%:"  # characters W&B refuses in a project (and an entity) name
WANDB_MAX_NAME = 128
# the modes W&B's settings take (wandb.sdk.wandb_settings.Settings.mode; tests/test_script_inputs.py
# checks them against the installed wandb): another WANDB_MODE fails wandb.init with a traceback
WANDB_MODES = ("online", "offline", "disabled", "shared", "dryrun", "run")
# JAX settings that config.json would misreport: its dtype (float32, bfloat16) and its compile mode
REFUSED_JAX_SETTINGS = {
    "jax_enable_x64": "runs in float64 where config.json says --dtype",
    "jax_disable_jit": "runs op by op whatever config.json says of --compile (use --compile none)",
}


def check_args(args_type, argv: list[str]):
    """The script's Args from argv, parsed by tyro as the script will; bad input raises ValueError
    with one line."""
    args = parse_args(args_type, argv)
    check_environment()
    check_batch_memory(args)
    check_wandb_names(args)
    check_wandb_mode(args)
    return args


def check_environment() -> None:
    """ValueError (one line, naming the variable) for an XLA_FLAGS that XLA would end the process
    on, a JAX setting from the environment that config.json would misreport (REFUSED_JAX_SETTINGS),
    or a JAX_PLATFORMS that JAX cannot start on."""
    check_xla_flags(os.environ.get("XLA_FLAGS", ""))
    for setting, why in REFUSED_JAX_SETTINGS.items():
        if getattr(jax.config, setting):
            variable = setting.upper()
            raise ValueError(f"{variable}={os.environ.get(variable)!r}: JAX {why}; unset it")
    try:
        jax.devices()
    except Exception as e:  # a RuntimeError, or an AssertionError for cuda without a GPU
        if chip_held_elsewhere(str(e)):
            # libtpu's long traceback said in one line: a TPU serves one process at a time
            raise ValueError(
                "the TPU is in use by another process (one program holds the chip at a time): "
                "wait for it to end, or run on the CPU with JAX_PLATFORMS=cpu"
            ) from None
        platforms = os.environ.get("JAX_PLATFORMS")
        why = str(e).splitlines()[0] if str(e) else "no such device"
        raise ValueError(
            f"JAX_PLATFORMS={platforms!r}: JAX cannot start on it here ({why}); unset it to let "
            "JAX choose"
        ) from None


def check_xla_flags(value: str) -> None:
    """ValueError (one line) for an XLA_FLAGS that XLA ends the process on, when JAX starts, with
    its own fatal line: a value that does not start with -- (XLA reads it as the name of a file of
    flags) naming no file, or a word that starts with one - only (XLA takes no such flag). An
    unknown --flag is XLA's to say: its flags are not listed anywhere cheaper to read."""
    words = value.split()
    if words and not words[0].startswith("--") and not os.path.isfile(value.strip()):
        why = "it does not start with --, so XLA reads it as a file of flags, and there is none"
    elif any(word.startswith("-") and not word.startswith("--") for word in words):
        why = "XLA's flags are --name=value"
    else:
        return
    raise ValueError(f"XLA_FLAGS={value!r}: XLA would end the process on it ({why}); unset it")


# what libtpu (and the TPU driver) say when another process holds the chip
CHIP_HELD_MARKS = ("already in use", "in use by another process", "device or resource busy")


def chip_held_elsewhere(message: str) -> bool:
    """Whether JAX's error on starting says that another process holds the accelerator."""
    text = message.lower()
    return any(mark in text for mark in CHIP_HELD_MARKS)


def batch_bytes(model_size: str, samples: int, num_minibatches: int) -> int:
    """The bytes a run of model_size takes at least for samples (every agent's) updated in
    num_minibatches minibatches, above a tiny run's (SAMPLE_BYTES, MINIBATCH_BYTES; the smallest
    model's for a size not measured)."""
    size = model_size if model_size in SAMPLE_BYTES else "small"
    return samples * SAMPLE_BYTES[size] + samples // num_minibatches * MINIBATCH_BYTES[size]


CGROUP = Path("/sys/fs/cgroup")
V1_LIMIT = "memory.limit_in_bytes"


def cgroup_memory_max(own: str = "/proc/self/cgroup", root: Path = CGROUP) -> Optional[int]:
    """The memory limit of this process's cgroup (own: which it is; v2's memory.max, v1's
    memory.limit_in_bytes under root), None where none is set or none can be read (v1 says none
    with a number near 2**63)."""
    try:
        lines = Path(own).read_text().splitlines()
    except OSError:
        return None
    files = []
    for line in lines:
        _, controllers, folder = line.split(":", 2)
        folder = folder.lstrip("/")
        if controllers == "":
            files += [root / folder / "memory.max", root / "memory.max"]
        elif "memory" in controllers.split(","):
            files += [root / "memory" / folder / V1_LIMIT, root / "memory" / V1_LIMIT]
    for file in files:
        try:
            value = file.read_text().strip()
        except OSError:
            continue
        return int(value) if value.isdigit() and int(value) < 2**62 else None
    return None


def memory_limits() -> list[tuple[str, int, int]]:
    """Each limit a run's memory meets: (what, bytes, what a run takes of it besides its samples).
    On an accelerator, its memory that JAX may use (the batch is there, the process is not); on a
    CPU, the machine's memory, the cgroup's limit and the process's own (ulimit -d, and ulimit -v,
    which bounds the address space: RUN_ADDRESS_BYTES of a tiny run), those that are set."""
    device = jax.devices()[0]
    stats = device.memory_stats()  # None on a CPU
    if stats and stats.get("bytes_limit"):
        return [(f"the {device.platform.upper()}'s memory for JAX", stats["bytes_limit"], 0)]
    machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limits = [("this machine's memory", machine, RUN_BYTES)]
    if (cgroup := cgroup_memory_max()) is not None:
        limits.append(("the cgroup's memory limit", cgroup, RUN_BYTES))
    for name, flag, base in (
        ("RLIMIT_DATA", "-d", RUN_BYTES),
        ("RLIMIT_AS", "-v", RUN_ADDRESS_BYTES),
    ):
        soft = resource.getrlimit(getattr(resource, name))[0]
        if soft != resource.RLIM_INFINITY:
            limits.append((f"this process's limit (ulimit {flag}, {name})", soft, base))
    return limits


def check_batch_memory(args) -> None:
    """ValueError when an agent's batch cannot be indexed, or a run of every agent's samples needs
    more memory than a limit allows (memory_limits; the estimate: batch_bytes), before the run
    starts to allocate them."""
    agents = getattr(args, "num_agents", 1)
    samples = agents * args.batch_size
    product = f"--num-envs {args.num_envs} x --num-steps {args.num_steps}"
    if agents > 1:
        product += f" x --num-agents {agents}"
    if args.batch_size > MAX_BATCH:
        raise ValueError(
            f"{product} = {samples:,} samples: too many (at most {MAX_BATCH:,} an agent: the batch "
            "is indexed with 32-bit integers)"
        )
    model_size = args.model_size
    batch = batch_bytes(model_size, samples, args.num_minibatches)
    # the tightest first: the one named is the one to change
    for what, limit, base in sorted(memory_limits(), key=lambda each: each[1] - each[2]):
        if base + batch > limit:
            raise ValueError(
                f"{product} = {samples:,} samples: too many here (a run of them, {model_size} "
                f"model, {args.num_minibatches} minibatches, needs at least "
                f"{(base + batch) / 2**30:.1f} GiB, measured; {what} is {limit / 2**30:.1f} GiB)"
            )


def check_wandb_names(args) -> None:
    """ValueError for a W&B project or entity name that W&B would refuse once the run has
    started."""
    for flag, name in (
        ("--wandb-project-name", args.wandb_project_name),
        ("--wandb-entity", args.wandb_entity),
    ):
        if name is None:
            continue
        bad = sorted(set(name) & set(WANDB_FORBIDDEN))
        if not name or len(name) > WANDB_MAX_NAME or bad:
            rule = f"1 to {WANDB_MAX_NAME} characters, none of {' '.join(WANDB_FORBIDDEN)}"
            raise ValueError(f"{flag} {name!r} is not a W&B name: {rule}")


def check_wandb_mode(args) -> None:
    """ValueError for a WANDB_MODE that W&B refuses (with --track), before the run folder is
    made."""
    mode = os.environ.get("WANDB_MODE")
    if args.track and mode is not None and mode not in WANDB_MODES:
        raise ValueError(
            f"WANDB_MODE={mode!r} is not a W&B mode (one of {', '.join(WANDB_MODES)}): set one, "
            "or unset it"
        )


# The environment variables that change the computation, recorded in config.json: JAX's and XLA's
# settings (XLA_FLAGS, JAX_PLATFORMS, ...), TorchInductor's, the OpenMP/MKL/OpenBLAS thread settings
# and the GPU's
COMPUTATION_PREFIXES = ("JAX_", "XLA_", "TORCHINDUCTOR_", "OMP_", "KMP_", "MKL_", "OPENBLAS_")
COMPUTATION_VARIABLES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_TF32_OVERRIDE")


def computation_variables() -> dict:
    """The environment variables that change the computation (COMPUTATION_PREFIXES and _VARIABLES)
    and are set, with their values."""
    return {
        name: value
        for name, value in sorted(os.environ.items())
        if name.startswith(COMPUTATION_PREFIXES) or name in COMPUTATION_VARIABLES
    }


def machine() -> dict:
    """Where the run runs: platform, host, the cores it may use and the CPU's bfloat16 instructions
    (Linux), the environment variables that change the computation, and the start time."""
    return {
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu_affinity": sorted(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else None,
        "cpu_bf16": cpu_bf16_flags(),
        "environment_variables": computation_variables(),
        "start_time": datetime.now(timezone.utc).isoformat(),
    }


# the packages that carry a backend's own version: the TPU runtime, JAX's CUDA plugins
BACKEND_PACKAGES = ("libtpu", "libtpu-nightly", "jax-cuda12-plugin", "jax-cuda13-plugin")


def installed_version(package: str) -> Optional[str]:
    try:
        return metadata_version(package)
    except PackageNotFoundError:
        return None


def accelerator() -> dict:
    """What JAX computes on: the device's kind (e.g. "TPU v5 lite", "cpu"), its platform, the
    backend's own version line (the CUDA or TPU runtime it was built on), jaxlib's version and
    those of the backend packages installed (libtpu, JAX's CUDA plugins)."""
    device = jax.devices()[0]
    backends = {p: installed_version(p) for p in BACKEND_PACKAGES}
    return {
        "device_name": device.device_kind,
        "device_platform": device.platform,
        "device_count": jax.device_count(),
        "backend_version": device.client.platform_version,
        "jaxlib": installed_version("jaxlib"),
        "backend_packages": {p: v for p, v in backends.items() if v is not None},
    }


BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_bf16_flags(cpuinfo: str = "/proc/cpuinfo") -> Optional[list]:
    """The CPU's native bfloat16 instructions among BF16_FLAGS, from Linux's cpuinfo ([] for none:
    --dtype bfloat16 is then emulated); None where there is no cpuinfo to read."""
    try:
        with open(cpuinfo) as file:
            text = file.read()
    except OSError:
        return None
    flags = set()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            flags.update(value.split())
    return [flag for flag in BF16_FLAGS if flag in flags]

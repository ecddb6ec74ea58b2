"""Nonsense flags are refused by every PPO script in one line, before any folder exists (issue 39:
findings 1, 6 and 7), by the script's own Args so that a copy stripped of its bookkeeping still
refuses them; and no JSON file the project writes holds NaN or Infinity."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from script_runs import FIRST_FAST, script_module, stripped_copy

import bookkeeping
from core.events import read_scalars
from helpers import ROOT, STUDY, TINY, run_script
from sweep import env_timing

FRAMEWORKS = list(STUDY.frameworks)

# flags -> words the one-line refusal must hold (the flag and its bad value)
NONSENSE = {
    "learning rate nan": (["--learning-rate", "nan"], ["--learning-rate", "nan", "finite"]),
    "learning rate -1": (["--learning-rate", "-1"], ["--learning-rate", "-1.0", "positive"]),
    "learning rate 0": (["--learning-rate", "0"], ["--learning-rate", "0.0", "positive"]),
    "gamma 2": (["--gamma", "2"], ["--gamma", "2.0", "[0, 1]"]),
    "gae lambda -0.5": (["--gae-lambda", "-0.5"], ["--gae-lambda", "-0.5", "[0, 1]"]),
    "clip coef -1": (["--clip-coef", "-1", "--ent-coef", "0.01"], ["--clip-coef", "-1.0"]),
    "ent coef inf": (["--ent-coef", "inf"], ["--ent-coef", "inf", "finite"]),
    "vf coef -inf": (["--vf-coef", "-inf"], ["--vf-coef", "-inf"]),
    "vf coef -1": (["--vf-coef", "-1"], ["--vf-coef", "-1.0"]),
    "max grad norm 0": (["--max-grad-norm", "0"], ["--max-grad-norm", "0.0"]),
    "max grad norm nan": (["--max-grad-norm", "nan"], ["--max-grad-norm", "nan"]),
    "zero epochs": (["--update-epochs", "0"], ["--update-epochs", "0"]),
    "negative env threads": (["--env-threads", "-2"], ["--env-threads", "-2"]),
    # more threads than cores: refused where envpool's pool is made (test_envpool.py)
    "optimizer steps past int32": (
        ["--num-iterations", "100000000000"],
        ["--num-iterations", "8,000,000,000,000"],
    ),
    "seed past the generators": (
        ["--seed", "99999999999999999999999"],
        ["--seed", "99999999999999999999999"],
    ),
    "seed past envpool's int32": (["--seed", str(2**31)], ["--seed", str(2**31)]),
    "negative seed": (["--seed", "-1"], ["--seed", "-1"]),
    "empty log dir": (["--log-dir", ""], ["--log-dir", "''"]),
    # names that become paths (issue 79 item 4): each one folder's name, within NAME_MAX
    "exp name out of the log dir": (
        ["--exp-name", "/../../../../elsewhere/escaped"],
        ["--exp-name", "'/../../../../elsewhere/escaped'", "without /"],
    ),
    "exp name of 300 characters": (["--exp-name", "x" * 300], ["--exp-name", "128 bytes"]),
    "exp name of 2-byte characters past 128 bytes": (["--exp-name", "é" * 65], ["--exp-name"]),
    "exp name ..": (["--exp-name", ".."], ["--exp-name", "'..'"]),
    "tag a path": (["--tag", "linux/h200"], ["--tag", "'linux/h200'"]),
    "tag with a backslash": (["--tag", "a\\b"], ["--tag", "without /"]),
    "empty tag": (["--tag", ""], ["--tag", "''"]),
    "log dir s3:": (["--log-dir", "s3:"], ["--log-dir", "'s3:'", "not a URL"]),
    "log dir gs://": (["--log-dir", "gs://bucket/runs"], ["--log-dir", "'gs://bucket/runs'"]),
    "log dir hdfs://": (["--log-dir", "hdfs://host/runs"], ["--log-dir", "not a URL"]),
    "log dir name past NAME_MAX": (["--log-dir", "runs/" + "x" * 256], ["--log-dir", "255 bytes"]),
    "resume empty": (["--resume", ""], ["--resume", "a run folder", "''"]),
    "resume None": (["--resume", "None"], ["--resume", "a run folder", "'None'"]),
    "resume=None": (["--resume=None"], ["--resume", "'None'"]),
    "resume nowhere": (["--resume", "/no/such/run"], ["--resume", "'/no/such/run'"]),
}
# Refused by the bookkeeping (it knows the machine and W&B), not by Args
BOOKKEEPING_REFUSALS = {
    "a batch no machine holds": (
        ["--num-envs", "1000000000000"],
        ["--num-envs", "1000000000000", "256"],
    ),
    "a batch past int32": (
        ["--num-envs", "2", "--num-steps", str(2**30)],
        ["--num-steps", str(2**30)],
    ),
    "W&B project with / ? #": (
        ["--track", "--wandb-project-name", "a/b?c#d"],
        ["--wandb-project-name", "a/b?c#d"],
    ),
    "W&B project too long": (
        ["--wandb-project-name", "p" * 129],
        ["--wandb-project-name", "p" * 129],
    ),
    "empty W&B entity": (["--wandb-entity", ""], ["--wandb-entity", "''"]),
}


def refusal(framework: str, argv: list[str]) -> str:
    """The one-line message the script's bookkeeping refuses argv with (parsed in-process, as the
    script does)."""
    with pytest.raises(ValueError) as refused:
        bookkeeping.check_args(script_module(framework).Args, argv)
    return str(refused.value)


@pytest.mark.parametrize("case", [*NONSENSE, *BOOKKEEPING_REFUSALS])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_nonsense_is_refused_naming_the_flag_and_its_value(framework, case):
    argv, words = {**NONSENSE, **BOOKKEEPING_REFUSALS}[case]
    message = refusal(framework, argv)
    assert "\n" not in message
    for word in words:
        assert word in message, f"{word!r} not in: {message}"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_sensible_edges_are_accepted(framework, tmp_path):
    """The checks refuse nonsense only: the edges of each range are valid PPO settings."""
    edges = [
        "--gamma",
        "1",
        "--gae-lambda",
        "0",
        "--clip-coef",
        "0",
        "--ent-coef",
        "0",
        "--vf-coef",
        "0",
    ]
    args = bookkeeping.check_args(
        script_module(framework).Args, [*edges, "--seed", str(2**31 - 1), "--env-threads", "0"]
    )
    assert args.gamma == 1.0 and args.seed == 2**31 - 1
    # names: 128 bytes, dots, a colon after the first /, a log dir above this one, a run folder
    names = ["--exp-name", "x" * 128, "--tag", "linux-h200.v2", "--log-dir", "../runs/./s3:x"]
    args = bookkeeping.check_args(
        script_module(framework).Args, [*names, "--resume", str(tmp_path)]
    )
    assert args.exp_name == "x" * 128 and args.log_dir == "../runs/./s3:x"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_float_flag_is_checked_for_nan_and_infinity(framework):
    """Not only the flags named above: any float field of Args that a future edit adds is checked
    too."""
    args_type = script_module(framework).Args
    floats = [name for name, value in vars(args_type()).items() if isinstance(value, float)]
    assert {"learning_rate", "gamma", "max_grad_norm"} <= set(floats)
    for name in floats:
        for bad in ("nan", "inf", "-inf"):
            flag = f"--{name.replace('_', '-')}"
            assert flag in refusal(framework, [flag, bad])


@pytest.mark.parametrize(
    "case", ["learning rate nan", "gamma 2", "clip coef -1", "seed past the generators"]
)
@pytest.mark.parametrize("framework", FIRST_FAST)
def test_a_script_refuses_nonsense_with_exit_2_and_no_folder(framework, case, tmp_path):
    argv, words = NONSENSE[case]
    log_dir = tmp_path / "runs"
    proc = run_script(
        STUDY.frameworks[framework].script, *TINY, *argv, log_dir=log_dir, timeout=120
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --"), proc.stderr[-3000:]
    assert all(word in lines[0] for word in words), lines[0]
    assert not log_dir.exists()


@pytest.mark.parametrize("case", ["a batch no machine holds", "W&B project with / ? #"])
def test_the_bookkeeping_refuses_before_any_folder(case, tmp_path):
    argv, words = BOOKKEEPING_REFUSALS[case]
    log_dir = tmp_path / "runs"
    proc = run_script(STUDY.frameworks[FRAMEWORKS[0]].script, *argv, log_dir=log_dir, timeout=120)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(proc.stderr.strip().splitlines()) == 1 and all(word in proc.stderr for word in words)
    assert not log_dir.exists()


# four processes of the copy, each importing JAX before its Args refuses: 25 s on 2 busy cores
@pytest.mark.slow
@pytest.mark.parametrize("framework", FIRST_FAST)
def test_the_stripped_copy_still_refuses_nonsense(framework, tmp_path):
    """The starter (./setup.sh starter) takes the bookkeeping away; Args keeps the checks: one line,
    exit 2."""
    copy = stripped_copy(framework, tmp_path / "alone")
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": ""}
    for flags in (
        ["--learning-rate", "nan"],
        ["--gamma", "2"],
        ["--max-grad-norm", "-1"],
        ["--seed", "-5"],
    ):
        log_dir = tmp_path / "runs"
        cmd = [sys.executable, str(copy), *TINY, *flags, "--log-dir", str(log_dir)]
        proc = subprocess.run(
            cmd, cwd=copy.parent, capture_output=True, text=True, timeout=300, env=env
        )
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert flags[0] in proc.stderr and flags[1] in proc.stderr
        assert not log_dir.exists()


# --------------------------------------------------------------------------------------- JSON files
def strict_json(text: str):
    """json.loads that refuses NaN and Infinity, which are not JSON."""

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_write_json_writes_null_for_nan_and_infinity(tmp_path):
    path = tmp_path / "summary.json"
    bookkeeping.write_json(
        str(path), {"a": math.nan, "b": [1.0, math.inf], "c": {"d": -math.inf}, "e": 2.5}
    )
    assert strict_json(path.read_text()) == {
        "a": None,
        "b": [1.0, None],
        "c": {"d": None},
        "e": 2.5,
    }


def test_one_timed_step_gives_no_std_and_no_nan(tmp_path):
    """env_timing --timed-steps 1: a standard deviation of one sample does not exist; it is written
    as null."""
    summary = env_timing.summarise(np.array([1.5]))
    assert summary["std_ms"] is None and summary["ms_per_step"] == 1.5
    path = tmp_path / "timing.json"
    bookkeeping.write_json(str(path), {"envs": {"CartPole-v1": summary}})
    assert strict_json(path.read_text())["envs"]["CartPole-v1"]["std_ms"] is None


def test_env_timing_refuses_an_empty_out_and_a_seed_out_of_range(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="--out ''"):
        env_timing.check_out_file("", ["CartPole-v1"])
    args = env_timing.Args(envs=("CartPole-v1",), seed=2**31)
    with pytest.raises(ValueError, match=f"--seed must .* got {2**31}"):
        env_timing.check_timing_args(args, ["CartPole-v1"])
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ what every agent of a run needs
def test_the_batch_memory_check_counts_every_agent():
    """64 x 64 samples fit one agent; as many agents as make them more than the machine holds are
    refused, naming --num-agents (issue 66 item 7: they were accepted)."""
    from core import run_checks

    per_agent = run_checks.batch_bytes("small", 64 * 64, 4)
    _, memory, base = run_checks.memory_limits()[0]
    agents = (memory - base) // per_agent + 1
    argv = ["--num-envs", "64", "--num-steps", "64", "--num-minibatches", "4"]
    assert bookkeeping.check_args(script_module("linen").Args, argv).num_agents == 1
    message = refusal("linen", [*argv, "--num-agents", str(agents)])
    assert f"x --num-agents {agents} = {agents * 64 * 64:,} samples: too many" in message


@pytest.mark.parametrize("limit", ["RLIMIT_AS", "RLIMIT_DATA"])
def test_the_batch_memory_check_holds_the_process_to_its_own_limits(monkeypatch, limit):
    """The audit's run (issue 79 item 6): 64 agents x 1024 envs x 256 steps passed the check under
    `ulimit -v 4000000` (1.07 GB estimated, against the machine's memory), then failed with XLA's
    RESOURCE_EXHAUSTED (8,875,492,272 bytes) and a failed run folder. With the process's own limit
    below the run's measured need: refused in one line naming the limit (bookkeeping: exit 2, before
    the run folder); without the limit, the machine's memory (here, more) decides."""
    import resource

    from core import run_checks

    argv = ["--num-agents", "64", "--num-envs", "1024", "--num-steps", "256"]
    real = resource.getrlimit
    if run_checks.memory_limits()[0][0] != "this machine's memory":
        pytest.skip("an accelerator: the batch is in its memory")
    need = run_checks.RUN_BYTES + run_checks.batch_bytes("small", 64 * 1024 * 256, 8)
    if need <= run_checks.memory_limits()[0][1]:  # the machine holds it
        bookkeeping.check_args(script_module("linen").Args, argv)
    soft = 4_000_000 * 1024  # ulimit's kB
    kind = getattr(resource, limit)
    monkeypatch.setattr(
        resource,
        "getrlimit",
        lambda which: (soft, real(which)[1]) if which == kind else real(which),
    )
    message = refusal("linen", argv)
    flag = {"RLIMIT_AS": "-v", "RLIMIT_DATA": "-d"}[limit]
    assert message.startswith("--num-envs 1024 x --num-steps 256 x --num-agents 64 = 16,777,216")
    assert f"(ulimit {flag}, {limit}) is 3.8 GiB" in message and "\n" not in message


def test_the_cgroups_memory_limit_is_read_where_it_is(tmp_path):
    """cgroup v2's memory.max and v1's memory.limit_in_bytes of this process's cgroup; "max" and
    v1's near 2**63 are no limit."""
    from core import run_checks

    own = tmp_path / "cgroup"
    own.write_text("0::/a/b\n")
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "memory.max").write_text("4294967296\n")
    assert run_checks.cgroup_memory_max(own, tmp_path) == 2**32
    (tmp_path / "a" / "b" / "memory.max").write_text("max\n")
    assert run_checks.cgroup_memory_max(own, tmp_path) is None
    own.write_text("4:memory:/c\n0::/\n")
    (tmp_path / "memory" / "c").mkdir(parents=True)
    (tmp_path / "memory" / "c" / "memory.limit_in_bytes").write_text("1073741824\n")
    assert run_checks.cgroup_memory_max(own, tmp_path) == 2**30
    (tmp_path / "memory" / "c" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert run_checks.cgroup_memory_max(own, tmp_path) is None


def test_a_run_of_many_agents_opens_no_more_files_than_a_run_of_one(tmp_path):
    """One events file holds every agent's scalars (agent_k/ tags): 400 agents train under
    `ulimit -n 300` (with a writer per agent they were refused, or failed part-way), and the run
    folder holds one events file."""
    import resource

    def few_files():
        resource.setrlimit(resource.RLIMIT_NOFILE, (300, 300))

    log_dir = tmp_path / "runs"
    argv = ["--num-envs", "1", "--num-steps", "8", "--num-minibatches", "1", "--num-agents", "400"]
    argv += ["--num-iterations", "1", "--update-epochs", "1"]
    script = str(ROOT / STUDY.frameworks[FRAMEWORKS[0]].script)
    proc = subprocess.run(
        [sys.executable, script, *argv, "--log-dir", str(log_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=few_files,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = log_dir.iterdir()
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1
    assert not list(run_dir.glob("agent_*"))
    scalars = read_scalars(run_dir)
    assert {f"agent_{k}/losses/value_loss" for k in range(400)} <= set(scalars.columns)


# ------------------------------------------------------ names that become paths (issue 79 item 4)
def test_the_longest_run_name_fits_a_folder_name():
    """--exp-name's 128 bytes leave room for the rest of the run folder's name within NAME_MAX (255
    bytes): the longest env id the scripts know, framework, model size, compile mode, seed, unix
    time and a suffix for a name taken (a 300-character name failed after --log-dir was made)."""
    from dataclasses import fields
    from typing import get_args

    import gymnax

    import env_adapters

    envs = [*env_adapters.ENVPOOL_ENVS, *env_adapters.adapted_envs(), *gymnax.registered_envs]
    book = bookkeeping.Bookkeeping.__new__(bookkeeping.Bookkeeping)
    for framework in FRAMEWORKS:
        args_type = script_module(framework).Args
        types = {field.name: field.type for field in fields(args_type)}
        longest = {name: max(get_args(types[name]), key=len) for name in ("compile", "model_size")}
        # the longest seed and number of agents (each 10 digits) that fit 2**31 together
        agents = dict(seed=2**30 - 1, num_agents=2**30)
        args = args_type(env=max(envs, key=len), exp_name="é" * 64, **agents, **longest)
        assert len(os.fsencode(book.run_name(args, framework) + "-999")) <= 255


@pytest.mark.parametrize(
    "argv",
    [
        ["--exp-name", "/../../escaped"],
        ["--exp-name", "x" * 300],
        ["--log-dir", "s3:"],
        ["--resume", ""],
        ["--resume", "None"],
    ],
    ids=["exp name a path", "exp name of 300", "log dir s3:", "resume ''", "resume None"],
)
def test_a_name_that_would_be_a_path_is_refused_before_the_imports(tmp_path, argv):
    """Before any folder, and before JAX (core/command_line.py's before_imports): --exp-name
    "/../../escaped" wrote the run outside --log-dir (exit 0), "x" * 300 failed after making
    --log-dir, s3: went to tensorboardX's S3 writer, and --resume "" or None trained anew."""
    log_dir = tmp_path / "deep" / "runs"
    script = str(ROOT / STUDY.frameworks[FRAMEWORKS[0]].script)
    cmd = [sys.executable, "-X", "importtime", script, "--log-dir", str(log_dir), *argv]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("import time:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {argv[0]} must be "), errors
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    assert not {"jax", "flax", "torch"} & imported
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------- the environment's variables (issue 79 item 7)
def test_a_wandb_mode_that_wandb_refuses_is_one_line_with_track(monkeypatch):
    """WANDB_MODE=bogus --track was a 34-line pydantic traceback after the run folder was made."""
    monkeypatch.setenv("WANDB_MODE", "bogus")
    message = refusal("linen", ["--track"])
    assert "WANDB_MODE='bogus'" in message and "offline" in message and "\n" not in message
    # without --track W&B never reads it; a mode W&B takes is taken
    bookkeeping.check_args(script_module("linen").Args, [])
    monkeypatch.setenv("WANDB_MODE", "offline")
    bookkeeping.check_args(script_module("linen").Args, ["--track"])


def test_the_wandb_modes_are_wandbs_own():
    from typing import get_args

    from wandb.sdk.wandb_settings import Settings

    from core import run_checks

    assert set(run_checks.WANDB_MODES) == set(get_args(Settings.model_fields["mode"].annotation))


@pytest.mark.parametrize(
    "value, why",
    [
        ("garbage", "does not start with --"),
        ("  xla_dump_to=/tmp/x", "does not start with --"),
        ("--xla_cpu_enable_fast_math=false -xla_dump_to=/tmp/x", "--name=value"),
    ],
)
def test_an_xla_flags_that_xla_would_die_on_is_one_line(monkeypatch, value, why):
    """XLA_FLAGS=garbage ended the process with XLA's own fatal line when JAX started (XLA reads a
    value without a leading -- as a file of flags); refused by check_environment, which the scripts
    call before JAX starts (bookkeeping.exit_on_bad_environment)."""
    from core import run_checks

    monkeypatch.setenv("XLA_FLAGS", value)
    with pytest.raises(ValueError) as refused:
        run_checks.check_environment()
    message = str(refused.value)
    assert message.startswith(f"XLA_FLAGS={value!r}: ") and why in message and "\n" not in message


def test_an_xla_flags_that_xla_takes_is_taken(tmp_path):
    """Flags, nothing, or the name of a file of flags (which XLA reads)."""
    from core import run_checks

    flags = tmp_path / "xla_flags.txt"
    flags.write_text("--xla_cpu_enable_fast_math=false\n")
    for value in ("", "  --xla_dump_to=/tmp/x --xla_cpu_enable_fast_math=false", str(flags)):
        run_checks.check_xla_flags(value)

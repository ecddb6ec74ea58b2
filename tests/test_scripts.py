"""End-to-end and unit tests of the PPO scripts, written once and parametrised over the study's
frameworks.

A new framework is one [frameworks.*] entry in study.toml plus its script: these tests pick it up
from there.
"""

import importlib
import json
import os
import signal
import struct
from typing import get_args, get_type_hints

import numpy as np
import pytest
from env_contracts import one_iteration
from script_runs import (
    EPISODIC_TAGS,
    FAST_COMPILE,
    FIRST_FAST,
    FRAMEWORKS,
    NO_EPISODE_IN_TINY_RUN,
    assert_one_line_refusal,
    check_tiny_run,
    default_mode,
    script,
    start,
    wait_for,
)
from tbparse import SummaryReader

import env_normalize
from helpers import (
    ROOT,
    STUDY,
    TINY,
    numpy_gae,
    only_run_dir,
    read_json,
    read_scalars,
    run_script,
    scalar_series,
)

MODES = [(name, mode) for name, fw in STUDY.frameworks.items() for mode in fw.compile]


@pytest.mark.slow
# continuous; discrete: the sweep tests run every mode
@pytest.mark.parametrize("env_id", ["Pendulum-v1"])
@pytest.mark.parametrize("framework,compile_mode", MODES)
def test_tiny_run_every_compile_mode(framework, compile_mode, env_id, log_dir):
    """The whole run-output contract in every compile mode, with env_normalize.py's observation and
    reward normalisation (config.json records both flags). Pendulum-v1's episodes last 200 steps:
    none ends in 3 x 16 steps, so no episodic point (and no NaN warning), and no final return."""
    args = [*TINY, "--env", env_id, "--compile", compile_mode, "--norm-obs", "--norm-reward"]
    proc = run_script(script(framework), *args, log_dir=log_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "iter 3/3" in proc.stdout and "completed" in proc.stdout
    run_dir, summary = check_tiny_run(log_dir, framework, compile_mode, env_id, args)
    config = read_json(run_dir / "config.json")
    assert config["norm_obs"] is True and config["norm_reward"] is True
    # a Gaussian policy: one action dimension, log std 0 at the start
    entropy = scalar_series(run_dir, "losses/entropy")[0][1]
    assert entropy == pytest.approx(0.5 + 0.5 * np.log(2 * np.pi), abs=0.02)
    assert not set(EPISODIC_TAGS) & set(read_scalars(run_dir).columns)
    assert summary["final_return"] is None
    # tensorboardX's warning for a NaN scalar
    assert "NaN or Inf" not in proc.stdout + proc.stderr


# --dtype bfloat16 in a process, each script: test_track_writes_offline_wandb_run, whose runs are
# bfloat16 ones


@pytest.mark.slow
# a JAX scan and torch's loop: ~90 s of compile each
@pytest.mark.parametrize("framework", ["linen", "torch"])
def test_tiny_run_brax(framework, log_dir):
    """An expensive continuous env, through the Brax adapter of env_adapters.py: the whole
    run-output contract, in the script's fastest compile mode (torch.compile's own minute is
    test_tiny_run_every_compile_mode's)."""
    mode = FAST_COMPILE[framework]
    args = [*TINY, "--env", "brax-halfcheetah", "--compile", mode]
    proc = run_script(script(framework), *args, log_dir=log_dir, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_tiny_run(log_dir, framework, mode, "brax-halfcheetah", args)


@pytest.mark.slow
def test_tiny_run_craftax(log_dir):
    """An expensive env, through the Craftax adapter of the env glue, in a process: the whole
    run-output contract holds. The other scripts' Craftax iteration: test_one_iteration_on_each_env
    (the adapter's steps in each script's glue: test_craftax.py)."""
    args = [*TINY, "--env", "Craftax-Classic-Symbolic-v1"]
    proc = run_script(script("linen"), *args, log_dir=log_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_tiny_run(log_dir, "linen", default_mode("linen"), "Craftax-Classic-Symbolic-v1", args)


# each env's kind: flattened (10, 10, 4) MinAtar images; two normalised action dimensions; Craftax's
# 1345 symbolic features and 17 actions (its compile: ~45 s a script)
ENV_CASES = {
    "Breakout-MinAtar": (400, 3, False),
    "Reacher-misc": (8, 2, True),
    "Craftax-Classic-Symbolic-v1": (1345, 17, False),
}


# in the quick set: the first script's cheap envs (a few seconds each)
@pytest.mark.parametrize(
    "framework,env_id",
    [
        pytest.param(f, e, marks=() if f == FRAMEWORKS[0] else pytest.mark.slow)
        if not e.startswith("Craftax")
        else pytest.param(f, e, marks=pytest.mark.slow)
        for e in ENV_CASES
        for f in FRAMEWORKS
        if (f, e) != ("linen", "Craftax-Classic-Symbolic-v1")
    ],
)
def test_one_iteration_on_each_env(framework, env_id):
    """What a tiny run of the script on the env proves, in-process (env_contracts.one_iteration:
    the script's own make_env, rollout and update; a process's own contract is alike for every env,
    held by test_tiny_run_every_compile_mode): the batch's shapes and dtypes, the env's action kind,
    the episode statistics, finite losses, an agent that learned; Reacher-misc with --norm-obs and
    --norm-reward's wrapper."""
    obs_dim, num_actions, continuous = ENV_CASES[env_id]
    it = one_iteration(framework, env_id, norm=env_id == "Reacher-misc")
    assert it.spec == (obs_dim, num_actions, continuous)
    batch, size = it.batch, 64
    assert batch["obs"].shape == (size, obs_dim) and batch["obs"].dtype == np.float32
    if continuous:
        assert batch["actions"].shape == (size, num_actions)
        assert batch["actions"].dtype == np.float32
        # normalised observations, clipped
        assert np.abs(batch["obs"]).max() <= env_normalize.CLIP
    else:
        assert batch["actions"].shape == (size,) and batch["actions"].dtype == np.int32
        assert 0 <= batch["actions"].min() and batch["actions"].max() < num_actions
    for key in ("obs", "actions", "logprobs", "values", "advantages", "returns"):
        assert batch[key].shape[0] == size and np.isfinite(batch[key]).all(), key
    # no episode ends in 16 steps but in MinAtar's: NaN statistics, which main() does not log
    stats = it.episode_stats
    if env_id in NO_EPISODE_IN_TINY_RUN:
        assert np.isnan(stats["episodic_return"]) and np.isnan(stats["episodic_length"]), stats
    else:
        assert np.isfinite(stats["episodic_return"]) and 1 <= stats["episodic_length"] <= 16
    losses = ("value_loss", "policy_loss", "entropy", "approx_kl", "old_approx_kl", "clipfrac")
    assert all(np.isfinite(it.losses[key]) for key in losses), it.losses
    # at the start: a uniform categorical; a Gaussian of log std 0 in each action dimension
    per_dim = 0.5 + 0.5 * np.log(2 * np.pi)
    expected = num_actions * per_dim if continuous else np.log(num_actions)
    assert it.losses["entropy"] == pytest.approx(expected, abs=0.02 * num_actions)
    # every actor layer's kernel moved in the update
    for (kernel, _), (kernel_before, _) in zip(it.after["actor"], it.before["actor"], strict=True):
        assert not np.array_equal(kernel, kernel_before)


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_learns_cartpole(framework, log_dir):
    """The default (benchmark) configuration solves CartPole-v1 within 100 iterations."""
    proc = run_script(script(framework), "--env", "CartPole-v1", log_dir=log_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = only_run_dir(log_dir)
    summary = read_json(run_dir / "summary.json")
    assert summary["final_return"] >= 400, summary
    # final_return is the mean episodic return of the last 10 iterations, as logged
    returns = [value for _, value in scalar_series(run_dir, "charts/episodic_return")][-10:]
    assert summary["final_return"] == pytest.approx(np.mean(returns), rel=1e-6)


def readme_recipe(env_id: str) -> list[str]:
    """The flags of README.md's command line that learns env_id (the same flags in every script)."""
    for line in (ROOT / "README.md").read_text().splitlines():
        words = line.split("#")[0].split()
        if words[:2] == ["python", "ppo_linen.py"] and words[2:4] == ["--env", env_id]:
            return words[2:]
    raise AssertionError(f"README.md has no `python ppo_linen.py --env {env_id} ...` line")


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["linen", "torch"])
def test_learns_pendulum_with_the_readme_command(framework, log_dir):
    """A Gaussian policy: README.md's Pendulum-v1 command reaches a return above -400 within 500k
    steps. Seed 2: PPO on Pendulum-v1 is seed-sensitive, and torch's seed 1 plateaus near -580
    (measured, final returns of seeds 1, 2, 3: Linen -172, -210, -209; torch -576, -179, -235)."""
    args = [*readme_recipe("Pendulum-v1"), "--seed", "2"]
    proc = run_script(script(framework), *args, log_dir=log_dir, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = only_run_dir(log_dir)
    config, summary = read_json(run_dir / "config.json"), read_json(run_dir / "summary.json")
    assert config["batch_size"] * config["num_iterations"] <= 500_000
    assert summary["final_return"] > -400, summary


# ------------------------------------------------------------------------------------- bad input
BAD_INPUTS = {
    "unknown env": (["--env", "Nope-v9"], ["Nope-v9", "CartPole-v1", "Breakout-MinAtar"]),
    "env that needs a download": (
        ["--env", "MNISTBandit-bsuite"],
        ["MNISTBandit-bsuite", "cannot be made"],
    ),
    "minibatches": (["--num-minibatches", "7"], ["7", "8192"]),
    "zero envs": (["--num-envs", "0"], ["--num-envs", "0"]),
    "not a number (tyro's box, as one line)": (["--num-envs", "abc"], ["--num-envs", "abc"]),
    "negative iterations": (["--num-iterations", "-1"], ["--num-iterations", "-1"]),
    "model size": (
        ["--model-size", "huge"],
        ["--model-size", "huge", "'small', 'medium', 'large'"],
    ),
    "model size, underscore and =": (["--model_size=huge"], ["huge", "'small', 'medium', 'large'"]),
    "compile mode": (["--compile", "fast"], ["--compile", "fast"]),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
@pytest.mark.parametrize("framework", FIRST_FAST)
def test_bad_input_is_refused_in_one_line_before_any_work(framework, case, log_dir):
    args, words = BAD_INPUTS[case]
    proc = run_script(script(framework), *args, log_dir=log_dir, timeout=120)
    if case == "compile mode":
        words = [*words, *STUDY.frameworks[framework].compile]
    assert_one_line_refusal(proc, words)
    assert not log_dir.exists(), "a run folder was created for bad input"
    if case == "unknown env":  # the ids the scripts know (core/env_ids.py), and no envpool one
        known = proc.stderr.split("those are")[1]
        assert "Pendulum-v1" in known and "brax-halfcheetah" in known and "Hopper-v4" not in known


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_an_action_space_neither_discrete_nor_box_is_refused_naming_the_kinds(
    framework, monkeypatch
):
    """gymnax has no such env, so one is made here: CartPole-v1 with a Tuple action space."""
    import gymnax

    env, params = gymnax.make("CartPole-v1")
    spaces = gymnax.environments.spaces
    tuple_space = spaces.Tuple([spaces.Discrete(2), spaces.Discrete(2)])
    monkeypatch.setattr(type(env), "action_space", lambda self, params=None: tuple_space)
    module = importlib.import_module(script(framework)[:-3])
    with pytest.raises(ValueError) as refusal:
        module.make_env("CartPole-v1")
    message = str(refusal.value)
    assert "\n" not in message and "'CartPole-v1'" in message
    assert "Tuple" in message and "Discrete" in message and "Box" in message


@pytest.mark.parametrize("framework", FIRST_FAST)
def test_log_dir_that_cannot_hold_runs_is_refused(framework, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    for log_dir in (a_file, a_file / "runs"):  # a file; a folder under a file
        proc = run_script(script(framework), *TINY, log_dir=log_dir, timeout=120)
        assert_one_line_refusal(proc, [str(a_file)])
        assert sorted(tmp_path.iterdir()) == [a_file] and a_file.read_text() == "not a folder"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_compile_choices_match_the_study(framework):
    module = importlib.import_module(script(framework)[:-3])
    choices = get_args(get_type_hints(module.Args)["compile"])
    study_modes = STUDY.frameworks[framework].compile
    # beyond them, only ppo_torch.py's cudagraphs: refused without a GPU, so not in the study's
    # static list
    assert choices[: len(study_modes)] == study_modes and set(choices[len(study_modes) :]) <= {
        "cudagraphs"
    }
    assert module.Args().compile == STUDY.frameworks[framework].default_compile


# ---------------------------------------------------------------------------------------- signals


# when (a line of output), which signals, SIGINT ignored from the start (a background job)
SIGNAL_CASES = {
    "SIGINT during compilation": (": setup ", [signal.SIGINT], False),
    "SIGTERM during compilation": (": setup ", [signal.SIGTERM], False),
    # SIGTERM after iterations, each script (its summary, its iterations' events):
    # test_resume.py's test_a_stopped_and_resumed_run_ends_as_an_uninterrupted_one
    "SIGINT after iterations, SIGINT inherited ignored": ("iter 3/", [signal.SIGINT], True),
    # SIGHUP (a closed terminal) stops a run as the others do
    "a second signal": (": setup ", [signal.SIGHUP, signal.SIGINT], False),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", SIGNAL_CASES)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_signal_stops_the_run_with_a_summary(framework, case, log_dir):
    moment, signals, ignore_sigint = SIGNAL_CASES[case]
    # a signal during compilation: in the default mode's (torch.compile's own workers); after
    # iterations, the fastest mode's run is as good a run to stop
    mode = default_mode(framework) if moment == ": setup " else FAST_COMPILE[framework]
    proc = start(
        framework,
        *TINY[:4],
        "--num-iterations",
        "100000",
        "--compile",
        mode,
        log_dir=log_dir,
        ignore_sigint=ignore_sigint,
    )
    try:
        wait_for(proc, moment)
        for signum in signals:
            proc.send_signal(signum)
        proc.wait(timeout=300)
    finally:
        proc.kill()
        proc.wait()
    output = "".join(proc.output)
    assert proc.returncode == 130, output[-3000:]
    if moment == ": setup " and not log_dir.exists():
        # stopped within iteration 0, which compiles: nothing ran, and no folder is left (issue 54
        # item 13)
        assert "interrupted before the first iteration: nothing ran" in output, output[-3000:]
        return
    run_dir = only_run_dir(log_dir)
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "interrupted", summary
    assert sorted(summary["signals"]) == sorted(signal.Signals(s).name for s in signals)
    assert summary["total_s"] > summary["setup_s"] > 0
    # or stopped in iteration 1, had iteration 0 compiled already
    if moment == ": setup ":
        assert summary["iterations_completed"] == 1, summary
        SummaryReader(str(run_dir)).tensors  # the events are readable
    else:
        assert summary["iterations_completed"] >= 3
        steps = [step for step, _ in scalar_series(run_dir, "time/iteration")]
        assert steps[:3] == [64, 128, 192] and len(steps) == summary["iterations_completed"]


# -------------------------------------------------------------------------------------------- W&B
def wandb_records(path):
    """The records of an offline .wandb file, as (kind, record): LevelDB-log framing around protobuf
    records."""
    from wandb.proto import wandb_internal_pb2 as pb

    # a 7-byte file header, then 32 KiB blocks
    data, pos, payload, block = (path.read_bytes(), 7, b"", 32768)
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a record header is padding
            pos += block - pos % block
            continue
        length, kind = struct.unpack("<HB", data[pos + 4 : pos + 7])
        payload, pos = payload + data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 4):  # a full record, or the last fragment of one
            record = pb.Record()
            record.ParseFromString(payload)
            payload = b""
            yield record.WhichOneof("record_type"), record


def wandb_history(records) -> list[dict]:
    """Each history row of the records as {key: value}, W&B's own keys (_step, _runtime, ...)
    included."""
    rows = []
    for kind, record in records:
        if kind == "history":
            items = record.history.item
            rows.append({item.key or "/".join(item.nested_key): item.value_json for item in items})
    return rows


@pytest.mark.slow
@pytest.mark.parametrize(  # each framework once, --exp-name given in half the runs
    "framework,exp_name",
    [(framework, (None, "exp9")[i % 2]) for i, framework in enumerate(FRAMEWORKS)],
)
def test_track_writes_offline_wandb_run(framework, exp_name, tmp_path, monkeypatch):
    """--track: W&B's offline run holds the run's config.json and every scalar of its events. The
    run is a bfloat16 one: --dtype bfloat16 keeps the whole run contract, in the script's fastest
    compile mode; config.json records it, and the CPU's bfloat16 instructions. The other modes'
    bfloat16 steps are checked in-process (test_parity_bf16: torch's compiled update, its traced
    rollouts against the eager one; a JAX mode only wraps the same functions)."""
    mode = FAST_COMPILE[framework]
    args = [*TINY, "--env", "CartPole-v1", "--compile", mode, "--dtype", "bfloat16"]
    args += ["--track", "--tag", "machine-a"] + (["--exp-name", exp_name] if exp_name else [])
    env = {"WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    # a relative --log-dir, from another working folder: W&B once synced its own copies of the
    # events found there, over and over
    proc = run_script(script(framework), *args, log_dir="runs", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the command's relative --log-dir, from its working folder
    monkeypatch.chdir(tmp_path)
    check_tiny_run("runs", framework, mode, "CartPole-v1", args, exp_name)
    run_dir = only_run_dir(tmp_path / "runs")
    config = read_json(run_dir / "config.json")
    assert config["dtype"] == "bfloat16" and "cpu_bf16" in config
    assert len(list((tmp_path / "runs").iterdir())) == 1
    assert len(list(run_dir.rglob("events.out.tfevents.*"))) == 1, list(run_dir.rglob("*"))[:20]
    offline_runs = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 1, list(run_dir.rglob("*"))[:20]
    records = list(wandb_records(next(offline_runs[0].glob("*.wandb"))))
    run = next(record.run for kind, record in records if kind == "run")
    # the experiment (the script's name when not given) and the env
    assert run.run_group == f"{exp_name or 'ppo_' + framework}__CartPole-v1"
    assert list(run.tags) == [framework, "small", "CartPole-v1", "gymnax", mode]
    # config.json is the W&B config
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    assert (
        config["framework"] == framework
        and config["tag"] == "machine-a"
        and config["command"][-1] == "runs"
    )
    assert config["device_name"] == read_json(run_dir / "config.json")["device_name"]
    # one history row per iteration, at its global step, holding what TensorBoard holds
    history = wandb_history(records)
    scalars = read_scalars(run_dir)
    assert [int(row["_step"]) for row in history] == list(scalars["step"]) == [64, 128, 192]
    for row, (_, logged) in zip(history, scalars.set_index("step").iterrows()):
        logged = logged.dropna()
        assert {key for key in row if not key.startswith("_")} == set(logged.index)
        for tag, value in logged.items():
            assert json.loads(row[tag]) == pytest.approx(value, rel=1e-6, nan_ok=True)


# ------------------------------------------------------------------------------------------ GAE
def to_framework(module, array):
    if module.FRAMEWORK == "torch":
        import torch

        return torch.as_tensor(array)
    import jax.numpy as jnp

    return jnp.asarray(array)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gae_matches_numpy_reference(framework):
    module = importlib.import_module(script(framework)[:-3])
    rng = np.random.default_rng(0)
    steps, envs = 12, 3
    rewards = rng.normal(size=(steps, envs)).astype(np.float32)
    values = rng.normal(size=(steps, envs)).astype(np.float32)
    final_values = rng.normal(size=(steps, envs)).astype(np.float32)
    terminated = np.zeros((steps, envs), bool)
    truncated = np.zeros((steps, envs), bool)
    terminated[4, 0] = terminated[9, 1] = True
    truncated[6, 0] = truncated[2, 2] = True
    terminated[11, 2] = True  # the last step of the rollout

    expected = numpy_gae(rewards, values, final_values, terminated, truncated, 0.99, 0.95)
    args = [to_framework(module, x) for x in (rewards, values, final_values, terminated, truncated)]
    advantages, returns = module.compute_gae(*args, 0.99, 0.95)
    np.testing.assert_allclose(np.asarray(advantages), expected[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(returns), expected[1], rtol=1e-5, atol=1e-5)

    # The truncated step bootstraps from its final value; a terminated one ignores it.
    bumped = final_values.copy()
    bumped[6, 0] += 1.0
    bumped[4, 0] += 1.0
    args[2] = to_framework(module, bumped)
    advantages_bumped, _ = module.compute_gae(*args, 0.99, 0.95)
    diff = np.asarray(advantages_bumped) - np.asarray(advantages)
    assert diff[6, 0] == pytest.approx(0.99, rel=1e-5)
    assert diff[5, 0] == pytest.approx(0.99 * 0.99 * 0.95, rel=1e-4)
    assert diff[4, 0] == 0.0


def test_torch_device_cuda_without_gpu_is_refused(log_dir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    proc = run_script("ppo_torch.py", "--device", "cuda", log_dir=log_dir, timeout=120)
    assert_one_line_refusal(proc, ["--device cuda", "cpu"])
    assert not log_dir.exists()


def test_torch_cudagraphs_without_gpu_is_refused(log_dir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    proc = run_script("ppo_torch.py", "--compile", "cudagraphs", log_dir=log_dir, timeout=120)
    assert_one_line_refusal(proc, ["--compile cudagraphs", "GPU", "--compile compile"])
    assert not log_dir.exists()


@pytest.mark.slow
def test_torch_compile_never_recompiles_after_iteration_0(log_dir):
    """--compile compile: the whole minibatch step (and on a GPU the policy step) compiles in
    iteration 0 and is never recompiled (the annealed learning rate is a tensor set in place);
    TORCH_LOGS reports any recompile."""
    args = [*TINY, "--num-iterations", "4", "--env", "CartPole-v1", "--compile", "compile"]
    proc = run_script(
        "ppo_torch.py", *args, log_dir=log_dir, env={"TORCH_LOGS": "recompiles,graph_breaks"}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Recompiling function" not in proc.stderr, proc.stderr[-3000:]
    # the log is on: torch.optim's step breaks the graph by design
    assert "Graph break in user code" in proc.stderr
    config = read_json(only_run_dir(log_dir) / "config.json")
    assert config["torch_threads"] == 1 and config["cpu_affinity"] == sorted(
        os.sched_getaffinity(0)
    )

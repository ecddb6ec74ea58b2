"""--save-every and --resume (core/resuming.py's resume file, issue 55 item 7): a run stopped by a
signal and resumed in its folder ends with the same state as the same run uninterrupted: parameters,
Adam's moments and step, the envs' state with the normalisation statistics, the random keys. The JAX
scripts match bit for bit; so does ppo_torch.py on one machine here, but torch promises no
bit-for-bit reduction order when its thread count changes (its thread governor may change it between
the two processes), so its tolerance is float32 rounding over a few optimizer steps, 1e-5. Every bad
--resume is refused in one line, exit code 2, with nothing written."""

import shutil
import signal
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from checkpoints import Runner, resume_flags, stats_count, stopped_folder
from script_runs import (
    FAST_COMPILE,
    RUN,
    TAGS,
    arrays,
    interrupted,
    run,
    stopped_after_first_save,
)

import atomic
import checkpoint
from core import event_files, resuming, saving
from evaluation import model_file
from helpers import STUDY, only_run_dir, read_json, read_scalars, scalar_series

FRAMEWORKS = list(STUDY.frameworks)
ENVS = {
    "discrete": ["--env", "CartPole-v1"],
    "continuous, normalised": ["--env", "Pendulum-v1", "--norm-obs", "--norm-reward"],
}
TOLERANCE = {"torch": 1e-5}  # the JAX scripts: 0, bit for bit


def events_files(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("events.out.tfevents.*"))


# Each framework's continuous, normalised run: its state a superset of a discrete run's (the
# Gaussian's log std, the normalisation's statistics), in the same compile mode for the JAX scripts.
# The discrete run stays for torch alone, whose default compile mode (torch.compile's step) is not
# the fast one; linen's discrete run resumed bit for bit:
# test_the_fast_path_stops_at_a_call_and_resumes_bit_for_bit.
RESUMED = [(framework, "continuous, normalised") for framework in FRAMEWORKS]
RESUMED += [("torch", "discrete")]


@pytest.mark.slow
@pytest.mark.parametrize("framework, env", RESUMED, ids=[f"{f}-{e}" for f, e in RESUMED])
def test_a_stopped_and_resumed_run_ends_as_an_uninterrupted_one(framework, env, tmp_path):
    args = [*RUN, *ENVS[env]]
    if env != "discrete":
        # the discrete run resumes in the default compile mode (torch.compile's step); these, whose
        # point is the normalisation's state, in the fastest (torch.compile: ~1 min a process)
        args += ["--compile", FAST_COMPILE[framework]]
    whole = run(framework, *args, log_dir=tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr[-3000:]
    whole_dir = only_run_dir(tmp_path / "whole")

    # stopped once iteration 2's line is out (saved just before it): the continuous runs by a
    # SIGTERM, at the next boundary, the discrete one by a SIGINT
    signum = signal.SIGINT if env == "discrete" else signal.SIGTERM
    proc = interrupted(framework, args, tmp_path / "stopped", "iter 2/", signum)
    assert proc.returncode == 130, "".join(proc.output)[-3000:]
    run_dir = only_run_dir(tmp_path / "stopped")
    stopped = read_json(run_dir / "summary.json")
    assert stopped["status"] == "interrupted" and 2 <= stopped["iterations_completed"] < 6
    # the signal that stopped it, its times, an iteration's time logged for each one it finished
    # (test_scripts.py's test_signal_stops_the_run_with_a_summary: its other moments and signals)
    assert stopped["signals"] == [signal.Signals(signum).name]
    assert stopped["total_s"] > stopped["setup_s"] > 0
    steps = [step for step, _ in scalar_series(run_dir, "time/iteration")]
    assert steps == [128 * (i + 1) for i in range(stopped["iterations_completed"])]
    saved_at = resuming.read_resume(run_dir).iteration
    assert saved_at in (2, 4)
    # --save-model: the stopped run's checkpoint holds its last finished iteration's policy and
    # normalisation statistics, as many iterations as summary.json counts
    loaded = model_file.load(run_dir)
    assert loaded.meta["iteration"] == stopped["iterations_completed"]
    if env != "discrete":
        count = stats_count(loaded.meta["iteration"], num_envs=4, num_steps=32)
        assert float(loaded.obs_norm["count"]) == pytest.approx(count)
    assert "model.safetensors: the policy of iteration" in "".join(proc.output)
    config_before = (run_dir / "config.json").read_text()

    resumed = run(framework, *args, "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed after iteration {saved_at}" in resumed.stdout
    # the progress goes on from the saved iteration
    assert [
        line.split(" |")[0] for line in resumed.stdout.splitlines() if line.startswith("iter ")
    ] == [f"iter {i}/6" for i in range(saved_at + 1, 7)]

    tolerance = TOLERANCE.get(framework, 0.0)
    for name in (resuming.RESUME_FILE, checkpoint.FILENAME):
        want, got = arrays(whole_dir, name), arrays(run_dir, name)
        assert want.keys() == got.keys()
        for key in want:
            assert want[key].dtype == got[key].dtype, (name, key)
            np.testing.assert_allclose(
                got[key], want[key], rtol=0, atol=tolerance, err_msg=f"{name} {key}"
            )
    # the resumed run is one run in its folder: the first start's config.json, a summary of all 6
    # iterations
    assert (run_dir / "config.json").read_text() == config_before
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "completed" and summary["iterations_completed"] == 6
    assert summary["resumed_at"] == [saved_at]
    assert summary["final_return"] == pytest.approx(
        read_json(whole_dir / "summary.json")["final_return"]
    )
    assert len(events_files(run_dir)) == 2


@pytest.mark.slow
def test_the_fast_path_stops_at_a_call_and_resumes_bit_for_bit(tmp_path):
    """--no-sync-timing: iterations 0 and 1 a call each (the compile, then the pace), then calls of
    2 (a second's at this pace, never past a save of --save-every 2). A SIGINT after iteration 2's
    line stops the run where a call starts, after iteration 2 or 4, never 3, with every scalar of
    each finished iteration logged once; resumed, the run runs iteration 3 (or 5) in a call of its
    own, and ends as the uninterrupted run, bit for bit."""
    args = [*RUN, "--env", "CartPole-v1", "--no-sync-timing"]
    whole = run("linen", *args, log_dir=tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr[-3000:]
    whole_dir = only_run_dir(tmp_path / "whole")
    # read_scalars refuses a scalar logged twice at a step
    scalars = read_scalars(whole_dir)
    steps = [128 * (i + 1) for i in range(6)]
    for tag in TAGS:
        assert scalars[["step", tag]].dropna()["step"].tolist() == steps, tag
    # a call's iterations share its time: iterations 2 and 3 were one call, 4 and 5 another
    times = scalars["time/iteration"].tolist()
    assert times[2] == times[3] and times[4] == times[5] and times[1] != times[2], times

    run_dir = stopped_after_first_save("linen", args, tmp_path / "stopped")
    completed = read_json(run_dir / "summary.json")["iterations_completed"]
    assert completed in (2, 4)
    logged = read_scalars(run_dir)
    for tag in TAGS:
        assert logged[["step", tag]].dropna()["step"].tolist() == steps[:completed], tag
    resumed = run("linen", *args, "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for name in (resuming.RESUME_FILE, checkpoint.FILENAME):
        want, got = arrays(whole_dir, name), arrays(run_dir, name)
        assert want.keys() == got.keys()
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=f"{name} {key}")


SAVED_FLAGS = dict(num_envs=4, num_steps=16, num_iterations=2, save_every=2)
SAVED_ARGS = [w for k, v in SAVED_FLAGS.items() for w in (f"--{k.replace('_', '-')}", str(v))]


@pytest.fixture(scope="module")
def saved_run(trained_run):
    """A finished linen run with a resume file (iteration 2 of 2), trained once for the suite: the
    tests refuse to resume it (so never change it) or resume copies of it."""
    return trained_run("linen", *SAVED_ARGS), SAVED_ARGS


def entries_of(folder: Path) -> dict:
    return {path.name: path.is_file() and path.read_bytes() for path in sorted(folder.iterdir())}


def refused(framework: str, args: list, folder: Path, wanted: str) -> None:
    """One line naming wanted, exit code 2, and the folder as it was."""
    before = entries_of(folder)
    proc = run(framework, *args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: ") and wanted in lines[0], proc.stderr
    assert entries_of(folder) == before


def resume_check(run_dir: Path, **flags) -> str:
    """resuming.check_resumable's refusal of resuming run_dir with saved_run's flags (and flags),
    as ppo_linen.py's Saver checks them before anything is written: its one line; the folder as it
    was. A refusal's exit code 2 with nothing written, in a process:
    test_a_resume_in_another_framework_is_refused."""
    import ppo_linen

    args = ppo_linen.Args(**{**SAVED_FLAGS, **flags, "resume": str(run_dir)})
    config = {**asdict(args), "framework": "linen", "batch_size": args.batch_size}
    before = entries_of(run_dir)
    with pytest.raises(checkpoint.BadCheckpoint) as error:
        resuming.check_resumable(str(run_dir), config)
    assert entries_of(run_dir) == before
    message = str(error.value)
    assert "\n" not in message
    return message


# the shared run: trained for the slow tests alone
@pytest.mark.slow
def test_a_resume_with_other_flags_is_refused(saved_run):
    run_dir, _ = saved_run
    assert "--num-envs 4, not 8" in resume_check(run_dir, num_envs=8)


@pytest.mark.slow
def test_a_resume_in_another_framework_is_refused(saved_run):
    run_dir, args = saved_run
    refused("nnx", [*args, "--resume", str(run_dir)], run_dir, "a linen run, not nnx")


# the shared run: trained for the slow tests alone
@pytest.mark.slow
def test_a_resume_of_a_folder_without_a_resume_file_is_refused(saved_run, tmp_path):
    import ppo_linen

    run_dir, _ = saved_run
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    (copy / resuming.RESUME_FILE).unlink()
    assert "a run saves one with --save-every" in resume_check(copy)
    # no folder at all: the Args refuse it (an Args refusal in a process: exit code 2, nothing made,
    # test_scripts.py's test_bad_input_is_refused_in_one_line_before_any_work)
    with pytest.raises(ValueError, match="--resume must be a run folder"):
        ppo_linen.Args(resume=str(tmp_path / "nowhere"))


# the shared run: trained for the slow tests alone
@pytest.mark.slow
def test_a_truncated_resume_file_is_refused(saved_run, tmp_path):
    run_dir, _ = saved_run
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    data = (copy / resuming.RESUME_FILE).read_bytes()
    (copy / resuming.RESUME_FILE).write_bytes(data[: len(data) // 2])
    assert "not a resume file of --save-every" in resume_check(copy)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize(
    "args, wanted",
    [
        (["--save-every", "-1"], "--save-every must be 0 or more, got -1"),
        (["--save-every", "2", "--env-backend", "envpool"], "--save-every must be 0 with envpool"),
    ],
    ids=["negative", "envpool"],
)
def test_a_bad_save_every_is_refused(framework, args, wanted, tmp_path):
    proc = run(framework, *args, log_dir=tmp_path / "runs")
    assert proc.returncode == 2 and wanted in proc.stderr, proc.stderr[-3000:]
    assert not (tmp_path / "runs").exists()


def saved_state(tmp_path: Path, training, obs) -> saving.Saver:
    """A Saver that saved (training, Runner(None, obs)) after iteration 1 in tmp_path, a return of
    5."""
    config = {
        "framework": "linen",
        "save_every": 1,
        "batch_size": 8,
        "seed": 1,
        "num_iterations": 3,
    }
    saver = saving.Saver(str(tmp_path), config, __file__)
    # the run's flags, as the bookkeeping writes them: --resume checks them
    atomic.write_json(tmp_path / "config.json", config)
    # a script's to_shared of one agent (the leading axis: the agents): (actor, critic, log_std)
    dense = [(np.ones((1, 2, 1), np.float32), np.zeros((1, 1), np.float32))]
    saver.iteration_done((dense, dense, None), Runner(None, obs), [5.0], training)
    return saver


def resumer(saver: saving.Saver) -> saving.Saver:
    return saving.Saver(saver.run_dir, {**saver.config, "resume": saver.run_dir}, __file__)


def test_the_state_comes_back_bit_for_bit_with_its_keys_and_dtypes(tmp_path):
    import jax
    import jax.numpy as jnp

    key = jax.random.key(3)
    weights = jnp.arange(6, dtype=jnp.float32).reshape(2, 3) / 7
    training = {"w": weights, "step": jnp.int32(5), "key": key}
    saver = resumer(saved_state(tmp_path, training, np.arange(4, dtype=np.uint8)))
    fresh = {"w": jnp.zeros((2, 3)), "step": jnp.int32(0), "key": jax.random.key(0)}
    back, runner, start = saver.resume(fresh, Runner(None, np.zeros(4, np.uint8)))
    assert start == 1 and saver.iteration == 1
    assert np.array_equal(back["w"], weights) and back["w"].dtype == jnp.float32
    assert int(back["step"]) == 5
    assert np.array_equal(jax.random.key_data(back["key"]), jax.random.key_data(key))
    assert np.array_equal(runner.obs, np.arange(4, dtype=np.uint8))


def test_a_state_of_another_shape_is_refused(tmp_path):
    import jax.numpy as jnp

    saver = resumer(saved_state(tmp_path, {"w": jnp.zeros((2, 3))}, np.zeros(4)))
    runner = Runner(None, np.zeros(4))
    wrong = r"array 0 is float32 \[2, 3\], not float32 \[3, 3\]"
    with pytest.raises(checkpoint.BadCheckpoint, match=wrong):
        saver.resume({"w": jnp.zeros((3, 3))}, runner)
    with pytest.raises(checkpoint.BadCheckpoint, match="2 arrays, not the 3 of this run's state"):
        saver.resume({"v": jnp.zeros(1), "w": jnp.zeros((2, 3))}, runner)


def test_a_resume_file_keeps_its_returns_and_flags(tmp_path):
    import jax.numpy as jnp

    saved_state(tmp_path, {"w": jnp.zeros(2)}, np.zeros(1))
    resume = resuming.read_resume(tmp_path)
    # each iteration's returns, one per agent
    assert resume.iteration == 1 and resume.returns == ((5.0,),) and resume.resumed_at == ()
    # every flag but where the run runs (a starter's copy continues with them)
    assert resume.flags["seed"] == 1 and resume.flags["save_every"] == 1
    assert "resume" not in resume.flags and "log_dir" not in resume.flags
    with pytest.raises(checkpoint.BadCheckpoint, match="that run has --seed 1, not 2"):
        resuming.read_resume(tmp_path, {"seed": 2})


def test_a_resumed_run_counts_its_time_on_from_the_stopped_runs(tmp_path):
    """resuming.time_before, from which a resumed process's time/elapsed and total_s count on
    (issue 84 item 7: they restarted from 0): the stopped run's summary.json total_s; without one (a
    process killed), the last time/elapsed its events hold up to its save, not after it."""
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.proto.summary_pb2 import Summary
    from tensorboardX.record_writer import RecordWriter

    run_dir = stopped_folder(tmp_path)
    atomic.write_json(run_dir / "summary.json", {"status": "interrupted", "total_s": 42.0})
    assert saving.Saver(str(run_dir), resume_flags(run_dir), __file__).before_s == 42.0
    atomic.release_folder(run_dir)
    (run_dir / "summary.json").unlink()
    writer = RecordWriter(str(next(run_dir.glob("events.out.tfevents.*"))))
    # saved after iteration 1 (step 64); iteration 2 ran on before the process was killed
    for step, elapsed in ((64, 30.5), (128, 31.0)):
        tags = {"time/iteration": 0.5, "time/elapsed": elapsed}
        values = [Summary.Value(tag=tag, simple_value=v) for tag, v in tags.items()]
        writer.write(Event(step=step, summary=Summary(value=values)).SerializeToString())
    writer.close()
    events = event_files.read_run_events(str(run_dir), read_json(run_dir / "config.json"))
    assert resuming.time_before(run_dir, events) == 30.5

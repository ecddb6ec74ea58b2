"""A resume read and checked whole before its first write, and one writer per run folder (issue 79
items 1 and 2). Every case is a run folder that a Saver made without training (checkpoints.py's
stopped_folder: saved after iteration 1 of 12, 64 steps an iteration), spoilt as the audit spoilt a
real one: each refusal is one line (BadCheckpoint, a ValueError: exit code 2) and leaves the folder
byte for byte as it was. A run folder's lock (atomic.hold_folder) refuses a second writer, and
lifts when its process ends, however it ends."""

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest
import tyro
from checkpoints import (
    FLAGS,
    Runner,
    events_file,
    random_checkpoint,
    resume_flags,
    stopped_folder,
)

import atomic
import bookkeeping
import checkpoint
import evaluate
from core import event_files, resuming, saving
from tools.starter import write_starter

# the script whose --resume the framework check is asked of (bookkeeping.with_run_flags reads the
# FRAMEWORK of the Args' module)
FRAMEWORK = "torch"
EVENTS = "events.out.tfevents.1.host.1.0"


def entries(folder) -> dict:
    """Every file under folder, by its path there, with its bytes (a large one: its size and time
    of change)."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        if path.stat().st_size < 2**20
        else (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def stopped_run(tmp_path, logged=(64, 128)):
    """The stopped run: saved after iteration 1, its events at `logged` (iteration 2 logged after
    the save, as a run stopped after it logs it)."""
    run_dir = stopped_folder(tmp_path)
    events_file(run_dir / EVENTS, logged)
    return run_dir


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def refused(run_dir, wanted: str) -> str:
    """check_resumable's refusal (one line naming wanted), and the folder as it was."""
    before = entries(run_dir)
    with pytest.raises(checkpoint.BadCheckpoint) as error:
        resuming.check_resumable(run_dir, resume_flags(run_dir))
    assert wanted in one_line(error)
    assert entries(run_dir) == before
    return one_line(error)


def resaved(run_dir, change) -> None:
    """The resume file written again with change(its arrays) as its arrays."""
    state, arrays = resuming.read_resume(run_dir, tensors=True)
    resuming.save_resume(run_dir, change(arrays), state)


def test_a_run_that_predates_an_optional_flag_resumes_without_it(tmp_path):
    """A flag added to Args since the run was saved (--total-timesteps): not given now (None), the
    run is the same and resumes; given, the run never had it and is refused."""
    flags = {"framework": "linen", "seed": 1}
    resume = resuming.Resume(1, (), (), dict(flags))
    resuming.check_flags(tmp_path, {**flags, "total_timesteps": None}, dict(flags), resume)
    with pytest.raises(checkpoint.BadCheckpoint, match="no 'total_timesteps': not a run of"):
        resuming.check_flags(tmp_path, {**flags, "total_timesteps": 8192}, dict(flags), resume)


# ----------------------------------------------------------------------- checked before any write
@pytest.mark.parametrize(
    "change, wanted",
    [
        (lambda arrays: [arrays[0].reshape(1, 2), arrays[1]], "array 0 is float64 [1, 2], not"),
        (lambda arrays: arrays[:1], "1 arrays, not the 2 of this run's state"),
    ],
    ids=["reshaped", "missing"],
)
def test_a_resume_of_other_arrays_is_refused_and_leaves_the_folder_as_it_was(
    tmp_path, change, wanted
):
    """The audit's run: BadCheckpoint as a traceback once the events were trimmed and a new events
    file made. Now nothing is written before the arrays are checked against the fresh state, and
    the events file the run's writer made is removed."""
    from tensorboardX import SummaryWriter

    run_dir = stopped_run(tmp_path)
    resaved(run_dir, change)
    before = entries(run_dir)
    saver = saving.Saver(str(run_dir), resume_flags(run_dir), __file__)
    assert entries(run_dir) == before
    with SummaryWriter(str(run_dir)) as writer:
        with pytest.raises(checkpoint.BadCheckpoint) as error:
            saver.resume({"w": np.zeros(2)}, Runner(None, np.zeros(2)), writer)
    assert wanted in one_line(error)
    assert entries(run_dir) == before


def test_a_resume_that_goes_on_trims_the_events_of_the_stopped_run_alone(tmp_path):
    """The first write of a resume: the stopped run's events after its save dropped, the new
    writer's file (a purge mark after the save) kept."""
    from tensorboardX import SummaryWriter

    run_dir = stopped_run(tmp_path)
    saver = saving.Saver(str(run_dir), resume_flags(run_dir), __file__)
    with SummaryWriter(str(run_dir)) as writer:
        _, _, start = saver.resume({"w": np.zeros(2)}, Runner(None, np.zeros(2)), writer)
    assert start == 1
    events = event_files.read_run_events(str(run_dir), FLAGS)
    assert [record.step for record in events[str(run_dir / EVENTS)]] == [64]
    assert len(events) == 2


@dataclass
class TinyArgs:
    """The fields bookkeeping's checks of a command line read."""

    log_dir: str = "runs"
    num_envs: int = 1
    num_steps: int = 1
    num_minibatches: int = 1
    model_size: str = "small"
    track: bool = False
    wandb_project_name: str = "p"
    wandb_entity: str = "e"

    @property
    def batch_size(self):
        return 1


def test_a_resume_refused_after_its_start_is_exit_code_2_and_no_summary(tmp_path, monkeypatch):
    """The audit's run ended "failed" at 4 in a summary.json that said "interrupted" at 5, exit
    code 1: a resume's folder is the run's only from setup_done() on, when its state is back."""
    run_dir = stopped_run(tmp_path)
    before = entries(run_dir)
    book = bookkeeping.Bookkeeping(time.perf_counter(), packages=())

    def main():
        folder = book.make_run_dir(str(tmp_path / "elsewhere"), str(run_dir))
        book.start({**resume_flags(run_dir)}, folder)
        raise checkpoint.BadCheckpoint("array 10 is float32 [4096], not float32 [4096, 4]")

    monkeypatch.setattr(sys, "argv", ["ppo_linen.py"])
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    with pytest.raises(SystemExit) as exit:
        book.run(main, TinyArgs)
    assert exit.value.code == 2
    assert entries(run_dir) == before and not (tmp_path / "elsewhere").exists()

    # once its state is back, the folder is the run's: its summary says where it went on from
    book.start({**resume_flags(run_dir)}, str(run_dir))
    assert book.run_dir is None
    book.setup_done()
    assert book.run_dir == str(run_dir) and book.summary["resumed_at"] == [1]
    assert book.summary["iterations_completed"] == 1


def test_a_resume_file_of_a_non_finite_array_is_refused(tmp_path):
    """The audit's run trained 36 iterations on NaN and saved them again."""
    run_dir = stopped_run(tmp_path)
    resaved(run_dir, lambda arrays: [arrays[0], np.array([0.0, np.nan])])
    refused(run_dir, "tensor 1 holds 1 non-finite values (NaN or inf)")


def test_an_events_record_that_is_no_event_is_refused(tmp_path):
    """A record framed as TFRecord, not a TensorBoard event: DecodeError's traceback before."""
    run_dir = stopped_run(tmp_path)
    events_file(run_dir / EVENTS, [64], data=b"\xff\xff\xff\xff")
    refused(run_dir, "a record that is not a TensorBoard event")


def test_an_events_file_larger_than_the_run_logs_is_refused_unread(tmp_path):
    """A 2 GB events file (sparse here): 119 s and a MemoryError before; now refused from its
    first bytes past what 12 iterations log."""
    run_dir = stopped_run(tmp_path)
    with open(run_dir / EVENTS, "r+b") as f:
        f.truncate(2**31)
    refused(run_dir, "bytes that a run of 12 iterations logs")


@pytest.mark.parametrize("by", ["model", "events"])
def test_a_completed_run_without_its_summary_is_refused(tmp_path, by):
    """summary.json gone, the model file or the events at the last iteration: the run completed,
    and a resume would only run its last iterations again."""
    run_dir = stopped_run(tmp_path)
    (run_dir / "summary.json").unlink()
    if by == "model":
        params = {"actor.0.kernel": np.ones((2, 1), np.float32)}
        checkpoint.save(run_dir / checkpoint.FILENAME, params, None, {"iteration": 12})
    else:
        events_file(run_dir / EVENTS, [64 * i for i in range(1, 13)])
    refused(run_dir, "that run completed (its 12 iterations)")


def test_a_stopped_run_whose_model_holds_an_earlier_iteration_is_resumable(tmp_path):
    run_dir = stopped_run(tmp_path)
    (run_dir / "summary.json").unlink()
    params = {"actor.0.kernel": np.ones((2, 1), np.float32)}
    checkpoint.save(run_dir / checkpoint.FILENAME, params, None, {"iteration": 2})
    assert resuming.check_resumable(run_dir, resume_flags(run_dir)).iteration == 1


# ------------------------------------------------------------------------- the flags of the run
@dataclass
class TagArgs:
    tag: str = ""
    num_envs: int = 4
    resume: str = ""


def test_a_run_flag_whose_value_starts_with_dashes_is_read_as_its_value(tmp_path):
    """A tag --fast was rebuilt as `--tag --fast`, an unknown flag to tyro."""
    run_dir = stopped_folder(tmp_path, flags={**FLAGS, "tag": "--fast", "num_envs": 8})
    argv = resuming.resumed_argv(["tag", "num_envs", "resume"], ["--resume", str(run_dir)])
    args = tyro.cli(TagArgs, args=argv)
    assert args.tag == "--fast" and args.num_envs == 8


def test_a_resume_in_another_framework_is_answered_before_its_flags_are_read(tmp_path):
    """ppo_torch.py --resume of a linen run answered about --compile jit, a flag value it does not
    take: now the framework, before the run's flags are put on its command line."""
    run_dir = stopped_folder(tmp_path, flags={**FLAGS, "compile": "jit"})
    with pytest.raises(checkpoint.BadCheckpoint) as error:
        bookkeeping.with_run_flags(TagArgs, ["--resume", str(run_dir)])
    assert "a linen run, not torch: resume it with its script" in one_line(error)


def test_a_starter_copy_resumed_alone_takes_the_run_flags_of_its_resume_file(tmp_path, monkeypatch):
    """A copy writes no config.json: `--resume DIR` alone took the defaults, and was refused for
    every flag not typed again. Its plain bookkeeping takes the resume file's flags
    (with_run_flags), as the template's bookkeeping takes config.json's."""
    import importlib.util

    from core.plain_bookkeeping import tyro_parse, with_run_flags

    write_starter("linen", tmp_path / "project")
    spec = importlib.util.spec_from_file_location("linen_copy", tmp_path / "project/ppo_linen.py")
    copy = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "linen_copy", copy)
    spec.loader.exec_module(copy)
    flags = {**vars(copy.Args()), "framework": "linen", "num_envs": 8, "save_every": 3}
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    resume = resuming.Resume(1, ((5.0,),), (), flags)
    resuming.save_resume(run_dir, [np.zeros(2, np.float32)], resume)
    args = tyro_parse(copy.Args, with_run_flags(copy.Args, ["--resume", str(run_dir)]))
    # the training's flags and the saving's: it goes on saving as it did
    assert (args.num_envs, args.save_every, args.resume) == (8, 3, str(run_dir))


# ------------------------------------------------------------------------ one writer per folder
def held_elsewhere(folder):
    """The folder's lock taken by another open file (as another process takes it): the fd."""
    fd = os.open(folder / atomic.LOCK_FILE, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_a_second_writer_of_a_run_folder_is_refused_in_one_line(tmp_path):
    """Two resumes of one folder both ran to the end, into one folder (3 events files): the second
    is refused before it reads or writes anything, and so is an evaluation writing there."""
    run_dir = stopped_run(tmp_path)
    before = entries(run_dir)
    fd = held_elsewhere(run_dir)
    try:
        with pytest.raises(atomic.FolderBusy) as error:
            saving.Saver(str(run_dir), resume_flags(run_dir), __file__)
        assert f"--resume {run_dir}: another process writes there" in one_line(error)
        assert entries(run_dir) == before
        folder = random_checkpoint(tmp_path / "model", "CartPole-v1").parent
        fd_model = held_elsewhere(folder)
        with pytest.raises(SystemExit) as exit:
            evaluate.main([str(folder), "--episodes", "1"])
        assert exit.value.code == 2 and not (folder / "eval.json").exists()
        os.close(fd_model)
    finally:
        os.close(fd)
    # once the other writer is gone, the folder is this process's
    saving.Saver(str(run_dir), resume_flags(run_dir), __file__)


def test_a_new_run_folder_is_held_from_its_making(tmp_path):
    book = bookkeeping.Bookkeeping(time.perf_counter(), packages=())
    made = book.make_run_dir(str(tmp_path / "run"))
    with pytest.raises(BlockingIOError):
        held_elsewhere(tmp_path / "run")
    assert os.path.realpath(made) in atomic.HELD


def test_the_lock_of_a_killed_process_is_no_stale_lock(tmp_path):
    """A run killed (SIGKILL) while it holds its folder: the kernel lifts its lock, and the folder
    is resumable at once."""
    run_dir = stopped_run(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import atomic, sys, time; atomic.hold_folder(sys.argv[1], 'x');"
            "print('held', flush=True); time.sleep(600)",
            str(run_dir),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(atomic.FolderBusy):
            atomic.hold_folder(run_dir, "--resume")
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    finally:
        holder.kill()
        holder.wait()
    assert (run_dir / atomic.LOCK_FILE).exists()
    saver = saving.Saver(str(run_dir), resume_flags(run_dir), __file__)
    assert saver.iteration == 1


def test_the_events_hold_every_iteration_the_resume_file_holds(tmp_path):
    """tensorboardX writes its queued events out every 120 s; the resume file at once: after a
    SIGKILL the resumed run held 27 of its 30 iterations in its events. Each save now writes the
    events out first."""
    from tensorboardX import SummaryWriter
    from tensorboardX.proto.summary_pb2 import Summary

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    saver = saving.Saver(str(run_dir), FLAGS, __file__)
    # a script's to_shared of its one agent: (actor, critic, log_std)
    dense = [(np.ones((1, 2, 1), np.float32), np.zeros((1, 1), np.float32))]
    layers = (dense, dense, None)
    with SummaryWriter(str(run_dir), max_queue=100) as writer:
        for step in (64, 128):
            value = Summary.Value(tag="time/iteration", simple_value=0.5)
            writer.file_writer.add_summary(Summary(value=[value]), step)
            saver.iteration_done(layers, Runner(None, np.zeros(2)), [5.0], {"w": 1.0}, writer)
            # on disk as the process left it, were it killed now
            events = event_files.read_run_events(str(run_dir), FLAGS)
            (records,) = events.values()
            assert [r.step for r in records if r.iteration] == list(range(64, step + 1, 64))
        # the writer goes on after a save
        writer.add_scalar("x", 1.0, 192)
    (records,) = event_files.read_run_events(str(run_dir), FLAGS).values()
    assert records[-1].step == 192

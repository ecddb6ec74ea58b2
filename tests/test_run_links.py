"""--resume and the run folder (issue 66 items 2, 3, 9 and 12): a run folder holding a symbolic link
(config.json, summary.json, a checkpoint, an events file, an agent_k folder or a file in one) is
refused at --resume, and a link planted mid-run fails the run rather than being written through; a
completed run is refused and left byte for byte as it was; the run's flags are config.json's, and a
resume file that says otherwise is refused; hostile JSON in config.json, summary.json or the resume
file's header is refused in one line. Each refusal: one line, exit code 2, nothing written."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors
import safetensors.numpy
from checkpoints import FLAGS, Runner, resume_flags, stopped_folder
from script_runs import start, wait_for

import atomic
import bookkeeping
import checkpoint
from core import resuming, saving
from helpers import ROOT, only_run_dir, read_json


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_a_stopped_run_folder_is_resumable(tmp_path):
    """The folder the tests below spoil, as it is: resumable."""
    run_dir = stopped_folder(tmp_path, agents=2)
    assert resuming.check_resumable(run_dir, resume_flags(run_dir)).iteration == 1


# ------------------------------------------------------------------------------------------ links
LINKED = [
    "config.json",
    "summary.json",
    "model.safetensors",
    "resume.safetensors",
    "events.out.tfevents.1.host.1.0",
    "agent_1",
    "agent_1/events.out.tfevents.1.host.1.0",
    "agent_1/model.safetensors",
]


@pytest.mark.parametrize("name", LINKED)
def test_resume_refuses_a_run_folder_that_holds_a_link(tmp_path, name):
    """The link leads to a copy of what it replaces (or, for a file the folder lacks, a victim):
    only the link is wrong, and the refusal names it."""
    run_dir = stopped_folder(tmp_path, agents=2)
    path, elsewhere = run_dir / name, tmp_path / "elsewhere"
    if path.exists():
        shutil.move(path, elsewhere)
    else:
        elsewhere.write_text("victim")
    path.symlink_to(elsewhere)
    with pytest.raises(atomic.LinkRefused) as refused:
        resuming.check_resumable(run_dir, resume_flags(run_dir))
    assert f"--resume {path} is a symbolic link" in one_line(refused)


def test_the_run_folder_itself_may_be_a_link(tmp_path):
    """The folder the user named is followed wherever it leads."""
    run_dir = stopped_folder(tmp_path)
    (tmp_path / "named").symlink_to(run_dir)
    named = tmp_path / "named"
    assert resuming.check_resumable(named, resume_flags(named)).iteration == 1


def test_a_checkpoint_never_goes_through_a_link_in_the_run_folder(tmp_path):
    """An agent_k folder made a link mid-run: its model.safetensors is refused (LinkRefused, an
    OSError: the run fails with its summary), nothing is written where the link leads; the resume
    file likewise."""
    run_dir = stopped_folder(tmp_path, agents=2)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(run_dir / "agent_1", elsewhere)
    (run_dir / "agent_1").symlink_to(elsewhere)
    saver = saving.Saver(str(run_dir), {**FLAGS, "save_model": True}, __file__)
    # a script's to_shared of two agents: (actor, critic, log_std)
    dense = [(np.ones((2, 2, 1), np.float32), np.zeros((2, 1), np.float32))]
    layers = (dense, dense, None)
    saver.iteration_done(layers, Runner(None, np.zeros(2)), [5.0, 6.0], {"w": np.ones(2)})
    with pytest.raises(atomic.LinkRefused, match="agent_1 is a symbolic link"):
        with saver:
            pass
    assert sorted(p.name for p in elsewhere.iterdir()) == ["events.out.tfevents.1.host.1.0"]

    victim = tmp_path / "victim"
    victim.write_text("mine")
    (run_dir / resuming.RESUME_FILE).unlink()
    (run_dir / resuming.RESUME_FILE).symlink_to(victim)
    with pytest.raises(atomic.LinkRefused, match="resume.safetensors is a symbolic link"):
        saver.iteration_done(layers, Runner(None, np.zeros(2)), [5.0, 6.0], {"w": np.ones(2)})
    assert victim.read_text() == "mine"


@pytest.mark.parametrize("name", ["config.json", "summary.json"])
def test_the_bookkeeping_writes_no_json_through_a_link_in_the_run_folder(tmp_path, name):
    """config.json at the start, summary.json at the end: a link there is refused (one line for
    the run's error), what it leads to left as it is."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("mine")
    (run_dir / name).symlink_to(victim)
    book = bookkeeping.Bookkeeping(0.0, packages=("numpy",))
    config = {"num_iterations": 1}
    if name == "config.json":
        with pytest.raises(atomic.LinkRefused):
            book.start(config, str(run_dir))
    else:
        book.start(config, str(run_dir))
        book.finish("completed")
        assert "summary.json not written" in book.summary_error
        assert "is a symbolic link" in book.summary_error
    assert victim.read_text() == "mine"


# -------------------------------------------------------------------------------- completed runs
def test_a_completed_run_is_refused(tmp_path):
    run_dir = stopped_folder(tmp_path)
    atomic.write_json(run_dir / "summary.json", {"status": "completed"})
    with pytest.raises(checkpoint.BadCheckpoint, match="that run completed"):
        resuming.check_resumable(run_dir, resume_flags(run_dir))


def test_a_run_saved_after_its_last_iteration_is_refused_without_a_summary(tmp_path):
    """Killed after its last save, before its summary: its resume file holds every iteration."""
    flags = {**FLAGS, "num_iterations": 1}
    run_dir = stopped_folder(tmp_path, flags=flags)
    (run_dir / "summary.json").unlink()
    with pytest.raises(checkpoint.BadCheckpoint, match="that run completed"):
        resuming.check_resumable(run_dir, {**flags, "resume": str(run_dir)})


# ---------------------------------------------------------------------------- the run's flags
def with_header(run_dir: Path, **changes: str) -> None:
    """The resume file with metadata values replaced (the JSON text each holds)."""
    path = str(run_dir / resuming.RESUME_FILE)
    with safetensors.safe_open(path, "np") as f:
        header = f.metadata()
        tensors = {key: f.get_tensor(key) for key in f.keys()}
    Path(path).write_bytes(safetensors.numpy.save(tensors, metadata={**header, **changes}))


def edited_flags(run_dir: Path, **changes) -> None:
    with safetensors.safe_open(str(run_dir / resuming.RESUME_FILE), "np") as f:
        flags = json.loads(f.metadata()["flags"])
    with_header(run_dir, flags=json.dumps({**flags, **changes}))


def test_the_run_s_flags_are_config_json_s_not_the_resume_file_s(tmp_path):
    """The resume file's flags edited to --learning-rate 0.1 --seed 7: a resume with those flags is
    refused by config.json's (it trained with them), one with config.json's by the resume file."""
    run_dir = stopped_folder(tmp_path)
    edited_flags(run_dir, learning_rate=0.1, seed=7)
    with pytest.raises(checkpoint.BadCheckpoint) as refused:
        resuming.check_resumable(run_dir, resume_flags(run_dir, learning_rate=0.1, seed=7))
    assert "that run has --learning-rate 0.00025, not 0.1" in one_line(refused)
    with pytest.raises(checkpoint.BadCheckpoint) as refused:
        resuming.check_resumable(run_dir, resume_flags(run_dir))
    assert "--learning-rate 0.1, where config.json has 0.00025" in one_line(refused)
    assert "not this run's resume file" in str(refused.value)


def test_a_starter_copy_s_run_without_config_json_is_resumed_by_its_resume_file(tmp_path):
    """A starter's copy writes no config.json: its resume file's flags are then the run's."""
    run_dir = stopped_folder(tmp_path)
    (run_dir / "config.json").unlink()
    assert resuming.check_resumable(run_dir, resume_flags(run_dir)).iteration == 1
    with pytest.raises(checkpoint.BadCheckpoint, match="that run has --seed 1, not 2"):
        resuming.check_resumable(run_dir, resume_flags(run_dir, seed=2))


@pytest.mark.parametrize(
    "config, wanted",
    [
        ({**FLAGS, "seed": True}, "that run has --seed True, not 1"),
        ({**FLAGS, "framework": "nnx"}, "a nnx run, not linen"),
        ({key: value for key, value in FLAGS.items() if key != "seed"}, "no 'seed'"),
    ],
    ids=["true is not 1", "another framework", "a flag missing"],
)
def test_a_config_json_of_other_flags_is_refused(tmp_path, config, wanted):
    run_dir = stopped_folder(tmp_path)
    atomic.write_json(run_dir / "config.json", config)
    with pytest.raises(checkpoint.BadCheckpoint) as refused:
        resuming.check_resumable(run_dir, resume_flags(run_dir))
    assert wanted in one_line(refused)


# ---------------------------------------------------------------------------------- hostile JSON
DEEP = "[" * 40 + "]" * 40
HOSTILE_HEADERS = {
    "flags a list": ({"flags": "[1, 2]"}, "'flags' is a list, not an object"),
    "flags nested deep": ({"flags": '{"a": ' + DEEP + "}"}, "nested deeper than 32"),
    "flags not JSON": ({"flags": "{"}, "not JSON"),
    "flags NaN": ({"flags": '{"seed": NaN}'}, "not JSON"),
    "iteration true": ({"iteration": "true"}, "'iteration' is true or false, not an integer"),
    "returns a string": ({"returns": '"x"'}, "'returns' is a string, not a list"),
    "returns ragged": ({"returns": "[[1.0], [1.0, 2.0]]"}, "equally long lists"),
    "returns of strings": ({"returns": '[["x"]]'}, "neither a number nor null"),
    "resumed_at of strings": ({"resumed_at": '["x"]'}, "not a list of positive integers"),
}


@pytest.mark.parametrize("case", HOSTILE_HEADERS)
def test_a_hostile_resume_header_is_refused_in_one_line(tmp_path, case):
    changes, wanted = HOSTILE_HEADERS[case]
    run_dir = stopped_folder(tmp_path)
    with_header(run_dir, **changes)
    with pytest.raises(checkpoint.BadCheckpoint) as refused:
        resuming.check_resumable(run_dir, resume_flags(run_dir))
    assert wanted in one_line(refused) and resuming.RESUME_FILE in str(refused.value)


HOSTILE_FILES = {
    "config a list": ("config.json", "[1, 2]", "holds a list, not an object"),
    "config nested deep": ("config.json", DEEP, "nested deeper than 32"),
    "config not JSON": ("config.json", "{", "not JSON"),
    "config over 1 MiB": ("config.json", json.dumps({"x": "y" * 2**20}), "more than the"),
    "config's framework a number": ("config.json", '{"framework": 3}', "'framework' is an integer"),
    "summary a list": ("summary.json", "[]", "holds a list, not an object"),
    "summary's status a list": ("summary.json", '{"status": []}', "'status' is a list"),
}


@pytest.mark.parametrize("case", HOSTILE_FILES)
def test_a_hostile_config_or_summary_is_refused_in_one_line(tmp_path, case):
    name, text, wanted = HOSTILE_FILES[case]
    run_dir = stopped_folder(tmp_path)
    (run_dir / name).write_text(text)
    with pytest.raises(ValueError) as refused:
        resuming.check_resumable(run_dir, resume_flags(run_dir))
    assert wanted in one_line(refused) and name in str(refused.value)


def test_a_fifo_for_config_json_is_refused_not_read(tmp_path):
    run_dir = stopped_folder(tmp_path)
    (run_dir / "config.json").unlink()
    os.mkfifo(run_dir / "config.json")
    with pytest.raises(checkpoint.BadCheckpoint, match="config.json: not a regular file"):
        resuming.check_resumable(run_dir, resume_flags(run_dir))


# ----------------------------------------------------------------------- the scripts, end to end
# the run R (with --save-model)
R = ["--env", "CartPole-v1", "--num-envs", "4", "--num-steps", "16", "--num-iterations", "12"]
R += ["--update-epochs", "2", "--num-minibatches", "2", "--save-every", "4", "--save-model"]


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "disabled"}
    command = [sys.executable, str(ROOT / "ppo_linen.py"), *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)


def tree_snapshot(folder: Path) -> dict:
    """Every entry below folder: a file's bytes and mode, a link's target, a folder's name."""
    entries = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            entries[str(path)] = ("link", os.readlink(path))
        elif path.is_file():
            entries[str(path)] = (path.read_bytes(), path.stat().st_mode, path.stat().st_mtime_ns)
        else:
            entries[str(path)] = "folder"
    return entries


@pytest.fixture(scope="module")
def completed_run(trained_run) -> Path:
    """Run R, trained once for the suite; the tests change copies of it only (copy_of)."""
    return trained_run("linen", *R)


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    return copy


def refused_by_the_script(args: list, folder: Path, wanted: str) -> None:
    """One line naming wanted, exit code 2, and the folder byte for byte as it was."""
    before = tree_snapshot(folder)
    proc = run(*args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: ") and wanted in lines[0], proc.stderr
    assert tree_snapshot(folder) == before


@pytest.mark.slow
def test_a_completed_run_is_refused_and_nothing_of_it_changes(completed_run, tmp_path):
    """It was resumed "after iteration 12", its summary.json replaced (total_s, setup, peak memory
    gone)."""
    folder = copy_of(completed_run, tmp_path)
    refused_by_the_script([*R, "--resume", str(folder)], folder, "that run completed")


@pytest.mark.slow
def test_a_link_in_the_run_folder_is_refused_at_resume_and_its_target_untouched(
    completed_run, tmp_path
):
    """`ln -s victim.txt R/model.safetensors`, then --save-model --resume R: victim.txt became
    safetensors bytes."""
    folder = copy_of(completed_run, tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").symlink_to(victim)
    refused_by_the_script([*R, "--resume", str(folder)], folder, "is a symbolic link")
    assert victim.read_text() == "mine"


@pytest.mark.slow
def test_a_resume_file_of_other_flags_than_config_json_is_refused(completed_run, tmp_path):
    """Its flags edited to --learning-rate 0.1 --seed 7, and the run given those: it trained 396
    iterations with them while config.json said 0.00025 and seed 1."""
    folder = copy_of(completed_run, tmp_path)
    atomic.write_json(folder / "summary.json", {"status": "interrupted"})
    edited_flags(folder, learning_rate=0.1, seed=7)
    args = [*R, "--learning-rate", "0.1", "--seed", "7", "--resume", str(folder)]
    refused_by_the_script(args, folder, "that run has --seed 1, not 7")


@pytest.mark.slow
def test_resume_flags_that_are_a_list_are_refused_in_one_line(completed_run, tmp_path):
    """They gave an AttributeError's traceback."""
    folder = copy_of(completed_run, tmp_path)
    with_header(folder, flags="[1, 2]")
    refused_by_the_script([*R, "--resume", str(folder)], folder, "'flags' is a list")


@pytest.mark.slow
def test_an_agent_folder_made_a_link_mid_run_fails_the_run_and_is_not_written_through(tmp_path):
    """A link put where agent_1's folder goes while the run trains: at its end the
    run fails (exit 1, one error line, summary.json "failed"), and agent_1's model.safetensors is
    not written where the link leads."""
    args = [*R[:6], "--num-iterations", "100000", *R[8:], "--num-agents", "2"]
    proc = start("linen", *args, log_dir=tmp_path / "runs")
    elsewhere = tmp_path / "elsewhere"
    try:
        wait_for(proc, "iter 2/")
        run_dir = only_run_dir(tmp_path / "runs")
        # agent_1's folder is made at the end, for its model file: a link is put there first
        elsewhere.mkdir()
        (run_dir / "agent_1").symlink_to(elsewhere)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=300)
    finally:
        proc.kill()
        proc.wait()
    output = "".join(proc.output)
    assert proc.returncode == 1, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "agent_1 is a symbolic link" in errors[0], output[-3000:]
    assert "Traceback" not in output
    assert read_json(run_dir / "summary.json")["status"] == "failed"
    assert not (elsewhere / "model.safetensors").exists()
    assert (run_dir / "agent_0" / "model.safetensors").is_file()

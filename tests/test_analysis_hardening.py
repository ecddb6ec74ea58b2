"""plot_results.py, analysis.learning_curves and runlog.py given what issue 39 found them taking: links and devices as
write targets, empty paths, forged run folders, and text that a spreadsheet or a markdown reader would run.

Every plot_results test goes through plot_results.main, as a user would; the run folders are built by hand, as the
scripts write them (config.json, summary.json, one tensorboardX events file), except where a real run is needed.
"""

import json
import os
import socket
import stat
from datetime import datetime, timezone
from pathlib import Path

import pytest
from tensorboardX import SummaryWriter
from test_plot_results_inputs import ENVS, analyse, linen_nnx, snapshot, write_csv

import plot_results
from analysis import learning_curves, output
from analysis.report import README_MARKERS

START, END = README_MARKERS


def temporaries(*folders: Path) -> list[str]:
    """Files or folders of a write in progress (.NAME.*.partial) left in the folders."""
    return sorted(p.name for folder in folders for p in folder.iterdir() if p.name.endswith(".partial"))


def curve_run(root: Path, env: str = "Pendulum-v1", framework: str = "linen", iterations: int = 3) -> Path:
    """A run folder as the scripts write it, with an episodic return per iteration: config.json (its host and start
    time, then the events file, as bookkeeping.py and tensorboardX make them), summary.json."""
    run_dir = root / f"{env}__{framework}__small__jit__1__1700000000"
    run_dir.mkdir(parents=True)
    config = dict(env=env, framework=framework, model_size="small", compile="jit", seed=1, sync_timing=False, tag="t")
    config.update(batch_size=100, num_envs=4, num_steps=25, num_iterations=iterations)
    config.update(hostname=socket.gethostname(), start_time=datetime.now(timezone.utc).isoformat())
    (run_dir / "config.json").write_text(json.dumps(config))
    with SummaryWriter(str(run_dir)) as writer:
        for i in range(iterations):
            writer.add_scalar("time/iteration", 0.1, (i + 1) * 100)
            writer.add_scalar(learning_curves.RETURN, -100.0 * i, (i + 1) * 100)
    summary = dict(status="completed", total_s=600.0, iterations_completed=iterations, final_return=3.0)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


@pytest.fixture
def runs_csv(tmp_path) -> Path:
    """A runs.csv of 4 envs, linen and nnx, 2 seeds: pairs to compare, so README tables to write."""
    return write_csv(tmp_path / "runs.csv", linen_nnx(ENVS))


def readme(path: Path, mode: int = 0o640) -> Path:
    path.write_text(f"# mine\n{START}\nold numbers\n{END}\ntail\n")
    path.chmod(mode)
    return path


# ------------------------------------------------------------------ issue 39, finding 4: links are written through
def test_update_readme_through_a_link_writes_the_readme_and_keeps_the_link_and_its_mode(
    tmp_path, runs_csv, capsys, monkeypatch
):
    """The README's temporary file is staged beside the README (not beside the link), and the README keeps mode 640."""
    (tmp_path / "docs").mkdir()
    real = readme(tmp_path / "docs" / "README.md")
    link = tmp_path / "README-link.md"
    link.symlink_to(real)
    staged_in = []
    mkstemp = output.tempfile.mkstemp

    def spy(*args, **kwargs):
        staged_in.append(Path(kwargs["dir"]))
        return mkstemp(*args, **kwargs)

    monkeypatch.setattr(output.tempfile, "mkstemp", spy)
    code, errors, _ = analyse(
        capsys, "--csv", runs_csv, "--out", tmp_path / "out", "--no-figures", "--update-readme", link
    )
    assert code == 0 and errors == []
    assert link.is_symlink() and os.readlink(link) == str(real)
    text = real.read_text()
    assert "old numbers" not in text and "nnx → linen" in text and text.endswith(f"{END}\ntail\n")
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert staged_in == [real.parent] and temporaries(tmp_path, real.parent) == []


def test_a_readme_block_through_a_link_or_a_chain_of_links_lands_in_the_file(tmp_path, runs_csv, capsys):
    real = tmp_path / "elsewhere" / "block.md"
    real.parent.mkdir()
    real.write_text("old block\n")
    real.chmod(0o600)
    first = tmp_path / "first.md"
    first.symlink_to(real)
    link = tmp_path / "block.md"
    link.symlink_to(first)
    code, errors, _ = analyse(
        capsys, "--csv", runs_csv, "--out", tmp_path / "out", "--no-figures", "--readme-block", link
    )
    assert code == 0 and errors == []
    assert link.is_symlink() and first.is_symlink() and "nnx → linen" in real.read_text()
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert temporaries(tmp_path, real.parent) == []


def device(tmp_path: Path) -> Path:
    """A file that is not a regular one, like /dev/null: a FIFO (the tests never risk the real /dev/null: the code
    of before issue 39 replaced it, run as root, by a plain file)."""
    fifo = tmp_path / "device"
    os.mkfifo(fifo)
    return fifo


@pytest.mark.parametrize("flag", ["--readme-block", "--update-readme"])
@pytest.mark.parametrize("kind", ["link to a device", "device", "folder", "link to a folder", "circular link"])
def test_a_readme_that_is_not_a_regular_file_is_refused_before_anything(tmp_path, runs_csv, capsys, flag, kind):
    """One line naming it, exit 2, no --out made, the link and its target as they were."""
    fifo = device(tmp_path)
    (tmp_path / "folder").mkdir()
    target = tmp_path / "folder" if kind.endswith("folder") else fifo
    path = tmp_path / "link" if "link" in kind else target
    if kind.startswith("link"):
        path.symlink_to(target)
    elif kind == "circular link":
        path.symlink_to(tmp_path / "other")
        (tmp_path / "other").symlink_to(path)
    code, errors, _ = analyse(capsys, "--csv", runs_csv, "--out", tmp_path / "out", "--no-figures", flag, path)
    assert code == 2 and len(errors) == 1 and flag in errors[0] and str(path) in errors[0]
    assert not (tmp_path / "out").exists()
    if kind.startswith("link"):
        assert path.is_symlink() and os.readlink(path) == str(target)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and list((tmp_path / "folder").iterdir()) == []


def test_out_through_a_link_and_files_in_it_that_are_links_are_written_through(tmp_path, runs_csv, capsys):
    """--out a link to a folder, its REPORT.md a link to a file of mode 640 elsewhere: both links stay."""
    real = tmp_path / "disk" / "results"
    real.mkdir(parents=True)
    out = tmp_path / "results"
    out.symlink_to(real)
    kept = readme(tmp_path / "kept.md")
    (real / "REPORT.md").symlink_to(kept)
    assert analyse(capsys, "--csv", runs_csv, "--out", out, "--no-figures")[0] == 0
    assert out.is_symlink() and (real / "REPORT.md").is_symlink() and (real / "runs.csv").is_file()
    assert kept.read_text().startswith("# benchback-rl results") and stat.S_IMODE(kept.stat().st_mode) == 0o640
    assert temporaries(tmp_path, tmp_path / "disk", real) == []


def test_a_new_out_through_a_dangling_link_is_made_where_it_leads(tmp_path, runs_csv, capsys):
    out = tmp_path / "results"
    out.symlink_to(tmp_path / "made")
    assert analyse(capsys, "--csv", runs_csv, "--out", out, "--no-figures")[0] == 0
    assert out.is_symlink() and (tmp_path / "made" / "summary.csv").is_file()


@pytest.mark.parametrize("name", ["runs.csv", "REPORT.md"])
def test_a_file_of_this_tool_in_out_that_is_not_a_regular_file_is_refused_before_anything(
    tmp_path, runs_csv, capsys, name
):
    out = tmp_path / "out"
    assert analyse(capsys, "--csv", runs_csv, "--out", out, "--no-figures")[0] == 0
    (out / name).unlink()
    (out / name).symlink_to(device(tmp_path))
    before = snapshot(out)
    code, errors, _ = analyse(capsys, "--csv", runs_csv, "--out", out, "--no-figures", "--force")
    assert code == 2 and len(errors) == 1 and name in errors[0]
    assert snapshot(out) == before and (out / name).is_symlink() and temporaries(tmp_path, out) == []


def test_a_failed_readme_write_leaves_no_temporary_file(tmp_path, runs_csv, capsys, monkeypatch):
    """The disk fills as the README is renamed into place: the README as it was, no temporary file left."""
    real = readme(tmp_path / "README.md")

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    monkeypatch.setattr(Path, "replace", full)
    with pytest.raises((OSError, SystemExit)):
        plot_results.main(["--csv", str(runs_csv), "--out", str(tmp_path / "out"), "--no-figures",
                           "--update-readme", str(real)])  # fmt: skip
    assert "old numbers" in real.read_text() and temporaries(tmp_path) == []


def test_the_learning_curves_through_a_link_land_in_the_file(tmp_path, capsys):
    curve_run(tmp_path / "runs")
    real = tmp_path / "figures" / "curves.png"
    real.parent.mkdir()
    real.write_bytes(b"an old figure")
    real.chmod(0o640)
    link = tmp_path / "curves.png"
    link.symlink_to(real)
    learning_curves.main([str(tmp_path / "runs"), "--out", str(link), "--force"])
    assert link.is_symlink() and real.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640 and temporaries(tmp_path, real.parent) == []


def test_learning_curves_into_a_device_are_refused(tmp_path, capsys):
    curve_run(tmp_path / "runs")
    link = tmp_path / "curves.png"
    link.symlink_to(device(tmp_path))
    with pytest.raises(SystemExit) as refusal:
        learning_curves.main([str(tmp_path / "runs"), "--out", str(link), "--force"])
    errors = [line for line in capsys.readouterr().err.splitlines() if line]
    assert refusal.value.code == 2 and len(errors) == 1 and str(link) in errors[0]
    assert link.is_symlink() and stat.S_ISFIFO(os.lstat(tmp_path / "device").st_mode)


# ------------------------------------------------------------------- issue 39, finding 7: an empty path is bad input
EMPTY_CASES = ["RUNS_DIR", "--out", "--csv", "--env-timing", "--previous", "--update-readme", "--readme-block"]


@pytest.mark.parametrize("flag", EMPTY_CASES)
def test_an_empty_path_is_refused_in_one_line_before_anything(tmp_path, runs_csv, capsys, monkeypatch, flag):
    """'' would be the current folder: refused naming the option, exit 2, nothing read or written there or in --out."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    curve_run(cwd / "runs")  # a run in the current folder, that '' as RUNS_DIR would read
    monkeypatch.chdir(cwd)
    before = snapshot(cwd)
    out = "" if flag == "--out" else str(tmp_path / "out")
    args = ["--csv", str(runs_csv), "--out", out, "--no-figures"]
    args += [""] if flag == "RUNS_DIR" else [] if flag == "--out" else [flag, ""]
    code, errors, _ = analyse(capsys, *args)
    assert code == 2 and len(errors) == 1 and flag in errors[0] and "''" in errors[0] and "empty" in errors[0]
    assert snapshot(cwd) == before and not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag", ["RUNS_DIR", "--out"])
def test_learning_curves_refuse_an_empty_path(tmp_path, capsys, monkeypatch, flag):
    curve_run(tmp_path / "runs")
    monkeypatch.chdir(tmp_path / "runs")
    before = snapshot(tmp_path)
    args = ["", "--out", str(tmp_path / "curves.png")] if flag == "RUNS_DIR" else [str(tmp_path / "runs"), "--out", ""]
    with pytest.raises(SystemExit) as refusal:
        learning_curves.main(args)
    errors = [line for line in capsys.readouterr().err.splitlines() if line]
    assert refusal.value.code == 2 and len(errors) == 1 and flag in errors[0] and "''" in errors[0]
    assert snapshot(tmp_path) == before

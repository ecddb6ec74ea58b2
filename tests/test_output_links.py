"""The sweep and the benchmarks never write through a link they did not make (issue 66 item 2): a
lock, a log or a file below the folder the user named that is a link is refused in one line, and
the file it leads to is left as it is; the part the user named is followed.
"""

import os
import sys
from pathlib import Path

import pytest

import atomic
from atomic import LinkRefused
from benchmarks import quickstart
from benchmarks.common import run_logged
from sweep import bench, resume

KEPT = "what the link leads to\n"


def planted(tmp_path: Path, path: Path) -> Path:
    """path made a link to a file of the user's elsewhere; that file."""
    kept = tmp_path / "elsewhere" / "kept.txt"
    kept.parent.mkdir(exist_ok=True)
    kept.write_text(KEPT)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(kept)
    return kept


def opened(path: Path) -> int:
    """The descriptor bench.sh holds: the lock file opened for appending (through any link)."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)


def test_a_cell_lock_that_is_a_link_is_refused_and_its_file_never_truncated(tmp_path):
    """The code of before truncated the file a planted .bench-cells/CELL.lock led to, and wrote
    its note there."""
    log_dir = tmp_path / "runs"
    lock = log_dir / resume.CELL_LOCKS / "cell.lock"
    kept = planted(tmp_path, lock)
    fd = opened(lock)
    try:
        with pytest.raises(LinkRefused) as refusal:
            resume.claim_cell(fd, str(lock), "pid 1", "a cell", str(log_dir), [])
    finally:
        os.close(fd)
    assert "symbolic link" in str(refusal.value) and "\n" not in str(refusal.value)
    assert kept.read_text() == KEPT


def test_a_cell_lock_folder_that_is_a_link_is_refused(tmp_path):
    log_dir = tmp_path / "runs"
    log_dir.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (log_dir / resume.CELL_LOCKS).symlink_to(tmp_path / "elsewhere")
    lock = log_dir / resume.CELL_LOCKS / "cell.lock"
    (tmp_path / "elsewhere" / "cell.lock").write_text(KEPT)
    fd = opened(lock)
    try:
        with pytest.raises(LinkRefused):
            resume.take_lock(fd, str(lock), "pid 1", given=str(log_dir))
    finally:
        os.close(fd)
    assert (tmp_path / "elsewhere" / "cell.lock").read_text() == KEPT


def test_the_sweeps_lock_that_is_a_link_is_refused_in_one_line(tmp_path, capsys):
    lock = tmp_path / "runs" / ".bench-0-of-1.lock"
    kept = planted(tmp_path, lock)
    fd = opened(lock)
    try:
        assert bench.lock_main(fd, str(lock), "pid 1") == 2
    finally:
        os.close(fd)
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 1 and str(lock) in errors[0] and kept.read_text() == KEPT


def test_a_lock_in_a_linked_log_dir_is_taken(tmp_path):
    """--log-dir itself a link (the user named it): followed, the lock taken, its note written."""
    (tmp_path / "disk").mkdir()
    log_dir = tmp_path / "runs"
    log_dir.symlink_to(tmp_path / "disk")
    lock = log_dir / ".bench-0-of-1.lock"
    fd = opened(lock)
    try:
        assert resume.take_lock(fd, str(lock), "pid 1", given=str(log_dir)) is None
    finally:
        os.close(fd)
    assert (tmp_path / "disk" / ".bench-0-of-1.lock").read_text().startswith("pid 1 on ")


def test_a_log_that_is_a_link_is_refused_before_anything_runs(tmp_path):
    """run_logged (the quick start's steps, the LeanRL runs): the code of before truncated the
    file a link at the log's path led to and wrote the output there."""
    log = tmp_path / "logs" / "step.log"
    kept = planted(tmp_path, log)
    marker = tmp_path / "ran"
    with pytest.raises(LinkRefused):
        run_logged([sys.executable, "-c", f"open({str(marker)!r}, 'w')"], tmp_path, {}, log)
    assert kept.read_text() == KEPT and not marker.exists()


def test_the_quickstarts_logs_folder_that_is_a_link_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (out / "logs").symlink_to(tmp_path / "elsewhere")
    code = quickstart.main(["--out", str(out), "--render-only"])
    errors = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(errors) == 1 and "logs" in errors[0] and "symbolic link" in errors[0]
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_benchmarks_out_that_is_a_link_is_followed_and_its_table_never(tmp_path):
    """--out x.json named by the user as a link: checked and written through it (the code of before
    checked it and then refused the write, after the measurement); the .md beside it, the tool's,
    refused when it is a link, before anything."""
    (tmp_path / "disk").mkdir()
    out = tmp_path / "bench.json"
    out.symlink_to(tmp_path / "disk" / "bench.json")
    atomic.check_outputs("tool", out)
    atomic.write_outputs("tool", out, {"rows": [1]}, "| a |", given=out)
    assert out.is_symlink() and atomic.read_json(tmp_path / "disk" / "bench.json")["rows"] == [1]
    table = atomic.table_path(out)
    table.unlink()
    kept = planted(tmp_path, table)
    with pytest.raises(LinkRefused):
        atomic.check_outputs("tool", out)
    assert kept.read_text() == KEPT

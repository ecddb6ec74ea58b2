"""atomic.write_file never writes through a symbolic link it did not make: the part of a path that
the user named is followed, below it no folder and no file may be a link."""

import os

import pytest

import atomic


@pytest.fixture
def victim(tmp_path):
    """A file elsewhere, which no write may change."""
    path = tmp_path / "victim" / "notes.md"
    path.parent.mkdir()
    path.write_text("the user's notes")
    return path


def test_a_file_that_is_a_link_is_not_written_through(tmp_path, victim):
    out = tmp_path / "out"
    out.mkdir()
    (out / "REPORT.md").symlink_to(victim)
    with pytest.raises(atomic.LinkRefused, match="REPORT.md is a symbolic link"):
        atomic.write_file(out / "REPORT.md", "report")
    assert victim.read_text() == "the user's notes"
    assert (out / "REPORT.md").is_symlink()
    assert sorted(os.listdir(out)) == ["REPORT.md"]  # no temporary file left


def test_a_folder_below_the_named_one_that_is_a_link_is_not_written_into(tmp_path, victim):
    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / "evaluation").symlink_to(victim.parent)
    with pytest.raises(atomic.LinkRefused, match="evaluation is a symbolic link"):
        atomic.write_file(hub / "evaluation" / "share.py", "code", given=hub)
    assert os.listdir(victim.parent) == ["notes.md"]


def test_the_part_the_user_named_is_followed(tmp_path, victim):
    # --out LINK, where LINK leads to a folder; --video LINK, where LINK is the file itself
    (tmp_path / "out").symlink_to(victim.parent)
    atomic.write_file(tmp_path / "out" / "table.md", "table")
    assert (victim.parent / "table.md").read_text() == "table"
    named = tmp_path / "named.md"
    named.symlink_to(victim)
    atomic.write_file(named, "replaced", given=named)
    assert victim.read_text() == "replaced" and named.is_symlink()


def test_a_json_write_is_refused_alike(tmp_path, victim):
    (tmp_path / "summary.json").symlink_to(victim)
    with pytest.raises(atomic.LinkRefused):
        atomic.write_json(tmp_path / "summary.json", {"status": "completed"})
    assert victim.read_text() == "the user's notes"


def test_check_inside_refuses_before_anything_and_names_the_flag(tmp_path, victim):
    (tmp_path / "eval.json").symlink_to(victim)
    with pytest.raises(atomic.OutputRefused, match="^--out .*eval.json is a symbolic link"):
        atomic.check_inside(tmp_path, tmp_path / "eval.json", "--out")
    assert atomic.check_inside(tmp_path, tmp_path / "new.json") == tmp_path.resolve() / "new.json"


def test_a_link_refused_mid_run_is_an_os_error(tmp_path, victim):
    # a run treats an OSError after its folder exists as a failure (summary.json, exit 1)
    (tmp_path / "model.safetensors").symlink_to(victim)
    with pytest.raises(OSError):
        atomic.write_file(tmp_path / "model.safetensors", b"bytes")

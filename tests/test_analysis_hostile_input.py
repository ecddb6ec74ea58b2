"""plot_results.py, analysis.learning_curves and core/runlog.py given what issue 39 found them
taking: links and devices as write targets, empty paths, forged run folders, and text that a
spreadsheet or a markdown reader would run.

Every plot_results test goes through plot_results.main, as a user would; the run folders are built
by hand, as the scripts write them (config.json, summary.json, one tensorboardX events file), except
where a real run is needed.
"""

import csv
import json
import os
import re
import shlex
import shutil
import stat
from datetime import datetime, timedelta
from itertools import product
from pathlib import Path

import pandas as pd
import pytest
from analysis_runs import ENVS, analyse, linen_nnx, snapshot, tie_events, write_csv, write_run
from tensorboardX import SummaryWriter
from trained_runs import saved

import plot_results
from analysis import learning_curves, output
from analysis.loading import load_runs
from analysis.report import README_MARKERS
from core import runlog
from helpers import STUDY
from sweep import resume as sweep_resume

START, END = README_MARKERS


def temporaries(*folders: Path) -> list[str]:
    """Files or folders of a write in progress (.NAME.*.partial) left in the folders."""
    return sorted(
        p.name for folder in folders for p in folder.iterdir() if p.name.endswith(".partial")
    )


def curve_run(
    root: Path, env: str = "Pendulum-v1", framework: str = "linen", iterations: int = 3
) -> Path:
    """A run folder as the scripts write it, with an episodic return per iteration: config.json
    (with its host and start time), one events file (tensorboardX's, named for that host and time,
    its events within the run), summary.json."""
    run_dir = root / f"{env}__{framework}__small__jit__1__1700000000"
    run_dir.mkdir(parents=True)
    config = dict(
        env=env,
        framework=framework,
        model_size="small",
        compile="jit",
        seed=1,
        sync_timing=False,
        tag="t",
    )
    config.update(batch_size=100, num_envs=4, num_steps=25, num_iterations=iterations)
    config.update(hostname="host", start_time="2025-01-01T00:00:00+00:00")
    (run_dir / "config.json").write_text(json.dumps(config))
    start = datetime.fromisoformat(config["start_time"]).timestamp()
    with SummaryWriter(str(run_dir)) as writer:
        for i in range(iterations):
            writer.add_scalar("time/iteration", 0.1, (i + 1) * 100, walltime=start + 1 + 0.1 * i)
            writer.add_scalar(
                learning_curves.RETURN, -100.0 * i, (i + 1) * 100, walltime=start + 1 + 0.1 * i
            )
    tie_events(run_dir, config)
    # as bookkeeping.py makes it
    final = -100.0 * sum(range(iterations)[-10:]) / len(range(iterations)[-10:])
    summary = dict(
        status="completed", total_s=2.0, iterations_completed=iterations, final_return=final
    )
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


def readme(path: Path, mode: int = 0o640) -> Path:
    path.write_text(f"# mine\n{START}\nold numbers\n{END}\ntail\n")
    path.chmod(mode)
    return path


# --------------------------------------------------- issue 39, finding 4: links are written through
def test_update_readme_through_a_link_writes_the_readme_and_keeps_the_link_and_its_mode(
    tmp_path, runs_csv, capsys, monkeypatch
):
    """The README's temporary file is staged beside the README (not beside the link), and the README
    keeps mode 640."""
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
        capsys,
        "--csv",
        runs_csv,
        "--out",
        tmp_path / "out",
        "--no-figures",
        "--update-readme",
        link,
    )
    assert code == 0 and errors == []
    assert link.is_symlink() and os.readlink(link) == str(real)
    text = real.read_text()
    assert "old numbers" not in text and "nnx → linen" in text and text.endswith(f"{END}\ntail\n")
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert staged_in == [real.parent] and temporaries(tmp_path, real.parent) == []


def test_a_readme_block_through_a_link_or_a_chain_of_links_lands_in_the_file(
    tmp_path, runs_csv, capsys
):
    real = tmp_path / "elsewhere" / "block.md"
    real.parent.mkdir()
    # a block file of this tool: its block between the markers (issue 79: a file without them is
    # the user's, refused)
    real.write_text(f"{START}\nold block\n{END}\n")
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
    assert "old block" not in real.read_text()
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert temporaries(tmp_path, real.parent) == []


def device(tmp_path: Path) -> Path:
    """A file that is not a regular one, like /dev/null: a FIFO (the tests never risk the real
    /dev/null: the code of before issue 39 replaced it, run as root, by a plain file)."""
    fifo = tmp_path / "device"
    os.mkfifo(fifo)
    return fifo


@pytest.mark.parametrize("flag", ["--readme-block", "--update-readme"])
@pytest.mark.parametrize(
    "kind", ["link to a device", "device", "folder", "link to a folder", "circular link"]
)
def test_a_readme_that_is_not_a_regular_file_is_refused_before_anything(
    tmp_path, runs_csv, capsys, flag, kind
):
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
    code, errors, _ = analyse(
        capsys, "--csv", runs_csv, "--out", tmp_path / "out", "--no-figures", flag, path
    )
    assert code == 2 and len(errors) == 1 and flag in errors[0] and str(path) in errors[0]
    assert not (tmp_path / "out").exists()
    if kind.startswith("link"):
        assert path.is_symlink() and os.readlink(path) == str(target)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and list((tmp_path / "folder").iterdir()) == []


@pytest.mark.parametrize("name", ["REPORT.md", "runs.csv", "exp1_total.png"])
def test_a_file_in_out_that_is_a_link_is_refused_and_what_it_leads_to_is_untouched(
    tmp_path, runs_csv, capsys, name
):
    """--out a link to a folder (the user named it: followed), a file of this tool in it a link to a
    file elsewhere: refused in one line (exit 2) before anything is written, --force or not; the
    link and the file it leads to as they were (issue 66 item 2: the code of before wrote through
    it)."""
    real = tmp_path / "disk" / "results"
    real.mkdir(parents=True)
    out = tmp_path / "results"
    out.symlink_to(real)
    kept = readme(tmp_path / "kept.md")
    (real / name).symlink_to(kept)
    code, errors, _ = analyse(capsys, "--csv", runs_csv, "--out", out, "--no-figures", "--force")
    assert code == 2 and len(errors) == 1 and "symbolic link" in errors[0] and name in errors[0]
    assert kept.read_text() == f"# mine\n{START}\nold numbers\n{END}\ntail\n"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    assert (real / name).is_symlink() and sorted(p.name for p in real.iterdir()) == [name]
    assert temporaries(tmp_path, tmp_path / "disk", real) == []


def test_out_through_a_link_is_followed(tmp_path, runs_csv, capsys):
    real = tmp_path / "disk" / "results"
    real.mkdir(parents=True)
    out = tmp_path / "results"
    out.symlink_to(real)
    assert analyse(capsys, "--csv", runs_csv, "--out", out, "--no-figures")[0] == 0
    assert out.is_symlink() and (real / "runs.csv").is_file() and (real / "REPORT.md").is_file()
    assert temporaries(tmp_path, tmp_path / "disk", real) == []


def test_a_link_planted_in_out_while_it_runs_is_not_written_through(
    tmp_path, runs_csv, capsys, monkeypatch
):
    """A link made in --out after the checks (while the analysis runs): the replacement stops at it
    (exit 1, one line), the file it leads to untouched, no temporary folder left."""
    out = tmp_path / "out"
    assert analyse(capsys, "--csv", runs_csv, "--out", out, "--no-figures")[0] == 0
    kept = readme(tmp_path / "kept.md")
    staged = output.staged

    def plant(*args, **kwargs):
        (out / "summary.csv").unlink()
        (out / "summary.csv").symlink_to(kept)
        return staged(*args, **kwargs)

    monkeypatch.setattr(output, "staged", plant)
    code, errors, _ = analyse(capsys, "--csv", runs_csv, "--out", out, "--no-figures")
    assert code == 1 and len(errors) == 1 and "symbolic link" in errors[0]
    assert kept.read_text().startswith("# mine") and (out / "summary.csv").is_symlink()
    assert temporaries(tmp_path, out) == []


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
    assert (
        snapshot(out) == before and (out / name).is_symlink() and temporaries(tmp_path, out) == []
    )


def test_a_failed_readme_write_leaves_no_temporary_file(tmp_path, runs_csv, capsys, monkeypatch):
    """The disk fills as the README is renamed into place: the README as it was, no temporary file
    left."""
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
    # an old figure of the tool's (issue 79: one of someone else's is refused, --force or not)
    learning_curves.main([str(tmp_path / "runs"), "--out", str(real)])
    real.chmod(0o640)
    link = tmp_path / "curves.png"
    link.symlink_to(real)
    learning_curves.main([str(tmp_path / "runs"), "--out", str(link), "--force"])
    assert link.is_symlink() and real.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640 and temporaries(tmp_path, real.parent) == []


def test_the_learning_curves_table_that_is_a_link_is_refused_before_anything(tmp_path, capsys):
    """--out named by the user is followed; the .md beside it is the tool's: a link there is refused
    in one line (exit 2), the file it leads to untouched (the code of before wrote through it)."""
    curve_run(tmp_path / "runs")
    kept = readme(tmp_path / "kept.md")
    (tmp_path / "curves.md").symlink_to(kept)
    with pytest.raises(SystemExit) as refusal:
        learning_curves.main([str(tmp_path / "runs"), "--out", str(tmp_path / "curves.png")])
    errors = [line for line in capsys.readouterr().err.splitlines() if line]
    assert refusal.value.code == 2 and len(errors) == 1 and "curves.md" in errors[0]
    assert kept.read_text().startswith("# mine") and not (tmp_path / "curves.png").exists()


def test_learning_curves_into_a_device_are_refused(tmp_path, capsys):
    curve_run(tmp_path / "runs")
    link = tmp_path / "curves.png"
    link.symlink_to(device(tmp_path))
    with pytest.raises(SystemExit) as refusal:
        learning_curves.main([str(tmp_path / "runs"), "--out", str(link), "--force"])
    errors = [line for line in capsys.readouterr().err.splitlines() if line]
    assert refusal.value.code == 2 and len(errors) == 1 and str(link) in errors[0]
    assert link.is_symlink() and stat.S_ISFIFO(os.lstat(tmp_path / "device").st_mode)


# -------------------------------------------------- issue 39, finding 7: an empty path is bad input
EMPTY_CASES = [
    "RUNS_DIR",
    "--out",
    "--csv",
    "--env-timing",
    "--previous",
    "--update-readme",
    "--readme-block",
]


@pytest.mark.parametrize("flag", EMPTY_CASES)
def test_an_empty_path_is_refused_in_one_line_before_anything(
    tmp_path, runs_csv, capsys, monkeypatch, flag
):
    """'' would be the current folder: refused naming the option, exit 2, nothing read or written
    there or in --out."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    curve_run(cwd / "runs")  # a run in the current folder, that '' as RUNS_DIR would read
    monkeypatch.chdir(cwd)
    before = snapshot(cwd)
    out = "" if flag == "--out" else str(tmp_path / "out")
    args = ["--csv", str(runs_csv), "--out", out, "--no-figures"]
    args += [""] if flag == "RUNS_DIR" else [] if flag == "--out" else [flag, ""]
    code, errors, _ = analyse(capsys, *args)
    assert (
        code == 2
        and len(errors) == 1
        and flag in errors[0]
        and "''" in errors[0]
        and "empty" in errors[0]
    )
    assert snapshot(cwd) == before and not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag", ["RUNS_DIR", "--out"])
def test_learning_curves_refuse_an_empty_path(tmp_path, capsys, monkeypatch, flag):
    curve_run(tmp_path / "runs")
    monkeypatch.chdir(tmp_path / "runs")
    before = snapshot(tmp_path)
    args = (
        ["", "--out", str(tmp_path / "curves.png")]
        if flag == "RUNS_DIR"
        else [str(tmp_path / "runs"), "--out", ""]
    )
    with pytest.raises(SystemExit) as refusal:
        learning_curves.main(args)
    errors = [line for line in capsys.readouterr().err.splitlines() if line]
    assert refusal.value.code == 2 and len(errors) == 1 and flag in errors[0] and "''" in errors[0]
    assert snapshot(tmp_path) == before


# ---------------------------------- issue 39, finding 8: forged or malformed runs are not completed
@pytest.fixture(scope="module")
def real_runs(trained_run) -> tuple[Path, Path]:
    """Two tiny real runs of ppo_linen.py on one host, seeds 1 then 2: (the first's folder, the
    second's): the suite's usual runs (trained_runs.saved), which the tests copy, never change."""
    first = trained_run("linen", *saved("linen"))
    return first, trained_run("linen", *saved("linen", "CartPole-v1", "--seed", "2"))


def forged_copy(run_dir: Path, root: Path, config=None, summary=None, events=None) -> Path:
    """A copy of run_dir under root with config.json and summary.json updated by the given dicts (a
    key set to DROP is removed), and, with events, the events file replaced by that one."""
    copy = root / run_dir.name
    shutil.copytree(run_dir, copy)
    for name, changes in (("config.json", config), ("summary.json", summary)):
        data = json.loads((copy / name).read_text())
        data.update(changes or {})
        (copy / name).write_text(json.dumps({k: v for k, v in data.items() if v is not DROP}))
    if events is not None:
        for old in copy.glob("events.out.tfevents.*"):
            old.unlink()
        shutil.copy(events, copy / events.name)
    return copy


DROP = object()
CONFIG_FORGERIES = {
    "env a list": {"env": ["CartPole-v1"]},
    "env of no backend": {"env": "CartPole-v1@elsewhere"},
    "env with a newline": {"env": "CartPole-v1\n"},
    "env_backend unknown": {"env_backend": "gym"},
    "framework a number": {"framework": 7},
    "framework unknown": {"framework": "jax"},
    "model_size unknown": {"model_size": "huge"},
    "compile of another framework": {"compile": "partition"},
    "seed a string": {"seed": "1"},
    "seed a bool": {"seed": True},
    "sync_timing a string": {"sync_timing": "false"},
    "dtype unknown": {"dtype": "float16"},
    "dtype a list": {"dtype": ["bfloat16"]},
    "batch_size 0": {"batch_size": 0},
    "batch_size negative": {"batch_size": -64},
    "batch_size a bool": {"batch_size": True},
    "batch_size a float": {"batch_size": 64.0},
    "batch_size not num_envs x num_steps": {"batch_size": 128},
    "num_iterations a string": {"num_iterations": "3"},
    "num_iterations more than ran": {"num_iterations": 4},
    "tag a list": {"tag": ["linux"]},
    "hostname a number": {"hostname": 7},
    "hostname another host": {"hostname": "elsewhere"},
    "hostname dropped": {"hostname": DROP},
    "start_time not a time": {"start_time": "fast"},
    "command not argv": {"command": {"argv": 1}},
}
SUMMARY_FORGERIES = {
    "iterations_completed a bool": {"iterations_completed": True},
    "iterations_completed fewer": {"iterations_completed": 2},
    "total_s a word": {"total_s": "fast"},
    "total_s not a number": {"total_s": float("nan")},
    "total_s infinite": {"total_s": float("inf")},
    "total_s negative": {"total_s": -1.0},
    "total_s a bool": {"total_s": True},
    "total_s shorter than its iterations": {"total_s": 1e-3},
    "setup_s a word": {"setup_s": "fast"},
    "final_return a word": {"final_return": "high"},
    "final_return not the run's": {"final_return": 1e9},
}


def start_of(run_dir: Path) -> datetime:
    return datetime.fromisoformat(json.loads((run_dir / "config.json").read_text())["start_time"])


def events_of(run_dir: Path) -> Path:
    (events,) = run_dir.glob("events.out.tfevents.*")
    return events


def forgeries(real_runs, root: Path) -> dict[str, Path]:
    """Every forged copy of the first real run, by what was forged."""
    first, second = real_runs
    forged = {
        name: forged_copy(first, root / "c" / str(i), config=c)
        for i, (name, c) in enumerate(CONFIG_FORGERIES.items())
    }
    forged |= {
        name: forged_copy(first, root / "s" / str(i), summary=s)
        for i, (name, s) in enumerate(SUMMARY_FORGERIES.items())
    }
    forged["events of another run"] = forged_copy(first, root / "e1", events=events_of(second))
    start = start_of(first)
    forged["start_time a day earlier"] = forged_copy(
        first, root / "e2", config={"start_time": (start - timedelta(days=1)).isoformat()}
    )
    forged["start_time a minute later"] = forged_copy(
        first, root / "e3", config={"start_time": (start + timedelta(minutes=1)).isoformat()}
    )
    moved = forged_copy(first, root / "e4")
    events = events_of(moved)
    # another host's name
    events.rename(events.with_name(events.name.rsplit(".", 1)[0] + ".elsewhere"))
    forged["events named for another host"] = moved
    return forged


@pytest.mark.slow
@pytest.mark.xdist_group("real_runs")
def test_genuine_runs_and_their_copies_are_completed(real_runs, tmp_path):
    for run_dir in real_runs:
        assert runlog.is_completed(run_dir)
        assert runlog.is_completed(forged_copy(run_dir, tmp_path / run_dir.parent.name))


@pytest.mark.slow
@pytest.mark.xdist_group("real_runs")
def test_forged_run_folders_are_not_completed_for_the_resume_nor_the_analysis(
    real_runs, tmp_path, capsys
):
    """Each forgery of a real run folder: runlog says why it is not a usable run (so bench.sh's
    resume redoes the run it claims), and the analysis skips it with that reason; its words ("fast")
    never reach the tables."""
    forged = forgeries(real_runs, tmp_path / "forged")
    accepted = [name for name, run_dir in forged.items() if runlog.is_completed(run_dir)]
    assert accepted == []
    for name, run_dir in forged.items():
        with pytest.raises(runlog.RunError):
            runlog.read_completed_run(run_dir)
    command = json.loads((real_runs[0] / "config.json").read_text())["command"]
    # bench.sh's resume: the folder of the run whose events are another's
    exp_dir = tmp_path / "forged" / "e1"
    assert sweep_resume.completed_keys(exp_dir) == set() and sweep_resume.run_key(
        command
    ) not in sweep_resume.completed_keys(exp_dir)

    runs = tmp_path / "runs"
    shutil.copytree(tmp_path / "forged", runs / "forged")
    for run_dir in real_runs:
        shutil.copytree(run_dir, runs / "real" / run_dir.name)
    out = tmp_path / "out"
    code, errors, _ = analyse(capsys, runs, "--out", out, "--no-figures")
    assert code == 0 and errors == []
    summary = (out / "summary.csv").read_text()
    assert (
        len(pd.read_csv(out / "summary.csv")) == 2
        and "fast" not in summary
        and "elsewhere" not in summary
    )
    skipped = (out / "REPORT.md").read_text().split("## Skipped runs")[1]
    assert skipped.count(real_runs[0].name) == len(forged)


CSV_FORGERIES = {
    "framework": "7",
    "batch_size": 0,
    "env": "['CartPole-v1']",
    "iterations_completed": True,
    "num_iterations": 11,
    "seed": 1.5,
    "model_size": "huge",
    "dtype": "fp8",
}


@pytest.mark.parametrize("column", CSV_FORGERIES)
def test_a_forged_run_of_a_runs_csv_is_skipped(tmp_path, capsys, column):
    """The same check for a run of a runs.csv (--csv): a forged value skips that run, with its
    reason."""
    runs = linen_nnx(ENVS)
    for row in runs[0]:
        row[column] = CSV_FORGERIES[column]
    code, errors, _ = analyse(
        capsys,
        "--csv",
        write_csv(tmp_path / "runs.csv", runs),
        "--out",
        tmp_path / "out",
        "--no-figures",
    )
    assert code == 0 and errors == []
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert len(summary) == len(runs) - 1 and runs[0][0]["start_time"] not in set(
        summary["start_time"]
    )
    skipped = (tmp_path / "out" / "REPORT.md").read_text().split("## Skipped runs")[1]
    assert runs[0][0]["run"] in skipped


# ---------------------------------------- issue 39, finding 9: formulas and markdown in the outputs
FORMULA = "=cmd|' /C calc'!A0"
HYPERLINK = '=HYPERLINK("http://evil.example","x")'
HOSTILE_TAG = "x`y\n# Owned <img src=x onerror=alert(1)> | [a](http://evil.example)"
HOSTILE_PLATFORM = "Linux\n| evil | row |\r<img src=x onerror=alert(1)>"
QUOTED = "'=quoted already"  # as a user typed it: read back with its quote


def hostile_runs(root: Path) -> Path:
    """exp1 runs of linen and nnx on three envs under three tags (a formula; markdown and HTML; one
    that begins with a quote), on a platform whose name breaks lines and holds HTML."""
    tags = [("linux", FORMULA), ("mac", HOSTILE_TAG), ("linux", QUOTED)]
    for (tag, text), env, framework in product(tags, ENVS[:3], ("linen", "nnx")):
        run = write_run(
            root, env, framework, "small", STUDY.default_compile(framework), 1, sync=False, tag=tag
        )
        config = json.loads((run["run_dir"] / "config.json").read_text())
        config.update(tag=text, platform=HOSTILE_PLATFORM)
        (run["run_dir"] / "config.json").write_text(json.dumps(config))
    return root


def formula_cells(path: Path) -> list[str]:
    """The cells of a CSV that a spreadsheet would run: text beginning with = + - @, a tab or a
    carriage return (a negative number is a number)."""
    bad = []
    with open(path, newline="") as f:
        for row in csv.reader(f):
            for cell in row:
                if cell[:1] in ("=", "+", "@", "\t", "\r") or (
                    cell[:1] == "-" and not is_number(cell)
                ):
                    bad.append(cell)
    return bad


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def broken_tables(markdown: str) -> list[str]:
    """Lines of a markdown table whose number of cells differs from its header's, and lines that a
    hostile text made into markup: a heading, raw HTML or a link outside a code span."""
    problems, width = [], None
    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = line.count("|") - line.count("\\|")
            width = width or cells
            problems += [line] if cells != width else []
        else:
            width = None
        markup = re.sub(r"(`+).*?\1", "", line)  # a code span shows its text as it is
        if (
            "<img" in markup
            or "<script" in markup
            or line.startswith("# Owned")
            or re.search(r"\]\(\w+:", markup)
        ):
            problems.append(line)
    return problems


def test_text_a_spreadsheet_would_run_is_quoted_in_every_csv_and_read_back_as_written(
    tmp_path, capsys
):
    hostile_runs(tmp_path / "runs")
    out = tmp_path / "out"
    assert analyse(capsys, tmp_path / "runs", "--out", out, "--no-figures")[0] == 0
    for name in ("runs.csv", "summary.csv", "speedups.csv", "env_cost.csv"):
        assert formula_cells(out / name) == [], name
    assert set(pd.read_csv(out / "summary.csv")["tag"]) == {
        f"'{FORMULA}",
        f"'{QUOTED}",
        HOSTILE_TAG,
    }
    # read back with --csv: the same tags, the same tables; and the same call again loses nothing
    # (no --force)
    runs, _ = load_runs([], [str(out / "runs.csv")], STUDY)
    assert set(runs["tag"]) == {FORMULA, HOSTILE_TAG, QUOTED} and set(runs["platform"]) == {
        HOSTILE_PLATFORM
    }
    again = tmp_path / "again"
    assert analyse(capsys, "--csv", out / "runs.csv", "--out", again, "--no-figures")[0] == 0
    for name in ("runs.csv", "summary.csv", "speedups.csv"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name
    assert analyse(capsys, tmp_path / "runs", "--out", out, "--no-figures")[0] == 0


def hostile_cell(row: dict, column: str, text: str) -> dict:
    """A runs.csv row's cells with `text` at the start of `column`, its command agreeing with its
    fields (runlog checks that it does): a tag given by --tag, a command that runs the framework's
    script from a folder named `text`."""
    if column == "run":
        return {"run": text + row["run"]}
    if column == "command":
        return {"command": f"{text}/{row['command']}"}
    if column == "tag":
        return {
            "tag": text,
            "command": row["command"].replace("--tag t", f"--tag {shlex.quote(text)}"),
        }
    return {column: text}


@pytest.mark.parametrize("column", ["hostname", "tag", "command", "run"])
@pytest.mark.parametrize("text", [FORMULA, HYPERLINK, "+1+cmd", "-1+cmd", "@SUM(A1)", "\tx"])
def test_a_formula_in_a_runs_csv_is_quoted_in_the_tables_and_kept_as_text(
    tmp_path, capsys, column, text
):
    runs = linen_nnx(ENVS)
    for run in runs[:2]:  # a linen and an nnx run of the first env: a pair
        for row in run:
            row.update(hostile_cell(row, column, text))
    code, errors, _ = analyse(
        capsys,
        "--csv",
        write_csv(tmp_path / "in.csv", runs),
        "--out",
        tmp_path / "out",
        "--no-figures",
    )
    assert code == 0 and errors == []
    for name in ("runs.csv", "summary.csv"):
        assert formula_cells(tmp_path / "out" / name) == [], name
    read, skipped = load_runs([], [str(tmp_path / "out" / "runs.csv")], STUDY)
    assert skipped == [] and read[column].astype(str).str.startswith(text).sum() == 2 * len(runs[0])


def test_markdown_and_html_in_the_runs_never_reach_report_md_or_the_readme_as_markup(
    tmp_path, capsys
):
    hostile_runs(tmp_path / "runs")
    out = tmp_path / "out"
    assert analyse(capsys, tmp_path / "runs", "--out", out, "--no-figures")[0] == 0
    previous = tmp_path / "<img src=x onerror=alert(1)> [a](javascript:alert(1)).csv"
    shutil.copy(out / "speedups.csv", previous)
    timing = tmp_path / "timing.json"
    hostile = {
        "device": "<script>alert(1)</script>\n# Owned",
        "envs": {"CartPole-v1": {"ratio": 1}},
    }
    timing.write_text(json.dumps(hostile))
    block = tmp_path / "block.md"
    args = [
        "--out",
        tmp_path / "out2",
        "--no-figures",
        "--previous",
        previous,
        "--env-timing",
        timing,
    ]
    assert analyse(capsys, tmp_path / "runs", *args, "--readme-block", block)[0] == 0
    report = (tmp_path / "out2" / "REPORT.md").read_text()
    assert broken_tables(report) == [] and broken_tables(block.read_text()) == []
    # shown, as text
    assert "&lt;img src=x onerror=alert(1)&gt;" in report and "&lt;script&gt;" in report
    assert "Owned" in report and "Linux" in report


# ----------------------------------------------------- issue 56, item 4: layers a reader holds
def test_each_analysis_module_imports_only_those_above():
    """analysis/'s package docstring names each module in its order of layers: a module imports
    only modules named above it (no cycle, no floor skipped back up). Its modules' number and size
    follow their jobs: no cap."""
    import ast

    import analysis

    folder = Path(analysis.__file__).parent
    modules = sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")
    listed = re.findall(r"^    (\w+) ", analysis.__doc__, re.M)
    assert sorted(listed) == modules
    for name in modules:
        tree = ast.parse((folder / f"{name}.py").read_text())
        imported = {
            node.module.split(".")[1]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("analysis.")
        } | {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "analysis"
            for alias in node.names
        }
        above = set(listed[: listed.index(name)])
        assert imported <= above, (name, imported - above)

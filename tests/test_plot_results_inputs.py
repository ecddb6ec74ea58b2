"""plot_results.py given what it should refuse or survive: an --out holding more than it would
write, runs that share a folder name, runs of other lengths or batch sizes, broken run folders,
garbage files.

Every test goes through plot_results.main, as a user would, so that it holds for any layout of the
analysis code.
"""

import bz2
import gzip
import itertools
import lzma
import os
import re
import signal
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from analysis_runs import (
    BATCH,
    ENVS,
    analyse,
    csv_run,
    linen_nnx,
    own_figure,
    snapshot,
    write_csv,
    write_run,
)
from pandas.testing import assert_frame_equal
from tensorboardX import SummaryWriter

import plot_results
from analysis import common
from helpers import STUDY


def leftovers(folder: Path) -> list[str]:
    """Temporary folders of plot_results left beside folder."""
    return [p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}.")]


# ------------------------------------------------------------------- issue 25, item 3: no data loss
@pytest.fixture
def full_out(tmp_path, capsys) -> Path:
    """A results folder of 4 envs (16 runs), with a figure of this tool and files that are not its
    own."""
    out = tmp_path / "results"
    code, _, _ = analyse(
        capsys,
        "--csv",
        write_csv(tmp_path / "all.csv", linen_nnx(ENVS)),
        "--out",
        out,
        "--no-figures",
    )
    assert code == 0
    (out / "exp1_total.png").write_bytes(own_figure())  # a figure of an earlier call
    (out / "README.md").write_text("my reading of these results\n")
    (out / "runs").mkdir()
    # e.g. the run folders themselves
    (out / "runs" / "config.json").write_text("{not a run of this study")
    return out


def test_out_holding_more_runs_is_refused_and_left_whole(full_out, tmp_path, capsys):
    """A call given 4 of the 16 runs into that folder: refused with one line naming it and --force,
    exit 2, every file as it was and no temporary folder left; with --force the tables are replaced
    and the other files kept."""
    before = snapshot(full_out)
    fewer = write_csv(tmp_path / "fewer.csv", linen_nnx(ENVS[:1]))
    code, errors, _ = analyse(capsys, "--csv", fewer, "--out", full_out, "--no-figures")
    assert code == 2 and len(errors) == 1
    assert (
        str(full_out) in errors[0] and "--force" in errors[0] and "12 of its 16 runs" in errors[0]
    )
    assert snapshot(full_out) == before and leftovers(full_out) == []

    code, errors, _ = analyse(capsys, "--csv", fewer, "--out", full_out, "--no-figures", "--force")
    assert code == 0 and errors == []
    assert len(pd.read_csv(full_out / "summary.csv")) == 4
    # this tool's stale figure, replaced by nothing
    assert not (full_out / "exp1_total.png").exists()
    after = snapshot(full_out)
    assert all(after[name] == before[name] for name in ("README.md", "runs/config.json"))
    assert leftovers(full_out) == []


def test_out_holding_figures_this_call_does_not_draw_is_refused(full_out, tmp_path, capsys):
    """The same 16 runs again, but --no-figures would leave the folder without its figure: refused,
    then --force."""
    before = snapshot(full_out)
    again = write_csv(tmp_path / "again.csv", linen_nnx(ENVS))
    code, errors, _ = analyse(capsys, "--csv", again, "--out", full_out, "--no-figures")
    assert (
        code == 2 and len(errors) == 1 and "exp1_total.png" in errors[0] and "--force" in errors[0]
    )
    assert snapshot(full_out) == before
    assert analyse(capsys, "--csv", again, "--out", full_out, "--no-figures", "--force")[0] == 0


def test_out_that_loses_nothing_is_replaced_without_force(full_out, tmp_path, capsys):
    """More runs than the folder holds (a superset): nothing is lost, so no --force is needed."""
    (full_out / "exp1_total.png").unlink()
    more = write_csv(tmp_path / "more.csv", linen_nnx(ENVS, seeds=(1, 2, 3)))
    assert analyse(capsys, "--csv", more, "--out", full_out, "--no-figures")[0] == 0
    assert len(pd.read_csv(full_out / "summary.csv")) == 24
    assert (full_out / "README.md").read_text() == "my reading of these results\n"


def test_a_speedups_csv_of_before_the_backends_is_read_as_gymnax(full_out, tmp_path, capsys):
    """An --out whose speedups.csv has no backend column (written before the env backends): its rows
    were on gymnax, so the same runs replace it without --force; a row this analysis lacks is still
    found."""
    (full_out / "exp1_total.png").unlink()
    speedups = pd.read_csv(full_out / "speedups.csv")
    assert set(speedups["backend"]) == {"gymnax"}
    speedups.drop(columns="backend").to_csv(full_out / "speedups.csv", index=False)
    again = write_csv(tmp_path / "again.csv", linen_nnx(ENVS))
    assert analyse(capsys, "--csv", again, "--out", full_out, "--no-figures")[0] == 0
    assert "backend" in pd.read_csv(full_out / "speedups.csv").columns

    speedups = pd.read_csv(full_out / "speedups.csv")
    extra = speedups.iloc[:1].assign(pair="torch->linen")  # a pair these runs do not have
    pd.concat([speedups, extra]).drop(columns="backend").to_csv(
        full_out / "speedups.csv", index=False
    )
    code, errors, _ = analyse(capsys, "--csv", again, "--out", full_out, "--no-figures")
    assert code == 2 and "speedups.csv" in errors[0] and "--force" in errors[0]


def test_an_unreadable_table_in_out_is_not_replaced_silently(full_out, tmp_path, capsys):
    (full_out / "exp1_total.png").unlink()
    (full_out / "summary.csv").write_bytes(bytes(range(256)))
    before = snapshot(full_out)
    code, errors, _ = analyse(
        capsys, "--csv", write_csv(tmp_path / "a.csv", linen_nnx(ENVS)), "--out", full_out
    )
    assert (
        code == 2
        and "summary.csv" in errors[0]
        and "--force" in errors[0]
        and snapshot(full_out) == before
    )


def test_an_interrupted_analysis_leaves_out_as_it_was(full_out, tmp_path, capsys, monkeypatch):
    """Ctrl-C while the report is written (after every table): --out is untouched, the temporary
    folder removed, one line, exit code 130."""
    from analysis import report

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "report_text", interrupted)
    before = snapshot(full_out)
    fewer = write_csv(tmp_path / "fewer.csv", linen_nnx(ENVS[:2]))
    with pytest.raises(SystemExit) as stopped:
        plot_results.main(["--csv", str(fewer), "--out", str(full_out), "--no-figures", "--force"])
    assert stopped.value.code == 130
    assert snapshot(full_out) == before and leftovers(full_out) == []
    # one line, not Python's traceback (issue 79)
    assert capsys.readouterr().err.splitlines() == [
        "plot_results.py: interrupted; no file is left half-written"
    ]


def test_a_sigterm_while_staging_leaves_out_as_it_was_in_one_line(
    full_out, tmp_path, capsys, monkeypatch
):
    """A SIGTERM while the report is staged (issue 79: it killed the process and left the
    .partial folder beside --out): --out untouched, the temporary folder removed, one line, exit
    code 130."""
    from analysis import report

    real = report.report_text

    def terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    def not_caught(signum, frame):
        raise AssertionError("plot_results.py left SIGTERM to its default action")

    monkeypatch.setattr(report, "report_text", terminated)
    before_handler = signal.signal(signal.SIGTERM, not_caught)
    try:
        before = snapshot(full_out)
        fewer = write_csv(tmp_path / "fewer.csv", linen_nnx(ENVS[:2]))
        argv = ["--csv", str(fewer), "--out", str(full_out), "--no-figures", "--force"]
        with pytest.raises(SystemExit) as stopped:
            plot_results.main(argv)
    finally:
        signal.signal(signal.SIGTERM, before_handler)
    assert stopped.value.code == 130
    assert snapshot(full_out) == before and leftovers(full_out) == []
    assert capsys.readouterr().err.splitlines() == [
        "plot_results.py: interrupted by SIGTERM; no file is left half-written"
    ]


def test_out_that_is_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "out").write_text("mine")
    code, errors, _ = analyse(
        capsys, "--csv", write_csv(tmp_path / "a.csv", linen_nnx(ENVS)), "--out", tmp_path / "out"
    )
    assert code == 2 and len(errors) == 1 and "is a file" in errors[0]
    assert (tmp_path / "out").read_text() == "mine"


def test_a_new_out_is_created_whole_with_the_usual_permissions(tmp_path, capsys):
    out = tmp_path / "deep" / "new"
    assert (
        analyse(
            capsys,
            "--csv",
            write_csv(tmp_path / "a.csv", linen_nnx(ENVS)),
            "--out",
            out,
            "--no-figures",
        )[0]
        == 0
    )
    assert {p.name for p in out.iterdir()} == {*plot_results.TABLES, "REPORT.md"}
    assert {"runs.csv", "summary.csv", "speedups.csv", "env_cost.csv", "learning.csv"} <= set(
        plot_results.TABLES
    )
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask and leftovers(out) == []


# ----------------------------------------------------- issue 25, item 9: runs told apart by content
def write_tagged(root: Path, tag: str) -> list[Path]:
    """exp1 runs of linen and nnx on three envs under one tag; the folder names repeat under every
    root."""
    return [
        write_run(
            root, env, framework, "small", STUDY.default_compile(framework), 1, sync=False, tag=tag
        )["run_dir"]
        for env, framework in itertools.product(ENVS[:3], ("linen", "nnx"))
    ]


def test_runs_of_other_tags_sharing_a_folder_name_are_all_kept(tmp_path, capsys):
    linux, mac = write_tagged(tmp_path / "a", "linux"), write_tagged(tmp_path / "b", "mac")
    assert [p.name for p in linux] == [p.name for p in mac]  # the same folder names
    out = tmp_path / "out"
    assert analyse(capsys, tmp_path / "a", tmp_path / "b", "--out", out, "--no-figures")[0] == 0
    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == 12 and summary.groupby("tag").size().to_dict() == {"linux": 6, "mac": 6}
    speedups = pd.read_csv(out / "speedups.csv").set_index(["metric", "experiment", "pair"])
    # 3 envs under each of 2 tags
    assert speedups.loc[("total", "exp1", "nnx->linen"), "n_clusters"] == 6


def test_the_same_run_given_twice_is_kept_once(tmp_path, capsys):
    """A run given as a folder and again in a runs.csv is one run."""
    write_tagged(tmp_path / "a", "linux")
    first = tmp_path / "first"
    assert analyse(capsys, tmp_path / "a", "--out", first, "--no-figures")[0] == 0
    out = tmp_path / "out"
    outcome = analyse(
        capsys, tmp_path / "a", "--csv", first / "runs.csv", "--out", out, "--no-figures"
    )
    assert outcome.code == 0 and "6 runs were given more than once" in outcome.stdout
    assert len(pd.read_csv(out / "summary.csv")) == 6
    assert (out / "speedups.csv").read_text() == (first / "speedups.csv").read_text()


# ----------------------------------------------------- issue 25, item 10: what is paired and pooled
def test_runs_of_other_lengths_or_batch_sizes_are_never_pooled(tmp_path, capsys):
    """Three envs at 10 iterations, one of them again at 20, and a fourth env whose two runs differ
    in batch size: the cell holds the 10-iteration pairs of the three envs only ("12 pairs / 3
    envs", not "13 pairs / 4 envs"), and REPORT.md says what was left out and why."""
    runs = linen_nnx(ENVS[:3])  # 12 pairs
    runs += linen_nnx(ENVS[:1], seeds=(3,), iterations=20)  # 1 pair of another length
    # no partner
    runs += [csv_run(ENVS[3], "linen", 1), csv_run(ENVS[3], "nnx", 1, batch=2 * BATCH)]
    out = tmp_path / "out"
    assert (
        analyse(
            capsys, "--csv", write_csv(tmp_path / "runs.csv", runs), "--out", out, "--no-figures"
        )[0]
        == 0
    )
    cell = (
        pd.read_csv(out / "speedups.csv").set_index(["metric", "pair"]).loc[("total", "nnx->linen")]
    )
    assert (cell["n_pairs"], cell["n_clusters"]) == (12, 3)
    report = (out / "REPORT.md").read_text()
    assert "12 pairs / 3 envs" in report and "13 pairs" not in report and "4 envs" not in report
    left_out = report.split("### Left out of the speedup tables")[1].split("\n## ")[0]
    rows = {
        line.split("|")[3].strip() + " " + line.split("|")[5].strip(): line
        for line in left_out.splitlines()
        if line.startswith("| ")
    }
    assert "not pooled" in rows["CartPole-v1 20"] and "1 linen, 1 nnx" in rows["CartPole-v1 20"]
    assert "unpaired" in rows[f"{ENVS[3]} 10"] and re.search(
        rf"\|\s+{2 * BATCH}\s+\|\s+1 nnx", left_out
    )
    assert "CartPole-v1 10" not in rows  # the pooled runs are not listed


def test_a_completed_run_with_no_iterations_is_skipped_with_its_reason(tmp_path, capsys):
    """summary.json says completed with 0 iterations (its events hold 11): an error, not data."""
    for framework in ("linen", "nnx"):
        write_run(
            tmp_path / "runs",
            "CartPole-v1",
            framework,
            "small",
            STUDY.default_compile(framework),
            1,
            sync=False,
        )
    broken = write_run(tmp_path / "runs", "Acrobot-v1", "linen", "small", "jit", 1, sync=False)[
        "run_dir"
    ]
    summary = (
        (broken / "summary.json")
        .read_text()
        .replace('"iterations_completed": 11', '"iterations_completed": 0')
    )
    (broken / "summary.json").write_text(summary)
    out = tmp_path / "out"
    assert analyse(capsys, tmp_path / "runs", "--out", out, "--no-figures")[0] == 0
    assert len(pd.read_csv(out / "summary.csv")) == 2
    skipped = (out / "REPORT.md").read_text().split("## Skipped runs")[1]
    assert broken.name in skipped and "completed with 0 iterations" in skipped


# -------------------------------------------------------------- issue 25, item 11: two events files
def test_a_run_folder_with_two_events_files_is_skipped_with_its_reason(tmp_path, capsys):
    for framework in ("linen", "nnx"):
        write_run(
            tmp_path / "runs",
            "CartPole-v1",
            framework,
            "small",
            STUDY.default_compile(framework),
            1,
            sync=False,
        )
    doubled = write_run(tmp_path / "runs", "Acrobot-v1", "linen", "small", "jit", 1, sync=False)[
        "run_dir"
    ]
    # a second writer in the same folder
    writer = SummaryWriter(str(doubled), filename_suffix=".second")
    writer.add_scalar("time/iteration", 1.0, BATCH)
    writer.close()
    assert len(list(doubled.glob("events.out.tfevents.*"))) == 2
    out = tmp_path / "out"
    assert analyse(capsys, tmp_path / "runs", "--out", out, "--no-figures")[0] == 0
    skipped = (out / "REPORT.md").read_text().split("## Skipped runs")[1]
    assert doubled.name in skipped and "2 TensorBoard events files" in skipped
    assert len(pd.read_csv(out / "summary.csv")) == 2


# ----------------------------------------------------------- issue 25, item 16: garbage input files
GARBAGE = {
    "empty": b"",
    "binary": bytes(range(256)) * 8,
    "text": b'just some words\nand an unterminated "quote, here\n',
    "csv": b"a,b\n1,2\n",
}


@pytest.mark.parametrize("flag", ["--csv", "--previous"])
@pytest.mark.parametrize("kind", GARBAGE)
def test_an_empty_binary_or_garbage_file_is_one_line_and_exit_2(tmp_path, capsys, flag, kind):
    bad = tmp_path / f"{kind}.csv"
    bad.write_bytes(GARBAGE[kind])
    good = write_csv(tmp_path / "good.csv", linen_nnx(ENVS))
    inputs = ["--csv", bad] if flag == "--csv" else ["--csv", good, "--previous", bad]
    code, errors, _ = analyse(capsys, *inputs, "--out", tmp_path / "out", "--no-figures")
    assert code == 2 and len(errors) == 1 and str(bad) in errors[0] and flag in errors[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag,column", [("--csv", "time/iteration"), ("--previous", "geomean")])
def test_a_table_with_words_for_numbers_is_one_line_and_exit_2(tmp_path, capsys, flag, column):
    good = write_csv(tmp_path / "good.csv", linen_nnx(ENVS))
    first = tmp_path / "first"
    assert analyse(capsys, "--csv", good, "--out", first, "--no-figures")[0] == 0
    source = good if flag == "--csv" else first / "speedups.csv"
    table = pd.read_csv(source).astype({column: object})
    table.loc[1, column] = "fast"
    table.to_csv(tmp_path / "bad.csv", index=False)
    inputs = (
        ["--csv", tmp_path / "bad.csv"]
        if flag == "--csv"
        else ["--csv", good, "--previous", tmp_path / "bad.csv"]
    )
    code, errors, _ = analyse(capsys, *inputs, "--out", tmp_path / "out", "--no-figures")
    assert code == 2 and len(errors) == 1 and "'fast'" in errors[0] and column in errors[0]
    assert not (tmp_path / "out").exists()


# ------------------------------------------------- issue 79, item 6: a table of a bounded size
@pytest.mark.parametrize("kind", ["gzip that expands past it", "sparse file larger than it"])
@pytest.mark.parametrize("flag", ["--csv", "--previous"])
def test_a_table_larger_than_the_bound_is_refused_at_the_bound(
    tmp_path, capsys, monkeypatch, flag, kind
):
    """A small gzip that expands past MAX_TABLE_BYTES (the audit's: 22 MB that expanded to 3.6 GB,
    read whole in 134 s and 6.8 GB before "no completed run"), a sparse file larger than it on
    disk (2 GB: 27 s, 4.3 GB): one line naming the file and the bound, exit 2, nothing written.
    The bound is made 1 MiB here; the gzip expands to 16 MiB, refused once 1 MiB is read."""
    monkeypatch.setattr(common, "MAX_TABLE_BYTES", 1 << 20)
    if kind.startswith("gzip"):
        big = tmp_path / "big.csv.gz"
        big.write_bytes(gzip.compress(b"run,iteration\n" + b"r,1\n" * (1 << 22), 1))
        assert big.stat().st_size < 1 << 20
    else:
        big = tmp_path / "big.csv"
        with open(big, "wb") as f:
            f.truncate((1 << 20) + 1)
    good = write_csv(tmp_path / "good.csv", linen_nnx(ENVS[:1]))
    inputs = ["--csv", big] if flag == "--csv" else ["--csv", good, "--previous", big]
    code, errors, _ = analyse(capsys, *inputs, "--out", tmp_path / "out", "--no-figures")
    assert code == 2 and len(errors) == 1, errors
    where = "once decompressed" if kind.startswith("gzip") else "on disk"
    assert f"{flag} {big}: more than 1,048,576 bytes {where}" in errors[0]
    assert not (tmp_path / "out").exists()


def test_a_compressed_table_within_the_bound_is_read_as_pandas_reads_it(tmp_path, capsys):
    """gzip, bz2, xz and a zip of one file are read through the bound (as pandas read them), and
    a .zst or .tar, which no bounded reader here takes, is refused in one line naming the ones
    read."""
    runs = write_csv(tmp_path / "runs.csv", linen_nnx(ENVS[:1]))
    data = runs.read_bytes()
    for suffix, compress in [
        (".gz", gzip.compress),
        (".bz2", bz2.compress),
        (".xz", lzma.compress),
    ]:
        path = tmp_path / f"runs.csv{suffix}"
        path.write_bytes(compress(data))
        assert_frame_equal(common.read_csv("--csv", path, "runs.csv"), pd.read_csv(runs))
    with zipfile.ZipFile(tmp_path / "runs.zip", "w") as archive:
        archive.write(runs, "runs.csv")
    assert_frame_equal(common.read_csv("--csv", tmp_path / "runs.zip", "t"), pd.read_csv(runs))
    for name in ("runs.csv.zst", "runs.tar.gz"):
        (tmp_path / name).write_bytes(b"")
        with pytest.raises(common.BadInput, match=r"give it plain or compressed as one of \.gz"):
            common.read_csv("--csv", tmp_path / name, "runs.csv")


def test_source_date_epoch_makes_a_replot_byte_for_byte(tmp_path, capsys, monkeypatch):
    """SOURCE_DATE_EPOCH (the reproducible-builds convention) dates REPORT.md, so that an edition
    plotted twice is the same byte for byte; a value that is not a number is refused before anything
    is written."""
    runs = write_csv(tmp_path / "all.csv", linen_nnx(ENVS))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1796342400")
    assert analyse(capsys, "--csv", runs, "--out", tmp_path / "a", "--no-figures").code == 0
    assert "on 2026-12-04 00:00 UTC from" in (tmp_path / "a" / "REPORT.md").read_text()
    assert analyse(capsys, "--csv", runs, "--out", tmp_path / "b", "--no-figures").code == 0
    assert snapshot(tmp_path / "a") == snapshot(tmp_path / "b")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    code, errors, _ = analyse(capsys, "--csv", runs, "--out", tmp_path / "c", "--no-figures")
    assert (
        code == 2 and "SOURCE_DATE_EPOCH='yesterday'" in errors[0] and not (tmp_path / "c").exists()
    )

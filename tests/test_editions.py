"""The committed editions (results/*/) keep what re-plots them: runs.csv.gz, plot_results.py's
runs.csv (a row per run x iteration: config, summary, every scalar) in reproducible gzip. Re-plotted
from it, an edition gives its committed CSVs again, byte for byte."""

import gzip
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from helpers import ROOT

COMPACT = "runs.csv.gz"
# the edition's own env timing, when it was plotted with one (plot_results.py --env-timing)
TIMING = "env_timing.json"
EDITIONS = sorted(path.parent for path in (ROOT / "results").glob(f"*/{COMPACT}"))
# gzip's header (RFC 1952): its magic and compression method
MAGIC, DEFLATE = b"\x1f\x8b", 8


def replot(runs_csv: Path, edition: Path, out: Path) -> subprocess.CompletedProcess:
    """plot_results.py --csv runs_csv into out, without figures, as the edition was plotted."""
    command = [sys.executable, "plot_results.py", "--csv", str(runs_csv), "--out", str(out)]
    if (edition / TIMING).is_file():
        command += ["--env-timing", str(edition / TIMING)]
    return subprocess.run(
        [*command, "--no-figures"], cwd=ROOT, capture_output=True, text=True, check=False
    )


def differing_tables(edition: Path, out: Path) -> list[str]:
    """The committed CSVs of edition that the re-plot in out does not give byte for byte, and the
    re-plot's runs.csv when it is not runs.csv.gz's text (the round trip loses nothing)."""
    committed = sorted(edition.glob("*.csv"))
    assert committed, f"{edition} holds no CSV to compare"
    differing = [
        path.name
        for path in committed
        if not (out / path.name).is_file() or (out / path.name).read_bytes() != path.read_bytes()
    ]
    if (out / "runs.csv").read_bytes() != gzip.decompress((edition / COMPACT).read_bytes()):
        differing.append(COMPACT)
    return differing


def test_the_converted_editions_are_found():
    # a glob that found nothing would make the tests below pass without checking anything
    converted = {"learning10-cpu", "learning-cpu", "agents-cpu", "cpu-v3", "dtypes-cpu", "envpool"}
    assert converted <= {edition.name for edition in EDITIONS}


@pytest.mark.slow
@pytest.mark.parametrize("edition", EDITIONS, ids=lambda path: path.name)
def test_an_edition_replots_from_its_runs_csv_gz_to_its_committed_csvs(edition, tmp_path):
    out = tmp_path / "replot"
    proc = replot(edition / COMPACT, edition, out)
    assert proc.returncode == 0, proc.stderr
    assert differing_tables(edition, out) == []


@pytest.mark.slow
def test_a_corrupted_value_makes_the_replot_differ(tmp_path):
    """The check above is not vacuous: one run's total time changed in a copy of runs.csv.gz, and
    the re-plot no longer gives the committed summary.csv."""
    edition = ROOT / "results" / "learning10-cpu"
    copy = tmp_path / "edition"
    copy.mkdir()
    for path in edition.glob("*.csv"):
        (copy / path.name).write_bytes(path.read_bytes())
    runs = pd.read_csv(edition / COMPACT, dtype=str, keep_default_na=False)
    first = runs["run"] == runs["run"].iloc[0]
    runs.loc[first, "total_s"] = str(float(runs.loc[first, "total_s"].iloc[0]) + 1.0)
    runs.to_csv(copy / COMPACT, index=False, compression={"method": "gzip", "mtime": 0})
    proc = replot(copy / COMPACT, copy, tmp_path / "replot")
    assert proc.returncode == 0, proc.stderr
    assert "summary.csv" in differing_tables(copy, tmp_path / "replot")


@pytest.mark.parametrize("edition", EDITIONS, ids=lambda path: path.name)
def test_runs_csv_gz_is_reproducible_gzip(edition):
    """Written as `gzip -9 -n`: no file name and mtime 0 in the header, so that compressing the
    same runs.csv again gives the same bytes; complete (gzip checks its CRC and length)."""
    data = (edition / COMPACT).read_bytes()
    assert data[:2] == MAGIC and data[2] == DEFLATE
    flags, mtime = data[3], int.from_bytes(data[4:8], "little")
    assert flags == 0, f"header flags {flags:#x}: a file name, comment or extra field is stored"
    assert mtime == 0, f"mtime {mtime} stored: compressing again would give other bytes"
    assert gzip.decompress(data).startswith(b"run,run_dir,")

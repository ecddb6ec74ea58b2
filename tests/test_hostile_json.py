"""Hostile JSON given to the analysis, the sweep and the benchmarks (issue 66 item 12): every JSON
they read goes through atomic.py's one reader (at most 1 MiB, 32 levels deep, typed), so that a
file 100,000 levels deep, one of 2 MB or one of the wrong type is a one-line skip or refusal, never
a traceback.
"""

import json
import sys

import pytest
from analysis_runs import ENVS, analyse, linen_nnx, write_csv
from checkpoints import random_checkpoint

import atomic
import evaluate
from benchmarks import purejaxrl_runs
from benchmarks.common import interpreter_versions
from core import env_timing_file, runlog

DEEP = "[" * 100_000 + "]" * 100_000
# deeper than atomic's 32 levels, shallow enough for Python's parser (which the code of before used)
NESTED = "[" * 40 + "]" * 40
TIMING = {"envs": {env: {"ratio": 1.0 + i} for i, env in enumerate(ENVS)}}


@pytest.mark.parametrize(
    "text, why",
    [
        (DEEP, "nested deeper than 32"),
        ('{"status": "completed", "pad": ' + NESTED + "}", "nested deeper than 32"),
        (json.dumps({"pad": "x" * 2_000_000}), "more than a run writes"),
        ('{"status": "completed", "total_s": NaN}', "NaN is not JSON"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_a_hostile_run_file_is_one_line_of_runlog(tmp_path, text, why):
    path = tmp_path / "summary.json"
    path.write_text(text)
    with pytest.raises(runlog.RunError) as refusal:
        runlog.read_json(path)
    assert why in str(refusal.value) and "\n" not in str(refusal.value)


def test_a_runs_csv_cell_of_deep_json_skips_its_run_in_one_line(tmp_path, capsys):
    """A final_returns cell 100,000 levels deep: the code of before raised RecursionError."""
    runs = linen_nnx(ENVS)
    for run in runs:
        for row in run:
            row["final_returns"] = "[null]"
    for row in runs[0]:
        row["final_returns"] = DEEP
    csv = write_csv(tmp_path / "runs.csv", runs)
    capsys.readouterr()
    code, errors, _ = analyse(capsys, "--csv", csv, "--out", tmp_path / "out", "--no-figures")
    assert code == 0 and errors == []
    report = (tmp_path / "out" / "REPORT.md").read_text()
    assert "1 skipped" in report and "final_returns" in report


@pytest.mark.parametrize(
    "text, why",
    [
        (json.dumps({**TIMING, "pad": "x" * 2_000_000}), "more than the 1,048,576"),
        (json.dumps(TIMING)[:-1] + ', "pad": ' + NESTED + "}", "nested deeper than 32"),
        ('{"envs": {"CartPole-v1": {"ratio": Infinity}}}', "Infinity is not JSON"),
    ],
)
def test_a_hostile_env_timing_file_is_refused_in_one_line(tmp_path, capsys, text, why):
    """The code of before read a 2 MB file whole and used it, and took 40 levels."""
    timing = tmp_path / "env_timing.json"
    timing.write_text(text)
    csv = write_csv(tmp_path / "runs.csv", linen_nnx(ENVS))
    code, errors, _ = analyse(
        capsys, "--csv", csv, "--out", tmp_path / "out", "--env-timing", timing, "--no-figures"
    )
    assert code == 2 and len(errors) == 1 and why in errors[0] and str(timing) in errors[0]
    assert not (tmp_path / "out").exists()
    with pytest.raises(env_timing_file.BadTiming):
        env_timing_file.read(timing)


def test_a_deep_driver_result_is_a_failed_run_not_a_traceback():
    with pytest.raises(purejaxrl_runs.RunFailed):
        purejaxrl_runs.last_json(f"some output\n{DEEP}\n")
    with pytest.raises(purejaxrl_runs.RunFailed):
        purejaxrl_runs.last_json("[1, 2]\n")


def test_an_interpreter_that_answers_deep_json_is_one_line(tmp_path):
    """The versions of a peer's interpreter: its answer read by atomic's reader."""
    python = tmp_path / "python"
    python.write_text(f"#!{sys.executable}\nprint('[' * 100_000)\n")
    python.chmod(0o755)
    with pytest.raises(RuntimeError) as refusal:
        interpreter_versions(python, ["jax"])
    assert "\n" not in str(refusal.value) and "versions: nested deeper" in str(refusal.value)


def no_episodes(*args):
    raise AssertionError("the episodes ran")


@pytest.mark.parametrize(
    "named", [{"file": ["x"]}, {"file": "model.safetensors", "sha256": {"a": 1}}, ["x"], 7]
)
def test_an_eval_json_entry_that_names_its_checkpoint_otherwise_is_refused_first(
    tmp_path, capsys, monkeypatch, named
):
    """{"checkpoint": {"file": ["x"]}} in eval.json was TypeError: unhashable type: 'list' after
    the episodes, the evaluation lost (issue 79 item 7): refused in one line before them (exit 2),
    eval.json left as it is."""
    random_checkpoint(tmp_path, "CartPole-v1")
    evaluations = [{"framework": "linen", "checkpoint": named}]
    text = json.dumps({atomic.WRITTEN_BY: "evaluate.py", "evaluations": evaluations})
    (tmp_path / "eval.json").write_text(text)
    monkeypatch.setattr(evaluate, "prepare", no_episodes)
    with pytest.raises(SystemExit) as done:
        evaluate.main([str(tmp_path)])
    errors = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and len(errors) == 1
    assert "eval.json" in errors[0] and "evaluation 0's checkpoint" in errors[0]
    assert (tmp_path / "eval.json").read_text() == text


def test_atomic_is_the_reader_of_runlog():
    """One reader: runlog's bound is atomic's."""
    assert runlog.MAX_JSON_BYTES == atomic.MAX_JSON_BYTES

"""The fourth audit's output paths and env-timing files (issue 54 items 1, 19 and 22): a tool replaces only files it
wrote, refused in one line (exit 2) before anything is measured; an env-timing file with a nonsense step cost is
refused wherever it is read; a benchmark's bad options are refused before measuring. Nothing here measures: the
measuring functions are replaced by ones that fail the test if called."""

import json
import socket
import sys

import pytest

import env_timing_file
import sweep_env_timing
from analysis.errors import BadInput
from analysis.loading import read_env_timing
from helpers import ROOT

NOTES = "# my notes\n\nnot to be lost\n"


def never(*args, **kwargs):
    raise AssertionError("measured, though the input should have been refused first")


def exit_code(main, monkeypatch, argv: list[str]) -> int:
    """main() run with argv as its command line: its exit status (SystemExit or its return value)."""
    monkeypatch.setattr(sys, "argv", ["prog", *argv])
    try:
        return main() or 0
    except SystemExit as e:
        return e.code


def one_error_line(capsys, *words: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    for word in words:
        assert word in err, (word, err)
    return err


def timing(envs: dict, host: str = "elsewhere", device: str = "cpu") -> str:
    return json.dumps({"hostname": host, "device": device, "envs": envs})


GOOD = {"ms_per_step": 0.5, "ratio": 1.0, "obs_dim": 4, "num_actions": 2}


# ------------------------------------------------------------------------------------ item 1: env_timing.py --out
@pytest.fixture
def env_timing(monkeypatch):
    import env_timing

    monkeypatch.setattr(env_timing, "time_env", never)
    return env_timing


def test_env_timing_refuses_an_out_that_is_not_an_env_timing_file(
    env_timing, monkeypatch, capsys, tmp_path
):
    notes = tmp_path / "notes.md"
    notes.write_text(NOTES)
    argv = ["--envs", "CartPole-v1", "--out", str(notes)]
    assert exit_code(env_timing.main, monkeypatch, argv) == 2
    one_error_line(capsys, str(notes), "env_timing.py")
    assert notes.read_text() == NOTES


def test_env_timing_refuses_to_replace_a_timing_file_with_fewer_envs(
    env_timing, monkeypatch, capsys, tmp_path
):
    out = tmp_path / "env_timing.json"
    text = timing({"CartPole-v1": GOOD, "Acrobot-v1": {**GOOD, "ratio": 2.0}})
    out.write_text(text)
    assert (
        exit_code(env_timing.main, monkeypatch, ["--envs", "CartPole-v1", "--out", str(out)]) == 2
    )
    one_error_line(capsys, str(out), "Acrobot-v1")
    assert out.read_text() == text


def test_env_timing_replaces_its_own_file_with_as_many_envs(env_timing, monkeypatch, tmp_path):
    out = tmp_path / "env_timing.json"
    out.write_text(timing({"CartPole-v1": GOOD}))
    env_timing.check_out_file(str(out), ["CartPole-v1", "Acrobot-v1"])  # no refusal


# ------------------------------------------------------------ item 1: bench.sh --env-timing-file of another host
def test_another_hosts_timing_file_is_timed_again_with_all_its_envs(tmp_path):
    """bench.sh re-times a file of another host into the same file: with every env it holds, not only the sweep's
    (env_timing.py would refuse fewer)."""
    path = tmp_path / "timing.json"
    path.write_text(timing({"Acrobot-v1": GOOD, "CartPole-v1": GOOD}, host="elsewhere"))
    reason, envs = sweep_env_timing.env_timing_reason(path, ["CartPole-v1", "MountainCar-v0"])
    assert "'elsewhere'" in reason and "keeps every env" in reason
    assert envs == ["Acrobot-v1", "CartPole-v1", "MountainCar-v0"]


# --------------------------------------------------------------------- item 19: env-timing files with nonsense
BAD_VALUES = [
    ("ratio", -1, "-1"),
    ("ratio", 0, "0"),
    ("ratio", float("nan"), "NaN"),
    ("ms_per_step", "x", '"x"'),
    ("ms_per_step", None, "null"),
    ("ratio", True, "true"),
]


@pytest.mark.parametrize("field, value, shown", BAD_VALUES)
def test_a_nonsense_step_cost_is_refused_by_the_sweep_check(tmp_path, field, value, shown):
    path = tmp_path / "timing.json"
    path.write_text(timing({"CartPole-v1": GOOD, "Acrobot-v1": {**GOOD, field: value}}))
    with pytest.raises(env_timing_file.BadTiming) as e:
        sweep_env_timing.env_timing_reason(path, ["CartPole-v1"])
    message = str(e.value)
    assert "\n" not in message
    assert str(path) in message and "'Acrobot-v1'" in message and f"{field} {shown}" in message


@pytest.mark.parametrize("field, value, shown", BAD_VALUES)
def test_a_nonsense_step_cost_is_refused_by_the_analysis(tmp_path, field, value, shown):
    path = tmp_path / "timing.json"
    path.write_text(timing({"CartPole-v1": {**GOOD, field: value}}))
    with pytest.raises(BadInput) as e:
        read_env_timing(str(path))
    message = str(e.value)
    assert "\n" not in message
    assert str(path) in message and "'CartPole-v1'" in message and f"{field} {shown}" in message


def test_sweep_py_says_why_in_one_line_and_exits_2(tmp_path, capsys):
    """bench.sh's check (sweep.py env-timing): one line naming the file, the env and the value; bench.sh then goes
    on without env timing, the file neither used nor replaced."""
    import sweep

    path = tmp_path / "timing.json"
    text = timing({"CartPole-v1": {**GOOD, "ratio": -1}}, host=socket.gethostname())
    path.write_text(text)
    argv = ["env-timing", f"--file={path}", "--experiments=exp1", "--envs=CartPole-v1"]
    assert sweep.main([*argv, f"--log-dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "ratio -1" in err, err
    assert path.read_text() == text


def test_the_committed_env_timings_are_usable():
    for path in sorted(ROOT.glob("results/**/env_timing.json")):
        assert env_timing_file.read(path)["envs"]

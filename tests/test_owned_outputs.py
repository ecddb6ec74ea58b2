"""Output paths and env-timing files (issue 54 items 1, 19 and 22): a tool
replaces only files it wrote, refused in one line (exit 2) before anything is measured; an
env-timing file with a nonsense step cost is refused wherever it is read; a benchmark's bad options
are refused before measuring. Nothing here measures: the measuring functions are replaced by ones
that fail the test if called."""

import json
import socket
import sys

import pytest

from analysis.common import BadInput
from analysis.loading import read_env_timing
from helpers import ROOT
from sweep import env_timing_check as sweep_env_timing

NOTES = "# my notes\n\nnot to be lost\n"


def never(*args, **kwargs):
    raise AssertionError("measured, though the input should have been refused first")


def exit_code(main, monkeypatch, argv: list[str]) -> int:
    """main() run with argv as its command line: its exit status (SystemExit or its return
    value)."""
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


# ---------------------------------------------------------------- item 1: sweep/env_timing.py --out
@pytest.fixture
def env_timing(monkeypatch):
    from sweep import env_timing

    monkeypatch.setattr(env_timing, "time_env", never)
    return env_timing


def test_env_timing_refuses_an_out_that_is_not_an_env_timing_file(
    env_timing, monkeypatch, capsys, tmp_path
):
    notes = tmp_path / "notes.md"
    notes.write_text(NOTES)
    argv = ["--envs", "CartPole-v1", "--out", str(notes)]
    assert exit_code(env_timing.main, monkeypatch, argv) == 2
    one_error_line(capsys, str(notes), "sweep/env_timing.py")
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


# ----------------------------------------------- item 1: bench.sh --env-timing-file of another host
def test_another_hosts_timing_file_is_timed_again_with_all_its_envs(tmp_path):
    """bench.sh re-times a file of another host into the same file: with every env it holds, not
    only the sweep's (sweep/env_timing.py would refuse fewer)."""
    path = tmp_path / "timing.json"
    path.write_text(timing({"Acrobot-v1": GOOD, "CartPole-v1": GOOD}, host="elsewhere"))
    reason, envs = sweep_env_timing.env_timing_reason(path, ["CartPole-v1", "MountainCar-v0"])
    assert "'elsewhere'" in reason and "keeps every env" in reason
    assert envs == ["Acrobot-v1", "CartPole-v1", "MountainCar-v0"]


def bench_with_timing_file(tmp_path, text: str):
    """bench.sh, one cell (CartPole-v1), its env timing into --env-timing-file holding text; a
    stand-in Python notes the env timing's arguments and runs nothing of it. (the process, the
    timing file, the noted lines)"""
    from sweep_runs import NOTING_PYTHON, bench

    from helpers import one_cell

    python, marks, timing_path = tmp_path / "python", tmp_path / "marks", tmp_path / "timing.json"
    python.write_text(NOTING_PYTHON)
    python.chmod(0o755)
    timing_path.write_text(text)
    env = {"MARKS": str(marks), "REAL_PYTHON": sys.executable}
    argv = ["--log-dir", str(tmp_path / "runs"), *one_cell(), "--env-timing-file", str(timing_path)]
    proc = bench(*argv, env=env, python=str(python))
    noted = marks.read_text().splitlines() if marks.exists() else []
    return proc, timing_path, [line for line in noted if "-m sweep.env_timing " in line]


def test_bench_times_another_hosts_file_again_with_every_env_it_holds(tmp_path):
    text = timing({"Acrobot-v1": GOOD, "CartPole-v1": GOOD}, host="elsewhere")
    proc, _, timed = bench_with_timing_file(tmp_path, text)
    assert proc.returncode == 0, proc.stderr
    assert len(timed) == 1 and " --envs=Acrobot-v1,CartPole-v1 " in timed[0], timed


def test_bench_neither_uses_nor_replaces_a_timing_file_with_a_nonsense_cost(tmp_path):
    text = timing({"CartPole-v1": {**GOOD, "ratio": -1}}, host=socket.gethostname())
    proc, path, timed = bench_with_timing_file(tmp_path, text)
    assert proc.returncode == 0, proc.stderr  # the sweep goes on, without env timing
    errors = [line for line in proc.stderr.splitlines() if str(path) in line and "ratio -1" in line]
    assert len(errors) == 1 and "'CartPole-v1'" in errors[0], proc.stderr
    assert timed == [] and path.read_text() == text


def test_bench_does_not_replace_a_file_that_is_not_an_env_timing(tmp_path):
    proc, path, timed = bench_with_timing_file(tmp_path, NOTES)
    assert proc.returncode == 0, proc.stderr
    assert timed == [] and path.read_text() == NOTES
    assert any(str(path) in line and "not JSON" in line for line in proc.stderr.splitlines())


# ---------------------------------------------------------- item 19: env-timing files with nonsense
BAD_VALUES = [
    ("ratio", -1, "-1"),
    ("ratio", 0, "0"),
    ("ratio", float("nan"), "NaN"),
    ("ms_per_step", "x", '"x"'),
    ("ms_per_step", None, "null"),
    ("ratio", True, "true"),
]


def said(path, env: str, field: str, shown: str) -> list[str]:
    """What the one line names: the file, the env, the field and its value; for NaN, which JSON
    does not have, the file and that (atomic's reader refuses it before any env is read)."""
    if shown == "NaN":
        return [str(path), "NaN is not JSON"]
    return [str(path), f"'{env}'", f"{field} {shown}"]


@pytest.mark.parametrize("field, value, shown", BAD_VALUES)
def test_a_nonsense_step_cost_is_refused_by_the_sweep_check(tmp_path, field, value, shown):
    path = tmp_path / "timing.json"
    path.write_text(timing({"CartPole-v1": GOOD, "Acrobot-v1": {**GOOD, field: value}}))
    with pytest.raises(ValueError) as e:  # env_timing_file.BadTiming
        sweep_env_timing.env_timing_reason(path, ["CartPole-v1"])
    message = str(e.value)
    assert "\n" not in message
    assert all(part in message for part in said(path, "Acrobot-v1", field, shown)), message


@pytest.mark.parametrize("field, value, shown", BAD_VALUES)
def test_a_nonsense_step_cost_is_refused_by_the_analysis(tmp_path, field, value, shown):
    path = tmp_path / "timing.json"
    path.write_text(timing({"CartPole-v1": {**GOOD, field: value}}))
    with pytest.raises(BadInput) as e:
        read_env_timing(str(path))
    message = str(e.value)
    assert "\n" not in message
    assert all(part in message for part in said(path, "CartPole-v1", field, shown)), message


def test_sweep_py_says_why_in_one_line_and_exits_2(tmp_path, capsys):
    """bench.sh's check (python -m sweep env-timing): one line naming the file, the env and the
    value; bench.sh then goes on without env timing, the file neither used nor replaced."""
    import sweep.__main__ as sweep

    path = tmp_path / "timing.json"
    text = timing({"CartPole-v1": {**GOOD, "ratio": -1}}, host=socket.gethostname())
    path.write_text(text)
    argv = ["env-timing", f"--file={path}", "--experiments=exp1", "--envs=CartPole-v1"]
    assert sweep.main([*argv, f"--log-dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "ratio -1" in err, err
    assert path.read_text() == text


def test_the_committed_env_timings_are_usable():
    from core import env_timing_file

    for path in sorted(ROOT.glob("results/**/env_timing.json")):
        assert env_timing_file.read(path)["envs"]


# ------------------------------------------------------------------ item 1: the benchmarks' outputs
def tool_module(name: str, monkeypatch):
    """benchmarks.<name>, with its measuring replaced by `never`."""
    import importlib

    module = importlib.import_module(f"benchmarks.{name}")
    for measuring in ("measure", "run_all", "run_config"):
        if hasattr(module, measuring):
            monkeypatch.setattr(module, measuring, never)
    return module


# name, the arguments that select the least, whether it writes a table beside its JSON
BENCHMARKS = [
    ("dlpack_crossing", ["--envs", "CartPole-v1", "--model-sizes", "small"], True),
    ("busy_machine", ["--configs", "linen jit", "--cpus", "0"], True),
    ("update_kernels", ["--model-sizes", "small"], True),
    ("envpool_calls", ["--envs", "CartPole-v1"], True),
    ("jax_vs_linen", [], False),
    ("torch_vs_linen", ["--envs", "CartPole-v1", "--model-sizes", "small"], False),
    ("compile_parts", [], True),
    ("agent_events", ["--agents", "2"], True),
]


@pytest.mark.parametrize("name, argv, table", BENCHMARKS)
def test_a_benchmark_refuses_an_out_it_did_not_write(
    name, argv, table, monkeypatch, capsys, tmp_path
):
    """--out X/README.json beside a README.md of the user's: the table would replace it. And a JSON
    file there that the benchmark did not write."""
    module = tool_module(name, monkeypatch)
    readme, record = tmp_path / "README.md", tmp_path / "README.json"
    readme.write_text(NOTES)
    record.write_text('{"mine": 1}')
    for kept in (readme, record) if table else (record,):
        other = record if kept is readme else readme
        saved = other.read_text()
        other.unlink()  # only `kept` in the way
        assert exit_code(module.main, monkeypatch, [*argv, "--out", str(record)]) == 2
        one_error_line(capsys, str(kept))
        assert kept.read_text() in (NOTES, '{"mine": 1}')
        other.write_text(saved)


def test_dlpack_crossing_refuses_an_out_whose_table_would_replace_it(monkeypatch, capsys, tmp_path):
    """--out res.md: the table beside it (.md) is the same file, which would replace the JSON."""
    module = tool_module("dlpack_crossing", monkeypatch)
    argv = ["--envs", "CartPole-v1", "--out", str(tmp_path / "res.md")]
    assert exit_code(module.main, monkeypatch, argv) == 2
    one_error_line(capsys, "res.md", ".json")
    assert list(tmp_path.iterdir()) == []


def test_a_benchmark_replaces_the_outputs_it_wrote(tmp_path):
    import atomic

    out = tmp_path / "sub" / "res.json"
    atomic.check_outputs("benchmarks.x", out)  # a new folder: made when written
    atomic.write_outputs("benchmarks.x", out, [{"a": 1.0}], "| a |")
    assert json.loads(out.read_text()) == {"written_by": "benchmarks.x", "rows": [{"a": 1.0}]}
    assert out.with_suffix(".md").read_text().splitlines()[1:] == ["| a |"]
    atomic.check_outputs("benchmarks.x", out)  # its own: replaced
    with pytest.raises(atomic.OutputRefused):  # another benchmark's
        atomic.check_outputs("benchmarks.y", out)


# ------------------------------------------------------------------- item 22: bad options, one line
@pytest.mark.parametrize(
    "argv, said",
    [
        (["--rounds", "0"], "--rounds"),
        (["--envs", "NoSuchEnv"], "'NoSuchEnv'"),
        (["--model-sizes", "huge"], "'huge'"),
        (["--num-envs", "-1"], "--num-envs"),
    ],
)
def test_dlpack_crossing_refuses_bad_options_before_measuring(argv, said, monkeypatch, capsys):
    module = tool_module("dlpack_crossing", monkeypatch)
    assert exit_code(module.main, monkeypatch, argv) == 2
    one_error_line(capsys, said)


@pytest.mark.parametrize(
    "name, argv, said",
    [
        ("envpool_calls", ["--rounds", "0"], "--rounds"),
        ("envpool_calls", ["--envs", "NoSuchEnv"], "'NoSuchEnv'"),
        ("update_kernels", ["--repeats", "0"], "--repeats"),
        ("jax_vs_linen", ["--env", "NoSuchEnv"], "'NoSuchEnv'"),
        ("torch_vs_linen", ["--rounds", "0"], "--rounds"),
        ("busy_machine", ["--env", "NoSuchEnv", "--cpus", "0"], "'NoSuchEnv'"),
        ("agent_events", ["--agents", "4", "0"], "--agents"),
        ("agent_events", ["--warmup", "-1"], "--warmup"),
    ],
)
def test_the_other_benchmarks_refuse_bad_options_before_measuring(
    name, argv, said, monkeypatch, capsys
):
    module = tool_module(name, monkeypatch)
    assert exit_code(module.main, monkeypatch, argv) == 2
    one_error_line(capsys, said)


# ------------------------------------------------------------------ item 1: the quick start's --out
@pytest.fixture
def quickstart(monkeypatch):
    from benchmarks import quickstart

    monkeypatch.setattr(quickstart, "measure", never)
    return quickstart


def test_quickstart_refuses_an_out_with_a_readme_or_logs_it_did_not_write(
    quickstart, capsys, tmp_path
):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "mine.log").write_text(NOTES)
    assert quickstart.main(["--out", str(tmp_path)]) == 2
    one_error_line(capsys, "mine.log")
    (tmp_path / "README.md").write_text(NOTES)
    assert quickstart.main(["--out", str(tmp_path)]) == 2
    one_error_line(capsys, "README.md")
    assert (tmp_path / "README.md").read_text() == NOTES
    assert (tmp_path / "logs" / "mine.log").read_text() == NOTES


def test_quickstart_refuses_the_repository_as_its_out(quickstart, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert quickstart.main(["--out", "."]) == 2
    one_error_line(capsys, "README.md")


def test_quickstart_removes_only_the_logs_its_record_lists(tmp_path):
    from benchmarks.quickstart import fresh_logs

    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("demo.log", "mine.log"):
        (logs / name).write_text(name)
    (tmp_path / "keep.md").write_text(NOTES)
    steps = [{"log": "logs/demo.log"}, {"log": "../keep.md"}, {"log": "logs/../keep.md"}]
    command = "python -m benchmarks.quickstart --out x"
    (tmp_path / "quickstart.json").write_text(json.dumps({"command": command, "steps": steps}))
    fresh_logs(tmp_path)
    assert sorted(p.name for p in logs.iterdir()) == ["mine.log"]
    assert (tmp_path / "keep.md").read_text() == NOTES


def test_the_committed_quick_start_is_this_tools_own(quickstart, capsys):
    """The default --out, results/quickstart: its files were written by the tool, and it may replace
    them."""
    args = quickstart.parse_args(["--out", str(ROOT / "results" / "quickstart")])
    quickstart.check_paths(args)

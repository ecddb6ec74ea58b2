"""The install check, `./setup.sh test -m quick`: each script trains a tiny run, saves its policy,
and evaluate.py runs that policy, in a few minutes on a 2-core machine."""

import json

import pytest
from script_runs import FAST_COMPILE, FRAMEWORKS, script

import evaluate
from helpers import TINY, only_run_dir, read_json, run_script


@pytest.mark.quick
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_script_trains_saves_and_evaluates(framework, tmp_path):
    args = [*TINY, "--save-model", "--compile", FAST_COMPILE[framework]]
    proc = run_script(script(framework), *args, log_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = only_run_dir(tmp_path)
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "completed" and summary["iterations_completed"] == 3
    result = evaluate.main([str(run_dir), "--episodes", "2"])
    assert result["framework"] == result["trained_by"] == framework
    assert result["episodes"] == len(result["returns"]) == 2
    record = json.loads((run_dir / "eval.json").read_text())
    assert [entry["framework"] for entry in record["evaluations"]] == [framework]

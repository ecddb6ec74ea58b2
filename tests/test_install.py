"""The install check, `./setup.sh test -m quick`: each script trains a tiny run, saves its policy,
and evaluate.py runs that policy, in a few minutes on a 2-core machine. The run is the suite's
usual one (trained_runs.saved), which test_evaluate.py's checks read too: trained once per suite."""

import json

import pytest
from script_runs import FRAMEWORKS
from trained_runs import saved

import evaluate
from helpers import read_json


@pytest.mark.quick
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_script_trains_saves_and_evaluates(framework, trained_run, tmp_path):
    # a copy: evaluate.py writes eval.json beside the checkpoint
    run_dir = trained_run(framework, *saved(framework), copy_to=tmp_path)
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "completed" and summary["iterations_completed"] == 3
    result = evaluate.main([str(run_dir), "--episodes", "2"])
    assert result["framework"] == result["trained_by"] == framework
    assert result["episodes"] == len(result["returns"]) == 2
    record = json.loads((run_dir / "eval.json").read_text())
    assert [entry["framework"] for entry in record["evaluations"]] == [framework]

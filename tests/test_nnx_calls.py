"""benchmarks/nnx_calls.py, the host's cost of a call in each way of calling ppo_nnx.py's functions:
the ways compare like with like (each trains the same agent), and bad options are refused."""

import subprocess
import sys
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from benchmarks import nnx_calls
from helpers import ROOT


@pytest.mark.slow
def test_every_nnx_way_trains_the_same_agent():
    """Two iterations in each way give the same losses: a way whose update did not reach the state
    of the next call (the functional path hands a new state back) would differ at the second."""
    opts = SimpleNamespace(env="CartPole-v1", model_size="small")
    losses = {}
    for way in nnx_calls.WAYS:
        if not way.startswith("nnx"):
            continue
        rollout, update, runner = nnx_calls.built(way, opts)
        for _ in range(2):
            runner, batch = rollout(runner)
            _, losses[way] = update(batch)
        losses[way] = jax.device_get(losses[way])
    assert set(losses) == {"nnx jit", "nnx cached_partial", "nnx tree", "nnx functional"}
    reference = losses["nnx cached_partial"]
    for way, values in losses.items():
        for name in reference:
            np.testing.assert_allclose(values[name], reference[name], 1e-6, 1e-7, err_msg=way)


@pytest.mark.parametrize(
    "option,words",
    [(["--rounds", "0"], ["--rounds", "0"]), (["--ways", "nnx eager"], ["nnx eager", "nnx tree"])],
)
def test_a_bad_option_is_refused_in_one_line(option, words, tmp_path):
    out = tmp_path / "calls.json"
    command = [sys.executable, "-m", "benchmarks.nnx_calls", *option, "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and all(word in done.stderr for word in words), done.stderr
    assert not out.exists()

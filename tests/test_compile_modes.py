"""A JAX script's compiled modes are ways to call one program, so each trains the agent its default
mode trains: ppo_nnx.py's `jit` and `tree` (Flax's graph mode, the modules passed on every call, and
its tree mode, the modules flattened as pytrees) against `cached_partial`, ppo_equinox.py's
`filter_jit` against `partition`. A mode whose update did not reach agent and optimizer, or that
bound a stale copy of them, would train another agent, or none."""

import numpy as np
import pytest
from script_runs import arrays

from helpers import STUDY, TINY, scalar_series

# torch's modes compute otherwise (fused kernels, TorchScript), so they round otherwise
JAX = [name for name in STUDY.frameworks if name != "torch"]
OTHER_MODES = [
    (name, mode)
    for name in JAX
    for mode in STUDY.frameworks[name].compile[1:]
    # op by op: the same arithmetic, rounded otherwise than XLA's fusions
    if mode != "none"
]
TAGS = ("charts/episodic_return", "losses/policy_loss", "losses/value_loss", "losses/approx_kl")


def trained(trained_run, framework: str, mode: str) -> tuple[dict, dict]:
    """The run's saved policy and the per-iteration values of TAGS (a default mode's run is trained
    once for the modes it is compared with)."""
    args = [*TINY, "--num-iterations", "4", "--compile", mode, "--save-model"]
    run_dir = trained_run(framework, *args)
    series = {tag: scalar_series(run_dir, tag) for tag in TAGS}
    return arrays(run_dir, "model.safetensors"), series


@pytest.mark.slow
@pytest.mark.parametrize("framework,mode", OTHER_MODES)
def test_each_compiled_mode_trains_the_agent_of_the_default_mode(framework, mode, trained_run):
    default = STUDY.frameworks[framework].default_compile
    reference, reference_series = trained(trained_run, framework, default)
    policy, series = trained(trained_run, framework, mode)
    assert policy.keys() == reference.keys()
    for name in policy:
        np.testing.assert_allclose(
            policy[name], reference[name], rtol=1e-6, atol=1e-7, err_msg=name
        )
    for tag in TAGS:
        assert [step for step, _ in series[tag]] == [step for step, _ in reference_series[tag]]
        values = [value for _, value in series[tag]]
        expected = [value for _, value in reference_series[tag]]
        np.testing.assert_allclose(values, expected, rtol=1e-6, atol=1e-7, err_msg=tag)

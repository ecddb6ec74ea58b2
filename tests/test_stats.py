"""analysis/stats.py gives the same numbers on any machine: its logs and exponentials are the C
library's, so NumPy's choice of vector routine by the CPU (AVX-512 or not) changes no bit of them.
The committed editions re-plot byte for byte on every machine only if this holds."""

import json
import math
import os
import subprocess
import sys

import numpy as np
from numpy._core import _multiarray_umath

from analysis import stats
from helpers import ROOT

# a spread of positive values (run times, ratios) from 1e-6 to 1e6
VALUES = np.random.default_rng(0).lognormal(0.0, 4.0, size=(50, 4))

# the statistics of made-up clusters (an env's runs of A and of B), as a child prints them
STATISTICS = """
import json
import numpy as np
from numpy._core import _multiarray_umath
from analysis import stats
rng = np.random.default_rng(1)
clusters = [(rng.lognormal(0, 1, 3), rng.lognormal(0.2, 1, 3)) for _ in range(5)]
values = rng.lognormal(0, 2, 40)
numbers = [
    stats.geometric_mean(values),
    *stats.cluster_bootstrap_ci(clusters, resamples=500),
    *stats.cost_correlation(rng.lognormal(0, 2, 8), rng.lognormal(0, 1, 8), resamples=500).values(),
    *stats.log(values), *stats.exp(values), *stats.log10(values),
]
features = [name for name, on in _multiarray_umath.__cpu_features__.items() if on]
print(json.dumps({"numbers": [float(x).hex() for x in numbers], "features": features}))
"""


def statistics_in_a_child(disabled: list[str]) -> dict:
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": " ".join(disabled)}
    command = [sys.executable, "-c", STATISTICS]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def test_log_exp_and_log10_are_the_c_librarys_in_the_values_shape():
    assert stats.log(VALUES).shape == VALUES.shape
    assert stats.log(VALUES).tolist() == [[math.log(v) for v in row] for row in VALUES]
    assert stats.log10(VALUES).tolist() == [[math.log10(v) for v in row] for row in VALUES]
    logs = stats.log(VALUES)
    assert stats.exp(logs).tolist() == [[math.exp(v) for v in row] for row in logs]


def test_outside_their_domain_they_answer_as_numpy_does():
    edges = [0.0, -1.0, math.inf, math.nan]
    np.testing.assert_array_equal(stats.log(edges), [-math.inf, math.nan, math.inf, math.nan])
    np.testing.assert_array_equal(stats.log10(edges), [-math.inf, math.nan, math.inf, math.nan])
    np.testing.assert_array_equal(stats.exp([1000.0, -math.inf, math.nan]), [math.inf, 0, math.nan])


def test_the_statistics_do_not_change_when_numpy_cannot_use_the_cpus_vector_features():
    # the features NumPy picks routines by at run time (AVX2, AVX-512, ...) that this CPU has
    dispatched = _multiarray_umath.__cpu_dispatch__
    present = [name for name in dispatched if _multiarray_umath.__cpu_features__.get(name)]
    with_them = statistics_in_a_child([])
    without_them = statistics_in_a_child(present)
    # the child ran without them (a misspelt variable would leave them on)
    assert not set(present) & set(without_them["features"])
    assert without_them["numbers"] == with_them["numbers"]
    assert not any(number == "nan" for number in with_them["numbers"][:3])

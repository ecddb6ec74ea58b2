"""The statistics, numpy and scipy only: geometric mean, cluster bootstrap, rank correlation with
its interval, interquartile mean with its stratified bootstrap.

Every interval is a seeded percentile bootstrap, so the same inputs always give the same numbers,
on any machine: the logs and exponentials are the C library's (log, exp, log10 below), not NumPy's.
Where the CPU has AVX-512, NumPy takes vector routines of its own, whose last bit can differ.
"""

import math
from functools import partial

import numpy as np
from scipy.stats import rankdata, trim_mean

BOOTSTRAP_SEED = 0
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_LEVEL = 0.95
MIN_CLUSTERS = 3  # fewer envs than this: no interval ("–" in the tables, NaN in speedups.csv)
MIN_SEEDS = 3  # fewer values than this: no IQM interval
# fewer envs: no correlation (with 4, even a perfect rank order has p > 0.05)
MIN_CORRELATION_ENVS = 5


def elementwise(function, values) -> np.ndarray:
    """function (of one float) applied to each of values, in values' shape."""
    array = np.asarray(values, float)
    results = [function(value) for value in array.ravel()]
    return np.array(results, dtype=float).reshape(array.shape)


def in_domain(function, value: float) -> float:
    """A math logarithm with NumPy's answers outside its domain: -inf at 0, NaN below it."""
    if value > 0:
        return function(value)
    return -math.inf if value == 0 else math.nan


def exp_of(value: float) -> float:
    """math.exp, inf where it overflows (as NumPy's)."""
    try:
        return math.exp(value)
    except OverflowError:
        return math.inf


def log(values) -> np.ndarray:
    return elementwise(partial(in_domain, math.log), values)


def log10(values) -> np.ndarray:
    return elementwise(partial(in_domain, math.log10), values)


def exp(values) -> np.ndarray:
    return elementwise(exp_of, values)


def geometric_mean(values) -> float:
    return exp_of(float(np.mean(log(values))))


def iqm(values) -> float:
    """The interquartile mean (rliable's IQM): the mean of the middle 50 % of the values, a quarter
    cut from each end (scipy's trim_mean, as rliable.metrics.aggregate_iqm computes it)."""
    return float(trim_mean(np.asarray(values, float), 0.25, axis=None))


def iqm_interval(
    strata: list,
    level: float = BOOTSTRAP_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile interval of the IQM over the values of every stratum (an env: its seeds),
    each stratum's values drawn with replacement within it (rliable's stratified bootstrap; one
    stratum: a plain bootstrap over seeds). NaN, NaN with fewer than MIN_SEEDS values. Seeded."""
    strata = [np.asarray(values, float) for values in strata]
    if sum(len(values) for values in strata) < MIN_SEEDS:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = [v[rng.integers(0, len(v), size=(resamples, len(v)))] for v in strata if len(v)]
    samples = np.concatenate(draws, axis=1)
    estimates = trim_mean(samples, 0.25, axis=1)  # iqm of each resample
    low, high = np.quantile(estimates, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def cluster_bootstrap_ci(
    clusters: list[tuple[np.ndarray, np.ndarray]],
    level: float = BOOTSTRAP_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile interval of the geometric mean of the ratios A / B over every pair of runs within
    a cluster.

    clusters: per cluster (an env), the times of the runs of A and of B. Two-stage bootstrap: draw
    as many clusters with replacement, within each drawn cluster draw its runs of A and its runs of
    B with replacement, and recompute the geometric mean over that cluster's pairs (each cluster
    weighted by its number of pairs, as in the point estimate). NaN when there are fewer than
    MIN_CLUSTERS clusters. Seeded, so deterministic.
    """
    if len(clusters) < MIN_CLUSTERS:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    logs = [(log(a), log(b)) for a, b in clusters]
    weights = np.array([len(a) * len(b) for a, b in logs], dtype=float)
    chosen = rng.integers(0, len(logs), size=(resamples, len(logs)))
    # the mean log-ratio over a cluster's pairs (i, j) is mean(log a) - mean(log b)
    cluster_means = np.empty(chosen.shape)
    for index, (a, b) in enumerate(logs):
        slots = chosen == index
        draws = int(slots.sum())
        cluster_means[slots] = a[rng.integers(0, len(a), size=(draws, len(a)))].mean(axis=1) - b[
            rng.integers(0, len(b), size=(draws, len(b)))
        ].mean(axis=1)
    w = weights[chosen]
    means = (w * cluster_means).sum(axis=1) / w.sum(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return exp_of(low), exp_of(high)


def row_correlations(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Spearman's rho and the least-squares slope of y on x, for each row of x and y (NaN where x or
    y is constant)."""

    def centred(a):
        return a - a.mean(axis=1, keepdims=True)

    rx, ry, cx, cy = (centred(a) for a in (rankdata(x, axis=1), rankdata(y, axis=1), x, y))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (rx * ry).sum(axis=1) / np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
        slope = (cx * cy).sum(axis=1) / (cx * cx).sum(axis=1)
    return rho, slope


def cost_correlation(
    cost: np.ndarray,
    speedup: np.ndarray,
    level: float = BOOTSTRAP_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict:
    """Spearman's rho of speedup and env cost, and the slope of log10 speedup on log10 cost, each
    with a percentile bootstrap interval (envs resampled with replacement; seeded). All NaN under
    MIN_CORRELATION_ENVS envs."""
    names = ["rho", "rho_low", "rho_high", "slope", "slope_low", "slope_high"]
    x = log10(cost)
    # speedups equal but for float rounding are ties
    y = np.round(log10(speedup), 9)
    rho, slope = row_correlations(x[None], y[None])
    # too few envs; or every env has the same speedup or cost
    if len(x) < MIN_CORRELATION_ENVS or np.isnan(rho[0]):
        return dict.fromkeys(names, float("nan"))
    chosen = np.random.default_rng(seed).integers(0, len(x), size=(resamples, len(x)))
    rhos, slopes = row_correlations(x[chosen], y[chosen])
    quantiles = [(1 - level) / 2, (1 + level) / 2]
    return dict(
        zip(
            names,
            map(
                float,
                [
                    rho[0],
                    *np.nanquantile(rhos, quantiles),
                    slope[0],
                    *np.nanquantile(slopes, quantiles),
                ],
            ),
        )
    )

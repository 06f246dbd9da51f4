"""A study's statistics, by scipy: per cell (workload, config, metric) over its
replications, and each config against the baseline, paired on the same seeds.

* ``mean`` and ``median`` with 95% bootstrap confidence intervals
  (``scipy.stats.bootstrap``, percentile method, ``RESAMPLES`` resamples drawn from
  ``numpy.random.default_rng(SEED)``: the same numbers on every run of the study);
* ``ratio`` = mean(config) / mean(baseline) over the seeds both ran, its 95% CI by the
  paired bootstrap (the same seeds resampled for both), and the two-sided Wilcoxon
  signed-rank p-value of the paired differences (``scipy.stats.wilcoxon``; exact for
  small samples without ties: with 5 seeds it is never below 0.0625). A ratio whose CI
  includes 1 is *not distinguishable* from the baseline.

A cell of one run has no CI; a cell whose runs all agree has the CI [v, v] (a bootstrap
of identical values is degenerate); a single pair, or pairs whose differences are all 0,
have no p-value; a baseline mean of 0 gives no ratio.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

SEED = 20_240_527
RESAMPLES = 9_999
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    value: float
    low: float | None
    high: float | None


@dataclass(frozen=True)
class CellStats:
    n: int
    mean: Interval
    median: Interval


@dataclass(frozen=True)
class Paired:
    n: int
    ratio: Interval | None  # None: the baseline's mean is 0
    p_value: float | None  # None: every pair equal, or a single pair

    @property
    def distinguishable(self) -> bool | None:
        """Whether the ratio's CI excludes 1 (None: no CI)."""
        r = self.ratio
        if r is None or r.low is None or r.high is None:
            return None
        return not (r.low <= 1.0 <= r.high)


def _rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


def _ci(data: tuple[Any, ...], statistic: Any, paired: bool = False) -> tuple[float, float]:
    result = stats.bootstrap(
        data,
        statistic,
        n_resamples=RESAMPLES,
        confidence_level=CONFIDENCE,
        method="percentile",
        paired=paired,
        vectorized=True,
        rng=_rng(),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _interval(x: np.ndarray, statistic: Any) -> Interval:
    value = float(statistic(x, axis=-1))
    if len(x) < 2:
        return Interval(value, None, None)
    if np.ptp(x) == 0:
        return Interval(value, value, value)
    low, high = _ci((x,), statistic)
    return Interval(value, low, high)


def cell(values: Sequence[float]) -> CellStats:
    """The mean and the median of ``values`` with their 95% CIs."""
    x = np.asarray(values, dtype=float)
    return CellStats(len(x), _interval(x, np.mean), _interval(x, np.median))


def _ratio_of_means(a: np.ndarray, b: np.ndarray, axis: int = -1) -> Any:
    return np.mean(a, axis=axis) / np.mean(b, axis=axis)


def paired(values: Sequence[float], baseline: Sequence[float]) -> Paired:
    """``values`` against ``baseline``, element i of each from the same seed."""
    x = np.asarray(values, dtype=float)
    y = np.asarray(baseline, dtype=float)
    n = len(x)
    ratio: Interval | None = None
    if np.mean(y) != 0:
        value = float(_ratio_of_means(x, y))
        if n < 2:
            ratio = Interval(value, None, None)
        elif np.ptp(x) == 0 and np.ptp(y) == 0:
            ratio = Interval(value, value, value)
        elif np.all(y > 0) or np.all(y < 0):  # no resample can divide by 0
            ratio = Interval(value, *_ci((x, y), _ratio_of_means, paired=True))
        else:
            ratio = Interval(value, None, None)
    p_value = None
    if n >= 2 and np.any(x != y):
        p_value = float(stats.wilcoxon(x, y).pvalue)
    return Paired(n, ratio, p_value)

"""3sigma: 3Sigma as SLearn's authors re-implemented it (spec A1.4 item 4): features and
feature choice in ``rm.estimator.HistoryEstimator``; the point value of the similar jobs'
mean task runtimes is the certainty equivalent under the utility ``U(t) = 1/t^2``:
``t = (sum_i p_i t_i^-2)^(-1/2)`` over the empirical distribution (each past job weight
1/n; runtimes below ``MIN_DURATION_S`` count as that). Biased short: at most the
harmonic mean."""

from __future__ import annotations

from collections.abc import Sequence

from rm.estimator import HistoryEstimator
from treadle.model import MIN_DURATION_S


def utility_point(values: Sequence[float]) -> float:
    inv = [max(v, MIN_DURATION_S) ** -2 for v in values]
    return float((sum(inv) / len(inv)) ** -0.5)


class ThreeSigmaEstimator(HistoryEstimator):
    description = "3Sigma: utility-weighted point of similar past jobs' runtimes x width"

    def point(self, values: Sequence[float]) -> float:
        return utility_point(values)

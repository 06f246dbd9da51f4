"""point: Point-Est (spec A1.4 item 6): 3Sigma's features and feature choice
(``rm.estimator.HistoryEstimator``), the point value the median of the similar jobs' mean
task runtimes (the lower median for an even count)."""

from __future__ import annotations

from collections.abc import Sequence

from rm.estimator import HistoryEstimator


def lower_median(values: Sequence[float]) -> float:
    s = sorted(values)
    return s[(len(s) - 1) // 2]


class PointEstimator(HistoryEstimator):
    description = "history: median mean-task-runtime of similar past jobs x width"

    def point(self, values: Sequence[float]) -> float:
        return lower_median(values)

"""point: Point-Est (spec A1.4 item 6): 3Sigma's features and feature choice
(``rm.policy.estimator.HistoryEstimator``), the point value the median of the similar jobs' mean
task runtimes (the lower median for an even count)."""

from __future__ import annotations

from collections.abc import Sequence

from sortedcontainers import SortedList

from rm.policy.estimator import HistoryEstimator, HistorySeries


def lower_median(values: Sequence[float]) -> float:
    s = sorted(values)
    return s[(len(s) - 1) // 2]


#: Ranges of at most this many values are sorted afresh (``bench_history``: faster).
SMALL = 32


class MedianSeries(HistorySeries):
    """``lower_median`` of a time range in O(log n): the values of the last range asked
    (``values[lo:hi]``) kept sorted and moved to the next range value by value (rebuilt
    when that is cheaper), so ranges that slide forward cost O(log n) each. The median
    is the same value as ``lower_median``'s; of equal values (``0.0`` and ``-0.0``, ``2``
    and ``2.0``) it may return another than the stable sort would when values arrive out
    of time order."""

    __slots__ = ("hi", "lo", "window")

    def __init__(self) -> None:
        super().__init__(lower_median)
        self.window: SortedList[float] = SortedList()
        self.lo = self.hi = 0

    def inserted(self, i: int, v: float) -> None:
        if i < self.lo:
            self.lo += 1
            self.hi += 1
        elif i <= self.hi:
            self.hi += 1
            self.window.add(v)

    def dropped(self, k: int) -> None:
        if self.lo >= k:
            self.lo -= k
            self.hi -= k
        else:  # the window held dropped values: the next range rebuilds it
            self.window = SortedList()
            self.lo = self.hi = 0

    def point_of(self, lo: int, hi: int) -> float:
        values, window = self.values, self.window
        if hi - lo <= SMALL:
            return lower_median(values[lo:hi])  # sorting a few beats moving the window
        if abs(lo - self.lo) + abs(hi - self.hi) > hi - lo:
            window = self.window = SortedList(values[lo:hi])
        else:
            # Adds first: every value removed below is then in the window.
            for v in values[self.hi : hi]:
                window.add(v)
            for v in values[lo : self.lo]:
                window.add(v)
            for v in values[hi : self.hi]:
                window.remove(v)
            for v in values[self.lo : lo]:
                window.remove(v)
        self.lo, self.hi = lo, hi
        return window[(hi - lo - 1) // 2]


class PointEstimator(HistoryEstimator):
    description = "history: median mean-task-runtime of similar past jobs x width"

    def point(self, values: Sequence[float]) -> float:
        return lower_median(values)

    def new_series(self) -> HistorySeries:
        return MedianSeries()

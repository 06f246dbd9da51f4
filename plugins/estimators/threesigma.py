"""3sigma: 3Sigma as SLearn's authors re-implemented it (spec A1.4 item 4): features and
feature choice in ``rm.policy.estimator.HistoryEstimator``; the point value of the similar jobs'
mean task runtimes is the certainty equivalent under the utility ``U(t) = 1/t^2``:
``t = (sum_i p_i t_i^-2)^(-1/2)`` over the empirical distribution (each past job weight
1/n; runtimes below ``MIN_DURATION_S`` count as that). Biased short: at most the
harmonic mean."""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

from rm.policy.estimator import HistoryEstimator, HistorySeries
from treadle.model import MIN_DURATION_S

#: Whether the builtin ``sum`` of floats is Neumaier-compensated (Python 3.12 on) or a
#: plain left-to-right sum; ``UtilitySeries`` repeats whichever this interpreter does.
COMPENSATED_SUM = sum([1.0, 1e100, 1.0, -1e100]) == 2.0


def utility_point(values: Sequence[float]) -> float:
    inv = [max(v, MIN_DURATION_S) ** -2 for v in values]
    return float((sum(inv) / len(inv)) ** -0.5)


class UtilitySeries(HistorySeries):
    """``utility_point`` of a time range, equal to the float: the builtin ``sum`` over
    ``values[lo:hi]``'s ``t^-2`` in time order is repeated by running sums (the sum's
    state after each value) from an anchor index ``base``, so a range starting there
    (every range without a window) costs O(1) amortized; an insertion drops the running
    sums after it. A range starting elsewhere is summed afresh (O(range), at C speed);
    once two ranges in a row start at the same index the anchor moves there. Sums from
    another start cannot be had from the anchored ones without changing the rounding."""

    __slots__ = ("base", "comp", "inv", "last_lo", "prefix")

    def __init__(self) -> None:
        super().__init__(utility_point)
        self.inv = array("d")  # max(v, MIN_DURATION_S) ** -2, in time order
        self.base = 0
        self.last_lo = 0
        #: ``sum``'s state after ``inv[base : base + k]`` at index k (with Neumaier's
        #: compensation in ``comp``).
        self.prefix = array("d", [0.0])
        self.comp = array("d", [0.0])

    def inserted(self, i: int, v: float) -> None:
        self.inv.insert(i, max(v, MIN_DURATION_S) ** -2)
        if i < self.base:
            self.base += 1
        else:
            del self.prefix[i - self.base + 1 :]
            del self.comp[i - self.base + 1 :]

    def dropped(self, k: int) -> None:
        del self.inv[:k]
        self.last_lo = max(0, self.last_lo - k)
        if self.base >= k:  # the running sums from ``base`` hold
            self.base -= k
        else:
            self.base = 0
            del self.prefix[1:]
            del self.comp[1:]

    def point_of(self, lo: int, hi: int) -> float:
        if lo != self.base:
            if lo != self.last_lo:
                self.last_lo = lo
                return float((sum(self.inv[lo:hi]) / (hi - lo)) ** -0.5)
            self.base = lo
            del self.prefix[1:]
            del self.comp[1:]
        return float((self._sum(hi - lo) / (hi - lo)) ** -0.5)

    def _sum(self, k: int) -> float:
        """``sum(self.inv[base : base + k])``, exactly."""
        prefix, comp, inv, base = self.prefix, self.comp, self.inv, self.base
        j = len(prefix) - 1
        if j < k:
            s, c = prefix[j], comp[j]
            for x in inv[base + j : base + k]:
                if COMPENSATED_SUM:  # CPython's float sum since 3.12
                    t = s + x
                    c += (s - t) + x if abs(s) >= abs(x) else (x - t) + s
                    s = t
                else:
                    s += x
                prefix.append(s)
                comp.append(c)
        s, c = prefix[k], comp[k]
        return s + c if c and math.isfinite(c) else s


class ThreeSigmaEstimator(HistoryEstimator):
    description = "3Sigma: utility-weighted point of similar past jobs' runtimes x width"

    def point(self, values: Sequence[float]) -> float:
        return utility_point(values)

    def new_series(self) -> HistorySeries:
        return UtilitySeries()

"""Utilization: the allocated fraction of each resource over time, and its mean.

Both are relative to the capacity the run started with (see ``treadle.metrics.scan``) and
cover the horizon [first submit, last job end]. The level is a running sum over the
containers' starts and ends in time order (ties in span order), as a sweep adds them.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from treadle.metrics.scan import EventSource, LogFacts, Spans, SpanSource, scan
from treadle.metrics.stats import ExactSum, round_array

Series = list[tuple[float, float]]


class LazySeries(Mapping[str, Series]):
    """``utilization_series_from(log)``, computed when first read (``analyze``'s: a run's
    files never read it, and as Python pairs it is some 200 bytes per container). Until
    then it holds the log's span source only (an event file's reads the file again)."""

    __slots__ = ("__weakref__", "_of", "_owned", "_series")

    def __init__(self, log: LogFacts) -> None:
        self._of: tuple[Any, ...] | None = (log.horizon, dict(log.capacity), log.spans)
        self._series: dict[str, Series] | None = None
        self._owned: weakref.finalize[Any, Any] | None = None

    def own(self, path: Path) -> None:
        """Delete ``path``, the event file the spans are read from (a run's temporary
        one), once the series is computed or this is collected, whichever comes first."""
        self._owned = weakref.finalize(self, _unlink, path)

    def _get(self) -> dict[str, Series]:
        if self._series is None:
            assert self._of is not None
            self._series = _series(*self._of)
            self._of = None
            if self._owned is not None:
                self._owned()
        return self._series

    def __getitem__(self, key: str) -> Series:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __repr__(self) -> str:
        return repr(self._get())

    def __reduce__(self) -> Any:  # pickled (a study's runs on workers) as the plain dict
        return (dict, (self._get(),))


def _unlink(path: Path) -> None:
    path.unlink(missing_ok=True)


def utilization_series_from(log: LogFacts) -> dict[str, list[tuple[float, float]]]:
    """``utilization_series`` of a scanned log."""
    return _series(log.horizon, log.capacity, log.spans)


def _series(
    hz: tuple[float, float] | None, cap: Mapping[str, float], source: SpanSource
) -> dict[str, list[tuple[float, float]]]:
    names = sorted(cap)
    if hz is None or not cap:
        return {k: [] for k in names}
    sp: Spans = source.whole()
    start, end = hz
    n = len(sp.a)
    times = np.empty(2 * n)
    times[0::2], times[1::2] = sp.a, sp.b
    order = np.argsort(times, kind="stable")
    ts = times[order]
    last = np.r_[ts[1:] != ts[:-1], True] if n else np.zeros(0, bool)
    group_t = ts[last]
    shown = group_t < end
    lead = bool(n == 0 or group_t[0] > start)  # a point at the start before the first change
    series: dict[str, list[tuple[float, float]]] = {}
    for i, k in enumerate(names):
        deltas = np.empty(2 * n)
        deltas[0::2], deltas[1::2] = sp.res[:, i], -sp.res[:, i]
        level = np.cumsum(deltas[order])  # in order, as the sweep adds them
        v = _fraction(level[last][shown], cap[k])
        pts_t = group_t[shown]
        if lead:
            v = np.r_[0.0, v]
            pts_t = np.r_[start, pts_t]
        keep = np.r_[True, v[1:] != v[:-1]] if len(v) else np.zeros(0, bool)
        s = list(zip(pts_t[keep].tolist(), v[keep].tolist(), strict=True))
        if end > start:
            final = _fraction(level[-1:] if n else np.zeros(1), cap[k])
            s.append((end, float(final[0])))
        series[k] = s
    return series


def _fraction(level: np.ndarray, cap: float) -> np.ndarray:
    v = level / cap
    out = round_array(v, 9)
    out[np.abs(v) < 1e-9] = 0.0
    return out


def utilization_series(records: EventSource) -> dict[str, list[tuple[float, float]]]:
    """Per resource, a step series [(t, fraction of capacity allocated from t on), ...].

    It covers the horizon [first submit, last job end]: the first point is at its start and
    the last at its end. Resources are those of the capacity (others cannot be divided).
    """
    return utilization_series_from(scan(records))


class MeanUtilization:
    """``mean_utilization`` of a log whose spans are added a chunk at a time (``add``):
    per resource, the exact sum of its resource-seconds (as ``math.fsum`` of them all)."""

    def __init__(self, log: LogFacts) -> None:
        self.log = log
        self.names = sorted(log.capacity)
        self.sums = [ExactSum() for _ in self.names]

    def add(self, sp: Spans) -> None:
        held = sp.b - sp.a
        for i, acc in enumerate(self.sums):
            acc.add(sp.res[:, i] * held)

    def result(self) -> dict[str, float | None]:
        hz, cap = self.log.horizon, self.log.capacity
        if hz is None or hz[1] <= hz[0]:
            return dict.fromkeys(self.names)
        span = hz[1] - hz[0]
        return {
            k: acc.value() / (cap[k] * span) for k, acc in zip(self.names, self.sums, strict=True)
        }


def mean_utilization(log: LogFacts) -> dict[str, float | None]:
    """Per resource, the time-average allocated fraction over the horizon (each None when
    the horizon is empty)."""
    mean = MeanUtilization(log)
    hz = log.horizon
    if hz is not None and hz[1] > hz[0]:
        for chunk in log.spans.chunks():
            mean.add(chunk)
    return mean.result()

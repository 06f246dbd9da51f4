"""Utilization: the allocated fraction of each resource over time, and its mean.

Both are relative to the capacity the run started with (see ``treadle.metrics.scan``) and
cover the horizon [first submit, last job end].
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from tests.reference_metrics.scan import LogFacts, RecordLike, scan


def utilization_series_from(log: LogFacts) -> dict[str, list[tuple[float, float]]]:
    """``utilization_series`` of a scanned log."""
    hz = log.horizon()
    cap = log.capacity
    if hz is None or not cap:
        return {k: [] for k in sorted(cap)}
    start, end = hz
    deltas: list[tuple[float, int, Mapping[str, float]]] = []
    for _, a, b, res, _ in log.spans():
        deltas.append((a, 1, res))
        deltas.append((b, -1, res))
    deltas.sort(key=lambda d: d[0])
    names = sorted(cap)
    level = dict.fromkeys(names, 0.0)
    series: dict[str, list[tuple[float, float]]] = {k: [] for k in names}

    def emit(t: float, final: bool = False) -> None:
        for k in names:
            v = level[k] / cap[k]
            v = 0.0 if abs(v) < 1e-9 else round(v, 9)
            s = series[k]
            if final or not s or s[-1][1] != v:
                s.append((t, v))

    i, n = 0, len(deltas)
    emitted_start = False
    while i < n:
        t = deltas[i][0]
        if t > start and not emitted_start:
            emit(start)
        emitted_start = True
        while i < n and deltas[i][0] == t:
            _, sign, res = deltas[i]
            for k, v in res.items():
                if k in level:
                    level[k] += sign * float(v)
            i += 1
        if t < end:
            emit(t)
    if not emitted_start:
        emit(start)
    if end > start:
        emit(end, final=True)
    return series


def utilization_series(records: Iterable[RecordLike]) -> dict[str, list[tuple[float, float]]]:
    """Per resource, a step series [(t, fraction of capacity allocated from t on), ...].

    It covers the horizon [first submit, last job end]: the first point is at its start and
    the last at its end. Resources are those of the capacity (others cannot be divided).
    """
    return utilization_series_from(scan(records))


def mean_utilization(log: LogFacts) -> dict[str, float | None]:
    """Per resource, the time-average allocated fraction over the horizon (each None when
    the horizon is empty)."""
    hz = log.horizon()
    cap = log.capacity
    if hz is None or hz[1] <= hz[0]:
        return dict.fromkeys(sorted(cap))
    start, end = hz
    area = dict.fromkeys(cap, 0.0)
    parts: dict[str, list[float]] = {k: [] for k in cap}
    for _, a, b, res, _ in log.spans():
        for k, v in res.items():
            if k in area:
                parts[k].append(float(v) * (b - a))
    span = end - start
    return {k: math.fsum(parts[k]) / (cap[k] * span) for k in sorted(cap)}

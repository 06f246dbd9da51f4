"""What the utilization plot draws of a run's step series (no matplotlib here: worker
processes thin their series with it before sending them to the report's process)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

MAX_PLOT_POINTS = 2000  # longer utilization series are averaged into half this many bins

Series = Sequence[tuple[float, float]]


def resample(series: Series, bins: int) -> tuple[list[float], list[float]]:
    """Time-weighted means of a step series over ``bins`` equal bins (plus the last point)."""
    t0, t1 = series[0][0], series[-1][0]
    width = (t1 - t0) / bins
    if width <= 0:
        return [p[0] for p in series], [p[1] for p in series]
    area = [0.0] * bins
    for (a, v), (b, _) in itertools.pairwise(series):
        if v == 0 or b <= a:
            continue
        i = min(bins - 1, int((a - t0) / width))
        while a < b and i < bins:
            edge = t0 + (i + 1) * width if i < bins - 1 else t1
            seg = min(b, edge) - a
            if seg > 0:
                area[i] += v * seg
            a = min(b, edge)
            i += 1
    xs = [t0 + i * width for i in range(bins)] + [t1]
    ys = [x / width for x in area] + [series[-1][1]]
    return xs, ys


def plot_points(series: Series) -> tuple[list[float], list[float]]:
    """The points the plot draws of ``series``: itself, or its resampling when it is long."""
    if len(series) > MAX_PLOT_POINTS:
        return resample(series, MAX_PLOT_POINTS // 2)
    return [p[0] for p in series], [p[1] for p in series]


def thinned(utilization: Mapping[str, Series]) -> dict[str, list[tuple[float, float]]]:
    """Each series replaced by the points the plot draws of it: the same first and last
    time, so the same plot, in at most ``MAX_PLOT_POINTS`` points."""
    out = {}
    for res, series in utilization.items():
        xs, ys = plot_points(series)
        out[res] = list(zip(xs, ys, strict=True))
    return out

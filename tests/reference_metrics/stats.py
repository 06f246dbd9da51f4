"""Statistics over plain numbers: percentiles, Jain's index, means, rounding for files."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

ROUND_DIGITS = 6


def round6(x: float) -> float:
    """``x`` rounded to 1 us (6 decimals), without "-0.0"."""
    y = round(x, ROUND_DIGITS)
    return 0.0 if y == 0 else y  # no "-0.0" in files


def rounded(x: Any) -> Any:
    """Round every float in a JSON-like value to 6 decimals (tuples become lists)."""
    if isinstance(x, float):
        if not math.isfinite(x):
            return None
        return round6(x)
    if isinstance(x, Mapping):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [rounded(v) for v in x]
    return x


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100), linear interpolation as numpy's default."""
    a = sorted(float(v) for v in values)
    if not a:
        raise ValueError("percentile of an empty sequence")
    if any(v != v for v in a):
        raise ValueError("percentile of a sequence containing NaN")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    pos = (q / 100) * (len(a) - 1)
    lo = math.floor(pos)
    if lo >= len(a) - 1:
        return a[-1]
    g = pos - lo
    x, y = a[lo], a[lo + 1]
    # numpy's _lerp: symmetric form, exact at both ends.
    return y - (y - x) * (1 - g) if g >= 0.5 else x + (y - x) * g


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n when one has all.

    1.0 for an empty or all-zero sequence; negative values are a ValueError.
    """
    n = len(values)
    s = s2 = 0.0
    for v in values:
        if v < 0:
            raise ValueError(f"Jain's index is defined for non-negative values, got {v}")
        s += v
        s2 += v * v
    if n == 0 or s2 == 0:
        return 1.0
    return min(1.0, (s * s) / (n * s2))


def mean(values: Sequence[float]) -> float | None:
    """The exact (fsum) mean; None when empty."""
    return math.fsum(values) / len(values) if values else None


def pct(values: Sequence[float], q: float) -> float | None:
    """``percentile``, None when empty."""
    return percentile(values, q) if values else None


def worst_fraction_mean(values: Sequence[float], fraction: float = 0.1) -> float | None:
    """Mean of the largest ``max(1, floor(n * fraction))`` values; None when empty."""
    if not values:
        return None
    k = max(1, math.floor(len(values) * fraction))
    return mean(sorted(values)[-k:])

"""Statistics over arrays of numbers: percentiles, Jain's index, means, rounding for files.

Rounding is Python's ``round(x, 6)`` (the decimal nearest to the exact binary value, the
double nearest to that), done on whole arrays: ``rint(x * 10**d) / 10**d`` gives the same
double except when ``x * 10**d`` lies within a few ulps of a half or beyond 2**52, and those
few values go through ``round`` itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

ROUND_DIGITS = 6
FloatArray = npt.NDArray[np.float64]


def round6(x: float) -> float:
    """``x`` rounded to 1 us (6 decimals), without "-0.0"."""
    y = round(x, ROUND_DIGITS)
    return 0.0 if y == 0 else y  # no "-0.0" in files


def round_array(x: FloatArray, digits: int = ROUND_DIGITS) -> FloatArray:
    """``round(v, digits)`` of every finite ``v`` of ``x`` (NaN stays NaN), without "-0.0"."""
    scale = 10.0**digits
    y = x * scale
    out: FloatArray = np.rint(y) / scale
    frac = np.abs(y - np.floor(y))
    risky = ~(np.abs(frac - 0.5) > 8 * np.spacing(np.abs(y))) | ~(np.abs(y) < 2.0**52)
    risky &= np.isfinite(x)
    for i in np.flatnonzero(risky):
        out[i] = round(float(x[i]), digits)
    out[out == 0] = 0.0
    return out


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


def _lerp_sorted(a: FloatArray, q: float) -> float:
    # numpy's "linear" percentile and its _lerp (symmetric form, exact at both ends).
    pos = (q / 100) * (len(a) - 1)
    lo = math.floor(pos)
    if lo >= len(a) - 1:
        return float(a[-1])
    g = pos - lo
    x, y = float(a[lo]), float(a[lo + 1])
    return y - (y - x) * (1 - g) if g >= 0.5 else x + (y - x) * g


def percentile(values: Iterable[float] | FloatArray, q: float) -> float:
    """The q-th percentile (0 <= q <= 100), linear interpolation as numpy's default."""
    a = np.sort(np.asarray(values if isinstance(values, np.ndarray) else list(values), float))
    if not len(a):
        raise ValueError("percentile of an empty sequence")
    if np.isnan(a).any():
        raise ValueError("percentile of a sequence containing NaN")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    return _lerp_sorted(a, q)


def jain_index(values: Sequence[float] | FloatArray) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n when one has all.

    1.0 for an empty or all-zero sequence; negative values are a ValueError. The sums run
    in the order given.
    """
    v = np.asarray(values, dtype=float)
    n = len(v)
    if n and (v < 0).any():
        raise ValueError(f"Jain's index is defined for non-negative values, got {v[v < 0][0]}")
    if n == 0:
        return 1.0
    s = float(np.cumsum(v)[-1])  # cumsum adds in order, as the definition's loop does
    s2 = float(np.cumsum(v * v)[-1])
    if s2 == 0:
        return 1.0
    return min(1.0, (s * s) / (n * s2))


def mean(values: Sequence[float] | FloatArray) -> float | None:
    """The exact (fsum) mean; None when empty."""
    if len(values) == 0:
        return None
    vals = values.tolist() if isinstance(values, np.ndarray) else values
    return math.fsum(vals) / len(vals)


def pct(values: Sequence[float] | FloatArray, q: float) -> float | None:
    """``percentile``, None when empty."""
    return percentile(values, q) if len(values) else None


def worst_fraction_mean(
    values: Sequence[float] | FloatArray, fraction: float = 0.1
) -> float | None:
    """Mean of the largest ``max(1, floor(n * fraction))`` values; None when empty."""
    if len(values) == 0:
        return None
    k = max(1, math.floor(len(values) * fraction))
    return mean(np.sort(np.asarray(values, dtype=float))[-k:])


class ExactSum:
    """``math.fsum`` of every value added, over any number of arrays: the running sum is
    kept exact, an integer count of 2**-1126 (below the smallest subnormal's mantissa), so
    ``value()`` is the correctly rounded sum of them all, as fsum of their concatenation."""

    _SCALE = 1126  # 1074 (the smallest subnormal) + 52: every finite double is a whole count

    def __init__(self) -> None:
        self._total = 0
        self._special: list[float] = []  # inf and NaN, which fsum treats on their own

    def add(self, values: FloatArray) -> None:
        v = np.asarray(values, dtype=np.float64).ravel()
        finite = np.isfinite(v)
        if not finite.all():
            self._special.extend(v[~finite].tolist())
            v = v[finite]
        v = v[v != 0]
        if not len(v):
            return
        frac, exp = np.frexp(v)  # v = frac * 2**exp, 0.5 <= |frac| < 1
        mant = (frac * 2.0**53).astype(np.int64)  # exact: |mant| < 2**53
        shift = exp.astype(np.int64) - 53 + self._SCALE
        order = np.argsort(shift, kind="stable")
        mant, shift = mant[order], shift[order]
        starts = np.flatnonzero(np.r_[True, shift[1:] != shift[:-1]])
        # high and low 26 bits summed apart: each sum fits in 64 bits for any array
        hi = np.add.reduceat(mant >> 26, starts).tolist()
        lo = np.add.reduceat(mant & ((1 << 26) - 1), starts).tolist()
        for h, low, s in zip(hi, lo, shift[starts].tolist(), strict=True):
            self._total += ((h << 26) + low) << s

    def value(self) -> float:
        exact = self._total / (1 << self._SCALE)  # int / int: correctly rounded
        return math.fsum([*self._special, exact]) if self._special else exact

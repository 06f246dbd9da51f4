"""Resource vectors with named dimensions.

A vector maps names (``vcores``, ``memory_mb``, ``gpu``, ...) to non-negative numbers. A
dimension that is absent is zero, so vectors over different names compose. Vectors are
immutable and hashable: policies receive them in read-only views and may keep them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

VCORES = "vcores"
MEMORY_MB = "memory_mb"


class Resources(Mapping[str, float]):
    """An immutable resource vector; zero dimensions are dropped."""

    __slots__ = ("_d", "_hash", "_iv", "_sorted")

    _d: dict[str, float]

    def __init__(self, values: Mapping[str, float] | None = None, /, **kw: float) -> None:
        d: dict[str, float] = {}
        if values:
            for k, v in values.items():
                if v:
                    d[k] = v
        for k, v in kw.items():
            if v:
                d[k] = v
        self._d = d
        self._hash: int | None = None
        self._sorted: dict[str, float] | None = None
        self._iv: tuple[tuple[int, float], ...] | None = None  # see ``_indexed``

    @classmethod
    def _raw(cls, d: dict[str, float]) -> Resources:
        # Trusted constructor for the hot path: ``d`` has no zeros and is not shared.
        r = object.__new__(cls)
        r._d = d
        r._hash = None
        r._sorted = None
        r._iv = None
        return r

    def __reduce__(self) -> tuple[object, tuple[dict[str, float]]]:
        # Without the cached dimension indices: they are this process's (``_dim``).
        return (_from_dict, (dict(self._d),))

    @classmethod
    def parse(cls, values: Mapping[str, object], where: str = "resources") -> Resources:
        """Validate user input: names are lower_snake_case, amounts finite and >= 0."""
        d: dict[str, float] = {}
        for k, v in values.items():
            if not isinstance(k, str) or not _NAME.fullmatch(k):
                raise ValueError(f"{where}: resource name {k!r} must be lower_snake_case")
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise ValueError(f"{where}.{k}: amount must be a number, got {v!r}")
            if v != v or v in (float("inf"), float("-inf")):
                raise ValueError(f"{where}.{k}: amount must be finite, got {v!r}")
            if v < 0:
                raise ValueError(f"{where}.{k}: amount must be >= 0, got {v!r}")
            if v:
                d[k] = v
        return cls._raw(d)

    # Mapping protocol -------------------------------------------------------------
    def __getitem__(self, key: str) -> float:
        return self._d.get(key, 0)

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: object) -> bool:
        return key in self._d

    def get(self, key: str, default: float = 0) -> float:  # type: ignore[override]
        return self._d.get(key, default)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._d == other._d
        if isinstance(other, Mapping):
            return self._d == {k: v for k, v in other.items() if v}
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._d.items()))
        return self._hash

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(self._d.items()))
        return f"Resources({inner})"

    def to_dict(self) -> dict[str, float]:
        """A plain dict sorted by name (stable for serialisation). It is cached and shared:
        treat it as read-only."""
        if self._sorted is None:
            self._sorted = {k: self._d[k] for k in sorted(self._d)}
        return self._sorted

    # Arithmetic -------------------------------------------------------------------
    def __add__(self, other: Resources) -> Resources:
        d = dict(self._d)
        for k, v in other._d.items():
            s = d.get(k, 0) + v
            if s:
                d[k] = s
            else:
                d.pop(k, None)
        return Resources._raw(d)

    def __sub__(self, other: Resources) -> Resources:
        d = dict(self._d)
        for k, v in other._d.items():
            s = d.get(k, 0) - v
            # Clamp float dust so that a freed node compares equal to its capacity.
            if abs(s) > 1e-9:
                d[k] = s
            else:
                d.pop(k, None)
        return Resources._raw(d)

    def __mul__(self, factor: float) -> Resources:
        if not factor:
            return ZERO
        return Resources._raw({k: v * factor for k, v in self._d.items()})

    __rmul__ = __mul__

    def fits_in(self, available: Resources) -> bool:
        """True when every dimension of self is <= the same dimension of ``available``."""
        get = available._d.get
        for k, v in self._d.items():
            if v > get(k, 0) + 1e-9:
                return False
        return True

    def is_zero(self) -> bool:
        return not self._d

    def any_negative(self) -> bool:
        for v in self._d.values():
            if v < 0:
                return True
        return False

    def componentwise_min(self, other: Resources) -> Resources:
        """The componentwise minimum (``self`` itself when that is it)."""
        if other is self:
            return self
        o = other._d
        for k, v in self._d.items():
            w = o.get(k)
            if w is None or w < v:
                break
        else:
            return self
        return Resources._raw(
            {k: m for k in self._d.keys() & other._d.keys() if (m := min(self._d[k], other._d[k]))}
        )

    def componentwise_max(self, other: Resources) -> Resources:
        d = dict(self._d)
        for k, v in other._d.items():
            if v > d.get(k, 0):
                d[k] = v
        return Resources._raw(d)

    def share_of(self, capacity: Resources) -> dict[str, float]:
        """Per-dimension fraction of ``capacity`` (dimensions the capacity lacks are skipped)."""
        c = capacity._d
        return {k: v / c[k] for k, v in self._d.items() if c.get(k)}

    def dominant_share(self, capacity: Resources) -> float:
        """max over dimensions of self[k] / capacity[k] (DRF's dominant share)."""
        c = capacity._d
        best = 0.0
        for k, v in self._d.items():
            ck = c.get(k)
            if ck:
                s = v / ck
                if s > best:
                    best = s
        return best

    def dominant_share_with(self, extra: Resources, capacity: Resources) -> float:
        """``(self + extra).dominant_share(capacity)`` without building the sum (the same
        floats: each dimension is added, then divided)."""
        d, e = self._d, extra._d
        best = 0.0
        for k, ck in capacity._d.items():
            if ck:
                s = (d.get(k, 0) + e.get(k, 0)) / ck
                if s > best:
                    best = s
        return best

    def normalized_dot(self, other: Resources, capacity: Resources) -> float:
        """Sum over dimensions of (self[k] / cap[k]) * (other[k] / cap[k]) (Tetris alignment)."""
        c = capacity._d
        o = other._d
        total = 0.0
        for k, v in self._d.items():
            ck = c.get(k)
            if ck and k in o:
                total += (v / ck) * (o[k] / ck)
        return total


ZERO = Resources()


def _from_dict(d: dict[str, float]) -> Resources:
    return Resources._raw(d)


# Dimensions by index, for the accumulators' dense storage: a name keeps its index for the
# life of the process (indices are never reused, so vectors built at any time agree).
_DIM_INDEX: dict[str, int] = {}
_DIM_NAMES: list[str] = []
#: (name, index) of every known dimension, by name: accumulator snapshots list their
#: dimensions in this (canonical) order.
_BY_NAME: list[tuple[str, int]] = []


def _dim(name: str) -> int:
    i = _DIM_INDEX.get(name)
    if i is None:
        i = _DIM_INDEX[name] = len(_DIM_NAMES)
        _DIM_NAMES.append(name)
        _BY_NAME[:] = sorted(_DIM_INDEX.items())
    return i


def _indexed(r: Resources) -> tuple[tuple[int, float], ...]:
    """``r``'s (dimension index, amount) pairs by index (cached on ``r``)."""
    iv = r._iv
    if iv is None:
        iv = r._iv = tuple(sorted((_dim(k), v) for k, v in r._d.items()))
    return iv


class Accumulator:
    """A mutable running total for the RM's books (usage per node, app, queue, user).

    Amounts are kept in a list indexed by dimension (an absent dimension is 0): adding
    in place avoids building a new vector per change on the scheduling hot path; ``value``
    is an immutable snapshot (its dimensions by name), cached until the next change. A
    subtraction that leaves float dust (relative to the amounts) leaves exactly 0.
    """

    __slots__ = ("_snap", "_v")

    def __init__(self, initial: Resources = ZERO) -> None:
        v: list[float] = [0] * len(_DIM_NAMES)
        for i, x in _indexed(initial):
            if i >= len(v):
                v.extend([0] * (i + 1 - len(v)))
            v[i] = x
        self._v = v
        self._snap: Resources | None = initial

    def __reduce__(self) -> tuple[object, tuple[Resources]]:
        # Indices are this process's (``_dim``): another process rebuilds them by name.
        return (Accumulator, (self.value,))

    def _grow(self) -> list[float]:
        # A dimension first seen after this accumulator was made.
        v = self._v
        v.extend([0] * (len(_DIM_NAMES) - len(v)))
        return v

    def add(self, r: Resources) -> None:
        iv = r._iv if r._iv is not None else _indexed(r)
        v = self._v
        if len(iv) == 2:  # the common shape (vcores, memory), unrolled
            (i, x), (j, y) = iv
            if j < len(v):
                v[i] += x
                v[j] += y
                self._snap = None
                return
        try:
            for i, x in iv:
                v[i] += x
        except IndexError:  # pairs are by index: the ones from the first missing on
            n = len(v)
            v = self._grow()
            for i, x in iv:
                if i >= n:
                    v[i] += x
        self._snap = None

    def sub(self, r: Resources) -> None:
        _sub(self, r._iv if r._iv is not None else _indexed(r))

    def covers(self, r: Resources) -> bool:
        """``r.fits_in(self.value)``, without taking a snapshot."""
        iv = r._iv if r._iv is not None else _indexed(r)
        v = self._v
        n = len(v)
        if len(iv) == 2:  # the common shape (vcores, memory), unrolled
            (i, x), (j, y) = iv
            if j < n:
                return not (x > v[i] + 1e-9 or y > v[j] + 1e-9)
        for i, x in iv:
            if x > (v[i] if i < n else 0) + 1e-9:
                return False
        return True

    @property
    def value(self) -> Resources:
        snap = self._snap
        if snap is None:
            v = self._v
            n = len(v)
            snap = self._snap = Resources._raw({k: x for k, i in _BY_NAME if i < n and (x := v[i])})
        return snap


def _sub(acc: Accumulator, iv: tuple[tuple[int, float], ...]) -> None:
    v = acc._v
    if iv and iv[-1][0] >= len(v):
        v = acc._grow()
    if len(iv) == 2:  # the common shape (vcores, memory), unrolled
        (i, x), (j, y) = iv
        prev = v[i]
        d = prev - x
        tol = 1e-9 + 1e-12 * (prev if prev >= 0 else -prev)
        v[i] = 0 if -tol <= d <= tol else d
        prev = v[j]
        d = prev - y
        tol = 1e-9 + 1e-12 * (prev if prev >= 0 else -prev)
        v[j] = 0 if -tol <= d <= tol else d
        acc._snap = None
        return
    for i, x in iv:
        prev = v[i]
        y = prev - x
        # Float dust (relative to the amounts) is zero: a freed node equals its capacity.
        tol = 1e-9 + 1e-12 * (prev if prev >= 0 else -prev)
        v[i] = 0 if -tol <= y <= tol else y
    acc._snap = None


def add_to_all(accs: tuple[Accumulator, ...], r: Resources) -> None:
    """``acc.add(r)`` for each of ``accs`` (one call for the RM's several books)."""
    iv = r._iv if r._iv is not None else _indexed(r)
    if len(iv) == 2:  # the common shape (vcores, memory), unrolled
        (i, x), (j, y) = iv
        for acc in accs:
            v = acc._v
            if j >= len(v):
                v = acc._grow()
            v[i] += x
            v[j] += y
            acc._snap = None
        return
    for acc in accs:
        acc.add(r)


def sub_from_all(accs: tuple[Accumulator, ...], r: Resources) -> None:
    """``acc.sub(r)`` for each of ``accs``."""
    iv = r._iv if r._iv is not None else _indexed(r)
    for acc in accs:
        _sub(acc, iv)


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def total(vectors: list[Resources] | tuple[Resources, ...]) -> Resources:
    d: dict[str, float] = {}
    for r in vectors:
        for k, v in r._d.items():
            d[k] = d.get(k, 0) + v
    return Resources._raw({k: v for k, v in d.items() if v})

"""``java.util.Random`` and ``String.hashCode`` bit for bit, for traces whose arrival
times a Java harness drew (the UWFQ scenarios' Poisson waits).

The generator is Java's 48-bit linear congruential one (multiplier 0x5DEECE66D, addend
0xB, the seed scrambled with the multiplier on construction); ``next_double``,
``next_int``, ``next_long`` and ``next_gaussian`` (the polar method, with its cached second
value) combine its outputs exactly as the JDK does. ``next_gaussian`` takes its logarithm
from ``strict_log``, a port of fdlibm's ``__ieee754_log`` (what ``StrictMath.log`` is
specified to return; the C library's ``log`` differs from it in the last bit now and
then), and ``math.sqrt``, correctly rounded in both.
"""

from __future__ import annotations

import math
import struct

_MULTIPLIER = 0x5DEECE66D
_ADDEND = 0xB
_MASK = (1 << 48) - 1
_DOUBLE_UNIT = 2.0**-53


# fdlibm e_log.c constants.
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_TWO54 = 1.80143985094819840000e16
_LG = (
    6.666666666666735130e-01,
    3.999999999940941908e-01,
    2.857142874366239149e-01,
    2.222219843214978396e-01,
    1.818357216161805012e-01,
    1.531383769920937332e-01,
    1.479819860511658591e-01,
)


def _words(x: float) -> tuple[int, int]:
    bits = struct.unpack("<q", struct.pack("<d", x))[0] & ((1 << 64) - 1)
    return _int32(bits >> 32), bits & 0xFFFFFFFF


def _with_high(x: float, hi: int) -> float:
    lo = _words(x)[1]
    value: float = struct.unpack("<d", struct.pack("<Q", ((hi & 0xFFFFFFFF) << 32) | lo))[0]
    return value


def strict_log(x: float) -> float:
    """``StrictMath.log(x)``: fdlibm's ``__ieee754_log``, operation for operation."""
    lg1, lg2, lg3, lg4, lg5, lg6, lg7 = _LG
    hx, lx = _words(x)
    k = 0
    if hx < 0x00100000:  # x < 2**-1022
        if ((hx & 0x7FFFFFFF) | lx) == 0:
            return -math.inf
        if hx < 0:
            return math.nan
        k -= 54
        x *= _TWO54
        hx = _words(x)[0]
    if hx >= 0x7FF00000:
        return x + x
    k += (hx >> 20) - 1023
    hx &= 0x000FFFFF
    i = (hx + 0x95F64) & 0x100000
    x = _with_high(x, hx | (i ^ 0x3FF00000))  # normalize x or x/2
    k += i >> 20
    f = x - 1.0
    if (0x000FFFFF & (2 + hx)) < 3:  # |f| < 2**-20
        if f == 0.0:
            return 0.0 if k == 0 else k * _LN2_HI + k * _LN2_LO
        r = f * f * (0.5 - 0.33333333333333333 * f)
        return f - r if k == 0 else k * _LN2_HI - ((r - k * _LN2_LO) - f)
    s = f / (2.0 + f)
    dk = float(k)
    z = s * s
    i = hx - 0x6147A
    w = z * z
    j = 0x6B851 - hx
    t1 = w * (lg2 + w * (lg4 + w * lg6))
    t2 = z * (lg1 + w * (lg3 + w * (lg5 + w * lg7)))
    i |= j
    r = t2 + t1
    if i > 0:
        hfsq = 0.5 * f * f
        if k == 0:
            return f - (hfsq - s * (hfsq + r))
        return dk * _LN2_HI - ((hfsq - (s * (hfsq + r) + dk * _LN2_LO)) - f)
    if k == 0:
        return f - s * (f - r)
    return dk * _LN2_HI - ((s * (f - r) - dk * _LN2_LO) - f)


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _int64(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: s[0]*31^(n-1) + ... + s[n-1] in 32-bit arithmetic,
    over UTF-16 code units."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return _int32(h)


class JavaRandom:
    """``new java.util.Random(seed)``: the same sequence as the JDK's for the same seed."""

    __slots__ = ("_next_gaussian", "_seed")

    def __init__(self, seed: int) -> None:
        self._seed = 0
        self._next_gaussian: float | None = None
        self.set_seed(seed)

    def set_seed(self, seed: int) -> None:
        """``setSeed(seed)``: as a new generator of that seed (the cached Gaussian dropped)."""
        self._seed = (seed ^ _MULTIPLIER) & _MASK
        self._next_gaussian = None

    def next_bits(self, bits: int) -> int:
        """``Random.next(bits)``: the top ``bits`` bits of the advanced seed, as a Java int."""
        self._seed = (self._seed * _MULTIPLIER + _ADDEND) & _MASK
        return _int32(self._seed >> (48 - bits))

    def next_int(self, bound: int | None = None) -> int:
        """``nextInt()`` (any int) or ``nextInt(bound)`` (0 <= n < bound)."""
        if bound is None:
            return self.next_bits(32)
        if bound <= 0:
            raise ValueError(f"bound must be positive, got {bound}")
        r = self.next_bits(31)
        m = bound - 1
        if bound & m == 0:  # a power of two
            return _int32((bound * r) >> 31)
        u = r
        r = u % bound
        while _int32(u - r + m) < 0:  # Java's overflow test: reject the biased tail
            u = self.next_bits(31)
            r = u % bound
        return r

    def next_long(self) -> int:
        return _int64((self.next_bits(32) << 32) + self.next_bits(32))

    def next_double(self) -> float:
        """Uniform in [0, 1): 53 random bits, as ``nextDouble()``."""
        return ((self.next_bits(26) << 27) + self.next_bits(27)) * _DOUBLE_UNIT

    def next_gaussian(self) -> float:
        """Standard normal, Marsaglia's polar method as ``nextGaussian()``."""
        if self._next_gaussian is not None:
            value, self._next_gaussian = self._next_gaussian, None
            return value
        while True:
            v1 = 2 * self.next_double() - 1
            v2 = 2 * self.next_double() - 1
            s = v1 * v1 + v2 * v2
            if 0 < s < 1:
                break
        multiplier = math.sqrt(-2 * strict_log(s) / s)
        self._next_gaussian = v2 * multiplier
        return v1 * multiplier

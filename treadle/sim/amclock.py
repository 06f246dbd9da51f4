"""When an AM calls in the simulator, and in which order AM calls of one instant run.

An AM's calls fall at ``s``, ``s + h``, ``(s + h) + h``, ... (``s`` its job's submission,
``h`` the AM interval): each call time is the float sum of the one before and ``h``,
as the loop has always added them. ``AmClock`` gives the k-th of them without adding
k times, so an AM that sleeps through calls that would change nothing can be woken at
exactly the call it would have made.

Within one binade [2^(e-1), 2^e) a step adds the same amount (``h`` rounded to the
binade's ulp) unless ``h`` falls exactly half way between two ulps, so the times form
arithmetic runs, one or two per binade; ``AmClock`` keeps them as segments, built from
``s`` forward as far as asked.

AM calls at one instant run in the order the loop queued them, which is the order in
which their queuing events ran: a call is queued by the AM's previous call, the first by
the job's submission. ``AmKey`` orders two calls of one instant that way without the
history of queue counters: compare the previous calls' times, then the ones before,
back to a submission (which runs before any AM call of its instant; two submissions of
one instant in their queue order). Two AMs whose calls coincide once coincide from then
on, so the walk back skips along shared runs and ends after a few segments.
"""

from __future__ import annotations

import bisect
import math


class AmClock:
    """The call times of one AM: ``time(k)`` is the k-th (``time(0)`` = ``start``).
    ``submit_seq`` is the queue position of the submission that started it."""

    __slots__ = ("_k0", "_n", "_step", "_x0", "h", "start", "submit_seq")

    def __init__(self, start: float, h: float, submit_seq: int) -> None:
        if not h > 0:
            raise ValueError(f"the AM interval must be > 0, got {h}")
        self.start = start
        self.h = h
        self.submit_seq = submit_seq
        # Segments: times k0[i] + j (0 <= j < n[i]) are x0[i] + j * step[i].
        self._k0: list[int] = [0]
        self._x0: list[float] = [start]
        self._step: list[float] = [0.0]
        self._n: list[int] = [1]

    def _extend(self) -> None:
        """Add the segment after the last one."""
        last = self._x0[-1] + (self._n[-1] - 1) * self._step[-1]
        x = last + self.h  # the sum the loop makes
        k = self._k0[-1] + self._n[-1]
        step, n = _run(x, self.h)
        self._k0.append(k)
        self._x0.append(x)
        self._step.append(step)
        self._n.append(n)

    def _segment(self, k: int) -> int:
        while self._k0[-1] + self._n[-1] <= k:
            self._extend()
        return bisect.bisect_right(self._k0, k) - 1

    def time(self, k: int) -> float:
        i = self._segment(k)
        return self._x0[i] + (k - self._k0[i]) * self._step[i]

    def run_start(self, k: int) -> int:
        """The first call of the arithmetic run that holds call ``k``."""
        return self._k0[self._segment(k)]

    def first_after(self, k: int, t: float, *, at: bool) -> int:
        """The first call after call ``k`` that falls after ``t`` (or at ``t`` too, with
        ``at``)."""
        while True:  # extend until the last segment ends past t
            end = self._x0[-1] + (self._n[-1] - 1) * self._step[-1]
            if end > t or (at and end == t):
                break
            self._extend()
        i = max(bisect.bisect_left(self._x0, t) - 1, 0)
        j = self._k0[i]
        step = self._step[i]
        if step > 0:  # near t, within the segment
            j += min(max(int((t - self._x0[i]) / step) - 1, 0), self._n[i] - 1)
        j = max(j, k + 1)
        while True:
            x = self.time(j)
            if x > t or (at and x == t):
                return j
            j += 1


def _run(x: float, h: float) -> tuple[float, int]:
    """The step and length of the arithmetic run of call times from ``x``: within x's
    binade every step adds ``h`` rounded to the binade's ulp, unless ``h`` lies exactly
    half way between two ulps (rounding then depends on the parity of the sum)."""
    if not (x > 2 * h and math.isfinite(x)):
        return 0.0, 1
    _, e = math.frexp(x)  # x in [2^(e-1), 2^e)
    ulp = math.ldexp(1.0, e - 53)
    q = h / ulp  # exact: a power-of-two scaling
    frac = q - math.floor(q)
    if frac == 0.5:
        return 0.0, 1
    step = (math.floor(q) + (1 if frac > 0.5 else 0)) * ulp
    if step <= 0 or x + h - x != step:
        return 0.0, 1
    top = math.ldexp(1.0, e)
    # Stay two ulps clear of the binade's top, where a sum may round into the next one.
    n = int((top - 2 * ulp - x) // step)
    if n < 1:
        return 0.0, 1
    while x + n * step + h >= top - 2 * ulp and n > 0:  # guard the division's rounding
        n -= 1
    return step, n + 1


class AmKey:
    """The queue position of call ``k`` of ``clock`` among the AM calls of its instant."""

    __slots__ = ("clock", "k")

    def __init__(self, clock: AmClock, k: int) -> None:
        self.clock = clock
        self.k = k

    def __lt__(self, other: AmKey) -> bool:
        return runs_before(self.clock, self.k, other.clock, other.k)

    def __gt__(self, other: AmKey) -> bool:
        return runs_before(other.clock, other.k, self.clock, self.k)


def runs_before(a: AmClock, j: int, b: AmClock, m: int) -> bool:
    """Whether call ``j`` of ``a`` runs before call ``m`` of ``b``, two calls of one
    instant: the one whose queuing event ran first."""
    while True:
        if j == 0 or m == 0:
            if j == 0 and m == 0:
                return a.submit_seq < b.submit_seq
            # A submission runs after every AM call queued before its instant.
            return m == 0
        pa, pb = a.time(j - 1), b.time(m - 1)
        if pa != pb:
            return pa < pb
        j -= 1
        m -= 1
        # Equal times in one arithmetic run stay equal back to the run's start.
        back = min(j - a.run_start(j), m - b.run_start(m))
        j -= back
        m -= back

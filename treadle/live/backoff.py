"""The one retry schedule of every client loop (issue 26, item 4): exponential, capped and
jittered, so that an RM that is down is not called by every AM, NM and driver at their
fastest rate (an AM host polled every 28 ms) and the calls of many clients do not come
in step when it is back.

The n-th delay after n failures in a row is ``min(cap, base * factor**(n-1))``, less up to
``jitter`` of itself (never more than the cap: a loop's liveness expiry stays met); a
success resets it. The jitter comes from the ``rng`` given (seeded: the same delays).
gRPC's own retry policy retries one call a few times; these loops retry for as long as
their caller allows, each on its own terms (registering again, carrying requests over),
and no retry library is a dependency, so the schedule is this small class.
"""

from __future__ import annotations

import random


class Backoff:
    """Delays for the failures in a row of one loop (units: whatever ``base`` is in)."""

    def __init__(
        self,
        base: float,
        cap: float,
        *,
        factor: float = 2.0,
        jitter: float = 0.2,
        rng: random.Random | None = None,
    ) -> None:
        if not 0 < base <= cap:
            raise ValueError(f"backoff needs 0 < base <= cap, got {base:g} and {cap:g}")
        if factor < 1 or not 0 <= jitter < 1:
            raise ValueError(
                f"backoff needs factor >= 1 and 0 <= jitter < 1, got {factor:g}, {jitter:g}"
            )
        self.base, self.cap, self.factor, self.jitter = base, cap, factor, jitter
        self.rng = rng if rng is not None else random.Random()
        #: Failures in a row so far.
        self.failures = 0

    def next(self) -> float:
        """The delay before the next try, after one more failure."""
        self.failures += 1
        # The exponent stops growing once the cap is reached (no overflow in a long outage).
        full = self.base * self.factor ** min(self.failures - 1, 64)
        delay = min(self.cap, full)
        return delay * (1.0 - self.jitter * self.rng.random())

    def reset(self) -> None:
        """A success: the next failure waits ``base`` again."""
        self.failures = 0

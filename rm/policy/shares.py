"""Entitlements sent to AMs, computed periodically rather than on every Allocate call."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from treadle.resources import Resources


class SharesCache:
    """Shares recomputed at most every ``interval_s`` (YARN's FairScheduler update thread
    runs every 500 ms) and whenever invalidated (an application arrived)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._cached: tuple[float, Mapping[str, Resources]] | None = None

    def invalidate(self) -> None:
        self._cached = None

    def get(
        self, now: float, compute: Callable[[], Mapping[str, Resources]]
    ) -> Mapping[str, Resources]:
        c = self._cached
        if c is None or not c[0] <= now < c[0] + self.interval_s:
            c = self._cached = (now, compute())
        return c[1]

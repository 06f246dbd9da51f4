"""Entitlements sent to AMs, computed periodically rather than on every Allocate call."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping
from typing import ClassVar

from rm.policy.base import P, Policy
from rm.policy.views import AppView, ClusterView
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


class CachedShares(Policy[P]):
    """Mixin of policies that send entitlements: ``shares()`` returns ``compute_shares``,
    recomputed at most every ``shares_interval_s()`` emulated seconds (0: on every call)
    and sooner once invalidated.

    The cache is invalidated when an application is added (YARN's FairScheduler); with
    ``shares_on_first_ask = True``, instead when an added application first asks for
    containers (an application that asks must be entitled to something, one that has not
    asked yet would get nothing). Subclasses that override ``on_app_added`` or
    ``on_app_removed`` call ``super()``.
    """

    shares_on_first_ask: ClassVar[bool] = False

    def __init__(self, params: P | None = None) -> None:
        super().__init__(params)
        self.shares_cache = SharesCache(self.shares_interval_s())
        self._unasked: set[str] = set()  # added, not asked for anything yet

    @abstractmethod
    def shares_interval_s(self) -> float:
        """Recompute shares at most this often (0: on every call)."""

    @abstractmethod
    def compute_shares(self, cluster: ClusterView) -> Mapping[str, Resources]:
        """Each application's entitlement, computed now."""

    def shares(self, cluster: ClusterView) -> Mapping[str, Resources]:
        if self._unasked:
            for app_id in list(self._unasked):
                app = cluster.apps.get(app_id)
                if app is None or app.pending:
                    self._unasked.discard(app_id)
                    if app is not None:
                        self.shares_cache.invalidate()
        return self.shares_cache.get(cluster.now, lambda: self.compute_shares(cluster))

    def on_app_added(self, app: AppView, cluster: ClusterView) -> None:
        super().on_app_added(app, cluster)
        if self.shares_on_first_ask:
            self._unasked.add(app.app_id)
        else:
            self.shares_cache.invalidate()

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        super().on_app_removed(app, cluster)
        self._unasked.discard(app.app_id)

    def on_app_moved(self, app: AppView, old_queue: str, cluster: ClusterView) -> None:
        """Shares split by queue: they are recomputed at the next call."""
        super().on_app_moved(app, old_queue, cluster)
        self.shares_cache.invalidate()

"""fifo: applications in submission order, each filled before the next (YARN FifoScheduler)."""

from __future__ import annotations

from rm.policy import AppView, ClusterView, NoParams, OrderingPolicy


class FifoPolicy(OrderingPolicy[NoParams]):
    description = "first in, first out: applications in submission order"

    def sort_key(self, app: AppView, cluster: ClusterView) -> int:
        return app.seq

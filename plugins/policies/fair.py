"""fair: YARN FairScheduler (weighted queues, fair shares by water-filling).

Serving order at each level of the queue tree (YARN's FairSharePolicy comparator): queues
below their min share first (``min_share=capacity``: a queue's absolute capacity, capped by
its demand; lowest used / min share first), then lowest used / weight, ties by name. Inside
a leaf, applications by ``inner``: ``fair`` (lowest usage, ties by submission), ``drf``
(lowest dominant share) or ``fifo``. Usage is a fraction of the cluster per ``resource``:
``dominant`` share (default here, so vcore-only and memory-only workloads both work), or
``memory`` / ``vcores`` alone like YARN. The order is recomputed after every placement.

``shares()``: weighted water-filling at each level (the whole cluster to the root, a
queue's share to its children by weight, each capped by its demand = used + asked for,
excess redistributed; a leaf's share to its applications equally, or in submission order
with ``inner=fifo``). An application's share is its own demand vector scaled to its fair
fraction (a resource vector of its task shape). Like YARN's update thread, shares are
recomputed at most every ``update_interval_s`` (0: on every change) and when an
application is added. O(apps log apps).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import accumulate
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rm.policy import AppView, CachedShares, ClusterView, QueueTreePolicy, QueueView, water_fill
from treadle.resources import ZERO, Resources, total


class FairParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resource: Literal["dominant", "memory", "vcores"] = "dominant"
    inner: Literal["fair", "drf", "fifo"] = "fair"
    min_share: Literal["none", "capacity"] = "none"
    #: Recompute shares at most this often (YARN's update thread: 500 ms); 0: on every change.
    update_interval_s: float = Field(0.5, ge=0.0)


class FairPolicy(CachedShares[FairParams], QueueTreePolicy[FairParams]):
    description = "YARN fair scheduler: weighted queues, water-filled shares, fair/drf/fifo inside"
    resort = True
    _min_shares: Mapping[str, float] = {}  # per queue with demand, this heartbeat

    def usage(self, r: Resources, cap: Resources) -> float:
        kind = self.params.resource
        if kind == "dominant":
            return r.dominant_share(cap)
        return r[kind] / cap[kind] if cap[kind] else 0.0

    # Placement --------------------------------------------------------------------
    def prepare(self, cluster: ClusterView) -> None:
        """Each queue's min share capped by its demand (used + asked: constant while placing)."""
        if self.params.min_share != "capacity":
            return
        qs, cap, asked = cluster.queues, cluster.capacity, dict[str, Resources]()
        for app in cluster.pending_apps():
            q: QueueView | None = qs[app.queue]
            while q is not None:
                asked[q.name], q = asked.get(q.name, ZERO) + app.demand, q.parent
        self._min_shares = {
            n: min(qs[n].abs_capacity, self.usage(qs[n].used + d, cap)) for n, d in asked.items()
        }

    def group_key(self, name: str, cluster: ClusterView) -> tuple[int, float, str]:
        q = cluster.queues[name]
        used = self.usage(q.used, cluster.capacity)
        min_share = self._min_shares.get(name)
        if min_share is not None and used < min_share:
            return (0, used / min_share, name)
        return (1, used / q.weight if q.weight > 0 else math.inf, name)

    def app_key(self, app: AppView, cluster: ClusterView) -> float:
        if self.params.inner == "fifo":
            return 0.0
        if self.params.inner == "drf":
            return app.allocated.dominant_share(cluster.capacity)
        return self.usage(app.allocated, cluster.capacity)

    # Shares -----------------------------------------------------------------------
    def shares_interval_s(self) -> float:
        return self.params.update_interval_s

    def compute_shares(self, cluster: ClusterView) -> dict[str, Resources]:
        cap, out = cluster.capacity, dict[str, Resources]()
        want: dict[str, Resources] = {}  # used + asked for, per queue
        apps_of: dict[str, list[tuple[AppView, Resources]]] = {}
        for app in cluster.apps.values():
            apps_of.setdefault(app.queue, []).append((app, app.allocated + app.demand))
        for leaf, apps in apps_of.items():
            d = total([d for _, d in apps])
            q: QueueView | None = cluster.queues[leaf]
            while q is not None:
                want[q.name], q = want.get(q.name, ZERO) + d, q.parent

        def split(q: QueueView, share: float) -> None:
            if not q.is_leaf:
                kids = [k for k in q.children if k.name in want]
                caps = [self.usage(want[k.name], cap) for k in kids]
                got = water_fill(share, [k.weight for k in kids], caps)
                for k, s in zip(kids, got, strict=True):
                    split(k, s)
                return
            apps = apps_of.get(q.name, [])
            caps = [self.usage(d, cap) for _, d in apps]
            if self.params.inner == "fifo":  # in submission order, each up to its demand
                before = accumulate(caps, initial=0.0)
                got = [min(c, max(0.0, share - b)) for c, b in zip(caps, before, strict=False)]
            else:
                got = water_fill(share, [1.0] * len(apps), caps)
            for (app, d), c, s in zip(apps, caps, got, strict=True):
                if c > 0:
                    out[app.app_id] = d * (s / c)

        if not cap.is_zero():
            split(cluster.root_queue, 1.0)
        return out

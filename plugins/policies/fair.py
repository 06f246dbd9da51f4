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

With a queue tree that sets FairScheduler properties (``QueueSpec``'s fair block, from an
allocation file or the workload's queues) or ``preemption=true``, the rules of
``rm.policy.toolkit.fairrules`` apply: ``maxRunningApps`` per queue and per user (waiting
applications get nothing, not even their AM), ``maxResources`` (no container takes a
queue or a queue above it past its max), ``minResources`` (needy queues first; shares
within [min, max]), ``maxAMShare`` (an AM starts only while the leaf's AMs fit in that
fraction of its fair share among the active queues) and each queue's
``schedulingPolicy`` (its applications in fifo, fair or drf order; a parent's drf
compares its children by dominant share). Placement then looks at every pending
application on each heartbeat. ``preemption`` adds fair-share and min-share preemption
after their timeouts (``rm.policy.toolkit.fairpreempt``), checked every
``preemption_check_s``: victims are killed ``wait_before_kill_s`` after they are chosen,
only while the cluster's usage passes ``utilization_threshold``, and an application
preempted for is not starved again for ``starvation_recheck_s``. Without any of these the
policy runs exactly as before.

A client's move (``on_app_moved``) makes the application a member of its new leaf at
once: it is served there, its demand and usage count in the new leaf's share and no
longer in the old one's. Under the rules, as Hadoop's ``FairScheduler.moveApplication``:
a runnable application is refused a move that would pass a queue's maxRunningApps or,
with what it holds, its maxResources (below the lowest queue above both); a waiting one
moves and runs there as soon as it may; its old queue may then run a waiting one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from itertools import accumulate
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from rm.policy import (
    AppView,
    CachedShares,
    ClusterView,
    NodeView,
    Placement,
    QueueTreePolicy,
    QueueView,
    water_fill,
)
from rm.policy.toolkit.fairlimits import FairLimits
from treadle.messages import Container, ContainerStatus
from treadle.resources import MEMORY_MB, VCORES, ZERO, Resources, total


class FairParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resource: Literal["dominant", "memory", "vcores"] = "dominant"
    inner: Literal["fair", "drf", "fifo"] = "fair"
    min_share: Literal["none", "capacity"] = "none"
    #: Recompute shares at most this often (YARN's update thread: 500 ms); 0: on every change.
    update_interval_s: float = Field(0.5, ge=0.0)
    #: Fair-share and min-share preemption (``yarn.scheduler.fair.preemption``).
    preemption: bool = False
    preemption_check_s: float = Field(0.5, gt=0.0, allow_inf_nan=False)
    #: ``yarn.scheduler.fair.waitTimeBeforeKill`` (15 s in Hadoop).
    wait_before_kill_s: float = Field(15.0, ge=0.0, allow_inf_nan=False)
    #: ``yarn.scheduler.fair.preemption.cluster-utilization-threshold``.
    utilization_threshold: float = Field(0.8, ge=0.0, le=1.0)
    #: ``yarn.scheduler.fair.waitTimeBeforeNextStarvationCheck`` (10 s in Hadoop).
    starvation_recheck_s: float = Field(10.0, ge=0.0, allow_inf_nan=False)

    @model_serializer(mode="wrap")
    def _without_idle_preemption(self, dump: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The preemption settings only when preemption is on (run summaries stay as they
        were for the runs without it)."""
        out: dict[str, Any] = dump(self)
        if not self.preemption:
            for name in _PREEMPTION_SETTINGS:
                out.pop(name, None)
        return out


_PREEMPTION_SETTINGS = (
    "preemption",
    "preemption_check_s",
    "wait_before_kill_s",
    "utilization_threshold",
    "starvation_recheck_s",
)


class FairPolicy(CachedShares[FairParams], QueueTreePolicy[FairParams]):
    description = "YARN fair scheduler: weighted queues, water-filled shares, fair/drf/fifo inside"
    resort = True
    _min_shares: Mapping[str, float] = {}  # per queue with demand, this heartbeat
    #: The FairScheduler rules in force (None: none set, the plain walk).
    limits: FairLimits | None = None

    def __init__(self, params: FairParams | None = None) -> None:
        super().__init__(params)
        if self.params.preemption:
            self.tick_interval_s = self.params.preemption_check_s

    def on_start(self, cluster: ClusterView) -> None:
        self.limits = FairLimits.of(cluster, self.params.preemption, self.params.inner)
        if self.limits is not None:  # every application's asks checked against the rules
            self.first_fit = self.limits.first_fit  # type: ignore[method-assign]

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        if self.limits is None:
            return super().on_node_heartbeat(node, cluster)
        return self._walk_every_app(node, cluster)

    def on_app_added(self, app: AppView, cluster: ClusterView) -> None:
        super().on_app_added(app, cluster)
        if self.limits is not None:
            self.limits.added(app)

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        super().on_app_removed(app, cluster)
        if self.limits is not None:
            self.limits.removed(app)
            self.shares_cache.invalidate()

    def refuse_move(self, app: AppView, queue: str, cluster: ClusterView) -> str | None:
        return None if self.limits is None else self.limits.refuse_move(app, queue, cluster)

    def on_app_moved(self, app: AppView, old_queue: str, cluster: ClusterView) -> None:
        super().on_app_moved(app, old_queue, cluster)  # its leaf's index, the shares
        if self.limits is not None:
            self.limits.moved(app, old_queue)

    def on_container_allocated(self, container: Container, cluster: ClusterView) -> None:
        if self.limits is not None:
            self.limits.allocated(container, cluster)

    def on_container_finished(
        self, container: Container, status: ContainerStatus, cluster: ClusterView
    ) -> None:
        if self.limits is not None:
            self.limits.finished(container)

    def preempt(self, cluster: ClusterView) -> Sequence[str]:
        if self.limits is None or not self.params.preemption:
            return ()
        return self.limits.preempt(cluster, self.params, self.shares(cluster), self.usage)

    def usage(self, r: Resources, cap: Resources) -> float:
        kind = self.params.resource
        if kind == "dominant":
            return r.dominant_share(cap)
        key = MEMORY_MB if kind == "memory" else VCORES
        return r[key] / cap[key] if cap[key] else 0.0

    # Placement --------------------------------------------------------------------
    def prepare(self, cluster: ClusterView) -> None:
        """Each queue's min share capped by its demand (used + asked: constant while placing)."""
        if self.limits is not None:
            self._min_shares = self.limits.prepare(cluster, self.params.min_share, self.usage)
            return
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
        if self.limits is not None and self.limits.parent_is_drf(name):
            used = q.used.dominant_share(cluster.capacity)
        else:
            used = self.usage(q.used, cluster.capacity)
        min_share = self._min_shares.get(name)
        if min_share is not None and used < min_share:
            return (0, used / min_share, name)
        return (1, used / q.weight if q.weight > 0 else math.inf, name)

    def app_key(self, app: AppView, cluster: ClusterView) -> float:
        inner = self.params.inner if self.limits is None else self.limits.inner(app.queue)
        if inner == "fifo":
            return 0.0
        if inner == "drf":
            return app.allocated.dominant_share(cluster.capacity)
        return self.usage(app.allocated, cluster.capacity)

    # Shares -----------------------------------------------------------------------
    def shares_interval_s(self) -> float:
        return self.params.update_interval_s

    def compute_shares(self, cluster: ClusterView) -> dict[str, Resources]:
        if self.limits is not None:
            return self.limits.shares(cluster, self.params.inner, self.usage)
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

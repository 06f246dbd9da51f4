"""capacity: YARN CapacityScheduler (hierarchical queues with guaranteed and max capacity).

At each level of the queue tree the child queue with the lowest used / guaranteed ratio is
served first (used as a fraction of the cluster: dominant share by default, memory only with
``resource_calculator=memory`` like YARN's DefaultResourceCalculator; queues with no
guarantee come last, then by usage, then by name). A placement is made only if every queue
on the leaf's path stays within its absolute max capacity (``used + container <=
abs_max_capacity x cluster``, per the calculator), so a queue may grow past its guarantee
into idle capacity (elasticity) but never past its max. Inside a leaf, applications are
served in submission order. Queues with nothing that fits are skipped; the order is
recomputed after every placement. No preemption.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rm.policy import AppView, ClusterView, NodeView, Placement, Policy, QueueView
from treadle.resources import MEMORY_MB, Resources

EPS = 1e-9


class CapacityParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resource_calculator: Literal["dominant", "memory"] = "dominant"


class CapacityPolicy(Policy[CapacityParams]):
    description = "YARN capacity scheduler: least-used queue (vs guarantee) first, max enforced"

    def usage(self, r: Resources, cluster: Resources) -> float:
        """``r`` as a fraction of the cluster, per the resource calculator."""
        if self.params.resource_calculator == "memory":
            mem = cluster[MEMORY_MB]
            return r[MEMORY_MB] / mem if mem else 0.0
        return r.dominant_share(cluster)

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        cap = cluster.capacity
        # Each leaf's waiting applications, latest first (pop() drops the head in O(1)).
        waiting: dict[str, list[AppView]] = {}
        for app in reversed(cluster.pending_apps()):
            waiting.setdefault(app.queue, []).append(app)

        def key(q: QueueView) -> tuple[float, float, str]:
            used = self.usage(q.used, cap)
            ratio = used / q.abs_capacity if q.abs_capacity > 0 else math.inf
            return (ratio, used, q.name)

        def pick(q: QueueView) -> QueueView | None:
            if q.is_leaf:
                return q if waiting.get(q.name) else None
            for child in sorted(q.children, key=key):
                leaf = pick(child)
                if leaf is not None:
                    return leaf
            return None

        while (leaf := pick(cluster.root_queue)) is not None:
            placement = self._next(waiting[leaf.name], leaf, node, cap)
            if placement is None:
                del waiting[leaf.name]  # nothing of this queue fits any more
                continue
            yield placement

    def _next(
        self, apps: list[AppView], leaf: QueueView, node: NodeView, cap: Resources
    ) -> Placement | None:
        """The first (FIFO) placement of ``leaf`` that fits the node and the max capacities.
        Applications with nothing that fits are dropped: during one heartbeat the node's
        free resources only shrink and queue usage only grows."""
        while apps:
            app = apps[-1]
            for ask in app.sorted_asks():
                if ask.resources.fits_in(node.free) and self._within_max(leaf, ask.resources, cap):
                    return Placement(app.app_id, ask.priority)
            apps.pop()
        return None

    def _within_max(self, leaf: QueueView, res: Resources, cap: Resources) -> bool:
        q: QueueView | None = leaf
        while q is not None:
            if self.usage(q.used + res, cap) > q.abs_max_capacity + EPS:
                return False
            q = q.parent
        return True

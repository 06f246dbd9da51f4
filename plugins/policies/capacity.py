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
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rm.policy import ClusterView, NodeView, QueueTreePolicy, QueueView
from treadle.resources import MEMORY_MB, Resources

EPS = 1e-9


class CapacityParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resource_calculator: Literal["dominant", "memory"] = "dominant"


class CapacityPolicy(QueueTreePolicy[CapacityParams]):
    description = "YARN capacity scheduler: least-used queue (vs guarantee) first, max enforced"

    def usage(self, r: Resources, cluster: Resources) -> float:
        """``r`` as a fraction of the cluster, per the resource calculator."""
        if self.params.resource_calculator == "memory":
            mem = cluster[MEMORY_MB]
            return r[MEMORY_MB] / mem if mem else 0.0
        return r.dominant_share(cluster)

    def group_key(self, name: str, cluster: ClusterView) -> tuple[float, float, str]:
        q = cluster.queues[name]
        used = self.usage(q.used, cluster.capacity)
        return (used / q.abs_capacity if q.abs_capacity > 0 else math.inf, used, name)

    def fits(self, resources: Resources, leaf: str, node: NodeView, cluster: ClusterView) -> bool:
        """Whether the ask fits the node and every max capacity on the leaf's path."""
        return resources.fits_in(node.free) and self._within_max(
            cluster.queues[leaf], resources, cluster.capacity
        )

    def _within_max(self, leaf: QueueView, res: Resources, cap: Resources) -> bool:
        q: QueueView | None = leaf
        memory = self.params.resource_calculator == "memory"
        while q is not None:
            if _usage_with(q.used, res, cap, memory) > q.abs_max_capacity + EPS:
                return False
            q = q.parent
        return True


def _usage_with(used: Resources, extra: Resources, cap: Resources, memory: bool) -> float:
    """``usage(used + extra, cap)`` without building the sum (the same floats: each
    dimension is added, then divided, as there)."""
    if memory:
        mem = cap[MEMORY_MB]
        return (used[MEMORY_MB] + extra[MEMORY_MB]) / mem if mem else 0.0
    return used.dominant_share_with(extra, cap)

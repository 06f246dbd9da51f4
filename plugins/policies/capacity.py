"""capacity: YARN CapacityScheduler (hierarchical queues with guaranteed and max capacity).

At each level of the queue tree the child queue with the lowest used / guaranteed ratio is
served first (used as a fraction of the cluster: dominant share by default, memory only with
``resource_calculator=memory`` like YARN's DefaultResourceCalculator; queues with no
guarantee come last, then by usage, then by name). A placement is made only if every queue
on the leaf's path stays within its absolute max capacity (``used + container <=
abs_max_capacity x cluster``, per the calculator), so a queue may grow past its guarantee
into idle capacity (elasticity) but never past its max. Inside a leaf, applications are
served in submission order. Queues with nothing that fits are skipped; the order is
recomputed after every placement.

A leaf whose queue sets ``user_limit_factor``, ``minimum_user_limit_percent``,
``maximum_am_resource_percent`` or ``ordering_policy`` (capacity-scheduler.xml's
properties, or the workload's queue keys) is served under those limits
(``rm.policy.toolkit.capacityrules``); ``maximum_applications`` is the RM's (submissions
past it fail). With ``preemption=true`` (YARN's ``yarn.resourcemanager.scheduler.
monitor.enable``) the proportional preemption monitor runs every
``monitoring_interval_s`` (``rm.policy.toolkit.proportional``): over-guarantee leaves give
containers back to under-guarantee ones that ask, at most ``total_preemption_per_round``
of the cluster a round, a ``natural_termination_factor`` of the gap, containers killed
once selected for ``max_wait_before_kill_s``; AM containers are never taken. Without
those keys and parameters the policy is as it always was.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from rm.policy import ClusterView, NodeView, Placement, QueueTreePolicy, QueueView
from rm.policy.toolkit.capacityrules import LeafRules, has_rules, spec_of
from rm.policy.toolkit.proportional import Marks, PreemptionParams, monitor_round
from treadle.messages import Container, ContainerStatus
from treadle.resources import MEMORY_MB, Resources


def _fraction(default: float) -> Any:
    return Field(default, ge=0, le=1, allow_inf_nan=False)


EPS = 1e-9


#: The parameters that came after ``resource_calculator`` (see ``_listed``).
_LATER = (
    "preemption",
    "monitoring_interval_s",
    "max_wait_before_kill_s",
    "total_preemption_per_round",
    "natural_termination_factor",
    "max_ignored_over_capacity",
    "minimum_allocation_mb",
    "minimum_allocation_vcores",
    "am_memory_mb",
    "am_vcores",
)


class CapacityParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resource_calculator: Literal["dominant", "memory"] = "dominant"
    #: The proportional preemption monitor, and its settings (YARN's names and defaults).
    preemption: bool = False
    monitoring_interval_s: float = Field(3.0, gt=0, allow_inf_nan=False)
    max_wait_before_kill_s: float = Field(15.0, ge=0, allow_inf_nan=False)
    total_preemption_per_round: float = _fraction(0.1)
    natural_termination_factor: float = _fraction(0.2)
    max_ignored_over_capacity: float = Field(0.1, ge=0, allow_inf_nan=False)
    #: yarn.scheduler.minimum-allocation-*: the step user and AM limits round up to.
    minimum_allocation_mb: int = Field(1024, ge=1)
    minimum_allocation_vcores: int = Field(1, ge=1)
    #: An AM's size for the AM limit when the RM does not place it (unmanaged AMs).
    am_memory_mb: int = Field(1024, ge=0)
    am_vcores: int = Field(1, ge=0)

    @model_serializer(mode="wrap")
    def _listed(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The parameters as a run records them: those added with the leaf limits and the
        monitor only when not at their defaults (a run that uses neither lists what it
        always listed)."""
        out: dict[str, Any] = handler(self)
        fields = type(self).model_fields
        for key in _LATER:
            if key in out and getattr(self, key) == fields[key].default:
                del out[key]
        return out


class CapacityPolicy(QueueTreePolicy[CapacityParams]):
    description = "YARN capacity scheduler: least-used queue (vs guarantee) first, max enforced"

    def __init__(self, params: CapacityParams | None = None) -> None:
        super().__init__(params)
        p = self.params
        self._rules: LeafRules | None = None
        self._marks = Marks()
        self._held: dict[str, tuple[Container, float]] = {}  # live container -> (it, start)
        if p.preemption:
            self.tick_interval_s = p.monitoring_interval_s
            self._monitor = PreemptionParams(
                p.monitoring_interval_s,
                p.max_wait_before_kill_s,
                p.total_preemption_per_round,
                p.natural_termination_factor,
                p.max_ignored_over_capacity,
            )

    def on_start(self, cluster: ClusterView) -> None:
        if any(q.is_leaf and has_rules(spec_of(q)) for q in cluster.queues.values()):
            self._rules = LeafRules(self.usage, self._step(cluster), self._am_size())

    def _am_size(self) -> Resources:
        return Resources(vcores=self.params.am_vcores, memory_mb=self.params.am_memory_mb)

    def _step(self, cluster: ClusterView) -> float:
        p = self.params
        minimum = Resources(vcores=p.minimum_allocation_vcores, memory_mb=p.minimum_allocation_mb)
        return self.usage(minimum, cluster.capacity) if cluster.capacity else 0.0

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        rules = self._rules
        if rules is None:
            return super().on_node_heartbeat(node, cluster)
        rules.step = self._step(cluster)
        return rules.walk(node, cluster, self.group_key, self.fits)

    # The preemption monitor --------------------------------------------------------
    def on_container_allocated(self, container: Container, cluster: ClusterView) -> None:
        if self.params.preemption:
            self._held[container.container_id] = (container, cluster.now)

    def on_container_finished(
        self, container: Container, status: ContainerStatus, cluster: ClusterView
    ) -> None:
        self._held.pop(container.container_id, None)

    def preempt(self, cluster: ClusterView) -> Sequence[str]:
        if not self.params.preemption or not cluster.capacity:
            return ()
        step = self._step(cluster)
        rules = self._rules
        if rules is not None:
            rules.step = step
        pending = rules.monitor_pending(cluster) if rules is not None else None
        selected = monitor_round(
            cluster, self._held.values(), self.usage, self._monitor, pending, step
        )
        return self._marks.kills(selected, cluster.now, self._monitor.max_wait_before_kill_s)

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

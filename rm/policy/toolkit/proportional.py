"""YARN's proportional capacity preemption monitor (``ProportionalCapacityPreemptionPolicy``)
as pure functions over numbers, the way Hadoop's tests feed it a table of queues.

Quantities are scalars in one unit (the caller's resource calculator: memory, or the
dominant share): per queue its ``guaranteed`` and ``maximum`` (absolute), ``used`` and
``pending``. One round (``editSchedule``):

1. From the root down, each parent's ideal assignment is shared among its children
   (``ideal_assignment``; ``computeFixpointAllocation``): a child starts at
   ``min(used, guaranteed)``; what is left goes, round after round, to the most
   under-served children (lowest ideal / guaranteed; zero-guarantee queues last, sharing
   what remains equally), each offered ``unassigned x guaranteed / sum of the guarantees
   of the children still asking`` rounded up to ``step``, and accepting at most
   ``min(maximum, used + pending, for a leaf max(used, guaranteed)) - ideal``.
2. Per level, a queue above its ideal must give back ``used - ideal``, scaled down so the
   level's total stays within ``total_preemption_per_round`` of the cluster.
3. A leaf gives back only when ``used > guaranteed x (1 + max_ignored_over_capacity)``
   (the dead zone), and then ``natural_termination_factor`` of that (the rest is expected
   to end by itself): ``to_obtain``.

``select_victims`` picks the containers: per leaf, its applications last submitted
first, each one's containers least important priority first, then newest first, AM
containers never, each taken whole while the leaf still has something to obtain and the
round's budget (``total_preemption_per_round`` of the cluster) covers it. ``Marks``
keeps when each was first selected: one selected again ``max_wait_before_kill_s`` or
more later is killed; a mark older than twice that is forgotten.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from rm.policy.views import ClusterView, QueueView
from treadle.messages import Container
from treadle.resources import Resources

EPS = 1e-9
#: An AM container's priority (``rm.core.state.AM_PRIORITY``): never preempted.
AM_PRIORITY = -1


@dataclass(frozen=True, slots=True)
class PreemptionParams:
    """The monitor's settings, YARN's defaults
    (``yarn.resourcemanager.monitor.capacity.preemption.*``)."""

    monitoring_interval_s: float = 3.0
    max_wait_before_kill_s: float = 15.0
    total_preemption_per_round: float = 0.1
    natural_termination_factor: float = 0.2
    max_ignored_over_capacity: float = 0.1


@dataclass(slots=True)
class QueueLoad:
    """A queue as the monitor sees it (a parent's ``used`` and ``pending``: its
    children's sums, filled in by ``QueueLoad.parent``)."""

    name: str
    guaranteed: float
    maximum: float
    used: float = 0.0
    pending: float = 0.0
    children: list[QueueLoad] = field(default_factory=list)
    ideal: float = 0.0
    normalized: float = 0.0

    @classmethod
    def parent(
        cls, name: str, guaranteed: float, maximum: float, children: list[QueueLoad]
    ) -> QueueLoad:
        return cls(
            name,
            guaranteed,
            maximum,
            sum(c.used for c in children),
            sum(c.pending for c in children),
            children,
        )

    def leaves(self) -> Iterable[QueueLoad]:
        if not self.children:
            yield self
        for c in self.children:
            yield from c.leaves()


def _pct_of_guaranteed(q: QueueLoad) -> float:
    return q.ideal / q.guaranteed if q.guaranteed > EPS else math.inf


def _round_step(x: float, step: float) -> float:
    """``x`` to the nearest multiple of ``step``, halves up (``(long) (x + 0.5)`` then
    ``roundUp``, as DefaultResourceCalculator's ``multiplyAndNormalizeUp``)."""
    return math.floor(x / step + 0.5 + EPS) * step if step > 0 else x


def _offer(q: QueueLoad, avail: float) -> float:
    """What ``q`` accepts of ``avail`` (``TempQueuePerPartition.offer``)."""
    accepted = min(max(q.maximum - q.ideal, 0.0), avail, q.used + q.pending - q.ideal)
    if not q.children:  # a leaf takes no more than max(used, guaranteed)
        accepted = min(accepted, max(max(q.used, q.guaranteed) - q.ideal, 0.0))
    accepted = max(accepted, 0.0)
    q.ideal += accepted
    return accepted


def _fixpoint(queues: list[QueueLoad], unassigned: float, step: float, equal: bool) -> float:
    """Share ``unassigned`` among ``queues`` (module docstring, step 1); what is left."""
    asking: list[QueueLoad] = []
    for q in queues:
        q.ideal = q.guaranteed if q.used > q.guaranteed + EPS else q.used
        unassigned -= q.ideal
        if q.ideal < q.used + q.pending - EPS:
            asking.append(q)
    while asking and unassigned > EPS:
        total_guarantee = sum(q.guaranteed for q in asking)
        for q in asking:
            share = q.guaranteed / total_guarantee if total_guarantee > 0 else 0.0
            q.normalized = 1.0 / len(asking) if equal else share
        asking.sort(key=_pct_of_guaranteed)  # stable: ties keep their order
        head = _pct_of_guaranteed(asking[0])
        served = [q for q in asking if _pct_of_guaranteed(q) == head]
        rest = [q for q in asking if _pct_of_guaranteed(q) != head]
        assigned = 0.0
        for q in served:
            done = _offer(q, _round_step(unassigned * q.normalized, step))
            if done > EPS:
                rest.append(q)
            assigned += done
        unassigned -= assigned
        asking = rest
    return unassigned


def ideal_assignment(root: QueueLoad, cluster: float, step: float = 0.0) -> None:
    """Set every queue's ``ideal`` under ``root`` (whose ideal is the ``cluster``)."""
    root.ideal = cluster
    _share(root, step)


def _share(parent: QueueLoad, step: float) -> None:
    if not parent.children:
        return
    guaranteed = [q for q in parent.children if q.guaranteed > EPS]
    zero = [q for q in parent.children if q.guaranteed <= EPS]
    left = _fixpoint(guaranteed, parent.ideal, step, False)
    if zero:
        if left > EPS:
            _fixpoint(zero, left, step, True)
        else:
            for q in zero:  # nothing left for them: they keep nothing
                q.ideal = 0.0
    for q in parent.children:
        _share(q, step)


def to_obtain(
    root: QueueLoad, cluster: float, params: PreemptionParams, step: float = 0.0
) -> dict[str, float]:
    """Per leaf, what one round asks it to give back (module docstring): zero for most."""
    ideal_assignment(root, cluster, step)
    allowed = cluster * params.total_preemption_per_round
    scale: dict[str, float] = {}
    _scales(root, allowed, scale)
    out: dict[str, float] = {}
    for q in root.leaves():
        over = q.used > q.guaranteed * (1 + params.max_ignored_over_capacity) + EPS
        give = max(q.used - q.ideal, 0.0) * scale[q.name]
        out[q.name] = give * params.natural_termination_factor if over else 0.0
    return out


def _scales(parent: QueueLoad, allowed: float, out: dict[str, float]) -> None:
    """Per queue, the scaling factor of its level (``computeIdealResourceDistribution``)."""
    kids = parent.children
    needed = sum(max(q.used - q.ideal, 0.0) for q in kids)
    factor = allowed / needed if needed > allowed + EPS else 1.0
    for q in kids:
        out[q.name] = factor
        _scales(q, allowed, out)


@dataclass(frozen=True, slots=True)
class Running:
    """A live container as victim selection sees it."""

    container_id: str
    queue: str
    #: Its application's submission order.
    app_seq: int
    priority: int
    #: When it was allocated (the later, the newer).
    start_s: float
    #: Its size, in the unit of ``to_obtain``.
    size: float
    is_am: bool = False


def select_victims(
    obtain: Mapping[str, float], running: Iterable[Running], budget: float
) -> list[str]:
    """The containers one round selects (module docstring), in the order taken."""
    by_queue: dict[str, list[Running]] = {}
    for r in running:
        if not r.is_am and obtain.get(r.queue, 0.0) > EPS:
            by_queue.setdefault(r.queue, []).append(r)
    out: list[str] = []
    for queue in sorted(by_queue):
        need = obtain[queue]
        order = sorted(
            by_queue[queue], key=lambda r: (-r.app_seq, -r.priority, -r.start_s, r.container_id)
        )
        for r in order:
            if need <= EPS:
                break
            if r.size > budget + EPS:
                continue
            out.append(r.container_id)
            need -= r.size
            budget -= r.size
    return out


@dataclass(slots=True)
class Marks:
    """When each selected container was first selected (``preempted`` in YARN's policy)."""

    since: dict[str, float] = field(default_factory=dict)

    def kills(self, selected: Iterable[str], now: float, wait_s: float) -> list[str]:
        """Mark ``selected`` (those new to it at ``now``), forget marks older than twice
        the wait (``cleanupStaledPreemptionCandidates``), and return the selected ones
        marked at least ``wait_s`` ago: to kill now."""
        for cid in [c for c, first in self.since.items() if first + 2 * wait_s < now - EPS]:
            del self.since[cid]
        out = []
        for cid in selected:
            first = self.since.setdefault(cid, now)
            if now - first >= wait_s - EPS:
                out.append(cid)
                del self.since[cid]
        return out


def _load_tree(
    q: QueueView,
    cluster: ClusterView,
    usage: Callable[[Resources, Resources], float],
    pending: Mapping[str, float],
) -> QueueLoad:
    if not q.children:
        used = usage(q.used, cluster.capacity)
        return QueueLoad(q.name, q.abs_capacity, q.abs_max_capacity, used, pending.get(q.name, 0.0))
    kids = [_load_tree(c, cluster, usage, pending) for c in q.children]
    return QueueLoad.parent(q.name, q.abs_capacity, q.abs_max_capacity, kids)


def monitor_round(
    cluster: ClusterView,
    held: Iterable[tuple[Container, float]],
    usage: Callable[[Resources, Resources], float],
    params: PreemptionParams,
    pending: Mapping[str, float] | None = None,
    step: float = 0.0,
) -> list[str]:
    """The containers one round of the monitor selects in ``cluster`` (as fractions of
    it, by ``usage``): ``held``, the live containers and when each started; ``pending``,
    what each leaf asks for (None: its applications' demand)."""
    cap = cluster.capacity
    if pending is None:
        asked: dict[str, float] = {}
        for app in cluster.pending_apps():
            asked[app.queue] = asked.get(app.queue, 0.0) + usage(app.demand, cap)
        pending = asked
    root = _load_tree(cluster.root_queue, cluster, usage, pending)
    obtain = to_obtain(root, 1.0, params, step)
    apps = cluster.apps
    running = [
        Running(
            c.container_id,
            apps[c.app_id].queue,
            apps[c.app_id].seq,
            c.priority,
            start,
            usage(c.resources, cap),
            c.priority == AM_PRIORITY,
        )
        for c, start in held
        if c.app_id in apps
    ]
    return select_victims(obtain, running, params.total_preemption_per_round)

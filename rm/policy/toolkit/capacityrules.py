"""A CapacityScheduler leaf's own limits (``LeafQueue``, ``UsersManager``), as the
``capacity`` policy applies them when a leaf's ``QueueSpec`` sets any of them.

Quantities are scalars in the policy's resource calculator (memory, or dominant share),
as a fraction of the cluster; ``step`` is the minimum allocation in that unit (YARN's
``yarn.scheduler.minimum-allocation-*``, 1024 MB and 1 vcore by default).

- User limit (``UsersManager.computeUserLimit``): with ``capacity`` the leaf's guarantee
  (at least ``step``) and ``required = step``, ``current = capacity`` while the leaf uses
  less than it, else ``used + required``; ``limit = max(ceil((active users' usage +
  required) / active users), ceil(current x minimum-user-limit-percent / 100))``, capped
  at ``capacity x user-limit-factor`` and rounded up to ``step``. A user whose usage in
  the leaf is *more than* its limit gets nothing (so a user may go one container past
  it). Active users: those with something pending in the leaf (at least one counted).
- AM limit (``LeafQueue.activateApplications``): the leaf's applications are activated
  in submission order while their AMs fit in ``capacity x maximum-am-resource-percent``
  (rounded up to ``step``); the first is always activated. An application not active
  waits (pending); only active ones are served and their demand counted by the monitor.
- Ordering (``ordering-policy``): ``fifo`` serves a leaf's applications in submission
  order; ``fair`` (``FairOrderingPolicy``) the one using least first, then submission
  order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from rm.policy.base import Placement
from rm.policy.toolkit.queuetree import _serve_tree
from rm.policy.views import AppView, ClusterView, NodeView, QueueView
from treadle.messages import Ask
from treadle.model import QueueSpec
from treadle.resources import Resources

EPS = 1e-9
#: An AM container's priority (``rm.core.state.AM_PRIORITY``).
AM_PRIORITY = -1


def ceil_step(x: float, step: float) -> float:
    """``x`` rounded up to a multiple of ``step`` (``Resources.roundUp``)."""
    return math.ceil(x / step - EPS) * step if step > 0 else x


def user_limit(
    capacity: float,
    used: float,
    active_users: int,
    active_usage: float,
    minimum_user_limit_percent: float = 100.0,
    user_limit_factor: float = 1.0,
    step: float = 0.0,
) -> float:
    """A user's limit in a leaf (module docstring): ``capacity`` the leaf's guarantee,
    ``used`` its usage, ``active_usage`` what its active users use, ``step`` the minimum
    allocation (also the ``required`` of Hadoop's formula)."""
    capacity = max(capacity, step)  # a queue smaller than one container still progresses
    consumed = ceil_step(used, step)
    current = capacity if consumed < capacity - EPS else consumed + step
    users = max(active_users, 1)
    limit = max(
        ceil_step((active_usage + step) / users, step),
        ceil_step(current * minimum_user_limit_percent / 100.0, step),
    )
    return ceil_step(min(limit, capacity * user_limit_factor), step)


def may_assign_to_user(user_used: float, limit: float) -> bool:
    """``LeafQueue.canAssignToUser``: unless the user already holds *more* than its limit."""
    return user_used <= limit + EPS


def am_limit(capacity: float, am_percent: float, step: float) -> float:
    """What a leaf's AMs may hold (module docstring)."""
    return ceil_step(capacity * am_percent, step)


def activate(
    waiting: Iterable[tuple[str, float]], active_am: float, active: int, limit: float
) -> list[str]:
    """The waiting applications (id, AM size; in submission order) to activate, given the
    AMs already active (their total, their count) and the limit."""
    out = []
    for app_id, size in waiting:
        if active_am + size > limit + EPS and active > 0:
            break
        out.append(app_id)
        active_am += size
        active += 1
    return out


def has_rules(spec: QueueSpec | None) -> bool:
    """Whether a leaf's spec sets any of the limits of this module."""
    return spec is not None and any(
        v is not None
        for v in (
            spec.user_limit_factor,
            spec.minimum_user_limit_percent,
            spec.maximum_am_resource_percent,
            spec.ordering_policy,
        )
    )


def spec_of(q: QueueView) -> QueueSpec | None:
    return getattr(q, "spec", None)


@dataclass
class LeafRules:
    """A heartbeat's walk under the leaf limits: the queue order of ``group_key``, the
    leaf's applications by its ordering, each one's user and AM limits checked."""

    usage: Callable[[Resources, Resources], float]
    step: float
    am_size: Resources

    def __post_init__(self) -> None:
        self.active: set[str] = set()

    def am_of(self, app: AppView) -> Resources:
        ask = app.asks.get(AM_PRIORITY)
        return ask.resources if ask is not None else self.am_size

    def activate_waiting(self, cluster: ClusterView) -> None:
        """Activate what each leaf's AM limit lets in (``activate``); drop ended apps."""
        apps = cluster.apps
        self.active &= apps.keys()
        by_leaf: dict[str, list[AppView]] = {}
        for app in apps.values():
            by_leaf.setdefault(app.queue, []).append(app)
        cap = cluster.capacity
        for leaf, members in by_leaf.items():
            q = cluster.queues.get(leaf)
            spec = spec_of(q) if q is not None else None
            pct = spec.maximum_am_resource_percent if spec is not None else None
            if q is None or pct is None:
                self.active.update(a.app_id for a in members)
                continue
            on = [a for a in members if a.app_id in self.active]
            used = sum(self.usage(self.am_of(a), cap) for a in on)
            limit = am_limit(q.abs_capacity, pct, self.step)
            waiting = [
                (a.app_id, self.usage(self.am_of(a), cap))
                for a in members
                if a.app_id not in self.active
            ]
            self.active.update(activate(waiting, used, len(on), limit))

    def monitor_pending(self, cluster: ClusterView) -> dict[str, float]:
        """What each leaf asks for as the preemption monitor counts it (YARN's
        ``getTotalPendingResourcesConsideringUserLimit``): the demand of its active
        applications, each user's capped at what its user limit leaves it."""
        self.activate_waiting(cluster)
        cap, queues = cluster.capacity, cluster.queues
        by_leaf: dict[str, list[AppView]] = {}
        for app in cluster.pending_apps():
            if app.app_id in self.active and app.queue in queues:
                by_leaf.setdefault(app.queue, []).append(app)
        users = _user_usage(cluster, self.usage)
        out: dict[str, float] = {}
        for leaf, apps in by_leaf.items():
            q = queues[leaf]
            demand: dict[str, float] = {}
            for app in apps:
                demand[app.user] = demand.get(app.user, 0.0) + self.usage(app.demand, cap)
            spec = spec_of(q)
            if spec is not None and _limits_users(spec):
                limit = self._limit(q, spec, users, set(demand), cluster)
                demand = {
                    u: min(d, max(limit - users.get((leaf, u), 0.0), 0.0))
                    for u, d in demand.items()
                }
            out[leaf] = sum(demand.values())
        return out

    def walk(
        self,
        node: NodeView,
        cluster: ClusterView,
        group_key: Callable[[str, ClusterView], object],
        fits: Callable[[Resources, str, NodeView, ClusterView], bool],
    ) -> Iterator[Placement]:
        self.activate_waiting(cluster)
        queues, cap = cluster.queues, cluster.capacity
        waiting: dict[str, list[AppView]] = {}
        for app in cluster.pending_apps():
            q = queues.get(app.queue)
            if app.app_id in self.active and q is not None and q.is_leaf:
                waiting.setdefault(app.queue, []).append(app)
        if not waiting:
            return
        users = _user_usage(cluster, self.usage)
        live = _ancestors(queues, waiting)

        def children(name: str | None) -> list[tuple[int, str]]:
            if name is None:
                return [(0, cluster.root_queue.name)]
            return [(i, c.name) for i, c in enumerate(queues[name].children) if c.name in live]

        def pick(leaf: str, path: list[str]) -> tuple[AppView, Ask] | None:
            spec = spec_of(queues[leaf])
            for app in _ordered(waiting[leaf], spec, cap, self.usage):
                for ask in app.sorted_asks():
                    if fits(ask.resources, leaf, node, cluster) and self._user_may(
                        app, queues[leaf], spec, users, cluster, waiting[leaf]
                    ):
                        return app, ask
            return None

        def placed(app: AppView, path: list[str]) -> None:
            users.clear()
            users.update(_user_usage(cluster, self.usage))

        yield from _serve_tree(
            children, group_key, cluster, lambda n: queues[n].is_leaf, pick, placed
        )

    def _limit(
        self,
        q: QueueView,
        spec: QueueSpec,
        users: Mapping[tuple[str, str], float],
        active: set[str],
        cluster: ClusterView,
    ) -> float:
        """The user limit of leaf ``q`` now (``user_limit``), ``active`` its active users."""
        return user_limit(
            q.abs_capacity,
            self.usage(q.used, cluster.capacity),
            len(active),
            sum(users.get((q.name, u), 0.0) for u in active),
            spec.minimum_user_limit_percent or 100.0,
            spec.user_limit_factor or 1.0,
            self.step,
        )

    def _user_may(
        self,
        app: AppView,
        q: QueueView,
        spec: QueueSpec | None,
        users: Mapping[tuple[str, str], float],
        cluster: ClusterView,
        waiting: list[AppView],
    ) -> bool:
        if spec is None or not _limits_users(spec):
            return True
        limit = self._limit(q, spec, users, {a.user for a in waiting}, cluster)
        return may_assign_to_user(users.get((q.name, app.user), 0.0), limit)


def _limits_users(spec: QueueSpec) -> bool:
    return spec.user_limit_factor is not None or spec.minimum_user_limit_percent is not None


def _user_usage(
    cluster: ClusterView, usage: Callable[[Resources, Resources], float]
) -> dict[tuple[str, str], float]:
    """Per (leaf, user), what the user's applications there hold."""
    out: dict[tuple[str, str], float] = {}
    cap = cluster.capacity
    for app in cluster.apps.values():
        key = (app.queue, app.user)
        out[key] = out.get(key, 0.0) + usage(app.allocated, cap)
    return out


def _ancestors(queues: Mapping[str, QueueView], leaves: Iterable[str]) -> set[str]:
    live: set[str] = set()
    for name in leaves:
        q: QueueView | None = queues[name]
        while q is not None and q.name not in live:
            live.add(q.name)
            q = q.parent
    return live


def _ordered(
    apps: list[AppView],
    spec: QueueSpec | None,
    cap: Resources,
    usage: Callable[[Resources, Resources], float],
) -> list[AppView]:
    """A leaf's applications in its ordering policy's order (module docstring)."""
    if spec is not None and spec.ordering_policy == "fair":
        return sorted(apps, key=lambda a: (usage(a.allocated, cap), a.seq))
    return apps

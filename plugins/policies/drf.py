"""drf: weighted dominant resource fairness (Ghodsi et al., NSDI 2011).

On a heartbeat, repeatedly pick the entity (user, or job with ``across=jobs``) with the
lowest dominant share / weight that has an ask fitting the node, place one container of it
and update its share; an entity with nothing that fits is dropped until the next heartbeat.
A user's weight is ``ClusterView.users[...].weight``, a job's is 1; within a user, jobs are
served in submission order; ties go to the entity with the earliest pending job. A heap
keeps each placement O(log entities).

``shares()``: each application's DRF entitlement, by progressive filling of the cluster
across entities with running jobs: every entity grows along its own demand vector (used +
asked for) at the rate of its weight in dominant share, until it gets all it asks for or a
resource it needs is exhausted. A user's entitlement is split among its jobs in submission
order (each takes as much of its own demand as still fits). O(n log n + n x resource kinds);
recomputed at most every ``update_interval_s`` (0: on every change) and when an
application is added.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rm.policy import (
    AppView,
    ClusterView,
    NodeView,
    Placement,
    Policy,
    SharesCache,
    first_fit_ask,
)
from treadle.resources import Resources, total


class DrfParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    across: Literal["users", "jobs"] = "users"
    #: Recompute shares at most this often (YARN's update thread: 500 ms); 0: on every change.
    update_interval_s: float = Field(0.5, ge=0.0)


def progressive_fill(cap: Resources, demands: list[Resources], weights: list[float]) -> list[float]:
    """Weighted DRF progressive filling: the dominant share each demand vector reaches."""
    n = len(demands)
    dom = [d.dominant_share(cap) for d in demands]
    # Consumption of each resource per unit of dominant share.
    unit = [{k: d[k] / dom[i] for k in cap if d[k]} for i, d in enumerate(demands)]
    fixed = dict.fromkeys(cap, 0.0)  # held by frozen entities
    slope = dict.fromkeys(cap, 0.0)  # growth per unit of the fill level
    users = dict.fromkeys(cap, 0)  # active entities needing each resource
    for i in range(n):
        for k, v in unit[i].items():
            slope[k] += weights[i] * v
            users[k] += 1
    share = [0.0] * n
    done = [False] * n

    def freeze(i: int, s: float) -> None:
        share[i], done[i] = s, True
        for k, v in unit[i].items():
            fixed[k] += s * v
            slope[k] -= weights[i] * v
            users[k] -= 1

    order = sorted(range(n), key=lambda i: dom[i] / weights[i])
    p, active = 0, n
    while active:
        while done[order[p]]:
            p += 1
        i = order[p]
        level, sat = dom[i] / weights[i], ""  # next event: entity i gets all it asks for ...
        for k in cap:  # ... unless a resource runs out first
            if users[k] and slope[k] > 0 and (cap[k] - fixed[k]) / slope[k] < level:
                level, sat = max(0.0, (cap[k] - fixed[k]) / slope[k]), k
        frozen = [j for j in range(n) if not done[j] and sat in unit[j]] if sat else [i]
        for j in frozen:
            freeze(j, min(dom[j], level * weights[j]))
        active -= len(frozen)
    return share


class DrfPolicy(Policy):
    description = "weighted dominant resource fairness across users or jobs"
    Params = DrfParams

    def entity(self, app: AppView) -> str:
        return app.user if self.params.across == "users" else app.app_id

    def weight(self, name: str, cluster: ClusterView) -> float:
        user = cluster.users.get(name) if self.params.across == "users" else None
        w = user.weight if user is not None else 1.0
        return w if w > 0 else 1e-12

    def key(self, name: str, cluster: ClusterView) -> float:
        if self.params.across == "users":
            used = cluster.users[name].used
        else:
            used = cluster.apps[name].allocated
        return used.dominant_share(cluster.capacity) / self.weight(name, cluster)

    def __init__(self, params: BaseModel | None = None) -> None:
        super().__init__(params)
        self._shares_cache = SharesCache(self.params.update_interval_s)

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        jobs: dict[str, list[AppView]] = {}  # per entity, latest first (pop() drops the head)
        for app in reversed(cluster.pending_apps()):
            jobs.setdefault(self.entity(app), []).append(app)
        heap = [(self.key(name, cluster), apps[-1].seq, name) for name, apps in jobs.items()]
        heapq.heapify(heap)
        while heap:
            _, first, name = heapq.heappop(heap)
            found = _next_fit(jobs[name], node)
            if found is None:
                continue  # nothing of this entity fits this node any more
            yield found
            heapq.heappush(heap, (self.key(name, cluster), first, name))

    def on_app_added(self, app: AppView, cluster: ClusterView) -> None:
        self._shares_cache.invalidate()

    def shares(self, cluster: ClusterView) -> Mapping[str, Resources]:
        """Cached for ``update_interval_s`` or until an application is added."""
        return self._shares_cache.get(cluster.now, lambda: self.entitlements(cluster))

    def entitlements(self, cluster: ClusterView) -> dict[str, Resources]:
        cap = cluster.capacity
        groups: dict[str, list[tuple[AppView, Resources]]] = {}
        for app in cluster.apps.values():  # submission order
            d = app.allocated + app.demand
            if d.dominant_share(cap) > 0:
                groups.setdefault(self.entity(app), []).append((app, d))
        names = list(groups)
        demands = [total([d for _, d in groups[n]]) for n in names]
        weights = [self.weight(n, cluster) for n in names]
        out: dict[str, Resources] = {}
        for name, d, s in zip(names, demands, progressive_fill(cap, demands, weights), strict=True):
            rest = d * (s / d.dominant_share(cap))
            if len(groups[name]) == 1:
                out[groups[name][0][0].app_id] = rest
                continue
            for app, want in groups[name]:  # submission order within the entity
                frac = min((rest[k] / want[k] for k in want if cap[k]), default=0.0)
                out[app.app_id] = give = want * max(0.0, min(1.0, frac))
                rest = rest - give
        return out


def _next_fit(apps: list[AppView], node: NodeView) -> Placement | None:
    """The first job (submission order) with an ask that fits; drops jobs with none (the
    node's free resources only shrink during a heartbeat)."""
    while apps:
        ask = first_fit_ask(apps[-1], node.free)
        if ask is not None:
            return Placement(apps[-1].app_id, ask.priority)
        apps.pop()
    return None

"""drf: weighted dominant resource fairness (Ghodsi et al., NSDI 2011).

On a heartbeat, repeatedly pick the entity (user, or job with ``across=jobs``) with the
lowest dominant share / weight that has an ask fitting the node, place one container of it
and update its share; an entity with nothing that fits is dropped until the next heartbeat.
A user's weight is ``ClusterView.users[...].weight``, a job's is 1; within a user, jobs are
served in submission order; ties go to the entity with the earliest pending job. A heap
keeps each placement O(log entities).

``shares()``: each application's DRF entitlement, by progressive filling of the cluster
across entities with running jobs (``rm.policy.drf_entitlements``): every entity grows
along its own demand vector (used + asked for) at the rate of its weight in dominant share,
until it gets all it asks for or a resource it needs is exhausted. A user's entitlement is
split among its jobs in submission order (each takes as much of its own demand as still
fits). O(n log n + n x resource kinds); recomputed at most every ``update_interval_s`` (0:
on every change) and when an application is added.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rm.policy import AppView, CachedShares, ClusterView, QueueTreePolicy, drf_entitlements
from treadle.resources import Resources


class DrfParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    across: Literal["users", "jobs"] = "users"
    #: Recompute shares at most this often (YARN's update thread: 500 ms); 0: on every change.
    update_interval_s: float = Field(0.5, ge=0.0)


class DrfPolicy(CachedShares[DrfParams], QueueTreePolicy[DrfParams]):
    description = "weighted dominant resource fairness across users or jobs"
    flat = True  # the "queues" are the users (or jobs), jobs within them in submission order

    def leaf_of(self, app: AppView) -> str:
        return app.user if self.params.across == "users" else app.app_id

    def weight(self, name: str, cluster: ClusterView) -> float:
        user = cluster.users.get(name) if self.params.across == "users" else None
        w = user.weight if user is not None else 1.0
        return w if w > 0 else 1e-12

    def group_key(self, name: str, cluster: ClusterView) -> float:
        if self.params.across == "users":
            used = cluster.users[name].used
        else:
            used = cluster.apps[name].allocated
        return used.dominant_share(cluster.capacity) / self.weight(name, cluster)

    def shares_interval_s(self) -> float:
        return self.params.update_interval_s

    def compute_shares(self, cluster: ClusterView) -> dict[str, Resources]:
        return drf_entitlements(cluster, self.leaf_of, lambda name: self.weight(name, cluster))

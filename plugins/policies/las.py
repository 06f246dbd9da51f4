"""las: Least Attained Service on GS's queues (spec A1.4 item 3; the SLearn paper's LAS
baseline, after Kairos).

No estimate: a new job enters the top queue; its attained service is the run time of its
tasks so far (finished containers' run times plus, for live ones, the time since they
were allocated); at each scheduling decision a job whose attained service reached a
lower queue's range moves there (demotion only, never back). Queues, weights, FIFO inside
a queue and the sharing rule are ``gs``'s (``rm.policy.toolkit.multiqueue``), with the same
layout (the sampling position stays empty). Running tasks are never preempted.

Demotions are found without a walk over every job: a job is looked at again when its
containers change, and otherwise when its attained service (growing by its live
containers each second) is due to reach the next queue's range (a heap of those times).
"""

from __future__ import annotations

import heapq
import math

from rm.policy import AppView, ClusterView
from rm.policy.toolkit.multiqueue import PLACED, MultiQueue, QueueJob, QueueParams
from treadle.messages import Container, ContainerStatus


class LasParams(QueueParams):
    pass


class LasPolicy(MultiQueue[LasParams]):
    description = "least attained service: jobs demoted through GS's queues as they run"

    def __init__(self, params: LasParams | None = None) -> None:
        super().__init__(params)
        self._order: dict[str, int] = {}  # app id -> when it was added (the walk's order)
        self._due: list[tuple[float, int, str]] = []  # (check at, version, app id)
        self._version: dict[str, int] = {}  # the heap entry of each job that is current
        self._versions = 0
        self._check: set[str] = set()  # jobs whose containers changed
        self._next_s = _next_boundaries(self)

    def on_app_added(self, app: AppView, cluster: ClusterView) -> None:
        job = self.jobs[app.app_id] = QueueJob(app)
        self._order[app.app_id] = len(self._order)
        job.phase = PLACED
        self._enter(job, 0, cluster.now)
        self._check.add(app.app_id)

    def on_container_allocated(self, container: Container, cluster: ClusterView) -> None:
        super().on_container_allocated(container, cluster)
        self._check.add(container.app_id)

    def on_container_finished(
        self, container: Container, status: ContainerStatus, cluster: ClusterView
    ) -> None:
        super().on_container_finished(container, status, cluster)
        self._check.add(container.app_id)

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        super().on_app_removed(app, cluster)
        self._version.pop(app.app_id, None)
        self._check.discard(app.app_id)

    def attained_s(self, app_id: str, now: float) -> float:
        job = self.jobs[app_id]
        return job.ran_s + len(job.cids) * now - job.starts

    def _refresh(self, cluster: ClusterView) -> None:
        """Demote every job whose attained service reached a lower queue's range, in the
        order the jobs were added."""
        now = cluster.now
        due, version = self._due, self._version
        check = self._check
        while due and due[0][0] <= now:
            _, v, app_id = heapq.heappop(due)
            if version.get(app_id) == v:
                check.add(app_id)
        if not check:
            return
        jobs, order, layout = self.jobs, self._order, self.layout
        for app_id in sorted(check, key=order.__getitem__):
            job = jobs.get(app_id)
            if job is None:
                continue
            live = len(job.cids)
            position = layout.position(job.ran_s + live * now - job.starts)
            if position > job.position:
                self._enter(job, position, now)
            self._versions += 1
            version[app_id] = self._versions
            bound = self._next_s[job.position]
            if live and bound < math.inf:
                # The time its attained service reaches ``bound``, a little early (rounding).
                t = (bound - job.ran_s + job.starts) / live
                t -= 1e-9 * (1.0 + abs(t) + (abs(job.ran_s) + abs(job.starts) + bound) / live)
                heapq.heappush(due, (t, self._versions, app_id))
        check.clear()
        if len(due) > 2 * len(version) + 64:  # drop the entries of changed jobs
            self._due = [e for e in due if version.get(e[2]) == e[1]]
            heapq.heapify(self._due)


def _next_boundaries(policy: LasPolicy) -> list[float]:
    """Per position, the least attained service of a later position (inf: none)."""
    layout = policy.layout
    p = layout.p
    out = [math.inf] * layout.positions
    hi = p.q0_hi_s
    for _ in range(layout.ranges - 1):  # ``runtime_range``'s bounds, computed as it does
        after = layout.position(hi)  # the position of sizes from ``hi`` on
        for k in range(after):
            out[k] = min(out[k], hi)
        hi *= p.growth
    return out

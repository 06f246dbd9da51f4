"""las: Least Attained Service on GS's queues (spec A1.4 item 3; the SLearn paper's LAS
baseline, after Kairos).

No estimate: a new job enters the top queue; its attained service is the run time of its
tasks so far (finished containers' run times plus, for live ones, the time since they
were allocated); at each scheduling decision a job whose attained service reached a
lower queue's range moves there (demotion only, never back). Queues, weights, FIFO inside
a queue and the sharing rule are ``gs``'s (``rm.policy.multiqueue``), with the same
layout (the sampling position stays empty). Running tasks are never preempted.
"""

from __future__ import annotations

from rm.policy import AppView, ClusterView
from rm.policy.multiqueue import PLACED, MultiQueue, QueueJob, QueueParams


class LasParams(QueueParams):
    pass


class LasPolicy(MultiQueue[LasParams]):
    description = "least attained service: jobs demoted through GS's queues as they run"

    def on_app_added(self, app: AppView, cluster: ClusterView) -> None:
        job = self.jobs[app.app_id] = QueueJob(app)
        job.phase = PLACED
        self._enter(job, 0, cluster.now)

    def attained_s(self, app_id: str, now: float) -> float:
        job = self.jobs[app_id]
        return job.ran_s + len(job.cids) * now - job.starts

    def _refresh(self, cluster: ClusterView) -> None:
        now = cluster.now
        layout = self.layout
        for job in self.jobs.values():
            position = layout.position(job.ran_s + len(job.cids) * now - job.starts)
            if position > job.position:
                self._enter(job, position, now)

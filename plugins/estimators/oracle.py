"""oracle: the true size, from the submitted job's task durations (or, without a job, the
AM's remaining-work hint). Declares ``oracle``: the RM shows it true durations."""

from __future__ import annotations

from rm.policy import AppView, ClusterView
from rm.policy.estimator import Estimator


class OracleEstimator(Estimator):
    description = "exact job size (sum of task durations), from the job the client submitted"
    oracle = True

    def size_s(self, app: AppView, cluster: ClusterView) -> float | None:
        job = app.job
        if job is not None:
            return job.work_s
        asks = app.asks.values()
        return max((a.remaining_work for a in asks), default=0.0) if asks else None

    def remaining_s(self, app: AppView, cluster: ClusterView) -> float:
        return max((a.remaining_work for a in app.asks.values()), default=0.0)

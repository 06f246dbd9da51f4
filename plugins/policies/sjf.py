"""sjf: shortest job first by estimated duration (the Carbyne paper's SJF baseline).

A job's duration is the critical-path length of its stage DAG (``treadle.dag``, CPM), each
stage taking the mean of its tasks' durations from the submitted job (what an oracle
knows); computed once when the application is added. When the client sent no job, the
AM's remaining-work hint stands in (``Ask.remaining_work``, read at each heartbeat). Jobs
are served shortest first, ties by submission order, each filled before the next.
"""

from __future__ import annotations

from rm.policy import AppView, ClusterView, NoParams, OrderingPolicy
from treadle.dag import critical_path_s


class SjfPolicy(OrderingPolicy[NoParams]):
    description = "shortest job first (critical-path length of the DAG)"
    oracle = True  # critical paths of the submitted job
    resort = False

    def __init__(self, params: NoParams | None = None) -> None:
        super().__init__(params)
        self._estimate: dict[str, float] = {}

    def on_app_added(self, app: AppView, cluster: ClusterView) -> None:
        if app.job is not None:
            self._estimate[app.app_id] = critical_path_s(app.job)

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        self._estimate.pop(app.app_id, None)

    def sort_key(self, app: AppView, cluster: ClusterView) -> tuple[float, int]:
        est = self._estimate.get(app.app_id)
        if est is None:
            est = max((a.remaining_work for a in app.asks.values()), default=0.0)
        return (est, app.seq)

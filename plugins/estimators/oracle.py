"""oracle: the true remaining work, as the AM declares it in its asks."""

from __future__ import annotations

from rm.estimator import Estimator
from rm.policy import AppView, ClusterView


class OracleEstimator(Estimator):
    description = "exact remaining work, from the AM's own knowledge of its tasks"

    def remaining_s(self, app: AppView, cluster: ClusterView) -> float:
        return max((a.remaining_work for a in app.asks.values()), default=0.0)

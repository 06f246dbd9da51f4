"""ujf: user-job fairness as the UWFQ authors ran it (a Spark FAIR pool per user).

The user with the fewest running tasks first (ties by user name), then, inside the user,
the stage with the fewest running tasks (ties by Spark's ``TaskSet_<stageId>.0`` name as a
string, ``tie=name``, or submission order, ``tie=submit``): all task sets of the first
user, then the next user's, and so on. ``level=job`` orders a user's applications by their
running tasks instead of stages (the "then job with fewest" reading). ``offer`` as in
spark-fair: ``slot`` recomputes the order after every placement, ``node`` once per node
heartbeat.
"""

from __future__ import annotations

from collections.abc import Sequence

from rm.policy import (
    AppView,
    ClusterView,
    SparkOrderParams,
    SparkStageIds,
    StageOrderingPolicy,
    TaskSet,
)
from treadle.messages import Container


class UjfPolicy(StageOrderingPolicy[SparkOrderParams]):
    description = "user-job fairness: user, then stage, with the fewest running tasks first"

    def __init__(self, params: SparkOrderParams | None = None) -> None:
        super().__init__(params)
        self._stage_ids = SparkStageIds()
        self._user_running: dict[str, int] = {}  # this heartbeat

    def resorts(self) -> bool:
        return self.params.offer == "slot"

    def on_app_added(self, app: AppView, cluster: ClusterView) -> None:
        self._stage_ids.added(app)

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        self._stage_ids.removed(app)

    def prepare(self, sets: Sequence[TaskSet], cluster: ClusterView) -> None:
        running: dict[str, int] = {}
        for app in cluster.apps.values():
            running[app.user] = running.get(app.user, 0) + app.running
        self._user_running = running

    def on_container_allocated(self, container: Container, cluster: ClusterView) -> None:
        app = cluster.apps.get(container.app_id)
        if app is not None:
            self._user_running[app.user] = self._user_running.get(app.user, 0) + 1

    def stage_key(self, ts: TaskSet, cluster: ClusterView) -> tuple[int, str, int, str | int, int]:
        app = ts.app
        user = (self._user_running.get(app.user, 0), app.user)
        return (*user, *self._stage_ids.fair_key(ts, self.params.level, self.params.tie))

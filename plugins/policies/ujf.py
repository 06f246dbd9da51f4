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
        self._user_running: dict[str, int] = {}
        self._app_running: dict[str, int] = {}  # what _user_running counts per application

    def resorts(self) -> bool:
        return self.params.offer == "slot"

    def keys_follow_app(self) -> bool:
        return self.params.level == "job"  # the application's running tasks

    def on_app_added(self, app: AppView, cluster: ClusterView) -> None:
        self._stage_ids.added(app)

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        self._stage_ids.removed(app)

    def changed(
        self, apps: Sequence[AppView] | None, sets: Sequence[TaskSet], cluster: ClusterView
    ) -> None:
        """Keep each user's running tasks (over its running applications) current."""
        users, counted = self._user_running, self._app_running
        if apps is None:
            users.clear()
            counted.clear()
            apps = list(cluster.apps.values())
        live = cluster.apps
        for app in apps:
            app_id = app.app_id
            running = app.running if app_id in live else 0
            delta = running - counted.get(app_id, 0)
            if delta:
                users[app.user] = users.get(app.user, 0) + delta
            if running:
                counted[app_id] = running
            else:
                counted.pop(app_id, None)

    def on_container_allocated(self, container: Container, cluster: ClusterView) -> None:
        app = cluster.apps.get(container.app_id)
        if app is not None:
            self._user_running[app.user] = self._user_running.get(app.user, 0) + 1
            self._app_running[app.app_id] = self._app_running.get(app.app_id, 0) + 1

    def group_of(self, app: AppView) -> str:
        return app.user

    def group_key(self, name: str, cluster: ClusterView) -> tuple[int, str]:
        return (self._user_running.get(name, 0), name)

    def stage_key(self, ts: TaskSet, cluster: ClusterView) -> tuple[int, str | int, int]:
        return self._stage_ids.fair_key(ts, self.params.level, self.params.tie)

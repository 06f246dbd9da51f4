"""spark-fair: Spark's FAIR scheduling mode with one default pool, at stage level.

Every runnable stage (a task set) sits in one FAIR pool with min share 0 and weight 1, so
the rule is: the task set with the fewest running tasks first; ties go to Spark's name
``TaskSet_<stageId>.0`` compared as a string (``tie=name``; stage ids are numbered in
application submission order, then stage order, as Spark's DAG scheduler numbers them), or
to submission order (``tie=submit``). ``level=job`` counts an application's running tasks
instead of its stage's (the job-level reading). ``offer=slot`` (default) recomputes the
order after every placement; ``offer=node`` sorts once per node heartbeat and lets each
task set take every free slot of the node it can use (Spark's offer round).
"""

from __future__ import annotations

from rm.policy import (
    AppView,
    ClusterView,
    SparkOrderParams,
    SparkStageIds,
    StageOrderingPolicy,
    TaskSet,
)


class SparkFairPolicy(StageOrderingPolicy[SparkOrderParams]):
    description = "Spark FAIR, one pool: stage with the fewest running tasks first"

    def __init__(self, params: SparkOrderParams | None = None) -> None:
        super().__init__(params)
        self._stage_ids = SparkStageIds()

    def resorts(self) -> bool:
        return self.params.offer == "slot"

    def keys_follow_app(self) -> bool:
        return self.params.level == "job"  # the application's running tasks

    def on_app_added(self, app: AppView, cluster: ClusterView) -> None:
        self._stage_ids.added(app)

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        self._stage_ids.removed(app)

    def stage_key(self, ts: TaskSet, cluster: ClusterView) -> tuple[int, str | int, int]:
        return self._stage_ids.fair_key(ts, self.params.level, self.params.tie)

"""cfq: Cluster Fair Queuing, weighted fair queuing with virtual time over stages (the
UWFQ paper's CFQ baseline).

Every arrival (a stage becoming runnable, ``level=stage``; an application's submission,
``level=job``) at time t first advances the virtual time V: the virtually active entries
share the cluster's R vcores equally, so V grows at R / |active| per second, and an entry
leaves (in finish order) when V reaches its virtual finish F; V stands still while none
is active. The arrival then gets F = V(t) + S and joins the active set. S is the slot-time
(vcore-seconds: task durations x vcores, one slot for a task without vcores) of the stage
(``stage_size=stage``) or of its whole job (``stage_size=job``, what the authors' oracle
charged), times ``size_inflation``. Task sets are served smallest F first, equal F in
arrival order. F never changes; real completions do not touch V. Arrival times are the
RM's ``stage_runnable_s`` (exact), processed in time order at the heartbeat that first sees
the stage's asks; an arrival older than the last one processed counts at the latter.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from rm.policy import (
    AppView,
    ClusterView,
    StageOrderingPolicy,
    StageOrderParams,
    TaskSet,
    new_arrivals,
    slot_time,
)
from treadle.model import JobSpec


class CfqParams(StageOrderParams):
    level: Literal["stage", "job"] = "stage"
    stage_size: Literal["stage", "job"] = "stage"
    size_inflation: float = Field(1.0, gt=0.0, allow_inf_nan=False)


def job_slot_time(job: JobSpec) -> float:
    return sum(slot_time(s) for s in job.stages)


class VirtualClock:
    """CFQ's virtual time: arrivals must come in time order (older ones count as now)."""

    def __init__(self) -> None:
        self.v = 0.0
        self.t_prev: float | None = None
        self._active: list[float] = []  # virtual finish times (a heap)

    def advance(self, t: float, r: float) -> float:
        """V at ``t`` (never before the last arrival), retiring entries that finished."""
        t_prev = self.t_prev if self.t_prev is not None else t
        t = max(t, t_prev)
        active = self._active
        while active and r > 0:
            share = r / len(active)
            t_fin = t_prev + (active[0] - self.v) / share
            if t_fin > t:
                break
            self.v = max(self.v, active[0])
            t_prev = max(t_prev, t_fin)
            heapq.heappop(active)
        if active and r > 0:
            self.v += (t - t_prev) * r / len(active)
        self.t_prev = t
        return self.v

    def arrive(self, t: float, size: float, r: float) -> float:
        """An arrival of ``size`` at ``t``: its virtual finish F."""
        f = self.advance(t, r) + size
        heapq.heappush(self._active, f)
        return f

    @property
    def active(self) -> int:
        return len(self._active)


class CfqPolicy(StageOrderingPolicy[CfqParams]):
    description = "cluster fair queuing: virtual time over stages, smallest virtual finish first"
    oracle = True  # stage sizes from the submitted job's durations

    def __init__(self, params: CfqParams | None = None) -> None:
        super().__init__(params)
        self.clock = VirtualClock()
        #: Per application, stage (None: the job, level=job) -> (F, arrival order).
        self.finish: dict[str, dict[int | None, tuple[float, int]]] = {}
        self._arrivals = 0

    def _size(self, app: AppView, stage: int | None) -> float:
        job = app.job
        if job is None:
            return 0.0
        if stage is None or self.params.stage_size == "job" or not 0 <= stage < len(job.stages):
            s = job_slot_time(job)
        else:
            s = slot_time(job.stages[stage])
        return s * self.params.size_inflation

    def _arrive(self, app: AppView, stage: int | None, t: float, cluster: ClusterView) -> None:
        f = self.clock.arrive(t, self._size(app, stage), cluster.capacity["vcores"])
        self.finish.setdefault(app.app_id, {})[stage] = (f, self._arrivals)
        self._arrivals += 1

    def on_app_added(self, app: AppView, cluster: ClusterView) -> None:
        if self.params.level == "job":
            self._arrive(app, None, app.submit_s, cluster)

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        self.finish.pop(app.app_id, None)

    def changed(
        self, apps: Sequence[AppView] | None, sets: Sequence[TaskSet], cluster: ClusterView
    ) -> None:
        if self.params.level == "job":
            return
        for t, ts in new_arrivals(sets, self.finish, cluster):
            self._arrive(ts.app, ts.stage, t, cluster)

    def stage_key(self, ts: TaskSet, cluster: ClusterView) -> tuple[float, int]:
        per_app = self.finish.get(ts.app.app_id, {})
        entry = per_app.get(None if self.params.level == "job" else ts.stage)
        return entry if entry is not None else (0.0, -1)

"""uwfq: User Weighted Fair Queuing (the UWFQ paper's scheduler), two-level virtual time.

A simulated two-level GPS: active users share the cluster's R vcores by weight (global
virtual time V_g grows at R / sum of active weights per second), and a user's share is
split equally among its virtually active jobs (per-user virtual time V_u: UJF). A job of
slot-time S (vcore-seconds x ``size_inflation``) gets the user-virtual deadline
d = V_u + S at its arrival; the user's jobs, in (d, arrival) order, are chained from the
user's virtual arrival A: D_j = A + sum of S / w up to j, the global virtual deadline, and
the user's virtual end E is the last D. A job leaves when V_u reaches its d (A then moves
on by its S / w); a user leaves when V_g reaches E (users in E order, ties by name). A
returning user's new chain starts at the current V_g; a further stage of a job the user
already had, arriving within ``grace_resource_s`` x R of V_g past E, keeps the old A.

Deadlines are recomputed only when one of the user's stages arrives (another user's
arrival never moves them), for every stage of the user's virtually active jobs; a new
shorter job pushes back the later ones. Task sets are served smallest deadline first,
equal deadlines in stage arrival order. A stage that arrives after its job has left
virtually gets deadline 0 (``late_stages=first``, what the authors' code does) or its
job's last deadline (``job_deadline``). Real completions never feed back. User weights
come from the workload (``weights=false``: all 1). A job's first stages arrive at its
submission; later ones at the RM's ``stage_runnable_s`` (exact), in time order.
"""

from __future__ import annotations

import bisect
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


class UwfqParams(StageOrderParams):
    #: The grace period in seconds of the whole cluster (x R vcore-seconds): the paper's 2;
    #: the authors' code uses 1.5.
    grace_resource_s: float = Field(2.0, ge=0.0, allow_inf_nan=False)
    late_stages: Literal["first", "job_deadline"] = "first"
    size_inflation: float = Field(1.0, gt=0.0, allow_inf_nan=False)
    weights: bool = True


class VJob:
    __slots__ = ("active", "app_id", "d", "deadline", "seq", "size")

    def __init__(self, app_id: str, seq: int, size: float, d: float) -> None:
        self.app_id = app_id
        self.seq = seq
        self.size = size
        self.d = d  # user-virtual deadline
        self.deadline = 0.0  # global virtual deadline D
        self.active = True


class VUser:
    __slots__ = ("end", "jobs", "known", "name", "start", "v", "weight")

    def __init__(self, name: str, weight: float, v_g: float) -> None:
        self.name = name
        self.weight = weight
        self.v = 0.0  # V_u
        self.start = v_g  # A
        self.end = v_g  # E
        self.jobs: list[VJob] = []  # virtually active, by (d, seq)
        self.known: set[str] = set()


class TwoLevelClock:
    """The two-level virtual time. Times must come in order (older ones count as now)."""

    def __init__(self, grace_resource_s: float) -> None:
        self.grace_resource_s = grace_resource_s
        self.v_g = 0.0
        self.t_prev: float | None = None
        self.active: dict[str, VUser] = {}
        self.historic: dict[str, VUser] = {}

    def _weight_sum(self) -> float:
        return sum(u.weight for u in self.active.values())

    def update(self, now: float, r: float) -> float:
        """Advance to ``now`` (Algorithm 2): users leave in order of their virtual end."""
        if self.t_prev is None:
            self.t_prev = now
        now = max(now, self.t_prev)
        while self.active and r > 0:
            rate = r / self._weight_sum()
            u = min(self.active.values(), key=lambda x: (x.end, x.name))
            t_fin = self.t_prev + (u.end - self.v_g) / rate
            if t_fin > now:
                break
            self._progress(t_fin, r)
            for j in u.jobs:  # rounding: whatever is left ends with its user
                j.active = False
            u.jobs.clear()
            self.historic[u.name] = self.active.pop(u.name)
        self._progress(now, r)
        return self.v_g

    def _progress(self, t: float, r: float) -> None:
        t_prev = self.t_prev if self.t_prev is not None else t
        if t < t_prev:
            return
        if self.active and r > 0:
            rate = r / self._weight_sum()
            self.v_g += (t - t_prev) * rate
            for u in self.active.values():
                self._user_progress(u, rate * u.weight, t_prev, t)
        self.t_prev = t

    @staticmethod
    def _user_progress(u: VUser, share: float, t0: float, t1: float) -> None:
        """Algorithm 3: the user's jobs share ``share`` equally from t0 to t1."""
        jobs = u.jobs
        if not jobs:
            return
        js = share / len(jobs)
        while jobs:
            j = jobs[0]
            if j.d > u.v + (t1 - t0) * js:
                break
            dv = max(0.0, j.d - u.v)
            u.v += dv
            t0 += dv / js
            u.start += j.size / u.weight
            j.active = False
            jobs.pop(0)
            js = share / len(jobs) if jobs else 0.0
        u.v += (t1 - t0) * js

    def arrive(
        self, user: str, weight: float, job: VJob | None, app_id: str, now: float, r: float
    ) -> VUser:
        """A stage of ``app_id`` (a new job when ``job`` is given) arrives (Algorithm 1)."""
        self.update(now, r)
        u = self.active.get(user)
        if u is None:
            u = self.historic.pop(user, None)
            if u is None:
                u = VUser(user, weight, self.v_g)
            elif not (app_id in u.known and self.v_g - u.end <= self.grace_resource_s * r):
                u.start = self.v_g
            self.active[user] = u
        if job is not None:
            job.d = u.v + job.size
            u.known.add(app_id)
            bisect.insort(u.jobs, job, key=lambda j: (j.d, j.seq))
        d = u.start
        for j in u.jobs:
            d += j.size / u.weight
            j.deadline = d
        u.end = d
        return u


class UwfqPolicy(StageOrderingPolicy[UwfqParams]):
    description = "user weighted fair queuing: two-level virtual time, job chains per user"
    oracle = True  # job sizes from the submitted job's durations

    def __init__(self, params: UwfqParams | None = None) -> None:
        super().__init__(params)
        self.clock = TwoLevelClock(self.params.grace_resource_s)
        self.jobs: dict[str, VJob] = {}  # running applications
        #: Per application, stage -> (deadline or None: its job's, arrival order).
        self.stages: dict[str, dict[int | None, tuple[float | None, int]]] = {}
        self._arrivals = 0

    def _weight(self, user: str, cluster: ClusterView) -> float:
        view = cluster.users.get(user) if self.params.weights else None
        w = view.weight if view is not None else 1.0
        return w if w > 0 else 1e-12

    def _seen(self, app_id: str, stage: int | None, deadline: float | None) -> None:
        self.stages.setdefault(app_id, {})[stage] = (deadline, self._arrivals)
        self._arrivals += 1

    def _moved(self, user: VUser) -> None:
        """``user``'s jobs got new deadlines: their task sets' keys move."""
        if user.jobs:
            self.rekey(*[j.app_id for j in user.jobs])

    def on_app_added(self, app: AppView, cluster: ClusterView) -> None:
        job = app.job
        size = sum(slot_time(s) for s in job.stages) if job is not None else 0.0
        vjob = VJob(app.app_id, app.seq, size * self.params.size_inflation, 0.0)
        self.jobs[app.app_id] = vjob
        weight = self._weight(app.user, cluster)
        r = cluster.capacity["vcores"]
        user = self.clock.arrive(app.user, weight, vjob, app.app_id, app.submit_s, r)
        self._moved(user)
        self.stages[app.app_id] = {}
        if job is not None:
            for i, parents in enumerate(job.parent_indices):
                if not parents:
                    self._seen(app.app_id, i, None)

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        self.jobs.pop(app.app_id, None)
        self.stages.pop(app.app_id, None)
        # No stage of an ended job arrives again: its id need not be known any longer.
        clock = self.clock
        u = clock.active.get(app.user) or clock.historic.get(app.user)
        if u is not None:
            u.known.discard(app.app_id)

    def changed(
        self, apps: Sequence[AppView] | None, sets: Sequence[TaskSet], cluster: ClusterView
    ) -> None:
        r = cluster.capacity["vcores"]
        for t, ts in new_arrivals(sets, self.stages, cluster):
            app = ts.app
            weight = self._weight(app.user, cluster)
            user = self.clock.arrive(app.user, weight, None, app.app_id, t, r)
            self._moved(user)
            vjob = self.jobs.get(app.app_id)
            if vjob is not None and vjob.active:
                self._seen(app.app_id, ts.stage, None)
            elif self.params.late_stages == "first" or vjob is None:
                self._seen(app.app_id, ts.stage, 0.0)
            else:
                self._seen(app.app_id, ts.stage, vjob.deadline)

    def stage_key(self, ts: TaskSet, cluster: ClusterView) -> tuple[float, int]:
        entry = self.stages.get(ts.app.app_id, {}).get(ts.stage)
        if entry is None:
            return (0.0, -1)
        deadline, order = entry
        if deadline is None:
            vjob = self.jobs.get(ts.app.app_id)
            deadline = vjob.deadline if vjob is not None else 0.0
        return (deadline, order)

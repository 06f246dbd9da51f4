"""Task sets: what the stage-ordering policies order (``rm.policy.toolkit.stageorder``), and the
helpers that read, fill and bound them. A task set is one application's outstanding asks
of one stage (``AppView.stage_of``); asks that name no stage form one of their own per
application (stage None)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rm.policy.base import Placement, placement
from rm.policy.views import AppView, ClusterView, NodeView
from treadle.model import StageSpec
from treadle.resources import ZERO, Resources


class StageOrderParams(BaseModel):
    """The parameters every stage-ordering policy takes (subclass it for more)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Keep slots free this long for a runnable stage whose asks are on their way.
    hold_s: float = Field(1.0, ge=0.0, allow_inf_nan=False)


class SparkOrderParams(StageOrderParams):
    """What Spark's FAIR order takes (``spark-fair``, ``ujf``): by stage or by job, ties by
    Spark's task-set name or by submission, the order kept per slot or per node offer."""

    level: Literal["stage", "job"] = "stage"
    tie: Literal["name", "submit"] = "name"
    offer: Literal["slot", "node"] = "slot"


class TaskSet:
    """One application's outstanding asks of one stage, most important priority first;
    or (``waiting`` > 0) a stage runnable but not asked for yet, wanting that many tasks
    of ``resources``."""

    __slots__ = ("app", "priorities", "resources", "stage", "waiting")

    def __init__(
        self,
        app: AppView,
        stage: int | None,
        priorities: tuple[int, ...],
        waiting: int = 0,
        resources: Resources = ZERO,
    ) -> None:
        self.app = app
        self.stage = stage
        self.priorities = priorities
        self.waiting = waiting
        self.resources = resources

    @property
    def key(self) -> tuple[str, int | None]:
        """(application id, stage): names the task set across heartbeats."""
        return (self.app.app_id, self.stage)

    def __repr__(self) -> str:
        return f"TaskSet({self.app.app_id!r}, {self.stage!r}, {self.priorities!r})"


def submission_order(ts: TaskSet) -> tuple[int, int]:
    """Application, then stage (asks without a stage first)."""
    return (ts.app.seq, -1 if ts.stage is None else ts.stage)


def task_sets(cluster: ClusterView) -> list[TaskSet]:
    """Every pending task set, in submission order (application, then stage; asks
    without a stage first)."""
    out: list[TaskSet] = []
    for app in cluster.pending_apps():
        out += app_sets(app)
    return out


def waiting_sets(cluster: ClusterView, hold_s: float) -> list[TaskSet]:
    """Stages runnable by their job's DAG for at most ``hold_s`` whose asks have not
    arrived, in submission order."""
    out: list[TaskSet] = []
    now = cluster.now
    for app in cluster.apps.values():
        job = app.job
        if job is None:
            continue
        stages = app.unasked_stages()
        for stage in stages:
            t = app.stage_runnable_s(stage)
            if t is not None and now - t <= hold_s and 0 <= stage < len(job.stages):
                spec = job.stages[stage]
                out.append(TaskSet(app, stage, (), spec.tasks, spec.resources))
    return out


def new_arrivals(
    sets: Sequence[TaskSet], seen: dict[str, Any], cluster: ClusterView
) -> list[tuple[float, TaskSet]]:
    """The task sets whose stage is not in ``seen[app_id]`` yet, with when each became
    runnable (the RM's ``stage_runnable_s``; now if it does not say), in that time order
    (ties by application, then stage)."""
    new = []
    for ts in sets:
        have = seen.get(ts.app.app_id)
        if have is None or ts.stage not in have:
            t = ts.app.stage_runnable_s(ts.stage) if ts.stage is not None else None
            new.append((cluster.now if t is None else t, ts.app.seq, ts.stage or 0, ts))
    new.sort(key=lambda x: x[:3])
    return [(t, ts) for t, _, _, ts in new]


def slot_time(stage: StageSpec) -> float:
    """vcore-seconds of ``stage`` (a task without vcores counts one slot)."""
    v = stage.resources["vcores"]
    return stage.work_s * (v if v > 0 else 1.0)


class SparkStageIds:
    """Spark's stage ids: numbered in application submission order, then stage order, as
    Spark's DAG scheduler numbers them (call ``added`` and ``removed`` from the policy's
    ``on_app_added`` and ``on_app_removed``)."""

    __slots__ = ("_first", "_next")

    def __init__(self) -> None:
        self._first: dict[str, int] = {}
        self._next = 0

    def added(self, app: AppView) -> None:
        self._first[app.app_id] = self._next
        self._next += len(app.job.stages) if app.job is not None else 1

    def removed(self, app: AppView) -> None:
        self._first.pop(app.app_id, None)

    def fair_key(self, ts: TaskSet, level: str, tie: str) -> tuple[int, str | int, int]:
        """Spark FAIR's order in one pool: fewest running tasks (of the stage, or of the
        application at ``level="job"``) first; ties by the name ``TaskSet_<stageId>.0``
        as a string (``tie="name"``) or by submission order (``tie="submit"``)."""
        app, stage = ts.app, ts.stage
        if level == "job":
            running = app.running
        else:
            running = app.stage_running(stage) if stage is not None else 0
        if tie == "submit":
            return (running, app.seq, -1 if stage is None else stage)
        stage_id = self._first.get(app.app_id, 0) + (stage or 0)
        return (running, "" if stage is None else f"TaskSet_{stage_id}.0", 0)


def fill_task_set(ts: TaskSet, node: NodeView, held: Resources = ZERO) -> Iterator[Placement]:
    """Placements of ``ts``'s asks on ``node`` while they fit beside ``held`` (most
    important first)."""
    asks = ts.app.asks
    app_id = ts.app.app_id
    for prio in ts.priorities:
        ask = asks.get(prio)
        while ask is not None and (ask.resources + held).fits_in(node.free):
            yield placement(app_id, prio)
            ask = asks.get(prio)


def smallest_demand(sets: Sequence[TaskSet], cluster: ClusterView) -> Resources:
    """A componentwise lower bound of what the task sets ask for or wait for: a node
    whose free space does not cover it can take none of them."""
    demands: set[Resources] = set()  # a few distinct values (hashes are cached)
    bound = getattr(cluster, "smallest_ask", None)  # optional in the view
    pending = bound() if bound is not None else None
    if pending is not None:
        demands.add(pending)
    for ts in sets:
        if ts.waiting:
            demands.add(ts.resources)
            continue
        if pending is not None:
            continue  # its asks are covered by the cluster's bound
        asks = ts.app.asks
        for prio in ts.priorities:
            ask = asks.get(prio)
            if ask is not None:
                demands.add(ask.resources)
    out: Resources | None = None
    for r in demands:
        out = r if out is None else out.componentwise_min(r)
    return ZERO if out is None else out


def first_fit_priority(ts: TaskSet, free: Resources) -> int | None:
    """The most important of ``ts``'s priorities whose ask fits in ``free``."""
    asks = ts.app.asks
    for prio in ts.priorities:
        ask = asks.get(prio)
        if ask is not None and ask.resources.fits_in(free):
            return prio
    return None


def hold_slots(ts: TaskSet, free: Resources, held: Resources) -> tuple[Resources, int]:
    """What a waiting task set keeps of ``free`` (beyond ``held``): up to its tasks."""
    n = 0
    while n < ts.waiting and (held + ts.resources).fits_in(free):
        held = held + ts.resources
        n += 1
    return held, n


def app_sets(app: AppView) -> list[TaskSet]:
    """``app``'s pending task sets, by stage (asks without a stage first)."""
    asks = app.sorted_asks()
    stage_of = app.stage_of
    if len(asks) == 1:
        return [TaskSet(app, stage_of(asks[0].priority), (asks[0].priority,))]
    by_stage: dict[int | None, list[int]] = {}
    for ask in asks:
        by_stage.setdefault(stage_of(ask.priority), []).append(ask.priority)
    if len(by_stage) == 1:
        ((stage, prios),) = by_stage.items()
        return [TaskSet(app, stage, tuple(prios))]
    return [
        TaskSet(app, stage, tuple(by_stage[stage]))
        for stage in sorted(by_stage, key=lambda s: -1 if s is None else s)
    ]


def ask_shapes(ts: TaskSet) -> tuple[Resources, ...]:
    """The distinct shapes ``ts`` asks for."""
    asks = ts.app.asks
    prios = ts.priorities
    if len(prios) == 1:
        return (asks[prios[0]].resources,)
    return tuple(dict.fromkeys([asks[p].resources for p in prios]))


def serve_in_key_order(
    sets: list[TaskSet],
    key: Callable[[TaskSet], Any],
    resorts: bool,
    node: NodeView,
    cluster: ClusterView,
) -> Iterator[Placement]:
    """Placements on ``node`` from ``sets`` (waiting ones included) in ``key`` order,
    smallest first, ties in list order: each task set takes every slot it can use
    (``resorts`` false), or keys are computed again after every placement (true). The
    stage-ordering policies' walk over every task set (``prepare``)."""
    held = ZERO
    if not resorts:
        # Task sets in key order, taken off a heap only while some ask or hold could
        # still fit beside what is held: the node is usually full after a set or two.
        order = [(key(ts), i) for i, ts in enumerate(sets)]
        heapq.heapify(order)
        smallest = smallest_demand(sets, cluster)
        while order and (smallest + held).fits_in(node.free):
            ts = sets[heapq.heappop(order)[1]]
            if ts.waiting:
                held = hold_slots(ts, node.free, held)[0]
            else:
                yield from fill_task_set(ts, node, held)
        return
    live = list(enumerate(sets))
    left = {i: ts.waiting for i, ts in live if ts.waiting}
    smallest = smallest_demand(sets, cluster)
    while live and (smallest + held).fits_in(node.free):
        free = node.free - held if held is not ZERO else node.free
        best: tuple[Any, int] | None = None
        best_prio = -1
        keep = []
        for i, ts in live:
            if ts.waiting:
                if not left[i] or not ts.resources.fits_in(free):
                    continue
                prio = -1
            else:
                found = first_fit_priority(ts, free)
                if found is None:
                    continue  # nothing of it fits: free space only shrinks in a heartbeat
                prio = found
            keep.append((i, ts))
            k = (key(ts), i)
            if best is None or k < best:
                best, best_prio = k, prio
        if best is None:
            return
        live = keep
        chosen = sets[best[1]]
        if chosen.waiting:
            held = held + chosen.resources
            left[best[1]] -= 1
            continue
        yield placement(chosen.app.app_id, best_prio)

"""The incremental decision structures decide exactly as the rescans they replaced.

Two RM cores get the same random history (jobs arriving, asking, re-asking, releasing
containers, nodes heartbeating; several users, queues, shapes and ask kinds): one runs a
built-in policy as shipped, kept between heartbeats and updated from the RM's feed of
changed applications; the other a reference that looks at everything on every heartbeat
(the previous implementations: the ordering helper's sort-and-fill, the queue-tree walk
over every pending application, carbyne's walk of every DEFAULT ask, tetris' window and
index rebuilt from ``pending_apps()``, the stage-ordering walk over every task set, Dynamic
Priority's two passes over every pending application, gs and las walking every job of
every queue and las checking every job for demotion on every heartbeat). Every container
must go to the same job, node and priority, in the same order; for gs and las, every job
must also enter the same queues at the same times. The stage-level policies, which refile
only the stages whose asks or containers changed (the RM's priority feed), also run on
histories of wide jobs (eight stages, as the WTA jobs are wide), where one application's
asks move between stages.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator
from typing import Any

import pytest

from plugins.policies.capacity import CapacityPolicy
from plugins.policies.carbyne import CarbynePolicy
from plugins.policies.cfq import CfqPolicy
from plugins.policies.dp import DpPolicy
from plugins.policies.drf import DrfPolicy
from plugins.policies.fair import FairPolicy
from plugins.policies.fifo import FifoPolicy
from plugins.policies.gs import GsPolicy
from plugins.policies.las import LasPolicy
from plugins.policies.sjf import SjfPolicy
from plugins.policies.spark_fair import SparkFairPolicy
from plugins.policies.tetris import TetrisPolicy
from plugins.policies.ujf import UjfPolicy
from plugins.policies.uwfq import UwfqPolicy
from rm.core.facade import ResourceManager
from rm.core.pending import PendingIndex
from rm.policy import (
    AppView,
    ClusterView,
    Entry,
    FairWindow,
    NodeView,
    OrderingPolicy,
    Placement,
    Policy,
    QueueTreePolicy,
    StageOrderingPolicy,
    TaskSet,
    fill_node,
    first_fit_ask,
    new_arrivals,
    placement,
)
from rm.policy.toolkit.multiqueue import SAMPLING, MultiQueue, QueueJob
from treadle.messages import (
    AllocateRequest,
    AppSubmission,
    Ask,
    AskKind,
    ContainerState,
    ContainerStatus,
    NodeHeartbeat,
    NodeRegistration,
)
from treadle.model import JobSpec, QueueSpec, StageSpec, UserSpec
from treadle.resources import Resources

GB = 1024
SHAPES = [
    Resources(vcores=v, memory_mb=m * GB) for v, m in ((1, 1), (1, 4), (2, 2), (4, 8), (2, 8))
]
QUEUES = QueueSpec(
    "root",
    children=(
        QueueSpec("a", weight=2, capacity=50, max_capacity=70),
        QueueSpec(
            "b",
            capacity=50,
            children=(QueueSpec("b1", capacity=30), QueueSpec("b2", max_capacity=60)),
        ),
    ),
)
LEAVES = ("a", "b1", "b2")
USERS = {"u0": UserSpec("u0", weight=2.0), "u1": UserSpec("u1"), "u2": UserSpec("u2")}


class _NoFeed:
    """The cluster without the RM's change feed: the helpers look at everything."""

    def __init__(self, cluster: Any) -> None:
        self._cluster = cluster

    def __getattr__(self, name: str) -> Any:
        if name == "watch_apps":
            raise AttributeError(name)
        return getattr(self._cluster, name)


def _old_ordering(
    policy: OrderingPolicy[Any], node: NodeView, cluster: ClusterView
) -> Iterator[Placement]:
    """OrderingPolicy.on_node_heartbeat before it kept its order between heartbeats."""
    apps = list(cluster.pending_apps())
    if not policy.resort:
        apps.sort(key=lambda a: policy.sort_key(a, cluster))
        for app in apps:
            yield from fill_node(app, node)
        return
    heap = [(policy.sort_key(a, cluster), a.seq, a) for a in apps]
    heapq.heapify(heap)
    while heap:
        _, seq, app = heapq.heappop(heap)
        ask = first_fit_ask(app, node.free)
        if ask is None:
            continue
        yield placement(app.app_id, ask.priority)
        if app.pending:
            heapq.heappush(heap, (policy.sort_key(app, cluster), seq, app))


class OldFifo(FifoPolicy):
    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        return _old_ordering(self, node, cluster)


class OldSjf(SjfPolicy):
    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        return _old_ordering(self, node, cluster)


def _tree_reference(cls: type[QueueTreePolicy[Any]]) -> type[QueueTreePolicy[Any]]:
    """``cls`` with a ``first_fit`` of its own: the walk over every pending application."""

    class Old(cls):  # type: ignore[valid-type,misc]
        def first_fit(
            self, app: AppView, leaf: str, node: NodeView, cluster: ClusterView
        ) -> Ask | None:
            for ask in app.sorted_asks():
                if self.fits(ask.resources, leaf, node, cluster):
                    return ask
            return None

    return Old


class OldTetris(TetrisPolicy):
    """Index and window rebuilt from ``pending_apps()``, the window's candidates found by
    walking each shape's asks past the jobs outside it."""

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        return super().on_node_heartbeat(node, _NoFeed(cluster))  # type: ignore[arg-type]

    def _in_window(self, align: dict[Resources, float]) -> Iterator[tuple[float, Entry]]:
        index, window = self._index, self._window
        assert window is not None
        if window.size * 4 <= len(index.apps):
            for _, app_id in window.order[: window.size]:
                for shape, e in index.apps[app_id].entries:
                    a = align.get(shape)
                    if a is not None:
                        yield a, e
            return
        for shape, a in align.items():
            for e in index.by_shape[shape]:
                if e.app_id in window.members:
                    yield a, e
                    break


class OldCarbyne(CarbynePolicy):
    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        index = self._index
        index.sync(cluster)
        if index.apps:
            yield from self._place_walking(node, cluster)


class OldSparkFair(SparkFairPolicy):
    """Every key recomputed from every task set on every heartbeat."""

    def prepare(self, sets: Any, cluster: ClusterView) -> None:
        pass


class OldUjf(UjfPolicy):
    """Users' running tasks counted on every heartbeat, one key (user, then stage)."""

    group_of = StageOrderingPolicy.group_of  # type: ignore[assignment]

    def prepare(self, sets: Any, cluster: ClusterView) -> None:
        running: dict[str, int] = {}
        for app in cluster.apps.values():
            running[app.user] = running.get(app.user, 0) + app.running
        self._user_running = running

    def on_container_allocated(self, container: Any, cluster: ClusterView) -> None:
        app = cluster.apps.get(container.app_id)
        if app is not None:
            self._user_running[app.user] = self._user_running.get(app.user, 0) + 1

    def stage_key(self, ts: TaskSet, cluster: ClusterView) -> Any:
        user = (self._user_running.get(ts.app.user, 0), ts.app.user)
        return (*user, *super().stage_key(ts, cluster))


class OldCfq(CfqPolicy):
    def prepare(self, sets: Any, cluster: ClusterView) -> None:
        if self.params.level == "job":
            return
        for t, ts in new_arrivals(sets, self.finish, cluster):
            self._arrive(ts.app, ts.stage, t, cluster)


class OldUwfq(UwfqPolicy):
    def prepare(self, sets: Any, cluster: ClusterView) -> None:
        r = cluster.capacity["vcores"]
        for t, ts in new_arrivals(sets, self.stages, cluster):
            app = ts.app
            self.clock.arrive(app.user, self._weight(app.user, cluster), None, app.app_id, t, r)
            vjob = self.jobs.get(app.app_id)
            if vjob is not None and vjob.active:
                self._seen(app.app_id, ts.stage, None)
            elif self.params.late_stages == "first" or vjob is None:
                self._seen(app.app_id, ts.stage, 0.0)
            else:
                self._seen(app.app_id, ts.stage, vjob.deadline)


class OldDp(DpPolicy):
    """NO_FILL and FILL over every pending application in submission order."""

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        quota, running = self._quota, self._running
        if quota:
            for app in list(cluster.pending_apps()):
                q = app.queue
                while quota.get(q, 0) - running.get(q, 0) >= 1 and app.pending > 0:
                    ask = first_fit_ask(app, node.free)
                    if ask is None:
                        break
                    yield placement(app.app_id, ask.priority)
        for app in list(cluster.pending_apps()):
            yield from fill_node(app, node)


def _old_multiqueue(
    policy: MultiQueue[Any], node: NodeView, cluster: ClusterView
) -> Iterator[Placement]:
    """MultiQueue.on_node_heartbeat when it walked every job of every queue."""

    def choose(free: Resources) -> tuple[QueueJob, Ask, bool] | None:
        apps = cluster.apps
        heads: list[tuple[int, QueueJob, Ask]] = []
        for k, members in enumerate(policy.members):
            for job in members:
                app = apps.get(job.app_id)
                if app is None or app.pending <= 0:
                    continue
                ask = policy._task(job, app, free)
                if ask is not None:
                    heads.append((k, job, ask))
                    break
        if heads:
            k = policy._pick([h[0] for h in heads], cluster)
            _, job, ask = next(h for h in heads if h[0] == k)
            return job, ask, job.phase == SAMPLING and ask.priority >= 0
        if getattr(policy.params, "work_conservation", False):
            for job in sorted(policy.members[policy.layout.sampling], key=lambda j: j.seq):
                app = apps.get(job.app_id)
                if job.phase == SAMPLING and app is not None and app.pending > 0:
                    ask = first_fit_ask(app, free)
                    if ask is not None:
                        return job, ask, False
        return None

    policy._refresh(cluster)
    while True:
        choice = choose(node.free)
        if choice is None:
            return
        job, ask, pilot = choice
        policy._granting = (job, pilot)
        yield placement(job.app_id, ask.priority)
        policy._granting = None


class OldGs(GsPolicy):
    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        return _old_multiqueue(self, node, cluster)


class OldLas(LasPolicy):
    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        return _old_multiqueue(self, node, cluster)

    def _refresh(self, cluster: ClusterView) -> None:
        now = cluster.now
        for job in self.jobs.values():
            position = self.layout.position(job.ran_s + len(job.cids) * now - job.starts)
            if position > job.position:
                self._enter(job, position, now)


#: Short queues, so that jobs change queues within a history.
_LAS_FAST = {"q0_hi_s": 0.3, "growth": 2.0, "queues": 5}
_GS_SPREAD = {"q0_hi_s": 20.0, "growth": 2.0, "queues": 5}  # oracle sizes: 1-240 s
_SLEARN = {"estimator": "slearn", "slearn.ratio": 0.5, "slearn.thin_limit": 2}

CASES: dict[str, tuple[type[Policy[Any]], type[Policy[Any]], dict[str, Any]]] = {
    "fifo": (FifoPolicy, OldFifo, {}),
    "sjf": (SjfPolicy, OldSjf, {}),
    "capacity": (CapacityPolicy, _tree_reference(CapacityPolicy), {}),
    "fair": (FairPolicy, _tree_reference(FairPolicy), {}),
    "fair-drf-min": (
        FairPolicy,
        _tree_reference(FairPolicy),
        {"inner": "drf", "min_share": "capacity"},
    ),
    "drf-users": (DrfPolicy, _tree_reference(DrfPolicy), {}),
    "drf-jobs": (DrfPolicy, _tree_reference(DrfPolicy), {"across": "jobs"}),
    "tetris": (TetrisPolicy, OldTetris, {}),
    "tetris-f0.8": (TetrisPolicy, OldTetris, {"f": 0.8}),
    "carbyne": (CarbynePolicy, OldCarbyne, {}),
    "carbyne-g0.6": (CarbynePolicy, OldCarbyne, {"guarantee": 0.6}),
    "spark-fair": (SparkFairPolicy, OldSparkFair, {}),
    "spark-fair-job-submit": (SparkFairPolicy, OldSparkFair, {"level": "job", "tie": "submit"}),
    "spark-fair-node": (SparkFairPolicy, OldSparkFair, {"offer": "node"}),
    "ujf": (UjfPolicy, OldUjf, {}),
    "ujf-job-node": (UjfPolicy, OldUjf, {"level": "job", "offer": "node"}),
    "cfq": (CfqPolicy, OldCfq, {}),
    "cfq-job": (CfqPolicy, OldCfq, {"level": "job"}),
    "uwfq": (UwfqPolicy, OldUwfq, {}),
    "uwfq-job-deadline": (UwfqPolicy, OldUwfq, {"late_stages": "job_deadline"}),
    "cfq-job-size": (CfqPolicy, OldCfq, {"stage_size": "job"}),
    "ujf-submit": (UjfPolicy, OldUjf, {"tie": "submit"}),
    "dp": (DpPolicy, OldDp, {"interval_s": 1.0, "budget": 100.0}),
    "dp-hadoop": (DpPolicy, OldDp, {"interval_s": 2.0, "budget": 50.0, "semantics": "hadoop"}),
    "gs": (GsPolicy, OldGs, _GS_SPREAD),
    "gs-deficit-submit": (
        GsPolicy,
        OldGs,
        {**_GS_SPREAD, "sharing": "deficit", "fifo_key": "submit"},
    ),
    "gs-slearn": (GsPolicy, OldGs, _SLEARN),
    "gs-slearn-extra-deficit": (
        GsPolicy,
        OldGs,
        {**_SLEARN, "sampling_queue": "extra", "sharing": "deficit"},
    ),
    "gs-slearn-shared-submit": (
        GsPolicy,
        OldGs,
        {**_SLEARN, "sampling_queue": "shared", "fifo_key": "submit", "q0_hi_s": 20.0},
    ),
    "gs-slearn-no-wc": (GsPolicy, OldGs, {**_SLEARN, "work_conservation": False}),
    "las": (LasPolicy, OldLas, _LAS_FAST),
    "las-deficit-submit": (
        LasPolicy,
        OldLas,
        {**_LAS_FAST, "sharing": "deficit", "fifo_key": "submit"},
    ),
    "las-extra": (LasPolicy, OldLas, {**_LAS_FAST, "sampling_queue": "extra", "growth": 1.5}),
    "las-shared": (LasPolicy, OldLas, {**_LAS_FAST, "sampling_queue": "shared"}),
}
#: Multi-queue cases: containers also end on their nodes (successes: gs' pilots, las'
#: attained service), and the queue entries are compared too.
QUEUED = {c for c in CASES if c.startswith(("gs", "las"))}
#: Cases whose asks name stages (``Ask.group``): stage-level policies.
STAGED = {"spark-fair", "spark-fair-job-submit", "spark-fair-node", "ujf", "ujf-job-node", "cfq"}
STAGED |= {"cfq-job", "uwfq", "uwfq-job-deadline", "cfq-job-size", "ujf-submit"} | QUEUED
#: The stage-ordering cases (also run on wide jobs).
STAGE_ORDERED = sorted(c for c in STAGED if not c.startswith(("gs", "las")))


class Twin:
    """One RM core driven by the shared random history."""

    def __init__(self, policy: Policy[Any], nodes: list[Resources]) -> None:
        self.rm = ResourceManager(policy, queues=QUEUES, users=USERS)
        self.seq: dict[str, int] = {}
        for i, r in enumerate(nodes):
            self.rm.register_node(NodeRegistration(f"n{i}", r), 0.0)
            self.seq[f"n{i}"] = 0

    def placed_since(self, start: int) -> list[tuple[str, str, int]]:
        return [
            (r["job"], r["node"], r["priority"])
            for r in self.rm.log.records[start:]
            if r["event"] == "container_allocated"
        ]


def _group_shape(group: int) -> Resources:
    """The shape of stage ``group - 1``'s asks."""
    return SHAPES[1 + (group - 1) % 4]


def _job_spec(r: random.Random, user: str, queue: str, t: float, stages: int) -> JobSpec:
    """Three stages (or ``stages``: the first three, then parallel ones), the asks of
    stage i in group i + 1 (of shape ``_group_shape(i + 1)``)."""

    def durations() -> tuple[float, ...]:
        return tuple(r.uniform(1.0, 20.0) for _ in range(r.randint(1, 4)))

    first = StageSpec("s0", SHAPES[1], durations())
    second = StageSpec("s1", SHAPES[2], durations(), ("s0",) if r.random() < 0.5 else ())
    third = StageSpec("s2", SHAPES[3], durations(), ("s0", "s1"))
    more = [StageSpec(f"s{i}", _group_shape(i + 1), durations()) for i in range(3, stages)]
    return JobSpec("j", user, t, (first, second, third, *more), queue=queue)


def _history(seed: int, policy: str, steps: int, stages: int = 3) -> list[tuple[Any, ...]]:
    r = random.Random(f"{seed}:{policy}" if stages == 3 else f"{seed}:{policy}:{stages}")
    nodes = [Resources(vcores=r.choice((4, 8, 16)), memory_mb=r.choice((8, 16, 32)) * GB)]
    nodes += [Resources(vcores=8, memory_mb=16 * GB) for _ in range(r.randint(1, 4))]
    out: list[tuple[Any, ...]] = [("nodes", nodes)]
    jobs = 0
    for step in range(steps):
        t = step * 0.05
        x = r.random()
        if x < 0.12 or jobs == 0:
            user, queue = f"u{r.randrange(3)}", r.choice(LEAVES)
            job = _job_spec(r, user, queue, t, stages) if policy in STAGED else None
            out.append(("job", t, user, queue, job))
            jobs += 1
        if x < 0.45:
            job = r.randrange(jobs)
            asks = []
            for prio in r.sample(range(stages + 2), r.randint(0, stages)):
                kind = AskKind.DEFAULT if r.random() < 0.6 else AskKind.ALTRUISTIC
                work = r.choice((0.0, r.uniform(10, 1000)))
                shape, count = r.choice(SHAPES), r.randint(0, 6)
                if stages > 3:
                    group = r.randrange(stages + 1)
                else:
                    group = r.choice((0, 1, 1, 2, 3)) if policy in STAGED else 0
                shape = _group_shape(group) if group else shape  # a stage's asks share a shape
                asks.append(Ask(prio, shape, count, kind, 10.0, work, group=group))
            out.append(("ask", t, job, asks))
        elif x < 0.65:
            end = "complete" if policy in QUEUED and r.random() < 0.6 else "release"
            out.append((end, t, r.random(), r.random()))
        elif policy.startswith("dp") and x > 0.93:
            out.append(("tick", t))  # Dynamic Priority's quotas change
        else:
            out.append(("beat", t, r.randrange(len(nodes))))
    return out


def _play(twin: Twin, history: list[tuple[Any, ...]]) -> list[list[tuple[str, str, int]]]:
    rm, apps, out = twin.rm, [], []
    for event in history[1:]:
        kind, t = event[0], event[1]
        start = len(rm.log.records)
        if kind == "job":
            sub = AppSubmission("j", event[2], event[3], 10, job=event[4])
            app_id = rm.submit_application(sub, t)
            rm.register_application_master(app_id, t)
            apps.append(app_id)
        elif kind == "ask":
            app_id = apps[event[2]]
            if app_id in rm.state.apps:
                rm.on_allocate(AllocateRequest(app_id, asks=list(event[3])), t)
        elif kind == "release":
            running = [a for a in apps if a in rm.state.apps and rm.state.apps[a].containers]
            if running:
                app = rm.state.apps[running[int(event[2] * len(running))]]
                cids = sorted(app.containers)
                cid = cids[int(event[3] * len(cids))]
                rm.on_allocate(AllocateRequest(app.app_id, releases=[cid]), t)
        elif kind == "complete":  # the container's node reports it done
            running = [a for a in apps if a in rm.state.apps and rm.state.apps[a].containers]
            if running:
                app = rm.state.apps[running[int(event[2] * len(running))]]
                cids = sorted(app.containers)
                c = app.containers[cids[int(event[3] * len(cids))]]
                status = ContainerStatus(c.container_id, ContainerState.COMPLETE, 0, t - 1.0, t)
                twin.seq[c.node_id] += 1
                beat = NodeHeartbeat(c.node_id, twin.seq[c.node_id], completed=[status])
                rm.node_heartbeat(beat, t)
        elif kind == "tick":
            rm.tick(t)
        else:
            node_id = f"n{event[2]}"
            twin.seq[node_id] += 1
            rm.node_heartbeat(NodeHeartbeat(node_id, twin.seq[node_id]), t)
        out.append(twin.placed_since(start))
    return out


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("case", sorted(CASES))
def test_kept_structures_decide_as_the_rescans(case: str, seed: int) -> None:
    new, old, params = CASES[case]
    history = _history(seed, case, 400)
    nodes = history[0][1]
    mine, reference = Twin(new(new.Params(**params)), nodes), Twin(old(old.Params(**params)), nodes)
    got = _play(mine, history)
    want = _play(reference, history)
    assert sum(map(len, want)) > 20  # the history places something
    assert got == want
    if case in QUEUED:
        entries = reference.rm.policy.queue_log  # type: ignore[attr-defined]
        if "slearn" in case or case.startswith("las"):
            assert len(entries) > len({e[1] for e in entries})  # jobs changed queues
        assert mine.rm.policy.queue_log == entries  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("case", STAGE_ORDERED)
def test_stage_sets_refiled_stage_by_stage_decide_as_the_rescans_on_wide_jobs(
    case: str, seed: int
) -> None:
    new, old, params = CASES[case]
    history = _history(seed, case, 400, stages=8)
    nodes = history[0][1]
    mine, reference = Twin(new(new.Params(**params)), nodes), Twin(old(old.Params(**params)), nodes)
    got = _play(mine, history)
    want = _play(reference, history)
    assert sum(map(len, want)) > 20
    assert got == want


def test_the_priority_feed_names_the_priorities_that_changed() -> None:
    job = JobSpec("j", "u0", 0.0, (StageSpec("s0", SHAPES[1], (5.0,) * 4),), queue="a")
    rm = ResourceManager(FifoPolicy(), queues=QUEUES, users=USERS)
    rm.register_node(NodeRegistration("n0", Resources(vcores=8, memory_mb=16 * GB)), 0.0)
    feed = rm.state.watch_priorities()
    app_id = rm.submit_application(AppSubmission("j", "u0", "a", 4, job=job), 0.0)
    rm.register_application_master(app_id, 0.0)
    feed.clear()
    asks = [Ask(3, SHAPES[1], 2, group=1), Ask(5, SHAPES[2], 1)]
    rm.on_allocate(AllocateRequest(app_id, asks=asks), 0.1)
    assert feed == {app_id: {3, 5}}
    feed.clear()
    rm.node_heartbeat(NodeHeartbeat("n0", 1), 0.2)  # places all three
    assert feed == {app_id: {3, 5}}
    feed.clear()
    cid = sorted(rm.state.apps[app_id].containers)[0]
    rm.on_allocate(AllocateRequest(app_id, releases=[cid]), 0.3)
    assert feed == {app_id: {3}}
    feed.clear()
    again = [Ask(3, SHAPES[1], 1, remaining_work=7.0, group=1)]
    rm.on_allocate(AllocateRequest(app_id, asks=again), 0.35)
    assert feed == {app_id: {3}}
    feed.clear()
    hints = [Ask(3, SHAPES[1], 1, remaining_work=6.0, group=1)]  # only a hint changed
    rm.on_allocate(AllocateRequest(app_id, asks=hints), 0.36)
    assert feed == {app_id: set()}
    feed.clear()
    moved = [Ask(3, SHAPES[2], 0, group=2)]  # priority 3 now names stage 1
    rm.on_allocate(AllocateRequest(app_id, asks=moved), 0.4)
    assert feed == {app_id: None}  # its containers moved with it: any stage may have changed


def test_pending_apps_stay_sorted_and_a_handed_out_list_never_changes() -> None:
    class App:
        def __init__(self, seq: int, pending: int) -> None:
            self.app_id, self.seq, self.pending, self.asks = f"a{seq}", seq, pending, {}

    index: PendingIndex[Any] = PendingIndex()
    r = random.Random(3)
    apps = [App(i, 0) for i in range(30)]
    feed = index.watch()
    for _ in range(300):
        app = r.choice(apps)
        was = app.pending > 0
        handed = index.sorted_apps()
        before = list(handed)
        app.pending = r.choice((0, 0, 1, 5))
        index.update(app, was)
        assert handed == before  # a list handed out is not changed under its holder
        assert [a.seq for a in index.sorted_apps()] == sorted(a.seq for a in apps if a.pending > 0)
        assert feed.pop(app.app_id) is app  # the watcher hears of it
    index.unwatch(feed)
    index.update(apps[0], apps[0].pending > 0)
    assert not feed


def test_fair_window_members_and_moves_follow_its_order() -> None:
    class App:
        def __init__(self, seq: int) -> None:
            self.app_id, self.seq, self.allocated = f"a{seq}", seq, Resources(vcores=0)

    r = random.Random(5)
    apps = [App(i) for i in range(25)]
    cap = Resources(vcores=100)
    for f in (0.1, 0.25, 0.5, 0.9):
        window = FairWindow(apps[:10], cap, f, track_moves=True)  # type: ignore[arg-type]
        seen = window.members
        for _ in range(300):
            app = r.choice(apps)
            app.allocated = Resources(vcores=r.choice((0, 1, 2, 5)))
            window.charged(app, r.random() < 0.8)  # type: ignore[arg-type]
            members = {i for _, i in window.order[: window.size]}
            assert window.members == members
            assert all(window.contains(a.app_id) == (a.app_id in members) for a in apps)
            for app_id in window.take_moved():  # what moved, and only that, changed sides
                seen.symmetric_difference_update({app_id})
            assert seen == members

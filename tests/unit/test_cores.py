"""The sans-IO cores (RM, NM, AM) driven directly, without the simulator.

Every test builds the cores by hand, passes ``now`` explicitly and checks responses,
state and the event log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from am.asks import AskStrategy, priority_of
from am.core import ApplicationMaster
from nm.core import NodeManager
from plugins.asks.greedy import GreedyAsks
from plugins.policies.fifo import FifoPolicy
from rm.core.facade import MAX_REJECTIONS_PER_HEARTBEAT, ResourceManager
from rm.policy import ClusterView, NodeView, Placement, Policy
from treadle import events as ev
from treadle.errors import ConflictError, InvalidRequestError, NotFoundError, PluginError
from treadle.messages import (
    EXIT_ABORTED,
    EXIT_LOST_NODE,
    EXIT_PREEMPTED,
    EXIT_SUCCESS,
    AllocateRequest,
    AllocateResponse,
    AppSubmission,
    Ask,
    AskKind,
    Container,
    ContainerLaunch,
    ContainerState,
    ContainerStatus,
    FinalStatus,
    NodeHeartbeat,
    NodeRegistration,
)
from treadle.model import JobSpec, StageSpec
from treadle.resources import ZERO, Resources

NODE = Resources(vcores=4, memory_mb=8192)
SMALL = Resources(vcores=1, memory_mb=1024)


def res(vcores: float, memory_mb: float, **more: float) -> Resources:
    return Resources(vcores=vcores, memory_mb=memory_mb, **more)


# ----------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------


class ScriptedPolicy(Policy):
    """Yields the placements a test gives it (a callable of the node and cluster)."""

    def __init__(self, script: Callable[[NodeView, ClusterView], Iterable[Any]]) -> None:
        super().__init__()
        self.script = script
        self.calls = 0

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        self.calls += 1
        yield from self.script(node, cluster)


def make_rm(
    policy: Policy | None = None,
    *,
    nodes: Iterable[tuple[str, Resources]] = (("n1", NODE),),
    policy_errors: str = "raise",
) -> ResourceManager:
    rm = ResourceManager(policy or FifoPolicy(), policy_errors=policy_errors)
    for nid, cap in nodes:
        rm.register_node(NodeRegistration(nid, cap), 0.0)
    return rm


def submit(rm: ResourceManager, name: str = "j", now: float = 0.0, tasks: int = 1) -> str:
    """Submit an application and register its (unmanaged) AM attempt."""
    app = rm.submit_application(AppSubmission(name, "alice", "default", tasks), now)
    rm.register_application_master(app, now)
    return app


class Beater:
    """Sends heartbeats with increasing sequence numbers for one node."""

    def __init__(self, rm: ResourceManager, node_id: str = "n1") -> None:
        self.rm = rm
        self.node_id = node_id
        self.seq = 0

    def __call__(
        self,
        now: float,
        *,
        started: Iterable[ContainerStatus] = (),
        completed: Iterable[ContainerStatus] = (),
    ) -> Any:
        self.seq += 1
        hb = NodeHeartbeat(self.node_id, self.seq, list(started), list(completed))
        return self.rm.node_heartbeat(hb, now)


def of(rm: ResourceManager, event: str) -> list[dict[str, Any]]:
    return rm.log.of(event)


def job(*stages: tuple[str, int, tuple[str, ...]], duration: float = 10.0) -> JobSpec:
    """A job of stages (name, tasks, parents), each task SMALL for ``duration``."""
    return JobSpec(
        "job",
        "alice",
        0.0,
        tuple(StageSpec(n, SMALL, (duration,) * k, parents) for n, k, parents in stages),
    )


def grant(cid: str, priority: int, node: str = "n1", app: str = "app") -> Container:
    return Container(cid, app, node, priority, SMALL)


def done(
    cid: str, state: ContainerState = ContainerState.COMPLETE, exit_status: int = EXIT_SUCCESS
) -> ContainerStatus:
    return ContainerStatus(cid, state, exit_status, 0.0, 1.0)


def am_call(rm: ResourceManager, am: ApplicationMaster, now: float) -> list[ContainerLaunch]:
    """One Allocate round trip of ``am`` (the AM must see every answer: response ids)."""
    return am.on_allocate_response(rm.on_allocate(am.allocate_request(now), now), now)


def asks_by_priority(am: ApplicationMaster, now: float = 0.0) -> dict[int, int]:
    return {a.priority: a.count for a in am.allocate_request(now).asks if a.count}


# ----------------------------------------------------------------------------------
# RM: nodes
# ----------------------------------------------------------------------------------


def test_register_node_is_idempotent() -> None:
    rm = make_rm()
    rm.register_node(NodeRegistration("n1", NODE), 5.0)
    assert len(of(rm, ev.NODE_REGISTERED)) == 1
    assert rm.state.capacity == NODE
    assert rm.state.nodes["n1"].last_heartbeat_s == 5.0


@pytest.mark.parametrize(
    "reg",
    [
        NodeRegistration("n1", res(8, 8192)),
        NodeRegistration("n1", NODE, rack="other-rack"),
        NodeRegistration("n1", NODE + Resources(gpu=1)),
    ],
    ids=["other-resources", "other-rack", "extra-dimension"],
)
def test_conflicting_reregistration(reg: NodeRegistration) -> None:
    rm = make_rm()
    with pytest.raises(ConflictError):
        rm.register_node(reg, 1.0)
    assert rm.state.capacity == NODE
    assert len(of(rm, ev.NODE_REGISTERED)) == 1


@pytest.mark.parametrize(
    "resources",
    [ZERO, Resources(vcores=-1, memory_mb=1024)],
    ids=["zero", "negative"],
)
def test_register_node_needs_positive_resources(resources: Resources) -> None:
    rm = make_rm(nodes=())
    with pytest.raises(InvalidRequestError):
        rm.register_node(NodeRegistration("n1", resources), 0.0)
    assert not rm.state.nodes


def test_heartbeat_from_unknown_node_asks_for_resync() -> None:
    rm = make_rm()
    resp = rm.node_heartbeat(NodeHeartbeat("ghost", 1), 1.0)
    assert resp.resync
    assert resp.stop == []
    assert "ghost" not in rm.state.nodes


def test_heartbeat_from_lost_node_asks_for_resync_and_it_may_come_back() -> None:
    rm = make_rm()
    rm.lose_node("n1", 1.0)
    assert rm.node_heartbeat(NodeHeartbeat("n1", 1), 2.0).resync
    rm.register_node(NodeRegistration("n1", NODE), 3.0)
    assert rm.state.nodes["n1"].alive
    assert rm.state.capacity == NODE
    assert not rm.node_heartbeat(NodeHeartbeat("n1", 1), 4.0).resync


@pytest.mark.parametrize("late_seq", [1, 2], ids=["reordered", "duplicate"])
def test_out_of_order_heartbeat_is_ignored(late_seq: int) -> None:
    rm = make_rm()
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 1)]), 0.0)
    beat = Beater(rm)
    beat(1.0)  # seq 1: allocates the container
    (c,) = rm.state.apps[app].undelivered
    rm.node_heartbeat(NodeHeartbeat("n1", 2), 2.0)
    late = NodeHeartbeat(
        "n1",
        late_seq,
        started=[ContainerStatus(c.container_id, ContainerState.COMPLETE, 0, 1.0)],
        completed=[done(c.container_id)],
    )
    resp = rm.node_heartbeat(late, 3.0)
    assert not resp.resync
    node = rm.state.nodes["n1"]
    assert c.container_id in node.containers  # its report was not applied
    assert node.free == NODE - SMALL
    assert node.last_seq == 2
    assert node.last_heartbeat_s == 2.0
    assert not of(rm, ev.CONTAINER_FINISHED)
    assert not of(rm, ev.CONTAINER_STARTED)


def test_heartbeat_reports_started_and_completed_at_their_own_times() -> None:
    rm = make_rm()
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 1)]), 0.0)
    beat = Beater(rm)
    beat(1.0)
    (c,) = rm.on_allocate(AllocateRequest(app), 1.5).allocated
    beat(
        9.0,
        started=[ContainerStatus(c.container_id, ContainerState.COMPLETE, 0, 1.5)],
        completed=[ContainerStatus(c.container_id, ContainerState.COMPLETE, 0, 1.5, 8.5)],
    )
    assert [r["t"] for r in of(rm, ev.CONTAINER_STARTED)] == [1.5]
    (fin,) = of(rm, ev.CONTAINER_FINISHED)
    assert (fin["t"], fin["state"], fin["exit_status"]) == (8.5, "COMPLETE", 0)
    assert rm.state.nodes["n1"].free == NODE
    assert rm.state.used == ZERO
    resp = rm.on_allocate(AllocateRequest(app), 9.5)
    assert [s.container_id for s in resp.completed] == [c.container_id]


# ----------------------------------------------------------------------------------
# RM: applications and asks
# ----------------------------------------------------------------------------------


def test_allocate_for_unknown_application() -> None:
    rm = make_rm()
    with pytest.raises(NotFoundError):
        rm.on_allocate(AllocateRequest("application_99999"), 0.0)


@pytest.mark.parametrize("status", list(FinalStatus))
def test_allocate_after_finish_conflicts(status: FinalStatus) -> None:
    rm = make_rm()
    app = submit(rm)
    rm.finish_application(app, status, 1.0)
    with pytest.raises(ConflictError):
        rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 1)]), 2.0)
    with pytest.raises(ConflictError):
        rm.finish_application(app, status, 3.0)
    # A job that succeeds is logged as job_finished, one that does not as job_failed.
    (fin,) = of(rm, ev.JOB_FINISHED if status is FinalStatus.SUCCEEDED else ev.JOB_FAILED)
    assert fin["status"] == str(status)
    assert (of(rm, ev.JOB_FINISHED) == []) is (status is not FinalStatus.SUCCEEDED)
    assert (
        rm.reports.application(app).state
        == {
            FinalStatus.SUCCEEDED: "FINISHED",
            FinalStatus.FAILED: "FAILED",
            FinalStatus.KILLED: "KILLED",
        }[status]
    )


@pytest.mark.parametrize(
    ("queue", "user"),
    [("nope", "alice"), ("root", "alice"), ("default", "")],
    ids=["unknown-queue", "parent-queue", "no-user"],
)
def test_invalid_submission(queue: str, user: str) -> None:
    rm = make_rm()
    with pytest.raises(InvalidRequestError):
        rm.submit_application(AppSubmission("j", user, queue), 0.0)
    assert not rm.state.apps
    assert not of(rm, ev.JOB_SUBMITTED)


INVALID_ASKS: list[tuple[str, list[Ask]]] = [
    ("negative-count", [Ask(0, SMALL, -1)]),
    ("negative-resources", [Ask(0, Resources(vcores=-1, memory_mb=1024), 1)]),
    ("negative-priority", [Ask(-1, SMALL, 1)]),
    ("zero-resources", [Ask(0, ZERO, 1)]),
    ("larger-than-every-node", [Ask(0, res(5, 1024), 1)]),
    ("unknown-dimension", [Ask(0, res(1, 1024, gpu=1), 1)]),
    ("duplicate-priority", [Ask(0, SMALL, 1), Ask(0, SMALL, 2)]),
    ("valid-then-invalid", [Ask(1, SMALL, 3), Ask(2, SMALL, -1)]),
]


@pytest.mark.parametrize("asks", [a for _, a in INVALID_ASKS], ids=[i for i, _ in INVALID_ASKS])
def test_invalid_asks_are_refused_and_nothing_is_applied(asks: list[Ask]) -> None:
    # Two nodes, neither big enough for 5 vcores even though together they have 8.
    rm = make_rm(nodes=[("n1", NODE), ("n2", NODE)])
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, [Ask(7, SMALL, 1)]), 0.0)
    Beater(rm)(1.0)
    (c,) = rm.state.apps[app].undelivered
    before = dict(rm.state.apps[app].asks)
    n_records = len(rm.log)
    with pytest.raises(InvalidRequestError):
        rm.on_allocate(AllocateRequest(app, asks, releases=[c.container_id], progress=0.5), 2.0)
    a = rm.state.apps[app]
    assert a.asks == before
    assert a.pending == 0
    assert a.undelivered == [c]  # neither the release nor the delivery happened
    assert a.progress == 0.0
    assert c.container_id in a.containers
    assert len(rm.log) == n_records
    assert not rm.hints.has_pending


def test_ask_larger_than_a_lost_node_is_refused() -> None:
    rm = make_rm(nodes=[("big", res(8, 8192)), ("n1", NODE)])
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, [Ask(0, res(8, 1024), 1)]), 0.0)
    rm.lose_node("big", 1.0)
    with pytest.raises(InvalidRequestError):
        rm.on_allocate(AllocateRequest(app, [Ask(0, res(8, 1024), 2)]), 2.0)


def test_ask_count_replaces_and_zero_removes() -> None:
    rm = make_rm()
    app = submit(rm)
    a = rm.state.apps[app]
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 5), Ask(2, SMALL, 1)]), 0.0)
    assert {p: x.count for p, x in a.asks.items()} == {0: 5, 2: 1}
    assert a.pending == 6
    assert a.demand == SMALL * 6
    assert rm.hints.has_pending
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 3)]), 1.0)  # replaces, not adds
    assert {p: x.count for p, x in a.asks.items()} == {0: 3, 2: 1}
    assert a.pending == 4
    assert a.demand == SMALL * 4  # the cached demand follows the asks
    rm.on_allocate(AllocateRequest(app, [Ask(0, ZERO, 0)]), 2.0)  # count 0 removes
    assert {p: x.count for p, x in a.asks.items()} == {2: 1}
    rm.on_allocate(AllocateRequest(app, [Ask(2, ZERO, 0)]), 3.0)
    assert a.asks == {}
    assert a.pending == 0
    assert not rm.hints.has_pending
    assert a.demand == ZERO


@pytest.mark.parametrize(
    ("ask_again", "expected_outstanding"),
    [(3, 1), (2, 0), (1, 0), (5, 3)],
)
def test_undelivered_grants_are_subtracted(ask_again: int, expected_outstanding: int) -> None:
    rm = make_rm(nodes=[("n1", res(2, 8192))])
    app = submit(rm)
    a = rm.state.apps[app]
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 3)]), 0.0)
    assert a.demand == SMALL * 3
    Beater(rm)(1.0)  # the node has room for 2 of the 3
    assert len(a.undelivered) == 2
    assert a.asks[0].count == 1
    assert a.demand == SMALL  # and the placements
    # The AM has not seen the 2 grants yet and asks for ``ask_again`` in total.
    resp = rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, ask_again)]), 1.5)
    assert len(resp.allocated) == 2
    assert a.asks.get(0, Ask(0, SMALL, 0)).count == expected_outstanding
    assert a.pending == expected_outstanding
    assert a.undelivered == []
    # Once delivered, the grants are the AM's business: the next ask is taken as is.
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 2)]), 2.0)
    assert a.asks[0].count == 2


# A stage asked for as 1 DEFAULT (priority 0) + 3 ALTRUISTIC (priority 1) in group 1; the
# node takes 2 of the ALTRUISTIC ones. The AM, not having seen them, moves the stage's 4
# tasks to ``default`` DEFAULT + ``altruistic`` ALTRUISTIC: the 2 grants serve the group's
# most important ask first, so the stage is never asked for twice.
@pytest.mark.parametrize(
    ("default", "altruistic", "group", "expected"),
    [
        (4, 0, 1, {0: 2}),  # everything DEFAULT now: the 2 grants count against it
        (3, 1, 1, {0: 1, 1: 1}),
        (1, 3, 1, {1: 2}),  # DEFAULT first: 1 grant is its task, the other an ALTRUISTIC one
        (4, 0, 0, {0: 4}),  # no group: per priority, the moved tasks are asked twice
    ],
)
def test_undelivered_grants_count_against_their_ask_group(
    default: int, altruistic: int, group: int, expected: dict[int, int]
) -> None:
    # The node has room for 2; the policy grants the ALTRUISTIC ask (priority 1).
    policy = ScriptedPolicy(lambda n, c: [Placement(aid, 1) for aid in c.apps for _ in "xy"])
    rm = make_rm(policy, nodes=[("n1", res(2, 8192))])
    app = submit(rm)
    a = rm.state.apps[app]
    D, A = AskKind.DEFAULT, AskKind.ALTRUISTIC
    rm.on_allocate(
        AllocateRequest(app, [Ask(0, SMALL, 1, D, group=group), Ask(1, SMALL, 3, A, group=group)]),
        0.0,
    )
    Beater(rm)(1.0)
    assert [c.priority for c in a.undelivered] == [1, 1]
    asks = [Ask(0, SMALL, default, D, group=group)]
    asks.append(
        Ask(1, SMALL, altruistic, A, group=group) if altruistic else Ask(1, ZERO, 0, group=group)
    )
    resp = rm.on_allocate(AllocateRequest(app, asks), 1.5)
    assert len(resp.allocated) == 2
    assert {p: x.count for p, x in a.asks.items()} == expected
    assert a.pending == sum(expected.values())


def test_an_ask_group_pools_one_shape_only() -> None:
    rm = make_rm()
    app = submit(rm)
    with pytest.raises(InvalidRequestError, match="group 1 pools interchangeable tasks"):
        rm.on_allocate(
            AllocateRequest(app, [Ask(0, SMALL, 1, group=1), Ask(1, res(2, 1024), 1, group=1)]),
            0.0,
        )
    assert rm.state.apps[app].asks == {}  # nothing half-applied
    with pytest.raises(InvalidRequestError, match="group must be >= 0"):
        rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 1, group=-1)]), 0.0)


def test_am_withdraws_an_ask_in_its_group() -> None:
    class Scripted(AskStrategy):
        def __init__(self) -> None:
            super().__init__()
            self.out = [Ask(0, SMALL, 1, group=1), Ask(1, SMALL, 2, AskKind.ALTRUISTIC, group=1)]

        def asks(self, progress: Any, now: float) -> list[Ask]:
            return self.out

    spec = JobSpec("job", "alice", 0.0, (StageSpec("a", SMALL, (1.0, 1.0, 1.0)),))
    strategy = Scripted()
    am = ApplicationMaster(spec, "app", strategy)
    am.allocate_request(0.0)
    strategy.out = [Ask(0, SMALL, 3, group=1)]
    assert am.allocate_request(1.0).asks == [Ask(0, SMALL, 3, group=1), Ask(1, ZERO, 0, group=1)]


def test_allocate_response_carries_cluster_and_node_count() -> None:
    rm = make_rm(nodes=[("n1", NODE), ("n2", NODE)])
    app = submit(rm)
    resp = rm.on_allocate(AllocateRequest(app), 0.0)
    assert (resp.cluster, resp.num_nodes, resp.share) == (NODE * 2, 2, None)
    rm.lose_node("n2", 1.0)
    resp = rm.on_allocate(AllocateRequest(app), 2.0)
    assert (resp.cluster, resp.num_nodes) == (NODE, 1)


def test_release_of_an_undelivered_container() -> None:
    rm = make_rm()
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 2)]), 0.0)
    beat = Beater(rm)
    beat(1.0)
    a = rm.state.apps[app]
    c1, c2 = a.undelivered
    resp = rm.on_allocate(AllocateRequest(app, releases=[c1.container_id]), 2.0)
    assert resp.allocated == [c2]  # the released one is not delivered
    node = rm.state.nodes["n1"]
    assert set(node.containers) == {c2.container_id}
    assert node.free == NODE - SMALL
    assert a.allocated == SMALL
    assert rm.state.used == SMALL
    (rel,) = of(rm, ev.CONTAINER_RELEASED)
    assert (rel["t"], rel["container"], rel["node"]) == (2.0, c1.container_id, "n1")
    assert not of(rm, ev.CONTAINER_FINISHED)
    # The NM is told to stop it on its next heartbeat (a no-op there: it never started).
    assert list(rm.take_effects().touched_nodes) == ["n1"]
    assert beat(3.0).stop == [c1.container_id]


def test_release_of_a_running_container_is_a_kill() -> None:
    rm = make_rm()
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 1)]), 0.0)
    beat = Beater(rm)
    beat(1.0)
    (c,) = rm.on_allocate(AllocateRequest(app), 1.0).allocated
    beat(2.0, started=[ContainerStatus(c.container_id, ContainerState.COMPLETE, 0, 1.0)])
    rm.on_allocate(AllocateRequest(app, releases=[c.container_id]), 3.0)
    (fin,) = of(rm, ev.CONTAINER_FINISHED)
    assert (fin["state"], fin["exit_status"]) == ("KILLED", EXIT_ABORTED)
    assert not of(rm, ev.CONTAINER_RELEASED)
    assert beat(4.0).stop == [c.container_id]


def test_release_of_an_unknown_container_is_ignored() -> None:
    rm = make_rm()
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, releases=["container_99999_000001"]), 0.0)
    assert not of(rm, ev.CONTAINER_RELEASED)


def test_finish_kills_held_containers_and_drops_asks() -> None:
    rm = make_rm()
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 2), Ask(2, SMALL, 5)]), 0.0)
    Beater(rm)(1.0)
    assert rm.state.used != ZERO
    rm.finish_application(app, FinalStatus.KILLED, 2.0)
    assert rm.state.used == ZERO
    assert rm.state.nodes["n1"].free == NODE
    assert not rm.hints.has_pending
    assert len(of(rm, ev.CONTAINER_RELEASED)) == len(of(rm, ev.CONTAINER_ALLOCATED))


def test_allocate_before_the_am_registers_conflicts() -> None:
    rm = make_rm()
    app = rm.submit_application(AppSubmission("j", "alice", "default", 1), 0.0)
    with pytest.raises(ConflictError, match="no registered AM"):
        rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 1)]), 0.0)
    assert rm.register_application_master(app, 0.5).attempt == 1
    assert rm.register_application_master(app, 0.6).attempt == 1  # idempotent
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 1)]), 1.0)
    assert [r["attempt"] for r in of(rm, ev.ATTEMPT_STARTED)] == [1]


def test_allocate_replay_returns_the_last_answer_and_out_of_sync_conflicts() -> None:
    rm = make_rm()
    app = submit(rm)
    first = rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 2)], response_id=0), 0.0)
    assert first.response_id == 1
    Beater(rm)(1.0)
    # The AM never got ``first``: it sends response id 0 again and gets ``first`` back,
    # with no grants in it; the grants wait for its next call.
    again = rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 2)], response_id=0), 1.5)
    assert again is first
    assert again.allocated == []
    nxt = rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 2)], response_id=1), 2.0)
    assert (nxt.response_id, len(nxt.allocated)) == (2, 2)
    assert rm.state.apps[app].pending == 0  # the 2 undelivered grants were subtracted
    with pytest.raises(ConflictError, match="out of sync"):
        rm.on_allocate(AllocateRequest(app, response_id=7), 3.0)


def test_failed_attempt_restarts_with_the_completed_tasks() -> None:
    rm = ResourceManager(FifoPolicy(), max_am_attempts=2)
    rm.register_node(NodeRegistration("n1", NODE), 0.0)
    spec = job(("a", 3, ()), ("b", 1, ("a",)))
    app = rm.submit_application(AppSubmission("j", "alice", "default", spec.tasks, job=spec), 0.0)
    reg = rm.register_application_master(app, 0.0)
    assert (reg.attempt, reg.completed_tasks, reg.job) == (1, (), spec)
    am = ApplicationMaster(spec, app, GreedyAsks(), attempt=reg.attempt)
    am_call(rm, am, 0.0)
    beat = Beater(rm)
    beat(1.0)
    launches = am_call(rm, am, 1.0)
    first, *others = [x.container_id for x in launches]
    beat(
        3.0,
        started=[
            ContainerStatus(x.container_id, ContainerState.COMPLETE, 0, 1.0) for x in launches
        ],
        completed=[ContainerStatus(first, ContainerState.COMPLETE, 0, 1.0, 2.0)],
    )
    am_call(rm, am, 3.0)
    am_call(rm, am, 3.5)  # reports task (0, 0) done

    rm.fail_attempt(app, "AM crashed", 4.0)
    killed = [r for r in of(rm, ev.CONTAINER_FINISHED) if r["state"] == "KILLED"]
    assert sorted(r["container"] for r in killed) == sorted(others)
    assert rm.state.used == ZERO
    assert not rm.hints.has_pending
    with pytest.raises(ConflictError):
        am_call(rm, am, 4.5)  # the dead attempt is refused

    reg = rm.register_application_master(app, 5.0)
    assert (reg.attempt, reg.completed_tasks) == (2, ((0, 0),))
    with pytest.raises(ConflictError, match="replaced"):
        am_call(rm, am, 5.0)  # the first attempt, still calling, is refused
    second = ApplicationMaster(
        spec, app, GreedyAsks(), attempt=reg.attempt, completed_tasks=reg.completed_tasks
    )
    assert asks_by_priority(second) == {0: 2}

    rm.fail_attempt(app, "AM crashed again", 6.0)
    (fin,) = of(rm, ev.JOB_FAILED)
    assert fin["status"] == "FAILED"
    assert "AM crashed again" in fin["diagnostics"]
    assert [r["attempt"] for r in of(rm, ev.ATTEMPT_FAILED)] == [1, 2]
    assert "AM crashed again" in rm.reports.application(app).diagnostics


def test_managed_am_gets_a_container_first_and_its_exit_fails_the_attempt() -> None:
    am_res = res(1, 512)
    rm = ResourceManager(FifoPolicy(), max_am_attempts=1, am_resources=am_res)
    rm.register_node(NodeRegistration("n1", NODE), 0.0)
    app = rm.submit_application(AppSubmission("j", "alice", "default", 1, managed_am=True), 0.0)
    assert rm.hints.has_pending
    assert rm.state.apps[app].asks[-1] == Ask(-1, am_res, 1)
    Beater(rm)(1.0)
    (amc,) = rm.take_effects().am_launches
    assert (amc.node_id, amc.resources) == ("n1", am_res)
    assert rm.state.apps[app].undelivered == []  # not given to the AM as a task container
    assert rm.state.nodes["n1"].free == NODE - am_res
    rm.register_application_master(app, 2.0)
    beat = Beater(rm)
    beat.seq = 1  # the first Beater used seq 1
    beat(
        5.0,
        started=[ContainerStatus(amc.container_id, ContainerState.COMPLETE, 0, 1.5)],
        completed=[ContainerStatus(amc.container_id, ContainerState.FAILED, 1, 1.5, 4.0)],
    )
    assert [r["reason"] for r in of(rm, ev.ATTEMPT_FAILED)] == ["AM container exited (FAILED, 1)"]
    (fin,) = of(rm, ev.JOB_FAILED)
    assert fin["status"] == "FAILED"
    assert rm.state.used == ZERO


def test_an_am_that_dies_before_registering_uses_up_its_attempt() -> None:
    """An AM container that exits before its AM registers (the AM cannot start) is a
    failed attempt as YARN counts it: with two attempts allowed the job fails after the
    second, instead of asking for AM containers for ever."""
    rm = ResourceManager(FifoPolicy(), max_am_attempts=2, am_resources=res(1, 512))
    rm.register_node(NodeRegistration("n1", NODE), 0.0)
    app = rm.submit_application(AppSubmission("j", "alice", "default", 1, managed_am=True), 0.0)
    beat = Beater(rm)
    for t in (1.0, 3.0):
        beat(t)
        (amc,) = rm.take_effects().am_launches
        beat(t + 1.0, completed=[ContainerStatus(amc.container_id, ContainerState.FAILED, 1, t, t)])
    assert [r["attempt"] for r in of(rm, ev.ATTEMPT_FAILED)] == [1, 2]
    (fin,) = of(rm, ev.JOB_FAILED)
    assert fin["status"] == "FAILED"
    assert rm.reports.application(app).state == "FAILED"
    assert rm.state.used == ZERO


def test_a_lost_node_does_not_use_up_an_am_attempt() -> None:
    """YARN-614: the AM container's node lost is no failure of the AM: with one attempt
    allowed, the job gets a second AM container (attempt 2) instead of failing."""
    am_res = res(1, 512)
    rm = ResourceManager(FifoPolicy(), max_am_attempts=1, am_resources=am_res)
    rm.register_node(NodeRegistration("n1", NODE), 0.0)
    app = rm.submit_application(AppSubmission("j", "alice", "default", 1, managed_am=True), 0.0)
    Beater(rm)(1.0)
    (amc,) = rm.take_effects().am_launches
    rm.register_application_master(app, 2.0)
    rm.lose_node("n1", 3.0)
    assert [r["reason"] for r in of(rm, ev.ATTEMPT_FAILED)] == ["AM container exited (LOST, -100)"]
    assert of(rm, ev.JOB_FAILED) == []
    assert rm.state.apps[app].asks[-1] == Ask(-1, am_res, 1)  # a new AM container asked
    rm.register_node(NodeRegistration("n2", NODE), 4.0)
    Beater(rm, "n2")(5.0)
    (again,) = rm.take_effects().am_launches
    assert again.node_id == "n2"
    assert again.container_id != amc.container_id
    assert rm.register_application_master(app, 6.0).attempt == 2


@pytest.mark.parametrize(
    ("state", "exit_status", "counts"),
    [
        (ContainerState.FAILED, 1, True),  # the AM's own failure
        (ContainerState.FAILED, 137, True),  # its process killed (kill -9): YARN counts it
        (ContainerState.KILLED, -105, True),  # KILLED_BY_APPMASTER: not in YARN's list
        (ContainerState.KILLED, -100, False),  # ABORTED: released, or its node lost
        (ContainerState.FAILED, -101, False),  # DISKS_FAILED
        (ContainerState.KILLED, -102, False),  # PREEMPTED
        (ContainerState.KILLED, -106, False),  # KILLED_BY_RESOURCEMANAGER
    ],
)
def test_an_am_containers_exit_status_decides_whether_the_attempt_counts(
    state: ContainerState, exit_status: int, counts: bool
) -> None:
    """YARN's shouldCountTowardsMaxAttemptRetry: with one attempt allowed, an AM container
    ending with an exit status of YARN's list is retried, any other fails the job."""
    rm = ResourceManager(FifoPolicy(), max_am_attempts=1, am_resources=res(1, 512))
    rm.register_node(NodeRegistration("n1", NODE), 0.0)
    app = rm.submit_application(AppSubmission("j", "alice", "default", 1, managed_am=True), 0.0)
    Beater(rm)(1.0)
    (amc,) = rm.take_effects().am_launches
    rm.register_application_master(app, 2.0)
    beat = Beater(rm)
    beat.seq = 1
    beat(
        5.0,
        started=[ContainerStatus(amc.container_id, ContainerState.COMPLETE, 0, 1.5)],
        completed=[ContainerStatus(amc.container_id, state, exit_status, 1.5, 4.0)],
    )
    assert len(of(rm, ev.ATTEMPT_FAILED)) == 1
    assert len(of(rm, ev.JOB_FAILED)) == (1 if counts else 0)
    assert rm.reports.application(app).state == ("FAILED" if counts else "RUNNING")


# ----------------------------------------------------------------------------------
# RM: faulty policies
# ----------------------------------------------------------------------------------

BAD_PLACEMENTS: list[tuple[str, Callable[[str], Any], str]] = [
    ("unknown-app", lambda app: Placement("application_99999", 0), "unknown or finished"),
    ("wrong-priority", lambda app: Placement(app, 4), "no outstanding ask"),
    ("does-not-fit", lambda app: Placement(app, 2), "does not fit"),
    ("not-a-placement", lambda app: (app, 0), "not a Placement"),
]


@pytest.mark.parametrize(
    ("make", "reason"),
    [(m, r) for _, m, r in BAD_PLACEMENTS],
    ids=[i for i, _, _ in BAD_PLACEMENTS],
)
def test_bad_placements_are_rejected_and_logged(make: Callable[[str], Any], reason: str) -> None:
    holder: dict[str, str] = {}
    policy = ScriptedPolicy(lambda node, cluster: [make(holder["app"])])
    rm = make_rm(policy, nodes=[("n1", NODE), ("big", res(8, 8192))])
    app = holder["app"] = submit(rm)
    # Priority 2 asks for 8 vcores: it fits the node "big" but not "n1".
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 1), Ask(2, res(8, 1024), 1)]), 0.0)
    a = rm.state.apps[app]
    asks_before = dict(a.asks)
    resp = Beater(rm, "n1")(1.0)
    assert policy.calls == 1
    assert resp.stop == []
    (rej,) = of(rm, ev.PLACEMENT_REJECTED)
    assert reason in rej["reason"]
    assert (rej["t"], rej["node"]) == (1.0, "n1")
    assert rm.reports.rejected_placements == 1
    assert a.asks == asks_before
    assert a.undelivered == []
    assert rm.state.nodes["n1"].free == NODE
    assert rm.state.used == ZERO
    assert not of(rm, ev.CONTAINER_ALLOCATED)


def test_placement_for_a_finished_application_is_rejected() -> None:
    holder: dict[str, str] = {}
    policy = ScriptedPolicy(lambda node, cluster: [Placement(holder["done"], 0)])
    rm = make_rm(policy)
    holder["done"] = submit(rm, "a")
    rm.on_allocate(AllocateRequest(holder["done"], [Ask(0, SMALL, 1)]), 0.0)
    rm.finish_application(holder["done"], FinalStatus.SUCCEEDED, 0.5)
    other = submit(rm, "b")
    rm.on_allocate(AllocateRequest(other, [Ask(0, SMALL, 1)]), 0.5)
    Beater(rm)(1.0)
    (rej,) = of(rm, ev.PLACEMENT_REJECTED)
    assert "unknown or finished" in rej["reason"]
    assert not of(rm, ev.CONTAINER_ALLOCATED)


def test_good_placements_after_bad_ones_still_apply() -> None:
    holder: dict[str, str] = {}
    policy = ScriptedPolicy(
        lambda node, cluster: [Placement("nope", 0), Placement(holder["app"], 0)]
    )
    rm = make_rm(policy)
    holder["app"] = submit(rm)
    rm.on_allocate(AllocateRequest(holder["app"], [Ask(0, SMALL, 1)]), 0.0)
    Beater(rm)(1.0)
    assert len(of(rm, ev.PLACEMENT_REJECTED)) == 1
    assert len(of(rm, ev.CONTAINER_ALLOCATED)) == 1


def test_an_endless_stream_of_bad_placements_is_cut_off() -> None:
    def forever(node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        while True:
            yield Placement("nope", 0)

    rm = make_rm(ScriptedPolicy(forever))
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 1)]), 0.0)
    Beater(rm)(1.0)
    assert rm.reports.rejected_placements == MAX_REJECTIONS_PER_HEARTBEAT


def test_placements_stop_when_nothing_is_pending() -> None:
    calls: list[int] = []

    def greedy(node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        for app in list(cluster.pending_apps()):
            for _ in range(10):
                calls.append(1)
                yield Placement(app.app_id, 0)

    rm = make_rm(ScriptedPolicy(greedy))
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 2)]), 0.0)
    Beater(rm)(1.0)
    assert len(calls) == 2  # the RM stopped consuming once the asks were satisfied
    assert not of(rm, ev.PLACEMENT_REJECTED)


class _Boom(RuntimeError):
    pass


def _raise_once() -> Callable[[NodeView, ClusterView], Iterator[Placement]]:
    state = {"raised": False}

    def script(node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        if not state["raised"]:
            state["raised"] = True
            raise _Boom("policy bug")
        for app in cluster.pending_apps():
            yield Placement(app.app_id, 0)

    return script


def test_policy_that_raises_is_a_plugin_error() -> None:
    rm = make_rm(ScriptedPolicy(_raise_once()))
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 1)]), 0.0)
    with pytest.raises(PluginError, match=r"policy .* failed on the heartbeat of node 'n1'") as ei:
        Beater(rm)(1.0)
    assert isinstance(ei.value.__cause__, _Boom)
    assert rm.reports.policy_failures == 1
    assert rm.state.apps[app].asks[0].count == 1
    assert rm.state.nodes["n1"].free == NODE


def test_policy_that_raises_is_logged_and_the_rm_keeps_working() -> None:
    rm = make_rm(ScriptedPolicy(_raise_once()), policy_errors="log")
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 1)]), 0.0)
    beat = Beater(rm)
    resp = beat(1.0)  # the policy raises: logged, nothing placed
    assert not resp.resync
    assert rm.reports.policy_failures == 1
    assert not of(rm, ev.CONTAINER_ALLOCATED)
    beat(2.0)  # the policy behaves again
    assert len(of(rm, ev.CONTAINER_ALLOCATED)) == 1
    assert len(rm.on_allocate(AllocateRequest(app), 2.5).allocated) == 1


def test_policy_errors_must_be_raise_or_log() -> None:
    with pytest.raises(ValueError, match="policy_errors"):
        ResourceManager(FifoPolicy(), policy_errors="ignore")


# ----------------------------------------------------------------------------------
# RM: lost nodes and preemption
# ----------------------------------------------------------------------------------


def test_lost_node_fails_its_containers_and_the_am_asks_again() -> None:
    rm = make_rm(nodes=[("n1", NODE), ("n2", NODE)])
    spec = job(("map", 3, ()))
    app = submit(rm, tasks=spec.tasks)
    am = ApplicationMaster(spec, app, GreedyAsks())
    am_call(rm, am, 0.0)
    Beater(rm, "n1")(1.0)  # all three land on n1
    launches = am_call(rm, am, 1.0)
    assert {launch.node_id for launch in launches} == {"n1"}
    assert len(launches) == 3
    assert am_call(rm, am, 1.5) == []
    assert not rm.hints.has_pending

    rm.lose_node("n1", 2.0)
    lost = of(rm, ev.CONTAINER_FINISHED)
    assert len(lost) == 3
    assert {(r["state"], r["exit_status"]) for r in lost} == {("LOST", EXIT_LOST_NODE)}
    assert of(rm, ev.NODE_LOST) == [{"t": 2.0, "event": ev.NODE_LOST, "node": "n1"}]
    assert rm.state.capacity == NODE
    assert rm.state.used == ZERO
    assert rm.state.nodes["n1"].free == ZERO
    assert not rm.hints.could_place_on("n1")

    resp = rm.on_allocate(am.allocate_request(2.5), 2.5)
    assert {s.state for s in resp.completed} == {ContainerState.LOST}
    am.on_allocate_response(resp, 2.5)
    req = am.allocate_request(3.0)
    assert [(a.priority, a.count) for a in req.asks] == [(priority_of(0, AskKind.DEFAULT), 3)]
    am.on_allocate_response(rm.on_allocate(req, 3.0), 3.0)
    Beater(rm, "n2")(4.0)
    relaunched = am_call(rm, am, 4.0)
    assert {launch.node_id for launch in relaunched} == {"n2"}
    assert len(relaunched) == 3


def test_a_new_incarnation_of_a_live_node_ends_its_containers_as_lost() -> None:
    """An NM restarted before its node expired registers again: the old incarnation's
    containers end LOST (ABORTED -100), the node stays up and its tasks run again."""
    rm = make_rm()
    spec = job(("map", 3, ()))
    app = submit(rm, tasks=spec.tasks)
    am = ApplicationMaster(spec, app, GreedyAsks())
    am_call(rm, am, 0.0)
    Beater(rm, "n1")(1.0)
    assert len(am_call(rm, am, 1.0)) == 3

    rm.register_node(NodeRegistration("n1", NODE), 2.0)  # the restarted NM
    lost = of(rm, ev.CONTAINER_FINISHED)
    assert len(lost) == 3
    assert {(r["state"], r["exit_status"]) for r in lost} == {("LOST", EXIT_LOST_NODE)}
    assert of(rm, ev.NODE_LOST) == []  # the node never went silent
    assert len(of(rm, ev.NODE_REGISTERED)) == 1
    node = rm.state.nodes["n1"]
    assert node.alive
    assert node.free == NODE
    assert not node.containers
    assert rm.state.used == ZERO

    resp = rm.on_allocate(am.allocate_request(2.5), 2.5)
    assert {s.state for s in resp.completed} == {ContainerState.LOST}
    am.on_allocate_response(resp, 2.5)
    am.on_allocate_response(rm.on_allocate(am.allocate_request(3.0), 3.0), 3.0)
    beat = Beater(rm, "n1")  # the new incarnation counts its heartbeats from 1
    beat(4.0)
    assert len(am_call(rm, am, 4.0)) == 3  # the three tasks run again


def test_lose_node_twice_or_unknown_is_a_no_op() -> None:
    rm = make_rm()
    rm.lose_node("n1", 1.0)
    rm.lose_node("n1", 2.0)
    rm.lose_node("ghost", 2.0)
    assert len(of(rm, ev.NODE_LOST)) == 1


def test_expire_nodes_loses_silent_nodes() -> None:
    rm = ResourceManager(FifoPolicy(), heartbeat_s=1.0)  # expiry: 10 heartbeats
    rm.register_node(NodeRegistration("n1", NODE), 0.0)
    rm.register_node(NodeRegistration("n2", NODE), 0.0)
    rm.node_heartbeat(NodeHeartbeat("n2", 1), 9.0)
    assert rm.expire_nodes(10.0) == []
    assert rm.expire_nodes(10.5) == ["n1"]
    assert rm.state.nodes["n2"].alive


def test_preempt_container_frees_it_and_stops_it() -> None:
    rm = make_rm()
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 1)]), 0.0)
    Beater(rm)(1.0)
    (c,) = rm.on_allocate(AllocateRequest(app), 1.0).allocated
    assert rm.preempt_container(c.container_id, 2.0)
    assert not rm.preempt_container(c.container_id, 2.0)
    (fin,) = of(rm, ev.CONTAINER_FINISHED)
    assert (fin["state"], fin["exit_status"]) == ("PREEMPTED", EXIT_PREEMPTED)
    assert rm.state.nodes["n1"].free == NODE
    assert list(rm.take_effects().touched_nodes) == ["n1"]
    resp = rm.on_allocate(AllocateRequest(app), 2.5)
    assert [s.state for s in resp.completed] == [ContainerState.PREEMPTED]


# ----------------------------------------------------------------------------------
# NM
# ----------------------------------------------------------------------------------


def launch(cid: str, duration: float, resources: Resources = SMALL) -> ContainerLaunch:
    return ContainerLaunch(cid, "app", "n1", resources, duration)


def beat_nm(nm: NodeManager, now: float) -> NodeHeartbeat:
    """One heartbeat that the RM answered (so the NM drops what it reported)."""
    hb = nm.heartbeat(now)
    nm.acknowledge(hb.seq)
    return hb


def test_nm_reports_started_and_completed_with_exact_times() -> None:
    nm = NodeManager("n1", NODE)
    nm.start_container(launch("c1", 5.0), 1.25)
    nm.start_container(launch("c2", 2.0), 1.5)
    assert nm.next_finish_s == 3.5
    hb = beat_nm(nm, 2.0)
    assert hb.seq == 1
    assert [(s.container_id, s.start_s) for s in hb.started] == [("c1", 1.25), ("c2", 1.5)]
    assert hb.completed == []
    hb = beat_nm(nm, 4.0)
    assert hb.seq == 2
    assert hb.started == []
    assert [
        (s.container_id, s.state, s.exit_status, s.start_s, s.finish_s) for s in hb.completed
    ] == [("c2", ContainerState.COMPLETE, EXIT_SUCCESS, 1.5, 3.5)]
    assert nm.next_finish_s == 6.25
    assert nm.used == SMALL
    hb = beat_nm(nm, 6.25)  # a finish exactly at the heartbeat is reported by it
    assert [(s.container_id, s.finish_s) for s in hb.completed] == [("c1", 6.25)]
    assert nm.used == ZERO
    assert nm.next_finish_s == float("inf")
    assert beat_nm(nm, 7.0).completed == []


def test_nm_stop_reports_killed_and_frees() -> None:
    nm = NodeManager("n1", NODE)
    nm.start_container(launch("c1", 10.0), 0.0)
    assert nm.stop_container("c1", 3.0)
    assert not nm.stop_container("c1", 3.0)
    assert not nm.stop_container("never", 3.0)
    assert nm.used == ZERO
    assert nm.next_finish_s == float("inf")
    hb = beat_nm(nm, 20.0)
    assert [(s.state, s.exit_status, s.start_s, s.finish_s) for s in hb.completed] == [
        (ContainerState.KILLED, EXIT_ABORTED, 0.0, 3.0)
    ]


def test_nm_start_and_finish_in_one_heartbeat() -> None:
    nm = NodeManager("n1", NODE)
    nm.start_container(launch("c1", 0.0), 1.0)
    hb = beat_nm(nm, 1.0)
    assert [s.container_id for s in hb.started] == ["c1"]
    assert [(s.container_id, s.finish_s) for s in hb.completed] == [("c1", 1.0)]


@pytest.mark.parametrize(
    ("first", "second", "error"),
    [
        (res(3, 1024), res(2, 1024), InvalidRequestError),
        (res(1, 8000), res(1, 1024), InvalidRequestError),
        (None, res(1, 1024, gpu=1), InvalidRequestError),
        (None, res(5, 1024), InvalidRequestError),
    ],
    ids=["vcores", "memory", "missing-dimension", "alone-too-big"],
)
def test_nm_refuses_over_capacity(
    first: Resources | None, second: Resources, error: type[Exception]
) -> None:
    nm = NodeManager("n1", NODE)
    if first is not None:
        nm.start_container(launch("c1", 5.0, first), 0.0)
    used = nm.used
    with pytest.raises(error):
        nm.start_container(launch("c2", 5.0, second), 1.0)
    assert nm.used == used
    assert "c2" not in nm.running
    assert [s.container_id for s in beat_nm(nm, 2.0).started] == (["c1"] if first else [])


@pytest.mark.parametrize(
    ("duration", "error"),
    [(-1.0, InvalidRequestError), (float("nan"), InvalidRequestError)],
    ids=["negative", "nan"],
)
def test_nm_refuses_bad_durations(duration: float, error: type[Exception]) -> None:
    nm = NodeManager("n1", NODE)
    with pytest.raises(error):
        nm.start_container(launch("c1", duration), 0.0)


def test_nm_refuses_a_duplicate_container() -> None:
    nm = NodeManager("n1", NODE)
    nm.start_container(launch("c1", 5.0), 0.0)
    with pytest.raises(ConflictError):
        nm.start_container(launch("c1", 5.0), 1.0)
    assert nm.used == SMALL


def test_nm_resends_reports_until_acknowledged() -> None:
    nm = NodeManager("n1", NODE)
    nm.start_container(launch("c1", 1.0), 0.0)
    lost = nm.heartbeat(2.0)  # never answered
    again = nm.heartbeat(3.0)
    assert again.seq == lost.seq + 1
    assert [s.container_id for s in again.started] == ["c1"]
    assert [s.container_id for s in again.completed] == ["c1"]
    nm.acknowledge(lost.seq)  # a stale acknowledgement drops nothing
    assert [s.container_id for s in nm.heartbeat(4.0).completed] == ["c1"]
    nm.start_container(launch("c2", 1.0), 4.0)  # reported after the heartbeat in flight
    nm.acknowledge(nm.seq)
    hb = nm.heartbeat(6.0)
    assert [s.container_id for s in hb.started] == ["c2"]
    assert [s.container_id for s in hb.completed] == ["c2"]


def test_nm_duplicate_reports_are_applied_once_by_the_rm() -> None:
    rm = make_rm()
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 1)]), 0.0)
    Beater(rm)(0.5)
    (c,) = rm.on_allocate(AllocateRequest(app), 0.5).allocated
    nm = NodeManager("n1", NODE)
    nm.seq = 1  # the Beater used seq 1
    nm.start_container(ContainerLaunch(c.container_id, app, "n1", SMALL, 1.0), 0.5)
    rm.node_heartbeat(nm.heartbeat(2.0), 2.0)  # answered, but the answer is lost
    rm.node_heartbeat(nm.heartbeat(3.0), 3.0)  # the same reports again
    assert len(of(rm, ev.CONTAINER_STARTED)) == 1
    assert len(of(rm, ev.CONTAINER_FINISHED)) == 1
    assert rm.state.nodes["n1"].free == NODE


def test_nm_registration() -> None:
    nm = NodeManager("n1", NODE, rack="r7")
    assert nm.registration("10.0.0.1:8041") == NodeRegistration("n1", NODE, "r7", "10.0.0.1:8041")


# ----------------------------------------------------------------------------------
# AM
# ----------------------------------------------------------------------------------


def respond(
    allocated: Iterable[Container] = (), completed: Iterable[ContainerStatus] = ()
) -> AllocateResponse:
    return AllocateResponse(list(allocated), list(completed))


def run_stage_to_completion(am: ApplicationMaster, stage: int, first_cid: int) -> int:
    """Grant, launch and complete every task the AM asks for at ``stage``."""
    p = priority_of(stage, AskKind.DEFAULT)
    n = asks_by_priority(am)[p]
    grants = [grant(f"c{first_cid + i}", p) for i in range(n)]
    am.on_allocate_response(respond(grants), 1.0)
    am.on_allocate_response(respond(completed=[done(g.container_id) for g in grants]), 2.0)
    return first_cid + n


DAGS: list[tuple[str, tuple[tuple[str, int, tuple[str, ...]], ...], list[set[int]]]] = [
    # (id, stages, the stages asked for in each round when each round completes them all)
    ("chain", (("a", 2, ()), ("b", 1, ("a",)), ("c", 3, ("b",))), [{0}, {1}, {2}]),
    ("fork", (("a", 1, ()), ("b", 2, ("a",)), ("c", 1, ("a",))), [{0}, {1, 2}]),
    ("join", (("a", 2, ()), ("b", 1, ()), ("c", 2, ("a", "b"))), [{0, 1}, {2}]),
    (
        "diamond",
        (("a", 1, ()), ("b", 2, ("a",)), ("c", 1, ("a",)), ("d", 1, ("b", "c"))),
        [{0}, {1, 2}, {3}],
    ),
]


@pytest.mark.parametrize(
    ("stages", "rounds"), [(s, r) for _, s, r in DAGS], ids=[i for i, _, _ in DAGS]
)
def test_am_asks_stage_by_stage_through_the_dag(
    stages: tuple[tuple[str, int, tuple[str, ...]], ...], rounds: list[set[int]]
) -> None:
    spec = job(*stages)
    am = ApplicationMaster(spec, "app", GreedyAsks())
    cid = 0
    for expected in rounds:
        asked = asks_by_priority(am)
        assert {p // 2 for p in asked} == expected
        assert all(asked[priority_of(s, AskKind.DEFAULT)] == spec.stages[s].tasks for s in expected)
        for s in sorted(expected):
            cid = run_stage_to_completion(am, s, cid)
    assert am.finished
    assert am.final_status is FinalStatus.SUCCEEDED
    assert am.progress == 1.0
    assert am.remaining_work_s == 0.0
    assert all(a.count == 0 for a in am.allocate_request(9.0).asks)  # withdrawals only
    assert am.allocate_request(10.0).asks == []


def test_am_child_waits_for_every_parent_task() -> None:
    spec = job(("a", 3, ()), ("b", 2, ("a",)))
    am = ApplicationMaster(spec, "app", GreedyAsks())
    grants = [grant(f"c{i}", 0) for i in range(3)]
    am.on_allocate_response(respond(grants), 1.0)
    for i in range(2):
        am.on_allocate_response(respond(completed=[done(f"c{i}")]), 2.0 + i)
        assert am.runnable_stages() == []
        assert asks_by_priority(am) == {}  # 2 of 3 parent tasks done: no child ask yet
    am.on_allocate_response(respond(completed=[done("c2")]), 5.0)
    assert asks_by_priority(am) == {priority_of(1, AskKind.DEFAULT): 2}


def test_am_withdraws_an_ask_it_no_longer_makes() -> None:
    am = ApplicationMaster(job(("a", 2, ())), "app", GreedyAsks())
    assert asks_by_priority(am) == {0: 2}
    am.on_allocate_response(respond([grant("c0", 0), grant("c1", 0)]), 1.0)
    req = am.allocate_request(1.0)
    assert [(a.priority, a.count) for a in req.asks] == [(0, 0)]
    assert am.allocate_request(2.0).asks == []  # withdrawn once only


@pytest.mark.parametrize(
    ("state", "exit_status"),
    [
        (ContainerState.FAILED, 1),
        (ContainerState.LOST, EXIT_LOST_NODE),
        (ContainerState.KILLED, EXIT_ABORTED),
        (ContainerState.PREEMPTED, EXIT_PREEMPTED),
        (ContainerState.COMPLETE, 137),
    ],
    ids=["failed", "lost", "killed", "preempted", "complete-nonzero-exit"],
)
def test_am_reasks_a_failed_task(state: ContainerState, exit_status: int) -> None:
    spec = JobSpec("job", "alice", 0.0, (StageSpec("a", SMALL, (4.0, 7.0)),))
    am = ApplicationMaster(spec, "app", GreedyAsks())
    launches = am.on_allocate_response(respond([grant("c0", 0), grant("c1", 0)]), 1.0)
    assert [launch.duration_s for launch in launches] == [4.0, 7.0]
    assert asks_by_priority(am) == {}
    am.on_allocate_response(respond(completed=[done("c1", state, exit_status)]), 2.0)
    assert asks_by_priority(am) == {0: 1}
    assert am.running(0) == 1
    assert am.unassigned_durations(0) == [7.0]
    (relaunch,) = am.on_allocate_response(respond([grant("c2", 0)]), 3.0)
    assert relaunch.duration_s == 7.0  # the same task again
    assert not am.finished


@pytest.mark.parametrize("max_attempts", [1, 2, 4])
def test_am_fails_the_job_after_max_attempts(max_attempts: int) -> None:
    am = ApplicationMaster(job(("a", 1, ())), "app", GreedyAsks(), max_task_attempts=max_attempts)
    for i in range(max_attempts):
        assert not am.finished
        am.on_allocate_response(respond([grant(f"c{i}", 0)]), float(i))
        am.on_allocate_response(
            respond(completed=[done(f"c{i}", ContainerState.FAILED, 1)]), i + 0.5
        )
    assert am.finished
    assert am.final_status is FinalStatus.FAILED
    assert am.failed_reason is not None
    assert "failed" in am.failed_reason
    assert am.allocate_request(10.0).asks == []  # withdraws nothing outstanding either


def test_am_preemption_does_not_count_as_an_attempt() -> None:
    am = ApplicationMaster(job(("a", 1, ())), "app", GreedyAsks(), max_task_attempts=1)
    for i in range(5):
        am.on_allocate_response(respond([grant(f"c{i}", 0)]), float(i))
        am.on_allocate_response(
            respond(completed=[done(f"c{i}", ContainerState.PREEMPTED, EXIT_PREEMPTED)]), i + 0.5
        )
    assert not am.finished
    assert asks_by_priority(am) == {0: 1}


@pytest.mark.parametrize(
    ("grants", "expected_releases"),
    [
        ([grant("c0", 0), grant("c1", 0), grant("c2", 0)], ["c2"]),  # more than the tasks
        ([grant("c0", 40)], ["c0"]),  # a stage that does not exist
        ([grant("c0", 0), grant("c1", 1), grant("c2", 1)], ["c2"]),  # ALTRUISTIC of stage 0
        ([grant("c0", 0)], []),
    ],
    ids=["too-many", "unknown-stage", "altruistic-priority-counts-too", "none"],
)
def test_am_releases_surplus_containers(
    grants: list[Container], expected_releases: list[str]
) -> None:
    am = ApplicationMaster(job(("a", 2, ()), ("b", 1, ("a",))), "app", GreedyAsks())
    launches = am.on_allocate_response(respond(grants), 1.0)
    assert {launch.container_id for launch in launches} == {g.container_id for g in grants} - set(
        expected_releases
    )
    req = am.allocate_request(1.0)
    assert req.releases == expected_releases
    assert am.allocate_request(2.0).releases == []  # released once
    # A report of a released container is ignored.
    am.on_allocate_response(
        respond(
            completed=[done(c, ContainerState.KILLED, EXIT_ABORTED) for c in expected_releases]
        ),
        2.0,
    )
    assert am.running(0) == len(launches)


def test_am_releases_a_grant_for_a_stage_whose_parents_are_not_done() -> None:
    am = ApplicationMaster(job(("a", 2, ()), ("b", 1, ("a",))), "app", GreedyAsks())
    launches = am.on_allocate_response(respond([grant("c0", priority_of(1, AskKind.DEFAULT))]), 1.0)
    assert launches == []
    assert am.allocate_request(1.0).releases == ["c0"]


def test_am_releases_containers_granted_after_it_finished() -> None:
    am = ApplicationMaster(job(("a", 1, ())), "app", GreedyAsks())
    am.on_allocate_response(respond([grant("c0", 0)]), 1.0)
    am.on_allocate_response(respond([grant("c1", 0)], completed=[done("c0")]), 2.0)
    assert am.finished
    assert am.allocate_request(3.0).releases == ["c1"]


def test_am_completed_tasks_restore_progress_for_a_new_attempt() -> None:
    spec = JobSpec(
        "job",
        "alice",
        0.0,
        (
            StageSpec("a", SMALL, (1.0, 2.0, 3.0)),
            StageSpec("b", SMALL, (4.0, 5.0), ("a",)),
        ),
    )
    first = ApplicationMaster(spec, "app", GreedyAsks())
    first.on_allocate_response(respond([grant(f"c{i}", 0) for i in range(3)]), 1.0)
    first.on_allocate_response(respond(completed=[done("c0"), done("c2")]), 2.0)
    # c1 (task 1) is still running when the attempt dies: it must be redone.
    assert first.completed_tasks() == [(0, 0), (0, 2)]
    assert first.remaining_work_s == 11.0

    second = ApplicationMaster(spec, "app", GreedyAsks(), completed_tasks=first.completed_tasks())
    assert second.done(0) == 2
    assert second.progress == pytest.approx(2 / 5)
    assert second.remaining_work_s == 11.0
    assert second.unassigned_durations(0) == [2.0]
    assert asks_by_priority(second) == {0: 1}
    (relaunch,) = second.on_allocate_response(respond([grant("d0", 0)]), 3.0)
    assert relaunch.duration_s == 2.0
    second.on_allocate_response(respond(completed=[done("d0")]), 4.0)
    assert asks_by_priority(second) == {2: 2}  # stage b unblocked
    assert second.completed_tasks() == [(0, 0), (0, 1), (0, 2)]


def test_am_completed_tasks_of_a_whole_stage_unblock_its_children() -> None:
    spec = job(("a", 2, ()), ("b", 1, ("a",)))
    am = ApplicationMaster(spec, "app", GreedyAsks(), completed_tasks=[(0, 0), (0, 1)])
    assert am.runnable_stages() == [1]
    assert asks_by_priority(am) == {2: 1}


def test_am_asks_carry_resources_and_hints() -> None:
    spec = JobSpec("job", "alice", 0.0, (StageSpec("a", res(2, 2048), (3.0, 5.0)),))
    am = ApplicationMaster(spec, "app", GreedyAsks())
    (ask,) = am.allocate_request(0.0).asks
    # remaining_usage: resource-seconds of the unfinished tasks (2 x 2048 over 8 s); the
    # stage's asks are group 1.
    assert ask == Ask(0, res(2, 2048), 2, AskKind.DEFAULT, 4.0, 8.0, res(16, 16384), 1)
    assert am.allocate_request(0.0).progress == 0.0
    am.on_allocate_response(respond([grant("c0", 0), grant("c1", 0)]), 1.0)
    am.on_allocate_response(respond(completed=[done("c1")]), 7.0)  # the 5 s task
    assert (am.remaining_work_s, am.remaining_usage) == (3.0, res(6, 6144))
    am.on_allocate_response(respond(completed=[done("c0")]), 8.0)
    assert (am.remaining_work_s, am.remaining_usage) == (0.0, ZERO)


class _NoAsks(AskStrategy):
    def asks(self, progress: Any, now: float) -> list[Ask]:
        return []


def test_am_share_and_cluster_come_from_the_response() -> None:
    am = ApplicationMaster(job(("a", 1, ())), "app", _NoAsks())
    am.on_allocate_response(AllocateResponse(share=SMALL, cluster=NODE, num_nodes=1), 0.0)
    assert (am.share, am.cluster) == (SMALL, NODE)


# ----------------------------------------------------------------------------------
# The three cores together, without the simulator
# ----------------------------------------------------------------------------------


def test_cores_run_a_two_stage_job_end_to_end() -> None:
    rm = make_rm()
    nm = NodeManager("n1", NODE)
    spec = JobSpec(
        "job",
        "alice",
        0.0,
        (StageSpec("map", SMALL, (2.0, 3.0)), StageSpec("reduce", SMALL, (1.0,), ("map",))),
    )
    app = submit(rm, tasks=spec.tasks)
    am = ApplicationMaster(spec, app, GreedyAsks())
    t = 0.0
    while not am.finished and t < 20:
        for launch_ in am.on_allocate_response(rm.on_allocate(am.allocate_request(t), t), t):
            nm.start_container(launch_, t)
        t += 0.5
        hb = nm.heartbeat(t)
        resp = rm.node_heartbeat(hb, t)
        nm.acknowledge(hb.seq)
        for cid in resp.stop:
            nm.stop_container(cid, t)
    rm.finish_application(app, am.final_status, t)
    assert am.final_status is FinalStatus.SUCCEEDED
    finished = of(rm, ev.CONTAINER_FINISHED)
    assert len(finished) == 3
    assert {r["state"] for r in finished} == {"COMPLETE"}
    assert rm.state.used == ZERO
    assert nm.used == ZERO
    (fin,) = of(rm, ev.JOB_FINISHED)
    assert fin["status"] == "SUCCEEDED"


# ----------------------------------------------------------------------------------
# RM: one call, one settled outcome
# ----------------------------------------------------------------------------------


def test_an_ending_am_container_fails_its_attempt_after_the_heartbeats_other_reports() -> None:
    """One heartbeat reports a task's container done and, before it, the AM's: the task's
    end is logged as COMPLETE first, then the attempt fails (killing what is left), and the
    new attempt asks for an AM container again. Nothing is logged twice."""
    am_res = res(1, 512)
    rm = ResourceManager(FifoPolicy(), max_am_attempts=2, am_resources=am_res)
    rm.register_node(NodeRegistration("n1", NODE), 0.0)
    app = rm.submit_application(AppSubmission("j", "alice", "default", 2, managed_am=True), 0.0)
    beat = Beater(rm)
    beat(1.0)
    (amc,) = rm.take_effects().am_launches
    rm.register_application_master(app, 1.5)
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 2)], attempt=1), 1.5)
    beat(2.0)
    task1, task2 = rm.on_allocate(AllocateRequest(app, [], attempt=1), 2.5).allocated
    started = [ContainerStatus(c.container_id, ContainerState.COMPLETE, 0, 2.6) for c in (task1,)]
    beat(
        3.0,
        started=[ContainerStatus(amc.container_id, ContainerState.COMPLETE, 0, 1.2), *started],
        completed=[
            ContainerStatus(amc.container_id, ContainerState.FAILED, 1, 1.2, 2.9),
            ContainerStatus(task1.container_id, ContainerState.COMPLETE, 0, 2.6, 2.9),
        ],
    )
    ends = [
        (r["event"], r.get("container"), r.get("state"))
        for r in rm.log.records
        if r["event"] in (ev.CONTAINER_FINISHED, ev.CONTAINER_RELEASED, ev.ATTEMPT_FAILED)
    ]
    assert ends == [
        (ev.CONTAINER_FINISHED, amc.container_id, "FAILED"),
        (ev.CONTAINER_FINISHED, task1.container_id, "COMPLETE"),
        (ev.ATTEMPT_FAILED, None, None),
        (ev.CONTAINER_RELEASED, task2.container_id, None),
    ]
    assert rm.reports.application(app).attempt == 1
    assert rm.reports.application(app).state == "RUNNING"
    assert rm.state.apps[app].asks[-1] == Ask(-1, am_res, 1)  # the next attempt's container
    assert rm.take_effects().touched_nodes == ("n1",)  # task2 is to be stopped there


@pytest.mark.parametrize(
    ("status", "progress"),
    [(FinalStatus.SUCCEEDED, 1.0), (FinalStatus.FAILED, 0.5), (FinalStatus.KILLED, 0.5)],
)
def test_a_finished_application_reports_full_progress(status: FinalStatus, progress: float) -> None:
    rm = make_rm()
    app = submit(rm, tasks=2)
    rm.register_application_master(app, 0.0)
    rm.on_allocate(AllocateRequest(app, [], progress=0.5), 1.0)
    rm.finish_application(app, status, 2.0)
    assert rm.reports.application(app).progress == progress
    assert rm.reports.applications()[0].progress == progress


# ----------------------------------------------------------------------------------
# AM: a request that repeats the last one
# ----------------------------------------------------------------------------------


class _CountingAsks(AskStrategy):
    """Asks for every unassigned task of stage 0, computed afresh on every call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def asks(self, progress: Any, now: float) -> list[Ask]:
        self.calls += 1
        n = progress.unassigned(0)
        return [Ask(priority_of(0, AskKind.DEFAULT), SMALL, n)] if n else []


def test_an_am_knows_when_its_request_repeats_the_last_one() -> None:
    spec = job(("a", 3, ()))
    strategy = _CountingAsks()
    am = ApplicationMaster(spec, "app", strategy)
    first = am.allocate_request(0.0)
    assert not am.repeats_last_request  # nothing was sent before
    am.on_allocate_response(AllocateResponse(response_id=1), 0.0)
    again = am.allocate_request(1.0)
    assert am.repeats_last_request
    assert (again.asks, again.releases, again.completed_tasks) == (first.asks, [], [])
    assert again.response_id == 1  # what building it afresh would say
    grant = Container("c1", "app", "n1", 0, SMALL)
    (launch,) = am.on_allocate_response(AllocateResponse([grant], response_id=2), 1.0)
    am.allocate_request(2.0)
    assert not am.repeats_last_request  # one task fewer is asked for
    done = ContainerStatus(launch.container_id, ContainerState.COMPLETE, 0, 1.0, 11.0)
    am.on_allocate_response(AllocateResponse(completed=[done], response_id=3), 11.0)
    assert am.allocate_request(12.0).completed_tasks == [(0, 0)]
    assert not am.repeats_last_request  # it reports a finished task
    assert strategy.calls == 4  # every call asks the strategy; only the RM call is skipped


def test_greedy_asks_are_recomputed_only_when_the_job_moves() -> None:
    spec = job(("a", 3, ()))
    greedy = GreedyAsks()
    am = ApplicationMaster(spec, "app", greedy)
    first = greedy.asks(am, 0.0)
    assert greedy.asks(am, 1.0) is first
    am.on_allocate_response(AllocateResponse([Container("c1", "app", "n1", 0, SMALL)]), 1.0)
    moved = greedy.asks(am, 2.0)
    assert moved is not first
    assert moved[0].count == 2
    other = ApplicationMaster(spec, "other", greedy)  # another job's progress: no reuse
    assert greedy.asks(other, 2.0) is not moved


class _ArrivalClock(FifoPolicy):
    """Records the cluster time a policy sees when each application arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[float] = []

    def on_app_added(self, app: Any, cluster: ClusterView) -> None:
        self.seen.append(cluster.now)


def test_a_policy_sees_the_submission_time_when_an_application_arrives() -> None:
    policy = _ArrivalClock()
    rm = ResourceManager(policy)
    rm.submit_application(AppSubmission("a", "alice", "default", 1), 3.0)
    rm.submit_application(AppSubmission("b", "alice", "default", 1), 7.5)
    assert policy.seen == [3.0, 7.5]


def test_a_restarted_rm_does_not_take_back_a_container_whose_end_it_logged() -> None:
    """The RM logged a container's end and died before its NM heard the answer: the NM
    resyncs with it still held. The restarted RM (told of logged ends by
    ``Recovery.redeliver_ended``) stops it instead of recovering it, so its end is logged once."""
    rm = make_rm()
    app = submit(rm)
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 2)]), 0.0)
    Beater(rm)(1.0)
    done, running = sorted(rm.state.apps[app].containers.values(), key=lambda c: c.container_id)
    restarted = ResourceManager(FifoPolicy())
    restarted.restore(rm.app_records(), 2.0)
    status = ContainerStatus(done.container_id, ContainerState.COMPLETE, 0, 1.0, 2.0)
    restarted.recovery.redeliver_ended([(app, status)])
    restarted.register_node(NodeRegistration("n1", NODE, containers=(done, running)), 3.0)
    assert list(restarted.state.apps[app].containers) == [running.container_id]
    assert restarted.state.nodes["n1"].to_stop == [done.container_id]
    beat = Beater(restarted)
    beat(4.0, completed=[status])  # the NM's report of it, again: not logged twice
    assert of(restarted, ev.CONTAINER_FINISHED) == []

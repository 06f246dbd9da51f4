"""The AM sends its asks as deltas: only the groups that differ from what the RM holds
(as the AM counts it), the whole table when it cannot be sure what the RM holds. Each test
drives a delta AM and a whole-table AM against twin RMs and checks that the RMs hold the
same asks (every field) after every call."""

from __future__ import annotations

from typing import Any

from am.asks import AskStrategy
from am.core import ApplicationMaster
from plugins.asks.greedy import GreedyAsks
from plugins.policies.fifo import FifoPolicy
from rm.core.facade import ResourceManager
from rm.policy import ClusterView, NodeView, Placement, Policy
from treadle.messages import (
    EXIT_SUCCESS,
    AllocateRequest,
    AppSubmission,
    Ask,
    AskKind,
    ContainerState,
    ContainerStatus,
    NodeHeartbeat,
    NodeRegistration,
)
from treadle.model import JobSpec, StageSpec
from treadle.resources import Resources

NODE = Resources(vcores=4, memory_mb=8192)
SMALL = Resources(vcores=1, memory_mb=1024)


def wide_job(*tasks: int, duration: float = 10.0) -> JobSpec:
    """Parallel stages of ``tasks`` tasks each (all of ``duration``), then a join."""
    stages = [StageSpec(f"s{i}", SMALL, (duration,) * n) for i, n in enumerate(tasks)]
    join = StageSpec("join", SMALL, (1.0,), tuple(s.name for s in stages))
    return JobSpec("job", "alice", 0.0, (*stages, join))


class Side:
    """One RM with one application and its AM core."""

    def __init__(self, job: JobSpec, whole: bool, strategy: AskStrategy, policy: Policy) -> None:
        self.rm = ResourceManager(policy)
        self.rm.register_node(NodeRegistration("n1", NODE), 0.0)
        self.app = self.rm.submit_application(
            AppSubmission("job", "alice", "default", job.tasks, job=job), 0.0
        )
        self.rm.register_application_master(self.app, 0.0)
        self.am = ApplicationMaster(job, self.app, strategy, whole_table=whole)
        self.seq = 0
        self.launched: list[str] = []
        self.sent: list[AllocateRequest] = []

    def request(self, now: float) -> AllocateRequest:
        req = self.am.allocate_request(now)
        self.sent.append(req)
        return req

    def call(self, now: float) -> None:
        resp = self.rm.on_allocate(self.request(now), now)
        self.launched += [x.container_id for x in self.am.on_allocate_response(resp, now)]

    def heartbeat(self, now: float, finished: int = 0) -> None:
        """A heartbeat of n1 that reports the first ``finished`` launched containers done."""
        ended, self.launched = self.launched[:finished], self.launched[finished:]
        self.seq += 1
        completed = [
            ContainerStatus(c, ContainerState.COMPLETE, EXIT_SUCCESS, now - 1.0, now) for c in ended
        ]
        self.rm.node_heartbeat(NodeHeartbeat("n1", self.seq, [], completed), now)

    @property
    def held(self) -> dict[int, Ask]:
        return dict(self.rm.state.apps[self.app].asks)


class Twins:
    """A delta AM and a whole-table AM, each with its RM, given the same steps."""

    def __init__(
        self,
        job: JobSpec,
        strategy: type[AskStrategy] = GreedyAsks,
        policy: type[Policy] = FifoPolicy,
    ) -> None:
        self.delta = Side(job, False, strategy(), policy())
        self.whole = Side(job, True, strategy(), policy())

    def call(self, now: float) -> list[int]:
        """One Allocate of both; the priorities the delta AM sent."""
        self.delta.call(now)
        self.whole.call(now)
        assert self.delta.held == self.whole.held
        return [a.priority for a in self.delta.sent[-1].asks]

    def heartbeat(self, now: float, finished: int = 0) -> None:
        self.delta.heartbeat(now, finished)
        self.whole.heartbeat(now, finished)
        assert self.delta.held == self.whole.held


def test_a_call_carries_only_the_asks_that_changed() -> None:
    t = Twins(wide_job(2, 2, 3))
    assert t.call(0.0) == [0, 2, 4]  # stages s0, s1, s2: everything is new
    # Nothing changed: the first ask alone (a call with asks is a change of demand).
    assert t.call(1.0) == [0]
    t.heartbeat(2.0)  # 4 containers: s0's 2 and s1's 2
    # The AM has not seen them: it asks as before (the RM nets its ask of them).
    assert t.call(3.0) == [0]
    # It has now: s0 and s1 are withdrawn; s2 is as the RM holds it.
    assert t.call(4.0) == [0, 2]
    assert t.call(5.0) == [4]
    t.heartbeat(6.0, finished=1)
    t.call(7.0)  # brings the finished task
    # The job's remaining work (a hint of every ask) changed: s2's ask goes again.
    assert t.call(8.0) == [4]
    assert t.whole.sent[-1].asks == t.delta.sent[-1].asks


def test_an_ask_the_rm_already_lowered_by_its_grants_is_not_sent() -> None:
    t = Twins(wide_job(2, 5))
    t.call(0.0)
    t.heartbeat(1.0)  # s0's 2, s1's first 2 of 5
    t.call(2.0)
    # s1 asks 3 now, which the RM holds already (5 less its 2 grants): only s0's
    # withdrawal goes.
    assert [(a.priority, a.count) for a in t.delta.request(3.0).asks] == [(0, 0)]
    assert {p: a.count for p, a in t.delta.held.items()} == {2: 3}


class _TwoAsksPerStage(AskStrategy):
    """Asks for stage 1's tasks at two priorities of one group (as altruistic does), after
    an ask for stage 0."""

    def asks(self, progress: Any, now: float) -> list[Ask]:
        return [
            Ask(0, SMALL, 1, AskKind.DEFAULT, group=1),
            Ask(2, SMALL, 2, AskKind.DEFAULT, group=2),
            Ask(3, SMALL, 3, AskKind.ALTRUISTIC, group=2),
        ]


class _GrantsAtPriorityThree(Policy):
    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Any:
        for app in cluster.pending_apps():
            if 3 in app.asks:
                yield Placement(app.app_id, 3)


def test_a_group_with_two_asks_goes_whole() -> None:
    """The RM nets a grant it made at one priority of a group against the group's most
    important ask: an ask kept would not get that, so both go every time."""
    t = Twins(wide_job(1, 5), _TwoAsksPerStage, _GrantsAtPriorityThree)
    t.call(0.0)
    t.heartbeat(1.0)  # one container at priority 3, unseen by the AM
    assert t.call(2.0) == [2, 3]
    assert {p: a.count for p, a in t.delta.held.items()} == {0: 1, 2: 1, 3: 3}


def test_the_whole_table_goes_after_registering_again() -> None:
    t = Twins(wide_job(2, 2, 3))
    t.call(0.0)
    assert t.call(1.0) == [0]
    for side in (t.delta, t.whole):
        side.rm.register_application_master(side.app, 2.0)  # a new session
        side.am.resync()
    assert t.call(3.0) == [0, 2, 4]
    assert t.call(4.0) == [0]


def test_the_whole_table_goes_on_the_two_calls_after_a_lost_answer() -> None:
    """The RM applied the call whose answer was lost; it answers the next with a replay
    of that answer and does not apply its asks; the call after is the first it applies."""
    t = Twins(wide_job(2, 2, 3))
    t.call(0.0)
    t.call(1.0)
    t.heartbeat(2.0)
    for side in (t.delta, t.whole):
        side.rm.on_allocate(side.request(3.0), 3.0)  # its answer is lost
        side.am.allocate_failed()
    assert t.call(4.0) == [0, 2, 4]  # answered by the replay
    t.call(5.0)  # the grants arrived: s0 and s1 are withdrawn
    assert t.delta.sent[-1].asks == t.whole.sent[-1].asks
    assert t.call(6.0) == [4]


def test_a_request_never_answered_counts_as_a_lost_answer() -> None:
    """A host that did not say the call failed: the AM sees its next request while the
    last is unanswered."""
    side = Side(wide_job(2, 3, 3), False, GreedyAsks(), FifoPolicy())
    side.call(0.0)
    side.heartbeat(1.0)  # s0's 2, s1's first 2 of 3
    side.call(2.0)
    lost = side.request(3.0)  # never answered
    assert [a.priority for a in lost.asks] == [0]  # s0's withdrawal
    assert [a.priority for a in side.request(4.0).asks] == [2, 4]
    assert [a.priority for a in side.request(5.0).asks] == [2, 4]


def test_the_whole_table_goes_after_a_repeated_answer() -> None:
    side = Side(wide_job(2, 2, 3), False, GreedyAsks(), FifoPolicy())
    side.call(0.0)
    old = side.rm.on_allocate(side.request(1.0), 1.0)
    side.am.on_allocate_response(old, 1.0)
    side.request(2.0)
    side.am.on_allocate_response(old, 2.0)  # again: the RM did not apply that call
    assert [a.priority for a in side.request(3.0).asks] == [0, 2, 4]

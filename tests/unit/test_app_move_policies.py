"""A client's move (``ResourceManager.move_application``, the REST API's queue PUT) as the
policies that keep state per queue see it: after the move the application is served as
a member of its new queue, and its old queue no longer counts it. ``fair`` (and every
queue-tree policy: ``capacity``) serves it in its new leaf; under FairScheduler rules its
maxRunningApps slot moves with it (a waiting application of the old queue may run) and a
move that would pass the target's maxRunningApps is refused, as Hadoop's
``FairScheduler.moveApplication``; ``dp`` charges and limits it under the new queue's
account; ``gs`` orders jobs by their runtime positions, which a move leaves as they were.
"""

from __future__ import annotations

from collections import Counter

import pytest

from rm.core.facade import ResourceManager
from rm.policy import Policy
from treadle import registry
from treadle.errors import InvalidRequestError
from treadle.messages import AllocateRequest, AppSubmission, Ask, NodeHeartbeat, NodeRegistration
from treadle.model import ROOT_QUEUE, QueueSpec
from treadle.resources import Resources

SLOT = Resources(vcores=1, memory_mb=1024)


def slots(n: int) -> Resources:
    return SLOT * n


def flat_tree(*leaves: QueueSpec) -> QueueSpec:
    return QueueSpec(ROOT_QUEUE, children=leaves)


class Cluster:
    """An RM core with unmanaged AMs: submit, ask, heartbeat, count what each app holds."""

    def __init__(self, policy: Policy, queues: QueueSpec) -> None:
        self.rm = ResourceManager(policy, queues=queues, policy_errors="raise")
        self.now = 0.0
        self._nodes: dict[str, int] = {}

    def node(self, node_id: str, size: int) -> None:
        self.rm.register_node(NodeRegistration(node_id, slots(size)), self.now)
        self._nodes[node_id] = 0

    def app(self, queue: str, tasks: int) -> str:
        app = self.rm.submit_application(AppSubmission("j", "alice", queue, tasks), self.now)
        self.rm.register_application_master(app, self.now)
        self.rm.on_allocate(AllocateRequest(app, [Ask(0, SLOT, tasks)]), self.now)
        return app

    def ask(self, app: str, tasks: int) -> None:
        self.rm.on_allocate(AllocateRequest(app, [Ask(0, SLOT, tasks)]), self.now)

    def heartbeat(self, node_id: str) -> None:
        self._nodes[node_id] += 1
        self.rm.node_heartbeat(NodeHeartbeat(node_id, self._nodes[node_id], [], []), self.now)

    def held(self) -> Counter[str]:
        return Counter({a.app_id: a.running for a in self.rm.state.apps.values()})


@pytest.mark.parametrize("name", ["fair", "capacity"])
def test_a_moved_app_is_served_in_its_new_leaf_not_its_old_one(name: str) -> None:
    """``y`` holds 4 slots in ``a``, ``x`` 2 in ``c``, both ask for more; ``y`` moves to
    ``b``. The next slot goes to the leaf using least: ``c`` (2) before ``b`` (4). Were
    ``y`` still filed in ``a`` (used 0 once its usage left with it), it would take it."""
    leaves = (QueueSpec("a", capacity=34), QueueSpec("b", capacity=33), QueueSpec("c", capacity=33))
    c = Cluster(registry.build("policies", name), flat_tree(*leaves))
    c.node("n1", 6)
    y = c.app("a", 4)
    c.heartbeat("n1")
    x = c.app("c", 10)
    c.heartbeat("n1")
    assert c.held() == {y: 4, x: 2}
    c.ask(y, 5)
    assert c.rm.move_application(y, "b", c.now) == "a"
    c.node("n2", 1)
    c.heartbeat("n2")
    assert c.held() == {y: 4, x: 3}


def rules_tree(a_max: int, b_max: int) -> QueueSpec:
    return flat_tree(QueueSpec("a", max_running_apps=a_max), QueueSpec("b", max_running_apps=b_max))


def test_fair_a_move_takes_the_running_slot_with_it_and_the_old_queue_runs_the_next() -> None:
    """``a`` and ``b`` run one application each (maxRunningApps 1). ``y1`` runs in ``a``,
    ``y2`` waits there; ``y1`` moves to ``b``: ``y2`` may run now and gets containers; a
    later ``z`` in ``b`` waits behind ``y1``."""
    c = Cluster(registry.build("policies", "fair"), rules_tree(1, 1))
    c.node("n1", 8)
    y1, y2 = c.app("a", 2), c.app("a", 2)
    c.heartbeat("n1")
    assert c.held() == {y1: 2, y2: 0}  # y2 is not runnable
    c.rm.move_application(y1, "b", c.now)
    z = c.app("b", 2)
    c.heartbeat("n1")
    assert c.held() == {y1: 2, y2: 2, z: 0}


def test_fair_refuses_a_move_past_the_targets_max_running_apps_and_changes_nothing() -> None:
    c = Cluster(registry.build("policies", "fair"), rules_tree(2, 1))
    c.node("n1", 8)
    x, y = c.app("b", 1), c.app("a", 1)
    c.heartbeat("n1")
    assert c.held() == {x: 1, y: 1}
    with pytest.raises(InvalidRequestError, match="maxRunningApps constraints on queue b"):
        c.rm.move_application(y, "b", c.now)
    assert c.rm.state.apps[y].queue == "a"
    assert c.rm.state.queues["a"].used == SLOT
    # A waiting application moves (it runs there when it may), as in Hadoop.
    w = c.app("b", 1)
    c.rm.move_application(w, "a", c.now)
    c.heartbeat("n1")
    assert c.held() == {x: 1, y: 1, w: 1}


def test_fair_refuses_a_move_past_the_targets_max_resources() -> None:
    tree = flat_tree(QueueSpec("a", max_resources=slots(8)), QueueSpec("b", max_resources=slots(2)))
    c = Cluster(registry.build("policies", "fair"), tree)
    c.node("n1", 8)
    y = c.app("a", 3)
    c.heartbeat("n1")
    assert c.held() == {y: 3}
    with pytest.raises(InvalidRequestError, match="maxShare constraints on queue b"):
        c.rm.move_application(y, "b", c.now)
    assert c.rm.state.apps[y].queue == "a"


def dp_cluster(size: int) -> Cluster:
    policy = registry.build("policies", "dp", {"interval_s": 20})
    c = Cluster(policy, flat_tree(QueueSpec("A"), QueueSpec("B")))
    for q in ("A", "B"):
        c.rm.accounts.set_queue_budget(q, 1e6, 1.0)
    c.node("n1", size)
    return c


def test_dp_a_moved_app_is_served_under_its_new_queues_quota() -> None:
    """``x`` and ``y`` wait in ``A``; ``y`` moves to ``B``, the tick gives each queue half
    of the 4 slots: each gets its queue's 2 (left in ``A``, ``y`` would wait behind
    ``x`` for ``A``'s quota and then lose the FILL pass to it)."""
    c = dp_cluster(4)
    x, y = c.app("A", 10), c.app("A", 10)
    c.now = 1.0
    c.rm.move_application(y, "B", c.now)
    c.now = 20.0
    c.rm.tick(c.now)
    c.heartbeat("n1")
    assert c.held() == {x: 2, y: 2}


def test_dp_charges_each_queue_for_what_it_held_and_the_old_queue_no_longer_counts_it() -> None:
    """8 slots, quotas 4/4; ``x`` (A) and ``y`` (B) hold 2 each from 0 s (``z`` waits in
    ``A``, no heartbeat comes); ``x`` moves to ``B`` at 10 s. At the 20 s tick ``A`` held 2
    for half the interval (used 1), ``B`` 2 then 4 (used 3); from the move on ``B`` holds
    4 and ``A`` none."""
    c = dp_cluster(8)
    x, y = c.app("A", 2), c.app("B", 2)
    c.rm.tick(0.0)
    c.heartbeat("n1")
    assert c.held() == {x: 2, y: 2}
    c.app("A", 1)  # keeps A active at the tick
    c.now = 10.0
    c.rm.move_application(x, "B", c.now)
    assert (c.rm.accounts.info("A").used, c.rm.accounts.info("B").used) == (0, 4)
    c.now = 20.0
    c.rm.tick(c.now)
    books = {b.queue: b for b in c.rm.policy.tick_books()}
    assert books["A"].used == pytest.approx(1.0)
    assert books["B"].used == pytest.approx(3.0)
    assert books["B"].charged == pytest.approx(3.0)


def test_gs_positions_are_not_yarn_queues_a_move_leaves_its_order_as_it_was() -> None:
    """gs files jobs by their runtime (``rm.policy.toolkit.multiqueue``), not by YARN
    queue: the same placements with and without a move."""

    def run(move: bool) -> list[int]:
        policy = registry.build("policies", "gs")
        c = Cluster(policy, flat_tree(QueueSpec("a"), QueueSpec("b")))
        c.node("n1", 3)
        apps = [c.app("a", 4), c.app("a", 4)]
        if move:
            c.rm.move_application(apps[1], "b", c.now)
        c.heartbeat("n1")
        return [c.held()[a] for a in apps]

    assert run(move=True) == run(move=False)

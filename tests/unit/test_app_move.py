"""The RM core's client calls behind YARN's REST writes: ids handed out ahead of their
submission (new-application) and moving a running application between leaf queues, its
containers' usage with it, the policy told (``Policy.on_app_moved``)."""

from __future__ import annotations

import pytest

from plugins.policies.fifo import FifoPolicy
from rm.core.facade import ResourceManager
from rm.policy import AppView, ClusterView
from treadle.errors import InvalidRequestError, PermissionDeniedError
from treadle.messages import AllocateRequest, AppSubmission, Ask, NodeHeartbeat, NodeRegistration
from treadle.model import QueueSpec
from treadle.resources import Resources

SMALL = Resources(vcores=1, memory_mb=1024)
TREE = QueueSpec(
    "root",
    children=(
        QueueSpec("left", children=(QueueSpec("a"), QueueSpec("b"))),
        QueueSpec("right", children=(QueueSpec("c"),)),
    ),
)


class TellingFifo(FifoPolicy):
    def __init__(self) -> None:
        super().__init__()
        self.moves: list[tuple[str, str, str]] = []

    def on_app_moved(self, app: AppView, old_queue: str, cluster: ClusterView) -> None:
        self.moves.append((app.app_id, old_queue, app.queue))


def running_app(rm: ResourceManager, queue: str = "a") -> str:
    """An application of alice in ``queue`` holding two containers."""
    rm.register_node(NodeRegistration("n1", Resources(vcores=8, memory_mb=16384)), 0.0)
    app = rm.submit_application(AppSubmission("j", "alice", queue, 2), 0.0)
    rm.register_application_master(app, 0.0)
    rm.on_allocate(AllocateRequest(app, [Ask(0, SMALL, 2)]), 0.0)
    rm.node_heartbeat(NodeHeartbeat("n1", 1, [], []), 1.0)
    return app


def used(rm: ResourceManager, queue: str) -> Resources:
    return rm.state.queues[queue].used


def test_a_move_takes_the_usage_to_the_new_queue_and_tells_the_policy() -> None:
    policy = TellingFifo()
    rm = ResourceManager(policy, queues=TREE)
    app = running_app(rm)
    held = rm.state.apps[app].allocated
    assert held == SMALL * 2
    assert used(rm, "a") == held
    assert used(rm, "left") == held
    assert rm.move_application(app, "c", 1.5) == "a"
    assert rm.state.apps[app].queue == "c"
    assert policy.moves == [(app, "a", "c")]
    for queue, expected in (("a", Resources()), ("left", Resources()), ("c", held),
                            ("right", held), ("root", held)):  # fmt: skip
        assert used(rm, queue) == expected, queue
    # What a restart reads names the new queue.
    (record,) = rm.app_records([app])
    assert record.submission.queue == "c"
    # Its containers end: the new queue's books go back to zero.
    (c1, c2) = rm.state.apps[app].containers
    rm.on_allocate(AllocateRequest(app, releases=[c1, c2]), 2.0)
    assert used(rm, "c") == Resources()
    assert used(rm, "root") == Resources()


@pytest.mark.parametrize("queue", ["nowhere", "left"])
def test_a_move_to_an_unknown_or_parent_queue_is_refused_and_changes_nothing(queue: str) -> None:
    rm = ResourceManager(TellingFifo(), queues=TREE)
    app = running_app(rm)
    with pytest.raises(InvalidRequestError, match=queue):
        rm.move_application(app, queue, 1.5)
    assert rm.state.apps[app].queue == "a"
    assert used(rm, "a") == SMALL * 2


def test_a_move_into_a_queue_whose_acls_refuse_the_user_is_refused() -> None:
    tree = QueueSpec(
        "root", children=(QueueSpec("a", submit_acl="alice"), QueueSpec("c", submit_acl="bob"))
    )
    rm = ResourceManager(FifoPolicy(), queues=tree)
    app = running_app(rm)
    with pytest.raises(PermissionDeniedError):
        rm.move_application(app, "c", 1.5)
    assert rm.state.apps[app].queue == "a"


def test_an_id_handed_out_ahead_is_used_once() -> None:
    rm = ResourceManager(FifoPolicy())
    first, second = rm.new_application_id(), rm.new_application_id()
    assert first != second
    sub = AppSubmission("j", "alice", "default", 1)
    assert rm.submit_application(sub, 0.0, second) == second
    with pytest.raises(InvalidRequestError, match="used already"):
        rm.submit_application(sub, 0.0, second)
    with pytest.raises(InvalidRequestError, match="not handed out"):
        rm.submit_application(sub, 0.0, "application_77777")
    fresh = rm.submit_application(sub, 0.0)
    assert fresh not in (first, second)
    assert rm.submit_application(sub, 0.0, first) == first

"""FairScheduler ``maxAMShare`` against Hadoop's ``TestFSLeafQueue``.

The simulator's AMs hold no container, so these scenarios drive the RM core itself
(``rm.core.facade.ResourceManager``, sans-IO) with managed AMs, whose AM containers the
policy places like YARN's: one node of 4096 MB and 10 vcores, a leaf ``queue1`` with
``maxResources`` 8192 MB, 4 vcores and ``maxAMShare`` 0.5. Hadoop's third resource
(``test1``) is left out: treadle's policy treats every resource alike, so vcores show the
same rule. Difference: Hadoop takes a queue's fair share, or where that is 0 the
cluster's available resources; treadle takes the queue's share among the active queues
(here the whole cluster), both within ``maxResources``.
"""

from __future__ import annotations

from rm.core.facade import ResourceManager
from treadle import registry
from treadle.messages import AppSubmission, NodeHeartbeat, NodeRegistration
from treadle.model import QueueSpec
from treadle.resources import Resources

from .fair_helpers import tree

NODE = Resources(memory_mb=4096, vcores=10)
QUEUES = tree(
    QueueSpec("queue1", max_resources=Resources(memory_mb=8192, vcores=4), max_am_share=0.5)
)


def _am_granted(am: Resources, apps: int = 1) -> list[bool]:
    """Submit ``apps`` managed-AM applications to queue1; which got their AM container
    at the first heartbeat."""
    rm = ResourceManager(registry.build("policies", "fair", {}), queues=QUEUES, am_resources=am)
    rm.register_node(NodeRegistration("n1", NODE), 0.0)
    ids = [
        rm.submit_application(AppSubmission(f"app{i}", "u", "queue1", 1, managed_am=True), 0.0)
        for i in range(apps)
    ]
    rm.node_heartbeat(NodeHeartbeat("n1", 1), 1.0)
    launched = {c.app_id for c in rm.take_effects().am_launches}
    return [a in launched for a in ids]


def test_can_run_app_am_returns_true() -> None:
    """``testCanRunAppAMReturnsTrue``: the AM limit is min(available 4096 MB / 10
    vcores, max share 8192 MB / 4 vcores) x 0.5 = 2048 MB, 2 vcores; an AM of 2048 MB,
    2 vcores fits it and is allocated."""
    assert _am_granted(Resources(memory_mb=2048, vcores=2)) == [True]


def test_can_run_app_am_returns_false() -> None:
    """``testCanRunAppAMReturnsFalse``: the same limit; an AM that needs more of one
    resource (Hadoop: 6 of test1 over 5; here 3 vcores over 2) is not allocated."""
    assert _am_granted(Resources(memory_mb=2048, vcores=3)) == [False]


def test_running_ams_count_against_the_share() -> None:
    """``FSLeafQueue.canRunAppAM`` adds the AMs already running: of two 1536 MB AMs
    only the first fits the 2048 MB limit."""
    assert _am_granted(Resources(memory_mb=1536, vcores=1), apps=2) == [True, False]

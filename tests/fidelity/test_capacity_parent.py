"""The capacity policy's queue tree against Hadoop's ``TestParentQueue``
(hadoop-yarn-server-resourcemanager, ``scheduler/capacity``): the order in which a
parent offers a node to its children, maximum capacities on the way down, and what a
capacity-scheduler.xml may say.

Hadoop's tests stub each child's ``assignContainers`` with a fixed allocation; here the
children are real leaves whose applications ask for 1 GB containers, so the assertions
are on the order of the allocations in the event log and on what each queue holds.
Not expressible: the off-switch scheduling counters (``testOffSwitchScheduling``: treadle
has no locality) and queue ACL inheritance checks beyond submission
(``testQueueAcl``: treadle checks ``acl_submit_applications`` only, at import).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fidelity.capacity_helpers import held_at, job_field, of, run
from tests.unit.test_yarn_queues import capacity_xml
from treadle import events as ev
from treadle.importers.yarnconf import load_queues
from treadle.importers.yarnqueues import QueueConfigError

MEMORY = {"resource_calculator": "memory"}
ONE_GB = "resources: {vcores: 1, memory_mb: 1024}"


def cluster(nodes: int, gb: int) -> str:
    return f"""
seed: 1
cluster:
  heartbeat_s: 1.0
  nodes:
    - {{count: {nodes}, resources: {{vcores: 64, memory_mb: {gb * 1024}}}}}
"""


def asks(name: str, queue: str, tasks: int) -> str:
    return (
        f"  - {{name: {name}, user: {name}, queue: {queue}, submit_s: 0, "
        f"stages: [{{name: s, tasks: {tasks}, duration_s: 500, {ONE_GB}}}]}}"
    )


def test_single_level_queues_least_used_against_guarantee_first() -> None:
    """``testSingleLevelQueues``: a is 30% and b 70% of 2 x 10 GB; "A should get the
    scheduling opportunity since A=0G/6G, B=1G/14G", "B should get the scheduling
    opportunity since A has 2/6G while B has 2/14G": every container goes to the queue
    whose used / guaranteed is lower (ties to a, the first child), and the cluster ends
    split 6 / 14."""
    wl = (
        cluster(2, 10)
        + "queues:\n  - {name: a, capacity: 30}\n  - {name: b, capacity: 70}\njobs:\n"
        + "\n".join([asks("ja", "a", 20), asks("jb", "b", 20)])
    )
    result = run(wl, **MEMORY)
    queue_of = job_field(result, "queue")
    held = {"a": 0, "b": 0}
    guarantee = {"a": 6, "b": 14}
    for r in of(result, ev.CONTAINER_ALLOCATED):
        if r["t"] >= 500:  # the first containers end: the split is made
            break
        ratio = {q: held[q] / guarantee[q] for q in held}
        chosen = queue_of[r["job"]]
        assert ratio[chosen] <= min(ratio.values()), (r["t"], held, chosen)
        held[chosen] += 1
    assert held == {"a": 6, "b": 14}
    assert held_at(result, 100.0) == {"a": 6, "b": 14}


def test_multi_level_queues_parent_max_capacity_caps_its_children() -> None:
    """``testMultiLevelQueues``, "Ensure a1 won't alloc above max-cap although it should
    get scheduling opportunity now": parent a (10%, max-capacity 10%) of 3 x 10 GB, with
    leaves a1 and a2 asking; a never holds more than its 3 GB while b and c fill the
    rest, however little a uses of its guarantee compared with them."""
    wl = (
        cluster(3, 10)
        + """queues:
  - name: a
    capacity: 10
    max_capacity: 10
    queues:
      - {name: a1, capacity: 50}
      - {name: a2, capacity: 50}
  - {name: b, capacity: 50}
  - {name: c, capacity: 40}
jobs:
"""
        + "\n".join(
            [asks("j1", "a1", 10), asks("j2", "a2", 10), asks("jb", "b", 30), asks("jc", "c", 30)]
        )
    )
    result = run(wl, **MEMORY)
    held = held_at(result, 100.0)
    assert held["a1"] + held["a2"] == 3
    assert held["a1"] >= 1
    assert held["a2"] >= 1
    assert held["b"] + held["c"] == 27


def two_leaves(tmp_path: Path, a: str, b: str) -> Path:
    return capacity_xml(
        tmp_path, **{"root.queues": "a,b", "root.a.capacity": a, "root.b.capacity": b}
    )


def test_single_level_queues_precision(tmp_path: Path) -> None:
    """``testSingleLevelQueuesPrecision``: children of 30 and 70.5 "Capacity is more then
    100% so should be failed"; 30 and 70 load; 30 and 70.005 load too ("under PRECISION
    which is .05%")."""
    with pytest.raises(QueueConfigError, match=r"sum to 100\.5, not 100"):
        load_queues(two_leaves(tmp_path, "30", "70.5"))
    assert [q.capacity for q in load_queues(two_leaves(tmp_path, "30", "70")).root.children] == [
        30.0,
        70.0,
    ]
    loaded = load_queues(two_leaves(tmp_path, "30", "70.005")).root.children
    assert [q.name for q in loaded] == ["a", "b"]

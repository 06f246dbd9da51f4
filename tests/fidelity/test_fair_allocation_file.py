"""An allocation file, as ``--queues`` reads it, drives the FairScheduler rules end to
end: the Hadoop preemption test's file (``TestFairSchedulerPreemption.writeAllocFile``,
min-share mode) put on a treadle workload with ``apply_queues`` and run under ``fair``
with ``preemption=true``, as ``treadle sim WORKLOAD --queues FILE --policy fair --set
preemption=true`` does."""

from __future__ import annotations

from pathlib import Path

from treadle import registry
from treadle.importers.yarnconf import load_queues
from treadle.importers.yarnqueues import apply_queues
from treadle.model import Workload
from treadle.sim import Simulation

from .fair_helpers import Log, job, nodes, res

ALLOC_FILE = """<?xml version="1.0"?>
<allocations>
  <queue name="preemptable">
    <minSharePreemptionTimeout>0</minSharePreemptionTimeout>
    <queue name="child-1"><minResources>4096mb,4vcores</minResources></queue>
    <queue name="child-2"><minResources>4096mb,4vcores</minResources></queue>
  </queue>
  <queue name="nonpreemptable">
    <allowPreemptionFrom>false</allowPreemptionFrom>
    <minSharePreemptionTimeout>0</minSharePreemptionTimeout>
    <queue name="np-child-1"><minResources>4096mb,4vcores</minResources></queue>
  </queue>
</allocations>
"""


def _run(tmp_path: Path, greedy: str, starving: str) -> Log:
    path = tmp_path / "fair-scheduler.xml"
    path.write_text(ALLOC_FILE)
    jobs = (
        job("greedy", greedy, 8, 100, res(1)),
        job("starving1", starving, 4, 100, res(2, 2), submit_s=10),
    )
    wl, refused = apply_queues(Workload("w", nodes(2, 4, 12), jobs), load_queues(path))
    assert refused == []
    params = {"resource": "memory", "preemption": True, "wait_before_kill_s": 0.0,
              "utilization_threshold": 0.0}  # fmt: skip
    policy = registry.build("policies", "fair", params)
    result = Simulation(wl, policy, lambda: registry.build("asks", "greedy")).run()
    return Log(result)


def test_the_files_min_shares_and_timeouts_preempt_between_sibling_leaves(
    tmp_path: Path,
) -> None:
    """``testPreemptionBetweenTwoSiblingLeafQueues`` from the file: greedy keeps 4
    containers, the starving application gets 2."""
    log = _run(tmp_path, "child-1", "child-2")
    assert log.tasks_running(15.0) == {"greedy": 4, "starving1": 2}
    assert log.completed_tasks("greedy") == 8


def test_the_files_allow_preemption_from_protects_its_queues(tmp_path: Path) -> None:
    """``testNoPreemptionFromDisallowedQueue`` from the file: nothing is preempted from
    nonpreemptable's leaf."""
    log = _run(tmp_path, "np-child-1", "child-1")
    assert log.preempted() == []
    assert log.tasks_running(15.0) == {"greedy": 8}

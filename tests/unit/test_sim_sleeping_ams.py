"""AMs asleep in the simulator: an AM whose calls would repeat themselves and get nothing
back stops calling until the RM has news for it, and nothing a run produces changes.

The reference is the loop as it was before AMs could sleep: every AM call on the heap,
the calls of one instant in the order they were queued (one counter for all events).
Sub-second heartbeats are drawn too: their call times are float sums that round, so AMs'
calls coincide in ways integer heartbeats never show.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from am.core import ApplicationMaster
from tests.unit.test_sim_properties import POLICIES, dump, run, workloads
from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.resources import Resources
from treadle.sim import Simulation
from treadle.sim.amclock import AmClock, AmKey


class _QueuedKey(AmKey):
    __slots__ = ("seq",)

    def __init__(self, clock: AmClock, k: int, seq: int) -> None:
        super().__init__(clock, k)
        self.seq = seq

    def __lt__(self, other: AmKey) -> bool:
        return self.seq < other.seq  # type: ignore[attr-defined, no-any-return]

    def __gt__(self, other: AmKey) -> bool:
        return self.seq > other.seq  # type: ignore[attr-defined, no-any-return]


class QueueOrderSimulation(Simulation):
    """No AM sleeps; AM calls of one instant run in queue order."""

    def _am_key(self, clock: AmClock, k: int) -> Any:
        self._seq += 1
        return _QueuedKey(clock, k, self._seq)

    def _may_sleep(self, am: ApplicationMaster) -> bool:
        return False


_settings = settings(
    max_examples=max(5, 60 // max(1, len(POLICIES))),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.parametrize("policy", POLICIES)
@_settings
@given(workload=workloads(ties=True, heartbeats=(1.0, 0.5, 0.3, 0.1, 0.01)))
def test_sleeping_ams_change_nothing(policy: str, workload: Workload) -> None:
    fast = run(workload, policy)
    ref = run(workload, policy, QueueOrderSimulation)
    assert dump(fast) == dump(ref)
    assert fast.stats["allocates"] == ref.stats["allocates"]
    assert fast.stats["allocates_skipped"] == ref.stats["allocates_skipped"]


def _wide_job_workload() -> Workload:
    """The WTA CSV's shape in small: one job of 200 parallel stages of two 2 s tasks on 8
    slots at 10 ms heartbeats: 100 s, 10,000 AM intervals."""
    nodes = tuple(NodeSpec(f"n{i}", Resources(vcores=4)) for i in range(2))
    stages = tuple(StageSpec(f"s{i}", Resources(vcores=1), (2.0, 2.0)) for i in range(200))
    return Workload(
        "wide", ClusterSpec(nodes, heartbeat_s=0.01), (JobSpec("job", "u", 0.0, stages),)
    )


def test_a_busy_am_calls_only_when_it_has_news() -> None:
    """While its tasks run the AM has nothing to say: it calls when containers end (about
    for each wave of 8), not every 10 ms; the run is the reference's, call for call."""
    wl = _wide_job_workload()
    fast = run(wl, "uwfq")
    ref = run(wl, "uwfq", QueueOrderSimulation)
    assert dump(fast) == dump(ref)
    calls = fast.stats["allocates"] + fast.stats["allocates_skipped"]
    assert calls == ref.stats["allocates"] + ref.stats["allocates_skipped"] >= 10_000
    assert fast.stats["allocates"] < 400
    assert fast.stats["am_events"] < 1000 < ref.stats["am_events"]

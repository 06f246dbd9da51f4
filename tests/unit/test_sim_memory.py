"""The simulator releases what a job kept once the job ends: an ended job's AM is freed
while the run goes on, though the run pauses the cyclic collector (a long trace's memory
would otherwise grow with every task it ran, not with the work running at a time)."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from am.core import ApplicationMaster
from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.registry import build, factory
from treadle.resources import Resources
from treadle.sim import Simulation, handlers as sim_handlers

TASK = Resources(vcores=1, memory_mb=1024)


def _workload(jobs: int, scheduling: str) -> Workload:
    cluster = ClusterSpec(
        (NodeSpec("n1", Resources(vcores=4, memory_mb=8192)),), scheduling=scheduling
    )
    specs = tuple(
        JobSpec(f"j{k}", f"u{k % 2}", 10.0 * k, (StageSpec("s", TASK, (3.0, 4.0, 5.0)),))
        for k in range(jobs)
    )
    return Workload("ended", cluster, specs)


@pytest.mark.parametrize("scheduling", ["heartbeat", "event"])
@pytest.mark.parametrize("asks", ["greedy", "altruistic"])
def test_an_ended_jobs_am_is_freed_during_the_run(
    monkeypatch: pytest.MonkeyPatch, scheduling: str, asks: str
) -> None:
    made: list[weakref.ref[ApplicationMaster]] = []  # every AM the run made
    alive_at_submit: list[int] = []

    class Tracked(ApplicationMaster):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            alive_at_submit.append(sum(r() is not None for r in made))
            made.append(weakref.ref(self))

    monkeypatch.setattr(sim_handlers, "ApplicationMaster", Tracked)
    wl = _workload(6, scheduling)
    was = gc.isenabled()
    gc.disable()
    try:
        result = Simulation(wl, build("policies", "fifo"), factory("asks", asks)).run()
    finally:
        if was:
            gc.enable()
    assert result.finished == 6
    # Jobs 10 s apart take under 10 s each: at each submission the jobs before it ended,
    # and their AMs are gone already (not left for a collection after the run).
    assert alive_at_submit == [0] * 6

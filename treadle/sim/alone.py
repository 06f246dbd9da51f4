"""The alone-JCT of a job, worked out without simulating it where that is exact.

A reference run (``treadle.study.runner``) submits one job at 0 to the empty cluster,
under fifo with greedy AMs, and reads when it finished. For a job of one stage whose
tasks all find room in the heartbeats that come before the AM's second call, the
simulator's rule gives that time directly:

- at 0 the AM asks for every task; idle nodes then heartbeat in phase order (by
  ``node_phases``, ties by node order), each taking as many tasks as fit its free
  resources (the RM's own ``Accumulator`` test, so float dust counts the same), and
  nodes the task fits in no way never heartbeat;
- when every task is placed by a node whose phase is before the AM's call at
  ``t1 = am_interval_s``, that call receives them all and launches them: task ``i`` ends
  at ``t1 + d_i`` and its node reports it at that instant;
- the AM calls every ``am_interval_s`` (``t_{k+1} = t_k + am_interval_s``, in floats),
  and within an instant calls before heartbeats, so it hears of the last end at the first
  call after it: the job finishes at the first ``t_k > max(t1 + d_i)``;
- the event log rounds times to 1 us.

Anything else (several stages, tasks left over after the first round of heartbeats, a
run long enough for the stall detector to look at, a cluster with event-driven scheduling)
is left to the simulator: ``jct`` returns None. ``tests/unit/test_alone_exact.py``
compares this rule with the simulation on random clusters, phases and job shapes.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from treadle.model import JobSpec, Workload
from treadle.resources import Accumulator, Resources
from treadle.sim.engine import node_phases

#: Longer runs (in AM calls) are simulated: the rule walks the calls one by one.
MAX_CALLS = 100_000


class _Fit(NamedTuple):
    """How many tasks of one size an empty node of one capacity takes, as far as counted."""

    tasks: int
    complete: bool  # whether that is all of them (the count stopped short of its limit)


class AloneModel:
    """Exact alone-JCTs on ``workload``'s cluster (reference settings: fifo, greedy AMs,
    ``am_interval_s`` (None: the heartbeat), ``stall_s``, ``phase_seed``)."""

    def __init__(
        self,
        workload: Workload,
        *,
        am_interval_s: float | None = None,
        stall_s: float = 3600.0,
        phase_seed: int = 0,
    ) -> None:
        nodes = workload.cluster.nodes
        phases = node_phases(workload, phase_seed)
        order = sorted(range(len(nodes)), key=lambda i: (phases[i], i))
        self._nodes = [(phases[i], nodes[i].resources) for i in order]
        am = am_interval_s if am_interval_s is not None else workload.cluster.heartbeat_s
        self._am = am
        self._stall_s = stall_s
        self._event_driven = workload.cluster.event_driven  # the rule is heartbeat mode's
        #: (node capacity, task resources) -> the tasks that fit
        self._fit: dict[tuple[Resources, Resources], _Fit] = {}

    def _fits(self, capacity: Resources, task: Resources, limit: int) -> int:
        """How many of ``limit`` tasks of ``task`` an empty node of ``capacity`` takes."""
        known = self._fit.get((capacity, task))
        if known is not None and (known.complete or known.tasks >= limit):
            return min(known.tasks, limit)
        free = Accumulator(capacity)
        count = 0
        while count < limit and free.covers(task):
            free.sub(task)
            count += 1
        self._fit[(capacity, task)] = _Fit(count, count < limit)
        return count

    def jct(self, job: JobSpec) -> float | None:
        """``job``'s finish time alone on the empty cluster, submitted at 0; None when the
        rule above does not apply (simulate it then)."""
        if len(job.stages) != 1 or self._event_driven:
            return None
        stage = job.stages[0]
        durations = stage.durations
        am = self._am
        if not durations or not (am > 0 and math.isfinite(am)):
            return None
        t1 = 0.0 + am
        left = len(durations)
        task = stage.resources
        for phase, capacity in self._nodes:
            if not phase < t1:
                return None  # this node heartbeats at or after the AM's second call
            left -= self._fits(capacity, task, left)
            if not left:
                break
        else:
            return None  # tasks left over after one round of heartbeats
        last = max([t1 + d for d in durations])
        if not (last < self._stall_s and (last - t1) / am < MAX_CALLS):
            return None
        t = t1
        while not t > last:
            t = t + am
        if t > self._stall_s:
            return None
        return round(float(t), 6)

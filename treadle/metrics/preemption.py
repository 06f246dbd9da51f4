"""The ``preemption`` section of summary.json, for runs in which a policy preempted
containers (none in other runs: their summaries are unchanged).

Per preempted container (a ``container_preempted`` record): the work it had done, from
when it started (its ``container_started``; its allocation when it never started) to
its preemption, is lost, and its task runs again in full (treadle's AMs re-run a
preempted container's task; it is not a failed attempt). ``containers``: how many;
``container_s_lost``: those seconds summed (the work re-run); ``per_queue``: both by the
queue the container was taken from.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from treadle import events as ev
from treadle.metrics.dp import _rows, _strings

CONTAINER_PREEMPTED = ev.CONTAINER_PREEMPTED


def preemption_summary(table: pa.Table) -> dict[str, Any] | None:
    """The section (module docstring); None when nothing was preempted."""
    pre = _rows(table, CONTAINER_PREEMPTED)
    if len(pre) == 0:
        return None
    began = _starts(table)
    t = table.column("t").take(pre).to_pylist()
    cids = _strings(table, "container", pre)
    queues = _strings(table, "queue", pre)
    per_queue: dict[str, dict[str, float]] = {}
    lost_total = 0.0
    for at, cid, queue in zip(t, cids, queues, strict=True):
        lost = max(float(at) - began.get(cid, float(at)), 0.0)
        lost_total += lost
        q = per_queue.setdefault(queue, {"containers": 0, "container_s_lost": 0.0})
        q["containers"] += 1
        q["container_s_lost"] += lost
    return {
        "containers": len(pre),
        "container_s_lost": lost_total,
        "per_queue": {q: per_queue[q] for q in sorted(per_queue)},
    }


def _starts(table: pa.Table) -> dict[str, float]:
    """Per container, when it started (else when it was allocated)."""
    out: dict[str, float] = {}
    for event in (ev.CONTAINER_ALLOCATED, ev.CONTAINER_STARTED):  # a start overrides
        rows = _rows(table, event)
        times = table.column("t").take(rows).to_pylist()
        for cid, at in zip(_strings(table, "container", rows), times, strict=True):
            out[cid] = float(at)
    return out

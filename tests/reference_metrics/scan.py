"""One pass over the event log: per-job and per-container facts, the capacity, the horizon.

The records need not be sorted by ``t`` (NodeManagers report start and finish times late):
the scan keeps, per job and per container, the earliest or latest time it needs, and the
other modules sort once where a sweep over time is required.

Definitions chosen where DESIGN.md leaves room:

* A job's end is its earliest ``job_finished`` / ``job_failed``; its status is the one that
  record carries (``SUCCEEDED`` for a ``job_finished`` without one, ``FAILED`` for a
  ``job_failed``). A job without either is ``UNFINISHED``.
* The *horizon* is [first job submission, last job end], where a job end is any
  ``job_finished`` or ``job_failed`` (whatever its status). When no job has ended, it is
  the last record.
* A container holds its resources from ``container_allocated`` until the earliest of its
  ``container_finished`` / ``container_released``, or until the last record of the log if
  neither came. An end earlier than the allocation (clock skew) counts as zero length.
* Capacity is ``run_started.capacity``; without it, the sum over nodes of their latest
  ``node_registered`` resources. It is kept constant when nodes are lost, so utilization
  is always relative to the cluster the run started with.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from treadle import events as ev

SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
KILLED = "KILLED"
UNFINISHED = "UNFINISHED"

RecordLike = Mapping[str, Any]
# (job, start, end, resources, dominant share): a container's holding interval
Span = tuple[str, float, float, Mapping[str, float], float]


@dataclass(slots=True)
class JobFacts:
    job: str
    submit: float | None = None
    name: str = ""
    user: str = ""
    queue: str = ""
    tasks: int = 0
    alone: float | None = None
    started: float | None = None  # earliest job_started
    first_alloc: float | None = None  # earliest container_allocated
    end: float | None = None  # earliest job_finished / job_failed
    status: str | None = None


@dataclass(slots=True)
class ContainerFacts:
    alloc: float | None = None
    resources: Mapping[str, float] | None = None
    end: float | None = None


@dataclass(slots=True)
class LogFacts:
    """What the metrics need from one event log, gathered by ``scan``."""

    run: RecordLike | None = None
    run_t: float = math.inf
    capacity: dict[str, float] = field(default_factory=dict)
    jobs: dict[str, JobFacts] = field(default_factory=dict)
    containers: dict[tuple[str, str], ContainerFacts] = field(default_factory=dict)
    last_t: float | None = None
    _spans: list[Span] | None = None

    def horizon(self) -> tuple[float, float] | None:
        """[first submit, last job end] (or the last record when no job ended)."""
        submits = [j.submit for j in self.jobs.values() if j.submit is not None]
        if not submits:
            return None
        start = min(submits)
        ends = [j.end for j in self.jobs.values() if j.submit is not None and j.end is not None]
        end = max(ends) if ends else self.last_t
        if end is None or end < start:
            return None
        return start, end

    def spans(self) -> list[Span]:
        """Every allocated container's holding interval clipped to the horizon (computed once).

        Zero-length spans are dropped; each carries its dominant share of the capacity.
        """
        if self._spans is not None:
            return self._spans
        out: list[Span] = []
        hz = self.horizon()
        if hz is not None:
            lo, hi = hz
            last = self.last_t if self.last_t is not None else hi
            cap = self.capacity
            keyed = []
            for (job, cid), c in self.containers.items():
                if c.alloc is None or c.resources is None:
                    continue
                a = max(c.alloc, lo)
                b = min(c.end if c.end is not None else last, hi)
                if b > a:
                    keyed.append((a, b, job, cid, c.resources))
            # A fixed order makes float sums independent of the order of the records.
            keyed.sort(key=lambda k: k[:4])
            out = [(job, a, b, res, dominant_share(res, cap)) for a, b, job, _, res in keyed]
        self._spans = out
        return out


def dominant_share(res: Mapping[str, float], cap: Mapping[str, float]) -> float:
    """The largest fraction of the capacity that ``res`` takes of any one resource."""
    best = 0.0
    for k, v in res.items():
        c = cap.get(k)
        if c:
            s = float(v) / c
            if s > best:
                best = s
    return best


def _min(a: float | None, b: float) -> float:
    return b if a is None or b < a else a


def scan(records: Iterable[RecordLike]) -> LogFacts:
    """Gather the facts of one event log in one pass (records in any order)."""
    log = LogFacts()
    jobs = log.jobs
    containers = log.containers
    nodes: dict[str, tuple[float, Mapping[str, float]]] = {}
    last_t: float | None = None

    def job_of(rec: RecordLike) -> JobFacts:
        key = str(rec["job"])
        j = jobs.get(key)
        if j is None:
            j = jobs[key] = JobFacts(key)
        return j

    def container_of(rec: RecordLike) -> ContainerFacts:
        key = (str(rec["job"]), str(rec["container"]))
        c = containers.get(key)
        if c is None:
            c = containers[key] = ContainerFacts()
        return c

    for rec in records:
        t = float(rec["t"])
        if last_t is None or t > last_t:
            last_t = t
        kind = rec["event"]
        if kind == ev.CONTAINER_ALLOCATED:
            c = container_of(rec)
            if c.alloc is None or t < c.alloc:
                c.alloc = t
                c.resources = rec.get("resources") or {}
            j = job_of(rec)
            j.first_alloc = _min(j.first_alloc, t)
        elif kind == ev.CONTAINER_FINISHED or kind == ev.CONTAINER_RELEASED:
            c = container_of(rec)
            c.end = _min(c.end, t)
        elif kind == ev.JOB_SUBMITTED:
            j = job_of(rec)
            if j.submit is None or t < j.submit:
                j.submit = t
                j.name = str(rec.get("name") or j.job)
                j.user = str(rec.get("user") or "")
                j.queue = str(rec.get("queue") or "")
                j.tasks = int(rec.get("tasks") or 0)
                alone = rec.get("alone_jct_s")
                j.alone = float(alone) if alone is not None else None
        elif kind == ev.JOB_STARTED:
            j = job_of(rec)
            j.started = _min(j.started, t)
        elif kind == ev.JOB_FINISHED or kind == ev.JOB_FAILED:
            j = job_of(rec)
            if j.end is None or t < j.end:
                j.end = t
                default = FAILED if kind == ev.JOB_FAILED else SUCCEEDED
                j.status = str(rec.get("status") or default)
        elif kind == ev.RUN_STARTED:
            if t < log.run_t:
                log.run, log.run_t = rec, t
        elif kind == ev.NODE_REGISTERED:
            node = str(rec["node"])
            prev = nodes.get(node)
            if prev is None or t >= prev[0]:
                nodes[node] = (t, rec.get("resources") or {})
    log.last_t = last_t

    cap: Mapping[str, Any] | None = log.run.get("capacity") if log.run is not None else None
    if cap:
        log.capacity = {k: float(v) for k, v in cap.items() if v}
    else:
        total: dict[str, float] = {}
        for _, res in nodes.values():
            for k, v in res.items():
                total[k] = total.get(k, 0.0) + float(v)
        log.capacity = {k: v for k, v in total.items() if v > 0}
    return log

"""What the Google cluster trace importers share (``google2011``, ``google2019``): the task
life cycle both traces record, turned into jobs as the events stream by.

Both traces are tables of task (2019: instance) events in time order, timestamps in
microseconds, with two special times: 0 (before the trace window) and 2^63 - 1 (after
it). ``JobStream`` reads ``TaskEvent``s (and, for 2011, ``JobEvent``s) and yields each
job when it ends, so it holds only the jobs still open (their tasks, keyed by job and
task index) and the IDs of the ended ones (to ignore their late events); the rule, with
``GoogleOptions``' defaults in brackets:

- a job is submitted at its first SUBMIT (its own or a task's); a task's duration runs
  from its last SCHEDULE to its FINISH; its ask is its last SUBMIT's or UPDATE's
  request, normalised to the largest machine (cpu x ``node_vcores``, memory x
  ``node_memory_mb``);
- EVICT and FAIL send a task back to wait for a resubmission (Google's scheduler
  resubmits most); KILL and LOST end it. A job ends when all its tasks have ended
  (FINISH, KILL or LOST), at its own end event (2011's job_events) or at the end of the
  input; events of an ended job are then ignored (counted);
- left out, and counted at INFO level: a job with an event at time 0 or a task first
  seen after its SUBMIT (it began before the trace), one with an event after the trace
  or a task still waiting or running when it ends (it did not finish in the trace), a
  task without a request, and, with ``failed`` [``drop``], a job with a task whose last
  run did not FINISH (as the Alibaba importers leave out non-Terminated jobs). With
  ``failed="keep"`` such a task is kept with the time its last run lasted (SCHEDULE to
  the event that ended it) and a task that never ran is left out of its job;
- a job's tasks form one stage per distinct ask (``s1``, ``s2``, ... in task order),
  independent of each other; its priority and scheduling class are its first event's;
- the width cap (``Reshape``) [150 tasks, ``drop``: the SLearn paper's rule for the
  Google traces] applies to each job as it ends.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog

from treadle.errors import WorkloadError
from treadle.importers.common import TraceFile, default_users
from treadle.importers.tabular import (
    MAX_TASKS,
    MAX_TASKS_PER_STAGE,
    Reshape,
    Row,
    TaskBudget,
    cap_width,
    duration,
)
from treadle.model import DEFAULT_RACK, ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.resources import Resources

log = structlog.get_logger("importers")

BEFORE_TRACE = 0
AFTER_TRACE = (1 << 63) - 1
MAX_NODES = 100_000
MAX_PRIORITY = 1 << 31
FAILED_HANDLING = ("drop", "keep")

# The life-cycle steps both traces share (their numeric codes differ: see each module).
SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST, UPDATE, OTHER = range(9)
ENDS = (FINISH, KILL, LOST)


@dataclass(frozen=True)
class GoogleOptions:
    """The cluster shape and the handling of tasks that did not finish."""

    nodes: int = 12_500
    """The cluster's machines (the 2011 cell had about 12,500; a 2019 cell about 12,000)."""
    node_vcores: float = 32
    """vcores of the largest machine: a cpu request of 1 (normalised) asks this many."""
    node_memory_mb: float = 65_536
    """memory of the largest machine: a memory request of 1 asks this many MB."""
    failed: str = "drop"
    """``drop``: a job with a task that did not finish is left out; ``keep``: such a task
    is kept with the time its last run lasted."""
    user: str = "google"
    """The user of jobs whose rows name none (the 2019 instance events name none)."""
    reshape: Reshape = field(default_factory=lambda: Reshape(width_cap=150, cap_mode="drop"))

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES:
            raise ValueError(f"nodes must be 1..{MAX_NODES}, got {self.nodes}")
        for name in ("node_vcores", "node_memory_mb"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.failed not in FAILED_HANDLING:
            raise ValueError(f"failed must be drop or keep, got {self.failed!r}")
        if not self.user:
            raise ValueError("user must not be empty")


OPTION_NAMES = ("nodes", "node_vcores", "node_memory_mb", "failed", "width_cap")


def options_from(source: str, given: dict[str, Any], base: GoogleOptions) -> GoogleOptions:
    """``base`` with importer options (``OPTION_NAMES``; ``width_cap`` 0 means none)."""
    for name, value in given.items():
        if name not in OPTION_NAMES:
            raise WorkloadError(
                source, name, f"not an option of the Google importers ({', '.join(OPTION_NAMES)})"
            )
        if name == "failed" and value not in FAILED_HANDLING:
            raise WorkloadError(source, name, f"expected drop or keep, got {value!r}")
        if name != "failed" and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise WorkloadError(source, name, f"expected a number, got {value!r}")
    try:
        cap = given.get("width_cap", base.reshape.width_cap)
        reshape = replace(base.reshape, width_cap=None if not cap else int(cap))
        rest = {k: v for k, v in given.items() if k != "width_cap"}
        if "nodes" in rest:
            rest["nodes"] = int(rest["nodes"])
        return replace(base, reshape=reshape, **rest)
    except ValueError as e:
        raise WorkloadError(source, None, str(e)) from None


@dataclass(frozen=True)
class Loaders:
    """A Google format's loaders (``FORMATS`` takes ``load_trace`` and
    ``load_trace_with``; ``load`` is the Python call): ``jobs`` of a trace under the
    format's ``defaults`` and the importer options given (``options_from``), as one
    workload."""

    defaults: GoogleOptions
    jobs: Callable[[TraceFile, GoogleOptions], JobStream]

    def load_trace(self, trace: TraceFile, nodes_file: str | None) -> Workload:
        return self.load_trace_with(trace, nodes_file, {})

    def load_trace_with(
        self, trace: TraceFile, nodes_file: str | None, given: Mapping[str, Any]
    ) -> Workload:
        """With importer options ``nodes``, ``node_vcores``, ``node_memory_mb``,
        ``failed`` (drop or keep), ``width_cap`` (0: none)."""
        if nodes_file is not None:
            raise WorkloadError(
                trace.source, None, "a nodes file applies only to SLS and Rumen traces"
            )
        options = options_from(trace.source, dict(given), self.defaults)
        return workload(trace_name(trace), self.jobs(trace, options))

    def load(
        self, path: str | Path, options: GoogleOptions | None = None, source: str = ""
    ) -> Workload:
        trace = TraceFile(Path(path), source)
        return workload(trace_name(trace), self.jobs(trace, options or self.defaults))


def trace_name(trace: TraceFile) -> str:
    """The workload's name: the file's or the directory's, without ``.gz`` and its type."""
    name = trace.path.name.removesuffix(".gz")
    return name.rsplit(".", 1)[0] if "." in name and not trace.path.is_dir() else name


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """One row of a task event table, in the life-cycle steps above."""

    time_us: int
    step: int
    job: str
    index: int
    user: str | None
    priority: int | None
    scheduling_class: int | None
    cpu: float | None
    memory: float | None
    row: Row


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One row of 2011's job_events (its job's SUBMIT, end, or another step)."""

    time_us: int
    step: int
    job: str
    user: str | None
    scheduling_class: int | None
    row: Row


def micros(row: Row, name: str) -> int:
    """A timestamp in microseconds: a whole number 0..2^63 - 1, kept exact."""
    raw = row.text(name)
    if not raw.isdigit():
        raise row.error(name, f"expected a whole number of microseconds, got {raw!r}")
    value = int(raw)
    if value > AFTER_TRACE:
        raise row.error(name, f"must be in 0..2^63-1 (2^63-1: after the trace), got {raw}")
    return value


def optional_count(row: Row, name: str, high: int) -> int | None:
    """A whole number 0..high, or None when the field is empty."""
    return None if not row.text(name) else row.count(name, high=high)


def in_order(rows: Iterable[Any]) -> Iterator[Any]:
    """``rows`` (with ``time_us`` and ``row``), checked to be in time order."""
    last = 0
    for r in rows:
        if r.time_us < last:
            raise r.row.error(
                "time",
                f"{r.time_us} is before the row above's {last}; the rows must be in time order",
            )
        last = r.time_us
        yield r


def merged(tasks: Iterable[TaskEvent], jobs: Iterable[JobEvent]) -> Iterator[Any]:
    """Both tables in one time order: at one time a job's SUBMIT comes before its tasks'
    events, and its end after them."""

    def rank(e: TaskEvent | JobEvent) -> tuple[int, int]:
        if isinstance(e, TaskEvent):
            return (e.time_us, 1)
        return (e.time_us, 0 if e.step == SUBMIT else 2)

    return heapq.merge(in_order(tasks), in_order(jobs), key=rank)


class _Task:
    __slots__ = ("ask", "ran_us", "start_us", "state")

    def __init__(self) -> None:
        self.ask: tuple[float, float] | None = None  # (cpu, memory), normalised
        self.start_us: int | None = None
        self.ran_us: int | None = None  # how long its last run lasted, once it ended
        self.state = "waiting"  # waiting, running, failed (may come back), finished, ended


UNSETTLED = ("waiting", "running", "failed")


class _Job:
    __slots__ = ("after", "before", "priority", "row", "scheduling_class", "submit_us",
                 "tasks", "unsettled", "user")  # fmt: skip

    def __init__(self, e: TaskEvent | JobEvent, user: str) -> None:
        self.submit_us = e.time_us
        self.user = e.user or user
        self.priority = e.priority if isinstance(e, TaskEvent) else None
        self.scheduling_class = e.scheduling_class
        self.tasks: dict[int, _Task] = {}
        self.unsettled = 0  # tasks waiting, running or failed
        self.before = e.time_us == BEFORE_TRACE or e.step != SUBMIT
        self.after = False
        self.row = e.row


class JobStream:
    """The jobs of a stream of events (see the module's rule), each as it ends; after the
    iteration ``left_out`` counts the jobs left out by reason."""

    def __init__(self, events: Iterable[TaskEvent | JobEvent], o: GoogleOptions, source: str):
        self.events = events
        self.o = o
        self.source = source
        self.left_out: Counter[str] = Counter()
        self.budget = TaskBudget(source)
        self.open_tasks = 0
        self.users: dict[str, None] = {}

    def __iter__(self) -> Iterator[JobSpec]:
        jobs: dict[str, _Job] = {}
        ended: set[str] = set()
        for e in self.events:
            if e.job in ended:
                if isinstance(e, TaskEvent):
                    self.left_out["task events after their job ended (ignored)"] += 1
                continue
            job = jobs.get(e.job)
            if job is None:
                job = jobs[e.job] = _Job(e, self.o.user)
            job.after = job.after or e.time_us == AFTER_TRACE
            own_end = isinstance(e, JobEvent) and e.step != SUBMIT
            if isinstance(e, TaskEvent):
                self._task_event(job, e)
            if own_end or job.after or (job.unsettled == 0 and job.tasks):
                ended.add(e.job)
                spec = self._finish(e.job, jobs.pop(e.job), at_end=False)
                if spec is not None:
                    yield spec
        for name, job in jobs.items():
            spec = self._finish(name, job, at_end=True)
            if spec is not None:
                yield spec

    def _task_event(self, job: _Job, e: TaskEvent) -> None:
        task = job.tasks.get(e.index)
        if task is None:
            if len(job.tasks) >= MAX_TASKS_PER_STAGE:
                raise e.row.error("task_index", f"over {MAX_TASKS_PER_STAGE} tasks in job {e.job}")
            self.open_tasks += 1
            if self.open_tasks > MAX_TASKS:
                raise e.row.error("task_index", f"over {MAX_TASKS} tasks open at once")
            task = job.tasks[e.index] = _Task()
            job.unsettled += 1
            job.before = job.before or e.step != SUBMIT or e.time_us == BEFORE_TRACE
        if job.priority is None:
            job.priority = e.priority
        if job.scheduling_class is None:
            job.scheduling_class = e.scheduling_class
        if e.cpu is not None and e.memory is not None and e.step in (SUBMIT, UPDATE):
            task.ask = (e.cpu, e.memory)
        step = e.step
        if step == SUBMIT:
            if task.state not in UNSETTLED:
                job.unsettled += 1
            task.state = "waiting"
        elif step == SCHEDULE:
            task.state, task.start_us = "running", e.time_us
        elif step in (EVICT, FAIL, FINISH, KILL, LOST) and task.state in UNSETTLED:
            if task.state == "running" and task.start_us is not None:
                task.ran_us = e.time_us - task.start_us
            if step in ENDS:
                job.unsettled -= 1
                task.state = "finished" if step == FINISH and task.state == "running" else "ended"
            else:
                task.state = "failed"  # EVICT, FAIL: resubmitted later, as a rule

    def _finish(self, name: str, job: _Job, *, at_end: bool) -> JobSpec | None:
        """The job as it ended (at its own end, its tasks', or the input's: ``at_end``)."""
        self.open_tasks -= len(job.tasks)
        if job.before:
            return self._out("begun before the trace")
        states = [t.state for t in job.tasks.values()]
        if job.after or (at_end and ("waiting" in states or "running" in states)):
            return self._out("not finished in the trace")
        if not job.tasks:
            return self._out("without tasks")
        if any(t.ask is None for t in job.tasks.values()):
            return self._out("with a task without a request")
        if self.o.failed == "drop" and any(s != "finished" for s in states):
            return self._out("with a task that did not finish")
        kept: dict[tuple[float, float], list[float]] = {}
        for _, task in sorted(job.tasks.items()):
            if task.ask is None or task.ran_us is None:
                continue  # never ran
            if task.state == "finished" or self.o.failed == "keep":
                kept.setdefault(task.ask, []).append(task.ran_us / 1e6)
        if not kept:
            return self._out("with no task that ran")
        return self._spec(name, job, kept)

    def _spec(
        self, name: str, job: _Job, kept: dict[tuple[float, float], list[float]]
    ) -> JobSpec | None:
        o = self.o
        stages = tuple(
            StageSpec(
                f"s{i}",
                Resources(vcores=cpu * o.node_vcores, memory_mb=memory * o.node_memory_mb),
                tuple(duration(seconds) for seconds in tasks),
            )
            for i, ((cpu, memory), tasks) in enumerate(kept.items(), start=1)
        )
        spec = JobSpec(
            f"job{name}",
            job.user,
            job.submit_us / 1e6,
            stages,
            priority=job.priority,
            scheduling_class=job.scheduling_class,
        )
        cap, mode = o.reshape.width_cap, o.reshape.cap_mode
        if cap is not None:
            capped = cap_width([spec], cap, mode)
            if not capped:
                return self._out(f"over the width cap of {cap} tasks")
            spec = capped[0]
        self.budget.take(job.row, "task_index", spec.tasks)
        self.users.setdefault(spec.user)
        return spec

    def _out(self, reason: str) -> JobSpec | None:
        """None, the job left out for ``reason`` (counted)."""
        self.left_out[f"jobs {reason}"] += 1
        return None


def workload(name: str, stream: JobStream) -> Workload:
    """The whole workload of a stream of jobs: submit times from the first kept job's,
    the cluster of ``stream``'s options."""
    o = stream.o
    jobs = sorted(stream, key=lambda j: j.submit_s)
    for reason, n in sorted(stream.left_out.items()):
        log.info("left out", trace=stream.source, what=f"{n} {reason}")
    if not jobs:
        raise WorkloadError(stream.source, None, "no job finished within the trace")
    t0 = jobs[0].submit_s
    jobs = [replace(j, submit_s=round(j.submit_s - t0, 6)) for j in jobs]
    node = Resources(vcores=o.node_vcores, memory_mb=o.node_memory_mb)
    cluster = ClusterSpec(
        tuple(NodeSpec(f"node{i}", node, DEFAULT_RACK) for i in range(1, o.nodes + 1))
    )
    wl = Workload(name, cluster, tuple(jobs), users=default_users(stream.users))
    return replace(o.reshape, width_cap=None).apply(wl)

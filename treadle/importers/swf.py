"""The Parallel Workloads Archive's Standard Workload Format (``swf/``; docs: traces.md).

A file (plain, or gzip read directly) holds ``;`` header comments, then one job per line
of 18 whitespace-separated fields: job number, submit time, wait time, run time,
allocated processors, average CPU time, used memory, requested processors, requested
time, requested memory, status, user id, group id, application number, queue number,
partition number, preceding job, think time; ``-1`` means "not known".

Mapping to the model:

- the cluster is ``MaxNodes`` nodes of ``MaxProcs / MaxNodes`` vcores each (from the
  header's ``; MaxNodes:`` and ``; MaxProcs:``; when MaxNodes does not divide MaxProcs,
  or one is missing, ``MaxProcs`` (else ``MaxNodes``) one-vcore nodes; with neither, as
  many one-vcore nodes as the widest job has processors). There is no memory: tasks ask
  ``vcores = 1`` and nodes hold only vcores;
- a job is one stage ``run`` of P tasks of 1 vcore, each lasting the job's run time
  (field 4), P = the allocated processors (field 5), or the requested ones (field 8)
  when that is -1. A parallel job's processors become independent containers: no gang
  scheduling, so its tasks may start at different times when the cluster is busy;
- the job is named ``job<number>``, submitted at its submit time (field 2) less the
  earliest kept job's, by user ``user<id>`` (field 12; -1 gives ``user_unknown``) into
  the queue named by the header's ``; Queue: <n> <name>`` line for its queue number
  (field 15), else ``queue<n>``; -1 gives ``default``. Partitions (field 16) are ignored:
  the whole machine is one pool. Wait time, memory, group, application, preceding job
  and think time are not used (the log's own start times are the submit times, so its
  waits are not replayed);
- statuses kept: 1 (completed), 0 (failed), -1 (unknown) and 5 (cancelled) when the job
  ran (run time > 0): each used its processors for its run time. Statuses 2, 3 and 4 are
  the partial executions of checkpointed jobs, whose whole job has its own line: left
  out. Also left out: jobs whose run time, submit time or processor count (allocated and
  requested) is -1, or whose run time or processors are 0 (nothing to run). The counts
  left out are logged at INFO level.

A line that is not 18 numbers, or a header value that is not a number, is an error naming
the file, the line and the field.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import structlog

from treadle.errors import WorkloadError
from treadle.importers.common import TraceFile, default_users, flat_queues
from treadle.importers.tabular import (
    MAX_TASKS_PER_STAGE,
    Row,
    TaskBudget,
    check_columns,
    duration,
    head,
    lines,
)
from treadle.model import (
    DEFAULT_QUEUE,
    DEFAULT_RACK,
    ClusterSpec,
    JobSpec,
    NodeSpec,
    StageSpec,
    Workload,
)
from treadle.resources import Resources

log = structlog.get_logger("importers")

FIELDS = (
    "job_number",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_processors",
    "average_cpu_time",
    "used_memory",
    "requested_processors",
    "requested_time",
    "requested_memory",
    "status",
    "user_id",
    "group_id",
    "executable_number",
    "queue_number",
    "partition_number",
    "preceding_job_number",
    "think_time",
)
_INDEX = {name: i for i, name in enumerate(FIELDS)}
KEPT_STATUSES = (1, 0, -1, 5)
"""Statuses imported (5, cancelled, only when the job ran)."""
MAX_NODES = 100_000
_HEADER = re.compile(r"^;\s*([A-Za-z]+)\s*:\s*(.*)$")
_DATA = re.compile(r"^\s*-?\d+(\s+-?\d+(\.\d+)?){17}\s*$")
TASK = Resources(vcores=1)


def sniff(trace: TraceFile) -> bool:
    """A ``;`` comment with an SWF header key, or a first data line of 18 numbers."""
    for line in head(trace).splitlines()[:-1]:
        if not line.strip():
            continue
        match = _HEADER.match(line.strip())
        if match:
            if match.group(1) in ("Version", "Computer", "MaxJobs", "MaxNodes", "MaxProcs"):
                return True
            continue
        if line.lstrip().startswith(";"):
            continue
        return bool(_DATA.match(line))
    return False


def load_trace(trace: TraceFile, nodes_file: str | None) -> Workload:
    if nodes_file is not None:
        raise WorkloadError(
            trace.source, None, "a nodes file applies only to SLS, Rumen and Alibaba 2023 traces"
        )
    return load_swf(trace)


@dataclass
class _Job:
    number: int
    submit_s: float
    run_s: float
    procs: int
    user: str
    queue_number: int


def load_swf(trace: TraceFile) -> Workload:
    source = trace.source
    header: dict[str, tuple[int, str]] = {}
    queue_names: dict[int, str] = {}
    jobs: list[_Job] = []
    dropped: Counter[str] = Counter()
    budget = TaskBudget(source)
    for n, line in lines(trace):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(";"):
            match = _HEADER.match(stripped)
            if match:
                key, value = match.group(1), match.group(2).strip()
                header.setdefault(key, (n, value))
                if key == "Queue":
                    number, _, name = value.partition(" ")
                    if number.lstrip("-").isdigit() and name.strip():
                        queue_names[int(number)] = name.strip().split()[0]
            continue
        fields = stripped.split()
        check_columns(source, n, FIELDS, fields)
        row = Row(source, n, _INDEX, fields)
        job = _read_job(row, budget, dropped)
        if job is not None:
            jobs.append(job)
    if dropped:
        log.info(
            "%s: left out %s", source, ", ".join(f"{v} {k}" for k, v in sorted(dropped.items()))
        )
    if not jobs:
        raise WorkloadError(source, None, "no job to run (no line, or every job left out)")
    cluster = _cluster(source, header, max(j.procs for j in jobs))
    t0 = min(j.submit_s for j in jobs)
    specs = []
    for j in jobs:
        queue = (
            DEFAULT_QUEUE
            if j.queue_number < 0
            else queue_names.get(j.queue_number, f"queue{j.queue_number}")
        )
        stage = StageSpec("run", TASK, (duration(j.run_s),) * j.procs)
        specs.append(JobSpec(f"job{j.number}", j.user, j.submit_s - t0, (stage,), queue))
    specs.sort(key=lambda j: j.submit_s)  # stable: file order among equal times
    names = [j.name for j in specs]
    if len(set(names)) != len(names):
        dup = next(name for name, c in Counter(names).items() if c > 1)
        raise WorkloadError(source, None, f"job number {dup.removeprefix('job')} appears twice")
    return Workload(
        trace.path.name.removesuffix(".gz").removesuffix(".swf"),
        cluster,
        tuple(specs),
        queues=flat_queues(j.queue for j in specs),
        users=default_users(j.user for j in specs),
    )


def _read_job(row: Row, budget: TaskBudget, dropped: Counter[str]) -> _Job | None:
    number = row.count("job_number", high=2**62)
    status = int(row.number("status", low=-1, high=5))
    submit = row.number("submit_time", low=-1)
    run = row.number("run_time", low=-1)
    procs = row.number("allocated_processors", low=-1, high=MAX_TASKS_PER_STAGE)
    if procs == -1:
        procs = row.number("requested_processors", low=-1, high=MAX_TASKS_PER_STAGE)
    for name in ("user_id", "queue_number"):
        row.number(name, low=-1, high=2**62)
    if status not in KEPT_STATUSES:
        dropped[f"partial executions (status {status})"] += 1
        return None
    if submit < 0 or run < 0 or procs < 0:
        dropped["jobs with an unknown submit time, run time or processors"] += 1
        return None
    if run == 0 or procs == 0:
        dropped["jobs with no run time or no processors"] += 1
        return None
    if not procs.is_integer():
        raise row.error("allocated_processors", f"expected a whole number, got {procs:g}")
    budget.take(row, "allocated_processors", int(procs))
    uid = int(row.number("user_id"))
    return _Job(
        number,
        submit,
        run,
        int(procs),
        "user_unknown" if uid < 0 else f"user{uid}",
        int(row.number("queue_number")),
    )


def _cluster(source: str, header: dict[str, tuple[int, str]], widest: int) -> ClusterSpec:
    def value(key: str) -> int | None:
        if key not in header:
            return None
        line, text = header[key]
        try:
            number = int(text.split()[0])
        except (ValueError, IndexError):
            number = 0
        if not 1 <= number <= MAX_TASKS_PER_STAGE:
            raise WorkloadError(
                source, f"line {line}.{key}", f"expected a whole number >= 1, got {text!r}"
            )
        return number

    nodes, procs = value("MaxNodes"), value("MaxProcs")
    if nodes and procs and procs % nodes == 0:
        count, per_node = nodes, procs // nodes
    else:
        count, per_node = procs or nodes or widest, 1
    if count > MAX_NODES:
        raise WorkloadError(source, None, f"{count} nodes; at most {MAX_NODES}")
    node = Resources(vcores=per_node)
    width = len(str(count))
    return ClusterSpec(
        tuple(NodeSpec(f"node{i:0{width}d}", node, DEFAULT_RACK) for i in range(1, count + 1))
    )

"""Google's 2011 cluster trace (clusterdata-2011-2): its ``job_events`` and
``task_events`` tables (docs: traces.md; the format is the google/cluster-data
repository's ClusterData2011_2 and its schema document).

The tables are headerless CSV shards in time order, ``task_events/part-00000-of-00500.csv.gz``
and so on. The importer reads one shard of task_events (gzip or plain), or a trace
directory holding ``task_events/`` and, optionally, ``job_events/``: their shards
(``*.csv``, ``*.csv.gz``) are read in name order and the two tables merged by time.
task_events' columns: time (microseconds), missing info, job ID, task index, machine ID,
event type, user (hashed), scheduling class, priority, CPU request, memory request, disk
space request, different-machines restriction; job_events': time, missing info, job ID,
event type, user, scheduling class, job name, logical job name. Event types: 0 SUBMIT,
1 SCHEDULE, 2 EVICT, 3 FAIL, 4 FINISH, 5 KILL, 6 LOST, 7 UPDATE_PENDING,
8 UPDATE_RUNNING. Mapping to the model (``treadle.importers.google`` has the life cycle
and the handling of tasks that did not finish), with ``GoogleOptions``' defaults in
brackets:

- a job is a job ID, named ``job<ID>``, submitted at its first SUBMIT (less the first
  kept job's), by its hashed user, to the queue ``default``; its priority and scheduling
  class (task_events' first; job_events' scheduling class when it comes first) are
  ``JobSpec.priority`` and ``JobSpec.scheduling_class``;
- a task is a (job ID, task index); it lasts from its last SCHEDULE to its FINISH and
  asks ``vcores`` = CPU request x ``node_vcores`` [32] and ``memory_mb`` = memory request
  x ``node_memory_mb`` [65,536] (both requests are normalised to the largest machine);
  disk, machine and the restriction are not modelled;
- with job_events, a job also ends at its own EVICT, FAIL, FINISH, KILL or LOST (what
  of it still waits never ran); without, when all its tasks have ended;
- the cluster is ``nodes`` [12,500] machines of the largest shape (the 2011 cell had
  about 12,500 machines of several smaller shapes: an assumption that favours packing);
- the width cap [150 tasks, ``drop``] is the SLearn paper's rule for this trace.

The rows are read as a stream (a job is built when it ends); sizes are bounded before
anything is allocated; a malformed row is an error naming the file, the line and the
column.
"""

from __future__ import annotations

from collections.abc import Iterator

from treadle.errors import WorkloadError
from treadle.importers import google
from treadle.importers.common import TraceFile
from treadle.importers.google import (
    MAX_PRIORITY,
    GoogleOptions,
    JobEvent,
    JobStream,
    TaskEvent,
    micros,
    optional_count,
)
from treadle.importers.tabular import Row, check_columns, head, lines

TASK_COLUMNS = (
    "time",
    "missing_info",
    "job_id",
    "task_index",
    "machine_id",
    "event_type",
    "user",
    "scheduling_class",
    "priority",
    "cpu_request",
    "memory_request",
    "disk_space_request",
    "different_machines_restriction",
)
JOB_COLUMNS = (
    "time",
    "missing_info",
    "job_id",
    "event_type",
    "user",
    "scheduling_class",
    "job_name",
    "logical_job_name",
)
STEPS = (
    google.SUBMIT,
    google.SCHEDULE,
    google.EVICT,
    google.FAIL,
    google.FINISH,
    google.KILL,
    google.LOST,
    google.UPDATE,
    google.UPDATE,
)
"""The 2011 event types, 0..8, as life-cycle steps."""
SHARD_SUFFIXES = (".csv", ".csv.gz")
OPTIONS = GoogleOptions()


def sniff(trace: TraceFile) -> bool:
    """A trace directory with ``task_events/``, or a first line of 13 fields whose time,
    job ID, task index and event type are whole numbers."""
    if trace.path.is_dir():
        return (trace.path / "task_events").is_dir()
    fields = head(trace, 2048).partition("\n")[0].split(",")
    return len(fields) == len(TASK_COLUMNS) and all(
        fields[i].strip().isdigit() for i in (0, 2, 3, 5)
    )


def jobs(trace: TraceFile, o: GoogleOptions) -> JobStream:
    """The trace's jobs as a stream (``JobStream``: iterate it once)."""
    if not trace.path.is_dir():
        first = head(trace, 2048).partition("\n")[0].split(",")
        if len(first) == len(JOB_COLUMNS):
            raise WorkloadError(
                trace.source,
                None,
                "a job_events shard has no tasks: give a task_events shard or the trace "
                "directory (task_events/, job_events/)",
            )
        return JobStream(google.in_order(_task_events([trace])), o, trace.source)
    task_shards = _shards(trace, "task_events")
    if not task_shards:
        raise WorkloadError(trace.source, "task_events", "holds no .csv or .csv.gz shard")
    job_shards = _shards(trace, "job_events") if (trace.path / "job_events").is_dir() else []
    events = google.merged(_task_events(task_shards), _job_events(job_shards))
    return JobStream(events, o, trace.source)


def _shards(trace: TraceFile, table: str) -> list[TraceFile]:
    folder = trace.path / table
    try:
        names = sorted(p.name for p in folder.iterdir() if p.name.endswith(SHARD_SUFFIXES))
    except OSError as e:
        raise WorkloadError(trace.source, table, f"cannot list: {e.strerror or e}") from None
    return [TraceFile(folder / n, f"{trace.source.rstrip('/')}/{table}/{n}") for n in names]


def _rows(shards: list[TraceFile], columns: tuple[str, ...]) -> Iterator[Row]:
    names = {c: i for i, c in enumerate(columns)}
    for shard in shards:
        for n, line in lines(shard):
            if not line.strip():
                continue
            fields = line.split(",")
            check_columns(shard.source, n, columns, fields)
            yield Row(shard.source, n, names, fields)


def _step(row: Row) -> int:
    return STEPS[row.count("event_type", high=len(STEPS) - 1)]


def _job(row: Row) -> str:
    job = row.text("job_id")
    if not job.isdigit():
        raise row.error("job_id", f"expected a job ID (a whole number), got {job!r}")
    return job


def _task_events(shards: list[TraceFile]) -> Iterator[TaskEvent]:
    for row in _rows(shards, TASK_COLUMNS):
        yield TaskEvent(
            micros(row, "time"),
            _step(row),
            _job(row),
            row.count("task_index"),
            row.text("user") or None,
            optional_count(row, "priority", MAX_PRIORITY),
            optional_count(row, "scheduling_class", 3),
            row.optional("cpu_request", low=0, high=1),
            row.optional("memory_request", low=0, high=1),
            row,
        )


def _job_events(shards: list[TraceFile]) -> Iterator[JobEvent]:
    for row in _rows(shards, JOB_COLUMNS):
        step = _step(row)
        if step in (google.UPDATE, google.SCHEDULE):
            continue  # a job's SCHEDULE and UPDATEs change nothing here
        yield JobEvent(
            micros(row, "time"),
            step,
            _job(row),
            row.text("user") or None,
            optional_count(row, "scheduling_class", 3),
            row,
        )


_LOADERS = google.Loaders(OPTIONS, jobs)
load_trace = _LOADERS.load_trace
load_trace_with = _LOADERS.load_trace_with
load_google2011 = _LOADERS.load

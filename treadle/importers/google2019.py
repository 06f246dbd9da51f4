"""Google's 2019 cluster trace (clusterdata-2019, "Google cluster-usage traces v3"): a
cell's ``instance_events`` table as exported from BigQuery (docs: traces.md; the format
is the google/cluster-data repository's v3 document and ``clusterdata_trace_format_v3.proto``).

Two exports are read, in time order (the export's query sorts by ``time``), plain or
gzip:

- JSON lines (BigQuery's newline-delimited JSON), one ``InstanceEvent`` an object:
  ``time``, ``type``, ``collection_id``, ``instance_index``, ``priority``,
  ``scheduling_class``, ``collection_type`` and ``resource_request`` as the nested
  ``{"cpus": .., "memory": ..}``; whole numbers as numbers or as the strings BigQuery
  writes for INT64; other fields are ignored;
- CSV with a header. BigQuery does not export a nested field to CSV, so the query
  flattens it, ``resource_request.cpus AS resource_request_cpus`` and
  ``resource_request.memory AS resource_request_memory``, and leaves out the repeated
  ``constraint``; the header names at least ``time, type, collection_id,
  instance_index, priority, scheduling_class, collection_type, resource_request_cpus,
  resource_request_memory``, in any order, with other columns ignored.

Event types (v3): 0 SUBMIT, 1 QUEUE, 2 ENABLE, 3 SCHEDULE, 4 EVICT, 5 FAIL, 6 FINISH,
7 KILL, 8 LOST, 9 UPDATE_PENDING, 10 UPDATE_RUNNING; QUEUE and ENABLE change nothing
here. Mapping to the model (``treadle.importers.google`` has the life cycle and the
handling of tasks that did not finish), with ``GoogleOptions``' defaults in brackets:

- a job is a collection of ``collection_type`` 0 (alloc sets, type 1, are left out),
  named ``job<collection_id>``, submitted at its first SUBMIT (less the first kept
  job's); instance events name no user, so its user is ``google`` (a ``user`` column or
  field, as a join with collection_events gives, is used when present); queue
  ``default``; its priority and scheduling class are its first event's, kept as
  ``JobSpec.priority`` and ``JobSpec.scheduling_class``;
- a task is a (collection_id, instance_index); it lasts from its last SCHEDULE to its
  FINISH and asks ``vcores`` = cpus x ``node_vcores`` [32] and ``memory_mb`` = memory x
  ``node_memory_mb`` [65,536] (NCUs and normalised memory: the largest machine is 1);
- a job ends when all its tasks have ended (collection_events are not read);
- the cluster is ``nodes`` [12,000] machines of the largest shape (a 2019 cell has
  about 12,000 machines);
- the width cap [150 tasks, ``drop``], as for the 2011 trace.

The rows are read as a stream (a job is built when it ends); sizes are bounded before
anything is allocated; a malformed row is an error naming the file, the line and the
column.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from treadle.errors import WorkloadError
from treadle.importers import google
from treadle.importers.common import TraceFile
from treadle.importers.google import (
    MAX_PRIORITY,
    GoogleOptions,
    JobStream,
    TaskEvent,
    micros,
    optional_count,
)
from treadle.importers.tabular import Row, check_columns, head, lines

COLUMNS = (
    "time",
    "type",
    "collection_id",
    "instance_index",
    "priority",
    "scheduling_class",
    "collection_type",
    "resource_request_cpus",
    "resource_request_memory",
)
USER_COLUMN = "user"
STEPS = (
    google.SUBMIT,
    google.OTHER,
    google.OTHER,
    google.SCHEDULE,
    google.EVICT,
    google.FAIL,
    google.FINISH,
    google.KILL,
    google.LOST,
    google.UPDATE,
    google.UPDATE,
)
"""The v3 event types, 0..10, as life-cycle steps."""
JOB = 0
OPTIONS = GoogleOptions(nodes=12_000)


def sniff(trace: TraceFile) -> bool:
    """A CSV header naming the first four columns, or a first JSON object with
    ``collection_id`` and ``instance_index``."""
    first = head(trace, 4096).lstrip("\ufeff").partition("\n")[0].strip()
    if first.startswith("{"):
        return '"collection_id"' in first and '"instance_index"' in first
    header = {c.strip() for c in first.split(",")}
    return set(COLUMNS[:4]) <= header


def jobs(trace: TraceFile, o: GoogleOptions) -> JobStream:
    """The export's jobs as a stream (``JobStream``: iterate it once)."""
    return JobStream(_events(trace, o), o, trace.source)


def _events(trace: TraceFile, o: GoogleOptions) -> Iterator[TaskEvent]:
    is_json = head(trace, 64).lstrip("\ufeff").startswith("{")
    yield from google.in_order(_task_events(_json_rows(trace) if is_json else _csv_rows(trace)))


def _csv_rows(trace: TraceFile) -> Iterator[Row]:
    header: list[str] = []
    names: dict[str, int] = {}
    for n, line in lines(trace):
        fields = line.split(",")
        if n == 1:
            header = [f.strip().lstrip("\ufeff") for f in fields]
            names = {c: i for i, c in enumerate(header)}
            missing = [c for c in COLUMNS if c not in names]
            if missing:
                raise WorkloadError(
                    trace.source, "line 1", f"the header lacks {', '.join(missing)}"
                )
            continue
        if line.strip():
            check_columns(trace.source, n, tuple(header), fields)
            yield Row(trace.source, n, names, fields)


def _json_rows(trace: TraceFile) -> Iterator[Row]:
    wanted = (*COLUMNS, USER_COLUMN)
    names = {c: i for i, c in enumerate(wanted)}
    for n, line in lines(trace):
        if not line.strip():
            continue
        where = f"line {n}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            raise WorkloadError(trace.source, where, f"not JSON: {e.msg}") from None
        if not isinstance(value, dict):
            raise WorkloadError(trace.source, where, "expected a JSON object")
        request = value.get("resource_request") or {}
        if not isinstance(request, dict):
            raise WorkloadError(trace.source, f"{where}.resource_request", "expected an object")
        flat = dict(value, resource_request_cpus=request.get("cpus"))
        flat["resource_request_memory"] = request.get("memory")
        fields = []
        for name in wanted:
            field = flat.get(name)
            if isinstance(field, bool) or not isinstance(field, int | float | str | None):
                raise WorkloadError(
                    trace.source, f"{where}.{name}", f"expected a number, got {field!r}"
                )
            fields.append("" if field is None else str(field))
        yield Row(trace.source, n, names, fields)


def _task_events(rows: Iterator[Row]) -> Iterator[TaskEvent]:
    for row in rows:
        if row.count("collection_type", high=1) != JOB:
            continue
        job = row.text("collection_id")
        if not job.isdigit():
            raise row.error("collection_id", f"expected a collection ID, got {job!r}")
        yield TaskEvent(
            micros(row, "time"),
            STEPS[row.count("type", high=len(STEPS) - 1)],
            job,
            row.count("instance_index"),
            row.text(USER_COLUMN) or None if USER_COLUMN in row.names else None,
            optional_count(row, "priority", MAX_PRIORITY),
            optional_count(row, "scheduling_class", 3),
            row.optional("resource_request_cpus", low=0, high=1),
            row.optional("resource_request_memory", low=0, high=1),
            row,
        )


_LOADERS = google.Loaders(OPTIONS, jobs)
load_trace = _LOADERS.load_trace
load_trace_with = _LOADERS.load_trace_with
load_google2019 = _LOADERS.load

"""The event log's columns into per-job and per-container arrays, the capacity, the horizon.

The input is the event table of :mod:`treadle.event_columns` (an ``events.parquet`` file
read back, or the table of a list of records). Rows need not be sorted by ``t``
(NodeManagers report start and finish times late): per job and per container the earliest
or latest time needed is taken by grouping, and ties go to the row that comes first.

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

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from treadle import event_columns as ec, events as ev

SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
KILLED = "KILLED"
UNFINISHED = "UNFINISHED"

RecordLike = Mapping[str, Any]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
ObjArray = npt.NDArray[np.object_]
#: What the metrics take: an event table, or records.
EventSource: TypeAlias = "pa.Table | Iterable[RecordLike]"

#: The scalar columns the metrics read (plus every ``capacity_*`` and ``resources_*``).
COLUMNS: tuple[str, ...] = ("t", "event", "job", "container", "node", "name", "user", "queue")
COLUMNS += ("tasks", "alone_jct_s", "status", "policy", "workload", "mode", "seed")
COLUMNS += ("dilation", "heartbeat_s", "nodes")
#: Of those, the strings (read as dictionaries: grouped by code, never materialized).
STRING_COLUMNS = ("event", "job", "container", "node", "name", "user", "queue", "status")
_RUN_FIELDS = [f.name for f in ev.SCHEMA[ev.RUN_STARTED].fields if f.type != "resources"]


@dataclass(frozen=True, slots=True)
class Spans:
    """Every allocated container's holding interval clipped to the horizon, without the
    zero-length ones, ordered by (start, end, job, container)."""

    a: FloatArray
    b: FloatArray
    res: FloatArray  # (spans, resources of the capacity in sorted order)
    share: FloatArray  # dominant share of the capacity
    job: IntArray  # index into LogFacts' jobs, -1 for a job never submitted

    def __len__(self) -> int:
        return len(self.a)

    def part(self, cut: slice) -> Spans:
        return Spans(self.a[cut], self.b[cut], self.res[cut], self.share[cut], self.job[cut])


#: Spans handed to the metrics at a time (``SpanSource.chunks``): the parts of a span are
#: some 100 bytes while Jain's index computes them.
SPAN_CHUNK = 1 << 17


class SpanSource(Protocol):
    """A log's spans: whole (O(containers)), or a chunk at a time in the same order (what
    a metric that sums them needs; an event file's sweep holds only the running work)."""

    def whole(self) -> Spans: ...

    def chunks(self) -> Iterator[Spans]: ...

    def with_jobs(self, remap: IntArray) -> SpanSource:
        """The spans with each job index ``j >= 0`` replaced by ``remap[j]``."""
        ...


@dataclass(frozen=True, slots=True)
class HeldSpans:
    """Spans held in memory (a table's, or records')."""

    spans: Spans

    def whole(self) -> Spans:
        return self.spans

    def chunks(self) -> Iterator[Spans]:
        for lo in range(0, len(self.spans), SPAN_CHUNK):
            yield self.spans.part(slice(lo, lo + SPAN_CHUNK))

    def with_jobs(self, remap: IntArray) -> HeldSpans:
        job = self.spans.job
        return HeldSpans(replace(self.spans, job=np.where(job >= 0, remap[job], -1)))


@dataclass(frozen=True, slots=True)
class LogFacts:
    """What the metrics need from one event log, as arrays (``scan``). Jobs are those
    with a submission, in (submit, job) order; NaN stands for "none"."""

    run: dict[str, Any] | None
    capacity: dict[str, float]
    last_t: float | None
    job: ObjArray
    name: ObjArray
    user: ObjArray
    queue: ObjArray
    tasks: IntArray
    submit: FloatArray
    alone: FloatArray
    alone_none: npt.NDArray[np.bool_]  # no alone_jct_s (NaN in ``alone`` is a reference's)
    start: FloatArray  # earliest job_started, else earliest container_allocated
    end: FloatArray
    status: ObjArray
    horizon: tuple[float, float] | None
    spans: SpanSource


def _strings(col: pa.ChunkedArray) -> tuple[IntArray, pa.Array]:
    """Dictionary codes (-1 for null) and the dictionary (distinct strings, left in
    Arrow: a container column has one per container) of a string column."""
    if pa.types.is_dictionary(col.type):  # read so from Parquet: its own dictionary pages
        enc = col.unify_dictionaries().combine_chunks() if col.num_chunks else col
        if isinstance(enc, pa.ChunkedArray):
            enc = pa.array([], col.type)
    else:
        enc = pc.dictionary_encode(col.combine_chunks())
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, enc.dictionary


def _rank(dictionary: pa.Array) -> IntArray:
    """Each string's rank among the (distinct) strings of ``dictionary``, in Python's order
    of str: code point order, which is UTF-8's byte order, which Arrow sorts by."""
    order = pc.array_sort_indices(dictionary).to_numpy(zero_copy_only=False)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank


_APP_ID = r"^application_(?P<ts>\d{1,18})_(?P<n>\d{1,18})$"


def _app_id_rank(ids: ObjArray) -> IntArray:
    """Each job id's rank in ApplicationId order (cluster timestamp, then number, as
    ``treadle.yarnids.app_sort_key``: not as strings, where ``_10000`` comes before
    ``_9999``); a string that is no application id ranks first, among them by string."""
    uniq, inverse = np.unique(ids.astype(str), return_inverse=True)
    if not len(uniq):
        return np.zeros(len(ids), dtype=np.int64)
    parts = pc.extract_regex(pa.array(uniq.tolist(), pa.string()), _APP_ID)
    ts, n = (
        pc.cast(pc.struct_field(parts, f), pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False)
        for f in ("ts", "n")
    )
    order = np.lexsort((np.arange(len(uniq)), n, ts))
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[order] = np.arange(len(uniq))
    return np.asarray(rank[inverse], dtype=np.int64)


def _plain(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    return col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col


def _first_per_group(key: npt.NDArray[Any], t: FloatArray) -> tuple[npt.NDArray[Any], IntArray]:
    """Per distinct key, the position of its smallest ``t`` (the first such row on ties),
    with the keys in increasing order."""
    order = np.lexsort((t, key))  # stable: rows in their order within equal (key, t)
    k = key[order]
    first = np.ones(len(k), dtype=bool)
    first[1:] = k[1:] != k[:-1]
    return k[first], order[first]


def _min_per(key: IntArray, t: FloatArray, size: int) -> FloatArray:
    out = np.full(size, np.inf)
    np.minimum.at(out, key, t)
    return out


def _np(table: pa.Table, name: str, fill: Any = None) -> npt.NDArray[Any]:
    col = table.column(name)
    if fill is not None:
        col = col.fill_null(fill)
    out: npt.NDArray[Any] = col.to_numpy()
    return out


def to_table(source: EventSource) -> tuple[pa.Table, dict[str, Any] | None]:
    """The event table of ``source``, and the run_started record itself when ``source``
    is records (its values keep their JSON types)."""
    if isinstance(source, pa.Table):
        return source, None
    recs: list[RecordLike] = list(source)
    run: dict[str, Any] | None = None
    run_t = np.inf
    for r in recs:
        if r.get("event") == ev.RUN_STARTED and float(r["t"]) < run_t:
            run, run_t = dict(r), float(r["t"])
    return ec.table_from_records(recs), run


@dataclass(frozen=True, slots=True)
class _Columns:
    """The event table (every column the metrics read present) and the columns each part
    of ``scan`` reads: times, event kinds, job and container codes."""

    table: pa.Table
    t: FloatArray
    kinds: IntArray
    code: dict[str, int]  # event name -> its code in ``kinds``
    jcode: IntArray
    jobs_dict: pa.Array
    ccode: IntArray
    cids: pa.Array

    def mask(self, *events: str) -> npt.NDArray[np.bool_]:
        """The rows of any of ``events``."""
        ids = [self.code[e] for e in events if e in self.code]
        return np.isin(self.kinds, ids) if ids else np.zeros(len(self.t), dtype=bool)


@dataclass(frozen=True, slots=True)
class _Jobs:
    """Per submitted job in the order of its dictionary code: its submission row and what
    that row and its first records say."""

    rows: IntArray
    index_of_code: IntArray  # job dictionary code -> index here, -1 if never submitted
    job_ids: ObjArray
    name: ObjArray
    user: ObjArray
    queue: ObjArray
    tasks: IntArray
    alone: FloatArray
    alone_none: npt.NDArray[np.bool_]
    submit: FloatArray
    start: FloatArray


def _columns(source: EventSource) -> tuple[_Columns, dict[str, Any] | None]:
    """The columns of ``source``, and the run_started record when ``source`` is records."""
    table, run = to_table(source)
    full = ec.arrow_schema([])
    for name in COLUMNS:
        if name not in table.schema.names:
            table = table.append_column(
                full.field(name), pa.nulls(table.num_rows, full.field(name).type)
            )
    t = _np(table, "t").astype(float)
    kinds, kind_names = _strings(table.column("event"))
    code = {str(k): i for i, k in enumerate(kind_names.to_pylist())}
    jcode, jobs_dict = _strings(table.column("job"))
    ccode, cids = _strings(table.column("container"))
    return _Columns(table, t, kinds, code, jcode, jobs_dict, ccode, cids), run


def _capacity(
    cols: _Columns, run: dict[str, Any] | None
) -> tuple[dict[str, float], dict[str, Any] | None]:
    """The capacity (see the module's rule) and the run_started record's fields."""
    table, t = cols.table, cols.t
    names = table.schema.names
    cap_cols = ec.resources_of(names, "capacity")
    res_names = ec.resources_of(names, "resources")
    is_run = cols.mask(ev.RUN_STARTED)
    capacity: dict[str, float] | None = None
    if is_run.any():
        rows = np.flatnonzero(is_run)
        i = int(rows[np.argmin(t[rows])])  # the earliest, the first on ties
        if run is None:
            row = table.slice(i, 1).to_pylist()[0]
            run = {k: row.get(k) for k in _RUN_FIELDS}
        vals = {r: table.column(ec.resource_column("capacity", r))[i].as_py() for r in cap_cols}
        if any(v is not None for v in vals.values()):
            capacity = {k: float(v) for k, v in vals.items() if v}
    if capacity is None:  # the latest registration of every node (the last row on ties)
        capacity = {}
        reg = np.flatnonzero(cols.mask(ev.NODE_REGISTERED))
        if len(reg):
            ncode, _ = _strings(table.column("node"))
            order = np.lexsort((-reg, -t[reg], ncode[reg]))
            k = ncode[reg][order]
            first = np.ones(len(k), dtype=bool)
            first[1:] = k[1:] != k[:-1]
            latest = reg[order[first]]
            for r in res_names:
                v = _np(table, ec.resource_column("resources", r), 0.0)[latest]
                total = float(np.cumsum(v)[-1])
                if total > 0:
                    capacity[r] = total
    return capacity, run


def _jobs(
    cols: _Columns,
    is_alloc: npt.NDArray[np.bool_],
    alloc_min: Mapping[str, float] | None = None,
) -> _Jobs:
    """The jobs: the earliest submission of each, its fields, its start. ``alloc_min``
    (job -> its earliest ``container_allocated``) stands for the table's allocations when
    they were reduced apart (``treadle.metrics.logfile``)."""
    table, t, jcode, jobs_dict = cols.table, cols.t, cols.jcode, cols.jobs_dict
    sub = np.flatnonzero(cols.mask(ev.JOB_SUBMITTED) & (jcode >= 0))
    sub_keys, sub_rows = _first_per_group(jcode[sub], t[sub])
    rows = sub[sub_rows]
    nj = len(rows)
    job_ids = np.asarray(jobs_dict.take(pa.array(sub_keys, pa.int64())).to_pylist(), dtype=object)
    index_of_code = np.full(len(jobs_dict) + 1, -1, dtype=np.int64)
    index_of_code[sub_keys] = np.arange(nj)

    def text(col: str, default: ObjArray | str) -> ObjArray:
        """The column's value on each job's row; null or "" give ``default``."""
        if not nj:
            return np.empty(0, dtype=object)
        vals = _plain(table.column(col).take(pa.array(rows)))
        empty = pc.fill_null(pc.equal(vals, ""), True).to_numpy(zero_copy_only=False)
        out = np.asarray(vals.to_pylist(), dtype=object)
        out[empty] = default[empty] if isinstance(default, np.ndarray) else default
        return out

    tasks = _np(table, "tasks", 0).astype(np.int64)[rows] if nj else np.empty(0, np.int64)
    alone_col = table.column("alone_jct_s").take(pa.array(rows))
    alone_none = pc.is_null(alone_col).to_numpy(zero_copy_only=False)
    alone = alone_col.fill_null(np.nan).to_numpy(zero_copy_only=False).astype(float)

    def per_job_min(m: npt.NDArray[np.bool_]) -> FloatArray:
        sel = m & (jcode >= 0)
        idx = index_of_code[jcode[sel]]
        ok = idx >= 0
        return _min_per(idx[ok], t[sel][ok], nj)

    started = per_job_min(cols.mask(ev.JOB_STARTED))
    if alloc_min is None:
        first_alloc = per_job_min(is_alloc)
    else:
        first_alloc = np.array([alloc_min.get(j, np.inf) for j in job_ids.tolist()], float)
    start = np.where(np.isfinite(started), started, first_alloc)
    start[~np.isfinite(start)] = np.nan
    return _Jobs(
        rows, index_of_code, job_ids, text("name", job_ids), text("user", ""),
        text("queue", ""), tasks, alone, alone_none, t[rows], start,
    )  # fmt: skip


def _job_ends(cols: _Columns, index_of_code: IntArray, nj: int) -> tuple[FloatArray, ObjArray]:
    """Each job's end and status: its earliest job_finished / job_failed and the status
    that carries."""
    t, jcode = cols.t, cols.jcode
    end = np.full(nj, np.nan)
    status = np.full(nj, UNFINISHED, dtype=object)
    fin = np.flatnonzero(cols.mask(ev.JOB_FINISHED, ev.JOB_FAILED) & (jcode >= 0))
    if len(fin):
        keys, first = _first_per_group(jcode[fin], t[fin])
        frows = fin[first]
        idx = index_of_code[keys]
        ok = idx >= 0
        end[idx[ok]] = t[frows[ok]]
        st = cols.table.column("status").take(pa.array(frows[ok])).to_pylist()
        failed = cols.kinds[frows[ok]] == cols.code.get(ev.JOB_FAILED, -2)
        status[idx[ok]] = [
            s if s else (FAILED if f else SUCCEEDED) for s, f in zip(st, failed, strict=True)
        ]
    return end, status


def _horizon(
    submit: FloatArray, end: FloatArray, last_t: float | None
) -> tuple[float, float] | None:
    """[first submission, last job end] (the last record when no job ended)."""
    if not len(submit):
        return None
    lo = float(submit.min())
    ended = end[np.isfinite(end)]
    hi = float(ended.max()) if len(ended) else last_t
    return (lo, hi) if hi is not None and hi >= lo else None


def scan(source: EventSource) -> LogFacts:
    """Gather the facts of one event log (rows in any order). A source with a
    ``scan_facts`` method (an event file read by row group, ``treadle.metrics.logfile``)
    gathers its own."""
    own = getattr(source, "scan_facts", None)
    if own is not None:
        facts: LogFacts = own()
        return facts
    cols, run = _columns(source)
    t = cols.t
    last_t = float(t.max()) if len(t) else None

    def spans_of(
        jobs: _Jobs, horizon: tuple[float, float] | None, capacity: dict[str, float]
    ) -> HeldSpans:
        """The containers: the earliest allocation of each, held until its earliest end."""
        ranks = (_rank(cols.jobs_dict), _rank(cols.cids))
        spans = _spans(
            cols.table, t, cols.jcode, cols.ccode, ranks, is_alloc, cols.mask, horizon, last_t,
            capacity, sorted(capacity),
        )  # fmt: skip
        return HeldSpans(
            Spans(spans.a, spans.b, spans.res, spans.share, jobs.index_of_code[spans.job])
        )

    is_alloc = cols.mask(ev.CONTAINER_ALLOCATED)
    return facts_of(cols, run, last_t, is_alloc, spans_of)


def facts_of(
    cols: _Columns,
    run: dict[str, Any] | None,
    last_t: float | None,
    is_alloc: npt.NDArray[np.bool_],
    spans_of: Any,
    alloc_min: Mapping[str, float] | None = None,
) -> LogFacts:
    """The facts of ``cols`` (jobs, capacity, horizon), with the spans ``spans_of(jobs,
    horizon, capacity)`` gives (a ``SpanSource``, their ``job`` the index into ``jobs``)."""
    capacity, run = _capacity(cols, run)
    jobs = _jobs(cols, is_alloc, alloc_min)
    nj = len(jobs.rows)
    end, status = _job_ends(cols, jobs.index_of_code, nj)
    horizon = _horizon(jobs.submit, end, last_t)
    spans = spans_of(jobs, horizon, capacity)

    # jobs in (submit, job) order, a job by its id's number
    job_ids, submit = jobs.job_ids, jobs.submit
    order = np.lexsort((_app_id_rank(job_ids), submit))
    if nj:
        remap = np.empty(nj, dtype=np.int64)
        remap[order] = np.arange(nj)
        spans = spans.with_jobs(remap)
    return LogFacts(
        run=run,
        capacity=capacity,
        last_t=last_t,
        job=job_ids[order],
        name=jobs.name[order],
        user=jobs.user[order],
        queue=jobs.queue[order],
        tasks=jobs.tasks[order],
        submit=submit[order],
        alone=jobs.alone[order],
        alone_none=jobs.alone_none[order],
        start=jobs.start[order],
        end=end[order],
        status=status[order],
        horizon=horizon,
        spans=spans,
    )


def _spans(
    table: pa.Table,
    t: FloatArray,
    jcode: IntArray,
    ccode: IntArray,
    ranks: tuple[IntArray, IntArray],
    is_alloc: npt.NDArray[np.bool_],
    mask: Any,
    horizon: tuple[float, float] | None,
    last_t: float | None,
    capacity: Mapping[str, float],
    cap_names: list[str],
) -> Spans:
    """The spans, their ``job`` still the job's dictionary code."""
    nres = len(cap_names)
    empty = Spans(
        np.empty(0), np.empty(0), np.empty((0, nres)), np.empty(0), np.empty(0, dtype=np.int64)
    )
    if horizon is None:
        return empty
    lo, hi = horizon
    last = last_t if last_t is not None else hi
    width = int(ccode.max()) + 2 if len(ccode) else 1
    key = (jcode + 1) * width + (ccode + 1)
    alloc = np.flatnonzero(is_alloc & (jcode >= 0) & (ccode >= 0))
    keys, first = _first_per_group(key[alloc], t[alloc])
    rows = alloc[first]
    # Each end to its container by binary search in ``keys`` (sorted, distinct); ends of
    # containers never allocated are dropped.
    ends = np.flatnonzero(mask(ev.CONTAINER_FINISHED, ev.CONTAINER_RELEASED))
    end_key = key[ends]
    pos = np.minimum(np.searchsorted(keys, end_key), max(len(keys) - 1, 0))
    hit = keys[pos] == end_key if len(keys) else np.zeros(len(ends), dtype=bool)
    end_t = _min_per(pos[hit], t[ends][hit], len(keys))
    c_end = np.where(np.isfinite(end_t), end_t, last)
    a = np.maximum(t[rows], lo)
    b = np.minimum(c_end, hi)
    keep = b > a
    rows, a, b = rows[keep], a[keep], b[keep]
    res = np.zeros((len(rows), nres))
    names = table.schema.names
    for i, r in enumerate(cap_names):
        col = ec.resource_column("resources", r)
        if col in names:
            res[:, i] = _np(table, col, 0.0).astype(float)[rows]
    share = np.zeros(len(rows))
    for i, r in enumerate(cap_names):
        share = np.maximum(share, res[:, i] / capacity[r])
    # A fixed order makes float sums independent of the order of the rows.
    job_rank, cid_rank = ranks[0][jcode[rows]], ranks[1][ccode[rows]]
    order = np.lexsort((cid_rank, job_rank, b, a))
    return Spans(a[order], b[order], res[order], share[order], jcode[rows][order])

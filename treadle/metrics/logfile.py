"""An ``events.parquet`` file as a metrics source, read one row group at a time.

``scan`` of an :class:`EventFile` never holds the event table. Its first pass reduces each
batch of rows as it is read, then drops it, keeping:

* the rows of the few event types that are per run, node or job (``run_started``,
  ``node_registered``, ``job_submitted``, ``job_started``, ``job_finished``,
  ``job_failed``), as a small table: O(nodes + jobs);
* per job, its earliest ``container_allocated`` (O(jobs)); per batch, its smallest time.

The spans are then swept from the file a chunk at a time when a metric asks for them
(:mod:`treadle.metrics.sweep`: what is held is the running work, and 8 bytes per container
so that a container's later rows change nothing); ``spans.whole()`` reads them all at once
(some 60 bytes per container while read: the utilization series, the HTML report).

The facts are those of :func:`treadle.metrics.scan.scan` of the whole table, to the last
bit: the same rules, the same ties (the first row wins), the spans in the same (start,
end, job, container) order. A container is known by its job's number and a polynomial
hash of its id modulo 2**64: two ids of one job that hash alike (odds about n**2 / 2**65
for a job of n containers) would count as one.

The ``dp``, ``estimation`` and ``preemption`` sections still read their columns whole
(:meth:`EventFile.table`), in the runs that have their records.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from treadle import event_columns as ec, events as ev
from treadle.c_heap import release_free_heap
from treadle.errors import InputError
from treadle.metrics.scan import (
    COLUMNS,
    STRING_COLUMNS,
    FloatArray,
    HeldSpans,
    IntArray,
    LogFacts,
    ObjArray,
    Spans,
    SpanSource,
    _columns,
    _first_per_group,
    _Jobs,
    _min_per,
    _strings,
    facts_of,
)
from treadle.metrics.sweep import (
    RELEASE_EVERY,
    ContainerKeys,
    StreamedSpans,
    SweepPlan,
    id_hashes,
    tied_spans,
)

__all__ = ["EventFile", "id_hashes"]

U64 = npt.NDArray[np.uint64]
#: The event types kept as rows (per run, node or job).
SMALL: tuple[str, ...] = (ev.RUN_STARTED, ev.NODE_REGISTERED, ev.JOB_SUBMITTED)
SMALL += (ev.JOB_STARTED, ev.JOB_FINISHED, ev.JOB_FAILED)
ENDS = (ev.CONTAINER_FINISHED, ev.CONTAINER_RELEASED)
#: Rows read at a time (a quarter of the writer's row group: less decoded at once).
BATCH_ROWS = 16_384


@dataclass
class _Acc:
    """What the row groups leave: see the module's docstring."""

    small: list[pa.Table] = field(default_factory=list)
    jobs: dict[str, int] = field(default_factory=dict)  # job id -> its index here
    alloc_min: FloatArray = field(default_factory=lambda: np.empty(0))
    a_key: list[U64] = field(default_factory=list)
    a_t: list[FloatArray] = field(default_factory=list)
    a_row: list[IntArray] = field(default_factory=list)
    a_job: list[npt.NDArray[np.int32]] = field(default_factory=list)
    a_res: dict[str, list[FloatArray]] = field(default_factory=dict)
    e_key: list[U64] = field(default_factory=list)
    e_t: list[FloatArray] = field(default_factory=list)
    last_t: float | None = None
    rows: int = 0
    batch_min: list[float] = field(default_factory=list)  # each batch's smallest time
    #: whether to keep every container's numbers (``whole``), or only the jobs' (a scan)
    containers: bool = True
    keys: ContainerKeys = field(default_factory=ContainerKeys)

    def job_index(self, dictionary: pa.Array) -> IntArray:
        """The number of each job of a batch's dictionary (one more, -1, for null codes)."""
        out = self.keys.job_index(dictionary)
        self.jobs = self.keys.jobs
        if len(self.jobs) > len(self.alloc_min):
            grown = np.full(max(len(self.jobs), 2 * len(self.alloc_min)), np.inf)
            grown[: len(self.alloc_min)] = self.alloc_min
            self.alloc_min = grown
        return out

    def add(self, table: pa.Table, res_names: list[str]) -> None:
        """Reduce one row group."""
        n = table.num_rows
        t = table.column("t").to_numpy().astype(float)
        self.batch_min.append(float(t.min()) if n else np.inf)
        if n:
            hi = float(t.max())
            self.last_t = hi if self.last_t is None else max(self.last_t, hi)
        kinds, kind_names = _strings(table.column("event"))
        code = {str(k): i for i, k in enumerate(kind_names.to_pylist())}

        def mask(*events: str) -> npt.NDArray[np.bool_]:
            ids = [code[e] for e in events if e in code]
            return np.isin(kinds, ids) if ids else np.zeros(n, dtype=bool)

        small = mask(*SMALL)
        if small.any():
            self.small.append(_plain_strings(table.filter(pa.array(small))))
        is_alloc, is_end = mask(ev.CONTAINER_ALLOCATED), mask(*ENDS)
        if is_alloc.any() or is_end.any():
            self._containers(table, t, is_alloc, is_end, res_names)
        self.rows += n

    def _containers(
        self,
        table: pa.Table,
        t: FloatArray,
        is_alloc: npt.NDArray[np.bool_],
        is_end: npt.NDArray[np.bool_],
        res_names: list[str],
    ) -> None:
        jcode, jdict = _strings(table.column("job"))
        jg = self.job_index(jdict)[jcode]
        with_job = is_alloc & (jg >= 0)
        np.minimum.at(self.alloc_min, jg[with_job], t[with_job])
        if not self.containers:
            return
        jg, key, ccode, _ = self.keys.keys(table)
        known = (jg >= 0) & (ccode >= 0)
        a = np.flatnonzero(with_job & known)
        self.a_key.append(key[a])
        self.a_t.append(t[a])
        self.a_row.append(a + self.rows)
        self.a_job.append(jg[a].astype(np.int32))
        for r in res_names:
            col = table.column(ec.resource_column("resources", r)).fill_null(0.0)
            self.a_res.setdefault(r, []).append(col.to_numpy().astype(float)[a])
        e = np.flatnonzero(is_end & known)
        self.e_key.append(key[e])
        self.e_t.append(t[e])


def _plain_strings(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary columns as plain strings: a filtered dictionary
    column keeps its row group's whole dictionary (every container id of the group)."""
    for i, f in enumerate(table.schema):
        if pa.types.is_dictionary(f.type):
            table = table.set_column(i, f.name, table.column(i).cast(f.type.value_type))
    return table


def _take(parts: list[Any], dtype: Any) -> Any:
    """The parts as one array; the list is emptied (its parts let go)."""
    out = np.concatenate(parts) if parts else np.empty(0, dtype)
    parts.clear()
    release_free_heap()  # the parts' pages, between the arrays still held
    return out


class EventFile:
    """An ``events.parquet`` file that the metrics read by row group (module docstring);
    a file that is not an event log is an InputError naming it, when first read."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def _file(self) -> Any:
        import pyarrow.parquet as pq

        f = pq.ParquetFile(str(self.path), read_dictionary=list(STRING_COLUMNS))
        have = f.schema_arrow.names
        if "t" not in have or "event" not in have:
            raise InputError(str(self.path), None, "not an event log: no 't' and 'event' columns")
        return f

    def _columns(self, names: list[str], extra: tuple[str, ...] = ()) -> list[str]:
        wanted = COLUMNS + extra
        return [c for c in names if c in wanted or c.startswith(("capacity_", "resources_"))]

    def row_groups(
        self, extra: tuple[str, ...] = (), only: tuple[str, ...] | None = None
    ) -> Iterator[pa.Table]:
        """The file's rows, ``BATCH_ROWS`` at a time, as tables of the columns the metrics
        read (and ``extra``; of those, ``only`` these and the resources, if given)."""
        try:
            f = self._file()
            cols = self._columns(f.schema_arrow.names, extra)
            if only is not None:
                cols = [c for c in cols if c in only or c.startswith(("capacity_", "resources_"))]
            # a row group at a time, cut into batches: ``iter_batches`` keeps some 100 KB
            # of Arrow's memory per batch to the end of the file (pyarrow 26)
            for g in range(f.num_row_groups):
                group = f.read_row_group(g, columns=cols, use_threads=False)
                for lo in range(0, group.num_rows, BATCH_ROWS):
                    yield group.slice(lo, BATCH_ROWS)
                del group
        except (OSError, pa.ArrowException) as e:
            raise InputError(str(self.path), None, f"not a Parquet event log: {e}") from None

    def kinds(self) -> set[str]:
        """The event types the file holds."""
        out: set[str] = set()
        for rg in self._only(["event"]):
            for chunk in rg.column("event").chunks:
                values = chunk.dictionary if hasattr(chunk, "dictionary") else chunk.unique()
                out.update(str(v) for v in values.to_pylist())
        return out

    def _only(self, columns: list[str]) -> Any:
        try:
            f = self._file()
            for i in range(f.num_row_groups):
                yield f.read_row_group(i, columns=columns, use_threads=False)
        except (OSError, pa.ArrowException) as e:
            raise InputError(str(self.path), None, f"not a Parquet event log: {e}") from None

    def table(self, extra: tuple[str, ...] = ()) -> pa.Table:
        """The whole table of the columns the metrics read and ``extra`` (strings as
        dictionaries)."""
        return ec.read_table(
            self.path,
            columns=COLUMNS + extra,
            prefixes=("capacity_", "resources_"),
            dictionaries=STRING_COLUMNS,
        )

    def _read(self, acc: _Acc, only: tuple[str, ...] | None = None) -> pa.Schema | None:
        """Every batch into ``acc``; the schema of the first (None: no row group)."""
        schema: pa.Schema | None = None
        for i, rg in enumerate(self.row_groups(only=only), 1):
            if schema is None:
                schema = rg.schema
            acc.add(rg, ec.resources_of(rg.schema.names, "resources"))
            if i % RELEASE_EVERY == 0:
                release_free_heap()  # the batches' decoded columns, freed
        return schema

    def scan_facts(self) -> LogFacts:
        """``scan`` of the file: the first pass (the module's docstring); the spans are
        swept when read."""
        acc = _Acc(containers=False)
        schema = self._read(acc, only=tuple(c for c in COLUMNS if c != "container"))
        if schema is None:  # no row group
            schema = ec.read_table(self.path, columns=COLUMNS, prefixes=("capacity_",)).schema
        small = pa.concat_tables(acc.small) if acc.small else schema.empty_table()
        cols, run = _columns(small)
        alloc_min = {j: float(acc.alloc_min[i]) for j, i in acc.jobs.items()}

        def spans_of(
            jobs: _Jobs, horizon: tuple[float, float] | None, capacity: dict[str, float]
        ) -> SpanSource:
            if horizon is None:
                return HeldSpans(self._spans(_Acc(), jobs.job_ids, horizon, capacity))
            return self._streamed(acc, jobs.job_ids, horizon, capacity)

        no_alloc = np.zeros(small.num_rows, dtype=bool)
        facts = facts_of(cols, run, acc.last_t, no_alloc, spans_of, alloc_min)
        release_free_heap()  # the batches' pages, before the analysis grows the process
        return facts

    def _streamed(
        self,
        acc: _Acc,
        job_ids: ObjArray,
        horizon: tuple[float, float],
        capacity: dict[str, float],
    ) -> StreamedSpans:
        index = {j: i for i, j in enumerate(job_ids.tolist())}
        names = sorted(acc.jobs, key=acc.jobs.__getitem__)
        # after batch i, no later row is earlier than the smallest time of batches i+1...
        later = np.minimum.accumulate(np.asarray(acc.batch_min[::-1] or [np.inf]))[::-1]
        watermarks = np.r_[later[1:], np.inf]
        plan = SweepPlan(
            jobs=dict(acc.jobs),
            job_rank=acc.keys.ranks(),
            job_index=np.array([index.get(n, -1) for n in names], np.int64),
            watermarks=watermarks,
            horizon=horizon,
            last_t=acc.last_t if acc.last_t is not None else horizon[1],
            capacity=dict(capacity),
        )
        swept = ("t", "event", "job", "container")
        return StreamedSpans(
            plan,
            lambda: self.row_groups(only=swept),
            lambda: self._whole(job_ids, horizon, capacity),
        )

    def _whole(
        self, job_ids: ObjArray, horizon: tuple[float, float], capacity: dict[str, float]
    ) -> Spans:
        """Every span at once: each container's numbers read, then matched."""
        acc = _Acc()
        self._read(acc)
        return self._spans(acc, job_ids, horizon, capacity)

    def _spans(
        self,
        acc: _Acc,
        job_ids: ObjArray,
        horizon: tuple[float, float] | None,
        capacity: dict[str, float],
    ) -> Spans:
        """The spans of ``scan.scan``, from the reduced allocations and ends."""
        cap_names = sorted(capacity)
        nres = len(cap_names)
        if horizon is None:
            return Spans(np.empty(0), np.empty(0), np.empty((0, nres)), np.empty(0),
                         np.empty(0, dtype=np.int64))  # fmt: skip
        lo, hi = horizon
        last = acc.last_t if acc.last_t is not None else hi
        # Each part is taken (and dropped from ``acc``) when needed, and let go after.
        keys, first = _first_per_group(_take(acc.a_key, np.uint64), t := _take(acc.a_t, float))
        t_first = t[first]
        del t
        e_key = _take(acc.e_key, np.uint64)
        pos = np.minimum(np.searchsorted(keys, e_key), max(len(keys) - 1, 0))
        hit = keys[pos] == e_key if len(keys) else np.zeros(len(e_key), dtype=bool)
        del e_key
        end_t = _min_per(pos[hit], _take(acc.e_t, float)[hit], len(keys))
        del pos, hit, keys
        a = np.maximum(t_first, lo)
        b = np.minimum(np.where(np.isfinite(end_t), end_t, last), hi)
        del t_first, end_t
        keep = b > a
        sel = first[keep]
        a, b = a[keep], b[keep]
        del first, keep
        res = np.zeros((len(sel), nres))
        for i, r in enumerate(cap_names):
            if r in acc.a_res:
                res[:, i] = _take(acc.a_res[r], float)[sel]
        share = np.zeros(len(sel))
        for i, r in enumerate(cap_names):
            share = np.maximum(share, res[:, i] / capacity[r])
        jg = _take(acc.a_job, np.int32)[sel].astype(np.int64)
        names = sorted(acc.jobs, key=acc.jobs.__getitem__)
        job_rank = acc.keys.ranks()[jg] if len(names) else jg
        rows = _take(acc.a_row, np.int64)[sel]
        order = np.lexsort((self._tie_ranks(rows, a, b, job_rank), job_rank, b, a))
        index = {j: i for i, j in enumerate(job_ids.tolist())}
        job_index = np.array([index.get(n, -1) for n in names], np.int64)
        span_job = job_index[jg] if len(names) else jg
        return Spans(a[order], b[order], res[order], share[order], span_job[order])

    def _tie_ranks(self, rows: IntArray, a: FloatArray, b: FloatArray, job: IntArray) -> IntArray:
        """Per span, the rank of its container id among the spans that tie with another
        on (start, end, job) (0 for the others): the ids are read again for those only."""
        out = np.zeros(len(rows), np.int64)
        idx = tied_spans(a, b, job)
        if not len(idx):
            return out
        want = rows[idx]
        by_row = np.argsort(want, kind="stable")
        ids: list[str] = [""] * len(idx)
        start = 0
        for rg in self._only(["container"]):
            n = rg.num_rows
            lo, hi = np.searchsorted(want[by_row], [start, start + n])
            if hi > lo:
                local = want[by_row[lo:hi]] - start
                col = rg.column("container").take(pa.array(local))
                for k, v in zip(by_row[lo:hi].tolist(), col.to_pylist(), strict=True):
                    ids[k] = str(v)
            start += n
        ranked = sorted(range(len(ids)), key=ids.__getitem__)
        out[idx[ranked]] = np.arange(1, len(ids) + 1)
        return out

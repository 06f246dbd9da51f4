"""The event log as columns: one table whose columns are the union of every event type's
fields, written to Apache Parquet in row groups as the run goes.

The table (the ``events.parquet`` contract):

* ``t`` (float64, emulated seconds rounded to 1 us) and ``event`` (string) on every row;
* then one column per field of :data:`treadle.events.SCHEMA`, in the order the fields
  first appear there, typed after the field (``str``: string, ``int``: int64, ``float``:
  float64, ``bool``: bool, ``object``: its JSON text), null on the rows of event types
  that do not have the field (and where a nullable field is null);
* a ``resources``-typed field (``capacity``, ``resources``) is one float64 column per
  resource of the run, named ``FIELD_RESOURCE`` (``resources_vcores``,
  ``capacity_memory_mb``): 0.0 where the row's vector lacks that resource, null on rows
  without the field.

Rows are in the order the run logged them (an NM reports a start late, so ``t`` is not
sorted; ``events.jsonl`` is in time order). :class:`ColumnarEventLog` has the typed
builders of :class:`treadle.events.EventLog` with the same signatures; it keeps each row
as a tuple until ``row_group_rows`` of them are pending, then hands them to its sink as a
table and forgets them, so its memory stays flat however long the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treadle import events as ev
from treadle.errors import InputError
from treadle.resources import Resources

if TYPE_CHECKING:
    import pyarrow as pa

ROW_GROUP_ROWS = 65_536

#: Event types in code order: a row tuple starts with its type's index in this tuple.
EVENT_TYPES: tuple[str, ...] = tuple(ev.SCHEMA)
_CODE = {name: i for i, name in enumerate(EVENT_TYPES)}


def _union_fields() -> dict[str, str]:
    """Field name -> its type, over every event type (a name has one type everywhere)."""
    out: dict[str, str] = {}
    for etype in ev.SCHEMA.values():
        for f in etype.fields:
            have = out.setdefault(f.name, f.type)
            if have != f.type:  # pragma: no cover - a schema error, caught by a test
                raise TypeError(f"field {f.name!r} is {have} in one event, {f.type} in another")
    return out


#: Every field of the schema and its type, in the order the columns come.
FIELDS: dict[str, str] = _union_fields()


def resource_column(field: str, resource: str) -> str:
    """The column of one resource of a ``resources``-typed field."""
    return f"{field}_{resource}"


def column_names(resources: Sequence[str]) -> list[str]:
    """The table's columns for a run whose resources are ``resources``."""
    cols = ["t", "event"]
    for name, type_ in FIELDS.items():
        if type_ == "resources":
            cols += [resource_column(name, r) for r in sorted(resources)]
        else:
            cols.append(name)
    return cols


def arrow_schema(resources: Sequence[str]) -> pa.Schema:
    import pyarrow as pa

    scalar = {
        "str": pa.string(),
        "int": pa.int64(),
        "float": pa.float64(),
        "bool": pa.bool_(),
        "object": pa.string(),
    }
    cols = [pa.field("t", pa.float64(), nullable=False), pa.field("event", pa.string(), False)]
    for name, type_ in FIELDS.items():
        if type_ == "resources":
            cols += [pa.field(resource_column(name, r), pa.float64()) for r in sorted(resources)]
        else:
            cols.append(pa.field(name, scalar[type_]))
    return pa.schema(cols)


def resource_names(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every resource that a ``resources``-typed field of ``records`` names, sorted."""
    fields = [n for n, t in FIELDS.items() if t == "resources"]
    names: set[str] = set()
    for rec in records:
        for f in fields:
            v = rec.get(f)
            if isinstance(v, Mapping):
                names.update(v)
    return sorted(names)


# ---------------------------------------------------------------------------- rows -> table


def _array(values: Sequence[Any], type_: pa.DataType, where: str) -> pa.Array:
    import numpy as np
    import pyarrow as pa

    numeric = {pa.float64(): np.float64, pa.int64(): np.int64}.get(type_)
    if numeric is not None and None not in values:
        try:  # numpy reads Python numbers several times faster than pa.array does
            return pa.array(np.fromiter(values, dtype=numeric, count=len(values)))
        except (TypeError, ValueError, OverflowError):
            pass  # not all numbers of that kind: pa.array says which
    try:
        return pa.array(values, type=type_)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        try:  # a JSON log may hold 3.0 for an int, 1 for a bool...
            return pa.array(values).cast(type_, safe=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
            raise InputError("event log", where, f"values are not of type {type_}: {e}") from None


def _json_text(v: Any) -> str | None:
    return None if v is None else json.dumps(v, sort_keys=True, separators=(",", ":"))


def table_from_rows(rows: list[tuple[Any, ...]], resources: Sequence[str]) -> pa.Table:
    """The table of row tuples ``(code, t, *fields of its type in schema order)``, in the
    order given."""
    import numpy as np
    import pyarrow as pa

    schema = arrow_schema(resources)
    n = len(rows)
    codes = np.fromiter(map(itemgetter(0), rows), dtype=np.int64, count=n)
    order = np.argsort(codes, kind="stable")  # rows grouped by type, log order within
    grouped = sorted(rows, key=itemgetter(0))  # the same (stable) grouping, of the tuples
    counts = np.bincount(codes, minlength=len(EVENT_TYPES))
    restore = pa.array(np.argsort(order, kind="stable"))
    pieces: dict[str, list[pa.Array]] = {name: [] for name in schema.names}
    filled: set[str] = set()  # columns some row has
    lo = 0
    for code, etype_name in enumerate(EVENT_TYPES):
        k = int(counts[code])
        if not k:
            continue
        block = grouped[lo : lo + k]
        lo += k
        # The block's columns (its rows, from one builder, are all as long).
        cols = [list(map(itemgetter(i), block)) for i in range(len(block[0]))]
        have: dict[str, pa.Array] = {
            "t": pa.array(cols[1], type=pa.float64()),
            "event": pa.array([etype_name] * k, type=pa.string()),
        }
        for i, f in enumerate(ev.SCHEMA[etype_name].fields, start=2):
            if f.type == "resources":
                vecs = cols[i]
                for r in resources:
                    have[resource_column(f.name, r)] = pa.array(
                        [None if v is None else float(v.get(r, 0.0)) for v in vecs],
                        type=pa.float64(),
                    )
            elif f.type == "object":
                have[f.name] = pa.array([_json_text(v) for v in cols[i]], type=pa.string())
            else:
                have[f.name] = _array(cols[i], schema.field(f.name).type, f"{etype_name}.{f.name}")
        for name in schema.names:
            arr = have.get(name)
            pieces[name].append(arr if arr is not None else pa.nulls(k, schema.field(name).type))
            if arr is not None:
                filled.add(name)
    columns = [
        pa.concat_arrays(pieces[name]).take(restore)
        if name in filled
        else pa.nulls(n, schema.field(name).type)  # no row of this block has the field
        for name in schema.names
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def table_from_records(
    records: Iterable[Mapping[str, Any]], resources: Sequence[str] | None = None
) -> pa.Table:
    """The table of ``records`` (dicts as :class:`treadle.events.EventLog` builds them, or
    read from a JSON log), in their order. Fields a record lacks are null; an event type
    outside the schema keeps ``t`` and ``event`` only. ``resources``: the run's resources
    (by default every one the records name)."""
    import pyarrow as pa

    recs = list(records)
    if resources is None:
        resources = resource_names(recs)
    schema = arrow_schema(resources)
    for n, rec in enumerate(recs, 1):
        if "t" not in rec or "event" not in rec:
            raise InputError("event log", f"record {n}", "record needs 't' and 'event'")
    columns: list[pa.Array] = [
        _array([float(r["t"]) for r in recs], pa.float64(), "t"),
        _array([str(r["event"]) for r in recs], pa.string(), "event"),
    ]
    for name, type_ in FIELDS.items():
        if type_ == "resources":
            vecs = [r.get(name) for r in recs]
            for res in sorted(resources):
                columns.append(
                    _array(
                        [float(v.get(res, 0.0)) if isinstance(v, Mapping) else None for v in vecs],
                        pa.float64(),
                        name,
                    )
                )
        elif type_ == "object":
            columns.append(pa.array([_json_text(r.get(name)) for r in recs], type=pa.string()))
        else:
            columns.append(_array([r.get(name) for r in recs], schema.field(name).type, name))
    return pa.Table.from_arrays(columns, schema=schema)


def resources_of(schema_names: Iterable[str], field: str) -> list[str]:
    """The resources that a table holds columns of for ``field`` (``resources``...)."""
    prefix = field + "_"
    return sorted(n[len(prefix) :] for n in schema_names if n.startswith(prefix))


def records_from_table(table: pa.Table) -> list[ev.Record]:
    """The records of a table, as the builders make them: ``t``, ``event`` then the type's
    fields in schema order (an optional field only when it has a value; a resource vector
    without its zero entries, by name)."""
    data = table.to_pydict()
    names = table.schema.names
    res_fields = {
        name: [(r, resource_column(name, r)) for r in resources_of(names, name)]
        for name, type_ in FIELDS.items()
        if type_ == "resources"
    }
    out: list[ev.Record] = []
    ts, evs = data["t"], data["event"]
    for i in range(table.num_rows):
        rec: ev.Record = {"t": ts[i], "event": evs[i]}
        etype = ev.SCHEMA.get(evs[i])
        for f in etype.fields if etype is not None else ():
            if f.type == "resources":
                vec = {r: data[c][i] for r, c in res_fields[f.name]}
                if all(v is None for v in vec.values()):
                    rec[f.name] = {}
                else:
                    rec[f.name] = {r: v for r, v in vec.items() if v}
                continue
            v = data[f.name][i] if f.name in data else None
            if f.type == "object" and v is not None:
                v = json.loads(v)
            if v is None and f.optional:
                continue
            rec[f.name] = v
        out.append(rec)
    return out


# ---------------------------------------------------------------------------- files

PARQUET_COMPRESSION = "zstd"


class ParquetEventWriter:
    """Writes tables of the event schema to ``path`` as Parquet row groups."""

    def __init__(self, path: Path, resources: Sequence[str]) -> None:
        import pyarrow.parquet as pq

        self.path = path
        self.schema = arrow_schema(resources)
        self._writer: Any = pq.ParquetWriter(
            str(path), self.schema, compression=PARQUET_COMPRESSION
        )
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            self._writer.write_table(table, row_group_size=table.num_rows)
            self.rows += table.num_rows

    def close(self) -> None:
        self._writer.close()


def write_parquet(records: Iterable[Mapping[str, Any]], path: Path) -> None:
    """Write ``records`` (in their order) as an ``events.parquet`` file."""
    import pyarrow.parquet as pq

    pq.write_table(
        table_from_records(records),
        str(path),
        compression=PARQUET_COMPRESSION,
        row_group_size=ROW_GROUP_ROWS,
    )


def read_table(
    path: Path,
    columns: Sequence[str] | None = None,
    *,
    prefixes: Sequence[str] = (),
    dictionaries: Sequence[str] = (),
) -> pa.Table:
    """An ``events.parquet`` file as a table: every column, or those of ``columns`` and
    those named with one of ``prefixes`` that it has (``dictionaries``: string columns
    to read as dictionary arrays). A file that is not an event log is an InputError
    naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        f = pq.ParquetFile(str(path))
        have = f.schema_arrow.names
        if "t" not in have or "event" not in have:
            raise InputError(str(path), None, "not an event log: no 't' and 'event' columns")
        cols = None
        if columns is not None:
            cols = [c for c in have if c in columns or c.startswith(tuple(prefixes))]
        dicts = [c for c in dictionaries if c in have and (cols is None or c in cols)]
        # One thread: the run's other processes have the cores, and the pages are small.
        table: pa.Table = pq.read_table(
            str(path), columns=cols, read_dictionary=dicts or None, use_threads=False
        )
    except (OSError, pa.ArrowException) as e:
        raise InputError(str(path), None, f"not a Parquet event log: {e}") from None
    return table


def read_events(path: Path) -> list[ev.Record]:
    """The records of an event log file, ``.parquet`` or JSON lines (by its suffix)."""
    if path.suffix == ".parquet":
        return records_from_table(read_table(path))
    return ev.read_jsonl(path)


# ---------------------------------------------------------------------------- the log


def _t(t: float) -> float:
    return round(float(t), 6)


class ColumnarEventLog(ev.EventLog):
    """An :class:`~treadle.events.EventLog` that keeps no records: each builder makes a
    row tuple, and every ``row_group_rows`` rows go to ``sink`` as a table of the event
    schema (``flush`` sends the rest). ``resources`` are the run's resource names (the
    table's resource columns); a vector naming another one is a ValueError."""

    __slots__ = ("_limit", "_rows", "_sent", "_table_sink", "resources")

    def __init__(
        self,
        sink: Callable[[pa.Table], None],
        resources: Sequence[str],
        row_group_rows: int = ROW_GROUP_ROWS,
    ) -> None:
        super().__init__()
        self._table_sink = sink
        self.resources = sorted(resources)
        self._rows: list[tuple[Any, ...]] = []
        self._limit = row_group_rows
        self._sent = 0

        def refuse(rec: ev.Record) -> None:
            raise TypeError("a ColumnarEventLog is written by its typed builders only")

        self.add = refuse

    def _push(self, row: tuple[Any, ...]) -> None:
        rows = self._rows
        rows.append(row)
        if len(rows) >= self._limit:
            self.flush()

    def flush(self) -> None:
        rows = self._rows
        if not rows:
            return
        self._check_resources(rows)
        self._table_sink(table_from_rows(rows, self.resources))
        self._sent += len(rows)
        self._rows = []

    def _check_resources(self, rows: list[tuple[Any, ...]]) -> None:
        known = set(self.resources)
        for r in rows:
            pos = _RES_POS.get(r[0])
            if pos is not None and not known.issuperset(r[pos]):
                extra = sorted(set(r[pos]) - known)
                raise ValueError(f"{EVENT_TYPES[r[0]]}: resource {extra[0]!r} is not the run's")

    def __len__(self) -> int:
        return self._sent + len(self._rows)

    # The builders: the signatures of EventLog's (a test compares them).
    def run_started(
        self,
        t: float,
        *,
        policy: str,
        workload: str | None,
        mode: str,
        seed: int | None,
        dilation: float,
        heartbeat_s: float,
        nodes: int,
        capacity: Mapping[str, float],
    ) -> None:
        self._push(
            (_RS, _t(t), policy, workload, mode, seed, dilation, heartbeat_s, nodes, capacity)
        )

    def run_finished(
        self,
        t: float,
        *,
        finished: int,
        unfinished: int,
        stalled: str | None,
        submit_timers: Mapping[str, Any] | None = None,
    ) -> None:
        timers = dict(submit_timers) if submit_timers is not None else None
        self._push((_RF, _t(t), finished, unfinished, stalled, timers))

    def node_registered(self, t: float, node: str, rack: str, resources: Resources) -> None:
        self._push((_NR, _t(t), node, rack, resources))

    def node_lost(self, t: float, node: str) -> None:
        self._push((_NL, _t(t), node))

    def job_submitted(
        self,
        t: float,
        job: str,
        name: str,
        user: str,
        queue: str,
        tasks: int,
        alone_jct_s: float | None,
    ) -> None:
        self._push((_JSUB, _t(t), job, name, user, queue, tasks, alone_jct_s))

    def job_started(self, t: float, job: str, user: str, queue: str) -> None:
        self._push((_JST, _t(t), job, user, queue))

    def job_finished(self, t: float, job: str, user: str, queue: str) -> None:
        self._push((_JF, _t(t), job, user, queue, "SUCCEEDED"))

    def job_failed(
        self, t: float, job: str, user: str, queue: str, status: str, diagnostics: str
    ) -> None:
        self._push((_JX, _t(t), job, user, queue, status, diagnostics))

    def attempt_started(self, t: float, job: str, attempt: int) -> None:
        self._push((_AS, _t(t), job, attempt))

    def attempt_failed(self, t: float, job: str, attempt: int, reason: str) -> None:
        self._push((_AF, _t(t), job, attempt, reason))

    def container_allocated(
        self,
        t: float,
        job: str,
        container: str,
        node: str,
        resources: Resources,
        priority: int,
        kind: str,
    ) -> None:
        rows = self._rows
        rows.append((_CA, round(float(t), 6), job, container, node, resources, priority, kind))
        if len(rows) >= self._limit:
            self.flush()

    def container_started(self, t: float, job: str, container: str, node: str) -> None:
        rows = self._rows
        rows.append((_CS, round(float(t), 6), job, container, node))
        if len(rows) >= self._limit:
            self.flush()

    def container_finished(
        self, t: float, job: str, container: str, node: str, state: str, exit_status: int
    ) -> None:
        rows = self._rows
        rows.append((_CF, round(float(t), 6), job, container, node, state, exit_status))
        if len(rows) >= self._limit:
            self.flush()

    def container_released(self, t: float, job: str, container: str, node: str) -> None:
        self._push((_CR, _t(t), job, container, node))

    def placement_rejected(
        self, t: float, node: str, job: str | None, priority: int | None, reason: str
    ) -> None:
        self._push((_PR, _t(t), node, job, priority, reason))

    def container_preempted(
        self, t: float, job: str, container: str, node: str, queue: str
    ) -> None:
        self._push((_CP, _t(t), job, container, node, queue))

    def dp_account(
        self,
        t: float,
        queue: str,
        price: float,
        budget: float,
        spending_rate: float,
        share: float,
        used: float,
        pending: int,
        charged: float,
    ) -> None:
        self._push(
            (
                _DPA,
                _t(t),
                queue,
                float(price),
                float(budget),
                float(spending_rate),
                float(share),
                float(used),
                int(pending),
                float(charged),
            )
        )

    def job_estimated(
        self, t: float, job: str, estimate_s: float, position: int, ratio: float | None, pilots: int
    ) -> None:
        r = None if ratio is None else float(ratio)
        self._push((_JE, _t(t), job, float(estimate_s), int(position), r, int(pilots)))

    def job_queue_changed(self, t: float, job: str, from_position: int, to_position: int) -> None:
        self._push((_JQ, _t(t), job, int(from_position), int(to_position)))


_RS, _RF, _NR, _NL = (_CODE[e] for e in ev.SCHEMA if e.startswith(("run_", "node_")))
_JSUB, _JST, _JF, _JX = (
    _CODE[e] for e in (ev.JOB_SUBMITTED, ev.JOB_STARTED, ev.JOB_FINISHED, ev.JOB_FAILED)
)
_JE, _JQ = _CODE[ev.JOB_ESTIMATED], _CODE[ev.JOB_QUEUE_CHANGED]
_AS, _AF = _CODE[ev.ATTEMPT_STARTED], _CODE[ev.ATTEMPT_FAILED]
_CA, _CS, _CF, _CR = (
    _CODE[e]
    for e in (
        ev.CONTAINER_ALLOCATED,
        ev.CONTAINER_STARTED,
        ev.CONTAINER_FINISHED,
        ev.CONTAINER_RELEASED,
    )
)
_PR = _CODE[ev.PLACEMENT_REJECTED]
_CP, _DPA = _CODE[ev.CONTAINER_PREEMPTED], _CODE[ev.DP_ACCOUNT]
#: Where a row tuple holds a resource vector, by event code.
_RES_POS = {_RS: 9, _NR: 4, _CA: 5}


class ParquetEventLog(ColumnarEventLog):
    """A :class:`ColumnarEventLog` whose row groups go to a Parquet file at ``path``;
    ``close`` writes the last one and the file's footer."""

    __slots__ = ("writer",)

    def __init__(
        self, path: Path, resources: Sequence[str], row_group_rows: int = ROW_GROUP_ROWS
    ) -> None:
        self.writer = ParquetEventWriter(path, resources)
        super().__init__(self.writer.write, resources, row_group_rows)

    def close(self) -> None:
        self.flush()
        self.writer.close()

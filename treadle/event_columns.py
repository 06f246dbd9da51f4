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
builders of :class:`treadle.events.EventLog` (both generated from the schema:
:mod:`treadle.event_builders`); it keeps each row as a tuple, with the rows of its event
type, until ``row_group_rows`` rows are pending, then hands them to its sink as a table
and forgets them, so its memory stays flat however long the run. The table's columns and
the building of a row group are :mod:`treadle.event_table`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treadle import events as ev
from treadle.c_heap import release_free_heap
from treadle.errors import InputError
from treadle.event_builders import RowBuilders
from treadle.event_schema import rows_attr
from treadle.event_table import (
    EVENT_TYPES as EVENT_TYPES,
    FIELDS as FIELDS,
    arrow_schema as arrow_schema,
    column_names as column_names,
    json_text,
    resource_column as resource_column,
    table_from_groups,
    typed_array,
)

if TYPE_CHECKING:
    import pyarrow as pa

ROW_GROUP_ROWS = 65_536


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


# ---------------------------------------------------------------------------- tables


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
        typed_array([float(r["t"]) for r in recs], pa.float64(), "t"),
        typed_array([str(r["event"]) for r in recs], pa.string(), "event"),
    ]
    for name, type_ in FIELDS.items():
        if type_ == "resources":
            vecs = [r.get(name) for r in recs]
            for res in sorted(resources):
                columns.append(
                    typed_array(
                        [float(v.get(res, 0.0)) if isinstance(v, Mapping) else None for v in vecs],
                        pa.float64(),
                        name,
                    )
                )
        elif type_ == "object":
            columns.append(pa.array([json_text(r.get(name)) for r in recs], type=pa.string()))
        else:
            columns.append(typed_array([r.get(name) for r in recs], schema.field(name).type, name))
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
            # what building and encoding the group took, back to the system: else a run's
            # RSS grows with its log (bench_memory)
            release_free_heap()

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

#: The attributes of the pending rows of each event type, in code order.
ROW_LISTS = tuple(rows_attr(name) for name in EVENT_TYPES)


class ColumnarEventLog(RowBuilders, ev.EventLog):
    """An :class:`~treadle.events.EventLog` that keeps no records: each builder appends a
    row tuple ``(t, *fields)`` to the rows of its event type and its type's code to the
    codes of the group (``t`` is rounded, and the rows turned into columns, once per row
    group: :func:`treadle.event_table.table_from_groups`), and every ``row_group_rows``
    rows go to ``sink`` as a table of the event schema (``flush`` sends the rest).
    ``resources`` are the run's resource names (the table's resource columns); a vector
    naming another one is a ValueError when its row group is built."""

    __slots__ = ("_codes", "_groups", "_limit", "_sent", "_table_sink", "resources", *ROW_LISTS)

    def __init__(
        self,
        sink: Callable[[pa.Table], None],
        resources: Sequence[str],
        row_group_rows: int = ROW_GROUP_ROWS,
    ) -> None:
        super().__init__()
        self._table_sink = sink
        self.resources = sorted(resources)
        #: The pending rows by event code; the lists live as long as the log (cleared
        #: after each row group), so each builder keeps its type's list as an attribute.
        self._groups: list[list[tuple[Any, ...]]] = [[] for _ in EVENT_TYPES]
        for name, rows in zip(ROW_LISTS, self._groups, strict=True):
            setattr(self, name, rows)
        self._codes = bytearray()  # the pending rows' codes, in log order
        self._limit = row_group_rows
        self._sent = 0

        def refuse(rec: ev.Record) -> None:
            raise TypeError("a ColumnarEventLog is written by its typed builders only")

        self.add = refuse

    def flush(self) -> None:
        codes = self._codes
        if not codes:
            return
        self._table_sink(table_from_groups(codes, self._groups, self.resources))
        self._sent += len(codes)
        codes.clear()
        for rows in self._groups:
            rows.clear()

    @property
    def pending(self) -> int:
        """Rows logged and not yet sent as a row group."""
        return len(self._codes)

    def __len__(self) -> int:
        return self._sent + len(self._codes)


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

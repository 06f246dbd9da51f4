"""The event log's table: its columns and their Arrow types (the ``events.parquet``
contract, described in :mod:`treadle.event_columns`), and one row group built from the
rows a :class:`treadle.event_columns.ColumnarEventLog` holds, grouped by event type.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

from treadle import events as ev
from treadle.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

#: Event types in code order: a row's code is its type's index in this tuple.
EVENT_TYPES: tuple[str, ...] = tuple(ev.SCHEMA)
CODES = {name: i for i, name in enumerate(EVENT_TYPES)}


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


def typed_array(values: Sequence[Any], type_: pa.DataType, where: str) -> pa.Array:
    """``values`` as an array of ``type_``; values that are not of it are an InputError
    naming ``where``."""
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


def json_text(v: Any) -> str | None:
    return None if v is None else json.dumps(v, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------------------- rows -> table


def rounded_times(ts: Sequence[Any]) -> np.ndarray[Any, np.dtype[np.float64]]:
    """``round(float(t), 6)`` of each of ``ts``, bit for bit, as float64: rint(t * 1e6) / 1e6
    is the same correctly rounded decimal unless t * 1e6 lies within its rounding error
    of a half (or t is huge, or not finite): those few go through ``round``."""
    import numpy as np

    x = np.array(ts, dtype=np.float64)
    y = x * 1e6
    out = np.rint(y) / 1e6
    with np.errstate(invalid="ignore"):  # inf and NaN: not finite, so through round
        near_half = np.abs(y - np.floor(y) - 0.5) <= np.abs(y) * 2.0**-50 + 1e-9
    for i in np.flatnonzero(near_half | ~(np.abs(x) < 1e9)).tolist():
        out[i] = round(float(ts[i]), 6)
    return out


def _distinct(values: Sequence[Any]) -> tuple[list[Any], pa.Array]:
    """The distinct objects of ``values`` (by identity) and, per value, its index there."""
    import numpy as np
    import pyarrow as pa

    ids = list(map(id, values))
    objs = dict(zip(ids, values, strict=True))
    where = {i: k for k, i in enumerate(objs)}
    idx = np.fromiter(map(where.__getitem__, ids), dtype=np.int64, count=len(ids))
    return list(objs.values()), pa.array(idx)


def _resource_columns(
    field: str, vecs: Sequence[Any], resources: Sequence[str]
) -> tuple[dict[str, pa.Array], int | None, str]:
    """The columns of a ``resources``-typed field, and the index of the first vector that
    names a resource outside ``resources`` (with that resource) if one does."""
    import pyarrow as pa

    objs, idx = _distinct(vecs)  # a run has few distinct vectors: its shapes
    known = set(resources)
    bad: tuple[int | None, str] = (None, "")
    for v in objs:
        if v is not None and not known.issuperset(v):
            first = next(i for i, w in enumerate(vecs) if w is v)
            if bad[0] is None or first < bad[0]:
                bad = (first, sorted(set(v) - known)[0])
    cols = {
        resource_column(field, r): pa.array(
            [None if v is None else float(v.get(r, 0.0)) for v in objs], type=pa.float64()
        ).take(idx)
        for r in resources
    }
    return cols, *bad


def table_from_groups(
    codes: bytes | bytearray, groups: Sequence[Sequence[tuple[Any, ...]]], resources: Sequence[str]
) -> pa.Table:
    """The table of the rows logged in the order of their type codes ``codes``:
    ``groups[code]`` holds the rows of that type, in that order, each ``(t, *fields of its
    type in schema order)`` (``t`` unrounded). A resource vector naming a resource outside
    ``resources`` is a ValueError naming the first such row's event type and resource."""
    import numpy as np
    import pyarrow as pa

    schema = arrow_schema(resources)
    resources = sorted(resources)
    n = len(codes)
    code_arr = np.frombuffer(bytes(codes), dtype=np.uint8)
    counts = np.bincount(code_arr, minlength=len(EVENT_TYPES))
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    order = np.argsort(code_arr, kind="stable")  # grouped position -> log position
    at = np.empty(n, dtype=np.int64)  # log position -> grouped position
    at[order] = np.arange(n, dtype=np.int64)
    restore = pa.array(at)
    present = [code for code, rows in enumerate(groups) if rows]
    if [int(counts[c]) for c in present] != [len(groups[c]) for c in present] or sum(
        len(g) for g in groups
    ) != n:  # pragma: no cover - a bug in the log, not in its input
        raise AssertionError("the row groups do not match their codes")

    have: dict[str, dict[int, pa.Array]] = {}  # column -> code -> that type's values
    t_parts: list[tuple[Any, ...]] = []
    bad: tuple[int, str, str] | None = None  # log position, event type, resource
    for code in present:
        etype = EVENT_TYPES[code]
        cols = list(zip(*groups[code], strict=True))
        t_parts.append(cols[0])
        for f, values in zip(ev.SCHEMA[etype].fields, cols[1:], strict=True):
            if f.type == "resources":
                res_cols, first, extra = _resource_columns(f.name, values, resources)
                for name, arr in res_cols.items():
                    have.setdefault(name, {})[code] = arr
                if first is not None:
                    pos = int(order[starts[code] + first])
                    if bad is None or pos < bad[0]:
                        bad = (pos, etype, extra)
            elif f.type == "object":
                have.setdefault(f.name, {})[code] = pa.array(
                    [json_text(v) for v in values], type=pa.string()
                )
            else:
                have.setdefault(f.name, {})[code] = typed_array(
                    values, schema.field(f.name).type, f"{etype}.{f.name}"
                )
    if bad is not None:
        raise ValueError(f"{bad[1]}: resource {bad[2]!r} is not the run's")

    t_grouped = rounded_times(list(chain.from_iterable(t_parts)))
    columns: list[pa.Array] = [
        pa.array(t_grouped[at]),
        pa.array(EVENT_TYPES, type=pa.string()).take(pa.array(code_arr)),
    ]
    for field in list(schema)[2:]:
        parts = have.get(field.name)
        if not parts:
            columns.append(pa.nulls(n, field.type))
        elif len(present) == 1:  # one type: grouped order is log order
            columns.append(parts[present[0]])
        else:
            pieces = [
                arr if (arr := parts.get(c)) is not None else pa.nulls(int(counts[c]), field.type)
                for c in present
            ]
            columns.append(pa.concat_arrays(pieces).take(restore))
    return pa.Table.from_arrays(columns, schema=schema)

"""TPC-H query DAG summaries: real Spark query plans for the ``kind: tpch`` generator.

The summary (``tpch-dags/tpch_dag_summary.json`` in the traces directory, derived from
hongzimao/decima-sim's ``tpch/`` data) is one JSON object mapping ``"<scale>/q<n>"`` (for
example ``"100g/q3"``: query 3 on 100 GB of data) to a query DAG::

    {"num_stages": 6, "num_edges": 6,
     "stages": [{"stage": 0, "num_tasks": 200, "mean_task_ms": 92.6, "parents": []}, ...]}

``read_tpch`` validates the whole file and returns a ``TpchTrace``; every error names the
file and a key path such as ``100g/q3.stages[2].parents[0]`` (indices count from 0).
``num_stages`` and ``num_edges`` are optional, but checked when present; other keys are
ignored. Stage ids are any distinct integers >= 0 and stages may be listed in any order;
``TpchQuery.stages`` puts parents first. The trace has no cluster, arrivals, users or
resource demands: a workload file's generator supplies those (see ``treadle.workload``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TypeGuard

from treadle.errors import WorkloadError
from treadle.importers.common import json_kind, read_text
from treadle.model import StageSpec, topological_stages
from treadle.resources import Resources

KEY = re.compile(r"^(?P<scale>[^/\s]+)/q(?P<query>[1-9][0-9]*)$")
_SIZE = re.compile(r"^(?P<number>[0-9]+(?:\.[0-9]+)?)(?P<unit>[kmgtp]?)b?$", re.IGNORECASE)
_UNITS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


@dataclass(frozen=True)
class TpchStage:
    stage: int
    tasks: int
    mean_task_s: float
    parents: tuple[int, ...]


@dataclass(frozen=True)
class TpchQuery:
    scale: str
    query: int
    stages: tuple[TpchStage, ...]
    """Parents before children."""

    @property
    def key(self) -> str:
        return f"{self.scale}/q{self.query}"


@dataclass(frozen=True)
class TpchTrace:
    source: str
    queries: Mapping[tuple[str, int], TpchQuery]

    @cached_property
    def scales(self) -> tuple[str, ...]:
        """The scales present, smallest data size first (``2g``, ``10g``, ``100g``)."""
        return tuple(sorted({s for s, _ in self.queries}, key=scale_order))

    @cached_property
    def query_numbers(self) -> tuple[int, ...]:
        return tuple(sorted({q for _, q in self.queries}))


def scale_order(scale: str) -> tuple[float, str]:
    """Sort key: data size when the scale reads like one (``500m`` < ``2g``), else last."""
    match = _SIZE.match(scale)
    if not match:
        return math.inf, scale
    size = float(match["number"]) * 1024 ** _UNITS[match["unit"].lower()]
    return size, scale


def read_tpch(path: str | Path, source: str = "") -> TpchTrace:
    """Read and validate a TPC-H DAG summary; errors name ``source`` (default the path)."""
    source = source or str(path)
    text = read_text(Path(path), source)
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
        raise WorkloadError(source, f"line {e.lineno}", f"invalid JSON: {e.msg}") from None
    except RecursionError:
        raise WorkloadError(source, None, "JSON nested too deeply") from None
    except _DuplicateKeyError as e:
        raise WorkloadError(source, None, f"duplicate key {e.key!r} in a JSON object") from None
    if not isinstance(data, dict):
        raise WorkloadError(
            source, None, f"expected a JSON object of '<scale>/q<n>' keys, got {json_kind(data)}"
        )
    if not data:
        raise WorkloadError(source, None, "the summary holds no queries")
    queries: dict[tuple[str, int], TpchQuery] = {}
    for key, value in data.items():
        match = KEY.match(key)
        if not match:
            raise WorkloadError(source, key, "expected a key '<scale>/q<n>' such as '100g/q3'")
        scale, number = match["scale"], int(match["query"])
        queries[scale, number] = _query(source, key, scale, number, value)
    return TpchTrace(source, queries)


class _DuplicateKeyError(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    # json.loads keeps the last of two equal keys silently; a summary with two entries
    # for one query is corrupt, not a choice.
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


def _query(source: str, key: str, scale: str, number: int, value: object) -> TpchQuery:
    query = _object(source, key, value)
    stages_where = f"{key}.stages"
    raw = query.get("stages")
    if raw is None:
        raise WorkloadError(source, stages_where, "required field is missing")
    if not isinstance(raw, list):
        raise WorkloadError(source, stages_where, f"expected a list, got {json_kind(raw)}")
    if not raw:
        raise WorkloadError(source, stages_where, "a query needs at least one stage")
    stages = [_stage(source, f"{stages_where}[{i}]", v) for i, v in enumerate(raw)]
    ids: set[int] = set()
    for i, s in enumerate(stages):
        if s.stage in ids:
            raise WorkloadError(source, f"{stages_where}[{i}].stage", f"duplicate stage {s.stage}")
        ids.add(s.stage)
    for i, s in enumerate(stages):
        for j, p in enumerate(s.parents):
            at = f"{stages_where}[{i}].parents[{j}]"
            if p not in ids:
                raise WorkloadError(source, at, f"no stage {p} in the query")
            if p == s.stage:
                raise WorkloadError(source, at, "a stage cannot be its own parent")
            if p in s.parents[:j]:
                raise WorkloadError(source, at, f"stage {p} is listed twice")
    _check_count(source, key, query, "num_stages", len(stages), "stages")
    _check_count(source, key, query, "num_edges", sum(len(s.parents) for s in stages), "edges")
    return TpchQuery(scale, number, _ordered(source, stages_where, stages))


def _ordered(source: str, where: str, stages: list[TpchStage]) -> tuple[TpchStage, ...]:
    by_name = {str(s.stage): s for s in stages}
    # The model's ordering names cycles; the probes' resources and durations do not matter.
    probe = Resources(vcores=1)
    probes = [StageSpec(str(s.stage), probe, (1.0,), tuple(map(str, s.parents))) for s in stages]
    try:
        ordered = topological_stages(probes)
    except ValueError as e:
        raise WorkloadError(source, where, str(e)) from None
    return tuple(by_name[p.name] for p in ordered)


def _stage(source: str, where: str, value: object) -> TpchStage:
    d = _object(source, where, value)
    stage = _whole(source, f"{where}.stage", d.get("stage"), minimum=0)
    tasks = _whole(source, f"{where}.num_tasks", d.get("num_tasks"), minimum=1)
    mean_ms = d.get("mean_task_ms")
    if mean_ms is None:
        raise WorkloadError(source, f"{where}.mean_task_ms", "required field is missing")
    if not _is_number(mean_ms) or not math.isfinite(mean_ms) or mean_ms < 0:
        raise WorkloadError(
            source, f"{where}.mean_task_ms", f"expected a finite number >= 0, got {mean_ms!r}"
        )
    parents_where = f"{where}.parents"
    raw = d.get("parents", [])
    if not isinstance(raw, list):
        raise WorkloadError(source, parents_where, f"expected a list, got {json_kind(raw)}")
    parents = tuple(
        _whole(source, f"{parents_where}[{j}]", p, minimum=0) for j, p in enumerate(raw)
    )
    return TpchStage(stage, tasks, float(mean_ms) / 1000, parents)


def _check_count(
    source: str, key: str, query: dict[str, object], field: str, actual: int, what: str
) -> None:
    if query.get(field) is None:
        return
    stated = _whole(source, f"{key}.{field}", query[field], minimum=0)
    if stated != actual:
        raise WorkloadError(
            source, f"{key}.{field}", f"says {stated} but the query has {actual} {what}"
        )


def _object(source: str, where: str, value: object) -> dict[str, object]:
    if not isinstance(value, dict):
        raise WorkloadError(source, where, f"expected a JSON object, got {json_kind(value)}")
    return value


def _whole(source: str, where: str, value: object, *, minimum: int) -> int:
    if value is None:
        raise WorkloadError(source, where, "required field is missing")
    if _is_number(value) and float(value).is_integer() and value >= minimum:
        return int(value)
    raise WorkloadError(source, where, f"expected a whole number >= {minimum}, got {value!r}")


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)

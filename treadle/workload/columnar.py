"""The columnar workload: a whole ``Workload`` as one Parquet file, read by row group.

``treadle convert`` writes it from any workload; ``load_workload`` reads a ``.parquet``
file as it reads a YAML one. The layout (docs/workloads.md shows it):

* one row per job, in the workload's order, ``JOBS_PER_ROW_GROUP`` jobs a row group:
  ``name``, ``user``, ``queue``, ``submit_s``, the optional ``spending_rate``,
  ``priority`` and ``scheduling_class``, a closed-loop job's ``follows`` (the job whose
  end releases it) and ``follow_wait_s``, and ``stages``: a list of structs ``name``,
  ``parents`` (list of stage names, each before its child), ``ask`` (what each task
  asks: an index into the header's ``asks``) and ``durations_s`` (one per task);
* the file's key-value metadata: ``treadle.workload`` (the layout's version, ``1``) and
  ``treadle.workload.yaml``, the header: a workload file without jobs (seed, cluster,
  queues, users, admin), plus the workload's ``name``, ``asks`` (the distinct resource
  asks, amounts typed as in the model) and, when the nodes' ids are not the node groups'
  numbering (a trace's host names), ``node_ids``, one per node in order.

The header is validated as a YAML workload file is (its schema, then the builder's cluster,
queue and admin checks); each job is checked as the model and the builder check a YAML
job (names, leaf queues, stage order, resources that fit a node, task bounds), with the
sizes bounded from the file's metadata and the columns' list lengths before any job is
built. A problem is one ``WorkloadError`` naming the file and ``row group G, job J`` and
the field (``row group 0, job 3.stages[1].durations_s[2]``), or ``header.<field>``.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import Field, ValidationError

from treadle.errors import WorkloadError
from treadle.importers.common import MAX_INPUT_BYTES
from treadle.model import (
    ROOT_QUEUE,
    ClusterSpec,
    Follow,
    JobSpec,
    NodeSpec,
    StageSpec,
    UserSpec,
    Workload,
)
from treadle.workload.build import Builder
from treadle.workload.errors import from_validation_error, join
from treadle.workload.schema import (
    MAX_JOBS,
    MAX_NODES,
    MAX_SECONDS,
    MAX_TASKS,
    MAX_TASKS_PER_STAGE,
    ClusterFile,
    NodeGroup,
    WorkloadFile,
)
from treadle.yamlfile import Name, queue_tree, read_yaml

VERSION_KEY = b"treadle.workload"
HEADER_KEY = b"treadle.workload.yaml"
VERSION = b"1"
JOBS_PER_ROW_GROUP = 10_000
#: Jobs of a row group decoded into Python objects at a time, as the run takes them.
DECODE_JOBS = 256

_STRINGS = pa.list_(pa.string())
STAGE = pa.struct(
    [
        ("name", pa.string()),
        ("parents", _STRINGS),
        ("ask", pa.int64()),
        ("durations_s", pa.list_(pa.float64())),
    ]
)
JOBS = pa.schema(
    [
        ("name", pa.string()),
        ("user", pa.string()),
        ("queue", pa.string()),
        ("submit_s", pa.float64()),
        ("spending_rate", pa.float64()),
        ("priority", pa.int64()),
        ("scheduling_class", pa.int64()),
        ("follows", pa.string()),
        ("follow_wait_s", pa.float64()),
        ("stages", pa.list_(STAGE)),
    ]
)
"""The jobs table; every column but the optional ones (``OPTIONAL``) holds no null."""
OPTIONAL = ("spending_rate", "priority", "scheduling_class", "follows", "follow_wait_s")


ExactAmount = Annotated[int, Field(ge=0)] | Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""A node's amount as written: ``8`` stays the int a trace's importer gave, ``8.0`` the
float a YAML file's nodes have (the event log prints them so)."""


class HeaderNodeGroup(NodeGroup):
    """A YAML node group whose amounts keep their type."""

    resources: dict[str, ExactAmount]


class HeaderCluster(ClusterFile):
    # A pydantic field narrowed in a subclass; mypy sees lists as invariant.
    nodes: Annotated[list[HeaderNodeGroup], Field(min_length=1)]  # type: ignore[assignment]


class HeaderFile(WorkloadFile):
    """The header: a workload file whose jobs are the table's, with the workload's name
    and, when the node groups' numbering does not give them, the nodes' ids; node
    amounts keep their type (``ExactAmount``)."""

    name: Name
    cluster: HeaderCluster
    asks: list[dict[str, ExactAmount]] = Field(
        default_factory=list,
        description="The tasks' resource asks, each once; a stage's ask indexes this list.",
    )
    node_ids: list[Name] | None = Field(default=None, max_length=MAX_NODES)


# Reading --------------------------------------------------------------------------------


class Header:
    """A header's YAML, validated as a workload file and built by the workload builder."""

    def __init__(self, text: str, source: str) -> None:
        try:
            data = read_yaml(text, source, WorkloadError)
        except RecursionError:
            raise WorkloadError(source, "header", "nested too deeply") from None
        if not isinstance(data, dict):
            raise WorkloadError(source, "header", "must be a mapping (name:, cluster:, ...)")
        try:
            self.doc = HeaderFile.model_validate(data)
        except ValidationError as e:
            err = from_validation_error(e, source, HeaderFile)
            raise WorkloadError(
                source, f"header.{err.field}" if err.field else "header", err.message
            ) from None
        for key in ("jobs", "generators", "partition"):
            if getattr(self.doc, key):
                raise WorkloadError(
                    source, f"header.{key}", "the jobs are the table's rows, not the header's"
                )
        self.builder = Builder(source, self.doc)
        self.builder.cluster = self._cluster(source)
        self.queues = self.builder.queues = queue_tree(self.doc.queues, source, WorkloadError)
        self.admin = self.builder._admin(self.doc.admin)
        self.builder._check_accounts([], self.admin)
        self.users = {u: UserSpec(u, s.weight, s.budget) for u, s in self.doc.users.items()}
        self.leaves = {q.name: q for q in self.queues.walk() if q.is_leaf and q.name != ROOT_QUEUE}
        # Each ask checked once, as a YAML stage's resources are (a task must fit a node).
        self.asks = [
            self.builder._task_resources(a, f"header.asks[{i}]")
            for i, a in enumerate(self.doc.asks)
        ]

    @property
    def cluster(self) -> ClusterSpec:
        return self.builder.cluster

    def _cluster(self, source: str) -> ClusterSpec:
        cluster = self.builder._cluster(self.doc.cluster)
        ids = self.doc.node_ids
        if ids is None:
            return cluster
        if len(ids) != len(cluster.nodes):
            raise WorkloadError(
                source, "header.node_ids", f"{len(ids)} ids for {len(cluster.nodes)} nodes"
            )
        seen: set[str] = set()
        for k, node_id in enumerate(ids):
            if node_id in seen:
                raise WorkloadError(
                    source, f"header.node_ids[{k}]", f"node id {node_id!r} is given twice"
                )
            seen.add(node_id)
        nodes = tuple(
            NodeSpec(i, n.resources, n.rack) for i, n in zip(ids, cluster.nodes, strict=True)
        )
        return ClusterSpec(nodes, cluster.heartbeat_s, cluster.scheduling)


class ColumnarWorkload:
    """An open columnar workload file: its header, checked at once, and its jobs, read a
    row group at a time (``jobs``); ``workload`` reads them all."""

    def __init__(self, path: Path, source: str = "") -> None:
        self.path = path
        self.source = source or str(path)
        self.file = self._open()
        self.header = Header(self._header_text(), self.source)
        self.tasks = 0
        self.names: set[str] = set()
        self.follows: dict[str, Follow] = {}
        """The closed-loop jobs read so far: name -> what releases it."""

    def error(self, where: str | None, message: str) -> WorkloadError:
        return WorkloadError(self.source, where, message)

    def _open(self) -> pq.ParquetFile:
        try:
            size = self.path.stat().st_size
            if size > MAX_INPUT_BYTES:
                raise self.error(None, f"{size} bytes; at most {MAX_INPUT_BYTES} are read")
            file = pq.ParquetFile(str(self.path))
        except OSError as e:
            raise self.error(None, f"cannot read: {e.strerror or e}") from None
        except pa.ArrowException as e:
            raise self.error(None, f"not a readable Parquet file ({e})") from None
        meta = file.schema_arrow.metadata or {}
        if meta.get(VERSION_KEY) != VERSION:
            found = meta.get(VERSION_KEY)
            why = f"version {found.decode(errors='replace')!r}" if found else "no such key"
            raise self.error(
                None,
                f"not a treadle columnar workload: metadata {VERSION_KEY.decode()!r} must be "
                f"{VERSION.decode()!r} ({why})",
            )
        _check_schema(file.schema_arrow, self.source)
        self._check_sizes(file)
        return file

    def _header_text(self) -> str:
        raw = (self.file.schema_arrow.metadata or {}).get(HEADER_KEY)
        if raw is None:
            raise self.error("header", f"missing: no metadata key {HEADER_KEY.decode()!r}")
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise self.error("header", "not UTF-8 text") from None

    def _check_sizes(self, file: pq.ParquetFile) -> None:
        """Jobs and tasks in all, from the footer, before any row is read: the durations'
        leaf column counts one value per task (and one per empty list)."""
        meta = file.metadata
        if meta.num_rows == 0:
            raise self.error(None, "no jobs: the table has no rows")
        if meta.num_rows > MAX_JOBS:
            raise self.error(None, f"{meta.num_rows} jobs; at most {MAX_JOBS}")
        leaves = [meta.schema.column(i).path.split(".") for i in range(meta.num_columns)]
        # stages.<list>.<item>.durations_s.<list>.<item>: the names between vary by writer.
        durations = next(i for i, p in enumerate(leaves) if p[0] == "stages" and "durations_s" in p)
        groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
        values = sum(group.column(durations).num_values for group in groups)
        if values > MAX_TASKS:
            raise self.error(None, f"{values} task durations; at most {MAX_TASKS} tasks")
        for g, group in enumerate(groups):  # what reading it would take, decompressed
            if group.total_byte_size > MAX_INPUT_BYTES:
                raise self.error(
                    f"row group {g}",
                    f"{group.total_byte_size} bytes decompressed; at most {MAX_INPUT_BYTES}",
                )

    def workload(self) -> Workload:
        """The whole workload."""
        jobs = tuple(self.jobs())
        h = self.header
        return Workload(
            h.doc.name, h.cluster, jobs, h.queues, h.users, h.doc.seed, self.follows, h.admin
        )

    def jobs(self) -> Iterator[JobSpec]:
        """The jobs in file order, one row group read at a time."""
        for g in range(self.file.num_row_groups):
            yield from self._row_group(g)

    def _row_group(self, g: int) -> Iterator[JobSpec]:
        """A row group's jobs: checked in bulk first, then decoded ``DECODE_JOBS`` at a
        time as they are taken (a group's durations as Python floats are some 24 bytes a
        task)."""
        try:
            table = self.file.read_row_group(g)
        except (pa.ArrowException, OSError) as e:
            raise self.error(f"row group {g}", f"cannot be read ({e})") from None
        stages = table.column("stages").combine_chunks()
        self._check_nulls(g, table, stages)
        self._check_tasks(g, stages)
        first = sum(self.file.metadata.row_group(k).num_rows for k in range(g))
        names = [name for name in JOBS.names if name != "stages"]
        for lo in range(0, table.num_rows, DECODE_JOBS):
            part = table.slice(lo, DECODE_JOBS)
            columns = {name: part.column(name).to_pylist() for name in names}
            flat = _FlatStages.of(stages.slice(lo, DECODE_JOBS))
            for i in range(part.num_rows):
                row = {k: v[i] for k, v in columns.items()}
                yield self._job(f"row group {g}, job {first + lo + i}", row, flat, i)

    # Checks of a row group, in bulk, before its jobs are built ---------------------------

    def _check_nulls(self, g: int, table: pa.Table, stages: pa.ListArray) -> None:
        for column in JOBS.names:
            if column not in OPTIONAL and table.column(column).null_count:
                row = _first_null(table.column(column).combine_chunks())
                raise self.error(self._job_at(g, row, column), "must not be null")
        structs = stages.flatten()
        if structs.null_count:
            raise self.error(
                self._stage_at(g, stages, _first_null(structs), ""), "must not be null"
            )
        for name, child in zip(STAGE.names, structs.flatten(), strict=True):
            if child.null_count:
                raise self.error(
                    self._stage_at(g, stages, _first_null(child), name), "must not be null"
                )
            if name in ("parents", "durations_s") and child.flatten().null_count:
                item = _first_null(child.flatten())
                where = self._stage_at(g, stages, _owner(child, item), name)
                raise self.error(where, "must not hold a null")

    def _check_tasks(self, g: int, stages: pa.ListArray) -> None:
        """Every job has stages, every stage 1 to ``MAX_TASKS_PER_STAGE`` tasks of
        durations in (0, ``MAX_SECONDS``], and the tasks so far stay within ``MAX_TASKS``."""
        per_job = pc.list_value_length(stages)
        if len(per_job) and pc.min(per_job).as_py() < 1:
            raise self.error(self._job_at(g, pc.index(per_job, 0).as_py(), "stages"), "no stages")
        fields = dict(zip(STAGE.names, stages.flatten().flatten(), strict=True))
        asks, durations = fields["ask"], fields["durations_s"]
        known = len(self.header.asks)
        inside = pc.and_(pc.greater_equal(asks, 0), pc.less(asks, known))
        if len(inside) and not pc.all(inside).as_py():
            bad = pc.index(inside, False).as_py()
            raise self.error(
                self._stage_at(g, stages, bad, "ask"),
                f"must index the header's asks (0..{known - 1}), got {asks[bad].as_py()}",
            )
        per_stage = pc.list_value_length(durations)
        if len(per_stage) and pc.min(per_stage).as_py() < 1:
            where = self._stage_at(g, stages, pc.index(per_stage, 0).as_py(), "durations_s")
            raise self.error(where, "no tasks: give one duration per task")
        widest = pc.max(per_stage).as_py() or 0
        if widest > MAX_TASKS_PER_STAGE:
            where = self._stage_at(g, stages, pc.index(per_stage, widest).as_py(), "durations_s")
            raise self.error(where, f"{widest} tasks in one stage; at most {MAX_TASKS_PER_STAGE}")
        self.tasks += pc.sum(per_stage).as_py() or 0
        if self.tasks > MAX_TASKS:
            raise self.error(
                f"row group {g}", f"the workload passes {MAX_TASKS} tasks here; at most that"
            )
        values = durations.flatten()
        good = pc.and_(pc.greater(values, 0.0), pc.less_equal(values, MAX_SECONDS))
        if len(good) and not pc.all(good).as_py():
            bad = pc.index(good, False).as_py()
            stage = _owner(durations, bad)
            task = bad - durations.offsets[stage].as_py()
            where = self._stage_at(g, stages, stage, f"durations_s[{task}]")
            raise self.error(
                where, f"must be in (0, {MAX_SECONDS:g}] seconds, got {values[bad].as_py()!r}"
            )

    def _job_at(self, g: int, row: int, field: str) -> str:
        first = sum(self.file.metadata.row_group(k).num_rows for k in range(g))
        return f"row group {g}, job {first + row}.{field}"

    def _stage_at(self, g: int, stages: pa.ListArray, flat: int, field: str) -> str:
        row = _owner(stages, flat)
        k = flat - stages.offsets[row].as_py()
        return self._job_at(g, row, f"stages[{k}]" + (f".{field}" if field else ""))

    # One job -----------------------------------------------------------------------------

    def _job(self, where: str, row: dict[str, Any], flat: _FlatStages, i: int) -> JobSpec:
        for key in ("name", "user", "queue"):
            if not row[key]:
                raise self.error(f"{where}.{key}", "must be a non-empty name")
        name, queue = row["name"], row["queue"]
        if name in self.names:
            raise self.error(f"{where}.name", f"duplicate job name {name!r}")
        self.names.add(name)
        builder = self.header.builder
        builder.check_user(row["user"], f"{where}.user")
        leaf = (
            self.header.leaves.get(queue)
            or self.header.leaves[builder.check_queue(queue, f"{where}.queue")]
        )
        submit_s = self._seconds(row, "submit_s", where)
        rate = row["spending_rate"]
        if rate is not None:
            if not (math.isfinite(rate) and rate >= 0):
                raise self.error(
                    f"{where}.spending_rate", f"must be a finite number >= 0, got {rate!r}"
                )
            if leaf.budget is None or leaf.spending_rate is None:
                raise self.error(
                    f"{where}.spending_rate",
                    f"changes the account of queue {queue!r}, which must declare both budget "
                    "and spending_rate",
                )
        if (row["follows"] is None) != (row["follow_wait_s"] is None):
            raise self.error(f"{where}.follow_wait_s", "follows and follow_wait_s go together")
        if row["follows"] is not None:
            self.follows[name] = Follow(row["follows"], self._seconds(row, "follow_wait_s", where))
        earlier: dict[str, None] = {}  # the job's stages so far, in order
        start = flat.jobs[i]
        stages = tuple(
            self._stage(where, k - start, flat, k, earlier) for k in range(start, flat.jobs[i + 1])
        )
        try:
            return JobSpec(
                name,
                row["user"],
                submit_s,
                stages,
                queue,
                rate,
                row["priority"],
                row["scheduling_class"],
            )
        except ValueError as e:  # the builder's checks come first; the model's are a backstop
            raise self.error(where, str(e)) from None

    def _seconds(self, row: dict[str, Any], key: str, where: str) -> float:
        value = row[key]
        if not 0 <= value <= MAX_SECONDS:  # NaN too
            raise self.error(
                f"{where}.{key}", f"must be in 0..{MAX_SECONDS:g} seconds, got {value!r}"
            )
        return float(value)

    def _stage(
        self, where: str, k: int, flat: _FlatStages, index: int, earlier: dict[str, None]
    ) -> StageSpec:
        name = flat.names[index]
        if not name:
            raise self.error(f"{where}.stages[{k}].name", "must be a non-empty name")
        if name in earlier:
            raise self.error(f"{where}.stages[{k}].name", f"duplicate stage name {name!r}")
        parents = flat.parents[flat.parent_offsets[index] : flat.parent_offsets[index + 1]]
        for n, p in enumerate(parents):
            if p not in earlier:
                raise self.error(
                    f"{where}.stages[{k}].parents[{n}]",
                    f"unknown stage {p!r}; a parent comes before its child (before: "
                    f"{join(list(earlier)) or 'none'})",
                )
            if p in parents[:n]:
                raise self.error(
                    f"{where}.stages[{k}].parents[{n}]", f"stage {p!r} is listed twice"
                )
        earlier[name] = None
        durations = flat.durations[flat.duration_offsets[index] : flat.duration_offsets[index + 1]]
        return StageSpec(name, self.header.asks[flat.asks[index]], tuple(durations), tuple(parents))


@dataclass(frozen=True, slots=True)
class _FlatStages:
    """A row group's stages as flat lists (no object per stage until its ``StageSpec``):
    job ``i``'s stages are ``jobs[i]:jobs[i + 1]``, stage ``k``'s parents
    ``parents[parent_offsets[k]:parent_offsets[k + 1]]``, and its durations likewise."""

    jobs: list[int]
    names: list[str]
    asks: list[int]
    parent_offsets: list[int]
    parents: list[str]
    duration_offsets: list[int]
    durations: list[float]

    @classmethod
    def of(cls, stages: pa.ListArray) -> _FlatStages:
        fields = dict(zip(STAGE.names, stages.flatten().flatten(), strict=True))
        parents, durations = fields["parents"], fields["durations_s"]
        return cls(
            _offsets(stages),
            fields["name"].to_pylist(),
            fields["ask"].to_pylist(),
            _offsets(parents),
            parents.flatten().to_pylist(),
            _offsets(durations),
            durations.flatten().to_pylist(),
        )


def _offsets(lists: pa.ListArray) -> list[int]:
    """A list array's offsets from 0: ``flatten`` gives its values from the first."""
    offsets = lists.offsets.to_pylist()
    return [o - offsets[0] for o in offsets]


def _check_schema(schema: pa.Schema, source: str) -> None:
    """The jobs table's columns, by name and type (nullability and list item names aside)."""
    for expected in JOBS:
        index = schema.get_field_index(expected.name)
        if index < 0:
            raise WorkloadError(
                source, expected.name, f"no such column; expected {_type(expected.type)}"
            )
        found = schema.field(index).type
        if not _same_type(found, expected.type):
            raise WorkloadError(
                source, expected.name, f"expected {_type(expected.type)}, got {_type(found)}"
            )
    extra = [n for n in schema.names if n not in JOBS.names]
    if extra:
        raise WorkloadError(source, extra[0], f"unknown column; the columns are {join(JOBS.names)}")


def _same_type(found: pa.DataType, expected: pa.DataType) -> bool:
    if pa.types.is_map(expected):
        return (
            pa.types.is_map(found)
            and _same_type(found.key_type, expected.key_type)
            and _same_type(found.item_type, expected.item_type)
        )
    if pa.types.is_list(expected):
        return pa.types.is_list(found) and _same_type(found.value_type, expected.value_type)
    if pa.types.is_struct(expected):
        return (
            pa.types.is_struct(found)
            and [f.name for f in found] == [f.name for f in expected]
            and all(_same_type(f.type, e.type) for f, e in zip(found, expected, strict=True))
        )
    return bool(found.equals(expected))


def _type(t: pa.DataType) -> str:
    """A type as the docs write it: ``list<struct<name: string, ...>>``."""
    if pa.types.is_map(t):
        return f"map<{_type(t.key_type)}, {_type(t.item_type)}>"
    if pa.types.is_list(t):
        return f"list<{_type(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(f"{f.name}: {_type(f.type)}" for f in t) + ">"
    return str(t)


def _first_null(array: pa.Array) -> int:
    return int(pc.index(pc.is_null(array), True).as_py())


def _owner(lists: pa.ListArray | pa.MapArray, item: int) -> int:
    """The list of ``lists`` that holds its flattened values' ``item``."""
    offsets = lists.offsets.to_pylist()
    base = offsets[0]
    return bisect_right(offsets, base + item) - 1


def load_columnar(path: Path, source: str = "") -> Workload:
    """The workload in a columnar workload file."""
    return ColumnarWorkload(path, source).workload()

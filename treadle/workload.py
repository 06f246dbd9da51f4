"""Workload files: the YAML schema, loading, and expansion into the immutable model.

A workload file is validated in two passes. The pydantic models below check structure
and types (every model forbids unknown fields, so a typo such as ``durations:`` is an
error, not a silently ignored key). The builder then checks what spans several places
(references, duplicates, DAG cycles, tasks that fit no node) and expands generators and
duration distributions into concrete tasks. Either pass raises ``WorkloadError`` with the
file and a field path such as ``jobs[2].stages[0].resources.vcores``; nothing else
escapes, and nothing is returned until the whole ``Workload`` has been built.

Randomness: one ``random.Random(seed)`` draws everything, in declaration order: the
explicit jobs (stage by stage, task by task), then each generator (for each generated
job, its inter-arrival gap, then its task durations). Same file and seed, same workload.

Node ids: a node group ``{count: 3, name: big}`` yields ``big1``, ``big2``, ``big3``;
``name`` defaults to ``node``, and numbering counts per prefix from 1 in declaration
order, so without prefixes ids are ``node1 .. nodeN`` across the whole cluster.
"""

from __future__ import annotations

import difflib
import random
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources as package_files
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails

from treadle.errors import WorkloadError
from treadle.model import (
    DEFAULT_QUEUE,
    ROOT_QUEUE,
    ClusterSpec,
    JobSpec,
    NodeSpec,
    QueueSpec,
    StageSpec,
    UserSpec,
    Workload,
    topological_stages,
)
from treadle.resources import Resources

MIN_DURATION_S = 0.001
"""Drawn durations are clamped to this, so a task never takes zero or negative time."""

DEFAULT_RACK = "default-rack"
DEFAULT_NODE_PREFIX = "node"
FORMATS = ("yaml", "sls", "rumen")
DISTRIBUTIONS = ("exponential", "lognormal", "uniform")

# ----------------------------------------------------------------------------------
# Schema
# ----------------------------------------------------------------------------------


class _Strict(BaseModel):
    # strict: YAML gives real numbers; refusing "5" or `true` where a number belongs
    # catches quoting mistakes instead of guessing.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


Name = Annotated[str, StringConstraints(pattern=r"^\S+$")]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
PositiveSeconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Percent = Annotated[float, Field(ge=0, le=100)]
Amount = Annotated[float, Field(ge=0, allow_inf_nan=False)]
ResourceMap = Annotated[
    dict[str, Amount],
    Field(
        description="Resource vector: lower_snake_case names (vcores, memory_mb, gpu, ...) "
        "to finite amounts >= 0; at least one amount must be positive."
    ),
]


class ExponentialDist(_Strict):
    """Exponentially distributed task durations with the given mean (seconds)."""

    dist: Literal["exponential"]
    mean: PositiveSeconds

    def draw(self, rng: random.Random) -> float:
        return rng.expovariate(1.0 / self.mean)


class LognormalDist(_Strict):
    """Log-normal durations: ln(duration) ~ Normal(mu, sigma); the median is e^mu seconds.

    The bounds keep every draw a finite float (e^20 s is already centuries)."""

    dist: Literal["lognormal"]
    mu: Annotated[float, Field(ge=-20, le=20)]
    sigma: Annotated[float, Field(ge=0, le=10)]

    def draw(self, rng: random.Random) -> float:
        return rng.lognormvariate(self.mu, self.sigma)


class UniformDist(_Strict):
    """Durations uniform on [low, high] seconds."""

    dist: Literal["uniform"]
    low: Seconds
    high: PositiveSeconds

    @model_validator(mode="after")
    def _ordered(self) -> UniformDist:
        if self.high < self.low:
            raise ValueError(f"high ({self.high:g}) must be >= low ({self.low:g})")
        return self

    def draw(self, rng: random.Random) -> float:
        return rng.uniform(self.low, self.high)


Distribution = ExponentialDist | LognormalDist | UniformDist


def _duration_tag(value: Any) -> str | None:
    # Choose the union member from the input's shape so that an error names one
    # alternative instead of listing why every alternative failed.
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        dist = value.get("dist")
        return dist if dist in DISTRIBUTIONS else None
    if isinstance(value, Distribution):
        return value.dist
    return None


_DURATION_HELP = (
    "must be a positive number, a list with one positive number per task, or a "
    "distribution {dist: exponential|lognormal|uniform, ...}"
)

Duration = Annotated[
    Annotated[PositiveSeconds, Tag("number")]
    | Annotated[list[PositiveSeconds], Tag("list")]
    | Annotated[ExponentialDist, Tag("exponential")]
    | Annotated[LognormalDist, Tag("lognormal")]
    | Annotated[UniformDist, Tag("uniform")],
    Discriminator(_duration_tag, custom_error_type="duration", custom_error_message=_DURATION_HELP),
    Field(
        description="Seconds per task: one number for all tasks, a list with one number "
        "per task, or a distribution drawn from the workload seed."
    ),
]
_DURATION_TAGS = frozenset({"number", "list", *DISTRIBUTIONS})


class NodeGroup(_Strict):
    """``count`` identical nodes."""

    count: Annotated[int, Field(ge=1)] = 1
    resources: ResourceMap
    rack: Name = DEFAULT_RACK
    name: Name = Field(
        default=DEFAULT_NODE_PREFIX,
        description="Node-id prefix: ids are {name}1, {name}2, ... counted per prefix.",
    )


class ClusterFile(_Strict):
    heartbeat_s: PositiveSeconds = 1.0
    nodes: Annotated[list[NodeGroup], Field(min_length=1)]


class QueueFile(_Strict):
    """A queue; ``capacity``/``max_capacity`` are percentages of the parent."""

    name: Name
    weight: Positive = 1.0
    capacity: Percent | None = None
    max_capacity: Percent = 100.0
    queues: list[QueueFile] = Field(default_factory=list, description="Child queues.")


class UserFile(_Strict):
    weight: Positive = 1.0
    budget: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None


class StageFile(_Strict):
    name: Name
    tasks: Annotated[int, Field(ge=1)]
    duration_s: Duration
    resources: ResourceMap
    after: list[Name] = Field(default_factory=list, description="Parent stages.")


class JobTemplate(_Strict):
    queue: Name | None = Field(default=None, description="A leaf queue; default 'default'.")
    stages: Annotated[list[StageFile], Field(min_length=1)]


class JobFile(JobTemplate):
    name: Name
    user: Name
    submit_s: Seconds = 0.0


class PoissonGenerator(_Strict):
    """``count`` jobs for ``user`` with exponential inter-arrival times of mean
    60 / rate_per_min seconds after ``start_s``, named ``{name or user}-{k}``."""

    kind: Literal["poisson"]
    user: Name
    rate_per_min: Positive = Field(description="Mean arrivals per minute.")
    count: Annotated[int, Field(ge=1)]
    start_s: Seconds = 0.0
    queue: Name | None = None
    name: Name | None = None
    job: JobTemplate


class WorkloadFile(_Strict):
    """A treadle workload: cluster, queues, users, jobs and job generators."""

    seed: int = Field(default=0, description="Seeds every random draw (durations, arrivals).")
    cluster: ClusterFile
    queues: Annotated[list[QueueFile], Field(min_length=1)] | None = Field(
        default=None, description="Top-level queues; default a single leaf 'default'."
    )
    users: dict[Name, UserFile] = Field(default_factory=dict)
    jobs: list[JobFile] = Field(default_factory=list)
    generators: list[PoissonGenerator] = Field(default_factory=list)


def workload_json_schema() -> dict[str, Any]:
    """The JSON schema of the YAML workload format."""
    schema = WorkloadFile.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


# ----------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------


def builtin_workloads() -> dict[str, str]:
    """Built-in workload names -> one-line description (the file's first comment)."""
    out: dict[str, str] = {}
    for entry in sorted(package_files.files("treadle.workloads").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            first = entry.read_text(encoding="utf-8").partition("\n")[0]
            out[entry.name.removesuffix(".yaml")] = first.removeprefix("#").strip()
    return out


def load_workload(arg: str, fmt: str | None = None, *, nodes_file: str | None = None) -> Workload:
    """Load a workload from a file path or a built-in name.

    ``fmt`` is ``yaml``, ``sls`` or ``rumen``; ``None`` infers it from the suffix (``.json``
    is sniffed). An existing file wins over a built-in of the same name.
    """
    if fmt is not None and fmt not in FORMATS:
        raise WorkloadError(arg, None, f"unknown format {fmt!r}; expected one of {_join(FORMATS)}")
    path = Path(arg)
    if not path.is_file():
        return _load_builtin(arg, fmt, nodes_file)
    fmt = fmt or _infer_format(path, arg)
    if fmt == "yaml":
        if nodes_file is not None:
            raise WorkloadError(arg, None, "a nodes file applies only to SLS and Rumen traces")
        return parse_workload(read_text(path, arg), arg)
    from treadle import importers  # imported here: importers build on this module

    return importers.load_trace(path, fmt, nodes_file=nodes_file, source=arg)


def _load_builtin(name: str, fmt: str | None, nodes_file: str | None) -> Workload:
    builtins = builtin_workloads()
    if name not in builtins:
        hint = f"no such file or built-in workload (built-ins: {_join(builtins)})"
        raise WorkloadError(name, None, hint)
    if fmt not in (None, "yaml") or nodes_file is not None:
        raise WorkloadError(name, None, "built-in workloads are YAML; no format or nodes file")
    text = package_files.files("treadle.workloads").joinpath(f"{name}.yaml").read_text("utf-8")
    return parse_workload(text, name)


def _infer_format(path: Path, source: str) -> str:
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return "yaml"
    if suffix == ".json":
        from treadle import importers

        return importers.sniff_format(path, source)
    raise WorkloadError(
        source, None, f"cannot tell the format from the name; pass a format ({_join(FORMATS)})"
    )


def read_text(path: Path, source: str) -> str:
    """A UTF-8 file's text; unreadable files raise WorkloadError naming ``source``."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise WorkloadError(source, None, f"not UTF-8 text ({e.reason} at byte {e.start})") from e
    except OSError as e:
        raise WorkloadError(source, None, f"cannot read: {e.strerror or e}") from e


def parse_workload(text: str, source: str) -> Workload:
    """Parse and validate YAML workload text; ``source`` names it in error messages."""
    data = _parse_yaml(text, source)
    if data is None:
        raise WorkloadError(source, None, "the workload file is empty")
    if not isinstance(data, dict):
        raise WorkloadError(source, None, "the top level must be a mapping (cluster:, jobs:, ...)")
    try:
        doc = WorkloadFile.model_validate(data)
    except ValidationError as e:
        raise _from_validation_error(e, source) from None
    return _Builder(source, doc).build(Path(source).stem or source)


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (PyYAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                continue  # unhashable: the base class reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def _parse_yaml(text: str, source: str) -> object:
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}" if mark else None
        parts = [p for p in (e.context, e.problem) if p]
        raise WorkloadError(source, where, "invalid YAML: " + ", ".join(parts)) from None
    except yaml.YAMLError as e:
        raise WorkloadError(source, None, f"invalid YAML: {e}") from None


# ----------------------------------------------------------------------------------
# Pydantic errors -> one line
# ----------------------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _from_validation_error(err: ValidationError, source: str) -> WorkloadError:
    errors = err.errors(include_url=False)
    # A misspelt key usually also makes a required one "missing": report the cause.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    message = _describe(first)
    if len(errors) > 1:
        more = len(errors) - 1
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return WorkloadError(source, _loc_to_path(first["loc"]) or None, message)


def _loc_to_path(loc: Sequence[int | str]) -> str:
    out = ""
    previous: int | str | None = None
    for part in loc:
        if previous == "duration_s" and part in _DURATION_TAGS:
            previous = part
            continue  # a union member tag, not part of the user's document
        previous = part
        if part == "[key]":
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out


def _describe(error: ErrorDetails) -> str:
    kind = error["type"]
    value = error.get("input")
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field" + _did_you_mean(error["loc"])
    if kind == "duration":
        return _describe_duration(value)
    if kind == "string_pattern_mismatch":
        return f"must be a non-empty name without spaces, got {value!r}"
    if kind == "value_error":
        return str(error.get("ctx", {}).get("error", error["msg"]))
    if "[key]" in error["loc"]:
        return f"keys must be names, got {error['loc'][-2]!r}"
    message = error["msg"][:1].lower() + error["msg"][1:]
    if isinstance(value, str | int | float | bool) or value is None:
        message += f", got {value!r}"
    return message


def _describe_duration(value: object) -> str:
    if isinstance(value, dict):
        if "dist" not in value:
            return f"a distribution needs a 'dist' key ({_join(DISTRIBUTIONS)})"
        return f"unknown distribution {value['dist']!r}; expected one of {_join(DISTRIBUTIONS)}"
    return f"{_DURATION_HELP}, got {value!r}"


def _did_you_mean(loc: Sequence[int | str]) -> str:
    allowed = sorted({f for m in _models_at(loc[:-1]) for f in m.model_fields})
    close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _models_at(loc: Sequence[int | str]) -> set[type[BaseModel]]:
    """The schema models an error location can point into (for spelling suggestions)."""
    models: set[type[BaseModel]] = {WorkloadFile}
    for part in loc:
        # List indices, dict keys and union tags are not fields: they keep the models.
        fields = [
            m.model_fields[part] for m in models if isinstance(part, str) and part in m.model_fields
        ]
        if fields:
            models = {m for f in fields for m in _models_in(f.annotation)}
    return models


def _models_in(annotation: object) -> set[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {annotation}
    return {m for arg in typing.get_args(annotation) for m in _models_in(arg)}


def _join(names: Sequence[str] | Mapping[str, object]) -> str:
    return ", ".join(names)


# ----------------------------------------------------------------------------------
# Building the model
# ----------------------------------------------------------------------------------


def describe_resources(r: Resources) -> str:
    """``memory_mb=16384, vcores=8``: a resource vector as people write it."""
    return ", ".join(f"{k}={v:g}" for k, v in r.to_dict().items()) or "nothing"


def parse_resources(values: Mapping[str, object], source: str, where: str) -> Resources:
    """Resources.parse with errors as WorkloadError; at least one amount must be positive."""
    try:
        parsed = Resources.parse(values, where=where)
    except ValueError as e:
        # Resources.parse prefixes its message with "<where>[.<name>]: ".
        place, _, message = str(e).partition(": ")
        raise WorkloadError(source, place, message) from None
    if parsed.is_zero():
        raise WorkloadError(source, where, "at least one resource amount must be positive")
    return parsed


@dataclass
class _Builder:
    """Turns a validated ``WorkloadFile`` into a ``Workload``, checking cross-references."""

    source: str
    doc: WorkloadFile
    rng: random.Random = field(init=False)
    cluster: ClusterSpec = field(init=False)
    queues: QueueSpec = field(init=False)
    job_names: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.doc.seed)

    def error(self, where: str | None, message: str) -> WorkloadError:
        return WorkloadError(self.source, where, message)

    def build(self, name: str) -> Workload:
        if not self.doc.jobs and not self.doc.generators:
            raise self.error(None, "no jobs: add a jobs: list or a generators: list")
        self.cluster = self._cluster(self.doc.cluster)
        self.queues = self._queues(self.doc.queues)
        jobs = [self._job(f"jobs[{i}]", j) for i, j in enumerate(self.doc.jobs)]
        for i, g in enumerate(self.doc.generators):
            jobs.extend(self._poisson(f"generators[{i}]", g))
        jobs.sort(key=lambda j: j.submit_s)  # stable: ties keep declaration order
        users = {
            u: UserSpec(u, weight=spec.weight, budget=spec.budget)
            for u, spec in self.doc.users.items()
        }
        try:
            return Workload(name, self.cluster, tuple(jobs), self.queues, users, self.doc.seed)
        except ValueError as e:  # the model re-checks; reaching this is a loader bug
            raise self.error(None, str(e)) from None

    # Cluster ------------------------------------------------------------------------
    def _cluster(self, c: ClusterFile) -> ClusterSpec:
        nodes: list[NodeSpec] = []
        counters: dict[str, int] = {}
        ids: set[str] = set()
        for i, group in enumerate(c.nodes):
            where = f"cluster.nodes[{i}]"
            res = parse_resources(group.resources, self.source, f"{where}.resources")
            for _ in range(group.count):
                counters[group.name] = counters.get(group.name, 0) + 1
                node_id = f"{group.name}{counters[group.name]}"
                if node_id in ids:
                    raise self.error(f"{where}.name", f"node id {node_id!r} is already taken")
                ids.add(node_id)
                nodes.append(NodeSpec(node_id, res, group.rack))
        return ClusterSpec(tuple(nodes), c.heartbeat_s)

    # Queues -------------------------------------------------------------------------
    def _queues(self, declared: list[QueueFile] | None) -> QueueSpec:
        if declared is None:
            return QueueSpec(ROOT_QUEUE, children=(QueueSpec(DEFAULT_QUEUE),))
        seen: set[str] = set()
        return QueueSpec(ROOT_QUEUE, children=self._queue_level(declared, "queues", seen))

    def _queue_level(
        self, declared: list[QueueFile], where: str, seen: set[str]
    ) -> tuple[QueueSpec, ...]:
        total = sum(q.capacity or 0.0 for q in declared)
        if total > 100 + 1e-9:
            raise self.error(where, f"sibling capacities sum to {total:g}%, more than 100%")
        return tuple(self._queue(q, f"{where}[{i}]", seen) for i, q in enumerate(declared))

    def _queue(self, q: QueueFile, where: str, seen: set[str]) -> QueueSpec:
        if q.name == ROOT_QUEUE:
            raise self.error(f"{where}.name", f"{ROOT_QUEUE!r} is the implicit top of the tree")
        if q.name in seen:
            raise self.error(f"{where}.name", f"duplicate queue name {q.name!r}")
        seen.add(q.name)
        if q.capacity is not None and q.capacity > q.max_capacity:
            raise self.error(
                f"{where}.capacity",
                f"capacity {q.capacity:g} exceeds max_capacity {q.max_capacity:g}",
            )
        children = self._queue_level(q.queues, f"{where}.queues", seen)
        return QueueSpec(q.name, q.weight, q.capacity, q.max_capacity, children)

    def _check_queue(self, queue: str | None, where: str) -> str:
        leaves = {q.name: q for q in self.queues.walk() if q.name != ROOT_QUEUE}
        leaf_names = _join([n for n, q in leaves.items() if q.is_leaf])
        name = queue or DEFAULT_QUEUE
        if name not in leaves:
            problem = f"unknown queue {name!r}" if queue else "no queue given and none is 'default'"
            raise self.error(where, f"{problem}; leaf queues: {leaf_names}")
        if not leaves[name].is_leaf:
            raise self.error(
                where, f"queue {name!r} has child queues; jobs go to leaf queues: {leaf_names}"
            )
        return name

    # Jobs ---------------------------------------------------------------------------
    def _claim_job_name(self, name: str, where: str) -> None:
        if name in self.job_names:
            raise self.error(where, f"duplicate job name {name!r}")
        self.job_names.add(name)

    def _job(self, where: str, j: JobFile) -> JobSpec:
        self._claim_job_name(j.name, f"{where}.name")
        queue = self._check_queue(j.queue, f"{where}.queue")
        stages = self._stages(where, j.stages)
        return JobSpec(j.name, j.user, j.submit_s, stages, queue)

    def _poisson(self, where: str, g: PoissonGenerator) -> list[JobSpec]:
        if g.queue is not None and g.job.queue is not None and g.queue != g.job.queue:
            raise self.error(
                f"{where}.job.queue", f"conflicts with the generator's queue {g.queue!r}"
            )
        queue_where = f"{where}.queue" if g.queue is not None else f"{where}.job.queue"
        queue = self._check_queue(g.queue or g.job.queue, queue_where)
        prefix = g.name or g.user
        mean_gap = 60.0 / g.rate_per_min
        t = g.start_s
        jobs = []
        for k in range(1, g.count + 1):
            t += self.rng.expovariate(1.0 / mean_gap)
            name = f"{prefix}-{k}"
            self._claim_job_name(name, f"{where}.name" if g.name else f"{where}.user")
            stages = self._stages(f"{where}.job", g.job.stages)
            jobs.append(JobSpec(name, g.user, round(t, 3), stages, queue))
        return jobs

    def _stages(self, where: str, declared: list[StageFile]) -> tuple[StageSpec, ...]:
        names = [s.name for s in declared]
        specs: list[StageSpec] = []
        for k, s in enumerate(declared):
            at = f"{where}.stages[{k}]"
            if s.name in names[:k]:
                raise self.error(f"{at}.name", f"duplicate stage name {s.name!r}")
            self._check_parents(s, names, f"{at}.after")
            res = self._task_resources(s.resources, f"{at}.resources")
            specs.append(
                StageSpec(s.name, res, self._durations(s, f"{at}.duration_s"), tuple(s.after))
            )
        try:
            return topological_stages(specs)
        except ValueError as e:
            raise self.error(f"{where}.stages", str(e)) from None

    def _check_parents(self, s: StageFile, names: list[str], where: str) -> None:
        for p in s.after:
            if p not in names:
                raise self.error(where, f"unknown stage {p!r}; stages: {_join(names)}")
            if s.after.count(p) > 1:
                raise self.error(where, f"stage {p!r} is listed twice")

    def _task_resources(self, values: Mapping[str, float], where: str) -> Resources:
        res = parse_resources(values, self.source, where)
        if not self.cluster.fits_some_node(res):
            raise self.error(
                where,
                f"a task needs {describe_resources(res)} and fits no node; the largest node "
                f"has {describe_resources(self.cluster.largest_node())}",
            )
        return res

    def _durations(self, s: StageFile, where: str) -> tuple[float, ...]:
        spec = s.duration_s
        if isinstance(spec, list):
            if len(spec) != s.tasks:
                raise self.error(where, f"has {len(spec)} values but the stage has {s.tasks} tasks")
            return tuple(float(d) for d in spec)
        if isinstance(spec, int | float):
            return (float(spec),) * s.tasks
        return tuple(_clamp(spec.draw(self.rng)) for _ in range(s.tasks))


def _clamp(seconds: float) -> float:
    # Millisecond resolution is all the emulator can honour; rounding also keeps
    # printed workloads readable.
    return max(MIN_DURATION_S, round(seconds, 3))

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

Generators (``generators:``, each with a ``kind``):

- ``poisson``: ``count`` copies of one job template for one user, Poisson arrivals.
- ``tpch``: real Spark TPC-H query DAGs from a summary file (``treadle.importers.tpch``),
  read in place; ``path`` is relative to the workload file's directory.
- ``dag``: synthetic query DAGs shaped like Carbyne's TPC-DS, TPC-H or BigBench jobs
  (``treadle.importers.synthetic`` documents the figures matched).

The two DAG kinds share their other fields::

    generators:
      - kind: tpch
        path: ../traces/tpch-dags/tpch_dag_summary.json
        count: 50
        scales: [2g, 10g, 50g, 100g]    # default: every scale in the file
        queries: [1, 3, 5]              # default: every query in the file
        users: [alice, bob]             # round robin in arrival order; or user: alice
        interarrival_s: {dist: exponential, mean: 20}   # Poisson arrivals
        duration_scale: 10              # trace durations are tens of ms to seconds
        resources: {vcores: [1, 2, 4], memory_mb: {dist: uniform, low: 1024, high: 8192}}
      - kind: dag
        shape: tpcds                    # tpcds | tpch | bigbench
        count: 20
        user: carol
        tasks_per_stage: {dist: lognormal, mu: 2, sigma: 0.8}
        task_duration_s: [10, 20, 40]

A *drawn* parameter (``interarrival_s``, ``tasks_per_stage``, ``task_duration_s``, each
resource amount) is a number, a list of choices (one picked uniformly per draw) or a
distribution as in ``duration_s``. Jobs arrive at ``start_s`` and then one
``interarrival_s`` apart (default 0: all at once). Each job draws, in order: its gap (from
the second job on), its DAG (a (scale, query) pair uniformly from those present at the
chosen scales, or a synthetic structure), then per stage its resource demand (and for
``dag`` its task count and mean task duration), then per task its duration. A stage's
demand is drawn once for all its tasks: by default ``vcores`` from [1, 2, 4] and
``memory_mb`` from [1024, 2048, 4096, 8192] independently, so stages are CPU-heavy
(4 vcores, 1 GB) or memory-heavy (1 vcore, 8 GB) or between, as Tetris and Carbyne
observe; ``resources`` may also be a list of ``{weight, resources}`` shapes, one picked
per stage with probability proportional to its weight. Amounts drawn from a distribution
are rounded to whole units (YARN counts vcores and MB; numbers and choices are kept as
written), task counts to whole tasks >= 1. ``duration_spread`` (default 0) is the sigma
of a mean-preserving log-normal factor on each task's duration around its stage's mean.
``tpch`` takes the trace's mean task durations times ``duration_scale`` (default 1),
floored at ``min_task_s`` (default 1 ms); ``dag`` draws each stage's task count and mean
task duration (defaults: log-normal with medians 20 tasks and 20 s) and then rescales
the means so that input stages hold the shape's share of the work. Job names are
``{name}-{scale}-q{n}-{k}`` (``tpch-100g-q3-7``) and ``{name}-{k}`` (``tpcds-4``), ``name``
defaulting to the kind or shape, ``k`` counting the generator's jobs from 1 in arrival
order.
"""

from __future__ import annotations

import difflib
import random
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources as package_files
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

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

from treadle import importers
from treadle.errors import WorkloadError
from treadle.importers import synthetic
from treadle.importers.common import TraceFile, describe_resources, read_text as read_text
from treadle.importers.tpch import TpchTrace, read_tpch
from treadle.model import (
    DEFAULT_NODE_PREFIX,
    DEFAULT_QUEUE,
    DEFAULT_RACK,
    MIN_DURATION_S,
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

YAML = "yaml"
"""The native format: a workload file."""
YAML_SUFFIXES = (".yaml", ".yml")
DISTRIBUTIONS = ("exponential", "lognormal", "uniform")
GENERATOR_KINDS = ("poisson", "tpch", "dag")
DAG_SHAPES = ("tpcds", "tpch", "bigbench")  # treadle.importers.synthetic.SHAPES
DEFAULT_DEMAND: dict[str, list[float]] = {
    "vcores": [1, 2, 4],
    "memory_mb": [1024, 2048, 4096, 8192],
}
"""Per-stage task demand of the DAG generators when ``resources`` is not given."""

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
    """Exponential draws with the given mean (seconds, for durations)."""

    dist: Literal["exponential"]
    mean: PositiveSeconds

    def draw(self, rng: random.Random) -> float:
        return rng.expovariate(1.0 / self.mean)


class LognormalDist(_Strict):
    """Log-normal draws: ln(x) ~ Normal(mu, sigma); the median is e^mu (seconds, for durations).

    The bounds keep every draw a finite float (e^20 s is already centuries)."""

    dist: Literal["lognormal"]
    mu: Annotated[float, Field(ge=-20, le=20)]
    sigma: Annotated[float, Field(ge=0, le=10)]

    def draw(self, rng: random.Random) -> float:
        return rng.lognormvariate(self.mu, self.sigma)


class UniformDist(_Strict):
    """Draws uniform on [low, high] (seconds, for durations)."""

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


def _drawn_tag(value: Any) -> str | None:
    # Tags start with "~" so that error paths can drop them (see _loc_to_path).
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return "~number"
    if isinstance(value, list):
        return "~choices"
    if isinstance(value, dict):
        dist = value.get("dist")
        return f"~{dist}" if dist in DISTRIBUTIONS else None
    if isinstance(value, Distribution):
        return f"~{value.dist}"
    return None


_DRAWN_HELP = (
    "must be a number, a list of choices (one is picked per draw), or a distribution "
    "{dist: exponential|lognormal|uniform, ...}"
)

_T = TypeVar("_T")
Drawn = Annotated[
    Annotated[_T, Tag("~number")]
    | Annotated[list[_T], Field(min_length=1), Tag("~choices")]
    | Annotated[ExponentialDist, Tag("~exponential")]
    | Annotated[LognormalDist, Tag("~lognormal")]
    | Annotated[UniformDist, Tag("~uniform")],
    Discriminator(_drawn_tag, custom_error_type="drawn", custom_error_message=_DRAWN_HELP),
]
"""A value drawn from the workload seed: fixed, one of a list, or from a distribution."""

DemandMap = Annotated[
    dict[str, Drawn[Amount]],
    Field(
        min_length=1,
        description="Resource name -> amount per task, drawn once per stage; amounts drawn "
        "from a distribution are rounded to whole units.",
    ),
]


class DemandShape(_Strict):
    """One task shape of a mix: picked with probability weight / sum of weights."""

    weight: Positive = 1.0
    resources: DemandMap


def _demand_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        return "~map"
    if isinstance(value, list):
        return "~shapes"
    return None


_DEMAND_HELP = (
    "must be a mapping of resource names to amounts, or a list of shapes "
    "{weight, resources} to pick from"
)

Demand = Annotated[
    Annotated[DemandMap, Tag("~map")]
    | Annotated[list[DemandShape], Field(min_length=1), Tag("~shapes")],
    Discriminator(_demand_tag, custom_error_type="demand", custom_error_message=_DEMAND_HELP),
    Field(
        description="Per-task demand, drawn once per stage: {vcores: ..., memory_mb: ...} "
        "(each amount drawn), or a list of {weight, resources} shapes (one picked per stage)."
    ),
]


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


class _DagStream(_Strict):
    """What the DAG generators share: how many jobs, whose, when, and their demands."""

    count: Annotated[int, Field(ge=1)]
    name: Name | None = Field(default=None, description="Job-name prefix.")
    user: Name | None = Field(default=None, description="Every job's user (or give users).")
    users: Annotated[list[Name], Field(min_length=1)] | None = Field(
        default=None, description="Users assigned round robin in arrival order."
    )
    queue: Name | None = None
    start_s: Seconds = Field(default=0.0, description="The first job's arrival.")
    interarrival_s: Drawn[Seconds] = Field(
        default=0.0,
        description="Gap between consecutive arrivals, e.g. {dist: exponential, mean: 20} "
        "for Poisson arrivals; 0 submits every job at start_s.",
    )
    duration_spread: Annotated[float, Field(ge=0, le=5)] = Field(
        default=0.0,
        description="Sigma of a mean-preserving log-normal factor on each task's duration "
        "around its stage's mean; 0: every task takes the mean.",
    )
    resources: Demand = Field(default=DEFAULT_DEMAND, validate_default=True)


class TpchGenerator(_DagStream):
    """``count`` TPC-H query DAGs from a Spark trace summary, drawn by seed."""

    kind: Literal["tpch"]
    path: Annotated[str, StringConstraints(min_length=1)] = Field(
        description="The TPC-H DAG summary JSON, relative to this file's directory."
    )
    scales: Annotated[list[Name], Field(min_length=1)] | None = Field(
        default=None, description="Scales to draw from (e.g. [2g, 100g]); default all."
    )
    queries: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1)] | None = Field(
        default=None, description="Query numbers to draw from; default all."
    )
    duration_scale: Positive = Field(
        default=1.0, description="Multiplies the trace's task durations."
    )
    min_task_s: Seconds = Field(
        default=MIN_DURATION_S, description="Floor on every task's duration (seconds)."
    )


class DagGenerator(_DagStream):
    """``count`` synthetic query DAGs shaped like Carbyne's TPC-DS, TPC-H or BigBench jobs."""

    kind: Literal["dag"]
    shape: Literal["tpcds", "tpch", "bigbench"]
    tasks_per_stage: Drawn[Annotated[int, Field(ge=1)]] = Field(
        default={"dist": "lognormal", "mu": 3.0, "sigma": 1.0},
        validate_default=True,
        description="Tasks in each stage (median 20 by default).",
    )
    task_duration_s: Drawn[PositiveSeconds] = Field(
        default={"dist": "lognormal", "mu": 3.0, "sigma": 0.8},
        validate_default=True,
        description="Mean task duration of each stage, before the shape's input-work share "
        "rescales it (median 20 s by default).",
    )


Generator = Annotated[PoissonGenerator | TpchGenerator | DagGenerator, Discriminator("kind")]


class WorkloadFile(_Strict):
    """A treadle workload: cluster, queues, users, jobs and job generators."""

    seed: int = Field(default=0, description="Seeds every random draw (durations, arrivals).")
    cluster: ClusterFile
    queues: Annotated[list[QueueFile], Field(min_length=1)] | None = Field(
        default=None, description="Top-level queues; default a single leaf 'default'."
    )
    users: dict[Name, UserFile] = Field(default_factory=dict)
    jobs: list[JobFile] = Field(default_factory=list)
    generators: list[Generator] = Field(default_factory=list)


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


def format_names() -> tuple[str, ...]:
    """Every name ``load_workload`` takes as a format: yaml, then the trace formats."""
    return (YAML, *importers.FORMATS)


def load_workload(arg: str, fmt: str | None = None, *, nodes_file: str | None = None) -> Workload:
    """Load a workload from a file path or a built-in name.

    ``fmt`` is one of ``format_names()`` (``yaml``, ``sls``, ``rumen``, ...); ``None``
    infers it from the suffix (a trace format's suffix is sniffed). An existing file
    wins over a built-in of the same name.
    """
    if fmt is not None and fmt not in format_names():
        expected = _join(format_names())
        raise WorkloadError(arg, None, f"unknown format {fmt!r}; expected one of {expected}")
    path = Path(arg)
    if not path.is_file():
        return _load_builtin(arg, fmt, nodes_file)
    trace = TraceFile(path, arg)
    fmt = fmt or _infer_format(trace)
    if fmt == YAML:
        if nodes_file is not None:
            raise WorkloadError(arg, None, "a nodes file applies only to SLS and Rumen traces")
        return parse_workload(trace.text, arg, base_dir=path.parent)
    return importers.FORMATS[fmt].load(trace, nodes_file)


def _load_builtin(name: str, fmt: str | None, nodes_file: str | None) -> Workload:
    builtins = builtin_workloads()
    if name not in builtins:
        hint = f"no such file or built-in workload (built-ins: {_join(builtins)})"
        raise WorkloadError(name, None, hint)
    if fmt not in (None, YAML) or nodes_file is not None:
        raise WorkloadError(name, None, "built-in workloads are YAML; no format or nodes file")
    text = package_files.files("treadle.workloads").joinpath(f"{name}.yaml").read_text("utf-8")
    return parse_workload(text, name)


def _infer_format(trace: TraceFile) -> str:
    if trace.path.suffix.lower() in YAML_SUFFIXES:
        return YAML
    if importers.claims(trace.path):
        return importers.recognise(trace)
    raise WorkloadError(
        trace.source,
        None,
        f"cannot tell the format from the name; pass a format ({_join(format_names())})",
    )


def parse_workload(text: str, source: str, *, base_dir: Path | None = None) -> Workload:
    """Parse and validate YAML workload text; ``source`` names it in error messages.

    Relative paths inside (a ``tpch`` generator's trace) are resolved against
    ``base_dir``, by default the directory of ``source``."""
    data = _parse_yaml(text, source)
    if data is None:
        raise WorkloadError(source, None, "the workload file is empty")
    if not isinstance(data, dict):
        raise WorkloadError(source, None, "the top level must be a mapping (cluster:, jobs:, ...)")
    try:
        doc = WorkloadFile.model_validate(data)
    except ValidationError as e:
        raise _from_validation_error(e, source) from None
    base = Path(source).parent if base_dir is None else base_dir
    return _Builder(source, doc, base).build(Path(source).stem or source)


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
    loc = tuple(first["loc"])
    if first["type"] in ("union_tag_invalid", "union_tag_not_found") and isinstance(
        first.get("input"), dict
    ):
        loc += (str(first.get("ctx", {}).get("discriminator", "kind")).strip("'"),)
    if len(errors) > 1:
        more = len(errors) - 1
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return WorkloadError(source, _loc_to_path(loc) or None, message)


def _loc_to_path(loc: Sequence[int | str]) -> str:
    out = ""
    previous: int | str | None = None
    before: int | str | None = None
    for part in loc:
        # Union member tags are not part of the user's document: a duration's, a
        # generator's kind, and the "~"-prefixed tags of the generators' parameters.
        tag = (
            (previous == "duration_s" and part in _DURATION_TAGS)
            or (before == "generators" and isinstance(previous, int) and part in GENERATOR_KINDS)
            or (isinstance(part, str) and part.startswith("~"))
        )
        before, previous = previous, part
        if tag or part == "[key]":
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
    if kind == "drawn":
        return _describe_drawn(value)
    if kind == "demand":
        return f"{_DEMAND_HELP}, got {_brief(value)}"
    kinds = ", ".join(map(repr, GENERATOR_KINDS))
    if kind == "union_tag_invalid":
        return f"unknown kind {value.get('kind')!r}; expected one of {kinds}"
    if kind == "union_tag_not_found":
        return f"required field is missing (one of {kinds})"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a mapping, got {_brief(value)}"
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


def _describe_drawn(value: object) -> str:
    if isinstance(value, dict):
        if "dist" not in value:
            return f"a distribution needs a 'dist' key ({_join(DISTRIBUTIONS)})"
        return f"unknown distribution {value['dist']!r}; expected one of {_join(DISTRIBUTIONS)}"
    return f"{_DRAWN_HELP}, got {_brief(value)}"


def _brief(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


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
        elif part in GENERATOR_KINDS:  # a generator's kind tag narrows to its model
            models = {m for m in models if _kind_of(m) == part} or models
    return models


def _kind_of(model: type[BaseModel]) -> object:
    kind = model.model_fields.get("kind")
    args = typing.get_args(kind.annotation) if kind else ()
    return args[0] if args else None


def _models_in(annotation: object) -> set[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {annotation}
    return {m for arg in typing.get_args(annotation) for m in _models_in(arg)}


def _join(names: Sequence[str] | Mapping[str, object]) -> str:
    return ", ".join(names)


# ----------------------------------------------------------------------------------
# Building the model
# ----------------------------------------------------------------------------------


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
    base_dir: Path = Path()
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
            where = f"generators[{i}]"
            if isinstance(g, PoissonGenerator):
                jobs.extend(self._poisson(where, g))
            elif isinstance(g, TpchGenerator):
                jobs.extend(self._tpch(where, g))
            else:
                jobs.extend(self._synthetic(where, g))
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

    # DAG generators -------------------------------------------------------------------
    def _tpch(self, where: str, g: TpchGenerator) -> list[JobSpec]:
        trace = self._tpch_trace(where, g)
        pairs = self._tpch_pairs(where, g, trace)
        stream = _Stream(self, where, g, g.name or "tpch")
        jobs = []
        for k in range(1, g.count + 1):
            submit = stream.next_arrival(k)
            query = trace.queries[self.rng.choice(pairs)]
            name = f"{stream.prefix}-{query.scale}-q{query.query}-{k}"
            demands = [stream.demand(name, f"s{s.stage}") for s in query.stages]
            stages = tuple(
                StageSpec(
                    f"s{s.stage}",
                    res,
                    tuple(
                        _clamp(max(g.min_task_s, stream.spread(s.mean_task_s * g.duration_scale)))
                        for _ in range(s.tasks)
                    ),
                    tuple(f"s{p}" for p in s.parents),
                )
                for s, res in zip(query.stages, demands, strict=True)
            )
            jobs.append(stream.job(name, k, submit, stages))
        return jobs

    def _tpch_trace(self, where: str, g: TpchGenerator) -> TpchTrace:
        path = Path(g.path).expanduser()
        if not path.is_absolute():
            path = self.base_dir / path
        if not path.is_file():
            what = "is a directory" if path.is_dir() else "no such file"
            raise self.error(f"{where}.path", f"cannot read the trace {str(path)!r}: {what}")
        stat = path.stat()
        return _read_tpch(str(path), stat.st_mtime_ns, stat.st_size)

    def _tpch_pairs(self, where: str, g: TpchGenerator, trace: TpchTrace) -> list[tuple[str, int]]:
        scales = g.scales or list(trace.scales)
        for i, scale in enumerate(scales):
            if scale not in trace.scales:
                raise self.error(
                    f"{where}.scales[{i}]",
                    f"unknown scale {scale!r}; the trace has {_join(trace.scales)}",
                )
            if scale in scales[:i]:
                raise self.error(f"{where}.scales[{i}]", f"scale {scale!r} is listed twice")
        queries = g.queries or list(trace.query_numbers)
        for i, q in enumerate(queries):
            if not any((s, q) in trace.queries for s in scales):
                raise self.error(
                    f"{where}.queries[{i}]",
                    f"no query {q} at the chosen scales; the trace has queries "
                    f"{_number_ranges(trace.query_numbers)}",
                )
            if q in queries[:i]:
                raise self.error(f"{where}.queries[{i}]", f"query {q} is listed twice")
        # Scale-major, in the order given: the draw depends on the file, not on dict order.
        return [(s, q) for s in scales for q in queries if (s, q) in trace.queries]

    def _synthetic(self, where: str, g: DagGenerator) -> list[JobSpec]:
        shape = synthetic.SHAPES[g.shape]
        stream = _Stream(self, where, g, g.name or g.shape)
        jobs = []
        for k in range(1, g.count + 1):
            submit = stream.next_arrival(k)
            name = f"{stream.prefix}-{k}"
            dag = synthetic.draw_dag(shape, self.rng)
            drawn = []
            for i in range(dag.stages):
                res = stream.demand(name, f"s{i}")
                tasks = max(1, round(_draw(g.tasks_per_stage, self.rng)))
                drawn.append((res, tasks, _draw(g.task_duration_s, self.rng)))
            work = [tasks * mean for _, tasks, mean in drawn]
            factors = synthetic.input_work_factors(dag.parents, work, dag.input_work)
            stages = tuple(
                StageSpec(
                    f"s{i}",
                    res,
                    tuple(_clamp(stream.spread(mean * factor)) for _ in range(tasks)),
                    tuple(f"s{p}" for p in dag.parents[i]),
                )
                for i, ((res, tasks, mean), factor) in enumerate(zip(drawn, factors, strict=True))
            )
            jobs.append(stream.job(name, k, submit, stages))
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


@dataclass
class _Stream:
    """One DAG generator's jobs: arrivals, users, queue, names, demands, task spreads."""

    builder: _Builder
    where: str
    g: TpchGenerator | DagGenerator
    prefix: str
    users: list[str] = field(init=False)
    queue: str = field(init=False)
    t: float = field(init=False)

    def __post_init__(self) -> None:
        b, g = self.builder, self.g
        if g.user is not None and g.users is not None:
            raise b.error(f"{self.where}.users", "give user (one user) or users, not both")
        if g.user is None and g.users is None:
            raise b.error(
                f"{self.where}.users",
                "required field is missing: give user (one user) or users (a list, "
                "assigned round robin)",
            )
        self.users = [g.user] if g.user is not None else list(g.users or ())
        self.queue = b._check_queue(g.queue, f"{self.where}.queue")
        self.t = g.start_s
        if isinstance(g.resources, list):
            for i, shape in enumerate(g.resources):
                self._check_names(shape.resources, f"{self.where}.resources[{i}].resources")
        else:
            self._check_names(g.resources, f"{self.where}.resources")

    def _check_names(self, demand: Mapping[str, object], where: str) -> None:
        # Checked before any draw, so a misspelt name is reported whatever the seed.
        parse_resources(dict.fromkeys(demand, 1.0), self.builder.source, where)

    def next_arrival(self, k: int) -> float:
        """Job k's submit time (k from 1): start_s, then one drawn gap after another."""
        if k > 1:
            self.t += _draw(self.g.interarrival_s, self.builder.rng)
        return round(self.t, 3)

    def demand(self, job: str, stage: str) -> Resources:
        rng, spec = self.builder.rng, self.g.resources
        where = f"{self.where}.resources"
        if isinstance(spec, list):
            pick = rng.choices(range(len(spec)), weights=[s.weight for s in spec])[0]
            where, spec = f"{where}[{pick}].resources", spec[pick].resources
        amounts = {}
        for name, amount in spec.items():
            value = _draw(amount, rng)
            # Whole units: YARN counts vcores and MB; a fixed amount is kept as written.
            amounts[name] = float(round(value)) if _is_distribution(amount) else value
        res = parse_resources(amounts, self.builder.source, where)
        cluster = self.builder.cluster
        if not cluster.fits_some_node(res):
            hint = (
                ""
                if "resources" in self.g.model_fields_set
                else " (default demands: set resources)"
            )
            raise self.builder.error(
                where,
                f"drew {describe_resources(res)} for stage {stage} of job {job}, which fits no "
                f"node; the largest node has {describe_resources(cluster.largest_node())}{hint}",
            )
        return res

    def spread(self, mean: float) -> float:
        """One task's duration around its stage's mean."""
        sigma = self.g.duration_spread
        if not sigma:
            return mean
        factor = LognormalDist(dist="lognormal", mu=-(sigma**2) / 2, sigma=sigma)
        return mean * factor.draw(self.builder.rng)

    def job(self, name: str, k: int, submit: float, stages: tuple[StageSpec, ...]) -> JobSpec:
        if name in self.builder.job_names:
            raise self.builder.error(
                f"{self.where}.name",
                f"duplicate job name {name!r}; give this generator a name of its own",
            )
        self.builder._claim_job_name(name, f"{self.where}.name")
        user = self.users[(k - 1) % len(self.users)]
        return JobSpec(name, user, submit, stages, self.queue)


def _draw(spec: float | list[Any] | Distribution, rng: random.Random) -> float:
    if isinstance(spec, list):
        return float(rng.choice(spec))
    if isinstance(spec, int | float):
        return float(spec)
    return spec.draw(rng)


def _is_distribution(spec: object) -> bool:
    return isinstance(spec, Distribution)


@lru_cache(maxsize=8)
def _read_tpch(path: str, mtime_ns: int, size: int) -> TpchTrace:
    # Keyed on the file's version too: a trace edited between loads is read again.
    return read_tpch(path)


def _number_ranges(numbers: Sequence[int]) -> str:
    """``1-5, 7, 9-10``: a sorted list of whole numbers, compactly."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _clamp(seconds: float) -> float:
    # Millisecond resolution is all the emulator can honour; rounding also keeps
    # printed workloads readable.
    return max(MIN_DURATION_S, round(seconds, 3))

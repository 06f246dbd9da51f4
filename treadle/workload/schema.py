"""The workload file format: pydantic models of the YAML, and its JSON schema.

These models check structure and types only: every model forbids unknown fields (a typo
such as ``durations:`` is an error, not a silently ignored key) and is strict (YAML
gives real numbers; ``"5"`` or ``true`` where a number belongs is refused): they are
``treadle.yamlfile.Strict``, as are the queue and user entries (``QueueFile``,
``UserFile``) that the RM's configuration file shares and that stand there. What spans
several places is checked by ``treadle.workload.build``; the generators' fields are
documented in ``treadle.workload.generators``.
"""

from __future__ import annotations

import random
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    model_validator,
)

from treadle.model import DEFAULT_NODE_PREFIX, DEFAULT_RACK, MIN_DURATION_S
from treadle.yamlfile import Credits, Name, Positive, QueueFile, Strict, UserFile

DISTRIBUTIONS = ("exponential", "lognormal", "uniform")
GENERATOR_KINDS = ("poisson", "closed_loop", "tpch", "dag")
DAG_SHAPES = ("tpcds", "tpch", "bigbench")  # treadle.importers.synthetic.SHAPES
DEFAULT_DEMAND: dict[str, list[float]] = {
    "vcores": [1, 2, 4],
    "memory_mb": [1024, 2048, 4096, 8192],
}
"""Per-stage task demand of the DAG generators when ``resources`` is not given."""


MAX_SECONDS = 1e15
"""The largest time or duration a workload may give (about 31 million years): far beyond
any trace, small enough that sums of many stay exact to the millisecond is not promised,
but they stay finite, so no run meets an infinity."""
MIN_HEARTBEAT_S = 1e-3
"""The shortest heartbeat: the emulator's resolution is a millisecond."""
MAX_NODES = 100_000
"""Nodes in one workload (ten times the largest cluster the simulator is designed for)."""
MAX_JOBS = 1_000_000
"""Jobs in one workload, declared plus generated."""
MAX_TASKS_PER_STAGE = 1_000_000
MAX_TASKS = 20_000_000
"""Tasks in one workload: every task holds its duration, so this bounds what is allocated."""

Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]
PositiveSeconds = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
Amount = Annotated[float, Field(ge=0, allow_inf_nan=False)]
ResourceMap = Annotated[
    dict[str, Amount],
    Field(
        description="Resource vector: lower_snake_case names (vcores, memory_mb, gpu, ...) "
        "to finite amounts >= 0; at least one amount must be positive."
    ),
]


class ExponentialDist(Strict):
    """Exponential draws with the given mean (seconds, for durations)."""

    dist: Literal["exponential"]
    mean: PositiveSeconds

    def draw(self, rng: random.Random) -> float:
        return rng.expovariate(1.0 / self.mean)


class LognormalDist(Strict):
    """Log-normal draws: ln(x) ~ Normal(mu, sigma); the median is e^mu (seconds, for durations).

    The bounds keep every draw a finite float (e^20 s is already centuries)."""

    dist: Literal["lognormal"]
    mu: Annotated[float, Field(ge=-20, le=20)]
    sigma: Annotated[float, Field(ge=0, le=10)]

    def draw(self, rng: random.Random) -> float:
        return rng.lognormvariate(self.mu, self.sigma)


class UniformDist(Strict):
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


DURATION_HELP = (
    "must be a positive number, a list with one positive number per task, or a "
    "distribution {dist: exponential|lognormal|uniform, ...}"
)

Duration = Annotated[
    Annotated[PositiveSeconds, Tag("number")]
    | Annotated[list[PositiveSeconds], Tag("list")]
    | Annotated[ExponentialDist, Tag("exponential")]
    | Annotated[LognormalDist, Tag("lognormal")]
    | Annotated[UniformDist, Tag("uniform")],
    Discriminator(_duration_tag, custom_error_type="duration", custom_error_message=DURATION_HELP),
    Field(
        description="Seconds per task: one number for all tasks, a list with one number "
        "per task, or a distribution drawn from the workload seed."
    ),
]
DURATION_TAGS = frozenset({"number", "list", *DISTRIBUTIONS})


def _drawn_tag(value: Any) -> str | None:
    # Tags start with "~" so that error paths can drop them (see treadle.workload.errors).
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


DRAWN_HELP = (
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
    Discriminator(_drawn_tag, custom_error_type="drawn", custom_error_message=DRAWN_HELP),
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


class DemandShape(Strict):
    """One task shape of a mix: picked with probability weight / sum of weights."""

    weight: Positive = 1.0
    resources: DemandMap


def _demand_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        return "~map"
    if isinstance(value, list):
        return "~shapes"
    return None


DEMAND_HELP = (
    "must be a mapping of resource names to amounts, or a list of shapes "
    "{weight, resources} to pick from"
)

Demand = Annotated[
    Annotated[DemandMap, Tag("~map")]
    | Annotated[list[DemandShape], Field(min_length=1), Tag("~shapes")],
    Discriminator(_demand_tag, custom_error_type="demand", custom_error_message=DEMAND_HELP),
    Field(
        description="Per-task demand, drawn once per stage: {vcores: ..., memory_mb: ...} "
        "(each amount drawn), or a list of {weight, resources} shapes (one picked per stage)."
    ),
]


class NodeGroup(Strict):
    """``count`` identical nodes."""

    count: Annotated[int, Field(ge=1, le=MAX_NODES)] = 1
    resources: ResourceMap
    rack: Name = DEFAULT_RACK
    name: Name = Field(
        default=DEFAULT_NODE_PREFIX,
        description="Node-id prefix: ids are {name}1, {name}2, ... counted per prefix.",
    )


class ClusterFile(Strict):
    heartbeat_s: Annotated[float, Field(ge=MIN_HEARTBEAT_S, le=3600, allow_inf_nan=False)] = 1.0
    scheduling: Literal["heartbeat", "event"] = Field(
        default="heartbeat",
        description="heartbeat: the RM places at node heartbeats, AMs call every interval "
        "(YARN's default). event: also at the instant something changes (live too): "
        "the RM places as soon as asks or room appear (CapacityScheduler's asynchronous "
        "scheduling) and an AM is called back at once on a grant or a container's end "
        "(AMRMClientAsync's callbacks; Spark's driver).",
    )
    nodes: Annotated[list[NodeGroup], Field(min_length=1)]


class StageFile(Strict):
    name: Name
    tasks: Annotated[int, Field(ge=1, le=MAX_TASKS_PER_STAGE)]
    duration_s: Duration
    resources: ResourceMap
    after: list[Name] = Field(default_factory=list, description="Parent stages.")


class JobTemplate(Strict):
    queue: Name | None = Field(default=None, description="A leaf queue; default 'default'.")
    stages: Annotated[list[StageFile], Field(min_length=1)]
    spending_rate: Credits | None = Field(
        default=None,
        description="While the job is in the system (submission to end), its queue's "
        "spending rate is this (the highest such rate of the queue's jobs wins); the queue "
        "must declare budget and spending_rate.",
    )


class JobFile(JobTemplate):
    name: Name
    user: Name
    submit_s: Seconds = 0.0


class PoissonGenerator(Strict):
    """``count`` jobs for ``user`` with exponential inter-arrival times of mean
    60 / rate_per_min seconds after ``start_s``, named ``{name or user}-{k}``."""

    kind: Literal["poisson"]
    user: Name
    rate_per_min: Positive = Field(description="Mean arrivals per minute.")
    count: Annotated[int, Field(ge=1, le=MAX_JOBS)]
    start_s: Seconds = 0.0
    queue: Name | None = None
    name: Name | None = None
    job: JobTemplate


class ClosedLoopGenerator(Strict):
    """A closed-loop user: ``count`` copies of one job template for ``user``, the first at
    ``start_s``, each next one ``think_s`` after the previous one ends (finished or
    failed), named ``{name or user}-{k}``."""

    kind: Literal["closed_loop"]
    user: Name
    count: Annotated[int, Field(ge=1, le=MAX_JOBS)]
    start_s: Seconds = 0.0
    think_s: Drawn[Seconds] = Field(
        default=0.0,
        description="Wait between a job's end and the next one's submission: a number, "
        "choices or a distribution, drawn per job.",
    )
    queue: Name | None = None
    name: Name | None = None
    job: JobTemplate
    spending_rates: dict[Annotated[int, Field(ge=1)], Credits] = Field(
        default_factory=dict,
        description="Job number (1 = the first of the loop) -> that job's spending rate, "
        "over the template's: {3: 4} boosts the third job (Dynamic Priority's boost).",
    )


class _DagStream(Strict):
    """What the DAG generators share: how many jobs, whose, when, and their demands."""

    count: Annotated[int, Field(ge=1, le=MAX_JOBS)]
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


Generator = Annotated[
    PoissonGenerator | ClosedLoopGenerator | TpchGenerator | DagGenerator, Discriminator("kind")
]


class PartitionFile(Strict):
    """Runtime partitioning (``treadle.workload.partition``), applied after the jobs are built."""

    atr_s: Positive = Field(default=0.5, description="Advisory task runtime (s).")
    rule: Literal["atr", "loopcustom"] = Field(
        default="atr", description="atr: ceil(W / atr_s) tasks; loopcustom: the UWFQ authors' fit."
    )
    min_tasks: Annotated[int, Field(ge=1)] | None = Field(
        default=None, description="N_min; default the cluster's vcores over a task's vcores."
    )


class AdminFile(Strict):
    """An admin's change to a leaf queue's account at ``at_s`` (seconds from the run's
    start): one or more of set_budget, add_budget, set_spending_rate, applied in that
    order."""

    at_s: Seconds
    queue: Name
    set_budget: Credits | None = Field(default=None, description="The budget becomes this.")
    add_budget: Credits | None = Field(default=None, description="Credits added to the budget.")
    set_spending_rate: Credits | None = Field(
        default=None, description="The queue's (base) spending rate becomes this."
    )

    @model_validator(mode="after")
    def _something(self) -> AdminFile:
        if self.set_budget is None and self.add_budget is None and self.set_spending_rate is None:
            raise ValueError("give one of set_budget, add_budget, set_spending_rate")
        return self


class WorkloadFile(Strict):
    """A treadle workload: cluster, queues, users, jobs and job generators."""

    seed: int = Field(default=0, description="Seeds every random draw (durations, arrivals).")
    cluster: ClusterFile
    queues: Annotated[list[QueueFile], Field(min_length=1)] | None = Field(
        default=None, description="Top-level queues; default a single leaf 'default'."
    )
    users: dict[Name, UserFile] = Field(default_factory=dict)
    jobs: list[JobFile] = Field(default_factory=list)
    generators: list[Generator] = Field(default_factory=list)
    partition: PartitionFile | None = Field(
        default=None, description="Cut every stage into equal tasks of about atr_s seconds."
    )
    admin: list[AdminFile] = Field(
        default_factory=list,
        description="Timeline of admin changes to queue accounts (Dynamic Priority); needs "
        "a policy with accounts.",
    )


def workload_json_schema() -> dict[str, Any]:
    """The JSON schema of the YAML workload format."""
    schema = WorkloadFile.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}

"""Generators: the job streams of a workload file's ``generators:``, each with a ``kind``:

- ``poisson``: ``count`` copies of one job template for one user, Poisson arrivals.
- ``closed_loop``: ``count`` copies of one job template for one user, each submitted
  ``think_s`` (drawn per job) after the previous one ends (``Workload.follows``).
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

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from treadle.errors import WorkloadError
from treadle.importers import synthetic
from treadle.importers.common import describe_resources
from treadle.importers.tpch import TpchTrace, read_tpch
from treadle.model import MIN_DURATION_S, ClusterSpec, Follow, JobSpec, StageSpec
from treadle.resources import Resources
from treadle.workload.errors import join, parse_resources
from treadle.workload.schema import (
    MAX_SECONDS,
    ClosedLoopGenerator,
    DagGenerator,
    Distribution,
    LognormalDist,
    PoissonGenerator,
    StageFile,
    TpchGenerator,
)


class BuildContext(Protocol):
    """What a generator needs from the builder (``treadle.workload.build.Builder``)."""

    @property
    def source(self) -> str: ...
    @property
    def base_dir(self) -> Path: ...
    @property
    def rng(self) -> random.Random: ...
    @property
    def cluster(self) -> ClusterSpec: ...
    @property
    def job_names(self) -> set[str]: ...
    @property
    def follows(self) -> dict[str, Follow]: ...
    def error(self, where: str | None, message: str) -> WorkloadError: ...
    def check_queue(self, queue: str | None, where: str) -> str: ...
    def claim_job_name(self, name: str, where: str) -> None: ...
    def stages(self, where: str, declared: list[StageFile]) -> tuple[StageSpec, ...]: ...
    def count_tasks(self, where: str, n: int) -> None: ...


def generate(
    b: BuildContext,
    where: str,
    g: PoissonGenerator | ClosedLoopGenerator | TpchGenerator | DagGenerator,
) -> list[JobSpec]:
    """The jobs of generator ``g`` (at field path ``where``), in arrival order."""
    if isinstance(g, PoissonGenerator):
        return _poisson(b, where, g)
    if isinstance(g, ClosedLoopGenerator):
        return _closed_loop(b, where, g)
    if isinstance(g, TpchGenerator):
        return _tpch(b, where, g)
    return _dag(b, where, g)


def _queue_of(b: BuildContext, where: str, g: PoissonGenerator | ClosedLoopGenerator) -> str:
    """The generator's queue, or its job template's (they may not name two)."""
    if g.queue is not None and g.job.queue is not None and g.queue != g.job.queue:
        raise b.error(f"{where}.job.queue", f"conflicts with the generator's queue {g.queue!r}")
    queue_where = f"{where}.queue" if g.queue is not None else f"{where}.job.queue"
    return b.check_queue(g.queue or g.job.queue, queue_where)


def _poisson(b: BuildContext, where: str, g: PoissonGenerator) -> list[JobSpec]:
    queue = _queue_of(b, where, g)
    prefix = g.name or g.user
    mean_gap = 60.0 / g.rate_per_min
    t = g.start_s
    jobs = []
    for k in range(1, g.count + 1):
        t += b.rng.expovariate(1.0 / mean_gap)
        name = f"{prefix}-{k}"
        b.claim_job_name(name, f"{where}.name" if g.name else f"{where}.user")
        stages = b.stages(f"{where}.job", g.job.stages)
        jobs.append(JobSpec(name, g.user, round(t, 3), stages, queue, g.job.spending_rate))
    return jobs


def _closed_loop(b: BuildContext, where: str, g: ClosedLoopGenerator) -> list[JobSpec]:
    queue = _queue_of(b, where, g)
    prefix = g.name or g.user
    beyond = sorted(k for k in g.spending_rates if k > g.count)
    if beyond:
        raise b.error(
            f"{where}.spending_rates", f"names job {beyond[0]}; the loop has {g.count} (count)"
        )
    jobs: list[JobSpec] = []
    earliest = g.start_s  # a follower's submit_s: the earliest it could be submitted
    for k in range(1, g.count + 1):
        name = f"{prefix}-{k}"
        b.claim_job_name(name, f"{where}.name" if g.name else f"{where}.user")
        stages = b.stages(f"{where}.job", g.job.stages)
        if jobs:
            wait = clamp_wait(draw(g.think_s, b.rng))
            b.follows[name] = Follow(jobs[-1].name, wait)
            earliest += wait
        rate = g.spending_rates.get(k, g.job.spending_rate)
        jobs.append(JobSpec(name, g.user, round(earliest, 3), stages, queue, rate))
    return jobs


def clamp_wait(seconds: float) -> float:
    """A drawn wait in whole milliseconds, at least 0."""
    return max(0.0, round(seconds, 3))


def _tpch(b: BuildContext, where: str, g: TpchGenerator) -> list[JobSpec]:
    trace = _tpch_trace(b, where, g)
    pairs = _tpch_pairs(b, where, g, trace)
    stream = _Stream(b, where, g, g.name or "tpch")
    jobs = []
    for k in range(1, g.count + 1):
        submit = stream.next_arrival(k)
        query = trace.queries[b.rng.choice(pairs)]
        name = f"{stream.prefix}-{query.scale}-q{query.query}-{k}"
        demands = [stream.demand(name, f"s{s.stage}") for s in query.stages]
        b.count_tasks(where, sum(s.tasks for s in query.stages))
        stages = tuple(
            StageSpec(
                f"s{s.stage}",
                res,
                tuple(
                    clamp(max(g.min_task_s, stream.spread(s.mean_task_s * g.duration_scale)))
                    for _ in range(s.tasks)
                ),
                tuple(f"s{p}" for p in s.parents),
            )
            for s, res in zip(query.stages, demands, strict=True)
        )
        jobs.append(stream.job(name, k, submit, stages))
    return jobs


def _tpch_trace(b: BuildContext, where: str, g: TpchGenerator) -> TpchTrace:
    path = Path(g.path).expanduser()
    if not path.is_absolute():
        path = b.base_dir / path
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise b.error(f"{where}.path", f"cannot read the trace {str(path)!r}: {what}")
    stat = path.stat()
    return _read_tpch(str(path), stat.st_mtime_ns, stat.st_size)


def _tpch_pairs(
    b: BuildContext, where: str, g: TpchGenerator, trace: TpchTrace
) -> list[tuple[str, int]]:
    scales = g.scales or list(trace.scales)
    for i, scale in enumerate(scales):
        if scale not in trace.scales:
            raise b.error(
                f"{where}.scales[{i}]",
                f"unknown scale {scale!r}; the trace has {join(trace.scales)}",
            )
        if scale in scales[:i]:
            raise b.error(f"{where}.scales[{i}]", f"scale {scale!r} is listed twice")
    queries = g.queries or list(trace.query_numbers)
    for i, q in enumerate(queries):
        if not any((s, q) in trace.queries for s in scales):
            raise b.error(
                f"{where}.queries[{i}]",
                f"no query {q} at the chosen scales; the trace has queries "
                f"{_number_ranges(trace.query_numbers)}",
            )
        if q in queries[:i]:
            raise b.error(f"{where}.queries[{i}]", f"query {q} is listed twice")
    # Scale-major, in the order given: the draw depends on the file, not on dict order.
    return [(s, q) for s in scales for q in queries if (s, q) in trace.queries]


def _dag(b: BuildContext, where: str, g: DagGenerator) -> list[JobSpec]:
    shape = synthetic.SHAPES[g.shape]
    stream = _Stream(b, where, g, g.name or g.shape)
    jobs = []
    for k in range(1, g.count + 1):
        submit = stream.next_arrival(k)
        name = f"{stream.prefix}-{k}"
        dag = synthetic.draw_dag(shape, b.rng)
        drawn = []
        for i in range(dag.stages):
            res = stream.demand(name, f"s{i}")
            tasks = max(1, round(draw(g.tasks_per_stage, b.rng)))
            b.count_tasks(f"{where}.tasks_per_stage", tasks)
            drawn.append((res, tasks, draw(g.task_duration_s, b.rng)))
        work = [tasks * mean for _, tasks, mean in drawn]
        factors = synthetic.input_work_factors(dag.parents, work, dag.input_work)
        stages = tuple(
            StageSpec(
                f"s{i}",
                res,
                tuple(clamp(stream.spread(mean * factor)) for _ in range(tasks)),
                tuple(f"s{p}" for p in dag.parents[i]),
            )
            for i, ((res, tasks, mean), factor) in enumerate(zip(drawn, factors, strict=True))
        )
        jobs.append(stream.job(name, k, submit, stages))
    return jobs


@dataclass
class _Stream:
    """One DAG generator's jobs: arrivals, users, queue, names, demands, task spreads."""

    builder: BuildContext
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
        self.queue = b.check_queue(g.queue, f"{self.where}.queue")
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
            self.t += draw(self.g.interarrival_s, self.builder.rng)
        return round(self.t, 3)

    def demand(self, job: str, stage: str) -> Resources:
        rng, spec = self.builder.rng, self.g.resources
        where = f"{self.where}.resources"
        if isinstance(spec, list):
            pick = rng.choices(range(len(spec)), weights=[s.weight for s in spec])[0]
            where, spec = f"{where}[{pick}].resources", spec[pick].resources
        amounts = {}
        for name, amount in spec.items():
            value = draw(amount, rng)
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
        self.builder.claim_job_name(name, f"{self.where}.name")
        user = self.users[(k - 1) % len(self.users)]
        return JobSpec(name, user, submit, stages, self.queue)


def draw(spec: float | list[Any] | Distribution, rng: random.Random) -> float:
    """One value of a drawn parameter: the number, one of the choices, or a draw."""
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


def clamp(seconds: float) -> float:
    """A drawn duration as the model takes it: whole milliseconds, at least 1 ms."""
    # Millisecond resolution is all the emulator can honour; rounding also keeps
    # printed workloads readable.
    return min(MAX_SECONDS, max(MIN_DURATION_S, round(seconds, 3)))

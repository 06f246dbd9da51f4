"""Alibaba's 2017 batch tasks (``alibaba/batch_task_2017.csv``; docs: traces.md;
Alibaba clusterdata v2017 ``batch_task.csv``).

The CSV's header is ``task_create_time, task_end_time, job_id, task_id,
number_of_instances, status, number_of_cpus_requested_per_instance_in_the_task,
normalized_memory_requested_per_instance_in_the_task`` (times in seconds from the trace's
start; cpu 100 = one core; memory normalised to the largest machine). A row is one task
of a job, run as ``number_of_instances`` instances. Mapping to the model (spec
``slearn.md`` A4), with ``Alibaba2017Options``' defaults in brackets:

- a job is ``job_id``'s rows; only jobs whose rows are all ``Terminated`` and give cpu
  and memory are kept (the others, still running, waiting or failed at the trace's end,
  are counted at INFO level). It is named ``job<job_id>``, submitted at its rows'
  earliest ``task_create_time`` less the earliest kept job's; there are no users or
  queues in the file: user ``alibaba``, queue ``default``;
- a row is a stage ``t<task_id>`` of ``number_of_instances`` tasks asking ``vcores`` =
  cpu / 100 and ``memory_mb`` = memory x ``machine_memory_mb`` [131,072: a 128 GiB
  machine; the file's machines are not in it, so this is an assumption]. The 2017 file
  has no DAG edges, so a job's stages are independent: all runnable at submission;
- instance durations are not in this file (they are in ``batch_instance.csv``): every
  instance of a row lasts the row's span ``task_end_time - task_create_time`` (an upper
  bound when instances ran in several waves; at least 1 ms), multiplied by exp(s Z -
  s^2 / 2), Z standard normal, s = ``spread`` [0.5] (a mean-one log-normal, so that
  within-stage variation exists; SLearn's accuracy on it measures this model, not the
  trace), drawn from one ``random.Random(seed)`` [0] in file order; under the width cap
  the draw is per task after compression (a task of k instances lasts k x span x one
  draw), so the 9.7 million instances are never drawn one by one;
- the cluster is ``nodes`` [1,300] nodes of ``node_vcores`` [64] vcores and
  ``machine_memory_mb``: Alibaba's 2017 cluster as published (about 1,300 64-core
  machines); the kept trace offers a load of about 0.86 of it;
- the width cap: the format ``alibaba2017`` (``treadle sim``) leaves out every job of more
  than ``width_cap`` [150] tasks, the Google traces' rule in the SLearn paper (spec A3):
  5,145 jobs and 162,100 tasks of the 10,776 kept jobs' 9.7 million instances, which are
  beyond a quick run. ``Alibaba2017Options(reshape=Reshape(...))`` chooses no cap, a
  stretch to a target load, a prefix, or ``cap_mode="compress"`` (``Reshape``: k
  consecutive instances become one task of their summed time, keeping task-seconds;
  944,861 tasks, but a 66,632-instance job's tasks then last hours, so a run on this
  cluster takes long).

Sizes are bounded before anything is allocated; a malformed row is an error naming the
file, the line and the column.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import structlog

from treadle.errors import WorkloadError
from treadle.importers.common import TraceFile, check_fits, default_users
from treadle.importers.tabular import (
    MAX_SECONDS,
    Reshape,
    Row,
    TaskBudget,
    check_columns,
    duration,
    head,
    lines,
)
from treadle.model import DEFAULT_RACK, ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.resources import Resources

log = structlog.get_logger("importers")

COLUMNS = (
    "task_create_time",
    "task_end_time",
    "job_id",
    "task_id",
    "number_of_instances",
    "status",
    "number_of_cpus_requested_per_instance_in_the_task",
    "normalized_memory_requested_per_instance_in_the_task",
)
TERMINATED = "Terminated"
USER = "alibaba"
MAX_NODES = 100_000


@dataclass(frozen=True)
class Alibaba2017Options:
    machine_memory_mb: float = 131_072
    nodes: int = 1300
    node_vcores: float = 64
    spread: float = 0.5
    seed: int = 0
    reshape: Reshape = field(default_factory=lambda: Reshape(width_cap=150, cap_mode="drop"))

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES:
            raise ValueError(f"nodes must be 1..{MAX_NODES}, got {self.nodes}")
        for name in ("machine_memory_mb", "node_vcores"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if not (math.isfinite(self.spread) and self.spread >= 0):
            raise ValueError(f"spread must be >= 0, got {self.spread}")


def sniff(trace: TraceFile) -> bool:
    first = head(trace, 400).lstrip("\ufeff").partition("\n")[0]
    return [c.strip() for c in first.split(",")][:3] == list(COLUMNS[:3])


def load_trace(trace: TraceFile, nodes_file: str | None) -> Workload:
    if nodes_file is not None:
        raise WorkloadError(
            trace.source, None, "a nodes file applies only to SLS, Rumen and Alibaba 2023 traces"
        )
    return load_batch_tasks(trace, Alibaba2017Options())


def load_alibaba2017(
    path: str | Path, options: Alibaba2017Options | None = None, source: str = ""
) -> Workload:
    return load_batch_tasks(TraceFile(Path(path), source), options or Alibaba2017Options())


@dataclass
class _Row:
    line: int
    task_id: str
    instances: int
    span_s: float
    ask: Resources


def load_batch_tasks(trace: TraceFile, o: Alibaba2017Options) -> Workload:
    source = trace.source
    names = {c: i for i, c in enumerate(COLUMNS)}
    jobs: dict[str, list[_Row]] = {}
    created: dict[str, float] = {}
    unfinished: set[str] = set()
    budget = TaskBudget(source)
    for n, line in lines(trace):
        fields = line.split(",")
        if n == 1:
            if [f.strip().lstrip("\ufeff") for f in fields] != list(COLUMNS):
                raise WorkloadError(source, "line 1", f"expected the header {','.join(COLUMNS)}")
            continue
        if not line.strip():
            continue
        check_columns(source, n, COLUMNS, fields)
        row = Row(source, n, names, fields)
        job = row.text("job_id")
        task = row.text("task_id")
        if not job or not task:
            raise row.error("job_id" if not job else "task_id", "is empty")
        start = row.number("task_create_time", low=-MAX_SECONDS)
        created[job] = min(created.get(job, start), start)
        if job in unfinished:
            continue
        cpu_text = row.text(COLUMNS[6])
        mem_text = row.text(COLUMNS[7])
        if row.text("status") != TERMINATED or not cpu_text or not mem_text:
            unfinished.add(job)
            jobs.pop(job, None)
            continue
        end = row.number("task_end_time", low=-MAX_SECONDS)
        if end < start:
            raise row.error("task_end_time", f"{end:g} is before task_create_time {start:g}")
        instances = row.count("number_of_instances")
        if instances < 1:
            raise row.error("number_of_instances", "must be >= 1")
        budget.take(row, "number_of_instances", min(instances, o.reshape.width_cap or instances))
        ask = Resources(
            vcores=row.number(COLUMNS[6], low=0, high=100 * o.node_vcores) / 100,
            memory_mb=row.number(COLUMNS[7], low=0, high=1) * o.machine_memory_mb,
        )
        if ask.is_zero():
            raise row.error(COLUMNS[6], "the task asks for nothing")
        jobs.setdefault(job, []).append(_Row(n, task, instances, end - start, ask))
    if unfinished:
        log.info("left out", trace=source, what=f"{len(unfinished)} jobs not all Terminated")
    if not jobs:
        raise WorkloadError(source, None, "no job whose tasks all terminated")
    node = Resources(vcores=o.node_vcores, memory_mb=o.machine_memory_mb)
    cluster = ClusterSpec(
        tuple(NodeSpec(f"node{i}", node, DEFAULT_RACK) for i in range(1, o.nodes + 1))
    )
    rng = random.Random(o.seed)
    sigma = o.spread
    cap, mode = o.reshape.width_cap, o.reshape.cap_mode
    t0 = min(created[j] for j in jobs)
    specs = []
    for job, rows in jobs.items():
        width = sum(r.instances for r in rows)
        if cap is not None and width > cap and mode == "drop":
            continue
        k = math.ceil(width / cap) if cap is not None and width > cap else 1
        seen: Counter[str] = Counter(r.task_id for r in rows)
        for r in rows:
            if seen[r.task_id] > 1:
                raise WorkloadError(
                    source, f"line {r.line}.task_id", f"task {r.task_id} of job {job} appears twice"
                )
            if not r.ask.fits_in(node):
                check_fits(cluster, r.ask, source, f"line {r.line}")
        stages = tuple(
            StageSpec(f"t{r.task_id}", r.ask, _durations(r, k, sigma, rng)) for r in rows
        )
        specs.append(JobSpec(f"job{job}", USER, created[job] - t0, stages))
    specs.sort(key=lambda j: j.submit_s)
    wl = Workload(trace.path.stem, cluster, tuple(specs), users=default_users([USER]))
    return replace(o.reshape, width_cap=None).apply(wl)


def _durations(r: _Row, k: int, sigma: float, rng: random.Random) -> tuple[float, ...]:
    """The row's tasks: ceil(instances / k) tasks of k instances (the last of the rest),
    each lasting its instances x the span x one mean-one log-normal draw."""
    out = []
    for first in range(0, r.instances, k):
        held = min(k, r.instances - first)
        f = math.exp(sigma * rng.gauss(0.0, 1.0) - sigma * sigma / 2) if sigma else 1.0
        out.append(duration(held * r.span_s * f))
    return tuple(out)

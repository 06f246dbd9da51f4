"""Hadoop Rumen job-history traces (the JSON ``rumen`` writes and SLS replays).

A trace is a sequence of concatenated, usually pretty-printed, JSON objects, one per job,
with ``jobID``, ``user``, ``queue``, ``submitTime`` (ms), ``mapTasks`` and ``reduceTasks``;
each task has ``startTime``/``finishTime`` and ``attempts`` with ``result``, times and
``hostName`` (``/rack/host``). Times of -1 mean "unknown".

Mapping to the model:

- a job becomes a ``JobSpec`` named ``jobID`` (user and queue default to ``default``),
  submitted at ``submitTime`` relative to the earliest imported job;
- map tasks form stage ``map``; reduce tasks form stage ``reduce``, after ``map`` when the
  job has maps; other task kinds (setup, cleanup) are not imported;
- a task lasts its first SUCCESS attempt's ``finishTime - startTime``; with no successful
  attempt, the task's own times are used (so a killed task that held a container still
  counts); a task whose times are unknown is skipped and counted, and a job left with no
  task is skipped and counted (see ``RumenImport``);
- containers ask ``mapreduce.{map,reduce}.memory.mb`` and ``mapreduce.{map,reduce}.cpu.vcores``
  from the job's ``jobProperties``, defaulting to 1024 MB and 1 vcore (Hadoop's defaults);
- the cluster has one node per distinct attempt ``hostName``, 8 vcores and 8192 MB each,
  unless an SLS node file is given.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from treadle.errors import WorkloadError
from treadle.importers.common import (
    JsonObject,
    TraceFile,
    check_fits,
    cluster_from_hosts,
    default_users,
    flat_queues,
    read_json_objects,
)
from treadle.importers.sls import DEFAULT_NODE, read_nodes_file
from treadle.model import MIN_DURATION_S, ClusterSpec, JobSpec, StageSpec, Workload
from treadle.resources import Resources

DEFAULT_CONTAINER_MB = 1024.0
DEFAULT_CONTAINER_VCORES = 1.0
SUCCESS = "SUCCESS"


@dataclass(frozen=True)
class RumenImport:
    """An imported workload and what had to be left out of it."""

    workload: Workload
    skipped_tasks: int
    """Tasks with no usable start and finish times."""
    skipped_jobs: int
    """Jobs with no task left to import."""


@dataclass(frozen=True)
class _Job:
    name: str
    user: str
    queue: str
    submit_ms: float
    stages: tuple[StageSpec, ...]
    where: str


def load_rumen(
    path: str | Path, nodes_file: str | Path | None = None, *, node: Resources = DEFAULT_NODE
) -> Workload:
    """Import a Rumen trace (see ``read_rumen`` for the counts of what was skipped)."""
    return read_rumen(path, nodes_file, node=node).workload


def read_rumen(
    path: str | Path, nodes_file: str | Path | None = None, *, node: Resources = DEFAULT_NODE
) -> RumenImport:
    source = str(path)
    objects = read_json_objects(Path(path), source)
    return rumen_import(objects, source, nodes_file=nodes_file, node=node)


def sniff(trace: TraceFile) -> bool:
    """A Rumen trace: the first object has ``jobID``."""
    first = trace.json_values[0]
    return isinstance(first, dict) and "jobID" in first


def load_trace(trace: TraceFile, nodes_file: str | None = None) -> Workload:
    """``treadle.importers.FORMATS``' loader: a Rumen trace and optional SLS node file."""
    return rumen_import(trace.json_values, trace.source, nodes_file=nodes_file).workload


def rumen_import(
    objects: list[object],
    source: str,
    *,
    nodes_file: str | Path | None = None,
    node: Resources = DEFAULT_NODE,
) -> RumenImport:
    """Build a workload from the already-decoded JSON objects of a Rumen trace."""
    jobs: list[_Job] = []
    hosts: list[str] = []
    skipped_tasks = 0
    for i, value in enumerate(objects):
        raw = JsonObject(source, f"job[{i}]", value)
        job, skipped = _read_job(raw)
        skipped_tasks += skipped
        hosts.extend(_hosts(raw))
        if job is not None:
            jobs.append(job)
    if not jobs:
        raise WorkloadError(source, None, "no job in the trace has a usable task")
    if nodes_file is not None:
        cluster = ClusterSpec(read_nodes_file(nodes_file, node))
    else:
        cluster = cluster_from_hosts(hosts, node, source)
    workload = Workload(
        name=Path(source).stem,
        cluster=cluster,
        jobs=_job_specs(jobs, cluster, source),
        queues=flat_queues(j.queue for j in jobs),
        users=default_users(j.user for j in jobs),
    )
    return RumenImport(workload, skipped_tasks, len(objects) - len(jobs))


def _read_job(job: JsonObject) -> tuple[_Job | None, int]:
    name = job.text("jobID")
    submit_ms = job.number("submitTime")
    if submit_ms < 0:
        raise job.error("submitTime", f"must be a time in ms >= 0, got {submit_ms:g}")
    props = job.object("jobProperties")
    maps, skipped_maps = _durations(job.objects("mapTasks", required=False))
    reduces, skipped_reduces = _durations(job.objects("reduceTasks", required=False))
    stages: list[StageSpec] = []
    if maps:
        stages.append(StageSpec("map", _container(props, "map"), maps))
    if reduces:
        parents = ("map",) if maps else ()
        stages.append(StageSpec("reduce", _container(props, "reduce"), reduces, parents))
    skipped = skipped_maps + skipped_reduces
    if not stages:
        return None, skipped
    user, queue = job.text("user", "default"), job.text("queue", "default")
    return _Job(name, user, queue, submit_ms, tuple(stages), job.path), skipped


def _durations(tasks: list[JsonObject]) -> tuple[tuple[float, ...], int]:
    durations: list[float] = []
    for task in tasks:
        seconds = _task_seconds(task)
        if seconds is not None:
            durations.append(max(MIN_DURATION_S, seconds))
    return tuple(durations), len(tasks) - len(durations)


def _task_seconds(task: JsonObject) -> float | None:
    for attempt in task.objects("attempts", required=False):
        if attempt.text("result", "") == SUCCESS:
            seconds = _span_s(attempt)
            if seconds is not None:
                return seconds
    return _span_s(task)


def _span_s(obj: JsonObject) -> float | None:
    """``finishTime - startTime`` in seconds; None when either is unknown (-1 or absent)."""
    start, finish = obj.number("startTime", -1), obj.number("finishTime", -1)
    if start < 0 or finish < 0:
        return None
    if finish < start:
        raise obj.error("finishTime", f"finishes before it starts ({finish:g} < {start:g})")
    return (finish - start) / 1000


def _container(props: JsonObject, kind: str) -> Resources:
    memory = props.number(f"mapreduce.{kind}.memory.mb", DEFAULT_CONTAINER_MB)
    vcores = props.number(f"mapreduce.{kind}.cpu.vcores", DEFAULT_CONTAINER_VCORES)
    # Hadoop treats a non-positive setting as "use the default".
    return Resources(
        memory_mb=memory if memory > 0 else DEFAULT_CONTAINER_MB,
        vcores=vcores if vcores > 0 else DEFAULT_CONTAINER_VCORES,
    )


def _hosts(job: JsonObject) -> Iterator[str]:
    for kind in ("mapTasks", "reduceTasks"):
        for task in job.objects(kind, required=False):
            for attempt in task.objects("attempts", required=False):
                host = attempt.text("hostName", "")
                if host:
                    yield host


def _job_specs(jobs: list[_Job], cluster: ClusterSpec, source: str) -> tuple[JobSpec, ...]:
    first_ms = min(j.submit_ms for j in jobs)
    names: set[str] = set()
    specs: list[JobSpec] = []
    for j in jobs:
        if j.name in names:
            raise WorkloadError(source, f"{j.where}.jobID", f"duplicate job id {j.name!r}")
        names.add(j.name)
        for stage in j.stages:
            check_fits(cluster, stage.resources, source, f"{j.where}.{stage.name}Tasks")
        specs.append(JobSpec(j.name, j.user, (j.submit_ms - first_ms) / 1000, j.stages, j.queue))
    specs.sort(key=lambda s: s.submit_s)  # stable: ties keep file order
    return tuple(specs)

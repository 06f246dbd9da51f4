"""Hadoop SLS (Scheduler Load Simulator) job traces and node files.

A job file is a sequence of concatenated JSON objects (not an array), one per job::

    {"job.id": "job_1", "job.user": "u", "job.queue.name": "q", "job.start.ms": 0,
     "job.tasks": [{"container.host": "/rack/node1", "container.type": "map",
                    "container.start.ms": 6664, "container.end.ms": 23707,
                    "container.memory": 1024, "container.vcores": 1, "container.count": 1}]}

Mapping to the model:

- a job becomes a ``JobSpec`` named ``job.id`` (default ``job_<n>``, counted from 1), user
  ``job.user`` (default ``default``, as in SLS), queue ``job.queue.name``, submitted at
  ``job.start.ms`` relative to the earliest job;
- tasks are grouped into stages by ``container.type``; every ``reduce`` stage depends on
  every ``map`` stage. A type whose tasks ask for different resources is split into one
  stage per resource shape, named ``<type>``, ``<type>-2``, ...;
- a task lasts ``container.end.ms - container.start.ms`` (a negative value is an error;
  zero is clamped to 1 ms) and asks ``container.memory`` MB and ``container.vcores``,
  defaulting to 1024 MB and 1 vcore (SLS's ``yarn.sls.container.memory.mb`` and
  ``yarn.sls.container.vcores`` defaults); ``container.count`` repeats it;
- fields that only matter to SLS's own AM simulators (``am.type``, ``job.end.ms``,
  ``container.priority``, ``container.request.delay``, ...) are ignored.

The cluster comes from an SLS node file if one is given (``{"rack": ..., "nodes":
[{"node": ..., "memory-mb": ..., "vcores": ...}]}`` objects; node ids are the ``node``
names, sizes default to 8 vcores and 8192 MB; empty ``{}`` entries are skipped), otherwise
one node of that default size per distinct ``container.host``. Queues are the distinct
queue names, as leaf queues of equal weight.
"""

from __future__ import annotations

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
from treadle.model import (
    DEFAULT_RACK,
    MIN_DURATION_S,
    ClusterSpec,
    JobSpec,
    NodeSpec,
    StageSpec,
    Workload,
    topological_stages,
)
from treadle.resources import MEMORY_MB, VCORES, Resources

DEFAULT_TASK = Resources(vcores=1, memory_mb=1024)
"""Per-container ask when a task gives none (SLS's own defaults)."""

DEFAULT_NODE = Resources(vcores=8, memory_mb=8192)
"""Node size when a node file gives none, or when nodes are derived from task hosts."""


@dataclass(frozen=True)
class _Task:
    kind: str
    duration_s: float
    resources: Resources
    host: str
    where: str


@dataclass(frozen=True)
class _Job:
    name: str
    user: str
    queue: str
    start_ms: float
    tasks: list[_Task]
    where: str


def load_sls(
    path: str | Path,
    nodes_file: str | Path | None = None,
    *,
    node: Resources = DEFAULT_NODE,
    task: Resources = DEFAULT_TASK,
) -> Workload:
    """Import an SLS job trace; ``nodes_file`` is an SLS node file (optional)."""
    source = str(path)
    objects = read_json_objects(Path(path), source)
    return sls_workload(objects, source, nodes_file=nodes_file, node=node, task=task)


def sniff(trace: TraceFile) -> bool:
    """An SLS job trace: the first object has ``job.tasks``."""
    first = trace.json_values[0]
    return isinstance(first, dict) and "job.tasks" in first


def load_trace(trace: TraceFile, nodes_file: str | None = None) -> Workload:
    """``treadle.importers.FORMATS``' loader: an SLS job trace and optional node file."""
    return sls_workload(trace.json_values, trace.source, nodes_file=nodes_file)


def sls_workload(
    objects: list[object],
    source: str,
    *,
    nodes_file: str | Path | None = None,
    node: Resources = DEFAULT_NODE,
    task: Resources = DEFAULT_TASK,
) -> Workload:
    """Build a workload from the already-decoded JSON objects of an SLS job trace."""
    need_host = nodes_file is None
    jobs = [
        _read_job(JsonObject(source, f"job[{i}]", o), i, task, need_host)
        for i, o in enumerate(objects)
    ]
    if nodes_file is not None:
        cluster = ClusterSpec(read_nodes_file(nodes_file, node))
    else:
        cluster = cluster_from_hosts((t.host for j in jobs for t in j.tasks), node, source)
    return Workload(
        name=Path(source).stem,
        cluster=cluster,
        jobs=_job_specs(jobs, cluster, source),
        queues=flat_queues(j.queue for j in jobs),
        users=default_users(j.user for j in jobs),
    )


def _read_job(job: JsonObject, index: int, default: Resources, need_host: bool) -> _Job:
    if job.number("job.count", 1) != 1:
        raise job.error("job.count", "repeated jobs are not supported; list each job")
    tasks = [t for tj in job.objects("job.tasks") for t in _read_tasks(tj, default, need_host)]
    if not tasks:
        raise job.error("job.tasks", "the job has no tasks")
    return _Job(
        name=job.text("job.id", f"job_{index + 1}"),
        user=job.text("job.user", "default"),
        queue=job.text("job.queue.name"),
        start_ms=job.number("job.start.ms"),
        tasks=tasks,
        where=job.path,
    )


def _read_tasks(t: JsonObject, default: Resources, need_host: bool) -> list[_Task]:
    start, end = t.number("container.start.ms"), t.number("container.end.ms")
    if end < start:
        raise t.error("container.end.ms", f"the task ends before it starts ({end:g} < {start:g})")
    count = t.number("container.count", 1)
    if count < 1 or not count.is_integer():
        raise t.error("container.count", f"expected a whole number >= 1, got {count:g}")
    task = _Task(
        kind=t.text("container.type"),
        duration_s=max(MIN_DURATION_S, (end - start) / 1000),
        resources=_task_resources(t, default),
        host=t.text("container.host") if need_host else "",
        where=t.path,
    )
    return [task] * int(count)


def _task_resources(t: JsonObject, default: Resources) -> Resources:
    memory = t.number("container.memory", default[MEMORY_MB])
    vcores = t.number("container.vcores", default[VCORES])
    for key, value in (("container.memory", memory), ("container.vcores", vcores)):
        if value < 0:
            raise t.error(key, f"must be >= 0, got {value:g}")
    if not memory and not vcores:
        raise t.error("container.memory", "a task must ask for some memory or vcores")
    return _with_memory_and_vcores(default, memory, vcores)


def _job_specs(jobs: list[_Job], cluster: ClusterSpec, source: str) -> tuple[JobSpec, ...]:
    first_ms = min(j.start_ms for j in jobs)
    names: set[str] = set()
    specs: list[JobSpec] = []
    for j in jobs:
        if j.name in names:
            raise WorkloadError(source, f"{j.where}.job.id", f"duplicate job id {j.name!r}")
        names.add(j.name)
        stages = _stages(j.tasks, cluster, source)
        specs.append(JobSpec(j.name, j.user, (j.start_ms - first_ms) / 1000, stages, j.queue))
    specs.sort(key=lambda s: s.submit_s)  # stable: ties keep file order
    return tuple(specs)


def _stages(tasks: list[_Task], cluster: ClusterSpec, source: str) -> tuple[StageSpec, ...]:
    groups: dict[tuple[str, Resources], list[_Task]] = {}
    for t in tasks:
        groups.setdefault((t.kind, t.resources), []).append(t)
    per_kind: dict[str, int] = {}
    named: list[tuple[str, str, list[_Task]]] = []
    for (kind, _), members in groups.items():
        per_kind[kind] = per_kind.get(kind, 0) + 1
        name = kind if per_kind[kind] == 1 else f"{kind}-{per_kind[kind]}"
        named.append((kind, name, members))
    maps = tuple(name for kind, name, _ in named if kind == "map")
    stages: list[StageSpec] = []
    for kind, name, members in named:
        check_fits(cluster, members[0].resources, source, members[0].where)
        parents = maps if kind == "reduce" else ()
        durations = tuple(t.duration_s for t in members)
        stages.append(StageSpec(name, members[0].resources, durations, parents))
    try:
        return topological_stages(stages)
    except ValueError as e:  # only if a type is literally named like a split stage
        raise WorkloadError(source, tasks[0].where, str(e)) from None


def read_nodes_file(path: str | Path, node: Resources = DEFAULT_NODE) -> tuple[NodeSpec, ...]:
    """The nodes of an SLS node file; sizes missing from the file default to ``node``."""
    source = str(path)
    nodes: list[NodeSpec] = []
    seen: set[str] = set()
    for i, value in enumerate(read_json_objects(Path(path), source)):
        rack = JsonObject(source, f"rack[{i}]", value)
        rack_name = rack.text("rack", DEFAULT_RACK)
        for entry in rack.objects("nodes"):
            if not len(entry):
                continue  # upstream's sample file has an empty {} entry; SLS ignores it
            name = entry.text("node")
            if name in seen:
                raise entry.error("node", f"duplicate node {name!r}")
            seen.add(name)
            nodes.append(NodeSpec(name, _node_resources(entry, node), rack_name))
    if not nodes:
        raise WorkloadError(source, None, "the node file lists no nodes")
    return tuple(nodes)


def _node_resources(entry: JsonObject, default: Resources) -> Resources:
    memory = entry.number("memory-mb", default[MEMORY_MB])
    vcores = entry.number("vcores", default[VCORES])
    for key, value in (("memory-mb", memory), ("vcores", vcores)):
        if value < 0:
            raise entry.error(key, f"must be >= 0, got {value:g}")
    return _with_memory_and_vcores(default, memory, vcores)


def _with_memory_and_vcores(base: Resources, memory: float, vcores: float) -> Resources:
    # Not Resources(base, memory_mb=...): keyword zeros are dropped there, so an explicit
    # 0 would let the base amount through.
    return Resources({**base.to_dict(), MEMORY_MB: memory, VCORES: vcores})

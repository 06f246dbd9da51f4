"""The Alibaba 2023 GPU cluster trace (``alibaba/openb_*`` in the traces directory,
alibaba/clusterdata ``cluster-trace-gpu-v2023``): pods with GPU shares on GPU nodes.

A pod list is a CSV with the header ``name, cpu_milli, memory_mib, num_gpu, gpu_milli,
gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time`` (times in
seconds from the trace's start); a node list has ``sn, cpu_milli, memory_mib, gpu,
model``. The workload is the pod list; the node list is ``--nodes-file``, by default
``openb_node_list_all_node.csv`` beside the pod list.

Mapping to the model (``gpu`` is one more resource dimension, beside ``vcores`` and
``memory_mb``; every policy sees it in the vectors and the capacity, so DRF counts GPU
shares, and a pod needing GPUs fits only GPU nodes):

- a node (row of the node list) is a node ``sn`` of ``vcores = cpu_milli / 1000``,
  ``memory_mb = memory_mib`` (a MiB taken as treadle's MB, as YARN does) and ``gpu`` =
  its GPU count; ``model`` is ignored;
- a pod is a one-task job named after the pod, submitted at its ``creation_time`` less
  the earliest kept pod's, asking ``vcores = cpu_milli / 1000``, ``memory_mb =
  memory_mib`` and ``gpu = num_gpu x gpu_milli / 1000``: a pod with ``gpu_milli`` 460
  asks 0.46 of a GPU (the trace's GPU sharing; whole-GPU pods have ``gpu_milli`` 1000).
  A node's GPUs are one divisible pool: treadle does not place a share on a particular
  device, so two 0.6 shares fit a 2-GPU node and the fragmentation across devices that
  the trace was published to study is not modelled. ``gpu_spec`` (allowed GPU models,
  empty in these files) is ignored;
- the pod's task lasts ``deletion_time - scheduled_time`` (its run, not its wait after
  creation; at least 1 ms). Pods still ``Running`` at the end have the trace's end as
  deletion time: their duration is a lower bound. ``Failed`` and ``Succeeded`` pods run
  for their span like the others (a failed pod held its resources until then);
- pods without a duration are left out, and counted at INFO level: ``Pending`` pods
  that were never scheduled (empty ``scheduled_time``) and rows whose deletion precedes
  their scheduling. A pod list without the time columns (``openb_pod_list_multigpu50``
  has only the five resource columns) cannot be replayed: an error says so;
- the cluster heartbeats every ``HEARTBEAT_S`` (60 s, not 1 s): one AM call per running
  pod per heartbeat over months of pods would take hours of simulation;
- queue and user are the pod's ``qos`` (``LS``, ``BE``, ``Burstable``, ``Guaranteed``):
  the trace has no users, and QoS classes are the tenants its scheduler tells apart.

A malformed row is an error naming the file, the line and the column; a pod that fits
no node is an error naming the pod's line.
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog

from treadle.errors import WorkloadError
from treadle.importers.common import (
    TraceFile,
    check_fits,
    default_users,
    flat_queues,
)
from treadle.importers.tabular import MAX_SECONDS, Row, check_columns, duration, head, lines
from treadle.model import (
    DEFAULT_RACK,
    ClusterSpec,
    JobSource,
    JobSpec,
    NodeSpec,
    StageSpec,
    Workload,
)
from treadle.resources import Resources

log = structlog.get_logger("importers")

POD_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
TIME_COLUMNS = ("creation_time", "deletion_time", "scheduled_time")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
DEFAULT_NODES_FILE = "openb_node_list_all_node.csv"
MAX_MILLI = 1e9
MAX_MIB = 1e12
MAX_GPUS = 1024
MAX_NODES = 100_000
MAX_PODS = 1_000_000
HEARTBEAT_S = 60.0
"""The cluster's heartbeat: pods run for hours to months (mean 7 hours), and the simulator
does one AM call per running job per heartbeat; a minute bounds that work and moves a
start by under a minute in a trace of 149 days."""


def sniff(trace: TraceFile) -> bool:
    first = head(trace, 200).lstrip("\ufeff").partition("\n")[0]
    return first.startswith("name,cpu_milli,memory_mib,num_gpu,gpu_milli") or first.startswith(
        "sn,cpu_milli,memory_mib,gpu"
    )


def load_trace(trace: TraceFile, nodes_file: str | None) -> Workload:
    if nodes_file is None:
        nodes_file = str(trace.path.parent / DEFAULT_NODES_FILE)
        if not Path(nodes_file).is_file():
            raise WorkloadError(
                trace.source, None, f"no {DEFAULT_NODES_FILE} beside it; pass --nodes-file"
            )
    return load_alibaba2023(trace, TraceFile(Path(nodes_file)))


def _csv_rows(trace: TraceFile, columns: tuple[str, ...], required: int) -> list[Row]:
    """The rows of a CSV whose header starts with ``columns[:required]``; the others are
    optional (absent ones are not in each row's names)."""
    return list(iter_rows(trace, columns, required))


def iter_rows(trace: TraceFile, columns: tuple[str, ...], required: int) -> Iterator[Row]:
    """``_csv_rows`` as the file is read (a bad row raises when it is reached)."""
    for n, names, fields in _lines_of(trace, columns, required):
        check_columns(trace.source, n, tuple(names), fields)
        yield Row(trace.source, n, names, fields)


def _lines_of(
    trace: TraceFile, columns: tuple[str, ...], required: int
) -> Iterator[tuple[int, dict[str, int], list[str]]]:
    """(line number, the header's columns, fields) of each row that is not blank; the
    header is checked (``_header``), at most ``MAX_PODS`` rows are read and a file with
    no header is refused."""
    names: dict[str, int] | None = None
    count = 0
    for n, line in lines(trace):
        fields = next(csv.reader([line])) if line else []
        if n == 1:
            names = _header(trace, fields, columns, required)
            continue
        if not fields:
            continue
        if count >= MAX_PODS:
            raise WorkloadError(trace.source, f"line {n}", f"more than {MAX_PODS} rows")
        count += 1
        yield n, names or {}, fields
    if names is None:
        raise WorkloadError(trace.source, None, "the file is empty")


def read_nodes(trace: TraceFile) -> ClusterSpec:
    rows = _csv_rows(trace, NODE_COLUMNS, 4)
    if len(rows) > MAX_NODES:
        raise WorkloadError(trace.source, None, f"{len(rows)} nodes; at most {MAX_NODES}")
    nodes = []
    seen: set[str] = set()
    for r in rows:
        name = r.text("sn")
        if not name or name in seen:
            raise r.error("sn", f"empty or repeated node name {name!r}")
        seen.add(name)
        size = Resources(
            vcores=r.number("cpu_milli", low=0, high=MAX_MILLI) / 1000,
            memory_mb=r.number("memory_mib", low=0, high=MAX_MIB),
            gpu=r.count("gpu", high=MAX_GPUS),
        )
        nodes.append(NodeSpec(name, size, DEFAULT_RACK))
    if not nodes:
        raise WorkloadError(trace.source, None, "no nodes after the header")
    return ClusterSpec(tuple(nodes), HEARTBEAT_S)


def load_alibaba2023(pods: TraceFile, nodes: TraceFile) -> Workload:
    source = pods.source
    if head(pods, 200).lstrip("\ufeff").startswith("sn,"):
        raise WorkloadError(
            source, None, "is a node list; give a pod list and this file as --nodes-file"
        )
    cluster = read_nodes(nodes)
    rows = _csv_rows(pods, POD_COLUMNS, 5)
    if rows and not all(c in rows[0].names for c in TIME_COLUMNS):
        raise WorkloadError(
            source,
            None,
            "has no creation_time, deletion_time and scheduled_time columns: pods without "
            "times cannot be replayed",
        )
    dropped: Counter[str] = Counter()
    jobs: list[Pod] = []
    fitting: set[Resources] = set()
    for r in rows:
        pod = read_pod(r, cluster, fitting, dropped)
        if pod is not None:
            jobs.append(pod)
    left_out(source, dropped)
    if not jobs:
        raise WorkloadError(source, None, "no pod to run (no row, or none was ever scheduled)")
    t0 = min(j[0] for j in jobs)
    specs = [
        JobSpec(name, qos, created - t0, (StageSpec("pod", ask, (duration(run_s),)),), qos)
        for created, name, qos, ask, run_s in jobs
    ]
    specs.sort(key=lambda j: j.submit_s)
    if len({j.name for j in specs}) != len(specs):
        dup = next(n for n, c in Counter(j.name for j in specs).items() if c > 1)
        raise WorkloadError(source, None, f"pod {dup!r} appears twice")
    return Workload(
        pods.path.stem,
        cluster,
        tuple(specs),
        queues=flat_queues(j.queue for j in specs),
        users=default_users(j.user for j in specs),
    )


Pod = tuple[float, str, str, Resources, float]
"""A kept pod: creation time, name, QoS, ask, run time."""


def read_pod(
    r: Row, cluster: ClusterSpec, fitting: set[Resources], dropped: Counter[str]
) -> Pod | None:
    """A pod row, checked (None, counted in ``dropped``, when it has no duration)."""
    name = r.text("name")
    if not name:
        raise r.error("name", "is empty")
    created = r.number("creation_time", low=-MAX_SECONDS)
    deleted = r.optional("deletion_time", low=-MAX_SECONDS)
    scheduled = r.optional("scheduled_time", low=-MAX_SECONDS)
    gpus = r.count("num_gpu", high=MAX_GPUS)
    share = r.number("gpu_milli", low=0, high=1000) / 1000 if gpus else 0.0
    ask = Resources(
        vcores=r.number("cpu_milli", low=0, high=MAX_MILLI) / 1000,
        memory_mb=r.number("memory_mib", low=0, high=MAX_MIB),
        gpu=gpus * share,
    )
    if ask.is_zero():
        raise r.error("cpu_milli", "the pod asks for nothing")
    if scheduled is None or deleted is None:
        dropped["pods never scheduled"] += 1
        return None
    if deleted < scheduled:
        dropped["pods deleted before they were scheduled"] += 1
        return None
    if ask not in fitting:
        check_fits(cluster, ask, r.source, f"line {r.line}")
        fitting.add(ask)
    qos = r.text("qos") or "default"
    return (created, name, qos, ask, deleted - scheduled)


def left_out(source: str, dropped: Counter[str]) -> None:
    if dropped:
        log.info(
            "%s: left out %s", source, ", ".join(f"{v} {k}" for k, v in sorted(dropped.items()))
        )


# Streaming (``Importer.stream``) --------------------------------------------------------


def stream_trace(trace: TraceFile, nodes_file: str | None) -> Workload:
    """The pod list as a streamed workload (``Workload.source``): a first pass reads what
    the whole list decides (the earliest creation, the QoS classes in order, the pods
    kept, their names once each, the order), then the run reads each pod as it comes,
    checking it as ``load_alibaba2023`` does. A list that is not in creation order, or
    that the first pass finds wrong as a whole (no pod, a pod twice), is loaded whole,
    which gives its usual result or error."""
    if nodes_file is None:
        nodes_file = str(trace.path.parent / DEFAULT_NODES_FILE)
        if not Path(nodes_file).is_file():
            return load_trace(trace, None)  # its error
    pods, nodes = trace, TraceFile(Path(nodes_file))
    if head(pods, 200).lstrip("\ufeff").startswith("sn,"):
        return load_alibaba2023(pods, nodes)
    cluster = read_nodes(nodes)
    scan = _scan(pods)
    if scan is None:
        return load_alibaba2023(pods, nodes)
    source = PodSource(pods, cluster, scan)
    return Workload(
        pods.path.stem,
        cluster,
        (),
        queues=flat_queues(scan.qos),
        users=default_users(scan.qos),
        source=source,
    )


@dataclass
class _Scan:
    t0: float
    kept: int
    qos: list[str]
    dropped: Counter[str]


def _scan(pods: TraceFile) -> _Scan | None:
    """The first pass; None when the list must be loaded whole. A row it cannot read is
    passed over: the run's pass raises its error when it reaches it."""
    names: dict[str, int] = {}
    qos: dict[str, None] = {}
    dropped: Counter[str] = Counter()
    t0, last, twice = math.inf, -math.inf, False
    for n, columns, fields in _lines_of(pods, POD_COLUMNS, 5):
        if len(fields) != len(columns) or not all(c in columns for c in TIME_COLUMNS):
            continue
        r = Row(pods.source, n, columns, fields)
        try:
            name = r.text("name")
            created = r.number("creation_time", low=-MAX_SECONDS)
            deleted = r.optional("deletion_time", low=-MAX_SECONDS)
            scheduled = r.optional("scheduled_time", low=-MAX_SECONDS)
        except WorkloadError:
            continue
        if scheduled is None or deleted is None:
            dropped["pods never scheduled"] += 1
            continue
        if deleted < scheduled:
            dropped["pods deleted before they were scheduled"] += 1
            continue
        if created < last:
            return None
        last, t0 = created, min(t0, created)
        twice |= names.setdefault(name, n) != n
        qos.setdefault(r.text("qos") or "default", None)
    if twice or not names:
        return None
    return _Scan(t0, len(names), list(qos), dropped)


def _header(
    trace: TraceFile, fields: list[str], columns: tuple[str, ...], required: int
) -> dict[str, int]:
    """A CSV header's columns among ``columns`` by index; it must start with the first
    ``required`` of them."""
    header = [h.strip() for h in fields]
    if header[0:1]:
        header[0] = header[0].lstrip("\ufeff")
    if header[:required] != list(columns[:required]):
        expected = ",".join(columns)
        raise WorkloadError(trace.source, "line 1", f"expected the header {expected}")
    return {c: i for i, c in enumerate(header) if c in columns}


class PodSource(JobSource):
    """The kept pods of a pod list in file (creation) order, each row checked as it is
    read; one pod a task, so ``tasks`` is ``jobs``."""

    def __init__(self, pods: TraceFile, cluster: ClusterSpec, scan: _Scan) -> None:
        self.pods = pods
        self.source = pods.source
        self.cluster = cluster
        self.scan = scan
        self.jobs = self.tasks = scan.kept

    def __iter__(self) -> Iterator[JobSpec]:
        fitting: set[Resources] = set()
        dropped: Counter[str] = Counter()
        t0 = self.scan.t0
        for r in iter_rows(self.pods, POD_COLUMNS, 5):
            pod = read_pod(r, self.cluster, fitting, dropped)
            if pod is not None:
                created, name, qos, ask, run_s = pod
                stage = StageSpec("pod", ask, (duration(run_s),))
                yield JobSpec(name, qos, created - t0, (stage,), qos)
        left_out(self.source, dropped)

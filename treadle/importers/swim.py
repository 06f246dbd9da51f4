"""SWIM's Facebook MapReduce workloads (``swim/FB-20*.tsv``; docs: traces.md;
SWIMProjectUCB/SWIM ``workloadSuite/``).

A line is ``job_id, submit_s, gap_s, map_input_bytes, shuffle_bytes,
reduce_output_bytes`` separated by tabs (the ``withInputPaths`` files add an input path
id and two empty columns); there are no durations, users or names. Mapping to the model,
with ``SwimOptions``' defaults in brackets:

- bytes to tasks is SWIM's own replay rule (``GenerateReplayScript.java``): each byte
  count is scaled by ``cluster_size`` / ``raw_cluster_size`` [150 / 600 for FB-2009 files,
  150 / 3000 for FB-2010 ones, told by the file name; 600 otherwise] in integer
  arithmetic, then floored at 64 MiB input and 1,024 bytes shuffle and output; maps =
  ceil(input / ``partition_bytes``) [64 MiB]; reduces = round((shuffle + output) /
  ``data_per_reduce``) [64 MiB], at least 1, and ``cluster_size`` // 5 when above
  ``cluster_size``. As in SWIM, every job has a reduce stage (map-only jobs get one small
  reduce);
- a job is two stages, ``map`` then ``reduce`` behind a barrier, of 1-vcore tasks (the
  cluster is ``cluster_size`` one-vcore nodes: SWIM's replay cluster as task slots);
- durations (the model, since the trace has none): a map lasts ``task_overhead_s`` [2 s]
  + its partition's bytes / ``map_rate`` [8 MiB/s] (every partition is full but the
  last); a reduce lasts ``task_overhead_s`` + (shuffle + output) / reduces /
  ``reduce_rate`` [4 MiB/s]; each task's time is then multiplied by exp(s Z - s^2 / 2), Z
  standard normal, s = ``spread`` [0.5] (a mean-one log-normal), drawn from one
  ``random.Random(seed)`` [0] in file order, map tasks before reduce tasks. Task order is
  not sorted by duration;
- submit time is ``submit_s`` less the first job's; the job is named ``job<id>``, or
  ``<inputPath>:job<id>`` in the ``withInputPaths`` files (the input path is the job's
  recurring name, the part before the ``:``); users are synthetic, ``user<k>`` with k =
  the job's line index mod ``users`` [10] (round robin), or in the ``withInputPaths``
  files the input path's number mod ``users``, so jobs over the same input share a user.
  One queue, ``default``.

``SwimOptions.reshape`` applies the SLearn experiments' width cap and arrival stretch
(``treadle.importers.tabular.Reshape``); ``treadle sim`` uses the defaults and no
reshaping. A malformed line is an error naming the file, the line and the field.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from treadle.errors import WorkloadError
from treadle.importers.common import TraceFile, default_users
from treadle.importers.tabular import (
    Reshape,
    Row,
    TaskBudget,
    duration,
    head,
    lines,
)
from treadle.model import DEFAULT_RACK, ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.resources import Resources

COLUMNS = ("job_id", "submit_s", "gap_s", "map_input_bytes", "shuffle_bytes", "reduce_output_bytes")
PATH_COLUMN = "input_path"
MiB = 1 << 20
MAX_BYTES = 1e18
MAX_NODES = 100_000
MIN_INPUT = 67_108_864
MIN_SHUFFLE_OUTPUT = 1024
RAW_CLUSTER_SIZES = {"FB-2009": 600, "FB-2010": 3000}
"""Machines in the production cluster each sample came from (SWIM's README: 600 for
FB-2009; 3,000 for FB-2010, the figure the SWIM papers quote)."""
_LINE = re.compile(r"^job\d+\t")
TASK = Resources(vcores=1)


@dataclass(frozen=True)
class SwimOptions:
    cluster_size: int = 150
    raw_cluster_size: int | None = None
    """None: from the file name (``RAW_CLUSTER_SIZES``), else 600."""
    partition_bytes: int = 64 * MiB
    data_per_reduce: int = 64 * MiB
    map_rate: float = 8 * MiB
    reduce_rate: float = 4 * MiB
    task_overhead_s: float = 2.0
    spread: float = 0.5
    users: int = 10
    seed: int = 0
    reshape: Reshape = field(default_factory=Reshape)

    def __post_init__(self) -> None:
        for name in ("cluster_size", "partition_bytes", "data_per_reduce", "users"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.cluster_size > MAX_NODES:
            raise ValueError(f"cluster_size must be <= {MAX_NODES}, got {self.cluster_size}")
        if self.raw_cluster_size is not None and self.raw_cluster_size < 1:
            raise ValueError(f"raw_cluster_size must be >= 1, got {self.raw_cluster_size}")
        for name in ("map_rate", "reduce_rate"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("task_overhead_s", "spread"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")


def sniff(trace: TraceFile) -> bool:
    first = head(trace, 400).partition("\n")[0]
    return bool(_LINE.match(first)) and len(first.split("\t")) >= len(COLUMNS)


def load_trace(trace: TraceFile, nodes_file: str | None) -> Workload:
    if nodes_file is not None:
        raise WorkloadError(
            trace.source, None, "a nodes file applies only to SLS, Rumen and Alibaba 2023 traces"
        )
    return load_swim_file(trace, SwimOptions())


def load_swim(path: str | Path, options: SwimOptions | None = None, source: str = "") -> Workload:
    return load_swim_file(TraceFile(Path(path), source), options or SwimOptions())


def raw_cluster_size(path: Path, options: SwimOptions) -> int:
    if options.raw_cluster_size is not None:
        return options.raw_cluster_size
    return next((v for k, v in RAW_CLUSTER_SIZES.items() if path.name.startswith(k)), 600)


def tasks_of(
    input_b: int, shuffle_b: int, output_b: int, raw: int, o: SwimOptions
) -> tuple[int, int, int, int, int]:
    """SWIM's rule: (maps, reduces, scaled input, shuffle, output bytes)."""
    size = o.cluster_size
    input_b = max(input_b * size // raw, MIN_INPUT)
    shuffle_b = max(shuffle_b * size // raw, MIN_SHUFFLE_OUTPUT)
    output_b = max(output_b * size // raw, MIN_SHUFFLE_OUTPUT)
    maps = -(-input_b // o.partition_bytes)
    reduces = max(_java_round((shuffle_b + output_b) / o.data_per_reduce), 1)
    if reduces > size:
        reduces = size // 5
    return maps, max(reduces, 1), input_b, shuffle_b, output_b


def _java_round(x: float) -> int:
    return math.floor(x + 0.5)  # Math.round: half up, unlike Python's round


def load_swim_file(trace: TraceFile, o: SwimOptions) -> Workload:
    source = trace.source
    raw = raw_cluster_size(trace.path, o)
    rng = random.Random(o.seed)
    sigma = o.spread
    budget = TaskBudget(source)
    names = {c: i for i, c in enumerate((*COLUMNS, PATH_COLUMN))}
    jobs: list[JobSpec] = []
    users: list[str] = []

    def factor() -> float:
        return math.exp(sigma * rng.gauss(0.0, 1.0) - sigma * sigma / 2) if sigma else 1.0

    for n, line in lines(trace):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < len(COLUMNS):
            raise WorkloadError(
                source,
                f"line {n}",
                f"has {len(fields)} fields, expected {len(COLUMNS)} ({', '.join(COLUMNS)})",
            )
        row = Row(source, n, names, fields)
        job_id = row.text("job_id")
        if not job_id:
            raise row.error("job_id", "is empty")
        submit = row.number("submit_s", low=0)
        row.number("gap_s", low=0)
        input_b, shuffle_b, output_b = (
            int(row.number(c, low=0, high=MAX_BYTES)) for c in COLUMNS[3:]
        )
        maps, reduces, input_b, shuffle_b, output_b = tasks_of(input_b, shuffle_b, output_b, raw, o)
        budget.take(row, "map_input_bytes", maps)
        budget.take(row, "shuffle_bytes", reduces)
        path = fields[6].strip() if len(fields) > 6 else ""
        last = input_b - (maps - 1) * o.partition_bytes
        map_s = [
            duration(
                (o.task_overhead_s + (o.partition_bytes if i < maps - 1 else last) / o.map_rate)
                * factor()
            )
            for i in range(maps)
        ]
        per_reduce = (shuffle_b + output_b) / reduces
        reduce_s = [
            duration((o.task_overhead_s + per_reduce / o.reduce_rate) * factor())
            for _ in range(reduces)
        ]
        if path:
            digits = re.sub(r"\D", "", path)
            user = f"user{int(digits[-9:] or 0) % o.users}"
            name = f"{path}:{job_id}"
        else:
            user = f"user{len(jobs) % o.users}"
            name = job_id
        stages = (
            StageSpec("map", TASK, tuple(map_s)),
            StageSpec("reduce", TASK, tuple(reduce_s), ("map",)),
        )
        jobs.append(JobSpec(name, user, submit, stages))
        users.append(user)
    if not jobs:
        raise WorkloadError(source, None, "no job lines")
    if len({j.name for j in jobs}) != len(jobs):
        raise WorkloadError(source, None, "a job id appears twice")
    t0 = min(j.submit_s for j in jobs)
    jobs = sorted((replace(j, submit_s=j.submit_s - t0) for j in jobs), key=lambda j: j.submit_s)
    node = Resources(vcores=1)
    cluster = ClusterSpec(
        tuple(NodeSpec(f"node{i}", node, DEFAULT_RACK) for i in range(1, o.cluster_size + 1))
    )
    wl = Workload(trace.path.stem, cluster, tuple(jobs), users=default_users(sorted(set(users))))
    return o.reshape.apply(wl) if o.reshape != Reshape() else wl

"""The UWFQ paper's scenario configs (the ``uwfq-scenarios`` trace; docs: traces.md), as workloads.

A config (kazemaksOG/spark-benchmark-tool's format) is a JSON list of users, each
``{user, workloads: [...]}``; a workload entry has ``workloadName``, ``className``,
``totalIterations``, ``startTimeMs``, ``poissonRateInMinutes``, ``frequency`` (PARA or
SEQ) and, for the macro configs, ``params: {task_runtime_s, job_runtime_s}``. The mapping
used here (docs: traces.md, "uwfq-scenarios"):

- **Cluster**: 8 nodes of ``{vcores: 4}`` (the authors' 8 executors x 4 cores), plus one
  ``driver`` node holding ``{driver: DRIVER_SLOTS}``: the Spark driver, whose per-job work
  (planning, file listing, launching) is the micro jobs' fixed overhead.
- **Micro classes** (``Loop20``, ``Loop100``, ...): each iteration i of a workload entry is
  one job ``{user}:{workloadName}_{i}`` of three chained stages: ``plan`` (one task on the
  driver, half the fixed overhead), ``compute`` (``tasks`` tasks of 1 vcore holding the
  class's slot-time S, the oracle's value) and ``collect`` (one driver task, the other
  half). The fixed overhead is ``driver_s``, by default calibrated so that the tiny class
  alone takes its idle response time: 0.852 s less its compute (S/32 = 0.048 s) less what
  the simulator itself spends on three stage transitions (about 7 heartbeats, 0.07 s at
  10 ms), 0.734 s. What a class's idle response time has beyond that is read as
  partition skew: the longest compute task takes ``idle - overhead - 7 heartbeats`` when
  that exceeds S / tasks, and the others share the rest of S equally (Loop100: 1.40 s
  against a mean of 0.84 s). Two driver slots make 120 tiny jobs take about
  120 x 0.734 / 2 = 44 s of driver time: the paper's Scenario 2 ran 43-51 s.
- **Arrivals**: PARA submits iteration 0 at ``startTimeMs`` and each next one w later; SEQ
  submits the next one w after the previous one ends (a closed loop,
  ``Workload.follows``). w = floor(-ln(U) / rate x 60000) ms with U drawn by
  ``java.util.Random(hash(user + workloadName)).nextDouble()`` (``javarandom``), 0 when
  the rate is 0, which reproduces the spec's submit times to the millisecond. (The
  authors' Java code reaches a restart of the process at SEQ: it starts the next job at
  the later of the previous job's end and its start + w; the two agree when the rate is
  0, as in every SEQ entry of the shipped configs.)
- **Macro** (``LoopCustom``): the entries of one (user, workloadName) are one job, each
  entry a parallel stage ``task{k}`` of ``tasks`` equal 1-vcore tasks holding
  ``task_runtime_s``, submitted at ``startTimeMs``; no fixed overhead (``macro_driver_s``).

Every error names the file and a field path such as ``[3].workloads[0].className``
(indices count from 0). Sizes are bounded before anything is allocated (``MAX_JOBS``,
``MAX_TASKS``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from treadle.errors import WorkloadError
from treadle.importers.common import JsonObject, TraceFile, default_users
from treadle.importers.javarandom import JavaRandom, java_string_hash
from treadle.model import (
    DEFAULT_RACK,
    MIN_DURATION_S,
    ClusterSpec,
    Follow,
    JobSpec,
    NodeSpec,
    StageSpec,
    Workload,
)
from treadle.resources import Resources

MAX_JOBS = 100_000
MAX_TASKS = 10_000_000
MAX_RATE_PER_MIN = 1e6
DRIVER = "driver"
DRIVER_NODE = "driver"


class JobClass(NamedTuple):
    """A job class of the authors' harness: the oracle's slot-time (core-seconds) and the
    idle response time the paper's tables divide by (None where none was measured)."""

    slot_s: float
    idle_s: float | None = None


JOB_CLASSES: dict[str, JobClass] = {
    "Loop20": JobClass(1.523, 0.852),
    "Loop100": JobClass(26.926, 2.2055),
    "Loop500": JobClass(57.115),
    "Loop1000": JobClass(131.115, 10.864),
    "ShortOperation": JobClass(15.933),
    "LongOperation": JobClass(136.486),
    "SuperShortOperation": JobClass(2.671),
}
"""Class (the simple name of ``className``) -> its oracle slot-time and idle RT (spec §1.5,
§4.2). ``LoopCustom`` takes its size from each entry's ``params``."""
MACRO_CLASS = "LoopCustom"
CALIBRATION_CLASS = "Loop20"
SIM_HEARTBEATS_PER_JOB = 7


@dataclass(frozen=True)
class UwfqOptions:
    """How a config becomes a workload; the defaults are the spec's reading."""

    nodes: int = 8
    vcores_per_node: int = 4
    heartbeat_s: float = 0.01
    tasks: int = 32
    """Compute tasks per stage (the default scan's 32 partitions)."""
    driver_s: float | None = None
    """A micro job's fixed overhead on the driver, split between ``plan`` and ``collect``;
    None: calibrated (``overhead_s``)."""
    driver_slots: int = 2
    skew: bool = True
    """Give a class's idle RT beyond the overhead to its longest compute task."""
    macro_driver_s: float = 0.0
    classes: dict[str, JobClass] = field(default_factory=lambda: dict(JOB_CLASSES))

    def __post_init__(self) -> None:
        checks = (
            (self.nodes >= 1, "nodes must be >= 1"),
            (self.vcores_per_node >= 1, "vcores_per_node must be >= 1"),
            (self.tasks >= 1, "tasks must be >= 1"),
            (math.isfinite(self.heartbeat_s) and self.heartbeat_s > 0, "heartbeat_s must be > 0"),
            (self.driver_s is None or 0 <= self.driver_s < math.inf, "driver_s must be >= 0"),
            (self.driver_slots >= 1, "driver_slots must be >= 1"),
        )
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @property
    def sim_latency_s(self) -> float:
        """What the simulator spends on a 3-stage job beyond its tasks: AM calls and
        heartbeats at each stage's start and end, measured as about 7 heartbeats."""
        return SIM_HEARTBEATS_PER_JOB * self.heartbeat_s

    @property
    def overhead_s(self) -> float:
        """``driver_s``, or the tiny class's idle RT less its compute and the simulator's
        own latency (0.852 - 1.523 / 32 - 0.07 = 0.734 s at 10 ms heartbeats)."""
        if self.driver_s is not None:
            return self.driver_s
        tiny = JOB_CLASSES[CALIBRATION_CLASS]
        assert tiny.idle_s is not None
        cores = self.nodes * self.vcores_per_node
        return max(0.0, tiny.idle_s - tiny.slot_s / cores - self.sim_latency_s)


def sniff(trace: TraceFile) -> bool:
    """A JSON list whose first element has ``user`` and ``workloads``."""
    head = trace.text.lstrip()[:4096]
    return head.startswith("[") and '"workloads"' in head and '"user"' in head


def load_trace(trace: TraceFile, nodes_file: str | None) -> Workload:
    if nodes_file is not None:
        raise WorkloadError(trace.source, None, "a nodes file applies only to SLS and Rumen traces")
    return load_config(trace)


def load_uwfq(path: str | Path, options: UwfqOptions | None = None, source: str = "") -> Workload:
    """The workload of the scenario config at ``path``."""
    return load_config(TraceFile(Path(path), source), options)


class _Entry(NamedTuple):
    user: str
    name: str
    cls: str
    iterations: int
    start_s: float
    rate: float
    seq: bool
    task_s: float  # macro only
    where: str


def load_config(trace: TraceFile, options: UwfqOptions | None = None) -> Workload:
    opts = options or UwfqOptions()
    source = trace.source
    values = trace.json_values
    users = [JsonObject(source, f"[{i}]", v) for i, v in enumerate(values)]
    entries: list[_Entry] = []
    total_jobs = 0
    for u in users:
        name = u.text("user")
        for w in u.objects("workloads"):
            e = _entry(w, name, opts)
            total_jobs += e.iterations
            if total_jobs > MAX_JOBS:
                raise w.error("totalIterations", f"the config holds more than {MAX_JOBS} jobs")
            entries.append(e)
    if not entries:
        raise WorkloadError(source, None, "the config holds no workloads")
    macro = [e for e in entries if e.cls == MACRO_CLASS]
    micro = [e for e in entries if e.cls != MACRO_CLASS]
    jobs: list[JobSpec] = []
    follows: dict[str, Follow] = {}
    tasks = 0
    for e in micro:
        for job, follow in _micro_jobs(e, opts):
            tasks += job.tasks
            if tasks > MAX_TASKS:
                raise WorkloadError(
                    source, e.where, f"the config holds more than {MAX_TASKS} tasks"
                )
            jobs.append(job)
            if follow is not None:
                follows[job.name] = follow
    jobs.extend(_macro_jobs(macro, opts, source))
    jobs.sort(key=lambda j: j.submit_s)  # stable: ties keep declaration order
    names = [u.text("user") for u in users]
    return Workload(
        trace.path.stem,
        uwfq_cluster(opts),
        tuple(jobs),
        users=default_users(names),
        follows=follows,
    )


def uwfq_cluster(opts: UwfqOptions) -> ClusterSpec:
    """The authors' 32 cores as ``nodes`` nodes, and the driver node."""
    node = Resources(vcores=opts.vcores_per_node)
    nodes = [NodeSpec(f"node{i + 1}", node, DEFAULT_RACK) for i in range(opts.nodes)]
    nodes.append(NodeSpec(DRIVER_NODE, Resources({DRIVER: opts.driver_slots}), DEFAULT_RACK))
    return ClusterSpec(tuple(nodes), opts.heartbeat_s)


def _entry(w: JsonObject, user: str, opts: UwfqOptions) -> _Entry:
    name = w.text("workloadName")
    cls = w.text("className").rpartition(".")[2]
    if cls != MACRO_CLASS and cls not in opts.classes:
        known = ", ".join([*opts.classes, MACRO_CLASS])
        raise w.error("className", f"unknown job class {cls!r}; known: {known}")
    iterations = w.number("totalIterations")
    if not iterations.is_integer() or not 1 <= iterations <= MAX_JOBS:
        raise w.error(
            "totalIterations", f"expected a whole number 1..{MAX_JOBS}, got {iterations:g}"
        )
    start_ms = w.number("startTimeMs", 0.0)
    if start_ms < 0:
        raise w.error("startTimeMs", f"must be >= 0, got {start_ms:g}")
    rate = w.number("poissonRateInMinutes", 0.0)
    if not 0 <= rate <= MAX_RATE_PER_MIN:
        raise w.error("poissonRateInMinutes", f"must be 0..{MAX_RATE_PER_MIN:g}, got {rate:g}")
    frequency = w.text("frequency", "PARA").upper()
    if frequency not in ("PARA", "SEQ"):
        raise w.error("frequency", f"expected PARA or SEQ, got {frequency!r}")
    task_s = 0.0
    if cls == MACRO_CLASS:
        params = w.object("params")
        task_s = params.number("task_runtime_s")
        if task_s <= 0:
            raise params.error("task_runtime_s", f"must be > 0, got {task_s:g}")
    return _Entry(
        user, name, cls, int(iterations), start_ms / 1000, rate, frequency == "SEQ", task_s, w.path
    )


def poisson_waits_ms(user: str, workload: str, rate_per_min: float, count: int) -> list[int]:
    """The authors' waits (ms) between a workload's ``count`` jobs: floor(-ln U / rate x
    60000) with U from ``java.util.Random(hash(user + workload))``; all 0 at rate 0."""
    if rate_per_min == 0:
        return [0] * count
    rng = JavaRandom(java_string_hash(user + workload))
    return [math.floor(-math.log(rng.next_double()) / rate_per_min * 60000) for _ in range(count)]


def submit_times_s(e: _Entry) -> list[float]:
    """PARA submit times: the start, then each previous one plus its wait."""
    waits = poisson_waits_ms(e.user, e.name, e.rate, e.iterations - 1)
    ms = round(e.start_s * 1000)
    out = [ms]
    for w in waits:
        ms += w
        out.append(ms)
    return [t / 1000 for t in out]


def _micro_jobs(e: _Entry, opts: UwfqOptions) -> list[tuple[JobSpec, Follow | None]]:
    stages = micro_stages(opts.classes[e.cls], opts)
    waits = poisson_waits_ms(e.user, e.name, e.rate, e.iterations - 1)
    times = submit_times_s(e)
    out: list[tuple[JobSpec, Follow | None]] = []
    for i in range(e.iterations):
        name = f"{e.user}:{e.name}_{i}"
        follow = None
        if e.seq and i > 0:
            follow = Follow(f"{e.user}:{e.name}_{i - 1}", waits[i - 1] / 1000)
        out.append((JobSpec(name, e.user, times[i], stages), follow))
    return out


def micro_stages(cls: JobClass, opts: UwfqOptions) -> tuple[StageSpec, ...]:
    """plan (driver) -> compute (``tasks`` x 1 vcore, S in all) -> collect (driver)."""
    n = opts.tasks
    mean = cls.slot_s / n
    longest = mean
    overhead = opts.overhead_s
    if opts.skew and cls.idle_s is not None and n > 1:
        longest = min(max(mean, cls.idle_s - overhead - opts.sim_latency_s), cls.slot_s)
    rest = (cls.slot_s - longest) / (n - 1) if n > 1 else longest
    durations = (longest,) + (max(rest, MIN_DURATION_S),) * (n - 1)
    compute = StageSpec("compute", Resources(vcores=1), durations)
    if overhead <= 0:
        return (compute,)
    half = max(overhead / 2, MIN_DURATION_S)
    driver = Resources({DRIVER: 1})
    return (
        StageSpec("plan", driver, (half,)),
        StageSpec("compute", Resources(vcores=1), durations, ("plan",)),
        StageSpec("collect", driver, (half,), ("compute",)),
    )


def _macro_jobs(entries: list[_Entry], opts: UwfqOptions, source: str) -> list[JobSpec]:
    groups: dict[tuple[str, str], list[_Entry]] = {}
    for e in entries:
        groups.setdefault((e.user, e.name), []).append(e)
    jobs = []
    for (user, name), group in groups.items():
        submit = group[0].start_s
        for e in group[1:]:
            if e.start_s != submit:
                raise WorkloadError(
                    source, f"{e.where}.startTimeMs", f"differs within job {user}:{name}"
                )
        stages = [
            StageSpec(f"task{k}", Resources(vcores=1), (e.task_s / opts.tasks,) * opts.tasks)
            for k, e in enumerate(x for x in group for _ in range(x.iterations))
        ]
        if opts.macro_driver_s > 0:
            plan = StageSpec("plan", Resources({DRIVER: 1}), (opts.macro_driver_s,))
            stages = [plan] + [
                StageSpec(s.name, s.resources, s.durations, ("plan",)) for s in stages
            ]
        jobs.append(JobSpec(f"{user}:{name}", user, submit, tuple(stages)))
    return jobs

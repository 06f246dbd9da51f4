"""SLS's synthetic generator (SYNTH): a JSON description of workloads, drawn into jobs.

The file, as ``SynthTraceJobProducer`` reads it (unknown fields ignored)::

    {"num_nodes": 20, "nodes_per_rack": 4, "num_jobs": 10, "rand_seed": 2,
     "workloads": [{"workload_name": "w", "workload_weight": 0.5, "queue_name": "q",
       "job_classes": [{"class_name": "c", "user_name": "u", "class_weight": 1.0,
         "duration": {"val": 60, "std": 5}, "reservation": {"val": 0.5},
         "deadline_factor": {"val": 10},
         "tasks": [{"type": "map", "count": {"val": 5, "std": 1},
                    "time": {"val": 10, "std": 2}, "max_memory": {"val": 1024},
                    "max_vcores": {"val": 1}}]}],
       "time_distribution": [{"time": 1, "weight": 100}, {"time": 60, "weight": 0}]}]}

A job class in the older flat form (``mtasks_avg``, ``mtime_stddev``,
``map_max_memory_avg``, ``rtasks_avg``, ``dur_avg``, ``chance_of_reservation``, ...) is
converted as SLS converts it: a ``map`` and a ``reduce`` task type. A value (``Sample``)
is a constant (``val``), a distribution (``val`` and ``std``: log-normal with that mean
and standard deviation, ``sigma^2 = ln(1 + std^2 / val^2)``, ``mu = ln(val) - sigma^2 / 2``;
``"dist": "NORM"`` a normal one; a ``std`` of 0 is ``val / 6``), or a weighted choice
(``discrete``, ``weights``); integers are rounded as Java's ``Math.round``.

Drawing follows SLS's order with its generator, ``java.util.Random(rand_seed)``
(``treadle.importers.javarandom``): each distribution's seed, then per job the workload
(by ``workload_weight``), the submission time (a ``time_distribution`` bucket by weight,
then uniform whole seconds up to the next bucket's start) and the job class (by
``class_weight``); then, in submission order, each job's tasks: per task type a count,
one memory (at least 1024 MB) and vcores (at least 1) ask, and a time per task. Each
distribution draws from its own generator seeded from the main one, as in SLS; those
draws are Python's (Box-Muller on ``random.Random``), not SLS's Well19937c, so the same
file and seed always give the same jobs here, though not SLS's own numbers.

Mapping to the model: jobs are named ``<class_name>_<NNNNNN>`` counted from 0 in
submission order (ties keep drawing order), user ``user_name``, queue ``queue_name``,
submitted at their time less the earliest one's. A task lasts its drawn time in
milliseconds (SLS's container lifetime unit; at least 1 ms); task types become stages,
``reduce`` depending on ``map`` as in SLS's MapReduce AM, other types (``stream``)
standalone. A job drawn with no task at all is left out. Job duration, deadlines and
reservations only steer SLS's reservation system and are drawn but not used. The
cluster is the nodes file if one is given, else ``num_nodes`` nodes of 8 vcores and
8192 MB, ``node0`` .. in racks ``rack0`` .. of ``nodes_per_rack``, dealt round-robin as
SLS's ``generateNodes`` does.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

from treadle.errors import WorkloadError
from treadle.importers.common import JsonObject, TraceFile, check_fits, default_users, flat_queues
from treadle.importers.javarandom import JavaRandom
from treadle.importers.sls import DEFAULT_NODE, read_nodes_file
from treadle.model import (
    MIN_DURATION_S,
    ClusterSpec,
    JobSpec,
    NodeSpec,
    StageSpec,
    Workload,
    topological_stages,
)
from treadle.resources import MEMORY_MB, VCORES, Resources

MIN_MEMORY_MB, MIN_VCORES = 1024, 1
"""SynthJob's floors on a task's ask."""

_LONG = (1 << 64) - 1


def sniff(trace: TraceFile) -> bool:
    """A SYNTH file: one object whose ``workloads`` hold ``job_classes``."""
    values = trace.json_values
    if not values or not isinstance(values[0], dict):
        return False
    workloads = values[0].get("workloads")
    return (
        isinstance(workloads, list)
        and bool(workloads)
        and isinstance(workloads[0], dict)
        and "job_classes" in workloads[0]
    )


def _list(obj: JsonObject, key: str) -> list[object]:
    value = obj._d.get(key)
    if not isinstance(value, list) or not value:
        raise obj.error(key, "expected a non-empty list")
    return value


def java_round(x: float) -> int:
    """``Math.round(double)``: the nearest integer, halves up."""
    return math.floor(x + 0.5)


class Sample:
    """One SYNTH value: constant, distribution or weighted choice (SLS's ``Sample``)."""

    def __init__(self, obj: JsonObject | float | None) -> None:
        self.source = obj.source if isinstance(obj, JsonObject) else ""
        self.where = obj.path if isinstance(obj, JsonObject) else ""
        self.const: float | None = None
        self.discrete: list[str] | None = None
        self.weights: list[float] = []
        self.dist: str | None = None
        self._rng: random.Random | None = None
        self._spare: float | None = None
        self._main: JavaRandom | None = None
        if obj is None or isinstance(obj, int | float):
            self.const = float(obj or 0)
            return
        self._read(obj)

    def _read(self, obj: JsonObject) -> None:
        if obj.has("val"):
            if obj.has("discrete") or obj.has("weights"):
                raise obj.error("discrete", "a value with 'val' takes no 'discrete' or 'weights'")
            val = obj.number("val")
            if not obj.has("std"):
                if obj.has("dist"):
                    raise obj.error("dist", "a constant ('val' without 'std') takes no 'dist'")
                self.const = val
                return
            self.dist = obj.text("dist", "LOGNORM")
            if self.dist not in ("LOGNORM", "NORM"):
                raise obj.error("dist", f"expected LOGNORM or NORM, got {self.dist!r}")
            self.mean, self.std = val, obj.number("std") or val / 6
            if val <= 0:
                raise obj.error("val", f"a distribution's mean must be > 0, got {val:g}")
            return
        if not obj.has("discrete"):
            raise obj.error("val", "required field is missing (or give 'discrete')")
        raw = _list(obj, "discrete")
        self.discrete = [str(v) for v in raw]
        if obj.has("weights"):
            weights = [
                JsonObject(obj.source, obj.where("weights"), {f"[{i}]": w}).number(f"[{i}]")
                for i, w in enumerate(_list(obj, "weights"))
            ]
            if len(weights) != len(raw):
                raise obj.error("weights", f"{len(weights)} weights for {len(raw)} values")
            self.weights = weights
        else:
            self.weights = [1.0] * len(raw)

    def init(self, main: JavaRandom) -> None:
        """SLS's ``Sample.init``: a distribution takes its seed from the main generator."""
        self._main = main
        if self.dist is not None:
            self._rng = random.Random(main.next_long() & _LONG)

    def _gaussian(self) -> float:
        assert self._rng is not None
        if self._spare is not None:
            value, self._spare = self._spare, None
            return value
        x, y = self._rng.random(), 1.0 - self._rng.random()
        r = math.sqrt(-2 * math.log(y))
        self._spare = r * math.sin(2 * math.pi * x)
        return r * math.cos(2 * math.pi * x)

    def value(self) -> float:
        if self.const is not None:
            return self.const
        if self.discrete is not None:
            assert self._main is not None
            text = self.discrete[weighted(self.weights, self._main, self.source, self.where)]
            try:
                return float(text)
            except ValueError:
                raise WorkloadError(self.source, self.where, f"{text!r} is not a number") from None
        z = self._gaussian()
        if self.dist == "NORM":
            return self.mean + self.std * z
        sigma2 = math.log1p(self.std**2 / self.mean**2)
        return math.exp(math.log(self.mean) - sigma2 / 2 + math.sqrt(sigma2) * z)

    def integer(self) -> int:
        return java_round(self.value())


def weighted(weights: list[float], rand: JavaRandom, source: str, where: str) -> int:
    """``SynthUtils.getWeighted``: an index drawn with probability proportional to weight."""
    total = sum(weights)
    if not total > 0:
        raise WorkloadError(source, where, "the weights sum to 0; nothing can be drawn")
    r = rand.next_double() * total
    cur = 0.0
    for i, w in enumerate(weights):
        cur += w
        if cur > r:
            return i
    return len(weights) - 1


@dataclass
class _TaskType:
    kind: str
    count: Sample
    time: Sample
    memory: Sample
    vcores: Sample


@dataclass
class _JobClass:
    name: str
    user: str
    weight: float
    duration: Sample
    reservation: Sample
    deadline: Sample
    tasks: list[_TaskType]

    def init(self, rand: JavaRandom) -> None:
        for s in (self.deadline, self.duration, self.reservation):
            s.init(rand)
        for t in self.tasks:
            for s in (t.count, t.time, t.memory, t.vcores):
                s.init(rand)


@dataclass
class _Workload:
    queue: str
    weight: float
    classes: list[_JobClass]
    times: list[tuple[int, float]]
    source: str
    where: str

    def submission_s(self, rand: JavaRandom) -> int:
        weights = [w for _, w in self.times]
        i = weighted(weights, rand, self.source, f"{self.where}.time_distribution")
        start = self.times[i][0]
        end = self.times[min(i + 1, len(self.times) - 1)][0]
        return start + (rand.next_int(end - start) if end > start else 0)


def _sample(obj: JsonObject, key: str) -> Sample:
    return Sample(obj.object(key) if obj.has(key) else None)


def _job_class(c: JsonObject) -> _JobClass:
    if c.has("tasks"):
        tasks = [
            _TaskType(
                t.text("type", "map"),
                _sample(t, "count"),
                _sample(t, "time"),
                _sample(t, "max_memory"),
                _sample(t, "max_vcores"),
            )
            for t in c.objects("tasks")
        ]
        samples = [_sample(c, k) for k in ("duration", "reservation", "deadline_factor")]
    else:  # the older flat form, converted as SLS's validateJobDef does
        tasks = [
            _TaskType(kind, *(_flat(c, f"{p}_avg", f"{p}_stddev") for p in prefixes))
            for kind, prefixes in (
                ("map", ("mtasks", "mtime", "map_max_memory", "map_max_vcores")),
                ("reduce", ("rtasks", "rtime", "reduce_max_memory", "reduce_max_vcores")),
            )
        ]
        samples = [
            _flat(c, "dur_avg", "dur_stddev"),
            Sample(c.number("chance_of_reservation", 0)),
            _flat(c, "deadline_factor_avg", "deadline_factor_stddev"),
        ]
    duration, reservation, deadline = samples
    return _JobClass(
        c.text("class_name", "class"),
        c.text("user_name", "default"),
        c.number("class_weight", 0),
        duration,
        reservation,
        deadline,
        tasks,
    )


def _flat(c: JsonObject, avg: str, std: str) -> Sample:
    return Sample(JsonObject(c.source, c.path, {"val": c.number(avg, 0), "std": c.number(std, 0)}))


def _workload(w: JsonObject) -> _Workload:
    buckets = w.objects("time_distribution")
    times = [(int(t.number("time", 0)), t.number("weight", 0)) for t in buckets]
    if not times:
        raise w.error("time_distribution", "lists no time buckets")
    classes = [_job_class(c) for c in w.objects("job_classes")]
    if not classes:
        raise w.error("job_classes", "lists no job classes")
    queue, weight = w.text("queue_name", "default"), w.number("workload_weight", 0)
    return _Workload(queue, weight, classes, times, w.source, w.path)


@dataclass
class _Story:
    """A job before its tasks are drawn: SLS's ``StoryParams``."""

    submit_s: int
    queue: str
    job_class: _JobClass


def load_trace(trace: TraceFile, nodes_file: str | None = None) -> Workload:
    """``treadle.importers.FORMATS``' loader: a SYNTH file and an optional SLS nodes file."""
    top = JsonObject(trace.source, "", trace.json_values[0])
    num_jobs = top.number("num_jobs", 0)
    if num_jobs < 1 or not num_jobs.is_integer():
        raise top.error("num_jobs", f"expected a whole number >= 1, got {num_jobs:g}")
    workloads = [_workload(w) for w in top.objects("workloads")]
    seed = int(top.number("rand_seed", 0))
    rand = JavaRandom(seed)
    for w in workloads:
        for c in w.classes:
            c.init(rand)
    stories = []
    for _ in range(int(num_jobs)):
        w = workloads[weighted([x.weight for x in workloads], rand, top.source, "workloads")]
        submit_s = w.submission_s(rand)
        c = w.classes[weighted([x.weight for x in w.classes], rand, top.source, w.where)]
        stories.append(_Story(submit_s, w.queue, c))
    stories.sort(key=lambda s: s.submit_s)  # stable: ties keep drawing order
    if nodes_file is not None:
        cluster = ClusterSpec(read_nodes_file(nodes_file))
    else:
        cluster = _generated_cluster(top)
    jobs = []
    for i, story in enumerate(stories):
        _draw_job_header(story.job_class, rand)
        job = _job(story, f"{story.job_class.name}_{i:06d}", cluster, top.source)
        if job is not None:
            jobs.append(job)
    if not jobs:
        raise top.error(None, "every drawn job has no tasks")
    first = min(j.submit_s for j in jobs)
    jobs = [j if not first else _shifted(j, first) for j in jobs]
    return Workload(
        name=Path(trace.source).stem,
        cluster=cluster,
        jobs=tuple(jobs),
        queues=flat_queues(j.queue for j in jobs),
        users=default_users(j.user for j in jobs),
        seed=seed & 0x7FFFFFFF,
    )


def _draw_job_header(c: _JobClass, rand: JavaRandom) -> None:
    """What SynthJob's constructor draws before the tasks: the duration, the reservation
    coin, the deadline factor, then a new seed for the shared generator."""
    c.duration.integer()
    rand.next_double()
    c.reservation.value()
    c.deadline.value()
    rand.set_seed(rand.next_long())


def _job(story: _Story, name: str, cluster: ClusterSpec, source: str) -> JobSpec | None:
    """The job's tasks, drawn as SynthJob draws them; None when it has none."""
    c = story.job_class
    stages: list[tuple[str, StageSpec]] = []
    kinds: dict[str, int] = {}
    for t in c.tasks:
        count = t.count.integer()
        memory = max(t.memory.integer(), MIN_MEMORY_MB)
        vcores = max(t.vcores.integer(), MIN_VCORES)
        durations = tuple(max(MIN_DURATION_S, t.time.integer() / 1000) for _ in range(count))
        if not durations:
            continue
        kinds[t.kind] = kinds.get(t.kind, 0) + 1
        stage = t.kind if kinds[t.kind] == 1 else f"{t.kind}-{kinds[t.kind]}"
        ask = Resources({MEMORY_MB: memory, VCORES: vcores})
        check_fits(cluster, ask, source, f"job {name!r} task type {t.kind!r}")
        stages.append((t.kind, StageSpec(stage, ask, durations)))
    if not stages:
        return None
    maps = tuple(s.name for kind, s in stages if kind == "map")
    ordered = [
        StageSpec(s.name, s.resources, s.durations, maps) if kind == "reduce" else s
        for kind, s in stages
    ]
    return JobSpec(name, c.user, float(story.submit_s), topological_stages(ordered), story.queue)


def _shifted(job: JobSpec, by: float) -> JobSpec:
    return JobSpec(job.name, job.user, job.submit_s - by, job.stages, job.queue)


def _generated_cluster(top: JsonObject) -> ClusterSpec:
    count = top.number("num_nodes", 0)
    if count < 1 or not count.is_integer():
        raise top.error(
            "num_nodes", f"expected a whole number >= 1 (or a nodes file), got {count:g}"
        )
    per_rack = max(1, int(top.number("nodes_per_rack", 1)))
    racks = math.ceil(count / per_rack)
    return ClusterSpec(
        tuple(NodeSpec(f"node{i}", DEFAULT_NODE, f"rack{i % racks}") for i in range(int(count)))
    )

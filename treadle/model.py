"""The workload model: clusters, queues, users and jobs that are DAGs of stages.

Everything here is immutable and validated on construction; loaders and importers build
these objects, and the simulator, the AM and the metrics only read them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from heapq import heappop, heappush
from typing import TYPE_CHECKING

from treadle.resources import Resources, total

if TYPE_CHECKING:
    import networkx as nx

DEFAULT_QUEUE = "default"
DEFAULT_RACK = "default-rack"
DEFAULT_NODE_PREFIX = "node"
"""Node ids of a workload file's node group are ``{prefix}1``, ``{prefix}2``, ..."""

MIN_DURATION_S = 0.001
"""Drawn and imported durations are clamped to this, so a task never takes zero or
negative time."""

ProgressFn = Callable[[int, int, float], None]
"""How a run of a workload reports its progress, simulated or live: (jobs done, jobs in
all, the run's time in s)."""


@dataclass(frozen=True, slots=True)
class StageSpec:
    """A stage: ``len(durations)`` tasks, each asking ``resources`` for its duration."""

    name: str
    resources: Resources
    durations: tuple[float, ...]
    parents: tuple[str, ...] = ()

    @property
    def tasks(self) -> int:
        return len(self.durations)

    @property
    def work_s(self) -> float:
        """Task-seconds of the stage."""
        return sum(self.durations)


@dataclass(frozen=True, eq=False)
class JobSpec:
    """A job: a DAG of stages, submitted by ``user`` to ``queue`` at ``submit_s``.

    ``stages`` are in a topological order (parents before children); a stage becomes
    runnable when all its parents have finished (a barrier, as in MapReduce and Spark).
    """

    name: str
    user: str
    submit_s: float
    stages: tuple[StageSpec, ...]
    queue: str = DEFAULT_QUEUE
    #: While the job is in the system (from its submission to its end) its queue's
    #: spending rate is this (Dynamic Priority's boost; see ``AccountAction``); None: the
    #: queue's own rate.
    spending_rate: float | None = None
    #: The job's priority and scheduling class as a trace records them (the Google
    #: traces'); kept for analysis, no policy reads them. None: not recorded.
    priority: int | None = None
    scheduling_class: int | None = None

    def __post_init__(self) -> None:
        names = [s.name for s in self.stages]
        if not self.stages:
            raise ValueError(f"job {self.name!r} has no stages")
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"job {self.name!r}: duplicate stage names {dup}")
        known, seen = set(names), set[str]()
        for s in self.stages:
            for p in s.parents:
                if p not in known:
                    raise ValueError(
                        f"job {self.name!r}: stage {s.name!r} depends on unknown {p!r}"
                    )
                if p not in seen:
                    raise ValueError(
                        f"job {self.name!r}: stages are not in dependency order "
                        f"({s.name!r} before its parent {p!r}); use topological_stages()"
                    )
            seen.add(s.name)

    @cached_property
    def stage_index(self) -> dict[str, int]:
        return {s.name: i for i, s in enumerate(self.stages)}

    @cached_property
    def children(self) -> tuple[tuple[int, ...], ...]:
        kids: list[list[int]] = [[] for _ in self.stages]
        for i, s in enumerate(self.stages):
            for p in s.parents:
                kids[self.stage_index[p]].append(i)
        return tuple(tuple(k) for k in kids)

    @cached_property
    def parent_indices(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(self.stage_index[p] for p in s.parents) for s in self.stages)

    @property
    def tasks(self) -> int:
        return sum(s.tasks for s in self.stages)

    @property
    def work_s(self) -> float:
        return sum(s.work_s for s in self.stages)

    def dag(self) -> nx.DiGraph:
        import networkx as nx  # only graph users pay for it (CLI startup: bench_startup)

        g = nx.DiGraph()
        for s in self.stages:
            g.add_node(s.name, tasks=s.tasks, work_s=s.work_s)
            for p in s.parents:
                g.add_edge(p, s.name)
        return g

    @cached_property
    def critical_path_s(self) -> float:
        """Length of the longest path through the DAG, each stage counting its longest task."""
        finish: list[float] = []
        for i, s in enumerate(self.stages):
            start = max((finish[p] for p in self.parent_indices[i]), default=0.0)
            finish.append(start + max(s.durations))
        return max(finish)

    def peak_resources(self) -> Resources:
        """The largest single-task demand, dimension by dimension."""
        out = Resources()
        for s in self.stages:
            out = out.componentwise_max(s.resources)
        return out


def topological_stages(stages: list[StageSpec], job: str = "") -> tuple[StageSpec, ...]:
    """Order stages so parents come first; raise ValueError naming a cycle if there is one."""
    by_name = {s.name: s for s in stages}
    if len(by_name) != len(stages):
        dup = sorted({s.name for s in stages if sum(t.name == s.name for t in stages) > 1})
        raise ValueError(f"duplicate stage names {dup}")
    for s in stages:
        for p in s.parents:
            if p not in by_name:
                raise ValueError(f"stage {s.name!r} depends on unknown stage {p!r}")
    # Stable: among ready stages keep the declaration order (Kahn's algorithm, the
    # earliest-declared ready stage first).
    order = {s.name: i for i, s in enumerate(stages)}
    children: dict[str, list[str]] = {s.name: [] for s in stages}
    waiting: dict[str, int] = {}
    for s in stages:
        parents = set(s.parents)
        waiting[s.name] = len(parents)
        for p in parents:
            children[p].append(s.name)
    ready = [(i, s.name) for i, s in enumerate(stages) if not waiting[s.name]]
    names: list[str] = []
    while ready:
        _, name = heappop(ready)
        names.append(name)
        for child in children[name]:
            waiting[child] -= 1
            if not waiting[child]:
                heappush(ready, (order[child], child))
    if len(names) < len(stages):
        raise ValueError(f"stages form a cycle: {_cycle(stages)}")
    return tuple(by_name[n] for n in names)


def _cycle(stages: list[StageSpec]) -> str:
    """A cycle among ``stages`` (which have one), as networkx finds it: ``a -> b -> a``."""
    import networkx as nx  # only for the error: a valid DAG never needs it

    g = nx.DiGraph()
    for s in stages:
        g.add_node(s.name)
        for p in s.parents:
            g.add_edge(p, s.name)
    cycle = nx.find_cycle(g)
    return " -> ".join([e[0] for e in cycle] + [cycle[0][0]])


@dataclass(frozen=True, slots=True)
class NodeSpec:
    node_id: str
    resources: Resources
    rack: str = DEFAULT_RACK


#: ``ClusterSpec.scheduling``: when the simulator's RM places and AMs call (see
#: ``treadle.sim.engine``). ``heartbeat``: at node heartbeats and AM interval ticks only;
#: ``event``: also at once when something changes (live too: docs, emulation.md).
SCHEDULING_MODES = ("heartbeat", "event")


@dataclass(frozen=True)
class ClusterSpec:
    nodes: tuple[NodeSpec, ...]
    heartbeat_s: float = 1.0
    #: One of ``SCHEDULING_MODES``.
    scheduling: str = "heartbeat"

    def __post_init__(self) -> None:
        if self.scheduling not in SCHEDULING_MODES:
            raise ValueError(
                f"scheduling must be one of {', '.join(SCHEDULING_MODES)}, got {self.scheduling!r}"
            )

    @property
    def event_driven(self) -> bool:
        """Whether the simulator also schedules at the instant something changes."""
        return self.scheduling == "event"

    @cached_property
    def capacity(self) -> Resources:
        return total([n.resources for n in self.nodes])

    def largest_node(self) -> Resources:
        out = Resources()
        for n in self.nodes:
            out = out.componentwise_max(n.resources)
        return out

    def fits_some_node(self, demand: Resources) -> bool:
        return any(demand.fits_in(n.resources) for n in self.nodes)


@dataclass(frozen=True, slots=True)
class ClusterPercent:
    """A FairScheduler queue amount given as percentages of the cluster, per resource
    (``"50%"``, ``"memory-mb=50%, vcores=25%"``): resolved against the live capacity."""

    percent: tuple[tuple[str, float], ...]

    def of(self, capacity: Resources) -> Resources:
        given = dict(self.percent)
        every = given.get("*", 100.0)  # "50%": of every resource
        return Resources({k: capacity[k] * given.get(k, every) / 100.0 for k in capacity})


QUEUE_RUNNING, QUEUE_STOPPED = "RUNNING", "STOPPED"
"""``QueueSpec.state``: YARN's queue states."""


@dataclass(frozen=True)
class QueueSpec:
    """A queue in the hierarchy. ``capacity`` and ``max_capacity`` are percentages of the
    parent (YARN CapacityScheduler); ``weight`` is the FairScheduler weight; ``budget``
    (credits) and ``spending_rate`` (credits per slot per allocation interval) are a leaf
    queue's initial Dynamic Priority account, None when not given (a policy with accounts
    reads them; every other policy ignores them, as fifo ignores ``weight``).

    A tree imported from a YARN scheduler file (``treadle.importers.yarnqueues``) also
    carries ``state`` (``STOPPED``: the queue accepts no submissions) and ``unmodelled``:
    the file's properties of the queue that treadle does not honour yet, as (property,
    value) pairs, shown by ``treadle queues``."""

    name: str
    weight: float = 1.0
    capacity: float | None = None
    max_capacity: float = 100.0
    children: tuple[QueueSpec, ...] = ()
    budget: float | None = None
    spending_rate: float | None = None
    state: str = QUEUE_RUNNING
    #: YARN's queue ACLs (``treadle.acl``), None when not given: ``submit_acl``
    #: (``acl_submit_applications`` / ``aclSubmitApps``) and ``admin_acl``
    #: (``acl_administer_queue`` / ``aclAdministerApps``).
    submit_acl: str | None = None
    admin_acl: str | None = None
    unmodelled: tuple[tuple[str, str], ...] = ()
    # FairScheduler properties (``plugins/policies/fair.py``; None: not set, inherited or
    # Hadoop's default where Hadoop inherits, else no limit). Amounts are absolute or
    # ``ClusterPercent``; timeouts in seconds; the user limits are read on the root only.
    min_resources: Resources | ClusterPercent | None = None
    max_resources: Resources | ClusterPercent | None = None
    max_running_apps: int | None = None
    max_am_share: float | None = None
    scheduling_policy: str | None = None
    fair_share_preemption_timeout_s: float | None = None
    fair_share_preemption_threshold: float | None = None
    min_share_preemption_timeout_s: float | None = None
    allow_preemption_from: bool | None = None
    user_max_apps_default: int | None = None
    user_max_running_apps: tuple[tuple[str, int], ...] = ()
    # CapacityScheduler leaf properties (None: not set; the capacity policy then applies
    # no such limit): user-limit-factor, minimum-user-limit-percent, maximum-applications
    # (submissions past it are refused), maximum-am-resource-percent (a fraction, 0..1),
    # ordering-policy ("fifo" or "fair").
    user_limit_factor: float | None = None
    minimum_user_limit_percent: float | None = None
    maximum_applications: int | None = None
    maximum_am_resource_percent: float | None = None
    ordering_policy: str | None = None

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def walk(self) -> Iterator[QueueSpec]:
        yield self
        for c in self.children:
            yield from c.walk()


@dataclass(frozen=True, slots=True)
class UserSpec:
    name: str
    weight: float = 1.0
    budget: float | None = None
    groups: tuple[str, ...] = ()  # what a queue ACL's groups match (``treadle.acl``)


ROOT_QUEUE = "root"

SET_BUDGET = "set_budget"
ADD_BUDGET = "add_budget"
SET_SPENDING_RATE = "set_spending_rate"
ACCOUNT_ACTIONS = (SET_BUDGET, ADD_BUDGET, SET_SPENDING_RATE)
"""What an admin timeline entry does to a queue's account, in the order an entry giving
several applies them."""


@dataclass(frozen=True, slots=True)
class AccountAction:
    """An admin's change to a leaf queue's budget account at ``at_s`` (a workload's
    ``admin:`` timeline): ``action`` is one of ``ACCOUNT_ACTIONS`` and ``amount`` its
    credits or rate (finite, >= 0).

    How it composes with per-job rates (``JobSpec.spending_rate``): a queue has a *base*
    rate (its ``QueueSpec.spending_rate``, then the timeline's last ``set_spending_rate``)
    and an *effective* one, which the policy sees: the highest rate of the queue's jobs
    in the system that carry one, else the base. A timeline rate change during a boost
    changes the base only, which the queue returns to when its boosted jobs have ended.
    """

    at_s: float
    queue: str
    action: str
    amount: float


@dataclass(frozen=True, slots=True)
class Follow:
    """A closed-loop submission: the job is submitted ``wait_s`` after job ``after`` ends
    (finished or failed), whenever that is, instead of at its ``submit_s``."""

    after: str
    wait_s: float = 0.0


class JobSource(ABC):
    """Jobs read from a file as a run needs them, instead of decoded whole first (a
    streamed ``Workload``'s ``source``; ``treadle.sim.feed`` pulls from it).

    Each ``iter()`` reads the file again from its start and yields the workload's jobs in
    its order, which is also submission order: ``submit_s`` never decreases. ``jobs`` and
    ``tasks`` are the counts (known before the first job is read). A problem found while
    reading raises ``WorkloadError`` naming the file, the line (or row) and the field,
    exactly as loading the workload whole would. A streamed workload has no closed-loop
    follows and no per-job spending rates (a loader keeps such a workload whole).
    """

    #: What errors name (the path as given).
    source: str
    jobs: int
    tasks: int

    @abstractmethod
    def __iter__(self) -> Iterator[JobSpec]: ...


@dataclass(frozen=True)
class Workload:
    """A whole experiment input: the cluster, the queue tree, the users and the jobs.

    ``follows`` maps a job's name to the ``Follow`` that releases it (closed-loop users);
    an entry whose ``after`` names no job of the workload is ignored, so a job taken out
    alone runs at its ``submit_s``. A follower's ``submit_s`` is a lower bound: the
    earliest it could be submitted. ``admin`` is the timeline of account changes, in time
    order (ties in declaration order).
    """

    name: str
    cluster: ClusterSpec
    jobs: tuple[JobSpec, ...]
    queues: QueueSpec = field(
        default_factory=lambda: QueueSpec(ROOT_QUEUE, children=(QueueSpec(DEFAULT_QUEUE),))
    )
    users: Mapping[str, UserSpec] = field(default_factory=dict)
    seed: int = 0
    follows: Mapping[str, Follow] = field(default_factory=dict)
    admin: tuple[AccountAction, ...] = ()
    #: A streamed workload's jobs (``jobs`` is then empty): read as the run goes. None: the
    #: jobs are ``jobs``, in memory.
    source: JobSource | None = field(default=None, compare=False, repr=False)

    @property
    def job_count(self) -> int:
        return len(self.jobs) if self.source is None else self.source.jobs

    def all_jobs(self) -> Iterator[JobSpec]:
        """The jobs in the workload's order, from memory or read from the source."""
        return iter(self.jobs) if self.source is None else iter(self.source)

    @cached_property
    def leaf_queues(self) -> dict[str, QueueSpec]:
        return {q.name: q for q in self.queues.walk() if q.is_leaf and q.name != ROOT_QUEUE}

    def user(self, name: str) -> UserSpec:
        return self.users.get(name) or UserSpec(name)

    @property
    def tasks(self) -> int:
        return sum(j.tasks for j in self.jobs) if self.source is None else self.source.tasks

    @property
    def has_account_timeline(self) -> bool:
        """Whether a run must change queue accounts as it goes (an ``admin`` timeline or a
        job with its own spending rate): only a policy with accounts can run it."""
        return bool(self.admin) or any(j.spending_rate is not None for j in self.jobs)


def in_memory(wl: Workload) -> Workload:
    """``wl`` with its jobs in memory: a streamed workload read whole (a transform that
    needs every job, ``--partition`` say, takes it so)."""
    if wl.source is None:
        return wl
    return replace(wl, jobs=tuple(wl.source), source=None)


def closed_loop_followers(wl: Workload) -> dict[str, list[tuple[JobSpec, float]]]:
    """Job name -> the jobs its end releases and their waits (``Workload.follows``, its
    entries naming a job of ``wl``)."""
    if not wl.follows:
        return {}
    by_name = {j.name: j for j in wl.jobs}
    out: dict[str, list[tuple[JobSpec, float]]] = {}
    for j in wl.jobs:
        f = wl.follows.get(j.name)
        if f is not None and f.after in by_name:
            out.setdefault(f.after, []).append((j, f.wait_s))
    return out

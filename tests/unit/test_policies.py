"""Built-in scheduling policies (fifo, capacity, fair, drf) run in the simulator.

Each test builds a small workload with the model classes, runs it under one policy and
checks what a user would notice: finish times, who holds how much of the cluster over
time, and that nothing is over-committed.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from rm.policy import ClusterView, progressive_fill, water_fill
from treadle import registry
from treadle.errors import PluginError
from treadle.model import (
    ROOT_QUEUE,
    ClusterSpec,
    JobSpec,
    NodeSpec,
    QueueSpec,
    StageSpec,
    UserSpec,
    Workload,
)
from treadle.resources import ZERO, Resources
from treadle.sim import SimResult, Simulation

Record = dict[str, Any]
GB = 1024
POLICIES = ("fifo", "capacity", "fair", "drf")


# ----------------------------------------------------------------------------- helpers
def res(vcores: float, memory_mb: float = 1024) -> Resources:
    return Resources(vcores=vcores, memory_mb=memory_mb)


def cluster(*nodes: Resources) -> ClusterSpec:
    return ClusterSpec(tuple(NodeSpec(f"n{i}", r) for i, r in enumerate(nodes)))


def job(
    name: str,
    tasks: int,
    duration: float,
    resources: Resources,
    *,
    user: str = "u",
    queue: str = "default",
    submit: float = 0.0,
) -> JobSpec:
    return JobSpec(name, user, submit, (StageSpec("s", resources, (duration,) * tasks),), queue)


def queues(*children: QueueSpec) -> QueueSpec:
    return QueueSpec(ROOT_QUEUE, children=children)


def run(wl: Workload, policy: str, params: Mapping[str, Any] | None = None) -> SimResult:
    result = Simulation(
        wl,
        registry.build("policies", policy, params),
        lambda: registry.build("asks", "greedy"),
        policy_name=policy,
    ).run()
    assert result.stalled is None
    return result


def finish_times(result: SimResult) -> dict[str, float]:
    """Job name -> finish time."""
    names = {r["job"]: r["name"] for r in result.records if r["event"] == "job_submitted"}
    return {names[r["job"]]: r["t"] for r in result.records if r["event"] == "job_finished"}


class Held:
    """The amount of ``dim`` held per group over time, as a step function; ``group`` maps
    the job_submitted record of a container's job to a group name."""

    def __init__(self, result: SimResult, group: Callable[[Record], str], dim: str = "vcores"):
        subs = {r["job"]: r for r in result.records if r["event"] == "job_submitted"}
        live: dict[str, tuple[str, float]] = {}
        now: dict[str, float] = {}
        self.times: list[float] = [0.0]
        self.steps: list[dict[str, float]] = [{}]
        for r in result.records:
            if r["event"] == "container_allocated":
                g, amount = group(subs[r["job"]]), r["resources"].get(dim, 0.0)
                live[r["container"]] = (g, amount)
            elif r["event"] in ("container_finished", "container_released"):
                if r["container"] not in live:
                    continue
                g, amount = live.pop(r["container"])
                amount = -amount
            else:
                continue
            now[g] = now.get(g, 0.0) + amount
            if r["t"] != self.times[-1]:
                self.times.append(r["t"])
                self.steps.append({})
            self.steps[-1] = {k: v for k, v in now.items() if v}

    def at(self, t: float) -> dict[str, float]:
        """Held just after everything that happened at ``t``."""
        return self.steps[bisect.bisect_right(self.times, t) - 1]

    def mean(self, t0: float, t1: float) -> dict[str, float]:
        """Time-weighted mean over [t0, t1]."""
        out: dict[str, float] = defaultdict(float)
        edges = [t0, *(t for t in self.times if t0 < t < t1), t1]
        for a, b in itertools.pairwise(edges):
            for k, v in self.at(a).items():
                out[k] += v * (b - a) / (t1 - t0)
        return dict(out)

    def peak(self, group: str) -> float:
        return max(s.get(group, 0.0) for s in self.steps)


def by_queue(r: Record) -> str:
    return str(r["queue"])


def by_user(r: Record) -> str:
    return str(r["user"])


def by_name(r: Record) -> str:
    return str(r["name"])


def assert_never_overcommitted(result: SimResult, wl: Workload) -> None:
    caps = {n.node_id: n.resources for n in wl.cluster.nodes}
    used: dict[str, Resources] = {n: Resources() for n in caps}
    live: dict[str, tuple[str, Resources]] = {}
    # Records are sorted by time; at equal times process frees before allocations.
    order = {"container_finished": 0, "container_released": 0, "container_allocated": 1}
    for r in sorted(
        (r for r in result.records if r["event"] in order),
        key=lambda r: (r["t"], order[r["event"]]),
    ):
        if r["event"] == "container_allocated":
            amount = Resources(r["resources"])
            used[r["node"]] = used[r["node"]] + amount
            live[r["container"]] = (r["node"], amount)
            assert used[r["node"]].fits_in(caps[r["node"]]), (r, used[r["node"]])
        elif r["container"] in live:
            node, amount = live.pop(r["container"])
            used[node] = used[node] - amount


# ----------------------------------------------------------------------------- fifo
def test_fifo_runs_jobs_one_after_the_other() -> None:
    wl = Workload(
        "fifo",
        cluster(res(4, 64 * GB)),
        (job("j1", 8, 10.0, res(1)), job("j2", 8, 10.0, res(1))),
    )
    t = finish_times(run(wl, "fifo"))
    assert 20 <= t["j1"] <= 24
    assert 40 <= t["j2"] <= 46
    assert t["j2"] > t["j1"] + 15


# ----------------------------------------------------------------------------- capacity
def two_queue_workload(a: QueueSpec, b: QueueSpec, *, b_busy: bool = True) -> Workload:
    jobs = [job("ja", 200, 10.0, res(1), queue=a.name)]
    if b_busy:
        jobs.append(job("jb", 200, 10.0, res(1), queue=b.name))
    return Workload("cap", cluster(*[res(2, 64 * GB)] * 10), tuple(jobs), queues=queues(a, b))


def test_capacity_shares_the_cluster_by_guarantee() -> None:
    wl = two_queue_workload(QueueSpec("a", capacity=70), QueueSpec("b", capacity=30))
    mean = Held(run(wl, "capacity"), by_queue).mean(10, 90)
    assert mean["a"] == pytest.approx(14, abs=1)  # observed 13.35 (tasks end in waves)
    assert mean["b"] == pytest.approx(6, abs=1)  # observed 5.75


def test_capacity_lends_idle_capacity_to_a_busy_queue() -> None:
    wl = two_queue_workload(QueueSpec("a", capacity=30), QueueSpec("b", capacity=70), b_busy=False)
    assert Held(run(wl, "capacity"), by_queue).peak("a") == 20  # the whole cluster


def test_capacity_never_goes_beyond_max_capacity() -> None:
    wl = two_queue_workload(
        QueueSpec("a", capacity=50, max_capacity=50), QueueSpec("b", capacity=50), b_busy=False
    )
    result = run(wl, "capacity")
    assert Held(result, by_queue).peak("a") == 10  # 50% of 20 vcores, reached, never exceeded
    assert finish_times(result)["ja"] >= 200


def test_capacity_is_hierarchical() -> None:
    qs = queues(
        QueueSpec("a", capacity=50),
        QueueSpec("p", capacity=50, max_capacity=60, children=(QueueSpec("b"), QueueSpec("c"))),
    )
    busy = [job(f"j{q}", 200, 10.0, res(1), queue=q) for q in "abc"]
    wl = Workload("tree", cluster(*[res(2, 64 * GB)] * 10), tuple(busy), queues=qs)
    mean = Held(run(wl, "capacity"), by_queue).mean(10, 90)
    assert mean == pytest.approx({"a": 10, "b": 5, "c": 5}, abs=1)
    # Without a, p's children share p's max (60% of 20 vcores), not the whole cluster.
    lone = Workload("tree", wl.cluster, tuple(busy[1:]), queues=qs)
    held = Held(run(lone, "capacity"), by_queue)
    assert max(sum(s.values()) for s in held.steps) == 12
    assert held.mean(10, 90) == pytest.approx({"b": 6, "c": 6}, abs=1)


def test_capacity_memory_calculator_ignores_vcores() -> None:
    # Queue a's tasks are cpu-heavy, b's memory-heavy: by memory a looks idle.
    wl = Workload(
        "calc",
        cluster(res(8, 8 * GB)),
        (
            job("ja", 40, 10.0, res(2, 512), queue="a"),
            job("jb", 40, 10.0, res(1, 1 * GB), queue="b"),
        ),
        queues=queues(QueueSpec("a", capacity=50), QueueSpec("b", capacity=50)),
    )
    dominant = Held(run(wl, "capacity"), by_queue).mean(5, 60)
    memory = Held(run(wl, "capacity", {"resource_calculator": "memory"}), by_queue).mean(5, 60)
    assert dominant["a"] == pytest.approx(4, abs=1)  # half the vcores each
    assert memory["a"] > dominant["a"] + 1  # memory-wise a uses little, so it gets more


# ----------------------------------------------------------------------------- fair
def test_fair_converges_to_weighted_queue_shares() -> None:
    wl = Workload(
        "fair",
        cluster(*[res(4, 64 * GB)] * 4),
        (job("ja", 400, 10.0, res(1), queue="a"), job("jb", 400, 10.0, res(1), queue="b")),
        queues=queues(QueueSpec("a", weight=3), QueueSpec("b", weight=1)),
    )
    mean = Held(run(wl, "fair"), by_queue).mean(30, 200)
    assert mean["a"] == pytest.approx(12, abs=1)  # observed 11.6 (tasks end in waves)
    assert mean["b"] == pytest.approx(4, abs=1)  # observed 3.9
    assert mean["a"] / mean["b"] == pytest.approx(3, rel=0.05)


def test_fair_inner_drf_shares_a_queue_where_fifo_does_not() -> None:
    wl = Workload(
        "inner",
        cluster(res(8, 64 * GB)),
        (job("big", 80, 10.0, res(1)), job("small", 8, 10.0, res(1), submit=1.0)),
    )
    fifo = finish_times(run(wl, "fair", {"inner": "fifo"}))
    drf = finish_times(run(wl, "fair", {"inner": "drf"}))
    assert fifo["small"] >= 100  # waits behind all of big's tasks
    assert drf["small"] <= 35  # gets half of the queue as big's first tasks end
    assert drf["big"] >= fifo["big"]


def test_fair_min_share_comes_before_weights() -> None:
    qs = queues(QueueSpec("a", weight=3, capacity=50), QueueSpec("b", weight=1, capacity=50))
    wl = Workload(
        "minshare",
        cluster(*[res(4, 64 * GB)] * 4),
        (job("ja", 200, 10.0, res(1), queue="a"), job("jb", 200, 10.0, res(1), queue="b")),
        queues=qs,
    )
    weighted = Held(run(wl, "fair"), by_queue).mean(10, 60)
    guaranteed = Held(run(wl, "fair", {"min_share": "capacity"}), by_queue).mean(10, 60)
    assert weighted["a"] == pytest.approx(12, abs=1)
    assert guaranteed["a"] == pytest.approx(8, abs=1)  # both needy up to half the cluster


# ----------------------------------------------------------------------------- drf
def test_drf_equalizes_dominant_shares_paper_example() -> None:
    # Ghodsi et al.: <9 CPUs, 18 GB>; A's tasks <1 CPU, 4 GB>, B's <3 CPUs, 1 GB>.
    wl = Workload(
        "drf",
        cluster(res(9, 18 * GB)),
        (
            job("a", 30, 100.0, res(1, 4 * GB), user="A"),
            job("b", 30, 100.0, res(3, 1 * GB), user="B"),
        ),
    )
    result = run(wl, "drf")
    held = Held(result, by_user)
    for t in range(5, 95):
        assert held.at(t) == {"A": 3, "B": 6}  # 3 tasks of A, 2 of B: dominant shares 2/3 each


def test_drf_user_weights_shift_the_balance() -> None:
    wl = Workload(
        "wdrf",
        cluster(res(12, 64 * GB)),
        (job("a", 60, 50.0, res(1), user="A"), job("b", 60, 50.0, res(1), user="B")),
        users={"A": UserSpec("A", weight=2.0), "B": UserSpec("B", weight=1.0)},
    )
    assert Held(run(wl, "drf"), by_user).at(20) == {"A": 8, "B": 4}


def test_drf_across_users_or_jobs() -> None:
    wl = Workload(
        "across",
        cluster(res(12, 64 * GB)),
        (
            job("a1", 60, 50.0, res(1), user="A"),
            job("a2", 60, 50.0, res(1), user="A"),
            job("b1", 60, 50.0, res(1), user="B"),
        ),
    )
    users = Held(run(wl, "drf"), by_name).at(20)
    jobs = Held(run(wl, "drf", {"across": "jobs"}), by_name).at(20)
    assert users == {"a1": 6, "b1": 6}  # half each user; A's jobs in submission order
    assert jobs == {"a1": 4, "a2": 4, "b1": 4}


# ----------------------------------------------------------------------------- shares()
@dataclass
class FakeQueue:
    name: str
    weight: float
    parent: FakeQueue | None
    children: list[FakeQueue] = field(default_factory=list)
    used: Resources = ZERO

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass
class FakeApp:
    app_id: str
    user: str
    queue: str
    demand: Resources
    allocated: Resources = ZERO


@dataclass
class FakeCluster:
    """Just what ``shares()`` reads: a ClusterView with every job asking for all its tasks
    and nothing placed yet (independent of the RM core's request protocol)."""

    capacity: Resources
    apps: dict[str, FakeApp]
    queues: dict[str, FakeQueue]
    users: dict[str, UserSpec]
    root_queue: FakeQueue
    now: float = 0.0


def view(wl: Workload) -> ClusterView:
    qs: dict[str, FakeQueue] = {}

    def add(spec: QueueSpec, parent: FakeQueue | None) -> FakeQueue:
        q = qs[spec.name] = FakeQueue(spec.name, spec.weight, parent)
        q.children = [add(c, q) for c in spec.children]
        return q

    root = add(wl.queues, None)
    apps = {
        f"app{i + 1}": FakeApp(f"app{i + 1}", j.user, j.queue, j.stages[0].resources * j.tasks)
        for i, j in enumerate(wl.jobs)
    }
    users = {j.user: wl.user(j.user) for j in wl.jobs}
    return cast(ClusterView, FakeCluster(wl.cluster.capacity, apps, qs, users, root))


def test_drf_shares_are_the_progressive_filling_allocation() -> None:
    wl = Workload(
        "drf",
        cluster(res(9, 18 * GB)),
        (
            job("a", 30, 100.0, res(1, 4 * GB), user="A"),
            job("b", 30, 100.0, res(3, 1 * GB), user="B"),
            job("c", 1, 100.0, res(1, 4 * GB), user="A"),  # A's second job
        ),
    )
    shares = registry.build("policies", "drf").shares(view(wl))
    assert shares["app1"] == pytest.approx(res(3, 12 * GB), rel=1e-6)
    assert shares["app2"] == pytest.approx(res(6, 2 * GB), rel=1e-6)
    assert "app3" not in shares or shares["app3"].is_zero()
    by_job = registry.build("policies", "drf", {"across": "jobs"}).shares(view(wl))
    assert by_job["app3"] == pytest.approx(res(1, 4 * GB))  # all it asks for
    # a and b then fill the CPUs: both at dominant share 16/27 (a by memory, b by CPU).
    assert by_job["app1"] == pytest.approx(res(8 / 3, 32 / 3 * GB))
    assert by_job["app2"] == pytest.approx(res(16 / 3, 16 / 9 * GB))


def test_fair_shares_water_fill_weighted_queues() -> None:
    wl = Workload(
        "fair",
        cluster(*[res(4, 16 * GB)] * 4),
        (
            job("ja", 100, 10.0, res(1, 1 * GB), queue="a"),
            job("jb", 100, 10.0, res(1, 1 * GB), queue="b"),
            job("jc", 2, 10.0, res(1, 1 * GB), queue="c"),  # demand below its share
        ),
        queues=queues(QueueSpec("a", weight=3), QueueSpec("b", weight=1), QueueSpec("c")),
    )
    shares = registry.build("policies", "fair").shares(view(wl))
    assert shares["app3"] == pytest.approx(res(2, 2 * GB))  # capped by demand
    assert shares["app1"] == pytest.approx(res(10.5, 10.5 * GB))  # 3/4 of 14
    assert shares["app2"] == pytest.approx(res(3.5, 3.5 * GB))


# ----------------------------------------------------------------------------- parameters
@pytest.mark.parametrize(
    ("policy", "params", "named"),
    [
        ("drf", {"across": "racks"}, "across"),
        ("drf", {"acros": "users"}, "acros"),
        ("fair", {"inner": "lifo"}, "inner"),
        ("fair", {"resource": "gpu"}, "resource"),
        ("fair", {"update_interval_s": -1}, "update_interval_s"),
        ("capacity", {"resource_calculator": "cpu"}, "resource_calculator"),
        ("capacity", {"preempt": True}, "preempt"),
        ("capacity", {"total_preemption_per_round": 2}, "total_preemption_per_round"),
        ("fifo", {"x": 1}, "x"),
    ],
)
def test_bad_parameters_are_clear_errors(policy: str, params: dict[str, Any], named: str) -> None:
    with pytest.raises(PluginError, match=f"parameter '{named}'"):
        registry.build("policies", policy, params)


# ----------------------------------------------------------------------------- invariants
def random_workload(seed: int) -> Workload:
    rng = random.Random(seed)
    nodes = [res(rng.choice([4, 8]), rng.choice([8, 16]) * GB) for _ in range(4)]
    jobs = []
    for i in range(12):
        stages = [
            StageSpec(
                f"s{k}",
                res(rng.choice([1, 2, 3]), rng.choice([1, 2, 6]) * GB),
                tuple(rng.uniform(1, 20) for _ in range(rng.randint(1, 12))),
                (f"s{k - 1}",) if k else (),
            )
            for k in range(rng.randint(1, 3))
        ]
        jobs.append(
            JobSpec(
                f"j{i}",
                rng.choice(["alice", "bob", "carol"]),
                rng.uniform(0, 60),
                tuple(stages),
                rng.choice(["a", "b", "c"]),
            )
        )
    qs = queues(
        QueueSpec("a", weight=2, capacity=50, max_capacity=80),
        QueueSpec("p", capacity=50, children=(QueueSpec("b"), QueueSpec("c", max_capacity=60))),
    )
    users = {"alice": UserSpec("alice", weight=2.0)}
    return Workload(f"random{seed}", cluster(*nodes), tuple(jobs), queues=qs, users=users)


@pytest.mark.parametrize(
    ("policy", "params"),
    [
        ("fifo", {}),
        ("capacity", {}),
        ("capacity", {"resource_calculator": "memory"}),
        ("fair", {}),
        ("fair", {"inner": "fifo", "resource": "memory", "min_share": "capacity"}),
        ("fair", {"inner": "drf", "resource": "vcores"}),
        ("drf", {}),
        ("drf", {"across": "jobs"}),
    ],
)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_job_finishes_and_no_node_is_overcommitted(
    policy: str, params: dict[str, Any], seed: int
) -> None:
    wl = random_workload(seed)
    result = run(wl, policy, params)
    assert result.finished == len(wl.jobs)
    assert_never_overcommitted(result, wl)
    assert not [r for r in result.records if r["event"] == "placement_rejected"]


def test_every_builtin_policy_is_covered() -> None:
    assert set(POLICIES) <= set(registry.discover("policies"))


@pytest.mark.parametrize("seed", range(20))
def test_progressive_filling_is_feasible_and_pareto_efficient(seed: int) -> None:
    rng = random.Random(seed)
    cap = Resources(vcores=rng.randint(4, 64), memory_mb=rng.randint(4, 64) * GB, gpu=4)
    demands = [
        Resources(
            vcores=rng.randint(0, 40), memory_mb=rng.randint(0, 40) * GB, gpu=rng.choice([0, 0, 2])
        )
        for _ in range(rng.randint(1, 12))
    ]
    demands = [d for d in demands if not d.is_zero()] or [res(1)]
    weights = [rng.choice([1.0, 2.0, 0.5]) for _ in demands]
    shares = progressive_fill(cap, demands, weights)
    given = [d * (s / d.dominant_share(cap)) for d, s in zip(demands, shares, strict=True)]
    used = Resources()
    for g in given:
        used = used + g
    assert used.fits_in(cap * (1 + 1e-9))
    saturated = {k for k in cap if used[k] >= cap[k] * (1 - 1e-9)}
    for d, s in zip(demands, shares, strict=True):
        # Each entity got all it asked for, or needs a resource that ran out.
        assert s == pytest.approx(d.dominant_share(cap)) or saturated & set(d)


def test_water_fill_caps_and_redistributes() -> None:
    assert water_fill(1.0, [3, 1], [1.0, 1.0]) == pytest.approx([0.75, 0.25])
    assert water_fill(1.0, [3, 1, 1], [0.1, 1.0, 1.0]) == pytest.approx([0.1, 0.45, 0.45])
    assert water_fill(1.0, [1, 1], [0.2, 0.3]) == pytest.approx([0.2, 0.3])  # demand-capped
    assert water_fill(1.0, [0, 1], [1.0, 1.0]) == pytest.approx([0.0, 1.0])

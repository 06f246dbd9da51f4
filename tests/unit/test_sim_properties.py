"""Property tests of the discrete-event simulator over random small workloads.

Every invariant is checked from the event log alone (``SimResult.records``), under every
installed scheduling policy:

- no node is ever over-committed, in any resource dimension;
- every job finishes, and succeeds (all installed policies are work-conserving);
- resources are conserved: each container ends exactly once, every node is empty at the
  end, and exactly one container completes per task of the workload;
- a run is deterministic: the same workload twice gives the same bytes;
- skipping idle heartbeats is exact: the simulator logs the same records at the same
  instants as a reference in which every node heartbeats at every one of its heartbeat
  times, byte for byte, also when events share an instant (heartbeats at one instant
  run in node order, and records of one instant are in a canonical order).
"""

from __future__ import annotations

import functools
import json
import math
from collections import Counter, defaultdict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rm.core.effects import Effects
from treadle import events as ev
from treadle.messages import ContainerState, FinalStatus
from treadle.model import (
    DEFAULT_QUEUE,
    ROOT_QUEUE,
    ClusterSpec,
    JobSpec,
    NodeSpec,
    QueueSpec,
    StageSpec,
    UserSpec,
    Workload,
)
from treadle.registry import PluginInfo, discover, instantiate, load, lookup
from treadle.resources import Resources
from treadle.sim import SimResult, Simulation
from treadle.yarnids import SIM_CLUSTER_TIMESTAMP, format_app_id

#: Every installed policy. No skipping: a policy that fails to load fails its tests.
POLICIES = sorted(discover("policies"))

EPS = 1e-9

Record = dict[str, Any]

# ----------------------------------------------------------------------------------
# Workload strategy
# ----------------------------------------------------------------------------------

_durations = st.floats(0.5, 30.0, allow_nan=False, allow_infinity=False)
# Submit times mix "round" values (which tie with heartbeat and AM times) and arbitrary ones.
_submit = st.one_of(
    st.integers(0, 60).map(float),
    st.floats(0.0, 60.0, allow_nan=False, allow_infinity=False),
)


@st.composite
def _node_resources(draw: st.DrawFn, with_gpu: bool) -> Resources:
    d: dict[str, float] = {
        "vcores": draw(st.integers(2, 8)),
        "memory_mb": draw(st.integers(2048, 16384)),
    }
    if with_gpu:
        d["gpu"] = draw(st.integers(0, 4))
    return Resources(d)


@st.composite
def _task_resources(draw: st.DrawFn, nodes: tuple[NodeSpec, ...]) -> Resources:
    """A demand that fits at least one node (drawn under the capacity of one of them)."""
    cap = draw(st.sampled_from(nodes)).resources
    d: dict[str, float] = {
        "vcores": draw(st.integers(1, int(cap["vcores"]))),
        "memory_mb": draw(st.integers(1, int(cap["memory_mb"]))),
    }
    if cap["gpu"]:
        d["gpu"] = draw(st.integers(0, int(cap["gpu"])))
    return Resources(d)


#: Irrational steps that make every time "generic" (see ``workloads(ties=False)``).
_SUBMIT_STEP = math.sqrt(3) * 1e-3
_DURATION_STEP = math.sqrt(2) * 1e-4


@st.composite
def workloads(
    draw: st.DrawFn, *, ties: bool = True, heartbeats: tuple[float, ...] = (1.0, 0.5, 3.0)
) -> Workload:
    """A random small workload.

    With ``ties=False`` every submit time and every task duration is shifted by a distinct
    multiple of an irrational step, so that no two events fall at the same instant (two
    containers ending together, a container ending on an AM call): the order of events
    at one instant is then never needed. Heartbeat phases are drawn by the simulator from
    the workload's seed, which varies too.
    """
    with_gpu = draw(st.booleans())
    n_nodes = draw(st.integers(1, 4))
    nodes = tuple(
        NodeSpec(f"node{i + 1}", draw(_node_resources(with_gpu)), rack=f"rack{i % 2}")
        for i in range(n_nodes)
    )
    heartbeat_s = draw(st.sampled_from(heartbeats))
    cluster = ClusterSpec(nodes, heartbeat_s=heartbeat_s)
    seed = draw(st.integers(0, 1000))
    n_tasks = 0

    def jitter_durations(durations: list[float]) -> tuple[float, ...]:
        nonlocal n_tasks
        if ties:
            return tuple(durations)
        out = []
        for d in durations:
            n_tasks += 1
            out.append(d + n_tasks * _DURATION_STEP)
        return tuple(out)

    n_users = draw(st.integers(1, 3))
    users = {
        f"u{i}": UserSpec(f"u{i}", weight=draw(st.sampled_from([1.0, 2.0, 0.5])))
        for i in range(n_users)
    }
    if draw(st.booleans()):
        queues = QueueSpec(ROOT_QUEUE, children=(QueueSpec(DEFAULT_QUEUE),))
        leaf_names = [DEFAULT_QUEUE]
    else:
        cap_a = draw(st.sampled_from([None, 25.0, 50.0, 70.0]))
        queues = QueueSpec(
            ROOT_QUEUE,
            children=(
                QueueSpec("qa", weight=draw(st.sampled_from([1.0, 2.0, 3.0])), capacity=cap_a),
                QueueSpec(
                    "qb",
                    weight=draw(st.sampled_from([1.0, 2.0])),
                    capacity=None if cap_a is None else 100.0 - cap_a,
                ),
            ),
        )
        leaf_names = ["qa", "qb"]

    jobs = []
    for j in range(draw(st.integers(1, 6))):
        stages: list[StageSpec] = []
        for s in range(draw(st.integers(1, 3))):
            parents = tuple(
                sorted(draw(st.sets(st.sampled_from([p.name for p in stages])))) if stages else ()
            )
            stages.append(
                StageSpec(
                    f"s{s}",
                    draw(_task_resources(nodes)),
                    jitter_durations(draw(st.lists(_durations, min_size=1, max_size=6))),
                    parents,
                )
            )
        jobs.append(
            JobSpec(
                f"job{j}",
                draw(st.sampled_from(sorted(users))),
                draw(_submit) + (0.0 if ties else (j + 1) * _SUBMIT_STEP),
                tuple(stages),
                queue=draw(st.sampled_from(leaf_names)),
            )
        )
    jobs.sort(key=lambda job: job.submit_s)
    return Workload("prop", cluster, tuple(jobs), queues=queues, users=users, seed=seed)


# ----------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------


@functools.cache
def _plugin(kind: str, name: str) -> tuple[PluginInfo, type]:
    # Discovery reads package metadata (milliseconds): do it once per plugin, not per job.
    info = lookup(kind, name)
    return info, load(info)


def make(kind: str, name: str) -> Any:
    """A fresh plugin instance with default parameters, as ``registry.build`` makes it."""
    info, cls = _plugin(kind, name)
    return instantiate(cls, info, {})


def _greedy() -> Any:
    return make("asks", "greedy")


def run(workload: Workload, policy: str, sim_cls: type[Simulation] = Simulation) -> SimResult:
    sim = sim_cls(workload, make("policies", policy), _greedy, policy_name=policy)
    return sim.run()


def dump(result: SimResult) -> list[str]:
    return [ev.dumps(r) for r in result.records]


# ----------------------------------------------------------------------------------
# Invariant checks (from the log only)
# ----------------------------------------------------------------------------------

_END_EVENTS = (ev.CONTAINER_FINISHED, ev.CONTAINER_RELEASED)


def check_no_overcommit(records: list[Record]) -> None:
    capacity: dict[str, dict[str, float]] = {}
    for r in records:
        if r["event"] == ev.NODE_REGISTERED:
            capacity[r["node"]] = dict(r["resources"])
    assert capacity, "no node_registered records"
    # At equal t, ends come before allocations (a container freed at t may be reused at t).
    order = sorted(
        (r for r in records if r["event"] in (ev.CONTAINER_ALLOCATED, *_END_EVENTS)),
        key=lambda r: (r["t"], 0 if r["event"] in _END_EVENTS else 1),
    )
    used: dict[str, Counter[str]] = defaultdict(Counter)
    live: dict[str, tuple[str, dict[str, float]]] = {}
    for r in order:
        if r["event"] == ev.CONTAINER_ALLOCATED:
            node = r["node"]
            assert node in capacity, f"allocation on unregistered node: {r}"
            live[r["container"]] = (node, r["resources"])
            u = used[node]
            for k, v in r["resources"].items():
                u[k] += v
                cap = capacity[node].get(k, 0.0)
                assert u[k] <= cap + EPS, f"node {node} over-committed in {k}: {u[k]} > {cap} ({r})"
        else:
            entry = live.pop(r["container"], None)
            assert entry is not None, f"end of a container that is not live: {r}"
            node, res = entry
            for k, v in res.items():
                used[node][k] -= v


def check_all_jobs_succeed(result: SimResult, workload: Workload) -> None:
    records = result.records
    assert result.stalled is None, result.stalled
    assert result.finished == len(workload.jobs)
    submitted = [r["job"] for r in records if r["event"] == ev.JOB_SUBMITTED]
    finished = [r for r in records if r["event"] == ev.JOB_FINISHED]
    assert len(submitted) == len(workload.jobs)
    assert sorted(r["job"] for r in finished) == sorted(submitted)
    assert all(r["status"] == str(FinalStatus.SUCCEEDED) for r in finished), finished
    assert not [r for r in records if r["event"] == ev.JOB_FAILED]


def check_conservation(records: list[Record], workload: Workload) -> None:
    allocated: dict[str, Record] = {}
    ends: Counter[str] = Counter()
    for r in records:
        if r["event"] == ev.CONTAINER_ALLOCATED:
            assert r["container"] not in allocated, f"container allocated twice: {r}"
            allocated[r["container"]] = r
        elif r["event"] in _END_EVENTS:
            ends[r["container"]] += 1
            assert r["container"] in allocated, f"end of an unknown container: {r}"
            assert r["t"] >= allocated[r["container"]]["t"], f"ends before allocation: {r}"
    never = sorted(set(allocated) - set(ends))
    assert not never, f"containers that never end: {never}"
    twice = sorted(c for c, n in ends.items() if n != 1)
    assert not twice, f"containers that end more than once: {twice}"
    # Every node is empty at the end.
    usage: dict[str, Counter[str]] = defaultdict(Counter)
    for r in allocated.values():
        for k, v in r["resources"].items():
            usage[r["node"]][k] += v
    for r in records:
        if r["event"] in _END_EVENTS:
            a = allocated[r["container"]]
            for k, v in a["resources"].items():
                usage[a["node"]][k] -= v
    for node, u in usage.items():
        assert all(abs(v) <= EPS for v in u.values()), f"node {node} not empty at the end: {u}"
    complete = sum(
        1
        for r in records
        if r["event"] == ev.CONTAINER_FINISHED and r["state"] == str(ContainerState.COMPLETE)
    )
    assert complete == workload.tasks


# ----------------------------------------------------------------------------------
# Reference: a simulator that heartbeats every node at every heartbeat time
# ----------------------------------------------------------------------------------


class _AlwaysHeartbeatHints:
    """The RM's hints as the simulator's loop sees them, minus the ones that let nodes
    sleep.

    ``could_place_on`` always says yes, so every node that heartbeats is scheduled again
    at its next regular time (or its next container end, if sooner) and never sleeps;
    ``has_pending`` always says yes, so the simulator's wake-up walk goes once round every
    sleeping node (in phase order, from the first Allocate call on) instead of stopping
    when the asks are placed. Only the simulator's calls go through this proxy: the RM's
    own internal use of its books (to skip calling the policy) is untouched, so the RM
    behaves exactly as under the simulator.
    """

    def __init__(self, hints: Any) -> None:
        self._hints = hints

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hints, name)

    @property
    def has_pending(self) -> bool:
        return True

    def could_place_on(self, node_id: str) -> bool:
        return True

    def skip_allocate(self, app_id: str, now: float, **_: Any) -> bool:
        return False  # every AM call is made


class _NoTouchedNodesRM:
    """The RM whose effects never ask for an early heartbeat (an always-heartbeating node
    comes at its next regular time anyway)."""

    def __init__(self, rm: Any) -> None:
        self._rm = rm

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rm, name)

    def take_effects(self) -> Effects:
        return Effects(self._rm.take_effects().am_launches, ())


class AlwaysHeartbeatSimulation(Simulation):
    """Every node heartbeats at each of its regular times (and out of band when one of its
    containers ends, as in the simulator), whatever it has to report.

    Only the simulator's hints are bypassed (see :class:`_AlwaysHeartbeatHints`); the loop,
    the event order at one instant and the cores are the simulator's own. Heartbeats
    before the first ask are not simulated: no container and no ask exists yet, so the RM
    answers them with nothing and logs nothing. From the first ask on, each node heartbeats
    at each of its regular times (the first at its first regular time after the ask) and
    is never skipped.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hints = _AlwaysHeartbeatHints(self.hints)  # type: ignore[assignment]
        self.rm = _NoTouchedNodesRM(self.rm)  # type: ignore[assignment]


class _EveryCallHints:
    """The hints with the simulator's permission to skip AM calls withdrawn: every AM
    makes its allocate call every interval (heartbeat elision is untouched)."""

    def __init__(self, hints: Any) -> None:
        self._hints = hints

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hints, name)

    def skip_allocate(self, app_id: str, now: float, **_: Any) -> bool:
        return False


class EveryCallSimulation(Simulation):
    """Every AM makes every one of its allocate calls."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hints = _EveryCallHints(self.hints)  # type: ignore[assignment]


# ----------------------------------------------------------------------------------
# Properties
# ----------------------------------------------------------------------------------

#: About 100 examples per property over all policies (the file stays well under 30 s).
_EXAMPLES = max(10, 100 // max(1, len(POLICIES)))
_settings = settings(
    max_examples=_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.parametrize("policy", POLICIES)
@_settings
@given(workload=workloads())
def test_invariants(policy: str, workload: Workload) -> None:
    result = run(workload, policy)
    check_no_overcommit(result.records)
    check_all_jobs_succeed(result, workload)
    check_conservation(result.records, workload)


@pytest.mark.parametrize("policy", POLICIES)
@_settings
@given(workload=workloads())
def test_deterministic(policy: str, workload: Workload) -> None:
    assert dump(run(workload, policy)) == dump(run(workload, policy))


@pytest.mark.parametrize("policy", POLICIES)
@_settings
@given(workload=workloads(ties=True))
def test_skipping_quiet_allocate_calls_is_exact(policy: str, workload: Workload) -> None:
    """An AM call skipped because it would change nothing changes nothing: the log is
    the same, byte for byte, as when every AM makes every call."""
    fast = run(workload, policy)
    ref = run(workload, policy, EveryCallSimulation)
    assert dump(fast) == dump(ref)
    assert ref.stats["allocates_skipped"] == 0
    assert fast.stats["allocates"] + fast.stats["allocates_skipped"] == ref.stats["allocates"]


def test_quiet_allocate_calls_are_skipped_unless_the_am_reads_shares() -> None:
    """One job of long tasks: between its launches and their ends its AM has nothing to
    say and nothing to hear. fifo computes no shares, so those calls are skipped; so does
    drf for a greedy AM, which does not read the share its answers carry; an altruistic
    AM reads it, so under drf its calls are all made."""
    stage = StageSpec("s0", _ONE_VCORE, (20.0, 20.0))
    wl = Workload("quiet", _two_small_nodes(), (JobSpec("job0", "u0", 0.0, (stage,)),))
    fifo = run(wl, "fifo")
    assert fifo.stats["allocates_skipped"] >= 15  # about 20 s of 1 s calls, minus a few
    assert fifo.stats["allocates"] <= 5
    assert dump(fifo) == dump(run(wl, "fifo", EveryCallSimulation))
    drf = run(wl, "drf")
    assert drf.stats["allocates_skipped"] >= 15
    assert drf.stats["allocates"] <= 5
    assert dump(drf) == dump(run(wl, "drf", EveryCallSimulation))
    altruistic = Simulation(
        wl, make("policies", "drf"), lambda: make("asks", "altruistic"), policy_name="drf"
    ).run()
    assert altruistic.stats["allocates_skipped"] == 0
    calls = fifo.stats["allocates"] + fifo.stats["allocates_skipped"]
    assert altruistic.stats["allocates"] == calls


def by_instant(lines: list[str]) -> list[tuple[float, str]]:
    """The log as a sequence of instants, each the sorted set of its records: what two
    runs must agree on when the order of records within one instant does not matter."""
    return sorted((json.loads(line)["t"], line) for line in lines)


@pytest.mark.parametrize("policy", POLICIES)
@_settings
@given(workload=workloads(ties=False))
def test_heartbeat_elision_is_exact(policy: str, workload: Workload) -> None:
    """Skipping heartbeats changes nothing: the same records at the same instants as when
    every node heartbeats every time (workloads without simultaneous events; the variant
    below allows them)."""
    fast = run(workload, policy)
    ref = run(workload, policy, AlwaysHeartbeatSimulation)
    assert by_instant(dump(fast)) == by_instant(dump(ref))
    assert fast.stats["heartbeats"] <= ref.stats["heartbeats"]


@pytest.mark.parametrize("policy", POLICIES)
@_settings
@given(workload=workloads(ties=True))
def test_heartbeat_elision_is_exact_with_simultaneous_events(
    policy: str, workload: Workload
) -> None:
    """The same, byte for byte, when containers end and jobs arrive at one instant."""
    assert dump(run(workload, policy)) == dump(run(workload, policy, AlwaysHeartbeatSimulation))


# ----------------------------------------------------------------------------------
# Elision at one instant: minimal cases that once went wrong
# ----------------------------------------------------------------------------------

_ONE_VCORE = Resources(vcores=1, memory_mb=1024)


def _two_small_nodes() -> ClusterSpec:
    return ClusterSpec(
        (NodeSpec("node1", _ONE_VCORE), NodeSpec("node2", _ONE_VCORE)), heartbeat_s=1.0
    )


def _tie_workload() -> Workload:
    """Two containers on two nodes end at the same instant while a task of another job
    waits for a node: whichever node heartbeats first at that instant gets it.

    Both nodes take a task of job0 at their first heartbeat (at their phase, in [0, 1))
    and the AM launches both at t=1. Their end is put at 6 + the midpoint of the two
    phases: with elision both end-of-container heartbeats were queued at launch, in
    launch order (the earlier phase first); heartbeating always, each was queued at its
    node's last regular heartbeat before the end, and the later phase's came first.
    """

    def workload(duration: float) -> Workload:
        long = StageSpec("s0", _ONE_VCORE, (duration, duration))
        short = StageSpec("s0", _ONE_VCORE, (1.0,))
        return Workload(
            "tie",
            _two_small_nodes(),
            (JobSpec("job0", "u0", 0.0, (long,)), JobSpec("job1", "u0", 0.0, (short,))),
        )

    probe = run(workload(5.0), "fifo")
    phases = sorted(r["t"] for r in probe.records if r["event"] == ev.CONTAINER_ALLOCATED)[:2]
    return workload(5.0 + (phases[0] + phases[1]) / 2)


def _job1_node(result: SimResult) -> str:
    (rec,) = (
        r
        for r in result.records
        if r["event"] == ev.CONTAINER_ALLOCATED
        and r["job"] == format_app_id(SIM_CLUSTER_TIMESTAMP, 2)
    )
    node: str = rec["node"]
    return node


@pytest.mark.parametrize("sim_cls", [Simulation, AlwaysHeartbeatSimulation])
def test_tie_workload_is_a_tie(sim_cls: type[Simulation]) -> None:
    """The scenario of the next test is what it says, in both simulators."""
    result = run(_tie_workload(), "fifo", sim_cls)
    allocs = [r for r in result.records if r["event"] == ev.CONTAINER_ALLOCATED]
    assert [r["job"] for r in allocs] == [format_app_id(SIM_CLUSTER_TIMESTAMP, 1)] * 2 + [
        format_app_id(SIM_CLUSTER_TIMESTAMP, 2)
    ]
    assert {r["node"] for r in allocs[:2]} == {"node1", "node2"}
    assert 0.0 < allocs[0]["t"] < allocs[1]["t"] < 1.0
    ends = {
        r["container"]: r["t"]
        for r in result.records
        if r["event"] == ev.CONTAINER_FINISHED
        and r["job"] == format_app_id(SIM_CLUSTER_TIMESTAMP, 1)
    }
    (end,) = set(ends.values())  # both end at the same instant ...
    assert 6.0 + allocs[0]["t"] < end < 6.0 + allocs[1]["t"]  # ... between the phases
    assert allocs[2]["t"] == end  # where job1 gets the first node that heartbeats
    check_all_jobs_succeed(result, _tie_workload())


def test_elision_is_exact_when_containers_end_together() -> None:
    wl = _tie_workload()
    assert _job1_node(run(wl, "fifo")) == _job1_node(run(wl, "fifo", AlwaysHeartbeatSimulation))


def _order_workload() -> Workload:
    """One job, two tasks launched on two nodes by one AM call, so both start at the same
    instant. Heartbeating always, the node whose phase comes first reports its start
    first; with elision each node sleeps until its container ends, and the short task (on
    the second node) ends first."""
    return Workload(
        "order",
        _two_small_nodes(),
        (JobSpec("job0", "u0", 0.0, (StageSpec("s0", _ONE_VCORE, (5.0, 2.0)),)),),
    )


def test_order_workload_logs_the_same_records() -> None:
    wl = _order_workload()
    fast = run(wl, "fifo")
    ref = run(wl, "fifo", AlwaysHeartbeatSimulation)
    assert by_instant(dump(fast)) == by_instant(dump(ref))
    starts = [r for r in fast.records if r["event"] == ev.CONTAINER_STARTED]
    assert len(starts) == 2
    assert starts[0]["t"] == starts[1]["t"]


def test_elision_keeps_the_order_of_records_within_an_instant() -> None:
    wl = _order_workload()
    assert dump(run(wl, "fifo")) == dump(run(wl, "fifo", AlwaysHeartbeatSimulation))

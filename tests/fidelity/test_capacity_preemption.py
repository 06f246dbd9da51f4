"""The capacity policy's preemption monitor against Hadoop's
``TestProportionalCapacityPreemptionPolicy`` (hadoop-yarn-server-resourcemanager,
``monitor/capacity``).

Hadoop's tests feed ``editSchedule`` a table of queues (absolute guarantee, maximum, used,
pending, one container per unit) with ``total_preemption_per_round`` and
``natural_termination_factor`` at 1 (their ``setup``) and count the containers it asks
back from each application. The table-driven scenarios here feed the same tables to
``rm.policy.toolkit.proportional`` (``to_obtain`` and ``select_victims``, what the policy
calls each round) and assert the same counts; the others run a workload in the simulator
under ``capacity`` with ``preemption=true`` and assert on the event log.

Not expressible in treadle (so not here): per-queue ``disable_preemption``
(``testPerQueueDisablePreemption*``' second halves: treadle has no such queue
property; their first halves, all queues preemptable, are here), reserved containers
(``testSkipReservedContainer``: treadle does not reserve), node labels and partitions,
and the AM container order (``testSkipAMContainer``: treadle's simulated AMs hold no
container, and the monitor never takes an AM container at all where YARN takes them
last).
"""

from __future__ import annotations

from collections import Counter

from rm.policy.toolkit.proportional import (
    Marks,
    PreemptionParams,
    QueueLoad,
    Running,
    select_victims,
    to_obtain,
)
from tests.fidelity.capacity_helpers import first_time, held_at, of, run
from treadle import events as ev
from treadle.metrics.summary import summarize

#: Hadoop's test setup: the ideal preemption, all at once.
IDEAL = PreemptionParams(total_preemption_per_round=1.0, natural_termination_factor=1.0)


def flat(
    guaranteed: list[int], maximum: list[int], used: list[int], pending: list[int]
) -> QueueLoad:
    """A one-level table (queues A, B, C, ... under a root of their total)."""
    kids = [
        QueueLoad(name, g, m, u, p)
        for name, g, m, u, p in zip("ABCDEFG", guaranteed, maximum, used, pending, strict=False)
    ]
    return QueueLoad.parent("root", sum(guaranteed), max(maximum), kids)


def preempted(root: QueueLoad, cluster: int, params: PreemptionParams = IDEAL) -> dict[str, int]:
    """Containers (one unit each) one round takes from each leaf: Hadoop's count of
    ``IsPreemptionRequestFor`` per application (one application per leaf)."""
    obtain = to_obtain(root, cluster, params, step=1)
    running = [
        Running(f"{q.name}-{i}", q.name, 0, 1, float(i), 1.0)
        for q in root.leaves()
        for i in range(int(q.used))
    ]
    picked = select_victims(obtain, running, cluster * params.total_preemption_per_round)
    counts = Counter(cid.split("-")[0] for cid in picked)
    return {q.name: counts.get(q.name, 0) for q in root.leaves()}


def test_ignore_no_preemption_without_demand() -> None:
    """``testIgnore``: A 40 / B 40 / C 20 guaranteed, B and C use 60 and 40, nobody asks:
    "don't correct imbalances without demand", no preemption event at all."""
    root = flat([40, 40, 20], [100] * 3, [0, 60, 40], [0, 0, 0])
    assert preempted(root, 100) == {"A": 0, "B": 0, "C": 0}


def test_proportional_preemption_takes_ten_from_a() -> None:
    """``testProportionalPreemption``: A 10 / B 40 / C 20 / D 30 guaranteed, using 30 / 60
    / 10 / 0, asking 20 / 5 / 20 / 0: "A will preempt guaranteed-allocated", 10 containers
    from A's application, none from the others."""
    root = flat([10, 40, 20, 30], [100] * 4, [30, 60, 10, 0], [20, 5, 20, 0])
    assert preempted(root, 100) == {"A": 10, "B": 0, "C": 0, "D": 0}


def test_max_cap_a_queue_at_its_maximum_is_not_made_room_for() -> None:
    """``testMaxCap``: B (guarantee 40) is at its maximum of 45 and asks 10 more: "despite
    the imbalance, since B is at maxCap, do not correct", nothing from A."""
    root = flat([40, 40, 20], [100, 45, 100], [55, 45, 0], [10, 10, 0])
    assert preempted(root, 100)["A"] == 0


def test_preempt_cycle_all_of_a_s_demand_comes_from_c() -> None:
    """``testPreemptCycle``: A (guarantee 40, using nothing) asks 10; B and C use 60 and
    40 of guarantees 40 and 20: "ensure all pending rsrc from A get preempted from other
    queues", 10 from C."""
    root = flat([40, 40, 20], [100] * 3, [0, 60, 40], [10, 0, 0])
    assert preempted(root, 100) == {"A": 0, "B": 0, "C": 10}


def test_deadzone_ten_percent_over_is_ignored() -> None:
    """``testDeadzone``: B and C are 43/40 and 21/20 over, within
    ``max_ignored_over_capacity`` 0.1: "ignore 10% overcapacity to avoid jitter", no
    preemption."""
    root = flat([40, 40, 20], [100] * 3, [39, 43, 21], [10, 0, 0])
    assert preempted(root, 100) == {"A": 0, "B": 0, "C": 0}


def test_per_queue_disable_preemption_all_preemptable_takes_four_and_six() -> None:
    """``testPerQueueDisablePreemption`` (its second half, every queue preemptable): A 55
    asks 10, B 25 uses 54, C 20 uses 46: 4 containers from B, 6 from C."""
    root = flat([55, 25, 20], [100] * 3, [0, 54, 46], [10, 0, 0])
    assert preempted(root, 100) == {"A": 0, "B": 4, "C": 6}


def test_hierarchical_over_capacity_parent_gives_back_first() -> None:
    """``testPerQueueDisablePreemptionHierarchical`` (first half): root 200 = A 100 (B 50,
    C 50) + D 100 (E 10, F 90); B uses 60, C 50, E 90; F asks 10: "capacity taken from
    queueB (appA), not queueE (appC) despite queueE being far over its absolute capacity
    because queueA (queueB's parent) is over capacity and queueD (queueE's parent) is
    not": 10 from B, none from E."""
    a = QueueLoad.parent("A", 100, 200, [QueueLoad("B", 50, 200, 60), QueueLoad("C", 50, 200, 50)])
    d = QueueLoad.parent(
        "D", 100, 200, [QueueLoad("E", 10, 200, 90), QueueLoad("F", 90, 200, 0, 10)]
    )
    got = preempted(QueueLoad.parent("root", 200, 200, [a, d]), 200)
    assert got == {"B": 10, "C": 0, "E": 0, "F": 0}


def test_broad_hierarchy_takes_27_and_23() -> None:
    """``testPerQueueDisablePreemptionBroadHierarchical`` (first part, all preemptable):
    root 1000 = A 350 (B 150, C 200) + D 400 (E 200, F 200) + G 250 (H 100, I 150); F asks
    50: "resources come from queueE(appC) because it's a sibling and queueB(appA) because
    queueA is over capacity": 27 from B and 23 from E (the offers round halves up, as
    Hadoop's ``multiplyAndNormalizeUp``)."""
    m = 1000
    a = QueueLoad.parent("A", 350, m, [QueueLoad("B", 150, m, 200), QueueLoad("C", 200, m, 200)])
    d = QueueLoad.parent(
        "D", 400, m, [QueueLoad("E", 200, m, 250), QueueLoad("F", 200, m, 150, 50)]
    )
    g = QueueLoad.parent("G", 250, m, [QueueLoad("H", 100, m, 150), QueueLoad("I", 150, m, 50)])
    got = preempted(QueueLoad.parent("root", m, m, [a, d, g]), m)
    assert (got["B"], got["E"], got["C"] + got["H"] + got["I"]) == (27, 23, 0)


def test_inherit_parent_takes_more_from_the_queue_further_over() -> None:
    """``testPerQueueDisablePreemptionInheritParent`` (first part, all preemptable): root
    1000 = A 500 (B 200, C 200, D 100) + E 500 (F 200, G 200, H 100); C and D use 350
    each, F asks 200: "Resources taken more from queueD(appB) than queueC(appA) because
    it's over its capacity by a larger percentage": 17 from C, 183 from D."""
    m = 1000
    a = QueueLoad.parent(
        "A",
        500,
        m,
        [QueueLoad("B", 200, m), QueueLoad("C", 200, m, 350), QueueLoad("D", 100, m, 350)],
    )
    e = QueueLoad.parent(
        "E",
        500,
        m,
        [QueueLoad("F", 200, m, 0, 200), QueueLoad("G", 200, m, 200), QueueLoad("H", 100, m, 100)],
    )
    got = preempted(QueueLoad.parent("root", m, m, [a, e]), m)
    assert (got["C"], got["D"]) == (17, 183)


def test_per_round_maximum_scales_the_ideal_down() -> None:
    """YARN's defaults (``total_preemption_per_round`` 0.1, ``natural_termination_factor``
    0.2) on ``testPreemptCycle``'s table: the ideal 10 is first scaled to the round's
    maximum, then only the natural-termination share asked: 2 containers, and never more
    than 10% of the cluster in one round whatever the table."""
    root = flat([40, 40, 20], [100] * 3, [0, 60, 40], [10, 0, 0])
    assert preempted(root, 100, PreemptionParams()) == {"A": 0, "B": 0, "C": 2}
    greedy = flat([50, 50], [100, 100], [100, 0], [0, 100])
    assert (
        sum(preempted(greedy, 100, PreemptionParams(natural_termination_factor=1.0)).values()) == 10
    )


def test_expire_kill_after_the_wait_only() -> None:
    """``testExpireKill``: with the kill wait at 10 s, the round at 0 s selects 10 of C's
    containers (preemption requests, nothing killed), the round at 5 s selects the same
    ones again and kills nothing, the round just after 10 s kills them."""
    marks = Marks()
    chosen = [f"C-{i}" for i in range(10)]
    assert marks.kills(chosen, 0.0, 10.0) == []
    assert marks.kills(chosen, 5.0, 10.0) == []
    assert marks.kills(chosen, 10.001, 10.0) == chosen
    # A mark outlives a round that does not select its container, for twice the wait
    # (``cleanupStaledPreemptionCandidates``); older, it is forgotten.
    assert marks.kills(["C-10"], 11.0, 10.0) == []
    assert marks.kills([], 15.0, 10.0) == []
    assert marks.kills(["C-10"], 21.0, 10.0) == ["C-10"]
    assert marks.kills(["C-11"], 22.0, 10.0) == []
    assert marks.kills(["C-11"], 43.0, 10.0) == []  # forgotten at 42+: marked afresh


# ------------------------------------------------------------------------ in the simulator
CLUSTER = """
seed: 1
cluster:
  heartbeat_s: 1.0
  nodes:
    - {count: 4, resources: {vcores: 10, memory_mb: 10240}}
"""
TASK = "resources: {vcores: 1, memory_mb: 1024}"


def hog_and_late(duration_s: int) -> str:
    """40 one-core slots; ``a`` (guarantee 50%) fills them at 0 s, ``b`` (50%) asks for
    40 at 10 s."""
    return (
        CLUSTER
        + f"""
queues:
  - {{name: a, capacity: 50}}
  - {{name: b, capacity: 50}}
jobs:
  - {{name: hog, user: u1, queue: a, submit_s: 0,
      stages: [{{name: s, tasks: 100, duration_s: {duration_s}, {TASK}}}]}}
  - {{name: late, user: u2, queue: b, submit_s: 10,
      stages: [{{name: s, tasks: 40, duration_s: {duration_s}, {TASK}}}]}}
"""
    )


def test_guaranteed_queue_reaches_its_capacity_and_rounds_stay_within_their_maximum() -> None:
    """The issue's must-show, under YARN's defaults (monitor every 3 s, kill after 15 s,
    10% a round, natural termination 0.2): ``a`` holds all 40 slots, ``b`` (guarantee
    20) arrives at 10 s. ``b`` gets containers by preemption before any of ``a``'s end
    (first kill by 10 + 3 + 15 s), reaches its 20 by the monitor's interval plus the
    natural termination of ``a``'s 60 s tasks, no round takes more than 10% of the
    cluster (4 slots), every preempted task runs again (140 tasks complete) and the
    summary counts the preemptions and the work lost."""
    result = run(hog_and_late(60), preemption=True)
    pre = of(result, ev.CONTAINER_PREEMPTED)
    assert pre
    assert {r["queue"] for r in pre} == {"a"}
    first = min(r["t"] for r in pre)
    assert 10 < first <= 10 + 3 + 15 + 1
    assert max(Counter(r["t"] for r in pre).values()) <= 4
    reached = first_time(result, "b", 20)
    assert reached is not None
    assert reached <= 10 + 3 + 60 + 1
    assert held_at(result, reached)["b"] == 20
    ends = Counter(r["state"] for r in of(result, ev.CONTAINER_FINISHED))
    assert ends == {"COMPLETE": 140, "PREEMPTED": len(pre)}
    summary = summarize(result.records)["preemption"]
    assert summary["containers"] == len(pre)
    assert summary["per_queue"]["a"]["containers"] == len(pre)
    assert summary["container_s_lost"] > 10 * len(pre)  # each had run since about 0 s


def test_ideal_rounds_give_the_guarantee_within_interval_plus_wait() -> None:
    """As Hadoop's tests configure it (the ideal amount a round): with 300 s tasks
    nothing ends by itself, ``b`` reaches 20 slots in one kill, by its arrival plus the
    monitor's interval plus the kill wait; ``b`` then keeps exactly its guarantee."""
    result = run(
        hog_and_late(300),
        preemption=True,
        total_preemption_per_round=1.0,
        natural_termination_factor=1.0,
    )
    reached = first_time(result, "b", 20)
    assert reached is not None
    assert reached <= 10 + 3 + 15 + 1
    assert len(of(result, ev.CONTAINER_PREEMPTED)) == 20
    assert held_at(result, 100.0) == {"a": 20, "b": 20}


def test_preempt_cycle_in_the_simulator() -> None:
    """``testPreemptCycle`` as a workload: B (guarantee 40, max 60) and C (20, max 40)
    hold 60 and 40 of 100 slots, A (40) asks 10 at 5 s: the 10 come from C only."""
    wl = f"""
seed: 1
cluster:
  heartbeat_s: 1.0
  nodes:
    - {{count: 10, resources: {{vcores: 10, memory_mb: 10240}}}}
queues:
  - {{name: qa, capacity: 40}}
  - {{name: qb, capacity: 40, max_capacity: 60}}
  - {{name: qc, capacity: 20, max_capacity: 40}}
jobs:
  - {{name: b, user: ub, queue: qb, submit_s: 0,
      stages: [{{name: s, tasks: 60, duration_s: 400, {TASK}}}]}}
  - {{name: c, user: uc, queue: qc, submit_s: 0,
      stages: [{{name: s, tasks: 40, duration_s: 400, {TASK}}}]}}
  - {{name: a, user: ua, queue: qa, submit_s: 5,
      stages: [{{name: s, tasks: 10, duration_s: 400, {TASK}}}]}}
"""
    result = run(
        wl, preemption=True, total_preemption_per_round=1.0, natural_termination_factor=1.0
    )
    pre = of(result, ev.CONTAINER_PREEMPTED)
    assert Counter(r["queue"] for r in pre) == {"qc": 10}
    assert held_at(result, 60.0) == {"qb": 60, "qc": 30, "qa": 10}


def test_monitor_off_by_default_nothing_is_preempted() -> None:
    """Without ``preemption=true`` the monitor does not run (YARN's
    ``yarn.resourcemanager.scheduler.monitor.enable`` is false by default): ``b`` waits
    for ``a``'s tasks to end and the summary has no preemption section."""
    result = run(hog_and_late(60))
    assert of(result, ev.CONTAINER_PREEMPTED) == []
    assert "preemption" not in summarize(result.records)
    assert held_at(result, 59.0) == {"a": 40}


def test_the_monitor_counts_only_what_the_user_limit_lets_a_queue_use() -> None:
    """YARN's monitor counts a leaf's demand within its users' limits
    (``getTotalPendingResourcesConsideringUserLimit``): ``b``'s one user may hold only
    ``0.5 x 0.25`` of the cluster (5 slots, plus one container past it), so ``a`` gives
    back what ``b`` can use, not ``b``'s whole guarantee of 20 slots."""
    wl = hog_and_late(300).replace(
        "{name: b, capacity: 50}", "{name: b, capacity: 50, user_limit_factor: 0.25}"
    )
    result = run(
        wl, preemption=True, total_preemption_per_round=1.0, natural_termination_factor=1.0
    )
    pre = of(result, ev.CONTAINER_PREEMPTED)
    assert 5 <= len(pre) <= 6
    assert held_at(result, 100.0)["b"] == len(pre)

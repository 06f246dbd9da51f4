"""spark-fair, ujf, cfq and uwfq on the UWFQ spec's hand-checkable cases (section 7), the
virtual clocks on their own (exact deadlines), runtime partitioning, the stage views the
policies read, and the deadline and rank metrics (M1, M2).

Idealized model of the cases: R slots, 1-vcore tasks, a task starts when a slot frees. The
simulator runs with heartbeats and AM calls every H seconds, and each stage transition
(parent ends, NM reports it, the AM asks, the RM places, the AM launches) costs about two
of them: finish times are checked within 2 H per stage wave before the finish. Under
event-driven scheduling a task starts the instant a slot frees, and
``test_uwfq_event_mode`` checks the same cases within 2 H of the spec's exact values.
"""

from __future__ import annotations

from typing import Any

import pytest

from plugins.policies.cfq import CfqPolicy, VirtualClock
from plugins.policies.uwfq import TwoLevelClock, UwfqPolicy, VJob
from rm.policy import ClusterView, Policy, StageOrderingPolicy, TaskSet
from treadle import registry
from treadle.errors import PluginError
from treadle.messages import Container
from treadle.metrics.deadlines import deadline_ratios, rank_groups
from treadle.metrics.stats import worst_fraction_mean
from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.resources import Resources
from treadle.sim import Simulation
from treadle.workload.partition import Partitioning, parse_partition, partition_workload

H = 0.001
ONE = Resources(vcores=1)


def chain(name: str, user: str, submit: float, *stages: tuple[int, float]) -> JobSpec:
    """A job of stages in a line, each (tasks, duration)."""
    out, parents = [], ()
    for i, (n, d) in enumerate(stages):
        out.append(StageSpec(f"s{i}", ONE, (d,) * n, parents))
        parents = (f"s{i}",)
    return JobSpec(name, user, submit, tuple(out))


def workload(r: int, *jobs: JobSpec) -> Workload:
    node = NodeSpec("n1", Resources(vcores=r))
    return Workload("hand", ClusterSpec((node,), heartbeat_s=H), jobs)


def run(wl: Workload, policy: Policy | str, **params: Any) -> tuple[dict[str, float], Policy]:
    """Job name -> JCT, and the policy object."""
    p = registry.build("policies", policy, params) if isinstance(policy, str) else policy
    result = Simulation(wl, p, lambda: registry.build("asks", "greedy")).run()
    assert result.stalled is None
    names = {r["job"]: r["name"] for r in result.records if r["event"] == "job_submitted"}
    submit = {j.name: j.submit_s for j in wl.jobs}
    jct = {
        names[r["job"]]: r["t"] - submit[names[r["job"]]]
        for r in result.records
        if r["event"] == "job_finished"
    }
    return jct, p


def check(jct: dict[str, float], expected: dict[str, tuple[float, int]]) -> None:
    """``expected``: job -> (JCT, stage waves up to its finish); one more for the start
    (the AM registers, then asks)."""
    got = {j: round(jct[j], 4) for j in expected}
    for job, (want, waves) in expected.items():
        assert jct[job] == pytest.approx(want, abs=2 * H * (waves + 1) + 1e-9), (job, got)


# ------------------------------------------------------------------ T1: user context
T1 = workload(
    4, *(chain(f"A{i}", "A", 0, (4, 1)) for i in range(1, 5)), chain("B1", "B", 0.5, (4, 1))
)


def test_t1_uwfq_deadlines_are_exact_and_b1_goes_next() -> None:
    policy = RecordingUwfq()
    jct, _ = run(T1, policy)
    assert policy.kept == {"A1": 4.0, "A2": 8.0, "A3": 12.0, "A4": 16.0, "B1": 6.0}
    assert policy.clock.v_g == 2.0  # V_g at B1's arrival: nothing arrived after it
    check(jct, {"A1": (1, 1), "B1": (1.5, 2), "A2": (3, 3), "A3": (4, 4), "A4": (5, 5)})


def test_t1_two_level_clock() -> None:
    clock = TwoLevelClock(grace_resource_s=2.0)
    jobs = [VJob(f"A{i}", i, 4.0, 0.0) for i in range(1, 5)]
    for j in jobs:
        clock.arrive("A", 1.0, j, j.app_id, 0.0, 4)
    b1 = VJob("B1", 5, 4.0, 0.0)
    clock.arrive("B", 1.0, b1, "B1", 0.5, 4)
    assert clock.v_g == 2.0
    assert {j.app_id: j.deadline for j in [*jobs, b1]} == {
        "A1": 4.0,
        "A2": 8.0,
        "A3": 12.0,
        "A4": 16.0,
        "B1": 6.0,
    }


@pytest.mark.parametrize("level", ["stage", "job"])
def test_t1_cfq_serves_b1_after_every_a(level: str) -> None:
    jct, _ = run(T1, "cfq", level=level)
    check(jct, {"A1": (1, 1), "A2": (2, 2), "A3": (3, 3), "A4": (4, 4), "B1": (4.5, 5)})


def test_t1_cfq_clock() -> None:
    clock = VirtualClock()
    assert [clock.arrive(0.0, 4.0, 4) for _ in range(4)] == [4.0] * 4
    assert clock.arrive(0.5, 4.0, 4) == 4.5  # V(0.5) = 0.5: four stages share 4 slots


# ------------------------------------------------------------------ T5: stage-level CFQ
T5 = workload(4, chain("X", "a", 0, (4, 1), (4, 1)), chain("Y", "b", 0, (4, 1.25)))


class RecordingCfq(CfqPolicy):
    """Keeps each application's virtual finish times past its end."""

    def __init__(self, **params: Any) -> None:
        super().__init__(self.Params(**params))
        self.kept: dict[str, dict[int | None, float]] = {}

    def on_app_removed(self, app: Any, cluster: ClusterView) -> None:
        self.kept[app.name] = {s: f for s, (f, _) in self.finish[app.app_id].items()}
        super().on_app_removed(app, cluster)


class RecordingUwfq(UwfqPolicy):
    """Keeps each job's global virtual deadline past its end."""

    def __init__(self, **params: Any) -> None:
        super().__init__(self.Params(**params))
        self.kept: dict[str, float] = {}

    def on_app_removed(self, app: Any, cluster: ClusterView) -> None:
        self.kept[app.name] = self.jobs[app.app_id].deadline
        super().on_app_removed(app, cluster)


def test_t5_stage_cfq_runs_x2_before_y() -> None:
    policy = RecordingCfq()
    jct, _ = run(T5, policy)
    check(jct, {"Y": (2.25, 2), "X": (3.25, 3)})
    # Exact for the stages runnable at submission; X2 became runnable when X1's last task
    # ended (1 + a few H), where V = 2 + 2 x (that lag).
    assert policy.kept["X"][0] == 4.0
    assert policy.kept["Y"][0] == 5.0
    assert policy.kept["X"][1] == pytest.approx(6.0, abs=2 * 2 * 4 * H)


def test_t5_cfq_clock() -> None:
    clock = VirtualClock()
    assert clock.arrive(0.0, 4.0, 4) == 4.0
    assert clock.arrive(0.0, 5.0, 4) == 5.0
    assert clock.arrive(1.0, 4.0, 4) == 6.0


@pytest.mark.parametrize(("policy", "params"), [("cfq", {"level": "job"}), ("uwfq", {})])
def test_t5_job_level_serves_y_first(policy: str, params: dict[str, Any]) -> None:
    jct, _ = run(T5, policy, **params)
    check(jct, {"Y": (1.25, 1), "X": (3.25, 3)})


# ------------------------------------------------------------------ T6: Scenario-2 miniature
T6 = workload(4, *(chain(u, u, 0.1 * i, (4, 1), (4, 1), (4, 1)) for i, u in enumerate("abcd")))


@pytest.mark.parametrize(("policy", "params"), [("uwfq", {}), ("cfq", {"level": "job"})])
def test_t6_job_level_finishes_jobs_one_after_another(policy: str, params: dict[str, Any]) -> None:
    jct, _ = run(T6, policy, **params)
    check(jct, {"a": (3.0, 3), "b": (5.9, 6), "c": (8.8, 9), "d": (11.7, 12)})


def test_t6_stage_cfq_finishes_them_all_at_the_very_end() -> None:
    jct, _ = run(T6, "cfq")
    check(jct, {"a": (9.0, 9), "b": (9.9, 10), "c": (10.8, 11), "d": (11.7, 12)})


# ------------------------------------------------------------------ T7: Spark Fair vs UJF
T7 = workload(
    6, chain("A1", "A", 0, (6, 1)), chain("A2", "A", 0, (6, 1)), chain("B", "B", 0, (6, 1))
)


def test_t7_spark_fair_shares_slots_between_stages() -> None:
    jct, _ = run(T7, "spark-fair")
    check(jct, {"A1": (3, 3), "A2": (3, 3), "B": (3, 3)})


def test_t7_ujf_shares_slots_between_users() -> None:
    jct, _ = run(T7, "ujf")
    check(jct, {"B": (2, 2), "A1": (3, 3), "A2": (3, 3)})


def test_spark_fair_stage_level_shares_by_stage_not_job() -> None:
    """Job J has two parallel stages, K one: stage level gives J two thirds."""
    par = JobSpec("J", "u", 0, (StageSpec("p", ONE, (1.0,) * 6), StageSpec("q", ONE, (1.0,) * 6)))
    wl = workload(6, par, chain("K", "v", 0, (6, 1)))
    stage, _ = run(wl, "spark-fair")
    job, _ = run(wl, "spark-fair", level="job")
    check(stage, {"K": (3, 3), "J": (3, 3)})
    check(job, {"K": (2, 2), "J": (3, 3)})


# ------------------------------------------------------------------ P1, P2: partitioning
P1 = workload(4, chain("L", "A", 0, (4, 10)), chain("s", "B", 0.1, (4, 1)))


@pytest.mark.parametrize(
    ("atr", "expected"),
    [
        (None, {"s": (10.9, 2), "L": (10, 1)}),
        (1.0, {"s": (1.9, 2), "L": (11, 11)}),
        (0.5, {"s": (1.4, 3), "L": (11, 22)}),
    ],
)
def test_p1_partitioning_bounds_priority_inversion(
    atr: float | None, expected: dict[str, tuple[float, int]]
) -> None:
    wl = P1 if atr is None else partition_workload(P1, Partitioning(atr_s=atr))
    jct, policy = run(wl, "uwfq")
    assert isinstance(policy, UwfqPolicy)
    check(jct, expected)


def test_p2_partitioning_splits_a_skewed_stage_evenly() -> None:
    k = JobSpec("K", "u", 0, (StageSpec("s", ONE, (9.0, 1.0)),))
    wl = workload(4, k)
    part = partition_workload(wl, parse_partition("0.5"))
    assert part.jobs[0].stages[0].durations == (0.5,) * 20
    check(run(wl, "uwfq")[0], {"K": (9, 1)})
    check(run(part, "uwfq")[0], {"K": (2.5, 5)})


def test_partition_rules() -> None:
    wl = Workload(
        "w",
        ClusterSpec(tuple(NodeSpec(f"n{i}", Resources(vcores=4)) for i in range(8))),
        (
            JobSpec(
                "j",
                "u",
                0,
                (
                    StageSpec("a", ONE, (26.926 / 32,) * 32),
                    StageSpec("b", Resources(vcores=2), (1.0,)),
                ),
            ),
        ),
    )
    atr = partition_workload(wl, Partitioning())
    assert [s.tasks for s in atr.jobs[0].stages] == [54, 16]  # ceil(26.926 / 0.5); 32 / 2
    assert atr.jobs[0].stages[0].work_s == pytest.approx(26.926)
    loop = partition_workload(wl, Partitioning(rule="loopcustom", min_tasks=1))
    assert loop.jobs[0].stages[0].tasks == 55  # floor(4 + 1.832672 x 26.926^1.012495)
    again = partition_workload(atr, Partitioning())  # idempotent
    assert [s.tasks for s in again.jobs[0].stages] == [54, 16]
    for bad in ("x", "0", "-1", "nan"):
        with pytest.raises(ValueError, match="--partition"):
            parse_partition(bad)


# ------------------------------------------------------------------ the stage views
class Probe(StageOrderingPolicy):
    """Records what the views say of every task set it sees."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[tuple[str, int | None], tuple[float | None, bool]] = {}
        self.running: dict[tuple[str, int | None], int] = {}

    def prepare(self, sets: Any, cluster: ClusterView) -> None:
        for ts in sets:
            stage = ts.stage
            t = ts.app.stage_runnable_s(stage) if stage is not None else None
            self.seen.setdefault((ts.app.name, stage), (t, bool(ts.waiting)))

    def on_container_allocated(self, container: Container, cluster: ClusterView) -> None:
        app = cluster.apps[container.app_id]
        stage = app.stage_of(container.priority)
        assert stage is not None
        key = (app.name, stage)
        self.running[key] = max(self.running.get(key, 0), app.stage_running(stage))

    def stage_key(self, ts: TaskSet, cluster: ClusterView) -> Any:
        return 0


def test_views_name_stages_count_running_and_time_runnable_exactly() -> None:
    wl = workload(4, chain("X", "a", 0.25, (4, 1), (2, 1)))
    probe = Probe()
    result = Simulation(wl, probe, lambda: registry.build("asks", "greedy")).run()
    ends = [r["t"] for r in result.records if r["event"] == "container_finished"]
    first_wave_end = sorted(ends)[3]
    # Stage 0 runnable at submission, stage 1 when the last task of stage 0 ended.
    assert probe.seen[("X", 0)][0] == 0.25
    assert probe.seen[("X", 1)][0] == first_wave_end
    assert probe.running == {("X", 0): 4, ("X", 1): 2}


def test_a_waiting_stage_keeps_its_slots_from_a_later_one() -> None:
    """X's second stage is runnable when X's first ends, before X's AM asks for it; Z's
    asks are pending then. UWFQ (X's deadline is earlier) keeps the slots for X2, so X
    finishes at 2, not after Z; with hold_s=0 Z's tasks take them."""
    wl = workload(4, chain("X", "a", 0, (4, 1), (4, 1)), chain("Z", "b", 0.5, (4, 3)))
    check(run(wl, "uwfq")[0], {"X": (2, 2)})
    assert run(wl, "uwfq", hold_s=0)[0]["X"] > 3.9


# ------------------------------------------------------------------ parameters
@pytest.mark.parametrize(
    ("policy", "params"),
    [
        ("uwfq", {"late_stages": "never"}),
        ("uwfq", {"grace_resource_s": -1}),
        ("uwfq", {"size_inflation": 0}),
        ("cfq", {"level": "task"}),
        ("cfq", {"stage_size": "x"}),
        ("spark-fair", {"tie": "random"}),
        ("ujf", {"offer": "all"}),
        ("ujf", {"hold_s": -0.1}),
        ("uwfq", {"unknown": 1}),
    ],
)
def test_bad_parameters_are_one_clear_line(policy: str, params: dict[str, Any]) -> None:
    with pytest.raises(PluginError) as e:
        registry.build("policies", policy, params)
    text = str(e.value)
    assert "\n" not in text
    assert policy in text
    assert next(iter(params)) in text


# ------------------------------------------------------------------ M1, M2
def test_m1_deadline_ratios_count_zero_as_slack() -> None:
    ref = {"j1": (10.0, 10.0), "j2": (20.0, 20.0), "j3": (30.0, 30.0)}
    r = deadline_ratios(ref, {"j1": 5.0, "j2": 25.0, "j3": 30.0}, 0.0, 0.0)
    assert (r.dvr, r.violations, r.dsr, r.slack) == (0.25, 1, 0.25, 2)


def test_m2_rank_groups() -> None:
    rts = [float(x) for x in range(1, 11)]
    assert rank_groups(rts) == (4.5, 9.0, 10.0)
    assert worst_fraction_mean(rts) == 10.0


def test_workload_key_partitions_like_the_flag() -> None:
    from treadle.workload import parse_workload

    text = """
cluster: {heartbeat_s: 0.1, nodes: [{count: 1, resources: {vcores: 4}}]}
partition: {atr_s: 0.5}
jobs:
  - name: k
    user: u
    stages: [{name: s, tasks: 2, duration_s: [9, 1], resources: {vcores: 1}}]
"""
    wl = parse_workload(text, "k.yaml")
    assert wl.jobs[0].stages[0].durations == (0.5,) * 20

"""The altruistic ask strategy (Carbyne's AM side): reverse packing, P(altruism), caching.

Expected DEFAULT / ALTRUISTIC sets are worked out by hand in the comments: the forward
packing gives the completion time T, the backward packing from T gives latest starts, and
a runnable task whose latest start is now is DEFAULT. Stages are served longest remaining
path first, tasks of a stage longest first.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest
from pydantic import ValidationError

from am.asks import group_of, priority_of
from am.core import ApplicationMaster
from plugins.asks.altruistic import AltruisticAsks, AltruisticParams, latest_starts
from plugins.asks.greedy import GreedyAsks
from treadle import registry
from treadle.errors import PluginError
from treadle.messages import (
    AllocateResponse,
    Ask,
    AskKind,
    Container,
    ContainerState,
    ContainerStatus,
)
from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.resources import ZERO, Resources, total
from treadle.study.runner import PolicyChoice, RunOptions, run_sim

D, A = AskKind.DEFAULT, AskKind.ALTRUISTIC
ONE = Resources(vcores=1, memory_mb=1024)


def units(k: float) -> Resources:
    return ONE * k


@dataclass
class Progress:
    """A JobProgress with its state set by hand: per stage, the unassigned durations, the
    expected ends of running tasks and the number of finished tasks."""

    job: JobSpec
    share: Resources | None
    cluster: Resources = field(default_factory=lambda: units(100))
    pending: list[list[float]] = field(default_factory=list)
    ends: list[list[float]] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    task_events: int = 0

    def __post_init__(self) -> None:
        n = len(self.job.stages)
        self.pending = self.pending or [list(s.durations) for s in self.job.stages]
        self.ends = self.ends or [[] for _ in range(n)]
        self.finished = self.finished or [0] * n

    @property
    def version(self) -> int:
        """Moves with any change of the state set by hand."""
        state = (self.pending, self.ends, self.finished, self.share, self.cluster)
        return hash(repr((state, self.task_events)))

    def runnable_stages(self) -> list[int]:
        st = self.job.stages
        return [
            i
            for i in range(len(st))
            if self.pending[i]
            and all(self.finished[p] == st[p].tasks for p in self.job.parent_indices[i])
        ]

    def unassigned(self, stage: int) -> int:
        return len(self.pending[stage])

    def unassigned_durations(self, stage: int) -> list[float]:
        return list(self.pending[stage])

    def unassigned_mean_duration(self, stage: int) -> float:
        p = self.pending[stage]
        return sum(p) / len(p) if p else 0.0

    def running(self, stage: int) -> int:
        return len(self.ends[stage])

    def running_ends(self, stage: int) -> list[float]:
        return list(self.ends[stage])

    def done(self, stage: int) -> int:
        return self.finished[stage]

    @property
    def remaining_work_s(self) -> float:
        return float(sum(map(sum, self.pending)))

    @property
    def remaining_usage(self) -> Resources:
        """Of the unassigned tasks only (running ones are not counted here)."""
        return total(
            [s.resources * sum(p) for s, p in zip(self.job.stages, self.pending, strict=True)]
        )

    def launch(self, stage: int, now: float) -> None:
        d = self.pending[stage].pop(0)
        self.ends[stage].append(now + d)


def branch_job(name: str = "j") -> JobSpec:
    """A critical chain a(2 x 10 s) -> b(10 s) -> d(5 s) and a short branch c(2 x 2 s) into
    the barrier d (two parents). Every task takes one unit <1 vcore, 1 GB>."""
    return JobSpec(
        name,
        "u",
        0.0,
        (
            StageSpec("a", ONE, (10.0, 10.0)),
            StageSpec("b", ONE, (10.0,), ("a",)),
            StageSpec("c", ONE, (2.0, 2.0)),
            StageSpec("d", ONE, (5.0,), ("b", "c")),
        ),
    )


def kinds(asks: list[Ask]) -> dict[tuple[int, AskKind], int]:
    """(stage, kind) -> count, checking each ask's priority encodes its stage and kind."""
    out = {}
    for a in asks:
        stage = a.priority // 2
        assert a.priority == priority_of(stage, a.kind)
        assert a.count > 0
        out[(stage, a.kind)] = a.count
    return out


def strategy(**params: float) -> AltruisticAsks:
    """The strategy with the hand-computed examples' setting: no launch overhead (tasks
    hold containers for their durations exactly) unless a test sets one."""
    return AltruisticAsks(AltruisticParams(**{"overhead_s": 0.0, **params}))


def asks_of(progress: Progress, now: float = 0.0, **params: float) -> list[Ask]:
    return strategy(**params).asks(progress, now)


# --------------------------------------------------------------------- reverse packing
@pytest.mark.parametrize("k", [2, 4])
def test_short_branch_is_altruistic_and_the_critical_chain_default(k: int) -> None:
    # Share 2: forward a,a 0-10; b 10-20 and c,c 10-12, 12-14; d 20-25: T = 25.
    # Backward from 25: d 0-5; b 5-15 and c,c 5-7, 7-9; a,a 15-25. Latest starts (25 minus
    # the reversed finish): a 0, 0 (DEFAULT); c 18, 16 (ALTRUISTIC).
    # Share 4: the same T; c,c both 5-7 backward: latest starts 18, 18.
    p = Progress(branch_job(), units(k))
    c_latest = [16.0, 18.0] if k == 2 else [18.0, 18.0]
    assert latest_starts(p, units(k), 0.0) == {0: [0.0, 0.0], 2: c_latest}
    assert asks_of(p) == [
        Ask(priority_of(0, D), ONE, 2, D, 10.0, 39.0, ONE * 39, group_of(0)),
        Ask(priority_of(2, A), ONE, 2, A, 2.0, 39.0, ONE * 39, group_of(2)),
    ]


def test_serial_share_asks_for_one_task_now() -> None:
    # Share 1 unit: everything runs one at a time, T = 39 s of work. Backward from 39:
    # d 0-5, b 5-15, then a (longer path from the DAG's start than c) 15-25, 25-35, then
    # c 35-37, 37-39. Latest starts: a 14, 4; c 2, 0: one c task must start now.
    p = Progress(branch_job(), units(1))
    assert latest_starts(p, units(1), 0.0) == {0: [4.0, 14.0], 2: [0.0, 2.0]}
    assert kinds(asks_of(p)) == {(0, A): 2, (2, D): 1, (2, A): 1}


def test_launch_overhead_makes_a_stage_of_short_tasks_critical() -> None:
    # x (10 s) and y (8 x 1 s) into z (1 s), share 2. Without overhead: x 0-10 beside y's
    # eight tasks end to end (0-8), T = 11; backward, y has 2 s of slack: latest starts
    # 2..9, all ALTRUISTIC, and x is due now.
    job = JobSpec(
        "short",
        "u",
        0.0,
        (
            StageSpec("x", ONE, (10.0,)),
            StageSpec("y", ONE, (1.0,) * 8),
            StageSpec("z", ONE, (1.0,), ("x", "y")),
        ),
    )
    p = Progress(job, units(2))
    assert latest_starts(p, units(2), 0.0) == {0: [0.0], 1: [2.0 + i for i in range(8)]}
    assert kinds(asks_of(p)) == {(0, D): 1, (1, A): 8}
    # Each task holds its container 1 s longer: y takes 16 s and is the critical branch.
    # Forward: x 0-11; y 0-2, ..., 10-12 on one unit, 11-13 on x's, 12-14; z 14-16: T = 16.
    # Backward from 16: z 0-2; x 2-13; y 2-4, ..., 12-14, 13-15, 14-16: latest starts 12,
    # 10, ..., 2, 1, 0. One y task is due now; x may wait until 3.
    assert latest_starts(p, units(2), 0.0, 1.0) == {
        0: [3.0],
        1: [0.0, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0],
    }
    assert kinds(asks_of(p, overhead_s=1.0)) == {(0, A): 1, (1, D): 1, (1, A): 7}


def test_chain_alone_is_all_default() -> None:
    # a(2 x 10 s) -> b(10 s) in a share of 2: a must start both tasks now to end at 20.
    job = JobSpec(
        "chain", "u", 0.0, (StageSpec("a", ONE, (10.0, 10.0)), StageSpec("b", ONE, (10.0,), ("a",)))
    )
    assert kinds(asks_of(Progress(job, units(2)))) == {(0, D): 2}


def test_longest_task_of_a_stage_is_the_default_one() -> None:
    # One stage, tasks of 10 s and 4 s in a share of 2: T = 10; the 4 s task may start at 6.
    job = JobSpec("one", "u", 0.0, (StageSpec("a", ONE, (4.0, 10.0)),))
    p = Progress(job, units(2))
    assert latest_starts(p, units(2), 0.0) == {0: [0.0, 6.0]}
    assert asks_of(p) == [
        Ask(priority_of(0, D), ONE, 1, D, 7.0, 14.0, ONE * 14, group_of(0)),
        Ask(priority_of(0, A), ONE, 1, A, 7.0, 14.0, ONE * 14, group_of(0)),
    ]


def test_packing_is_multi_resource() -> None:
    # Share <4 vcores, 4 GB>. x: 2 tasks <2 vcores, 1 GB> of 10 s; y: 2 tasks <1 vcore,
    # 2 GB> of 4 s; z <1, 1 GB> of 1 s after both. Forward: x,x 0-10 use every vcore, so
    # y,y 10-14, z 14-15: T = 15. Backward: z 0-1; x (longer) 1-11, which leaves 2 GB but
    # no vcore, so y,y 11-15. Latest starts: x 4, 4 (ALTRUISTIC); y 0, 0 (DEFAULT).
    gb = 1024
    job = JobSpec(
        "mr",
        "u",
        0.0,
        (
            StageSpec("x", Resources(vcores=2, memory_mb=gb), (10.0, 10.0)),
            StageSpec("y", Resources(vcores=1, memory_mb=2 * gb), (4.0, 4.0)),
            StageSpec("z", Resources(vcores=1, memory_mb=gb), (1.0,), ("x", "y")),
        ),
    )
    share = Resources(vcores=4, memory_mb=4 * gb)
    p = Progress(job, share)
    assert latest_starts(p, share, 0.0) == {0: [4.0, 4.0], 1: [0.0, 0.0]}
    assert kinds(asks_of(p)) == {(0, A): 2, (1, D): 2}


@pytest.mark.parametrize("running", [False, True], ids=["idle", "one-running"])
def test_the_shorter_of_the_two_packings_sets_t(running: bool) -> None:
    # Share 3 vcores. s0: 2 s on 2 vcores, then s2: 2 s on 1 vcore; s1: 5 s on 2 vcores.
    # Forward (s1 has the longest path to the end): s1 0-5 leaves 1 vcore, so s0 5-7 and
    # s2 7-9: T = 9, and then nothing would be due now (s0 at 2, s1 at 4). Backward from 9:
    # s1 0-5 beside s2 0-2, then s0 5-7: it spans 7, so T = 7: s0 is due now, s1 at 2.
    # With z (1 vcore) running until 1 the backward packing from 7 still fits: z holds 1
    # vcore over real 0-1, beside s0's 2.
    cpu = Resources(vcores=1)
    job = JobSpec(
        "short",
        "u",
        0.0,
        (
            StageSpec("s0", cpu * 2, (2.0,)),
            StageSpec("s1", cpu * 2, (5.0,)),
            StageSpec("s2", cpu, (2.0,), ("s0",)),
            StageSpec("z", cpu, (1.0,)),
        ),
    )
    share = cpu * 3
    ends: list[list[float]] = [[], [], [], [1.0] if running else []]
    pending = [[2.0], [5.0], [2.0], [] if running else [1.0]]
    if not running:  # z is not part of the job then: the same DAG without it
        job = JobSpec("short", "u", 0.0, job.stages[:3])
        pending, ends = pending[:3], ends[:3]
    p = Progress(job, share, pending=pending, ends=ends)
    assert latest_starts(p, share, 0.0) == {0: [0.0], 1: [2.0]}
    assert kinds(asks_of(p)) == {(0, D): 1, (1, A): 1}


def test_running_tasks_hold_their_share_until_they_end() -> None:
    # Stage a: 3 tasks of 10 s, share 2; one was launched at 0 (ends at 10). Forward: one
    # more task 0-10, the last 10-20: T = 20. Backward: the running task holds one unit over
    # real 0-10, so both waiting tasks fit in real 10-20: latest starts 10, 10.
    job = JobSpec("r", "u", 0.0, (StageSpec("a", ONE, (10.0,) * 3),))
    p = Progress(job, units(2), pending=[[10.0, 10.0]], ends=[[10.0]])
    assert latest_starts(p, units(2), 0.0) == {0: [10.0, 10.0]}
    assert kinds(asks_of(p)) == {(0, A): 2}
    # Share 1 (the running task uses all of it): T = 30, latest starts 10 and 20.
    p.share = units(1)
    assert latest_starts(p, units(1), 0.0) == {0: [10.0, 20.0]}
    # A running task that outlasts the horizon of the others: a 30 s task runs 0-30 in a
    # share of 2, so the 10 s ones go 0-10, 10-20 forward (T = 30) and 10-20, 20-30 backward.
    p = Progress(job, units(2), pending=[[10.0, 10.0]], ends=[[30.0]])
    assert latest_starts(p, units(2), 0.0) == {0: [10.0, 20.0]}


def test_share_smaller_than_a_task_asks_greedily() -> None:
    # No packing fits a task into half a vcore (or into a share without memory): every
    # runnable task is DEFAULT, as greedy asks.
    for share in (units(0.5), Resources(vcores=8)):
        p = Progress(branch_job(), share)
        assert latest_starts(p, share, 0.0) is None
        assert asks_of(p) == GreedyAsks().asks(p, 0.0)
        assert kinds(asks_of(p)) == {(0, D): 2, (2, D): 2}


@pytest.mark.parametrize("share", [None, ZERO], ids=["no-share", "zero-share"])
def test_without_a_share_asks_are_greedy(share: Resources | None) -> None:
    p = Progress(branch_job(), share)
    s = strategy()
    assert s.asks(p, 0.0) == GreedyAsks().asks(p, 0.0)
    assert s.plans == 0


def test_altruism_zero_is_greedy() -> None:
    p = Progress(branch_job(), units(2))
    s = strategy(altruism=0.0)
    assert s.asks(p, 0.0) == GreedyAsks().asks(p, 0.0)
    assert kinds(s.asks(p, 0.0)) == {(0, D): 2, (2, D): 2}
    assert s.plans == 0


def test_no_runnable_stage_no_asks() -> None:
    p = Progress(branch_job(), units(2), pending=[[], [10.0], [], [5.0]], ends=[[3.0], [], [], []])
    assert asks_of(p) == []


# --------------------------------------------------------------------- caching
def test_plan_is_cached_until_the_share_or_a_task_changes() -> None:
    p = Progress(branch_job(), units(1))
    s = strategy()
    # Share 1: latest starts a 4, 14; c 0, 2 (see test_serial_share_asks_for_one_task_now).
    assert kinds(s.asks(p, 0.0)) == {(0, A): 2, (2, D): 1, (2, A): 1}
    assert s.plans == 1
    # The c task due now is launched at 0; no task event, so no new plan. The launch counts
    # against the DEFAULT asks: the other c task is due at 2, the a tasks at 4 and 14.
    p.launch(2, 0.0)
    assert kinds(s.asks(p, 1.0)) == {(0, A): 2, (2, A): 1}
    assert kinds(s.asks(p, 2.0)) == {(0, A): 2, (2, D): 1}
    assert kinds(s.asks(p, 4.0)) == {(0, D): 1, (0, A): 1, (2, D): 1}
    assert s.plans == 1
    # A new share: a new plan. Share 2 at t=4; c0 was expected to end at 2 but is not
    # reported yet, so it ends now. Forward a,a 4-14, c 14-16, b 14-24, d 24-29: T = 29.
    # Backward: d 0-5, b 5-15 and c 5-7, a,a 15-25: a is due now (latest start 29 - 25),
    # c at 29 - 7 = 22.
    p.share = units(2)
    assert kinds(s.asks(p, 4.0)) == {(0, D): 2, (2, A): 1}
    assert s.plans == 2
    # The same share again: no new plan.
    assert kinds(s.asks(p, 5.0)) == {(0, D): 2, (2, A): 1}
    assert s.plans == 2
    # A task event (c0's completion reported): a new plan.
    p.ends[2] = []
    p.finished[2] = 1
    p.task_events += 1
    s.asks(p, 6.0)
    assert s.plans == 3


@pytest.mark.parametrize(
    ("tolerance", "new_share", "replans"),
    [
        (0.0, 2.05, True),  # the default: any change re-plans
        (0.05, 2.05, False),  # 2.5% off: the plan stands
        (0.05, 2.2, True),  # 10% off
        (0.05, 1.8, True),
    ],
)
def test_replan_tolerance_keeps_a_plan_through_small_share_changes(
    tolerance: float, new_share: float, replans: bool
) -> None:
    p = Progress(branch_job(), units(2))
    s = strategy(replan_tolerance=tolerance)
    first = kinds(s.asks(p, 0.0))
    p.share = units(new_share)
    again = kinds(s.asks(p, 0.0))
    assert s.plans == (2 if replans else 1)
    if not replans:
        assert again == first


def test_replan_tolerance_is_checked() -> None:
    with pytest.raises(ValidationError):
        AltruisticParams(replan_tolerance=1.0)
    with pytest.raises(ValidationError):
        AltruisticParams(replan_tolerance=-0.1)


# --------------------------------------------------------------------- P(altruism)
def yields(seed: int, name: str = "j", events: int = 16) -> list[bool]:
    """Whether each of ``events`` successive scheduling events yields (asks ALTRUISTIC)."""
    p = Progress(branch_job(name), units(2))
    s = strategy(altruism=0.5, seed=seed)
    out = []
    for _ in range(events):
        p.task_events += 1  # a new scheduling event: a new draw
        out.append(any(a.kind is A for a in s.asks(p, 0.0)))
    assert s.plans == events
    return out


def test_altruism_draws_are_deterministic() -> None:
    # Fixed across processes (seeded from zlib.crc32 of the name, not hash()), so a run
    # replays byte for byte; both outcomes occur at P(altruism) = 0.5.
    first = yields(7)
    assert first == yields(7)
    assert 0 < sum(first) < len(first)
    assert first != yields(8)
    assert first != yields(7, "another-job")
    # Pinned: a change of seeding (e.g. to hash(), salted per process) breaks this.
    assert "".join("Y" if y else "n" for y in first) == "YnnnYYnYYYnnnnYn"


def test_altruism_parameter_is_validated() -> None:
    with pytest.raises(PluginError, match="altruism"):
        registry.build("asks", "altruistic", {"altruism": 1.5})
    with pytest.raises(PluginError, match="unknown parameter"):
        registry.build("asks", "altruistic", {"probability": 0.5})
    assert isinstance(registry.build("asks", "altruistic", {"altruism": 0.3}), AltruisticAsks)


# --------------------------------------------------------------------- the AM core
def test_am_reports_expected_ends_and_task_events() -> None:
    job = JobSpec("r", "u", 0.0, (StageSpec("a", ONE, (10.0,) * 3),))
    am = ApplicationMaster(job, "app", AltruisticAsks())
    assert am.task_events == 0
    grant = Container("c0", "app", "n1", priority_of(0, A), ONE, A)
    am.on_allocate_response(AllocateResponse([grant], share=units(2), response_id=1), 0.0)
    assert am.running_ends(0) == [10.0]  # launched at 0, lasts 10 s
    # As in test_running_tasks_hold_their_share_until_they_end: both others can wait.
    assert kinds(am.strategy.asks(am, 0.0)) == {(0, A): 2}
    assert kinds(am.strategy.asks(am, 10.0)) == {(0, D): 2}  # their latest start has come
    done = ContainerStatus("c0", ContainerState.COMPLETE, 0, 0.0, 10.0)
    am.on_allocate_response(AllocateResponse(completed=[done], share=units(2), response_id=2), 10)
    assert am.task_events == 1
    assert am.running_ends(0) == []
    assert kinds(am.strategy.asks(am, 10.0)) == {(0, D): 2}  # new plan: T = 20
    failed = Container("c1", "app", "n1", priority_of(0, D), ONE)
    am.on_allocate_response(AllocateResponse([failed], share=units(2), response_id=3), 11.0)
    assert am.running_ends(0) == [21.0]
    am.on_launch_failed("c1")
    assert am.task_events == 2
    assert am.running_ends(0) == []


# --------------------------------------------------------------------- end to end
def test_simulated_dag_workload_under_drf() -> None:
    # Two users' jobs, each a 4 x 10 s chain head, a 10 s middle, a short 4 x 2 s branch
    # and a barrier, on one 4-vcore node under drf (shares sent to AMs). Once an AM has a
    # share, the short branch c always has slack (it ends long before b can), and the chain
    # is critical: every c container answers an ALTRUISTIC ask, every other one a DEFAULT
    # ask. drf ignores the kind of an ask and priority_of keeps the stages in order, so the
    # schedule is greedy's, to the record.
    def dag(name: str, user: str, submit: float) -> JobSpec:
        return JobSpec(
            name,
            user,
            submit,
            (
                StageSpec("a", ONE, (10.0,) * 4),
                StageSpec("b", ONE, (10.0,), ("a",)),
                StageSpec("c", ONE, (2.0,) * 4),
                StageSpec("d", ONE, (5.0,), ("b", "c")),
            ),
        )

    node = NodeSpec("n0", Resources(vcores=4, memory_mb=16 * 1024))
    wl = Workload("alt", ClusterSpec((node,)), (dag("j1", "u1", 0.0), dag("j2", "u2", 1.0)))

    def sim(strategy: str) -> list[dict[str, object]]:
        # Plans without launch overhead, as the comment above counts.
        params = {"altruistic.overhead_s": 0.0} if strategy == "altruistic" else {}
        options = RunOptions(ask_strategy=strategy, ask_params=params, slowdown=False)
        result, _ = run_sim(wl, PolicyChoice("drf", {}), options=options)
        assert result.stalled is None
        assert result.finished == 2
        return result.records

    records = sim("altruistic")
    allocated = [r for r in records if r["event"] == "container_allocated"]
    assert len(allocated) == 20  # one container per task: no surplus grants
    by_stage = Counter((int(str(r["priority"])) // 2, r["kind"]) for r in allocated)
    # j1's first a tasks were placed before its AM had a share (asked as greedy does).
    assert by_stage == {
        (0, "DEFAULT"): 8,
        (1, "DEFAULT"): 2,
        (2, "ALTRUISTIC"): 8,
        (3, "DEFAULT"): 2,
    }

    def schedule(recs: list[dict[str, object]]) -> list[tuple[object, ...]]:
        return [
            (r["t"], r["event"], r.get("container")) for r in recs if r["event"] != "run_started"
        ]

    assert schedule(records) == schedule(sim("greedy"))

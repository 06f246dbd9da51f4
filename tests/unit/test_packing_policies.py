"""The packing and job-size policies: tetris, sjf, carbyne (and their shared kernels).

Decisions of one heartbeat are checked on the RM core directly (a node, a few jobs and
their asks, one heartbeat, which containers went where); whole runs in the simulator.
Every expectation is computed by hand in the comments next to it.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import pytest

from rm.core.facade import ResourceManager
from rm.policy import AppView, FairWindow, alignment, remaining_work
from treadle import registry
from treadle.dag import critical_path_s, earliest_finish, time_to_end
from treadle.errors import PluginError
from treadle.messages import (
    AllocateRequest,
    AppSubmission,
    Ask,
    AskKind,
    NodeHeartbeat,
    NodeRegistration,
)
from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.resources import Resources
from treadle.sim import SimResult, Simulation

GB = 1024
D, A = AskKind.DEFAULT, AskKind.ALTRUISTIC


def res(vcores: float, gb: float = 1) -> Resources:
    return Resources(vcores=vcores, memory_mb=gb * GB)


class Rig:
    """The RM core with one policy, nodes and jobs whose asks the test sets by hand."""

    def __init__(
        self, policy: str, nodes: Mapping[str, Resources], params: Mapping[str, Any] | None = None
    ) -> None:
        self.rm = ResourceManager(registry.build("policies", policy, params))
        self.seq = dict.fromkeys(nodes, 0)
        for node_id, r in nodes.items():
            self.rm.register_node(NodeRegistration(node_id, r), 0.0)
        self.ids: dict[str, str] = {}
        self.names: dict[str, str] = {}

    def job(self, name: str, *asks: Ask) -> None:
        app_id = self.rm.submit_application(AppSubmission(name, name, "default"), 0.0)
        self.rm.register_application_master(app_id, 0.0)
        self.ids[name], self.names[app_id] = app_id, name
        if asks:
            self.ask(name, *asks)

    def ask(self, name: str, *asks: Ask) -> Resources | None:
        """Send asks; returns the share in the response."""
        resp = self.rm.on_allocate(AllocateRequest(self.ids[name], asks=list(asks)), 0.0)
        return resp.share

    def heartbeat(self, node_id: str) -> list[tuple[str, int]]:
        """(job, priority) of each container placed, in order."""
        self.seq[node_id] += 1
        start = len(self.rm.log.records)
        self.rm.node_heartbeat(NodeHeartbeat(node_id, self.seq[node_id]), 0.0)
        return [
            (self.names[r["job"]], r["priority"])
            for r in self.rm.log.records[start:]
            if r["event"] == "container_allocated"
        ]


def ask(prio: int, r: Resources, count: int, kind: AskKind = D, work: float = 0.0) -> Ask:
    return Ask(prio, r, count, kind, 10.0, work)


def jobs_of(placed: list[tuple[str, int]]) -> Counter[str]:
    return Counter(job for job, _ in placed)


def run(wl: Workload, policy: str, params: Mapping[str, Any] | None = None) -> SimResult:
    result = Simulation(
        wl,
        registry.build("policies", policy, params),
        lambda: registry.build("asks", "greedy"),
        policy_name=policy,
    ).run()
    assert result.stalled is None
    assert result.finished == len(wl.jobs)
    return result


def jcts(result: SimResult) -> dict[str, float]:
    subs = {r["job"]: r for r in result.records if r["event"] == "job_submitted"}
    return {
        subs[r["job"]]["name"]: r["t"] - subs[r["job"]]["t"]
        for r in result.records
        if r["event"] == "job_finished"
    }


def one_node(vcores: float, gb: float) -> ClusterSpec:
    return ClusterSpec((NodeSpec("n0", res(vcores, gb)),))


# ----------------------------------------------------------------------------- kernels
def test_alignment_by_hand() -> None:
    cap, free = res(8, 16), res(4, 8)
    # (2/8)(4/8) + (4/16)(8/16) = 0.125 + 0.125
    assert alignment(res(2, 4), free, cap) == pytest.approx(0.25)
    # (1/8)(4/8) + (8/16)(8/16) = 0.0625 + 0.25: the memory-heavy ask lines up better
    assert alignment(res(1, 8), free, cap) == pytest.approx(0.3125)
    # A dimension the node lacks counts nothing (the ask could not fit anyway).
    assert alignment(Resources(vcores=2, gpu=1), free, cap) == pytest.approx(0.125)


def test_remaining_work_prefers_the_am_hint() -> None:
    assert remaining_work([ask(0, res(1), 3, work=500.0), ask(2, res(1), 1, work=700.0)]) == 700
    # No hint: task-seconds asked for (3 x 10 s + 1 x 10 s), else the task count.
    assert remaining_work([ask(0, res(1), 3), ask(2, res(1), 1)]) == 40
    assert remaining_work([Ask(0, res(1), 3)]) == 3


def test_remaining_work_is_weighted_by_the_cluster() -> None:
    cap = res(100, 400)
    # The AM's usage hint: its dominant share of the cluster, in seconds of the whole
    # cluster (memory here: 800 GB-s of 400 GB is 2 s; 50 vcore-s of 100 is 0.5 s).
    hinted = Ask(0, res(1, 8), 3, AskKind.DEFAULT, 10.0, 50.0, res(50, 800))
    assert remaining_work([hinted], cap) == pytest.approx(2.0)
    # Without it, task-seconds weighted by the demand's dominant share (8 GB of 400).
    assert remaining_work([ask(0, res(1, 8), 3, work=50.0)], cap) == pytest.approx(1.0)
    assert remaining_work([ask(0, res(4, 8), 3)], cap) == pytest.approx(1.2)  # 3 x 10 x 4%
    # A job of small tasks is less work than one of as many task-seconds of big ones.
    small = [ask(0, res(1, 1), 1, work=100.0)]
    big = [ask(0, res(10, 40), 1, work=50.0)]
    assert remaining_work(small, cap) < remaining_work(big, cap)
    assert remaining_work(small) > remaining_work(big)  # unweighted: the other way


def diamond() -> JobSpec:
    """a -> (b, c) -> d; mean durations a 2, b 10 (4 and 16), c 3, d 1."""
    return JobSpec(
        "diamond",
        "u",
        0.0,
        (
            StageSpec("a", res(1), (2.0,)),
            StageSpec("b", res(1), (4.0, 16.0), ("a",)),
            StageSpec("c", res(1), (3.0, 3.0, 3.0), ("a",)),
            StageSpec("d", res(1), (1.0,), ("b", "c")),
        ),
    )


def test_critical_path_uses_mean_stage_durations() -> None:
    job = diamond()
    assert earliest_finish(job) == [2.0, 12.0, 5.0, 13.0]
    assert critical_path_s(job) == 13.0  # a + b + d = 2 + 10 + 1
    assert time_to_end(job) == [13.0, 11.0, 4.0, 1.0]
    assert job.critical_path_s == 19.0  # the model's own: longest tasks (2 + 16 + 1)


# ----------------------------------------------------------------------------- tetris
def tetris_rig(params: Mapping[str, Any]) -> Rig:
    """Node n0 (8 vcores, 16 GB) with 4 vcores / 8 GB held by a filler job."""
    rig = Rig("tetris", {"n0": res(8, 16)}, params)
    rig.job("filler", ask(0, res(4, 8), 1))
    assert rig.heartbeat("n0") == [("filler", 0)]
    return rig


def test_tetris_places_the_best_aligned_ask() -> None:
    rig = tetris_rig({"f": 0, "remaining_work_weight": 0})
    rig.job("cpu", ask(0, res(2, 4), 1))  # alignment 0.25
    rig.job("mem", ask(0, res(1, 8), 1))  # alignment 0.3125
    # mem goes first; then free is (3 vcores, 0 GB): cpu no longer fits.
    assert rig.heartbeat("n0") == [("mem", 0)]
    fifo = Rig("fifo", {"n0": res(8, 16)})
    fifo.job("filler", ask(0, res(4, 8), 1))
    fifo.heartbeat("n0")
    fifo.job("cpu", ask(0, res(2, 4), 1))
    fifo.job("mem", ask(0, res(1, 8), 1))
    assert fifo.heartbeat("n0") == [("cpu", 0)]  # then (2, 4 GB) free: mem does not fit


@pytest.mark.parametrize(
    ("weight", "first"), [(0.0, "mem"), (0.122, "mem"), (0.124, "cpu"), (1.0, "cpu")]
)
def test_tetris_remaining_work_term(weight: float, first: str) -> None:
    # Remaining work is weighted by the dominant share of each job's demand in the
    # cluster (8 vcores, 16 GB): cpu 100 x 2/8 = 25, mem 1000 x 8/16 = 500.
    # eps = weight x mean alignment / mean remaining work = weight x 0.28125 / 262.5.
    # cpu: 0.25 - eps x 25; mem: 0.3125 - eps x 500; cpu wins once eps x 475 > 0.0625,
    # i.e. weight > 0.0625 x 262.5 / (475 x 0.28125) = 0.1228.
    rig = tetris_rig({"f": 0, "remaining_work_weight": weight})
    rig.job("cpu", ask(0, res(2, 4), 1, work=100.0))
    rig.job("mem", ask(0, res(1, 8), 1, work=1000.0))
    assert rig.heartbeat("n0")[0][0] == first


def test_tetris_ties_go_to_less_remaining_work() -> None:
    rig = tetris_rig({"f": 0})
    rig.job("long", ask(0, res(1, 2), 4, work=900.0))
    rig.job("short", ask(0, res(1, 2), 4, work=100.0))
    # Same shape, same alignment: short's 4 tasks first, then long's (4 vcores in all).
    assert rig.heartbeat("n0") == [("short", 0)] * 4


def fairness_rig(f: float) -> Rig:
    """Jobs A, B, C hold 30, 20 and 10 vcores of 104 on node "hold"; D holds nothing. Then
    each asks for one task that fits the empty node n0 (4 vcores, 8 GB)."""
    rig = Rig(
        "tetris", {"hold": res(100, 1000), "n0": res(4, 8)}, {"f": f, "remaining_work_weight": 0}
    )
    for name, held in (("A", 30), ("B", 20), ("C", 10)):
        rig.job(name, ask(0, res(1, 1), held))
        rig.heartbeat("hold")
    rig.job("D")
    # Alignments with n0's free = capacity = (4, 8): A (4, 8): 1 + 1 = 2; B (1, 1):
    # 1/16 + 1/64 = 0.078; C (2, 2): 1/4 + 1/16 = 0.3125; D (1, 2): 1/16 + 1/16 = 0.125.
    rig.ask("A", ask(2, res(4, 8), 1))
    rig.ask("B", ask(2, res(1, 1), 1))
    rig.ask("C", ask(2, res(2, 2), 1))
    rig.ask("D", ask(2, res(1, 2), 1))
    return rig


@pytest.mark.parametrize(
    ("f", "first"),
    [
        (0.0, "A"),  # all 4 jobs considered: the best-aligned ask
        (0.25, "C"),  # ceil(0.75 x 4) = 3: D, C, B (lowest dominant shares): C aligns best
        (0.5, "C"),  # ceil(0.5 x 4) = 2: D, C
        (0.7, "C"),  # ceil(0.3 x 4) = ceil(1.2) = 2: D, C
        (0.8, "D"),  # ceil(0.2 x 4) = ceil(0.8) = 1: D alone
        (1.0, "D"),  # at least one: the job furthest below its fair share
    ],
)
def test_tetris_fairness_knob(f: float, first: str) -> None:
    assert fairness_rig(f).heartbeat("n0")[0][0] == first


def test_tetris_fairness_knob_never_idles_a_node() -> None:
    rig = fairness_rig(1.0)
    rig.ask("D", ask(2, res(8, 2), 1))  # D's ask no longer fits n0 (it fits "hold")
    assert rig.heartbeat("n0")[0][0] == "A"  # then every job is considered


# ----------------------------------------------------------------------------- sjf
def test_sjf_runs_the_shorter_critical_path_first() -> None:
    # "deep": a chain of 3 one-task stages of 20 s: critical path 60 s, 60 task-seconds.
    # "wide": one stage of 40 tasks of 10 s: critical path 10 s, 400 task-seconds.
    # One node, 4 vcores, 1-vcore tasks; deep is submitted first.
    chain = tuple(
        StageSpec(f"s{i}", res(1), (20.0,), (f"s{i - 1}",) if i else ()) for i in range(3)
    )
    wl = Workload(
        "sjf",
        one_node(4, 64),
        (
            JobSpec("deep", "u", 0.0, chain),
            JobSpec("wide", "u", 0.0, (StageSpec("s", res(1), (10.0,) * 40),)),
        ),
    )
    sjf, fifo = jcts(run(wl, "sjf")), jcts(run(wl, "fifo"))
    # sjf: wide fills the node for 10 waves of 10 s (+ ~1 s each to report and relaunch);
    # deep starts after it and runs its 3 stages one after the other (+ ~3 s each).
    assert sjf["wide"] == pytest.approx(110, abs=5)
    assert sjf["deep"] >= sjf["wide"] + 60
    # fifo: deep runs at once beside wide (~69 s + ~9 s), which gets 3 slots, then 4.
    assert fifo["deep"] == pytest.approx(78, abs=5)
    assert fifo["wide"] >= sjf["wide"] + 15


def test_sjf_without_a_job_spec_uses_the_remaining_work_hint() -> None:
    rig = Rig("sjf", {"n0": res(2, 8)})
    rig.job("big", ask(0, res(1), 2, work=500.0))
    rig.job("small", ask(0, res(1), 2, work=100.0))
    assert rig.heartbeat("n0") == [("small", 0)] * 2


# ----------------------------------------------------------------------------- carbyne
def test_carbyne_serves_default_asks_within_the_share_first() -> None:
    rig = Rig("carbyne", {"n0": res(8, 64)})
    rig.job("alt_short", ask(1, res(1), 8, A, work=10.0))
    rig.job("default_long", ask(0, res(1), 8, D, work=1000.0))
    share = rig.ask("default_long")
    rig.job("alt_mid", ask(1, res(1), 8, A, work=100.0))
    share = rig.ask("default_long")
    # DRF across 3 jobs each asking 8 vcores: 8/3 vcores each. default_long's DEFAULT asks
    # get its due first (2 containers: a third would exceed 8/3), then the leftover goes
    # to the least remaining work: alt_short takes the other 6 vcores.
    assert share == pytest.approx(res(8 / 3, 8 / 3))
    placed = rig.heartbeat("n0")
    assert placed[:2] == [("default_long", 0)] * 2
    assert jobs_of(placed) == {"default_long": 2, "alt_short": 6}


@pytest.mark.parametrize(
    ("guarantee", "long_first"), [(1.0, 2), (0.75, 2), (0.5, 2), (0.3, 1), (0.2, 1), (0.0, 0)]
)
def test_carbyne_guarantee_protects_that_part_of_the_share(
    guarantee: float, long_first: int
) -> None:
    rig = Rig("carbyne", {"n0": res(8, 64)}, {"guarantee": guarantee})
    rig.job("alt_short", ask(1, res(1), 8, A, work=10.0))
    rig.job("default_long", ask(0, res(1), 8, D, work=1000.0))
    rig.job("alt_mid", ask(1, res(1), 8, A, work=100.0))
    rig.ask("default_long")
    # Shares of 8/3 vcores each: default_long's DEFAULT asks come first while it holds less
    # than guarantee x 8/3 (a container may take it past that, not past 8/3): 2, 2, 2, 1, 1
    # and 0 containers. The rest of them compete in the leftover, where the shortest job,
    # alt_short, takes the node.
    placed = rig.heartbeat("n0")
    assert placed[:long_first] == [("default_long", 0)] * long_first
    assert jobs_of(placed) == Counter(default_long=long_first, alt_short=8 - long_first)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {"a": 2, "b": 2, "c": 2, "d": 2}),
        # c and d (remaining work >= the median, c's) are protected for 1 container each;
        # the 2 vcores they give up go to the leftover, where a (least work) takes them.
        ({"guarantee_long": 0.5}, {"a": 4, "b": 2, "c": 1, "d": 1}),
        ({"guarantee_long": 0.0}, {"a": 6, "b": 2}),
        # guarantee_long alone moves the long jobs; guarantee moves the others.
        ({"guarantee": 0.5, "guarantee_long": 1.0}, {"a": 3, "b": 1, "c": 2, "d": 2}),
    ],
)
def test_carbyne_guarantee_long_protects_less_of_the_long_jobs_shares(
    params: dict[str, float], expected: dict[str, int]
) -> None:
    rig = Rig("carbyne", {"n0": res(8, 64)}, params)
    for name, work in (("a", 10.0), ("b", 100.0), ("c", 1000.0), ("d", 5000.0)):
        rig.job(name, ask(0, res(1), 8, D, work=work))
    # DRF: 2 vcores each. Only DEFAULT asks: step 1 gives each job its guaranteed part.
    assert rig.ask("a") == pytest.approx(res(2, 2))
    assert jobs_of(rig.heartbeat("n0")) == expected


def test_carbyne_respects_priorities_within_a_job() -> None:
    # One job: a small DEFAULT ask at priority 0 and a better-aligned one at priority 2.
    asks = (ask(0, res(1, 1), 1), ask(2, res(4, 8), 1))
    carbyne = Rig("carbyne", {"n0": res(8, 16)})
    carbyne.job("j", *asks)
    assert carbyne.heartbeat("n0") == [("j", 0), ("j", 2)]
    tetris = Rig("tetris", {"n0": res(8, 16)})
    tetris.job("j", *asks)
    assert tetris.heartbeat("n0") == [("j", 2), ("j", 0)]  # 1.0 vs 0.1875: packing first


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        # x (least remaining work) first: 4 x (1, 2 GB); then y gets (4, 8 GB): 2 tasks.
        ("srtf_then_packing", {"x": 4, "y": 2}),
        # y's (2, 4 GB) aligns better (0.5 vs 0.25): its 4 tasks fill the node.
        ("packing_then_srtf", {"y": 4}),
    ],
)
def test_carbyne_leftover_order(order: str, expected: dict[str, int]) -> None:
    rig = Rig("carbyne", {"n0": res(8, 16)}, {"leftover_order": order})
    rig.job("x", ask(1, res(1, 2), 4, A, work=10.0))
    rig.job("y", ask(1, res(2, 4), 4, A, work=100.0))
    assert jobs_of(rig.heartbeat("n0")) == expected


def test_carbyne_gives_leftover_to_default_asks_beyond_the_share() -> None:
    rig = Rig("carbyne", {"n0": res(8, 64)})
    rig.job("a", ask(0, res(1), 8, work=50.0))
    rig.job("b", ask(0, res(1), 2, work=500.0))
    rig.ask("a")
    # Entitlements: b all it asks for (2), a the other 6; nothing is ALTRUISTIC, and the
    # node is filled all the same.
    assert jobs_of(rig.heartbeat("n0")) == {"a": 6, "b": 2}


def test_carbyne_shares_are_drf_across_jobs() -> None:
    # Ghodsi et al.'s example on <9 CPUs, 18 GB>: A <1 CPU, 4 GB> x 30, B <3 CPUs, 1 GB>
    # x 30; each job reaches dominant share 2/3: A (3, 12 GB), B (6, 2 GB).
    rig = Rig("carbyne", {"n0": res(9, 18)})
    rig.job("A", ask(0, res(1, 4), 30))
    rig.job("B", ask(0, res(3, 1), 30))
    share = rig.ask("A")  # the share travels in every Allocate response
    assert share == pytest.approx(res(3, 12))
    view = rig.rm.state
    carbyne = rig.rm.policy.shares(view)
    drf = registry.build("policies", "drf", {"across": "jobs"}).shares(view)
    assert dict(carbyne) == dict(drf)
    assert carbyne[rig.ids["B"]] == pytest.approx(res(6, 2))
    # And it places exactly that: 3 tasks of A, 2 of B.
    assert jobs_of(rig.heartbeat("n0")) == {"A": 3, "B": 2}


def test_carbyne_with_greedy_asks_matches_drf() -> None:
    wl = Workload(
        "greedy",
        ClusterSpec(tuple(NodeSpec(f"n{i}", res(4, 8)) for i in range(3))),
        (
            JobSpec("a", "A", 0.0, (StageSpec("s", res(1, 2), (20.0,) * 40),)),
            JobSpec("b", "B", 0.0, (StageSpec("s", res(2, 1), (20.0,) * 20),)),
            JobSpec("c", "C", 30.0, (StageSpec("s", res(1, 1), (20.0,) * 12),)),
        ),
    )
    drf = jcts(run(wl, "drf", {"across": "jobs"}))
    carbyne = jcts(run(wl, "carbyne"))
    assert carbyne == pytest.approx(drf, abs=1e-6)
    assert drf != jcts(run(wl, "tetris"))  # the workload does tell policies apart


# ----------------------------------------------------------------------------- params
@pytest.mark.parametrize(
    ("policy", "params", "message"),
    [
        ("tetris", {"f": 1.5}, "'f': Input should be less than or equal to 1"),
        ("tetris", {"f": -0.1}, "'f': Input should be greater than or equal to 0"),
        ("tetris", {"remaining_work_weight": float("nan")}, "'remaining_work_weight'"),
        ("tetris", {"fairness": 0.5}, "unknown parameter (allowed: f, remaining_work_weight)"),
        ("carbyne", {"leftover_order": "srtf"}, "'leftover_order': Input should be"),
        ("carbyne", {"update_interval_s": -1}, "'update_interval_s'"),
        ("sjf", {"x": 1}, "unknown parameter (allowed: none)"),
    ],
)
def test_bad_parameters_are_clear_errors(policy: str, params: dict[str, Any], message: str) -> None:
    with pytest.raises(PluginError) as e:
        registry.build("policies", policy, params)
    assert message in str(e.value)


# ----------------------------------------------------------------------------- references
# The shape index and the fairness window are shortcuts: on random states, the first
# placement must be the one a brute-force scoring of every ask picks.
SHAPES = (res(1, 1), res(1, 4), res(2, 2), res(3, 1), res(2, 6), res(4, 2))
WORK = (0.0, 10.0, 50.0, 90.0)  # 0: no hint (the task-seconds asked for count)


def random_rig(policy: str, params: Mapping[str, Any], seed: int) -> Rig:
    """Up to 8 jobs holding random amounts on a big node, a filler taking part of n0
    (8 vcores, 16 GB), then 1-3 random asks per job (random kinds and work hints)."""
    rng = random.Random(seed)
    rig = Rig(policy, {"hold": res(64, 256), "n0": res(8, 16)}, params)
    rig.job("filler", ask(0, res(rng.randint(1, 4), rng.randint(1, 8)), 1))
    rig.heartbeat("n0")
    names = [f"j{i}" for i in range(rng.randint(1, 8))]
    for name in names:
        rig.job(name, ask(0, rng.choice(SHAPES), rng.randint(0, 4)))
        rig.heartbeat("hold")
    for name in names:
        asks = [
            ask(
                p,
                rng.choice(SHAPES),
                rng.randint(1, 3),
                rng.choice((D, A)),
                rng.choice((0, 10, 50, 90)),
            )
            for p in rng.sample(range(6), rng.randint(1, 3))
        ]
        rig.ask(name, *asks)
    return rig


def pending(rig: Rig) -> list[tuple[Any, Ask]]:
    return [(app, a) for app in rig.rm.state.pending_apps() for a in app.sorted_asks()]


def tetris_key(
    eps: float, work: Mapping[str, float], free: Resources, cap: Resources
) -> Callable[[tuple[Any, Ask]], tuple[float, float, int, int]]:
    """Tetris' order of (app, ask) candidates: best score (alignment - eps x remaining
    work) first, ties by remaining work, submission order, priority."""
    return lambda c: (
        eps * work[c[0].app_id] - alignment(c[1].resources, free, cap),
        work[c[0].app_id],
        c[0].seq,
        c[1].priority,
    )


def tetris_reference(rig: Rig, f: float, weight: float) -> tuple[str, int] | None:
    view, node = rig.rm.state, rig.rm.state.nodes["n0"]
    free, cap = node.free, node.capacity
    apps = view.pending_apps()
    work = {app.app_id: remaining_work(app.sorted_asks(), view.capacity) for app in apps}
    fits = [(app, a) for app, a in pending(rig) if a.resources.fits_in(free)]
    if not fits:
        return None
    shapes = {a.resources for _, a in fits}
    mean_align = sum(alignment(s, free, cap) for s in shapes) / len(shapes)
    eps = weight * mean_align / (sum(work.values()) / len(work))
    by_share = sorted(apps, key=lambda app: (app.allocated.dominant_share(view.capacity), app.seq))
    window = {app.app_id for app in by_share[: max(1, math.ceil((1 - f) * len(apps) - 1e-9))]}
    for cands in ([c for c in fits if c[0].app_id in window], fits):
        if cands:
            app, a = min(cands, key=tetris_key(eps, work, free, cap))
            return rig.names[app.app_id], a.priority
    return None


@pytest.mark.parametrize("seed", range(40))
def test_tetris_matches_brute_force(seed: int) -> None:
    f = (0.0, 0.25, 0.6, 1.0)[seed % 4]
    weight = (0.0, 1.0, 5.0)[seed % 3]
    rig = random_rig("tetris", {"f": f, "remaining_work_weight": weight}, seed)
    expected = tetris_reference(rig, f, weight)
    placed = rig.heartbeat("n0")
    assert (placed[0] if placed else None) == expected


def carbyne_reference(rig: Rig, order: str, guarantee: float = 1.0) -> tuple[str, int] | None:
    view, node = rig.rm.state, rig.rm.state.nodes["n0"]
    free, cap = node.free, node.capacity
    shares = rig.rm.policy.shares(view)
    apps = view.pending_apps()
    work = {app.app_id: remaining_work(app.sorted_asks(), view.capacity) for app in apps}
    fits = [(app, a) for app, a in pending(rig) if a.resources.fits_in(free)]
    if not fits:
        return None
    due = []
    for app in apps:
        first = next(
            (a for a in app.sorted_asks() if a.kind is D and a.resources.fits_in(free)), None
        )
        limit = shares.get(app.app_id, Resources()).dominant_share(view.capacity)
        held = app.allocated.dominant_share(view.capacity)
        if first:
            after = (app.allocated + first.resources).dominant_share(view.capacity)
            if after <= guarantee * limit + 1e-9 or (
                after <= limit + 1e-9 and held < guarantee * limit - 1e-9
            ):
                due.append((app, first))
    if due:
        shapes = {a.resources for _, a in fits}
        mean_align = sum(alignment(s, free, cap) for s in shapes) / len(shapes)
        eps = mean_align / (sum(work.values()) / len(work))
        app, a = min(due, key=tetris_key(eps, work, free, cap))
        return rig.names[app.app_id], a.priority
    if order == "srtf_then_packing":
        key = lambda c: (  # noqa: E731
            work[c[0].app_id],
            c[0].seq,
            -alignment(c[1].resources, free, cap),
            c[1].priority,
        )
    else:
        key = lambda c: (  # noqa: E731
            -alignment(c[1].resources, free, cap),
            work[c[0].app_id],
            c[0].seq,
            c[1].priority,
        )
    app, a = min(fits, key=key)
    return rig.names[app.app_id], a.priority


@pytest.mark.parametrize("seed", range(40))
def test_carbyne_matches_brute_force(seed: int) -> None:
    order = ("srtf_then_packing", "packing_then_srtf")[seed % 2]
    guarantee = (1.0, 0.5, 0.0)[seed % 3]
    rig = random_rig("carbyne", {"leftover_order": order, "guarantee": guarantee}, seed)
    expected = carbyne_reference(rig, order, guarantee)
    placed = rig.heartbeat("n0")
    assert (placed[0] if placed else None) == expected


def test_fair_window_size_is_not_fooled_by_float_dust() -> None:
    @dataclass
    class App:
        app_id: str
        seq: int
        allocated: Resources

    apps = [App(f"a{i}", i, res(i)) for i in range(10)]
    # (1 - 0.1) x 10 = 9.000000000000002 in floats: still 9 jobs.
    window = FairWindow(cast(list[AppView], apps), res(100, 100), 0.1)
    assert window.members == {f"a{i}" for i in range(9)}
    # The job that gets a container moves back in the order; the next one comes in.
    apps[0].allocated = res(50)
    window.charged(cast(AppView, apps[0]), pending=True)
    assert window.members == {f"a{i}" for i in range(1, 10)}

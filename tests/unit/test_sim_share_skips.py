"""Skipped AM calls under policies that send shares: the calls of an AM whose ask strategy
does not read shares (greedy) are skipped when they would repeat themselves and get
nothing back but a share; the RM still computes its shares at those calls' instants, so
runs are those of making every call, byte for byte, whatever the other AMs read. An AM
whose strategy reads shares gets every call."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from plugins.asks.altruistic import AltruisticAsks, AltruisticParams
from plugins.asks.greedy import GreedyAsks
from plugins.policies.drf import DrfPolicy
from rm.policy import ClusterView
from tests.unit.test_sim_properties import EveryCallSimulation, dump, make
from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.resources import Resources
from treadle.sim import SimResult, Simulation

_TASK = Resources(vcores=1, memory_mb=1024)


def _contended() -> Workload:
    """Three users' two-stage jobs of long tasks on four two-slot nodes: the AMs wait
    for their tasks most of the time, while their shares move as jobs come and go."""
    nodes = tuple(NodeSpec(f"n{i}", Resources(vcores=2, memory_mb=4096)) for i in range(4))
    jobs = []
    for i in range(9):
        first = StageSpec("map", _TASK, tuple(8.0 + (i * 7 + k) % 11 for k in range(6)))
        second = StageSpec("reduce", _TASK, (15.0, 12.0), parents=("map",))
        jobs.append(JobSpec(f"job{i}", f"u{i % 3}", 3.0 * i, (first, second)))
    return Workload("contended", ClusterSpec(nodes, heartbeat_s=1.0), tuple(jobs))


def _run(
    policy: Any, make_strategy: Callable[[], Any], sim_cls: type[Simulation] = Simulation
) -> SimResult:
    return sim_cls(_contended(), policy, make_strategy, policy_name="p").run()


class _ShareReadingGreedy(GreedyAsks):
    """Greedy's asks, declared as depending on the share (as an unknown plugin is)."""

    reads_share = True


class _CountingDrf(DrfPolicy):
    """drf that notes when its shares are asked for and when they are computed."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[float] = []
        self.computed: list[float] = []

    def shares(self, cluster: ClusterView) -> Mapping[str, Resources]:
        self.asked.append(cluster.now)
        return super().shares(cluster)

    def compute_shares(self, cluster: ClusterView) -> dict[str, Resources]:
        self.computed.append(cluster.now)
        return super().compute_shares(cluster)


@pytest.mark.parametrize("policy", ["drf", "fair", "carbyne"])
def test_greedy_ams_skip_their_quiet_calls_under_share_policies(policy: str) -> None:
    fast = _run(make("policies", policy), GreedyAsks)
    ref = _run(make("policies", policy), GreedyAsks, EveryCallSimulation)
    assert dump(fast) == dump(ref)
    assert ref.stats["allocates_skipped"] == 0
    assert fast.stats["allocates_skipped"] > ref.stats["allocates"] // 3
    assert fast.stats["allocates"] + fast.stats["allocates_skipped"] == ref.stats["allocates"]


def test_skipped_calls_have_the_shares_computed_at_the_same_instants() -> None:
    fast_policy, ref_policy = _CountingDrf(), _CountingDrf()
    fast = _run(fast_policy, GreedyAsks)
    ref = _run(ref_policy, GreedyAsks, EveryCallSimulation)
    assert dump(fast) == dump(ref)
    assert fast.stats["allocates_skipped"] > 0
    assert fast_policy.computed == ref_policy.computed
    assert fast_policy.asked == ref_policy.asked


@pytest.mark.parametrize(
    "strategy", [_ShareReadingGreedy, AltruisticAsks], ids=["share-reading", "altruistic"]
)
def test_an_am_that_reads_shares_gets_every_call(strategy: Callable[[], Any]) -> None:
    fast = _run(make("policies", "drf"), strategy)
    ref = _run(make("policies", "drf"), strategy, EveryCallSimulation)
    assert dump(fast) == dump(ref)
    assert fast.stats["allocates_skipped"] == 0
    assert fast.stats["allocates"] == ref.stats["allocates"]


def test_greedy_ams_skip_beside_ams_that_read_shares() -> None:
    """Jobs alternate greedy and altruistic AMs: the greedy ones skip, and the
    altruistic ones get the shares they would get if every AM made every call."""
    for policy in ("drf", "carbyne"):
        kinds = itertools.cycle([GreedyAsks, AltruisticAsks])
        fast = _run(make("policies", policy), lambda k=kinds: next(k)())
        kinds = itertools.cycle([GreedyAsks, AltruisticAsks])
        ref = _run(make("policies", policy), lambda k=kinds: next(k)(), EveryCallSimulation)
        assert dump(fast) == dump(ref), policy
        assert fast.stats["allocates_skipped"] > 0, policy


def test_strategies_declare_whether_they_read_shares() -> None:
    assert GreedyAsks().reads_share is False
    assert AltruisticAsks().reads_share is True
    assert AltruisticAsks(AltruisticParams(altruism=0.0)).reads_share is False
    assert _ShareReadingGreedy().reads_share is True

"""The workload's account changes on a live cluster: the replay driver applies the admin
timeline and per-job spending rates through the Admin service, signed as the cluster's
admin (local processes)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from treadle import events as ev
from treadle.cluster.driver import replay
from treadle.cluster.local import LocalCluster
from treadle.errors import TreadleError
from treadle.workload import parse_workload

WORKLOAD = """
seed: 1
cluster:
  heartbeat_s: 1.0
  nodes: [{count: 2, resources: {vcores: 2}}]
queues:
  - {name: a, budget: 1000, spending_rate: 2}
  - {name: b, budget: 1000, spending_rate: 1}
admin:
  - {at_s: 12, queue: b, set_budget: 5000}
ADDS
  - {at_s: 100000, queue: a, add_budget: 1}   # after the last job: never waited for
generators:
  - {kind: closed_loop, user: alice, queue: a, count: 2, spending_rates: {2: 8},
     job: {stages: [{name: s, tasks: 4, duration_s: 8, resources: {vcores: 1}}]}}
  - {kind: closed_loop, user: bob, queue: b, count: 2,
     job: {stages: [{name: s, tasks: 4, duration_s: 8, resources: {vcores: 1}}]}}
"""


#: Many small additions while queue a runs and is charged, so that some land close to an
#: allocation tick: each must be added exactly (the RM's charges kept), not by setting a
#: budget read back from the books.
ADD_AT_S = [13.0 + 0.3 * i for i in range(40)]
CREDITS = 7.0
WORKLOAD = WORKLOAD.replace(
    "ADDS\n",
    "".join(f"  - {{at_s: {t:g}, queue: a, add_budget: {CREDITS:g}}}\n" for t in ADD_AT_S),
)


@contextlib.contextmanager
def _stopped(cluster: LocalCluster) -> Iterator[LocalCluster]:
    try:
        yield cluster
    finally:
        cluster.stop()


def _replay(cluster: LocalCluster) -> list[ev.Record]:
    async def scenario() -> list[ev.Record]:
        await cluster.start()
        return await cluster.guard(
            replay(cluster.rm_address, cluster.workload, timeout_s=60, mode="local", poll_s=0.05)
        )

    return asyncio.run(asyncio.wait_for(scenario(), 90))


@pytest.mark.slow
def test_the_live_driver_applies_the_timeline_and_the_boost(tmp_path: Path) -> None:
    wl = parse_workload(WORKLOAD, "dp-live.yaml")
    cluster = LocalCluster(wl, "dp", {"interval_s": 0.5}, workdir=tmp_path / "c", dilation=10.0)
    with _stopped(cluster):
        records = _replay(cluster)
    names = {r["job"]: r["name"] for r in records if r["event"] == ev.JOB_SUBMITTED}
    ends = {names[r["job"]]: r["t"] for r in records if r["event"] == ev.JOB_FINISHED}
    assert set(ends) == {"alice-1", "alice-2", "bob-1", "bob-2"}
    t0 = next(r["t"] for r in records if r["event"] == ev.RUN_STARTED)
    a = [r for r in records if r["event"] == ev.DP_ACCOUNT and r["queue"] == "a"]
    # the boost is in force during alice-2 (the driver sees job ends at its polls: allow
    # an interval either side)
    during = [r for r in a if ends["alice-1"] + 2 < r["t"] < ends["alice-2"] - 2]
    assert during
    assert all(r["spending_rate"] == 8.0 for r in during)
    assert all(r["spending_rate"] == 2.0 for r in a if r["t"] < ends["alice-1"] - 2)
    b = [r for r in records if r["event"] == ev.DP_ACCOUNT and r["queue"] == "b"]
    assert all(r["budget"] <= 1000 for r in b if r["t"] < t0 + 11)
    assert any(r["budget"] > 4000 for r in b if r["t"] > t0 + 13)
    # exact books: each interval's budget is the one before minus its charge, plus what
    # the timeline added in it (a's credits) or set (b's 5000, once); no charge lost
    a_steps = [n["budget"] + n["charged"] - p["budget"] for p, n in itertools.pairwise(a)]
    added = [d / CREDITS for d in a_steps]
    assert all(x == pytest.approx(round(x), abs=1e-9) and round(x) >= 0 for x in added), added
    assert sum(round(x) for x in added) == len(ADD_AT_S)
    assert sum(r["charged"] for r in a if ADD_AT_S[0] < r["t"] - t0 < ADD_AT_S[-1] + 1) > 0
    b_set = [
        n
        for p, n in itertools.pairwise(b)
        if n["budget"] + n["charged"] != pytest.approx(p["budget"], abs=1e-9)
    ]
    assert len(b_set) == 1
    assert b_set[0]["budget"] + b_set[0]["charged"] == pytest.approx(5000.0)


@pytest.mark.slow
def test_a_policy_without_accounts_fails_the_replay_before_any_submission(
    tmp_path: Path,
) -> None:
    wl = parse_workload(WORKLOAD, "dp-live.yaml")
    cluster = LocalCluster(wl, "fifo", workdir=tmp_path / "c", dilation=10.0)
    with _stopped(cluster), pytest.raises(TreadleError) as e:
        _replay(cluster)
    message = str(e.value)
    assert "\n" not in message
    assert "changes queue accounts" in message
    assert "no queue budgets" in message

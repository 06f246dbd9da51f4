"""The lag distributions and the fidelity rule of live runs (treadle.live.lag,
treadle.cluster.fidelity): which expiries are lag, and which dilation would fit."""

from __future__ import annotations

from typing import Any

import pytest

from treadle.cluster.fidelity import Fidelity, Liveness, expiries
from treadle.live.lag import Distribution, Lag, Stalls
from treadle.model import NodeSpec
from treadle.resources import Resources

NODES = [NodeSpec(f"node{i}", Resources(vcores=4)) for i in range(1, 5)]  # nm-1: 1-2, nm-2: 3-4
LIVENESS = Liveness(heartbeat_s=1.0, node_expiry_s=10.0, am_interval_s=1.0, am_expiry_s=10.0)


def _records() -> list[dict[str, Any]]:
    return [
        {"t": 5.0, "event": "node_lost", "node": "node3"},
        {"t": 6.0, "event": "node_lost", "node": "node1"},
        {
            "t": 7.0,
            "event": "attempt_failed",
            "job": "app_1",
            "attempt": 1,
            "reason": "AM missed Allocate calls for 10 s",
        },
        {"t": 8.0, "event": "attempt_failed", "job": "app_2", "attempt": 1, "reason": "exit 1"},
    ]


def _role(peak: float, late_p99: float = 0.1, queue_p99: float = 0.0) -> dict[str, Any]:
    dist = {"count": 10, "p50": 0.0, "p90": 0.0}
    return {
        "demand": peak / 2,
        "peak_demand": peak,
        "timer_late_s": {**dist, "p99": late_p99, "max": late_p99},
        "rpc_queue_s": {**dist, "p99": queue_p99, "max": queue_p99},
    }


def test_distribution_keeps_exact_count_and_max_and_sampled_percentiles() -> None:
    d = Distribution(limit=1000)
    for k in range(10_000):
        d.record(k / 10_000)
    d.record(-1.0)  # early is not late
    s = d.summary(scale=10.0)
    assert s["count"] == 10_001
    assert s["max"] == 9.999
    assert len(d.samples) == 1000
    assert abs(s["p50"] - 5.0) < 0.5
    assert abs(s["p90"] - 9.0) < 0.3
    assert s["p99"] > 9.5


def test_stalls_add_up_the_lateness_of_recent_wake_ups_only() -> None:
    stalls = Stalls()
    stalls.record(1.0, 0.001)
    stalls.record(2.0, 0.0)  # on time: nothing to allow for
    stalls.record(5.0, 3.0)  # the loop was held up 3 s
    stalls.record(6.0, 0.5)
    assert stalls.since(0.0) == pytest.approx(3.501)
    assert stalls.since(5.0) == pytest.approx(3.5)  # the wake-ups before 5 are forgotten
    assert stalls.since(5.5) == pytest.approx(0.5)
    assert stalls.since(7.0) == 0.0
    stalls.record(8.0, 1.0)
    assert stalls.since(7.0) == 1.0


def test_lag_summary_is_in_emulated_seconds() -> None:
    lag = Lag(dilation=10)
    lag.record_timer(0.5)  # wall s
    s = lag.summary()
    assert s["timer_late_s"]["max"] == 5.0
    assert s["rpc_queue_s"]["count"] == 0
    assert s["demand"] >= 0
    assert s["peak_demand"] >= 0


def test_an_expiry_is_a_fault_only_when_its_process_was_made_to_stop() -> None:
    found = expiries(_records(), NODES, 2, managed_am=False, stopped={"nm-2"})
    assert [(e.kind, e.who, e.role, e.fault) for e in found] == [
        ("node", "node3", "nm-2", True),
        ("node", "node1", "nm-1", False),
        ("am", "app_1", "am", False),  # an AM that crashed (exit 1) did not expire
    ]
    fid = Fidelity(10.0, LIVENESS, {"rm": _role(0.99, 2.0, 12.0)}, found)
    assert not fid.faithful
    assert len(fid.lag_expiries) == 2


def test_faults_alone_keep_the_run_faithful() -> None:
    found = expiries(_records()[:1], NODES, 2, managed_am=False, stopped={"nm-2"})
    fid = Fidelity(10.0, LIVENESS, {"rm": _role(0.3)}, found)
    assert fid.faithful
    assert fid.to_json()["expiries"] == {
        "node": 1,
        "am": 0,
        "faults": 1,
        "caused_by_lag": 0,
        "deferred_for_rm_stalls": 0,
    }


def test_expiries_the_rm_deferred_for_its_own_stalls_make_the_run_unfaithful() -> None:
    """No node or AM expired (the RM's stall grace kept them), but their silences were
    the RM's lag: the jobs survive, the verdict does not."""
    rm = {**_role(0.99, 4.0, 12.0), "deferred_expiries": {"node": 3, "am": 1}}
    fid = Fidelity(10.0, LIVENESS, {"rm": rm, "nm-1": _role(0.3)})
    assert not fid.faithful
    assert fid.to_json()["expiries"]["deferred_for_rm_stalls"] == 4
    msg = fid.message()
    assert msg.startswith(
        "the emulation at dilation 10 was unfaithful: 3 NM expiries, 1 AM attempt expiry "
        "deferred because the RM itself stalled (budgets"
    ), msg
    assert "try --dilation at most 5" in msg
    assert "deferred while the RM stalled" in fid.markdown("fifo")
    clean = {**_role(0.3), "deferred_expiries": {"node": 0, "am": 0}}
    assert Fidelity(10.0, LIVENESS, {"rm": clean}).faithful


def test_the_message_states_the_lag_and_a_dilation_that_would_fit() -> None:
    found = expiries(_records(), NODES, 2, managed_am=False, stopped=())
    roles = {"rm": _role(0.99, 3.5, 13.7), "nm-1": _role(0.6, 1.8), "driver": _role(0.2, 10.2)}
    fid = Fidelity(10.0, LIVENESS, roles, found)
    msg = fid.message()
    assert msg.startswith("the emulation at dilation 10 was unfaithful: 2 NM expiries, 1 AM ")
    assert "timer lateness p99 10.2 s (driver)" in msg
    assert "RPC queueing p99 13.7 s (rm)" in msg
    assert "budgets: NM 9 s, AM 9 s" in msg
    # The RM's loop was saturated: its true need is unknown, so the estimate is a bound.
    assert msg.endswith("try --dilation at most 5")
    assert fid.fit_dilation() == 5.0


def test_the_fitting_dilation_scales_with_the_busiest_roles_demand() -> None:
    assert Fidelity(20.0, LIVENESS, {"rm": _role(0.8)}).fit_dilation() == 12.0
    assert Fidelity(3.0, LIVENESS, {"rm": _role(1.0)}).fit_dilation() == 1.5
    assert Fidelity(100.0, LIVENESS, {"rm": _role(0.5)}).fit_dilation() == 100.0
    assert Fidelity(100.0, LIVENESS, {"rm": _role(0.9)}).fit_dilation() == 55.0

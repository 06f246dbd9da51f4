"""Dynamic Priority's metrics (``treadle.metrics.dp``): the spec's hand-checked numbers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from treadle.metrics import dp


def test_d16_ideal_line_and_distances() -> None:
    """Spec D16: FIFO mean 3,000 s, two queues at rates 2:1 -> ideal 2,000 and 4,000 s;
    observed 3,100 and 5,150 -> distances 1,100 and 1,150 s."""
    shares = {"q1": 2 / 3, "q2": 1 / 3}
    ideal = dp.ideal_line(3000.0, shares)
    assert ideal == pytest.approx({"q1": 2000.0, "q2": 4000.0})
    far = dp.distances({"q1": 3100.0, "q2": 5150.0}, ideal)
    assert far == pytest.approx({"q1": 1100.0, "q2": 1150.0})


def test_ten_levels_ideal_is_3_4142_f_over_n() -> None:
    shares = {f"q{n}": n / 55 for n in range(1, 11)}
    ideal = dp.ideal_line(1000.0, shares)
    for n in range(1, 11):
        assert ideal[f"q{n}"] == pytest.approx(3414.2 / n, rel=1e-4)
    assert np.mean(list(ideal.values())) == pytest.approx(1000.0)


def test_adjusted_ideal_is_anchored_at_the_top_queue() -> None:
    adj = dp.adjusted_ideal_line({"q1": 3100.0, "q2": 5150.0}, {"q1": 2 / 3, "q2": 1 / 3})
    assert adj == pytest.approx({"q1": 3100.0, "q2": 6200.0})


def test_differentiation_is_the_low_queue_over_the_high_queue() -> None:
    """The paper's DP range: queue1 3,000-3,200 s, queue2 4,500-5,800 s -> 1.81."""
    jcts = {"q1": [3000.0, 3200.0], "q2": [4500.0, 5800.0]}
    by_max, by_mean = dp.differentiation(jcts, {"q1": 2 / 3, "q2": 1 / 3})
    assert by_max == pytest.approx(5800 / 3200)
    assert by_mean == pytest.approx(5150 / 3100)
    assert dp.differentiation({"q1": [1.0], "q2": []}, {"q1": 0.5, "q2": 0.5}) == (None, None)


def test_boost_factor_and_preemption_overhead() -> None:
    jct = {"a-1": 900.0, "a-2": 300.0, "a-3": 900.0, "b-1": 600.0, "b-2": 1200.0}
    users = {j: j[0] for j in jct}
    overall, per_user = dp.boost_factor(jct, users, {"a-2", "b-1"})
    assert per_user == pytest.approx({"a": 3.0, "b": 2.0})
    assert overall == pytest.approx(2.5)
    assert dp.preemption_overhead(1026.0, 1000.0) == pytest.approx(0.026)


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    names = ["t", "event", "queue", "container", "state", "price", "budget"]
    names += ["spending_rate", "share", "used", "pending", "charged"]
    return pa.table({n: [r.get(n) for r in rows] for n in names})


def test_shares_come_from_the_rates_of_active_intervals_and_preemptions_are_counted() -> None:
    def acct(t: float, q: str, rate: float, used: int, share: float) -> dict[str, Any]:
        return {
            "t": t,
            "event": "dp_account",
            "queue": q,
            "spending_rate": rate,
            "used": used,
            "pending": 0,
            "share": share,
            "budget": 100.0 - t,
            "charged": 1.0,
            "price": 3.0,
        }

    table = _table(
        [
            acct(20, "a", 2, 5, 0.6),
            acct(20, "b", 1, 0, 0.4),
            acct(40, "a", 2, 8, 1.0),
            acct(40, "b", 9, 0, 0.0),  # granted nothing: its rate does not count
            acct(40, "c", 5, 0, 0.0),  # never granted a share: none
            {"t": 41, "event": "container_preempted", "container": "c1"},
            {"t": 41, "event": "container_finished", "container": "c1", "state": "PREEMPTED"},
            {"t": 42, "event": "container_finished", "container": "c2", "state": "PREEMPTED"},
            {"t": 43, "event": "container_finished", "container": "c3", "state": "COMPLETE"},
        ]
    )
    assert dp.has_dp_records(table)
    assert dp.account_shares(table) == pytest.approx({"a": 2 / 3, "b": 1 / 3})
    assert dp.preemption_count(table) == 2
    assert not dp.has_dp_records(_table([{"t": 0, "event": "run_started"}]))


TWO_QUEUES = """
cluster:
  heartbeat_s: 1
  nodes: [{count: 3, resources: {vcores: 4}}]
queues:
  - {name: q1, budget: 100000, spending_rate: 2}
  - {name: q2, budget: 100000, spending_rate: 1}
jobs:
  - {name: j1, user: u1, queue: q1, stages: [{name: s, tasks: 240, duration_s: 5,
                                             resources: {vcores: 1}}]}
  - {name: j2, user: u2, queue: q2, stages: [{name: s, tasks: 240, duration_s: 5,
                                             resources: {vcores: 1}}]}
"""


def _dp_run() -> list[dict[str, Any]]:
    from treadle.registry import build, factory
    from treadle.sim import Simulation
    from treadle.workload import parse_workload

    wl = parse_workload(TWO_QUEUES, "two.yaml")
    policy = build("policies", "dp", {"interval_s": 5, "kill_interval_s": 5})
    return Simulation(wl, policy, factory("asks", "greedy"), policy_name="dp").run().records


def test_a_dp_run_summary_has_a_dp_section_and_the_parquet_path_agrees(tmp_path: Any) -> None:
    from treadle import event_columns as ec
    from treadle.metrics import read_log, summarize

    records = _dp_run()
    s = summarize(records)["dp"]
    assert s["queues"]["q1"]["share"] == pytest.approx(2 / 3)
    assert s["queues"]["q2"]["share"] == pytest.approx(1 / 3)
    # 8 and 4 slots: q1 ends at ~150 s, then q2 has the cluster and ends at ~200 s
    assert s["differentiation_max"] == pytest.approx(200 / 150, rel=0.1)
    assert s["intervals"] > 0
    assert s["mean_price"] == pytest.approx(3.0, rel=0.2)
    assert s["preemptions"] > 0  # q1 held all 12 before the first interval
    path = tmp_path / "events.parquet"
    ec.write_parquet(records, path)
    assert summarize(read_log(path))["dp"] == s
    assert "dp" not in summarize([r for r in records if r["event"] != "dp_account"])


def test_the_dp_section_equals_the_per_record_reference() -> None:
    import json

    from tests.reference_metrics import summary as ref_summary
    from treadle.metrics import rounded, summarize

    records = _dp_run()
    new = summarize(records)["dp"]
    old = ref_summary.summarize(records)["dp"]
    assert new["differentiation_max"] is not None
    assert json.dumps(rounded(new), sort_keys=True) == json.dumps(rounded(old), sort_keys=True)

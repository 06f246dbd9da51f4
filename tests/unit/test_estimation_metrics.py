"""The estimation metrics (``treadle.metrics.estimation``, spec slearn.md A2) on logs small
enough to check by hand, and the ``job_estimated`` / ``job_queue_changed`` records that
gs and las write."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from treadle import event_columns as ec, events as ev, registry
from treadle.metrics import analyze, job_results, summarize
from treadle.metrics.estimation import (
    against_baseline,
    estimation_errors,
    estimation_summary,
    mean_jct_ratio,
    per_job_sizes,
    runtime_range,
)
from treadle.metrics.scan import scan
from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.resources import Resources
from treadle.sim import Simulation

SLOT = Resources(vcores=1, memory_mb=1024)


class Log:
    """A hand-written log: jobs with their containers' (start, end) and estimates."""

    def __init__(self) -> None:
        self.log = ev.EventLog()
        self.log.run_started(
            0.0,
            policy="gs",
            workload="w",
            mode="sim",
            seed=0,
            dilation=1.0,
            heartbeat_s=1.0,
            nodes=1,
            capacity={"vcores": 10.0},
        )
        self.n = 0

    def job(
        self,
        name: str,
        submit: float,
        tasks: list[tuple[float, float]],
        estimate: float | None = None,
        width: int | None = None,
        failed: int = 0,
    ) -> str:
        app = f"application_{len(name):02d}{name}"
        log = self.log
        log.job_submitted(submit, app, name, "u", "default", width or len(tasks), None)
        if estimate is not None:
            log.job_estimated(submit, app, estimate, 0, None, 0)
        for i, (a, b) in enumerate(tasks):
            self.n += 1
            cid = f"c{self.n}"
            log.container_allocated(a, app, cid, "n0", SLOT, 1, "DEFAULT")
            log.container_started(a, app, cid, "n0")
            bad = i < failed
            log.container_finished(b, app, cid, "n0", "FAILED" if bad else "COMPLETE", int(bad))
        log.job_finished(max(b for _, b in tasks), app, "u", "default")
        return app


def test_errors_signed_and_absolute_by_hand() -> None:
    err, signed = estimation_errors(np.array([150.0, 50.0, 2000.0]), np.array([100.0] * 3))
    assert err.tolist() == [50.0, 50.0, 1900.0]
    assert signed.tolist() == [50.0, -50.0, 1000.0]  # signed capped at +1000%


def test_runtime_ranges_are_gs_ranges() -> None:
    sizes = np.array([0.0, 999.0, 1000.0, 12_345.0, 1e5, 1e12])
    assert runtime_range(sizes, 1000.0, 10.0, 9).tolist() == [0, 0, 1, 2, 3, 8]


def test_summary_section_by_hand() -> None:
    h = Log()
    # wide A: 3 tasks of 100 s, size 300, estimated 450: +50%, same range [0, 1000)
    h.job("A", 0.0, [(0, 100), (0, 100), (0, 100)], estimate=450.0)
    # wide B: 4 tasks x 500 s = 2000 s (range 1), estimated 800 (range 0): -60%, placed higher
    h.job("B", 0.0, [(0, 500), (0, 500), (100, 600), (100, 600)], estimate=800.0)
    # wide C: 3 x 300 = 900 s (range 0), estimated 9000 (range 1): +900%, placed lower
    h.job("C", 10.0, [(10, 310), (20, 320), (30, 330)], estimate=9000.0)
    # thin D: 2 tasks, never estimated; thin E estimated (not judged: thin)
    h.job("D", 0.0, [(0, 50), (0, 50)])
    h.job("E", 0.0, [(0, 2000)], estimate=5.0)
    s = summarize(h.log.records)["estimation"]
    assert s["jobs_estimated"] == 4
    assert s["wide_jobs"] == 3
    assert s["wide_judged"] == 3
    assert s["error_pct"] == {"p50": 60.0, "p90": 732.0, "mean": pytest.approx(1010 / 3)}
    assert s["signed_error_pct"]["p50"] == 50.0
    assert s["correct_queue"] == pytest.approx(1 / 3)
    assert s["placed_lower"] == pytest.approx(1 / 3)  # C: overestimated
    assert s["placed_higher"] == pytest.approx(1 / 3)  # B: underestimated
    # normalized waits: A 0/100 = 0; B mean start 50 over mean task 500 = 0.1;
    # C (0 + 10 + 20)/3 = 10 over 300 = 1/30
    nw = s["normalized_wait"]
    assert nw["p50"] == pytest.approx(1 / 30, abs=1e-6)
    assert nw["below_0.04"] == pytest.approx(2 / 3)
    assert nw["between"] == pytest.approx(1 / 3)
    assert nw["above_1.90"] == 0.0
    # bins by actual size: A 300, B 2000, C 900, D 100, E 2000; total 5300
    bins = s["bins"]
    assert bins["thin_small"] == {"jobs": 0.2, "size": pytest.approx(100 / 5300, abs=1e-6)}
    assert bins["thin_large"] == {"jobs": 0.2, "size": pytest.approx(2000 / 5300, abs=1e-6)}
    assert bins["wide_small"] == {"jobs": 0.4, "size": pytest.approx(1200 / 5300, abs=1e-6)}
    assert bins["wide_large"]["jobs"] == 0.2


def test_failed_containers_are_not_size() -> None:
    h = Log()
    h.job("A", 0.0, [(0, 40), (0, 100), (0, 100), (40, 140)], estimate=300.0, failed=1)
    s = summarize(h.log.records)["estimation"]
    assert s["error_pct"]["p50"] == 0.0  # 300 s: the three successful containers


def test_no_section_without_estimates_and_table_equals_records() -> None:
    h = Log()
    h.job("A", 0.0, [(0, 100)] * 3)
    assert "estimation" not in summarize(h.log.records)
    h.job("B", 0.0, [(0, 100)] * 3, estimate=200.0)
    table = ec.table_from_records(h.log.records)
    assert summarize(table) == summarize(h.log.records)
    assert estimation_summary(table, scan(table)) is not None


def test_against_a_baseline_by_hand() -> None:
    base, mine = Log(), Log()
    # X: JCT 100 under the baseline, 50 here; Y: 300 vs 600; Z (thin, large): 2000 vs 1000
    base.job("X", 0.0, [(0, 100)] * 3)
    mine.job("X", 0.0, [(0, 50)] * 3)
    base.job("Y", 0.0, [(0, 300)] * 3)
    mine.job("Y", 0.0, [(0, 600)] * 3)
    base.job("Z", 0.0, [(0, 2000)])
    mine.job("Z", 0.0, [(0, 1000)])
    b, m = job_results(base.log.records), job_results(mine.log.records)
    assert mean_jct_ratio(b, m) == pytest.approx(2400 / 1650)
    sizes = per_job_sizes(base.log.records, scan(base.log.records))
    assert sizes == {"X": 300.0, "Y": 900.0, "Z": 2000.0}
    out = against_baseline(b, m, sizes)
    assert out["speedup_p50"] == 2.0
    assert out["jobs"] == 3
    assert [f for f, _ in out["speedup_cdf"]] == [0.5, 2.0, 2.0]
    assert out["bins_mean_jct_ratio"] == {
        "thin_small": None,
        "thin_large": 2.0,
        "wide_small": pytest.approx(400 / 650),
        "wide_large": None,
    }


# ------------------------------------------------------------------ what gs and las log
def _sim(policy: str, params: dict[str, Any], *jobs: JobSpec, slots: int = 4) -> list[Any]:
    node = NodeSpec("n0", Resources(vcores=slots, memory_mb=1024 * slots))
    wl = Workload("t", ClusterSpec((node,)), tuple(jobs), seed=0)
    p = registry.build("policies", policy, params)
    result = Simulation(wl, p, lambda: registry.build("asks", "greedy"), policy_name=policy).run()
    assert result.stalled is None
    return list(result.records)


def _job(name: str, durations: list[float]) -> JobSpec:
    return JobSpec(name, "u", 0.0, (StageSpec("s", SLOT, tuple(durations)),))


def test_gs_slearn_logs_its_estimates_and_moves() -> None:
    recs = _sim(
        "gs",
        {"estimator": "slearn", "slearn.ratio": 0.03},
        _job("wide", [40.0, 60.0, 50.0, 50.0]),
        _job("thin", [10.0, 10.0]),
    )
    names = {r["job"]: r["name"] for r in recs if r["event"] == "job_submitted"}
    est = [r for r in recs if r["event"] == "job_estimated"]
    assert [names[r["job"]] for r in est] == ["wide"]  # a thin job is never estimated
    (e,) = est
    assert e["pilots"] == 1
    assert e["ratio"] == 0.03
    assert e["estimate_s"] in (160.0, 200.0, 240.0)
    moves = [r for r in recs if r["event"] == "job_queue_changed"]
    assert [(names[r["job"]], r["from_position"], r["to_position"]) for r in moves] == [
        ("wide", 1, 0)
    ]
    assert all(ev.check_record(r) is None for r in recs)
    summary = analyze(recs).summary
    assert summary["estimation"]["wide_judged"] == 1


def test_las_logs_demotions_and_no_estimate() -> None:
    recs = _sim("las", {"q0_hi_s": 100.0}, _job("long", [80.0, 80.0, 80.0]), slots=2)
    moves = [
        (r["from_position"], r["to_position"]) for r in recs if r["event"] == "job_queue_changed"
    ]
    assert moves == [
        (0, 2)
    ]  # 2 tasks reach 100 s at t = 50 (a task still waits): range 1, position 2
    assert not [r for r in recs if r["event"] == "job_estimated"]
    assert "estimation" not in analyze(recs).summary


def test_gs_oracle_estimates_are_exact() -> None:
    recs = _sim("gs", {}, _job("a", [10.0, 20.0, 30.0]), _job("b", [5.0]))
    est = sorted(r["estimate_s"] for r in recs if r["event"] == "job_estimated")
    assert est == [5.0, 60.0]
    s = analyze(recs).summary["estimation"]
    assert s["error_pct"]["p50"] == 0.0
    assert s["correct_queue"] == 1.0


def test_an_estimate_at_submission_is_logged_at_the_submission() -> None:
    late = JobSpec("late", "u", 4.0, (StageSpec("s", SLOT, (1.0,)),))
    recs = _sim("gs", {}, _job("first", [3.0]), late)
    sub = {r["job"]: r["t"] for r in recs if r["event"] == "job_submitted"}
    est = {r["job"]: r["t"] for r in recs if r["event"] == "job_estimated"}
    assert est == sub  # not the RM's last heartbeat before the submission

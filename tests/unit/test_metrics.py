"""Metrics from the event log: hand-computed examples, properties, and the run writers."""

from __future__ import annotations

import csv
import itertools
import json
import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

from treadle.event_columns import read_events
from treadle.events import read_jsonl
from treadle.metrics import (
    JOBS_CSV_COLUMNS,
    JobResult,
    analyze,
    factor_of_improvement,
    jain_index,
    jain_over_windows,
    job_results,
    percentile,
    summarize,
    utilization_series,
    worst_fraction_mean,
    write_run_outputs,
)

Record = dict[str, Any]

NODE = {"vcores": 4, "memory_mb": 8192}
CAPACITY = {"vcores": 8, "memory_mb": 16384}


def tiny_log(*, j2_start: float = 10.0, run_started: bool = True) -> list[Record]:
    """2 nodes (4 vcores, 8 GiB each), 2 users, 3 jobs.

    j1 alice  submit 0   c1 (4 vc, 4096)  [0, 10)                     -> JCT 10, wait 0
    j2 alice  submit 5   c2 (2 vc, 8192)  [j2_start, j2_start + 10)   -> JCT 15, wait 5
    j3 bob    submit 10  c3 (4 vc, 2048)  [10, 30); c4 (1 vc, 1024) [12, 14) released
                                                                      -> JCT 20, wait 0
    """
    e2 = j2_start + 10
    recs: list[Record] = []
    if run_started:
        recs.append(
            {
                "t": 0.0,
                "event": "run_started",
                "policy": "fifo",
                "workload": "tiny",
                "mode": "sim",
                "seed": 7,
                "dilation": 1.0,
                "heartbeat_s": 1.0,
                "nodes": 2,
                "capacity": CAPACITY,
            }
        )
    recs += [
        {"t": 0.0, "event": "node_registered", "node": "n1", "rack": "r", "resources": NODE},
        {"t": 0.0, "event": "node_registered", "node": "n2", "rack": "r", "resources": NODE},
        {
            "t": 0.0,
            "event": "job_submitted",
            "job": "j1",
            "name": "wordcount",
            "user": "alice",
            "queue": "default",
            "tasks": 1,
            "alone_jct_s": 10.0,
        },
        {"t": 0.0, "event": "job_started", "job": "j1", "user": "alice", "queue": "default"},
        {
            "t": 0.0,
            "event": "container_allocated",
            "job": "j1",
            "container": "c1",
            "node": "n1",
            "resources": {"vcores": 4, "memory_mb": 4096},
            "priority": 1,
            "kind": "DEFAULT",
        },
        {"t": 0.5, "event": "container_started", "job": "j1", "container": "c1", "node": "n1"},
        {
            "t": 5.0,
            "event": "job_submitted",
            "job": "j2",
            "name": "grep",
            "user": "alice",
            "queue": "default",
            "tasks": 1,
            "alone_jct_s": 10.0,
        },
        {
            "t": 10.0,
            "event": "container_finished",
            "job": "j1",
            "container": "c1",
            "node": "n1",
            "state": "COMPLETE",
            "exit_status": 0,
        },
        {
            "t": 10.0,
            "event": "job_finished",
            "job": "j1",
            "user": "alice",
            "queue": "default",
            "status": "SUCCEEDED",
        },
        {
            "t": 10.0,
            "event": "job_submitted",
            "job": "j3",
            "name": "sort",
            "user": "bob",
            "queue": "default",
            "tasks": 2,
            "alone_jct_s": 20.0,
        },
        {"t": j2_start, "event": "job_started", "job": "j2", "user": "alice", "queue": "default"},
        {
            "t": j2_start,
            "event": "container_allocated",
            "job": "j2",
            "container": "c2",
            "node": "n2",
            "resources": {"vcores": 2, "memory_mb": 8192},
            "priority": 1,
            "kind": "DEFAULT",
        },
        {"t": 10.0, "event": "job_started", "job": "j3", "user": "bob", "queue": "default"},
        {
            "t": 10.0,
            "event": "container_allocated",
            "job": "j3",
            "container": "c3",
            "node": "n1",
            "resources": {"vcores": 4, "memory_mb": 2048},
            "priority": 1,
            "kind": "DEFAULT",
        },
        {
            "t": 12.0,
            "event": "container_allocated",
            "job": "j3",
            "container": "c4",
            "node": "n2",
            "resources": {"vcores": 1, "memory_mb": 1024},
            "priority": 1,
            "kind": "ALTRUISTIC",
        },
        {"t": 14.0, "event": "container_released", "job": "j3", "container": "c4", "node": "n2"},
        {
            "t": e2,
            "event": "container_finished",
            "job": "j2",
            "container": "c2",
            "node": "n2",
            "state": "COMPLETE",
            "exit_status": 0,
        },
        {
            "t": e2,
            "event": "job_finished",
            "job": "j2",
            "user": "alice",
            "queue": "default",
            "status": "SUCCEEDED",
        },
        {
            "t": 30.0,
            "event": "container_finished",
            "job": "j3",
            "container": "c3",
            "node": "n1",
            "state": "COMPLETE",
            "exit_status": 0,
        },
        {
            "t": 30.0,
            "event": "job_finished",
            "job": "j3",
            "user": "bob",
            "queue": "default",
            "status": "SUCCEEDED",
        },
        {"t": 31.0, "event": "run_finished", "finished": 3, "unfinished": 0},
    ]
    return recs


def shuffled(records: list[Record], seed: int = 0) -> list[Record]:
    out = list(records)
    random.Random(seed).shuffle(out)
    return out


def jr(name: str, jct: float | None, status: str = "SUCCEEDED", submit: float = 0.0) -> JobResult:
    return JobResult(
        job=f"id-{name}-{submit}",
        name=name,
        user="u",
        queue="q",
        submit_s=submit,
        start_s=submit,
        finish_s=None if jct is None else submit + jct,
        jct_s=jct,
        wait_s=0.0,
        slowdown=None,
        tasks=1,
        status=status if jct is not None else "UNFINISHED",
        alone_jct_s=None,
    )


# --------------------------------------------------------------------------------------
# Jobs and summary


def test_job_results_hand_computed() -> None:
    rows = [
        (r.job, r.name, r.user, r.submit_s, r.start_s, r.finish_s, r.jct_s, r.wait_s, r.slowdown)
        for r in job_results(tiny_log())
    ]
    assert rows == [
        ("j1", "wordcount", "alice", 0.0, 0.0, 10.0, 10.0, 0.0, 1.0),
        ("j2", "grep", "alice", 5.0, 10.0, 20.0, 15.0, 5.0, 1.5),
        ("j3", "sort", "bob", 10.0, 10.0, 30.0, 20.0, 0.0, 1.0),
    ]
    assert [r.status for r in job_results(tiny_log())] == ["SUCCEEDED"] * 3
    assert [r.tasks for r in job_results(tiny_log())] == [1, 1, 2]


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("policy", "fifo"),
        ("mode", "sim"),
        ("workload", "tiny"),
        ("seed", 7),
        ("dilation", 1.0),
        ("jobs", 3),
        ("finished", 3),
        ("unfinished", 0),
        ("failed", 0),
        ("makespan_s", 30.0),
        ("mean_jct_s", 15.0),
        ("p50_jct_s", 15.0),
        ("p80_jct_s", 18.0),
        ("p95_jct_s", 19.5),
        ("worst10_jct_s", 20.0),
        ("mean_slowdown", 1.166667),
        ("p95_slowdown", 1.45),
        ("mean_wait_s", 1.666667),
        # vcores: (4*10 + 2*10 + 4*20 + 1*2) / (8 * 30); memory: 165888 / (16384 * 30)
        ("utilization", {"memory_mb": 0.3375, "vcores": 0.591667}),
        (
            "per_user",
            {
                "alice": {
                    "jobs": 2,
                    "finished": 2,
                    "mean_jct_s": 12.5,
                    "mean_slowdown": 1.25,
                    "mean_wait_s": 2.5,
                },
                "bob": {
                    "jobs": 1,
                    "finished": 1,
                    "mean_jct_s": 20.0,
                    "mean_slowdown": 1.0,
                    "mean_wait_s": 0.0,
                },
            },
        ),
        # one 60 s window [0, 30): alice 5 + 5, bob 10 + 0.25 dominant-share-seconds
        ("jain_users_mean", round(20.25**2 / (2 * (10**2 + 10.25**2)), 6)),
        ("jain_users_windows", 1),
        ("jain_jobs_min", round(20.25**2 / (3 * (5**2 + 5**2 + 10.25**2)), 6)),
    ],
)
def test_summary_hand_computed(key: str, expected: Any) -> None:
    assert summarize(tiny_log())[key] == expected


def test_summary_policy_argument_wins_and_is_json_stable() -> None:
    s = summarize(tiny_log(), policy="drf")
    assert s["policy"] == "drf"
    assert json.loads(json.dumps(s, allow_nan=False)) == s


def test_out_of_order_records_give_the_same_results() -> None:
    recs = tiny_log()
    for seed in range(5):
        other = shuffled(recs, seed)
        assert job_results(other) == job_results(recs)
        assert summarize(other) == summarize(recs)
        assert utilization_series(other) == utilization_series(recs)
        for by in ("user", "job"):
            assert jain_over_windows(other, by, 10.0) == jain_over_windows(recs, by, 10.0)


def test_capacity_falls_back_to_registered_nodes() -> None:
    s = summarize(tiny_log(run_started=False))
    assert s["capacity"] == {"memory_mb": 16384.0, "vcores": 8.0}
    assert s["utilization"] == {"memory_mb": 0.3375, "vcores": 0.591667}
    assert s["mode"] is None
    assert s["policy"] is None


def test_unfinished_failed_and_killed_jobs_are_counted_apart() -> None:
    recs = tiny_log()
    for job, user, status in [
        ("j4", "carol", None),
        ("j5", "bob", "FAILED"),
        ("j6", "bob", "KILLED"),
    ]:
        recs.append(
            {
                "t": 25.0,
                "event": "job_submitted",
                "job": job,
                "name": job,
                "user": user,
                "queue": "default",
                "tasks": 1,
                "alone_jct_s": None,
            }
        )
        if status:
            recs.append({"t": 28.0, "event": "job_finished", "job": job, "status": status})
    s = summarize(recs)
    assert (s["jobs"], s["finished"], s["unfinished"], s["failed"], s["killed"]) == (6, 3, 1, 1, 1)
    assert s["mean_jct_s"] == 15.0
    assert s["makespan_s"] == 30.0
    assert s["per_user"]["carol"] == {
        "jobs": 1,
        "finished": 0,
        "mean_jct_s": None,
        "mean_slowdown": None,
        "mean_wait_s": None,
    }
    by_job = {r.job: r for r in job_results(recs)}
    assert by_job["j4"].status == "UNFINISHED"
    assert by_job["j4"].jct_s is None
    assert by_job["j4"].start_s is None
    assert by_job["j5"].status == "FAILED"
    assert by_job["j5"].jct_s == 3.0


def test_empty_log_summary_has_nulls() -> None:
    s = summarize([])
    assert s["jobs"] == 0
    assert s["mean_jct_s"] is None
    assert s["makespan_s"] is None
    assert s["utilization"] == {}
    assert (s["jain_users_mean"], s["jain_users_windows"]) == (1.0, 0)


def test_container_without_end_holds_until_the_last_record() -> None:
    recs = [
        {"t": 0, "event": "run_started", "capacity": {"vcores": 2}},
        {"t": 0, "event": "job_submitted", "job": "a", "user": "u", "name": "a"},
        {
            "t": 0,
            "event": "container_allocated",
            "job": "a",
            "container": "c",
            "resources": {"vcores": 1},
        },
        {"t": 10, "event": "run_finished"},
    ]
    s = summarize(recs)
    assert s["makespan_s"] is None
    assert s["utilization"] == {"vcores": 0.5}
    assert utilization_series(recs) == {"vcores": [(0.0, 0.5), (10.0, 0.0)]}


# --------------------------------------------------------------------------------------
# Utilization


def test_utilization_series_hand_computed() -> None:
    assert utilization_series(tiny_log()) == {
        "memory_mb": [
            (0.0, 0.25),
            (10.0, 0.625),
            (12.0, 0.6875),
            (14.0, 0.625),
            (20.0, 0.125),
            (30.0, 0.0),
        ],
        "vcores": [(0.0, 0.5), (10.0, 0.75), (12.0, 0.875), (14.0, 0.75), (20.0, 0.5), (30.0, 0.0)],
    }


def _series_mean(series: Sequence[tuple[float, float]]) -> float:
    span = series[-1][0] - series[0][0]
    return sum(v * (b[0] - a[0]) for a, b in itertools.pairwise(series) for v in [a[1]]) / span


def test_utilization_mean_is_the_time_average_of_the_series() -> None:
    m = analyze(tiny_log(j2_start=7.5))
    for res, series in m.utilization.items():
        assert m.summary["utilization"][res] == pytest.approx(_series_mean(series), abs=1e-6)


# --------------------------------------------------------------------------------------
# Jain's index


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1, 1], 1.0),
        ([1, 0], 0.5),
        ([], 1.0),
        ([0, 0, 0], 1.0),
        ([5], 1.0),
        ([1, 2, 3], 36 / 42),
        ([1, 0, 0, 0], 0.25),
    ],
)
def test_jain_index(values: list[float], expected: float) -> None:
    assert jain_index(values) == pytest.approx(expected, abs=1e-12)


def test_jain_index_rejects_negative_values() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        jain_index([1.0, -1.0])


W_USERS = 10.25**2 / (2 * (5**2 + 5.25**2))


@pytest.mark.parametrize(
    ("by", "window_s", "weights", "expected"),
    [
        # windows [0,10) [10,20) [20,30): only [10,20) has two active users
        ("user", 10.0, None, {"mean": W_USERS, "min": W_USERS, "max": W_USERS, "windows": 1}),
        (
            "user",
            10.0,
            {"alice": 2.0},
            {
                "mean": 7.75**2 / (2 * (2.5**2 + 5.25**2)),
                "min": 7.75**2 / (2 * (2.5**2 + 5.25**2)),
                "max": 7.75**2 / (2 * (2.5**2 + 5.25**2)),
                "windows": 1,
            },
        ),
        # [0,10): j1 got 5, j2 waited (0) -> 0.5; [10,20): j2 5, j3 5.25; [20,30): j3 alone
        (
            "job",
            10.0,
            None,
            {"mean": (0.5 + W_USERS) / 2, "min": 0.5, "max": W_USERS, "windows": 2},
        ),
        ("user", 100.0, None, {"mean": 0.999848, "min": 0.999848, "max": 0.999848, "windows": 1}),
        ("user", 1000.0, {"bob": 1e-9}, {"mean": 0.5, "min": 0.5, "max": 0.5, "windows": 1}),
    ],
)
def test_jain_over_windows_hand_computed(
    by: str, window_s: float, weights: dict[str, float] | None, expected: dict[str, float]
) -> None:
    got = jain_over_windows(tiny_log(), by, window_s, weights)  # type: ignore[arg-type]
    assert got["windows"] == expected["windows"]
    for k in ("mean", "min", "max"):
        assert got[k] == pytest.approx(expected[k], abs=1e-6), k


def test_jain_over_windows_all_skipped_is_neutral() -> None:
    one_user = [r for r in tiny_log() if r.get("user") != "bob" and r.get("job") != "j3"]
    assert jain_over_windows(one_user, "user") == {
        "mean": 1.0,
        "min": 1.0,
        "max": 1.0,
        "windows": 0,
    }


@pytest.mark.parametrize(
    ("by", "window_s", "weights", "message"),
    [
        ("queue", 60.0, None, "by must be"),
        ("user", 0.0, None, "window_s"),
        ("user", 60.0, {"alice": 0.0}, "weight"),
    ],
)
def test_jain_over_windows_rejects_bad_arguments(
    by: str, window_s: float, weights: dict[str, float] | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        jain_over_windows(tiny_log(), by, window_s, weights)  # type: ignore[arg-type]


def brute_jain(
    records: list[Record], by: str, window_s: float, weights: Mapping[str, float] | None = None
) -> dict[str, float]:
    """The definition, window by window and container by container (O(windows x containers))."""
    cap = next(r["capacity"] for r in records if r["event"] == "run_started")
    last = max(r["t"] for r in records)
    sub = {r["job"]: r for r in records if r["event"] == "job_submitted"}
    end = {r["job"]: r["t"] for r in records if r["event"] == "job_finished"}
    start = min(r["t"] for r in sub.values())
    hz = max(end.values()) if end else last
    alloc = {(r["job"], r["container"]): r for r in records if r["event"] == "container_allocated"}
    cend: dict[tuple[str, str], float] = {}
    for r in records:
        if r["event"] in ("container_finished", "container_released"):
            k = (r["job"], r["container"])
            cend[k] = min(cend.get(k, math.inf), r["t"])
    ent = {j: (s["user"] if by == "user" else j) for j, s in sub.items()}
    n = max(1, math.ceil((hz - start) / window_s))
    idx = []
    for w in range(n):
        ws, we = start + w * window_s, min(start + (w + 1) * window_s, hz)
        active = set()
        for j, s in sub.items():
            a, b = max(s["t"], start), min(end.get(j, hz), hz)
            if b > a and a < we and b > ws:
                active.add(ent[j])
        if len(active) < 2:
            continue
        x = dict.fromkeys(active, 0.0)
        for k, r in alloc.items():
            a = r["t"]
            b = max(a, cend.get(k, last))
            ov = min(b, we, hz) - max(a, ws, start)
            e = ent[r["job"]]
            if ov > 0 and e in x:
                ds = max(v / cap[q] for q, v in r["resources"].items())
                x[e] += ov * ds
        idx.append(jain_index([v / (weights or {}).get(e, 1.0) for e, v in x.items()]))
    if not idx:
        return {"mean": 1.0, "min": 1.0, "max": 1.0, "windows": 0}
    return {"mean": sum(idx) / len(idx), "min": min(idx), "max": max(idx), "windows": len(idx)}


@st.composite
def random_logs(draw: st.DrawFn) -> list[Record]:
    recs: list[Record] = [
        {"t": 0, "event": "run_started", "capacity": {"vcores": 16, "memory_mb": 32768}}
    ]
    times = st.integers(0, 400).map(lambda i: i / 2)
    for j in range(draw(st.integers(1, 6))):
        job = f"j{j}"
        submit = draw(times)
        user = draw(st.sampled_from(["u1", "u2", "u3"]))
        recs.append({"t": submit, "event": "job_submitted", "job": job, "user": user, "name": job})
        dur = draw(times)
        if draw(st.booleans()):
            recs.append(
                {"t": submit + dur, "event": "job_finished", "job": job, "status": "SUCCEEDED"}
            )
        for c in range(draw(st.integers(0, 4))):
            a = submit + draw(times)
            res = {"vcores": draw(st.integers(1, 8)), "memory_mb": draw(st.integers(0, 16384)) / 3}
            recs.append(
                {
                    "t": a,
                    "event": "container_allocated",
                    "job": job,
                    "container": f"c{c}",
                    "resources": res,
                }
            )
            if draw(st.booleans()):
                kind = draw(st.sampled_from(["container_finished", "container_released"]))
                recs.append({"t": a + draw(times), "event": kind, "job": job, "container": f"c{c}"})
    return recs


@settings(max_examples=150, deadline=None)
@given(
    recs=random_logs(),
    by=st.sampled_from(["user", "job"]),
    window_s=st.sampled_from([7.0, 10.0, 60.0]),
    weighted=st.booleans(),
)
def test_jain_over_windows_matches_the_definition(
    recs: list[Record], by: str, window_s: float, weighted: bool
) -> None:
    weights = {"u1": 2.0, "j0": 3.0} if weighted else None
    got = jain_over_windows(recs, by, window_s, weights)  # type: ignore[arg-type]
    want = brute_jain(recs, by, window_s, weights)
    assert got["windows"] == want["windows"]
    for k in ("mean", "min", "max"):
        assert got[k] == pytest.approx(want[k], abs=1e-9), k


@settings(max_examples=50, deadline=None)
@given(recs=random_logs())
def test_random_logs_are_order_independent(recs: list[Record]) -> None:
    assert summarize(shuffled(recs)) == summarize(recs)
    assert utilization_series(shuffled(recs, 1)) == utilization_series(recs)


# --------------------------------------------------------------------------------------
# Percentiles


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([10, 15, 20], 50, 15.0),
        ([10, 15, 20], 80, 18.0),
        ([10, 15, 20], 95, 19.5),
        ([3], 95, 3.0),
        ([20, 10], 0, 10.0),
        ([20, 10], 100, 20.0),
        ([1, 2, 3, 4], 25, 1.75),
    ],
)
def test_percentile_table(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("values", "q"), [([], 50), ([1.0], -1), ([1.0], 101), ([math.nan], 50)])
def test_percentile_rejects(values: list[float], q: float) -> None:
    with pytest.raises(ValueError, match="percentile"):
        percentile(values, q)


@given(
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60),
    q=st.floats(0, 100),
)
def test_percentile_matches_numpy(values: list[float], q: float) -> None:
    assert math.isclose(
        percentile(values, q), float(np.percentile(values, q)), rel_tol=1e-9, abs_tol=1e-9
    )


@pytest.mark.parametrize(
    ("values", "expected"),
    [([], None), ([5.0], 5.0), (list(range(1, 10)), 9.0), (list(range(1, 21)), 19.5)],
)
def test_worst_ten_percent(values: list[float], expected: float | None) -> None:
    assert worst_fraction_mean(values, 0.1) == expected


# --------------------------------------------------------------------------------------
# Factor of improvement


def test_factor_of_improvement() -> None:
    base = [jr("A", 10.0), jr("B", 20.0), jr("C", 30.0), jr("D", 5.0, "FAILED")]
    other = [jr("A", 5.0), jr("B", 40.0), jr("C", None), jr("D", 5.0), jr("E", 1.0)]
    f = factor_of_improvement(base, other)
    assert f["per_job"] == {"A": 2.0, "B": 0.5}
    assert f["jobs"] == 2
    assert f["mean"] == pytest.approx(1.25)
    assert f["p50"] == pytest.approx(1.25)
    assert f["p95"] == pytest.approx(0.5 + 1.5 * 0.95)
    assert (f["min"], f["max"]) == (0.5, 2.0)
    assert f["cdf"] == [(0.5, 0.5), (2.0, 1.0)]


def test_factor_of_improvement_pairs_repeated_names_in_submit_order() -> None:
    base = [jr("A", 10.0, submit=0), jr("A", 30.0, submit=5)]
    other = [jr("A", 15.0, submit=5), jr("A", 5.0, submit=0)]
    assert factor_of_improvement(base, other)["per_job"] == {"A": 2.0, "A#2": 2.0}


def test_factor_of_improvement_empty() -> None:
    f = factor_of_improvement([], [jr("A", 1.0)])
    assert (f["jobs"], f["mean"], f["p95"], f["cdf"]) == (0, None, None, [])


# --------------------------------------------------------------------------------------
# Writers

SUMMARY_KEYS = {
    "policy",
    "jobs",
    "finished",
    "unfinished",
    "failed",
    "makespan_s",
    "mean_jct_s",
    "p50_jct_s",
    "p80_jct_s",
    "p95_jct_s",
    "worst10_jct_s",
    "mean_slowdown",
    "p95_slowdown",
    "mean_wait_s",
    "utilization",
    "jain_users_mean",
    "jain_users_min",
    "jain_users_max",
    "jain_jobs_mean",
    "jain_jobs_min",
    "jain_jobs_max",
    "per_user",
    "mode",
    "workload",
    "seed",
    "dilation",
}


def test_write_run_outputs(tmp_path: Path) -> None:
    recs = tiny_log()
    out = tmp_path / "run" / "fifo"
    summary = write_run_outputs(shuffled(recs), out, policy="fifo")
    assert summary.keys() >= SUMMARY_KEYS
    assert json.loads((out / "summary.json").read_text()) == summary
    assert summary == summarize(recs, policy="fifo")

    with (out / "jobs.csv").open(newline="") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0][: len(JOBS_CSV_COLUMNS)]) == JOBS_CSV_COLUMNS
    assert JOBS_CSV_COLUMNS[:13] == (
        "job",
        "name",
        "user",
        "queue",
        "submit_s",
        "start_s",
        "finish_s",
        "jct_s",
        "slowdown",
        "tasks",
        "wait_s",
        "status",
        "alone_jct_s",
    )
    assert rows[1:] == [
        [
            "j1",
            "wordcount",
            "alice",
            "default",
            "0.0",
            "0.0",
            "10.0",
            "10.0",
            "1.0",
            "1",
            "0.0",
            "SUCCEEDED",
            "10.0",
        ],
        [
            "j2",
            "grep",
            "alice",
            "default",
            "5.0",
            "10.0",
            "20.0",
            "15.0",
            "1.5",
            "1",
            "5.0",
            "SUCCEEDED",
            "10.0",
        ],
        [
            "j3",
            "sort",
            "bob",
            "default",
            "10.0",
            "10.0",
            "30.0",
            "20.0",
            "1.0",
            "2",
            "0.0",
            "SUCCEEDED",
            "20.0",
        ],
    ]

    def valued(rs: list[Record]) -> list[Record]:  # a field a record lacks reads back null
        return [{k: v for k, v in r.items() if v is not None} for r in rs]

    assert valued(read_events(out / "events.parquet")) == valued(shuffled(recs))  # in order
    assert not (out / "events.jsonl").exists()
    jobs = pq.read_table(out / "jobs.parquet").to_pylist()
    assert [j["job"] for j in jobs] == ["j1", "j2", "j3"]
    assert (jobs[1]["jct_s"], jobs[1]["tasks"]) == (15.0, 1)

    write_run_outputs(shuffled(recs), out, policy="fifo", events="jsonl")
    assert read_jsonl(out / "events.jsonl") == shuffled(recs)
    write_run_outputs(recs, tmp_path / "none", policy="fifo", events="none")
    assert sorted(p.name for p in (tmp_path / "none").iterdir()) == [
        "jobs.csv",
        "jobs.parquet",
        "summary.json",
    ]


@pytest.mark.parametrize("events", ["parquet", "jsonl"])
def test_write_run_outputs_is_byte_stable(tmp_path: Path, events: str) -> None:
    write_run_outputs(tiny_log(), tmp_path / "a", policy="fifo", events=events)
    write_run_outputs(tiny_log(), tmp_path / "b", policy="fifo", events=events)
    for name in ("summary.json", "jobs.csv", "jobs.parquet", f"events.{events}"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_unfinished_job_csv_cells_are_empty(tmp_path: Path) -> None:
    recs = [
        {"t": 0, "event": "run_started", "capacity": {"vcores": 1}},
        {
            "t": 1,
            "event": "job_submitted",
            "job": "a",
            "name": "a",
            "user": "u",
            "queue": "q",
            "tasks": 3,
        },
    ]
    write_run_outputs(recs, tmp_path, policy="fifo")
    with (tmp_path / "jobs.csv").open(newline="") as f:
        row = next(csv.DictReader(f))
    assert row["start_s"] == row["jct_s"] == row["slowdown"] == row["alone_jct_s"] == ""
    assert (row["status"], row["tasks"], row["submit_s"]) == ("UNFINISHED", "3", "1.0")


@given(st.lists(st.text(min_size=0, max_size=6), min_size=1, max_size=40, unique=True))
def test_strings_rank_in_python_order(values: list[str]) -> None:
    # Spans are summed in (start, end, job, container) order, the ids compared as Python
    # compares str; the metrics rank them in Arrow (UTF-8 byte order): the same order.
    import pyarrow as pa

    from treadle.metrics.scan import _rank

    rank = _rank(pa.array(values, pa.string()))
    assert [values[i] for i in np.argsort(rank)] == sorted(values)

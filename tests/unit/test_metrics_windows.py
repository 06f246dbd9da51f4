"""Windowed metrics cost O(events + windows with activity): an idle gap costs nothing.

``reference_jain`` is ``jain_from`` as it was before windows were held sparsely (it walks
every window of the horizon); the current one must give exactly (==) its results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given, settings, strategies as st

from tests.reference_metrics.scan import JobFacts, LogFacts, scan as ref_scan
from tests.reference_metrics.stats import jain_index
from tests.unit.test_metrics import random_logs, tiny_log
from treadle.metrics import analyze, jain_over_windows, read_log, summarize, utilization_series
from treadle.metrics.fairness import jain_from
from treadle.metrics.scan import scan
from treadle.study.runner import PolicyChoice, RunOptions, run_sim
from treadle.workload import load_workload, parse_workload

Record = dict[str, Any]


def reference_jain(
    log: LogFacts,
    by: Literal["user", "job"],
    window_s: float,
    weights: Mapping[str, float] | None,
) -> dict[str, float | int]:
    """``jain_from`` before the sparse windows (walks every window)."""
    if by not in ("user", "job"):
        raise ValueError(f"jain_over_windows: by must be 'user' or 'job', got {by!r}")
    if not window_s > 0:
        raise ValueError(f"jain_over_windows: window_s must be > 0, got {window_s}")
    neutral: dict[str, float | int] = {"mean": 1.0, "min": 1.0, "max": 1.0, "windows": 0}
    hz = log.horizon()
    if hz is None or hz[1] <= hz[0]:
        return neutral
    start, end = hz
    nwin = max(1, math.ceil((end - start) / window_s))

    def win(t: float) -> int:  # the window holding t (t in [start, end])
        return min(nwin - 1, max(0, math.floor((t - start) / window_s)))

    def win_before(t: float) -> int:  # the window holding the instant just before t
        return min(nwin - 1, max(0, math.ceil((t - start) / window_s) - 1))

    def entity(job: JobFacts) -> str:
        return job.user if by == "user" else job.job

    # Activity: +1 at the job's first window, -1 after its last (difference arrays).
    active_diff: list[dict[str, int]] = [{} for _ in range(nwin + 1)]
    for j in log.jobs.values():
        if j.submit is None:
            continue
        a, b = max(j.submit, start), min(j.end if j.end is not None else end, end)
        if b <= a:
            continue
        e = entity(j)
        d0, d1 = active_diff[win(a)], active_diff[win_before(b) + 1]
        d0[e] = d0.get(e, 0) + 1
        d1[e] = d1.get(e, 0) - 1

    # Service: the ends of a container go to its first and last windows; the windows in
    # between are all whole, so they get a rate through a difference array.
    partial: list[dict[str, float]] = [{} for _ in range(nwin)]
    rate_diff: list[dict[str, float]] = [{} for _ in range(nwin + 1)]
    jobs = log.jobs
    for job, a, b, _, ds in log.spans():
        jr = jobs.get(job)
        if jr is None or jr.submit is None:
            continue
        if ds <= 0:
            continue
        e = entity(jr)
        wa, wb = win(a), win_before(b)
        if wa == wb:
            p = partial[wa]
            p[e] = p.get(e, 0.0) + (b - a) * ds
            continue
        p = partial[wa]
        p[e] = p.get(e, 0.0) + (start + (wa + 1) * window_s - a) * ds
        p = partial[wb]
        p[e] = p.get(e, 0.0) + (b - (start + wb * window_s)) * ds
        if wb - wa > 1:
            r0, r1 = rate_diff[wa + 1], rate_diff[wb]
            r0[e] = r0.get(e, 0.0) + ds
            r1[e] = r1.get(e, 0.0) - ds

    w_of: dict[str, float] = {}
    if weights:
        for k, w in weights.items():
            if not w > 0:
                raise ValueError(f"jain_over_windows: weight of {k!r} must be > 0, got {w}")
            w_of[k] = float(w)

    counts: dict[str, int] = {}
    rates: dict[str, float] = {}
    indices: list[float] = []
    for w in range(nwin):
        for e, d in active_diff[w].items():
            c = counts.get(e, 0) + d
            if c:
                counts[e] = c
            else:
                counts.pop(e, None)
        for e, dr in rate_diff[w].items():
            rates[e] = rates.get(e, 0.0) + dr
        if len(counts) < 2:
            continue
        p = partial[w]
        xs = []
        for e in counts:
            x = p.get(e, 0.0) + rates.get(e, 0.0) * window_s
            xs.append(max(0.0, x) / w_of.get(e, 1.0))
        xs.sort()  # sums independent of the order of the records
        indices.append(jain_index(xs))
    if not indices:
        return neutral
    return {
        "mean": math.fsum(indices) / len(indices),
        "min": min(indices),
        "max": max(indices),
        "windows": len(indices),
    }


def both(
    records: list[Record],
    by: Literal["user", "job"],
    window_s: float,
    weights: Mapping[str, float] | None = None,
) -> tuple[dict[str, float | int], dict[str, float | int]]:
    new = jain_from(scan(records), by, window_s, weights)
    return new, reference_jain(ref_scan(records), by, window_s, weights)


@pytest.mark.parametrize("j2_start", [5.0, 10.0, 17.5])
@pytest.mark.parametrize("window_s", [1.0, 3.0, 7.0, 60.0])
@pytest.mark.parametrize("by", ["user", "job"])
def test_same_as_before_on_the_unit_test_logs(j2_start: float, window_s: float, by: Any) -> None:
    log = tiny_log(j2_start=j2_start)
    new, old = both(log, by, window_s, {"alice": 2.0, "j3": 0.5})
    assert new == old
    new, old = both(log, by, window_s)
    assert new == old


def gappy(recs: list[Record], gap: float) -> list[Record]:
    """``recs`` with every time past 100 s pushed ``gap`` s later: long idle stretches."""
    out = []
    for r in recs:
        t = float(r["t"])
        out.append({**r, "t": t + gap if t > 100 else t})
    return out


@settings(max_examples=200, deadline=None)
@given(
    recs=random_logs(),
    by=st.sampled_from(["user", "job"]),
    window_s=st.sampled_from([0.5, 7.0, 10.0, 60.0]),
    weighted=st.booleans(),
    gap=st.sampled_from([0.0, 333.3, 5000.0]),
)
def test_same_as_before_on_random_logs(
    recs: list[Record], by: Any, window_s: float, weighted: bool, gap: float
) -> None:
    weights = {"u1": 2.0, "j0": 3.0} if weighted else None
    new, old = both(gappy(recs, gap), by, window_s, weights)
    assert new == old


@pytest.fixture(scope="module")
def golden_logs() -> dict[str, list[Record]]:
    out = {}
    for workload in ("tiny", "demo", "dags"):
        wl = load_workload(workload)
        for policy in ("fifo", "drf", "fair"):
            result, _ = run_sim(wl, PolicyChoice(policy, {}), options=RunOptions(slowdown=False))
            out[f"{workload}-{policy}"] = result.records
    return out


@pytest.mark.parametrize("window_s", [1.0, 10.0, 60.0])
@pytest.mark.parametrize("by", ["user", "job"])
def test_same_as_before_on_simulated_logs(
    golden_logs: dict[str, list[Record]], window_s: float, by: Any
) -> None:
    for name, records in golden_logs.items():
        new, old = both(records, by, window_s, {"alice": 2.0})
        assert new == old, name


@pytest.mark.parametrize("chunk", [1, 3, 64])
@pytest.mark.parametrize("by", ["user", "job"])
def test_the_spans_summed_a_chunk_at_a_time_give_the_same_bits(
    golden_logs: dict[str, list[Record]], by: Any, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("treadle.metrics.scan.SPAN_CHUNK", chunk)
    for name, records in golden_logs.items():
        new, old = both(records, by, 10.0, {"alice": 2.0})
        assert new == old, name


def two_users_over(span: float) -> list[Record]:
    """alice and bob each hold one container from 0 to ``span``; a third, short job."""
    cap = {"vcores": 8, "memory_mb": 16384}
    recs: list[Record] = [{"t": 0.0, "event": "run_started", "capacity": cap}]
    for job, user, vc in (("a", "alice", 1), ("b", "bob", 3)):
        recs += [
            {"t": 0.0, "event": "job_submitted", "job": job, "user": user, "name": job},
            {
                "t": 0.0,
                "event": "container_allocated",
                "job": job,
                "container": "c1",
                "resources": {"vcores": vc, "memory_mb": 1024},
            },
            {"t": span, "event": "container_finished", "job": job, "container": "c1"},
            {"t": span, "event": "job_finished", "job": job, "status": "SUCCEEDED"},
        ]
    recs += [
        {"t": 30.0, "event": "job_submitted", "job": "c", "user": "carol", "name": "c"},
        {
            "t": 30.0,
            "event": "container_allocated",
            "job": "c",
            "container": "c1",
            "resources": {"vcores": 4, "memory_mb": 1024},
        },
        {"t": 90.0, "event": "container_finished", "job": "c", "container": "c1"},
        {"t": 90.0, "event": "job_finished", "job": "c", "status": "SUCCEEDED"},
    ]
    return recs


def test_a_long_busy_stretch_is_computed_once_per_change() -> None:
    short = two_users_over(6000.0)  # 100 windows of 60 s: the reference can walk them
    log = scan(short)
    old_log = ref_scan(short)
    stats: dict[str, int] = {}
    assert jain_from(log, "user", 60.0, None, stats) == reference_jain(old_log, "user", 60.0, None)
    assert stats["windows"] == 100
    # windows 0-1 (carol), 2 (she leaves), one for the stretch 3-98, and 99 (the ends)
    assert stats["computed"] == 5

    huge = scan(two_users_over(1.0e12))
    stats = {}
    got = jain_from(huge, "user", 60.0, None, stats)
    nwin = math.ceil(1.0e12 / 60.0)
    assert stats == {"windows": nwin, "computed": 5}
    assert got["windows"] == nwin
    alone_pair = jain_index(sorted([1 / 8 * 60, 3 / 8 * 60]))  # alice and bob
    assert got["min"] <= alone_pair <= got["max"]
    # (nwin - 3) windows of the pair alone (and carol's three): the pair's index on average
    assert got["mean"] == pytest.approx(alone_pair, rel=1e-9)


FAR = """
seed: 1
cluster:
  nodes:
    - {resources: {vcores: 4, memory_mb: 8192}}
users:
  alice: {weight: 1}
  bob: {weight: 1}
jobs:
  - name: now
    user: alice
    submit_s: 0
    stages:
      - {name: map, tasks: 2, duration_s: 5, resources: {vcores: 1, memory_mb: 1024}}
  - name: later
    user: bob
    submit_s: 1.0e+12
    stages:
      - {name: map, tasks: 2, duration_s: 5, resources: {vcores: 1, memory_mb: 1024}}
"""


def test_a_far_future_submit_finishes_with_its_metrics(tmp_path: Path) -> None:
    """A job at 0 and one at 1e12 s: the simulation, the references for slowdown, the
    metrics and the run files all complete (the windows between are never walked)."""
    wl = parse_workload(FAR, "far.yaml")
    result, run = run_sim(wl, PolicyChoice("fifo", {}), tmp_path, options=RunOptions())
    assert run.summary["finished"] == 2
    assert run.summary["makespan_s"] > 1e12
    assert run.summary["jain_users_windows"] == 0  # never two users active at once
    assert (tmp_path / "summary.json").is_file()
    assert result.records == []  # the log went to events.parquet as the run went
    log = read_log(tmp_path / "events.parquet")
    stats: dict[str, int] = {}
    jain_from(scan(log), "job", 60.0, None, stats)
    assert stats["windows"] > 1e10
    assert stats["computed"] == 0
    metrics_only = {k: v for k, v in run.summary.items() if k != "parameters"}  # run_sim's
    assert summarize(log, policy="fifo") == metrics_only
    series = utilization_series(log)["vcores"]
    assert len(series) <= 10  # one point per change, not per window
    assert analyze(log).utilization == run.utilization


def test_jain_over_windows_api_unchanged() -> None:
    recs = two_users_over(600.0)
    assert jain_over_windows(recs, "user") == reference_jain(ref_scan(recs), "user", 60.0, None)

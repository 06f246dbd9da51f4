"""The UWFQ paper's metrics (rank groups, best/worst user, DVR/DSR and per-user RT against a
reference, and their ``paper_compat`` variant): the array code equals a straightforward
per-job computation on random runs, and the spec's hand cases M1 and M2 hold."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest

from treadle.metrics import JobResult
from treadle.metrics.deadlines import best_and_worst, rank_group_dict
from treadle.metrics.reference import (
    compat_summary,
    compat_versus_reference,
    job_times,
    versus_reference,
)
from treadle.metrics.scan import FAILED, SUCCEEDED, UNFINISHED


def _job(name: str, user: str, submit: float, finish: float | None, status: str) -> JobResult:
    jct = None if finish is None else round(finish - submit, 6)
    return JobResult(
        name, name, user, "default", submit, submit, finish, jct, 0.0, None, 1, status, None
    )


def _random_run(rng: random.Random, names: Sequence[tuple[str, str, float]]) -> list[JobResult]:
    jobs = []
    for name, user, submit in names:
        status = rng.choices([SUCCEEDED, FAILED, UNFINISHED], [0.85, 0.1, 0.05])[0]
        finish = None if status == UNFINISHED else submit + rng.choice([0.0, rng.expovariate(0.1)])
        jobs.append(_job(name, user, submit, finish, status))
    return sorted(jobs, key=lambda j: (j.submit_s, j.job))


def _workload(rng: random.Random, n: int) -> list[tuple[str, str, float]]:
    users = [f"user_{i}" for i in range(1, 13)]  # user_1 is a substring of user_10..12
    out = []
    for i in range(n):
        name = rng.choice([f"loop100_{i}", f"loop_custom_{i}", "again"])  # "again" repeats
        out.append((name, rng.choice(users), round(rng.uniform(0, 50), 3)))
    return out


# ------------------------------------------------------------ per-job reference code
def _keyed(jobs: Sequence[JobResult]) -> dict[str, JobResult]:
    seen: dict[str, int] = {}
    out = {}
    for j in jobs:
        n = seen[j.name] = seen.get(j.name, 0) + 1
        out[j.name if n == 1 else f"{j.name}#{n}"] = j
    return out


def _ok(j: JobResult) -> bool:
    return j.status == SUCCEEDED and j.finish_s is not None and j.jct_s is not None


def _mean(xs: Sequence[float]) -> float | None:
    return math.fsum(xs) / len(xs) if xs else None


def _user_means(pairs: Sequence[tuple[str, JobResult]]) -> dict[str, float]:
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for user, j in pairs:
        if _ok(j):
            assert j.jct_s is not None
            sums[user] = sums.get(user, 0.0) + j.jct_s
            counts[user] = counts.get(user, 0) + 1
    return {u: sums[u] / counts[u] for u in sums}


def _v(j: JobResult, r: JobResult, t0: float, t0r: float) -> float | None:
    if not (_ok(j) and _ok(r)) or not r.jct_s or r.jct_s <= 0:
        return None
    assert j.finish_s is not None
    assert r.finish_s is not None
    return ((j.finish_s - t0) - (r.finish_s - t0r)) / r.jct_s


def _reference(
    run: Sequence[JobResult],
    ref: Sequence[JobResult],
    pairs: Sequence[tuple[str, JobResult]],
    ref_pairs: Sequence[tuple[str, JobResult]],
    entries: Sequence[JobResult],
) -> dict[str, object]:
    t0, t0r = min(j.submit_s for j in run), min((j.submit_s for j in ref), default=0.0)
    ref_by = _keyed(ref)
    key_of = {id(j): k for k, j in _keyed(run).items()}
    vs = [_v(j, ref_by[key_of[id(j)]], t0, t0r) for j in entries if key_of[id(j)] in ref_by]
    late = [v for v in vs if v is not None and v > 0]
    early = [-v for v in vs if v is not None and v <= 0]
    means, ref_means = _user_means(pairs), _user_means(ref_pairs)
    both = sorted(means.keys() & ref_means.keys())
    relative = {u: means[u] / ref_means[u] - 1 for u in both if ref_means[u] > 0}
    return {
        "dvr": _mean(late),
        "violations": len(late),
        "dsr": _mean(early),
        "slack": len(early),
        "user_rt_vs_reference": relative,
    }


def _compat_pairs(run: Sequence[JobResult]) -> list[tuple[str, JobResult]]:
    users: list[str] = []
    for j in sorted(run, key=lambda j: j.submit_s):
        if j.user not in users:
            users.append(j.user)
    return [(u, j) for u in users for j in run if u in j.user]


@pytest.mark.parametrize("seed", range(8))
def test_arrays_equal_the_per_job_computation(seed: int) -> None:
    rng = random.Random(seed)
    names = _workload(rng, rng.choice([1, 5, 40, 200]))
    run, ref = _random_run(rng, names), _random_run(rng, names)
    if seed % 3 == 0:  # a job of the run missing from the reference
        ref = ref[1:]

    got = versus_reference(job_times(run), job_times(ref), "ref")
    want = _reference(run, ref, [(j.user, j) for j in run], [(j.user, j) for j in ref], run)
    assert {k: got[k] for k in want} == want
    assert got["jobs"] == got["violations"] + got["slack"]

    got_c = compat_versus_reference(job_times(run), job_times(ref), "ref")
    pairs = _compat_pairs(run)
    entries = [j for _, j in pairs if "loop100_" in j.name] + [j for _, j in pairs]
    want_c = _reference(run, ref, pairs, _compat_pairs(ref), entries)
    assert {k: got_c[k] for k in want_c} == want_c

    rts = sorted(j.jct_s for _, j in pairs if _ok(j) and j.jct_s is not None)
    summary = compat_summary(job_times(run))
    assert summary["entries"] == len(rts)
    assert summary["mean_jct_s"] == _mean(rts)
    n = len(rts)
    a, b = math.floor(0.8 * n), math.floor(0.95 * n)
    assert summary["jct_groups_s"] == {
        "0-80%": _mean(rts[:a]),
        "80-95%": _mean(rts[a:b]),
        "95-100%": _mean(rts[b:]),
    }
    assert summary["per_user_mean_jct_s"] == _user_means(pairs)


def test_m1_against_the_reference_zero_counts_as_slack() -> None:
    ref = [_job(f"j{i}", "u", 0.0, f, SUCCEEDED) for i, f in ((1, 10.0), (2, 20.0), (3, 30.0))]
    run = [_job(f"j{i}", "u", 0.0, f, SUCCEEDED) for i, f in ((1, 5.0), (2, 25.0), (3, 30.0))]
    got = versus_reference(job_times(run), job_times(ref), "ujf")
    assert (got["dvr"], got["violations"], got["dsr"], got["slack"]) == (0.25, 1, 0.25, 2)
    assert got["user_rt_vs_reference"] == {"u": 60 / 60 - 1}
    # Against itself: every v is 0, all slack, DSR 0 (the authors' count).
    same = versus_reference(job_times(ref), job_times(ref), "ujf")
    assert (same["dvr"], same["violations"], same["dsr"], same["slack"]) == (None, 0, 0.0, 3)


def test_m2_rank_groups_and_best_and_worst_user() -> None:
    assert rank_group_dict([float(x) for x in range(10, 0, -1)]) == {
        "0-80%": 4.5,
        "80-95%": 9.0,
        "95-100%": 10.0,
    }
    assert rank_group_dict([]) == {"0-80%": None, "80-95%": None, "95-100%": None}
    assert best_and_worst({"b": 2.0, "a": 2.0, "c": 5.0, "d": None}) == {
        "best_user": {"user": "a", "mean_jct_s": 2.0},
        "worst_user": {"user": "c", "mean_jct_s": 5.0},
    }


def test_paper_compat_doubles_micro_counts_and_collects_users_by_substring() -> None:
    micro = [_job(f"u{i}:loop100_{i}", f"u{i}", 0.0, 2.0 + i, SUCCEEDED) for i in range(4)]
    ref = [_job(j.name, j.user, 0.0, 3.0, SUCCEEDED) for j in micro]
    c = compat_versus_reference(job_times(micro), job_times(ref), "ujf")
    p = versus_reference(job_times(micro), job_times(ref), "ujf")
    assert (c["violations"], c["slack"]) == (2 * p["violations"], 2 * p["slack"])
    assert (c["dvr"], c["dsr"]) == (p["dvr"], p["dsr"])
    macro = [
        _job("user_1:a", "user_1", 0.0, 1.0, SUCCEEDED),
        _job("user_10:b", "user_10", 0.0, 3.0, SUCCEEDED),
    ]
    s = compat_summary(job_times(macro))
    assert s["entries"] == 3  # user_1 collects user_10's job too
    assert s["per_user_mean_jct_s"] == {"user_1": 2.0, "user_10": 3.0}
    # A declared user without a job still collects: user_2 takes user_20's.
    only_20 = [_job("user_20:c", "user_20", 0.0, 4.0, SUCCEEDED)]
    s2 = compat_summary(job_times(only_20), users=["user_2", "user_20"])
    assert s2["entries"] == 2
    assert s2["per_user_mean_jct_s"] == {"user_2": 4.0, "user_20": 4.0}

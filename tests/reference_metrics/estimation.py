"""summary.json's ``estimation`` section, one Python pass per record
(``treadle.metrics.estimation``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tests.reference_metrics.jobs import JobResult
from tests.reference_metrics.stats import mean, pct

BINS = ("thin_small", "thin_large", "wide_small", "wide_large")


def _range(size: float, q0_hi_s: float = 1000.0, growth: float = 10.0, ranges: int = 9) -> int:
    r, hi = 0, q0_hi_s
    while size >= hi and r < ranges - 1:
        r += 1
        hi *= growth
    return r


def _dist(values: list[float]) -> dict[str, float | None]:
    return {"p50": pct(values, 50), "p90": pct(values, 90), "mean": mean(values)}


def estimation_section(
    records: Iterable[Mapping[str, Any]], results: Sequence[JobResult], thin_limit: int = 3
) -> Any:
    recs = list(records)
    estimates = sorted(
        (r for r in recs if r["event"] == "job_estimated"), key=lambda r: float(r["t"])
    )
    if not estimates:
        return None
    first: dict[str, float] = {}
    for r in estimates:
        first.setdefault(r["job"], float(r["estimate_s"]))
    tasks = {
        r["container"] for r in recs if r["event"] == "container_allocated" and r["priority"] >= 0
    }
    starts: dict[str, float] = {}
    for r in recs:
        if r["event"] == "container_started" and r["container"] in tasks:
            starts.setdefault(r["container"], float(r["t"]))
    size: dict[str, float] = {}
    count: dict[str, int] = {}
    start_sum: dict[str, float] = {}
    seen: set[str] = set()
    for r in recs:
        c = r.get("container")
        if r["event"] != "container_finished" or r["state"] != "COMPLETE" or r["exit_status"]:
            continue
        if c in seen or c not in starts:
            continue
        seen.add(c)
        j = r["job"]
        size[j] = size.get(j, 0.0) + max(0.0, float(r["t"]) - starts[c])
        count[j] = count.get(j, 0) + 1
        start_sum[j] = start_sum.get(j, 0.0) + starts[c]
    err: list[float] = []
    signed: list[float] = []
    same = lower = higher = 0
    nwt: list[float] = []
    bins = [0] * 4
    bin_size = [0.0] * 4
    for j in results:
        s = size.get(j.job, 0.0)
        wide = j.tasks >= thin_limit
        e = first.get(j.job)
        if wide and e is not None and s > 0:
            d = (e - s) / s * 100.0
            err.append(abs(d))
            signed.append(min(d, 1000.0))
            re_, ra = _range(e), _range(s)
            same += re_ == ra
            lower += re_ > ra
            higher += re_ < ra
        if wide and count.get(j.job, 0) > 0 and s > 0:
            n = count[j.job]
            nwt.append(((start_sum[j.job] - n * j.submit_s) / n) / (s / n))
        k = 2 * wide + (s >= 1000.0)
        bins[k] += 1
        bin_size[k] += s
    n = len(err)
    m = len(nwt)
    total = sum(size.get(j.job, 0.0) for j in results)
    return {
        "thin_limit": thin_limit,
        "jobs_estimated": sum(1 for j in results if j.job in first),
        "wide_jobs": sum(1 for j in results if j.tasks >= thin_limit),
        "wide_judged": n,
        "error_pct": _dist(err),
        "signed_error_pct": _dist(signed),
        "correct_queue": same / n if n else None,
        "placed_lower": lower / n if n else None,
        "placed_higher": higher / n if n else None,
        "normalized_wait": {
            **_dist(nwt),
            "below_0.04": sum(x < 0.04 for x in nwt) / m if m else None,
            "between": sum(0.04 <= x <= 1.90 for x in nwt) / m if m else None,
            "above_1.90": sum(x > 1.90 for x in nwt) / m if m else None,
        },
        "bins": {
            name: {
                "jobs": bins[k] / len(results) if results else None,
                "size": bin_size[k] / total if total > 0 else None,
            }
            for k, name in enumerate(BINS)
        },
    }

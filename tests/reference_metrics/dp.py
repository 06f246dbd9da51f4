"""summary.json's ``dp`` section, one Python pass per record (``treadle.metrics.dp``)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tests.reference_metrics.jobs import JobResult
from tests.reference_metrics.stats import mean


def dp_section(records: Iterable[Mapping[str, Any]], results: Sequence[JobResult]) -> Any:
    recs = list(records)
    books = [r for r in recs if r["event"] == "dp_account"]
    if not books:
        return None
    rates: dict[str, list[float]] = {}
    for r in books:
        if (r.get("share") or 0) > 0:
            rates.setdefault(r["queue"], []).append(float(r["spending_rate"]))
    mean_rate = {q: sum(v) / len(v) for q, v in sorted(rates.items())}
    total = sum(mean_rate.values())
    shares = {q: v / total for q, v in mean_rate.items()} if total > 0 else {}
    jcts: dict[str, list[float]] = {}
    for j in results:
        jcts.setdefault(j.queue, [])
        if j.status == "SUCCEEDED" and j.jct_s is not None:
            jcts[j.queue].append(j.jct_s)
    means = {q: sum(v) / len(v) for q, v in jcts.items() if v}
    granted = {q: s for q, s in shares.items() if s > 0 and q in means}
    adjusted: dict[str, float] = {}
    if granted:
        top = max(granted, key=lambda q: (granted[q], q))
        adjusted = {q: means[top] * granted[top] / s for q, s in shares.items() if s > 0}
    queues: dict[str, Any] = {}
    for q in sorted(set(jcts) | {r["queue"] for r in books}):
        v = jcts.get(q, [])
        mine = [r for r in books if r["queue"] == q]
        last = max(mine, key=lambda r: float(r["t"])) if mine else None  # first on ties
        queues[q] = {
            "share": shares.get(q),
            "finished": len(v),
            "mean_jct_s": mean(v),
            "max_jct_s": max(v) if v else None,
            "ci95_jct_s": 1.96 * statistics.stdev(v) / math.sqrt(len(v)) if len(v) > 1 else None,
            "ideal_adjusted_s": adjusted.get(q),
            "distance_adjusted_s": abs(means[q] - adjusted[q])
            if q in adjusted and q in means
            else None,
            "final_budget": float(last["budget"]) if last else None,
            "charged": sum(float(r["charged"]) for r in mine) if mine else None,
        }
    ranked = sorted((s, q) for q, s in shares.items() if s > 0 and jcts.get(q))
    diff_max = diff_mean = None
    if len(ranked) >= 2:
        hi, lo = jcts[ranked[-1][1]], jcts[ranked[0][1]]
        diff_max = max(lo) / max(hi) if max(hi) > 0 else None
        diff_mean = (sum(lo) / len(lo)) / (sum(hi) / len(hi)) if sum(hi) > 0 else None
    preempted = {r["container"] for r in recs if r["event"] == "container_preempted"}
    preempted |= {
        r["container"]
        for r in recs
        if r["event"] == "container_finished" and r.get("state") == "PREEMPTED"
    }
    price: dict[float, float] = {}
    for r in books:
        price.setdefault(float(r["t"]), float(r["price"]))
    return {
        "differentiation_max": diff_max,
        "differentiation_mean": diff_mean,
        "preemptions": len(preempted),
        "intervals": len(price),
        "mean_price": mean(list(price.values())) if price else None,
        "queues": queues,
    }

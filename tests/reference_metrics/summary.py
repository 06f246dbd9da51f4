"""A run's summary (summary.json) and ``analyze``: summary, jobs and utilization at once.

JCT, waiting time and slowdown statistics are over finished (``SUCCEEDED``) jobs only.
Makespan is the horizon's length when some job has ended, else ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.reference_metrics.dp import dp_section
from tests.reference_metrics.estimation import estimation_section
from tests.reference_metrics.fairness import JAIN_WINDOW_S, jain_from
from tests.reference_metrics.jobs import JobResult, job_results_from
from tests.reference_metrics.scan import (
    FAILED,
    KILLED,
    SUCCEEDED,
    UNFINISHED,
    LogFacts,
    RecordLike,
    scan,
)
from tests.reference_metrics.stats import mean, pct, rounded, worst_fraction_mean
from tests.reference_metrics.utilization import mean_utilization, utilization_series_from


def _uwfq_figures(jct: list[float], per_user: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The JCT rank groups and the best and worst user, job by job."""
    a = sorted(jct)
    n = len(a)
    cut80, cut95 = math.floor(0.8 * n), math.floor(0.95 * n)
    groups = {"0-80%": a[:cut80], "80-95%": a[cut80:cut95], "95-100%": a[cut95:]}
    best = worst = None
    for user in sorted(per_user):
        m = per_user[user]["mean_jct_s"]
        if m is None:
            continue
        if best is None or m < best[1]:
            best = (user, m)
        if worst is None or m > worst[1]:
            worst = (user, m)
    return {
        "jct_groups_s": {k: mean(v) for k, v in groups.items()},
        "best_user": None if best is None else {"user": best[0], "mean_jct_s": best[1]},
        "worst_user": None if worst is None else {"user": worst[0], "mean_jct_s": worst[1]},
    }


def summary_from(
    log: LogFacts,
    results: Sequence[JobResult],
    policy: str | None,
    user_weights: Mapping[str, float] | None,
    window_s: float,
) -> dict[str, Any]:
    """``summarize`` of a scanned log and its job results."""
    run = log.run or {}
    done = [r for r in results if r.status == SUCCEEDED]
    jct = [r.jct_s for r in done if r.jct_s is not None]
    slow = [r.slowdown for r in done if r.slowdown is not None]
    wait = [r.wait_s for r in done if r.wait_s is not None]
    ends = [r.finish_s for r in results if r.finish_s is not None]
    makespan = max(ends) - min(r.submit_s for r in results) if ends else None

    per_user: dict[str, dict[str, Any]] = {}
    by_user: dict[str, list[JobResult]] = {}
    for r in results:
        by_user.setdefault(r.user, []).append(r)
    for user in sorted(by_user):
        rs = by_user[user]
        ok = [r for r in rs if r.status == SUCCEEDED]
        per_user[user] = {
            "jobs": len(rs),
            "finished": len(ok),
            "mean_jct_s": mean([r.jct_s for r in ok if r.jct_s is not None]),
            "mean_slowdown": mean([r.slowdown for r in ok if r.slowdown is not None]),
            "mean_wait_s": mean([r.wait_s for r in ok if r.wait_s is not None]),
        }

    users = jain_from(log, "user", window_s, user_weights)
    jobs = jain_from(log, "job", window_s, None)
    statuses = [r.status for r in results]
    summary: dict[str, Any] = {
        "policy": policy if policy is not None else run.get("policy"),
        "mode": run.get("mode"),
        "workload": run.get("workload"),
        "seed": run.get("seed"),
        "dilation": run.get("dilation"),
        "heartbeat_s": run.get("heartbeat_s"),
        "nodes": run.get("nodes"),
        "capacity": {k: log.capacity[k] for k in sorted(log.capacity)},
        "jobs": len(results),
        "finished": statuses.count(SUCCEEDED),
        "failed": statuses.count(FAILED),
        "killed": statuses.count(KILLED),
        "unfinished": statuses.count(UNFINISHED),
        "makespan_s": makespan,
        "mean_jct_s": mean(jct),
        "p50_jct_s": pct(jct, 50),
        "p80_jct_s": pct(jct, 80),
        "p95_jct_s": pct(jct, 95),
        "worst10_jct_s": worst_fraction_mean(jct, 0.1),
        "mean_slowdown": mean(slow),
        "p50_slowdown": pct(slow, 50),
        "p95_slowdown": pct(slow, 95),
        "mean_wait_s": mean(wait),
        "p95_wait_s": pct(wait, 95),
        "utilization": mean_utilization(log),
        "jain_window_s": window_s,
        "jain_users_mean": users["mean"],
        "jain_users_min": users["min"],
        "jain_users_max": users["max"],
        "jain_users_windows": users["windows"],
        "jain_jobs_mean": jobs["mean"],
        "jain_jobs_min": jobs["min"],
        "jain_jobs_max": jobs["max"],
        "jain_jobs_windows": jobs["windows"],
        "per_user": per_user,
        **_uwfq_figures(jct, per_user),
    }
    out: dict[str, Any] = rounded(summary)
    return out


def summarize(
    records: Iterable[RecordLike],
    *,
    policy: str | None = None,
    user_weights: Mapping[str, float] | None = None,
    window_s: float = JAIN_WINDOW_S,
) -> dict[str, Any]:
    """The content of summary.json (floats rounded to 6 decimals, None when undefined).

    ``policy`` defaults to ``run_started.policy``; ``user_weights`` weigh the per-user
    Jain's index (the log does not carry them).
    """
    records = list(records)
    log = scan(records)
    results = job_results_from(log)
    return _with_dp(records, results, summary_from(log, results, policy, user_weights, window_s))


def _with_dp(
    records: list[RecordLike], results: list[JobResult], summary: dict[str, Any]
) -> dict[str, Any]:
    dp = dp_section(records, results)
    if dp is not None:
        summary["dp"] = rounded(dp)
    est = estimation_section(records, results)
    if est is not None:
        summary["estimation"] = rounded(est)
    return summary


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """Everything the comparison report needs from one run (see ``analyze``)."""

    summary: dict[str, Any]
    jobs: list[JobResult]
    utilization: dict[str, list[tuple[float, float]]]


def analyze(
    records: Iterable[RecordLike],
    *,
    policy: str | None = None,
    user_weights: Mapping[str, float] | None = None,
) -> RunMetrics:
    """summarize + job_results + utilization_series in one pass over the records."""
    records = list(records)
    log = scan(records)
    results = job_results_from(log)
    summary = summary_from(log, results, policy, user_weights, JAIN_WINDOW_S)
    summary = _with_dp(records, results, summary)
    return RunMetrics(summary, results, utilization_series_from(log))

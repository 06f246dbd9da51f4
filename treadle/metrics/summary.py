"""A run's summary (summary.json) and ``analyze``: summary, jobs and utilization at once.

JCT, waiting time and slowdown statistics are over finished (``SUCCEEDED``) jobs only.
Makespan is the horizon's length when some job has ended, else ``None``. ``jct_groups_s``
are the JCT rank groups and ``best_user`` / ``worst_user`` the users of lowest and highest
mean JCT (``treadle.metrics.deadlines``). A run with Dynamic Priority's ``dp_account``
records also gets a ``dp`` section (``treadle.metrics.dp``), and one with ``job_estimated``
records (a policy that sizes jobs: gs) an ``estimation`` section
(``treadle.metrics.estimation``), and one in which containers were preempted a
``preemption`` section (``treadle.metrics.preemption``); other runs' summaries have none
of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from treadle.metrics.deadlines import best_and_worst, rank_group_dict
from treadle.metrics.dp import COLUMNS as DP_COLUMNS, DP_ACCOUNT, dp_summary
from treadle.metrics.estimation import (
    COLUMNS as ESTIMATE_COLUMNS,
    JOB_ESTIMATED,
    estimation_summary,
)
from treadle.metrics.fairness import JAIN_WINDOW_S, JainSums
from treadle.metrics.jobs import JobColumns, JobResult, job_columns, job_results_from
from treadle.metrics.preemption import CONTAINER_PREEMPTED, preemption_summary
from treadle.metrics.scan import (
    FAILED,
    KILLED,
    SUCCEEDED,
    UNFINISHED,
    EventSource,
    LogFacts,
    scan,
    to_table,
)
from treadle.metrics.stats import mean, pct, rounded, worst_fraction_mean
from treadle.metrics.utilization import LazySeries, MeanUtilization


def summary_from(
    log: LogFacts,
    cols: JobColumns,
    policy: str | None,
    user_weights: Mapping[str, float] | None,
    window_s: float,
) -> dict[str, Any]:
    """``summarize`` of a scanned log and its job columns."""
    run = log.run or {}
    done = cols.status == SUCCEEDED
    jct = cols.jct[done & ~np.isnan(cols.jct)]
    slow_ok = done & np.isfinite(log.end) & ~log.alone_none & (log.alone != 0)
    slow = cols.slowdown[slow_ok]
    wait = cols.wait[done & ~np.isnan(log.start)]
    ended = np.isfinite(log.end)
    makespan = float(log.end[ended].max() - log.submit.min()) if ended.any() else None

    per_user: dict[str, dict[str, Any]] = {}
    users = log.user.astype(str)
    if len(users):
        order = np.argsort(users, kind="stable")
        u = users[order]
        starts = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])
        for lo, hi in zip(starts.tolist(), np.r_[starts[1:], len(u)].tolist(), strict=True):
            rows = order[lo:hi]
            ok = rows[done[rows]]
            per_user[str(u[lo])] = {
                "jobs": hi - lo,
                "finished": len(ok),
                "mean_jct_s": mean(cols.jct[ok][~np.isnan(cols.jct[ok])]),
                "mean_slowdown": mean(cols.slowdown[ok[slow_ok[ok]]]),
                "mean_wait_s": mean(cols.wait[ok][~np.isnan(log.start[ok])]),
            }

    users_jain, jobs_jain, utilization = _span_metrics(log, window_s, user_weights)
    statuses = cols.status
    summary: dict[str, Any] = {
        "policy": policy if policy is not None else run.get("policy"),
        "mode": run.get("mode"),
        "workload": run.get("workload"),
        "seed": run.get("seed"),
        "dilation": run.get("dilation"),
        "heartbeat_s": run.get("heartbeat_s"),
        "nodes": run.get("nodes"),
        "capacity": {k: log.capacity[k] for k in sorted(log.capacity)},
        "jobs": len(statuses),
        "finished": int((statuses == SUCCEEDED).sum()),
        "failed": int((statuses == FAILED).sum()),
        "killed": int((statuses == KILLED).sum()),
        "unfinished": int((statuses == UNFINISHED).sum()),
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
        "utilization": utilization,
        "jain_window_s": window_s,
        "jain_users_mean": users_jain["mean"],
        "jain_users_min": users_jain["min"],
        "jain_users_max": users_jain["max"],
        "jain_users_windows": users_jain["windows"],
        "jain_jobs_mean": jobs_jain["mean"],
        "jain_jobs_min": jobs_jain["min"],
        "jain_jobs_max": jobs_jain["max"],
        "jain_jobs_windows": jobs_jain["windows"],
        "per_user": per_user,
        "jct_groups_s": rank_group_dict(jct),
        **best_and_worst({u: v["mean_jct_s"] for u, v in per_user.items()}),
    }
    out: dict[str, Any] = rounded(summary)
    return out


def _span_metrics(
    log: LogFacts, window_s: float, user_weights: Mapping[str, float] | None
) -> tuple[dict[str, float | int], dict[str, float | int], dict[str, float | None]]:
    """Jain's index per user and per job, and the mean utilization, from one pass over
    the spans (an event file's are swept once, not once per metric)."""
    users = JainSums(log, "user", window_s, user_weights)
    jobs = JainSums(log, "job", window_s, None)
    mean = MeanUtilization(log)
    if users.grid is not None:  # else every one of them has nothing to add
        for chunk in log.spans.chunks():
            users.add(chunk)
            jobs.add(chunk)
            mean.add(chunk)
    return users.result(), jobs.result(), mean.result()


def summarize(
    records: EventSource,
    *,
    policy: str | None = None,
    user_weights: Mapping[str, float] | None = None,
    window_s: float = JAIN_WINDOW_S,
) -> dict[str, Any]:
    """The content of summary.json (floats rounded to 6 decimals, None when undefined).

    ``records``: an event table (``treadle.event_columns``) or records. ``policy``
    defaults to ``run_started.policy``; ``user_weights`` weigh the per-user Jain's index
    (the log does not carry them).
    """
    records = _reusable(records)
    log = scan(records)
    cols = job_columns(log)
    return _with_dp(records, log, cols, summary_from(log, cols, policy, user_weights, window_s))


def _reusable(records: EventSource) -> EventSource:
    """``records`` in a form that can be read twice (an iterator is read once)."""
    if isinstance(records, pa.Table | list) or hasattr(records, "scan_facts"):
        return records
    return list(records)


def _with_dp(
    records: EventSource, log: LogFacts, cols: JobColumns, summary: dict[str, Any]
) -> dict[str, Any]:
    """``summary`` with the ``dp`` section when the log has ``dp_account`` records, the
    ``estimation`` section when it has ``job_estimated`` ones and the ``preemption``
    section when it has ``container_preempted`` ones."""
    wanted = {DP_ACCOUNT, JOB_ESTIMATED, CONTAINER_PREEMPTED}
    if hasattr(records, "scan_facts"):  # an event file read by row group
        source: Any = records
        if not source.kinds() & wanted:
            return summary
        records = source.table(DP_COLUMNS + ESTIMATE_COLUMNS)
    elif not isinstance(records, pa.Table):
        kinds = {r.get("event") for r in records}
        if not kinds & wanted:
            return summary
        records = to_table(records)[0]
    dp = dp_summary(records, log, cols)
    if dp is not None:
        summary["dp"] = rounded(dp)
    est = estimation_summary(records, log)
    if est is not None:
        summary["estimation"] = rounded(est)
    pre = preemption_summary(records)
    if pre is not None:
        summary["preemption"] = rounded(pre)
    return summary


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """Everything the comparison report needs from one run (see ``analyze``)."""

    summary: dict[str, Any]
    jobs: list[JobResult]
    #: Per resource, the step series (``utilization_series``); ``analyze``'s is computed
    #: when first read (``LazySeries``).
    utilization: Mapping[str, list[tuple[float, float]]]


def analyze(
    records: EventSource,
    *,
    policy: str | None = None,
    user_weights: Mapping[str, float] | None = None,
) -> RunMetrics:
    """summarize + job_results + utilization_series of one event table (or records)."""
    records = _reusable(records)
    log = scan(records)
    cols = job_columns(log)
    summary = _with_dp(
        records, log, cols, summary_from(log, cols, policy, user_weights, JAIN_WINDOW_S)
    )
    return RunMetrics(summary, job_results_from(log, cols), LazySeries(log))


#: The status of a job a live replay never submitted (its timeout came first).
NOT_SUBMITTED = "NOT_SUBMITTED"


def with_unsubmitted(
    run: RunMetrics, jobs: Sequence[tuple[str, str, str, float, int]], status: str = NOT_SUBMITTED
) -> RunMetrics:
    """``run`` with these jobs (name, user, queue, due submission time, tasks), which were
    never submitted, listed last with status ``NOT_SUBMITTED`` and no times, and counted
    in the summary's ``jobs`` and ``not_submitted``: every job of the workload appears.
    With ``status`` UNFINISHED: jobs submitted of which no record was had (a lost RM's),
    counted in ``unfinished``."""
    if not jobs:
        return run
    nothing = (None, None, None, None, None)  # start, finish, JCT, wait, slowdown
    extra = [
        JobResult("", n, user, queue, due, *nothing, tasks, status, None)
        for n, user, queue, due, tasks in jobs
    ]
    summary = dict(run.summary)
    summary["jobs"] = int(summary["jobs"]) + len(extra)
    key = "unfinished" if status == UNFINISHED else "not_submitted"
    summary[key] = int(summary.get(key) or 0) + len(extra)
    return RunMetrics(summary, [*run.jobs, *extra], run.utilization)

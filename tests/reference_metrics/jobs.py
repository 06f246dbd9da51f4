"""Per-job results (JCT, waiting time, slowdown) and the factor of improvement between runs.

A job is *finished* when its ``job_finished`` status is ``SUCCEEDED``; ``FAILED`` and
``KILLED`` jobs are counted apart and ``UNFINISHED`` jobs have no ``job_finished``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tests.reference_metrics.scan import SUCCEEDED, UNFINISHED, LogFacts, RecordLike, scan
from tests.reference_metrics.stats import mean, pct, round6


@dataclass(frozen=True, slots=True)
class JobResult:
    """One job's outcome. Times are emulated seconds; derived values are rounded to 1 us."""

    job: str
    name: str
    user: str
    queue: str
    submit_s: float
    start_s: float | None
    finish_s: float | None
    jct_s: float | None
    wait_s: float | None
    slowdown: float | None
    tasks: int
    status: str
    alone_jct_s: float | None

    @property
    def finished(self) -> bool:
        return self.status == SUCCEEDED


def job_results_from(log: LogFacts) -> list[JobResult]:
    """``job_results`` of a scanned log."""
    out: list[JobResult] = []
    for j in log.jobs.values():
        if j.submit is None:
            continue  # the log lost its submission: nothing to measure against
        start = j.started if j.started is not None else j.first_alloc
        jct = wait = slowdown = None
        if j.end is not None:
            jct = round6(j.end - j.submit)
            if j.alone:
                slowdown = round6((j.end - j.submit) / j.alone)
        if start is not None:
            wait = round6(start - j.submit)
        out.append(
            JobResult(
                job=j.job,
                name=j.name,
                user=j.user,
                queue=j.queue,
                submit_s=j.submit,
                start_s=start,
                finish_s=j.end,
                jct_s=jct,
                wait_s=wait,
                slowdown=slowdown,
                tasks=j.tasks,
                status=j.status if j.status is not None else UNFINISHED,
                alone_jct_s=j.alone,
            )
        )
    out.sort(key=lambda r: (r.submit_s, r.job))
    return out


def job_results(records: Iterable[RecordLike]) -> list[JobResult]:
    """One JobResult per submitted job, sorted by (submit_s, job)."""
    return job_results_from(scan(records))


def factor_of_improvement(
    baseline: Sequence[JobResult], other: Sequence[JobResult]
) -> dict[str, Any]:
    """Per job, baseline JCT / other JCT, joined on the job name.

    Only jobs that succeeded in both runs (and took time in ``other``) are compared. A
    name that repeats is paired by order of submission and keyed ``name#2``, ``name#3``...
    Returns {"per_job", "jobs", "mean", "p50", "p95", "min", "max", "cdf"} where ``cdf``
    is [(f, fraction of jobs with factor <= f), ...] in increasing f.
    """

    def keyed(results: Sequence[JobResult]) -> dict[str, float]:
        seen: dict[str, int] = {}
        out: dict[str, float] = {}
        for r in sorted(results, key=lambda r: (r.submit_s, r.job)):
            n = seen[r.name] = seen.get(r.name, 0) + 1
            if r.status == SUCCEEDED and r.jct_s is not None:
                out[r.name if n == 1 else f"{r.name}#{n}"] = r.jct_s
        return out

    base, mine = keyed(baseline), keyed(other)
    per_job = {k: base[k] / mine[k] for k in sorted(base.keys() & mine.keys()) if mine[k] > 0}
    fs = sorted(per_job.values())
    n = len(fs)
    return {
        "per_job": per_job,
        "jobs": n,
        "mean": mean(fs),
        "p50": pct(fs, 50),
        "p95": pct(fs, 95),
        "min": fs[0] if fs else None,
        "max": fs[-1] if fs else None,
        "cdf": [(f, (i + 1) / n) for i, f in enumerate(fs)],
    }

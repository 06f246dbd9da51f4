"""Per-job results (JCT, waiting time, slowdown) and the factor of improvement between runs.

A job is *finished* when its ``job_finished`` status is ``SUCCEEDED``; ``FAILED`` and
``KILLED`` jobs are counted apart and ``UNFINISHED`` jobs have no ``job_finished``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from treadle.metrics.scan import SUCCEEDED, EventSource, FloatArray, LogFacts, ObjArray, scan
from treadle.metrics.stats import mean, pct, round_array
from treadle.yarnids import app_sort_key


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


def _optional(values: FloatArray, none: npt.NDArray[np.bool_]) -> list[float | None]:
    return [None if n else v for v, n in zip(values.tolist(), none.tolist(), strict=True)]


@dataclass(frozen=True, slots=True)
class JobColumns:
    """Per-job results as arrays (jobs in (submit, job) order; NaN where ``JobResult``
    has None, except ``alone`` whose None is ``alone_none``)."""

    jct: FloatArray
    wait: FloatArray
    slowdown: FloatArray
    finish: FloatArray
    status: ObjArray


def job_columns(log: LogFacts) -> JobColumns:
    """JCT, waiting time and slowdown of every job, rounded to 1 us."""
    dur = log.end - log.submit
    jct = round_array(dur)
    has_alone = ~log.alone_none & (log.alone != 0)  # truthy, as NaN is
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(has_alone, dur / np.where(has_alone, log.alone, 1.0), np.nan)
    slowdown = np.where(has_alone & np.isfinite(log.end), round_array(ratio), np.nan)
    wait = round_array(log.start - log.submit)
    return JobColumns(jct, wait, slowdown, log.end, log.status)


def job_results_from(log: LogFacts, cols: JobColumns | None = None) -> list[JobResult]:
    """``job_results`` of a scanned log."""
    c = cols if cols is not None else job_columns(log)
    no_end = ~np.isfinite(log.end)
    no_start = np.isnan(log.start)
    no_slowdown = no_end | log.alone_none | (log.alone == 0)
    return list(
        map(
            JobResult,
            log.job.tolist(),
            [str(x) for x in log.name.tolist()],
            [str(x) for x in log.user.tolist()],
            [str(x) for x in log.queue.tolist()],
            log.submit.tolist(),
            _optional(log.start, no_start),
            _optional(log.end, no_end),
            _optional(c.jct, no_end),
            _optional(c.wait, no_start),
            _optional(c.slowdown, no_slowdown),
            log.tasks.tolist(),
            log.status.tolist(),
            _optional(log.alone, log.alone_none),
        )
    )


def job_results(records: EventSource) -> list[JobResult]:
    """One JobResult per submitted job, sorted by (submit_s, job id: by its number)."""
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
        for r in sorted(results, key=lambda r: (r.submit_s, app_sort_key(r.job))):
            n = seen[r.name] = seen.get(r.name, 0) + 1
            if r.status == SUCCEEDED and r.jct_s is not None:
                out[r.name if n == 1 else f"{r.name}#{n}"] = r.jct_s
        return out

    base, mine = keyed(baseline), keyed(other)
    keys = sorted(base.keys() & mine.keys())
    b = np.array([base[k] for k in keys], dtype=float)
    m = np.array([mine[k] for k in keys], dtype=float)
    ok = m > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = b / np.where(ok, m, 1.0)
    kept = [k for k, good in zip(keys, ok.tolist(), strict=True) if good]
    values = ratio[ok]
    per_job = dict(zip(kept, values.tolist(), strict=True))
    fs = np.sort(values)
    n = len(fs)
    return {
        "per_job": per_job,
        "jobs": n,
        "mean": mean(fs),
        "p50": pct(fs, 50),
        "p95": pct(fs, 95),
        "min": float(fs[0]) if n else None,
        "max": float(fs[-1]) if n else None,
        "cdf": list(zip(fs.tolist(), (np.arange(1, n + 1) / n).tolist(), strict=True)),
    }

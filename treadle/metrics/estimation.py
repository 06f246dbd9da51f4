"""Size-estimation metrics (the SLearn paper's, spec slearn.md A2), numpy over the log's
table: how well a policy's estimator sized jobs (its ``job_estimated`` records) and where
that put them.

Per job (jobs with a submission):

* **Width** ``S``: the tasks of its ``job_submitted`` record; **wide** when ``S >=
  thin_limit`` (default 3, the paper's), thin otherwise.
* **Actual size** ``R``: the task-seconds its successful task containers ran (started ->
  ``COMPLETE`` with exit 0; containers at priority < 0, a managed AM's, left out).
* **Estimate** ``R̂``: the ``estimate_s`` of its first ``job_estimated`` record.
* **Estimation error** (Fig. 3, Table 6): ``|R̂ - R| / R x 100``; **signed**
  ``(R̂ - R) / R x 100`` capped at +1000 (Fig. 11). Over wide jobs with an estimate and
  ``R > 0``: P50, P90 and mean.
* **Correct queue** (Table 7): the fraction of those jobs whose estimate falls in the
  runtime range of their actual size (ranges ``[0, q0_hi_s)``, ``[q0_hi_s, q0_hi_s x
  growth)``, ..., the ``ranges``-th open-ended: gs's defaults); ``placed_lower``: in a
  larger range (an overestimate, a lower priority), ``placed_higher``: a smaller one.
* **Normalized task waiting time** (Fig. 7): per job, the mean over its successful task
  containers of (start - job submission), over the job's mean task length (``R`` / their
  count); over wide jobs: P50, P90, mean and the shares below 0.04, between 0.04 and 1.90
  and above 1.90 (the paper's bands).
* **Bins** (Table 8): thin/wide x ``R`` < / >= ``size_split_s`` (1000 s): each bin's
  share of the jobs and of the total actual size.

Against a named baseline (two runs of one workload, from their per-job results, as
``compare``'s ``--baseline``: ``against_baseline``): the mean-JCT ratio (baseline mean JCT
/ the other's, over jobs succeeded in both), the per-job speedup (``factor_of_improvement``:
its P50 and CDF) and, given per-job widths and sizes, the mean-JCT ratio in each bin.

``estimation_summary`` is summary.json's ``estimation`` section, only for logs with
``job_estimated`` records (other runs' summaries are unchanged).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from treadle import events as ev
from treadle.metrics.jobs import JobResult, factor_of_improvement
from treadle.metrics.scan import FloatArray, IntArray, LogFacts, to_table
from treadle.metrics.stats import mean, pct
from treadle.yarnids import app_sort_key

JOB_ESTIMATED = ev.JOB_ESTIMATED
#: The columns these metrics read besides those of ``treadle.metrics.scan``.
COLUMNS = ("estimate_s", "position", "ratio", "pilots", "priority", "state", "exit_status")
THIN_LIMIT = 3
Q0_HI_S = 1000.0
GROWTH = 10.0
RANGES = 9
SIZE_SPLIT_S = 1000.0
SIGNED_CAP_PCT = 1000.0
#: Fig. 7's bands of normalized waiting time.
NWT_LOW, NWT_HIGH = 0.04, 1.90
BINS = ("thin_small", "thin_large", "wide_small", "wide_large")


def _kinds(table: pa.Table) -> pa.ChunkedArray:
    kind = table.column("event")
    return kind.cast(kind.type.value_type) if pa.types.is_dictionary(kind.type) else kind


def _rows(table: pa.Table, event: str) -> IntArray:
    hit = pc.equal(_kinds(table), event).fill_null(False)
    return np.flatnonzero(hit.to_numpy(zero_copy_only=False))


def _col(table: pa.Table, name: str, rows: IntArray, fill: Any) -> Any:
    if name not in table.schema.names:
        return np.full(len(rows), fill)
    col = table.column(name).take(pa.array(rows, type=pa.int64()))
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    return np.asarray(col.fill_null(fill).to_numpy(zero_copy_only=False))


def has_estimates(table: pa.Table) -> bool:
    """Whether the log holds ``job_estimated`` records (a run of a sizing policy)."""
    return table.num_rows > 0 and len(_rows(table, JOB_ESTIMATED)) > 0


def runtime_range(size_s: FloatArray, q0_hi_s: float, growth: float, ranges: int) -> IntArray:
    """Each size's range ``r``: ``q0_hi_s x growth^(r-1) <= size < q0_hi_s x growth^r``
    (range 0 from 0; the last open-ended). Multiplies as ``rm.policy.toolkit.multiqueue`` does."""
    out = np.zeros(len(size_s), dtype=np.int64)
    hi = q0_hi_s
    for _ in range(ranges - 1):
        out += size_s >= hi
        hi *= growth
    return out


def job_sizes(table: pa.Table, log: LogFacts) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per job of ``log`` (its order): the actual size, the count of successful task
    containers and the sum of their starts (for the waiting time)."""
    nj = len(log.job)
    index = {j: i for i, j in enumerate(log.job.tolist())}
    t = np.asarray(table.column("t").to_numpy(), dtype=float)
    # a task container: allocated at priority >= 0
    alloc = _rows(table, ev.CONTAINER_ALLOCATED)
    task_cids = set(
        _col(table, "container", alloc[_col(table, "priority", alloc, -1) >= 0], "").tolist()
    )
    starts: dict[str, float] = {}
    srows = _rows(table, ev.CONTAINER_STARTED)
    for c, ts in zip(_col(table, "container", srows, "").tolist(), t[srows].tolist(), strict=True):
        if c in task_cids and c not in starts:
            starts[c] = ts
    size = np.zeros(nj)
    count = np.zeros(nj)
    start_sum = np.zeros(nj)
    frows = _rows(table, ev.CONTAINER_FINISHED)
    ok = (_col(table, "state", frows, "") == "COMPLETE") & (
        _col(table, "exit_status", frows, -1) == 0
    )
    frows = frows[ok]
    seen: set[str] = set()
    jobs = _col(table, "job", frows, "").tolist()
    cids = _col(table, "container", frows, "").tolist()
    for j, c, end in zip(jobs, cids, t[frows].tolist(), strict=True):
        i = index.get(j)
        if i is None or c in seen or c not in starts:
            continue
        seen.add(c)
        s = starts[c]
        size[i] += max(0.0, end - s)
        count[i] += 1
        start_sum[i] += s
    return size, count, start_sum


def first_estimates(table: pa.Table, log: LogFacts) -> FloatArray:
    """Per job of ``log``: the ``estimate_s`` of its first ``job_estimated`` (NaN: none)."""
    out = np.full(len(log.job), np.nan)
    index = {j: i for i, j in enumerate(log.job.tolist())}
    rows = _rows(table, JOB_ESTIMATED)
    t = np.asarray(table.column("t").to_numpy(), dtype=float)[rows]
    order = np.argsort(t, kind="stable")
    jobs = _col(table, "job", rows, "")[order].tolist()
    est = _col(table, "estimate_s", rows, np.nan).astype(float)[order].tolist()
    for j, e in zip(jobs, est, strict=True):
        i = index.get(j)
        if i is not None and np.isnan(out[i]):
            out[i] = e
    return out


def _dist(values: FloatArray) -> dict[str, float | None]:
    return {"p50": pct(values, 50), "p90": pct(values, 90), "mean": mean(values)}


def estimation_errors(estimate: FloatArray, actual: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(absolute, signed) percentage errors of estimates against actual sizes (> 0); the
    signed one capped at +``SIGNED_CAP_PCT``."""
    signed = (estimate - actual) / actual * 100.0
    return np.abs(signed), np.minimum(signed, SIGNED_CAP_PCT)


def bin_of(width: IntArray, size: FloatArray, thin_limit: int, split_s: float) -> IntArray:
    """Each job's index in ``BINS``: 2 x wide + large."""
    return 2 * (width >= thin_limit).astype(np.int64) + (size >= split_s).astype(np.int64)


def estimation_summary(
    source: pa.Table | Sequence[Mapping[str, Any]],
    log: LogFacts,
    *,
    thin_limit: int = THIN_LIMIT,
    q0_hi_s: float = Q0_HI_S,
    growth: float = GROWTH,
    ranges: int = RANGES,
    size_split_s: float = SIZE_SPLIT_S,
) -> dict[str, Any] | None:
    """summary.json's ``estimation`` section (None without ``job_estimated`` records)."""
    table = source if isinstance(source, pa.Table) else to_table(source)[0]
    if not has_estimates(table):
        return None
    size, count, start_sum = job_sizes(table, log)
    est = first_estimates(table, log)
    width = log.tasks
    wide = width >= thin_limit
    judged = wide & ~np.isnan(est) & (size > 0)
    err, signed = estimation_errors(est[judged], size[judged])
    r_est = runtime_range(est[judged], q0_hi_s, growth, ranges)
    r_act = runtime_range(size[judged], q0_hi_s, growth, ranges)
    n = int(judged.sum())

    def share(m: Any) -> float | None:
        return float(np.count_nonzero(m)) / n if n else None

    waited = wide & (count > 0) & (size > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        nwt = ((start_sum - count * log.submit) / count) / (size / count)
    nwt_w = nwt[waited]
    m = len(nwt_w)
    bins = bin_of(width, size, thin_limit, size_split_s)
    total = float(np.cumsum(size)[-1]) if len(size) else 0.0
    njobs = len(size)
    return {
        "thin_limit": thin_limit,
        "jobs_estimated": int(np.count_nonzero(~np.isnan(est))),
        "wide_jobs": int(np.count_nonzero(wide)),
        "wide_judged": n,
        "error_pct": _dist(err),
        "signed_error_pct": _dist(signed),
        "correct_queue": share(r_est == r_act),
        "placed_lower": share(r_est > r_act),
        "placed_higher": share(r_est < r_act),
        "normalized_wait": {
            **_dist(nwt_w),
            "below_0.04": float(np.count_nonzero(nwt_w < NWT_LOW)) / m if m else None,
            "between": float(np.count_nonzero((nwt_w >= NWT_LOW) & (nwt_w <= NWT_HIGH))) / m
            if m
            else None,
            "above_1.90": float(np.count_nonzero(nwt_w > NWT_HIGH)) / m if m else None,
        },
        "bins": {
            name: {
                "jobs": float(np.count_nonzero(bins == k)) / njobs if njobs else None,
                "size": float(np.cumsum(size[bins == k])[-1]) / total
                if total > 0 and np.any(bins == k)
                else (0.0 if total > 0 else None),
            }
            for k, name in enumerate(BINS)
        },
    }


def per_job_sizes(
    source: pa.Table | Sequence[Mapping[str, Any]], log: LogFacts
) -> dict[str, float]:
    """Each job's actual size by name (the key ``factor_of_improvement`` pairs jobs on;
    a repeated name keyed ``name#2``...)."""
    table = source if isinstance(source, pa.Table) else to_table(source)[0]
    size, _, _ = job_sizes(table, log)
    out: dict[str, float] = {}
    seen: dict[str, int] = {}
    for name, s in zip(log.name.tolist(), size.tolist(), strict=True):
        k = seen[str(name)] = seen.get(str(name), 0) + 1
        out[str(name) if k == 1 else f"{name}#{k}"] = s
    return out


def mean_jct_ratio(baseline: Sequence[JobResult], other: Sequence[JobResult]) -> float | None:
    """Baseline mean JCT / the other's, over jobs (by name) succeeded in both."""
    foi = factor_of_improvement(baseline, other)
    keys = set(foi["per_job"])
    b, o = _jcts(baseline, keys), _jcts(other, keys)
    mb, mo = mean(np.asarray(list(b.values()))), mean(np.asarray(list(o.values())))
    return mb / mo if mb is not None and mo else None


def _jcts(results: Sequence[JobResult], keys: set[str]) -> dict[str, float]:
    seen: dict[str, int] = {}
    out: dict[str, float] = {}
    for r in sorted(results, key=lambda r: (r.submit_s, app_sort_key(r.job))):
        n = seen[r.name] = seen.get(r.name, 0) + 1
        k = r.name if n == 1 else f"{r.name}#{n}"
        if k in keys and r.jct_s is not None:
            out[k] = r.jct_s
    return out


def against_baseline(
    baseline: Sequence[JobResult],
    other: Sequence[JobResult],
    sizes: Mapping[str, float] | None = None,
    *,
    thin_limit: int = THIN_LIMIT,
    size_split_s: float = SIZE_SPLIT_S,
) -> dict[str, Any]:
    """``other`` against ``baseline``: ``mean_jct_ratio``, the per-job speedup (``p50``,
    ``cdf``, ``jobs``) and, with ``sizes`` (``per_job_sizes`` of either run), the
    mean-JCT ratio of each bin (widths from the baseline's results)."""
    foi = factor_of_improvement(baseline, other)
    out: dict[str, Any] = {
        "mean_jct_ratio": mean_jct_ratio(baseline, other),
        "jobs": foi["jobs"],
        "speedup_p50": foi["p50"],
        "speedup_cdf": foi["cdf"],
    }
    if sizes is not None:
        keys = set(foi["per_job"])
        b, o = _jcts(baseline, keys), _jcts(other, keys)
        widths = _widths(baseline)
        per_bin: dict[str, float | None] = {}
        for k, name in enumerate(BINS):
            ks = [
                key
                for key in sorted(keys)
                if key in sizes
                and bin_of(
                    np.array([widths.get(key, 0)]),
                    np.array([sizes[key]]),
                    thin_limit,
                    size_split_s,
                )[0]
                == k
            ]
            mb = mean(np.asarray([b[x] for x in ks]))
            mo = mean(np.asarray([o[x] for x in ks]))
            per_bin[name] = mb / mo if mb is not None and mo else None
        out["bins_mean_jct_ratio"] = per_bin
    return out


def _widths(results: Sequence[JobResult]) -> dict[str, int]:
    seen: dict[str, int] = {}
    out: dict[str, int] = {}
    for r in sorted(results, key=lambda r: (r.submit_s, app_sort_key(r.job))):
        n = seen[r.name] = seen.get(r.name, 0) + 1
        out[r.name if n == 1 else f"{r.name}#{n}"] = r.tasks
    return out


__all__ = [
    "BINS",
    "COLUMNS",
    "JOB_ESTIMATED",
    "against_baseline",
    "estimation_errors",
    "estimation_summary",
    "has_estimates",
    "mean_jct_ratio",
    "per_job_sizes",
    "runtime_range",
]

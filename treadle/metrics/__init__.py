"""Metrics computed from the event log alone (see DESIGN.md, "Metrics").

Everything here is a pure function of the records, except the writers. Each part is a
module of its own:

* ``scan``: one pass over the log into per-job and per-container facts, the capacity and
  the horizon (the definitions chosen where DESIGN.md leaves room are there);
* ``jobs``: per-job results (JCT, waiting time, slowdown) and the factor of improvement;
* ``stats``: percentiles, Jain's index, means, rounding;
* ``fairness``: Jain's index over time windows, per user or per job;
* ``utilization``: the allocated fraction of each resource over time, and its mean;
* ``summary``: summary.json and ``analyze`` (summary, jobs and utilization in one pass);
* ``writers``: summary.json, jobs.csv and events.jsonl on disk.
"""

from __future__ import annotations

from treadle.metrics.fairness import JAIN_WINDOW_S, jain_over_windows
from treadle.metrics.jobs import JobResult, factor_of_improvement, job_results
from treadle.metrics.scan import FAILED, KILLED, SUCCEEDED, UNFINISHED, RecordLike
from treadle.metrics.stats import jain_index, percentile, rounded, worst_fraction_mean
from treadle.metrics.summary import RunMetrics, analyze, summarize
from treadle.metrics.utilization import utilization_series
from treadle.metrics.writers import (
    JOBS_CSV_COLUMNS,
    write_jobs_csv,
    write_json,
    write_run_outputs,
)

__all__ = [
    "FAILED",
    "JAIN_WINDOW_S",
    "JOBS_CSV_COLUMNS",
    "KILLED",
    "SUCCEEDED",
    "UNFINISHED",
    "JobResult",
    "RecordLike",
    "RunMetrics",
    "analyze",
    "factor_of_improvement",
    "jain_index",
    "jain_over_windows",
    "job_results",
    "percentile",
    "rounded",
    "summarize",
    "utilization_series",
    "worst_fraction_mean",
    "write_jobs_csv",
    "write_json",
    "write_run_outputs",
]

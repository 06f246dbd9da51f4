"""Metrics computed from the event log alone (see DESIGN.md, "Metrics").

Everything here is a pure function of the log, except the writers. The log comes as an
event table (``treadle.event_columns``: an ``events.parquet`` file read back) or as
records (turned into that table first), and every metric is array code over its columns
with numpy: the simulator's outputs are a few flat columns, and numpy's ordered
accumulations (``cumsum``, ``ufunc.at``) add numbers one after the other, so the sums run
in the very order the per-record definitions used and the results equal theirs to the
last bit (pyarrow compute has no ordered scatter-add; polars would be one more large
dependency for what numpy, already here through matplotlib and pyarrow, does). pyarrow
reads and groups the strings (dictionary encoding). Each part is a module of its own:

* ``scan``: the log's columns into per-job and per-container arrays, the capacity and
  the horizon (the definitions chosen where DESIGN.md leaves room are there);
* ``logfile``: an ``events.parquet`` file (what ``read_log`` gives of one) scanned a batch
  of rows at a time, to the same facts: the event table is never held, only per-job rows
  and a few numbers per container;
* ``jobs``: per-job results (JCT, waiting time, slowdown) and the factor of improvement;
* ``stats``: percentiles, Jain's index, means, rounding;
* ``fairness``: Jain's index over time windows, per user or per job;
* ``utilization``: the allocated fraction of each resource over time, and its mean;
* ``deadlines``: the UWFQ paper's rank groups, deadline ratios (DVR, DSR), best and
  worst user, per-user RT relative to a reference;
* ``reference``: those against a reference run, from per-job results (comparison.json);
* ``summary``: summary.json and ``analyze`` (summary, jobs and utilization in one pass);
* ``writers``: summary.json, jobs.csv, jobs.parquet and the event log on disk.
"""

from __future__ import annotations

from treadle.metrics.fairness import JAIN_WINDOW_S, jain_over_windows
from treadle.metrics.jobs import JobResult, factor_of_improvement, job_results
from treadle.metrics.reference import against_reference
from treadle.metrics.scan import FAILED, KILLED, SUCCEEDED, UNFINISHED, RecordLike
from treadle.metrics.stats import jain_index, percentile, rounded, worst_fraction_mean
from treadle.metrics.summary import RunMetrics, analyze, summarize
from treadle.metrics.utilization import utilization_series
from treadle.metrics.writers import (
    EVENT_FILES,
    EVENT_FORMATS,
    JOBS_CSV_COLUMNS,
    read_log,
    write_jobs_csv,
    write_jobs_parquet,
    write_json,
    write_run_files,
    write_run_outputs,
)

__all__ = [
    "EVENT_FILES",
    "EVENT_FORMATS",
    "FAILED",
    "JAIN_WINDOW_S",
    "JOBS_CSV_COLUMNS",
    "KILLED",
    "SUCCEEDED",
    "UNFINISHED",
    "JobResult",
    "RecordLike",
    "RunMetrics",
    "against_reference",
    "analyze",
    "factor_of_improvement",
    "jain_index",
    "jain_over_windows",
    "job_results",
    "percentile",
    "read_log",
    "rounded",
    "summarize",
    "utilization_series",
    "worst_fraction_mean",
    "write_jobs_csv",
    "write_jobs_parquet",
    "write_json",
    "write_run_files",
    "write_run_outputs",
]

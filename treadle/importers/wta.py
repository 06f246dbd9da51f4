"""The Google 2014 trace in Workflow Trace Archive form (``google-wta/``; docs: traces.md),
as the UWFQ paper's macro benchmark.

The CSV's header is ``workflow_id, ts_submit, ts_submit_seconds, task_count,
total_resources, task_id, runtime, resource_amount_requested, resource_run_time,
user_id``; a row is one task. The conversion is the authors' (spec §4.4, §5.5):

- a workflow is one job ``user_N:wf_<workflow_id>``, submitted at its first row's
  ``ts_submit_seconds`` less the earliest in the file (truncated to whole ms); users are
  ``user_N`` in order of first appearance of ``user_id``;
- a task (row) is one parallel stage of ``tasks`` (32) equal 1-vcore tasks holding
  T = ``resource_run_time`` x ``scaling`` x 0.75 / 1000 core-seconds (``scaling`` 20 as
  for the homo set, 2 for the hetero one);
- ``WtaOptions.homo_filter`` F (``HOMO_FILTER`` = 5, the authors' code; the paper's text
  says 10) drops every workflow whose summed T is >= F x the median over workflows: on
  ``macro_benchmarks_homo.csv`` it keeps the paper's 97 jobs of 207 tasks, exactly the
  authors' ``homo_macro_config.json``. The format ``wta`` (``treadle sim FILE.csv``)
  converts without a filter; ``--homo-filter 5`` on the command line (the importer
  option ``homo_filter``) or ``load_wta(path, WtaOptions(homo_filter=5))`` filters, and
  ``--wta-scaling`` (``scaling``) sets the scaling.

The cluster is the UWFQ importer's (``treadle.importers.uwfq.uwfq_cluster``). Every
malformed row is an error naming the file, the line and the column.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treadle.errors import WorkloadError
from treadle.importers.common import TraceFile, default_users
from treadle.importers.uwfq import UwfqOptions, uwfq_cluster
from treadle.model import JobSpec, StageSpec, Workload
from treadle.resources import Resources

COLUMNS = (
    "workflow_id",
    "ts_submit",
    "ts_submit_seconds",
    "task_count",
    "total_resources",
    "task_id",
    "runtime",
    "resource_amount_requested",
    "resource_run_time",
    "user_id",
)
MAX_ROWS = 1_000_000
MAX_BYTES = 512 * 1024 * 1024
HOMO_FILTER = 5.0
SCALING = 20.0


@dataclass(frozen=True)
class WtaOptions:
    scaling: float = SCALING
    homo_filter: float | None = None
    """Drop workflows of summed T >= this x the median (None: keep every workflow)."""
    uwfq: UwfqOptions = field(default_factory=UwfqOptions)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.scaling) and self.scaling > 0):
            raise ValueError(f"scaling must be > 0, got {self.scaling}")
        if self.homo_filter is not None and not self.homo_filter > 0:
            raise ValueError(f"homo_filter must be > 0, got {self.homo_filter}")


def sniff(trace: TraceFile) -> bool:
    return trace.text[:200].lstrip("\ufeff").startswith("workflow_id,ts_submit")


def load_trace(trace: TraceFile, nodes_file: str | None) -> Workload:
    return _load(trace, nodes_file, WtaOptions())


#: The importer options ``load_trace_with`` takes (``WtaOptions``' fields).
OPTIONS = ("homo_filter", "scaling")


def load_trace_with(
    trace: TraceFile, nodes_file: str | None, options: Mapping[str, Any]
) -> Workload:
    """``load_trace`` with importer options: ``homo_filter`` and ``scaling`` (numbers > 0)."""
    for name, value in options.items():
        if name not in OPTIONS:
            raise WorkloadError(
                trace.source, name, f"not an option of the WTA importer ({', '.join(OPTIONS)})"
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise WorkloadError(trace.source, name, f"expected a number, got {value!r}")
        if not (math.isfinite(value) and value > 0):
            raise WorkloadError(trace.source, name, f"must be a number > 0, got {value!r}")
    homo = options.get("homo_filter")
    scaling = float(options.get("scaling", SCALING))
    wta = WtaOptions(scaling=scaling, homo_filter=None if homo is None else float(homo))
    return _load(trace, nodes_file, wta)


def _load(trace: TraceFile, nodes_file: str | None, options: WtaOptions) -> Workload:
    if nodes_file is not None:
        raise WorkloadError(trace.source, None, "a nodes file applies only to SLS and Rumen traces")
    return load_csv(trace, options)


def load_wta(path: str | Path, options: WtaOptions | None = None, source: str = "") -> Workload:
    return load_csv(TraceFile(Path(path), source), options or WtaOptions())


@dataclass
class _Workflow:
    user: str
    submit_s: float
    tasks: list[float]


def load_csv(trace: TraceFile, options: WtaOptions) -> Workload:
    source = trace.source
    try:
        size = trace.path.stat().st_size
    except OSError as e:
        raise WorkloadError(source, None, f"cannot read: {e.strerror or e}") from None
    if size > MAX_BYTES:
        raise WorkloadError(source, None, f"{size} bytes: more than the {MAX_BYTES} accepted")
    reader = csv.reader(io.StringIO(trace.text.lstrip("\ufeff")))
    header = next(reader, None)
    if header is None:
        raise WorkloadError(source, "line 1", "the file is empty")
    header = [h.strip() for h in header]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise WorkloadError(source, "line 1", f"missing column(s) {', '.join(missing)}")
    col = {c: header.index(c) for c in COLUMNS}
    workflows: dict[str, _Workflow] = {}
    users: dict[str, str] = {}
    t0 = math.inf
    for n, row in enumerate(reader, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if n - 1 > MAX_ROWS:
            raise WorkloadError(source, f"line {n}", f"more than {MAX_ROWS} rows")
        if len(row) != len(header):
            raise WorkloadError(
                source, f"line {n}", f"has {len(row)} fields, the header {len(header)}"
            )
        wf = row[col["workflow_id"]].strip()
        uid = row[col["user_id"]].strip()
        if not wf:
            raise WorkloadError(source, f"line {n}.workflow_id", "is empty")
        if not uid:
            raise WorkloadError(source, f"line {n}.user_id", "is empty")
        ts = _number(source, n, "ts_submit_seconds", row[col["ts_submit_seconds"]])
        rrt = _number(source, n, "resource_run_time", row[col["resource_run_time"]])
        if rrt <= 0:
            raise WorkloadError(source, f"line {n}.resource_run_time", f"must be > 0, got {rrt:g}")
        user = users.setdefault(uid, f"user_{len(users) + 1}")
        t0 = min(t0, ts)
        w = workflows.get(wf)
        if w is None:
            w = workflows[wf] = _Workflow(user, ts, [])
        elif w.user != user:
            raise WorkloadError(source, f"line {n}.user_id", f"workflow {wf} has two users")
        w.tasks.append(rrt * options.scaling * 0.75 / 1000)
    if not workflows:
        raise WorkloadError(source, None, "no rows after the header")
    kept = workflows
    if options.homo_filter is not None:
        median = statistics.median(sum(w.tasks) for w in workflows.values())
        cut = options.homo_filter * median
        kept = {k: w for k, w in workflows.items() if sum(w.tasks) < cut}
    opts = options.uwfq
    jobs = []
    for wf, w in kept.items():
        n_tasks = opts.tasks
        stages = tuple(
            StageSpec(f"task{k}", Resources(vcores=1), (t / n_tasks,) * n_tasks)
            for k, t in enumerate(w.tasks)
        )
        submit = int((w.submit_s - t0) * 1000) / 1000  # int(): the authors truncate
        jobs.append(JobSpec(f"{w.user}:wf_{wf}", w.user, submit, stages))
    jobs.sort(key=lambda j: j.submit_s)
    return Workload(
        trace.path.stem, uwfq_cluster(opts), tuple(jobs), users=default_users(users.values())
    )


def _number(source: str, line: int, column: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise WorkloadError(source, f"line {line}.{column}", f"expected a number, got {text!r}")
    return value

"""What the HTML report reads of each run's event log beyond ``RunMetrics``: Jain's index
window by window, the DP accounts' records (``dp_account``) and the estimates
(``job_estimated``) with each estimated job's actual size.

One log is read at a time and only these small results are kept, so building the report
does not hold every run's log at once. A run without a log (``--events none``) has none of
them; the report says so.

Jain's index over time is the summary's definition (``treadle.metrics.fairness``) window
by window: per window, the dominant-share-seconds of each active user (or job), divided
by its weight, over the entities active in it (a job is active while [submit, end)
overlaps the window); windows with fewer than two active entities have no index. The
windows are ``JAIN_WINDOW_S`` long, or longer when the run would have more than
``MAX_WINDOWS`` of them (the plot then says which length it used).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from treadle import events as ev
from treadle.metrics import JAIN_WINDOW_S, read_log
from treadle.metrics.scan import LogFacts, scan

#: The event types other issues add that the report shows when a log has them.
DP_ACCOUNT = "dp_account"
JOB_ESTIMATED = "job_estimated"
DP_FIELDS = ("queue", "price", "budget", "spending_rate", "share", "used", "pending", "charged")
ESTIMATE_FIELDS = ("job", "estimate_s", "queue", "sr", "pilots")
#: At most this many windows per Jain series (a longer run gets longer windows).
MAX_WINDOWS = 600
#: At most this many (entity, window) cells per series (jobs x windows).
MAX_CELLS = 4_000_000
EVENTS_FILES = ("events.parquet", "events.jsonl")

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class JainSeries:
    """Jain's index per window (NaN: fewer than two active entities)."""

    window_s: float
    start_s: float  # the first window's start (the first submission)
    users: FloatArray
    jobs: FloatArray


@dataclass
class LogExtras:
    """One run's log-derived report data; ``log`` is None when the run kept no log."""

    log: Path | None = None
    jain: JainSeries | None = None
    dp: list[dict[str, Any]] = field(default_factory=list)
    #: One per estimated job: job, estimate_s, queue, sr, pilots, actual_s (None if unknown).
    estimates: list[dict[str, Any]] = field(default_factory=list)


def event_log(run_dir: Path) -> Path | None:
    for name in EVENTS_FILES:
        if (run_dir / name).exists():
            return run_dir / name
    return None


def metrics_source(path: Path) -> Any:
    """What ``treadle.metrics.scan`` takes of a log file, without the records of the event
    types above (the metrics need none of them, and a field name may have another type in
    them than in the schema)."""
    source = read_log(path)
    if isinstance(source, list):
        return [r for r in source if r["event"] not in (DP_ACCOUNT, JOB_ESTIMATED)]
    return source


def read_extras(run_dir: Path, user_weights: Mapping[str, float] | None = None) -> LogExtras:
    """The report data of the run whose files are in ``run_dir``."""
    path = event_log(run_dir)
    if path is None:
        return LogExtras()
    if path.suffix == ".parquet":
        source = read_log(path)
        dp, est, sizes = _parquet_extras(path)
    else:
        records = ev.read_jsonl(path)
        dp = [_pick(r, DP_FIELDS) for r in records if r["event"] == DP_ACCOUNT]
        est = [_pick(r, ESTIMATE_FIELDS) for r in records if r["event"] == JOB_ESTIMATED]
        sizes = _sizes_of(records) if est else {}
        # The metrics need neither (and a field name may mean another type in them).
        source = [r for r in records if r["event"] not in (DP_ACCOUNT, JOB_ESTIMATED)]
    facts = scan(source)
    for e in est:
        e["actual_s"] = sizes.get(str(e.get("job")))
    return LogExtras(path, jain_series(facts, user_weights), dp, est)


def _pick(rec: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {"t": float(rec["t"]), **{k: rec.get(k) for k in names}}


def _parquet_extras(
    path: Path,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, float]]:
    """The dp_account and job_estimated rows of a Parquet log, and the actual sizes."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    have = set(pq.ParquetFile(str(path)).schema_arrow.names)
    wanted = ["t", "event", *(c for c in (*DP_FIELDS, *ESTIMATE_FIELDS) if c in have)]
    table = pq.read_table(
        str(path),
        columns=list(dict.fromkeys(wanted)),
        filters=[("event", "in", [DP_ACCOUNT, JOB_ESTIMATED])],
        use_threads=False,
    )
    rows = table.to_pylist()
    dp = [_pick(r, DP_FIELDS) for r in rows if r["event"] == DP_ACCOUNT]
    est = [_pick(r, ESTIMATE_FIELDS) for r in rows if r["event"] == JOB_ESTIMATED]
    sizes: dict[str, float] = {}
    if est and {"job", "container", "exit_status"} <= have:
        cont = pq.read_table(
            str(path),
            columns=["t", "event", "job", "container", "exit_status"],
            filters=[("event", "in", [ev.CONTAINER_STARTED, ev.CONTAINER_FINISHED])],
            use_threads=False,
        )
        cont = cont.filter(pc.is_valid(cont.column("job")))
        sizes = _sizes_of(cont.to_pylist())
    return dp, est, sizes


def _sizes_of(records: list[dict[str, Any]]) -> dict[str, float]:
    """Per job, the summed run time of its containers that ended with exit status 0 (the
    observed size, task-seconds)."""
    started: dict[tuple[str, str], float] = {}
    sizes: dict[str, float] = {}
    for r in records:
        if r["event"] == ev.CONTAINER_STARTED:
            key = (str(r.get("job")), str(r.get("container")))
            started.setdefault(key, float(r["t"]))
    for r in records:
        if r["event"] != ev.CONTAINER_FINISHED or r.get("exit_status") not in (0, None):
            continue
        job = str(r.get("job"))
        t0 = started.get((job, str(r.get("container"))))
        if t0 is not None:
            sizes[job] = sizes.get(job, 0.0) + max(0.0, float(r["t"]) - t0)
    return sizes


def jain_series(facts: LogFacts, user_weights: Mapping[str, float] | None) -> JainSeries | None:
    """Jain's index per window over users and over jobs (None: no horizon)."""
    hz = facts.horizon
    if hz is None or hz[1] <= hz[0]:
        return None
    start, end = hz
    span = end - start
    nj = len(facts.job)
    window = JAIN_WINDOW_S
    if span / window > MAX_WINDOWS:
        window = _nice(span / MAX_WINDOWS)
    while nj and nj * math.ceil(span / window) > MAX_CELLS:
        window = _nice(window * 1.5)
    nwin = max(1, math.ceil(span / window))

    users, user_of_job = np.unique(facts.user.astype(str), return_inverse=True)
    w = np.ones(len(users))
    for i, u in enumerate(users.tolist()):
        w[i] = float((user_weights or {}).get(u, 1.0))
    per_user = _index(facts, start, end, window, nwin, user_of_job, len(users), w)
    per_job = _index(facts, start, end, window, nwin, np.arange(nj), nj, np.ones(nj))
    return JainSeries(window, start, per_user, per_job)


def _nice(x: float) -> float:
    """The smallest of 1, 2, 5 x 10^k at least ``x``."""
    exp = 10.0 ** math.floor(math.log10(x))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * exp >= x:
            return m * exp
    return 10.0 * exp


def _index(
    facts: LogFacts,
    start: float,
    end: float,
    window: float,
    nwin: int,
    ent_of_job: npt.NDArray[np.int64],
    nent: int,
    weight: FloatArray,
) -> FloatArray:
    out = np.full(nwin, np.nan)
    if nent == 0:
        return out

    def win(t: FloatArray) -> npt.NDArray[np.int64]:
        out: npt.NDArray[np.int64] = np.clip(np.floor((t - start) / window), 0, nwin - 1)
        return out.astype(np.int64)

    def win_before(t: FloatArray) -> npt.NDArray[np.int64]:
        out: npt.NDArray[np.int64] = np.clip(np.ceil((t - start) / window) - 1, 0, nwin - 1)
        return out.astype(np.int64)

    # Activity: +1 at a job's first window, -1 after its last, summed along time.
    a = np.maximum(facts.submit, start)
    b = np.minimum(np.where(np.isfinite(facts.end), facts.end, end), end)
    act = b > a
    count = np.zeros((nent, nwin + 1))
    np.add.at(count, (ent_of_job[act], win(a[act])), 1.0)
    np.add.at(count, (ent_of_job[act], win_before(b[act]) + 1), -1.0)
    active = np.cumsum(count, axis=1)[:, :nwin] > 0

    # Service: the first and last windows of a container get their parts; the windows in
    # between a rate (a difference map summed along time).
    sp = facts.spans.whole()
    ok = (sp.job >= 0) & (sp.share > 0)
    sa, sb, ds = sp.a[ok], sp.b[ok], sp.share[ok]
    se = ent_of_job[sp.job[ok]]
    wa, wb = win(sa), win_before(sb)
    x = np.zeros((nent, nwin + 1))
    one = wa == wb
    np.add.at(x, (se[one], wa[one]), (sb[one] - sa[one]) * ds[one])
    many = ~one
    np.add.at(x, (se[many], wa[many]), (start + (wa[many] + 1) * window - sa[many]) * ds[many])
    np.add.at(x, (se[many], wb[many]), (sb[many] - (start + wb[many] * window)) * ds[many])
    rate = np.zeros((nent, nwin + 1))
    mid = many & (wb - wa > 1)
    np.add.at(rate, (se[mid], wa[mid] + 1), ds[mid] * window)
    np.add.at(rate, (se[mid], wb[mid]), -ds[mid] * window)
    x = (x + np.cumsum(rate, axis=1))[:, :nwin] / weight[:, None]
    x = np.where(active, np.maximum(x, 0.0), 0.0)

    n = active.sum(axis=0)
    s = x.sum(axis=0)
    s2 = (x * x).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        idx = np.where(s2 == 0, 1.0, np.minimum(1.0, s * s / (n * s2)))
    out[n >= 2] = idx[n >= 2]
    return out

"""Metrics computed from the event log alone (see DESIGN.md, "Metrics").

Everything here is a pure function of the records, except the writers at the bottom. The
records need not be sorted by ``t`` (NodeManagers report start and finish times late):
each function makes one pass that keeps, per job and per container, the earliest or latest
time it needs, and sorts once where a sweep over time is required.

Definitions chosen where DESIGN.md leaves room:

* A job is *finished* when its ``job_finished`` status is ``SUCCEEDED``; ``FAILED`` and
  ``KILLED`` jobs are counted apart and ``UNFINISHED`` jobs have no ``job_finished``.
  JCT, waiting time and slowdown statistics are over finished jobs only.
* The *horizon* is [first job submission, last job end], where a job end is any
  ``job_finished`` (whatever its status). When no job has ended, it is the last record.
  Makespan is the horizon's length when some job has ended, else ``None``.
* A container holds its resources from ``container_allocated`` until the earliest of its
  ``container_finished`` / ``container_released``, or until the last record of the log if
  neither came. An end earlier than the allocation (clock skew) counts as zero length.
* Capacity is ``run_started.capacity``; without it, the sum over nodes of their latest
  ``node_registered`` resources. It is kept constant when nodes are lost, so utilization
  is always relative to the cluster the run started with.
* Jain's index per window is computed over the entities active in it: a job is active in a
  window when [submit, end) overlaps it (an unended job is active until the horizon's
  end), and a user when one of its jobs is. Jobs that wait with nothing allocated count,
  with x = 0. The last window may be shorter than ``window_s``.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from treadle import events as ev

SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
KILLED = "KILLED"
UNFINISHED = "UNFINISHED"

JOBS_CSV_COLUMNS: tuple[str, ...] = (
    "job",
    "name",
    "user",
    "queue",
    "submit_s",
    "start_s",
    "finish_s",
    "jct_s",
    "slowdown",
    "tasks",
    "wait_s",
    "status",
    "alone_jct_s",
)

JAIN_WINDOW_S = 60.0
_ROUND = 6

RecordLike = Mapping[str, Any]
# (job, start, end, resources, dominant share): a container's holding interval
_Span = tuple[str, float, float, Mapping[str, float], float]


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


# --------------------------------------------------------------------------------------
# One pass over the log


@dataclass(slots=True)
class _Job:
    job: str
    submit: float | None = None
    name: str = ""
    user: str = ""
    queue: str = ""
    tasks: int = 0
    alone: float | None = None
    started: float | None = None  # earliest job_started
    first_alloc: float | None = None  # earliest container_allocated
    end: float | None = None  # earliest job_finished / job_failed
    status: str | None = None


@dataclass(slots=True)
class _Container:
    alloc: float | None = None
    resources: Mapping[str, float] | None = None
    end: float | None = None


@dataclass(slots=True)
class _Log:
    run: RecordLike | None = None
    run_t: float = math.inf
    capacity: dict[str, float] = field(default_factory=dict)
    jobs: dict[str, _Job] = field(default_factory=dict)
    containers: dict[tuple[str, str], _Container] = field(default_factory=dict)
    last_t: float | None = None
    _spans: list[_Span] | None = None

    def horizon(self) -> tuple[float, float] | None:
        """[first submit, last job end] (or the last record when no job ended)."""
        submits = [j.submit for j in self.jobs.values() if j.submit is not None]
        if not submits:
            return None
        start = min(submits)
        ends = [j.end for j in self.jobs.values() if j.submit is not None and j.end is not None]
        end = max(ends) if ends else self.last_t
        if end is None or end < start:
            return None
        return start, end

    def spans(self) -> list[_Span]:
        """Every allocated container's holding interval clipped to the horizon (computed once).

        Zero-length spans are dropped; each carries its dominant share of the capacity.
        """
        if self._spans is not None:
            return self._spans
        out: list[_Span] = []
        hz = self.horizon()
        if hz is not None:
            lo, hi = hz
            last = self.last_t if self.last_t is not None else hi
            cap = self.capacity
            keyed = []
            for (job, cid), c in self.containers.items():
                if c.alloc is None or c.resources is None:
                    continue
                a = max(c.alloc, lo)
                b = min(c.end if c.end is not None else last, hi)
                if b > a:
                    keyed.append((a, b, job, cid, c.resources))
            # A fixed order makes float sums independent of the order of the records.
            keyed.sort(key=lambda k: k[:4])
            out = [(job, a, b, res, _dominant(res, cap)) for a, b, job, _, res in keyed]
        self._spans = out
        return out


def _min(a: float | None, b: float) -> float:
    return b if a is None or b < a else a


def _scan(records: Iterable[RecordLike]) -> _Log:
    log = _Log()
    jobs = log.jobs
    containers = log.containers
    nodes: dict[str, tuple[float, Mapping[str, float]]] = {}
    last_t: float | None = None

    def job_of(rec: RecordLike) -> _Job:
        key = str(rec["job"])
        j = jobs.get(key)
        if j is None:
            j = jobs[key] = _Job(key)
        return j

    def container_of(rec: RecordLike) -> _Container:
        key = (str(rec["job"]), str(rec["container"]))
        c = containers.get(key)
        if c is None:
            c = containers[key] = _Container()
        return c

    for rec in records:
        t = float(rec["t"])
        if last_t is None or t > last_t:
            last_t = t
        kind = rec["event"]
        if kind == ev.CONTAINER_ALLOCATED:
            c = container_of(rec)
            if c.alloc is None or t < c.alloc:
                c.alloc = t
                c.resources = rec.get("resources") or {}
            j = job_of(rec)
            j.first_alloc = _min(j.first_alloc, t)
        elif kind == ev.CONTAINER_FINISHED or kind == ev.CONTAINER_RELEASED:
            c = container_of(rec)
            c.end = _min(c.end, t)
        elif kind == ev.JOB_SUBMITTED:
            j = job_of(rec)
            if j.submit is None or t < j.submit:
                j.submit = t
                j.name = str(rec.get("name") or j.job)
                j.user = str(rec.get("user") or "")
                j.queue = str(rec.get("queue") or "")
                j.tasks = int(rec.get("tasks") or 0)
                alone = rec.get("alone_jct_s")
                j.alone = float(alone) if alone is not None else None
        elif kind == ev.JOB_STARTED:
            j = job_of(rec)
            j.started = _min(j.started, t)
        elif kind == ev.JOB_FINISHED or kind == ev.JOB_FAILED:
            j = job_of(rec)
            if j.end is None or t < j.end:
                j.end = t
                default = FAILED if kind == ev.JOB_FAILED else SUCCEEDED
                j.status = str(rec.get("status") or default)
        elif kind == ev.RUN_STARTED:
            if t < log.run_t:
                log.run, log.run_t = rec, t
        elif kind == ev.NODE_REGISTERED:
            node = str(rec["node"])
            prev = nodes.get(node)
            if prev is None or t >= prev[0]:
                nodes[node] = (t, rec.get("resources") or {})
    log.last_t = last_t

    cap: Mapping[str, Any] | None = log.run.get("capacity") if log.run is not None else None
    if cap:
        log.capacity = {k: float(v) for k, v in cap.items() if v}
    else:
        total: dict[str, float] = {}
        for _, res in nodes.values():
            for k, v in res.items():
                total[k] = total.get(k, 0.0) + float(v)
        log.capacity = {k: v for k, v in total.items() if v > 0}
    return log


# --------------------------------------------------------------------------------------
# Jobs


def _r(x: float) -> float:
    y = round(x, _ROUND)
    return 0.0 if y == 0 else y  # no "-0.0" in files


def _job_results(log: _Log) -> list[JobResult]:
    out: list[JobResult] = []
    for j in log.jobs.values():
        if j.submit is None:
            continue  # the log lost its submission: nothing to measure against
        start = j.started if j.started is not None else j.first_alloc
        jct = wait = slowdown = None
        if j.end is not None:
            jct = _r(j.end - j.submit)
            if j.alone:
                slowdown = _r((j.end - j.submit) / j.alone)
        if start is not None:
            wait = _r(start - j.submit)
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
    return _job_results(_scan(records))


# --------------------------------------------------------------------------------------
# Statistics


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100), linear interpolation as numpy's default."""
    a = sorted(float(v) for v in values)
    if not a:
        raise ValueError("percentile of an empty sequence")
    if any(v != v for v in a):
        raise ValueError("percentile of a sequence containing NaN")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    pos = (q / 100) * (len(a) - 1)
    lo = math.floor(pos)
    if lo >= len(a) - 1:
        return a[-1]
    g = pos - lo
    x, y = a[lo], a[lo + 1]
    # numpy's _lerp: symmetric form, exact at both ends.
    return y - (y - x) * (1 - g) if g >= 0.5 else x + (y - x) * g


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n when one has all.

    1.0 for an empty or all-zero sequence; negative values are a ValueError.
    """
    n = len(values)
    s = s2 = 0.0
    for v in values:
        if v < 0:
            raise ValueError(f"Jain's index is defined for non-negative values, got {v}")
        s += v
        s2 += v * v
    if n == 0 or s2 == 0:
        return 1.0
    return min(1.0, (s * s) / (n * s2))


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _pct(values: Sequence[float], q: float) -> float | None:
    return percentile(values, q) if values else None


def worst_fraction_mean(values: Sequence[float], fraction: float = 0.1) -> float | None:
    """Mean of the largest ``max(1, floor(n * fraction))`` values; None when empty."""
    if not values:
        return None
    k = max(1, math.floor(len(values) * fraction))
    return _mean(sorted(values)[-k:])


# --------------------------------------------------------------------------------------
# Utilization


def _dominant(res: Mapping[str, float], cap: Mapping[str, float]) -> float:
    best = 0.0
    for k, v in res.items():
        c = cap.get(k)
        if c:
            s = float(v) / c
            if s > best:
                best = s
    return best


def _utilization_series(log: _Log) -> dict[str, list[tuple[float, float]]]:
    hz = log.horizon()
    cap = log.capacity
    if hz is None or not cap:
        return {k: [] for k in sorted(cap)}
    start, end = hz
    deltas: list[tuple[float, int, Mapping[str, float]]] = []
    for _, a, b, res, _ in log.spans():
        deltas.append((a, 1, res))
        deltas.append((b, -1, res))
    deltas.sort(key=lambda d: d[0])
    names = sorted(cap)
    level = dict.fromkeys(names, 0.0)
    series: dict[str, list[tuple[float, float]]] = {k: [] for k in names}

    def emit(t: float, final: bool = False) -> None:
        for k in names:
            v = level[k] / cap[k]
            v = 0.0 if abs(v) < 1e-9 else round(v, 9)
            s = series[k]
            if final or not s or s[-1][1] != v:
                s.append((t, v))

    i, n = 0, len(deltas)
    emitted_start = False
    while i < n:
        t = deltas[i][0]
        if t > start and not emitted_start:
            emit(start)
        emitted_start = True
        while i < n and deltas[i][0] == t:
            _, sign, res = deltas[i]
            for k, v in res.items():
                if k in level:
                    level[k] += sign * float(v)
            i += 1
        if t < end:
            emit(t)
    if not emitted_start:
        emit(start)
    if end > start:
        emit(end, final=True)
    return series


def utilization_series(records: Iterable[RecordLike]) -> dict[str, list[tuple[float, float]]]:
    """Per resource, a step series [(t, fraction of capacity allocated from t on), ...].

    It covers the horizon [first submit, last job end]: the first point is at its start and
    the last at its end. Resources are those of the capacity (others cannot be divided).
    """
    return _utilization_series(_scan(records))


def _mean_utilization(log: _Log) -> dict[str, float | None]:
    hz = log.horizon()
    cap = log.capacity
    if hz is None or hz[1] <= hz[0]:
        return dict.fromkeys(sorted(cap))
    start, end = hz
    area = dict.fromkeys(cap, 0.0)
    parts: dict[str, list[float]] = {k: [] for k in cap}
    for _, a, b, res, _ in log.spans():
        for k, v in res.items():
            if k in area:
                parts[k].append(float(v) * (b - a))
    span = end - start
    return {k: math.fsum(parts[k]) / (cap[k] * span) for k in sorted(cap)}


# --------------------------------------------------------------------------------------
# Jain's index over windows


def _jain_over_windows(
    log: _Log,
    by: Literal["user", "job"],
    window_s: float,
    weights: Mapping[str, float] | None,
) -> dict[str, float | int]:
    if by not in ("user", "job"):
        raise ValueError(f"jain_over_windows: by must be 'user' or 'job', got {by!r}")
    if not window_s > 0:
        raise ValueError(f"jain_over_windows: window_s must be > 0, got {window_s}")
    neutral: dict[str, float | int] = {"mean": 1.0, "min": 1.0, "max": 1.0, "windows": 0}
    hz = log.horizon()
    if hz is None or hz[1] <= hz[0]:
        return neutral
    start, end = hz
    nwin = max(1, math.ceil((end - start) / window_s))

    def win(t: float) -> int:  # the window holding t (t in [start, end])
        return min(nwin - 1, max(0, math.floor((t - start) / window_s)))

    def win_before(t: float) -> int:  # the window holding the instant just before t
        return min(nwin - 1, max(0, math.ceil((t - start) / window_s) - 1))

    def entity(job: _Job) -> str:
        return job.user if by == "user" else job.job

    # Activity: +1 at the job's first window, -1 after its last (difference arrays).
    active_diff: list[dict[str, int]] = [{} for _ in range(nwin + 1)]
    for j in log.jobs.values():
        if j.submit is None:
            continue
        a, b = max(j.submit, start), min(j.end if j.end is not None else end, end)
        if b <= a:
            continue
        e = entity(j)
        d0, d1 = active_diff[win(a)], active_diff[win_before(b) + 1]
        d0[e] = d0.get(e, 0) + 1
        d1[e] = d1.get(e, 0) - 1

    # Service: the ends of a container go to its first and last windows; the windows in
    # between are all whole, so they get a rate through a difference array.
    partial: list[dict[str, float]] = [{} for _ in range(nwin)]
    rate_diff: list[dict[str, float]] = [{} for _ in range(nwin + 1)]
    jobs = log.jobs
    for job, a, b, _, ds in log.spans():
        jr = jobs.get(job)
        if jr is None or jr.submit is None:
            continue
        if ds <= 0:
            continue
        e = entity(jr)
        wa, wb = win(a), win_before(b)
        if wa == wb:
            p = partial[wa]
            p[e] = p.get(e, 0.0) + (b - a) * ds
            continue
        p = partial[wa]
        p[e] = p.get(e, 0.0) + (start + (wa + 1) * window_s - a) * ds
        p = partial[wb]
        p[e] = p.get(e, 0.0) + (b - (start + wb * window_s)) * ds
        if wb - wa > 1:
            r0, r1 = rate_diff[wa + 1], rate_diff[wb]
            r0[e] = r0.get(e, 0.0) + ds
            r1[e] = r1.get(e, 0.0) - ds

    w_of: dict[str, float] = {}
    if weights:
        for k, w in weights.items():
            if not w > 0:
                raise ValueError(f"jain_over_windows: weight of {k!r} must be > 0, got {w}")
            w_of[k] = float(w)

    counts: dict[str, int] = {}
    rates: dict[str, float] = {}
    indices: list[float] = []
    for w in range(nwin):
        for e, d in active_diff[w].items():
            c = counts.get(e, 0) + d
            if c:
                counts[e] = c
            else:
                counts.pop(e, None)
        for e, dr in rate_diff[w].items():
            rates[e] = rates.get(e, 0.0) + dr
        if len(counts) < 2:
            continue
        p = partial[w]
        xs = []
        for e in counts:
            x = p.get(e, 0.0) + rates.get(e, 0.0) * window_s
            xs.append(max(0.0, x) / w_of.get(e, 1.0))
        xs.sort()  # sums independent of the order of the records
        indices.append(jain_index(xs))
    if not indices:
        return neutral
    return {
        "mean": math.fsum(indices) / len(indices),
        "min": min(indices),
        "max": max(indices),
        "windows": len(indices),
    }


def jain_over_windows(
    records: Iterable[RecordLike],
    by: Literal["user", "job"],
    window_s: float = JAIN_WINDOW_S,
    weights: Mapping[str, float] | None = None,
) -> dict[str, float | int]:
    """Jain's index of dominant-share-seconds per active user (or job) in each window.

    Returns {"mean", "min", "max", "windows"}; windows with fewer than two active entities
    are skipped, and when all are, the result is 1.0 everywhere with ``windows == 0``.
    ``weights`` divide each entity's share (keyed by user name, or by job id for
    ``by="job"``); a missing entity weighs 1.
    """
    return _jain_over_windows(_scan(records), by, window_s, weights)


# --------------------------------------------------------------------------------------
# Factor of improvement


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
        "mean": _mean(fs),
        "p50": _pct(fs, 50),
        "p95": _pct(fs, 95),
        "min": fs[0] if fs else None,
        "max": fs[-1] if fs else None,
        "cdf": [(f, (i + 1) / n) for i, f in enumerate(fs)],
    }


# --------------------------------------------------------------------------------------
# Summary


def rounded(x: Any) -> Any:
    """Round every float in a JSON-like value to 6 decimals (tuples become lists)."""
    if isinstance(x, float):
        if not math.isfinite(x):
            return None
        return _r(x)
    if isinstance(x, Mapping):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [rounded(v) for v in x]
    return x


def _summarize(
    log: _Log,
    results: Sequence[JobResult],
    policy: str | None,
    user_weights: Mapping[str, float] | None,
    window_s: float,
) -> dict[str, Any]:
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
            "mean_jct_s": _mean([r.jct_s for r in ok if r.jct_s is not None]),
            "mean_slowdown": _mean([r.slowdown for r in ok if r.slowdown is not None]),
            "mean_wait_s": _mean([r.wait_s for r in ok if r.wait_s is not None]),
        }

    users = _jain_over_windows(log, "user", window_s, user_weights)
    jobs = _jain_over_windows(log, "job", window_s, None)
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
        "mean_jct_s": _mean(jct),
        "p50_jct_s": _pct(jct, 50),
        "p80_jct_s": _pct(jct, 80),
        "p95_jct_s": _pct(jct, 95),
        "worst10_jct_s": worst_fraction_mean(jct, 0.1),
        "mean_slowdown": _mean(slow),
        "p50_slowdown": _pct(slow, 50),
        "p95_slowdown": _pct(slow, 95),
        "mean_wait_s": _mean(wait),
        "p95_wait_s": _pct(wait, 95),
        "utilization": _mean_utilization(log),
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
    log = _scan(records)
    return _summarize(log, _job_results(log), policy, user_weights, window_s)


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
    log = _scan(records)
    results = _job_results(log)
    summary = _summarize(log, results, policy, user_weights, JAIN_WINDOW_S)
    return RunMetrics(summary, results, _utilization_series(log))


# --------------------------------------------------------------------------------------
# Writers


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(_r(v))
    return v


def write_jobs_csv(results: Iterable[JobResult], path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(JOBS_CSV_COLUMNS)
        for r in results:
            w.writerow([_cell(getattr(r, c)) for c in JOBS_CSV_COLUMNS])


def write_json(obj: Any, path: Path) -> None:
    """Deterministic JSON: sorted keys, 2-space indent, no NaN, trailing newline."""
    path.write_text(
        json.dumps(obj, sort_keys=True, indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )


def write_run_outputs(
    records: Iterable[RecordLike],
    out_dir: Path,
    *,
    policy: str,
    user_weights: Mapping[str, float] | None = None,
    run: RunMetrics | None = None,
) -> dict[str, Any]:
    """Write summary.json, jobs.csv and events.jsonl (records in the order given) to
    ``out_dir`` (created if needed) and return the summary. Pass ``run`` when the records
    were already analysed, to skip a second pass."""
    recs = [r if isinstance(r, dict) else dict(r) for r in records]
    out_dir.mkdir(parents=True, exist_ok=True)
    if run is None:
        run = analyze(recs, policy=policy, user_weights=user_weights)
    write_json(run.summary, out_dir / "summary.json")
    write_jobs_csv(run.jobs, out_dir / "jobs.csv")
    ev.write_jsonl(recs, out_dir / "events.jsonl")
    return run.summary

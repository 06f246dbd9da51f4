"""Jain's index over time windows, per user or per job.

Jain's index per window is computed over the entities active in it: a job is active in a
window when [submit, end) overlaps it (an unended job is active until the horizon's end),
and a user when one of its jobs is. Jobs that wait with nothing allocated count, with
x = 0. The last window may be shorter than ``window_s``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Literal

from tests.reference_metrics.scan import JobFacts, LogFacts, RecordLike, scan
from tests.reference_metrics.stats import jain_index

JAIN_WINDOW_S = 60.0


def jain_from(
    log: LogFacts,
    by: Literal["user", "job"],
    window_s: float,
    weights: Mapping[str, float] | None,
    stats: dict[str, int] | None = None,
) -> dict[str, float | int]:
    """``jain_over_windows`` of a scanned log.

    ``stats``, when given, receives ``windows`` (how many windows the horizon has) and
    ``computed`` (how many indices were computed: about one per window with activity and
    one per stretch of alike windows between them)."""
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

    def entity(job: JobFacts) -> str:
        return job.user if by == "user" else job.job

    # Only windows where something happens are held (sparse, by window index): where an
    # entity's activity starts or stops, where a container starts or ends, and where a rate
    # changes. Between two of them every window is alike, so a run of them is computed once
    # and counted as many times: an idle gap costs nothing, however long.
    # Activity: +1 at the job's first window, -1 after its last (difference maps).
    active_diff: dict[int, dict[str, int]] = {}
    for j in log.jobs.values():
        if j.submit is None:
            continue
        a, b = max(j.submit, start), min(j.end if j.end is not None else end, end)
        if b <= a:
            continue
        e = entity(j)
        d0 = active_diff.setdefault(win(a), {})
        d0[e] = d0.get(e, 0) + 1
        d1 = active_diff.setdefault(win_before(b) + 1, {})
        d1[e] = d1.get(e, 0) - 1

    # Service: the ends of a container go to its first and last windows; the windows in
    # between are all whole, so they get a rate through a difference map.
    partial: dict[int, dict[str, float]] = {}
    rate_diff: dict[int, dict[str, float]] = {}
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
            p = partial.setdefault(wa, {})
            p[e] = p.get(e, 0.0) + (b - a) * ds
            continue
        p = partial.setdefault(wa, {})
        p[e] = p.get(e, 0.0) + (start + (wa + 1) * window_s - a) * ds
        p = partial.setdefault(wb, {})
        p[e] = p.get(e, 0.0) + (b - (start + wb * window_s)) * ds
        if wb - wa > 1:
            r0 = rate_diff.setdefault(wa + 1, {})
            r0[e] = r0.get(e, 0.0) + ds
            r1 = rate_diff.setdefault(wb, {})
            r1[e] = r1.get(e, 0.0) - ds

    w_of: dict[str, float] = {}
    if weights:
        for k, w in weights.items():
            if not w > 0:
                raise ValueError(f"jain_over_windows: weight of {k!r} must be > 0, got {w}")
            w_of[k] = float(w)

    counts: dict[str, int] = {}
    rates: dict[str, float] = {}
    runs: list[tuple[float, int]] = []  # (index, how many windows in a row have it)

    def index(p: Mapping[str, float]) -> float:
        xs = []
        for e in counts:
            x = p.get(e, 0.0) + rates.get(e, 0.0) * window_s
            xs.append(max(0.0, x) / w_of.get(e, 1.0))
        xs.sort()  # sums independent of the order of the records
        return jain_index(xs)

    busy = sorted(w for w in active_diff.keys() | partial.keys() | rate_diff.keys() if w < nwin)
    nxt = 0  # the first window not yet accounted for
    for w in busy:
        if w > nxt and len(counts) >= 2:  # windows nxt..w-1: nothing changes in them
            runs.append((index({}), w - nxt))
        for e, d in active_diff.get(w, {}).items():
            c = counts.get(e, 0) + d
            if c:
                counts[e] = c
            else:
                counts.pop(e, None)
        for e, dr in rate_diff.get(w, {}).items():
            rates[e] = rates.get(e, 0.0) + dr
        if len(counts) >= 2:
            runs.append((index(partial.get(w, {})), 1))
        nxt = w + 1
    if nwin > nxt and len(counts) >= 2:
        runs.append((index({}), nwin - nxt))
    if stats is not None:
        stats["windows"] = nwin
        stats["computed"] = len(runs)
    indices = [v for v, _ in runs]
    if not indices:
        return neutral
    windows = sum(k for _, k in runs)
    return {
        "mean": math.fsum(x for v, k in runs for x in _times(v, k)) / windows,
        "min": min(indices),
        "max": max(indices),
        "windows": windows,
    }


def _times(v: float, k: int) -> Iterable[float]:
    """Floats whose exact sum is ``k * v`` (``v`` times the powers of two that make up
    ``k``, each exact): ``math.fsum`` of them, among others, is exactly the fsum of ``k``
    copies of ``v``."""
    bit = 0
    while k:
        if k & 1:
            yield math.ldexp(v, bit)
        k >>= 1
        bit += 1


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
    return jain_from(scan(records), by, window_s, weights)

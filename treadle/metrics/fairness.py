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

from treadle.metrics.scan import JobFacts, LogFacts, RecordLike, scan
from treadle.metrics.stats import jain_index

JAIN_WINDOW_S = 60.0


def jain_from(
    log: LogFacts,
    by: Literal["user", "job"],
    window_s: float,
    weights: Mapping[str, float] | None,
) -> dict[str, float | int]:
    """``jain_over_windows`` of a scanned log."""
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
    return jain_from(scan(records), by, window_s, weights)

"""Jain's index over time windows, per user or per job.

Jain's index per window is computed over the entities active in it: a job is active in a
window when [submit, end) overlaps it (an unended job is active until the horizon's end),
and a user when one of its jobs is. Jobs that wait with nothing allocated count, with
x = 0. The last window may be shorter than ``window_s``.

Only the windows where something happens are computed ("busy" windows: where an entity's
activity starts or stops, where a container starts or ends, where a rate changes); the
windows between two busy ones are all alike, so each such stretch is computed once and
counted as many times. The cost is O(rows + busy windows x active entities): an idle gap
costs nothing, however long. Sums run in the order the per-record definition used (spans
in (start, end, job, container) order, windows in time order), so results are the same
to the last bit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

import numpy as np
import numpy.typing as npt

from treadle.metrics.scan import EventSource, FloatArray, IntArray, LogFacts, scan

JAIN_WINDOW_S = 60.0


def _cells(k: IntArray, e: IntArray, v: FloatArray, nent: int) -> tuple[IntArray, FloatArray]:
    """Sum ``v`` per (k, e) cell, adding in the order given; cells sorted by (k, e)."""
    key = k * nent + e
    cells, inv = np.unique(key, return_inverse=True)
    sums = np.zeros(len(cells))
    np.add.at(sums, inv, v)  # unbuffered: in index order
    return cells, sums


def _segmented_cumsum(v: FloatArray, seg: IntArray) -> FloatArray:
    """Running sums of ``v`` within each run of equal ``seg`` (sorted), added one after
    the other as a loop would (a vector step per position within the runs)."""
    out = v.copy()
    n = len(v)
    if n < 2:
        return out
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    lengths = np.diff(np.r_[starts, n])
    pos = np.arange(n) - np.repeat(starts, lengths)
    by_pos = np.argsort(pos, kind="stable")
    bounds = np.searchsorted(pos[by_pos], np.arange(int(lengths.max()) + 1))
    for j in range(1, len(bounds) - 1):
        idx = by_pos[bounds[j] : bounds[j + 1]]
        out[idx] += out[idx - 1]
    return out


def _expand(k0: IntArray, k1: IntArray, e: IntArray) -> tuple[IntArray, IntArray]:
    """(k, e) for every k in [k0, k1) of every interval."""
    lengths = k1 - k0
    total = int(lengths.sum())
    starts = np.repeat(k0 - np.r_[0, np.cumsum(lengths)[:-1]], lengths)
    return starts + np.arange(total), np.repeat(e, lengths)


def _times(v: FloatArray, k: IntArray) -> FloatArray:
    """Floats whose exact sum is ``k * v`` for every pair: ``v`` times the powers of two
    that make up ``k`` (each exact), so ``math.fsum`` of them is exactly the fsum of ``k``
    copies of each ``v``."""
    parts = []
    bit = 0
    while len(k):
        has = (k & 1).astype(bool)
        parts.append(np.ldexp(v[has], bit))
        k = k >> 1
        keep = k > 0
        v, k = v[keep], k[keep]
        bit += 1
    return np.concatenate(parts) if parts else np.empty(0)


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
    hz = log.horizon
    if hz is None or hz[1] <= hz[0]:
        return neutral
    start, end = hz
    nwin = max(1, math.ceil((end - start) / window_s))

    def win(t: FloatArray) -> IntArray:  # the window holding t (t in [start, end])
        out: IntArray = np.clip(np.floor((t - start) / window_s), 0, nwin - 1).astype(np.int64)
        return out

    def win_before(t: FloatArray) -> IntArray:  # the window holding the instant before t
        out: IntArray = np.clip(np.ceil((t - start) / window_s) - 1, 0, nwin - 1).astype(np.int64)
        return out

    # Entities: per user or per job; each job's entity.
    key = log.user if by == "user" else log.job
    names, ent_of_job = np.unique(key.astype(str), return_inverse=True)
    nent = max(1, len(names))
    w_of = np.ones(nent)
    if weights:
        index = {str(n): i for i, n in enumerate(names)}
        for k, w in weights.items():
            if not w > 0:
                raise ValueError(f"jain_over_windows: weight of {k!r} must be > 0, got {w}")
            if k in index:
                w_of[index[k]] = float(w)

    # Activity: +1 at the job's first window, -1 after its last.
    a = np.maximum(log.submit, start)
    b = np.minimum(np.where(np.isfinite(log.end), log.end, end), end)
    act = b > a
    act_e = ent_of_job[act]
    act_w = np.concatenate([win(a[act]), win_before(b[act]) + 1])
    act_d = np.concatenate([np.ones(len(act_e), np.int64), -np.ones(len(act_e), np.int64)])
    act_e = np.concatenate([act_e, act_e])

    # Service: the ends of a container go to its first and last windows (partials); the
    # windows in between are whole, so they get a rate through a difference map.
    sp = log.spans
    ok = (sp.job >= 0) & (sp.share > 0)
    sa, sb, ds = sp.a[ok], sp.b[ok], sp.share[ok]
    se = ent_of_job[sp.job[ok]] if len(ent_of_job) else np.empty(0, np.int64)
    wa, wb = win(sa), win_before(sb)
    one = wa == wb
    # per span: [first part, last part], in span order
    p_w = np.stack([wa, wb], axis=1)
    first = np.where(one, (sb - sa) * ds, (start + (wa + 1) * window_s - sa) * ds)
    last = (sb - (start + wb * window_s)) * ds
    p_v = np.stack([first, last], axis=1)
    p_use = np.stack([np.ones(len(sa), bool), ~one], axis=1)
    p_e = np.stack([se, se], axis=1)
    rate = wb - wa > 1
    r_w = np.stack([wa + 1, wb], axis=1)[rate]
    r_v = np.stack([ds, -ds], axis=1)[rate]
    r_e = np.stack([se, se], axis=1)[rate]

    busy = np.unique(np.concatenate([act_w, p_w[p_use], r_w.ravel()]))
    busy = busy[busy < nwin]
    nb = len(busy)
    runs_v: list[FloatArray] = []
    runs_k: list[IntArray] = []
    if nb:
        # Active (busy index, entity) cells: per entity, its count after each of its
        # changes, held until its next change.
        keep = act_w < nwin
        cells, dsum = _cells(np.searchsorted(busy, act_w[keep]), act_e[keep], act_d[keep], nent)
        ck, ce = cells // nent, cells % nent
        order = np.lexsort((ck, ce))
        ck, ce, dsum = ck[order], ce[order], dsum[order].astype(np.int64)
        count = np.cumsum(dsum)
        seg_start = np.r_[True, ce[1:] != ce[:-1]]
        base = np.maximum.accumulate(np.where(seg_start, np.arange(len(ce)), 0))
        count = count - np.r_[0, np.cumsum(dsum)][base]
        nxt = np.r_[ck[1:], nb]
        nxt[np.r_[ce[1:] != ce[:-1], True]] = nb
        on = count > 0
        cell_k, cell_e = _expand(ck[on], nxt[on], ce[on])

        # Rates: the difference map summed per cell, then added up window after window.
        rk = np.searchsorted(busy, r_w.ravel())
        rcells, rsum = _cells(rk, r_e.ravel(), r_v.ravel(), nent)
        rk2, re2 = rcells // nent, rcells % nent
        order = np.lexsort((rk2, re2))
        rk2, re2 = rk2[order], re2[order]
        rcum = _segmented_cumsum(rsum[order], re2)
        rkey = re2 * (nb + 1) + rk2
        ckey = cell_e * (nb + 1) + cell_k
        j = np.searchsorted(rkey, ckey, side="right") - 1
        has = j >= 0
        has[has] = re2[j[has]] == cell_e[has]
        rates = np.where(has, rcum[np.maximum(j, 0)], 0.0) if len(rcum) else np.zeros(len(j))

        # Partials of the busy windows.
        pk = np.searchsorted(busy, p_w[p_use])
        pcells, psum = _cells(pk, p_e[p_use], p_v[p_use], nent)
        pos = np.searchsorted(pcells, cell_k * nent + cell_e)
        found = pos < len(pcells)
        found[found] = pcells[pos[found]] == (cell_k * nent + cell_e)[found]
        partial = (
            np.where(found, psum[np.minimum(pos, len(pcells) - 1)], 0.0)
            if len(pcells)
            else np.zeros(len(cell_k))
        )

        n_k = np.bincount(cell_k, minlength=nb)
        gap = np.r_[busy[1:], nwin] - busy - 1
        weight = w_of[cell_e]
        busy_x = np.maximum(0.0, partial + rates * window_s) / weight
        gap_x = np.maximum(0.0, 0.0 + rates * window_s) / weight
        for x, counted, times in (
            (busy_x, n_k >= 2, np.ones(nb, np.int64)),
            (gap_x, (n_k >= 2) & (gap > 0), gap),
        ):
            order = np.lexsort((x, cell_k))  # each window's values in increasing order
            xs, ks = x[order], cell_k[order]
            s = np.zeros(nb)
            s2 = np.zeros(nb)
            np.add.at(s, ks, xs)
            np.add.at(s2, ks, xs * xs)
            with np.errstate(divide="ignore", invalid="ignore"):
                idx = np.where(s2 == 0, 1.0, np.minimum(1.0, (s * s) / (n_k * s2)))
            runs_v.append(idx[counted])
            runs_k.append(times[counted])
    values = np.concatenate(runs_v) if runs_v else np.empty(0)
    counts = np.concatenate(runs_k) if runs_k else np.empty(0, np.int64)
    if stats is not None:
        stats["windows"] = nwin
        stats["computed"] = len(values)
    if not len(values):
        return neutral
    windows = int(counts.sum())
    return {
        "mean": math.fsum(_times(values, counts).tolist()) / windows,
        "min": float(values.min()),
        "max": float(values.max()),
        "windows": windows,
    }


def jain_over_windows(
    records: EventSource,
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


_ = npt  # numpy.typing names the array types above

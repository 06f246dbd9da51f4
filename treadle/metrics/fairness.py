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
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from treadle.metrics.scan import EventSource, FloatArray, IntArray, LogFacts, Spans, scan

JAIN_WINDOW_S = 60.0


def _cells(
    k: IntArray, e: IntArray, v: FloatArray | IntArray, nent: int
) -> tuple[IntArray, FloatArray]:
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


@dataclass(frozen=True, slots=True)
class _Grid:
    """The horizon's windows: ``nwin`` of ``window_s`` from ``start`` (the last may be
    shorter)."""

    start: float
    window_s: float
    nwin: int

    def of(self, t: FloatArray) -> IntArray:
        """The window holding t (t in [start, end])."""
        out: IntArray = np.clip(
            np.floor((t - self.start) / self.window_s), 0, self.nwin - 1
        ).astype(np.int64)
        return out

    def before(self, t: FloatArray) -> IntArray:
        """The window holding the instant before t."""
        out: IntArray = np.clip(
            np.ceil((t - self.start) / self.window_s) - 1, 0, self.nwin - 1
        ).astype(np.int64)
        return out


@dataclass(frozen=True, slots=True)
class _Changes:
    """Per window and entity, what changes there: activity (+1 at an entity's job's first
    window, -1 after its last), partial service (the ends of containers, in their first
    and last windows) and the rate of whole-window service (a difference map). The last
    two are summed per (window, entity) cell (cells sorted by window, then entity)."""

    act_w: IntArray
    act_e: IntArray
    act_d: IntArray
    part_w: IntArray
    part_e: IntArray
    part_v: FloatArray
    rate_w: IntArray
    rate_e: IntArray
    rate_v: FloatArray


def _entities(
    log: LogFacts, by: Literal["user", "job"], weights: Mapping[str, float] | None
) -> tuple[IntArray, FloatArray]:
    """Each job's entity (its user, or itself) and each entity's weight (1 unless given)."""
    key = log.user if by == "user" else log.job
    names, ent_of_job = np.unique(key.astype(str), return_inverse=True)
    w_of = np.ones(max(1, len(names)))
    if weights:
        index = {str(n): i for i, n in enumerate(names)}
        for k, w in weights.items():
            if not w > 0:
                raise ValueError(f"jain_over_windows: weight of {k!r} must be > 0, got {w}")
            if k in index:
                w_of[index[k]] = float(w)
    return ent_of_job, w_of


class _CellSums:
    """Values summed per (window, entity) cell, added in the order given across calls (as
    one ``np.add.at`` over all of them would): the cells are kept, never the values."""

    def __init__(self, nent: int) -> None:
        self.nent = max(1, nent)
        self.keys: IntArray = np.empty(0, np.int64)
        self.sums: FloatArray = np.empty(0)

    def add(self, w: IntArray, e: IntArray, v: FloatArray) -> None:
        key = w * self.nent + e
        cells = np.union1d(self.keys, key)
        if len(cells) != len(self.keys):
            grown = np.zeros(len(cells))
            grown[np.searchsorted(cells, self.keys)] = self.sums
            self.keys, self.sums = cells, grown
        np.add.at(self.sums, np.searchsorted(self.keys, key), v)  # unbuffered: in order

    def cells(self) -> tuple[IntArray, IntArray, FloatArray]:
        """(window, entity, sum) of each cell, by window then entity."""
        return self.keys // self.nent, self.keys % self.nent, self.sums


def _activity(log: LogFacts, ent_of_job: IntArray, grid: _Grid, end: float) -> tuple[IntArray, ...]:
    """(window, entity, +1 / -1) of each entity's job's first window and the one after its
    last."""
    a = np.maximum(log.submit, grid.start)
    b = np.minimum(np.where(np.isfinite(log.end), log.end, end), end)
    act = b > a
    act_e = ent_of_job[act]
    act_w = np.concatenate([grid.of(a[act]), grid.before(b[act]) + 1])
    act_d = np.concatenate([np.ones(len(act_e), np.int64), -np.ones(len(act_e), np.int64)])
    return act_w, np.concatenate([act_e, act_e]), act_d


def _add_span_parts(
    grid: _Grid,
    sa: FloatArray,
    sb: FloatArray,
    ds: FloatArray,
    se: IntArray,
    parts: _CellSums,
    rates: _CellSums,
) -> None:
    """Add spans' partial service (first and last windows) and rate changes (the windows
    between are whole), per span [first, last] and [+rate, -rate], in span order."""
    start, window_s = grid.start, grid.window_s
    wa, wb = grid.of(sa), grid.before(sb)
    one = wa == wb
    p_w = np.stack([wa, wb], axis=1)
    first = np.where(one, (sb - sa) * ds, (start + (wa + 1) * window_s - sa) * ds)
    last = (sb - (start + wb * window_s)) * ds
    p_v = np.stack([first, last], axis=1)
    p_use = np.stack([np.ones(len(sa), bool), ~one], axis=1)
    p_e = np.stack([se, se], axis=1)
    parts.add(p_w[p_use], p_e[p_use], p_v[p_use])
    rate = wb - wa > 1
    r_w = np.stack([wa + 1, wb], axis=1)[rate]
    r_v = np.stack([ds, -ds], axis=1)[rate]
    r_e = np.stack([se, se], axis=1)[rate]
    rates.add(r_w.ravel(), r_e.ravel(), r_v.ravel())


def _active_cells(ch: _Changes, busy: IntArray, nent: int, nwin: int) -> tuple[IntArray, IntArray]:
    """The active (busy index, entity) cells, sorted by entity then index: per entity, its
    count after each of its changes, held until its next change."""
    nb = len(busy)
    keep = ch.act_w < nwin
    cells, dsum = _cells(
        np.searchsorted(busy, ch.act_w[keep]), ch.act_e[keep], ch.act_d[keep], nent
    )
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
    return _expand(ck[on], nxt[on], ce[on])


def _cell_rates(
    ch: _Changes, busy: IntArray, nent: int, cell_k: IntArray, cell_e: IntArray
) -> FloatArray:
    """Each cell's rate of whole-window service: the difference map's cell sums added up
    window after window."""
    nb = len(busy)
    rk2, re2 = np.searchsorted(busy, ch.rate_w), ch.rate_e
    order = np.lexsort((rk2, re2))
    rk2, re2 = rk2[order], re2[order]
    rcum = _segmented_cumsum(ch.rate_v[order], re2)
    rkey = re2 * (nb + 1) + rk2
    ckey = cell_e * (nb + 1) + cell_k
    j = np.searchsorted(rkey, ckey, side="right") - 1
    has = j >= 0
    has[has] = re2[j[has]] == cell_e[has]
    rates: FloatArray = (
        np.where(has, rcum[np.maximum(j, 0)], 0.0) if len(rcum) else np.zeros(len(j))
    )
    return rates


def _cell_partials(
    ch: _Changes, busy: IntArray, nent: int, cell_k: IntArray, cell_e: IntArray
) -> FloatArray:
    """Each cell's partial service: the ends of containers in its busy window."""
    pcells = np.searchsorted(busy, ch.part_w) * nent + ch.part_e  # sorted: busy is
    psum = ch.part_v
    want = cell_k * nent + cell_e
    pos = np.searchsorted(pcells, want)
    found = pos < len(pcells)
    found[found] = pcells[pos[found]] == want[found]
    partial: FloatArray = (
        np.where(found, psum[np.minimum(pos, len(pcells) - 1)], 0.0)
        if len(pcells)
        else np.zeros(len(cell_k))
    )
    return partial


def _indices(
    ch: _Changes, busy: IntArray, grid: _Grid, w_of: FloatArray
) -> tuple[list[FloatArray], list[IntArray]]:
    """Jain's index of each busy window and of each stretch of alike windows after one
    (counted as many times as it has windows), where at least two entities are active."""
    nb, nent, nwin = len(busy), len(w_of), grid.nwin
    cell_k, cell_e = _active_cells(ch, busy, nent, nwin)
    rates = _cell_rates(ch, busy, nent, cell_k, cell_e)
    partial = _cell_partials(ch, busy, nent, cell_k, cell_e)
    n_k = np.bincount(cell_k, minlength=nb)
    gap = np.r_[busy[1:], nwin] - busy - 1
    weight = w_of[cell_e]
    busy_x = np.maximum(0.0, partial + rates * grid.window_s) / weight
    gap_x = np.maximum(0.0, 0.0 + rates * grid.window_s) / weight
    runs_v: list[FloatArray] = []
    runs_k: list[IntArray] = []
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
    return runs_v, runs_k


class JainSums:
    """``jain_from`` of a log whose spans are added a chunk at a time (``add``, in span
    order): what is kept is the (window, entity) cells, O(jobs + windows x users), never
    the spans."""

    def __init__(
        self,
        log: LogFacts,
        by: Literal["user", "job"],
        window_s: float,
        weights: Mapping[str, float] | None,
    ) -> None:
        if by not in ("user", "job"):
            raise ValueError(f"jain_over_windows: by must be 'user' or 'job', got {by!r}")
        if not window_s > 0:
            raise ValueError(f"jain_over_windows: window_s must be > 0, got {window_s}")
        self.log = log
        self.grid: _Grid | None = None
        self.ent_of_job, self.w_of = _entities(log, by, weights)
        nent = int(self.ent_of_job.max()) + 1 if len(self.ent_of_job) else 1
        self.parts, self.rates = _CellSums(nent), _CellSums(nent)
        hz = log.horizon
        if hz is not None and hz[1] > hz[0]:
            nwin = max(1, math.ceil((hz[1] - hz[0]) / window_s))
            self.grid = _Grid(hz[0], window_s, nwin)

    def add(self, sp: Spans) -> None:
        """Add the next spans (in span order)."""
        if self.grid is None:
            return
        ok = (sp.job >= 0) & (sp.share > 0)
        se = self.ent_of_job[sp.job[ok]] if len(self.ent_of_job) else np.empty(0, np.int64)
        _add_span_parts(self.grid, sp.a[ok], sp.b[ok], sp.share[ok], se, self.parts, self.rates)

    def result(self, stats: dict[str, int] | None = None) -> dict[str, float | int]:
        """The index once every span is added (see ``jain_from``)."""
        neutral: dict[str, float | int] = {"mean": 1.0, "min": 1.0, "max": 1.0, "windows": 0}
        grid = self.grid
        if grid is None or self.log.horizon is None:
            return neutral
        act_w, act_e, act_d = _activity(self.log, self.ent_of_job, grid, self.log.horizon[1])
        ch = _Changes(act_w, act_e, act_d, *self.parts.cells(), *self.rates.cells())
        busy = np.unique(np.concatenate([ch.act_w, ch.part_w, ch.rate_w]))
        busy = busy[busy < grid.nwin]
        runs_v, runs_k = _indices(ch, busy, grid, self.w_of) if len(busy) else ([], [])
        values = np.concatenate(runs_v) if runs_v else np.empty(0)
        counts = np.concatenate(runs_k) if runs_k else np.empty(0, np.int64)
        if stats is not None:
            stats["windows"] = grid.nwin
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
    sums = JainSums(log, by, window_s, weights)
    if sums.grid is not None:
        for chunk in log.spans.chunks():
            sums.add(chunk)
    return sums.result(stats)


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

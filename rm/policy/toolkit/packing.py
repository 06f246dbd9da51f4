"""Tetris-style packing (Grandl et al., SIGCOMM 2014), shared by the tetris and carbyne
policies.

- ``alignment(demand, free, capacity)`` = sum over dimensions k of
  (demand_k / capacity_k) * (free_k / capacity_k), capacity being the node's: how well an
  ask's demand vector lines up with what the node has left.
- ``remaining_work(asks, capacity)``: the job's remaining work (resource-seconds, weighted
  by the cluster's capacity), for the SRTF-like term.
- ``AskIndex``: the pending asks grouped by demand shape, each shape's asks ordered by
  (remaining work, submission order, priority). An ask's alignment depends only on its
  shape and the node's free vector, and Tetris' score (alignment - eps x remaining work)
  is best, within one shape, for the ask of least remaining work: so a placement scores
  each shape once and looks at the head of its list, O(shapes), instead of scoring every
  ask. The index persists across heartbeats and is brought up to date incrementally:
  an application is re-indexed only when its asks changed (``sync`` reads the RM's feed
  of changed applications, ``ClusterView.watch_apps``), and after each of the policy's
  own placements (``placed``). The mean remaining work is kept as an exact sum (an
  integer in units of 2**-1074), so it equals ``math.fsum`` over the jobs without a walk.

Determinism: every choice is made on a total order (ties by remaining work, submission
order, priority) and sums are exactly rounded (``math.fsum``), so results do not depend
on dict order or on when the index was last synced.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from rm.policy.toolkit.tracking import Changes
from rm.policy.views import AppView, ClusterView
from treadle.messages import Ask, AskKind
from treadle.resources import Resources


class Entry(NamedTuple):
    """One indexed ask. Entries sort by (remaining work, submission order, priority), which
    is unique per ask: comparisons never reach the last two fields."""

    remaining: float
    seq: int
    priority: int
    default: bool  # a DEFAULT ask (else ALTRUISTIC)
    app_id: str


def alignment(demand: Resources, free: Resources, capacity: Resources) -> float:
    """Tetris' alignment score of ``demand`` with the node's ``free`` vector."""
    total = 0.0
    for k, v in demand.to_dict().items():  # sorted names: the same sum for equal vectors
        c = capacity.get(k)
        if c:
            total += (v / c) * (free.get(k) / c)
    return total


def _alignment_terms(
    demand: Resources, capacity: Resources
) -> tuple[tuple[str, float, float], ...]:
    """What ``alignment`` takes of ``demand`` and ``capacity``: per dimension (in its
    order), the name, demand_k / capacity_k and capacity_k."""
    out = []
    for k, v in demand.to_dict().items():
        c = capacity.get(k)
        if c:
            out.append((k, v / c, c))
    return tuple(out)


def remaining_work(asks: Iterable[Ask], capacity: Resources | None = None) -> float:
    """A job's remaining work from its asks, in resource-seconds weighted by ``capacity``
    (the cluster's; Tetris' and Carbyne's SRTF measure): the dominant share of the AM's
    ``remaining_usage`` hint, in seconds of the whole cluster. An AM that sends no usage is
    rated by its ``remaining_work`` hint (task-seconds), else by the task-seconds asked for
    (count x expected duration), else by the count, each weighted by its demand's dominant
    share, so that jobs with and without the hint compare. Without a capacity, unweighted."""
    return _remaining_work(asks, capacity, None)


def _remaining_work(
    asks: Iterable[Ask], capacity: Resources | None, shares: dict[Resources, float] | None
) -> float:
    """``remaining_work``; ``shares`` (if given) keeps each demand's dominant share of
    ``capacity`` from call to call (the caller empties it when the capacity changes)."""
    asks = list(asks)
    if capacity is not None and capacity.is_zero():
        capacity = None
    usage = next((a.remaining_usage for a in asks if a.remaining_usage), None)
    if usage and capacity is not None:
        return usage.dominant_share(capacity)
    hint = work = tasks = weight = 0.0
    for a in asks:
        if a.remaining_work > hint and math.isfinite(a.remaining_work):
            hint = a.remaining_work
        if capacity is None:
            w = 1.0
        elif shares is None:
            w = a.resources.dominant_share(capacity)
        else:
            w = shares.get(a.resources, -1.0)
            if w < 0:
                w = shares[a.resources] = a.resources.dominant_share(capacity)
        weight = max(weight, w)
        if a.expected_duration_s > 0 and math.isfinite(a.expected_duration_s):
            work += a.count * a.expected_duration_s * w
        tasks += a.count * w
    if hint:
        return hint * (weight or 1.0)
    return work or tasks


@dataclass(slots=True)
class _Indexed:
    app: AppView
    asks: Sequence[Ask]  # the ``sorted_asks()`` seen last
    sig: tuple[object, ...]  # what the entries depend on
    remaining: float
    entries: list[tuple[Resources, Entry]]


#: Floats are integer multiples of 2**-1074: sums of them in that unit are exact.
_UNIT_BITS = 1074


def _exact(x: float) -> int:
    """``x`` in units of 2**-1074, exactly (``x`` finite)."""
    n, d = x.as_integer_ratio()  # d is a power of two, at most 2**1074
    return n << (_UNIT_BITS + 1 - d.bit_length())


class AskIndex:
    """Pending asks by demand shape; see the module docstring."""

    def __init__(self) -> None:
        self.by_shape: dict[Resources, list[Entry]] = {}
        self.apps: dict[str, _Indexed] = {}
        self._changes = Changes()
        self._sum = 0  # of the indexed jobs' remaining work, exact (``_exact``)
        self._inexact = 0  # indexed jobs whose remaining work is not finite
        #: The cluster's capacity, weighting remaining work (as of the last sync).
        self.capacity: Resources | None = None
        self._shares: dict[Resources, float] = {}  # demands' dominant shares of capacity
        #: Per node capacity, per shape: ``_alignment_terms``.
        self._terms: dict[Resources, dict[Resources, tuple[tuple[str, float, float], ...]]] = {}

    def sync(self, cluster: ClusterView) -> list[AppView] | None:
        """Re-index the applications whose asks changed since they were last seen; drop
        the ones with nothing pending. Returns the applications that changed since the
        last sync (asks or allocation, or ended), or None when every pending application
        was looked at (the first sync, a cluster without the RM's feed, or a new
        capacity). O(changed applications)."""
        cap = cluster.capacity
        if cap is not self.capacity and cap != self.capacity:
            self._shares.clear()
        self.capacity = cap
        changed = self._changes.take(cluster)
        apps = self.apps
        if changed is None:
            pending = cluster.pending_apps()
            for app in pending:
                self._look(app)
            if len(apps) > len(pending):
                live = {a.app_id for a in pending}
                for app_id in [i for i in apps if i not in live]:
                    self.remove(app_id)
            return None
        running = cluster.apps
        for app in changed:
            if app.pending > 0 and app.app_id in running:
                self._look(app)
            else:
                self.remove(app.app_id)
        return changed

    def _look(self, app: AppView) -> None:
        rec = self.apps.get(app.app_id)
        # The RM rebuilds the list on every change and asks are immutable: the same
        # list is the same asks (else update() compares what the entries depend on).
        if rec is not None and rec.asks is app.sorted_asks():
            rec.app = app
        else:
            self.update(app)

    def update(self, app: AppView) -> None:
        """Re-index ``app`` from its current asks."""
        asks = app.sorted_asks()
        if not asks:
            self.remove(app.app_id)
            return
        r = _remaining_work(asks, self.capacity, self._shares)
        sig = (r, *((a.priority, a.resources, a.kind) for a in asks))
        rec = self.apps.get(app.app_id)
        if rec is not None:
            rec.app, rec.asks = app, asks
            if rec.sig == sig:
                return  # only counts changed: the entries stand
            self._drop(rec)
            self._count(rec.remaining, -1)
        entries = []
        for a in asks:
            e = Entry(r, app.seq, a.priority, a.kind is AskKind.DEFAULT, app.app_id)
            lst = self.by_shape.get(a.resources)
            if lst is None:
                lst = self.by_shape[a.resources] = []
            insort(lst, e)
            entries.append((a.resources, e))
        self.apps[app.app_id] = _Indexed(app, asks, sig, r, entries)
        self._count(r, 1)

    def placed(self, app_id: str, cluster: ClusterView) -> AppView | None:
        """Re-index ``app_id`` after one of its asks got a container (the RM applied it
        already); drop it if it has left. Returns the application, if still running."""
        app = cluster.apps.get(app_id)
        if app is None:
            self.remove(app_id)
        else:
            self.update(app)
        return app

    def remove(self, app_id: str) -> None:
        rec = self.apps.pop(app_id, None)
        if rec is not None:
            self._drop(rec)
            self._count(rec.remaining, -1)

    def _count(self, remaining: float, sign: int) -> None:
        if math.isfinite(remaining):
            self._sum += sign * _exact(remaining)
        else:
            self._inexact += sign

    def _drop(self, rec: _Indexed) -> None:
        for shape, e in rec.entries:
            lst = self.by_shape[shape]
            del lst[bisect_left(lst, e)]
            if not lst:
                del self.by_shape[shape]

    def mean_remaining(self) -> float:
        """Mean remaining work of the indexed jobs (> 0 when any is indexed)."""
        n = len(self.apps)
        if not n:
            return 1.0
        if self._inexact:
            return math.fsum(r.remaining for r in self.apps.values()) / n
        # Integer division is correctly rounded, as fsum is: the same float.
        return (self._sum / (1 << _UNIT_BITS)) / n

    def alignments(self, free: Resources, capacity: Resources) -> dict[Resources, float]:
        """The alignment of every shape that fits in ``free`` (shapes that do not fit are
        absent, so ``shape in result`` is the fit test)."""
        terms = self._terms.get(capacity)
        if terms is None:
            if len(self._terms) > 64:  # node shapes come and go: keep a few
                self._terms.clear()
            terms = self._terms[capacity] = {}
        get = free.get
        out = {}
        for s in self.by_shape:
            if s.fits_in(free):
                t = terms.get(s)
                if t is None:
                    t = terms[s] = _alignment_terms(s, capacity)
                total = 0.0
                for k, share, c in t:  # alignment(s, free, capacity): the same floats
                    total += share * (get(k) / c)
                out[s] = total
        return out

    def tetris_weight(self, align: dict[Resources, float], weight: float) -> float:
        """eps of ``score = alignment - eps x remaining work``: ``weight`` x mean alignment
        of the fitting shapes / mean remaining work, so that both terms count alike at
        ``weight`` = 1."""
        if not align or not weight:
            return 0.0
        return weight * math.fsum(align.values()) / len(align) / self.mean_remaining()

    def heads(self, align: dict[Resources, float]) -> Iterator[tuple[float, Resources, Entry]]:
        """(alignment, shape, first entry) of each fitting shape."""
        for shape, a in align.items():
            yield a, shape, self.by_shape[shape][0]


def best_scored(cands: Iterable[tuple[float, Entry]], eps: float) -> Entry | None:
    """The entry of highest Tetris score ``alignment - eps x remaining work``; ties by
    remaining work, submission order, priority."""
    best: Entry | None = None
    best_key: tuple[float, float, int, int] | None = None
    for a, e in cands:
        key = (eps * e.remaining - a, e.remaining, e.seq, e.priority)
        if best_key is None or key < best_key:
            best, best_key = e, key
    return best


class FairWindow:
    """Tetris' fairness knob: the ``ceil((1 - f) x N)`` (at least one) of the N jobs with
    pending asks that are furthest below their fair share. Every such job's fair share is
    the same 1/N of the cluster, so the deficit 1/N - dominant share of what the job holds
    orders them by dominant share (lowest first), ties by submission order. Kept sorted
    while placing and across heartbeats: a change moves only the job that changed
    (``charged``), O(log N), and at most two jobs in or out of the window; ``contains``
    is O(1). With ``track_moves``, ``take_moved()`` names the jobs that came in or went
    out since it was last called (for a caller that indexes the window's asks)."""

    def __init__(
        self, apps: Sequence[AppView], capacity: Resources, f: float, *, track_moves: bool = False
    ) -> None:
        self.capacity = capacity
        self.f = f
        self.keys = {a.app_id: (a.allocated.dominant_share(capacity), a.seq) for a in apps}
        self.order = sorted((k, i) for i, k in self.keys.items())
        self.size = self._size(len(self.order))
        self._in = {i for _, i in self.order[: self.size]}
        self._moved: list[str] | None = [] if track_moves else None

    def _size(self, n: int) -> int:
        # The epsilon keeps float dust from adding a job: (1 - 0.1) x 10 is 9.000000000000002.
        return max(1, math.ceil((1.0 - self.f) * n - 1e-9)) if n else 0

    @property
    def members(self) -> set[str]:
        """The ids of the jobs considered."""
        return set(self._in)

    def contains(self, app_id: str) -> bool:
        """Whether ``app_id`` is one of the jobs considered."""
        return app_id in self._in

    def take_moved(self) -> list[str]:
        """The jobs that came into the window or left it since the last call."""
        moved = self._moved
        if moved is None:
            raise ValueError("FairWindow(track_moves=True) tracks moves")
        self._moved = []
        return moved

    def _move(self, app_id: str, inside: bool) -> None:
        if inside:
            self._in.add(app_id)
        else:
            self._in.discard(app_id)
        if self._moved is not None:
            self._moved.append(app_id)

    def charged(self, app: AppView, pending: bool) -> None:
        """``app`` got a container or changed (``pending``: it asks for more)."""
        order, app_id = self.order, app.app_id
        old = self.keys.pop(app_id, None)
        if old is not None:
            i = bisect_left(order, (old, app_id))
            del order[i]
            if i < self.size:  # it leaves; the first one behind the window comes in
                self._move(app_id, False)
                if self.size <= len(order):
                    self._move(order[self.size - 1][1], True)
        if pending:
            key = self.keys[app_id] = (app.allocated.dominant_share(self.capacity), app.seq)
            j = bisect_left(order, (key, app_id))
            order.insert(j, (key, app_id))
            if j < self.size:  # it comes in; the last one of the window goes out
                self._move(app_id, True)
                if self.size < len(order):
                    self._move(order[self.size][1], False)
        size = self._size(len(order))
        for k in range(size, self.size):  # the window shrank
            if k < len(order):
                self._move(order[k][1], False)
        for k in range(self.size, size):  # it grew
            self._move(order[k][1], True)
        self.size = size

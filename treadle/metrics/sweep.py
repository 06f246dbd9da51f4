"""An event file's spans in span order, a chunk at a time, from a second pass over it.

The first pass (``treadle.metrics.logfile``) leaves, per batch of rows, the smallest time of
the batches after it: the *watermark*, below which no row read later can fall. The second
pass keeps a table of the containers not yet decided, O(the running work): per container
(its job and a 64-bit hash of its id, as in ``logfile``) its earliest allocation and end
so far. After each batch, a container whose end (clipped to the horizon) is at most the
watermark is decided: no later row can change it, so its span is final, and its key is
kept (8 bytes) so that later rows of it change nothing, as the whole table's rules say
(the earliest allocation and the earliest end win). Decided spans are handed on once no
container still open can come before them in span order, (start, end, job, container):
those whose start is below both the watermark and every open container's start.

So the spans come out exactly as ``scan.scan`` of the whole table orders them, in any row
order; what is held is the open containers and the spans that ended after the oldest of
them started. A container that runs for most of the trace holds back every span that
starts after it: the memory then grows with the trace again, until it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from treadle import event_columns as ec, events as ev
from treadle.c_heap import release_free_heap
from treadle.metrics.scan import (
    SPAN_CHUNK,
    FloatArray,
    IntArray,
    ObjArray,
    Spans,
    _first_per_group,
    _strings,
)

U64 = npt.NDArray[np.uint64]
#: Batches between two hand-backs of the freed heap (``treadle.c_heap``): a few ms each.
RELEASE_EVERY = 16
ENDS = (ev.CONTAINER_FINISHED, ev.CONTAINER_RELEASED)
_P = 0x9E3779B97F4A7C15  # odd: invertible modulo 2**64
_P_INV = pow(_P, -1, 1 << 64)
_JOB_MIX = np.uint64(0xC2B2AE3D27D4EB4F)
_LEN_MIX = np.uint64(0x165667B19E3779F9)


#: Strings hashed at once: the work arrays are 32 bytes per byte of them.
HASH_STRINGS = 4096


def id_hashes(strings: pa.Array) -> U64:
    """A 64-bit polynomial hash of each (non-null) string, sum of (byte + 1) * P**i over
    its bytes, mixed with its length; vectorized over the array's buffers, a slice of
    ``HASH_STRINGS`` at a time (a row group's dictionary has one id per container)."""
    if len(strings) <= HASH_STRINGS:
        return _hashes(strings)
    parts = [_hashes(strings.slice(i, HASH_STRINGS)) for i in range(0, len(strings), HASH_STRINGS)]
    return np.concatenate(parts)


def _hashes(strings: pa.Array) -> U64:
    arr = strings.cast(pa.large_string())
    n = len(arr)
    if n == 0:
        return np.zeros(0, np.uint64)
    bufs = arr.buffers()
    off = np.frombuffer(bufs[1], np.int64)[arr.offset : arr.offset + n + 1]
    data = np.frombuffer(bufs[2], np.uint8)[off[0] : off[-1]] if bufs[2] is not None else None
    off = off - off[0]
    nbytes = int(off[-1])
    csum = np.zeros(nbytes + 1, np.uint64)
    inv = np.ones(nbytes + 1, np.uint64)
    if nbytes and data is not None:
        with np.errstate(over="ignore"):
            pw = np.cumprod(np.full(nbytes, _P, np.uint64))
            csum[1:] = np.cumsum((data.astype(np.uint64) + np.uint64(1)) * pw)
            inv[1:] = np.cumprod(np.full(nbytes, _P_INV, np.uint64))
    with np.errstate(over="ignore"):
        h: U64 = (csum[off[1:]] - csum[off[:-1]]) * inv[off[:-1]]
        h ^= np.diff(off).astype(np.uint64) * _LEN_MIX
    return h


@dataclass
class ContainerKeys:
    """Jobs numbered as first met in the file, and each container's key: its id's hash
    mixed with its job's number. Both passes number the same jobs the same way."""

    jobs: dict[str, int] = field(default_factory=dict)  # job id -> its number
    _hashed: tuple[pa.Array, U64] | None = None

    def job_index(self, dictionary: pa.Array) -> IntArray:
        """The number of each job of a batch's dictionary (one more, -1, for null codes)."""
        out = np.empty(len(dictionary) + 1, np.int64)
        for i, j in enumerate(dictionary.to_pylist()):
            out[i] = self.jobs.setdefault(str(j), len(self.jobs))
        out[-1] = -1
        return out

    def keys(self, table: pa.Table) -> tuple[IntArray, U64, IntArray, pa.Array]:
        """Per row: its job's number (-1 for none), its container's key, the container's
        code in the batch's dictionary (-1 for none), and that dictionary."""
        jcode, jdict = _strings(table.column("job"))
        jg = self.job_index(jdict)[jcode]
        ccode, cdict = _strings(table.column("container"))
        with np.errstate(over="ignore"):
            key = self._hashes(cdict)[np.maximum(ccode, 0)] + jg.astype(np.uint64) * _JOB_MIX
        return jg, key, ccode, cdict

    def _hashes(self, dictionary: pa.Array) -> U64:
        """The batches of one row group share their dictionary: hashed once."""
        if self._hashed is not None and self._hashed[0].equals(dictionary):
            return self._hashed[1]
        h = id_hashes(dictionary)
        self._hashed = (dictionary, h)
        return h

    def ranks(self) -> IntArray:
        """Each job number's rank by its id (Python's order of str)."""
        names = sorted(self.jobs, key=self.jobs.__getitem__)
        rank = np.empty(len(names), np.int64)
        rank[np.argsort(np.asarray(names, dtype=object), kind="stable")] = np.arange(len(names))
        return rank


class KeySet:
    """A growing set of 64-bit keys: one sorted array and a few small ones merged into it
    as they grow (each merge at least a quarter of it: O(n log n) in all)."""

    def __init__(self) -> None:
        self._big: U64 = np.empty(0, np.uint64)
        self._small: list[U64] = []
        self._n_small = 0

    def __len__(self) -> int:
        return len(self._big) + self._n_small

    def contains(self, keys: U64) -> npt.NDArray[np.bool_]:
        out = np.zeros(len(keys), dtype=bool)
        for part in (self._big, *self._small):
            if len(part):
                pos = np.minimum(np.searchsorted(part, keys), len(part) - 1)
                out |= part[pos] == keys
        return out

    def add(self, keys: U64) -> None:
        if not len(keys):
            return
        self._small.append(np.sort(keys))
        self._n_small += len(keys)
        if len(self._small) > 8 or self._n_small > max(1 << 16, len(self._big) // 4):
            self._big = np.sort(np.concatenate([self._big, *self._small]))
            self._small, self._n_small = [], 0


@dataclass
class _Open:
    """The containers not yet decided, by key (sorted): the earliest allocation and end
    met so far (inf for none), the allocation's resources, the job, the container id."""

    key: U64
    a: FloatArray
    e: FloatArray
    res: FloatArray
    job: IntArray
    cid: ObjArray

    @staticmethod
    def empty(nres: int) -> _Open:
        return _Open(np.empty(0, np.uint64), np.empty(0), np.empty(0), np.empty((0, nres)),
                     np.empty(0, np.int64), np.empty(0, dtype=object))  # fmt: skip

    def find(self, keys: U64) -> tuple[IntArray, npt.NDArray[np.bool_]]:
        pos = np.searchsorted(self.key, keys)
        found = pos < len(self.key)
        found[found] = self.key[pos[found]] == keys[found]
        return pos, found

    def insert(self, pos: IntArray, other: _Open) -> None:
        """Add ``other``'s containers (keys sorted, none here) at their places ``pos``."""
        for name in ("key", "a", "e", "res", "job", "cid"):
            setattr(self, name, np.insert(getattr(self, name), pos, getattr(other, name), 0))

    def take(self, keep: npt.NDArray[np.bool_]) -> _Open:
        """The containers ``keep`` selects, dropping them from here."""
        out = _Open(self.key[keep], self.a[keep], self.e[keep], self.res[keep], self.job[keep],
                    self.cid[keep])  # fmt: skip
        stay = ~keep
        self.key, self.a, self.e = self.key[stay], self.a[stay], self.e[stay]
        self.res, self.job, self.cid = self.res[stay], self.job[stay], self.cid[stay]
        return out


@dataclass(frozen=True)
class SweepPlan:
    """What the second pass needs from the first: the jobs as numbered there, each job
    number's rank and index among the facts' jobs (-1: never submitted), per batch the
    watermark after it, the horizon, the last time, the capacity."""

    jobs: dict[str, int]
    job_rank: IntArray
    job_index: IntArray
    watermarks: FloatArray
    horizon: tuple[float, float]
    last_t: float
    capacity: dict[str, float]


class Sweep:
    """The second pass (module docstring): ``feed`` each batch, in the first pass's order,
    and take the spans it hands on."""

    def __init__(self, plan: SweepPlan) -> None:
        self.plan = plan
        self.names = sorted(plan.capacity)
        self.keys = ContainerKeys(dict(plan.jobs))
        self.open = _Open.empty(len(self.names))
        self.decided = KeySet()
        self.ready: list[_Open] = []  # decided spans, their e the span's end
        self.batch = 0
        self.held_most = 0  # the most containers held at once (open and ready)

    def feed(self, table: pa.Table) -> Spans | None:
        """Take one batch; the spans now final and first in span order, if any."""
        watermark = float(self.plan.watermarks[self.batch])
        self.batch += 1
        kinds, kind_names = _strings(table.column("event"))
        code = {str(k): i for i, k in enumerate(kind_names.to_pylist())}
        is_alloc = kinds == code.get(ev.CONTAINER_ALLOCATED, -2)
        is_end = np.isin(kinds, [code[e] for e in ENDS if e in code])
        if is_alloc.any() or is_end.any():
            self._rows(table, is_alloc, is_end)
        self._decide(watermark)
        if self.batch % RELEASE_EVERY == 0:
            release_free_heap()  # the batches' decoded columns, freed
        return self._hand_on(watermark)

    def _rows(
        self, table: pa.Table, is_alloc: npt.NDArray[np.bool_], is_end: npt.NDArray[np.bool_]
    ) -> None:
        t = table.column("t").to_numpy().astype(float)
        jg, key, ccode, cdict = self.keys.keys(table)
        known = (jg >= 0) & (ccode >= 0)
        rows = np.flatnonzero(is_alloc & known)
        if len(rows):
            uniq, first = _first_per_group(key[rows], t[rows])
            rows = rows[first]
            res = np.zeros((len(rows), len(self.names)))
            have = table.schema.names
            for i, r in enumerate(self.names):
                col = ec.resource_column("resources", r)
                if col in have:
                    res[:, i] = table.column(col).take(pa.array(rows)).fill_null(0.0).to_numpy()
            cid = np.asarray(cdict.take(pa.array(ccode[rows])).to_pylist(), dtype=object)
            inf = np.full(len(rows), np.inf)
            self._merge(_Open(uniq, t[rows], inf, res, jg[rows], cid), alloc=True)
        rows = np.flatnonzero(is_end & known)
        if len(rows):
            found = np.unique(key[rows], return_index=True, return_inverse=True)
            uniq = found[0]
            first, inverse = found[1], found[2]
            e = np.full(len(uniq), np.inf)
            np.minimum.at(e, inverse, t[rows])
            n = len(uniq)
            none = np.full(n, None, dtype=object)
            orphans = _Open(uniq, np.full(n, np.inf), e, np.zeros((n, len(self.names))),
                            jg[rows][first], none)  # fmt: skip
            self._merge(orphans, alloc=False)

    def _merge(self, new: _Open, alloc: bool) -> None:
        """Allocations (earliest first: an earlier one replaces, a tie keeps the row read
        first) or ends (the earliest) of containers, of which those decided change
        nothing and those not met are added."""
        fresh = ~self.decided.contains(new.key)
        if not fresh.all():
            new = new.take(fresh)
        pos, found = self.open.find(new.key)
        at = pos[found]
        if alloc:
            earlier = new.a[found] < self.open.a[at]
            at, src = at[earlier], np.flatnonzero(found)[earlier]
            self.open.a[at], self.open.res[at], self.open.cid[at] = (
                new.a[src],
                new.res[src],
                new.cid[src],
            )
        else:
            self.open.e[at] = np.minimum(self.open.e[at], new.e[found])
        if not found.all():
            self.open.insert(pos[~found], new.take(~found))

    def _decide(self, watermark: float) -> None:
        lo, hi = self.plan.horizon
        op = self.open
        allocated = np.isfinite(op.a)
        done = np.where(allocated, np.minimum(op.e, hi) <= watermark, op.e <= watermark)
        if not done.any():
            return
        out = op.take(done)
        self.decided.add(out.key)
        spans = out.take(np.isfinite(out.a))  # the rest: ends of containers never allocated
        spans.a = np.maximum(spans.a, lo)
        spans.e = np.minimum(np.where(np.isfinite(spans.e), spans.e, self.plan.last_t), hi)
        kept = spans.take(spans.e > spans.a)
        if len(kept.key):
            self.ready.append(kept)
        self.held_most = max(
            self.held_most, len(self.open.key) + sum(len(r.key) for r in self.ready)
        )

    def _hand_on(self, watermark: float) -> Spans | None:
        """The ready spans that start before every span still to come, in span order."""
        if not self.ready:
            return None
        lo = self.plan.horizon[0]
        bound = max(watermark, lo)
        started = np.isfinite(self.open.a)
        if started.any():
            bound = min(bound, float(np.maximum(self.open.a[started], lo).min()))
        ready = self.ready[0] if len(self.ready) == 1 else _joined(self.ready)
        out = ready.take(ready.a < bound)
        self.ready = [ready] if len(ready.key) else []
        return self._ordered(out) if len(out.key) else None

    def _ordered(self, s: _Open) -> Spans:
        """The spans in (start, end, job, container) order, with their shares."""
        rank = self.plan.job_rank[s.job]
        order = np.lexsort((_tie_ranks(s.a, s.e, rank, s.cid), rank, s.e, s.a))
        res = s.res[order]
        share = np.zeros(len(order))
        for i, r in enumerate(self.names):
            share = np.maximum(share, res[:, i] / self.plan.capacity[r])
        return Spans(s.a[order], s.e[order], res, share, self.plan.job_index[s.job[order]])


def _joined(parts: list[_Open]) -> _Open:
    return _Open(*(np.concatenate([getattr(p, n) for p in parts]) for n in _Open.__annotations__))


def tied_spans(a: FloatArray, b: FloatArray, job: IntArray) -> IntArray:
    """The spans that tie with another on (start, end, job), whose container ids order
    them (the rest need not be read)."""
    order = np.lexsort((job, b, a))
    sa, sb, sj = a[order], b[order], job[order]
    same = (sa[1:] == sa[:-1]) & (sb[1:] == sb[:-1]) & (sj[1:] == sj[:-1])
    tied = np.zeros(len(a), dtype=bool)
    tied[1:] |= same
    tied[:-1] |= same
    out: IntArray = order[tied]
    return out


def _tie_ranks(a: FloatArray, b: FloatArray, job: IntArray, cid: ObjArray) -> IntArray:
    """Per span, the rank of its container id among those that tie with another on
    (start, end, job); 0 for the others."""
    out = np.zeros(len(a), np.int64)
    idx = tied_spans(a, b, job)
    ranked = sorted(range(len(idx)), key=lambda k: str(cid[idx[k]]))
    out[idx[ranked]] = np.arange(1, len(idx) + 1)
    return out


def _concat(parts: list[Spans]) -> Spans:
    return Spans(*(np.concatenate([getattr(p, n) for p in parts]) for n in Spans.__slots__))


@dataclass(frozen=True)
class StreamedSpans:
    """An event file's spans (``scan.SpanSource``): ``chunks`` sweeps the file again
    (module docstring), ``whole`` reads them all as the first pass's rules do, both with
    the jobs remapped as ``with_jobs`` said."""

    plan: SweepPlan
    batches: Callable[[], Iterator[pa.Table]]
    read_whole: Callable[[], Spans]
    remap: IntArray | None = None

    def _jobs(self, s: Spans) -> Spans:
        if self.remap is None:
            return s
        return replace(s, job=np.where(s.job >= 0, self.remap[s.job], -1))

    def whole(self) -> Spans:
        return self._jobs(self.read_whole())

    def chunks(self) -> Iterator[Spans]:
        sweep = Sweep(self.plan)
        pending: list[Spans] = []
        size = 0
        for table in self.batches():
            out = sweep.feed(table)
            if out is None:
                continue
            pending.append(out)
            size += len(out)
            if size >= SPAN_CHUNK:
                yield self._jobs(_concat(pending))
                pending, size = [], 0
        if pending:
            yield self._jobs(_concat(pending))

    def with_jobs(self, remap: IntArray) -> StreamedSpans:
        if self.remap is not None:
            remap = np.where(self.remap >= 0, remap[np.maximum(self.remap, 0)], -1)
        return replace(self, remap=remap)

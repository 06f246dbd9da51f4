"""``treadle.sim.amclock``: an AM's k-th call time without k additions, and the order of
AM calls of one instant without the loop's queue counter."""

from __future__ import annotations

import heapq

from hypothesis import given, settings, strategies as st

from treadle.sim.amclock import AmClock, AmKey

_intervals = st.sampled_from([0.01, 0.1, 0.3, 0.5, 1.0, 3.0, 0.001, 0.05, 0.37])
_starts = st.one_of(
    st.integers(0, 500_000).map(lambda ms: ms / 1000),
    st.floats(0.0, 5000.0, allow_nan=False, allow_infinity=False),
)


@settings(max_examples=200, deadline=None)
@given(h=_intervals, start=_starts, data=st.data())
def test_call_times_are_the_loops_sums(h: float, start: float, data: st.DataObject) -> None:
    n = 3000
    sums = [start]
    for _ in range(n):
        sums.append(sums[-1] + h)
    clock = AmClock(start, h, 0)
    for k in data.draw(st.lists(st.integers(0, n), min_size=1, max_size=20)):
        assert clock.time(k) == sums[k]
    k = data.draw(st.integers(0, n // 2))
    t = data.draw(st.one_of(st.sampled_from(sums[k : n - 1]), st.floats(sums[k], sums[n - 1])))
    at = data.draw(st.booleans())
    expected = next(i for i in range(k + 1, n + 1) if sums[i] > t or (at and sums[i] == t))
    assert clock.first_after(k, t, at=at) == expected


@settings(max_examples=100, deadline=None)
@given(
    h=_intervals,
    grid=st.sampled_from([0.001, 0.01, 0.1, 1.0]),
    steps=st.lists(st.integers(0, 40), min_size=2, max_size=10),
)
def test_calls_of_one_instant_run_in_queue_order(h: float, grid: float, steps: list[int]) -> None:
    """The loop's rule (a call is queued by the AM's previous call, the first by its
    submission; one counter orders what was queued) against ``AmKey``'s."""
    submits = [round(s * grid, 6) for s in steps]
    end = max(submits) + 150 * h
    heap: list[tuple[float, int, int, tuple[int, int]]] = []
    seq = 0
    for i, s in enumerate(submits):
        seq += 1
        heap.append((s, 0, seq, (i, -1)))
    heapq.heapify(heap)
    queued: list[tuple[float, int, int]] = []
    submit_seq = {}
    while heap:
        t, kind, sq, (i, k) = heapq.heappop(heap)
        if t > end:
            break
        if kind == 0:
            submit_seq[i] = sq
        else:
            queued.append((t, i, k))
        seq += 1
        heapq.heappush(heap, (t if kind == 0 else t + h, 1, seq, (i, k + 1)))
    clocks = [AmClock(s, h, submit_seq[i]) for i, s in enumerate(submits)]
    keyed = [(s, 1, AmKey(clocks[i], 0), i) for i, s in enumerate(submits)]
    heapq.heapify(keyed)
    ordered: list[tuple[float, int, int]] = []
    while keyed:
        t, _, key, i = heapq.heappop(keyed)
        if t > end:
            break
        ordered.append((t, i, key.k))
        heapq.heappush(keyed, (clocks[i].time(key.k + 1), 1, AmKey(clocks[i], key.k + 1), i))
    n = min(len(queued), len(ordered)) - len(submits)
    assert ordered[:n] == queued[:n]

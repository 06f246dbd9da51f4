"""The cyclic garbage collector around a run (``treadle sim``, each run of ``treadle
compare``).

Rule: automatic collection is paused while a workload loads (``building``) and while a run
simulates, computes its metrics and writes its files (``running``; the simulator pauses it
for its own loop already). What a run builds is nearly all long-lived and acyclic (the
workload, the cluster, the event table), so the collector, which scans the young objects
every 700 allocations and every tracked object each time the old ones grow by a quarter,
would only find that nothing is garbage. Garbage stays bounded: the loaders make almost no
cycles, and the cycles a run makes (its cluster's, once it ends) are all young when the
run ends, so the first collection after it reclaims them. When the process ends with the
run (``treadle sim``, a compare worker process: ``ends_with_run``), what the run made is
moved to the permanent generation (``gc.freeze``, constant time) instead, so that neither
a later collection nor the interpreter's exit scans it. Figures beside
``tests/benchmarks/bench_e2e.py``'s docstring.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_ends_with_run = False


def ends_with_run() -> None:
    """Declare that this process exits once its current run is done (see the module)."""
    global _ends_with_run
    _ends_with_run = True


@contextmanager
def building() -> Iterator[None]:
    """Automatic collection paused, then restored as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def running() -> Iterator[None]:
    """``building``, and at the end, in a process that ``ends_with_run``, everything
    tracked frozen (left to the exit, uncollected)."""
    with building():
        try:
            yield
        finally:
            if _ends_with_run:
                gc.freeze()

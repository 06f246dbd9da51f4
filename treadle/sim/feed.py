"""Submissions on the simulator's heap: every job of an in-memory workload at the start,
a streamed workload's (``Workload.source``) as the clock approaches them.

Submissions are keyed apart from the engine's queue counter: the workload's job ``i``
(in its order) has the key ``FIRST_KEY + 2 i``, below every key the loop gives later (a
closed-loop follower's, a heartbeat's), so submissions of one instant run in the
workload's order and before any follower of that instant, as when they were all queued
first. Whether they are queued at the start or later therefore changes nothing a run
does: a streamed run equals the whole one event for event.

A streamed workload's jobs come in submission order (``JobSource``). The heap holds the
jobs read and not yet submitted, and a marker: a submission event without a job at the
first unread job's time, keyed just below that job (``FIRST_KEY + 2 i - 1``), so it runs
after every job read (they are all submitted by then) and before the unread job and
anything that job would precede. The marker reads the next ``LOOKAHEAD_JOBS`` jobs (and
one more, to know when to run again) and queues itself again: at most
``LOOKAHEAD_JOBS + 1`` jobs are ever read ahead of the submissions. The loop treats the
marker as moot (nothing happened). A job the source cannot read (``WorkloadError``)
ends the run there: ``error`` holds it, and the jobs submitted before it are the run's.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from typing import Any

from treadle.errors import WorkloadError
from treadle.model import JobSpec, Workload
from treadle.sim.kinds import SUBMIT

FIRST_KEY = -(1 << 62)
"""The key of a workload's first job (below any key of the engine's counter)."""
LOOKAHEAD_JOBS = 256
"""Jobs read ahead of the clock at most (queued, not yet submitted)."""

Heap = list[tuple[float, int, Any, Any]]


def queue_all(heap: Heap, wl: Workload, released: set[str]) -> None:
    """Every job of an in-memory workload but the closed-loop followers (``released``)."""
    for i, job in enumerate(wl.jobs):
        if job.name not in released:
            heapq.heappush(heap, (job.submit_s, SUBMIT, FIRST_KEY + 2 * i, job))


class JobFeed:
    """The streamed workload's reader on the heap (see the module)."""

    __slots__ = ("error", "heap", "jobs", "last_s", "lookahead", "next", "read")

    def __init__(self, heap: Heap, wl: Workload, lookahead: int | None = None) -> None:
        assert wl.source is not None, "an in-memory workload is queued whole (queue_all)"
        self.heap = heap
        self.jobs: Iterator[JobSpec] = iter(wl.source)
        self.lookahead = max(1, LOOKAHEAD_JOBS if lookahead is None else lookahead)
        self.read = 0  # jobs read (and queued) so far
        self.last_s = -math.inf  # the last one's submission
        self.next: JobSpec | None = None  # the first job not yet queued
        self.error: WorkloadError | None = None

    def start(self) -> bool:
        """Read the first job and queue the marker at its time; False on an error."""
        if not self._peek():
            return False
        self._mark()
        return True

    def refill(self, t: float) -> bool:
        """The marker ran at ``t``: queue the next jobs and the marker again. False when
        the source failed (``error``): the run ends."""
        heap = self.heap
        for _ in range(self.lookahead):
            job = self.next
            if job is None:
                break
            heapq.heappush(heap, (job.submit_s, SUBMIT, FIRST_KEY + 2 * self.read, job))
            self.read += 1
            if not self._peek():
                return False
        self._mark()
        return True

    def _mark(self) -> None:
        if self.next is not None:
            key = FIRST_KEY + 2 * self.read - 1  # just below the next job's
            heapq.heappush(self.heap, (self.next.submit_s, SUBMIT, key, None))

    def _peek(self) -> bool:
        """Read the next job into ``next`` (None at the end); False on an error."""
        self.next = None
        try:
            job = next(self.jobs, None)
        except WorkloadError as e:
            self.error = e
            return False
        if job is not None and job.submit_s < self.last_s:
            self.error = WorkloadError(
                job.name,
                "submit_s",
                f"read out of submission order ({job.submit_s:g} s after a job at "
                f"{self.last_s:g} s): a streamed workload must be sorted by submit time",
            )
            return False
        if job is not None:
            self.last_s = job.submit_s
        self.next = job
        return True


def stream_error(e: WorkloadError, submitted: int) -> WorkloadError:
    """``e`` (a streamed workload's job that could not be read), saying how far the run
    got: the one line the CLI prints."""
    return WorkloadError(
        e.source,
        e.field,
        f"{e.message} (found during the run, after {submitted} job(s) were submitted; "
        "the run stopped there and its results are marked partial)",
    )

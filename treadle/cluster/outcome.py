"""How a live replay ends when it cannot finish: its timeout ran out (``ReplayTimedOut``)
or its RM went away and stayed away past ``--rm-absent-s`` (``RmLost``, issue 26 item 4).

Either way the replay hands back every result it has, so that ``treadle run`` writes
jobs.csv and summary.json before it exits non-zero: the run's records as far as they
went, and the jobs they do not cover, each marked (``NOT_SUBMITTED``: never submitted;
``UNFINISHED``: submitted, its end unknown). When the RM is lost, the records are those
of the RM's event log the driver had fetched (every ``EVENTS_EVERY_S`` during the run),
and the message names the cause: the RM's own last error line when its log is at hand
(a cluster of ``treadle cluster up``), else that it was unreachable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from treadle import events as ev
from treadle.cluster.procs import log_tail
from treadle.errors import TreadleError
from treadle.model import JobSpec

#: How often (wall s) a replay fetches the RM's new event records while it runs: what a
#: lost RM leaves the driver is at most this old.
EVENTS_EVERY_S = 2.0
#: How an RM's last words start (``treadle.live.proc.fail``, ``treadle.live.fatal``).
RM_ERROR = "python -m rm: error:"

Row = tuple[str, str, str, float, int]  # name, user, queue, due submission time, tasks


class RmUnreachable(TreadleError):
    """The RM did not answer for the whole of the replay's ``--rm-absent-s``."""


class ReplayTimedOut(TreadleError):
    """A replay ran out of time: the unfinished applications were killed (KILLED, as
    YARN's own clients do on a timeout: DistributedShell's ``-timeout`` force-kills its
    application), and ``records`` is the run's log all the same, every submitted job with
    its end; ``unsubmitted`` the jobs never submitted (their status ``NOT_SUBMITTED``);
    ``unrecorded`` the jobs submitted of which the records hold nothing (``UNFINISHED``)."""

    def __init__(
        self,
        message: str,
        records: list[ev.Record],
        unsubmitted: list[JobSpec],
        unrecorded: list[JobSpec] | None = None,
    ):
        super().__init__(message)
        self.records = records
        self.unsubmitted = unsubmitted
        self.unrecorded = unrecorded or []

    def unsubmitted_rows(self) -> list[Row]:
        """(name, user, queue, due submission time, tasks) of each job never submitted,
        as ``treadle.metrics.summary.with_unsubmitted`` takes them."""
        return self._rows(self.unsubmitted)

    def unrecorded_rows(self) -> list[Row]:
        """The same of each job submitted that the records do not show."""
        return self._rows(self.unrecorded)

    def _rows(self, jobs: list[JobSpec]) -> list[Row]:
        t0 = float(self.records[0]["t"]) if self.records else 0.0
        return [(j.name, j.user, j.queue, t0 + j.submit_s, j.tasks) for j in jobs]


class RmLost(ReplayTimedOut):
    """The RM stopped answering mid-replay and stayed away: ``records`` are those fetched
    before it went; nothing was killed (there is no RM to ask)."""


def rm_lost(
    problem: RmUnreachable,
    address: str,
    records: list[ev.Record],
    jobs: Iterable[JobSpec],
    submitted: Mapping[str, str],
    rm_log: Path | None,
) -> RmLost:
    """The ``RmLost`` of a replay whose calls to the RM at ``address`` ended in
    ``problem``: ``submitted`` maps app ids to job names, ``rm_log`` is the RM's log."""
    jobs = list(jobs)
    names = set(submitted.values())

    def named(events: tuple[str, ...]) -> set[str]:  # records name applications by id
        ids = {r.get("job") for r in records if r.get("event") in events}
        return {submitted[a] for a in ids if isinstance(a, str) and a in submitted}

    recorded = named((ev.JOB_SUBMITTED,))
    unfinished = len(jobs) - len(named((ev.JOB_FINISHED, ev.JOB_FAILED)))
    said = rm_said(rm_log) if rm_log is not None else None
    cause = f"the RM said: {said}" if said else str(problem)
    return RmLost(
        f"the RM at {address} stopped answering ({cause}); "
        f"{unfinished} of {len(jobs)} jobs unfinished",
        records,
        [j for j in jobs if j.name not in names],
        [j for j in jobs if j.name in names and j.name not in recorded],
    )


def rm_said(rm_log: Path) -> str | None:
    """The RM's last error line in its log (None: none, or no log to read)."""
    lines = [line.strip() for line in log_tail(rm_log, 200).splitlines()]
    return next((line for line in reversed(lines) if line.startswith(RM_ERROR)), None)

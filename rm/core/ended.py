"""What the RM keeps of an application once it ended, and for how long.

An ended application is kept as an ``EndedApp`` (``ClusterState.finished``): what its
reports, the REST API and the state store read (its names, state, times, progress,
attempts, diagnostics). Its job, asks, containers, done tasks and stage book go with the
``Application`` it was: an ended application's AM never registers again, so nothing reads
them. At most ``max_completed`` ended applications are kept, the first to end dropped
first (YARN's ``yarn.resourcemanager.max-completed-applications``); a dropped one is
unknown to the RM from then on, as in YARN, and its events stay in the event log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import StrEnum
from itertools import islice
from types import MappingProxyType

from treadle.messages import AppSubmission, Container
from treadle.resources import ZERO, Resources

#: YARN's default (``yarn.resourcemanager.max-completed-applications``; 1000 since
#: Hadoop 3, YARN-4464).
MAX_COMPLETED_APPLICATIONS = 1000

_NO_CONTAINERS: Mapping[str, Container] = MappingProxyType({})


class AppState(StrEnum):
    """An application's state: RUNNING until it ends as one of the others."""

    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"


class EndedApp:
    """An application that finished, failed or was killed (an ``Application``'s reads,
    without what only a running one has; ``rm.core.applications`` makes them)."""

    __slots__ = (
        "am_container",
        "am_registered",
        "app_id",
        "attempt",
        "diagnostics",
        "finish_s",
        "progress",
        "seq",
        "state",
        "submission",
        "submit_s",
        "uncounted_attempts",
    )

    # What a running application has and an ended one has not.
    awaiting_am = False
    pending = 0
    running = 0
    allocated: Resources = ZERO
    demand: Resources = ZERO
    done_tasks: tuple[tuple[int, int], ...] = ()
    containers = _NO_CONTAINERS

    def __init__(
        self,
        app_id: str,
        seq: int,
        submission: AppSubmission,
        state: AppState,
        submit_s: float,
        finish_s: float | None,
    ) -> None:
        self.app_id = app_id
        self.seq = seq
        #: Without its job (the bulk of a large submission).
        self.submission = (
            submission if submission.job is None else dataclasses.replace(submission, job=None)
        )
        self.state = state
        self.submit_s = submit_s
        self.finish_s = finish_s
        self.progress = 0.0
        self.attempt = 0
        self.diagnostics = ""
        self.am_registered = False
        self.am_container: str | None = None
        self.uncounted_attempts = 0

    @property
    def name(self) -> str:
        return self.submission.name

    @property
    def user(self) -> str:
        return self.submission.user

    @property
    def queue(self) -> str:
        return self.submission.queue

    @property
    def tasks(self) -> int:
        return self.submission.tasks

    @property
    def alone_jct_s(self) -> float | None:
        return self.submission.alone_jct_s

    @property
    def managed_am(self) -> bool:
        return self.submission.managed_am


def retain(finished: dict[str, EndedApp], max_completed: int | None) -> list[str]:
    """Drop the ended applications beyond ``max_completed`` (None: no bound), the first
    to end first (``finished`` is in the order they ended); their ids."""
    if max_completed is None or len(finished) <= max_completed:
        return []
    gone = list(islice(finished, len(finished) - max_completed))
    for app_id in gone:
        del finished[app_id]
    return gone

"""The ask-strategy API: how an ApplicationMaster turns its DAG progress into asks.

A strategy sees a read-only view of the job's progress and the share the RM last sent,
and returns one ask per (stage, kind) it wants containers for. Plugins in the
``treadle.asks`` entry-point group subclass :class:`AskStrategy`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from treadle.messages import Ask, AskKind
from treadle.model import JobSpec
from treadle.resources import Resources

#: The entry-point group of ask-strategy plugins (the registry's ``asks`` kind).
ENTRY_POINT_GROUP = "treadle.asks"


def priority_of(stage: int, kind: AskKind) -> int:
    """Asks of one stage use two priorities, so DEFAULT and ALTRUISTIC asks coexist."""
    return 2 * stage + (1 if kind is AskKind.ALTRUISTIC else 0)


def stage_of(priority: int) -> int:
    return priority // 2


def group_of(stage: int) -> int:
    """The ask group of a stage's tasks (``Ask.group``: its DEFAULT and ALTRUISTIC asks
    draw on one pool of tasks)."""
    return stage + 1


class JobProgress(Protocol):
    """What a strategy may read about its job."""

    @property
    def job(self) -> JobSpec: ...
    @property
    def share(self) -> Resources | None:
        """The entitlement the RM last sent (None if the policy sends none)."""
        ...

    @property
    def cluster(self) -> Resources: ...
    def runnable_stages(self) -> Sequence[int]:
        """Stages whose parents are all done and that still have unassigned tasks."""
        ...

    def unassigned(self, stage: int) -> int:
        """Tasks of ``stage`` waiting for a container."""
        ...

    def unassigned_durations(self, stage: int) -> Sequence[float]: ...
    def unassigned_mean_duration(self, stage: int) -> float:
        """``sum(unassigned_durations(stage)) / unassigned(stage)`` (0 without any), kept
        until the stage's unassigned tasks change."""
        ...

    def running(self, stage: int) -> int: ...
    def running_ends(self, stage: int) -> Sequence[float]:
        """When ``stage``'s running tasks are expected to end: the time the AM launched each
        plus its duration (the AM learns a container's real start only when it ends)."""
        ...

    def done(self, stage: int) -> int: ...
    @property
    def task_events(self) -> int:
        """Grows whenever a task finishes, fails, is preempted or could not be launched, so a
        strategy that caches a plan knows when to make a new one."""
        ...

    @property
    def version(self) -> int:
        """Grows whenever anything this view shows changes (a task assigned, finished,
        failed or not launched; a new share or cluster size): a strategy whose asks depend
        on its job alone may keep them until the version moves."""
        ...

    @property
    def remaining_work_s(self) -> float:
        """Task-seconds of the tasks not yet finished."""
        ...

    @property
    def remaining_usage(self) -> Resources:
        """Resource-seconds of the tasks not yet finished (duration x demand, summed)."""
        ...


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AskStrategy(ABC):
    description: ClassVar[str] = ""
    Params: ClassVar[type[BaseModel]] = NoParams
    #: The asks depend on the job's progress and share alone, never on ``now`` by
    #: itself: a simulator may then skip the calls of an AM that has nothing new.
    time_invariant: ClassVar[bool] = False
    #: The asks may depend on ``progress.share``. False (declared by the strategy; an
    #: instance may set it from its parameters) lets a simulator skip the calls of an AM
    #: that has nothing new even when the policy sends shares: the share is then all
    #: that the answer would bring, and the AM would do nothing with it.
    reads_share: bool = True

    def __init__(self, params: BaseModel | None = None) -> None:
        self.params: Any = params if params is not None else self.Params()

    @abstractmethod
    def asks(self, progress: JobProgress, now: float) -> list[Ask]:
        """The asks to send now: the total outstanding count per (stage, kind)."""

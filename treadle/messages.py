"""The messages the cores exchange, modelled on YARN's three protocols.

These are plain values: the DES passes them between cores directly and the gRPC
servicers convert them to and from protobuf. Field names follow the wire contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from treadle.frozen import slot_setters
from treadle.model import JobSpec
from treadle.resources import ZERO, Resources


class AskKind(StrEnum):
    """Carbyne's ask types: DEFAULT asks are the job's due; ALTRUISTIC asks take leftovers."""

    DEFAULT = "DEFAULT"
    ALTRUISTIC = "ALTRUISTIC"


class ContainerState(StrEnum):
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"
    KILLED = "KILLED"
    LOST = "LOST"
    PREEMPTED = "PREEMPTED"


class FinalStatus(StrEnum):
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"


# YARN's ContainerExitStatus values, so logs read the same as Hadoop's.
EXIT_SUCCESS = 0
EXIT_ABORTED = -100  # released by the RM / AM
EXIT_LOST_NODE = -100  # YARN reports a lost node as ABORTED too
EXIT_DISKS_FAILED = -101
EXIT_PREEMPTED = -102
EXIT_KILLED_BY_AM = -105  # KILLED_BY_APPMASTER
EXIT_KILLED_BY_RM = -106  # KILLED_BY_RESOURCEMANAGER
#: An AM container ending with one of these is no failure of the AM: the attempt does not
#: count towards the maximum (YARN-614; RMAppAttemptImpl.shouldCountTowardsMaxAttemptRetry).
NOT_AM_FAILURES = frozenset({EXIT_ABORTED, EXIT_DISKS_FAILED, EXIT_PREEMPTED, EXIT_KILLED_BY_RM})


@dataclass(frozen=True, slots=True)
class Ask:
    """A resource request: ``count`` containers of ``resources`` at ``priority``.

    As in YARN, the AM sends the total outstanding count for a priority each time; the RM
    replaces its table entry (count 0 removes it) and keeps those of the priorities not
    sent (the AM sends only the asks that changed: ``am.core``). ``expected_duration_s``,
    ``remaining_work`` (the job's unfinished task-seconds) and ``remaining_usage`` (its
    unfinished resource-seconds per resource: duration x demand summed over the tasks not
    yet done) are hints for estimators and SRTF-style policies.

    ``group``: asks with the same non-zero group are one pool of interchangeable tasks (a
    stage's DEFAULT and ALTRUISTIC asks). The AM counts what it has seen; containers the RM
    granted at any priority of the group since then count against the group's asks, most
    important (lowest priority number) first, so moving tasks between a stage's two asks
    never asks for them twice. 0: the ask is a group of its own.
    """

    priority: int
    resources: Resources
    count: int
    kind: AskKind = AskKind.DEFAULT
    expected_duration_s: float = 0.0
    remaining_work: float = 0.0
    remaining_usage: Resources = ZERO
    group: int = 0


_new = object.__new__
_ASK_SETTERS = slot_setters(
    Ask,
    (
        "priority",
        "resources",
        "count",
        "kind",
        "expected_duration_s",
        "remaining_work",
        "remaining_usage",
        "group",
    ),
)


def new_ask(
    priority: int,
    resources: Resources,
    count: int,
    kind: AskKind,
    expected_duration_s: float,
    remaining_work: float,
    remaining_usage: Resources,
    group: int,
) -> Ask:
    """``Ask(priority, resources, count, kind, ...)`` with every field given, without the
    dataclass's frozen ``__init__``: for the hot paths that build an ask per stage on every
    change (ask strategies, the RM's netting and blinding)."""
    prio, res, cnt, knd, dur, work, usage, grp = _ASK_SETTERS
    a: Ask = _new(Ask)
    prio(a, priority)
    res(a, resources)
    cnt(a, count)
    knd(a, kind)
    dur(a, expected_duration_s)
    work(a, remaining_work)
    usage(a, remaining_usage)
    grp(a, group)
    return a


@dataclass(frozen=True, slots=True)
class Container:
    """A grant of ``resources`` on ``node_id`` to ``app_id`` for an ask at ``priority``."""

    container_id: str
    app_id: str
    node_id: str
    priority: int
    resources: Resources
    kind: AskKind = AskKind.DEFAULT


@dataclass(frozen=True, slots=True)
class ContainerStatus:
    """What an NM reports about a container it ran."""

    container_id: str
    state: ContainerState
    exit_status: int = EXIT_SUCCESS
    start_s: float = 0.0
    finish_s: float = 0.0


@dataclass(frozen=True, slots=True)
class NodeRegistration:
    node_id: str
    resources: Resources
    rack: str = "default-rack"
    address: str = ""
    #: What the node still holds when it registers again on a resync (an RM restart).
    containers: tuple[Container, ...] = ()


@dataclass(slots=True)
class NodeHeartbeat:
    node_id: str
    seq: int
    started: list[ContainerStatus] = field(default_factory=list)
    completed: list[ContainerStatus] = field(default_factory=list)
    running: tuple[str, ...] = ()


@dataclass(slots=True)
class NodeHeartbeatResponse:
    stop: list[str] = field(default_factory=list)
    resync: bool = False
    next_interval_s: float = 1.0


@dataclass(frozen=True, slots=True)
class AppSubmission:
    name: str
    user: str
    queue: str
    tasks: int = 0
    alone_jct_s: float | None = None
    #: The job itself, handed to each AM attempt at registration (None in tests that
    #: drive the RM alone).
    job: JobSpec | None = None
    #: Run the AM in a container the RM allocates (YARN's default) instead of unmanaged.
    managed_am: bool = False
    #: The AM's ask strategy (a treadle.asks plugin) and its parameters as JSON.
    ask_strategy: str = "greedy"
    ask_params_json: str = "{}"
    #: YARN's submission-context fields treadle keeps and reports but does not schedule
    #: by: the priority (changed by the REST API's priority PUT), the application type
    #: (empty: the RM's default) and tags.
    priority: int = 0
    app_type: str = ""
    tags: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """All but the job (a state store's record: ``rm.core.state.AppRecord``)."""
        return {
            "name": self.name,
            "user": self.user,
            "queue": self.queue,
            "tasks": self.tasks,
            "alone_jct_s": self.alone_jct_s,
            "managed_am": self.managed_am,
            "ask_strategy": self.ask_strategy,
            "ask_params_json": self.ask_params_json,
            "priority": self.priority,
            "app_type": self.app_type,
            "tags": list(self.tags),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], job: JobSpec | None) -> AppSubmission:
        """``to_json``'s answer back, with ``job``; the fields a record written before
        they were kept lacks (priority, type, tags) take their defaults."""
        alone = d["alone_jct_s"]
        tags = d.get("tags", ())
        if not isinstance(tags, list | tuple):
            raise ValueError(f"tags must be a list, got {tags!r}")
        return cls(
            str(d["name"]),
            str(d["user"]),
            str(d["queue"]),
            int(d["tasks"]),
            None if alone is None else float(alone),
            job,
            bool(d["managed_am"]),
            str(d["ask_strategy"]),
            str(d["ask_params_json"]),
            int(d.get("priority", 0)),
            str(d.get("app_type", "")),
            tuple(str(t) for t in tags),
        )


@dataclass(frozen=True, slots=True)
class AmRegistration:
    """What an AM attempt learns when it registers."""

    attempt: int
    completed_tasks: tuple[tuple[int, int], ...]
    job: JobSpec | None
    user: str = ""
    queue: str = ""
    ask_strategy: str = "greedy"
    ask_params_json: str = "{}"


@dataclass(slots=True)
class AllocateRequest:
    app_id: str
    asks: list[Ask] = field(default_factory=list)
    releases: list[str] = field(default_factory=list)
    progress: float = 0.0
    #: (stage, task) pairs finished since the last call: a later attempt skips them.
    completed_tasks: list[tuple[int, int]] = field(default_factory=list)
    #: The AM attempt making the call (0: unchecked); a replaced attempt is refused.
    attempt: int = 0
    #: The id of the last response the AM received (YARN's responseId): a request that
    #: repeats it is answered with that response again, so a lost answer loses nothing.
    #: None skips the check (in-process callers that cannot lose an answer).
    response_id: int | None = None


@dataclass(slots=True)
class AllocateResponse:
    allocated: list[Container] = field(default_factory=list)
    completed: list[ContainerStatus] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    share: Resources | None = None
    cluster: Resources = ZERO
    num_nodes: int = 0
    response_id: int = 0


@dataclass(frozen=True, slots=True)
class ContainerLaunch:
    """The AM asks an NM to run a container for ``duration_s`` emulated seconds."""

    container_id: str
    app_id: str
    node_id: str
    resources: Resources
    duration_s: float

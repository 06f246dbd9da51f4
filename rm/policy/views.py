"""The read-only views a policy sees of the RM's state.

Views are protocols over the RM's state, valid only during the call that hands them out;
a policy reads them and never keeps them across calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from treadle.messages import Ask
from treadle.model import JobSpec
from treadle.resources import Resources


class NodeView(Protocol):
    @property
    def node_id(self) -> str: ...
    @property
    def rack(self) -> str: ...
    @property
    def capacity(self) -> Resources: ...
    @property
    def free(self) -> Resources: ...
    @property
    def used(self) -> Resources: ...
    @property
    def num_containers(self) -> int: ...


class AppView(Protocol):
    @property
    def app_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def user(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def submit_s(self) -> float: ...
    @property
    def job(self) -> JobSpec | None:
        """The submitted job (its DAG and task sizes), if the client sent it."""
        ...

    @property
    def seq(self) -> int:
        """Submission order (0, 1, 2, ...)."""
        ...

    @property
    def asks(self) -> Mapping[int, Ask]:
        """Outstanding asks by priority (count > 0 only)."""
        ...

    @property
    def pending(self) -> int:
        """Containers still asked for, over all priorities."""
        ...

    @property
    def demand(self) -> Resources:
        """Resources still asked for, over all priorities."""
        ...

    @property
    def allocated(self) -> Resources:
        """Resources held by the application's live containers."""
        ...

    @property
    def running(self) -> int:
        """Live containers."""
        ...

    def sorted_asks(self) -> Sequence[Ask]:
        """Outstanding asks, lowest priority number (most important) first."""
        ...

    # Stages (Spark's task sets). An ask's stage is its group - 1 (``Ask.group``; treadle's
    # AMs give each stage's asks the group stage + 1); asks with group 0 have no stage.
    def stage_of(self, priority: int) -> int | None:
        """The stage (index into ``job.stages``) of asks and containers at ``priority``,
        None if no ask at that priority named one."""
        ...

    def stage_running(self, stage: int) -> int:
        """Live containers of ``stage`` (O(the application's live containers))."""
        ...

    def stage_runnable_s(self, stage: int) -> float | None:
        """When ``stage`` became runnable: the application's submission for a stage without
        parents, else the moment the last task of its parents ended (as its NM reported
        it); for a stage the job's DAG does not place, when its first ask arrived. None:
        not runnable yet (or never asked for)."""
        ...

    def unasked_stages(self) -> Sequence[int]:
        """Stages runnable by the job's DAG whose asks have not reached the RM yet (the AM
        asks for them on its next call), in the order they became runnable."""
        ...


class QueueView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def parent(self) -> QueueView | None: ...
    @property
    def children(self) -> Sequence[QueueView]: ...
    @property
    def weight(self) -> float: ...
    @property
    def capacity(self) -> float:
        """Guaranteed fraction of the parent (0..1)."""
        ...

    @property
    def max_capacity(self) -> float:
        """Maximum fraction of the parent (0..1)."""
        ...

    @property
    def abs_capacity(self) -> float:
        """Guaranteed fraction of the whole cluster."""
        ...

    @property
    def abs_max_capacity(self) -> float: ...
    @property
    def used(self) -> Resources: ...
    @property
    def is_leaf(self) -> bool: ...


class UserView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def weight(self) -> float: ...
    @property
    def budget(self) -> float | None: ...
    @property
    def used(self) -> Resources: ...


class ClusterView(Protocol):
    @property
    def now(self) -> float: ...
    @property
    def capacity(self) -> Resources:
        """Total resources of live nodes."""
        ...

    @property
    def used(self) -> Resources: ...
    @property
    def nodes(self) -> Mapping[str, NodeView]: ...
    @property
    def apps(self) -> Mapping[str, AppView]:
        """Running applications in submission order."""
        ...

    def pending_apps(self) -> Sequence[AppView]:
        """Applications with outstanding asks, in submission order."""
        ...

    def smallest_ask(self) -> Resources | None:
        """A componentwise lower bound of every outstanding ask's resources (None when
        there is no ask): a node whose free space does not cover it can place nothing.
        Optional, as ``watch_apps``."""
        ...

    def watch_apps(self) -> dict[str, AppView]:
        """A new dict that the RM fills, from now on, with every application (by id)
        whose asks or allocation change, that starts or stops asking, or that ends (it is
        then no longer in ``apps``). The caller empties it as it reads it, so it updates
        only what changed since its last look. Optional: the helpers of ``rm.policy``
        look at every pending application on each heartbeat when a cluster lacks it (a
        test double)."""
        ...

    def watch_priorities(self) -> dict[str, set[int] | None]:
        """As ``watch_apps``, but each changed application maps to the priorities whose
        ask (its count, shape, kind or group; not its hints) or containers changed (None:
        any may have, e.g. its asks were cleared or a priority moved to another stage).
        Optional: without it, the stage-ordering helper refiles every task set of each
        changed application."""
        ...

    @property
    def queues(self) -> Mapping[str, QueueView]:
        """Every queue by name, the root included."""
        ...

    @property
    def root_queue(self) -> QueueView: ...
    @property
    def users(self) -> Mapping[str, UserView]: ...

"""The scheduling-policy API: what a plugin implements and what it may see.

A policy is called on each node heartbeat while asks are pending and yields placements
for that node. The RM applies each placement as it is yielded (so a generator sees its
own earlier placements reflected in the views), validates it first, and rejects and logs
a placement that is impossible; a policy can never corrupt cluster state.

Views are read-only protocols over the RM's state, valid only during the call. Expected
outcomes ("nothing fits") are simply "yield nothing", never exceptions.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from treadle.frozen import slot_setters
from treadle.messages import Ask, AskKind, Container, ContainerStatus
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

    @property
    def queues(self) -> Mapping[str, QueueView]:
        """Every queue by name, the root included."""
        ...

    @property
    def root_queue(self) -> QueueView: ...
    @property
    def users(self) -> Mapping[str, UserView]: ...


@dataclass(frozen=True, slots=True)
class Placement:
    """Give ``app_id`` one container for its ask at ``priority`` on the heartbeating node."""

    app_id: str
    priority: int


_new = object.__new__
_p_app, _p_prio = slot_setters(Placement, ("app_id", "priority"))


def _placement(app_id: str, priority: int) -> Placement:
    """``Placement(app_id, priority)``, faster (for the helpers' hot loops)."""
    p: Placement = _new(Placement)
    _p_app(p, app_id)
    _p_prio(p, priority)
    return p


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Policy(ABC):
    """Base class of scheduling policies.

    Subclasses set ``name``/``description``, optionally a pydantic ``Params`` model (its
    fields are the parameters users pass with ``--set key=value``; a bad value is a clear
    error at start-up), and implement ``on_node_heartbeat``. Every other hook is optional.
    """

    description: ClassVar[str] = ""
    Params: ClassVar[type[BaseModel]] = NoParams
    #: Call ``tick`` every this many emulated seconds (None: never).
    tick_interval_s: ClassVar[float | None] = None
    #: The AM ask strategy (a ``treadle.asks`` plugin) the policy is designed with, used
    #: when a run does not name one (Carbyne's RM pairs with its altruistic AMs).
    ask_strategy: ClassVar[str] = "greedy"

    def __init__(self, params: BaseModel | None = None) -> None:
        self.params: Any = params if params is not None else self.Params()

    @abstractmethod
    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterable[Placement]:
        """Placements for ``node``; applied one by one as they are yielded."""

    # Optional hooks ------------------------------------------------------------------
    def on_app_added(self, app: AppView, cluster: ClusterView) -> None:  # noqa: B027
        """An application was submitted."""

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:  # noqa: B027
        """An application finished, failed or was killed."""

    def on_container_allocated(self, container: Container, cluster: ClusterView) -> None:  # noqa: B027
        """A placement of this policy was applied."""

    def on_container_finished(  # noqa: B027
        self, container: Container, status: ContainerStatus, cluster: ClusterView
    ) -> None:
        """A container ended (completed, failed, released, lost or preempted)."""

    def shares(self, cluster: ClusterView) -> Mapping[str, Resources] | None:
        """Each application's entitlement, sent to its AM in every Allocate response."""
        return None

    def preempt(self, cluster: ClusterView) -> Sequence[str]:
        """Container ids to preempt now (called after ``tick``)."""
        return ()

    def tick(self, cluster: ClusterView) -> None:  # noqa: B027
        """Periodic work (virtual clocks, budgets), every ``tick_interval_s``."""


class SharesCache:
    """Shares recomputed at most every ``interval_s`` (YARN's FairScheduler update thread
    runs every 500 ms) and whenever invalidated (an application arrived)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._cached: tuple[float, Mapping[str, Resources]] | None = None

    def invalidate(self) -> None:
        self._cached = None

    def get(
        self, now: float, compute: Callable[[], Mapping[str, Resources]]
    ) -> Mapping[str, Resources]:
        c = self._cached
        if c is None or not c[0] <= now < c[0] + self.interval_s:
            c = self._cached = (now, compute())
        return c[1]


def fill_node(app: AppView, node: NodeView) -> Iterator[Placement]:
    """Yield placements of ``app``'s asks on ``node``, most important priority first,
    while they fit (the RM updates ``node.free`` as each one is applied)."""
    app_id = app.app_id
    for ask in app.sorted_asks():
        count = ask.count
        fits_in = ask.resources.fits_in
        priority = ask.priority
        while count > 0 and fits_in(node.free):
            yield _placement(app_id, priority)
            count -= 1


def first_fit_ask(app: AppView, free: Resources, kind: AskKind | None = None) -> Ask | None:
    """The most important outstanding ask of ``app`` that fits in ``free``."""
    for ask in app.sorted_asks():
        if (kind is None or ask.kind is kind) and ask.resources.fits_in(free):
            return ask
    return None


class OrderingPolicy(Policy):
    """Helper for the many policies that are an order over applications.

    Implement ``sort_key``; placement is first-fit in that order. With ``resort = False``
    (FIFO, SJF) the order is computed once per heartbeat and each application is filled
    before the next; with ``resort = True`` (fair-share policies whose key depends on
    usage) the key is recomputed after every placement, one container at a time.
    """

    resort: ClassVar[bool] = False

    @abstractmethod
    def sort_key(self, app: AppView, cluster: ClusterView) -> Any:
        """Smaller keys are served first."""

    def eligible(self, app: AppView, cluster: ClusterView) -> bool:
        """Whether ``app`` may receive a container now (e.g. below a queue's maximum)."""
        return True

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        if type(self).eligible is OrderingPolicy.eligible:
            apps = list(cluster.pending_apps())  # every application is eligible
        else:
            apps = [a for a in cluster.pending_apps() if self.eligible(a, cluster)]
        if not apps:
            return
        if not self.resort:
            sort_key = self.sort_key
            apps.sort(key=lambda a: sort_key(a, cluster))
            for app in apps:
                yield from fill_node(app, node)
            return
        heap = [(self.sort_key(a, cluster), a.seq, a) for a in apps]
        heapq.heapify(heap)
        while heap:
            _, seq, app = heapq.heappop(heap)
            ask = first_fit_ask(app, node.free)
            if ask is None:
                continue  # nothing of this app fits this node any more
            yield _placement(app.app_id, ask.priority)
            if app.pending and self.eligible(app, cluster):
                heapq.heappush(heap, (self.sort_key(app, cluster), seq, app))

"""The policy base class, its parameters and its decision.

A policy is called on each node heartbeat while asks are pending and yields placements
for that node. The RM applies each placement as it is yielded (so a generator sees its
own earlier placements reflected in the views), validates it first, and rejects and logs
a placement that is impossible; a policy can never corrupt cluster state. Expected
outcomes ("nothing fits") are simply "yield nothing", never exceptions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, cast, get_args, get_origin

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypeVar

from rm.policy.accounts import AccountBook
from rm.policy.views import AppView, ClusterView, NodeView
from treadle.frozen import slot_setters
from treadle.messages import Container, ContainerStatus
from treadle.resources import Resources


@dataclass(frozen=True, slots=True)
class Placement:
    """Give ``app_id`` one container for its ask at ``priority`` on the heartbeating node.

    ``Placement(app_id, priority)`` and ``placement(app_id, priority)`` make the same
    value; a policy's hot loop uses ``placement``, which skips the frozen dataclass's
    ``__init__``."""

    app_id: str
    priority: int


_new = object.__new__
_p_app, _p_prio = slot_setters(Placement, ("app_id", "priority"))


def placement(app_id: str, priority: int) -> Placement:
    """``Placement(app_id, priority)``, faster: the slots are set directly (a frozen
    dataclass's ``__init__`` goes through ``object.__setattr__`` per field, which costs
    more than the allocation). Equal to, and of the same class as, the constructor's."""
    p: Placement = _new(Placement)
    _p_app(p, app_id)
    _p_prio(p, priority)
    return p


#: The former private name of ``placement`` (plugins written before it was public).
_placement = placement


class PolicyLog(Protocol):
    """What a policy may write to the run's event log (the RM hands it over with
    ``Policy.log_to``): records of its own decisions, at emulated time ``t``."""

    def job_estimated(
        self, t: float, job: str, estimate_s: float, position: int, ratio: float | None, pilots: int
    ) -> None:
        """The policy's estimator sized ``job``: ``estimate_s`` task-seconds, priority
        ``position`` (0: highest), after ``pilots`` pilot tasks (``ratio``: their sampling
        ratio; None when it did not sample)."""

    def job_queue_changed(self, t: float, job: str, from_position: int, to_position: int) -> None:
        """``job`` moved between priority positions."""


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: A policy's parameters: a pydantic model. Covariant (parameters are read-only), so that
#: ``Policy[DrfParams]`` is a ``Policy``; a bare ``Policy`` is ``Policy[BaseModel]``.
P = TypeVar("P", bound=BaseModel, covariant=True, default=BaseModel)


class Policy(ABC, Generic[P]):
    """Base class of scheduling policies, generic over their parameters.

    ``class MyPolicy(Policy[MyParams])``: ``MyParams`` is a pydantic model whose fields are
    the parameters users pass with ``--set key=value`` (a bad value is a clear error at
    start-up), and ``self.params`` is a ``MyParams``. ``Params`` is set from the type
    argument (a class may still set ``Params`` itself, as plugins written before the
    generic base do; with a type argument too, it must be that model or a subclass).
    Subclasses set ``description`` and implement ``on_node_heartbeat``; every other hook
    is optional.
    """

    #: The name the policy is registered under (set when the registry builds it; the
    #: class name otherwise).
    name: str
    description: ClassVar[str] = ""
    #: The parameters' model (from the type argument unless the class sets it).
    Params: ClassVar[type[BaseModel]] = NoParams
    #: Call ``tick`` every this many emulated seconds (None: never). A class attribute
    #: that an instance may set from its parameters (Dynamic Priority's ``interval_s``);
    #: hosts read it from the instance.
    tick_interval_s: float | None = None
    #: The AM ask strategy (a ``treadle.asks`` plugin) the policy is designed with, used
    #: when a run does not name one (Carbyne's RM pairs with its altruistic AMs).
    ask_strategy: ClassVar[str] = "greedy"
    #: The policy reads true task durations: the submitted job's (``AppView.job``) and
    #: the asks' hints (``expected_duration_s``, ``remaining_work``, ``remaining_usage``).
    #: The RM zeroes them in what it shows a policy that does not use an oracle.
    oracle: ClassVar[bool] = False

    params: P

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__
        model = _params_argument(cls)
        if model is None:
            return
        declared = cls.__dict__.get("Params")
        if declared is None:
            cls.Params = model
        elif not (isinstance(declared, type) and issubclass(declared, model)):
            raise TypeError(f"{cls.__qualname__}.Params must be {model.__qualname__} or a subclass")

    def __init__(self, params: P | None = None) -> None:
        if params is None:
            params = cast(P, self.Params())  # Params is P's model (``__init_subclass__``)
        elif not isinstance(params, self.Params):
            raise TypeError(
                f"{type(self).__qualname__} takes {self.Params.__qualname__}, "
                f"not {type(params).__qualname__}"
            )
        self.params = params

    @abstractmethod
    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterable[Placement]:
        """Placements for ``node``; applied one by one as they are yielded."""

    def uses_oracle(self) -> bool:
        """Whether the RM shows this policy true durations (``oracle``; a policy whose
        answer depends on its parameters, e.g. its estimator, overrides this)."""
        return self.oracle

    def shuffles_tasks(self) -> bool:
        """Whether AMs should run each stage's tasks in a seeded random order (so that the
        first containers a job gets, its pilot tasks, are a uniform sample of its tasks)
        rather than in index order."""
        return False

    # Optional hooks ------------------------------------------------------------------
    def on_start(self, cluster: ClusterView) -> None:
        """The RM was built (called once, before any other hook): the cluster's queues and
        users are known; no nodes nor applications yet."""

    def on_app_added(self, app: AppView, cluster: ClusterView) -> None:
        """An application was submitted."""

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        """An application finished, failed or was killed."""

    def on_app_moved(self, app: AppView, old_queue: str, cluster: ClusterView) -> None:
        """A running application moved from ``old_queue`` to ``app.queue`` (a client's
        move; its containers' usage moved with it). By default nothing more: a policy that
        reads ``app.queue`` when it places needs no more; one that keeps state per queue
        of its own overrides this."""

    def refuse_move(self, app: AppView, queue: str, cluster: ClusterView) -> str | None:
        """Why this policy refuses to move ``app`` to leaf ``queue`` (a rule of its own, e.g.
        FairScheduler's maxRunningApps); None (the default): it takes it. Asked before
        anything moves; a refusal leaves everything as it was and the client hears why."""
        return None

    def on_container_allocated(self, container: Container, cluster: ClusterView) -> None:
        """A placement of this policy was applied."""

    def on_container_finished(
        self, container: Container, status: ContainerStatus, cluster: ClusterView
    ) -> None:
        """A container ended (completed, failed, released, lost or preempted)."""

    def shares(self, cluster: ClusterView) -> Mapping[str, Resources] | None:
        """Each application's entitlement, sent to its AM in every Allocate response."""
        return None

    def preempt(self, cluster: ClusterView) -> Sequence[str]:
        """Container ids to preempt now (called after ``tick``)."""
        return ()

    def tick(self, cluster: ClusterView) -> None:
        """Periodic work (virtual clocks, budgets), every ``tick_interval_s``."""

    def log_to(self, log: PolicyLog) -> None:
        """Where to log the policy's own records (``PolicyLog``); the RM calls it once,
        before ``on_start``. The default logs nothing."""

    def tick_books(self) -> Sequence[AccountBook]:
        """What the last ``tick`` booked per budget account (a policy with accounts); the
        RM logs each as a ``dp_account`` record right after ``tick``."""
        return ()


def _params_argument(cls: type) -> type[BaseModel] | None:
    """The parameters' model given as the type argument of ``cls``'s policy base class
    (``Policy[M]``, ``OrderingPolicy[M]``, ...), if any."""
    for base in cls.__dict__.get("__orig_bases__", ()):
        origin = get_origin(base)
        if isinstance(origin, type) and issubclass(origin, Policy):
            for arg in get_args(base)[:1]:
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    return arg
    return None

"""Read-only reports of the RM's state for its hosts (the gRPC services, the launcher,
the CLI): plain values, taken at one moment, that share nothing with the live books."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rm.core.ended import EndedApp
from rm.core.queues import Queue
from rm.core.scheduling import Scheduler
from rm.core.state import Application, AppState, ClusterState
from treadle.errors import NotFoundError
from treadle.messages import AppSubmission
from treadle.resources import ZERO, Resources


@dataclass(frozen=True, slots=True)
class AppReport:
    app_id: str
    name: str
    user: str
    queue: str
    state: str
    submit_s: float
    finish_s: float | None
    progress: float
    attempt: int
    diagnostics: str
    awaiting_am: bool
    managed_am: bool
    pending: int
    running: int


@dataclass(frozen=True, slots=True)
class ClusterReport:
    policy: str
    heartbeat_s: float
    nodes: int
    lost_nodes: int
    capacity: Resources
    used: Resources
    running_apps: int
    finished_apps: int
    pending_containers: int


def every_app(state: ClusterState) -> list[Application | EndedApp]:
    """Every application the RM knows: ended ones in the order they ended, then running
    ones in submission order."""
    return [*state.finished.values(), *state.apps.values()]


def app_report(app: Application | EndedApp) -> AppReport:
    return AppReport(
        app_id=app.app_id,
        name=app.name,
        user=app.user,
        queue=app.queue,
        state=str(app.state),
        submit_s=app.submit_s,
        finish_s=app.finish_s,
        progress=app.progress,
        attempt=app.attempt,
        diagnostics=app.diagnostics,
        awaiting_am=app.awaiting_am,
        managed_am=app.managed_am,
        pending=app.pending,
        running=app.running,
    )


def cluster_report(state: ClusterState, policy: str, heartbeat_s: float) -> ClusterReport:
    nodes = state.nodes.values()
    live = sum(1 for n in nodes if n.alive)
    return ClusterReport(
        policy=policy,
        heartbeat_s=heartbeat_s,
        nodes=live,
        lost_nodes=len(state.nodes) - live,
        capacity=state.capacity,
        used=state.used,
        running_apps=len(state.apps),
        finished_apps=len(state.finished),
        pending_containers=sum(a.pending for a in state.apps.values()),
    )


class Reports:
    """The RM's reports (``ResourceManager.reports``): YARN's ApplicationClientProtocol
    reads, and the scheduler's counts."""

    __slots__ = ("_scheduler", "_state", "heartbeat_s")

    def __init__(self, state: ClusterState, scheduler: Scheduler, heartbeat_s: float) -> None:
        self._state = state
        self._scheduler = scheduler
        self.heartbeat_s = heartbeat_s

    @property
    def policy_name(self) -> str:
        return self._scheduler.policy_name

    @property
    def rejected_placements(self) -> int:
        """Placements of the policy that the RM refused."""
        return self._scheduler.rejected_placements

    @property
    def policy_failures(self) -> int:
        """Heartbeats on which the policy raised."""
        return self._scheduler.policy_failures

    def application(self, app_id: str) -> AppReport:
        app = self._state.app(app_id)
        if app is None:
            raise NotFoundError(f"unknown application {app_id!r}")
        return app_report(app)

    def applications(self, *, awaiting_am_only: bool = False) -> list[AppReport]:
        """Ended applications in the order they ended, then running ones in submission
        order; or only running unmanaged ones whose next AM attempt has not registered."""
        st = self._state
        if awaiting_am_only:
            return [app_report(a) for a in st.apps.values() if a.awaiting_am]
        return [app_report(a) for a in every_app(st)]

    def is_running(self, app_id: str) -> bool:
        return app_id in self._state.apps

    def cluster(self) -> ClusterReport:
        return cluster_report(self._state, self.policy_name, self.heartbeat_s)


# ---------------------------------------------------------------------- the HTTP views
@dataclass(frozen=True, slots=True)
class AppDetail:
    """An application with its resources, for the RM's web services (``rm.server.http``)."""

    report: AppReport
    am_registered: bool
    am_container: str | None
    am_node: str | None
    allocated: Resources
    demand: Resources  # what its outstanding asks add up to
    share: Resources | None  # the policy's entitlement, when it sends shares
    submission: AppSubmission  # its priority, type and tags among the rest


@dataclass(frozen=True, slots=True)
class NodeReport:
    node_id: str
    rack: str
    address: str
    alive: bool
    last_heartbeat_s: float
    capacity: Resources
    used: Resources
    containers: int


@dataclass(frozen=True, slots=True)
class QueueReport:
    """A queue of the tree: its configured capacities (fractions of its parent's and of
    the cluster's), what its applications hold and ask for, and the policy's view."""

    name: str
    path: str
    weight: float
    capacity: float
    max_capacity: float
    abs_capacity: float
    abs_max_capacity: float
    used: Resources
    demand: Resources
    share: Resources | None  # the sum of its applications' entitlements (policy shares)
    apps: int  # running applications in it or below
    containers: int
    pending: int  # containers its applications still ask for
    children: tuple[QueueReport, ...]


def node_reports(state: ClusterState) -> list[NodeReport]:
    return [
        NodeReport(
            n.node_id,
            n.rack,
            n.address,
            n.alive,
            n.last_heartbeat_s,
            n.capacity,
            n.used,
            n.num_containers,
        )
        for n in state.nodes.values()
    ]


def app_details(
    state: ClusterState, share_of: Callable[[str], Resources | None]
) -> list[AppDetail]:
    """Every application (ended ones first, as ``ResourceManager.applications``);
    ``share_of`` gives a running application's entitlement under the policy."""
    out = []
    for a in every_app(state):
        running = a.state is AppState.RUNNING
        out.append(
            AppDetail(
                app_report(a),
                a.am_registered,
                a.am_container,
                _am_node(a) or None,
                a.allocated,
                a.demand if running else ZERO,
                share_of(a.app_id) if running else None,
                a.submission,
            )
        )
    return out


def _am_node(app: Application | EndedApp) -> str:
    c = app.containers.get(app.am_container or "")
    return c.node_id if c is not None else ""


def queue_reports(state: ClusterState, share_of: Callable[[str], Resources | None]) -> QueueReport:
    """The queue tree from the root, with each queue's totals over the queues below."""
    apps_in: dict[str, list[Application]] = {}
    for a in state.apps.values():
        apps_in.setdefault(a.queue, []).append(a)

    def build(q: Queue) -> QueueReport:
        kids = tuple(build(c) for c in q.children)
        own = apps_in.get(q.name, [])
        demand, share, any_share = ZERO, ZERO, False
        for a in own:
            demand = demand + a.demand
            s = share_of(a.app_id)
            if s is not None:
                share, any_share = share + s, True
        for k in kids:
            demand = demand + k.demand
            if k.share is not None:
                share, any_share = share + k.share, True
        return QueueReport(
            q.name,
            q.path,
            q.weight,
            q.capacity,
            q.max_capacity,
            q.abs_capacity,
            q.abs_max_capacity,
            q.used,
            demand,
            share if any_share else None,
            len(own) + sum(k.apps for k in kids),
            sum(a.running for a in own) + sum(k.containers for k in kids),
            sum(a.pending for a in own) + sum(k.pending for k in kids),
            kids,
        )

    return build(state.root_queue)

"""The ResourceManager core: a sans-IO state machine of nodes, applications and containers.

Every entry point takes the current emulated time ``now`` and returns a response; nothing
here touches sockets, threads or the wall clock. The simulator calls these methods
directly; the gRPC servicers call them after converting protobuf messages, then drain
``take_effects()`` (AM containers to launch, nodes to wake).

The parts, one reason to change each:

- ``rm.core.state``: nodes, applications, queues, users and the books of their usage;
- ``rm.core.pending``: the applications with outstanding asks;
- ``rm.core.netting``: asks checked whole and netted of grants the AM has not seen;
- ``rm.core.scheduling``: the policy's placements on a node's heartbeat, checked and applied;
- ``rm.core.containers``: how a container ends (completed, lost, preempted, released);
- ``rm.core.nodes``: the node tracker protocol (register, heartbeat, expiry);
- ``rm.core.applications``: submission, AM attempts and Register/Allocate/Finish;
- ``rm.core.hints``: what the simulator may ask to skip work that changes nothing;
- ``rm.core.reports``: read-only reports for hosts.

An AM container that ends fails its attempt after the rest of the call's work (the
completions of the same heartbeat, the other containers of a lost node), in one place:
``_settle``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from rm.core.accounts import Accounts
from rm.core.applications import Applications
from rm.core.containers import ContainerLifecycle
from rm.core.effects import Effects, Outbox
from rm.core.hints import SchedulingHints
from rm.core.nodes import NodeTracker
from rm.core.reports import AppReport, ClusterReport, app_report, cluster_report
from rm.core.scheduling import AM_PRIORITY, MAX_REJECTIONS_PER_HEARTBEAT, Scheduler, overridden
from rm.core.state import Application, AppRecord, AppState, ClusterState
from rm.policy import Policy
from treadle.errors import ConflictError, NotFoundError
from treadle.events import EventLog
from treadle.messages import (
    EXIT_LOST_NODE,
    EXIT_PREEMPTED,
    AllocateRequest,
    AllocateResponse,
    AmRegistration,
    AppSubmission,
    ContainerState,
    ContainerStatus,
    FinalStatus,
    NodeHeartbeat,
    NodeHeartbeatResponse,
    NodeRegistration,
)
from treadle.model import DEFAULT_QUEUE, ROOT_QUEUE, QueueSpec, UserSpec
from treadle.resources import Resources

__all__ = [
    "AM_PRIORITY",
    "MAX_REJECTIONS_PER_HEARTBEAT",
    "AppState",
    "Application",
    "ResourceManager",
]


class ResourceManager:
    """The RM core. ``policy`` decides placements; the parts keep the books."""

    def __init__(
        self,
        policy: Policy,
        *,
        queues: QueueSpec | None = None,
        users: Mapping[str, UserSpec] | None = None,
        event_log: EventLog | None = None,
        heartbeat_s: float = 1.0,
        node_expiry_s: float | None = None,
        am_expiry_s: float | None = None,
        max_am_attempts: int = 2,
        am_resources: Resources | None = None,
        policy_errors: str = "raise",
    ) -> None:
        self.policy = policy
        self.state = ClusterState(
            queues or QueueSpec(ROOT_QUEUE, children=(QueueSpec(DEFAULT_QUEUE),)), users or {}
        )
        self.log = event_log if event_log is not None else EventLog()
        self.heartbeat_s = heartbeat_s
        self._outbox = Outbox()
        st = self.state
        self.containers = ContainerLifecycle(
            st, self.log, self._outbox, overridden(policy, "on_container_finished")
        )
        self.scheduler = Scheduler(policy, st, self.log, self._outbox, policy_errors=policy_errors)
        self.nodes = NodeTracker(
            st,
            self.log,
            self.containers,
            self.scheduler,
            self._outbox,
            self._settle,
            heartbeat_s=heartbeat_s,
            expiry_s=node_expiry_s if node_expiry_s is not None else 10 * heartbeat_s,
        )
        self.apps = Applications(
            st,
            self.log,
            self.containers,
            self.scheduler,
            am_expiry_s=am_expiry_s if am_expiry_s is not None else 10 * heartbeat_s,
            max_am_attempts=max_am_attempts,
            am_resources=am_resources or Resources(vcores=1, memory_mb=1024),
        )
        #: Budget accounts' admin calls (a policy with accounts, e.g. Dynamic Priority).
        self.accounts = Accounts(st, policy, self.scheduler.policy_name)
        #: For discrete-event hosts only (see ``rm.core.hints``).
        self.hints = SchedulingHints(st, self.scheduler)
        #: A node's heartbeat: the node tracker's own method, called directly (the hottest
        #: call of all); it settles what ended in it before it returns.
        self.on_node_heartbeat: Callable[[NodeHeartbeat, float], NodeHeartbeatResponse] = (
            self.nodes.heartbeat
        )
        self._tick_books = overridden(policy, "tick_books")
        policy.log_to(self.log)  # the policy's own records (gs's job_estimated...)
        policy.on_start(st)

    # ------------------------------------------------------------------ settings
    @property
    def policy_name(self) -> str:
        return self.scheduler.policy_name

    @property
    def am_resources(self) -> Resources:
        return self.apps.am_resources

    @property
    def rejected_placements(self) -> int:
        return self.scheduler.rejected_placements

    @property
    def policy_failures(self) -> int:
        return self.scheduler.policy_failures

    # ------------------------------------------------------------------ effects
    def take_effects(self) -> Effects:
        """What the calls since the last take left for the host to do."""
        return self._outbox.take()

    def _settle(self, now: float) -> None:
        """AM containers that ended during the call fail their attempts (which may end
        their applications or ask for new AM containers)."""
        exits = self._outbox.am_exits
        while exits:
            app_id, reason, counts = exits.pop(0)
            if app_id in self.state.apps:
                self.apps.fail_attempt(app_id, reason, now, counts=counts)

    # ------------------------------------------------------------------ nodes
    def register_node(self, reg: NodeRegistration, now: float) -> None:
        """Register a node; a live node registering again is a new incarnation whose old
        containers end as lost (``NodeTracker.register``)."""
        self.nodes.register(reg, now)
        self._settle(now)

    def expire_nodes(self, now: float, grace_s: float = 0.0) -> list[str]:
        """Mark nodes silent for longer than the expiry (plus ``grace_s``: how long the
        host itself stalled lately) LOST; their containers fail."""
        lost = self.nodes.expire(now, grace_s)
        self._settle(now)
        return lost

    def lose_node(self, node_id: str, now: float) -> None:
        self.nodes.lose(node_id, now)
        self._settle(now)

    # ------------------------------------------------------------------ applications
    def submit_application(self, sub: AppSubmission, now: float) -> str:
        return self.apps.submit(sub, now)

    def register_application_master(self, app_id: str, now: float) -> AmRegistration:
        return self.apps.register_am(app_id, now)

    def on_allocate(self, req: AllocateRequest, now: float) -> AllocateResponse:
        return self.apps.allocate(req, now)

    def finish_application(
        self,
        app_id: str,
        status: FinalStatus,
        now: float,
        diagnostics: str = "",
        *,
        attempt: int = 0,
    ) -> None:
        """End an application. ``attempt`` (when given) must be the current AM attempt."""
        self.apps.finish(app_id, status, now, diagnostics, attempt)

    def fail_attempt(self, app_id: str, reason: str, now: float) -> None:
        """The current AM attempt died: kill its containers; retry or fail the application."""
        self.apps.fail_attempt(app_id, reason, now)

    def expire_am_attempts(self, now: float, grace_s: float = 0.0) -> list[str]:
        """Fail AM attempts that have not called Allocate within the expiry (plus
        ``grace_s``, as ``expire_nodes``)."""
        return self.apps.expire_attempts(now, grace_s)

    def overdue(self, now: float) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        """Nodes and AM attempts silent past their expiry that a grace (``expire_nodes``,
        ``expire_am_attempts``) still keeps: (id, last heard of) each."""
        return self.nodes.overdue(now), self.apps.overdue_attempts(now)

    def set_queue_budget(self, queue: str, budget: float, spending_rate: float) -> None:
        """An operator sets a queue's budget and spending rate (``rm.core.accounts``)."""
        self.accounts.set_queue_budget(queue, budget, spending_rate)

    # ------------------------------------------------------------------ restart
    def app_records(
        self, app_ids: Iterable[str] | None = None, done_since: Mapping[str, int] | None = None
    ) -> list[AppRecord]:
        """What the state store keeps of these applications (default: all, running or
        ended), each with its tasks done since ``done_since[app_id]`` (default: all)."""
        st = self.state
        since = done_since or {}
        if app_ids is None:
            return [AppRecord.of(a) for a in (*st.finished.values(), *st.apps.values())]
        apps = [a for a in map(st.app, app_ids) if a is not None]
        return [AppRecord.of(a, since.get(a.app_id, 0)) for a in apps]

    def restore(self, records: Iterable[AppRecord], now: float, rm_epoch: int = 1) -> None:
        """Reload the applications of a previous run of this RM (``Applications.restore``),
        before any node registers: ended ones in the order they ended, then running ones in
        submission order. ``rm_epoch`` (how many times the RM restarted) names the
        containers granted from now on."""
        if self.state.apps or self.state.finished or self.state.nodes:
            raise ConflictError("an RM restores its applications before anything else")
        recs = sorted(records, key=lambda r: r.seq)
        ended = sorted((r for r in recs if r.state is not AppState.RUNNING),
                       key=lambda r: r.finish_s or 0.0)  # fmt: skip
        for rec in (*ended, *(r for r in recs if r.state is AppState.RUNNING)):
            self.apps.restore(rec, now, rm_epoch)

    def redeliver_ended(self, ended: Iterable[tuple[str, ContainerStatus]]) -> None:
        """After a restart: the AMs of running applications hear again of these ended
        containers (``rm.server.store.ended_containers``); reports they had are ignored. A node
        resyncing with one of them (its NM had not heard that the RM logged its end) does
        not get it back (``NodeTracker.ended_before``): it ended once."""
        for app_id, status in ended:
            self.nodes.ended_before.add(status.container_id)
            app = self.state.apps.get(app_id)
            if app is not None:
                app.completed_reports.append(status)
                self.state.tell(app_id)

    def end_unrecovered(
        self, app_id: str, container_id: str, node_id: str, started: bool, now: float
    ) -> None:
        """A container of the previous run that no node reported after the restart (its
        node did not come back in time, or it never started): it ends as lost, and its
        AM, if the application runs, hears so on its next Allocate and runs the task
        again."""
        app = self.state.apps.get(app_id)
        if app is not None and container_id in app.containers:
            return  # recovered after all
        if started:
            lost = str(ContainerState.LOST)
            self.log.container_finished(now, app_id, container_id, node_id, lost, EXIT_LOST_NODE)
        else:
            self.log.container_released(now, app_id, container_id, node_id)
        if app is not None:
            status = ContainerStatus(container_id, ContainerState.LOST, EXIT_LOST_NODE, now, now)
            app.completed_reports.append(status)
            self.state.tell(app_id)

    # ------------------------------------------------------------------ policy timers
    def tick(self, now: float) -> None:
        self.state.now = now
        self.policy.tick(self.state)
        if self._tick_books is not None:
            log = self.log
            for b in self._tick_books():
                log.dp_account(
                    now,
                    b.queue,
                    b.price,
                    b.budget,
                    b.spending_rate,
                    b.share,
                    b.used,
                    b.pending,
                    b.charged,
                )
        for cid in self.policy.preempt(self.state):
            self._preempt(cid, now)
        self._settle(now)

    def preempt_container(self, container_id: str, now: float) -> bool:
        found = self._preempt(container_id, now)
        self._settle(now)
        return found

    def _preempt(self, container_id: str, now: float) -> bool:
        for node in self.state.nodes.values():
            c = node.containers.get(container_id)
            if c is not None:
                app = self.state.apps.get(c.app_id)
                queue = app.queue if app is not None else ""
                self.log.container_preempted(now, c.app_id, container_id, node.node_id, queue)
                status = ContainerStatus(
                    container_id, ContainerState.PREEMPTED, EXIT_PREEMPTED, now, now
                )
                self.containers.done(c, status, now)
                self.containers.stop_on(node, container_id)
                return True
        return False

    # ------------------------------------------------------------------ reports
    def application(self, app_id: str) -> AppReport:
        app = self.state.app(app_id)
        if app is None:
            raise NotFoundError(f"unknown application {app_id!r}")
        return app_report(app)

    def applications(self, *, awaiting_am_only: bool = False) -> list[AppReport]:
        """Ended applications in the order they ended, then running ones in submission
        order; or only running unmanaged ones whose next AM attempt has not registered."""
        st = self.state
        if awaiting_am_only:
            return [app_report(a) for a in st.apps.values() if a.awaiting_am]
        return [app_report(a) for a in (*st.finished.values(), *st.apps.values())]

    def is_running(self, app_id: str) -> bool:
        return app_id in self.state.apps

    def cluster(self) -> ClusterReport:
        return cluster_report(self.state, self.policy_name, self.heartbeat_s)

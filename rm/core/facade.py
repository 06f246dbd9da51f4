"""The ResourceManager core: a sans-IO state machine of nodes, applications and containers.

Every entry point takes the current emulated time ``now`` and returns a response; nothing
here touches sockets, threads or the wall clock. The simulator calls these methods
directly; the gRPC servicers call them after converting protobuf messages, then drain
``take_effects()`` (AM containers to launch, nodes to wake).

Its verbs are YARN's three protocols: ResourceTracker (``register_node``,
``node_heartbeat``; nodes that fall silent expire), ApplicationMasterProtocol
(``register_application_master``, ``on_allocate``, ``finish_application``) and
ApplicationClientProtocol (``submit_application``, ``finish_application`` to kill); the
reads are one object, ``reports``. The parts, one reason to change each:

- ``rm.core.state``: nodes, applications, queues, users and the books of their usage;
- ``rm.core.pending``: the applications with outstanding asks;
- ``rm.core.netting``: asks checked whole and netted of grants the AM has not seen;
- ``rm.core.scheduling``: the policy's placements on a node's heartbeat, checked and
  applied (its docstring follows one heartbeat through the core);
- ``rm.core.containers``: how a container ends (completed, lost, preempted, released);
- ``rm.core.nodes``: the node tracker protocol (register, heartbeat, expiry);
- ``rm.core.applications``: submission, AM attempts and Register/Allocate/Finish;
- ``rm.core.ended``: what is kept of an ended application, and how many are;
- ``rm.core.admission``: the queues' ACLs and the bound on the tasks the RM holds;
- ``rm.core.recovery``: the previous run's containers after a restart;
- ``rm.core.hints``: what the simulator may ask to skip work that changes nothing;
- ``rm.core.reports``: read-only reports for hosts.

An AM container that ends fails its attempt after the rest of the call's work (the
completions of the same heartbeat, the other containers of a lost node), in one place:
``Applications.settle_am_exits``, at the end of each call that may end containers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from rm.core.accounts import Accounts
from rm.core.admission import Admission
from rm.core.applications import Applications
from rm.core.containers import ContainerLifecycle
from rm.core.effects import Effects, Outbox
from rm.core.hints import SchedulingHints
from rm.core.nodes import NodeTracker
from rm.core.recovery import Recovery
from rm.core.reports import Reports, every_app
from rm.core.scheduling import MAX_REJECTIONS_PER_HEARTBEAT, Scheduler, overridden
from rm.core.state import AM_PRIORITY, Application, AppRecord, AppState, ClusterState
from rm.policy import Policy
from treadle.acl import QueueAcls, user_groups
from treadle.errors import ConflictError, InvalidRequestError
from treadle.events import EventLog
from treadle.messages import (
    AllocateRequest,
    AllocateResponse,
    AmRegistration,
    AppSubmission,
    FinalStatus,
    NodeHeartbeat,
    NodeHeartbeatResponse,
    NodeRegistration,
)
from treadle.model import DEFAULT_QUEUE, ROOT_QUEUE, QueueSpec, UserSpec
from treadle.resources import Resources
from treadle.yarnids import SIM_CLUSTER_TIMESTAMP

__all__ = [
    "AM_PRIORITY",
    "MAX_REJECTIONS_PER_HEARTBEAT",
    "AppState",
    "Application",
    "ResourceManager",
]


class ResourceManager:
    """The RM core. ``policy`` decides placements; the parts keep the books.
    ``cluster_timestamp`` (ms) names the applications it admits (YARN's ids,
    ``treadle.yarnids``): a live RM's start time, given by its host (the core reads no
    clock); by default the simulator's fixed one."""

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
        max_pending_tasks: int | None = None,
        max_completed_applications: int | None = None,
        cluster_timestamp: int = SIM_CLUSTER_TIMESTAMP,
    ) -> None:
        self.policy = policy
        tree = queues or QueueSpec(ROOT_QUEUE, children=(QueueSpec(DEFAULT_QUEUE),))
        self.state = st = ClusterState(tree, users or {})
        self.log = event_log if event_log is not None else EventLog()
        self.heartbeat_s = heartbeat_s
        self._outbox = outbox = Outbox()
        self.containers = ContainerLifecycle(
            st, self.log, outbox, overridden(policy, "on_container_finished")
        )
        self.scheduler = Scheduler(policy, st, self.log, outbox, policy_errors=policy_errors)
        self.apps = Applications(
            st,
            self.log,
            self.containers,
            self.scheduler,
            outbox,
            am_expiry_s=am_expiry_s if am_expiry_s is not None else 10 * heartbeat_s,
            max_am_attempts=max_am_attempts,
            am_resources=am_resources or Resources(vcores=1, memory_mb=1024),
            max_completed=max_completed_applications,
            cluster_ts=cluster_timestamp,
        )
        node_expiry = node_expiry_s if node_expiry_s is not None else 10 * heartbeat_s
        #: After a restart: the previous run's containers (``rm.core.recovery``).
        self.recovery = Recovery(st, self.log, expiry_s=node_expiry)
        self.nodes = NodeTracker(
            st,
            self.log,
            self.containers,
            self.scheduler,
            self.apps,
            self.recovery,
            outbox,
            heartbeat_s=heartbeat_s,
            expiry_s=node_expiry,
        )
        #: The queues' ACLs and the bound on the tasks the RM holds (``rm.core.admission``).
        acls = QueueAcls(tree, user_groups(users or {}))
        self.admission = Admission(st, acls, max_pending_tasks)
        #: Budget accounts' admin calls (a policy with accounts, e.g. Dynamic Priority).
        self.accounts = Accounts(st, policy, self.scheduler.policy_name)
        #: For discrete-event hosts only (see ``rm.core.hints``).
        self.hints = SchedulingHints(st, self.scheduler)
        #: The reads: applications, the cluster, the scheduler's counts.
        self.reports = Reports(st, self.scheduler, heartbeat_s)
        self._tick_books = overridden(policy, "tick_books")
        policy.log_to(self.log)  # the policy's own records (gs's job_estimated...)
        policy.on_start(st)

    # ------------------------------------------------------------------ settings
    @property
    def am_resources(self) -> Resources:
        return self.apps.am_resources

    @property
    def cluster_timestamp(self) -> int:
        """The cluster timestamp (ms) of the applications this RM admits."""
        return self.apps.cluster_ts

    # ------------------------------------------------------------------ effects
    def take_effects(self) -> Effects:
        """What the calls since the last take left for the host to do."""
        return self._outbox.take()

    # ------------------------------------------------------------------ nodes
    def register_node(self, reg: NodeRegistration, now: float) -> None:
        """Register a node; a live node registering again is a new incarnation whose old
        containers end as lost (``NodeTracker.register``)."""
        self.nodes.register(reg, now)

    def node_heartbeat(self, hb: NodeHeartbeat, now: float) -> NodeHeartbeatResponse:
        """A node's heartbeat: its reports applied, its scheduling pass run
        (``rm.core.scheduling``), the containers it is to stop sent back."""
        return self.nodes.heartbeat(hb, now)

    def expire_nodes(self, now: float, grace_s: float = 0.0) -> list[str]:
        """Mark nodes silent for longer than the expiry (plus ``grace_s``: how long the
        host itself stalled lately) LOST; their containers fail."""
        return self.nodes.expire(now, grace_s)

    def lose_node(self, node_id: str, now: float) -> None:
        self.nodes.lose(node_id, now)

    # ------------------------------------------------------------------ applications
    def new_application_id(self) -> str:
        """An id handed out before its submission (YARN's new-application)."""
        return self.apps.reserve_id()

    def submit_application(self, sub: AppSubmission, now: float, app_id: str = "") -> str:
        """Admit (``rm.core.admission``: the queue's ACLs, the task bound) and submit an
        application (under ``app_id`` if ``new_application_id`` handed it out); its id."""
        self.admission.check_queue(sub.user, sub.queue)
        self.admission.check(sub.tasks)
        app_id = self.apps.submit(sub, now, app_id)
        self.admission.admit(sub.tasks)
        return app_id

    def move_application(self, app_id: str, queue: str, now: float) -> str:
        """Move a running application to another leaf queue its user may submit to (the
        queue's ACLs) at ``now``; the queue it left."""
        app = self.apps.running(app_id)
        self.admission.check_queue(app.user, queue)
        return self.apps.move(app_id, queue, now)

    def set_application_priority(self, app_id: str, priority: int) -> None:
        """Change a running application's priority (YARN's updateApplicationPriority): kept
        in its submission, so reported and stored; treadle's policies do not order by it."""
        app = self.apps.running(app_id)
        if priority < 0:
            raise InvalidRequestError(f"priority must be >= 0, got {priority}")
        app.submission = dataclasses.replace(app.submission, priority=priority)

    def register_application_master(self, app_id: str, now: float) -> AmRegistration:
        return self.apps.register_am(app_id, now)

    def on_allocate(
        self, req: AllocateRequest, now: float, *, place: bool = False
    ) -> AllocateResponse:
        """An AM's call; ``place`` (live event mode): pending asks are placed on the nodes
        before it is answered, not only at their heartbeats (``NodeTracker.place_pending``:
        CapacityScheduler's asynchronous scheduling), so the answer carries the grants."""
        return self.apps.allocate(req, now, self.nodes.place_pending if place else None)

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
            return [AppRecord.of(a) for a in every_app(st)]
        apps = [a for a in map(st.app, app_ids) if a is not None]
        return [AppRecord.of(a, since.get(a.app_id, 0)) for a in apps]

    def restore(
        self, records: Iterable[AppRecord], now: float, rm_epoch: int = 1, next_seq: int = 0
    ) -> None:
        """Reload the applications of a previous run of this RM (``Applications.restore``),
        before any node registers: ended ones in the order they ended (those beyond the
        bound on ended applications dropped, ``rm.core.ended``), then running ones in
        submission order. ``rm_epoch`` (how many times the RM restarted) names the
        containers granted from now on; no id numbered below ``next_seq + 1`` is
        handed out again (a previous run did, or logged it, even if the store lacks it)."""
        if self.state.apps or self.state.finished or self.state.nodes:
            raise ConflictError("an RM restores its applications before anything else")
        recs = sorted(records, key=lambda r: r.seq)
        ended = sorted((r for r in recs if r.state is not AppState.RUNNING),
                       key=lambda r: r.finish_s or 0.0)  # fmt: skip
        for rec in (*ended, *(r for r in recs if r.state is AppState.RUNNING)):
            self.apps.restore(rec, now, rm_epoch)
        self.apps.skip_ids(next_seq)

    def take_dropped_apps(self) -> list[str]:
        """The ended applications dropped (``rm.core.ended``) since the last call."""
        return self.apps.take_dropped()

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
            self.containers.preempt(cid, now)
        self.apps.settle_am_exits(now)

    def preempt_container(self, container_id: str, now: float) -> bool:
        """Take ``container_id`` back from its application (PREEMPTED); False if no node
        holds it."""
        found = self.containers.preempt(container_id, now)
        self.apps.settle_am_exits(now)
        return found

"""The ResourceManager core: sans-IO state machine of nodes, applications and containers.

Every entry point takes the current emulated time ``now`` and returns a response; nothing
here touches sockets, threads or the wall clock. The DES calls these methods directly, the
gRPC servicers call them after converting protobuf messages.

Allocation is driven by node heartbeats (YARN's NODE_UPDATE): on each heartbeat, while
asks are pending and the node could fit one, the policy yields placements and the core
validates and applies each one. Containers granted are queued for the application's next
Allocate call, where the AM collects them together with completed containers and its share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import structlog

from rm.policy import ClusterView, Placement, Policy
from treadle import events as ev
from treadle.errors import ConflictError, InvalidRequestError, NotFoundError, PluginError
from treadle.frozen import slot_setters
from treadle.messages import (
    EXIT_ABORTED,
    EXIT_KILLED_BY_AM,
    EXIT_LOST_NODE,
    EXIT_PREEMPTED,
    AllocateRequest,
    AllocateResponse,
    AmRegistration,
    AppSubmission,
    Ask,
    Container,
    ContainerState,
    ContainerStatus,
    FinalStatus,
    NodeHeartbeat,
    NodeHeartbeatResponse,
    NodeRegistration,
)
from treadle.model import DEFAULT_QUEUE, ROOT_QUEUE, QueueSpec, UserSpec
from treadle.resources import (
    ZERO,
    Accumulator,
    Resources,
    add_to_all,
    sub_from_all,
    total,
)

log = structlog.get_logger("rm")

#: The priority of the RM's own ask for a managed AM's container (served before tasks).
AM_PRIORITY = -1

#: Stop consuming a policy's placements for one heartbeat after this many rejections.
MAX_REJECTIONS_PER_HEARTBEAT = 32


_new = object.__new__
_c_id, _c_app, _c_node, _c_prio, _c_res, _c_kind = slot_setters(
    Container, ("container_id", "app_id", "node_id", "priority", "resources", "kind")
)
_a_prio, _a_res, _a_count, _a_kind, _a_dur, _a_work, _a_usage, _a_group = slot_setters(
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
_r_stop, _r_resync, _r_interval = slot_setters(
    NodeHeartbeatResponse, ("stop", "resync", "next_interval_s")
)


def _container(
    cid: str, app_id: str, node_id: str, prio: int, res: Resources, kind: Any
) -> Container:
    """``Container(cid, app_id, node_id, prio, res, kind)``, faster."""
    c: Container = _new(Container)
    _c_id(c, cid)
    _c_app(c, app_id)
    _c_node(c, node_id)
    _c_prio(c, prio)
    _c_res(c, res)
    _c_kind(c, kind)
    return c


def _ask_with_count(ask: Ask, count: int) -> Ask:
    """``ask`` with another ``count`` (a new Ask: asks are immutable), faster."""
    a: Ask = _new(Ask)
    _a_prio(a, ask.priority)
    _a_res(a, ask.resources)
    _a_count(a, count)
    _a_kind(a, ask.kind)
    _a_dur(a, ask.expected_duration_s)
    _a_work(a, ask.remaining_work)
    _a_usage(a, ask.remaining_usage)
    _a_group(a, ask.group)
    return a


def _net_of_undelivered(asks: Sequence[Ask], undelivered: list[Container]) -> list[Ask]:
    """``asks`` less the containers granted since the AM counted them (it has not seen
    those yet). Per priority; within a group (``Ask.group``) the grants at any of its
    priorities count against its asks most important first, so an AM that moves tasks
    between a stage's asks does not get them twice (YARN-1902's over-allocation)."""
    if not undelivered:
        return list(asks)
    granted: dict[int, int] = {}
    for c in undelivered:
        granted[c.priority] = granted.get(c.priority, 0) + 1
    pooled: dict[int, int] = {}  # group -> grants at its priorities
    for ask in asks:
        if ask.group:
            pooled[ask.group] = pooled.get(ask.group, 0) + granted.get(ask.priority, 0)
    out: list[Ask] = []
    for ask in sorted(asks, key=_by_priority) if pooled else asks:
        if ask.group:
            seen = pooled[ask.group]
            take = min(seen, ask.count)
            pooled[ask.group] = seen - take
        else:
            take = min(granted.get(ask.priority, 0), ask.count)
        out.append(_ask_with_count(ask, ask.count - take) if take else ask)
    return out


def _by_priority(ask: Ask) -> int:
    return ask.priority


class AppState(StrEnum):
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"


class Node:
    """A node as the RM sees it (a NodeView for policies)."""

    __slots__ = (
        "_free",
        "address",
        "alive",
        "capacity",
        "containers",
        "last_heartbeat_s",
        "last_seq",
        "node_id",
        "rack",
        "to_stop",
    )

    def __init__(self, reg: NodeRegistration, now: float) -> None:
        self.node_id = reg.node_id
        self.rack = reg.rack
        self.address = reg.address
        self.capacity = reg.resources
        self._free = Accumulator(reg.resources)
        self.containers: dict[str, Container] = {}
        self.last_seq = -1
        self.last_heartbeat_s = now
        self.alive = True
        self.to_stop: list[str] = []

    @property
    def free(self) -> Resources:
        return self._free.value

    @property
    def used(self) -> Resources:
        return self.capacity - self._free.value

    @property
    def num_containers(self) -> int:
        return len(self.containers)


class Application:
    """An application as the RM sees it (an AppView for policies)."""

    __slots__ = (
        "_all_books",
        "_allocated",
        "_cid_prefix",
        "_sorted_asks",
        "alone_jct_s",
        "am_container",
        "am_last_seen_s",
        "am_registered",
        "app_id",
        "asks",
        "attempt",
        "books",
        "completed_reports",
        "containers",
        "diagnostics",
        "done_tasks",
        "finish_s",
        "job",
        "last_response",
        "managed_am",
        "name",
        "next_container",
        "pending",
        "progress",
        "queue",
        "response_id",
        "seq",
        "started",
        "state",
        "submission",
        "submit_s",
        "tasks",
        "undelivered",
        "user",
    )

    def __init__(self, app_id: str, seq: int, sub: AppSubmission, now: float) -> None:
        self.app_id = app_id
        self.seq = seq
        self._cid_prefix = f"container_{seq + 1:05d}_"
        self.name = sub.name
        self.user = sub.user
        self.queue = sub.queue
        self.tasks = sub.tasks
        self.alone_jct_s = sub.alone_jct_s
        self.submit_s = now
        self.state = AppState.RUNNING
        self.asks: dict[int, Ask] = {}
        self._sorted_asks: list[Ask] | None = None
        self.pending = 0
        self._allocated = Accumulator()
        #: Usage totals this app's containers count in (cluster, user, queue path).
        self.books: tuple[Accumulator, ...] = ()
        #: ``_allocated`` and ``books``: everything a container of this app counts in.
        self._all_books: tuple[Accumulator, ...] = (self._allocated,)
        self.containers: dict[str, Container] = {}
        self.undelivered: list[Container] = []
        self.completed_reports: list[ContainerStatus] = []
        self.next_container = 1
        self.started = False
        self.progress = 0.0
        self.job = sub.job
        self.submission = sub
        self.managed_am = sub.managed_am
        self.attempt = 0  # AM attempts started so far
        self.am_registered = False
        self.am_last_seen_s = now
        self.am_container: str | None = None
        self.done_tasks: dict[tuple[int, int], None] = {}  # ordered set
        self.diagnostics = ""
        self.finish_s: float | None = None
        self.response_id = 0
        self.last_response: AllocateResponse | None = None

    @property
    def allocated(self) -> Resources:
        return self._allocated.value

    @property
    def awaiting_am(self) -> bool:
        """Running, unmanaged, and no AM attempt registered: an AM host should start one."""
        return self.state is AppState.RUNNING and not self.am_registered and not self.managed_am

    @property
    def running(self) -> int:
        return len(self.containers)

    @property
    def demand(self) -> Resources:
        out = ZERO
        for a in self.asks.values():
            out = out + a.resources * a.count
        return out

    def sorted_asks(self) -> list[Ask]:
        if self._sorted_asks is None:
            self._sorted_asks = [self.asks[p] for p in sorted(self.asks)]
        return self._sorted_asks

    def set_ask(self, ask: Ask) -> None:
        old = self.asks.get(ask.priority)
        if old is not None:
            self.pending -= old.count
        if ask.count > 0:
            self.asks[ask.priority] = ask
            self.pending += ask.count
        elif old is not None:
            del self.asks[ask.priority]
        self._sorted_asks = None


class Queue:
    """A queue in the hierarchy (a QueueView for policies)."""

    __slots__ = (
        "_used",
        "abs_capacity",
        "abs_max_capacity",
        "capacity",
        "children",
        "max_capacity",
        "name",
        "parent",
        "path",
        "weight",
    )

    path: str
    abs_capacity: float
    abs_max_capacity: float

    def __init__(self, spec: QueueSpec, parent: Queue | None, capacity: float) -> None:
        self.name = spec.name
        self.parent = parent
        self.path = f"{parent.path}.{spec.name}" if parent else spec.name
        self.weight = spec.weight
        self.capacity = capacity
        self.max_capacity = spec.max_capacity / 100.0
        self.abs_capacity = capacity * (parent.abs_capacity if parent else 1.0)
        self.abs_max_capacity = self.max_capacity * (parent.abs_max_capacity if parent else 1.0)
        self._used = Accumulator()
        self.children: list[Queue] = []

    @property
    def used(self) -> Resources:
        return self._used.value

    @property
    def is_leaf(self) -> bool:
        return not self.children


class User:
    __slots__ = ("_used", "budget", "name", "weight")

    def __init__(self, spec: UserSpec) -> None:
        self.name = spec.name
        self.weight = spec.weight
        self.budget = spec.budget
        self._used = Accumulator()

    @property
    def used(self) -> Resources:
        return self._used.value


def _build_queues(root: QueueSpec) -> dict[str, Queue]:
    """Flatten the queue tree. Children without a capacity split what their siblings leave."""
    out: dict[str, Queue] = {}

    def add(spec: QueueSpec, parent: Queue | None, capacity: float) -> None:
        q = Queue(spec, parent, capacity)
        out[q.name] = q
        if parent is not None:
            parent.children.append(q)
        given = sum(c.capacity for c in spec.children if c.capacity is not None)
        unset = [c for c in spec.children if c.capacity is None]
        rest = max(0.0, 100.0 - given) / len(unset) if unset else 0.0
        for c in spec.children:
            add(c, q, (c.capacity if c.capacity is not None else rest) / 100.0)

    add(root, None, 1.0)
    return out


class ClusterState:
    """Everything the RM knows; policies see it through the read-only ClusterView protocol."""

    def __init__(self, queues: QueueSpec, users: Mapping[str, UserSpec]) -> None:
        self.now = 0.0
        self.capacity = ZERO
        self.nodes: dict[str, Node] = {}
        self.apps: dict[str, Application] = {}
        self.queues: dict[str, Queue] = _build_queues(queues)
        self.root_queue = self.queues[queues.name]
        self.users: dict[str, User] = {name: User(u) for name, u in users.items()}
        self._pending: dict[str, Application] = {}
        self._pending_sorted: list[Application] | None = None
        self._min_ask: Resources | None = None

    @property
    def used(self) -> Resources:
        return self.root_queue.used

    def pending_apps(self) -> list[Application]:
        if self._pending_sorted is None:
            self._pending_sorted = sorted(self._pending.values(), key=lambda a: a.seq)
        return self._pending_sorted


def _as_view(state: ClusterState) -> ClusterView:
    return state


def _hook(policy: Policy, name: str) -> Any:
    """``policy``'s bound hook ``name``, or None if it is the base class's no-op."""
    method = getattr(policy, name)
    if getattr(method, "__func__", None) is getattr(Policy, name):
        return None
    return method


class ResourceManager:
    """The RM core. ``policy`` decides placements; this class keeps the books."""

    def __init__(
        self,
        policy: Policy,
        *,
        queues: QueueSpec | None = None,
        users: Mapping[str, UserSpec] | None = None,
        event_log: ev.EventLog | None = None,
        heartbeat_s: float = 1.0,
        node_expiry_s: float | None = None,
        am_expiry_s: float | None = None,
        max_am_attempts: int = 2,
        am_resources: Resources | None = None,
        policy_errors: str = "raise",
    ) -> None:
        if policy_errors not in ("raise", "log"):
            raise ValueError("policy_errors must be 'raise' or 'log'")
        self.policy = policy
        self.policy_name = getattr(policy, "name", type(policy).__name__)
        # The container hooks, or None when the policy keeps the base class's no-op (the
        # hot path then skips the call).
        self._on_allocated = _hook(policy, "on_container_allocated")
        self._on_finished = _hook(policy, "on_container_finished")
        # An allocate call that changes nothing may be skipped only when answering it
        # would not call the policy either (its ``shares``).
        self._shares_hook = _hook(policy, "shares")
        self.state = ClusterState(
            queues or QueueSpec(ROOT_QUEUE, children=(QueueSpec(DEFAULT_QUEUE),)), users or {}
        )
        self.view = _as_view(self.state)
        self.log = event_log if event_log is not None else ev.EventLog()
        self.heartbeat_s = heartbeat_s
        self.node_expiry_s = node_expiry_s if node_expiry_s is not None else 10 * heartbeat_s
        self.am_expiry_s = am_expiry_s if am_expiry_s is not None else 10 * heartbeat_s
        if max_am_attempts < 1:
            raise ValueError("max_am_attempts must be >= 1")
        self.max_am_attempts = max_am_attempts
        self.am_resources = am_resources or Resources(vcores=1, memory_mb=1024)
        self._am_launches: list[Container] = []
        self._largest: Resources | None = None  # cached: see _largest_node
        self._live_nodes: int | None = None  # cached: see live_nodes
        self._policy_errors = policy_errors
        self.rejected_placements = 0
        self.policy_failures = 0
        self._app_seq = 0
        self._finished: dict[str, Application] = {}
        self._started: set[str] = set()  # containers an NM reported running
        self._version = 0  # bumped on every change that may alter shares
        #: Bumped when asks appear on an empty cluster or smaller asks arrive: nodes that
        #: could place nothing before might now (the DES wakes sleeping nodes on a change).
        self.pending_epoch = 0
        self._touched: dict[str, None] = {}  # nodes with containers to stop (ordered set)
        self._shares_cache: tuple[int, Mapping[str, Resources] | None] | None = None

    # ------------------------------------------------------------------ queries
    @property
    def has_pending(self) -> bool:
        return bool(self.state._pending)

    def could_place_on(self, node_id: str) -> bool:
        """False when no pending ask can fit the node's free resources (skip the policy).

        ``_min_ask`` is a componentwise lower bound of every pending ask: narrowed as asks
        arrive, never widened when they go, so the test can say yes wrongly (the policy
        then finds nothing) but never no wrongly."""
        st = self.state
        if not st._pending:
            return False
        node = st.nodes.get(node_id)
        if node is None or not node.alive:
            return False
        m = st._min_ask
        if m is None:
            m = self._compute_min_ask()
        return node._free.covers(m)

    def _compute_min_ask(self) -> Resources:
        st = self.state
        m: Resources | None = None
        for app in st._pending.values():
            for ask in app.asks.values():
                m = ask.resources if m is None else m.componentwise_min(ask.resources)
        st._min_ask = out = m if m is not None else ZERO
        return out

    def application(self, app_id: str) -> Application:
        app = self.state.apps.get(app_id) or self._finished.get(app_id)
        if app is None:
            raise NotFoundError(f"unknown application {app_id!r}")
        return app

    @property
    def live_nodes(self) -> int:
        if self._live_nodes is None:
            self._live_nodes = sum(1 for n in self.state.nodes.values() if n.alive)
        return self._live_nodes

    # ------------------------------------------------------------------ nodes
    def register_node(self, reg: NodeRegistration, now: float) -> None:
        st = self.state
        if reg.resources.is_zero() or reg.resources.any_negative():
            raise InvalidRequestError(f"node {reg.node_id!r}: resources must be positive")
        existing = st.nodes.get(reg.node_id)
        if existing is not None and existing.alive:
            if existing.capacity == reg.resources and existing.rack == reg.rack:
                existing.last_heartbeat_s = now
                existing.last_seq = -1  # a restarted NM counts its heartbeats from 1 again
                return  # idempotent re-registration
            raise ConflictError(f"node {reg.node_id!r} is already registered with other resources")
        # A new node, or a LOST one coming back empty (its containers were already failed).
        node = Node(reg, now)
        st.nodes[reg.node_id] = node
        self._largest = self._live_nodes = None
        st.capacity = st.capacity + node.capacity
        self._version += 1
        self.log.emit(
            now,
            ev.NODE_REGISTERED,
            node=node.node_id,
            rack=node.rack,
            resources=node.capacity.to_dict(),
        )

    def on_node_heartbeat(self, hb: NodeHeartbeat, now: float) -> NodeHeartbeatResponse:
        st = self.state
        st.now = now
        node = st.nodes.get(hb.node_id)
        if node is None or not node.alive:
            # YARN answers an unknown or expired node with RESYNC: register again.
            return NodeHeartbeatResponse(resync=True, next_interval_s=self.heartbeat_s)
        if hb.seq <= node.last_seq:
            # A duplicate or reordered heartbeat: its reports were already applied.
            return NodeHeartbeatResponse(next_interval_s=self.heartbeat_s)
        node.last_seq = hb.seq
        node.last_heartbeat_s = now
        containers = node.containers
        if hb.started:
            started = self._started
            add = self.log.add
            nid = node.node_id
            for status in hb.started:
                cid = status.container_id
                c = containers.get(cid)
                if c is not None and cid not in started:
                    started.add(cid)
                    add(
                        {
                            "t": round(float(status.start_s), 6),
                            "event": ev.CONTAINER_STARTED,
                            "job": c.app_id,
                            "container": cid,
                            "node": nid,
                        }
                    )
        if hb.completed:
            containers = node.containers
            for status in hb.completed:
                c = containers.get(status.container_id)
                if c is not None:
                    self._container_done(c, status, status.finish_s)
        if st._pending:
            m = st._min_ask
            if m is None:
                m = self._compute_min_ask()
            if node._free.covers(m):
                self._schedule(node, now)
        stop = node.to_stop
        node.to_stop = []
        resp: NodeHeartbeatResponse = _new(NodeHeartbeatResponse)  # (stop, False, interval)
        _r_stop(resp, stop)
        _r_resync(resp, False)
        _r_interval(resp, self.heartbeat_s)
        return resp

    def expire_nodes(self, now: float) -> list[str]:
        """Mark nodes silent for longer than the expiry LOST; their containers fail."""
        lost = [
            n
            for n in self.state.nodes.values()
            if n.alive and now - n.last_heartbeat_s > self.node_expiry_s
        ]
        for node in lost:
            self.lose_node(node.node_id, now)
        return [n.node_id for n in lost]

    def lose_node(self, node_id: str, now: float) -> None:
        st = self.state
        node = st.nodes.get(node_id)
        if node is None or not node.alive:
            return
        node.alive = False
        self._largest = self._live_nodes = None
        # Summed afresh rather than subtracted, so float error cannot accumulate.
        st.capacity = total([n.capacity for n in st.nodes.values() if n.alive])
        self._version += 1
        self.log.emit(now, ev.NODE_LOST, node=node_id)
        for c in list(node.containers.values()):
            if c.container_id not in node.containers:
                continue  # already ended with its failed AM attempt
            status = ContainerStatus(c.container_id, ContainerState.LOST, EXIT_LOST_NODE, now, now)
            self._container_done(c, status, now)
        node._free = Accumulator()

    # ------------------------------------------------------------------ applications
    def submit_application(self, sub: AppSubmission, now: float) -> str:
        st = self.state
        queue = st.queues.get(sub.queue)
        if queue is None:
            raise InvalidRequestError(f"unknown queue {sub.queue!r}")
        if not queue.is_leaf:
            raise InvalidRequestError(f"queue {sub.queue!r} is not a leaf queue")
        if not sub.user:
            raise InvalidRequestError("user must not be empty")
        a = sub.alone_jct_s
        if a is not None and not (math.isfinite(a) and a >= 0):
            raise InvalidRequestError(f"alone_jct_s must be a finite number >= 0, got {a}")
        if sub.user not in st.users:
            st.users[sub.user] = User(UserSpec(sub.user))
        seq = self._app_seq
        self._app_seq += 1
        app_id = f"application_{seq + 1:05d}"
        app = Application(app_id, seq, sub, now)
        app.books = self._books_of(app)
        app._all_books = (app._allocated, *app.books)
        st.apps[app_id] = app
        self._version += 1
        self.log.emit(
            now,
            ev.JOB_SUBMITTED,
            job=app_id,
            name=sub.name,
            user=sub.user,
            queue=sub.queue,
            tasks=sub.tasks,
            alone_jct_s=sub.alone_jct_s,
        )
        self.policy.on_app_added(app, self.view)
        if sub.managed_am:
            self._ask_am_container(app)
        return app_id

    # ------------------------------------------------------------------ AM attempts
    def _ask_am_container(self, app: Application) -> None:
        was_pending = app.pending > 0
        app.set_ask(Ask(AM_PRIORITY, self.am_resources, 1))
        st = self.state
        if st._min_ask is not None:
            st._min_ask = st._min_ask.componentwise_min(self.am_resources)
        self.pending_epoch += 1
        self._update_pending(app, was_pending)

    def take_am_launches(self) -> list[Container]:
        """AM containers allocated since the last call: the host must start them on their
        NMs with the AM's command line (YARN's AMLauncher)."""
        out, self._am_launches = self._am_launches, []
        return out

    def awaiting_am(self) -> list[Application]:
        """Running unmanaged applications whose next AM attempt has not registered."""
        return [a for a in self.state.apps.values() if a.awaiting_am]

    def register_application_master(self, app_id: str, now: float) -> AmRegistration:
        app = self._running_app(app_id)
        if not app.am_registered:
            app.attempt += 1
            app.am_registered = True
            app.response_id = 0
            app.last_response = None
            self.log.emit(now, ev.ATTEMPT_STARTED, job=app_id, attempt=app.attempt)
        app.am_last_seen_s = now
        return AmRegistration(
            app.attempt,
            tuple(app.done_tasks),
            app.job,
            app.user,
            app.queue,
            app.submission.ask_strategy,
            app.submission.ask_params_json,
        )

    def expire_am_attempts(self, now: float) -> list[str]:
        """Fail AM attempts that have not called Allocate within the expiry."""
        late = [
            a.app_id
            for a in self.state.apps.values()
            if a.am_registered and now - a.am_last_seen_s > self.am_expiry_s
        ]
        for app_id in late:
            self.fail_attempt(app_id, f"AM missed Allocate calls for {self.am_expiry_s:g} s", now)
        return late

    def fail_attempt(self, app_id: str, reason: str, now: float) -> None:
        """The current AM attempt died: kill its containers; retry or fail the application."""
        app = self._running_app(app_id)
        self.log.emit(now, ev.ATTEMPT_FAILED, job=app_id, attempt=app.attempt, reason=reason)
        for c in list(app.containers.values()):
            self._release(c, now, killed=True)
        was_pending = app.pending > 0
        for p in list(app.asks):
            app.set_ask(Ask(p, ZERO, 0))
        self._update_pending(app, was_pending)
        app.undelivered = []
        app.completed_reports = []
        app.am_registered = False
        app.am_container = None
        if app.attempt >= self.max_am_attempts:
            app.diagnostics = f"attempt {app.attempt} failed: {reason}"
            self.finish_application(app_id, FinalStatus.FAILED, now)
        elif app.managed_am:
            self._ask_am_container(app)

    def _running_app(self, app_id: str) -> Application:
        app = self.state.apps.get(app_id)
        if app is None:
            if app_id in self._finished:
                raise ConflictError(f"application {app_id!r} has already finished")
            raise NotFoundError(f"unknown application {app_id!r}")
        return app

    def on_allocate(self, req: AllocateRequest, now: float) -> AllocateResponse:
        st = self.state
        st.now = now
        app = self._running_app(req.app_id)
        self._check_attempt(app, req.attempt)
        app.am_last_seen_s = now
        rid = req.response_id
        if rid is not None and app.last_response is not None and rid + 1 == app.response_id:
            # The AM did not get our last answer: send it again. Releases and finished
            # tasks are idempotent and applied; asks were counted without that answer's
            # grants, so they wait for the AM's next call.
            self._apply_releases(app, req.releases, now)
            for task in req.completed_tasks:
                app.done_tasks[task] = None
            return app.last_response
        if rid is not None and rid != app.response_id:
            raise ConflictError(
                f"application {req.app_id!r}: allocate out of sync (response id "
                f"{rid}, expected {app.response_id}); register again"
            )
        self._validate_asks(req.asks)
        for task in req.completed_tasks:
            app.done_tasks[task] = None
        self._apply_releases(app, req.releases, now)
        if req.asks:
            was_pending = app.pending > 0
            for ask in _net_of_undelivered(req.asks, app.undelivered):
                app.set_ask(ask)
                m = st._min_ask
                if ask.count and m is not None:
                    narrowed = m.componentwise_min(ask.resources)
                    if narrowed is not m and narrowed != m:
                        st._min_ask = narrowed
                        self.pending_epoch += 1
            self._update_pending(app, was_pending)
            self._version += 1  # demand changed: shares may too
        app.progress = req.progress
        resp = AllocateResponse(
            allocated=app.undelivered,
            completed=app.completed_reports,
            share=self._share_of(app.app_id),
            cluster=st.capacity,
            num_nodes=self.live_nodes,
        )
        app.undelivered = []
        app.completed_reports = []
        app.response_id += 1
        resp.response_id = app.response_id
        app.last_response = resp
        return resp

    def skip_allocate(self, app_id: str, now: float) -> bool:
        """For a host whose AM would repeat its last request (same asks, nothing released
        or finished): True, and the AM counts as seen at ``now``, when answering would
        change nothing either (nothing to deliver, no policy shares to compute); False
        when the call must be made."""
        app = self.state.apps.get(app_id)
        if (
            app is None
            or app.undelivered
            or app.completed_reports
            or self._shares_hook is not None
            or not app.am_registered
            or app.last_response is None
        ):
            return False
        app.am_last_seen_s = now
        return True

    def _apply_releases(self, app: Application, releases: Sequence[str], now: float) -> None:
        for cid in releases:
            c = app.containers.get(cid)
            if c is not None and cid != app.am_container:
                self._release(c, now)

    def _check_attempt(self, app: Application, attempt: int) -> None:
        if not app.am_registered:
            raise ConflictError(f"application {app.app_id!r} has no registered AM attempt")
        if attempt and attempt != app.attempt:
            raise ConflictError(
                f"application {app.app_id!r}: attempt {attempt} was replaced by {app.attempt}"
            )

    def _validate_asks(self, asks: Sequence[Ask]) -> None:
        """Check every ask before applying any (nothing is half-applied)."""
        seen: set[int] = set()
        shape_of_group: dict[int, Resources] = {}
        largest = self._largest_node()
        for ask in asks:
            if ask.priority < 0:
                raise InvalidRequestError(f"ask priority must be >= 0, got {ask.priority}")
            if ask.priority in seen:
                raise InvalidRequestError(f"two asks at priority {ask.priority}")
            seen.add(ask.priority)
            if ask.count < 0:
                raise InvalidRequestError(f"ask count must be >= 0, got {ask.count}")
            if ask.resources.any_negative():
                raise InvalidRequestError(f"ask resources must be >= 0, got {ask.resources}")
            if ask.count and ask.resources.is_zero():
                raise InvalidRequestError("an ask must request some resources")
            if ask.group < 0:
                raise InvalidRequestError(
                    f"ask at priority {ask.priority}: group must be >= 0, got {ask.group}"
                )
            if ask.group and ask.count:
                shape = shape_of_group.setdefault(ask.group, ask.resources)
                if shape != ask.resources:
                    raise InvalidRequestError(
                        f"ask at priority {ask.priority}: group {ask.group} pools "
                        f"interchangeable tasks, but asks {ask.resources} where another "
                        f"ask of the group asks {shape}"
                    )
            if ask.count and largest is not None and not ask.resources.fits_in(largest):
                raise InvalidRequestError(
                    f"ask {ask.resources} at priority {ask.priority} fits no node "
                    f"(largest node {largest})"
                )

    def _largest_node(self) -> Resources | None:
        """The componentwise maximum of live nodes (cached; nodes come and go rarely)."""
        if self._largest is None:
            nodes = [n.capacity for n in self.state.nodes.values() if n.alive]
            if not nodes:
                return None
            out = nodes[0]
            for r in nodes[1:]:
                out = out.componentwise_max(r)
            self._largest = out
        return self._largest

    def finished_app_ids(self) -> list[str]:
        return list(self._finished)

    def set_queue_budget(self, queue: str, budget: float, spending_rate: float) -> None:
        """An operator sets a queue's budget and spending rate (a budget policy's admin
        hook, e.g. Dynamic Priority). Checked before the policy sees it."""
        setter = getattr(self.policy, "set_queue_budget", None)
        if setter is None:
            raise ConflictError(f"policy {self.policy_name!r} has no queue budgets")
        q = self.state.queues.get(queue)
        if q is None:
            raise NotFoundError(f"unknown queue {queue!r}")
        if q.children:
            raise InvalidRequestError(f"queue {queue!r} is not a leaf queue")
        for name, x in (("budget", budget), ("spending_rate", spending_rate)):
            if not (math.isfinite(x) and x >= 0):
                raise InvalidRequestError(f"{name} must be a finite number >= 0, got {x!r}")
        try:
            setter(queue, budget, spending_rate)
        except ValueError as e:  # the policy's own check
            raise InvalidRequestError(f"queue {queue!r}: {e}") from None

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
        st = self.state
        st.now = now
        app = self._running_app(app_id)
        if attempt:
            self._check_attempt(app, attempt)
        if diagnostics:
            app.diagnostics = diagnostics
        app.finish_s = now
        for c in list(app.containers.values()):
            # Containers still held by a finished application are killed (YARN does too).
            self._release(c, now, killed=True)
        was_pending = app.pending > 0
        for p in list(app.asks):
            app.set_ask(Ask(p, ZERO, 0))
        self._update_pending(app, was_pending)
        app.state = {
            FinalStatus.SUCCEEDED: AppState.FINISHED,
            FinalStatus.FAILED: AppState.FAILED,
            FinalStatus.KILLED: AppState.KILLED,
        }[status]
        del st.apps[app_id]
        self._finished[app_id] = app
        self._version += 1
        self.log.emit(
            now, ev.JOB_FINISHED, job=app_id, user=app.user, queue=app.queue, status=str(status)
        )
        self.policy.on_app_removed(app, self.view)

    def tick(self, now: float) -> None:
        self.state.now = now
        self.policy.tick(self.view)
        for cid in self.policy.preempt(self.view):
            self.preempt_container(cid, now)

    def preempt_container(self, container_id: str, now: float) -> bool:
        for node in self.state.nodes.values():
            c = node.containers.get(container_id)
            if c is not None:
                status = ContainerStatus(
                    container_id, ContainerState.PREEMPTED, EXIT_PREEMPTED, now, now
                )
                self._container_done(c, status, now)
                self._stop_on(node, container_id)
                return True
        return False

    # ------------------------------------------------------------------ internals
    def _schedule(self, node: Node, now: float) -> None:
        rejections = 0
        try:
            for placement in self.policy.on_node_heartbeat(node, self.view):
                if not self._apply(node, placement, now):
                    rejections += 1
                    if rejections >= MAX_REJECTIONS_PER_HEARTBEAT:
                        break
                if not self.state._pending:
                    break
        except Exception as e:  # a faulty plugin must not take the RM down
            self.policy_failures += 1
            if self._policy_errors == "raise":
                raise PluginError(
                    f"policy {self.policy_name!r} failed on the heartbeat of node "
                    f"{node.node_id!r} at t={now:g}: {type(e).__name__}: {e}"
                ) from e
            log.error("policy_failed", policy=self.policy_name, node=node.node_id, exc_info=True)

    def _reject(self, node: Node, p: Any, reason: str, now: float) -> bool:
        self.rejected_placements += 1
        log.warning("placement_rejected", node=node.node_id, placement=repr(p), reason=reason)
        self.log.emit(
            now,
            ev.PLACEMENT_REJECTED,
            node=node.node_id,
            job=getattr(p, "app_id", None),
            priority=getattr(p, "priority", None),
            reason=reason,
        )
        return False

    def _apply(self, node: Node, p: Placement, now: float) -> bool:
        if type(p) is not Placement and not isinstance(p, Placement):
            return self._reject(node, p, "not a Placement", now)
        app = self.state.apps.get(p.app_id)
        if app is None:
            return self._reject(node, p, "unknown or finished application", now)
        asks = app.asks
        prio = p.priority
        ask = asks.get(prio)
        if ask is None:
            return self._reject(node, p, "no outstanding ask at that priority", now)
        if not node.alive:
            return self._reject(node, p, "node is not alive", now)
        res = ask.resources
        free = node._free
        if not free.covers(res):
            return self._reject(node, p, f"{res} does not fit free {node.free}", now)
        n = app.next_container
        cid = f"{app._cid_prefix}{n:06d}"
        app.next_container = n + 1
        app_id = app.app_id
        node_id = node.node_id
        kind = ask.kind
        c = _container(cid, app_id, node_id, prio, res, kind)
        free.sub(res)
        node.containers[cid] = c
        app.containers[cid] = c
        if prio == AM_PRIORITY:
            app.am_container = cid
            self._am_launches.append(c)
        else:
            app.undelivered.append(c)
        # One container of the ask is granted: the same ask with one fewer (set_ask,
        # inlined: the application stays pending unless that was its last container).
        count = ask.count
        if count > 1:
            asks[prio] = _ask_with_count(ask, count - 1)
        else:
            del asks[prio]
        app.pending -= 1
        app._sorted_asks = None
        if app.pending <= 0:
            self._update_pending(app, True)
        add_to_all(app._all_books, res)
        self._version += 1
        add = self.log.add
        t = round(float(now), 6)
        if not app.started:
            app.started = True
            add(
                {
                    "t": t,
                    "event": ev.JOB_STARTED,
                    "job": app_id,
                    "user": app.user,
                    "queue": app.queue,
                }
            )
        add(
            {
                "t": t,
                "event": ev.CONTAINER_ALLOCATED,
                "job": app_id,
                "container": cid,
                "node": node_id,
                "resources": res.to_dict(),
                "priority": prio,
                "kind": str(kind),
            }
        )
        if self._on_allocated is not None:
            self._on_allocated(c, self.view)
        return True

    def _books_of(self, app: Application) -> tuple[Accumulator, ...]:
        st = self.state
        # The root queue's total is the cluster's: every application is in a leaf queue.
        books = [st.users[app.user]._used]
        q: Queue | None = st.queues.get(app.queue)
        while q is not None:
            books.append(q._used)
            q = q.parent
        return tuple(books)

    def _stop_on(self, node: Node, container_id: str) -> None:
        node.to_stop.append(container_id)
        self._touched[node.node_id] = None

    def take_touched_nodes(self) -> list[str]:
        """Nodes whose books changed outside their own heartbeat (containers to stop,
        resources freed) since the last call: a host should let them heartbeat soon."""
        out = list(self._touched)
        self._touched.clear()
        return out

    def _update_pending(self, app: Application, was_pending: bool) -> None:
        st = self.state
        now_pending = app.pending > 0
        if now_pending and not was_pending:
            if not st._pending:
                self.pending_epoch += 1
            st._pending[app.app_id] = app
            st._pending_sorted = None
        elif was_pending and not now_pending:
            st._pending.pop(app.app_id, None)
            st._pending_sorted = None
            if not st._pending:
                st._min_ask = None  # recomputed (tight again) when asks come back

    def _free(self, c: Container) -> Application | None:
        st = self.state
        cid = c.container_id
        node = st.nodes.get(c.node_id)
        if node is not None and node.containers.pop(cid, None) is not None and node.alive:
            node._free.add(c.resources)
        app = st.apps.get(c.app_id)
        if app is not None and app.containers.pop(cid, None) is not None:
            sub_from_all(app._all_books, c.resources)  # allocated, and the books
            self._version += 1
        return app

    def _container_done(self, c: Container, status: ContainerStatus, t: float) -> None:
        app = self._free(c)
        cid = c.container_id
        self._started.discard(cid)
        state = status.state
        self.log.add(
            {
                "t": round(float(t), 6),
                "event": ev.CONTAINER_FINISHED,
                "job": c.app_id,
                "container": cid,
                "node": c.node_id,
                "state": str(state),
                "exit_status": status.exit_status,
            }
        )
        if self._on_finished is not None:
            self._on_finished(c, status, self.view)
        if app is None:
            return
        if cid == app.am_container:
            app.am_container = None
            self.fail_attempt(app.app_id, f"AM container exited ({state}, {status.exit_status})", t)
        else:
            app.completed_reports.append(status)

    def _release(self, c: Container, now: float, *, killed: bool = False) -> None:
        """The AM gave a container back (or its application ended): free it, stop it."""
        app = self._free(c)
        node = self.state.nodes.get(c.node_id)
        if node is not None and node.alive:
            self._stop_on(node, c.container_id)
        if app is not None and c in app.undelivered:
            app.undelivered.remove(c)
        status = ContainerStatus(
            c.container_id,
            ContainerState.KILLED,
            EXIT_KILLED_BY_AM if killed else EXIT_ABORTED,
            now,
            now,
        )
        if c.container_id in self._started:
            self._started.discard(c.container_id)
            self.log.emit(
                now,
                ev.CONTAINER_FINISHED,
                job=c.app_id,
                container=c.container_id,
                node=c.node_id,
                state=str(status.state),
                exit_status=status.exit_status,
            )
        else:
            self.log.emit(
                now, ev.CONTAINER_RELEASED, job=c.app_id, container=c.container_id, node=c.node_id
            )
        if self._on_finished is not None:
            self._on_finished(c, status, self.view)

    def _share_of(self, app_id: str) -> Resources | None:
        cache = self._shares_cache
        if cache is None or cache[0] != self._version:
            cache = (self._version, self.policy.shares(self.view))
            self._shares_cache = cache
        shares = cache[1]
        return shares.get(app_id) if shares is not None else None

"""YARN's ResourceTracker protocol, RM side: nodes register, heartbeat (reporting the
containers that started and ended, and getting back those to stop) and are expired when
silent. Each heartbeat runs the scheduling pass for its node (``rm.core.scheduling``).
Each call fails, at its end, the attempts of the AM containers that ended in it
(``Applications.settle_am_exits``)."""

from __future__ import annotations

from collections.abc import Sequence

from rm.core.applications import Applications
from rm.core.containers import ContainerLifecycle
from rm.core.effects import Outbox
from rm.core.recovery import Recovery
from rm.core.scheduling import Scheduler
from rm.core.state import ClusterState, Node
from treadle.errors import ConflictError, InvalidRequestError
from treadle.events import EventLog
from treadle.frozen import slot_setters
from treadle.messages import (
    EXIT_LOST_NODE,
    Container,
    ContainerState,
    ContainerStatus,
    NodeHeartbeat,
    NodeHeartbeatResponse,
    NodeRegistration,
)
from treadle.resources import Accumulator, total

_new = object.__new__
_r_stop, _r_resync, _r_interval = slot_setters(
    NodeHeartbeatResponse, ("stop", "resync", "next_interval_s")
)


class NodeTracker:
    def __init__(
        self,
        state: ClusterState,
        log: EventLog,
        containers: ContainerLifecycle,
        scheduler: Scheduler,
        apps: Applications,
        recovery: Recovery,
        outbox: Outbox,
        *,
        heartbeat_s: float,
        expiry_s: float,
    ) -> None:
        self._state = state
        self._log = log
        self._containers = containers
        self._scheduler = scheduler
        self._apps = apps
        self._recovery = recovery
        self._outbox = outbox
        self.heartbeat_s = heartbeat_s
        self.expiry_s = expiry_s

    def register(self, reg: NodeRegistration, now: float) -> None:
        """Register a node; a live node registering again is a new incarnation whose old
        containers end as lost (``_new_incarnation``)."""
        self._register(reg, now)
        if reg.containers:
            self._recovery.reported(reg.containers)
        self._apps.settle_am_exits(now)

    def _register(self, reg: NodeRegistration, now: float) -> None:
        st = self._state
        if reg.resources.is_zero() or reg.resources.any_negative():
            raise InvalidRequestError(f"node {reg.node_id!r}: resources must be positive")
        existing = st.nodes.get(reg.node_id)
        if existing is not None and existing.alive:
            if existing.capacity != reg.resources or existing.rack != reg.rack:
                raise ConflictError(
                    f"node {reg.node_id!r} is already registered with other resources"
                )
            existing.last_heartbeat_s = now
            existing.last_seq = -1  # a restarted NM counts its heartbeats from 1 again
            self._new_incarnation(existing, now)
            # What it still holds belonged to the old incarnation: stopped.
            existing.to_stop.extend(c.container_id for c in reg.containers)
            return
        # A new node, or a LOST one coming back (its containers were already failed).
        node = Node(reg, now)
        st.nodes[reg.node_id] = node
        st.capacity = st.capacity + node.capacity
        st.ledger.check_capacity(st.capacity)
        st.nodes_changed()
        self._log.node_registered(now, node.node_id, node.rack, node.capacity)
        if reg.containers:
            self._recover(node, reg.containers, known=existing is not None)

    def _recover(self, node: Node, containers: Sequence[Container], *, known: bool) -> None:
        """A node new to this RM (it restarted) holds these containers: those of running
        applications count again as theirs (work-preserving restart, YARN-556: their AMs
        see them end as usual); the rest, and every container of a node this RM had
        already lost (it ended them then) or whose end it logged before it restarted, are
        stopped."""
        st = self._state
        free = node._free
        hook = self._scheduler.policy.on_container_allocated
        ended_before = self._recovery.ended_before
        for c in containers:
            cid = c.container_id
            app = None if known else st.apps.get(c.app_id)
            if (
                app is None
                or cid in app.containers
                or cid in ended_before
                or not free.covers(c.resources)
            ):
                node.to_stop.append(cid)
                continue
            st.hold(node, app, c)
            app.started = True
            self._containers.started.add(cid)  # its start is in the log already
            st.pending.touch(app, c.priority)
            hook(c, st)
        st.version += 1

    def _new_incarnation(self, node: Node, now: float) -> None:
        """A live node registering again is a new incarnation of it (its NM restarted
        before the RM expired it): the containers of the old one are gone with it and end
        as lost (LOST, ABORTED -100, as YARN's RMNodeImpl ends them on a reconnect), so
        their tasks run again. The node stays registered (no node_lost: it never went
        silent); with no containers this is an idempotent re-registration."""
        node.to_stop = []
        if not node.containers:
            return
        for c in list(node.containers.values()):
            status = ContainerStatus(c.container_id, ContainerState.LOST, EXIT_LOST_NODE, now, now)
            self._containers.done(c, status, now)
        node._free = Accumulator(node.capacity)  # afresh: no float error from the frees

    def heartbeat(self, hb: NodeHeartbeat, now: float) -> NodeHeartbeatResponse:
        st = self._state
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
        if hb.started:
            self._containers.report_started(node, hb.started)
        if hb.completed:
            self._containers.report_completed(node, hb.completed)
        pending = st.pending
        if pending.apps:  # PendingIndex.could_fit, inlined: the simulator's hottest path
            m = pending.min_ask
            if node._free.covers(m if m is not None else pending.lower_bound()):
                self._scheduler.schedule(node, now)
        if self._outbox.am_exits:
            self._apps.settle_am_exits(now)
        stop = node.to_stop
        node.to_stop = []
        resp: NodeHeartbeatResponse = _new(NodeHeartbeatResponse)  # (stop, False, interval)
        _r_stop(resp, stop)
        _r_resync(resp, False)
        _r_interval(resp, self.heartbeat_s)
        return resp

    def place_pending(self, now: float) -> None:
        """A placement pass without heartbeats (event mode live: CapacityScheduler's
        asynchronous scheduling): the scheduling pass of each live node, in node order, on
        which a pending ask could fit, until none is pending. The grants reach their AMs
        at their next calls and their NMs with the AMs' launches, as at a heartbeat."""
        st = self._state
        st.now = now
        pending = st.pending
        for node in list(st.nodes.values()):
            if not pending.apps:
                break
            if node.alive and pending.could_fit(node._free):
                self._scheduler.schedule(node, now)

    def expire(self, now: float, grace_s: float = 0.0) -> list[str]:
        """Mark nodes silent for longer than the expiry plus ``grace_s`` LOST; their
        containers fail."""
        limit = self.expiry_s + grace_s
        lost = [
            n for n in self._state.nodes.values() if n.alive and now - n.last_heartbeat_s > limit
        ]
        for node in lost:
            self._lose(node, now)
        self._apps.settle_am_exits(now)
        return [n.node_id for n in lost]

    def overdue(self, now: float) -> list[tuple[str, float]]:
        """Live nodes silent for longer than the expiry, with their last heartbeat."""
        limit = self.expiry_s
        return [
            (n.node_id, n.last_heartbeat_s)
            for n in self._state.nodes.values()
            if n.alive and now - n.last_heartbeat_s > limit
        ]

    def lose(self, node_id: str, now: float) -> None:
        """Mark a live node LOST; its containers fail."""
        node = self._state.nodes.get(node_id)
        if node is not None and node.alive:
            self._lose(node, now)
            self._apps.settle_am_exits(now)

    def _lose(self, node: Node, now: float) -> None:
        st = self._state
        node_id = node.node_id
        node.alive = False
        # Summed afresh rather than subtracted, so float error cannot accumulate.
        st.capacity = total([n.capacity for n in st.nodes.values() if n.alive])
        st.nodes_changed()
        self._log.node_lost(now, node_id)
        for c in list(node.containers.values()):
            status = ContainerStatus(c.container_id, ContainerState.LOST, EXIT_LOST_NODE, now, now)
            self._containers.done(c, status, now)
        node._free = Accumulator()

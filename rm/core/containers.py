"""How a container ends, as the RM sees it: an NM reports it finished (or its node is
lost, or the policy preempts it), or the RM takes it back (the AM released it, or its
application or attempt ended). Either way it leaves the books, the log says so, the policy
hears of it, and its AM learns of it on its next Allocate call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rm.core.effects import Outbox
from rm.core.state import Application, ClusterState, Node
from treadle.events import EventLog
from treadle.messages import (
    EXIT_ABORTED,
    EXIT_KILLED_BY_AM,
    EXIT_PREEMPTED,
    NOT_AM_FAILURES,
    Container,
    ContainerState,
    ContainerStatus,
)

#: States that never count against the AM (whatever exit status an NM put on them).
_NOT_AM_STATES = (ContainerState.LOST, ContainerState.PREEMPTED)
#: ``Policy.on_container_finished`` when the policy overrides it (else None: not called).
FinishedHook = Callable[[Container, ContainerStatus, Any], None] | None


class ContainerLifecycle:
    __slots__ = ("_log", "_on_finished", "_outbox", "_state", "_view", "started")

    def __init__(
        self, state: ClusterState, log: EventLog, outbox: Outbox, on_finished: FinishedHook
    ) -> None:
        self._state = state
        self._view = state
        self._log = log
        self._outbox = outbox
        self._on_finished = on_finished
        self.started: set[str] = set()  # containers an NM reported running

    def report_started(self, node: Node, statuses: list[ContainerStatus]) -> None:
        """An NM says these containers run (each logged once, at its start time)."""
        started = self.started
        containers = node.containers
        log = self._log
        nid = node.node_id
        for status in statuses:
            cid = status.container_id
            c = containers.get(cid)
            if c is not None and cid not in started:
                started.add(cid)
                log.container_started(status.start_s, c.app_id, cid, nid)

    def report_completed(self, node: Node, statuses: list[ContainerStatus]) -> None:
        """An NM says these containers ended: ``done`` for each that ``node`` holds, at
        its finish time."""
        containers = node.containers
        for status in statuses:
            c = containers.get(status.container_id)
            if c is not None:
                self.done(c, status, status.finish_s)

    def done(self, c: Container, status: ContainerStatus, t: float) -> None:
        """``c`` ended on its node (completed, failed, lost or preempted) at ``t``."""
        st = self._state
        app = st.free_container(c)
        cid = c.container_id
        self.started.discard(cid)
        state = status.state
        self._log.container_finished(t, c.app_id, cid, c.node_id, str(state), status.exit_status)
        if self._on_finished is not None:
            self._on_finished(c, status, self._view)
        if app is None:
            return
        if cid == app.am_container:
            self._am_ended(app, status)
        else:
            app.completed_reports.append(status)
            news = st.news  # ``tell``, inlined: once per container
            if news is not None:
                news[app.app_id] = None
            if state is ContainerState.COMPLETE and status.exit_status == 0:
                app.stage_book.task_done(c.priority, status.finish_s)

    def _am_ended(self, app: Application, status: ContainerStatus) -> None:
        """``app``'s AM container ended: its attempt fails once the call's work is done."""
        app.am_container = None
        state = status.state
        # YARN-614: a node lost, a preemption, or the RM's own kill is not the AM's
        # failure; its crash or its own exit is (YARN decides by the exit status).
        counts = status.exit_status not in NOT_AM_FAILURES and state not in _NOT_AM_STATES
        self._outbox.am_exits.append(
            (app.app_id, f"AM container exited ({state}, {status.exit_status})", counts)
        )

    def release(self, c: Container, now: float, *, killed: bool = False) -> None:
        """The RM takes ``c`` back (its AM released it, or its application or attempt
        ended): free it and tell its NM to stop it."""
        st = self._state
        app = st.free_container(c)
        node = st.nodes.get(c.node_id)
        cid = c.container_id
        if node is not None and node.alive:
            self.stop_on(node, cid)
        if app is not None and c in app.undelivered:
            app.undelivered.remove(c)
        status = ContainerStatus(
            cid, ContainerState.KILLED, EXIT_KILLED_BY_AM if killed else EXIT_ABORTED, now, now
        )
        if cid in self.started:
            self.started.discard(cid)
            self._log.container_finished(
                now, c.app_id, cid, c.node_id, str(status.state), status.exit_status
            )
        else:
            self._log.container_released(now, c.app_id, cid, c.node_id)
        if self._on_finished is not None:
            self._on_finished(c, status, self._view)

    def preempt(self, container_id: str, now: float) -> bool:
        """The policy takes ``container_id`` back: it ends PREEMPTED and its NM is told to
        stop it; False if no node holds it."""
        st = self._state
        for node in st.nodes.values():
            c = node.containers.get(container_id)
            if c is not None:
                app = st.apps.get(c.app_id)
                queue = app.queue if app is not None else ""
                self._log.container_preempted(now, c.app_id, container_id, node.node_id, queue)
                status = ContainerStatus(
                    container_id, ContainerState.PREEMPTED, EXIT_PREEMPTED, now, now
                )
                self.done(c, status, now)
                self.stop_on(node, container_id)
                return True
        return False

    def stop_on(self, node: Node, container_id: str) -> None:
        node.to_stop.append(container_id)
        self._outbox.touched[node.node_id] = None

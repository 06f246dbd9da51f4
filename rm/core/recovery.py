"""What a restarted RM knows of the containers of its previous run (work-preserving
restart, YARN-556), and what it does about those that do not come back.

The state store gives back the applications (``ResourceManager.restore``); the event log
gives the containers that were open when the RM stopped and those whose end it had logged.
A node that registers again reports what it still runs: its containers of running
applications count again (``NodeTracker.register``), except those whose end was logged
(``ended_before``: they ended once). Those that no node reports within one node expiry of
the restart (their node did not come back, or they never started) end as lost, and their
AMs run the tasks again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rm.core.state import ClusterState
from treadle.events import EventLog
from treadle.messages import EXIT_LOST_NODE, Container, ContainerState, ContainerStatus

#: An open container of the previous run: (application, node, whether it had started).
Open = tuple[str, str, bool]


class Recovery:
    __slots__ = ("_log", "_state", "deadline", "ended_before", "expiry_s", "unreported")

    def __init__(self, state: ClusterState, log: EventLog, *, expiry_s: float) -> None:
        self._state = state
        self._log = log
        #: How long after the restart nodes have to report the open containers.
        self.expiry_s = expiry_s
        #: Containers whose end a previous run of this RM logged: never recovered.
        self.ended_before: set[str] = set()
        #: The previous run's open containers that no node reported yet, by id.
        self.unreported: dict[str, Open] = {}
        #: When those still unreported end as lost (``end_unreported``).
        self.deadline = 0.0

    def redeliver_ended(self, ended: Iterable[tuple[str, ContainerStatus]]) -> None:
        """The AMs of running applications hear again of these ended containers
        (``rm.server.runlog.ended_containers``); reports they had are ignored. A node
        resyncing with one of them (its NM had not heard that the RM logged its end) does
        not get it back (``ended_before``)."""
        st = self._state
        for app_id, status in ended:
            self.ended_before.add(status.container_id)
            app = st.apps.get(app_id)
            if app is not None:
                app.completed_reports.append(status)
                st.tell(app_id)

    def await_containers(self, open_: Mapping[str, Open], now: float) -> None:
        """Wait one node expiry from ``now`` for the nodes to report these containers."""
        self.unreported = dict(open_)
        self.deadline = now + self.expiry_s

    def reported(self, containers: Iterable[Container]) -> None:
        """A node registered with these containers: no longer awaited (whether they count
        again or are stopped)."""
        unreported = self.unreported
        for c in containers:
            unreported.pop(c.container_id, None)

    def end_unreported(self, now: float) -> int:
        """From the deadline on: end the containers no node reported; how many."""
        if not self.unreported or now < self.deadline:
            return 0
        lost, self.unreported = self.unreported, {}
        for cid, (app_id, node_id, started) in lost.items():
            self._end(app_id, cid, node_id, started, now)
        return len(lost)

    def _end(self, app_id: str, container_id: str, node_id: str, started: bool, now: float) -> None:
        """``container_id`` ends as lost (released, if it never started); its AM, if the
        application runs, hears so on its next Allocate and runs the task again."""
        app = self._state.apps.get(app_id)
        if app is not None and container_id in app.containers:
            return  # recovered after all
        if started:
            lost = str(ContainerState.LOST)
            self._log.container_finished(now, app_id, container_id, node_id, lost, EXIT_LOST_NODE)
        else:
            self._log.container_released(now, app_id, container_id, node_id)
        if app is not None:
            status = ContainerStatus(container_id, ContainerState.LOST, EXIT_LOST_NODE, now, now)
            app.completed_reports.append(status)
            self._state.tell(app_id)

"""Read-only reports of the RM's state for its hosts (the gRPC services, the launcher,
the CLI): plain values, taken at one moment, that share nothing with the live books."""

from __future__ import annotations

from dataclasses import dataclass

from rm.state import Application, ClusterState
from treadle.resources import Resources


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


def app_report(app: Application) -> AppReport:
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

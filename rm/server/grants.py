"""The RM's container grants: the terms its signatures cover (treadle.live.gate).

A task grant (Allocate) names no command and bounds the task's duration by the longest
task of the job its application submitted; an AM container's launch names the RM's own
AM command and environment and runs until its process exits. Each grant expires
``GRANT_TTL_WALL_S`` wall seconds after it was signed (YARN's container allocation
expiry is 10 min), and an NM starts each grant once.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

from treadle.rpc.v1 import (
    application_master_pb2 as am_pb,
    common_pb2 as pb,
    container_manager_pb2 as cm_pb,
)

if TYPE_CHECKING:
    from rm.core.facade import ResourceManager
    from treadle.live.clock import EmulatedClock
    from treadle.live.gate import Gate


class RmServer(Protocol):
    """What the grants use of the RM server (``rm.server.service.RmServer``)."""

    gate: Gate
    clock: EmulatedClock
    rm: ResourceManager
    task_bounds: dict[str, float]  # app id -> its grants' max_duration_s

    def now(self) -> float: ...


#: How long (wall s) a grant may wait before the NM refuses to start it.
GRANT_TTL_WALL_S = 600.0


def expiry(s: RmServer) -> float:
    """When a grant signed now expires, in the cluster's emulated seconds."""
    return s.now() + GRANT_TTL_WALL_S * s.clock.dilation


def task_bound(s: RmServer, app_id: str) -> float:
    """The longest duration (emulated s) a task of ``app_id`` may run in a container: its
    job's longest task (an application without a job, driven by tests alone: unbounded)."""
    bound = s.task_bounds.get(app_id)
    if bound is None:
        app = s.rm.state.apps.get(app_id)
        job = app.submission.job if app is not None else None
        if job is None:
            return math.inf
        bound = s.task_bounds[app_id] = max(max(st.durations, default=0.0) for st in job.stages)
    return bound


def sign_task_grants(s: RmServer, out: am_pb.AllocateResponse) -> None:
    """Sign each container an Allocate answer grants (no command; a bounded duration)."""
    expires = expiry(s)
    for c in out.allocated:
        _sign(s, c, task_bound(s, c.app_id), expires)


def sign_am_launch(s: RmServer, launch: cm_pb.ContainerLaunch) -> None:
    """Sign an AM container's launch as built, command and environment included: it runs
    until its process exits."""
    _sign(s, launch, math.inf, expiry(s), list(launch.command), dict(launch.environment))


def _sign(
    s: RmServer,
    m: pb.Container | cm_pb.ContainerLaunch,
    max_duration_s: float,
    expires_s: float,
    command: list[str] | None = None,
    environment: dict[str, str] | None = None,
) -> None:
    """Set a grant's terms on ``m`` and its container token, the RM's signature of them."""
    m.max_duration_s, m.expires_s = max_duration_s, expires_s
    m.container_token = s.gate.sign_container(
        m.container_id,
        m.app_id,
        m.node_id,
        dict(m.resources.amounts),
        max_duration_s=max_duration_s,
        expires_s=expires_s,
        command=command or (),
        environment=environment,
    )

"""Conversions between the cores' messages and the treadle.v1 protobuf messages.

One place for every conversion, so servicers and clients stay thin. Incoming resources
are validated here (names, finite non-negative amounts): a bad request becomes an
InvalidRequestError before it reaches a core.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from treadle.errors import InvalidRequestError
from treadle.live.gate import Grant, SignedLaunch
from treadle.messages import (
    AllocateRequest,
    AllocateResponse,
    Ask,
    AskKind,
    Container,
    ContainerLaunch,
    ContainerState,
    ContainerStatus,
    FinalStatus,
    NodeHeartbeat,
    NodeHeartbeatResponse,
    NodeRegistration,
)
from treadle.model import JobSpec, StageSpec, topological_stages
from treadle.resources import Resources
from treadle.rpc.v1 import (
    application_master_pb2 as am_pb,
    common_pb2 as pb,
    container_manager_pb2 as cm_pb,
    resource_tracker_pb2 as rt_pb,
)

_KIND_TO_PB = {AskKind.DEFAULT: pb.ASK_KIND_DEFAULT, AskKind.ALTRUISTIC: pb.ASK_KIND_ALTRUISTIC}
_KIND_FROM_PB = {v: k for k, v in _KIND_TO_PB.items()}
_STATE_TO_PB = {
    ContainerState.COMPLETE: pb.CONTAINER_STATE_COMPLETE,
    ContainerState.FAILED: pb.CONTAINER_STATE_FAILED,
    ContainerState.KILLED: pb.CONTAINER_STATE_KILLED,
    ContainerState.LOST: pb.CONTAINER_STATE_LOST,
    ContainerState.PREEMPTED: pb.CONTAINER_STATE_PREEMPTED,
    ContainerState.RUNNING: pb.CONTAINER_STATE_RUNNING,
}
_STATE_FROM_PB = {v: k for k, v in _STATE_TO_PB.items()}
_STATUS_TO_PB = {
    FinalStatus.SUCCEEDED: pb.FINAL_STATUS_SUCCEEDED,
    FinalStatus.FAILED: pb.FINAL_STATUS_FAILED,
    FinalStatus.KILLED: pb.FINAL_STATUS_KILLED,
}
_STATUS_FROM_PB = {v: k for k, v in _STATUS_TO_PB.items()}

MAX_AMOUNT = 1e9  # larger amounts are nonsense and lose precision in sums
#: Resource-seconds (remaining_usage): amounts times durations, so larger.
MAX_USAGE = 1e15
MAX_COUNT = 10_000_000


def _finite(x: float, what: str) -> float:
    if not math.isfinite(x):
        raise InvalidRequestError(f"{what} must be finite, got {x}")
    return x


# Resources ----------------------------------------------------------------------------
def resources_to_pb(r: Resources) -> pb.Resources:
    return pb.Resources(amounts=r.to_dict())


def resources_from_pb(
    msg: pb.Resources, what: str = "resources", limit: float = MAX_AMOUNT
) -> Resources:
    for k, v in msg.amounts.items():
        if not (0 <= v <= limit):
            raise InvalidRequestError(f"{what}.{k} must be between 0 and {limit:g}, got {v}")
    try:
        return Resources.parse(dict(msg.amounts), what)
    except ValueError as e:
        raise InvalidRequestError(str(e)) from None


# Container statuses and containers ----------------------------------------------------
def status_to_pb(s: ContainerStatus) -> pb.ContainerStatus:
    return pb.ContainerStatus(
        container_id=s.container_id,
        state=_STATE_TO_PB[s.state],
        exit_status=s.exit_status,
        start_s=s.start_s,
        finish_s=s.finish_s,
    )


def status_from_pb(m: pb.ContainerStatus) -> ContainerStatus:
    state = _STATE_FROM_PB.get(m.state)
    if state is None:
        raise InvalidRequestError(f"container {m.container_id!r}: unknown state {m.state}")
    return ContainerStatus(
        m.container_id,
        state,
        m.exit_status,
        _finite(m.start_s, "start_s"),
        _finite(m.finish_s, "finish_s"),
    )


def container_to_pb(c: Container, node_address: str = "") -> pb.Container:
    return pb.Container(
        container_id=c.container_id,
        app_id=c.app_id,
        node_id=c.node_id,
        priority=c.priority,
        resources=resources_to_pb(c.resources),
        kind=_KIND_TO_PB[c.kind],
        node_address=node_address,
    )


def container_from_pb(m: pb.Container) -> Container:
    return Container(
        m.container_id,
        m.app_id,
        m.node_id,
        m.priority,
        resources_from_pb(m.resources),
        _KIND_FROM_PB.get(m.kind, AskKind.DEFAULT),
    )


# ResourceTracker ------------------------------------------------------------------------
def registration_from_pb(m: rt_pb.RegisterNodeRequest) -> NodeRegistration:
    if not m.node_id:
        raise InvalidRequestError("node_id must not be empty")
    containers = tuple(container_from_pb(c) for c in m.containers)
    for c in containers:
        if c.node_id != m.node_id or not c.container_id or not c.app_id:
            raise InvalidRequestError(
                f"node {m.node_id!r}: a recovered container needs an id, an application "
                f"and this node (got {c.container_id!r} of {c.app_id!r} on {c.node_id!r})"
            )
    return NodeRegistration(
        m.node_id,
        resources_from_pb(m.capacity, "capacity"),
        m.rack or "default-rack",
        m.address,
        containers,
    )


def registration_to_pb(r: NodeRegistration) -> rt_pb.RegisterNodeRequest:
    return rt_pb.RegisterNodeRequest(
        node_id=r.node_id,
        address=r.address,
        rack=r.rack,
        capacity=resources_to_pb(r.resources),
        containers=[container_to_pb(c) for c in r.containers],
    )


def heartbeat_from_pb(m: rt_pb.NodeHeartbeatRequest) -> NodeHeartbeat:
    return NodeHeartbeat(
        m.node_id,
        m.seq,
        [status_from_pb(s) for s in m.started],
        [status_from_pb(s) for s in m.completed],
        tuple(m.running),
    )


def heartbeat_to_pb(hb: NodeHeartbeat) -> rt_pb.NodeHeartbeatRequest:
    return rt_pb.NodeHeartbeatRequest(
        node_id=hb.node_id,
        seq=hb.seq,
        started=[status_to_pb(s) for s in hb.started],
        completed=[status_to_pb(s) for s in hb.completed],
        running=list(hb.running),
    )


def hb_response_to_pb(r: NodeHeartbeatResponse) -> rt_pb.NodeHeartbeatResponse:
    return rt_pb.NodeHeartbeatResponse(
        stop=r.stop, resync=r.resync, next_interval_s=r.next_interval_s
    )


def hb_response_from_pb(m: rt_pb.NodeHeartbeatResponse) -> NodeHeartbeatResponse:
    return NodeHeartbeatResponse(list(m.stop), m.resync, m.next_interval_s)


# ApplicationMaster ---------------------------------------------------------------------
def ask_from_pb(m: am_pb.Ask) -> Ask:
    if not (0 <= m.count <= MAX_COUNT):
        raise InvalidRequestError(f"ask count must be between 0 and {MAX_COUNT}, got {m.count}")
    kind = _KIND_FROM_PB.get(m.kind)
    if kind is None:
        raise InvalidRequestError(f"unknown ask kind {m.kind}")
    if m.group < 0:
        raise InvalidRequestError(f"ask[{m.priority}].group must be >= 0, got {m.group}")
    return Ask(
        m.priority,
        resources_from_pb(m.resources, f"ask[{m.priority}].resources"),
        m.count,
        kind,
        _finite(m.expected_duration_s, "expected_duration_s"),
        _finite(m.remaining_work, "remaining_work"),
        resources_from_pb(m.remaining_usage, f"ask[{m.priority}].remaining_usage", MAX_USAGE),
        m.group,
    )


def ask_to_pb(a: Ask) -> am_pb.Ask:
    return am_pb.Ask(
        priority=a.priority,
        resources=resources_to_pb(a.resources),
        count=a.count,
        kind=_KIND_TO_PB[a.kind],
        expected_duration_s=a.expected_duration_s,
        remaining_work=a.remaining_work,
        remaining_usage=resources_to_pb(a.remaining_usage),
        group=a.group,
    )


def completed_task_from_pb(m: am_pb.CompletedTask) -> tuple[int, int]:
    if m.stage < 0 or m.task < 0:
        raise InvalidRequestError(
            f"completed task (stage {m.stage}, task {m.task}): indices must be >= 0"
        )
    return (m.stage, m.task)


def completed_task_to_pb(t: tuple[int, int]) -> am_pb.CompletedTask:
    return am_pb.CompletedTask(stage=t[0], task=t[1])


def allocate_from_pb(m: am_pb.AllocateRequest) -> AllocateRequest:
    return AllocateRequest(
        m.app_id,
        [ask_from_pb(a) for a in m.asks],
        list(m.releases),
        _finite(m.progress, "progress"),
        [completed_task_from_pb(t) for t in m.newly_completed],
        m.attempt,
        m.response_id,
    )


def allocate_to_pb(r: AllocateRequest) -> am_pb.AllocateRequest:
    return am_pb.AllocateRequest(
        app_id=r.app_id,
        asks=[ask_to_pb(a) for a in r.asks],
        releases=r.releases,
        progress=r.progress,
        newly_completed=[completed_task_to_pb(t) for t in r.completed_tasks],
        attempt=r.attempt,
        response_id=r.response_id or 0,
    )


def allocate_response_to_pb(
    r: AllocateResponse, addresses: dict[str, str]
) -> am_pb.AllocateResponse:
    msg = am_pb.AllocateResponse(
        allocated=[container_to_pb(c, addresses.get(c.node_id, "")) for c in r.allocated],
        completed=[status_to_pb(s) for s in r.completed],
        preempted=r.preempted,
        cluster=resources_to_pb(r.cluster),
        num_nodes=r.num_nodes,
        response_id=r.response_id,
    )
    if r.share is not None:
        msg.share.CopyFrom(resources_to_pb(r.share))
        msg.has_share = True
    return msg


def allocate_response_from_pb(m: am_pb.AllocateResponse) -> AllocateResponse:
    return AllocateResponse(
        [container_from_pb(c) for c in m.allocated],
        [status_from_pb(s) for s in m.completed],
        list(m.preempted),
        resources_from_pb(m.share) if m.has_share else None,
        resources_from_pb(m.cluster),
        m.num_nodes,
        m.response_id,
    )


def final_status_to_pb(s: FinalStatus) -> pb.FinalStatus.ValueType:
    return _STATUS_TO_PB[s]


def final_status_from_pb(v: int) -> FinalStatus:
    status: FinalStatus | None = _STATUS_FROM_PB.get(v)  # type: ignore[call-overload]
    if status is None:
        raise InvalidRequestError(f"unknown final status {v}")
    return status


# ContainerManager ------------------------------------------------------------------------
def launch_to_pb(launch: ContainerLaunch, command: Iterable[str] = ()) -> cm_pb.ContainerLaunch:
    return cm_pb.ContainerLaunch(
        container_id=launch.container_id,
        app_id=launch.app_id,
        node_id=launch.node_id,
        resources=resources_to_pb(launch.resources),
        duration_s=launch.duration_s,
        command=list(command),
    )


def launch_from_pb(m: cm_pb.ContainerLaunch) -> ContainerLaunch:
    if not m.container_id:
        raise InvalidRequestError("container_id must not be empty")
    duration = _finite(m.duration_s, "duration_s")
    if duration < 0:
        raise InvalidRequestError(f"duration_s must be >= 0, got {duration}")
    return ContainerLaunch(
        m.container_id, m.app_id, m.node_id, resources_from_pb(m.resources), duration
    )


def grant_from_pb(m: pb.Container) -> Grant:
    return Grant(m.container_token, m.max_duration_s, m.expires_s)


def put_grant(m: cm_pb.ContainerLaunch, grant: Grant) -> None:
    """Give a launch the terms of its grant (the NM checks them against the token)."""
    m.container_token, m.max_duration_s, m.expires_s = grant


def signed_launch_from_pb(m: cm_pb.ContainerLaunch) -> SignedLaunch:
    return SignedLaunch(
        m.container_id,
        m.app_id,
        m.node_id,
        dict(m.resources.amounts),
        m.duration_s,
        m.max_duration_s,
        m.expires_s,
        tuple(m.command),
        dict(m.environment),
        m.container_token,
    )


# Client -----------------------------------------------------------------------------------
def job_to_pb(job: JobSpec) -> pb.JobSpec:
    return pb.JobSpec(
        name=job.name,
        stages=[
            pb.StageSpec(
                name=s.name,
                resources=resources_to_pb(s.resources),
                durations=list(s.durations),
                parents=list(s.parents),
            )
            for s in job.stages
        ],
    )


def job_from_pb(m: pb.JobSpec, user: str, queue: str, submit_s: float) -> JobSpec:
    if not m.name:
        raise InvalidRequestError("job name must not be empty")
    if not m.stages:
        raise InvalidRequestError(f"job {m.name!r} has no stages")
    stages = []
    for s in m.stages:
        if not s.durations:
            raise InvalidRequestError(f"stage {s.name!r} has no tasks")
        # One float object per distinct duration (traces repeat them): a million tasks'
        # floats are 24 MB, and what a process keeps of them once they are freed, for ever.
        distinct: dict[float, float] = {}
        durations = tuple([distinct.setdefault(d, d) for d in s.durations])
        for d in distinct:
            if not (math.isfinite(d) and d >= 0):
                raise InvalidRequestError(f"stage {s.name!r}: durations must be >= 0, got {d}")
        res = resources_from_pb(s.resources, f"stage {s.name!r} resources")
        if res.is_zero():
            raise InvalidRequestError(f"stage {s.name!r} asks for no resources")
        stages.append(StageSpec(s.name, res, durations, tuple(s.parents)))
    try:
        return JobSpec(m.name, user, submit_s, topological_stages(stages), queue)
    except ValueError as e:
        raise InvalidRequestError(f"job {m.name!r}: {e}") from None

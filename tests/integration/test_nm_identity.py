"""The NM's StopContainers and GetContainerStatuses need the container's grant (issue 16):
a stranger, or another application's AM, can neither stop a container nor read its status;
the AM the RM granted it to can.

Same cluster as test_identity (an in-process RM behind a real gate, a real NM host with
its ContainerManager server, real gRPC channels).
"""

from __future__ import annotations

from typing import Any

from tests.integration.test_identity import (
    DENIED,
    UNAUTHENTICATED,
    Cluster,
    aio,
    cluster,
    granted,
    refused,
)
from treadle.messages import ContainerState
from treadle.rpc.v1 import (
    container_manager_pb2 as cm_pb,
)


async def started(c: Cluster, user: str) -> tuple[Any, str, str]:
    """A container granted to ``user``'s new application and started on n1 with its
    token, as its AM does: (the ContainerManager stub, the container id, its container token)."""
    nm, g = await granted(c, user)
    launch = cm_pb.ContainerLaunch(
        container_id=g.container_id, app_id=g.app_id, node_id="n1", resources=g.resources,
        duration_s=100.0, container_token=g.container_token,
        max_duration_s=g.max_duration_s, expires_s=g.expires_s,
    )  # fmt: skip
    ok = await nm.StartContainers(cm_pb.StartContainersRequest(launches=[launch]))
    assert list(ok.started) == [g.container_id]
    return nm, g.container_id, g.container_token


def running(c: Cluster, cid: str) -> bool:
    status = c.host.nms["n1"].container_status(cid, 0.0)
    return status is not None and status.state is ContainerState.RUNNING


def stop(cid: str, *tokens: str) -> cm_pb.StopContainersRequest:
    return cm_pb.StopContainersRequest(node_id="n1", container_ids=[cid], container_tokens=tokens)


def statuses(cid: str, *tokens: str) -> cm_pb.GetContainerStatusesRequest:
    return cm_pb.GetContainerStatusesRequest(
        node_id="n1", container_ids=[cid], container_tokens=tokens
    )


@aio
async def test_a_stranger_without_the_container_token_cannot_stop_it(tmp_path: Any) -> None:
    async with cluster(tmp_path) as c:
        nm, cid, _ = await started(c, "alice")
        why = await refused(UNAUTHENTICATED, nm.StopContainers(stop(cid)))
        assert why == "StopContainers needs the container token of each container named " \
            "(0 token(s) for 1 container(s))"  # fmt: skip
        why = await refused(UNAUTHENTICATED, nm.StopContainers(stop(cid, "")))
        assert why == f"StopContainers: container {cid} carries no container token"
        assert running(c, cid)


@aio
async def test_a_forged_container_token_cannot_stop_it(tmp_path: Any) -> None:
    async with cluster(tmp_path) as c:
        nm, cid, token = await started(c, "alice")
        why = await refused(DENIED, nm.StopContainers(stop(cid, token[:-2] + "xx")))
        assert f"not the container token of {cid}" in why
        assert running(c, cid)


@aio
async def test_another_applications_am_cannot_stop_or_read_its_containers(tmp_path: Any) -> None:
    async with cluster(tmp_path) as c:
        nm, alices, _ = await started(c, "alice")
        _, bobs, bobs_token = await started(c, "bob")
        # Bob's AM names Alice's container with the token of its own: refused, whole.
        request = cm_pb.StopContainersRequest(
            node_id="n1", container_ids=[bobs, alices], container_tokens=[bobs_token, bobs_token]
        )
        why = await refused(DENIED, nm.StopContainers(request))
        assert why.startswith(f"StopContainers: not the container token of {alices}")
        assert running(c, alices)
        assert running(c, bobs)  # nothing stopped, not even its own
        why = await refused(DENIED, nm.GetContainerStatuses(statuses(alices, bobs_token)))
        assert f"GetContainerStatuses: not the container token of {alices}" in why


@aio
async def test_a_stranger_cannot_read_a_containers_status(tmp_path: Any) -> None:
    async with cluster(tmp_path) as c:
        nm, cid, _ = await started(c, "alice")
        why = await refused(UNAUTHENTICATED, nm.GetContainerStatuses(statuses(cid)))
        assert "GetContainerStatuses needs the container token" in why


@aio
async def test_the_am_holding_the_grant_reads_and_stops_its_container(tmp_path: Any) -> None:
    async with cluster(tmp_path) as c:
        nm, cid, token = await started(c, "alice")
        resp = await nm.GetContainerStatuses(statuses(cid, token))
        assert [s.container_id for s in resp.statuses] == [cid]
        assert list((await nm.StopContainers(stop(cid, token))).stopped) == [cid]
        assert not running(c, cid)
        # A container this NM never started needs no token: nothing to protect, no effect.
        resp = await nm.GetContainerStatuses(statuses("container_unknown", ""))
        assert list(resp.unknown) == ["container_unknown"]

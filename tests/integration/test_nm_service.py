"""The NM host's ContainerManager service over gRPC (in process, port 0): what
GetContainerStatuses answers about a container at each point of its life.

No RM runs in these tests: the host never heartbeats, so a container's end stays with the
NM (its out-of-band report is switched off), which is what GetContainerStatuses reads.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from nm.server.service import ContainerManagerServicer, NodeHost
from treadle.live import wire
from treadle.live.rpcutil import channel
from treadle.messages import (
    EXIT_KILLED_BY_AM,
    EXIT_SUCCESS,
    ContainerLaunch,
    ContainerState,
    ContainerStatus,
)
from treadle.model import NodeSpec
from treadle.resources import Resources
from treadle.rpc.v1 import (
    container_manager_pb2 as cm_pb,
    container_manager_pb2_grpc as cm_grpc,
)

NODE = Resources(vcores=4, memory_mb=8192)
TASK = Resources(vcores=1, memory_mb=1024)
LONG_S = 3600.0  # emulated seconds (dilation 1): runs past the end of any test


@contextlib.asynccontextmanager
async def nm_service(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    """A ContainerManager stub talking to an NM host with node n1, served on port 0."""
    host = NodeHost([NodeSpec("n1", NODE)], "127.0.0.1:1", batch=False)
    monkeypatch.setattr(host, "schedule_completion", lambda node_id, duration_s: None)
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    cm_grpc.add_ContainerManagerServicer_to_server(ContainerManagerServicer(host), server)
    await server.start()
    try:
        async with channel(f"127.0.0.1:{port}") as ch:
            yield cm_grpc.ContainerManagerStub(ch)
    finally:
        await server.stop(0)
        await host.close()


async def start(stub: Any, cid: str, duration_s: float) -> None:
    launch = ContainerLaunch(cid, "app-1", "n1", TASK, duration_s)
    resp = await stub.StartContainers(
        cm_pb.StartContainersRequest(launches=[wire.launch_to_pb(launch)]), timeout=5
    )
    assert list(resp.started) == [cid], dict(resp.failed)


async def statuses(stub: Any, *cids: str) -> tuple[dict[str, ContainerStatus], list[str]]:
    """GetContainerStatuses for ``cids`` on n1: (status by container id, unknown ids)."""
    resp = await stub.GetContainerStatuses(
        cm_pb.GetContainerStatusesRequest(node_id="n1", container_ids=list(cids)), timeout=5
    )
    known = {s.container_id: wire.status_from_pb(s) for s in resp.statuses}
    return known, list(resp.unknown)


def test_get_container_statuses_follows_a_container_from_start_to_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def body() -> None:
        async with nm_service(monkeypatch) as stub:
            await start(stub, "long", LONG_S)
            await start(stub, "short", 0.05)
            known, unknown = await statuses(stub, "long", "never-started")
            assert unknown == ["never-started"]
            long = known["long"]
            assert (long.state, long.exit_status, long.finish_s) == (
                ContainerState.RUNNING,
                EXIT_SUCCESS,
                0.0,
            )
            assert long.start_s >= 0
            await asyncio.sleep(0.2)  # > 0.05 emulated seconds at dilation 1
            known, unknown = await statuses(stub, "short", "long")
            assert unknown == []
            short = known["short"]
            assert (short.state, short.exit_status) == (ContainerState.COMPLETE, EXIT_SUCCESS)
            assert short.finish_s == short.start_s + 0.05
            assert known["long"].state is ContainerState.RUNNING

    asyncio.run(body())


def test_a_container_the_am_stopped_is_killed_by_the_am(monkeypatch: pytest.MonkeyPatch) -> None:
    async def body() -> None:
        async with nm_service(monkeypatch) as stub:
            await start(stub, "c1", LONG_S)
            resp = await stub.StopContainers(
                cm_pb.StopContainersRequest(node_id="n1", container_ids=["c1", "nope"]),
                timeout=5,
            )
            assert list(resp.stopped) == ["c1"]
            known, _ = await statuses(stub, "c1")
            c1 = known["c1"]
            assert (c1.state, c1.exit_status) == (ContainerState.KILLED, EXIT_KILLED_BY_AM)
            assert c1.finish_s >= c1.start_s

    asyncio.run(body())


def test_statuses_on_a_node_not_hosted_here_are_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    async def body() -> None:
        async with nm_service(monkeypatch) as stub:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.GetContainerStatuses(
                    cm_pb.GetContainerStatusesRequest(node_id="n2", container_ids=["c1"]),
                    timeout=5,
                )
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
            assert "n2" in (err.value.details() or "")

    asyncio.run(body())

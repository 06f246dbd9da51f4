"""Container launches are the RM's word (issue 26, item 1), tried as the attacks were: a
user listed in the ACL, acting as its own application's AM, holds a real grant and asks
the NM for more than it grants. Each is refused, whole, and nothing runs.

Same cluster as test_identity (an in-process RM behind a real gate, a real NM host with
its ContainerManager server, real gRPC channels).
"""

from __future__ import annotations

import asyncio
import os
import pwd
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from nm.server import main as nm_main
from nm.server.service import Account
from rm.server import grants
from tests.integration.test_identity import (
    DENIED,
    NODE_SECRET,
    TASK,
    UNAUTHENTICATED,
    Cluster,
    aio,
    cluster,
    granted,
    refused,
)
from treadle.errors import InvalidRequestError
from treadle.live import auth
from treadle.live.gate import Gate
from treadle.live.rpcutil import Peer, channel
from treadle.messages import ContainerState
from treadle.rpc.v1 import (
    common_pb2 as pb,
    container_manager_pb2 as cm_pb,
    container_manager_pb2_grpc as cm_grpc,
)


def launch(g: pb.Container, **over: Any) -> cm_pb.StartContainersRequest:
    """The launch an honest AM sends for grant ``g`` (fields in ``over`` changed)."""
    fields: dict[str, Any] = dict(
        container_id=g.container_id, app_id=g.app_id, node_id=g.node_id,
        resources=g.resources, duration_s=100.0, container_token=g.container_token,
        max_duration_s=g.max_duration_s, expires_s=g.expires_s,
    )  # fmt: skip
    fields.update(over)
    return cm_pb.StartContainersRequest(launches=[cm_pb.ContainerLaunch(**fields)])


def running(c: Cluster, cid: str) -> bool:
    status = c.host.nms["n1"].container_status(cid, c.host.clock.now())
    return status is not None and status.state is ContainerState.RUNNING


@aio
async def test_a_task_grant_starts_no_command_and_nothing_runs(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        nm, g = await granted(c)
        marker = tmp_path / "ran"
        shell = ["/bin/sh", "-c", f"touch {marker}"]
        why = await refused(DENIED, nm.StartContainers(launch(g, command=shell)))
        assert why == f"container {g.container_id}: a task container runs no command " \
            "(its grant names none)"  # fmt: skip
        # Nor the AM's own command with a token of its making, nor an environment.
        am_like = dict(command=["{python}", "-m", "am"], environment={"TREADLE_AM_TOKEN": "x"})
        await refused(DENIED, nm.StartContainers(launch(g, **am_like)))
        preload = launch(g, environment={"LD_PRELOAD": "/tmp/x.so"})
        assert "bad container token" in await refused(UNAUTHENTICATED, nm.StartContainers(preload))
        await asyncio.sleep(0.2)
        assert not marker.exists()
        assert not c.host.processes
        assert not running(c, g.container_id)
        # The grant is not spent by the refusals: the honest launch starts.
        ok = await nm.StartContainers(launch(g))
        assert list(ok.started) == [g.container_id]


@aio
async def test_a_grant_starts_one_container_once(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        nm, g = await granted(c)
        used = f"container {g.container_id}: its grant was used already"
        twice = launch(g)
        twice.launches.append(twice.launches[0])
        assert (await refused(DENIED, nm.StartContainers(twice))).startswith(used)
        assert not running(c, g.container_id)
        assert list((await nm.StartContainers(launch(g))).started) == [g.container_id]
        assert (await refused(DENIED, nm.StartContainers(launch(g)))).startswith(used)
        # After its container ended (stopped by its AM, reported to the RM): still spent.
        stop = cm_pb.StopContainersRequest(
            node_id="n1", container_ids=[g.container_id], container_tokens=[g.container_token]
        )
        assert list((await nm.StopContainers(stop)).stopped) == [g.container_id]
        await c.host.heartbeat_once()
        assert g.container_id not in c.host.launches  # the NM has forgotten the container
        assert (await refused(DENIED, nm.StartContainers(launch(g)))).startswith(used)
        assert not running(c, g.container_id)


@aio
async def test_a_task_runs_no_longer_than_the_jobs_longest_task(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        nm, g = await granted(c)
        assert g.max_duration_s == 100.0  # the job's one task
        why = await refused(DENIED, nm.StartContainers(launch(g, duration_s=1e9)))
        assert why == f"container {g.container_id}: asks to run 1e+09 s; its grant allows " \
            "at most 100 s"  # fmt: skip
        # Raising the bound breaks the signature.
        forged = launch(g, duration_s=1e9, max_duration_s=1e9)
        await refused(UNAUTHENTICATED, nm.StartContainers(forged))
        assert not running(c, g.container_id)


@aio
async def test_a_grant_past_its_expiry_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grants, "GRANT_TTL_WALL_S", 0.05)
    async with cluster(tmp_path) as c:
        nm, g = await granted(c)
        await asyncio.sleep(0.2)
        why = await refused(UNAUTHENTICATED, nm.StartContainers(launch(g)))
        assert why.startswith(f"container {g.container_id}: its grant expired at ")
        # Moving the expiry breaks the signature.
        later = launch(g, expires_s=g.expires_s + 3600)
        assert "bad container token" in await refused(UNAUTHENTICATED, nm.StartContainers(later))
        assert not running(c, g.container_id)


def nobody() -> Account:
    if os.geteuid() != 0:
        pytest.skip("switching accounts needs root; these tests run as another user")
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no account 'nobody' on this machine")
    return Account("nobody", entry.pw_uid, entry.pw_gid)


@aio
async def test_an_am_command_runs_as_nobody_without_the_hosts_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The NM host runs as root (here): the RM's AM command runs as nobody, whose
    environment carries the grant's variables but none of the host's treadle secrets."""
    account = nobody()
    monkeypatch.setenv("TREADLE_ADMIN_KEY", "the-admin-key-0123456789")
    out = Path(tempfile.mkdtemp(prefix="treadle-run-as-", dir="/tmp"))  # nobody enters /tmp
    try:
        out.chmod(0o777)  # somewhere nobody may write its answer
        async with cluster(tmp_path) as c:
            c.host.run_as = account
            signer = Gate(auth.AclFile(c.acl), NODE_SECRET)  # signs as the RM's gate does
            command = ["/bin/sh", "-c", f"id -u > {out}/uid; env > {out}/env"]
            env = {"TREADLE_AM_TOKEN": "am-token-of-this-app"}
            expires = c.host.clock.now() + 60
            m = cm_pb.ContainerLaunch(
                container_id="container_am_1", app_id="application_x", node_id="n1",
                resources=pb.Resources(amounts=TASK), command=command, environment=env,
                max_duration_s=float("inf"), expires_s=expires,
            )  # fmt: skip
            m.container_token = signer.sign_container(
                m.container_id, m.app_id, "n1", TASK, max_duration_s=float("inf"),
                expires_s=expires, command=command, environment=env,
            )  # fmt: skip
            ch = channel(c.nm_address, Peer())
            c.channels.append(ch)
            nm = cm_grpc.ContainerManagerStub(ch)
            ok = await nm.StartContainers(cm_pb.StartContainersRequest(launches=[m]))
            assert list(ok.started) == ["container_am_1"]
            deadline = time.monotonic() + 60  # generous: the machine may be loaded
            while not (out / "env").exists() or c.host.processes:
                assert time.monotonic() < deadline, (
                    f"the AM command did not finish: {sorted(os.listdir(out))}, "
                    f"processes {list(c.host.processes)}"
                )
                await asyncio.sleep(0.05)
        assert (out / "uid").read_text().strip() == str(account.uid)
        seen = (out / "env").read_text()
        assert "TREADLE_AM_TOKEN=am-token-of-this-app" in seen
        assert "TREADLE_ADMIN_KEY" not in seen
    finally:
        for f in out.iterdir():
            f.unlink()
        out.rmdir()


def test_a_root_nm_host_runs_containers_as_nobody_unless_told() -> None:
    account = nobody()
    assert nm_main.run_as(None) == account
    assert nm_main.run_as("root") is None  # named: its own account, as asked
    with pytest.raises(InvalidRequestError, match="--run-as no-such-user: no such account"):
        nm_main.run_as("no-such-user")

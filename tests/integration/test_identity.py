"""Identity on every call (issue 16): each attack a stranger tried is refused, with its
status code and no effect; an admin does what users cannot.

An in-process RM on port 0 behind a real gate (an ACL file, a node secret), real gRPC
channels signing as alice, bob, the admin or nobody, and a real NM host
(``nm.server.service.NodeHost`` with its ContainerManager server) for the node and container
attacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from nm.server.service import ContainerManagerServicer, NodeHost
from rm.core.facade import ResourceManager
from rm.server.service import RmSettings, serve
from treadle.live import auth
from treadle.live.gate import Gate
from treadle.live.rpcutil import CHANNEL_OPTIONS, Peer, bind, channel
from treadle.model import NodeSpec
from treadle.registry import build
from treadle.resources import Resources
from treadle.rpc.v1 import (
    application_master_pb2 as am_pb,
    application_master_pb2_grpc as am_grpc,
    client_pb2 as client_pb,
    client_pb2_grpc as client_grpc,
    common_pb2 as pb,
    container_manager_pb2 as cm_pb,
    container_manager_pb2_grpc as cm_grpc,
    resource_tracker_pb2 as rt_pb,
    resource_tracker_pb2_grpc as rt_grpc,
)

UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
DENIED = grpc.StatusCode.PERMISSION_DENIED
KEYS = {
    "alice": "alice-key-0123456789",
    "bob": "bob-key-0123456789xx",
    "root": "root-key-0123456789x",
}
NODE_SECRET = b"node-secret-0123456789"
TASK = {"vcores": 1.0, "memory_mb": 1024.0}


def aio(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return run


def write_acl(path: Path, extra: str = "") -> None:
    path.write_text(
        f"# test ACL\nalice user {KEYS['alice']}\nbob user {KEYS['bob']}\n"
        f"root admin {KEYS['root']}  # the admin\n{extra}"
    )


def creds(user: str, key: str | None = None) -> auth.Credentials:
    return auth.Credentials(user, (key or KEYS[user]).encode())


@dataclass
class Cluster:
    rm: ResourceManager
    address: str
    acl: Path
    host: NodeHost
    nm_address: str
    channels: list[grpc.aio.Channel]
    gate: Gate | None = None

    def client(self, user: str | None, key: str | None = None) -> Any:
        ch = channel(self.address, Peer(creds(user, key) if user else None))
        self.channels.append(ch)
        return client_grpc.ClientStub(ch)

    def am(self) -> Any:
        ch = channel(self.address, Peer())
        self.channels.append(ch)
        return am_grpc.ApplicationMasterStub(ch)

    def tracker(self, secret: bytes | None) -> Any:
        who = auth.Credentials(auth.NODE_PRINCIPAL, secret) if secret else None
        ch = channel(self.address, Peer(who))
        self.channels.append(ch)
        return rt_grpc.ResourceTrackerStub(ch)

    def state(self, app_id: str) -> str:
        return self.rm.reports.application(app_id).state

    async def submit(self, user: str, name: str = "job") -> tuple[str, str]:
        job = pb.JobSpec(
            name=name,
            stages=[
                pb.StageSpec(name="s", resources=pb.Resources(amounts=TASK), durations=[100.0])
            ],
        )
        resp = await self.client(user).SubmitApplication(
            client_pb.SubmitApplicationRequest(user=user, queue="default", job=job), timeout=10
        )
        return resp.app_id, resp.am_token


@contextlib.asynccontextmanager
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    acl = tmp_path / "acl"
    write_acl(acl)
    gate = Gate(auth.AclFile(acl), NODE_SECRET)
    rm = ResourceManager(build("policies", "fifo"), policy_errors="log")
    server, _, port = await serve(rm, RmSettings(), "127.0.0.1:0", gate)
    address = f"127.0.0.1:{port}"
    nm_server = grpc.aio.server(options=CHANNEL_OPTIONS)
    nm_port = bind(nm_server, "127.0.0.1:0", None)
    node = NodeSpec("n1", Resources(vcores=4, memory_mb=8192))
    host = NodeHost(
        [node], address, batch=True, address=f"127.0.0.1:{nm_port}", node_secret=NODE_SECRET
    )
    cm_grpc.add_ContainerManagerServicer_to_server(ContainerManagerServicer(host), nm_server)
    await nm_server.start()
    await host.connect()
    await host.register()
    c = Cluster(rm, address, acl, host, f"127.0.0.1:{nm_port}", [], gate)
    try:
        yield c
    finally:
        for ch in c.channels:
            await ch.close()
        await host.close()
        await nm_server.stop(None)
        await server.stop(None)


async def granted(c: Cluster, user: str = "alice") -> tuple[Any, pb.Container]:
    """A task container the RM granted ``user``'s new application (job: one 100 s task),
    as its AM receives it: (the NM's ContainerManager stub, the grant)."""
    app, token = await c.submit(user)
    am = c.am()
    await am.RegisterApplicationMaster(
        am_pb.RegisterApplicationMasterRequest(app_id=app, am_token=token)
    )
    ask = am_pb.Ask(priority=1, resources=pb.Resources(amounts=TASK), count=1)
    first = await am.Allocate(am_pb.AllocateRequest(app_id=app, asks=[ask], am_token=token))
    await c.host.heartbeat_once()
    again = am_pb.AllocateRequest(app_id=app, am_token=token, response_id=first.response_id)
    (g,) = (await am.Allocate(again)).allocated
    ch = channel(c.nm_address, Peer())
    c.channels.append(ch)
    return cm_grpc.ContainerManagerStub(ch), g


def one_task_job() -> pb.JobSpec:
    stage = pb.StageSpec(name="s", durations=[1.0], resources=pb.Resources(amounts=TASK))
    return pb.JobSpec(name="j", stages=[stage])


async def refused(code: grpc.StatusCode, call: Any) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() == code, (info.value.code(), info.value.details())
    return info.value.details() or ""


# ---------------------------------------------------------------------- users
@aio
async def test_no_credentials_cannot_kill_a_job(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        app, _ = await c.submit("alice")
        why = await refused(
            UNAUTHENTICATED,
            c.client(None).KillApplication(client_pb.KillApplicationRequest(app_id=app)),
        )
        assert "no credentials" in why
        assert c.state(app) == "RUNNING"


@aio
async def test_a_user_cannot_kill_another_users_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with cluster(tmp_path) as c:
        app, _ = await c.submit("alice")
        why = await refused(
            DENIED, c.client("bob").KillApplication(client_pb.KillApplicationRequest(app_id=app))
        )
        assert "'bob' may not kill" in why
        assert c.state(app) == "RUNNING"
    # The refusal is logged with the caller's identity and address.
    logged = [line for line in capsys.readouterr().out.splitlines() if "rpc_refused" in line]
    assert len(logged) == 1
    assert "user=bob" in logged[0]
    assert "PERMISSION_DENIED" in logged[0]
    assert "peer=ipv4:127.0.0.1" in logged[0]


@aio
async def test_a_user_cannot_read_another_users_events_or_applications(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        app, _ = await c.submit("alice")
        await c.submit("bob", "bobs")
        bob = c.client("bob")
        await refused(DENIED, bob.GetEvents(client_pb.GetEventsRequest()))
        await refused(
            DENIED, bob.GetApplicationReport(client_pb.GetApplicationReportRequest(app_id=app))
        )
        listed = await bob.ListApplications(client_pb.ListApplicationsRequest())
        assert [a.user for a in listed.applications] == ["bob"]
        assert all(not a.am_token for a in listed.applications)  # a user never sees tokens


@aio
async def test_a_user_cannot_submit_as_another_user(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        job = one_task_job()
        req = client_pb.SubmitApplicationRequest(user="alice", job=job)
        await refused(DENIED, c.client("bob").SubmitApplication(req))
        assert c.rm.reports.applications() == []


@aio
async def test_a_forged_signature_is_refused(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        app, _ = await c.submit("alice")
        forger = c.client("alice", key="not-alices-key-at-all")
        why = await refused(
            UNAUTHENTICATED, forger.KillApplication(client_pb.KillApplicationRequest(app_id=app))
        )
        assert "bad signature for user 'alice'" in why
        unknown = c.client("mallory", key="whatever-key-0123456")
        why = await refused(
            UNAUTHENTICATED, unknown.GetClusterMetrics(client_pb.GetClusterMetricsRequest())
        )
        assert "unknown user 'mallory'" in why
        assert c.state(app) == "RUNNING"


@aio
async def test_a_replayed_request_is_refused(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        app, _ = await c.submit("alice")
        bare = channel(c.address, Peer())
        c.channels.append(bare)
        stub = client_grpc.ClientStub(bare)
        req = client_pb.GetApplicationReportRequest(app_id=app)
        method = "/treadle.v1.Client/GetApplicationReport"
        body = req.SerializeToString(deterministic=True)
        md = auth.signed_metadata(creds("alice"), method, body, time.time_ns())
        assert (await stub.GetApplicationReport(req, metadata=md)).app_id == app  # first use
        why = await refused(UNAUTHENTICATED, stub.GetApplicationReport(req, metadata=md))
        assert "already used" in why
        old = auth.signed_metadata(creds("alice"), method, body, time.time_ns() - 60 * 10**9)
        why = await refused(UNAUTHENTICATED, stub.GetApplicationReport(req, metadata=old))
        assert "older than the replay window" in why
        # A signature is bound to its request: the same headers on another request fail.
        kill = client_pb.KillApplicationRequest(app_id=app)
        md2 = auth.signed_metadata(creds("alice"), method, body, time.time_ns())
        await refused(UNAUTHENTICATED, stub.KillApplication(kill, metadata=md2))
        assert c.state(app) == "RUNNING"


@aio
async def test_an_admin_does_what_users_cannot(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        app, _ = await c.submit("alice")
        await c.submit("bob", "bobs")
        root = c.client("root")
        listed = await root.ListApplications(client_pb.ListApplicationsRequest())
        assert sorted(a.user for a in listed.applications) == ["alice", "bob"]
        assert all(a.am_token for a in listed.applications)  # awaiting their AMs: for the AM host
        events = await root.GetEvents(client_pb.GetEventsRequest())
        assert any('"job_submitted"' in r for r in events.records)
        job = one_task_job()
        sub = await root.SubmitApplication(client_pb.SubmitApplicationRequest(user="bob", job=job))
        assert c.rm.reports.application(sub.app_id).user == "bob"
        await root.KillApplication(client_pb.KillApplicationRequest(app_id=app))
        assert c.state(app) == "KILLED"
        # The owner may kill its own job too.
        await c.client("bob").KillApplication(client_pb.KillApplicationRequest(app_id=sub.app_id))
        assert c.state(sub.app_id) == "KILLED"


@aio
async def test_the_acl_file_is_reloaded_when_it_changes(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        carol = c.client("carol", key="carol-key-0123456789")
        metrics = client_pb.GetClusterMetricsRequest()
        await refused(UNAUTHENTICATED, carol.GetClusterMetrics(metrics))
        write_acl(c.acl, "carol admin carol-key-0123456789\n")
        assert (await carol.GetClusterMetrics(metrics)).nodes == 1
        c.acl.write_text("carol superuser short\n")  # broken: the entries in force stay
        assert (await carol.GetClusterMetrics(metrics)).nodes == 1


# ---------------------------------------------------------------------- AMs
@aio
async def test_finish_without_the_am_token_cannot_mark_a_job_succeeded(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        app, token = await c.submit("alice")
        am = c.am()
        await am.RegisterApplicationMaster(
            am_pb.RegisterApplicationMasterRequest(app_id=app, am_token=token)
        )
        finish = am_pb.FinishApplicationMasterRequest(app_id=app, status=pb.FINAL_STATUS_SUCCEEDED)
        why = await refused(UNAUTHENTICATED, am.FinishApplicationMaster(finish))
        assert "carries no AM token" in why
        await refused(UNAUTHENTICATED, am.Allocate(am_pb.AllocateRequest(app_id=app)))
        assert c.state(app) == "RUNNING"
        finish.am_token = token
        await am.FinishApplicationMaster(finish)
        assert c.state(app) == "FINISHED"


@aio
async def test_one_jobs_am_token_does_not_register_another_jobs_am(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        alices, _ = await c.submit("alice")
        _, bobs_token = await c.submit("bob", "bobs")
        am = c.am()
        req = am_pb.RegisterApplicationMasterRequest(app_id=alices, am_token=bobs_token)
        why = await refused(UNAUTHENTICATED, am.RegisterApplicationMaster(req))
        assert f"not the AM token of {alices}" in why
        await refused(
            UNAUTHENTICATED,
            am.RegisterApplicationMaster(am_pb.RegisterApplicationMasterRequest(app_id=alices)),
        )
        started = [r for r in c.rm.log.records if r["event"] == "attempt_started"]
        assert started == []


# ---------------------------------------------------------------------- NMs
def registration(node_id: str, token: str = "") -> rt_pb.RegisterNodeRequest:
    return rt_pb.RegisterNodeRequest(
        node_id=node_id,
        address="127.0.0.1:1",
        capacity=pb.Resources(amounts={"vcores": 64.0, "memory_mb": 1e6}),
        node_token=token,
    )


@aio
async def test_a_rogue_nm_cannot_register_without_the_node_secret(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        why = await refused(UNAUTHENTICATED, c.tracker(None).RegisterNode(registration("rogue")))
        assert "no credentials" in why
        why = await refused(
            UNAUTHENTICATED,
            c.tracker(b"guessed-secret-0123456").RegisterNode(registration("rogue")),
        )
        assert "bad signature" in why
        # A user's key is no node secret either.
        alice = channel(c.address, Peer(creds("alice")))
        c.channels.append(alice)
        await refused(
            DENIED, rt_grpc.ResourceTrackerStub(alice).RegisterNode(registration("rogue"))
        )
        assert c.rm.reports.cluster().nodes == 1


@aio
async def test_a_live_node_id_cannot_be_re_registered_without_its_token(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        # Even with the node secret: the live node's token is missing.
        tracker = c.tracker(NODE_SECRET)
        why = await refused(DENIED, tracker.RegisterNode(registration("n1")))
        assert "re-registering it needs its node token" in why
        assert c.rm.state.nodes["n1"].capacity == Resources(vcores=4, memory_mb=8192)
        await c.host.heartbeat_once()  # the real NM is unaffected
        # Its own re-registration (with its token) is accepted and keeps the token.
        before = dict(c.host.tokens)
        await c.host.register()
        assert c.host.tokens == before


@aio
async def test_a_heartbeat_without_the_node_token_is_refused(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        tracker = c.tracker(None)
        forged = rt_pb.NodeHeartbeatRequest(node_id="n1", seq=10**6)
        why = await refused(UNAUTHENTICATED, tracker.NodeHeartbeat(forged))
        assert "carries no node token" in why
        forged.node_token = "guess"
        await refused(UNAUTHENTICATED, tracker.NodeHeartbeat(forged))
        # In a batch, one forged heartbeat refuses the whole call: nothing is applied.
        good = rt_pb.NodeHeartbeatRequest(node_id="n1", seq=10**6, node_token=c.host.tokens["n1"])
        batch = rt_pb.NodeHeartbeatBatchRequest(heartbeats=[good, forged])
        await refused(UNAUTHENTICATED, tracker.NodeHeartbeatBatch(batch))
        assert c.rm.state.nodes["n1"].last_seq < 10**6
        await c.host.heartbeat_once()


# ---------------------------------------------------------------------- containers
@aio
async def test_an_nm_refuses_a_container_the_rm_did_not_sign(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        nm, g = await granted(c)
        app = g.app_id
        assert g.container_token

        def launch(token: str, **over: Any) -> cm_pb.ContainerLaunch:
            fields = dict(container_id=g.container_id, app_id=app, node_id="n1",
                          resources=g.resources, duration_s=5.0, container_token=token,
                          max_duration_s=g.max_duration_s, expires_s=g.expires_s)  # fmt: skip
            fields.update(over)
            return cm_pb.ContainerLaunch(**fields)

        bad = [
            launch("forged"),
            launch(""),
            launch(g.container_token, resources=pb.Resources(amounts={"vcores": 4.0})),
            launch(g.container_token, container_id="container_forged"),
        ]
        for x in bad:
            why = await refused(
                UNAUTHENTICATED, nm.StartContainers(cm_pb.StartContainersRequest(launches=[x]))
            )
            assert "container token" in why
        assert c.host.nms["n1"].container_status(g.container_id, 0.0) is None
        ok = await nm.StartContainers(
            cm_pb.StartContainersRequest(launches=[launch(g.container_token)])
        )
        assert list(ok.started) == [g.container_id]


def test_the_rm_process_refuses_to_start_without_secrets_or_insecure(tmp_path: Path) -> None:
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "rm", "--policy", "fifo", "--port-file", str(tmp_path / "p")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0
    assert "--acl FILE and --node-secret-file FILE" in run.stderr
    (tmp_path / "acl").write_text("alice root short\n")
    (tmp_path / "ns").write_text("x" * 20)
    for name in ("acl", "ns"):
        (tmp_path / name).chmod(0o600)  # a loose secret is refused first (test_private_state)
    run = subprocess.run(
        [sys.executable, "-m", "rm", "--policy", "fifo", "--acl", str(tmp_path / "acl"),
         "--node-secret-file", str(tmp_path / "ns")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2
    assert f"{tmp_path / 'acl'}: line 1: role must be one of user, admin" in run.stderr


def test_the_readme_flow_needs_no_manual_step_and_strangers_are_refused(tmp_path: Path) -> None:
    """`treadle cluster up`, `treadle run --rm ADDR`, `cluster status`, `cluster down` from
    one directory work as before (the cluster's secrets are made and found by themselves);
    the same run from elsewhere, with no identity, is refused in one line."""
    import subprocess
    import sys

    def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "treadle.cli", *args],
            cwd=cwd, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    up = cli(
        ["cluster", "up", "--workload", "tiny", "--policy", "fifo", "--dilation", "20"], tmp_path
    )
    try:
        assert up.returncode == 0, up.stderr
        address = up.stdout.strip()
        secrets = tmp_path / ".treadle" / "cluster" / "secrets"
        assert oct((secrets / "acl").stat().st_mode & 0o777) == "0o600"
        stranger = cli(["run", "tiny", "--rm", address, "--out", "out"], elsewhere)
        assert stranger.returncode != 0
        assert stranger.stderr.strip().count("\n") == 0, stranger.stderr
        assert "UNAUTHENTICATED: no credentials" in stranger.stderr
        run = cli(["run", "tiny", "--rm", address, "--out", "out", "--no-slowdown"], tmp_path)
        assert run.returncode == 0, run.stderr
        assert (tmp_path / "out" / "summary.json").exists()
        status = cli(["cluster", "status"], tmp_path)
        assert "nodes up" in status.stdout, status.stdout
    finally:
        down = cli(["cluster", "down"], tmp_path)
    assert down.returncode == 0, down.stderr

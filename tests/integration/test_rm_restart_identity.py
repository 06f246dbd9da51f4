"""What a work-preserving RM restart must not forget of identity and attempts (issue 16):
a signed request accepted before the restart is still refused as a replay after it, and
an AM attempt lost through no fault of its AM (YARN-614) still does not count.

The replay case kills a real RM process (``python -m rm --state-dir``) with SIGKILL and
starts it again on the same address and store; the attempt case restarts an in-process
RM service on the same SQLite store (real gRPC).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc

from plugins.policies.fifo import FifoPolicy
from rm.core.facade import ResourceManager
from rm.server.service import RmServer
from tests.faults import serve_on_store
from treadle.live import auth
from treadle.live.rpcutil import channel
from treadle.rpc.v1 import (
    application_master_pb2 as am_pb,
    application_master_pb2_grpc as am_grpc,
    client_pb2 as client_pb,
    client_pb2_grpc as client_grpc,
    common_pb2 as pb,
)

KEY = "alice-key-0123456789"
LIST = "/treadle.v1.Client/ListApplications"


def _start_rm(tmp_path: Path, listen: str) -> subprocess.Popen[bytes]:
    port_file = tmp_path / "port"
    port_file.unlink(missing_ok=True)
    for secret in ("acl", "node.secret"):
        (tmp_path / secret).chmod(0o600)  # the RM refuses secrets others may read
    argv = [sys.executable, "-m", "rm", "--policy", "fifo", "--listen", listen,
            "--state-dir", str(tmp_path / "state"), "--acl", str(tmp_path / "acl"),
            "--node-secret-file", str(tmp_path / "node.secret"),
            "--port-file", str(port_file)]  # fmt: skip
    with (tmp_path / "rm.log").open("ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        assert proc.poll() is None, (tmp_path / "rm.log").read_text()
        assert time.monotonic() < deadline, "the RM did not start"
        time.sleep(0.05)
    return proc


def test_a_request_replayed_after_an_rm_restart_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "acl").write_text(f"alice user {KEY}\n")
    (tmp_path / "node.secret").write_text("node-secret-0123456789\n")
    rm = _start_rm(tmp_path, "127.0.0.1:0")
    address = (tmp_path / "port").read_text().strip()
    body = client_pb.ListApplicationsRequest().SerializeToString(deterministic=True)
    creds = auth.Credentials("alice", KEY.encode())
    captured = auth.signed_metadata(creds, LIST, body, time.time_ns())
    fresh_ts = time.time_ns() + 1

    async def call(metadata: Any) -> grpc.StatusCode:
        async with channel(address) as ch:
            stub: Any = client_grpc.ClientStub(ch)
            try:
                await stub.ListApplications(
                    client_pb.ListApplicationsRequest(), metadata=metadata, timeout=10
                )
            except grpc.aio.AioRpcError as e:
                return e.code()
            return grpc.StatusCode.OK

    restarted = None
    try:
        assert asyncio.run(call(captured)) == grpc.StatusCode.OK
        assert asyncio.run(call(captured)) == grpc.StatusCode.UNAUTHENTICATED  # replayed
        os.killpg(rm.pid, signal.SIGKILL)
        rm.wait(10)
        restarted = _start_rm(tmp_path, address)
        # The restarted RM's window reaches 30 s back, so only the store can refuse it.
        assert asyncio.run(call(captured)) == grpc.StatusCode.UNAUTHENTICATED
        newer = auth.signed_metadata(creds, LIST, body, max(time.time_ns(), fresh_ts))
        assert asyncio.run(call(newer)) == grpc.StatusCode.OK  # alice's new calls go on
    finally:
        for p in (rm, restarted):
            if p is not None and p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
    assert "older than the replay window" in (tmp_path / "rm.log").read_text()


async def _rm_on(store_dir: Path) -> tuple[grpc.aio.Server, RmServer, ResourceManager, int]:
    rm = ResourceManager(FifoPolicy(), max_am_attempts=2)
    server, state, port = await serve_on_store(rm, store_dir)
    return server, state, rm, port


def test_an_attempt_lost_to_a_node_loss_still_does_not_count_after_a_restart(
    tmp_path: Path,
) -> None:
    """Two attempts allowed: the first lost with its node (not counted), then the RM
    restarts; the second attempt's own failure is the first that counts, so a third
    attempt follows instead of the application failing."""

    async def register(port: int, app_id: str) -> int:
        async with channel(f"127.0.0.1:{port}") as ch:
            am: Any = am_grpc.ApplicationMasterStub(ch)
            reg = am_pb.RegisterApplicationMasterRequest(app_id=app_id)
            return int((await am.RegisterApplicationMaster(reg, timeout=10)).attempt)

    async def main() -> None:
        server, state, rm, port = await _rm_on(tmp_path)
        async with channel(f"127.0.0.1:{port}") as ch:
            client: Any = client_grpc.ClientStub(ch)
            stage = pb.StageSpec(name="s", resources=pb.Resources(amounts={"vcores": 1}),
                                 durations=[5.0])  # fmt: skip
            sub = client_pb.SubmitApplicationRequest(
                user="alice", job=pb.JobSpec(name="j", stages=[stage])
            )
            app_id = (await client.SubmitApplication(sub, timeout=10)).app_id
        assert await register(port, app_id) == 1
        # What a lost node does to the attempt whose AM container it held (YARN-614).
        rm.apps.fail_attempt(app_id, "AM container exited (LOST, -100)", state.now(), counts=False)
        state.persist(every_s=3600.0)  # the housekeeping pass: written at once all the same
        await server.stop(None)  # no shutdown work: as if killed

        server, state, rm, port = await _rm_on(tmp_path)
        try:
            assert await register(port, app_id) == 2
            rm.apps.fail_attempt(app_id, "AM missed Allocate calls", state.now())  # counts
            assert rm.reports.application(app_id).state == "RUNNING", rm.reports.application(
                app_id
            ).diagnostics
            assert await register(port, app_id) == 3
        finally:
            await server.stop(None)

    asyncio.run(main())

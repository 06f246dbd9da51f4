"""Containment (issue 16): the RM never expires a node or an AM attempt because of its own
stall. Its event loop is stalled on purpose (a blocking call scheduled on it, as a big
request being decoded would) for three times the expiry while a node heartbeats and an AM
calls Allocate on time: nothing expires, and the RM logs the stall. Once they really fall
silent, they expire as before, late by at most the stall it still allows for.

Real gRPC against an RM serving in a thread of its own (tests/rm_fuzzing.py), driven by
two client threads with blocking stubs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from rm.core.facade import ResourceManager
from rm.server.service import RmServer, RmSettings
from tests.rm_fuzzing import ServerThread
from treadle import events as ev
from treadle.live import lag
from treadle.messages import NodeHeartbeat, NodeRegistration
from treadle.registry import build
from treadle.resources import Resources
from treadle.rpc.v1 import (
    application_master_pb2 as am_pb,
    application_master_pb2_grpc as am_grpc,
    client_pb2 as client_pb,
    client_pb2_grpc as client_grpc,
    common_pb2 as pb,
    resource_tracker_pb2 as rt_pb,
    resource_tracker_pb2_grpc as rt_grpc,
)

HEARTBEAT_S = 0.2
EXPIRY_S = 1.0  # five intervals
STALL_S = 3.0  # three expiries
TASK = pb.Resources(amounts={"vcores": 1.0, "memory_mb": 512.0})


@pytest.fixture
def server() -> Iterator[ServerThread]:
    rm = ResourceManager(
        build("policies", "fifo"),
        heartbeat_s=HEARTBEAT_S,
        node_expiry_s=EXPIRY_S,
        am_expiry_s=EXPIRY_S,
        policy_errors="log",
    )
    srv = ServerThread(rm)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


class OnTime:
    """A node that heartbeats and an AM that calls Allocate every interval, on a thread of
    their own, until stopped; every call waits for its answer (as the NM and AM do)."""

    def __init__(self, channel: grpc.Channel, node: str, app: str) -> None:
        self.rt: Any = rt_grpc.ResourceTrackerStub(channel)
        self.am: Any = am_grpc.ApplicationMasterStub(channel)
        self.node, self.app = node, app
        self.done = threading.Event()
        self.errors: list[str] = []
        self.slowest = 0.0  # wall s: the longest call (the stall, seen from outside)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        seq, rid = 0, 0
        while not self.done.is_set():
            seq += 1
            start = time.monotonic()
            try:
                hb = rt_pb.NodeHeartbeatRequest(node_id=self.node, seq=seq)
                if self.rt.NodeHeartbeat(hb, timeout=30).resync:
                    self.errors.append(f"heartbeat {seq}: told to resync")
                req = am_pb.AllocateRequest(app_id=self.app, response_id=rid)
                rid = self.am.Allocate(req, timeout=30).response_id
            except grpc.RpcError as e:
                self.errors.append(f"{e.code().name}: {e.details()}")
            self.slowest = max(self.slowest, time.monotonic() - start)
            self.done.wait(HEARTBEAT_S)

    def __enter__(self) -> OnTime:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join(40)


def _events(srv: ServerThread, kind: str) -> list[dict[str, Any]]:
    return [r for r in srv.rm.log.records if r["event"] == kind]


def test_the_rm_allows_for_its_own_stall(server: ServerThread) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        rt: Any = rt_grpc.ResourceTrackerStub(ch)
        client: Any = client_grpc.ClientStub(ch)
        am: Any = am_grpc.ApplicationMasterStub(ch)
        rt.RegisterNode(rt_pb.RegisterNodeRequest(node_id="n1", capacity=TASK), timeout=10)
        spec = pb.JobSpec(
            name="innocent", stages=[pb.StageSpec(name="s", resources=TASK, durations=[600.0])]
        )
        app = client.SubmitApplication(
            client_pb.SubmitApplicationRequest(user="alice", job=spec), timeout=10
        ).app_id
        am.RegisterApplicationMaster(am_pb.RegisterApplicationMasterRequest(app_id=app), timeout=10)
        with OnTime(ch, "n1", app) as roles:
            time.sleep(5 * HEARTBEAT_S)
            # The stall: the RM's loop runs a blocking call for three expiries.
            server.loop.call_soon_threadsafe(time.sleep, STALL_S)
            time.sleep(STALL_S + 2 * EXPIRY_S)
        assert roles.errors == []
        assert roles.slowest >= STALL_S * 0.9  # the stall did hold up their calls
        assert _events(server, ev.NODE_LOST) == []
        assert _events(server, ev.ATTEMPT_FAILED) == []
        assert server.rm.reports.application(app).state == "RUNNING"
        assert server.state is not None
        print(f"RM stalled {roles.slowest:.2f} s (expiry {EXPIRY_S} s): no node or AM expired")

        # Really silent now: both expire, late by at most the stall still allowed for.
        silent = time.monotonic()
        deadline = silent + EXPIRY_S + 2 * (STALL_S + EXPIRY_S) + 2.0
        while not (_events(server, ev.NODE_LOST) and _events(server, ev.ATTEMPT_FAILED)):
            assert time.monotonic() < deadline, "a silent node or AM never expired"
            time.sleep(0.05)
        print(f"silent node and AM expired {time.monotonic() - silent:.2f} s after going quiet")


def test_an_expiry_the_stall_deferred_is_counted_as_lag() -> None:
    """A node kept past its expiry by the RM's stall grace and then heard from again was
    alive all along: a deferred expiry, lag the fidelity verdict reports. A node that
    stays silent expires in the end and is not counted as deferred."""
    rm = ResourceManager(
        build("policies", "fifo"), heartbeat_s=1.0, node_expiry_s=10.0, policy_errors="log"
    )
    srv = RmServer(rm, RmSettings())
    cap = Resources(vcores=4)
    for nid in ("alive", "silent"):
        rm.register_node(NodeRegistration(nid, cap), 0.0)
    before = lag.PROCESS.deferred_expiries["node"]
    srv.count_deferred(12.0, 0.0, set())  # no grace: nothing is kept, nothing watched
    assert lag.PROCESS.deferred_expiries["node"] == before

    grace = 5.0  # the RM stalled lately: both are past their expiry, neither expires yet
    assert rm.expire_nodes(12.0, grace) == []
    srv.count_deferred(12.0, grace, set())
    rm.node_heartbeat(NodeHeartbeat("alive", 1, [], []), 12.5)
    srv.count_deferred(13.0, grace, set())
    assert lag.PROCESS.deferred_expiries["node"] == before + 1  # "alive" came back

    lost = rm.expire_nodes(16.0, grace)
    assert lost == ["silent"]
    srv.count_deferred(16.0, grace, {("node", n) for n in lost})
    assert lag.PROCESS.deferred_expiries["node"] == before + 1  # an expiry, not a deferral

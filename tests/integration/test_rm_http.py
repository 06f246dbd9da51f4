"""The RM's HTTP port: YARN's REST API read by an unmodified YARN client (``yarn-api-client``
from PyPI), Prometheus metrics scraped while a workload runs, and the access rules.

The cluster tests start a real ``treadle cluster up`` (secured: the client signs with
``rm.server.http_auth.SignedAuth``) and replay the demo workload on it with ``treadle run``; the
in-process tests start RMs with ``rm.server.service.serve`` and ``rm.server.http.start_http``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from yarn_api_client import ResourceManager as YarnRM
from yarn_api_client.errors import APIError

from rm.core.facade import ResourceManager
from rm.server.http import start_http
from rm.server.http_auth import SignedAuth
from rm.server.http_metrics import RmMetrics
from rm.server.service import RmSettings, serve
from treadle.live.auth import Credentials, new_secret
from treadle.registry import build

CLI = [sys.executable, "-m", "treadle.cli"]


def cli(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


@dataclass
class Cluster:
    cwd: Path
    rm: str
    url: str
    creds: Credentials
    run: subprocess.Popen[str]

    def status(self) -> dict[str, Any]:
        out = cli(["cluster", "status", "--json"], self.cwd)
        assert out.returncode == 0, out.stderr
        data: dict[str, Any] = json.loads(out.stdout)
        return data

    def yarn(self) -> YarnRM:
        return YarnRM([self.url], timeout=10, auth=SignedAuth(self.creds))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """``treadle cluster up`` with the demo workload's nodes and queues (drf, dilation 10),
    and ``treadle run demo`` replaying on it (about 40 wall seconds)."""
    cwd = tmp_path_factory.mktemp("http-cluster")
    up = cli(["cluster", "up", "--workload", "demo", "--policy", "drf", "--dilation", "10"], cwd)
    assert up.returncode == 0, up.stderr
    try:
        state = json.loads((cwd / ".treadle/cluster/cluster.json").read_text())
        assert state["http"]
        assert state["http"] in up.stderr
        key = (cwd / ".treadle/cluster/secrets/treadle.key").read_text().strip()
        run = subprocess.Popen(
            [*CLI, "run", "demo", "--rm", state["rm"], "--out", "out", "--no-slowdown"],
            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        c = Cluster(cwd, state["rm"], state["http"], Credentials("treadle", key.encode()), run)
        try:
            _wait(lambda: _metrics(c)["containersAllocated"] > 0, 60, "a container allocated")
            yield c
        finally:
            with contextlib.suppress(ProcessLookupError):
                run.kill()
            run.communicate(timeout=30)
    finally:
        down = cli(["cluster", "down"], cwd)
        assert down.returncode == 0, down.stderr


def _wait(cond: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _metrics(c: Cluster) -> dict[str, Any]:
    data: dict[str, Any] = c.yarn().cluster_metrics().data["clusterMetrics"]
    return data


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = requests.get(f"{url}/metrics", timeout=10).text
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _total(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


# --------------------------------------------------------------------------------------
# A running cluster


@pytest.mark.slow
def test_metrics_endpoint_while_a_workload_runs(cluster: Cluster) -> None:
    """``/metrics`` (unsigned: aggregates only) shows the RM at work, in the Prometheus
    text format, with its own names: no clash with YARN's /ws/v1/cluster/metrics."""
    s = _scrape(cluster.url)
    assert s[("treadle_rm_nodes", (("state", "RUNNING"),))] == 4
    assert _total(s, "treadle_rm_applications") > 0
    assert _total(s, "treadle_rm_queue_containers") > 0
    assert s[("treadle_rm_cluster_allocated", (("resource", "vcores"),))] > 0
    allocated = [v for (n, labels), v in s.items() if n == "treadle_rm_queue_allocated"]
    assert any(v > 0 for v in allocated)
    assert ("treadle_rm_queue_pending_containers", (("queue", "root"),)) in s
    assert s[("treadle_rm_heartbeat_latency_seconds_count", ())] > 0
    assert s[("treadle_rm_allocate_latency_seconds_count", ())] > 0
    assert s[("treadle_rm_policy_decision_seconds_count", ())] > 0
    assert s[("treadle_rm_timer_lateness_samples_total", ())] > 0
    ok = s[("treadle_rm_rpcs_total", (("code", "OK"), ("method", "Allocate")))]
    assert ok > 0
    assert ("treadle_rm_node_restarts_total", ()) in s
    assert ("treadle_rm_am_restarts_total", ()) in s
    # A refused call is counted under its status code. The client may hear the refusal
    # before the server's interceptor has counted it (the status goes out first): the
    # count shows up within moments, so scrape until it does.
    with pytest.raises(Exception, match="UNAUTHENTICATED"):
        _unsigned_grpc_call(cluster.rm)
    deadline = time.monotonic() + 10.0
    while True:
        after = _scrape(cluster.url)
        refused = [v for (n, lb), v in after.items() if n == "treadle_rm_rpcs_total"
                   and ("code", "UNAUTHENTICATED") in lb]  # fmt: skip
        if refused or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert refused, "the refused call was never counted"
    assert refused[0] >= 1


def _unsigned_grpc_call(address: str) -> None:
    import grpc

    from treadle.rpc.v1 import client_pb2, client_pb2_grpc

    with grpc.insecure_channel(address) as ch:
        client_pb2_grpc.ClientStub(ch).GetClusterMetrics(
            client_pb2.GetClusterMetricsRequest(), timeout=5
        )


@pytest.mark.slow
def test_yarn_api_client_reads_what_cluster_status_shows(cluster: Cluster) -> None:
    yarn = cluster.yarn()
    assert yarn.get_active_endpoint() == cluster.url
    info = yarn.cluster_information().data["clusterInfo"]
    assert info["haState"] == "ACTIVE"
    assert info["state"] == "STARTED"
    assert info["schedulerType"] == "drf"

    # Finished applications only grow: the CLI's count lies between two reads of YARN's.
    before = yarn.cluster_metrics().data["clusterMetrics"]
    status = cluster.status()
    after = yarn.cluster_metrics().data["clusterMetrics"]
    view = status["rm_metrics"]
    assert before["activeNodes"] == view["nodes"] == after["activeNodes"] == 4
    assert before["lostNodes"] == view["lost_nodes"] == 0

    def ended(m: dict[str, Any]) -> int:
        return int(m["appsCompleted"] + m["appsFailed"] + m["appsKilled"])

    assert ended(before) <= view["finished_apps"] <= ended(after)
    assert before["totalVirtualCores"] == 32
    assert before["totalMB"] == 4 * 16384

    apps = yarn.cluster_applications().data["apps"]["app"]
    assert len(apps) >= after["appsSubmitted"]
    assert {a["queue"] for a in apps} <= {"etl", "analytics", "adhoc"}
    one = yarn.cluster_application(apps[0]["id"]).data["app"]
    assert (one["id"], one["user"], one["name"]) == (
        apps[0]["id"],
        apps[0]["user"],
        apps[0]["name"],
    )
    assert one["state"] in ("ACCEPTED", "RUNNING", "FINISHED")
    attempts = yarn.cluster_application_attempts(one["id"]).data["appAttempts"]["appAttempt"]
    assert attempts[-1]["id"] >= 1

    nodes = yarn.cluster_nodes().data["nodes"]["node"]
    # YARN's NodeIds (host:port); /nodes/{id} takes the NodeId or the bare name.
    assert sorted(n["id"] for n in nodes) == [f"node{i}:8041" for i in (1, 2, 3, 4)]
    assert yarn.cluster_node("node1:8041").data["node"]["id"] == "node1:8041"
    assert all(n["state"] == "RUNNING" for n in nodes)
    assert sum(n["totalResource"]["vCores"] for n in nodes) == 32
    node = yarn.cluster_node("node1").data["node"]
    assert node["totalResource"]["memory"] == 16384

    # YARN's filters.
    alice = yarn.cluster_applications(user="alice").data["apps"]["app"]
    assert alice
    assert all(a["user"] == "alice" for a in alice)
    etl = yarn.cluster_applications(queue="etl").data["apps"]["app"]
    assert etl
    assert all(a["queue"] == "etl" for a in etl)
    assert len(yarn.cluster_applications(limit=2).data["apps"]["app"]) == 2
    done = yarn.cluster_applications(states=["FINISHED"]).data["apps"]
    for a in done["app"] if done else []:
        assert (a["state"], a["finalStatus"], a["progress"]) == ("FINISHED", "SUCCEEDED", 100.0)

    sched = yarn.cluster_scheduler().data["scheduler"]["schedulerInfo"]
    assert sched["policy"] == "drf"
    leaves = {q["queueName"]: q for q in sched["queues"]["queue"]}
    assert set(leaves) == {"etl", "analytics", "adhoc"}
    assert leaves["etl"]["absoluteCapacity"] == pytest.approx(40.0)

    # Once the replay has ended, every count agrees exactly.
    assert cluster.run.wait(timeout=180) == 0
    final = yarn.cluster_metrics().data["clusterMetrics"]
    view = cluster.status()["rm_metrics"]
    assert final["appsRunning"] + final["appsPending"] == view["running_apps"] == 0
    assert ended(final) == view["finished_apps"] == final["appsSubmitted"]


@pytest.mark.slow
def test_access_on_a_secured_rm(cluster: Cluster) -> None:
    """Unsigned: 401; a user of the ACL reads only its own applications (403 for
    another's); errors are YARN's RemoteException JSON."""
    bare = requests.get(f"{cluster.url}/ws/v1/cluster/apps", timeout=10)
    assert bare.status_code == 401
    assert bare.json()["RemoteException"]["exception"] == "AuthenticationException"
    with pytest.raises(APIError, match="401"):
        YarnRM([cluster.url], timeout=10).cluster_metrics()

    acl = cluster.cwd / ".treadle/cluster/secrets/acl"
    key = new_secret()
    acl.write_text(acl.read_text() + f"bob user {key}\n")  # reloaded on change
    bob = YarnRM([cluster.url], timeout=10, auth=SignedAuth(Credentials("bob", key.encode())))
    mine = bob.cluster_applications().data["apps"]
    assert mine
    assert {a["user"] for a in mine["app"]} == {"bob"}
    theirs = cluster.yarn().cluster_applications(user="alice").data["apps"]["app"][0]["id"]
    r = requests.get(
        f"{cluster.url}/ws/v1/cluster/apps/{theirs}",
        auth=SignedAuth(Credentials("bob", key.encode())),
        timeout=10,
    )
    assert r.status_code == 403
    assert r.json()["RemoteException"]["exception"] == "ForbiddenException"

    signed = SignedAuth(cluster.creds)
    for path, status, exc in (
        ("/ws/v1/cluster/apps/application_99999", 404, "NotFoundException"),
        ("/ws/v1/cluster/nodes/nope", 404, "NotFoundException"),
        ("/ws/v1/cluster/apps?states=DONE", 400, "BadRequestException"),
        ("/ws/v1/cluster/apps?limit=0", 400, "BadRequestException"),
        ("/ws/v1/cluster/nothing", 404, "NotFoundException"),
    ):
        r = requests.get(cluster.url + path, auth=signed, timeout=10)
        assert (r.status_code, r.json()["RemoteException"]["exception"]) == (status, exc), path
    # A signature is good once: the same headers again are a replay.
    req = requests.Request("GET", f"{cluster.url}/ws/v1/cluster/info", auth=signed).prepare()
    with requests.Session() as s:
        assert s.send(req, timeout=10).status_code == 200
        assert s.send(req, timeout=10).status_code == 401


@pytest.mark.slow
def test_yarn_api_client_writes_signed_on_a_secured_cluster(cluster: Cluster) -> None:
    """YARN's REST writes, signed (``SignedAuth`` covers the body): a user submits, moves,
    reprioritizes and kills its own application; a stranger gets 401 and another user
    403, and the application stays as it was."""
    acl = cluster.cwd / ".treadle/cluster/secrets/acl"
    keys = {"dave": new_secret(), "erin": new_secret()}
    acl.write_text(acl.read_text() + "".join(f"{u} user {k}\n" for u, k in keys.items()))

    def as_(user: str) -> YarnRM:
        return YarnRM([cluster.url], timeout=10,
                      auth=SignedAuth(Credentials(user, keys[user].encode())))  # fmt: skip

    dave, erin = as_("dave"), as_("erin")
    app_id = dave.cluster_new_application().data["application-id"]
    dave.cluster_submit_application(
        {"application-id": app_id, "application-name": "signed", "queue": "etl",
         "unmanaged-AM": True, "resource": {"memory": 1024, "vCores": 1}}
    )  # fmt: skip
    assert dave.cluster_application(app_id).data["app"]["user"] == "dave"
    assert dave.cluster_change_application_queue(app_id, "adhoc").data == {"queue": "adhoc"}
    assert dave.cluster_change_application_priority(app_id, 4).data == {"priority": 4}
    stranger = YarnRM([cluster.url], timeout=10)
    for who, status in ((stranger, "401"), (erin, "403")):
        with pytest.raises(APIError, match=status):
            who.cluster_application_kill(app_id)
        with pytest.raises(APIError, match=status):
            who.cluster_change_application_queue(app_id, "etl")
        with pytest.raises(APIError, match=status):
            who.cluster_change_application_priority(app_id, 1)
    app = dave.cluster_application(app_id).data["app"]
    assert (app["queue"], app["priority"]) == ("adhoc", 4)
    assert app["state"] in ("ACCEPTED", "RUNNING")
    dave.cluster_application_kill(app_id)
    assert dave.cluster_application_state(app_id).data == {"state": "KILLED"}


# --------------------------------------------------------------------------------------
# RMs in this process


def test_unsecured_rms_in_one_process_each_have_their_own_port_and_metrics() -> None:
    """YARN's simple mode on an --insecure RM (``user.name`` accepted, nothing signed; a
    write without one refused), and one metrics registry per RM."""

    async def body() -> None:
        servers = []
        for policy in ("fifo", "fair"):
            metrics = RmMetrics()
            rm = ResourceManager(build("policies", policy, {}))
            server, state, _ = await serve(
                rm, RmSettings(), "127.0.0.1:0", None, [metrics.interceptor()]
            )
            metrics.attach(state)
            http = await start_http(state, metrics, "127.0.0.1", 0)
            servers.append((server, http))
        try:
            urls = [h.url for _, h in servers]
            assert urls[0] != urls[1]
            infos = [
                await asyncio.to_thread(
                    requests.get, f"{u}/ws/v1/cluster/info?user.name=dr.who", timeout=10
                )
                for u in urls
            ]
            assert [i.json()["clusterInfo"]["schedulerType"] for i in infos] == ["fifo", "fair"]
            apps = await asyncio.to_thread(
                requests.get, f"{urls[0]}/ws/v1/cluster/apps", timeout=10
            )
            assert apps.json() == {"apps": None}
            page = await asyncio.to_thread(requests.get, f"{urls[0]}/cluster", timeout=10)
            assert page.status_code == 200
            assert "treadle" in page.text
            js = await asyncio.to_thread(requests.get, f"{urls[0]}/static/app.js", timeout=10)
            assert js.status_code == 200
            assert "fetch(" in js.text
            post = await asyncio.to_thread(
                requests.post, f"{urls[0]}/ws/v1/cluster/apps", timeout=10
            )
            assert post.status_code == 401  # a write names its user (?user.name=)
            delete = await asyncio.to_thread(
                requests.delete, f"{urls[0]}/ws/v1/cluster/apps", timeout=10
            )
            assert delete.status_code == 405
            for u in urls:
                text = (await asyncio.to_thread(requests.get, f"{u}/metrics", timeout=10)).text
                assert 'treadle_rm_applications{state="RUNNING"} 0.0' in text
        finally:
            for server, http in servers:
                await http.stop()
                await server.stop(None)

    asyncio.run(body())


def test_rm_refuses_a_bad_http_port(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rm", "--policy", "fifo", "--insecure", "--http-port", "70000"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode != 0
    assert "--http-port must be between 0 and 65535" in out.stderr

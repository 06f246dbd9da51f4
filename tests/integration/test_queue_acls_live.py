"""Queue ACLs on a real RM process (issue 26, item 5): bob submitting into alice's
Dynamic Priority queue is refused PERMISSION_DENIED and no budget moves; the owner's own
submission is taken and listed to her, over gRPC and the REST API. The queues come from
an RM configuration, or from a capacity-scheduler.xml as ``treadle cluster up --queues``
hands it to its RM (``rm_config_for`` of the imported tree).

``python -m rm --policy dp`` on port 0 behind a real gate (an ACL file with alice, bob
and the admin root, a node secret); real gRPC channels sign as each of them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests

from rm.server.http_auth import SignedAuth
from tests.integration.test_rm_service import job, stage
from treadle.cluster.config import rm_config_for
from treadle.importers.yarnconf import load_queues
from treadle.live import auth
from treadle.live.rpcutil import Peer, channel
from treadle.model import ClusterSpec, UserSpec, Workload
from treadle.rpc.v1 import (
    admin_pb2 as admin_pb,
    admin_pb2_grpc as admin_grpc,
    client_pb2 as client_pb,
    client_pb2_grpc as client_grpc,
)

KEYS = {
    "alice": "alice-key-0123456789",
    "bob": "bob-key-0123456789xx",
    "carol": "carol-key-0123456789",  # administers queue alice
    "root": "root-key-012345678",
}
BUDGET = 100_000.0
RM_YAML = f"""\
queues:
  - {{name: alice, budget: {BUDGET}, spending_rate: 1, acl_submit_applications: alice,
     acl_administer_queue: carol}}
  - {{name: bob, budget: {BUDGET}, spending_rate: 1, acl_submit_applications: bob}}
"""
CAPACITY = {
    "root.queues": "alice,bob",
    "root.alice.capacity": "50",
    "root.bob.capacity": "50",
    "root.acl_submit_applications": " ",  # YARN's root admits everyone unless narrowed
    "root.acl_administer_queue": " ",
    "root.alice.acl_submit_applications": "alice",
    "root.bob.acl_submit_applications": "bob",
    "root.alice.acl_administer_queue": "carol",
}
CAPACITY_XML = (
    "<configuration>\n"
    + "".join(
        f"<property><name>yarn.scheduler.capacity.{k}</name><value>{v}</value></property>\n"
        for k, v in CAPACITY.items()
    )
    + "</configuration>\n"
)


def rm_yaml_from_capacity_xml(tmp_path: Path) -> str:
    """What ``treadle cluster up --queues capacity-scheduler.xml`` gives its RM; the
    users' budgets are their queues' (DP reads a user's budget for its queue)."""
    xml = tmp_path / "capacity-scheduler.xml"
    xml.write_text(CAPACITY_XML)
    users = {u: UserSpec(u, budget=BUDGET) for u in ("alice", "bob")}
    wl = Workload("w", ClusterSpec(()), (), load_queues(xml).root, users)
    return rm_config_for(wl)


@contextmanager
def rm_process(tmp_path: Path, config: str) -> Iterator[tuple[str, str]]:
    """A secured ``python -m rm --policy dp`` with ``config``: (gRPC address, HTTP URL)."""
    (tmp_path / "rm.yaml").write_text(config)
    acl, secret = tmp_path / "acl", tmp_path / "node-secret"
    acl.write_text(
        "".join(f"{u} {'admin' if u == 'root' else 'user'} {k}\n" for u, k in KEYS.items())
    )
    secret.write_text("node-secret-0123456789\n")
    for f in (acl, secret):
        f.chmod(0o600)
    port, http = tmp_path / "rm.port", tmp_path / "rm.http"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rm", "--policy", "dp", "--config", str(tmp_path / "rm.yaml"),
         "--acl", str(acl), "--node-secret-file", str(secret), "--port-file", str(port),
         "--http-port", "0", "--http-port-file", str(http), "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not all(p.exists() and p.read_text().strip() for p in (port, http)):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the RM wrote no port files"
            time.sleep(0.05)
        yield port.read_text().strip(), http.read_text().strip()
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def creds(user: str) -> auth.Credentials:
    return auth.Credentials(user, KEYS[user].encode())


async def submit(address: str, user: str, queue: str, name: str) -> str:
    """The application's id, or ``CODE: details``."""
    async with channel(address, Peer(creds(user))) as ch:
        stub: Any = client_grpc.ClientStub(ch)
        req = client_pb.SubmitApplicationRequest(
            user=user, queue=queue, job=job(name, stage("map", 2))
        )
        try:
            return str((await stub.SubmitApplication(req, timeout=10)).app_id)
        except grpc.aio.AioRpcError as e:
            return f"{e.code().name}: {e.details()}"


async def kill(address: str, user: str, app_id: str) -> str:
    """``killed`` or the status code."""
    async with channel(address, Peer(creds(user))) as ch:
        stub: Any = client_grpc.ClientStub(ch)
        try:
            await stub.KillApplication(client_pb.KillApplicationRequest(app_id=app_id), timeout=10)
        except grpc.aio.AioRpcError as e:
            return e.code().name
        return "killed"


async def budgets(address: str) -> dict[str, float]:
    async with channel(address, Peer(creds("root"))) as ch:
        stub: Any = admin_grpc.AdminStub(ch)
        infos = await stub.ListQueueInfos(admin_pb.ListQueueInfosRequest(), timeout=10)
        return {q.queue: q.budget for q in infos.queues}


async def listed(address: str, user: str) -> list[tuple[str, str, str]]:
    async with channel(address, Peer(creds(user))) as ch:
        stub: Any = client_grpc.ClientStub(ch)
        apps = await stub.ListApplications(client_pb.ListApplicationsRequest(), timeout=10)
        return [(a.name, a.user, a.queue) for a in apps.applications]


def rest_apps(url: str, user: str) -> list[str]:
    """The application names YARN's REST listing shows ``user``."""
    resp = requests.get(f"{url}/ws/v1/cluster/apps", auth=SignedAuth(creds(user)), timeout=10)
    resp.raise_for_status()
    return [a["name"] for a in (resp.json()["apps"] or {}).get("app", [])]


@pytest.mark.parametrize("source", ["rm.yaml", "capacity-scheduler.xml"])
def test_a_submission_into_another_users_queue_is_refused_and_spends_nothing(
    tmp_path: Path, source: str
) -> None:
    config = RM_YAML if source == "rm.yaml" else rm_yaml_from_capacity_xml(tmp_path)
    with rm_process(tmp_path, config) as (address, url):

        async def scenario() -> None:
            before = await budgets(address)
            assert before == {"alice": BUDGET, "bob": BUDGET}
            refused = await submit(address, "bob", "alice", "steal")
            assert refused.startswith(
                "PERMISSION_DENIED: user 'bob' may not submit to queue 'root.alice'"
            )
            await asyncio.sleep(1.5)  # past a DP allocation interval
            assert await budgets(address) == before
            assert await listed(address, "root") == []
            mine = await submit(address, "alice", "alice", "mine")
            assert mine.startswith("application_")
            assert (await submit(address, "bob", "bob", "his")).startswith("application_")
            assert await listed(address, "alice") == [("mine", "alice", "alice")]
            # Queue alice's administrator sees and may kill its applications; bob may not.
            assert await listed(address, "carol") == [("mine", "alice", "alice")]
            assert await kill(address, "bob", mine) == "PERMISSION_DENIED"
            assert await kill(address, "carol", mine) == "killed"

        asyncio.run(scenario())
        assert rest_apps(url, "alice") == ["mine"]
        assert rest_apps(url, "bob") == ["his"]
        assert rest_apps(url, "carol") == ["mine"]

"""Containers: an RM container, two NM host containers and the AM host container replay a
small workload under two policies and agree with the simulator; an NM host container
killed mid-run loses no job; a deployment that cannot start fails fast with its reason;
nothing is left behind (conftest checks after every test)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from treadle import events as ev
from treadle.cluster.docker import DockerCluster, check_image, labelled
from treadle.cluster.driver import fetch_events, replay
from treadle.errors import TreadleError
from treadle.live.rpcutil import channel
from treadle.metrics import analyze
from treadle.rpc.v1 import client_pb2_grpc as client_grpc
from treadle.study.compare import compare, make_backend
from treadle.study.runner import PolicyChoice
from treadle.workload import load_workload, parse_workload

TREADLE = [sys.executable, "-m", "treadle.cli"]
FIDELITY_TOLERANCE = 0.10  # the bound: containers agree with the simulator
DILATION = 10.0

# Four nodes on two NM host containers; three users; DAG and single-stage jobs arriving
# over the first minute, so that both policies queue work and differ. Tasks last tens of
# seconds so that the 1 s heartbeat and allocate cycles weigh little in the results.
WORKLOAD = """
seed: 5
cluster:
  heartbeat_s: 1.0
  nodes:
    - {count: 4, resources: {vcores: 4, memory_mb: 8192}}
users:
  alice: {weight: 1}
  bob: {weight: 1}
  carol: {weight: 1}
jobs:
  - name: etl
    user: alice
    submit_s: 0
    stages:
      - {name: map, tasks: 12, duration_s: 30, resources: {vcores: 1, memory_mb: 1024}}
      - {name: reduce, tasks: 3, duration_s: 18, after: [map],
         resources: {vcores: 1, memory_mb: 2048}}
  - name: scan
    user: bob
    submit_s: 6
    stages:
      - {name: scan, tasks: 8, duration_s: 36, resources: {vcores: 2, memory_mb: 2048}}
  - name: query
    user: carol
    submit_s: 18
    stages:
      - {name: a, tasks: 4, duration_s: 24, resources: {vcores: 1, memory_mb: 1024}}
      - {name: b, tasks: 4, duration_s: 24, resources: {vcores: 1, memory_mb: 1024}}
      - {name: join, tasks: 2, duration_s: 15, after: [a, b],
         resources: {vcores: 2, memory_mb: 4096}}
  - name: small
    user: alice
    submit_s: 60
    stages:
      - {name: only, tasks: 4, duration_s: 18, resources: {vcores: 1, memory_mb: 1024}}
"""


@pytest.fixture(scope="module")
def compared(image: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """fifo and drf on containers (through the library, as the CLI calls it) and in sim."""
    root = tmp_path_factory.mktemp("compare")
    wl = parse_workload(WORKLOAD, "e2e")
    choices = [PolicyChoice("fifo", {}), PolicyChoice("drf", {})]
    backend = make_backend("docker", wl, dilation=DILATION, nm_containers=2, image=image,
                           timeout_s=180)  # fmt: skip
    docker_result = compare(wl, choices, root / "docker", backend)
    sim_result = compare(wl, choices, root / "sim", make_backend("sim", wl))
    return {"docker": docker_result, "sim": sim_result, "root": root, "workload": wl}


def test_the_image_runs_this_checkout(image: str) -> None:
    # Otherwise every other e2e test would exercise whatever code the image was built from.
    assert check_image(image), f"{image} was built from other sources: deploy/build-image.sh"


def test_two_policies_finish_every_job_on_containers(image: str, compared: dict[str, Any]) -> None:
    root: Path = compared["root"] / "docker"
    comparison = json.loads((root / "comparison.json").read_text())
    assert set(comparison) == {"fifo", "drf"}
    for policy, s in comparison.items():
        assert s["mode"] == "docker"
        assert s["nodes"] == 4
        assert s["finished"] == s["jobs"] == 4, policy
        assert (root / policy / "events.parquet").is_file()
        # Every role ran in its own container and logged its timers when stopped.
        timers = json.loads((root / policy / "timers.json").read_text())
        assert set(timers["processes"]) == {"rm", "nm-1", "nm-2", "am"}
        # Both NM containers ran work.
        records = compared["docker"].results[policy].records()
        nodes = {r["node"] for r in records if r["event"] == ev.CONTAINER_STARTED}
        assert nodes == {"node1", "node2", "node3", "node4"}
    report = (root / "report.md").read_text()
    assert "2 NM containers" in report
    assert "dilation 10" in report


def test_containers_agree_with_the_simulator(image: str, compared: dict[str, Any]) -> None:
    errors = {}
    for policy in ("fifo", "drf"):
        live = compared["docker"].runs[policy].summary
        sim = compared["sim"].runs[policy].summary
        for key in ("mean_jct_s", "makespan_s"):
            errors[f"{policy}.{key}"] = (live[key] / sim[key] - 1.0, live[key], sim[key])
    shown = ", ".join(f"{k} {e:+.1%} ({a:.2f} vs {b:.2f})" for k, (e, a, b) in errors.items())
    assert all(abs(e) <= FIDELITY_TOLERANCE for e, _, _ in errors.values()), shown


def test_carbyne_shares_and_ask_kinds_travel_between_containers(image: str, tmp_path: Path) -> None:
    # tests/data/altruism.yaml: the short branch (stage 2) yields once the AMs have shares.
    wl = load_workload(str(Path(__file__).parents[1] / "data" / "altruism.yaml"))
    backend = make_backend("docker", wl, dilation=20.0, nm_containers=1, image=image,
                           timeout_s=120)  # fmt: skip
    result = compare(wl, [PolicyChoice("carbyne", {})], tmp_path, backend)
    assert result.runs["carbyne"].summary["finished"] == 2
    kinds = Counter(
        (int(r["priority"]) // 2, str(r["kind"]))
        for r in result.results["carbyne"].records()
        if r["event"] == ev.CONTAINER_ALLOCATED
    )
    assert kinds[(2, "ALTRUISTIC")] >= 4, kinds
    assert kinds[(0, "DEFAULT")] >= 4, kinds


def test_killed_nm_container_loses_no_job(image: str, tmp_path: Path) -> None:
    wl = parse_workload(WORKLOAD, "e2e")
    cluster = DockerCluster(
        wl, "fifo", image=image, workdir=tmp_path / "cluster", dilation=DILATION,
        nm_containers=2, expiry_intervals=5,
    )  # fmt: skip
    victims = {"node3", "node4"}  # nm-2 hosts the second half of the nodes

    async def scenario() -> list[ev.Record]:
        async with cluster:
            run = asyncio.ensure_future(
                replay(cluster.rm_address, wl, timeout_s=120, mode="docker", poll_s=0.05)
            )
            async with channel(cluster.rm_address) as ch:
                stub: Any = client_grpc.ClientStub(ch)
                deadline = time.monotonic() + 30
                while True:
                    records = await fetch_events(stub, cluster.rm_address)
                    if any(
                        r["event"] == ev.CONTAINER_STARTED and r.get("node") in victims
                        for r in records
                    ):
                        break
                    assert time.monotonic() < deadline, "nm-2's nodes never ran a container"
                    await asyncio.sleep(0.1)
            await asyncio.to_thread(cluster.kill, "nm-2")
            return await cluster.guard(run)

    records = asyncio.run(asyncio.wait_for(scenario(), 150))
    lost = [r for r in records if r["event"] == ev.NODE_LOST]
    assert {r["node"] for r in lost} == victims
    lost_containers = [
        r for r in records if r["event"] == ev.CONTAINER_FINISHED and r["state"] == "LOST"
    ]
    assert lost_containers, "nm-2's nodes had running containers when they were lost"
    first_loss = min(r["t"] for r in lost)
    after = [r for r in records if r["event"] == ev.CONTAINER_ALLOCATED and r["t"] > first_loss]
    assert after
    assert all(r["node"] not in victims for r in after)
    summary = analyze(records).summary
    assert summary["finished"] == summary["jobs"] == 4


def test_an_rm_that_cannot_start_fails_fast_with_its_reason(image: str, tmp_path: Path) -> None:
    wl = parse_workload(WORKLOAD, "e2e")
    cluster = DockerCluster(wl, "drf", image=image, workdir=tmp_path / "c", ready_timeout_s=60)
    # Past the host's own checks (as with an image whose plugins differ from this host's):
    # the RM inside the container refuses the parameter and exits.
    cluster.params = {"across": "planets"}
    with pytest.raises(TreadleError) as err:
        asyncio.run(cluster.start())
    message = str(err.value)
    # Fast: the RM's exit is noticed, rather than its silence until the readiness timeout.
    assert re.search(r"container rm exited early \(exit status [1-9]\d*\)", message), message
    assert "did not answer its health check" not in message
    assert "across" in message  # the RM's own explanation is in the error


def test_cli_docker_mode_bad_settings_fail_before_any_container(image: str, tmp_path: Path) -> None:
    cases = [
        (["--policies", "nosuch"], "nosuch"),
        (["--policies", "drf", "--set", "drf.across=planets"], "across"),
        (["--policies", "fifo", "--image", "treadle:no-such-tag"], "not found"),
        (["--policies", "fifo", "--nm-containers", "9"], "--nm-containers"),
    ]
    for args, needle in cases:
        out = tmp_path / "out"
        res = subprocess.run(
            [*TREADLE, "compare", "tiny", "--mode", "docker", "--out", str(out), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode != 0, args
        assert needle in res.stderr, (args, res.stderr)
        assert "Traceback" not in res.stderr


def test_a_failed_run_still_removes_its_containers(image: str, tmp_path: Path) -> None:
    wl = parse_workload(WORKLOAD, "e2e")
    cluster = DockerCluster(wl, "fifo", image=image, workdir=tmp_path / "c", dilation=DILATION)

    async def scenario() -> None:
        async with cluster:
            assert len(labelled()) == 5  # rm, nm-1, nm-2, am and the network
            raise RuntimeError("the test body failed")

    with pytest.raises(RuntimeError, match="the test body failed"):
        asyncio.run(scenario())
    assert labelled() == []
    assert (tmp_path / "c" / "rm.log").is_file()  # logs are kept for the post-mortem

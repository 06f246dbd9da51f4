"""Local clusters of real OS processes: the launcher, the replay driver and the CLI on top.

Every test stops what it started in a ``finally`` block (LocalCluster.stop, or the
processes recorded in a cluster's state file) and checks by pid that nothing is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rm.server.config import load_rm_config
from treadle import events as ev
from treadle.cluster.driver import fetch_events, replay
from treadle.cluster.local import LocalCluster
from treadle.cluster.procs import STATE_FILE, read_state, recorded_processes, terminate
from treadle.errors import TreadleError
from treadle.live.rpcutil import channel
from treadle.metrics import analyze
from treadle.rpc.v1 import client_pb2_grpc as client_grpc
from treadle.workload import load_workload, parse_workload

TREADLE = [sys.executable, "-m", "treadle.cli"]
FIDELITY_TOLERANCE = 0.10  # DESIGN: local results should track the simulator's

TWO_NODES = """
seed: 3
cluster:
  heartbeat_s: 1.0
  nodes:
    - {count: 2, resources: {vcores: 4, memory_mb: 8192}}
users:
  alice: {weight: 1}
  bob: {weight: 1}
jobs:
  - name: a
    user: alice
    submit_s: 0
    stages:
      - {name: map, tasks: 8, duration_s: 12, resources: {vcores: 1, memory_mb: 1024}}
      - {name: reduce, tasks: 2, duration_s: 4, after: [map],
         resources: {vcores: 1, memory_mb: 1024}}
  - name: b
    user: bob
    submit_s: 1
    stages:
      - {name: scan, tasks: 6, duration_s: 14, resources: {vcores: 1, memory_mb: 1024}}
"""


def _cli(args: list[str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(TREADLE + args, capture_output=True, text=True, timeout=timeout)


def _dead(pid: int) -> bool:
    """os.kill(pid, 0) fails, or the pid is a zombie nobody has reaped yet."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    return False


def _wait_dead(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if not _dead(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if not _dead(p)]


@contextlib.contextmanager
def _cleanup(cluster: LocalCluster) -> Iterator[LocalCluster]:
    try:
        yield cluster
    finally:
        pids = [p.pid for p in cluster.processes.values()]
        cluster.stop()
        assert _wait_dead(pids) == [], "processes left behind"


# --------------------------------------------------------------------------------------
# (a), (b): treadle compare --mode local through the CLI, against --mode sim


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("compare")
    local, sim = root / "local", root / "sim"
    run = _cli(
        [
            "compare", "tiny", "--mode", "local", "--policies", "fifo,drf",
            "--dilation", "20", "--out", str(local), "--timeout-s", "60",
        ]
    )  # fmt: skip
    ref = _cli(["compare", "tiny", "--mode", "sim", "--policies", "fifo,drf", "--out", str(sim)])
    return {"local": local, "sim": sim, "run": run, "ref": ref}


@pytest.mark.slow
def test_compare_local_through_the_cli_finishes_every_job(compared: dict[str, Any]) -> None:
    run = compared["run"]
    assert run.returncode == 0, run.stderr
    out: Path = compared["local"]
    tiny = load_workload("tiny")
    assert (out / "report.md").is_file()
    comparison = json.loads((out / "comparison.json").read_text())
    assert set(comparison) == {"fifo", "drf"}
    for policy, s in comparison.items():
        assert s["mode"] == "local"
        assert s["dilation"] == 20
        assert s["workload"] == "tiny"
        assert s["nodes"] == 1
        assert s["jobs"] == 2
        assert s["finished"] == 2, policy
        for name in ("summary.json", "jobs.csv", "events.parquet", "timers.json"):
            assert (out / policy / name).is_file()
        # The RM was configured with the workload's queues and users (its --config file).
        config = load_rm_config(out / policy / "cluster" / "rm-config.yaml")
        assert config.queues == tiny.queues
        assert dict(config.users) == dict(tiny.users)
    assert "dilation 20" in (out / "report.md").read_text()
    # The clusters were stopped: no process recorded in either work dir survives.
    pids = [
        p.pid
        for policy in comparison
        for p in recorded_processes(json.loads((out / policy / "cluster" / STATE_FILE).read_text()))
    ]
    assert len(pids) == 2 * 3  # rm, one NM host, the AM host
    assert _wait_dead(pids) == []


@pytest.mark.slow
def test_local_mean_jct_and_makespan_track_the_simulator(compared: dict[str, Any]) -> None:
    assert compared["run"].returncode == 0, compared["run"].stderr
    assert compared["ref"].returncode == 0, compared["ref"].stderr
    local = json.loads((compared["local"] / "comparison.json").read_text())
    sim = json.loads((compared["sim"] / "comparison.json").read_text())
    errors = {}
    for policy in ("fifo", "drf"):
        for key in ("mean_jct_s", "makespan_s"):
            errors[f"{policy}.{key}"] = (
                local[policy][key] / sim[policy][key] - 1.0,
                local[policy][key],
                sim[policy][key],
            )
    shown = ", ".join(f"{k} {e:+.1%} ({a:.2f} vs {b:.2f})" for k, (e, a, b) in errors.items())
    assert all(abs(e) <= FIDELITY_TOLERANCE for e, _, _ in errors.values()), shown


# --------------------------------------------------------------------------------------
# (c) an NM process dies: its nodes are lost, the AMs re-run the lost tasks


@pytest.mark.slow
def test_killed_nm_process_nodes_expire_and_every_job_still_finishes(tmp_path: Path) -> None:
    wl = parse_workload(TWO_NODES, "two-nodes")
    cluster = LocalCluster(
        wl,
        "fifo",
        workdir=tmp_path / "cluster",
        dilation=10.0,
        nm_processes=2,
        expiry_intervals=5,
    )

    async def scenario() -> list[ev.Record]:
        await cluster.start()
        assert [n.node_id for n in wl.cluster.nodes] == ["node1", "node2"]
        run = asyncio.ensure_future(
            replay(cluster.rm_address, wl, timeout_s=50, mode="local", poll_s=0.05)
        )
        # Wait until node2 (hosted by nm-2) runs containers, then kill its process.
        async with channel(cluster.rm_address) as ch:
            stub: Any = client_grpc.ClientStub(ch)
            deadline = time.monotonic() + 20
            while True:
                records = await fetch_events(stub, cluster.rm_address)
                if any(
                    r["event"] == ev.CONTAINER_STARTED and r.get("node") == "node2" for r in records
                ):
                    break
                assert time.monotonic() < deadline, "node2 never ran a container"
                await asyncio.sleep(0.05)
        cluster.expect_exit("nm-2")
        os.kill(cluster.processes["nm-2"].pid, signal.SIGKILL)
        return await cluster.guard(run)

    with _cleanup(cluster):
        records = asyncio.run(asyncio.wait_for(scenario(), 60))
    lost = [r for r in records if r["event"] == ev.NODE_LOST]
    assert [r["node"] for r in lost] == ["node2"]
    lost_containers = [
        r
        for r in records
        if r["event"] == ev.CONTAINER_FINISHED and r.get("node") == "node2" and r["state"] == "LOST"
    ]
    assert lost_containers, "node2 had running containers when it was lost"
    assert all(r["t"] >= lost[0]["t"] for r in lost_containers)
    # The lost tasks ran again (on node1): more containers than tasks were allocated.
    allocated = [r for r in records if r["event"] == ev.CONTAINER_ALLOCATED]
    assert len(allocated) >= wl.tasks + len(lost_containers)
    after = [r for r in allocated if r["t"] > lost[0]["t"]]
    assert after
    assert all(r["node"] == "node1" for r in after)
    summary = analyze(records).summary
    assert summary["finished"] == summary["jobs"] == 2


# --------------------------------------------------------------------------------------
# (d) SIGTERM to the RM: its streamed event log is complete and well-formed


def test_sigterm_to_the_rm_leaves_a_complete_event_file(tmp_path: Path) -> None:
    wl = load_workload("tiny")
    cluster = LocalCluster(wl, "fifo", workdir=tmp_path / "cluster", dilation=20.0)

    async def scenario() -> list[ev.Record]:
        await cluster.start()
        run = asyncio.ensure_future(replay(cluster.rm_address, wl, timeout_s=30, mode="local"))
        try:
            async with channel(cluster.rm_address) as ch:
                stub: Any = client_grpc.ClientStub(ch)
                deadline = time.monotonic() + 20
                while True:
                    before = await fetch_events(stub, cluster.rm_address)
                    if sum(r["event"] == ev.CONTAINER_ALLOCATED for r in before) >= 5:
                        break
                    assert time.monotonic() < deadline, "too few allocations"
                    await asyncio.sleep(0.05)
            cluster.expect_exit("rm")
            rm = cluster.processes["rm"]
            os.kill(rm.pid, signal.SIGTERM)
            assert _wait_dead([rm.pid]) == [], "the RM did not stop on SIGTERM"
            return before
        finally:
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError, TreadleError):
                await run

    with _cleanup(cluster):
        before = asyncio.run(asyncio.wait_for(scenario(), 50))
        rm_log = cluster.log_path("rm")
    lines = cluster.events_path.read_text(encoding="utf-8").splitlines()
    assert lines
    assert all(line.strip() for line in lines)
    on_disk = [json.loads(line) for line in lines]  # every line parses
    assert all("t" in r and "event" in r for r in on_disk)
    assert ev.read_jsonl(cluster.events_path) == on_disk

    def allocated(recs: list[ev.Record]) -> set[str]:
        return {r["container"] for r in recs if r["event"] == ev.CONTAINER_ALLOCATED}

    assert allocated(before) <= allocated(on_disk)
    assert on_disk[: len(before)] == before  # the same records, in the same order
    assert "rm_stopped" in rm_log.read_text()  # a clean shutdown, not a kill


# --------------------------------------------------------------------------------------
# (e) treadle cluster up / status / down


@pytest.mark.slow
def test_cluster_up_status_down_leaves_no_process_behind(tmp_path: Path) -> None:
    cdir = tmp_path / "cluster"
    pids: list[int] = []
    try:
        up = _cli(
            [
                "cluster", "up", "--nodes", "3", "--policy", "drf", "--nm-processes", "2",
                "--dilation", "20", "--dir", str(cdir),
            ],
            timeout=60,
        )  # fmt: skip
        assert up.returncode == 0, up.stderr
        state = read_state(cdir)
        assert state is not None
        pids = [p.pid for p in recorded_processes(state)]
        names = [p.name for p in recorded_processes(state)]
        assert names == ["rm", "nm-1", "nm-2", "am"]
        assert up.stdout.strip() == state["rm"]
        # The processes outlive the command that started them.
        assert not any(_dead(p) for p in pids)

        again = _cli(["cluster", "up", "--nodes", "1", "--policy", "fifo", "--dir", str(cdir)])
        assert again.returncode != 0
        assert again.stderr.count("\n") == 1
        assert "already running" in again.stderr
        assert [p.pid for p in recorded_processes(read_state(cdir) or {})] == pids

        status = _cli(["cluster", "status", "--dir", str(cdir)])
        assert status.returncode == 0, status.stderr
        assert state["rm"] in status.stdout
        assert "3 nodes up" in status.stdout
        assert status.stdout.count("running") >= 4

        down = _cli(["cluster", "down", "--dir", str(cdir)])
        assert down.returncode == 0, down.stderr
        assert _wait_dead(pids) == []
        assert not (cdir / STATE_FILE).exists()

        gone = _cli(["cluster", "status", "--dir", str(cdir)])
        assert gone.returncode != 0
        assert "no cluster" in gone.stderr
    finally:
        state = read_state(cdir) if (cdir / STATE_FILE).exists() else None
        if state is not None:
            terminate(recorded_processes(state), grace_s=2.0)
        for pid in pids:
            if not _dead(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
    assert _wait_dead(pids) == []


# --------------------------------------------------------------------------------------
# (f) and bad settings: one line, non-zero, nothing started


def test_run_against_an_unreachable_rm_fails_fast_with_one_line(tmp_path: Path) -> None:
    res = _cli(["run", "tiny", "--rm", "127.0.0.1:1", "--out", str(tmp_path / "out")])
    assert res.returncode != 0
    assert res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("error: cannot reach the RM at 127.0.0.1:1: ")
    # Fast: without --rm-wait-s it gives up at the first refusal, before running anything.
    assert "waited" not in res.stderr
    assert not (tmp_path / "out").exists()


def test_run_waits_for_an_unreachable_rm_as_long_as_asked(tmp_path: Path) -> None:
    res = _cli(["run", "tiny", "--rm", "127.0.0.1:1", "--rm-wait-s", "1", "--out", str(tmp_path)])
    assert res.returncode != 0
    assert res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("error: cannot reach the RM at 127.0.0.1:1: ")
    assert res.stderr.rstrip().endswith("(waited 1 s)")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--policies", "fifo,nosuch"], "nosuch"),
        (["--policies", "fifo", "--set", "fifo.bogus=1"], "bogus"),
        (["--policies", "fifo", "--dilation", "0"], "--dilation"),
        (["--policies", "fifo", "--nm-processes", "2"], "--nm-processes"),
        (["--policies", "fifo", "--asks", "nosuch"], "nosuch"),
    ],
)
def test_bad_local_settings_fail_before_any_process_starts(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    out = tmp_path / "out"
    res = _cli(["compare", "tiny", "--mode", "local", "--out", str(out), *args], timeout=60)
    assert res.returncode != 0
    assert res.stderr.count("\n") == 1, res.stderr
    assert needle in res.stderr
    assert not out.exists()  # no cluster directory: nothing was started


# --------------------------------------------------------------------------------------
# (e) Carbyne over the wire: shares reach the AMs, ALTRUISTIC asks reach the RM

ALTRUISM = Path(__file__).parents[1] / "data" / "altruism.yaml"


@pytest.mark.slow
def test_carbyne_shares_and_altruistic_asks_travel_over_grpc(tmp_path: Path) -> None:
    # The short branch c has slack once an AM knows its share: its tasks are asked for as
    # ALTRUISTIC (the strategy falls back to greedy's DEFAULT asks without a share, so an
    # ALTRUISTIC container proves that shares reached the AMs and ask kinds the RM).
    from treadle.study.compare import compare, make_backend
    from treadle.study.runner import PolicyChoice

    wl = load_workload(str(ALTRUISM))
    backend = make_backend("local", wl, dilation=20.0)
    result = compare(wl, [PolicyChoice("carbyne", {})], tmp_path / "out", backend)
    records = result.results["carbyne"].records()
    assert result.runs["carbyne"].summary["finished"] == 2
    # A live run records what it was asked to do as a simulated one does.
    assert result.runs["carbyne"].summary["parameters"]["asks"]["name"] == "altruistic"
    kinds = Counter((int(r["priority"]) // 2, str(r["kind"])) for r in records
                    if r["event"] == ev.CONTAINER_ALLOCATED)  # fmt: skip
    # The short branch yields (most of its 8 tasks); the chain mostly asks DEFAULT.
    assert kinds.get((2, "ALTRUISTIC"), 0) >= 4, kinds
    assert kinds.get((0, "DEFAULT"), 0) >= 4, kinds

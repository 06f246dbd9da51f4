"""Fault injection: the RM killed (SIGKILL) mid-run and started again from its state store
(issue 16, "work-preserving RM restart", YARN-556).

Real processes: ``treadle cluster up`` (detached; its RM keeps its state in
``WORKDIR/rm-state``), ``treadle run`` against it, and the RM's own command line (recorded
in cluster.json) run again on the same address. The restarted RM reloads its applications,
tokens and clock; the NMs resync and report the containers they run, which the RM
recovers; the AMs register again and go on where they were; the driver rides out the RM's
absence: every job finishes, no task runs twice, and the driver writes its results.

Plus, in process (real gRPC and SQLite): a queue budget set through the Client service
survives a restart of the RM on the same store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
import pytest

from nm.server.service import NodeHost
from plugins.policies.fifo import FifoPolicy
from rm.core.facade import ResourceManager
from rm.server.service import RmSettings, serve
from tests.budget_policy import BudgetPolicy
from tests.faults import (
    DILATION,
    JOBS,
    TASKS,
    TREADLE,
    WORKLOAD,
    cli as _cli,
    read_events as _events,
    serve_on_store,
)
from treadle.cluster.procs import read_state, recorded_processes
from treadle.live.rpcutil import channel
from treadle.model import NodeSpec
from treadle.resources import Resources
from treadle.rpc.v1 import (
    application_master_pb2 as am_pb,
    application_master_pb2_grpc as am_grpc,
    client_pb2 as client_pb,
    client_pb2_grpc as client_grpc,
    common_pb2 as pb,
)
from treadle.yarnids import format_container_id, parse_app_id


def _wait_for(what: str, cond: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _dead(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError):
        return stat.read_text().split(") ")[1][0] in "ZX"
    return True


def _on_address(argv: list[str], address: str) -> list[str]:
    """The RM's recorded command line, listening where it listened (it was told port 0)."""
    out = list(argv)
    out[out.index("--listen") + 1] = address
    return out


def test_the_rm_killed_mid_run_restarts_from_its_store_and_every_job_finishes(
    tmp_path: Path,
) -> None:
    wl = tmp_path / "six.yaml"
    wl.write_text(WORKLOAD)
    cdir = tmp_path / "cluster"
    events = cdir / "rm-events.jsonl"
    up = _cli(
        ["cluster", "up", "--workload", str(wl), "--policy", "fifo", "--dilation",
         str(DILATION), "--dir", str(cdir), "--max-restarts", "0"], tmp_path,  # restarted here
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    address = up.stdout.strip()
    restarted: subprocess.Popen[bytes] | None = None
    run: subprocess.Popen[str] | None = None
    out = tmp_path / "out"
    try:
        state = read_state(cdir)
        assert state is not None
        assert (cdir / "rm-state" / "rm-state.sqlite").exists()
        rm = next(p for p in recorded_processes(state) if p.name == "rm")
        run = subprocess.Popen(
            [*TREADLE, "run", str(wl), "--rm", address, "--cluster-dir", str(cdir),
             "--out", str(out), "--no-slowdown", "--rm-absent-s", "60"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

        def mid_run() -> bool:
            records = _events(events)
            done = [r for r in records if r["event"] == "container_finished"]
            submitted = [r for r in records if r["event"] == "job_submitted"]
            return len(done) >= 4 and len(submitted) >= 3

        _wait_for("the run to be under way", mid_run)
        time.sleep(0.6)  # a little further into the run
        os.killpg(rm.pid, signal.SIGKILL)
        _wait_for("the RM to die", lambda: _dead(rm.pid))
        before = _events(events)
        killed_at = time.monotonic()
        time.sleep(1.0)  # the RM stays away a while: NMs, AMs and the driver notice
        with open(cdir / "rm.restarted.log", "wb") as log:
            restarted = subprocess.Popen(
                _on_address(rm.argv, address), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        restarted_at = time.monotonic()
        spawned_wall = time.time()
        _stdout, stderr = run.communicate(timeout=60)
        ended_at = time.monotonic()
        assert run.returncode == 0, stderr
        assert restarted.poll() is None, "the restarted RM died"
    finally:
        if run is not None and run.poll() is None:
            run.kill()
            run.communicate()
        if restarted is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(restarted.pid, signal.SIGTERM)
            try:
                restarted.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(restarted.pid, signal.SIGKILL)
                restarted.wait(5)
        down = _cli(["cluster", "down", "--dir", str(cdir)], tmp_path)
    assert down.returncode == 0, down.stderr
    # The driver wrote its results: every job, finished.
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs"] == JOBS
    assert summary["finished"] == JOBS
    records = _events(events)
    kinds = [r["event"] for r in records]
    assert kinds.count("job_submitted") == JOBS  # none lost, none submitted twice
    assert kinds.count("job_finished") == JOBS
    assert kinds.count("run_started") == 1  # the restarted RM's stream goes on
    # The clock went on from the stored epoch: nothing after the restart is earlier than
    # what came before it.
    after = records[len(before) :]
    last_before = max(float(r["t"]) for r in before)
    assert after
    assert min(float(r["t"]) for r in after) >= last_before
    # The NMs came back at once (their heartbeat deadlines follow the clock they have).
    rejoined = [r for r in after if r["event"] == "node_registered"]
    assert len(rejoined) == 2
    finished = [r for r in records if r["event"] == "container_finished"]
    complete = [r for r in finished if r["state"] == "COMPLETE" and r["exit_status"] == 0]
    running_at_kill = {r["container"] for r in before if r["event"] == "container_started"}
    running_at_kill -= {r["container"] for r in before if r["event"] == "container_finished"}
    assert running_at_kill  # the kill came mid-run
    # Work preserved: the containers running at the kill ran on and completed, nothing was
    # lost, every task ran once.
    assert running_at_kill <= {r["container"] for r in complete}
    assert [r for r in finished if r["state"] == "LOST"] == []
    assert len(complete) == TASKS
    # An allocation not started at the kill (its AM may never have heard of it) is released
    # one node expiry after the restart, as YARN's work-preserving restart does, and its task
    # asked for again: the only allocations beyond one per task.
    allocated = {r["container"] for r in before if r["event"] == "container_allocated"}
    started = {r["container"] for r in before if r["event"] == "container_started"}
    released = {r["container"] for r in after if r["event"] == "container_released"}
    assert released <= allocated - started
    assert kinds.count("container_allocated") == TASKS + len(released)
    am_log = (cdir / "am.log").read_text()
    assert "am_registered_again" in am_log
    # How long the restarted RM took to come up, and the NMs and AMs to come back to it.
    lines = (cdir / "rm.restarted.log").read_text().splitlines()
    rm_log = [json.loads(x) for x in lines if x.startswith("{")]

    def wall(event: str) -> float:
        stamp = next(r["timestamp"] for r in rm_log if r["event"] == event)
        return datetime.fromisoformat(stamp).timestamp()

    up_s = wall("rm_started") - spawned_wall
    nms_s = wall("node_registered") - wall("rm_started")
    done_before = sum(1 for r in before if r["event"] == "container_finished")
    print(
        f"RM down {restarted_at - killed_at:.1f} s (kill to restart), restored and serving "
        f"{up_s:.2f} s after its start, NMs re-registered {nms_s:.2f} s after that; "
        f"{done_before} tasks done before the kill, {len(running_at_kill)} running through "
        f"it (recovered), 0 re-run; run ended {ended_at - restarted_at:.1f} s after the "
        "restart"
    )


async def _rm_on(store_dir: Path) -> tuple[Any, Any, BudgetPolicy, int]:
    """An RM on the store in ``store_dir``, restored from it if it holds one."""
    policy = BudgetPolicy()
    server, state, port = await serve_on_store(ResourceManager(policy), store_dir)
    return server, state, policy, port


def test_a_queue_budget_survives_an_rm_restart(tmp_path: Path) -> None:
    async def main() -> None:
        server, state, policy, port = await _rm_on(tmp_path)
        async with channel(f"127.0.0.1:{port}") as ch:
            client: Any = client_grpc.ClientStub(ch)
            req = client_pb.SetQueueBudgetRequest(queue="default", budget=250.0, spending_rate=4)
            await client.SetQueueBudget(req, timeout=10)
        epoch = state.clock.epoch
        await server.stop(None)  # no shutdown work: as if killed after the call returned
        server, state, policy, port = await _rm_on(tmp_path)
        try:
            assert policy.budgets == {"default": (250.0, 4.0)}
            assert state.clock.epoch == epoch  # the emulated clock goes on
        finally:
            await server.stop(None)

    asyncio.run(main())


def _job(name: str, tasks: int = 3) -> pb.JobSpec:
    stage = pb.StageSpec(
        name="map", resources=pb.Resources(amounts={"vcores": 1}), durations=[5.0] * tasks
    )
    return pb.JobSpec(name=name, stages=[stage])


def test_applications_and_their_done_tasks_survive_an_rm_restart(tmp_path: Path) -> None:
    """What the store keeps of applications: a restarted RM reports them as they were,
    the AM of a running one registers again (same attempt) and is told the tasks it had
    reported done; an ended one stays ended; new ids continue; a container no node
    reports is lost."""

    async def main() -> None:
        server, state, _, port = await _rm_on(tmp_path)
        async with channel(f"127.0.0.1:{port}") as ch:
            client: Any = client_grpc.ClientStub(ch)
            am: Any = am_grpc.ApplicationMasterStub(ch)
            ids = []
            for name in ("one", "two"):
                sub = client_pb.SubmitApplicationRequest(user="alice", job=_job(name))
                ids.append((await client.SubmitApplication(sub, timeout=10)).app_id)
            one, two = ids
            reg = am_pb.RegisterApplicationMasterRequest(app_id=one)
            assert (await am.RegisterApplicationMaster(reg, timeout=10)).attempt == 1
            done = [am_pb.CompletedTask(stage=0, task=t) for t in (0, 2)]
            req = am_pb.AllocateRequest(app_id=one, attempt=1, newly_completed=done)
            assert (await am.Allocate(req, timeout=10)).response_id == 1
            kill = client_pb.KillApplicationRequest(app_id=two)
            await client.KillApplication(kill, timeout=10)
        state.persist()  # the housekeeping pass (each heartbeat) does this
        await server.stop(None)

        server, state, _, port = await _rm_on(tmp_path)
        try:
            async with channel(f"127.0.0.1:{port}") as ch:
                client = client_grpc.ClientStub(ch)
                am = am_grpc.ApplicationMasterStub(ch)
                get = client_pb.GetApplicationReportRequest
                r1 = await client.GetApplicationReport(get(app_id=one), timeout=10)
                r2 = await client.GetApplicationReport(get(app_id=two), timeout=10)
                assert (r1.state, r1.attempt, r1.user) == ("RUNNING", 1, "alice")
                assert r2.state == "KILLED"
                # The AM's session is gone with the old RM: it is told to register again.
                req = am_pb.AllocateRequest(app_id=one, attempt=1, response_id=1)
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await am.Allocate(req, timeout=10)
                assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
                assert "register again" in (e.value.details() or "")
                reg = am_pb.RegisterApplicationMasterRequest(app_id=one)
                again = await am.RegisterApplicationMaster(reg, timeout=10)
                assert again.attempt == 1  # the restart cost no attempt
                assert {(t.stage, t.task) for t in again.completed_tasks} == {(0, 0), (0, 2)}
                # A container of the old run that no node reports within a node expiry
                # ends as lost: the AM hears it and runs the task again.
                recovery = state.rm.recovery
                old = format_container_id(one, 1, 1)  # granted by the run before
                recovery.await_containers({old: (one, "n1", True)}, 0.0)
                recovery.end_unreported(recovery.deadline)
                req = am_pb.AllocateRequest(app_id=one, attempt=1, response_id=0)
                resp = await am.Allocate(req, timeout=10)
                assert [(s.container_id, s.exit_status) for s in resp.completed] == [(old, -100)]
                sub = client_pb.SubmitApplicationRequest(user="bob", job=_job("three"))
                three = (await client.SubmitApplication(sub, timeout=10)).app_id
                assert parse_app_id(three).n == 3  # the numbers go on
        finally:
            await server.stop(None)

    asyncio.run(main())


def test_nm_heartbeats_follow_the_clock_of_an_rm_restarted_without_its_state() -> None:
    """An RM restarted without a store starts a new clock at 0: the NMs' heartbeat loop
    starts its deadlines afresh on it (it used to sleep for as long as the old RM had been
    up before its next heartbeat)."""

    async def main() -> None:
        old = RmSettings(epoch=time.time() - 1000.0)  # an RM up for 1000 s
        server, state, port = await serve(ResourceManager(FifoPolicy()), old, "127.0.0.1:0")
        address = f"127.0.0.1:{port}"
        host = NodeHost([NodeSpec("n1", Resources(vcores=4, memory_mb=4096))], address,
                        batch=True)  # fmt: skip
        stop = asyncio.Event()
        await host.connect()
        await host.register()
        loop = asyncio.create_task(host.heartbeat_loop(stop))
        try:
            await asyncio.sleep(0.3)
            await server.stop(None)
            fresh = ResourceManager(FifoPolicy())
            server, state, _ = await serve(fresh, RmSettings(), address)
            deadline = time.monotonic() + 8.0
            while "n1" not in fresh.state.nodes and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert "n1" in fresh.state.nodes, "the NM stayed silent after the RM's restart"
            seen = fresh.state.nodes["n1"].last_heartbeat_s
            await asyncio.sleep(2.5)  # heartbeats go on at their interval on the new clock
            assert fresh.state.nodes["n1"].last_heartbeat_s > seen
            assert host.clock.epoch == state.clock.epoch
        finally:
            stop.set()
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop
            await host.close()
            await server.stop(None)

    asyncio.run(main())

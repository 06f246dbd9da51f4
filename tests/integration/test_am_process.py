"""The AM runtime over real gRPC: an in-process RM and NM host on port 0, AMs in-process,
as an AM host process, and as managed AM processes that an NM launches in a container."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from am.server.service import run_application_master
from nm.server.service import ContainerManagerServicer, NodeHost
from rm.core.facade import AM_PRIORITY, ResourceManager
from rm.server.service import RmServer, RmSettings, serve
from treadle import events as ev
from treadle.live import wire
from treadle.live.rpcutil import channel
from treadle.messages import FinalStatus
from treadle.model import JobSpec, NodeSpec, StageSpec
from treadle.registry import build
from treadle.resources import Resources
from treadle.rpc.v1 import (
    client_pb2 as client_pb,
    client_pb2_grpc as client_grpc,
    container_manager_pb2 as cm_pb,
    container_manager_pb2_grpc as cm_grpc,
)

AM = [sys.executable, "-m", "am"]
TASK = Resources(vcores=1, memory_mb=512)


def job(name: str, maps: int = 6, map_s: float = 4.0, reduces: int = 2) -> JobSpec:
    return JobSpec(
        name,
        "alice",
        0.0,
        (
            StageSpec("map", TASK, (map_s,) * maps),
            StageSpec("reduce", TASK, (2.0,) * reduces, ("map",)),
        ),
    )


class Cluster:
    """An RM (with its housekeeping) and one NM host with one node, in this event loop."""

    def __init__(
        self,
        *,
        dilation: float = 20.0,
        am_expiry_s: float = 60.0,
        servicer: type[ContainerManagerServicer] = ContainerManagerServicer,
    ) -> None:
        self.dilation = dilation
        self.servicer_cls = servicer
        self.am_expiry_s = am_expiry_s
        self.stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._servers: list[grpc.aio.Server] = []
        self.host: NodeHost | None = None
        self._channel: grpc.aio.Channel | None = None

    async def __aenter__(self) -> Cluster:
        try:
            await self._start()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def _start(self) -> None:
        rm = ResourceManager(
            build("policies", "fifo"), heartbeat_s=1.0, am_expiry_s=self.am_expiry_s
        )
        server, self.state, port = await serve(
            rm, RmSettings(dilation=self.dilation), "127.0.0.1:0"
        )
        self._servers.append(server)
        self.address = f"127.0.0.1:{port}"
        self.state.settings.advertise = self.address
        self._tasks.append(asyncio.create_task(self.state.housekeeping(self.stop)))
        nm_server = grpc.aio.server()
        nm_port = nm_server.add_insecure_port("127.0.0.1:0")
        self._servers.append(nm_server)
        node = NodeSpec("node1", Resources(vcores=4, memory_mb=8192))
        self.host = NodeHost([node], self.address, batch=False, address=f"127.0.0.1:{nm_port}")
        self.servicer = self.servicer_cls(self.host)
        cm_grpc.add_ContainerManagerServicer_to_server(self.servicer, nm_server)
        await nm_server.start()
        await self.host.connect()
        await self.host.register()
        self._tasks.append(asyncio.create_task(self.host.heartbeat_loop(self.stop)))
        self._channel = channel(self.address)
        self.client: Any = client_grpc.ClientStub(self._channel)

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.host is not None:
            await self.host.close()  # terminates managed AM processes
        await _reap_am_processes()
        for server in reversed(self._servers):
            await server.stop(0)
        if self._channel is not None:
            await self._channel.close()
        with contextlib.suppress(AttributeError):
            launches = self.state._tasks
            await asyncio.wait_for(asyncio.gather(*launches, return_exceptions=True), 10)

    @property
    def rm(self) -> ResourceManager:
        return self.state.rm

    @property
    def server(self) -> RmServer:
        return self.state

    async def submit(self, spec: JobSpec, *, managed_am: bool = False) -> str:
        resp = await self.client.SubmitApplication(
            client_pb.SubmitApplicationRequest(
                user=spec.user, queue="default", job=wire.job_to_pb(spec), managed_am=managed_am
            ),
            timeout=5,
        )
        return str(resp.app_id)

    async def report(self, app_id: str) -> client_pb.ApplicationReport:
        r: client_pb.ApplicationReport = await self.client.GetApplicationReport(
            client_pb.GetApplicationReportRequest(app_id=app_id), timeout=5
        )
        return r

    async def wait_until(
        self, what: str, cond: Callable[[], bool], timeout_s: float = 15.0
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while not cond():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.02)

    async def wait_finished(self, app_ids: list[str], timeout_s: float = 15.0) -> None:
        def done() -> bool:
            return all(self.rm.state.app(a).state != "RUNNING" for a in app_ids)

        await self.wait_until(f"{app_ids} to finish", done, timeout_s)

    def records(self, event: str, app_id: str) -> list[dict[str, Any]]:
        return [r for r in self.rm.log.of(event) if r.get("job") == app_id]

    def task_containers(self, app_id: str) -> set[str]:
        return {
            r["container"]
            for r in self.records(ev.CONTAINER_ALLOCATED, app_id)
            if r["priority"] != AM_PRIORITY
        }

    def complete_task_containers(self, app_id: str) -> list[dict[str, Any]]:
        tasks = self.task_containers(app_id)
        return [
            r
            for r in self.records(ev.CONTAINER_FINISHED, app_id)
            if r["container"] in tasks and r["state"] == "COMPLETE"
        ]


async def _reap_am_processes() -> None:
    """Wait for the NM host's reapers of AM processes (they close the subprocess pipes)."""
    me = asyncio.current_task()
    reapers = [
        t
        for t in asyncio.all_tasks()
        if t is not me and getattr(t.get_coro(), "__qualname__", "") == "NodeHost._reap"
    ]
    if reapers:
        await asyncio.wait_for(asyncio.gather(*reapers, return_exceptions=True), 10)


def _stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


async def _wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"process {proc.args!r} did not exit in {timeout_s} s")
        await asyncio.sleep(0.05)
    return proc.returncode


def _assert_all_tasks_completed(cl: Cluster, app_id: str, spec: JobSpec) -> None:
    tasks = cl.task_containers(app_id)
    finished = [r for r in cl.records(ev.CONTAINER_FINISHED, app_id) if r["container"] in tasks]
    assert finished, "no task container finished"
    assert {r["state"] for r in finished} == {"COMPLETE"}, finished
    assert len(cl.complete_task_containers(app_id)) == spec.tasks
    assert not cl.records(ev.CONTAINER_RELEASED, app_id)  # nothing over-allocated


# ---------------------------------------------------------------------- tests
def test_unmanaged_am_runs_a_job_to_completion() -> None:
    async def main() -> None:
        async with Cluster() as cl:
            spec = job("wordcount")
            app_id = await cl.submit(spec)
            assert [a.app_id for a in (await cl.client.ListApplications(
                client_pb.ListApplicationsRequest(awaiting_am_only=True), timeout=5
            )).applications] == [app_id]  # fmt: skip
            status = await asyncio.wait_for(run_application_master(cl.address, app_id), 15)
            assert status is FinalStatus.SUCCEEDED
            report = await cl.report(app_id)
            assert report.state == "FINISHED"
            assert report.attempt == 1
            _assert_all_tasks_completed(cl, app_id, spec)
            # Every task container started, and reduces only after every map finished.
            prio = {
                r["container"]: r["priority"] for r in cl.records(ev.CONTAINER_ALLOCATED, app_id)
            }
            starts = {r["container"]: r["t"] for r in cl.records(ev.CONTAINER_STARTED, app_id)}
            ends = {r["container"]: r["t"] for r in cl.records(ev.CONTAINER_FINISHED, app_id)}
            assert len(starts) == spec.tasks
            last_map = max(t for c, t in ends.items() if prio[c] == 0)
            assert all(t >= last_map for c, t in starts.items() if prio[c] == 2)

    asyncio.run(main())


def test_am_host_process_runs_every_awaiting_application(tmp_path: Path) -> None:
    async def main() -> None:
        async with Cluster() as cl:
            a = await cl.submit(job("first", maps=4))
            b = await cl.submit(job("second", maps=3))
            ready = tmp_path / "am.ready"
            with (tmp_path / "am-host.log").open("wb") as err:
                proc = subprocess.Popen(
                    [*AM, "--rm", cl.address, "--poll-s", "0.05", "--port-file", str(ready)],
                    stderr=err,
                )
                try:
                    await cl.wait_finished([a, b])
                    assert ready.read_text().strip() == "ready"
                    proc.send_signal(signal.SIGTERM)
                    assert await _wait_exit(proc, 10) == 0
                finally:
                    _stop_process(proc)
            for app_id, spec in ((a, job("first", maps=4)), (b, job("second", maps=3))):
                assert (await cl.report(app_id)).state == "FINISHED"
                _assert_all_tasks_completed(cl, app_id, spec)
            log = (tmp_path / "am-host.log").read_text()
            assert "Traceback" not in log

    asyncio.run(main())


def test_managed_am_runs_in_a_container_on_the_nm() -> None:
    async def main() -> None:
        async with Cluster() as cl:
            assert cl.host is not None
            nm = cl.host.nms["node1"]
            spec = job("managed", maps=6)
            app_id = await cl.submit(spec, managed_am=True)
            am_held_while_tasks_ran: list[bool] = []
            am_processes: list[asyncio.subprocess.Process] = []

            def finished() -> bool:
                assert cl.host is not None
                tasks = cl.task_containers(app_id) & nm.running.keys()
                am_cid = cl.rm.state.app(app_id).am_container
                if tasks:
                    am_held_while_tasks_ran.append(am_cid in nm.running)
                proc = cl.host.processes.get(am_cid or "")
                if proc is not None and proc not in am_processes:
                    am_processes.append(proc)
                return cl.rm.state.app(app_id).state != "RUNNING"

            await cl.wait_until("the managed job to finish", finished, 20)
            assert (await cl.report(app_id)).state == "FINISHED"
            am_allocs = [
                r
                for r in cl.records(ev.CONTAINER_ALLOCATED, app_id)
                if r["priority"] == AM_PRIORITY
            ]
            assert len(am_allocs) == 1
            am_cid = am_allocs[0]["container"]
            first_task = min(
                r["t"]
                for r in cl.records(ev.CONTAINER_ALLOCATED, app_id)
                if r["priority"] != AM_PRIORITY
            )
            assert am_allocs[0]["t"] <= first_task
            assert am_held_while_tasks_ran
            assert all(am_held_while_tasks_ran)
            # The AM container ended with the application, not before.
            end = max(r["t"] for r in cl.records(ev.JOB_FINISHED, app_id))
            am_end = [
                r["t"]
                for r in cl.rm.log.records
                if r.get("container") == am_cid
                and r["event"] in (ev.CONTAINER_FINISHED, ev.CONTAINER_RELEASED)
            ]
            assert am_end
            assert min(am_end) >= end
            _assert_all_tasks_completed(cl, app_id, spec)
            assert len(cl.records(ev.ATTEMPT_STARTED, app_id)) == 1
            # The AM process reports the job's success (even when the NM's stop of the
            # finished AM's container reaches it while it exits).
            (proc,) = am_processes
            assert await asyncio.wait_for(proc.wait(), 10) == 0

    asyncio.run(main())


def _assert_restart_skipped_done_work(
    cl: Cluster, app_id: str, spec: JobSpec, reported: int, failed_at: float
) -> None:
    assert [r["attempt"] for r in cl.records(ev.ATTEMPT_STARTED, app_id)] == [1, 2]
    assert [r["attempt"] for r in cl.records(ev.ATTEMPT_FAILED, app_id)] == [1]
    complete = cl.complete_task_containers(app_id)
    first = [r for r in complete if r["t"] <= failed_at]
    second = [r for r in complete if r["t"] > failed_at]
    assert reported >= 1
    # Every task ran to completion once, plus at most those the first attempt finished
    # but had not reported when it died; the second attempt redid none it was told of.
    assert spec.tasks <= len(complete) <= spec.tasks + len(first) - reported
    assert len(second) <= spec.tasks - reported


def test_killed_managed_am_is_replaced_by_a_second_attempt() -> None:
    async def main() -> None:
        async with Cluster() as cl:
            assert cl.host is not None
            spec = job("retry-managed", maps=12)
            app_id = await cl.submit(spec, managed_am=True)
            app = cl.rm.state.app(app_id)
            await cl.wait_until("reported tasks", lambda: len(app.done_tasks) >= 2, 15)
            reported = len(app.done_tasks)
            am_cid = app.am_container
            assert am_cid is not None
            proc = cl.host.processes[am_cid]
            os.kill(proc.pid, signal.SIGKILL)
            await cl.wait_finished([app_id], 20)
            report = await cl.report(app_id)
            assert report.state == "FINISHED", report.diagnostics
            assert report.attempt == 2
            (failed,) = cl.records(ev.ATTEMPT_FAILED, app_id)
            assert "AM container exited" in failed["reason"]
            _assert_restart_skipped_done_work(cl, app_id, spec, reported, failed["t"])
            am_allocs = [
                r
                for r in cl.records(ev.CONTAINER_ALLOCATED, app_id)
                if r["priority"] == AM_PRIORITY
            ]
            assert len(am_allocs) == 2

    asyncio.run(main())


def test_silent_unmanaged_am_expires_and_a_second_attempt_finishes() -> None:
    async def main() -> None:
        async with Cluster(am_expiry_s=5.0) as cl:
            spec = job("retry-unmanaged", maps=12)
            app_id = await cl.submit(spec)
            app = cl.rm.state.app(app_id)
            first = asyncio.create_task(run_application_master(cl.address, app_id))
            try:
                await cl.wait_until("reported tasks", lambda: len(app.done_tasks) >= 2, 15)
                reported = len(app.done_tasks)
            finally:
                first.cancel()  # the AM dies without a word
                await asyncio.gather(first, return_exceptions=True)
            await cl.wait_until(
                "the attempt to expire", lambda: bool(cl.records(ev.ATTEMPT_FAILED, app_id)), 10
            )
            (failed,) = cl.records(ev.ATTEMPT_FAILED, app_id)
            assert "missed Allocate" in failed["reason"]
            assert (await cl.report(app_id)).awaiting_am
            status = await asyncio.wait_for(run_application_master(cl.address, app_id), 15)
            assert status is FinalStatus.SUCCEEDED
            assert (await cl.report(app_id)).state == "FINISHED"
            _assert_restart_skipped_done_work(cl, app_id, spec, reported, failed["t"])

    asyncio.run(main())


def test_am_of_a_killed_application_stops_quietly() -> None:
    async def main() -> None:
        async with Cluster() as cl:
            app_id = await cl.submit(job("doomed", maps=12, map_s=20.0))
            am = asyncio.create_task(run_application_master(cl.address, app_id))
            app = cl.rm.state.app(app_id)
            await cl.wait_until("running tasks", lambda: bool(app.containers), 10)
            await cl.client.KillApplication(
                client_pb.KillApplicationRequest(app_id=app_id), timeout=5
            )
            assert await asyncio.wait_for(am, 10) is FinalStatus.KILLED
            assert (await cl.report(app_id)).state == "KILLED"

    asyncio.run(main())


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_bad_arguments_are_one_line_and_exit_2() -> None:
    for args in (
        [],
        ["--rm"],
        ["--rm", "nonsense"],
        ["--rm", "127.0.0.1:1", "--poll-s", "0"],
        ["--rm", "127.0.0.1:1", "--app-id", ""],
        ["--rm", "127.0.0.1:1", "--poll-s", "soon"],
        ["--rm", "127.0.0.1:1", "--log-level", "loud"],
    ):
        proc = subprocess.run([*AM, *args], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2, (args, proc.stderr)
        assert _one_error_line(proc).startswith("python -m am: error:"), args


def test_unreachable_rm_is_one_line_and_exit_1() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for extra in ([], ["--app-id", "application_1000000000000_0001"]):
        proc = subprocess.run(
            [*AM, "--rm", f"127.0.0.1:{port}", "--rm-wait-s", "0.3", *extra],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 1, proc.stderr
        assert "cannot reach the RM" in _one_error_line(proc)


def test_unknown_application_is_one_line_and_exit_1() -> None:
    async def main() -> None:
        async with Cluster() as cl:
            proc = await asyncio.create_subprocess_exec(
                *AM,
                "--rm",
                cl.address,
                "--app-id",
                "application_1000000000000_99999",
                stderr=asyncio.subprocess.PIPE,
            )
            _, err = await asyncio.wait_for(proc.communicate(), 30)
            assert proc.returncode == 1
            text = err.decode()
            assert len(text.strip().splitlines()) == 1, text
            assert "unknown application" in text
            assert "Traceback" not in text

    asyncio.run(main())


def test_signalled_am_process_exits_cleanly_without_finishing(tmp_path: Path) -> None:
    async def main() -> None:
        async with Cluster() as cl:
            app_id = await cl.submit(job("interrupted", maps=12, map_s=20.0))
            with (tmp_path / "am.log").open("wb") as err:
                proc = subprocess.Popen([*AM, "--rm", cl.address, "--app-id", app_id], stderr=err)
                try:
                    await cl.wait_until(
                        "the AM to register",
                        lambda: bool(cl.records(ev.ATTEMPT_STARTED, app_id)),
                        15,
                    )
                    proc.send_signal(signal.SIGINT)
                    assert await _wait_exit(proc, 10) == 1
                finally:
                    _stop_process(proc)
            assert "Traceback" not in (tmp_path / "am.log").read_text()
            report = await cl.report(app_id)
            assert report.state == "RUNNING"  # no Finish: the RM will expire the attempt
            assert not report.awaiting_am

    asyncio.run(main())


class FlakyContainerManager(ContainerManagerServicer):
    """Refuses the first StartContainers call's launches, fails the second call outright."""

    def __init__(self, host: NodeHost) -> None:
        super().__init__(host)
        self.calls = 0
        self.refused: list[str] = []

    async def StartContainers(
        self, request: cm_pb.StartContainersRequest, context: Any
    ) -> cm_pb.StartContainersResponse:
        self.calls += 1
        if self.calls == 1:
            self.refused.extend(m.container_id for m in request.launches)
            return cm_pb.StartContainersResponse(
                failed={m.container_id: "disk full" for m in request.launches}
            )
        if self.calls == 2:
            self.refused.extend(m.container_id for m in request.launches)
            await context.abort(grpc.StatusCode.UNAVAILABLE, "NM restarting")
        return await super().StartContainers(request, context)


def test_launches_an_nm_refuses_are_released_and_their_tasks_rerun() -> None:
    async def main() -> None:
        async with Cluster(servicer=FlakyContainerManager) as cl:
            spec = job("flaky", maps=6)
            app_id = await cl.submit(spec)
            status = await asyncio.wait_for(run_application_master(cl.address, app_id), 15)
            assert status is FinalStatus.SUCCEEDED
            assert isinstance(cl.servicer, FlakyContainerManager)
            refused = set(cl.servicer.refused)
            assert len(refused) >= 2
            released = {r["container"] for r in cl.records(ev.CONTAINER_RELEASED, app_id)}
            assert released == refused
            complete = {r["container"] for r in cl.complete_task_containers(app_id)}
            assert len(complete) == spec.tasks
            assert not complete & refused

    asyncio.run(main())

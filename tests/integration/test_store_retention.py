"""The state store under bounded retention (``rm.core.ended``): the rows of the ended
applications the RM dropped are deleted with the write of the one whose end dropped them;
an ended application keeps no job bytes and no done tasks, and the pages they took go
back to the file system; a restart restores only the kept ones; and a restarted RM hands
out no id that a previous run acknowledged or logged, even one the store lacks (a kill -9
between the event log's ``job_submitted`` and the store's commit)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import requests

from plugins.policies.fifo import FifoPolicy
from rm.core.facade import ResourceManager
from rm.server.service import RmServer, RmSettings
from rm.server.store import DB_NAME, StateStore, open_state, restore
from tests.integration.test_rm_service import job as pb_job, stage as pb_stage
from treadle.events import EventLog
from treadle.live.gate import Gate
from treadle.live.rpcutil import channel
from treadle.messages import AllocateRequest, AppSubmission, FinalStatus
from treadle.model import JobSpec, StageSpec
from treadle.resources import Resources
from treadle.rpc.v1 import client_pb2 as client_pb, client_pb2_grpc as client_grpc
from treadle.yarnids import SIM_CLUSTER_TIMESTAMP, format_app_id, parse_app_id

SMALL = Resources(vcores=1, memory_mb=1024)


def job(tasks: int) -> JobSpec:
    return JobSpec("j", "alice", 0.0, (StageSpec("map", SMALL, (2.5,) * tasks),))


class Run:
    """One RM run over ``DIR/state`` and ``DIR/events.jsonl``, as ``python -m rm`` makes it
    (its service's writes: ``RmServer.persist``), restarting from what the last run left."""

    def __init__(self, where: Path, kept: int) -> None:
        self.events = where / "events.jsonl"
        gate = Gate.open()
        self.store, stored, previous = open_state(
            where / "state", str(self.events), cluster=gate.cluster_id, fresh=False
        )
        self.sink = open(self.events, "a", encoding="utf-8")  # noqa: SIM115
        log = EventLog(self.sink)
        log.records.extend(previous)
        self.rm = ResourceManager(FifoPolicy(), event_log=log, max_completed_applications=kept)
        settings = RmSettings()
        if not stored.empty:
            settings.epoch = restore(stored, self.rm, gate, 1.0)
        self.server = RmServer(self.rm, settings, gate, self.store)

    def submit(self, tasks: int = 1000) -> str:
        sub = AppSubmission("j", "alice", "default", tasks, job=job(tasks))
        app_id = self.rm.submit_application(sub, self.server.now())
        self.sink.flush()
        self.server.persist([app_id])
        return app_id

    def kill(self, app_id: str) -> None:
        self.rm.finish_application(app_id, FinalStatus.KILLED, self.server.now())
        self.server.persist([app_id])

    def stop(self) -> None:
        self.server.persist()
        self.sink.close()
        self.store.close()


def rows(where: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(where / "state" / DB_NAME) as db:
        return db.execute(sql).fetchall()


def test_dropped_rows_are_deleted_and_a_restart_restores_only_the_kept(tmp_path: Path) -> None:
    run = Run(tmp_path, kept=3)
    running = run.submit()
    run.rm.register_application_master(running, 0.0)
    run.rm.on_allocate(AllocateRequest(running, completed_tasks=[(0, 0), (0, 1)]), 0.0)
    ended = []
    for _ in range(7):
        ended.append(run.submit())
        run.rm.register_application_master(ended[-1], 0.0)
        run.rm.on_allocate(AllocateRequest(ended[-1], completed_tasks=[(0, 5)]), 0.0)
        run.kill(ended[-1])
    assert rows(tmp_path, "PRAGMA freelist_count") == [(0,)]  # the jobs' pages given back
    run.server.persist(every_s=0.0)  # the housekeeping pass: the running one's tasks
    run.stop()
    stored = rows(tmp_path, "SELECT app_id, job IS NULL FROM apps ORDER BY seq")
    # The running application whole; the three newest ended ones without their jobs.
    assert stored == [(running, 0), *((a, 1) for a in ended[-3:])]
    assert rows(tmp_path, "SELECT app_id, stage, task FROM done_tasks") == [
        (running, 0, 0), (running, 0, 1)
    ]  # fmt: skip
    # Every application's events are in the log, the dropped ones' too.
    records = [json.loads(line) for line in run.events.read_text().splitlines()]
    assert sum(r["event"] == "job_failed" for r in records) == 7

    again = Run(tmp_path, kept=3)
    assert list(again.rm.state.finished) == ended[-3:]
    assert list(again.rm.state.apps) == [running]
    assert again.rm.register_application_master(running, 1.0).completed_tasks == ((0, 0), (0, 1))
    assert again.rm.reports.application(ended[-1]).state == "KILLED"
    again.stop()

    # A restart with a smaller bound drops more, and deletes their rows at its first write.
    smaller = Run(tmp_path, kept=1)
    assert list(smaller.rm.state.finished) == ended[-1:]
    smaller.stop()
    assert rows(tmp_path, "SELECT app_id FROM apps ORDER BY seq") == [(running,), (ended[-1],)]


def test_a_submission_logged_but_not_committed_keeps_its_id(tmp_path: Path) -> None:
    run = Run(tmp_path, kept=10)
    ids = [run.submit(10) for _ in range(3)]
    # The kill -9 window: the event log has the 4th submission, the store never got it.
    lost = run.rm.submit_application(AppSubmission("lost", "alice", "default", 1), 5.0)
    run.sink.flush()
    run.sink.close()
    run.store._db.close()  # no clean close: the RM was killed
    assert rows(tmp_path, "SELECT app_id FROM apps ORDER BY seq") == [(a,) for a in ids]

    again = Run(tmp_path, kept=10)
    assert lost not in again.rm.state.apps
    fresh = again.submit(10)
    assert (lost, fresh) == (
        format_app_id(SIM_CLUSTER_TIMESTAMP, 4),
        format_app_id(SIM_CLUSTER_TIMESTAMP, 5),
    )
    again.stop()


def test_ids_go_on_after_every_ended_application_is_dropped(tmp_path: Path) -> None:
    run = Run(tmp_path, kept=0)
    for _ in range(4):
        run.kill(run.submit(10))
    run.stop()
    assert rows(tmp_path, "SELECT app_id FROM apps") == []
    # Even without the event log, the store's own mark holds the ids handed out.
    run.events.unlink()
    store = StateStore(tmp_path / "state", cluster=Gate.open().cluster_id)
    assert store.load().next_seq == 4
    store.close()
    again = Run(tmp_path, kept=0)
    assert again.submit(10) == format_app_id(SIM_CLUSTER_TIMESTAMP, 5)
    again.stop()


# --------------------------------------------------------------------------------------
# A real ``python -m rm``


def start_rm(where: Path) -> subprocess.Popen[str]:
    """``python -m rm`` keeping 5 ended applications (its config file), with a store, an
    event log and an HTTP port; its addresses in ``where/rm.port`` and ``where/http``."""
    for f in ("rm.port", "http"):
        (where / f).unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rm", "--policy", "fifo", "--insecure",
         "--config", str(where / "rm.yaml"), "--state-dir", str(where / "state"),
         "--events", str(where / "events.jsonl"), "--port-file", str(where / "rm.port"),
         "--http-port", "0", "--http-port-file", str(where / "http"), "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not all((where / f).exists() for f in ("rm.port", "http")):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the RM did not start"
        time.sleep(0.05)
    return proc


def stop_rm(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.communicate(timeout=30)


async def churn(address: str, n: int) -> list[str]:
    """Submit and kill ``n`` small jobs; their ids."""
    ids = []
    async with channel(address) as ch:
        stub: Any = client_grpc.ClientStub(ch)
        for _ in range(n):
            req = client_pb.SubmitApplicationRequest(
                user="alice", job=pb_job("j", pb_stage("m", 3))
            )
            app_id = (await stub.SubmitApplication(req, timeout=10)).app_id
            await stub.KillApplication(client_pb.KillApplicationRequest(app_id=app_id), timeout=10)
            ids.append(app_id)
    return ids


async def report_code(address: str, app_id: str) -> str:
    async with channel(address) as ch:
        stub: Any = client_grpc.ClientStub(ch)
        req = client_pb.GetApplicationReportRequest(app_id=app_id)
        try:
            return str((await stub.GetApplicationReport(req, timeout=10)).state)
        except grpc.aio.AioRpcError as e:
            return f"{e.code().name}: {e.details()}"


def test_a_real_rm_keeps_its_bound_in_memory_rest_store_and_across_a_restart(
    tmp_path: Path,
) -> None:
    (tmp_path / "rm.yaml").write_text("max_completed_applications: 5\n")
    proc = start_rm(tmp_path)
    try:
        address, http = ((tmp_path / f).read_text().strip() for f in ("rm.port", "http"))
        ids = asyncio.run(churn(address, 12))
        listed = requests.get(f"{http}/ws/v1/cluster/apps", timeout=10).json()["apps"]["app"]
        assert [a["id"] for a in listed] == ids[-5:]
        assert {a["state"] for a in listed} == {"KILLED"}
        gone = requests.get(f"{http}/ws/v1/cluster/apps/{ids[0]}", timeout=10)
        assert gone.status_code == 404
        assert gone.json()["RemoteException"]["exception"] == "NotFoundException"
        assert requests.get(f"{http}/ws/v1/cluster/apps/{ids[-1]}", timeout=10).ok
        assert asyncio.run(report_code(address, ids[0])) == (
            f"NOT_FOUND: unknown application '{ids[0]}'"
        )
        assert asyncio.run(report_code(address, ids[-1])) == "KILLED"
    finally:
        stop_rm(proc)
    records = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [r["job"] for r in records if r["event"] == "job_submitted"] == ids
    assert rows(tmp_path, "SELECT app_id FROM apps ORDER BY seq") == [(a,) for a in ids[-5:]]

    proc = start_rm(tmp_path)  # a restart: the 5 kept, and ids go on
    try:
        address, http = ((tmp_path / f).read_text().strip() for f in ("rm.port", "http"))
        listed = requests.get(f"{http}/ws/v1/cluster/apps", timeout=10).json()["apps"]["app"]
        assert [a["id"] for a in listed] == ids[-5:]
        (new,) = asyncio.run(churn(address, 1))
        # As YARN's: the restarted RM's own start names it; its number goes on from 12.
        (before, after) = (parse_app_id(ids[-1]), parse_app_id(new))
        assert (after.n, after.cluster_ts >= before.cluster_ts) == (13, True)
        listed = requests.get(f"{http}/ws/v1/cluster/apps", timeout=10).json()["apps"]["app"]
        assert [a["id"] for a in listed] == [*ids[-4:], new]
    finally:
        stop_rm(proc)

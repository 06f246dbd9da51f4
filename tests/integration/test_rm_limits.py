"""Containment: the RM's limits (tasks and stages per job, bytes per request, pending tasks
in all) refuse a submission RESOURCE_EXHAUSTED naming the limit, before anything changes:
the application does not exist afterwards and the RM's other applications go on.

Real gRPC against an in-process RM on port 0 (``rm.server.service.serve``, as in
test_rm_service.py), and a real ``python -m rm`` for the config file and the flags.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from plugins.policies.fifo import FifoPolicy
from rm.core.facade import ResourceManager
from rm.server.config import RmLimits, parse_rm_config
from rm.server.service import RmSettings, serve
from tests.integration.test_rm_service import TIMEOUT, Rm, aio, job, stage
from treadle.cluster.config import rm_config_for
from treadle.errors import InputError, LimitExceededError
from treadle.live.rpcutil import channel
from treadle.rpc.v1 import client_pb2 as client_pb, client_pb2_grpc as client_grpc
from treadle.workload import load_workload

EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
LIMITS = RmLimits(
    max_tasks_per_job=100, max_stages_per_job=5, max_request_bytes=64 * 1024,
    max_pending_tasks=150, max_name_chars=64, max_parents_per_job=3,
)  # fmt: skip


@contextlib.asynccontextmanager
async def limited_rm(limits: RmLimits = LIMITS) -> AsyncIterator[Rm]:
    rm = ResourceManager(FifoPolicy(), policy_errors="log")
    server, state, port = await serve(rm, RmSettings(limits=limits), "127.0.0.1:0")
    try:
        # The client may send more than the RM accepts: the RM's limit is what is tested.
        async with channel(f"127.0.0.1:{port}") as ch:
            yield Rm(rm, state, ch)
    finally:
        await server.stop(None)


async def refused(h: Rm, spec: Any) -> str:
    """Submit ``spec``; check it is refused RESOURCE_EXHAUSTED with nothing applied."""
    before = [a.app_id for a in (await h.client.ListApplications(
        client_pb.ListApplicationsRequest(), timeout=TIMEOUT)).applications]  # fmt: skip
    events = len(await h.event_log())
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await h.submit(spec)
    assert info.value.code() == EXHAUSTED, (info.value.code(), info.value.details())
    after = [a.app_id for a in (await h.client.ListApplications(
        client_pb.ListApplicationsRequest(), timeout=TIMEOUT)).applications]  # fmt: skip
    assert after == before  # the application does not exist
    assert len(await h.event_log()) == events  # and nothing was logged: no effect
    return info.value.details() or ""


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (job("big", stage("map", 60), stage("reduce", 41, ["map"])),
         "submission has 101 tasks; the RM's limit max_tasks_per_job is 100"),
        (job("deep", *(stage(f"s{i}", 1) for i in range(6))),
         "submission has 6 stages; the RM's limit max_stages_per_job is 5"),
        (job("x" * 65, stage("map", 1)),
         "submission has a name of 65 characters; the RM's limit max_name_chars is 64"),
        (job("j", stage("map", 1), stage("r", 1, ["map", "y" * 80])),
         "submission has a name of 80 characters; the RM's limit max_name_chars is 64"),
        (job("dag", stage("a", 1), stage("b", 1, ["a"]), stage("c", 1, ["a", "b"]),
             stage("d", 1, ["c"])),
         "submission has 4 stage dependencies; the RM's limit max_parents_per_job is 3"),
    ],
    ids=["tasks", "stages", "job-name", "parent-name", "dependencies"],
)  # fmt: skip
@aio
async def test_a_submission_over_a_limit_is_refused_and_nothing_changes(
    spec: Any, message: str
) -> None:
    async with limited_rm() as h:
        await h.register("n1")
        other = await h.submit(job("other", stage("map", 3)))
        await h.register_am(other)
        details = await refused(h, spec)
        assert message in details, details
        # The RM's other application is untouched and goes on.
        assert (await h.report(other)).state == "RUNNING"
        (c,) = await h.granted(other, 1)
        assert c.app_id == other


@aio
async def test_a_request_over_the_byte_limit_is_refused_by_grpc_before_decoding() -> None:
    async with limited_rm() as h:
        spec = job("huge", stage("map", 10_000))  # 80 KB of durations > 64 KiB
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await h.submit(spec)
        assert info.value.code() == EXHAUSTED
        assert not h.rm.state.apps


@aio
async def test_a_decoded_submission_over_the_byte_limit_is_refused() -> None:
    """gRPC refuses such a request as received; the decoded submission is checked again
    (a second line of defence, and the one that names the limit)."""
    async with limited_rm() as h:
        request = client_pb.SubmitApplicationRequest(
            user="alice", job=job("wide", stage("map", 90, duration_s=1.5), stage("x" * 70_000))
        )
        with pytest.raises(LimitExceededError) as err:
            h.state.check_submission(request)
        assert str(err.value).startswith("submission has 70")
        assert str(err.value).endswith("bytes; the RM's limit max_request_bytes is 65536")
        assert not h.rm.state.apps


@aio
async def test_total_pending_tasks_are_bounded_and_free_again_when_apps_end() -> None:
    async with limited_rm() as h:
        await h.register("n1")
        first = await h.submit(job("a", stage("map", 80)))
        await h.submit(job("b", stage("map", 60)))
        details = await refused(h, job("c", stage("map", 20)))
        assert details == (
            "submission has 20 tasks and the RM holds 140 pending; the RM's limit "
            "max_pending_tasks is 150"
        )
        await h.register_am(first)
        await h.finish(first)  # its 80 tasks leave the RM's books ...
        assert await h.submit(job("c", stage("map", 20)))  # ... so the same job fits now


@aio
async def test_the_defaults_accept_a_large_legal_job() -> None:
    async with limited_rm(RmLimits()) as h:
        assert await h.submit(job("big", stage("map", 200_000)))


# --------------------------------------------------------------------------------------
# The config file and the flags


def test_limits_in_the_config_file_are_read_and_bad_ones_name_the_field() -> None:
    config = parse_rm_config("limits: {max_tasks_per_job: 10, max_pending_tasks: 99}\n", "rm.yaml")
    assert config.limits == RmLimits(max_tasks_per_job=10, max_pending_tasks=99)
    for text, field in [
        ("limits: {max_tasks: 5}\n", "limits.max_tasks"),
        ("limits: {max_request_bytes: 10}\n", "limits.max_request_bytes"),
        ("limits: {max_stages_per_job: 0}\n", "limits.max_stages_per_job"),
    ]:
        with pytest.raises(InputError) as err:
            parse_rm_config(text, "rm.yaml")
        assert str(err.value).startswith(f"rm.yaml: {field}: "), str(err.value)


@pytest.mark.parametrize("name", ["tiny", "demo", "dags"])
def test_the_default_limits_pass_every_shipped_workload(name: str) -> None:
    wl = load_workload(name)
    limits = RmLimits()
    assert sum(j.tasks for j in wl.jobs) <= limits.max_pending_tasks
    assert max(j.tasks for j in wl.jobs) <= limits.max_tasks_per_job
    assert max(len(j.stages) for j in wl.jobs) <= limits.max_stages_per_job
    assert max(sum(len(s.parents) for s in j.stages) for j in wl.jobs) <= limits.max_parents_per_job
    names = [n for j in wl.jobs for n in (j.name, j.user, j.queue, *(s.name for s in j.stages))]
    assert max(map(len, names)) <= limits.max_name_chars
    assert parse_rm_config(rm_config_for(wl), "rm.yaml").limits == limits


def test_a_flag_sets_a_limit_of_a_real_rm_process(tmp_path: Path) -> None:
    config = tmp_path / "rm.yaml"
    config.write_text("limits: {max_tasks_per_job: 50}\n")
    port_file = tmp_path / "rm.port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rm", "--policy", "fifo", "--config", str(config),
         "--max-tasks-per-job", "7", "--port-file", str(port_file), "--log-level", "warning",
         "--insecure"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the RM wrote no port file"
            time.sleep(0.05)

        async def submit(tasks: int) -> str:
            async with channel(port_file.read_text().strip()) as ch:
                stub: Any = client_grpc.ClientStub(ch)
                req = client_pb.SubmitApplicationRequest(
                    user="alice", job=job("j", stage("map", tasks))
                )
                try:
                    await stub.SubmitApplication(req, timeout=5)
                except grpc.aio.AioRpcError as e:
                    return f"{e.code().name}: {e.details()}"
                return "accepted"

        assert asyncio.run(submit(7)) == "accepted"
        assert asyncio.run(submit(8)) == (
            "RESOURCE_EXHAUSTED: submission has 8 tasks; the RM's limit max_tasks_per_job is 7"
        )
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def test_a_bad_limit_flag_is_one_line_and_exit_2(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "rm", "--policy", "fifo", "--insecure",
         "--max-request-bytes", "10"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0, res.stderr
    assert "--max-request-bytes must be between 1024 and" in res.stderr

"""A write the RM cannot make ends it (issue 26, item 4, fail fast on I/O errors): a real
``python -m rm`` whose file size limit is lowered while it serves answers the call whose
write failed UNAVAILABLE, stops serving and exits EX_IOERR (74) within a second, with one
line naming the file and the error, whether the event log's write or the state store's
failed."""

from __future__ import annotations

import asyncio
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from treadle.live.fatal import EX_IOERR
from treadle.live.rpcutil import channel
from treadle.rpc.v1 import client_pb2 as client_pb, client_pb2_grpc as client_grpc, common_pb2 as pb


def _job(name: str) -> pb.JobSpec:
    stage = pb.StageSpec(name="map", resources=pb.Resources(amounts={"vcores": 1}), durations=[5.0])
    return pb.JobSpec(name=name, stages=[stage])


def _start_rm(tmp_path: Path, files: list[str]) -> tuple[subprocess.Popen[str], str]:
    port_file = tmp_path / "rm.port"
    rm = subprocess.Popen(
        [sys.executable, "-m", "rm", "--policy", "fifo", "--insecure", "--port-file",
         str(port_file), *files],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    end = time.monotonic() + 30
    while not port_file.exists():
        assert rm.poll() is None, rm.communicate()[1]
        assert time.monotonic() < end, "the RM did not start"
        time.sleep(0.05)
    return rm, port_file.read_text().strip()


async def _submit(address: str, name: str) -> grpc.aio.AioRpcError | None:
    async with channel(address) as ch:
        client: Any = client_grpc.ClientStub(ch)
        sub = client_pb.SubmitApplicationRequest(user="alice", job=_job(name))
        try:
            await client.SubmitApplication(sub, timeout=10)
        except grpc.aio.AioRpcError as e:
            return e
        return None


@pytest.mark.parametrize("written", ["events", "store"])
def test_an_rm_that_cannot_write_exits_74_within_a_second(tmp_path: Path, written: str) -> None:
    events, store = tmp_path / "rm-events.jsonl", tmp_path / "state"
    files = ["--events", str(events)] if written == "events" else ["--state-dir", str(store)]
    rm, address = _start_rm(tmp_path, files)
    try:
        assert asyncio.run(_submit(address, "before")) is None  # writes while it can
        # No file of the RM may grow from now on (its stderr is a pipe: not limited).
        resource.prlimit(rm.pid, resource.RLIMIT_FSIZE, (1, 1))
        limited = time.monotonic()
        refused = asyncio.run(_submit(address, "after"))
        assert refused is not None
        assert refused.code() == grpc.StatusCode.UNAVAILABLE
        rm.wait(timeout=5)
        took = time.monotonic() - limited
    finally:
        if rm.poll() is None:
            rm.kill()
    _, stderr = rm.communicate()
    assert rm.returncode == EX_IOERR, stderr
    assert took < 1.0, f"the RM took {took:.2f} s to exit"
    last = stderr.strip().splitlines()[-1]
    if written == "events":
        assert last.startswith(f"python -m rm: error: cannot write {events}: EFBIG: File too large")
    else:
        assert last.startswith(f"python -m rm: error: cannot write {store / 'rm-state.sqlite'}: ")
    assert last.endswith(f"stopping (exit {EX_IOERR}) so that its supervisor or operator acts")

"""``treadle run`` says when a job did not succeed (issue 26, item 7): on a real local
cluster, a job killed mid-run leaves every job's result written and the run exiting 1
with the counts, unless ``--accept-failures``."""

from __future__ import annotations

import asyncio
import csv
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.faults import DILATION, JOBS, TREADLE, WORKLOAD, cli
from treadle.cluster.procs import read_state
from treadle.cluster.secrets import client_peer
from treadle.live.rpcutil import channel
from treadle.rpc.v1 import client_pb2 as client_pb, client_pb2_grpc as client_grpc


def _kill_first_running(rm: str, cdir: Path, deadline_s: float) -> str:
    """Kill the first application the RM reports RUNNING, as the driver (its owner)."""
    peer = client_peer(rm, user=None, key_file=None, tls=None, cluster_dir=cdir, env={})

    async def main() -> str:
        async with channel(rm, peer) as ch:
            client: Any = client_grpc.ClientStub(ch)
            end = time.monotonic() + deadline_s
            while time.monotonic() < end:
                apps = await client.ListApplications(client_pb.ListApplicationsRequest())
                running = [a.app_id for a in apps.applications if a.state == "RUNNING"]
                if running:
                    kill = client_pb.KillApplicationRequest(app_id=running[0])
                    await client.KillApplication(kill, timeout=10)
                    return str(running[0])
                await asyncio.sleep(0.1)
        raise AssertionError("no application ran")

    return asyncio.run(main())


@pytest.mark.parametrize("accept", [False, True], ids=["fails", "accepted"])
def test_a_killed_job_makes_the_run_exit_1_with_the_counts(tmp_path: Path, accept: bool) -> None:
    wl = tmp_path / "six.yaml"
    wl.write_text(WORKLOAD)
    cdir = tmp_path / "cluster"
    up = cli(["cluster", "up", "--workload", str(wl), "--policy", "fifo", "--dilation",
              str(DILATION), "--dir", str(cdir), "--no-http"], tmp_path)  # fmt: skip
    assert up.returncode == 0, up.stderr
    out = tmp_path / "out"
    args = ["run", str(wl), "--cluster-dir", str(cdir), "--out", str(out), "--no-slowdown"]
    try:
        run = subprocess.Popen(
            [*TREADLE, *args, *(["--accept-failures"] if accept else [])],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        try:
            state = read_state(cdir)
            assert state is not None
            _kill_first_running(str(state["rm"]), cdir, deadline_s=30)
            stdout, stderr = run.communicate(timeout=90)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
    finally:
        down = cli(["cluster", "down", "--dir", str(cdir)], tmp_path)
    assert down.returncode == 0, down.stderr
    with (out / "jobs.csv").open() as f:
        statuses = [r["status"] for r in csv.DictReader(f)]
    assert len(statuses) == JOBS
    assert statuses.count("KILLED") == 1
    assert statuses.count("SUCCEEDED") == JOBS - 1
    assert f"{JOBS - 1}/{JOBS} jobs" in stdout
    if accept:
        assert run.returncode == 0, stderr
        assert stderr.strip() == ""
    else:
        assert run.returncode == 1, stderr
        lines = stderr.strip().splitlines()
        assert lines == [
            f"error: 1 of {JOBS} jobs did not succeed (0 failed, 1 killed, 0 unfinished); "
            f"every job's result is in {out} (--accept-failures: exit 0)"
        ]

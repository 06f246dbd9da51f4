"""Fault injection: an NM host killed (SIGKILL) mid-run and restarted at once with the same
node ids, before the RM expires them (issue 16, "NM restart before expiry").

Real processes: ``treadle cluster up`` (detached), ``treadle run`` against it, and the NM
host's own command line (recorded in cluster.json) run again. The restarted host presents
the node tokens it kept in its work dir; the RM takes the registration as a new
incarnation and ends the old one's containers as lost (ABORTED, -100), so their tasks run
again: every job finishes and nothing hangs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from treadle.cluster.procs import read_state, recorded_processes

TREADLE = [sys.executable, "-m", "treadle.cli"]

# Two nodes (one NM host) and two jobs of about 30 emulated s (8 wall s at dilation 4). The
# NM expiry, 10 heartbeats of 2 emulated s, is 5 wall s: room for a Python process to start
# on a loaded machine, so the restart comes before the expiry.
WORKLOAD = """
seed: 3
cluster:
  heartbeat_s: 2.0
  nodes:
    - {count: 2, resources: {vcores: 4, memory_mb: 8192}}
users: {alice: {weight: 1}, bob: {weight: 1}}
jobs:
  - name: a
    user: alice
    submit_s: 0
    stages:
      - {name: map, tasks: 8, duration_s: 12, resources: {vcores: 1, memory_mb: 1024}}
      - {name: reduce, tasks: 2, duration_s: 6, after: [map],
         resources: {vcores: 1, memory_mb: 1024}}
  - name: b
    user: bob
    submit_s: 1
    stages:
      - {name: scan, tasks: 6, duration_s: 14, resources: {vcores: 1, memory_mb: 1024}}
"""
TASKS = 8 + 2 + 6


def _cli(args: list[str], cwd: Path, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(TREADLE + args, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _events(path: Path) -> list[dict[str, object]]:
    with contextlib.suppress(OSError):
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return []


def _wait_for(what: str, cond: object, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_an_nm_host_restarted_before_expiry_reruns_its_lost_tasks(tmp_path: Path) -> None:
    wl = tmp_path / "two.yaml"
    wl.write_text(WORKLOAD)
    cdir = tmp_path / "cluster"
    events = cdir / "rm-events.jsonl"
    up = _cli(
        ["cluster", "up", "--workload", str(wl), "--policy", "fifo", "--dilation", "4",
         "--dir", str(cdir), "--max-restarts", "0"], tmp_path,  # the test restarts it
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    restarted: subprocess.Popen[bytes] | None = None
    run: subprocess.Popen[str] | None = None
    try:
        state = read_state(cdir)
        assert state is not None
        nm = next(p for p in recorded_processes(state) if p.name == "nm-1")
        tokens = cdir / "nm-1" / "node-tokens.json"
        assert oct(tokens.stat().st_mode & 0o777) == "0o600"
        assert set(json.loads(tokens.read_text())) == {"node1", "node2"}
        run = subprocess.Popen(
            [*TREADLE, "run", str(wl), "--rm", up.stdout.strip(), "--cluster-dir", str(cdir),
             "--out", str(tmp_path / "out"), "--no-slowdown"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

        def running() -> bool:
            started = [e for e in _events(events) if e["event"] == "container_started"]
            return len(started) >= 6

        _wait_for("containers to run", running)
        os.killpg(nm.pid, signal.SIGKILL)  # its group: the host and anything it started
        _wait_for(
            "the NM host to die",
            lambda: (
                not Path(f"/proc/{nm.pid}").exists()
                or Path(f"/proc/{nm.pid}/stat").read_text().split(") ")[1][0] in "ZX"
            ),
        )
        killed_at = time.monotonic()
        with open(cdir / "nm-1.restarted.log", "wb") as log:
            restarted = subprocess.Popen(
                nm.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        _stdout, stderr = run.communicate(timeout=60)
        finished_s = time.monotonic() - killed_at
        assert run.returncode == 0, stderr
        assert restarted.poll() is None, "the restarted NM host died"
    finally:
        if run is not None and run.poll() is None:
            run.kill()
            run.communicate()
        if restarted is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(restarted.pid, signal.SIGKILL)
            restarted.wait(10)
        down = _cli(["cluster", "down", "--dir", str(cdir)], tmp_path)
    assert down.returncode == 0, down.stderr
    records = _events(events)
    kinds = [r["event"] for r in records]
    assert "node_lost" not in kinds  # a restart before expiry is not an expiry
    finished = [r for r in records if r["event"] == "container_finished"]
    lost = [r for r in finished if r["state"] == "LOST"]
    assert lost
    assert {r["exit_status"] for r in lost} == {-100}  # ABORTED, as YARN reports them
    done = [r for r in finished if r["state"] == "COMPLETE" and r["exit_status"] == 0]
    assert len(done) == TASKS  # every task ran to the end once ...
    allocated = kinds.count("container_allocated")
    assert allocated >= TASKS + len(lost)  # ... the lost ones again
    assert kinds.count("job_finished") == 2
    print(f"lost {len(lost)} containers, re-ran; run ended {finished_s:.1f} s after the kill")

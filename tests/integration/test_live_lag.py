"""Loud overload: a live run measures its lag, and fails when lag expired its roles.

Real processes through the CLI (``treadle compare --mode local``). The unfaithful case is
a real fault of timing, not a mock: the NM host process is stopped with SIGSTOP for
longer than the NM liveness expiry and resumed with SIGCONT, so its heartbeats come late
while its process runs; the RM expires its nodes, and the run must exit 3 saying so.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from treadle.cluster.procs import STATE_FILE, read_state, recorded_processes

TREADLE = [sys.executable, "-m", "treadle.cli"]
ROLES = {"rm", "nm-1", "am", "driver"}

# Two nodes and two jobs of about 30 emulated s (6 wall s at dilation 5).
WORKLOAD = """
seed: 3
cluster:
  heartbeat_s: 1.0
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


def _compare(wl: Path, out: Path, dilation: float) -> subprocess.Popen[str]:
    argv = [
        "compare", str(wl), "--mode", "local", "--policies", "fifo", "--no-slowdown",
        "--dilation", str(dilation), "--timeout-s", "60", "--out", str(out),
    ]  # fmt: skip
    return subprocess.Popen(
        TREADLE + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _nm_pid(cluster_dir: Path, proc: subprocess.Popen[str], timeout_s: float = 30.0) -> int:
    """The NM host's pid, once the cluster is up (its state file is written)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if (cluster_dir / STATE_FILE).is_file():
            state = read_state(cluster_dir)
            assert state is not None
            return next(p.pid for p in recorded_processes(state) if p.name == "nm-1")
        time.sleep(0.05)
    raise AssertionError("the cluster never came up")


def test_a_stalled_nm_host_makes_the_run_fail_loudly_with_its_lag(tmp_path: Path) -> None:
    wl = tmp_path / "two.yaml"
    wl.write_text(WORKLOAD)
    out = tmp_path / "out"
    proc = _compare(wl, out, dilation=5)
    try:
        pid = _nm_pid(out / "fifo" / "cluster", proc)
        time.sleep(1.5)  # the jobs are running
        os.kill(pid, signal.SIGSTOP)  # 3 wall s = 15 emulated s > the 10 s NM expiry
        try:
            time.sleep(3.0)
        finally:
            os.kill(pid, signal.SIGCONT)
        _stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 3, stderr
    line = stderr.strip().splitlines()[-1]
    # Both nodes of the stalled host expire at least once (under load, a node may expire
    # again before the host catches up: the count is not the point, the verdict is).
    expiries = re.match(r"error: fifo: the emulation at dilation 5 was unfaithful: (\d+) NM ", line)
    assert expiries is not None, line
    assert int(expiries.group(1)) >= 2, line
    assert "caused by lag, not by faults" in line
    assert "timer lateness p99" in line
    assert "RPC queueing p99" in line
    assert "try --dilation" in line
    fidelity = json.loads((out / "fifo" / "timers.json").read_text())
    assert fidelity["faithful"] is False
    assert fidelity["expiries"]["node"] == int(expiries.group(1))
    assert fidelity["expiries"]["faults"] == 0
    # The NM host measured its own stall: a heartbeat timer fired >= 10 emulated s late.
    assert fidelity["processes"]["nm-1"]["timer_late_s"]["max"] >= 10
    assert "**Unfaithful**" in (out / "report.md").read_text()


def test_a_healthy_small_run_exits_0_and_reports_the_lag_of_every_role(tmp_path: Path) -> None:
    wl = tmp_path / "two.yaml"
    wl.write_text(WORKLOAD)
    out = tmp_path / "out"
    proc = _compare(wl, out, dilation=10)
    _stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 0, stderr
    fidelity = json.loads((out / "fifo" / "timers.json").read_text())
    assert fidelity["faithful"] is True
    assert fidelity["expiries"] == {
        "node": 0,
        "am": 0,
        "faults": 0,
        "caused_by_lag": 0,
        "deferred_for_rm_stalls": 0,
    }
    roles = {**fidelity["processes"], "driver": fidelity["driver"]}
    assert set(roles) == ROLES
    for name, lag in roles.items():
        timers = lag["timer_late_s"]
        assert timers["count"] > 0, name
        assert 0 <= timers["p50"] <= timers["p90"] <= timers["p99"] <= timers["max"], name
        assert lag["peak_demand"] >= 0, name
    # The RM and the NM host serve RPCs: how long requests queued is measured there.
    assert roles["rm"]["rpc_queue_s"]["count"] > 100
    assert roles["nm-1"]["rpc_queue_s"]["count"] > 0
    report = (out / "report.md").read_text()
    assert "## Lag and fidelity of the live runs" in report
    for name in ROLES:
        assert f"| {name} | " in report
    assert "Faithful: no expiry was caused or deferred by lag." in report

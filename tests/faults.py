"""The small workload and helpers the kill -9 fault tests share (the RM restart and the
supervision tests, and ``python -m tests.benchmarks faults``): two nodes and six jobs
submitted over 40 emulated s, so that a kill comes while some jobs run, some are done and
some are not yet submitted."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from treadle import events as ev

TREADLE = [sys.executable, "-m", "treadle.cli"]
DILATION = 4.0

WORKLOAD = """
seed: 5
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
      - {name: map, tasks: 6, duration_s: 10, resources: {vcores: 1, memory_mb: 1024}}
      - {name: reduce, tasks: 2, duration_s: 6, after: [map],
         resources: {vcores: 1, memory_mb: 1024}}
  - {name: b, user: bob, submit_s: 1,
     stages: [{name: s, tasks: 4, duration_s: 12, resources: {vcores: 1, memory_mb: 1024}}]}
  - {name: c, user: alice, submit_s: 4,
     stages: [{name: s, tasks: 4, duration_s: 8, resources: {vcores: 1, memory_mb: 1024}}]}
  - {name: d, user: bob, submit_s: 8,
     stages: [{name: s, tasks: 3, duration_s: 10, resources: {vcores: 1, memory_mb: 1024}}]}
  - {name: e, user: alice, submit_s: 30,
     stages: [{name: s, tasks: 3, duration_s: 6, resources: {vcores: 1, memory_mb: 1024}}]}
  - {name: f, user: bob, submit_s: 40,
     stages: [{name: s, tasks: 2, duration_s: 6, resources: {vcores: 1, memory_mb: 1024}}]}
"""
JOBS = 6
TASKS = 6 + 2 + 4 + 4 + 3 + 3 + 2


def cli(args: list[str], cwd: Path, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(TREADLE + args, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def read_events(path: Path) -> list[dict[str, Any]]:
    out = []
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return out


def count(records: list[dict[str, Any]], event: str) -> int:
    return sum(1 for r in records if r["event"] == event)


def mid_run(events: Path) -> Callable[[], bool]:
    """Whether the run is under way: some tasks done, some jobs submitted, some not."""

    def cond() -> bool:
        records = read_events(events)
        return count(records, ev.CONTAINER_FINISHED) >= 4 and count(records, ev.JOB_SUBMITTED) >= 3

    return cond


def tasks_rerun(records: list[dict[str, Any]]) -> int:
    """How many task containers ended beyond one per task: the tasks run again (each
    container once, whatever records its end)."""
    return len({r["container"] for r in records if r["event"] == ev.CONTAINER_FINISHED}) - TASKS


def host_nodes(workdir: Path, host: int) -> set[str]:
    """The node ids a local cluster's NM host ``host`` (1, 2, ...) runs."""
    nodes = json.loads((workdir / f"nodes-{host}.json").read_text())
    return {str(n["node_id"]) for n in nodes}


def busy(events: Path, nodes: set[str]) -> bool:
    """Whether a container runs on one of ``nodes`` (started, not ended): an NM host
    killed then has something at stake."""
    running: set[str] = set()
    for r in read_events(events):
        if r["event"] == ev.CONTAINER_STARTED and r.get("node") in nodes:
            running.add(r["container"])
        elif r["event"] in (ev.CONTAINER_FINISHED, ev.CONTAINER_RELEASED):
            running.discard(r["container"])
    return bool(running)


async def serve_on_store(rm: Any, store_dir: Path) -> tuple[Any, Any, int]:
    """Serve ``rm`` on port 0 with its state in ``store_dir``, restored from it first if it
    holds one, as ``python -m rm --state-dir`` does: (server, RmServer, port)."""
    from rm.server.service import RmSettings, serve
    from rm.server.store import StateStore, restore
    from treadle.live.gate import Gate

    store = StateStore(store_dir)
    stored = store.load()
    settings = RmSettings()
    gate = Gate.open()
    if not stored.empty:
        settings.epoch = restore(stored, rm, gate, settings.dilation)
    server, state, port = await serve(rm, settings, "127.0.0.1:0", gate, store=store)
    return server, state, port

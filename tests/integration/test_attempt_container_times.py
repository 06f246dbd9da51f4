"""An attempt's containers (``GET /ws/v1/cluster/apps/{id}/appattempts/{attempt}/containers``)
on a live local cluster (``treadle_cluster``'s factory, simple mode): each running
container reports when the RM allocated it (YARN's ContainerInfo ``startedTime``, ms),
not finished (``finishedTime`` 0), and how long it has run (``elapsedTime``), which grows
while it runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import requests

from treadle.testing.cluster import ClusterFactory

WS = "/ws/v1/cluster"
WORKLOAD = """
cluster:
  nodes: [{count: 1, resources: {vcores: 2, memory_mb: 4096}}]
jobs:
  - {name: long, user: alice, submit_s: 0,
     stages: [{name: s, tasks: 2, duration_s: 600, resources: {vcores: 1, memory_mb: 512}}]}
"""


def get(url: str, path: str) -> Any:
    r = requests.get(url + WS + path, params={"user.name": "alice"}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def test_running_containers_report_when_they_were_allocated_and_how_long_they_ran(
    tmp_path: Path,
) -> None:
    factory = ClusterFactory(tmp_path)
    try:
        cluster = factory(WORKLOAD, "fifo", secure=False, dilation=10.0)
        url = cluster.rest_url
        cluster.submit()
        deadline = time.monotonic() + 60
        while True:
            apps = (get(url, "/apps")["apps"] or {}).get("app", [])
            if apps and apps[0]["runningContainers"] >= 2:
                break
            assert time.monotonic() < deadline, apps
            time.sleep(0.2)
        app = apps[0]
        attempts = get(url, f"/apps/{app['id']}/appattempts")["appAttempts"]["appAttempt"]
        path = f"/apps/{app['id']}/appattempts/{attempts[-1]['appAttemptId']}/containers"
        before_ms = time.time() * 1000
        first = get(url, path)["container"]
        assert len(first) >= 2, first  # its two tasks' (and its AM's, if managed)
        for c in first:
            assert app["startedTime"] <= c["startedTime"] <= before_ms + 1000, c
            assert c["finishedTime"] == 0
            # Running for the wall time since its allocation (ms), within the clock's step.
            assert abs(c["elapsedTime"] - (before_ms - c["startedTime"])) < 1000, c
        time.sleep(0.5)
        again = {c["containerId"]: c for c in get(url, path)["container"]}
        for c in first:
            later = again[c["containerId"]]
            assert later["startedTime"] == c["startedTime"]
            assert later["elapsedTime"] >= c["elapsedTime"] + 400
    finally:
        factory.close()

"""Every id treadle shows is one of YARN's (``treadle.yarnids``), checked against the shapes
Hadoop's records write: in the REST answers of a live cluster's RM, in the event logs of
a live and a simulated run, and in ``treadle sim``'s jobs.csv, whose jobs are in id
number order (``_9999`` before ``_10000``) and the same bytes run after run."""

from __future__ import annotations

import csv
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import requests

from treadle.events import read_jsonl
from treadle.yarnids import (
    APP_ID_SHAPE,
    ATTEMPT_ID_SHAPE,
    CONTAINER_ID_SHAPE,
    NODE_ID_SHAPE,
    SIM_CLUSTER_TIMESTAMP,
    app_sort_key,
    parse_app_id,
    parse_container_id,
)

TREADLE = [sys.executable, "-m", "treadle.cli"]
WS = "/ws/v1/cluster"
#: The REST fields that hold a NodeId (YARN's NodeInfo, AppInfo, AppAttemptInfo, ContainerInfo).
NODE_ID_FIELDS = {"nodeId", "assignedNodeId", "masterNodeId", "amHostHttpAddress"}
LIVE = """
cluster:
  nodes: [{count: 2, resources: {vcores: 2, memory_mb: 4096}}]
jobs:
  - {name: long, user: u, submit_s: 0,
     stages: [{name: s, tasks: 2, duration_s: 40, resources: {vcores: 1, memory_mb: 512}}]}
  - {name: short, user: u, submit_s: 1,
     stages: [{name: s, tasks: 2, duration_s: 5, resources: {vcores: 1, memory_mb: 512}}]}
"""


def check_id(text: str, key: str = "") -> str:
    """The kind of id ``text`` is ("" for none), after checking it has YARN's shape."""
    for prefix, shape in (("application_", APP_ID_SHAPE), ("appattempt_", ATTEMPT_ID_SHAPE),
                          ("container_", CONTAINER_ID_SHAPE)):  # fmt: skip
        if text.startswith(prefix):
            assert shape.fullmatch(text), f"{key}: {text!r} is not of YARN's {prefix} shape"
            if prefix == "container_":
                parse_container_id(text)  # ContainerId.fromString reads it
            return prefix.rstrip("_")
    if key in NODE_ID_FIELDS and text:
        assert NODE_ID_SHAPE.fullmatch(text), f"{key}: {text!r} is not a NodeId (host:port)"
        return "node"
    return ""


def ids_in(value: Any, key: str = "") -> Counter[str]:
    """Every id in a JSON answer, by kind (each checked)."""
    out: Counter[str] = Counter()
    if isinstance(value, dict):
        for k, v in value.items():
            out += ids_in(v, k)
    elif isinstance(value, list):
        for v in value:
            out += ids_in(v, key)
    elif isinstance(value, str):
        kind = check_id(value, key)
        if kind:
            out[kind] += 1
    return out


def _wait(cond: Callable[[], Any], what: str, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (got := cond()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return got


def _rest_answers(url: str) -> Iterator[Any]:
    """Every GET of the REST API while an application runs containers."""
    get: Callable[[str], Any] = lambda path: requests.get(f"{url}{WS}{path}", timeout=10).json()  # noqa: E731

    def running() -> list[dict[str, Any]]:
        apps = (get("/apps")["apps"] or {}).get("app", [])
        return [a for a in apps if a["runningContainers"] > 0]

    (app, *_) = _wait(running, "an application running containers")
    for path in ("/info", "/metrics", "/apps", "/scheduler"):
        yield get(path)
    yield get(f"/apps/{app['id']}")
    attempts = get(f"/apps/{app['id']}/appattempts")
    yield attempts
    attempt = attempts["appAttempts"]["appAttempt"][-1]["appAttemptId"]
    containers = get(f"/apps/{app['id']}/appattempts/{attempt}/containers")
    assert containers["container"], containers
    yield containers
    nodes = get("/nodes")
    yield nodes
    for n in nodes["nodes"]["node"]:
        assert NODE_ID_SHAPE.fullmatch(n["id"]), n["id"]
        yield get(f"/nodes/{n['id']}")
    info = get("/info")["clusterInfo"]
    assert parse_app_id(app["id"]).cluster_ts == info["id"] == app["clusterId"]


def test_a_live_clusters_rest_answers_and_event_log_carry_yarns_ids(treadle_cluster: Any) -> None:
    cluster = treadle_cluster(LIVE, policy="fifo", dilation=10, secure=False)
    run = cluster.submit()
    seen: Counter[str] = Counter()
    for answer in _rest_answers(cluster.rest_url):
        seen += ids_in(answer)
    assert {"application", "appattempt", "container", "node"} <= set(seen), seen
    results = run.wait()
    assert results.finished == 2
    logged = Counter(check_id(str(r[k]), k) for r in results.records
                     for k in ("job", "container") if k in r)  # fmt: skip
    assert logged["application"] > 0
    assert logged["container"] > 0
    assert "" not in logged, logged  # every job and container field is an id
    jobs = [j.job for j in results.jobs]
    assert all(APP_ID_SHAPE.fullmatch(j) for j in jobs), jobs
    # A live RM's cluster timestamp is its start, in ms: not the simulator's.
    assert parse_app_id(jobs[0]).cluster_ts > SIM_CLUSTER_TIMESTAMP


def _sim(workload: str, out: Path) -> None:
    args = ["sim", workload, "--policy", "fifo", "--out", str(out), "--events", "jsonl"]
    proc = subprocess.run([*TREADLE, *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr


def test_treadle_sims_outputs_carry_yarns_ids_in_number_order(tmp_path: Path) -> None:
    """10001 jobs submitted at once: jobs.csv lists them by id number (ties of submission
    time broken so), each id of the simulator's fixed timestamp."""
    job = "stages: [{name: s, tasks: 1, duration_s: 1, resources: {vcores: 1, memory_mb: 512}}]"
    lines = [f"  - {{name: j{i}, user: u, submit_s: 0, {job}}}" for i in range(10001)]
    many = tmp_path / "many.yaml"
    many.write_text("cluster:\n  nodes: [{count: 50, resources: {vcores: 64, memory_mb: 65536}}]\n"
                    "jobs:\n" + "\n".join(lines) + "\n")  # fmt: skip
    _sim(str(many), tmp_path / "out")
    with open(tmp_path / "out" / "jobs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    ids = [r["job"] for r in rows]
    assert ids == [f"application_{SIM_CLUSTER_TIMESTAMP}_{n:04d}" for n in range(1, 10002)]
    assert ids == sorted(ids, key=app_sort_key) != sorted(ids)
    assert [r["name"] for r in rows[9998:]] == ["j9998", "j9999", "j10000"]
    kinds = Counter(check_id(str(r[k]), k) for r in read_jsonl(tmp_path / "out" / "events.jsonl")
                    for k in ("job", "container") if k in r)  # fmt: skip
    assert set(kinds) == {"application", "container"}, kinds
    assert kinds["container"] == 3 * 10001  # allocated, started, finished


def test_two_sims_of_the_same_input_write_the_same_bytes(tmp_path: Path) -> None:
    for out in ("a", "b"):
        _sim("dags", tmp_path / out)
    for name in ("events.jsonl", "summary.json", "jobs.csv", "jobs.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name

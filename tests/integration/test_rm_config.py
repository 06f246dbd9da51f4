"""The RM's configuration file: ``python -m rm --config FILE`` (queues, users, heartbeat).

A good file configures a real RM process (its leaf queues take applications, the others
are refused, its heartbeat is the one announced); a bad one makes it exit at once with
one line naming the file and the field; what clusters write for their RM reads back.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from rm.server.config import parse_rm_config
from treadle.cluster.config import rm_config_for
from treadle.errors import InputError
from treadle.live import wire
from treadle.live.rpcutil import channel
from treadle.model import DEFAULT_QUEUE, ROOT_QUEUE, JobSpec, StageSpec
from treadle.resources import Resources
from treadle.rpc.v1 import client_pb2 as client_pb, client_pb2_grpc as client_grpc
from treadle.workload import load_workload

GOOD = """
heartbeat_s: 2.5
queues:
  - {name: etl, weight: 2, capacity: 60}
  - name: adhoc
    capacity: 40
    queues:
      - {name: small, max_capacity: 50}
      - {name: large}
users:
  alice: {weight: 1, budget: 100}
  bob: {weight: 3}
"""


def test_a_good_file_gives_the_queue_tree_users_and_heartbeat() -> None:
    config = parse_rm_config(GOOD, "rm.yaml")
    assert config.heartbeat_s == 2.5
    root = config.queues
    assert root.name == ROOT_QUEUE
    assert [q.name for q in root.children] == ["etl", "adhoc"]
    etl, adhoc = root.children
    assert (etl.weight, etl.capacity, etl.max_capacity, etl.is_leaf) == (2, 60, 100, True)
    assert [(q.name, q.max_capacity) for q in adhoc.children] == [("small", 50), ("large", 100)]
    assert {n: (u.weight, u.budget) for n, u in config.users.items()} == {
        "alice": (1, 100),
        "bob": (3, None),
    }


def test_an_empty_mapping_is_one_default_queue_and_no_users() -> None:
    config = parse_rm_config("{}\n", "rm.yaml")
    assert [q.name for q in config.queues.walk()] == [ROOT_QUEUE, DEFAULT_QUEUE]
    assert dict(config.users) == {}
    assert config.heartbeat_s is None


def test_what_a_cluster_writes_for_its_rm_reads_back_as_the_workload_s() -> None:
    wl = load_workload("demo")
    config = parse_rm_config(rm_config_for(wl, "demo"), "rm.yaml")
    assert config.queues == wl.queues
    assert dict(config.users) == dict(wl.users)
    assert config.heartbeat_s == wl.cluster.heartbeat_s


BAD = [
    ("unknown key", "queus: []\n", "queus", "did you mean 'queues'"),
    ("a workload file", "cluster: {nodes: []}\njobs: []\n", "cluster", "not a workload"),
    ("bad yaml", "queues: [ {name: a\n", "line", "invalid YAML"),
    ("duplicate key", "users: {}\nusers: {}\n", "line", "duplicate key 'users'"),
    ("empty", "", "rm.yaml", "empty"),
    ("not a mapping", "- a\n", "rm.yaml", "mapping"),
    ("heartbeat", "heartbeat_s: 0\n", "heartbeat_s", "greater than 0"),
    ("quoted number", "heartbeat_s: '1'\n", "heartbeat_s", "number"),
    ("queue field", "queues: [{name: a, wieght: 2}]\n", "queues[0].wieght", "'weight'"),
    ("capacity", "queues: [{name: a, capacity: 120}]\n", "queues[0].capacity", "100"),
    ("no queues", "queues: []\n", "queues", "at least 1"),
    ("sum", "queues: [{name: a, capacity: 60}, {name: b, capacity: 60}]\n", "queues", "120%"),
    ("duplicate queue", "queues: [{name: a}, {name: a}]\n", "queues[1].name", "duplicate"),
    ("root", "queues: [{name: root}]\n", "queues[0]", "the root needs its queues"),
    (
        "child over max",
        "queues: [{name: a, queues: [{name: b, capacity: 60, max_capacity: 50}]}]\n",
        "queues[0].queues[0].capacity",
        "exceeds max_capacity",
    ),
    ("user weight", "users: {alice: {weight: -1}}\n", "users.alice.weight", "greater than 0"),
    ("user field", "users: {alice: {budgte: 1}}\n", "users.alice.budgte", "'budget'"),
    ("user name", "users: {'al ice': {}}\n", "users", "name"),
]


@pytest.mark.parametrize(("case", "text", "field", "fragment"), BAD, ids=[c[0] for c in BAD])
def test_a_bad_file_is_one_error_naming_file_and_field(
    case: str, text: str, field: str, fragment: str
) -> None:
    with pytest.raises(InputError) as err:
        parse_rm_config(text, "rm.yaml")
    message = str(err.value)
    assert message.startswith("rm.yaml"), message
    assert "\n" not in message
    assert field in message, message
    assert fragment in message, message


# --------------------------------------------------------------------------------------
# On a real `python -m rm`


def _rm(config: Path, tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rm", "--policy", "fifo", "--config", str(config),
         "--port-file", str(tmp_path / "rm.port"), "--log-level", "warning", "--insecure",
         *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.fixture
def rm_process(tmp_path: Path) -> Iterator[str]:
    config = tmp_path / "rm.yaml"
    config.write_text(GOOD)
    proc = _rm(config, tmp_path)
    try:
        port_file = tmp_path / "rm.port"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the RM wrote no port file"
            time.sleep(0.05)
        yield port_file.read_text().strip()
    finally:
        proc.terminate()
        proc.communicate(timeout=10)  # and close the pipe


def test_a_good_file_configures_a_real_rm_process(rm_process: str) -> None:
    one = StageSpec("s", Resources.parse({"vcores": 1, "memory_mb": 512}, "s"), (1.0,))

    async def scenario() -> tuple[float, dict[str, str]]:
        async with channel(rm_process) as ch:
            stub: Any = client_grpc.ClientStub(ch)
            m = await stub.GetClusterMetrics(client_pb.GetClusterMetricsRequest(), timeout=5)
            answers = {}
            for queue in ("etl", "small", "adhoc", "default"):
                job = JobSpec(f"job-{queue}", "alice", 0.0, (one,), queue)
                request = client_pb.SubmitApplicationRequest(
                    user="alice", queue=queue, job=wire.job_to_pb(job)
                )
                try:
                    await stub.SubmitApplication(request, timeout=5)
                    answers[queue] = "accepted"
                except grpc.aio.AioRpcError as e:
                    answers[queue] = f"{e.code().name}: {e.details()}"
            return m.heartbeat_interval_s, answers

    heartbeat, answers = asyncio.run(scenario())
    assert heartbeat == 2.5  # from the file (no --heartbeat-s)
    assert answers["etl"] == answers["small"] == "accepted"
    assert answers["adhoc"].startswith("INVALID_ARGUMENT"), answers  # has child queues
    assert "leaf" in answers["adhoc"]
    assert answers["default"].startswith("INVALID_ARGUMENT"), answers  # not configured
    assert "unknown queue" in answers["default"]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("queues: [{name: etl, capacity: 60}, {name: adhoc, capacity: 60}]\n", "queues"),
        ("users: {alice: {weight: heavy}}\n", "users.alice.weight"),
    ],
)
def test_a_bad_file_makes_the_rm_exit_with_one_line(tmp_path: Path, text: str, field: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    proc = _rm(config, tmp_path)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"python -m rm: error: {config}: {field}: "), lines[0]
    assert not (tmp_path / "rm.port").exists()

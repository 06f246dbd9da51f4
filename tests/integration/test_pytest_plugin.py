"""treadle's pytest plugin (treadle.testing): declared as a ``pytest11`` entry point, light
to import, its clusters' processes all stopped after a test that fails mid-way, and two
cluster tests under ``pytest -n 2`` run side by side without sharing a port or a file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import pytest

from tests.inner_pytest import PLUGIN, run_pytest
from treadle.cluster.procs import pid_alive

ROOT = Path(__file__).resolve().parents[2]

WORKLOAD = '''
WORKLOAD = """
cluster:
  nodes: [{count: 1, resources: {vcores: 2, memory_mb: 4096}}]
jobs:
  - {name: first, user: u, submit_s: 0,
     stages: [{name: s, tasks: 4, duration_s: 10, resources: {vcores: 1, memory_mb: 512}}]}
  - {name: second, user: u, submit_s: 1,
     stages: [{name: s, tasks: 4, duration_s: 10, resources: {vcores: 1, memory_mb: 512}}]}
"""
'''


def test_the_plugin_is_shipped_as_a_pytest11_entry_point() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["pytest11"] == {"treadle": PLUGIN}
    assert "treadle.testing" in project["tool"]["setuptools"]["packages"]


def test_loading_the_plugin_imports_nothing_heavy() -> None:
    """Every pytest session of anyone with treadle installed imports it."""
    probe = "import sys, treadle.testing.plugin; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.split()  # fmt: skip
    ours = {m for m in out if m.split(".")[0] in {"treadle", "rm", "am", "nm", "plugins"}}
    assert ours == {"treadle", "treadle.testing", PLUGIN}
    heavy = {"grpc", "numpy", "pyarrow", "pydantic", "aiohttp", "matplotlib", "requests"}
    assert not heavy & {m.split(".")[0] for m in out}


def _recorded(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _still_alive(processes: dict[str, list[int]], timeout_s: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [n for n, (pid, started) in processes.items() if pid_alive(pid, started)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


RECORD = """
import json, os

def record(cluster, **more):
    row = dict(
        worker=os.environ.get("PYTEST_XDIST_WORKER", "main"),
        rm=cluster.rm_address, rest=cluster.rest_url, workdir=str(cluster.workdir),
        processes={n: [p.pid, p.started] for n, p in cluster.processes.items()}, **more,
    )
    with open(os.environ["RECORD_FILE"], "a") as f:
        f.write(json.dumps(row) + "\\n")
"""


def test_a_test_failing_mid_way_leaves_no_process_behind(tmp_path: Path) -> None:
    """Inner tests start clusters, submit a workload and fail while it runs (by an
    assertion, by an exception): every process they started, recorded by pid and start
    time, is gone by the next test of that session, and after it."""
    (tmp_path / "test_fails.py").write_text(WORKLOAD + RECORD + textwrap.dedent('''
        def test_fails_while_a_replay_runs(treadle_cluster):
            secure = treadle_cluster(WORKLOAD, dilation=20)
            simple = treadle_cluster(WORKLOAD, dilation=20, secure=False)
            record(secure)
            record(simple)
            secure.submit()
            simple.submit()
            assert secure.rm_address == simple.rm_address, "fails on purpose"

        def test_raises_while_a_replay_runs(treadle_cluster):
            cluster = treadle_cluster(WORKLOAD, dilation=20)
            record(cluster)
            cluster.submit()
            raise RuntimeError("the test's own bug")

        def test_then_in_the_same_session_every_process_is_gone():
            # Checked before this session exits (its exit handlers would stop them too).
            from treadle.cluster.procs import pid_alive

            rows = [json.loads(line) for line in open(os.environ["RECORD_FILE"])]
            assert len(rows) == 3
            for row in rows:
                assert not [n for n, p in row["processes"].items() if pid_alive(*p)], row
    '''))  # fmt: skip
    record_file = tmp_path / "record.jsonl"
    env = dict(os.environ, RECORD_FILE=str(record_file))
    inner = run_pytest(["-q", "test_fails.py"], tmp_path, env)
    assert inner.returncode == 1, inner.stdout + inner.stderr
    assert "2 failed, 1 passed" in inner.stdout, inner.stdout
    assert "fails on purpose" in inner.stdout
    rows = _recorded(record_file)
    assert len(rows) == 3
    for row in rows:
        processes = row["processes"]
        assert isinstance(processes, dict)
        assert set(processes) == {"rm", "nm-1", "am"}
        assert _still_alive(processes) == [], row


def test_two_cluster_tests_in_parallel_do_not_collide(tmp_path: Path) -> None:
    """Under ``pytest -n 2`` each test runs a cluster and waits for the other's to be up
    before it replays its workload: both pass, on distinct workers, ports and directories."""
    (tmp_path / "test_pair.py").write_text(WORKLOAD + RECORD + textwrap.dedent('''
        import pathlib, time

        def _together(cluster, me, other):
            shared = pathlib.Path(os.environ["RECORD_FILE"]).parent
            (shared / me).write_text(cluster.rm_address)
            deadline = time.monotonic() + 120
            while not (shared / other).exists():
                assert time.monotonic() < deadline, f"the {other} test never started its cluster"
                time.sleep(0.05)
            results = cluster.run()
            assert results.finish_order() == ["first", "second"]
            record(cluster, finished=results.finished)

        def test_one(treadle_cluster):
            _together(treadle_cluster(WORKLOAD, dilation=20), "one", "two")

        def test_two(treadle_cluster):
            _together(treadle_cluster(WORKLOAD, dilation=20, secure=False), "two", "one")
    '''))  # fmt: skip
    record_file = tmp_path / "record.jsonl"
    env = dict(os.environ, RECORD_FILE=str(record_file))
    inner = run_pytest(["-q", "-n", "2", "test_pair.py"], tmp_path, env)
    assert inner.returncode == 0, inner.stdout + inner.stderr
    assert "2 passed" in inner.stdout
    rows = _recorded(record_file)
    assert [r["finished"] for r in rows] == [2, 2]
    for key in ("worker", "rm", "rest", "workdir"):
        assert len({r[key] for r in rows}) == 2, (key, rows)
    one, two = ({pid for pid, _ in r["processes"].values()} for r in rows)
    assert not one & two


@pytest.mark.parametrize("secure", [True, False])
def test_a_cluster_serves_its_rest_api_to_its_credentials(secure: bool, tmp_path: Path) -> None:
    """Secure: unsigned REST reads are refused, signed ones see the run; simple: anyone."""
    (tmp_path / "test_rest.py").write_text(WORKLOAD + textwrap.dedent(f'''
        import requests
        from rm.server.http_auth import SignedAuth

        def test_rest(treadle_cluster):
            cluster = treadle_cluster(WORKLOAD, policy="fair", dilation=20, secure={secure})
            assert cluster.run().finished == 2
            url = cluster.rest_url + "/ws/v1/cluster/apps"
            auth = SignedAuth(cluster.credentials) if cluster.credentials else None
            apps = requests.get(url, auth=auth, timeout=10).json()
            assert sorted(a["name"] for a in apps["apps"]["app"]) == ["first", "second"]
            assert {{a["finalStatus"] for a in apps["apps"]["app"]}} == {{"SUCCEEDED"}}
            unsigned = requests.get(url, timeout=10).status_code
            assert unsigned == (401 if {secure} else 200)
            assert (cluster.credentials is not None) == {secure}
    '''))  # fmt: skip
    inner = run_pytest(["-q", "test_rest.py"], tmp_path)
    assert inner.returncode == 0, inner.stdout + inner.stderr

"""The ``dp`` policy end to end: ``treadle sim`` with a YAML workload writes the books of
every allocation interval and every preemption as typed Parquet columns; and the same
workload on a local cluster of real processes preempts over gRPC, with the AMs running
the preempted tasks again."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from treadle import events as ev
from treadle.event_columns import read_events

# alice fills the 8 slots; bob arrives at 2 s. Equal rates (the default 1) and budgets:
# the tick at 5 s gives each a quota of 4, and the kill check takes 4 of alice's back.
WORKLOAD = """
seed: 1
cluster:
  heartbeat_s: 1.0
  nodes:
    - {count: 2, resources: {vcores: 4, memory_mb: 8192}}
queues:
  - {name: alice}
  - {name: bob}
users:
  alice: {budget: 1000}
  bob: {budget: 1000}
jobs:
  - name: a
    user: alice
    queue: alice
    submit_s: 0
    stages:
      - {name: map, tasks: 16, duration_s: 30, resources: {vcores: 1, memory_mb: 1024}}
  - name: b
    user: bob
    queue: bob
    submit_s: 2
    stages:
      - {name: map, tasks: 8, duration_s: 10, resources: {vcores: 1, memory_mb: 1024}}
"""
TASKS = 24
PARAMS = ["--set", "interval_s=5", "--set", "kill_interval_s=5"]


def _check(records: list[ev.Record]) -> None:
    assert all(ev.check_record(r) is None for r in records)
    pre = [r for r in records if r["event"] == ev.CONTAINER_PREEMPTED]
    assert pre
    assert {r["queue"] for r in pre} == {"alice"}
    ends = Counter(r["state"] for r in records if r["event"] == ev.CONTAINER_FINISHED)
    assert ends["PREEMPTED"] == len(pre)
    assert ends["COMPLETE"] == TASKS  # every task, the preempted ones run again
    assert not [r for r in records if r["event"] == ev.ATTEMPT_FAILED]
    assert len([r for r in records if r["event"] == ev.JOB_FINISHED]) == 2
    books = [r for r in records if r["event"] == ev.DP_ACCOUNT]
    assert {r["queue"] for r in books} == {"alice", "bob"}
    spent = {q: sum(r["charged"] for r in books if r["queue"] == q) for q in ("alice", "bob")}
    last = {r["queue"]: r["budget"] for r in books}
    assert all(spent[q] > 0 and last[q] == pytest.approx(1000 - spent[q]) for q in spent)


def test_sim_writes_the_books_and_the_preemptions_as_typed_columns(tmp_path: Path) -> None:
    wl = tmp_path / "dp.yaml"
    wl.write_text(WORKLOAD)
    out = tmp_path / "out"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "treadle.cli",
            "sim",
            str(wl),
            "--policy",
            "dp",
            *PARAMS,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    schema = pq.read_schema(out / "events.parquet")
    for name, type_ in (("price", "double"), ("charged", "double"), ("pending", "int64")):
        assert str(schema.field(name).type) == type_
    _check(read_events(out / "events.parquet"))


def test_a_bad_dp_parameter_is_one_line(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "treadle.cli",
            "sim",
            "tiny",
            "--policy",
            "dp",
            "--set",
            "kill_interval_s=-1",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0
    assert "kill_interval_s" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_local_cluster_preempts_over_grpc_and_the_tasks_run_again(tmp_path: Path) -> None:
    from treadle.study.compare import compare, make_backend
    from treadle.study.runner import PolicyChoice
    from treadle.workload import parse_workload

    wl = parse_workload(WORKLOAD, "dp.yaml")
    backend = make_backend("local", wl, dilation=20.0)
    params = {"interval_s": 5, "kill_interval_s": 5}
    result = compare(wl, [PolicyChoice("dp", params)], tmp_path / "out", backend)
    assert result.runs["dp"].summary["finished"] == 2
    _check(result.results["dp"].records())

"""Streamed traces through the command line: a malformed line at 90% of a CSV trace
stops the run there with one error line naming the file, the line and the field, a
non-zero exit and results marked partial; a streamed run writes exactly what the whole
workload's run writes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.treadle_cli import treadle as run_treadle
from treadle.model import in_memory
from treadle.study.runner import PolicyChoice, RunOptions, run_sim
from treadle.workload import load_workload

ROOT = Path(__file__).resolve().parents[2]
PODS = 400
BAD = int(PODS * 0.9)  # the pod whose row is malformed
HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)


def pod_list(folder: Path, bad: int | None = None) -> Path:
    """An Alibaba 2023 pod list of ``PODS`` pods in creation order (four QoS classes, a
    few never scheduled) and its node list; pod ``bad``'s cpu_milli is not a number."""
    nodes = folder / "openb_node_list_all_node.csv"
    rows = ["sn,cpu_milli,memory_mib,gpu,model"]
    rows += [f"node{i},32000,131072,{i % 3},V100" for i in range(8)]
    nodes.write_text("\n".join(rows) + "\n", encoding="utf-8")
    lines = [HEADER]
    for i in range(PODS):
        cpu = "x" if i == bad else str(1000 + 500 * (i % 7))
        gpus, milli = (1, 460) if i % 5 == 0 else (0, 0)
        qos = ("LS", "BE", "Burstable", "Guaranteed")[i % 4]
        created = 60 * i
        scheduled = "" if i % 17 == 3 else str(created + 5)
        deleted = created + 5 + 600 + 37 * (i % 11)
        lines.append(
            f"pod-{i:04d},{cpu},{2048 * (1 + i % 4)},{gpus},{milli},,{qos},Succeeded,"
            f"{created},{deleted},{scheduled}"
        )
    pods = folder / "pods.csv"
    pods.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return pods


def treadle(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """In ``cwd``, with nothing of this machine's environment but the checkout and PATH."""
    return run_treadle(*args, cwd=cwd, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_a_malformed_line_late_in_a_csv_trace_stops_the_run_with_partial_results(
    tmp_path: Path,
) -> None:
    pods = pod_list(tmp_path, bad=BAD)
    line = BAD + 2  # the header is line 1
    run = treadle("sim", str(pods), "--policy", "drf", "--out", "out", cwd=tmp_path)
    assert run.returncode != 0
    errors = run.stderr.strip().splitlines()
    assert len(errors) == 1, run.stderr
    assert errors[0].startswith(
        f"error: {pods}: line {line}.cpu_milli: expected a number, got 'x' (found during "
        "the run, after "
    )
    assert errors[0].endswith("the run stopped there and its results are marked partial)")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    partial = summary["partial"]
    assert partial["reason"] == f"{pods}: line {line}.cpu_milli: expected a number, got 'x'"
    assert 0 < partial["jobs_run"] < BAD
    assert f"after {partial['jobs_run']} job(s) were submitted" in errors[0]
    rows = (tmp_path / "out" / "jobs.csv").read_text().splitlines()
    assert len(rows) - 1 == partial["jobs_run"]  # the header, then one row per job run
    # validate reads the list whole: the same error, before anything runs.
    check = treadle("validate", str(pods), cwd=tmp_path)
    assert check.returncode != 0
    assert (
        check.stderr.strip() == f"error: {pods}: line {line}.cpu_milli: expected a number, got 'x'"
    )


def test_a_streamed_run_writes_what_the_whole_workload_writes(tmp_path: Path) -> None:
    pods = pod_list(tmp_path)
    streamed = load_workload(str(pods), stream=True)
    assert streamed.source is not None
    whole = load_workload(str(pods))
    assert whole.source is None
    assert [repr(j) for j in in_memory(streamed).jobs] == [repr(j) for j in whole.jobs]
    options = RunOptions(alone_cache=False)
    for name, wl in (("streamed", streamed), ("whole", whole)):
        run_sim(wl, PolicyChoice("drf", {}), tmp_path / name, options=options)
    for f in ("jobs.csv", "summary.json", "events.parquet", "jobs.parquet"):
        a, b = (tmp_path / d / f for d in ("streamed", "whole"))
        assert a.read_bytes() == b.read_bytes(), f

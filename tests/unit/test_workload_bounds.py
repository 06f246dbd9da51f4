"""Out-of-range workload input: one line naming the file and the field, quickly, with
nothing large allocated first (the cases an operator tried: issue 16, "Inputs")."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from treadle.errors import WorkloadError
from treadle.workload import load_workload

CLUSTER = "cluster: {nodes: [{count: 2, resources: {vcores: 4, memory_mb: 4096}}]}\n"
STAGE = "{name: s, tasks: 1, duration_s: 1, resources: {vcores: 1}}"


def job(stage: str = STAGE, extra: str = "") -> str:
    return f"jobs: [{{name: a, user: u, submit_s: 0{extra}, stages: [{stage}]}}]\n"


def refused(tmp_path: Path, text: str, name: str = "w.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    start = time.process_time()
    with pytest.raises(WorkloadError) as e:
        load_workload(str(path))
    assert time.process_time() - start < 5  # no hang, nothing huge built
    line = str(e.value)
    assert "\n" not in line
    assert line.startswith(str(path))
    return line


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        (CLUSTER + job(STAGE.replace("tasks: 1", "tasks: 1e20")), "tasks", "integer"),
        (CLUSTER + job(STAGE.replace("tasks: 1", "tasks: 2000000")), "tasks", "1000000"),
        (CLUSTER + job(STAGE.replace("duration_s: 1", "duration_s: 1e308")), "duration_s", "1e"),
        (CLUSTER + job(extra=", submit_s: 1e300").replace("submit_s: 0, ", ""), "submit_s", ""),
        (CLUSTER.replace("count: 2", "count: 100000000") + job(), "count", "100000"),
        (
            CLUSTER.replace("nodes: [", "heartbeat_s: 1e-6, nodes: [") + job(),
            "heartbeat_s",
            "0.001",
        ),
        (
            CLUSTER + "generators: [{kind: poisson, user: u, rate_per_min: 1, "
            f"count: 1000000000000, job: {{stages: [{STAGE}]}}}}]\n",
            "generators[0].count",
            "1000000",
        ),
        ("a: " + "[" * 100_000 + "]" * 100_000 + "\n", "", "nested too deeply"),
    ],
    ids=[
        "tasks-1e20",
        "tasks-2e6",
        "duration-1e308",
        "submit-1e300",
        "nodes-1e8",
        "hb-1e-6",
        "generator-1e12",
        "deep-yaml",
    ],
)
def test_out_of_range_input_is_one_line_naming_the_field(
    tmp_path: Path, text: str, field: str, words: str
) -> None:
    line = refused(tmp_path, text)
    assert field in line
    assert words in line


def test_1e3_is_a_number(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text(
        CLUSTER + job(STAGE.replace("duration_s: 1", "duration_s: 1e3"))
    )
    wl = load_workload(str(tmp_path / "w.yaml"))
    assert wl.jobs[0].stages[0].durations == (1000.0,)


def test_total_nodes_are_bounded_across_groups(tmp_path: Path) -> None:
    groups = ", ".join(["{count: 60000, resources: {vcores: 4}}"] * 2)
    line = refused(tmp_path, f"cluster: {{nodes: [{groups}]}}\n" + job())
    assert "cluster.nodes" in line
    assert "120000 nodes" in line


def test_total_tasks_are_bounded_before_they_are_built(tmp_path: Path) -> None:
    stage = STAGE.replace("tasks: 1", "tasks: 1000000")
    jobs = (
        "jobs: ["
        + ", ".join(f"{{name: j{i}, user: u, stages: [{stage}]}}" for i in range(21))
        + "]\n"
    )
    line = refused(tmp_path, CLUSTER + jobs)
    assert "jobs[20].stages[0].tasks" in line
    assert "20000000" in line


def test_a_directory_is_not_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="is a directory"):
        load_workload(str(tmp_path))


def test_deeply_nested_json_trace(tmp_path: Path) -> None:
    line = refused(tmp_path, "[" * 100_000 + "]" * 100_000, name="trace.json")
    assert "nested too deeply" in line

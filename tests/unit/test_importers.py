"""SLS and Rumen importers, against Hadoop's own sample traces and small malformed fixtures.

The samples are read in place from the shared trace directory (never copied here):
``sls/inputsls.json``, ``sls/sls_dag.json``, ``sls/nodes.json``,
``sls/nodes-with-resources.json`` and ``sls/2jobs2min-rumen-jh.json`` (apache/hadoop,
hadoop-tools/hadoop-sls, Apache-2.0).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from treadle.errors import WorkloadError
from treadle.importers import load_trace, sniff_format
from treadle.importers.rumen import load_rumen, read_rumen
from treadle.importers.sls import load_sls, read_nodes_file
from treadle.resources import Resources
from treadle.workload import load_workload

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces" / "sls"
INPUT_SLS = TRACES / "inputsls.json"
SLS_DAG = TRACES / "sls_dag.json"
NODES = TRACES / "nodes.json"
NODES_WITH_RESOURCES = TRACES / "nodes-with-resources.json"
RUMEN = TRACES / "2jobs2min-rumen-jh.json"
# CI has ../shared beside the checkout; a checkout alone skips the tests on the samples.
needs_samples = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"{TRACES} is absent (../shared is not beside the checkout)"
)

TASK = Resources(vcores=1, memory_mb=1024)
NODE = Resources(vcores=8, memory_mb=8192)


def concatenated(*objects: object) -> str:
    """Objects the way SLS and Rumen write them: one after another, not in an array."""
    return "\n".join(json.dumps(o, indent=2) for o in objects)


def write(tmp_path: Path, name: str, *objects: object) -> Path:
    path = tmp_path / name
    path.write_text(concatenated(*objects), encoding="utf-8")
    return path


# SLS samples -------------------------------------------------------------------------


@needs_samples
@pytest.mark.parametrize("trace", [INPUT_SLS, SLS_DAG], ids=["inputsls", "sls_dag"])
def test_sls_sample_jobs_tasks_and_derived_nodes(trace: Path) -> None:
    w = load_sls(trace)
    assert w.name == trace.stem
    assert [j.name for j in w.jobs] == ["job_1", "job_2"]
    assert [j.tasks for j in w.jobs] == [3, 2]
    assert w.tasks == 5
    assert [j.submit_s for j in w.jobs] == [0.0, 105.204]
    assert [j.queue for j in w.jobs] == ["sls_queue_1", "sls_queue_2"]
    assert {j.user for j in w.jobs} == {"default"}
    (map_stage,) = w.jobs[0].stages
    assert map_stage.name == "map"
    assert map_stage.durations == (17.043, 14.928, 17.843)
    assert map_stage.resources == TASK
    assert w.jobs[1].stages[0].durations == (22.163, 19.589)
    assert [(n.node_id, n.rack) for n in w.cluster.nodes] == [
        ("node1", "default-rack"),
        ("node2", "default-rack"),
        ("node3", "default-rack"),
    ]
    assert all(n.resources == NODE for n in w.cluster.nodes)
    assert [q.name for q in w.queues.children] == ["sls_queue_1", "sls_queue_2"]
    assert all(q.is_leaf and q.weight == 1 for q in w.queues.children)


@needs_samples
def test_sls_with_the_sample_node_file_skips_the_empty_entry() -> None:
    w = load_sls(INPUT_SLS, NODES)
    assert len(w.cluster.nodes) == 19
    racks = [n.rack for n in w.cluster.nodes]
    assert {r: racks.count(r) for r in racks} == {
        "rack1": 4,
        "rack2": 4,
        "rack3": 4,
        "rack4": 4,
        "rack5": 3,
    }
    assert [n.node_id for n in w.cluster.nodes] == [f"node{k}" for k in range(1, 20)]
    assert all(n.resources == NODE for n in w.cluster.nodes)
    assert w.tasks == 5


@needs_samples
def test_sls_node_file_sizes_override_the_defaults() -> None:
    nodes = {n.node_id: n.resources for n in read_nodes_file(NODES_WITH_RESOURCES)}
    assert nodes == {
        "node1": Resources(vcores=6, memory_mb=2048),
        "node2": NODE,
        "node3": NODE,
        "node4": Resources(vcores=12, memory_mb=6144),
    }
    bigger = Resources(vcores=32, memory_mb=65536)
    assert read_nodes_file(NODES, bigger)[0].resources == bigger


@needs_samples
def test_load_workload_sniffs_sls_and_passes_the_node_file() -> None:
    assert sniff_format(INPUT_SLS) == "sls"
    w = load_workload(str(INPUT_SLS), nodes_file=str(NODES_WITH_RESOURCES))
    assert len(w.jobs) == 2
    assert len(w.cluster.nodes) == 4
    assert len(load_workload(str(SLS_DAG), "sls").cluster.nodes) == 3


# Rumen sample ------------------------------------------------------------------------


@needs_samples
def test_rumen_sample_jobs_tasks_and_nodes() -> None:
    result = read_rumen(RUMEN)
    w = result.workload
    assert (result.skipped_tasks, result.skipped_jobs) == (0, 0)
    assert [j.name for j in w.jobs] == [
        "job_1369942127770_1205",
        "job_1369942127770_1206",
        "job_1369942127770_1207",
    ]
    assert [j.tasks for j in w.jobs] == [96, 96, 1]
    assert w.tasks == 193
    assert [j.submit_s for j in w.jobs] == [0.0, 105.204, 1000.0]
    assert all([s.name for s in j.stages] == ["map"] for j in w.jobs)
    assert all(j.user == "jenkins" and j.queue == "sls_queue_1" for j in w.jobs)
    assert all(j.stages[0].resources == TASK for j in w.jobs)  # mapreduce.map.memory.mb
    # First task of the first job: its SUCCESS attempt ran 1371222061163 .. 1371222078206.
    assert w.jobs[0].stages[0].durations[0] == 17.043
    assert round(w.jobs[0].work_s, 3) == 2024.885
    # The killed task has no attempt; the task's own times (19.153 s) are used.
    assert w.jobs[2].stages[0].durations == (19.153,)
    assert [(n.node_id, n.rack) for n in w.cluster.nodes] == [
        (f"a211{k}.smile.com", "default-rack") for k in (5, 6, 7, 8)
    ]
    assert all(n.resources == NODE for n in w.cluster.nodes)
    assert [q.name for q in w.queues.children] == ["sls_queue_1"]


@needs_samples
def test_load_workload_sniffs_rumen() -> None:
    assert sniff_format(RUMEN) == "rumen"
    w = load_workload(str(RUMEN))
    assert w.tasks == 193
    assert load_rumen(RUMEN).tasks == 193
    assert len(load_trace(RUMEN, nodes_file=str(NODES)).cluster.nodes) == 19


# Small fixtures: mapping rules --------------------------------------------------------


def sls_task(kind: str, start: int, end: int, **extra: object) -> dict[str, object]:
    return {
        "container.host": "/r1/h1",
        "container.type": kind,
        "container.start.ms": start,
        "container.end.ms": end,
    } | extra


def sls_job(
    job_id: str, start: int, tasks: list[dict[str, object]], **extra: object
) -> dict[str, Any]:
    return {
        "job.id": job_id,
        "job.user": "u",
        "job.queue.name": "q",
        "job.start.ms": start,
        "job.tasks": tasks,
    } | extra


def test_sls_reduce_depends_on_every_map_shape_and_counts_repeat(tmp_path: Path) -> None:
    tasks = [
        sls_task("map", 0, 1000),
        sls_task("map", 0, 2000, **{"container.memory": 2048, "container.vcores": 2}),
        sls_task("reduce", 2000, 2000, **{"container.count": 3}),
        sls_task("map", 0, 1500),
    ]
    path = write(tmp_path, "t.json", sls_job("j", 5000, tasks), sls_job("k", 1000, tasks[:1]))
    w = load_sls(path)
    assert [j.name for j in w.jobs] == ["k", "j"]  # by submit time
    assert [j.submit_s for j in w.jobs] == [0.0, 4.0]
    job = w.jobs[1]
    assert [(s.name, s.durations, s.parents) for s in job.stages] == [
        ("map", (1.0, 1.5), ()),
        ("map-2", (2.0,), ()),
        ("reduce", (0.001, 0.001, 0.001), ("map", "map-2")),
    ]
    assert job.stages[1].resources == Resources(vcores=2, memory_mb=2048)
    assert [n.rack for n in w.cluster.nodes] == ["r1"]


def test_sls_accepts_a_json_array_and_numeric_strings(tmp_path: Path) -> None:
    job = sls_job("j", 0, [sls_task("map", 0, 1000) | {"container.end.ms": "2500"}])
    path = tmp_path / "array.json"
    path.write_text(json.dumps([job]), encoding="utf-8")
    assert load_sls(path).jobs[0].stages[0].durations == (2.5,)


def test_rumen_skips_tasks_without_times_and_orders_reduce_after_map(tmp_path: Path) -> None:
    attempt = {"result": "SUCCESS", "startTime": 1000, "finishTime": 4000, "hostName": "/r/h1"}
    failed = {"result": "FAILED", "startTime": 500, "finishTime": 900, "hostName": "/r/h2"}
    job = {
        "jobID": "job_a",
        "user": "ann",
        "queue": "etl",
        "submitTime": 10_000,
        "jobProperties": {"mapreduce.reduce.memory.mb": "3072", "mapreduce.map.cpu.vcores": "2"},
        "mapTasks": [
            {"startTime": 0, "finishTime": 9000, "attempts": [failed, attempt]},
            {"startTime": -1, "finishTime": -1, "attempts": []},
        ],
        "reduceTasks": [{"startTime": 5000, "finishTime": 7000, "attempts": [failed]}],
    }
    empty = {"jobID": "job_b", "submitTime": 0, "mapTasks": [{"startTime": -1}]}
    result = read_rumen(write(tmp_path, "r.json", job, empty))
    assert (result.skipped_tasks, result.skipped_jobs) == (2, 1)
    (spec,) = result.workload.jobs
    assert spec.submit_s == 0.0
    assert [(s.name, s.durations, s.parents) for s in spec.stages] == [
        ("map", (3.0,), ()),
        ("reduce", (2.0,), ("map",)),
    ]
    assert spec.stages[0].resources == Resources(vcores=2, memory_mb=1024)
    assert spec.stages[1].resources == Resources(vcores=1, memory_mb=3072)
    assert [n.node_id for n in result.workload.cluster.nodes] == ["h1", "h2"]


# Small fixtures: malformed input -------------------------------------------------------

GOOD_TASKS = [sls_task("map", 0, 1000) for _ in range(4)]


def _sls_with_task(**changes: object) -> list[object]:
    """Two jobs; the second job's fourth task (job[1].job.tasks[3]) gets ``changes``."""
    tasks = [dict(t) for t in GOOD_TASKS]
    for key, value in changes.items():
        if value is None:
            del tasks[3][key]
        else:
            tasks[3][key] = value
    return [sls_job("a", 0, GOOD_TASKS), sls_job("b", 10, tasks)]


SLS_ERRORS: list[tuple[str, list[object], str | None, str]] = [
    (
        "missing end",
        _sls_with_task(**{"container.end.ms": None}),
        "job[1].job.tasks[3].container.end.ms",
        "required",
    ),
    (
        "negative duration",
        _sls_with_task(**{"container.end.ms": -5}),
        "job[1].job.tasks[3].container.end.ms",
        "ends before it starts",
    ),
    (
        "start not a number",
        _sls_with_task(**{"container.start.ms": "soon"}),
        "job[1].job.tasks[3].container.start.ms",
        "expected a number",
    ),
    (
        "missing type",
        _sls_with_task(**{"container.type": None}),
        "job[1].job.tasks[3].container.type",
        "required",
    ),
    (
        "missing host",
        _sls_with_task(**{"container.host": None}),
        "job[1].job.tasks[3].container.host",
        "required",
    ),
    (
        "negative memory",
        _sls_with_task(**{"container.memory": -1}),
        "job[1].job.tasks[3].container.memory",
        ">= 0",
    ),
    (
        "bad count",
        _sls_with_task(**{"container.count": 0}),
        "job[1].job.tasks[3].container.count",
        ">= 1",
    ),
    (
        "task larger than every node",
        _sls_with_task(**{"container.memory": 9000}),
        "job[1].job.tasks[3]",
        "fits no node",
    ),
    (
        "missing tasks",
        [{"job.tasks": [], "job.queue.name": "q", "job.start.ms": 0}],
        "job[0].job.tasks",
        "no tasks",
    ),
    (
        "missing queue",
        [{k: v for k, v in sls_job("a", 0, GOOD_TASKS).items() if k != "job.queue.name"}],
        "job[0].job.queue.name",
        "required",
    ),
    (
        "tasks not a list",
        [sls_job("a", 0, GOOD_TASKS) | {"job.tasks": {"x": 1}}],
        "job[0].job.tasks",
        "expected a list",
    ),
    ("task not an object", [sls_job("a", 0, [3])], "job[0].job.tasks[0]", "expected a JSON object"),
    (
        "duplicate job id",
        [sls_job("a", 0, GOOD_TASKS), sls_job("a", 5, GOOD_TASKS)],
        "job[1].job.id",
        "duplicate",
    ),
    (
        "job.count",
        [sls_job("a", 0, GOOD_TASKS) | {"job.count": 3}],
        "job[0].job.count",
        "not supported",
    ),
]


@pytest.mark.parametrize(
    ("objects", "field", "words"), [pytest.param(o, f, w, id=i) for i, o, f, w in SLS_ERRORS]
)
def test_malformed_sls_traces(
    tmp_path: Path, objects: list[object], field: str | None, words: str
) -> None:
    path = write(tmp_path, "bad.json", *objects)
    with pytest.raises(WorkloadError) as info:
        load_sls(path)
    assert info.value.source == str(path)
    assert info.value.field == field, str(info.value)
    assert words in info.value.message
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        pytest.param('{"job.tasks": [}', "line 1", "invalid JSON", id="not json"),
        pytest.param('{"jobID": "a"}\n{\n  "x": 1,\n}', "line 4", "invalid JSON", id="bad 2nd"),
        pytest.param("", None, "no JSON objects", id="empty"),
        pytest.param("  \n", None, "no JSON objects", id="blank"),
    ],
)
def test_undecodable_files(tmp_path: Path, text: str, field: str | None, words: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    for load in (load_sls, load_rumen, load_workload):
        with pytest.raises(WorkloadError) as info:
            load(str(path))
        assert info.value.field == field
        assert words in info.value.message


def test_unknown_json_trace_is_not_sniffed(tmp_path: Path) -> None:
    path = write(tmp_path, "other.json", {"hello": 1})
    with pytest.raises(WorkloadError, match="not an SLS trace"):
        load_workload(str(path))
    with pytest.raises(WorkloadError, match="cannot read: No such file"):
        load_sls(tmp_path / "absent.json")


NODE_FILE_ERRORS = [
    ("nodes missing", [{"rack": "r"}], "rack[0].nodes", "required"),
    (
        "node name missing",
        [{"rack": "r", "nodes": [{"vcores": 4}]}],
        "rack[0].nodes[0].node",
        "required",
    ),
    (
        "duplicate node",
        [{"rack": "r", "nodes": [{"node": "n"}]}, {"rack": "s", "nodes": [{"node": "n"}]}],
        "rack[1].nodes[0].node",
        "duplicate",
    ),
    (
        "negative vcores",
        [{"nodes": [{"node": "n", "vcores": -2}]}],
        "rack[0].nodes[0].vcores",
        ">= 0",
    ),
    ("no nodes at all", [{"rack": "r", "nodes": [{}]}], None, "no nodes"),
]


@needs_samples
@pytest.mark.parametrize(
    ("objects", "field", "words"), [pytest.param(o, f, w, id=i) for i, o, f, w in NODE_FILE_ERRORS]
)
def test_malformed_node_files(
    tmp_path: Path, objects: list[object], field: str | None, words: str
) -> None:
    nodes = write(tmp_path, "nodes.json", *objects)
    with pytest.raises(WorkloadError) as info:
        load_sls(INPUT_SLS, nodes)
    assert info.value.source == str(nodes)
    assert info.value.field == field
    assert words in info.value.message


def rumen_job(**changes: object) -> dict[str, Any]:
    attempt = {"result": "SUCCESS", "startTime": 0, "finishTime": 1000, "hostName": "/r/h"}
    task = {"startTime": 0, "finishTime": 1000, "attempts": [attempt]}
    job: dict[str, Any] = {"jobID": "j", "submitTime": 0, "mapTasks": [task]}
    for key, value in changes.items():
        if value is None:
            del job[key]
        else:
            job[key] = value
    return job


RUMEN_ERRORS = [
    ("missing jobID", [rumen_job(jobID=None)], "job[0].jobID", "required"),
    ("missing submitTime", [rumen_job(submitTime=None)], "job[0].submitTime", "required"),
    ("negative submitTime", [rumen_job(submitTime=-1)], "job[0].submitTime", ">= 0"),
    (
        "attempt finishes before it starts",
        [
            rumen_job(
                mapTasks=[{"attempts": [{"result": "SUCCESS", "startTime": 9, "finishTime": 3}]}]
            )
        ],
        "job[0].mapTasks[0].attempts[0].finishTime",
        "finishes before it starts",
    ),
    (
        "task finishes before it starts",
        [rumen_job(), rumen_job(jobID="k", reduceTasks=[{"startTime": 9, "finishTime": 3}])],
        "job[1].reduceTasks[0].finishTime",
        "finishes before it starts",
    ),
    ("mapTasks not a list", [rumen_job(mapTasks=5)], "job[0].mapTasks", "expected a list"),
    (
        "bad container size",
        [rumen_job(jobProperties={"mapreduce.map.memory.mb": "lots"})],
        "job[0].jobProperties.mapreduce.map.memory.mb",
        "expected a number",
    ),
    ("duplicate job id", [rumen_job(), rumen_job()], "job[1].jobID", "duplicate"),
    ("no usable job", [rumen_job(mapTasks=[])], None, "no job"),
    (
        "no hosts",
        [rumen_job(mapTasks=[{"startTime": 0, "finishTime": 5}])],
        None,
        "names no hosts",
    ),
    (
        "container larger than every node",
        [rumen_job(jobProperties={"mapreduce.map.memory.mb": "16384"})],
        "job[0].mapTasks",
        "fits no node",
    ),
    ("not an object", [[1, 2]], "job[0]", "expected a JSON object"),
]


@pytest.mark.parametrize(
    ("objects", "field", "words"), [pytest.param(o, f, w, id=i) for i, o, f, w in RUMEN_ERRORS]
)
def test_malformed_rumen_traces(
    tmp_path: Path, objects: list[object], field: str | None, words: str
) -> None:
    path = write(tmp_path, "bad.json", *objects)
    with pytest.raises(WorkloadError) as info:
        load_rumen(path)
    assert info.value.source == str(path)
    assert info.value.field == field, str(info.value)
    assert words in info.value.message

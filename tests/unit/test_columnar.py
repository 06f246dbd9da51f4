"""Columnar workloads (``treadle.workload.columnar``): every workload comes back from its
Parquet file exactly (values and their types: the event log prints an int amount as
``8`` and a float one as ``8.0``), jobs are read a row group at a time, and a file with
a wrong schema, a bad value or a broken footer is one error naming the file and where.

The SLS and other shared samples are read in place from the shared trace directory
(skipped when it is absent, as in test_workload_formats.py); the Google samples and the
built-ins ship with the checkout.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from treadle.errors import WorkloadError
from treadle.model import ClusterSpec, JobSpec, NodeSpec, QueueSpec, StageSpec, Workload
from treadle.resources import Resources
from treadle.workload import builtin_workloads, columnar, load_workload
from treadle.workload.columnar import HEADER_KEY, JOBS, ColumnarWorkload
from treadle.workload.columnar_write import write_workload

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
TRACES = ROOT.parent / "shared" / "traces"
GOOGLE = [
    DATA / "google2011",
    DATA / "google2019" / "instance_events.csv",
    DATA / "google2019" / "instance_events.jsonl",
]
SHARED = [
    TRACES / "sls" / "inputsls.json",
    TRACES / "sls" / "sls_dag.json",
    TRACES / "sls" / "2jobs2min-rumen-jh.json",
    TRACES / "sls" / "syn.json",
    TRACES / "swim" / "FB-2009_samples_24_times_1hr_0_first50jobs.tsv",
    TRACES / "alibaba" / "openb_pod_list_cpu050.csv",
    TRACES / "google-wta" / "macro_benchmarks_hetero.csv",
]


def exactly(value: Any) -> Any:
    """``value`` as nested tuples holding each number's type: equal only when the two
    workloads are the same to the last bit and type (JobSpec compares by identity)."""
    if isinstance(value, Resources):
        return tuple((k, type(v), v) for k, v in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return (type(value), *((f.name, exactly(getattr(value, f.name))) for f in fields))
    if isinstance(value, tuple | list):
        return tuple(exactly(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, exactly(v)) for k, v in value.items())
    return (type(value), value)


def round_trip(wl: Workload, path: Path, rows: int = columnar.JOBS_PER_ROW_GROUP) -> Workload:
    write_workload(wl, path, "test", rows)
    return load_workload(str(path))


# Round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(builtin_workloads()))
def test_every_builtin_workload_comes_back_exactly(tmp_path: Path, name: str) -> None:
    wl = load_workload(name)
    back = round_trip(wl, tmp_path / f"{name}.parquet")
    assert exactly(back) == exactly(wl)
    assert back.name == name


@pytest.mark.parametrize("trace", GOOGLE, ids=lambda p: p.name)
def test_the_google_samples_come_back_exactly(tmp_path: Path, trace: Path) -> None:
    wl = load_workload(str(trace))
    back = round_trip(wl, tmp_path / "g.parquet")
    assert exactly(back) == exactly(wl)
    # What the 2011/2019 importers add to the model survives: priority and class.
    assert [(j.priority, j.scheduling_class) for j in back.jobs] == [(2, 1), (9, 3), (1, 2)]
    assert len(back.cluster.nodes) == len(wl.cluster.nodes) >= 12000


@pytest.mark.parametrize("trace", SHARED, ids=lambda p: p.name)
def test_shared_traces_come_back_exactly(tmp_path: Path, trace: Path) -> None:
    if not trace.is_file():
        pytest.skip(f"shared sample {trace} is absent")
    wl = load_workload(str(trace))
    assert exactly(round_trip(wl, tmp_path / "t.parquet")) == exactly(wl)


def test_host_named_nodes_keep_their_ids(tmp_path: Path) -> None:
    nodes = (
        NodeSpec("a2115.smile.com", Resources(vcores=8, memory_mb=8192), "/r1"),
        NodeSpec("node7", Resources(vcores=8.0), "/r1"),
    )
    stage = StageSpec("s", Resources(vcores=1), (1.5, 2.0))
    wl = Workload("hosts", ClusterSpec(nodes), (JobSpec("j", "u", 0.0, (stage,)),))
    back = round_trip(wl, tmp_path / "h.parquet")
    assert [n.node_id for n in back.cluster.nodes] == ["a2115.smile.com", "node7"]
    assert exactly(back) == exactly(wl)


def test_jobs_stream_a_row_group_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wl = load_workload("demo")  # 20 jobs
    path = tmp_path / "demo.parquet"
    write_workload(wl, path, "demo", rows=6)
    assert pq.ParquetFile(path).num_row_groups == 4
    reads: list[int] = []
    read = pq.ParquetFile.read_row_group
    monkeypatch.setattr(
        pq.ParquetFile, "read_row_group", lambda self, g: (reads.append(g), read(self, g))[1]
    )
    jobs = ColumnarWorkload(path).jobs()
    first = next(jobs)
    assert first.name == wl.jobs[0].name
    assert reads == [0]
    assert [j.name for j in jobs] == [j.name for j in wl.jobs[1:]]
    assert reads == [0, 1, 2, 3]


@pytest.mark.parametrize("decode", [1, 3, 10_000])
def test_a_row_group_decoded_a_few_jobs_at_a_time_gives_the_same_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decode: int
) -> None:
    """Jobs become Python objects a slice of the group at a time, as the run takes them
    (a row group of 10,000 jobs holds a million durations), with nothing else changed."""
    wl = load_workload("dags")
    path = tmp_path / "dags.parquet"
    write_workload(wl, path, "dags", rows=7)
    monkeypatch.setattr(columnar, "DECODE_JOBS", decode)
    assert exactly(tuple(ColumnarWorkload(path).jobs())) == exactly(wl.jobs)


def test_a_workload_the_header_cannot_hold_is_refused_before_writing(tmp_path: Path) -> None:
    stopped = QueueSpec("root", children=(QueueSpec("default", state="STOPPED"),))
    stage = StageSpec("s", Resources(vcores=1), (1.0,))
    node = NodeSpec("node1", Resources(vcores=1))
    wl = Workload("q", ClusterSpec((node,)), (JobSpec("j", "u", 0.0, (stage,)),), stopped)
    path = tmp_path / "q.parquet"
    with pytest.raises(WorkloadError, match=r"^test: queues: cannot be written"):
        write_workload(wl, path, "test")
    assert not path.exists()


# Errors ----------------------------------------------------------------------------------


def tampered(tmp_path: Path, change: Callable[[list[dict[str, Any]]], None]) -> Path:
    """tiny.parquet with its rows changed by ``change`` (the metadata kept)."""
    path = tmp_path / "tiny.parquet"
    write_workload(load_workload("tiny"), path, "tiny")
    table = pq.read_table(path)
    rows = table.to_pylist()
    change(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    return path


def error_of(path: Path) -> str:
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path))
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(f"{path}: ")
    return text.removeprefix(f"{path}: ")


def set_stage(
    row: int, stage: int, key: str, value: object
) -> Callable[[list[dict[str, Any]]], None]:
    def change(rows: list[dict[str, Any]]) -> None:
        rows[row]["stages"][stage][key] = value

    return change


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            set_stage(1, 0, "durations_s", [1.0, -2.0]),
            "row group 0, job 1.stages[0].durations_s[1]: must be in (0, 1e+15] seconds, got -2.0",
        ),
        (
            set_stage(0, 0, "durations_s", [math.nan]),
            "row group 0, job 0.stages[0].durations_s[0]: must be in (0, 1e+15] seconds, got nan",
        ),
        (
            set_stage(0, 0, "durations_s", []),
            "row group 0, job 0.stages[0].durations_s: no tasks: give one duration per task",
        ),
        (
            set_stage(0, 0, "parents", ["nowhere"]),
            "row group 0, job 0.stages[0].parents[0]: unknown stage 'nowhere'; a parent comes "
            "before its child (before: none)",
        ),
        (
            set_stage(0, 0, "ask", 7),
            "row group 0, job 0.stages[0].ask: must index the header's asks (0..2), got 7",
        ),
        (
            lambda rows: rows[1].update(submit_s=math.inf),
            "row group 0, job 1.submit_s: must be in 0..1e+15 seconds, got inf",
        ),
        (
            lambda rows: rows[1].update(queue="etl"),
            "row group 0, job 1.queue: unknown queue 'etl'; leaf queues: default",
        ),
        (
            lambda rows: rows[1].update(name=rows[0]["name"]),
            "row group 0, job 1.name: duplicate job name 'wordcount'",
        ),
        (
            lambda rows: rows[0].update(stages=[]),
            "row group 0, job 0.stages: no stages",
        ),
        (
            lambda rows: rows[0].update(user=None),
            "row group 0, job 0.user: must not be null",
        ),
    ],
    ids=lambda v: v.split(":")[0] if isinstance(v, str) else "",
)
def test_a_bad_value_is_one_line_naming_the_job_and_field(
    tmp_path: Path, change: Callable[[list[dict[str, Any]]], None], message: str
) -> None:
    assert error_of(tampered(tmp_path, change)) == message


def test_sizes_are_bounded_from_the_footer_before_rows_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "demo.parquet"
    demo = load_workload("demo")
    write_workload(demo, path, "demo")
    jobs, tasks = len(demo.jobs), sum(len(s.durations) for j in demo.jobs for s in j.stages)
    monkeypatch.setattr(columnar, "MAX_TASKS", tasks - 1)
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", lambda *a: pytest.fail("read a row"))
    assert error_of(path) == f"{tasks} task durations; at most {tasks - 1} tasks"
    monkeypatch.setattr(columnar, "MAX_JOBS", jobs - 1)
    assert error_of(path) == f"{jobs} jobs; at most {jobs - 1}"


def test_too_many_tasks_in_a_stage_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tampered(tmp_path, lambda rows: None)
    monkeypatch.setattr(columnar, "MAX_TASKS_PER_STAGE", 2)
    assert error_of(path).endswith("durations_s: 4 tasks in one stage; at most 2")


def test_a_wrong_schema_names_the_column(tmp_path: Path) -> None:
    path = tmp_path / "w.parquet"
    write_workload(load_workload("tiny"), path, "tiny")
    table = pq.read_table(path)
    index = table.schema.get_field_index("submit_s")
    as_text = table.set_column(index, "submit_s", pa.array(["0"] * table.num_rows))
    pq.write_table(as_text.replace_schema_metadata(table.schema.metadata), path)
    assert error_of(path) == "submit_s: expected double, got string"
    pq.write_table(
        table.drop_columns(["stages"]).replace_schema_metadata(table.schema.metadata), path
    )
    assert error_of(path).startswith("stages: no such column; expected list<struct<name: string,")


def test_a_parquet_file_that_is_no_workload_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), path)
    assert error_of(path) == (
        "not a treadle columnar workload: metadata 'treadle.workload' must be '1' (no such key)"
    )


def test_a_bad_header_is_refused_as_a_workload_file_would_be(tmp_path: Path) -> None:
    path = tmp_path / "tiny.parquet"
    write_workload(load_workload("tiny"), path, "tiny")
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    header = meta[HEADER_KEY].decode()
    for old, new, message in [
        ("count: 1", "count: 0", "header.cluster.nodes[0].count: input should be greater"),
        ("heartbeat_s:", "heartbeat_ss:", "header.cluster.heartbeat_ss: unknown field"),
        ("asks:", "partition: {atr_s: 1}\nasks:", "header.partition: the jobs are the table's"),
    ]:
        assert old in header
        meta[HEADER_KEY] = header.replace(old, new, 1).encode()
        pq.write_table(table.replace_schema_metadata(meta), path)
        assert error_of(path).startswith(message)


def test_a_truncated_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "tiny.parquet"
    write_workload(load_workload("tiny"), path, "tiny")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert error_of(path).startswith("not a readable Parquet file (")
    assert JOBS.names[0] == "name"


def test_an_error_in_a_later_row_group_names_it_and_the_job(tmp_path: Path) -> None:
    path = tmp_path / "demo.parquet"
    write_workload(load_workload("demo"), path, "demo")
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[13]["stages"][-1]["durations_s"][0] = 0.0
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path, row_group_size=6)
    last = len(rows[13]["stages"]) - 1
    assert error_of(path) == (
        f"row group 2, job 13.stages[{last}].durations_s[0]: must be in (0, 1e+15] seconds, got 0.0"
    )

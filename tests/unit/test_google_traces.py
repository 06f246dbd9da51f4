"""The Google 2011 and 2019 trace importers on small samples written to the published
schemas (``tests/data/google2011``: job_events and task_events shards, one of each
gzipped; ``tests/data/google2019``: the same events as a BigQuery CSV and JSON-lines
export of instance_events, in v3 event codes, plus an alloc set's instance).

The samples' jobs, times in trace seconds (the first kept job is submitted at 600 s):

- 101: 2 tasks of cpu 0.0625, memory 0.03125, run 610..640 and 612..662: kept;
- 102: 2 tasks, one finishes (620..700), one is KILLed at 650 after running 30 s;
- 103: 1 task of cpu 0.125, memory 0.0625, priority 9, class 3, EVICTed at 650,
  resubmitted at 651 and run 660..700: kept with 40 s;
- 104: 160 tasks of 10 s: over the width cap of 150;
- 105: submitted at time 0, before the trace: left out;
- 106: 2 tasks of the 101 ask (645..675, 645..665) and one of cpu 0.25, memory 0.125
  (646..706): two stages.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from treadle.errors import WorkloadError
from treadle.importers import sniff_format
from treadle.importers.common import TraceFile
from treadle.importers.google import GoogleOptions
from treadle.importers.google2011 import jobs as jobs2011, load_google2011
from treadle.importers.google2019 import jobs as jobs2019, load_google2019
from treadle.importers.tabular import Reshape
from treadle.model import DEFAULT_QUEUE, JobSpec, StageSpec, Workload
from treadle.resources import Resources
from treadle.workload import load_workload

DATA = Path(__file__).parents[1] / "data"
G2011 = DATA / "google2011"
SHARDS = sorted((G2011 / "task_events").iterdir())
CSV2019 = DATA / "google2019" / "instance_events.csv"
JSONL2019 = DATA / "google2019" / "instance_events.jsonl"
USER_A = "uQk7cF2ZR3qtPbS6ymIo6Zs8PsLhgyMqMGrbR1jNFMg="
NO_CAP = GoogleOptions(reshape=Reshape())


def shape(wl: Workload) -> dict[str, tuple[object, ...]]:
    """Each job's submit time, priority, class and stages (ask, durations)."""
    return {
        j.name: (
            j.submit_s,
            j.priority,
            j.scheduling_class,
            tuple((s.name, s.resources.to_dict(), s.durations) for s in j.stages),
        )
        for j in wl.jobs
    }


SMALL = {"memory_mb": 2048, "vcores": 2}
KEPT = {
    "job101": (0.0, 2, 1, (("s1", SMALL, (30.0, 50.0)),)),
    "job103": (25.0, 9, 3, (("s1", {"memory_mb": 4096, "vcores": 4}, (40.0,)),)),
    "job106": (
        40.0,
        1,
        2,
        (("s1", SMALL, (30.0, 20.0)), ("s2", {"memory_mb": 8192, "vcores": 8}, (60.0,))),
    ),
}


def test_2011_directory_mapping() -> None:
    wl = load_google2011(G2011)
    assert shape(wl) == KEPT
    assert {j.user for j in wl.jobs} == {USER_A}
    assert {j.queue for j in wl.jobs} == {DEFAULT_QUEUE}
    assert len(wl.cluster.nodes) == 12_500
    assert wl.cluster.nodes[0].resources == Resources(vcores=32, memory_mb=65_536)


def test_2011_leaves_out_and_counts_what_did_not_finish() -> None:
    stream = jobs2011(TraceFile(G2011), GoogleOptions())
    assert [j.name for j in stream] == ["job101", "job103", "job106"]  # as they end
    assert stream.left_out == {
        "jobs begun before the trace": 1,
        "jobs over the width cap of 150 tasks": 1,
        "jobs with a task that did not finish": 1,
    }


def test_2011_keeps_a_killed_task_with_the_time_it_ran_and_no_cap() -> None:
    wl = load_google2011(G2011, GoogleOptions(failed="keep", reshape=Reshape()))
    got = shape(wl)
    assert got["job102"] == (5.0, 0, 0, (("s1", SMALL, (80.0, 30.0)),))
    assert got["job104"][3] == (("s1", {"memory_mb": 1024, "vcores": 1}, (10.0,) * 160),)
    assert {k: v for k, v in got.items() if k in KEPT} == KEPT
    assert "job105" not in got


def test_2011_cluster_shape_is_an_option() -> None:
    wl = load_google2011(G2011, GoogleOptions(nodes=3, node_vcores=16, node_memory_mb=1024))
    assert len(wl.cluster.nodes) == 3
    assert wl.jobs[0].stages[0].resources == Resources(vcores=1, memory_mb=32)


@pytest.mark.parametrize("gzipped", [False, True])
def test_2011_one_shard_plain_or_gzip(tmp_path: Path, gzipped: bool) -> None:
    text = b"".join(
        gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes() for p in SHARDS
    )
    shard = tmp_path / ("part-00000-of-00001.csv" + (".gz" if gzipped else ""))
    shard.write_bytes(gzip.compress(text) if gzipped else text)
    assert sniff_format(shard) == "google2011"
    assert shape(load_workload(str(shard))) == KEPT  # task_events alone end jobs too


def test_the_directory_is_a_workload_argument() -> None:
    assert shape(load_workload(str(G2011))) == KEPT
    options = {"failed": "keep", "width_cap": 0, "nodes": 10}
    wl = load_workload(str(G2011), "google2011", trace_options=options)
    assert len(wl.jobs) == 5
    assert len(wl.cluster.nodes) == 10


@pytest.mark.parametrize("export", [CSV2019, JSONL2019])
def test_2019_exports_map_as_the_2011_tables(export: Path) -> None:
    assert sniff_format(export) == "google2019"
    wl = load_google2019(export)
    assert shape(wl) == KEPT  # the alloc set's instance (collection 900) is no job
    assert {j.user for j in wl.jobs} == {"google"}
    assert len(wl.cluster.nodes) == 12_000
    stream = jobs2019(TraceFile(export), NO_CAP)
    assert sorted(j.name for j in stream) == [f"job10{i}" for i in (1, 3, 4, 6)]
    assert stream.left_out == {
        "jobs begun before the trace": 1,
        "jobs with a task that did not finish": 1,
    }


def test_2019_gzipped_export_and_a_user_column(tmp_path: Path) -> None:
    lines = CSV2019.read_text().splitlines()
    text = "\n".join([lines[0] + ",user", *(line + ",u1" for line in lines[1:])]) + "\n"
    path = tmp_path / "cell_a.csv.gz"
    path.write_bytes(gzip.compress(text.encode()))
    wl = load_workload(str(path), "google2019")
    assert shape(wl) == KEPT
    assert {j.user for j in wl.jobs} == {"u1"}


def test_a_job_without_trace_attributes_has_none() -> None:
    job = JobSpec("j", "u", 0, (StageSpec("s", Resources(vcores=1), (1.0,)),))
    assert (job.priority, job.scheduling_class) == (None, None)


def first_shard_with(tmp_path: Path, line: int, text: str, name: str = "part.csv") -> Path:
    rows = SHARDS[0].read_text().splitlines()
    rows[line - 1] = text
    path = tmp_path / name
    path.write_text("\n".join(rows) + "\n")
    return path


ROW = "600000000,,101,0,,0,user,1,2,0.0625,0.03125,0.0001,0"


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (ROW.replace(",101,0,", ",101,x,"), "line 3.task_index: expected a number, got 'x'"),
        (ROW + ",1", "line 3: has 14 fields, expected 13"),
        (ROW.replace("600000000", str(1 << 63)), "line 3.time: must be in 0..2^63-1"),
        (ROW.replace("600000000", "-5"), "line 3.time: expected a whole number of micro"),
        (ROW.replace("600", "601"), "line 4.time: 600000000 is before the row above's 601"),
        (ROW.replace(",0.0625,", ",1.5,"), "line 3.cpu_request: must be in 0..1, got 1.5"),
        (ROW.replace(",0,,0,", ",0,,9,"), "line 3.event_type: must be in 0..8, got 9"),
        (ROW.replace(",101,", ",j1,"), "line 3.job_id: expected a job ID"),
    ],
)
def test_2011_malformed_row_names_file_line_and_column(
    tmp_path: Path, row: str, expected: str
) -> None:
    path = first_shard_with(tmp_path, 3, row)
    with pytest.raises(WorkloadError) as e:
        load_workload(str(path), "google2011")
    assert str(e.value).startswith(f"{path}: {expected}")


def test_2011_a_bad_row_in_a_directory_names_its_shard(tmp_path: Path) -> None:
    (tmp_path / "task_events").mkdir()
    first_shard_with(tmp_path / "task_events", 2, "0,,105,0,,1,u,1,0,1,1,1")
    with pytest.raises(WorkloadError, match=r"task_events/part\.csv: line 2: has 12 fields"):
        load_workload(str(tmp_path))


def test_2011_job_events_alone_and_an_empty_directory(tmp_path: Path) -> None:
    jobs_only = tmp_path / "jobs.csv"
    jobs_only.write_text("600000000,,101,0,user,1,name,logical\n")
    with pytest.raises(WorkloadError, match="a job_events shard has no tasks"):
        load_workload(str(jobs_only), "google2011")
    with pytest.raises(WorkloadError, match=r"task_events: cannot list: No such file"):
        load_google2011(tmp_path)
    (tmp_path / "task_events").mkdir()
    with pytest.raises(WorkloadError, match=r"task_events: holds no \.csv or \.csv\.gz shard"):
        load_workload(str(tmp_path))


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"failed": "maybe"}, "failed: expected drop or keep"),
        ({"nodes": "many"}, "nodes: expected a number"),
        ({"nodes": 0}, "nodes must be 1..100000"),
        ({"width": 3}, "width: not an option of the Google importers"),
    ],
)
def test_bad_importer_options(options: dict[str, object], expected: str) -> None:
    with pytest.raises(WorkloadError, match=expected):
        load_workload(str(CSV2019), trace_options=options)


def test_2019_csv_errors(tmp_path: Path) -> None:
    lines = CSV2019.read_text().splitlines()
    path = tmp_path / "e.csv"
    path.write_text(lines[0].replace(",resource_request_cpus", ",cpus") + "\n")
    with pytest.raises(WorkloadError, match="line 1: the header lacks resource_request_cpus"):
        load_workload(str(path), "google2019")
    path.write_text("\n".join([lines[0], lines[1].replace("0,0,105", "0,12,105")]) + "\n")
    with pytest.raises(WorkloadError, match=r"e\.csv: line 2\.type: must be in 0\.\.10, got 12"):
        load_workload(str(path), "google2019")


def test_2019_json_errors(tmp_path: Path) -> None:
    first = JSONL2019.read_text().splitlines()[0]
    path = tmp_path / "e.jsonl"
    for text, expected in [
        (first[:-1], r"line 1: not JSON"),
        (f"{first}\n[1]", r"line 2: expected a JSON object"),
        (first.replace('"time":"0"', '"time":[0]'), r"line 1\.time: expected a number"),
        (first.replace(":0.0625", ':"x"'), r"line 1\.resource_request_cpus: expected a number"),
        (first.replace('"time":"0"', '"time":1.5'), r"line 1\.time: expected a whole number"),
    ]:
        path.write_text(text + "\n")
        with pytest.raises(WorkloadError, match=expected):
            load_workload(str(path), "google2019")


def test_a_directory_that_is_no_trace_is_still_refused(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="is a directory; give a workload file"):
        load_workload(str(tmp_path))
    with pytest.raises(WorkloadError, match="is a directory; give a workload file"):
        load_workload(str(G2011), "google2019")


def test_jobs_stream_before_the_rest_is_read(tmp_path: Path) -> None:
    rows = SHARDS[0].read_text().splitlines()
    ended = next(i for i, r in enumerate(rows) if r.startswith("662000000,,101,1,"))
    path = tmp_path / "part.csv"
    path.write_text("\n".join([*rows[: ended + 1], "bad row"]) + "\n")
    stream = iter(jobs2011(TraceFile(path), GoogleOptions()))
    assert next(stream).name == "job101"  # built as its last task finished
    with pytest.raises(WorkloadError, match=rf"line {ended + 2}: has 1 fields"):
        next(stream)


def write_table(folder: Path, rows: list[str]) -> None:
    folder.mkdir(parents=True)
    (folder / "part-00000-of-00001.csv").write_text("\n".join(rows) + "\n")


def test_2011_a_job_ends_at_its_own_kill(tmp_path: Path) -> None:
    def task(time: int, job: int, index: int, kind: int) -> str:
        return f"{time}000000,,{job},{index},,{kind},u,0,0,0.5,0.5,0,0"

    tasks = [task(600, 7, 0, 0), task(600, 7, 1, 0), task(601, 7, 0, 1), task(610, 7, 0, 4)]
    tasks += [task(620, 8, 0, 0), task(621, 8, 0, 1), task(640, 8, 0, 4)]
    write_table(tmp_path / "task_events", tasks)
    stream = jobs2011(TraceFile(tmp_path), GoogleOptions(failed="keep"))
    assert [j.name for j in stream] == ["job8"]
    # Without job_events, job7's task 1 still waits when the input ends.
    assert stream.left_out == {"jobs not finished in the trace": 1}
    write_table(tmp_path / "job_events", ["600000000,,7,0,u,0,n,l", "615000000,,7,5,u,0,n,l"])
    stream = jobs2011(TraceFile(tmp_path), GoogleOptions())
    assert [j.name for j in stream] == ["job8"]
    assert stream.left_out == {"jobs with a task that did not finish": 1}
    kept = jobs2011(TraceFile(tmp_path), GoogleOptions(failed="keep"))
    assert [(j.name, j.stages[0].durations) for j in kept] == [("job7", (9.0,)), ("job8", (19.0,))]


def test_2019_an_event_after_the_trace_leaves_the_job_out(tmp_path: Path) -> None:
    lines = CSV2019.read_text().splitlines()
    path = tmp_path / "after.csv"
    late = [line.replace("700000000,6,103", f"{(1 << 63) - 1},6,103") for line in lines]
    path.write_text("\n".join(sorted(late[1:], key=lambda r: int(r.split(",")[0]))) + "\n")
    path.write_text(lines[0] + "\n" + path.read_text())
    stream = jobs2019(TraceFile(path), GoogleOptions())
    assert sorted(j.name for j in stream) == ["job101", "job106"]
    assert stream.left_out["jobs not finished in the trace"] == 1

"""The SWF, Alibaba 2023, Alibaba 2017 and SWIM importers on small files written here:
their mappings, the width cap and arrival stretch, and bad input."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import pytest

from treadle.errors import WorkloadError
from treadle.importers import FORMATS, sniff_format
from treadle.importers.alibaba2017 import Alibaba2017Options, load_alibaba2017
from treadle.importers.swim import SwimOptions, load_swim, tasks_of
from treadle.importers.tabular import Reshape, split_history, stretch_factor, write_history
from treadle.metrics.jobs import job_results
from treadle.model import DEFAULT_QUEUE
from treadle.study.runner import PolicyChoice, RunOptions, run_sim
from treadle.workload import load_workload

MiB = 1 << 20


def test_the_new_formats_are_in_the_table() -> None:
    assert {"swf", "alibaba2023", "alibaba2017", "swim"} <= set(FORMATS)


# SWF -----------------------------------------------------------------------------------

SWF = """\
; Version: 2.2
; MaxNodes: 4
; MaxProcs: 8
; Queue: 1 batch
;
 1   10  5  100  2  -1 -1  2 -1 -1  1  3  1 -1  1 -1 -1 -1
 2   20 -1   50 -1  -1 -1  3 -1 -1  0 -1 -1 -1 -1 -1 -1 -1
 3   30 -1   40  1  -1 -1  1 -1 -1  5  3 -1 -1  0 -1 -1 -1
 4   40 -1    0  1  -1 -1  1 -1 -1  5  3 -1 -1  0 -1 -1 -1
 5   50 -1   60  4  -1 -1  4 -1 -1  3  3 -1 -1  0 -1 -1 -1
 6   60 -1   -1  4  -1 -1  4 -1 -1  1  3 -1 -1  0 -1 -1 -1
"""


def _swf(tmp_path: Path, text: str = SWF, gz: bool = False) -> Path:
    path = tmp_path / ("log.swf.gz" if gz else "log.swf")
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_swf_mapping(tmp_path: Path) -> None:
    wl = load_workload(str(_swf(tmp_path)))
    assert [n.resources["vcores"] for n in wl.cluster.nodes] == [2, 2, 2, 2]
    # Kept: completed, failed (allocated -1: the requested 3), cancelled that ran;
    # left out: cancelled without run time, a partial execution, an unknown run time.
    assert [j.name for j in wl.jobs] == ["job1", "job2", "job3"]
    j1, j2, j3 = wl.jobs
    assert (j1.submit_s, j1.user, j1.queue) == (0, "user3", "batch")
    assert j1.stages[0].durations == (100.0, 100.0)
    assert (j2.submit_s, j2.user, j2.queue, j2.tasks) == (10, "user_unknown", DEFAULT_QUEUE, 3)
    assert (j3.queue, j3.stages[0].durations) == ("queue0", (40.0,))


def test_swf_gzip_is_read_directly_and_sniffed(tmp_path: Path) -> None:
    path = _swf(tmp_path, gz=True)
    assert sniff_format(path) == "swf"
    assert load_workload(str(path)).tasks == 6


def test_swf_cluster_without_a_divisible_header(tmp_path: Path) -> None:
    text = SWF.replace("; MaxProcs: 8", "; MaxProcs: 6")
    wl = load_workload(str(_swf(tmp_path, text)), "swf")
    assert len(wl.cluster.nodes) == 6


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (" 7 70 -1 x 1 -1 -1 1 -1 -1 1 3 -1 -1 0 -1 -1 -1", "line 12.run_time: expected a number"),
        (" 7 70 -1 5 1 -1 -1 1 -1 -1 1 3 -1 -1 0 -1 -1", "line 12: has 17 fields, expected 18"),
        (" 7 70 -1 5 1 -1 -1 1 -1 -1 9 3 -1 -1 0 -1 -1 -1", "line 12.status: must be in -1..5"),
        (
            " 7 70 -1 5 1.5 -1 -1 1 -1 -1 1 3 -1 -1 0 -1 -1 -1",
            "allocated_processors: expected a whole",
        ),
        (
            " 7 70 -1 5 9e99 -1 -1 1 -1 -1 1 3 -1 -1 0 -1 -1 -1",
            "line 12.allocated_processors: must be",
        ),
    ],
)
def test_swf_malformed_line_names_file_line_and_field(
    tmp_path: Path, line: str, expected: str
) -> None:
    path = _swf(tmp_path, SWF + line + "\n")
    with pytest.raises(WorkloadError, match=expected) as e:
        load_workload(str(path), "swf")
    assert str(e.value).startswith(str(path))


def test_swf_bad_header_and_empty_log(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"line 2.MaxNodes: expected a whole number"):
        load_workload(str(_swf(tmp_path, SWF.replace("MaxNodes: 4", "MaxNodes: many"))), "swf")
    with pytest.raises(WorkloadError, match="no job to run"):
        load_workload(str(_swf(tmp_path, "; MaxNodes: 4\n")), "swf")


# Alibaba 2023 --------------------------------------------------------------------------

NODES = """\
sn,cpu_milli,memory_mib,gpu,model
n0,32000,262144,0,
n1,64000,262144,1,P100
"""
PODS = """\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p0,12000,16384,1,600,,LS,Running,100,1100,100
p1,6000,12288,1,600,,BE,Succeeded,110,400,200
p2,4000,1024,0,0,,BE,Failed,120,130,120
p3,4000,1024,1,1000,,BE,Pending,130,150,
"""


def _ali23(tmp_path: Path, pods: str = PODS, nodes: str = NODES) -> Path:
    (tmp_path / "openb_node_list_all_node.csv").write_text(nodes)
    path = tmp_path / "openb_pod_list_x.csv"
    path.write_text(pods)
    return path


def test_alibaba2023_mapping(tmp_path: Path) -> None:
    path = _ali23(tmp_path)
    assert sniff_format(path) == "alibaba2023"
    wl = load_workload(str(path))
    n0, n1 = wl.cluster.nodes
    assert n1.resources.to_dict() == {"gpu": 1, "memory_mb": 262144, "vcores": 64}
    assert "gpu" not in n0.resources
    # The pending pod never ran: left out. Durations are deletion - scheduled.
    assert [j.name for j in wl.jobs] == ["p0", "p1", "p2"]
    p0, p1, p2 = wl.jobs
    assert p0.stages[0].resources.to_dict() == {"gpu": 0.6, "memory_mb": 16384, "vcores": 12}
    assert (p0.submit_s, p0.stages[0].durations, p0.user, p0.queue) == (0, (1000,), "LS", "LS")
    assert (p1.submit_s, p1.stages[0].durations) == (10, (200,))
    assert "gpu" not in p2.stages[0].resources


def test_alibaba2023_gpu_shares_are_a_resource_policies_respect(tmp_path: Path) -> None:
    # Two 0.6-GPU pods on the one 1-GPU node: the second waits for the first, although
    # the node has cores and memory for both.
    wl = load_workload(str(_ali23(tmp_path)))
    for policy in ("fifo", "drf"):
        result, _ = run_sim(wl, PolicyChoice(policy, {}), options=RunOptions(slowdown=False))
        jobs = {j.name: j for j in job_results(result.records)}
        p0, p1, p2 = jobs["p0"], jobs["p1"], jobs["p2"]
        assert p0.finish_s is not None
        assert p1.start_s is not None
        assert p2.start_s is not None
        assert p1.start_s >= p0.start_s + 1000  # p0 runs 1000 s
        assert p2.start_s < p0.finish_s


def test_alibaba2023_bad_input(tmp_path: Path) -> None:
    path = _ali23(tmp_path, PODS + "p4,4000,1024,2,1000,,BE,Running,10,20,10\n")
    with pytest.raises(WorkloadError, match=r"line 6: a task needs gpu=2.*fits no node"):
        load_workload(str(path))
    path = _ali23(tmp_path, PODS + "p4,4000,x,0,0,,BE,Running,10,20,10\n")
    with pytest.raises(
        WorkloadError, match=r"openb_pod_list_x.csv: line 6.memory_mib: expected a number"
    ):
        load_workload(str(path))
    path = _ali23(tmp_path, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1,1,1000\n")
    with pytest.raises(WorkloadError, match="pods without times cannot be replayed"):
        load_workload(str(path))
    with pytest.raises(WorkloadError, match="is a node list"):
        load_workload(str(tmp_path / "openb_node_list_all_node.csv"))
    alone = tmp_path / "elsewhere"
    alone.mkdir()
    (alone / "pods.csv").write_text(PODS)
    with pytest.raises(WorkloadError, match="pass --nodes-file"):
        load_workload(str(alone / "pods.csv"))
    path = _ali23(tmp_path, PODS, NODES + "n2,1000,1,-3,\n")
    with pytest.raises(WorkloadError, match=r"openb_node_list_all_node.csv: line 4.gpu: must be"):
        load_workload(str(path))


# SWIM ----------------------------------------------------------------------------------


def test_swim_bytes_to_tasks_is_swims_rule() -> None:
    o = SwimOptions()
    # 600 -> 150 machines: bytes / 4, then the 64 MiB input floor; one reduce at least.
    assert tasks_of(740773, 0, 0, 600, o)[:2] == (1, 1)
    # 1 GiB scaled to 256 MiB: 4 maps; (shuffle + output) / 4 = 160 MiB: round(2.5) = 3.
    assert tasks_of(1 << 30, 480 * MiB, 160 * MiB, 600, o)[:2] == (4, 3)
    # More reduces than the cluster's machines: cluster_size // 5.
    assert tasks_of(1 << 30, 1 << 40, 0, 600, o)[:2] == (4, 30)


def test_swim_mapping_and_duration_model(tmp_path: Path) -> None:
    path = tmp_path / "FB-2009_x.tsv"
    path.write_text(f"job0\t5\t5\t{1 << 30}\t0\t0\njob1\t9\t4\t{(1 << 30) + 4 * MiB}\t0\t0\n")
    assert sniff_format(path) == "swim"
    wl = load_swim(path, SwimOptions(spread=0))
    j0, j1 = wl.jobs
    assert (j0.name, j0.submit_s, j1.submit_s) == ("job0", 0, 4)
    assert [s.name for s in j0.stages] == ["map", "reduce"]
    assert j0.stages[1].parents == ("map",)
    assert j0.stages[0].durations == (10.0,) * 4  # 2 s + 64 MiB at 8 MiB/s
    assert j1.stages[0].durations == (10.0,) * 4 + (2.125,)  # the last partition: 1 MiB
    assert (j0.user, j1.user) == ("user0", "user1")
    assert len(wl.cluster.nodes) == 150
    spread = load_swim(path).jobs[0].stages[0].durations
    assert len(set(spread)) == 4
    assert spread == load_swim(path).jobs[0].stages[0].durations


def test_swim_input_paths_name_and_group_jobs(tmp_path: Path) -> None:
    path = tmp_path / "FB-2010_p.tsv"
    path.write_text(
        "job0\t1\t1\t100\t0\t0\tinputPath13\t\t\njob1\t2\t1\t100\t0\t0\tinputPath13\t\t\n"
    )
    wl = load_swim(path)
    assert [j.name for j in wl.jobs] == ["inputPath13:job0", "inputPath13:job1"]
    assert {j.user for j in wl.jobs} == {"user3"}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("job1\t2\t1\t100\tlots\t0", "line 2.shuffle_bytes: expected a number"),
        ("job1\t2\t1\t100", "line 2: has 4 fields, expected 6"),
        ("job1\t-2\t1\t100\t0\t0", "line 2.submit_s: must be in 0"),
    ],
)
def test_swim_malformed_line(tmp_path: Path, line: str, expected: str) -> None:
    path = tmp_path / "w.tsv"
    path.write_text(f"job0\t1\t1\t100\t0\t0\n{line}\n")
    with pytest.raises(WorkloadError, match=expected):
        load_workload(str(path), "swim")


def test_reshape_caps_width_and_stretches_arrivals(tmp_path: Path) -> None:
    path = tmp_path / "w.tsv"
    wide = 200 * 64 * MiB * 4  # 200 maps after the 600 -> 150 scaling
    path.write_text(f"job0\t0\t0\t100\t0\t0\njob1\t10\t10\t{wide}\t0\t0\njob2\t20\t10\t100\t0\t0\n")
    full = load_swim(path)
    capped = load_swim(path, SwimOptions(reshape=Reshape(width_cap=150)))
    before, after = full.jobs[1], capped.jobs[1]
    assert before.tasks == 201
    assert after.tasks <= 150 + 1
    assert math.isclose(before.work_s, after.work_s)
    dropped = load_swim(path, SwimOptions(reshape=Reshape(width_cap=150, cap_mode="drop")))
    assert [j.name for j in dropped.jobs] == ["job0", "job2"]
    stretched = load_swim(path, SwimOptions(reshape=Reshape(target_load=0.5, slots=10)))
    span = stretched.jobs[-1].submit_s
    assert math.isclose(
        full.tasks and sum(j.work_s for j in full.jobs) / (10 * span), 0.5, rel_tol=1e-3
    )
    assert stretch_factor(list(stretched.jobs), 10, 0.5) == pytest.approx(1, rel=1e-3)
    limited = load_swim(path, SwimOptions(reshape=Reshape(limit_jobs=2)))
    assert [j.name for j in limited.jobs] == ["job0", "job1"]


# Alibaba 2017 --------------------------------------------------------------------------

HEADER = (
    "task_create_time, task_end_time, job_id, task_id,number_of_instances, status, "
    "number_of_cpus_requested_per_instance_in_the_task,"
    "normalized_memory_requested_per_instance_in_the_task\n"
)
BATCH = HEADER + (
    "100,130,7,1,2,Terminated,50,0.25\n"
    "90,100,7,2,400,Terminated,100,0.5\n"
    "50,60,8,1,1,Terminated,50,0.1\n"
    "50,,8,2,1,Running,50,0.1\n"
    "200,260,9,1,3,Terminated,50,0.1\n"
)


def test_alibaba2017_mapping(tmp_path: Path) -> None:
    path = tmp_path / "batch_task.csv"
    path.write_text(BATCH)
    assert sniff_format(path) == "alibaba2017"
    wl = load_alibaba2017(path, Alibaba2017Options(spread=0, reshape=Reshape()))
    assert [j.name for j in wl.jobs] == ["job7", "job9"]  # job 8 did not terminate
    j7, j9 = wl.jobs
    assert (j7.submit_s, j9.submit_s, j7.user, j7.queue) == (0, 110, "alibaba", DEFAULT_QUEUE)
    t1, t2 = j7.stages
    assert (t1.name, t1.durations, t1.resources.to_dict()) == (
        "t1",
        (30.0, 30.0),
        {"memory_mb": 32768, "vcores": 0.5},
    )
    assert (t2.tasks, t2.parents) == (400, ())
    assert len(wl.cluster.nodes) == 1300


def test_alibaba2017_width_cap_drops_or_compresses(tmp_path: Path) -> None:
    path = tmp_path / "batch_task.csv"
    path.write_text(BATCH)
    assert [j.name for j in load_workload(str(path)).jobs] == ["job9"]  # the format drops
    compress = Reshape(width_cap=150, cap_mode="compress")
    wl = load_alibaba2017(path, Alibaba2017Options(spread=0, reshape=compress))
    j7 = wl.jobs[0]
    # 402 instances: k = 3; 400 -> 133 tasks of 3 and one of 1; 2 -> one task of 2.
    assert [s.tasks for s in j7.stages] == [1, 134]
    assert j7.stages[1].durations == (30.0,) * 133 + (10.0,)
    assert j7.stages[0].durations == (60.0,)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("10,5,1,1,1,Terminated,50,0.1", "line 7.task_end_time: 5 is before task_create_time 10"),
        ("10,20,1,1,x,Terminated,50,0.1", "line 7.number_of_instances: expected a number"),
        ("10,20,1,1,1,Terminated,50", "line 7: has 7 fields, expected 8"),
        (
            "10,20,1,1,1,Terminated,50,7",
            "line 7.normalized_memory_requested_per_instance_in_the_task",
        ),
    ],
)
def test_alibaba2017_malformed_row(tmp_path: Path, row: str, expected: str) -> None:
    path = tmp_path / "batch_task.csv"
    path.write_text(BATCH + row + "\n")
    with pytest.raises(WorkloadError, match=expected):
        load_workload(str(path), "alibaba2017")


def test_a_task_longer_than_the_stall_window_is_not_a_stall(tmp_path: Path) -> None:
    # The last job's one task runs 10,000 s after every submission: the simulator's stall
    # detector (nothing logged for 3,600 s) must not stop the run while it runs.
    text = "; MaxNodes: 1\n1 0 -1 10000 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"
    wl = load_workload(str(_swf(tmp_path, text)), "swf")
    _, run = run_sim(wl, PolicyChoice("fifo", {}), options=RunOptions(slowdown=False))
    assert run.summary["finished"] == 1
    assert run.summary["makespan_s"] >= 10000


def test_history_split_feeds_the_history_estimators(tmp_path: Path) -> None:
    from rm.policy.estimator import read_history

    path = tmp_path / "w.tsv"
    path.write_text("".join(f"job{i}\t{10 * i}\t10\t100\t0\t0\n" for i in range(10)))
    run, history = split_history(load_swim(path), 0.3)
    assert [j.name for j in history] == ["job0", "job1", "job2"]
    assert run.jobs[0].name == "job3"
    assert run.jobs[0].submit_s == 0
    assert history[0].submit_s == -30
    write_history(history, tmp_path / "h.csv")
    past = read_history(str(tmp_path / "h.csv"))
    assert [(h.name, h.submit_s, h.tasks) for h in past] == [
        (j.name, j.submit_s, j.tasks) for j in history
    ]
    assert past[0].mean_task_s == pytest.approx(history[0].work_s / history[0].tasks)

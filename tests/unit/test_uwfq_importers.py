"""The UWFQ scenario-config and WTA CSV importers, java.util.Random, and closed-loop users.

The configs and CSVs are read in place from ``../shared/traces`` (beside the checkout, as
in CI); without it the tests on them are skipped.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest

from treadle.errors import WorkloadError
from treadle.importers import sniff_format
from treadle.importers.javarandom import JavaRandom, java_string_hash, strict_log
from treadle.importers.uwfq import UwfqOptions, load_uwfq
from treadle.importers.wta import HOMO_FILTER, WtaOptions, load_wta
from treadle.metrics.jobs import job_results
from treadle.model import Follow
from treadle.study.runner import PolicyChoice, RunOptions, run_sim
from treadle.workload import load_workload, parse_workload
from treadle.workload.partition import Partitioning, partition_workload

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
SCEN = TRACES / "uwfq-scenarios"
WTA = TRACES / "google-wta"
S1 = SCEN / "micro-synthetic" / "2_power_2_small_users_default.json"
S2 = SCEN / "micro-synthetic" / "4_super_small_users_default.json"
LARGE = SCEN / "micro-synthetic" / "2_large_2_small_users_default.json"
HOMO = SCEN / "macro" / "homo_macro_config.json"
HOMO_CSV = WTA / "macro_benchmarks_homo.csv"
needs_traces = pytest.mark.skipif(
    not SCEN.is_dir(), reason=f"{SCEN} is absent (../shared is not beside the checkout)"
)


# java.util.Random ----------------------------------------------------------------------


def test_java_random_matches_the_jdk() -> None:
    # Values printed by the JDK (java.util.Random is specified bit for bit).
    assert JavaRandom(42).next_int() == -1170105035
    assert JavaRandom(0).next_int() == -1155484576
    assert JavaRandom(42).next_double() == 0.7275636800328681
    assert JavaRandom(42).next_long() == -5025562857975149833
    assert JavaRandom(42).next_gaussian() == 1.1419053154730547
    assert JavaRandom(0).next_gaussian() == 0.8025330637390305
    r = JavaRandom(42)
    assert [r.next_int(10) for _ in range(10)] == [0, 3, 8, 4, 0, 5, 5, 8, 9, 3]
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0


def test_strict_log_is_within_an_ulp_of_the_c_library() -> None:
    import math
    import random

    rng = random.Random(3)
    for _ in range(2000):
        x = rng.random() * rng.choice([1e-300, 1e-5, 1.0, 7.0, 1e300])
        if x > 0:
            assert abs(strict_log(x) - math.log(x)) <= math.ulp(math.log(x))
    assert strict_log(1.0) == 0.0
    assert strict_log(0.0) == -math.inf


def test_gaussian_caches_its_second_value() -> None:
    a, b = JavaRandom(7), JavaRandom(7)
    first, second = a.next_gaussian(), a.next_gaussian()
    assert b.next_gaussian() == first
    assert b.next_gaussian() == second
    assert first != second


# Scenario configs ----------------------------------------------------------------------


def _submits_ms(wl_jobs: object, prefix: str) -> list[int]:
    return [round(j.submit_s * 1000) for j in wl_jobs if j.name.startswith(prefix)]  # type: ignore[attr-defined]


@needs_traces
def test_scenario_1_jobs_and_the_authors_poisson_times() -> None:
    wl = load_workload(str(S1))
    assert sniff_format(S1) == "uwfq"
    assert len(wl.jobs) == 184
    assert wl.cluster.capacity["vcores"] == 32
    assert sorted(wl.users) == ["user1_power", "user2_power", "user3_small", "user4_small"]
    # The spec's §4.3 table, to the millisecond.
    assert _submits_ms(wl.jobs, "user3_small:") == [
        200,
        6623,
        21857,
        34120,
        35474,
        40234,
        71525,
        84452,
        104836,
        106260,
        108632,
        121230,
    ]
    assert _submits_ms(wl.jobs, "user4_small:") == [
        300,
        2997,
        4390,
        4788,
        4837,
        11280,
        18224,
        23209,
        28181,
        30032,
        36821,
        38789,
    ]
    bursts = _submits_ms(wl.jobs, "user1_power:")
    assert sorted(set(bursts)) == [100, 30000, 60000, 90000]
    assert len(bursts) == 80
    job = next(j for j in wl.jobs if j.name == "user1_power:loop100_1_0")
    assert [s.name for s in job.stages] == ["plan", "compute", "collect"]
    compute = job.stages[1]
    assert compute.tasks == 32
    assert compute.work_s == pytest.approx(26.926)
    assert job.stages[0].resources["vcores"] == 0  # the driver's overhead uses no core


@needs_traces
def test_other_configs_spec_times_and_counts() -> None:
    wl = load_workload(str(LARGE))
    assert _submits_ms(wl.jobs, "user3_small:") == [150, 3789, 6111, 31382, 31460, 32388]
    assert _submits_ms(wl.jobs, "user4_small:") == [250, 2011, 4713, 9097, 11524, 19041]
    # SEQ users are closed loops: each job follows the previous one of the same entry.
    assert wl.follows["user1_big:loop1000_1"] == Follow("user1_big:loop1000_0", 0.0)
    assert len(wl.follows) == 6
    s2 = load_workload(str(S2))
    assert len(s2.jobs) == 120
    assert {j.submit_s for j in s2.jobs} == {0.1, 0.2, 0.3, 0.4}


@needs_traces
def test_homo_macro_config_and_its_partitioning() -> None:
    wl = load_workload(str(HOMO))
    assert len(wl.jobs) == 97
    assert sum(len(j.stages) for j in wl.jobs) == 207
    assert len(wl.users) == 25
    assert wl.jobs[0].name == "user_1:loop_custom_6389146041"
    assert wl.jobs[0].submit_s == 0.006
    total = sum(j.work_s for j in wl.jobs)
    assert total == pytest.approx(14434, rel=1e-3)
    p = partition_workload(wl, Partitioning(rule="loopcustom"))
    assert sum(j.tasks for j in p.jobs) == 29388  # the spec's -P count


@needs_traces
def test_wta_csv_conversion_matches_the_authors_config() -> None:
    assert sniff_format(HOMO_CSV) == "wta"
    everything = load_workload(str(HOMO_CSV))
    assert len(everything.jobs) == 133
    assert sum(len(j.stages) for j in everything.jobs) == 6418
    homo = load_wta(HOMO_CSV, WtaOptions(homo_filter=HOMO_FILTER))
    config = load_workload(str(HOMO))
    assert len(homo.jobs) == 97
    assert sum(len(j.stages) for j in homo.jobs) == 207

    def shape(wl: object) -> list[tuple[str, float, list[float]]]:
        return sorted(
            (j.user, j.submit_s, sorted(s.work_s for s in j.stages))
            for j in wl.jobs  # type: ignore[attr-defined]
        )

    for ours, theirs in zip(shape(homo), shape(config), strict=True):
        assert ours[:2] == theirs[:2]
        assert ours[2] == pytest.approx(theirs[2], abs=1e-6)
    ten = load_wta(HOMO_CSV, WtaOptions(homo_filter=10))  # the paper's wording
    assert len(ten.jobs) == 106
    assert sum(len(j.stages) for j in ten.jobs) == 237


# Bad input -----------------------------------------------------------------------------


def _config(**overrides: object) -> list[dict[str, object]]:
    w: dict[str, object] = {
        "workloadName": "w",
        "className": "jobs.implementations.udf.Loop20",
        "totalIterations": 2,
        "startTimeMs": "0",
        "poissonRateInMinutes": 0,
        "frequency": "PARA",
    }
    w.update(overrides)
    return [{"user": "u", "workloads": [w]}]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"className": "jobs.Loop7"}, "[0].workloads[0].className: unknown job class 'Loop7'"),
        ({"poissonRateInMinutes": -1}, "[0].workloads[0].poissonRateInMinutes: must be 0.."),
        ({"totalIterations": 10**9}, "[0].workloads[0].totalIterations: expected a whole"),
        ({"frequency": "ONCE"}, "[0].workloads[0].frequency: expected PARA or SEQ"),
        ({"startTimeMs": "soon"}, "[0].workloads[0].startTimeMs: expected a number"),
    ],
)
def test_bad_configs_name_file_and_field(
    tmp_path: Path, overrides: dict[str, object], message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_config(**overrides)))
    with pytest.raises(WorkloadError) as e:
        load_workload(str(path), "uwfq")
    assert str(e.value).startswith(f"{path}: ")
    assert message in str(e.value)


HEADER = (
    "workflow_id,ts_submit,ts_submit_seconds,task_count,total_resources,task_id,runtime,"
    "resource_amount_requested,resource_run_time,user_id\n"
)
ROW = "1,1000,1.0,1,0.1,1,1000,0.1,100.0,42\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (HEADER + ROW + "2,1000,1.0,1,0.1,1,1000,0.1,abc,42\n", "line 3.resource_run_time"),
        (HEADER + ROW + "2,1000,1.0,1\n", "line 3: has 4 fields, the header 10"),
        (HEADER + "1,1000,x,1,0.1,1,1000,0.1,5,42\n", "line 2.ts_submit_seconds"),
        (HEADER + "1,1000,1.0,1,0.1,1,1000,0.1,-5,42\n", "line 2.resource_run_time: must be > 0"),
        ("workflow_id,ts_submit\n1,2\n", "line 1: missing column(s)"),
        (HEADER, "no rows after the header"),
    ],
)
def test_bad_csv_rows_name_file_line_and_column(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(WorkloadError) as e:
        load_workload(str(path), "wta")
    assert str(e.value).startswith(f"{path}: ")
    assert message in str(e.value)


# Running them ---------------------------------------------------------------------------


def test_idle_response_times_match_the_paper_classes(tmp_path: Path) -> None:
    """Alone on the cluster, each class takes its idle RT (calibrated overhead and skew)."""
    for cls, idle in (("Loop20", 0.852), ("Loop100", 2.2055)):
        path = tmp_path / f"{cls}.json"
        path.write_text(json.dumps(_config(className=f"x.{cls}", totalIterations=1)))
        wl = load_uwfq(str(path))
        result, _ = run_sim(wl, PolicyChoice("uwfq", {}), options=RunOptions(slowdown=False))
        (job,) = job_results(result.records)
        assert job.jct_s == pytest.approx(idle, rel=0.03)


def test_seq_users_run_closed_loop(tmp_path: Path) -> None:
    path = tmp_path / "seq.json"
    path.write_text(json.dumps(_config(frequency="SEQ", totalIterations=3)))
    wl = load_uwfq(str(path), UwfqOptions(driver_s=0.2))
    result, _ = run_sim(wl, PolicyChoice("fifo", {}), options=RunOptions(slowdown=False))
    jobs = sorted(job_results(result.records), key=lambda j: j.submit_s)
    assert [j.status for j in jobs] == ["SUCCEEDED"] * 3
    for before, after in itertools.pairwise(jobs):
        assert after.submit_s == pytest.approx(before.finish_s)


# Closed-loop users in the YAML schema ----------------------------------------------------

CLOSED_LOOP = """
cluster:
  heartbeat_s: 0.01
  nodes: [{count: 2, resources: {vcores: 4}}]
generators:
  - {kind: closed_loop, user: alice, count: 3, start_s: 1, think_s: 2,
     job: {stages: [{name: s, tasks: 4, duration_s: 1, resources: {vcores: 1}}]}}
  - {kind: poisson, user: bob, rate_per_min: 30, count: 3,
     job: {stages: [{name: s, tasks: 8, duration_s: 3, resources: {vcores: 1}}]}}
"""


def test_closed_loop_user_submits_each_job_its_wait_after_the_last_one_ends() -> None:
    wl = parse_workload(CLOSED_LOOP, "cl.yaml")
    assert wl.follows == {
        "alice-2": Follow("alice-1", 2.0),
        "alice-3": Follow("alice-2", 2.0),
    }
    result, _ = run_sim(wl, PolicyChoice("fifo", {}), options=RunOptions(slowdown=False))
    jobs = {j.name: j for j in job_results(result.records)}
    assert jobs["alice-1"].submit_s == 1.0
    for before, after in (("alice-1", "alice-2"), ("alice-2", "alice-3")):
        finish = jobs[before].finish_s
        assert finish is not None
        assert jobs[after].submit_s == pytest.approx(finish + 2.0)
    # Taken out alone (the slowdown reference), a follower runs at its submit_s.
    alone = replace(wl, jobs=(wl.jobs[-1],))
    result, _ = run_sim(alone, PolicyChoice("fifo", {}), options=RunOptions(slowdown=False))
    assert [j.status for j in job_results(result.records)] == ["SUCCEEDED"]


def test_closed_loop_bad_wait_names_the_field() -> None:
    bad = CLOSED_LOOP.replace("think_s: 2", "think_s: -1")
    with pytest.raises(WorkloadError) as e:
        parse_workload(bad, "cl.yaml")
    assert "generators[0].think_s" in str(e.value)

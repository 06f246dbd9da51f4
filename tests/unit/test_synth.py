"""SLS SYNTH files: the three samples (``sls/syn.json``, ``sls/syn_generic.json``,
``sls/syn_stream.json``, apache/hadoop hadoop-tools/hadoop-sls, Apache-2.0) read in place
from the shared trace directory, and small files written here."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from treadle.errors import WorkloadError
from treadle.importers import sniff_format
from treadle.importers.common import JsonObject
from treadle.importers.javarandom import JavaRandom
from treadle.importers.synth import Sample, java_round
from treadle.resources import Resources
from treadle.workload import load_workload

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces" / "sls"
needs_samples = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"{TRACES} is absent (../shared is not beside the checkout)"
)
SAMPLES = ["syn", "syn_generic", "syn_stream"]


def synth(tmp_path: Path, **overrides: Any) -> Path:
    """A one-workload, one-class SYNTH file in the generic form."""
    doc: dict[str, Any] = {
        "num_nodes": 6,
        "nodes_per_rack": 4,
        "num_jobs": 8,
        "rand_seed": 7,
        "workloads": [
            {
                "workload_name": "w",
                "workload_weight": 1,
                "queue_name": "q",
                "job_classes": [
                    {
                        "class_name": "c",
                        "user_name": "u",
                        "class_weight": 1,
                        "tasks": [
                            {"type": "map", "count": {"val": 4}, "time": {"val": 3000},
                             "max_memory": {"val": 2048}, "max_vcores": {"val": 2}},
                            {"type": "reduce", "count": {"val": 2, "std": 1},
                             "time": {"val": 5000, "std": 1000},
                             "max_memory": {"val": 10}, "max_vcores": {"val": 0}},
                        ],
                    }
                ],
                "time_distribution": [{"time": 0, "weight": 1}, {"time": 100, "weight": 0}],
            }
        ],
    }  # fmt: skip
    doc.update(overrides)
    path = tmp_path / "synth.json"
    path.write_text(json.dumps(doc))
    return path


@needs_samples
@pytest.mark.parametrize(
    ("name", "jobs", "tasks"), [("syn", 10, 109), ("syn_generic", 10, 99), ("syn_stream", 5, 10)]
)
def test_samples_are_recognised_and_drawn_the_same_every_time(
    name: str, jobs: int, tasks: int
) -> None:
    path = str(TRACES / f"{name}.json")
    assert sniff_format(path) == "synth"
    first, again = load_workload(path), load_workload(path)
    assert (len(first.jobs), first.tasks) == (jobs, tasks)
    assert [(j.name, j.submit_s, j.stages) for j in first.jobs] == [
        (j.name, j.submit_s, j.stages) for j in again.jobs
    ]
    assert {j.queue for j in first.jobs} == {"sls_queue_1"}
    assert {j.user for j in first.jobs} == {"foobar"}
    assert len(first.cluster.nodes) == 20
    assert {n.rack for n in first.cluster.nodes} == {f"rack{i}" for i in range(5)}


@needs_samples
def test_stream_sample_tasks_are_a_minute_of_4_vcores() -> None:
    wl = load_workload(str(TRACES / "syn_stream.json"))
    for j in wl.jobs:
        assert [(s.name, s.tasks, s.durations, s.parents) for s in j.stages] == [
            ("stream", 2, (60.0, 60.0), ())
        ]
        assert j.stages[0].resources == Resources(vcores=4, memory_mb=4096)


@needs_samples
def test_old_flat_form_is_a_map_then_reduce_job() -> None:
    wl = load_workload(str(TRACES / "syn.json"))
    j = wl.jobs[0]
    assert [s.name for s in j.stages] == ["map", "reduce"]
    assert j.stages[1].parents == ("map",)
    assert j.stages[0].resources == Resources(vcores=1, memory_mb=1024)
    assert j.stages[1].resources == Resources(vcores=2, memory_mb=2048)
    assert [j.name for j in wl.jobs] == [f"class_1_{i:06d}" for i in range(10)]
    assert wl.jobs[0].submit_s == 0
    assert all(a.submit_s <= b.submit_s for a, b in zip(wl.jobs, wl.jobs[1:], strict=False))


@needs_samples
@pytest.mark.parametrize("name", SAMPLES)
def test_samples_run_to_completion_byte_identically(tmp_path: Path, name: str) -> None:
    outs = []
    for k in (1, 2):
        out = tmp_path / f"run{k}"
        proc = subprocess.run(
            [sys.executable, "-m", "treadle.cli", "sim", str(TRACES / f"{name}.json"),
             "--policy", "fair", "--out", str(out), "--events", "jsonl"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert summary["finished"] == summary["jobs"]
        outs.append(((out / "jobs.csv").read_bytes(), (out / "events.jsonl").read_bytes()))
    assert outs[0] == outs[1]


@needs_samples
def test_nodes_file_with_racks_gives_the_cluster() -> None:
    wl = load_workload(
        str(TRACES / "syn.json"), nodes_file=str(TRACES / "nodes-with-resources.json")
    )
    node1 = next(n for n in wl.cluster.nodes if n.node_id == "node1")
    assert (node1.rack, node1.resources) == ("rack1", Resources(vcores=6, memory_mb=2048))


def test_floors_rounding_and_dependencies(tmp_path: Path) -> None:
    wl = load_workload(str(synth(tmp_path)))
    assert len(wl.jobs) == 8
    for j in wl.jobs:
        maps, *reduces = j.stages
        assert (maps.tasks, set(maps.durations)) == (4, {3.0})
        assert maps.resources == Resources(vcores=2, memory_mb=2048)
        for r in reduces:  # asks below SynthJob's floors are raised to them
            assert r.resources == Resources(vcores=1, memory_mb=1024)
            assert r.parents == ("map",)
    assert [n.rack for n in wl.cluster.nodes] == ["rack0", "rack1"] * 3


def test_another_seed_draws_other_jobs(tmp_path: Path) -> None:
    a = load_workload(str(synth(tmp_path, rand_seed=1)))
    b = load_workload(str(synth(tmp_path, rand_seed=2)))
    assert [j.submit_s for j in a.jobs] != [j.submit_s for j in b.jobs]


def test_lognormal_sample_has_the_given_mean_and_stddev() -> None:
    s = Sample(JsonObject("f", "x", {"val": 100, "std": 30}))
    s.init(JavaRandom(3))
    draws = [s.value() for _ in range(20000)]
    assert statistics.fmean(draws) == pytest.approx(100, rel=0.02)
    assert statistics.stdev(draws) == pytest.approx(30, rel=0.05)
    assert min(draws) > 0


def test_zero_stddev_is_a_sixth_of_the_mean_and_discrete_draws_its_values() -> None:
    s = Sample(JsonObject("f", "x", {"val": 60, "std": 0}))
    s.init(JavaRandom(3))
    assert statistics.stdev([s.value() for _ in range(20000)]) == pytest.approx(10, rel=0.05)
    d = Sample(JsonObject("f", "x", {"discrete": ["1", "5"], "weights": [0, 1]}))
    d.init(JavaRandom(3))
    assert {d.value() for _ in range(50)} == {5.0}


def test_java_round_takes_halves_up() -> None:
    assert [java_round(x) for x in (2.5, -2.5, 0.49999, 3.7)] == [3, -2, 0, 4]
    assert math.isclose(java_round(1e6 + 0.5), 1e6 + 1)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_jobs": 0}, "num_jobs: expected a whole number >= 1"),
        ({"num_nodes": 0}, "num_nodes: expected a whole number >= 1"),
        ({"workloads": [{"job_classes": [], "time_distribution": [{"time": 0}]}]}, "job_classes"),
    ],
)
def test_malformed_files_are_one_line_naming_the_field(
    tmp_path: Path, overrides: dict[str, Any], message: str
) -> None:
    path = synth(tmp_path, **overrides)
    with pytest.raises(WorkloadError, match=message) as e:
        load_workload(str(path))
    assert "\n" not in str(e.value)


def test_bad_sample_and_zero_weights_are_errors(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="expected LOGNORM or NORM"):
        Sample(JsonObject("f", "x", {"val": 1, "std": 1, "dist": "GAMMA"}))
    with pytest.raises(WorkloadError, match="mean must be > 0"):
        Sample(JsonObject("f", "x", {"val": 0, "std": 1}))
    doc = json.loads(synth(tmp_path).read_text())
    doc["workloads"][0]["job_classes"][0]["class_weight"] = 0
    (tmp_path / "z.json").write_text(json.dumps(doc))
    with pytest.raises(WorkloadError, match="weights sum to 0"):
        load_workload(str(tmp_path / "z.json"))

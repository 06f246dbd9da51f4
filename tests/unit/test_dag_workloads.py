"""DAG workload generators: TPC-H query DAGs from the shared trace, and synthetic DAGs.

The TPC-H summary is read in place from the shared trace directory (never copied here):
``tpch-dags/tpch_dag_summary.json`` (derived from hongzimao/decima-sim @ c010dd74,
``tpch/``). Malformed traces are small fixtures written by the tests.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
import random
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from treadle import registry
from treadle.errors import WorkloadError
from treadle.importers.synthetic import SHAPES, DagShape, draw_dag, stage_levels
from treadle.importers.tpch import read_tpch
from treadle.model import JobSpec, Workload
from treadle.sim import Simulation
from treadle.workload import (
    DAG_SHAPES,
    DEFAULT_DEMAND,
    MIN_DURATION_S,
    builtin_workloads,
    load_workload,
    parse_workload,
    workload_json_schema,
)

TRACE = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "traces"
    / "tpch-dags"
    / "tpch_dag_summary.json"
)
SCALES = ("2g", "5g", "10g", "20g", "50g", "80g", "100g")
# CI has ../shared beside the checkout; a checkout alone skips the tests on the trace.
TRACE_ABSENT = f"{TRACE} is absent (../shared is not beside the checkout)"
needs_trace = pytest.mark.skipif(not TRACE.is_file(), reason=TRACE_ABSENT)


def raw_trace() -> dict[str, Any]:
    data = json.loads(TRACE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def tpch_doc(**generator: Any) -> dict[str, Any]:
    """A workload with one tpch generator over the real trace; ``generator`` overrides."""
    gen: dict[str, Any] = {
        "kind": "tpch",
        "path": str(TRACE),
        "count": 12,
        "scales": ["2g", "100g"],
        "queries": [3, 6, 14],
        "users": ["alice", "bob", "carol"],
        "interarrival_s": {"dist": "exponential", "mean": 20},
    }
    gen.update(generator)
    return {
        "seed": 3,
        "cluster": {"nodes": [{"count": 4, "resources": {"vcores": 20, "memory_mb": 131072}}]},
        "generators": [gen],
    }


def dag_doc(**generator: Any) -> dict[str, Any]:
    gen: dict[str, Any] = {
        "kind": "dag",
        "shape": "tpcds",
        "count": 10,
        "user": "alice",
        "tasks_per_stage": {"dist": "uniform", "low": 1, "high": 3},
        "task_duration_s": {"dist": "lognormal", "mu": 1.5, "sigma": 0.5},
    }
    gen.update(generator)
    return {
        "seed": 5,
        "cluster": {"nodes": [{"count": 2, "resources": {"vcores": 16, "memory_mb": 32768}}]},
        "generators": [gen],
    }


def write(tmp_path: Path, doc: dict[str, Any], name: str = "w.yaml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def load(tmp_path: Path, doc: dict[str, Any]) -> Workload:
    return load_workload(str(write(tmp_path, doc)))


def fingerprint(w: Workload) -> list[tuple[object, ...]]:
    return [
        (
            j.name,
            j.user,
            j.queue,
            j.submit_s,
            tuple((s.name, s.parents, dict(s.resources), s.durations) for s in j.stages),
        )
        for j in w.jobs
    ]


def parse_name(job: JobSpec) -> tuple[str, int, int]:
    """``tpch-100g-q3-7`` -> ("100g", 3, 7)."""
    _, scale, query, k = job.name.rsplit("-", 3)
    return scale, int(query.removeprefix("q")), int(k)


def by_arrival(w: Workload) -> list[JobSpec]:
    return sorted(w.jobs, key=lambda j: int(j.name.rsplit("-", 1)[1]))


def quantile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


# TPC-H: the real trace --------------------------------------------------------------


@needs_trace
def test_the_trace_reads_whole() -> None:
    trace = read_tpch(TRACE)
    assert len(trace.queries) == 22 * 7
    assert trace.scales == SCALES  # by data size, not as strings
    assert trace.query_numbers == tuple(range(1, 23))
    q3 = trace.queries["100g", 3]
    assert q3.key == "100g/q3"
    assert [s.stage for s in q3.stages] == [0, 1, 2, 3, 4, 5]
    assert q3.stages[2].parents == (0, 1)


@needs_trace
def test_tpch_generator_builds_count_jobs_named_after_their_query(tmp_path: Path) -> None:
    w = load(tmp_path, tpch_doc())
    assert len(w.jobs) == 12
    assert len({j.name for j in w.jobs}) == 12
    for job in w.jobs:
        scale, query, _ = parse_name(job)
        assert job.name.startswith(f"tpch-{scale}-q{query}-")
        assert scale in ("2g", "100g")
        assert query in (3, 6, 14)
        assert job.queue == "default"
    assert [parse_name(j)[2] for j in by_arrival(w)] == list(range(1, 13))


@needs_trace
def test_tpch_jobs_have_the_trace_dags_tasks_and_mean_durations(tmp_path: Path) -> None:
    w = load(tmp_path, tpch_doc(count=40, scales=None, queries=None))
    raw = raw_trace()
    assert len({parse_name(j)[:2] for j in w.jobs}) > 20  # many different queries drawn
    for job in w.jobs:
        scale, query, _ = parse_name(job)
        stages = raw[f"{scale}/q{query}"]["stages"]
        by_name = {s.name: s for s in job.stages}
        assert set(by_name) == {f"s{s['stage']}" for s in stages}
        for s in stages:
            spec = by_name[f"s{s['stage']}"]
            assert spec.parents == tuple(f"s{p}" for p in s["parents"])
            assert spec.tasks == s["num_tasks"]
            expected = max(MIN_DURATION_S, round(s["mean_task_ms"] / 1000, 3))
            assert spec.durations == (expected,) * s["num_tasks"]
        edges = sum(len(s.parents) for s in job.stages)
        assert edges == raw[f"{scale}/q{query}"]["num_edges"]


@needs_trace
def test_duration_scale_and_floor(tmp_path: Path) -> None:
    w = load(tmp_path, tpch_doc(queries=[6], scales=["2g"], duration_scale=10, min_task_s=10))
    raw = raw_trace()["2g/q6"]["stages"]
    for job in w.jobs:
        assert job.stages[0].durations[0] == round(raw[0]["mean_task_ms"] / 100, 3)  # 32.392
        assert job.stages[1].durations[0] == 10  # 5.967 s, raised to the floor


@needs_trace
def test_duration_spread_keeps_the_stage_mean(tmp_path: Path) -> None:
    w = load(tmp_path, tpch_doc(queries=[3], scales=["100g"], count=1, duration_spread=0.5))
    (job,) = w.jobs
    stage = next(s for s in job.stages if s.tasks == 593)
    mean = raw_trace()["100g/q3"]["stages"][3]["mean_task_ms"] / 1000
    assert len(set(stage.durations)) > 500
    assert statistics.fmean(stage.durations) == pytest.approx(mean, rel=0.06)


@needs_trace
def test_same_seed_same_workload_other_seed_differs(tmp_path: Path) -> None:
    doc = tpch_doc(duration_spread=0.2)
    first = load(tmp_path, doc)
    assert fingerprint(load(tmp_path, doc)) == fingerprint(first)
    doc["seed"] = 4
    assert fingerprint(load(tmp_path, doc)) != fingerprint(first)


@needs_trace
def test_poisson_arrivals_have_the_mean_gap(tmp_path: Path) -> None:
    doc = tpch_doc(count=400, scales=["2g"], queries=[6], start_s=30)
    jobs = by_arrival(load(tmp_path, doc))
    times = [j.submit_s for j in jobs]
    assert times[0] == 30  # the first job arrives at start_s
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 0
    assert statistics.fmean(gaps) == pytest.approx(20, rel=0.1)  # 399 gaps: 1 s std. error
    assert statistics.stdev(gaps) == pytest.approx(20, rel=0.15)  # exponential: sd = mean


@needs_trace
@pytest.mark.parametrize(
    ("arrival", "start"),
    [({}, 0.0), ({"interarrival_s": 0}, 0.0), ({"interarrival_s": 0, "start_s": 7.5}, 7.5)],
    ids=["omitted", "zero", "zero-from-start"],
)
def test_all_jobs_at_start_without_gaps(
    tmp_path: Path, arrival: dict[str, Any], start: float
) -> None:
    doc = tpch_doc(**arrival)
    del doc["generators"][0]["interarrival_s"]
    doc["generators"][0].update(arrival)
    w = load(tmp_path, doc)
    assert {j.submit_s for j in w.jobs} == {start}
    # Equal submit times keep generation order, so the users still take turns.
    assert [j.user for j in w.jobs] == ["alice", "bob", "carol"] * 4


@needs_trace
def test_users_round_robin_in_arrival_order_and_single_user(tmp_path: Path) -> None:
    jobs = by_arrival(load(tmp_path, tpch_doc(count=7)))
    assert [j.user for j in jobs] == ["alice", "bob", "carol", "alice", "bob", "carol", "alice"]
    doc = tpch_doc(count=3)
    del doc["generators"][0]["users"]
    doc["generators"][0]["user"] = "zed"
    assert {j.user for j in load(tmp_path, doc).jobs} == {"zed"}


@needs_trace
def test_name_and_queue(tmp_path: Path) -> None:
    doc = tpch_doc(count=2, name="h", queue="batch")
    doc["queues"] = [{"name": "batch"}, {"name": "default"}]
    w = load(tmp_path, doc)
    assert all(j.name.startswith("h-") and j.queue == "batch" for j in w.jobs)


@needs_trace
def test_relative_path_is_resolved_against_the_workload_file(tmp_path: Path) -> None:
    workload = tmp_path / "deep" / "w.yaml"
    relative = os.path.relpath(TRACE, workload.parent)
    assert not Path(relative).is_absolute()
    path = write(tmp_path, tpch_doc(path=relative), "deep/w.yaml")
    w = load_workload(str(path))
    assert len(w.jobs) == 12
    # parse_workload resolves against the source's directory, or base_dir if given.
    text = path.read_text(encoding="utf-8")
    assert fingerprint(parse_workload(text, str(path))) == fingerprint(w)
    assert fingerprint(parse_workload(text, "x.yaml", base_dir=path.parent)) == fingerprint(w)


@needs_trace
def test_default_demands_vary_per_stage_within_the_documented_sets(tmp_path: Path) -> None:
    w = load(tmp_path, tpch_doc(count=30))
    seen = Counter(
        (s.resources["vcores"], s.resources["memory_mb"]) for j in w.jobs for s in j.stages
    )
    assert {v for v, _ in seen} == set(DEFAULT_DEMAND["vcores"])
    assert {m for _, m in seen} == set(DEFAULT_DEMAND["memory_mb"])
    assert all(set(s.resources) == {"vcores", "memory_mb"} for j in w.jobs for s in j.stages)
    assert len(seen) == 12  # independent draws: every combination turns up


@needs_trace
def test_demand_distributions_are_drawn_in_range_and_rounded(tmp_path: Path) -> None:
    resources = {
        "vcores": {"dist": "uniform", "low": 1, "high": 3},
        "memory_mb": [1024, 4096],
        "gpu": 0.5,
    }
    doc = tpch_doc(count=30, resources=resources)
    doc["cluster"]["nodes"][0]["resources"]["gpu"] = 1
    stages = [s for j in load(tmp_path, doc).jobs for s in j.stages]
    assert {s.resources["vcores"] for s in stages} == {1, 2, 3}
    assert {s.resources["memory_mb"] for s in stages} == {1024, 4096}
    assert {s.resources["gpu"] for s in stages} == {0.5}  # a fixed amount is kept as written


@needs_trace
def test_demand_shapes_are_picked_by_weight(tmp_path: Path) -> None:
    shapes = [
        {"weight": 3, "resources": {"vcores": 1, "memory_mb": 8192}},
        {"resources": {"vcores": 4, "memory_mb": 1024}},
    ]
    w = load(tmp_path, tpch_doc(count=60, resources=shapes))
    seen = Counter(s.resources["vcores"] for j in w.jobs for s in j.stages)
    assert set(seen) == {1, 4}
    assert seen[1] / seen.total() == pytest.approx(0.75, abs=0.07)
    assert all(
        s.resources["memory_mb"] == (8192 if s.resources["vcores"] == 1 else 1024)
        for j in w.jobs
        for s in j.stages
    )


@needs_trace
def test_a_trace_given_directly_points_to_the_generator() -> None:
    with pytest.raises(WorkloadError) as info:
        load_workload(str(TRACE))
    assert "kind: tpch" in info.value.message


# TPC-H: errors in the workload file --------------------------------------------------

Mutation = Callable[[dict[str, Any]], None]


def _gen(**changes: Any) -> Mutation:
    def apply(doc: dict[str, Any]) -> None:
        gen = doc["generators"][0]
        for key, value in changes.items():
            if value is _DELETE:
                del gen[key]
            else:
                gen[key] = value

    return apply


_DELETE = object()
G = "generators[0]"
WORKLOAD_ERRORS: list[tuple[str, Mutation, str, list[str]]] = [
    ("missing trace", _gen(path="absent.json"), f"{G}.path", ["no such file", "absent.json"]),
    ("trace is a directory", _gen(path="."), f"{G}.path", ["is a directory"]),
    ("empty path", _gen(path=""), f"{G}.path", ["at least 1 character"]),
    (
        "unknown scale",
        _gen(scales=["2g", "3g"]),
        f"{G}.scales[1]",
        ["unknown scale '3g'", "2g, 5g"],
    ),
    ("scale twice", _gen(scales=["2g", "2g"]), f"{G}.scales[1]", ["listed twice"]),
    ("scale not a string", _gen(scales=[100]), f"{G}.scales[0]", ["valid string"]),
    ("no scales", _gen(scales=[]), f"{G}.scales", ["at least 1"]),
    ("unknown query", _gen(queries=[3, 23]), f"{G}.queries[1]", ["no query 23", "1-22"]),
    ("query zero", _gen(queries=[0]), f"{G}.queries[0]", ["greater than or equal to 1"]),
    ("query twice", _gen(queries=[3, 3]), f"{G}.queries[1]", ["listed twice"]),
    ("count zero", _gen(count=0), f"{G}.count", ["greater than or equal to 1"]),
    ("count missing", _gen(count=_DELETE), f"{G}.count", ["required"]),
    ("misspelt field", _gen(scale=["2g"]), f"{G}.scale", ["unknown field", "'scales'"]),
    ("unknown kind", _gen(kind="tpcx"), f"{G}.kind", ["unknown kind 'tpcx'", "'tpch'"]),
    ("kind missing", _gen(kind=_DELETE), f"{G}.kind", ["required"]),
    ("user and users", _gen(user="zed"), f"{G}.users", ["not both"]),
    ("no user", _gen(users=_DELETE), f"{G}.users", ["required", "round robin"]),
    ("empty users", _gen(users=[]), f"{G}.users", ["at least 1"]),
    ("unknown queue", _gen(queue="nope"), f"{G}.queue", ["unknown queue 'nope'"]),
    ("duration scale zero", _gen(duration_scale=0), f"{G}.duration_scale", ["greater than 0"]),
    ("negative floor", _gen(min_task_s=-1), f"{G}.min_task_s", ["greater than or equal to 0"]),
    (
        "negative spread",
        _gen(duration_spread=-0.1),
        f"{G}.duration_spread",
        ["greater than or equal to 0"],
    ),
    ("negative start", _gen(start_s=-5), f"{G}.start_s", ["greater than or equal to 0"]),
    ("negative gap", _gen(interarrival_s=-1), f"{G}.interarrival_s", ["greater than or equal"]),
    ("gap as text", _gen(interarrival_s="20"), f"{G}.interarrival_s", ["must be a number", "'20'"]),
    (
        "gap distribution unknown",
        _gen(interarrival_s={"dist": "gamma"}),
        f"{G}.interarrival_s",
        ["unknown distribution 'gamma'"],
    ),
    (
        "gap distribution parameter",
        _gen(interarrival_s={"dist": "exponential", "mean": 0}),
        f"{G}.interarrival_s.mean",
        ["greater than 0"],
    ),
    (
        "gap distribution typo",
        _gen(interarrival_s={"dist": "exponential", "maen": 2}),
        f"{G}.interarrival_s.maen",
        ["unknown field", "'mean'"],
    ),
    ("resources a number", _gen(resources=4), f"{G}.resources", ["mapping of resource names"]),
    ("resources empty", _gen(resources={}), f"{G}.resources", ["at least 1"]),
    (
        "resource name",
        _gen(resources={"VCores": 1}),
        f"{G}.resources",
        ["'VCores'", "lower_snake_case"],
    ),
    (
        "negative choice",
        _gen(resources={"vcores": [1, -2]}),
        f"{G}.resources.vcores[1]",
        ["greater than or equal to 0"],
    ),
    (
        "demand fits no node",
        _gen(resources={"vcores": [64]}),
        f"{G}.resources",
        ["drew vcores=64", "fits no node", "vcores=20"],
    ),
    (
        "shape weight zero",
        _gen(resources=[{"weight": 0, "resources": {"vcores": 1}}]),
        f"{G}.resources[0].weight",
        ["greater than 0"],
    ),
    (
        "shape typo",
        _gen(resources=[{"wieght": 1, "resources": {"vcores": 1}}]),
        f"{G}.resources[0].wieght",
        ["unknown field", "'weight'"],
    ),
    (
        "shape too large",
        _gen(resources=[{"resources": {"vcores": 1}}, {"resources": {"gpu": 1}}]),
        f"{G}.resources[1].resources",
        ["fits no node"],
    ),
]


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [pytest.param(m, f, w, id=i) for i, m, f, w in WORKLOAD_ERRORS],
)
def test_bad_tpch_generators(
    tmp_path: Path, mutate: Mutation, field: str, words: list[str]
) -> None:
    doc = copy.deepcopy(tpch_doc())
    mutate(doc)
    path = write(tmp_path, doc)
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path))
    err = info.value
    if not TRACE.is_file() and str(TRACE) in err.message:
        pytest.skip(TRACE_ABSENT)  # this mistake is found once the trace is read
    assert (err.source, err.field) == (str(path), field), str(err)
    for word in words:
        assert word in err.message, str(err)
    assert "\n" not in str(err)


def test_default_demands_that_fit_no_node_say_so(tmp_path: Path) -> None:
    doc = dag_doc()
    doc["cluster"] = {"nodes": [{"resources": {"vcores": 2, "memory_mb": 4096}}]}
    path = write(tmp_path, doc)
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path))
    assert info.value.field == "generators[0].resources"
    assert "fits no node" in info.value.message
    assert info.value.message.endswith("(default demands: set resources)")


@needs_trace
def test_generated_names_that_clash_ask_for_a_name(tmp_path: Path) -> None:
    doc = tpch_doc(count=2, scales=["2g"], queries=[6], interarrival_s=0)
    doc["generators"].append(copy.deepcopy(doc["generators"][0]))
    path = write(tmp_path, doc)
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path))
    assert info.value.field == "generators[1].name"
    assert "duplicate job name 'tpch-2g-q6-1'" in info.value.message
    doc["generators"][1]["name"] = "again"
    assert len(load(tmp_path, doc).jobs) == 4


# TPC-H: errors in the trace ----------------------------------------------------------


def small_trace() -> dict[str, Any]:
    return {
        "2g/q3": {
            "num_stages": 3,
            "num_edges": 2,
            "stages": [
                {"stage": 0, "num_tasks": 4, "mean_task_ms": 1500.0, "parents": []},
                {"stage": 1, "num_tasks": 2, "mean_task_ms": 800, "parents": []},
                {"stage": 2, "num_tasks": 1, "mean_task_ms": 300.5, "parents": [0, 1]},
            ],
        }
    }


def _stage(i: int, **changes: Any) -> Callable[[dict[str, Any]], None]:
    def apply(trace: dict[str, Any]) -> None:
        stage = trace["2g/q3"]["stages"][i]
        for key, value in changes.items():
            if value is _DELETE:
                del stage[key]
            else:
                stage[key] = value

    return apply


def _query(**changes: Any) -> Callable[[dict[str, Any]], None]:
    def apply(trace: dict[str, Any]) -> None:
        for key, value in changes.items():
            if value is _DELETE:
                del trace["2g/q3"][key]
            else:
                trace["2g/q3"][key] = value

    return apply


def _add(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda trace: trace.update({key: value})


def _not_an_object(trace: dict[str, Any]) -> None:
    trace["2g/q3"]["stages"][1] = 5


def _cycle(trace: dict[str, Any]) -> None:
    trace["2g/q3"]["stages"][0]["parents"] = [2]
    trace["2g/q3"]["num_edges"] = 3


Q = "2g/q3.stages"
TRACE_ERRORS: list[tuple[str, Callable[[dict[str, Any]], None], str | None, list[str]]] = [
    ("bad key", _add("2g-q4", {}), "2g-q4", ["'<scale>/q<n>'"]),
    ("query number zero", _add("2g/q0", {}), "2g/q0", ["'<scale>/q<n>'"]),
    ("query not an object", _add("2g/q4", [1]), "2g/q4", ["JSON object", "a list"]),
    ("stages missing", _query(stages=_DELETE), Q, ["required"]),
    ("stages not a list", _query(stages={}), Q, ["expected a list", "an object"]),
    ("no stages", _query(stages=[], num_stages=0, num_edges=0), Q, ["at least one stage"]),
    ("stage not an object", _not_an_object, f"{Q}[1]", ["JSON object", "a number"]),
    ("stage id missing", _stage(1, stage=_DELETE), f"{Q}[1].stage", ["required"]),
    ("stage id negative", _stage(1, stage=-1), f"{Q}[1].stage", ["whole number >= 0", "-1"]),
    ("duplicate stage id", _stage(2, stage=0), f"{Q}[2].stage", ["duplicate stage 0"]),
    ("tasks zero", _stage(0, num_tasks=0), f"{Q}[0].num_tasks", ["whole number >= 1"]),
    ("tasks fractional", _stage(0, num_tasks=2.5), f"{Q}[0].num_tasks", ["2.5"]),
    ("tasks as text", _stage(0, num_tasks="4"), f"{Q}[0].num_tasks", ["'4'"]),
    ("tasks a boolean", _stage(0, num_tasks=True), f"{Q}[0].num_tasks", ["True"]),
    ("duration missing", _stage(1, mean_task_ms=_DELETE), f"{Q}[1].mean_task_ms", ["required"]),
    ("duration negative", _stage(1, mean_task_ms=-3), f"{Q}[1].mean_task_ms", [">= 0"]),
    ("duration not finite", _stage(1, mean_task_ms=float("inf")), f"{Q}[1].mean_task_ms", ["inf"]),
    ("parents not a list", _stage(2, parents=0), f"{Q}[2].parents", ["expected a list"]),
    ("unknown parent", _stage(2, parents=[0, 7]), f"{Q}[2].parents[1]", ["no stage 7"]),
    ("parent as text", _stage(2, parents=["0"]), f"{Q}[2].parents[0]", ["'0'"]),
    ("own parent", _stage(2, parents=[2]), f"{Q}[2].parents[0]", ["own parent"]),
    ("parent twice", _stage(2, parents=[0, 0]), f"{Q}[2].parents[1]", ["listed twice"]),
    ("cycle", _cycle, Q, ["cycle", "0 -> 2 -> 0"]),
    ("stage count wrong", _query(num_stages=4), "2g/q3.num_stages", ["says 4", "3 stages"]),
    ("edge count wrong", _query(num_edges=1), "2g/q3.num_edges", ["says 1", "2 edges"]),
    ("edge count text", _query(num_edges="2"), "2g/q3.num_edges", ["whole number"]),
]


def tpch_workload(tmp_path: Path, trace_text: str) -> Path:
    trace = tmp_path / "trace.json"
    trace.write_text(trace_text, encoding="utf-8")
    return write(tmp_path, tpch_doc(path="trace.json", scales=None, queries=None, count=2))


def test_the_small_trace_fixture_is_valid(tmp_path: Path) -> None:
    w = load_workload(str(tpch_workload(tmp_path, json.dumps(small_trace()))))
    assert [j.name for j in w.jobs] == ["tpch-2g-q3-1", "tpch-2g-q3-2"]
    assert w.jobs[0].stages[2].durations == (0.3,)  # 300.5 ms at millisecond resolution


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [pytest.param(m, f, w, id=i) for i, m, f, w in TRACE_ERRORS],
)
def test_bad_traces_name_the_trace_and_key_path(
    tmp_path: Path, mutate: Callable[[dict[str, Any]], None], field: str, words: list[str]
) -> None:
    trace = small_trace()
    mutate(trace)
    path = tpch_workload(tmp_path, json.dumps(trace))
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path))
    err = info.value
    assert (err.source, err.field) == (str(tmp_path / "trace.json"), field), str(err)
    for word in words:
        assert word in err.message, str(err)
    assert "\n" not in str(err)


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("", "line 1", "invalid JSON"),
        ('{"2g/q1": {"stages": [\n  {"stage": 0,, }]}}', "line 2", "invalid JSON"),
        ("[1, 2]", None, "JSON object of '<scale>/q<n>' keys, got a list"),
        ("{}", None, "no queries"),
        ('{"2g/q1": {"stages": []}, "2g/q1": {}}', None, "duplicate key '2g/q1'"),
    ],
    ids=["empty", "syntax", "top-level list", "no queries", "duplicate key"],
)
def test_malformed_trace_files(tmp_path: Path, text: str, field: str | None, words: str) -> None:
    path = tpch_workload(tmp_path, text)
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path))
    assert (info.value.source, info.value.field) == (str(tmp_path / "trace.json"), field)
    assert words in info.value.message


def test_the_trace_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tpch_workload(tmp_path, json.dumps(small_trace()))
    assert load_workload(str(path)).jobs[0].stages[0].tasks == 4
    trace = small_trace()
    trace["2g/q3"]["stages"][0]["num_tasks"] = 40
    (tmp_path / "trace.json").write_text(json.dumps(trace, indent=2), encoding="utf-8")
    assert load_workload(str(path)).jobs[0].stages[0].tasks == 40


# Synthetic DAGs ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def drawn() -> dict[str, list[Any]]:
    rng = random.Random(2016)
    return {name: [draw_dag(shape, rng) for _ in range(2000)] for name, shape in SHAPES.items()}


@pytest.mark.parametrize("name", list(SHAPES))
def test_synthetic_shapes_match_the_carbyne_tables(drawn: dict[str, list[Any]], name: str) -> None:
    shape: DagShape = SHAPES[name]
    dags = drawn[name]
    for attr, target in (
        ("stages", shape.stages),
        ("barriers", shape.barriers),
        ("critical_path", shape.critical_path),
    ):
        values = [getattr(d, attr) for d in dags]
        assert quantile(values, 0.5) == target.p50, attr
        assert abs(quantile(values, 0.95) - target.p95) <= 1, attr  # integer draws near a step
    shares = [d.input_work for d in dags]
    assert quantile(shares, 0.5) == pytest.approx(shape.input_work.p50, abs=0.04)
    assert quantile(shares, 0.95) == pytest.approx(shape.input_work.p95, abs=0.04)


@pytest.mark.parametrize("name", list(SHAPES))
def test_synthetic_dags_are_query_plans(drawn: dict[str, list[Any]], name: str) -> None:
    for dag in drawn[name]:
        parents = dag.parents
        assert all(p < i for i, ps in enumerate(parents) for p in ps)  # parents first
        children = Counter(p for ps in parents for p in ps)
        assert all(children[i] == 1 for i in range(len(parents) - 1))  # one child each
        assert children[len(parents) - 1] == 0  # a single sink, last
        assert max(stage_levels(parents)) == dag.critical_path
        assert (dag.barriers == 0) == (dag.critical_path == dag.stages)  # no join: a chain
        assert 0.01 <= dag.input_work <= 0.99


def test_the_documented_table() -> None:
    assert set(DAG_SHAPES) == set(SHAPES)
    table = {
        n: (s.stages.p50, s.stages.p95, s.barriers.p50, s.barriers.p95) for n, s in SHAPES.items()
    }
    assert table == {"tpcds": (8, 23, 1, 4), "tpch": (8, 12, 2, 4), "bigbench": (7, 19, 2, 6)}
    assert {s.critical_path.p50 for s in SHAPES.values()} == {5}
    work = {n: (s.input_work.p50, s.input_work.p95) for n, s in SHAPES.items()}
    assert work == {"tpcds": (0.11, 0.88), "tpch": (0.46, 0.82), "bigbench": (0.24, 0.70)}


def input_share(job: JobSpec) -> float:
    return sum(s.work_s for s in job.stages if not s.parents) / job.work_s


@pytest.mark.parametrize("shape", list(SHAPES))
def test_dag_generator_jobs_have_the_shape(tmp_path: Path, shape: str) -> None:
    w = load(tmp_path, dag_doc(shape=shape, count=300, tasks_per_stage=1))
    assert sorted(j.name for j in w.jobs) == sorted(f"{shape}-{k}" for k in range(1, 301))
    target = SHAPES[shape]
    stages = [len(j.stages) for j in w.jobs]
    barriers = [sum(len(s.parents) > 1 for s in j.stages) for j in w.jobs]
    levels = [
        max(stage_levels([j.parent_indices[i] for i in range(len(j.stages))])) for j in w.jobs
    ]
    assert abs(quantile(stages, 0.5) - target.stages.p50) <= 1
    assert abs(quantile(barriers, 0.5) - target.barriers.p50) <= 1
    assert abs(quantile(levels, 0.5) - target.critical_path.p50) <= 1
    share = quantile([input_share(j) for j in w.jobs], 0.5)
    assert share == pytest.approx(target.input_work.p50, abs=0.08)


def test_dag_generator_parameters(tmp_path: Path) -> None:
    doc = dag_doc(
        count=40,
        users=["a", "b"],
        tasks_per_stage=[2, 5],
        task_duration_s=30,
        resources={"vcores": 2, "memory_mb": {"dist": "uniform", "low": 1000, "high": 2000}},
        interarrival_s={"dist": "uniform", "low": 1, "high": 3},
        name="ds",
        start_s=10,
    )
    del doc["generators"][0]["user"]
    w = load(tmp_path, doc)
    jobs = sorted(w.jobs, key=lambda j: int(j.name.split("-")[1]))
    assert [j.name for j in jobs] == [f"ds-{k}" for k in range(1, 41)]
    assert [j.user for j in jobs] == ["a", "b"] * 20
    times = [j.submit_s for j in jobs]
    assert times[0] == 10
    assert all(1 <= b - a <= 3 for a, b in itertools.pairwise(times))
    for job in jobs:
        for s in job.stages:
            assert s.tasks in (2, 5)
            assert len(set(s.durations)) == 1  # no spread: every task takes its stage's mean
            assert s.resources["vcores"] == 2
            assert 1000 <= s.resources["memory_mb"] <= 2000
            assert s.resources["memory_mb"] == int(s.resources["memory_mb"])
        # A fixed mean duration, rescaled so that input stages hold the drawn share.
        means = {s.durations[0] for s in job.stages}
        assert len(means) <= 2


def test_dag_generator_is_deterministic(tmp_path: Path) -> None:
    doc = dag_doc(duration_spread=0.4, shape="bigbench")
    first = load(tmp_path, doc)
    assert fingerprint(load(tmp_path, doc)) == fingerprint(first)
    doc["seed"] = 6
    assert fingerprint(load(tmp_path, doc)) != fingerprint(first)


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"shape": "tpcx"}, "shape", ["'tpcds', 'tpch' or 'bigbench'"]),
        ({"shape": None}, "shape", ["required"]),
        ({"tasks_per_stage": 0}, "tasks_per_stage", ["greater than or equal to 1"]),
        ({"tasks_per_stage": [2, 0]}, "tasks_per_stage[1]", ["greater than or equal to 1"]),
        ({"tasks_per_stage": 2.5}, "tasks_per_stage", ["integer"]),
        ({"tasks_per_stage": []}, "tasks_per_stage", ["at least 1"]),
        ({"task_duration_s": 0}, "task_duration_s", ["greater than 0"]),
        ({"task_duration_s": {"mu": 1}}, "task_duration_s", ["'dist'"]),
        (
            {"task_duration_s": {"dist": "uniform", "low": 3, "high": 2}},
            "task_duration_s",
            ["high (2) must be >= low (3)"],
        ),
        ({"tasks_per_stag": 3}, "tasks_per_stag", ["unknown field", "'tasks_per_stage'"]),
        ({"duration_spread": 9}, "duration_spread", ["less than or equal to 5"]),
    ],
)
def test_bad_dag_generators(
    tmp_path: Path, change: dict[str, Any], field: str, words: list[str]
) -> None:
    doc = dag_doc()
    for key, value in change.items():
        if value is None:
            del doc["generators"][0][key]
        else:
            doc["generators"][0][key] = value
    path = write(tmp_path, doc)
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path))
    err = info.value
    assert (err.source, err.field) == (str(path), f"generators[0].{field}"), str(err)
    for word in words:
        assert word in err.message, str(err)


# Schema, built-in workload and the simulator ------------------------------------------


def test_json_schema_lists_every_generator_kind() -> None:
    schema = workload_json_schema()
    items = schema["properties"]["generators"]["items"]
    assert items["discriminator"]["propertyName"] == "kind"
    assert set(items["discriminator"]["mapping"]) == {"poisson", "closed_loop", "tpch", "dag"}
    tpch = schema["$defs"]["TpchGenerator"]
    assert tpch["additionalProperties"] is False
    assert {"path", "scales", "queries", "duration_scale", "resources"} <= set(tpch["properties"])
    assert tpch["properties"]["resources"]["default"] == DEFAULT_DEMAND
    dag = schema["$defs"]["DagGenerator"]
    assert dag["properties"]["shape"]["enum"] == list(DAG_SHAPES)


def run(w: Workload, policy: str) -> None:
    result = Simulation(
        w,
        registry.build("policies", policy),
        lambda: registry.build("asks", "greedy"),
        policy_name=policy,
    ).run()
    assert result.stalled is None
    assert result.finished == result.jobs == len(w.jobs)


def test_builtin_dags_workload_runs_to_completion() -> None:
    assert "dags" in builtin_workloads()
    w = load_workload("dags")
    assert len(w.users) == 3
    assert len(w.cluster.nodes) == 4
    assert any(sum(len(s.parents) > 1 for s in j.stages) >= 2 for j in w.jobs)  # barriers
    assert (
        len({(s.resources["vcores"], s.resources["memory_mb"]) for j in w.jobs for s in j.stages})
        > 6
    )
    for policy in ("fifo", "drf"):
        run(w, policy)


def test_altruistic_ams_are_never_granted_a_task_twice() -> None:
    # carbyne's AMs move a stage's tasks between its DEFAULT and ALTRUISTIC asks as their
    # plans change; grants the AM has not seen yet count against the stage's ask group, so
    # no container comes back unused (without groups: 32 of 515 on this workload).
    w = load_workload("dags")
    result = Simulation(
        w,
        registry.build("policies", "carbyne"),
        lambda: registry.build("asks", "altruistic"),
        policy_name="carbyne",
    ).run()
    events = Counter(r["event"] for r in result.records)
    assert result.finished == len(w.jobs)
    assert events["container_allocated"] == w.tasks
    assert events["container_released"] == 0
    kinds = Counter(r["kind"] for r in result.records if r["event"] == "container_allocated")
    assert kinds["ALTRUISTIC"] > 0  # the AMs did yield


@needs_trace
def test_tpch_workload_runs_to_completion(tmp_path: Path) -> None:
    doc = tpch_doc(count=4, scales=["2g"], queries=[6, 14], duration_spread=0.3)
    doc["cluster"] = {"nodes": [{"count": 2, "resources": {"vcores": 8, "memory_mb": 16384}}]}
    run(load(tmp_path, doc), "drf")

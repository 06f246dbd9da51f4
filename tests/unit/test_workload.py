"""The YAML workload loader: schema, cross-checks, expansion and built-in workloads."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from treadle.errors import WorkloadError
from treadle.model import Workload
from treadle.workload import (
    MIN_DURATION_S,
    builtin_workloads,
    load_workload,
    parse_workload,
    workload_json_schema,
)

VALID = """
seed: 3
cluster:
  heartbeat_s: 0.5
  nodes:
    - {count: 2, resources: {vcores: 8, memory_mb: 16384}, rack: r1}
    - {count: 1, resources: {vcores: 16, memory_mb: 8192, gpu: 2}, rack: r2, name: gpu}
    - {resources: {vcores: 4, memory_mb: 4096}}
queues:
  - name: prod
    weight: 3
    capacity: 60
    queues:
      - {name: etl, capacity: 70}
      - {name: serving, capacity: 30, max_capacity: 50}
  - {name: dev, weight: 1, capacity: 40, max_capacity: 100}
users:
  alice: {weight: 2, budget: 100}
  bob: {}
jobs:
  - name: late
    user: bob
    queue: dev
    submit_s: 30
    stages:
      - {name: reduce, tasks: 2, duration_s: [3, 4], resources: {vcores: 1, memory_mb: 2048},
         after: [map]}
      - {name: map, tasks: 3, duration_s: 5, resources: {vcores: 1, memory_mb: 1024}}
  - name: early
    user: alice
    queue: etl
    submit_s: 0
    stages:
      - {name: a, tasks: 4, duration_s: {dist: exponential, mean: 5},
         resources: {vcores: 1, memory_mb: 512}}
      - {name: b, tasks: 2, duration_s: {dist: lognormal, mu: 1.0, sigma: 0.5},
         resources: {gpu: 1, vcores: 1}, after: [a]}
      - {name: c, tasks: 2, duration_s: {dist: uniform, low: 1, high: 3},
         resources: {vcores: 2, memory_mb: 512}, after: [a]}
      - {name: d, tasks: 1, duration_s: 1, resources: {vcores: 1}, after: [b, c]}
  - name: tie
    user: zed
    queue: serving
    submit_s: 30
    stages:
      - {name: only, tasks: 1, duration_s: 2, resources: {vcores: 1}}
generators:
  - kind: poisson
    user: carol
    rate_per_min: 16
    count: 6
    start_s: 10
    queue: dev
    name: c
    job:
      stages:
        - {name: s, tasks: 2, duration_s: {dist: exponential, mean: 2},
           resources: {vcores: 1, memory_mb: 1024}}
"""


def base() -> dict[str, Any]:
    doc = yaml.safe_load(VALID)
    assert isinstance(doc, dict)
    return doc


def load(doc: dict[str, Any], source: str = "test.yaml") -> Workload:
    return parse_workload(yaml.safe_dump(doc, sort_keys=False), source)


def fingerprint(w: Workload) -> list[tuple[object, ...]]:
    """Everything drawn from the seed, in a comparable form (JobSpec compares by identity)."""
    return [
        (j.name, j.user, j.queue, j.submit_s, tuple((s.name, s.durations) for s in j.stages))
        for j in w.jobs
    ]


# The valid example ----------------------------------------------------------------


def test_valid_example_builds_the_whole_model() -> None:
    w = load(base())
    assert w.name == "test"
    assert w.seed == 3
    assert w.cluster.heartbeat_s == 0.5
    assert [(n.node_id, n.rack) for n in w.cluster.nodes] == [
        ("node1", "r1"),
        ("node2", "r1"),
        ("gpu1", "r2"),
        ("node3", "default-rack"),
    ]
    assert dict(w.cluster.nodes[2].resources) == {"vcores": 16, "memory_mb": 8192, "gpu": 2}
    assert w.queues.name == "root"
    assert [q.name for q in w.queues.children] == ["prod", "dev"]
    prod = w.queues.children[0]
    assert (prod.weight, prod.capacity, prod.max_capacity) == (3, 60, 100)
    assert [q.name for q in prod.children] == ["etl", "serving"]
    assert prod.children[1].max_capacity == 50
    assert sorted(w.leaf_queues) == ["dev", "etl", "serving"]
    assert w.users["alice"].weight == 2
    assert w.users["alice"].budget == 100
    assert w.users["bob"].weight == 1
    assert w.users["bob"].budget is None
    assert w.user("zed").weight == 1  # unlisted users are allowed, with weight 1


def test_jobs_are_sorted_by_submit_time_then_declaration_order() -> None:
    w = load(base())
    names = [j.name for j in w.jobs]
    assert names[0] == "early"
    assert names.index("late") < names.index("tie")  # same submit time: file order
    assert [j.submit_s for j in w.jobs] == sorted(j.submit_s for j in w.jobs)
    assert len(w.jobs) == 3 + 6


def test_stages_are_put_parents_first_with_their_durations() -> None:
    late = next(j for j in load(base()).jobs if j.name == "late")
    assert [s.name for s in late.stages] == ["map", "reduce"]
    assert late.stages[0].durations == (5.0, 5.0, 5.0)
    assert late.stages[1].durations == (3.0, 4.0)
    assert late.stages[1].parents == ("map",)
    assert dict(late.stages[1].resources) == {"vcores": 1, "memory_mb": 2048}
    early = next(j for j in load(base()).jobs if j.name == "early")
    assert [s.name for s in early.stages] == ["a", "b", "c", "d"]
    assert early.stages[3].parents == ("b", "c")


def test_distributions_respect_their_bounds_and_the_minimum() -> None:
    early = next(j for j in load(base()).jobs if j.name == "early")
    uniform = early.stages[2].durations
    assert len(uniform) == 2
    assert all(1 <= d <= 3 for d in uniform)
    assert all(d >= MIN_DURATION_S for s in early.stages for d in s.durations)
    doc = base()
    doc["jobs"][0]["stages"][1]["duration_s"] = {"dist": "uniform", "low": 0, "high": 0.0001}
    late = next(j for j in load(doc).jobs if j.name == "late")
    assert late.stages[0].name == "map"
    assert late.stages[0].durations == (MIN_DURATION_S,) * 3


def test_same_seed_gives_the_same_workload_and_other_seeds_differ() -> None:
    first, again = load(base()), load(base())
    assert fingerprint(first) == fingerprint(again)
    other = base()
    other["seed"] = 4
    assert fingerprint(load(other)) != fingerprint(first)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(min_value=-(2**31), max_value=2**31))
def test_any_seed_is_deterministic(seed: int) -> None:
    doc = base()
    doc["seed"] = seed
    assert fingerprint(load(doc)) == fingerprint(load(doc))


def test_poisson_generator_makes_count_jobs_with_increasing_submit_times() -> None:
    w = load(base())
    generated = [j for j in w.jobs if j.user == "carol"]
    assert sorted(j.name for j in generated) == [f"c-{k}" for k in range(1, 7)]
    by_k = sorted(generated, key=lambda j: int(j.name.split("-")[1]))
    times = [j.submit_s for j in by_k]
    assert times == sorted(times)
    assert len(set(times)) == len(times)
    assert times[0] > 10  # the first arrival is one gap after start_s
    assert all(j.queue == "dev" and j.stages[0].tasks == 2 for j in generated)


def test_generator_names_default_to_the_user_and_queue_may_sit_in_the_template() -> None:
    doc = base()
    gen = doc["generators"][0]
    del gen["name"], gen["queue"]
    gen["job"]["queue"] = "etl"
    generated = [j for j in load(doc).jobs if j.user == "carol"]
    assert {j.name for j in generated} == {f"carol-{k}" for k in range(1, 7)}
    assert {j.queue for j in generated} == {"etl"}


def test_defaults_single_default_queue_and_default_rack() -> None:
    text = """
cluster: {nodes: [{resources: {vcores: 2}}]}
jobs:
  - {name: j, user: u, stages: [{name: s, tasks: 1, duration_s: 1, resources: {vcores: 1}}]}
"""
    w = parse_workload(text, "mini.yml")
    assert w.name == "mini"
    assert w.seed == 0
    assert w.cluster.heartbeat_s == 1.0
    assert [q.name for q in w.queues.walk()] == ["root", "default"]
    assert w.jobs[0].queue == "default"
    assert w.jobs[0].submit_s == 0
    assert w.cluster.nodes[0].node_id == "node1"
    assert w.cluster.nodes[0].rack == "default-rack"


# Errors: (id, change to the valid document, field, words in the message) -------------

Mutation = Callable[[dict[str, Any]], None]


def _walk(doc: dict[str, Any], path: str) -> tuple[Any, str | int]:
    """The container and key that a dotted path with ``[i]`` indices points at."""
    keys: list[str | int] = []
    for part in path.split("."):
        name, _, index = part.partition("[")
        keys.append(name)
        if index:
            keys.append(int(index.rstrip("]")))
    target: Any = doc
    for key in keys[:-1]:
        target = target[key]
    return target, keys[-1]


def _set(path: str, value: object) -> Mutation:
    def apply(doc: dict[str, Any]) -> None:
        target, key = _walk(doc, path)
        target[key] = value

    return apply


def _delete(path: str) -> Mutation:
    def apply(doc: dict[str, Any]) -> None:
        target, key = _walk(doc, path)
        del target[key]

    return apply


def _chain(*steps: Mutation) -> Mutation:
    def apply(doc: dict[str, Any]) -> None:
        for step in steps:
            step(doc)

    return apply


S0 = "jobs[0].stages[0]"
ERROR_CASES: list[tuple[str, Mutation, str | None, list[str]]] = [
    ("unknown top-level field", _set("jobz", []), "jobz", ["unknown field", "'jobs'"]),
    (
        "misspelt stage field",
        _chain(_set(f"{S0}.durations", 5), _delete(f"{S0}.duration_s")),
        f"{S0}.durations",
        ["unknown field", "'duration_s'"],
    ),
    ("unknown node field", _set("cluster.nodes[0].cpus", 3), "cluster.nodes[0].cpus", ["unknown"]),
    ("missing cluster", _delete("cluster"), "cluster", ["required"]),
    ("missing stage tasks", _delete(f"{S0}.tasks"), f"{S0}.tasks", ["required"]),
    (
        "negative resource",
        _set(f"{S0}.resources.vcores", -1),
        f"{S0}.resources.vcores",
        ["greater than or equal to 0"],
    ),
    (
        "infinite resource",
        _set(f"{S0}.resources.memory_mb", float("inf")),
        f"{S0}.resources.memory_mb",
        ["finite"],
    ),
    (
        "resource name not snake case",
        _set(f"{S0}.resources", {"VCores": 1}),
        f"{S0}.resources",
        ["lower_snake_case"],
    ),
    ("all-zero resources", _set(f"{S0}.resources", {"vcores": 0}), f"{S0}.resources", ["positive"]),
    (
        "negative node resource",
        _set("cluster.nodes[1].resources.gpu", -2),
        "cluster.nodes[1].resources.gpu",
        ["greater than or equal to 0"],
    ),
    (
        "node with no resources",
        _set("cluster.nodes[0].resources", {}),
        "cluster.nodes[0].resources",
        ["positive"],
    ),
    (
        "task larger than every node",
        _set(f"{S0}.resources", {"vcores": 9, "memory_mb": 16384}),
        f"{S0}.resources",
        ["fits no node", "largest node has gpu=2, memory_mb=16384, vcores=16"],
    ),
    (
        "task fits no single node though the sum of largest dimensions covers it",
        _set(f"{S0}.resources", {"vcores": 9, "memory_mb": 9000}),
        f"{S0}.resources",
        ["fits no node"],
    ),
    ("tasks zero", _set(f"{S0}.tasks", 0), f"{S0}.tasks", ["greater than or equal to 1"]),
    ("tasks not an integer", _set(f"{S0}.tasks", 2.5), f"{S0}.tasks", ["integer"]),
    ("tasks a boolean", _set(f"{S0}.tasks", True), f"{S0}.tasks", ["integer"]),
    (
        "duration list length mismatch",
        _set(f"{S0}.duration_s", [1, 2, 3]),
        f"{S0}.duration_s",
        ["3 values", "2 tasks"],
    ),
    (
        "duration list negative",
        _set(f"{S0}.duration_s", [1, -2]),
        f"{S0}.duration_s[1]",
        ["greater than 0"],
    ),
    ("zero duration", _set(f"{S0}.duration_s", 0), f"{S0}.duration_s", ["greater than 0"]),
    (
        "duration as a string",
        _set(f"{S0}.duration_s", "5"),
        f"{S0}.duration_s",
        ["positive number"],
    ),
    (
        "unknown distribution",
        _set(f"{S0}.duration_s", {"dist": "gamma", "k": 2}),
        f"{S0}.duration_s",
        ["unknown distribution 'gamma'", "exponential, lognormal, uniform"],
    ),
    (
        "distribution without dist",
        _set(f"{S0}.duration_s", {"mean": 2}),
        f"{S0}.duration_s",
        ["'dist'"],
    ),
    (
        "distribution with an unknown parameter",
        _set(f"{S0}.duration_s", {"dist": "exponential", "mean": 2, "sd": 1}),
        f"{S0}.duration_s.sd",
        ["unknown field"],
    ),
    (
        "exponential with a negative mean",
        _set(f"{S0}.duration_s", {"dist": "exponential", "mean": -1}),
        f"{S0}.duration_s.mean",
        ["greater than 0"],
    ),
    (
        "uniform with high below low",
        _set(f"{S0}.duration_s", {"dist": "uniform", "low": 3, "high": 2}),
        f"{S0}.duration_s",
        ["high (2) must be >= low (3)"],
    ),
    (
        "lognormal with negative sigma",
        _set(f"{S0}.duration_s", {"dist": "lognormal", "mu": 1, "sigma": -1}),
        f"{S0}.duration_s.sigma",
        ["greater than or equal to 0"],
    ),
    (
        "unknown parent stage",
        _set(f"{S0}.after", ["nope"]),
        f"{S0}.after",
        ["unknown stage 'nope'"],
    ),
    (
        "parent listed twice",
        _set("jobs[0].stages[0].after", ["map", "map"]),
        f"{S0}.after",
        ["listed twice"],
    ),
    (
        "stage depends on itself",
        _set("jobs[0].stages[1].after", ["map"]),
        "jobs[0].stages",
        ["cycle", "map -> map"],
    ),
    (
        "dag cycle",
        _set("jobs[1].stages[0].after", ["d"]),
        "jobs[1].stages",
        ["cycle", "a", "d"],
    ),
    (
        "duplicate stage name",
        _set("jobs[1].stages[2].name", "b"),
        "jobs[1].stages[2].name",
        ["duplicate stage name 'b'"],
    ),
    ("duplicate job name", _set("jobs[2].name", "late"), "jobs[2].name", ["duplicate job name"]),
    (
        "generated job name clashes with a job",
        _set("jobs[2].name", "c-3"),
        "generators[0].name",
        ["duplicate job name 'c-3'"],
    ),
    ("stage name with spaces", _set(f"{S0}.name", "my stage"), f"{S0}.name", ["without spaces"]),
    (
        "unknown queue",
        _set("jobs[0].queue", "nope"),
        "jobs[0].queue",
        ["unknown queue 'nope'", "leaf queues: etl, serving, dev"],
    ),
    ("job in a parent queue", _set("jobs[0].queue", "prod"), "jobs[0].queue", ["child queues"]),
    (
        "job with no queue and no default queue",
        _delete("jobs[0].queue"),
        "jobs[0].queue",
        ["no queue given and none is 'default'"],
    ),
    (
        "duplicate queue name",
        _set("queues[1].name", "etl"),
        "queues[1].name",
        ["duplicate queue name 'etl'"],
    ),
    ("queue named root", _set("queues[1].name", "root"), "queues[1].name", ["'root'"]),
    ("capacities over 100", _set("queues[1].capacity", 50), "queues", ["110%"]),
    (
        "child capacities over 100",
        _set("queues[0].queues[1].capacity", 31),
        "queues[0].queues",
        ["101%"],
    ),
    (
        "capacity over 100 percent",
        _set("queues[1].capacity", 140),
        "queues[1].capacity",
        ["less than or equal to 100"],
    ),
    (
        "capacity above max capacity",
        _set("queues[0].queues[1].max_capacity", 20),
        "queues[0].queues[1].capacity",
        ["exceeds max_capacity 20"],
    ),
    ("queue weight zero", _set("queues[0].weight", 0), "queues[0].weight", ["greater than 0"]),
    ("empty queue list", _set("queues", []), "queues", ["at least 1"]),
    ("user weight zero", _set("users.alice.weight", 0), "users.alice.weight", ["greater than 0"]),
    (
        "negative budget",
        _set("users.alice.budget", -5),
        "users.alice.budget",
        ["greater than or equal to 0"],
    ),
    (
        "unknown user field",
        _set("users.bob.wieght", 2),
        "users.bob.wieght",
        ["unknown field", "'weight'"],
    ),
    (
        "heartbeat zero",
        _set("cluster.heartbeat_s", 0),
        "cluster.heartbeat_s",
        ["greater than or equal to 0.001"],
    ),
    ("no nodes", _set("cluster.nodes", []), "cluster.nodes", ["at least 1"]),
    (
        "node count zero",
        _set("cluster.nodes[0].count", 0),
        "cluster.nodes[0].count",
        ["greater than or equal to 1"],
    ),
    (
        "node ids collide",
        _chain(_set("cluster.nodes[0].count", 11), _set("cluster.nodes[1].name", "node1")),
        "cluster.nodes[1].name",
        ["'node11' is already taken"],
    ),
    (
        "negative submit time",
        _set("jobs[0].submit_s", -1),
        "jobs[0].submit_s",
        ["greater than or equal to 0"],
    ),
    ("job without stages", _set("jobs[0].stages", []), "jobs[0].stages", ["at least 1"]),
    ("seed not an integer", _set("seed", "x"), "seed", ["integer"]),
    (
        "unknown generator kind",
        _set("generators[0].kind", "burst"),
        "generators[0].kind",
        ["'poisson'", "'burst'"],
    ),
    (
        "generator rate zero",
        _set("generators[0].rate_per_min", 0),
        "generators[0].rate_per_min",
        ["greater than 0"],
    ),
    (
        "generator count zero",
        _set("generators[0].count", 0),
        "generators[0].count",
        ["greater than or equal to 1"],
    ),
    (
        "generator template with an unknown parent",
        _set("generators[0].job.stages[0].after", ["x"]),
        "generators[0].job.stages[0].after",
        ["unknown stage 'x'"],
    ),
    (
        "generator template with a misspelt field",
        _set("generators[0].job.stagez", []),
        "generators[0].job.stagez",
        ["unknown field", "'stages'"],
    ),
    (
        "generator template task too large",
        _set("generators[0].job.stages[0].resources", {"gpu": 3}),
        "generators[0].job.stages[0].resources",
        ["fits no node"],
    ),
    (
        "generator and template queues disagree",
        _set("generators[0].job.queue", "etl"),
        "generators[0].job.queue",
        ["conflicts", "'dev'"],
    ),
    (
        "generator in a parent queue",
        _set("generators[0].queue", "prod"),
        "generators[0].queue",
        ["child queues"],
    ),
    ("no jobs at all", _chain(_set("jobs", []), _set("generators", [])), None, ["no jobs"]),
]


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [pytest.param(m, f, w, id=i) for i, m, f, w in ERROR_CASES],
)
def test_invalid_documents_raise_workload_errors(
    mutate: Mutation, field: str | None, words: list[str]
) -> None:
    doc = copy.deepcopy(base())
    mutate(doc)
    with pytest.raises(WorkloadError) as info:
        load(doc, "bad.yaml")
    err = info.value
    assert err.source == "bad.yaml"
    assert err.field == field, str(err)
    for word in words:
        assert word in err.message, str(err)
    assert "\n" not in str(err)
    assert str(err).startswith(f"bad.yaml: {field}: " if field else "bad.yaml: ")


YAML_TEXT_CASES = [
    ("unclosed flow list", "cluster:\n  nodes: [\n  - a: b: c\n", "line 3", "invalid YAML"),
    ("tab indentation", "cluster:\n\tnodes: []\n", "line 2", "invalid YAML"),
    ("unclosed list at the end", "seed: 1\njobs: [\nfoo: bar\n", "line 4", "invalid YAML"),
    ("duplicate key", "seed: 1\ncluster: {}\nseed: 2\n", "line 3", "duplicate key 'seed'"),
    ("empty file", "", None, "empty"),
    ("only a comment", "# nothing here\n", None, "empty"),
    ("top level list", "- 1\n- 2\n", None, "mapping"),
    ("top level scalar", "hello\n", None, "mapping"),
]


@pytest.mark.parametrize(
    ("text", "field", "words"), [pytest.param(t, f, w, id=i) for i, t, f, w in YAML_TEXT_CASES]
)
def test_malformed_yaml_names_the_line(text: str, field: str | None, words: str) -> None:
    with pytest.raises(WorkloadError) as info:
        parse_workload(text, "broken.yaml")
    assert info.value.field == field
    assert words in info.value.message
    assert "\n" not in str(info.value)


def test_yaml_error_in_a_real_document_names_its_line() -> None:
    lines = VALID.splitlines()
    bad = lines.index("    user: bob")
    lines[bad] = "    user: bob: builder"
    with pytest.raises(WorkloadError) as info:
        parse_workload("\n".join(lines), "broken.yaml")
    assert info.value.field == f"line {bad + 1}"
    assert "mapping values are not allowed here" in info.value.message


def test_yaml_anchors_and_merge_keys_are_not_duplicates() -> None:
    text = """
cluster: {nodes: [{resources: {vcores: 2}}]}
jobs:
  - name: j
    user: u
    stages:
      - &scan {name: a, tasks: 2, duration_s: 1, resources: {vcores: 1}}
      - {<<: *scan, name: b, after: [a]}
"""
    (job,) = parse_workload(text, "anchors.yaml").jobs
    assert [(s.name, s.tasks, s.parents) for s in job.stages] == [("a", 2, ()), ("b", 2, ("a",))]


# Files and built-ins -----------------------------------------------------------------


def test_load_workload_reads_a_file_and_names_it_after_the_stem(tmp_path: Path) -> None:
    path = tmp_path / "my-exp.yml"
    path.write_text(VALID, encoding="utf-8")
    w = load_workload(str(path))
    assert w.name == "my-exp"
    assert len(w.jobs) == 9
    assert fingerprint(load_workload(str(path), "yaml")) == fingerprint(w)


def test_load_workload_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(VALID.replace("tasks: 3", "tasks: 0"), encoding="utf-8")
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path))
    assert info.value.source == str(path)
    assert info.value.field == "jobs[0].stages[1].tasks"


@pytest.mark.parametrize(
    ("name", "content", "fmt", "nodes", "words"),
    [
        pytest.param("absent.yaml", None, None, None, "no such file", id="missing file"),
        pytest.param("w.txt", "seed: 1", None, None, "cannot tell the format", id="bad suffix"),
        pytest.param("w.yaml", VALID, "csv", None, "unknown format 'csv'", id="bad format"),
        pytest.param("w.yaml", VALID, None, "n.json", "nodes file", id="nodes file with yaml"),
        pytest.param("w.yaml", b"\xff\xfe", None, None, "not UTF-8", id="not utf-8"),
    ],
)
def test_load_workload_rejects_bad_arguments(
    tmp_path: Path,
    name: str,
    content: str | bytes | None,
    fmt: str | None,
    nodes: str | None,
    words: str,
) -> None:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path), fmt, nodes_file=nodes)
    assert words in info.value.message


def test_unknown_name_lists_the_builtins() -> None:
    with pytest.raises(WorkloadError) as info:
        load_workload("nosuchworkload")
    assert "demo" in info.value.message


def test_builtin_workloads_are_listed_with_descriptions() -> None:
    builtins = builtin_workloads()
    assert {"demo", "tiny"} <= set(builtins)
    assert all(desc and "\n" not in desc and not desc.startswith("#") for desc in builtins.values())
    with pytest.raises(WorkloadError):
        load_workload("demo", "sls")


def test_demo_workload_has_the_promised_shape() -> None:
    w = load_workload("demo")
    assert w.name == "demo"
    assert len(w.cluster.nodes) == 4
    assert len({n.rack for n in w.cluster.nodes}) == 2
    assert len({u.weight for u in w.users.values()}) == 3
    assert len(w.leaf_queues) >= 2
    assert 12 <= len(w.jobs) <= 20
    assert any(len(s.parents) >= 4 for j in w.jobs for s in j.stages)  # wide fan-in
    assert any(j.name.startswith("dash-") for j in w.jobs)  # the generator ran
    assert all(w.cluster.fits_some_node(s.resources) for j in w.jobs for s in j.stages)
    # Rough size check: the busiest resource alone needs a few hundred seconds.
    cap = w.cluster.capacity
    busiest = max(
        sum(s.resources[r] * s.work_s for j in w.jobs for s in j.stages) / cap[r] for r in cap
    )
    assert 200 <= busiest <= 500
    assert fingerprint(load_workload("demo")) == fingerprint(w)


def test_tiny_workload_loads() -> None:
    w = load_workload("tiny")
    assert len(w.cluster.nodes) == 1
    assert len(w.jobs) == 2


def test_json_schema_describes_the_format() -> None:
    schema = workload_json_schema()
    assert schema["additionalProperties"] is False
    assert {"seed", "cluster", "queues", "users", "jobs", "generators"} <= set(schema["properties"])
    assert schema["required"] == ["cluster"]
    stage = schema["$defs"]["StageFile"]
    assert stage["additionalProperties"] is False
    assert "oneOf" in stage["properties"]["duration_s"]

"""Alone-JCT references: equal to one simulation per distinct shape, whatever the workers
and the on-disk cache; a second run with the cache simulates nothing; a change of code,
cluster or settings misses; a bad entry is recomputed."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, UserSpec, Workload
from treadle.registry import build, factory
from treadle.resources import Resources
from treadle.sim import Simulation
from treadle.study import alone_cache, runner
from treadle.study.alone_cache import AloneCache
from treadle.study.runner import RunOptions, alone_jcts
from treadle.workload import load_workload

NO_CACHE = RunOptions(alone_cache=False)
DEFAULT = RunOptions()


def simulated(workload: Workload, options: RunOptions = DEFAULT) -> dict[str, float]:
    """The references as computed before any caching: each distinct shape's first job
    simulated alone on the full cluster, one after another."""
    out: dict[str, float] = {}
    seen: dict[Any, float] = {}
    for job in workload.jobs:
        shape = tuple((s.name, s.resources, s.durations, s.parents) for s in job.stages)
        if shape not in seen:
            alone = replace(
                workload, name=f"{workload.name}:{job.name}", jobs=(replace(job, submit_s=0.0),)
            )
            sim = Simulation(
                alone,
                build("policies", "fifo"),
                factory("asks", "greedy"),
                policy_name="fifo",
                am_interval_s=options.am_interval_s,
                stall_s=options.stall_s,
                phase_seed=options.phase_seed,
            )
            finish = [r["t"] for r in sim.run().records if r["event"] == "job_finished"]
            seen[shape] = finish[0] if finish else float("nan")
        out[job.name] = seen[shape]
    return out


def synthetic(nodes: int = 12, jobs: int = 40, seed: int = 3, heartbeat_s: float = 1.0) -> Workload:
    rng = random.Random(seed)
    sizes = [Resources(vcores=4, memory_mb=8192), Resources(vcores=8, memory_mb=16384)]
    cluster = ClusterSpec(
        tuple(NodeSpec(f"n{i}", sizes[i % 2], rack=f"r{i % 3}") for i in range(nodes)),
        heartbeat_s=heartbeat_s,
    )
    out = []
    for n in range(jobs):
        stages = [
            StageSpec(
                "a",
                Resources(vcores=1, memory_mb=1024 * rng.randint(1, 3)),
                tuple(round(rng.uniform(5, 40), 3) for _ in range(rng.randint(1, 30))),
            )
        ]
        if n % 3 == 0:
            stages.append(
                StageSpec(
                    "b",
                    Resources(vcores=2, memory_mb=2048),
                    tuple(float(rng.randint(3, 20)) for _ in range(rng.randint(1, 6))),
                    ("a",),
                )
            )
        if n % 7 == 0 and n:
            stages = [replace(s) for s in out[0].stages]  # a repeated shape
        out.append(JobSpec(f"j{n}", f"u{n % 3}", float(n), tuple(stages)))
    users = {f"u{i}": UserSpec(f"u{i}") for i in range(3)}
    return Workload("synthetic", cluster, tuple(out), users=users, seed=seed)


def same(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a
    )


@pytest.fixture
def count(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The jobs whose reference was simulated (in this process: workers=1)."""
    calls: list[str] = []
    real = runner._simulated_reference

    def counting(workload: Workload, job: JobSpec, options: RunOptions) -> float:
        calls.append(job.name)
        return real(workload, job, options)

    monkeypatch.setattr(runner, "_simulated_reference", counting)
    return calls


WORKLOADS = ["demo", "dags", "tiny"]


@pytest.mark.parametrize("name", WORKLOADS)
def test_built_in_workloads_match_the_simulation(name: str, tmp_path: Path) -> None:
    wl = load_workload(name)
    expected = simulated(wl)
    assert same(alone_jcts(wl, NO_CACHE, workers=1), expected)
    cache = AloneCache(tmp_path)
    assert same(alone_jcts(wl, workers=1, cache=cache), expected)  # cold
    assert same(alone_jcts(wl, workers=1, cache=cache), expected)  # warm


@pytest.mark.parametrize(
    "options", [RunOptions(), RunOptions(phase_seed=5), RunOptions(am_interval_s=0.7)]
)
def test_synthetic_shapes_match_the_simulation(options: RunOptions, tmp_path: Path) -> None:
    wl = synthetic()
    expected = simulated(wl, options)
    assert same(alone_jcts(wl, replace(options, alone_cache=False), workers=1), expected)
    cache = AloneCache(tmp_path)
    for _ in range(2):
        assert same(alone_jcts(wl, options, workers=1, cache=cache), expected)


def test_worker_processes_give_the_same_references() -> None:
    wl = synthetic(jobs=30)
    expected = simulated(wl)
    assert same(alone_jcts(wl, NO_CACHE, workers=2), expected)
    reversed_wl = replace(wl, jobs=tuple(reversed(wl.jobs)))
    assert same(alone_jcts(reversed_wl, NO_CACHE, workers=3), simulated(reversed_wl))


def test_a_second_run_simulates_nothing(count: list[str], tmp_path: Path) -> None:
    wl = synthetic()
    cache = AloneCache(tmp_path)
    first = alone_jcts(wl, workers=1, cache=cache)
    shapes = len(count)
    assert 0 < shapes < len(wl.jobs)  # one per distinct shape
    second = alone_jcts(wl, workers=1, cache=cache)
    assert len(count) == shapes
    assert same(first, second)


def test_the_default_cache_is_under_treadle_cache_dir(
    count: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TREADLE_CACHE_DIR", str(tmp_path))
    wl = load_workload("demo")
    alone_jcts(wl, workers=1)
    assert list((tmp_path / "alone").rglob("*.json"))
    n = len(count)
    alone_jcts(wl, workers=1)
    assert len(count) == n
    alone_jcts(wl, NO_CACHE, workers=1)
    assert len(count) == 2 * n


def changed(wl: Workload, how: str) -> Workload:
    nodes = wl.cluster.nodes
    if how == "count":
        cluster = replace(wl.cluster, nodes=(*nodes, replace(nodes[0], node_id="extra")))
    elif how == "resources":
        bigger = replace(nodes[-1], resources=Resources(vcores=64, memory_mb=8192))
        cluster = replace(wl.cluster, nodes=(*nodes[:-1], bigger))
    elif how == "rack":
        cluster = replace(wl.cluster, nodes=(*nodes[:-1], replace(nodes[-1], rack="elsewhere")))
    elif how == "heartbeat":
        cluster = replace(wl.cluster, heartbeat_s=0.5)
    else:
        return replace(wl, seed=wl.seed + 1)
    return replace(wl, cluster=cluster)


@pytest.mark.parametrize("how", ["count", "resources", "rack", "heartbeat", "seed"])
def test_another_cluster_or_seed_misses(how: str, count: list[str], tmp_path: Path) -> None:
    wl = synthetic()
    cache = AloneCache(tmp_path)
    alone_jcts(wl, workers=1, cache=cache)
    n = len(count)
    other = changed(wl, how)
    assert same(alone_jcts(other, workers=1, cache=cache), simulated(other))
    assert len(count) == 2 * n


@pytest.mark.parametrize(
    "options", [RunOptions(phase_seed=1), RunOptions(am_interval_s=2.0), RunOptions(stall_s=60)]
)
def test_other_reference_settings_miss(
    options: RunOptions, count: list[str], tmp_path: Path
) -> None:
    wl = synthetic()
    cache = AloneCache(tmp_path)
    alone_jcts(wl, workers=1, cache=cache)
    n = len(count)
    alone_jcts(wl, options, workers=1, cache=cache)
    assert len(count) == 2 * n


def test_the_compared_ask_strategy_shares_the_references(count: list[str], tmp_path: Path) -> None:
    """References use greedy AMs whatever the runs use: one set for every strategy."""
    wl = synthetic()
    cache = AloneCache(tmp_path)
    alone_jcts(wl, workers=1, cache=cache)
    n = len(count)
    alone_jcts(wl, RunOptions(ask_strategy="altruistic"), workers=1, cache=cache)
    assert len(count) == n


def test_another_code_version_misses(
    count: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wl = synthetic()
    cache = AloneCache(tmp_path)
    alone_jcts(wl, workers=1, cache=cache)
    n = len(count)
    monkeypatch.setattr(alone_cache, "code_version", lambda: "another-checkout")
    alone_jcts(wl, workers=1, cache=cache)
    assert len(count) == 2 * n


def test_the_code_version_is_the_images_source_digest() -> None:
    from treadle.cluster import docker
    from treadle.registry import source_digest

    assert alone_cache.code_version() == source_digest()
    assert docker.source_digest is source_digest  # one digest names the code everywhere


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"{not json",
        b'{"key": "other", "alone_jct_s": 1.0}',
        b'{"key": 1}',
        b'{"key": "K", "alone_jct_s": "soon"}',
        b"\xff\xfe",
        b"[]",
    ],
)
def test_a_bad_entry_is_recomputed(garbage: bytes, count: list[str], tmp_path: Path) -> None:
    wl = load_workload("demo")
    cache = AloneCache(tmp_path)
    expected = alone_jcts(wl, workers=1, cache=cache)
    n = len(count)
    entries = sorted((tmp_path / "alone").rglob("*.json"))
    victim = entries[0]
    victim.write_bytes(garbage.replace(b"K", victim.stem.encode()))
    assert same(alone_jcts(wl, workers=1, cache=cache), expected)
    assert len(count) == n + 1
    assert cache.get(victim.stem) is not None  # rewritten
    victim.unlink()
    victim.parent.mkdir(exist_ok=True)
    victim.mkdir()  # an entry that cannot even be read as a file
    assert same(alone_jcts(wl, workers=1, cache=cache), expected)


def test_an_unwritable_cache_is_skipped(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = AloneCache(blocker)
    wl = load_workload("demo")
    assert same(alone_jcts(wl, workers=1, cache=cache), simulated(wl))
    assert not cache.writable


def test_nan_references_round_trip(tmp_path: Path) -> None:
    cache = AloneCache(tmp_path)
    cache.put("ab" * 32, float("nan"))
    got = cache.get("ab" * 32)
    assert got is not None
    assert math.isnan(got)


def test_workers_with_another_thread_running_give_the_same_references() -> None:
    """With a thread running (a progress bar), workers come from a fork server."""
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        wl = synthetic(jobs=20)
        assert same(alone_jcts(wl, NO_CACHE, workers=2), simulated(wl))
    finally:
        stop.set()
        thread.join()

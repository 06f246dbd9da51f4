"""The exact alone-JCT rule (``treadle.sim.alone``) gives the simulated reference
wherever it answers: random clusters (mixed node sizes, heartbeat periods, phases, AM
intervals) and random jobs (one stage or a DAG; task counts that fit one round of
heartbeats or not; durations on and off the AM's call times)."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.registry import build, factory
from treadle.resources import Resources
from treadle.sim import Simulation
from treadle.sim.alone import AloneModel

SIZES = [
    Resources(vcores=16, memory_mb=65536),
    Resources(vcores=8, memory_mb=16384),
    Resources(vcores=4, memory_mb=8192.5),
    Resources(vcores=2, memory_mb=4096, gpu=1),
]


def simulated(
    workload: Workload, job: JobSpec, am_interval_s: float | None, phase_seed: int, stall_s: float
) -> float:
    alone = replace(workload, jobs=(replace(job, submit_s=0.0),))
    sim = Simulation(
        alone,
        build("policies", "fifo"),
        factory("asks", "greedy"),
        policy_name="fifo",
        am_interval_s=am_interval_s,
        stall_s=stall_s,
        phase_seed=phase_seed,
    )
    finish = [r["t"] for r in sim.run().records if r["event"] == "job_finished"]
    return float(finish[0]) if finish else math.nan


def durations(rng: random.Random, n: int, am: float) -> tuple[float, ...]:
    how = rng.choice(["uniform", "on-calls", "ties", "zero"])
    if how == "uniform":
        return tuple(round(rng.uniform(0.5, 60), 3) for _ in range(n))
    if how == "on-calls":  # ends that fall on (or next to) the AM's call times
        return tuple(am * rng.randint(0, 40) for _ in range(n))
    if how == "ties":
        return (float(rng.randint(1, 30)),) * n
    return tuple(rng.choice([0.0, 1.0, 2.5]) for _ in range(n))


def task_resources(rng: random.Random) -> Resources:
    return rng.choice(
        [
            Resources(vcores=1, memory_mb=2048),
            Resources(vcores=rng.randint(1, 4), memory_mb=1024 * rng.randint(1, 8)),
            Resources(vcores=1, memory_mb=1000.1),
            Resources(vcores=2, memory_mb=4096, gpu=1),
        ]
    )


def random_case(seed: int) -> tuple[Workload, JobSpec, float | None, int, float]:
    rng = random.Random(seed)
    h = rng.choice([1.0, 1.0, 0.7, 3.0, 0.25])
    sizes = rng.sample(SIZES, rng.randint(1, 3))
    nodes = tuple(
        NodeSpec(f"n{i}", rng.choice(sizes), rack=f"r{i % 2}") for i in range(rng.randint(1, 40))
    )
    am = rng.choice([None, None, 0.7, 1.3, 2.0, h])
    stages = [StageSpec("a", task_resources(rng), durations(rng, rng.randint(1, 90), am or h))]
    if rng.random() < 0.25:  # a DAG: the rule leaves it to the simulator
        stages.append(
            StageSpec("b", task_resources(rng), durations(rng, rng.randint(1, 20), 1.0), ("a",))
        )
    job = JobSpec("j", "u", 0.0, tuple(stages))
    largest = nodes[0].resources
    for n in nodes:
        largest = largest.componentwise_max(n.resources)
    if not all(s.resources.fits_in(largest) for s in stages):
        nodes = (*nodes, NodeSpec("big", Resources(vcores=64, memory_mb=262144, gpu=4)))
    wl = Workload("w", ClusterSpec(nodes, heartbeat_s=h), (job,), seed=rng.randint(0, 99))
    stall = rng.choice([3600.0, 3600.0, 30.0])
    return wl, job, am, rng.randint(0, 3), stall


@pytest.mark.parametrize("chunk", range(4))
def test_the_rule_equals_the_simulation_wherever_it_answers(chunk: int) -> None:
    answered = 0
    for seed in range(chunk * 100, chunk * 100 + 100):
        wl, job, am, phase_seed, stall = random_case(seed)
        model = AloneModel(wl, am_interval_s=am, stall_s=stall, phase_seed=phase_seed)
        got = model.jct(job)
        if got is None:
            continue
        answered += 1
        assert got == simulated(wl, job, am, phase_seed, stall), f"case {seed}"
    assert answered >= 30  # the rule covers most single-stage shapes


def test_the_rule_leaves_dags_and_leftover_tasks_to_the_simulator() -> None:
    nodes = tuple(NodeSpec(f"n{i}", Resources(vcores=4, memory_mb=8192)) for i in range(3))
    wl = Workload("w", ClusterSpec(nodes), (), seed=1)
    model = AloneModel(wl)
    one = StageSpec("a", Resources(vcores=1, memory_mb=1024), (10.0,) * 12)
    assert model.jct(JobSpec("fits", "u", 0.0, (one,))) is not None
    more = replace(one, durations=(10.0,) * 13)  # 13 tasks, 12 slots
    assert model.jct(JobSpec("more", "u", 0.0, (more,))) is None
    dag = (one, StageSpec("b", one.resources, (1.0,), ("a",)))
    assert model.jct(JobSpec("dag", "u", 0.0, dag)) is None

"""The memory benchmark's workload is the issue's: 1,000 nodes of 16 vcores at 80 % load,
jobs of 100 tasks of 25-35 s, and a longer trace is the same load for longer."""

from __future__ import annotations

from tests.benchmarks.bench_memory import workload_yaml
from treadle.workload.loading import parse_workload


def test_the_bench_trace_is_the_issues_shape_and_grows_in_length_only() -> None:
    one = parse_workload(workload_yaml(600.0), "memory-1x.yaml")
    assert len(one.cluster.nodes) == 1000
    assert one.cluster.capacity["vcores"] == 16_000
    assert len(one.jobs) == 2560
    assert one.tasks == 256_000
    durations = [d for j in one.jobs for s in j.stages for d in s.durations]
    assert min(durations) >= 25.0
    assert max(durations) <= 35.0
    # 80 % load: the tasks' vcore-seconds over the arrivals' span, per vcore.
    last = max(j.submit_s for j in one.jobs)
    assert 0.7 < sum(durations) / last / 16_000 < 0.9
    two = parse_workload(workload_yaml(1200.0), "memory-2x.yaml")
    assert two.tasks == 2 * one.tasks
    assert 1.8 < max(j.submit_s for j in two.jobs) / last < 2.2

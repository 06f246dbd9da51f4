"""treadle-lifo's own tests, written with treadle's pytest plugin (installed with
treadle: its fixtures need no import and no conftest.py)."""

from __future__ import annotations

import pytest

from treadle.errors import TreadleError

THREE_JOBS = """
cluster:
  nodes: [{count: 1, resources: {vcores: 2, memory_mb: 4096}}]
jobs:
  - {name: first, user: u, submit_s: 0,
     stages: [{name: s, tasks: 4, duration_s: 10, resources: {vcores: 1, memory_mb: 512}}]}
  - {name: second, user: u, submit_s: 1,
     stages: [{name: s, tasks: 4, duration_s: 10, resources: {vcores: 1, memory_mb: 512}}]}
  - {name: third, user: u, submit_s: 2,
     stages: [{name: s, tasks: 4, duration_s: 10, resources: {vcores: 1, memory_mb: 512}}]}
"""


def test_the_newest_application_is_served_first(treadle_sim):
    # "first" starts alone on both slots; when its first wave ends, the newest job is
    # served before the older ones, "first" included.
    results = treadle_sim(THREE_JOBS, policy="lifo")
    assert results.finish_order() == ["third", "second", "first"]
    assert results.summary["policy"] == "lifo"


def test_newest_first_false_serves_the_oldest_first(treadle_sim):
    results = treadle_sim(THREE_JOBS, policy="lifo", params={"newest_first": False})
    assert results.finish_order() == ["first", "second", "third"]


def test_a_bad_parameter_is_refused_by_name(treadle_sim):
    with pytest.raises(TreadleError, match="newest_first"):
        treadle_sim(THREE_JOBS, policy="lifo", params={"newest_first": "perhaps"})


def test_the_policy_schedules_a_live_cluster_as_simulated(treadle_cluster, treadle_sim):
    cluster = treadle_cluster(THREE_JOBS, policy="lifo", dilation=10)
    live = cluster.run()
    assert live.finished == 3
    assert live.finish_order() == treadle_sim(THREE_JOBS, policy="lifo").finish_order()


def test_a_bad_parameter_fails_before_a_cluster_starts(treadle_cluster):
    with pytest.raises(TreadleError, match="newest_first"):
        treadle_cluster(THREE_JOBS, policy="lifo", params={"newest_first": "perhaps"})

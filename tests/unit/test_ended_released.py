"""What a policy keeps of an application ends with it: after a run of many jobs, no
per-application state of an ended one is left (else memory grows with the trace)."""

from __future__ import annotations

from treadle import event_columns as ec
from treadle.study.runner import PolicyChoice, RunOptions, _simulate, build_policy
from treadle.workload import parse_workload

WORKLOAD = """
seed: 3
cluster:
  nodes:
    - {count: 4, resources: {vcores: 8, memory_mb: 32768}}
users:
  ua: {weight: 1}
  ub: {weight: 2}
generators:
"""
for _u in ("ua", "ub"):
    WORKLOAD += f"""  - kind: poisson
    user: {_u}
    rate_per_min: 30
    count: 40
    job:
      stages:
        - {{name: s0, tasks: 4, resources: {{vcores: 1, memory_mb: 2048}}, duration_s: 3}}
"""


def test_uwfq_forgets_the_ids_of_ended_jobs() -> None:
    wl = parse_workload(WORKLOAD, "ended.yaml")
    choice = PolicyChoice("uwfq", {})
    policy = build_policy(choice)
    log = ec.ColumnarEventLog(lambda table: None, list(wl.cluster.capacity))
    _simulate(wl, choice, RunOptions(), None, {}, log, policy)
    users = [*policy.clock.active.values(), *policy.clock.historic.values()]
    assert users
    assert all(not u.known for u in users)
    assert not policy.jobs
    assert not policy.stages

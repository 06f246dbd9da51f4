"""Asks sent as deltas give the same runs as the whole table sent on every call: wide
multi-stage jobs (dozens of runnable stages each, tasks finishing all the time, so asks
change in count, in hints or not at all from call to call) under policies that read the
asks differently (blinded or with their duration hints, with shares sent to the AMs, the
altruistic asks' two priorities per stage, stage ordering)."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import pytest

from am.core import ApplicationMaster
from rm.policy import ClusterView, NodeView
from treadle import events as ev
from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.registry import build, factory
from treadle.resources import Resources
from treadle.sim import Simulation
from treadle.study.runner import PolicyChoice, RunOptions, run_sim

POLICIES = ["fifo", "spark-fair", "sjf", "fair", "drf", "carbyne", "ujf", "cfq", "las"]


def wide_jobs(seed: int = 7, n_jobs: int = 6) -> Workload:
    """Jobs of 12-30 parallel stages (2-9 tasks of mixed lengths and two shapes) joined by
    one final stage, arriving close together on a cluster they oversubscribe."""
    rng = random.Random(seed)
    shapes = [Resources(vcores=1, memory_mb=1024), Resources(vcores=2, memory_mb=3072)]
    jobs = []
    for j in range(n_jobs):
        width = rng.randint(12, 30)
        stages = [
            StageSpec(
                f"s{i}",
                shapes[rng.random() < 0.3],
                tuple(round(rng.uniform(1, 40), 3) for _ in range(rng.randint(2, 9))),
            )
            for i in range(width)
        ]
        stages.append(StageSpec("join", shapes[0], (5.0,), tuple(s.name for s in stages)))
        jobs.append(JobSpec(f"job{j}", f"u{j % 3}", j * 7.0, tuple(stages)))
    nodes = tuple(NodeSpec(f"n{i}", Resources(vcores=8, memory_mb=16384)) for i in range(4))
    return Workload("wide", ClusterSpec(nodes), tuple(jobs), seed=seed)


def digests(workload: Workload, policy: str) -> dict[str, str]:
    result, run = run_sim(workload, PolicyChoice(policy, {}), options=RunOptions())
    events = hashlib.sha256()
    for rec in result.records:
        events.update(ev.dumps(rec).encode())
    jobs = sorted((j.job, repr(j.finish_s)) for j in run.jobs)
    summary = json.dumps(run.summary, sort_keys=True, allow_nan=True, default=str)
    return {
        "events": events.hexdigest(),
        "jobs": hashlib.sha256(repr(jobs).encode()).hexdigest(),
        "summary": hashlib.sha256(summary.encode()).hexdigest(),
    }


@pytest.mark.parametrize("policy", POLICIES)
def test_deltas_give_the_run_of_the_whole_table(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    wl = wide_jobs()
    deltas = digests(wl, policy)
    monkeypatch.setattr(ApplicationMaster, "whole_table", True)
    assert digests(wl, policy) == deltas


def recorded(workload: Workload, policy: str) -> list[Any]:
    """What ``policy`` saw of every application at every heartbeat of a run: its asks
    (every field, hints included), pending count, stages not asked for yet and when each
    stage became runnable."""
    base = type(build("policies", policy))

    class Recording(base):  # type: ignore[valid-type,misc]
        def __init__(self, params: Any = None) -> None:
            super().__init__(params)
            self.seen: list[Any] = []

        def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Any:
            self.seen.append(
                (
                    cluster.now,
                    node.node_id,
                    [
                        (
                            a.app_id,
                            list(a.sorted_asks()),
                            a.pending,
                            list(a.unasked_stages()),
                            [a.stage_runnable_s(i) for i in range(len(a.job.stages))]
                            if a.job is not None
                            else None,
                        )
                        for a in cluster.apps.values()
                    ],
                )
            )
            return super().on_node_heartbeat(node, cluster)

    recorder = Recording()
    Simulation(workload, recorder, factory("asks", base.ask_strategy), policy_name=policy).run()
    return recorder.seen


@pytest.mark.parametrize("policy", ["sjf", "carbyne", "spark-fair"])
def test_the_rm_holds_the_same_asks_at_every_heartbeat(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stronger than equal outcomes: what the policy sees never differs, hints included
    (sjf and carbyne see them; carbyne's AMs ask twice per stage)."""
    wl = wide_jobs(seed=3, n_jobs=4)
    deltas = recorded(wl, policy)
    monkeypatch.setattr(ApplicationMaster, "whole_table", True)
    whole = recorded(wl, policy)
    assert len(deltas) == len(whole)
    for got, want in zip(deltas, whole, strict=True):
        assert got == want

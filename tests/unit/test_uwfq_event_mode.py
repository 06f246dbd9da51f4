"""The UWFQ spec's hand-checkable cases (section 7) under event-driven scheduling
(``cluster: {scheduling: event}``, ``treadle.sim.eventmode``): a task starts the instant a
slot frees, as in the spec's idealized model, so finish times are checked within two
heartbeats of the spec's exact values (not per stage wave, as in heartbeat mode:
``test_uwfq_policies``), and virtual deadlines exactly, X2's in T5 included. Also: the
cascades of one instant end, event mode is deterministic, and a bad value is one line."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import structlog
from test_uwfq_policies import (
    P1,
    T1,
    T5,
    T6,
    T7,
    H,
    RecordingCfq,
    RecordingUwfq,
    chain,
    run,
    workload,
)
from typer.testing import CliRunner

from treadle import registry
from treadle.cli.app import app
from treadle.errors import WorkloadError
from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.resources import Resources
from treadle.sim import Simulation, eventmode
from treadle.workload import parse_workload
from treadle.workload.partition import Partitioning, parse_partition, partition_workload

ONE = Resources(vcores=1)


def event(wl: Workload) -> Workload:
    return dataclasses.replace(wl, cluster=dataclasses.replace(wl.cluster, scheduling="event"))


def exact(jct: dict[str, float], expected: dict[str, float]) -> None:
    """Every finish time within two heartbeats of the spec's value."""
    got = {j: round(jct[j], 4) for j in expected}
    for job, want in expected.items():
        assert jct[job] == pytest.approx(want, abs=2 * H), (job, got)


# ------------------------------------------------------------------ T1
def test_t1_uwfq_serves_b1_second_with_exact_deadlines() -> None:
    policy = RecordingUwfq()
    jct, _ = run(event(T1), policy)
    assert policy.kept == {"A1": 4.0, "A2": 8.0, "A3": 12.0, "A4": 16.0, "B1": 6.0}
    assert policy.clock.v_g == 2.0
    exact(jct, {"A1": 1, "B1": 1.5, "A2": 3, "A3": 4, "A4": 5})


@pytest.mark.parametrize("level", ["stage", "job"])
def test_t1_cfq_serves_b1_last(level: str) -> None:
    jct, _ = run(event(T1), "cfq", level=level)
    exact(jct, {"A1": 1, "A2": 2, "A3": 3, "A4": 4, "B1": 4.5})


# ------------------------------------------------------------------ T5
def test_t5_stage_cfq_runs_y_before_x2_with_exact_virtual_finishes() -> None:
    policy = RecordingCfq()
    jct, _ = run(event(T5), policy)
    exact(jct, {"Y": 2.25, "X": 3.25})
    # X2 became runnable at 1 exactly, when V(1) = 2: F = 2 + 4.
    assert policy.kept == {"X": {0: 4.0, 1: 6.0}, "Y": {0: 5.0}}


@pytest.mark.parametrize(("policy", "params"), [("cfq", {"level": "job"}), ("uwfq", {})])
def test_t5_job_level_serves_y_first(policy: str, params: dict[str, Any]) -> None:
    jct, _ = run(event(T5), policy, **params)
    exact(jct, {"Y": 1.25, "X": 3.25})


# ------------------------------------------------------------------ T6
@pytest.mark.parametrize(("policy", "params"), [("uwfq", {}), ("cfq", {"level": "job"})])
def test_t6_job_level_finishes_jobs_one_after_another(policy: str, params: dict[str, Any]) -> None:
    jct, _ = run(event(T6), policy, **params)
    exact(jct, {"a": 3.0, "b": 5.9, "c": 8.8, "d": 11.7})
    assert sum(jct.values()) / 4 == pytest.approx(7.35, abs=2 * H)


def test_t6_stage_cfq_finishes_them_all_at_the_very_end() -> None:
    jct, _ = run(event(T6), "cfq")
    exact(jct, {"a": 9.0, "b": 9.9, "c": 10.8, "d": 11.7})
    assert sum(jct.values()) / 4 == pytest.approx(10.35, abs=2 * H)


# ------------------------------------------------------------------ T7
def test_t7_spark_fair_shares_slots_between_stages() -> None:
    exact(run(event(T7), "spark-fair")[0], {"A1": 3, "A2": 3, "B": 3})


def test_t7_ujf_shares_slots_between_users() -> None:
    exact(run(event(T7), "ujf")[0], {"B": 2, "A1": 3, "A2": 3})


# ------------------------------------------------------------------ P1, P2
@pytest.mark.parametrize(
    ("atr", "expected"),
    [
        (None, {"s": 10.9, "L": 10}),
        (1.0, {"s": 1.9, "L": 11}),
        (0.5, {"s": 1.4, "L": 11}),
    ],
)
def test_p1_partitioning_bounds_priority_inversion(
    atr: float | None, expected: dict[str, float]
) -> None:
    wl = P1 if atr is None else partition_workload(P1, Partitioning(atr_s=atr))
    policy = RecordingUwfq()
    jct, _ = run(event(wl), policy)
    exact(jct, expected)
    assert policy.kept["s"] == pytest.approx(4.4)  # 0.1 x 4 slots + 4 task-seconds


def test_p2_partitioning_splits_a_skewed_stage_evenly() -> None:
    wl = workload(4, JobSpec("K", "u", 0, (StageSpec("s", ONE, (9.0, 1.0)),)))
    exact(run(event(wl), "uwfq")[0], {"K": 9})
    exact(run(event(partition_workload(wl, parse_partition("0.5"))), "uwfq")[0], {"K": 2.5})


# ------------------------------------------------------------------ the cascade of an instant
def zero_chain(name: str, submit: float, stages: int) -> JobSpec:
    """Stages of tasks that take no time: the whole job is one instant's cascade."""
    return JobSpec(
        name,
        name,
        submit,
        tuple(
            StageSpec(f"s{i}", ONE, (0.0,) * 3, (f"s{i - 1}",) if i else ()) for i in range(stages)
        ),
    )


def cascade_workload() -> Workload:
    nodes = tuple(NodeSpec(f"n{i}", Resources(vcores=2)) for i in range(3))
    jobs = (zero_chain("a", 0.5, 40), zero_chain("b", 0.5, 25), chain("c", "c", 0.5, (4, 1)))
    return Workload("cascade", ClusterSpec(nodes, heartbeat_s=0.1, scheduling="event"), jobs)


def simulate(wl: Workload, policy: str = "uwfq") -> Any:
    result = Simulation(
        wl, registry.build("policies", policy), lambda: registry.build("asks", "greedy")
    ).run()
    assert result.stalled is None
    assert result.unfinished == 0
    return result


def finish_times(result: Any) -> dict[str, float]:
    names = {r["job"]: r["name"] for r in result.records if r["event"] == "job_submitted"}
    return {names[r["job"]]: r["t"] for r in result.records if r["event"] == "job_finished"}


def test_a_same_instant_cascade_ends_within_its_instant() -> None:
    result = simulate(cascade_workload())
    ends = finish_times(result)
    # 40 and 25 stages of zero-time tasks: done at their submission instant.
    assert ends["a"] == 0.5
    assert ends["b"] == 0.5
    assert ends["c"] == pytest.approx(1.5)
    assert result.stats["event_calls_capped"] == 0
    # Heartbeat mode needs a few heartbeats per stage.
    wl = cascade_workload()
    heartbeat = simulate(
        dataclasses.replace(wl, cluster=dataclasses.replace(wl.cluster, scheduling="heartbeat"))
    )
    assert finish_times(heartbeat)["a"] > 0.5 + 40 * 0.1


def test_the_guard_hands_a_long_cascade_to_the_periodic_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(eventmode, "MAX_EVENT_CALLS", 20)
    result = simulate(cascade_workload())
    assert result.stats["event_calls_capped"] > 0
    assert finish_times(result)["a"] > 0.5  # finished, later


@pytest.mark.parametrize("policy", ["uwfq", "cfq", "spark-fair", "fifo"])
def test_event_mode_is_deterministic(policy: str) -> None:
    nodes = tuple(NodeSpec(f"n{i}", Resources(vcores=3)) for i in range(4))
    jobs = tuple(
        chain(f"j{i}", f"u{i % 3}", 0.05 * i, (5, 0.3 + 0.1 * (i % 4)), (3, 0.2), (2, 0.5))
        for i in range(12)
    )
    wl = Workload("det", ClusterSpec(nodes, heartbeat_s=0.05, scheduling="event"), jobs)
    first, second = simulate(wl, policy), simulate(wl, policy)
    assert first.records == second.records
    assert first.stats == second.stats


# ------------------------------------------------------------------ the key
CLUSTER_YAML = """
cluster: {{heartbeat_s: 0.1, scheduling: {value}, nodes: [{{count: 1, resources: {{vcores: 4}}}}]}}
jobs:
  - {{name: k, user: u, stages: [{{name: s, tasks: 2, duration_s: 1, resources: {{vcores: 1}}}}]}}
"""


def test_the_key_selects_the_mode_and_defaults_to_heartbeat() -> None:
    assert parse_workload(CLUSTER_YAML.format(value="event"), "k.yaml").cluster.event_driven
    default = CLUSTER_YAML.replace("scheduling: {value}, ", "").format()
    assert parse_workload(default, "k.yaml").cluster.scheduling == "heartbeat"


def test_a_bad_value_is_one_line_naming_file_and_field(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError) as e:
        parse_workload(CLUSTER_YAML.format(value="events"), "k.yaml")
    text = str(e.value)
    assert "\n" not in text
    assert "k.yaml" in text
    assert "cluster.scheduling" in text
    path = tmp_path / "k.yaml"
    path.write_text(CLUSTER_YAML.format(value="events"))
    result = cli(["validate", str(path)])
    assert result.exit_code == 2
    assert "cluster.scheduling" in result.output


def cli(args: list[str]) -> Any:
    # The commands configure structlog onto the runner's stderr: put back what was there.
    was = structlog.get_config() if structlog.is_configured() else None
    try:
        return CliRunner().invoke(app, args)
    finally:
        if was is None:
            structlog.reset_defaults()
        else:
            structlog.configure(**was)


def test_the_flag_overrides_the_key_and_a_bad_one_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "k.yaml"
    path.write_text(CLUSTER_YAML.format(value="heartbeat"))
    out = tmp_path / "out"
    args = ["sim", str(path), "--policy", "fifo", "--out", str(out), "--events", "jsonl"]
    result = cli([*args, "--scheduling", "event"])
    assert result.exit_code == 0, result.output
    summary = (out / "summary.json").read_text()
    assert '"scheduling": "event"' in summary
    assert '"mean_jct_s": 1.0' in summary  # two 1 s tasks started at once
    args[args.index(str(out))] = str(tmp_path / "other")  # a new --out: nothing to refuse
    bad = cli([*args, "--scheduling", "async"])
    assert bad.exit_code == 2
    assert "--scheduling" in bad.output


@pytest.mark.parametrize("value", ["event", "heartbeat"])
def test_a_live_cluster_runs_event_mode_by_its_roles_flags(tmp_path: Path, value: str) -> None:
    """Event mode live (``tests/integration/test_event_mode_live.py``): the RM places at
    each Allocate, the NM reports starts out of band, the AM host calls on news; each
    role hears it by its ``--event`` flag, which heartbeat mode leaves out."""
    from treadle.cluster.local import LocalCluster

    wl = parse_workload(CLUSTER_YAML.format(value=value), "k.yaml")
    cluster = LocalCluster(wl, "fifo", workdir=tmp_path)  # checks the settings
    argvs = [
        cluster.rm_argv("python", listen="127.0.0.1:0", config="c.yaml", events="e.jsonl"),
        cluster.nm_argv("python", "127.0.0.1:1", "nodes.json", listen="127.0.0.1:0"),
        cluster.am_argv("python", "127.0.0.1:1", port_file="am.ready"),
    ]
    assert ["--event" in argv for argv in argvs] == [value == "event"] * 3

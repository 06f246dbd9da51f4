"""The FairScheduler rules on their own: resource amounts as Hadoop's
``FairSchedulerConfiguration.parseResourceConfigValue`` reads them, an allocation file's
honoured properties and defaults, the running-application limits
(``MaxRunningAppsEnforcer``) and bounded fair shares (``ComputeFairShares``)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rm.policy.toolkit.fairrules import RunnableApps, bounded_fill
from tests.fidelity.fair_helpers import Log
from treadle import registry
from treadle.errors import InputError
from treadle.importers.fairprops import ResourceFormatError, parse_resources
from treadle.importers.yarnconf import load_queues
from treadle.importers.yarnqueues import describe_queues
from treadle.model import ClusterPercent
from treadle.resources import Resources
from treadle.sim import Simulation
from treadle.workload import load_workload

CLUSTER = Resources(memory_mb=10240, vcores=20)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1024 mb, 2 vcores", Resources(memory_mb=1024, vcores=2)),
        ("1024mb,0vcores", Resources(memory_mb=1024)),
        ("2 vcores, 4096 mb", Resources(memory_mb=4096, vcores=2)),
        ("memory-mb=1024, vcores=2", Resources(memory_mb=1024, vcores=2)),
        ("vcores=3,memory-mb=512", Resources(memory_mb=512, vcores=3)),
        ("memory-mb=2048", Resources(memory_mb=2048)),
    ],
)
def test_absolute_amounts_in_every_hadoop_format(text: str, expected: Resources) -> None:
    assert parse_resources(text) == expected


def test_percentages_resolve_against_the_cluster() -> None:
    every = parse_resources("50%")
    assert isinstance(every, ClusterPercent)
    assert every.of(CLUSTER) == Resources(memory_mb=5120, vcores=10)
    each = parse_resources("memory-mb=50%, vcores=25%")
    assert isinstance(each, ClusterPercent)
    assert each.of(CLUSTER) == Resources(memory_mb=5120, vcores=5)
    old = parse_resources("25% memory, 50% cpu")
    assert isinstance(old, ClusterPercent)
    assert old.of(CLUSTER) == Resources(memory_mb=2560, vcores=10)


def test_a_max_leaves_unnamed_resources_unbounded_a_min_at_zero() -> None:
    most = parse_resources("memory-mb=2048", unbounded=True)
    assert isinstance(most, Resources)
    assert most["memory_mb"] == 2048
    assert math.isinf(most["vcores"])
    assert parse_resources("memory-mb=2048") == Resources(memory_mb=2048)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1024 mb", "missing resource: vcores"),
        ("2 vcores", "missing resource: mb"),
        ("gpu=1", "expected memory-mb"),
        ("memory-mb=50%, vcores=2", "mixes"),
        ("memory-mb=-1, vcores=2", "not a finite amount"),
        ("", "empty"),
        ("50% memory", "percentage of cpu"),
    ],
)
def test_bad_amounts_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ResourceFormatError, match=message):
        parse_resources(text)


ALLOCATIONS = """<allocations>
  <queue name="etl">
    <minResources>memory-mb=4096, vcores=4</minResources>
    <maxResources>50%</maxResources>
    <maxRunningApps>3</maxRunningApps>
    <schedulingPolicy>drf</schedulingPolicy>
    <minSharePreemptionTimeout>30</minSharePreemptionTimeout>
    <queue name="nightly"><schedulingPolicy>fifo</schedulingPolicy></queue>
  </queue>
  <queue name="adhoc">
    <maxAMShare>-1</maxAMShare>
    <allowPreemptionFrom>false</allowPreemptionFrom>
    <fairSharePreemptionThreshold>0.8</fairSharePreemptionThreshold>
  </queue>
  <user name="alice"><maxRunningApps>2</maxRunningApps></user>
  <userMaxAppsDefault>5</userMaxAppsDefault>
  <queueMaxAppsDefault>10</queueMaxAppsDefault>
  <defaultFairSharePreemptionTimeout>60</defaultFairSharePreemptionTimeout>
</allocations>"""


def test_an_allocation_file_sets_the_honoured_properties(tmp_path: Path) -> None:
    path = tmp_path / "fair.xml"
    path.write_text(ALLOCATIONS)
    imported = load_queues(path)
    root = imported.root
    etl, adhoc, default = root.children
    nightly = etl.children[0]
    assert etl.min_resources == Resources(memory_mb=4096, vcores=4)
    assert etl.max_resources == ClusterPercent((("*", 50.0),))
    assert (etl.max_running_apps, etl.scheduling_policy) == (3, "drf")
    assert etl.min_share_preemption_timeout_s == 30.0
    assert etl.max_am_share is None  # a parent runs no AMs
    assert (nightly.scheduling_policy, nightly.max_running_apps, nightly.max_am_share) == (
        "fifo",
        10,
        0.5,
    )
    assert adhoc.max_am_share is None  # -1: no limit
    assert adhoc.allow_preemption_from is False
    assert adhoc.fair_share_preemption_threshold == 0.8
    assert default.max_am_share == 0.5
    assert root.user_max_running_apps == (("alice", 2),)
    assert root.user_max_apps_default == 5
    assert root.fair_share_preemption_timeout_s == 60.0
    assert imported.unmodelled == ()
    shown = "\n".join(describe_queues(imported))
    assert "etl  weight 1; min memory_mb 4096, vcores 4; max all 50%; max running apps 3" in shown


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('<queue name="p"><schedulingPolicy>fifo</schedulingPolicy><queue name="c"/></queue>',
         r"root\.p\.schedulingPolicy: fifo is for leaf queues only"),
        ('<queue name="a"><maxAMShare>1.5</maxAMShare></queue>', r"root\.a\.maxAMShare"),
        ('<queue name="a"><minResources>lots</minResources></queue>', "missing resource"),
        ('<queue name="a"><schedulingPolicy>lifo</schedulingPolicy></queue>', "one of fifo"),
        ('<user name="bob"><maxRunningApps>two</maxRunningApps></user>', "user 'bob'"),
    ],
)  # fmt: skip
def test_bad_properties_name_the_queue_and_element(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "fair.xml"
    path.write_text(f"<allocations>{body}</allocations>")
    with pytest.raises(InputError, match=message):
        load_queues(path)


def _enforcer(
    queue_max: dict[str, int], user_max: dict[str, int] | None = None, default: int | None = None
) -> RunnableApps:
    parent = {"root": None, "q1": "root", "leaf1": "q1", "leaf2": "q1", "q2": "root"}
    return RunnableApps(queue_max, parent, user_max or {}, default)


def test_apps_past_a_queue_limit_wait_and_run_oldest_first() -> None:
    e = _enforcer({"q1": 2})
    assert [
        e.add(f"a{i}", i, leaf, "u") for i, leaf in enumerate(["leaf1", "leaf2", "leaf2", "leaf1"])
    ] == [
        True,
        True,
        False,
        False,
    ]
    assert e.waiting() == ["a2", "a3"]
    assert e.remove("a0") == ["a2"]  # the oldest waiting one, in the cousin leaf
    assert e.waiting("leaf1") == ["a3"]
    assert e.remove("a3") == []  # a waiting app that leaves frees nothing
    assert e.waiting() == []


def test_user_limits_and_their_default() -> None:
    e = _enforcer({}, {"alice": 1}, default=2)
    assert [
        e.add(f"a{i}", i, "q2", u) for i, u in enumerate(["alice", "alice", "bob", "bob", "bob"])
    ] == [
        True,
        False,
        True,
        True,
        False,
    ]
    assert e.remove("a2") == ["a4"]
    assert e.remove("a0") == ["a1"]
    assert all(e.is_runnable(a) for a in ("a1", "a3", "a4"))


def test_bounded_fill_honours_min_and_max_shares() -> None:
    # ComputeFairShares: equal weights, one min above the even split, one max below it
    got = bounded_fill(1.0, [1.0, 1.0, 1.0], [0.5, 0.0, 0.0], [1.0, 0.1, 1.0])
    assert got == pytest.approx([0.5, 0.1, 0.4])
    assert bounded_fill(1.0, [2.0, 1.0], [0.0, 0.0], [1.0, 1.0]) == pytest.approx([2 / 3, 1 / 3])
    # the mins alone pass the amount: each gets its min
    assert bounded_fill(1.0, [1.0, 1.0], [0.7, 0.6], [1.0, 1.0]) == pytest.approx([0.7, 0.6])
    # less asked for than there is: each gets its max
    assert bounded_fill(1.0, [1.0, 1.0], [0.0, 0.0], [0.2, 0.3]) == pytest.approx([0.2, 0.3])


WORKLOAD = """
cluster:
  nodes: [{count: 1, resources: {vcores: 8, memory_mb: 8192}}]
queues:
  - name: etl
    min_resources: {memory_mb: 2048, vcores: 2}
    max_resources: {memory_mb: 4096}
    max_running_apps: 1
    scheduling_policy: drf
    min_share_preemption_timeout_s: 30
    allow_preemption_from: false
users:
  alice: {max_running_apps: 2}
jobs:
  - name: first
    user: alice
    queue: etl
    stages: [{name: s, tasks: 2, duration_s: 10, resources: {vcores: 1, memory_mb: 1024}}]
  - name: second
    user: alice
    queue: etl
    submit_s: 1
    stages: [{name: s, tasks: 2, duration_s: 10, resources: {vcores: 1, memory_mb: 1024}}]
"""


def test_a_workload_file_sets_the_fair_properties_and_the_policy_honours_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(WORKLOAD)
    wl = load_workload(path)
    etl = wl.queues.children[0]
    assert etl.min_resources == Resources(memory_mb=2048, vcores=2)
    assert isinstance(etl.max_resources, Resources)
    assert etl.max_resources["memory_mb"] == 4096
    assert math.isinf(etl.max_resources["vcores"])
    assert (etl.max_running_apps, etl.scheduling_policy, etl.allow_preemption_from) == (
        1,
        "drf",
        False,
    )
    assert wl.queues.user_max_running_apps == (("alice", 2),)
    result = Simulation(
        wl, registry.build("policies", "fair", {}), lambda: registry.build("asks", "greedy")
    ).run()
    log = Log(result)
    first_end = log.finished("first")
    assert first_end is not None
    second = [r["t"] for r in log.allocated.values() if log.name[r["job"]] == "second"]
    assert min(second) >= first_end  # one running application at a time in etl

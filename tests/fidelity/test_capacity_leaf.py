"""The capacity policy's leaf limits against Hadoop's ``TestLeafQueue`` and
``TestApplicationLimits`` (hadoop-yarn-server-resourcemanager, ``scheduler/capacity``),
each a workload in the simulator (memory as the resource calculator, as Hadoop's
``DefaultResourceCalculator`` tests; minimum allocation 1 GB), plus the user-limit
formula itself.

Not expressible in treadle (so not here, or only in part): a test that changes a queue's
configuration between two allocations (``testSingleQueueWithMultipleUsers``, the second
half of ``testSingleQueueWithOneUser``: treadle's queues are fixed for a run; the
configurations they assert are run here one per workload), reservations
(``testReservation``), locality delays (``testLocalityScheduling``), headroom reported to
the AM (``testHeadroomWithMaxCap``), and the per-user AM limit
(``getUserAMResourceLimit``: treadle limits a leaf's AMs, not each user's).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rm.policy.toolkit.capacityrules import activate, am_limit, may_assign_to_user, user_limit
from tests.fidelity.capacity_helpers import held_at, job_field, of, run
from tests.unit.test_yarn_queues import capacity_xml
from treadle import events as ev
from treadle.errors import InputError
from treadle.importers.yarnconf import load_queues
from treadle.importers.yarnqueues import apply_queues
from treadle.study.runner import PolicyChoice, RunOptions, run_sim
from treadle.workload.loading import parse_workload

GB = 1.0 / 8  # one GB of an 8 GB cluster, the unit of the formula tests


def one_node(memory_gb: int, queues: str, jobs: str) -> str:
    return f"""
seed: 1
cluster:
  heartbeat_s: 1.0
  nodes:
    - {{count: 1, resources: {{vcores: 64, memory_mb: {memory_gb * 1024}}}}}
queues:
{queues}
jobs:
{jobs}
"""


def job(
    name: str, user: str, queue: str, tasks: int, gb: int = 1, at: float = 0, s: int = 500
) -> str:
    size = f"{{vcores: 1, memory_mb: {gb * 1024}}}"
    stage = f"{{name: s, tasks: {tasks}, duration_s: {s}, resources: {size}}}"
    return f"  - {{name: {name}, user: {user}, queue: {queue}, submit_s: {at}, stages: [{stage}]}}"


MEMORY = {"resource_calculator": "memory"}


# --------------------------------------------------------------------------- user limits
def test_user_limit_formula_single_user() -> None:
    """``UsersManager.computeUserLimit`` for ``testSingleQueueWithOneUser``'s queue (10% of
    8 GB, factor 1): 1 GB (the 0.8 GB guarantee raised to the minimum allocation) while
    the queue is empty and while it holds 1 GB; with factor 10 it follows the usage."""
    assert user_limit(0.1, 0.0, 1, 0.0, step=GB) == pytest.approx(GB)
    assert user_limit(0.1, GB, 1, GB, step=GB) == pytest.approx(GB)
    assert user_limit(0.1, 2 * GB, 1, 2 * GB, user_limit_factor=10, step=GB) == pytest.approx(
        3 * GB
    )
    assert may_assign_to_user(GB, GB)
    assert not may_assign_to_user(2 * GB, GB)


def test_user_limit_formula_of_test_user_limits() -> None:
    """``testUserLimits``' comments, a queue of 8.5% of 16 GB (1.36 GB), limit 50%,
    factor 2, two active users: after user_0's first 3 GB the limit is ``ceil((3 + 1) /
    2)`` = 2 GB (user_0 is over it); after user_1's 1 GB it is 3 GB ("user-limit =
    floor((5 + 1) / 2) = 3G"), the factor's 2.72 GB rounded up to the allocation."""
    cap, gb = 0.085, 1.0 / 16
    kw = {"minimum_user_limit_percent": 50.0, "user_limit_factor": 2.0, "step": gb}
    assert user_limit(cap, 3 * gb, 2, 3 * gb, **kw) == pytest.approx(2 * gb)
    assert user_limit(cap, 4 * gb, 2, 4 * gb, **kw) == pytest.approx(3 * gb)
    # With the default 100% every user may have the whole current capacity.
    assert user_limit(cap, 4 * gb, 2, 4 * gb, user_limit_factor=10.0, step=gb) == pytest.approx(
        5 * gb
    )


def test_single_queue_with_one_user_stops_at_the_user_limit() -> None:
    """``testSingleQueueWithOneUser``: queue a is 10% of one 8 GB node, user_0 has app_0
    (asks 3 x 1 GB) and app_1 (2 x 1 GB). "Also 2nd -> minCapacity = 1024 since (.1 * 8G)
    < minAlloc, also you can get one container more than user-limit", then "Can't
    allocate 3rd due to user-limit": a holds 2 GB, all app_0's, app_1 nothing."""
    queues = "  - {name: a, capacity: 10, user_limit_factor: 1}\n  - {name: b, capacity: 90}"
    jobs = "\n".join([job("app_0", "user_0", "a", 3), job("app_1", "user_0", "a", 2)])
    result = run(one_node(8, queues, jobs), **MEMORY)
    assert held_at(result, 100.0, by="job") == {"app_0": 2}


def test_single_queue_with_one_user_factor_10_then_max_capacity() -> None:
    """``testSingleQueueWithOneUser``, after "Bump up user-limit-factor, now allocate
    should work" and "One more should work, for app_1" with max-capacity 50%: "no more
    allocs since we are at max-cap", a holds 4 GB, app_0 3 and app_1 1."""
    queues = (
        "  - {name: a, capacity: 10, max_capacity: 50, user_limit_factor: 10}\n"
        "  - {name: b, capacity: 90}"
    )
    jobs = "\n".join([job("app_0", "user_0", "a", 3), job("app_1", "user_0", "a", 2)])
    result = run(one_node(8, queues, jobs), **MEMORY)
    assert held_at(result, 100.0, by="job") == {"app_0": 3, "app_1": 1}


def test_user_limits_the_later_user_is_served_past_the_earlier() -> None:
    """``testUserLimits``: queue a is 8.5% of 2 x 8 GB, minimum-user-limit-percent 50,
    user-limit-factor 2; user_0's app_0 asks 2 x 3 GB, user_1's app_1 2 x 1 GB. "1
    container to user_0" (3 GB), then "Allocate one container to app_1. Even if app_0
    submit earlier, it cannot get this container assigned since user_0 exceeded
    user-limit already", then app_0's second (6 GB): 7 GB, app_0 6 and app_1 1; app_1's
    second follows."""
    queues = (
        "  - {name: a, capacity: 8.5, minimum_user_limit_percent: 50, user_limit_factor: 2}\n"
        "  - {name: b, capacity: 91.5}"
    )
    jobs = "\n".join([job("app_0", "user_0", "a", 2, gb=3), job("app_1", "user_1", "a", 2)])
    wl = one_node(8, queues, jobs).replace("count: 1,", "count: 2,")
    result = run(wl, **MEMORY)
    name = job_field(result, "name")
    order = [
        (name[r["job"]], r["resources"]["memory_mb"] // 1024)
        for r in of(result, ev.CONTAINER_ALLOCATED)
    ]
    assert order[:3] == [("app_0", 3), ("app_1", 1), ("app_0", 3)]
    assert held_at(result, 100.0, by="job") == {"app_0": 2, "app_1": 2}


# ----------------------------------------------------------------------------- ordering
def fair_assignment_jobs() -> str:
    big_and_small = (
        "  - {name: app_0, user: user_0, queue: a, submit_s: 0, stages: ["
        "{name: big, tasks: 1, duration_s: 500, resources: {vcores: 1, memory_mb: 2048}}, "
        "{name: small, tasks: 3, duration_s: 500, resources: {vcores: 1, memory_mb: 1024}}]}"
    )
    return "\n".join([big_and_small, job("app_1", "user_0", "a", 3)])


def allocation_order(ordering: str) -> list[tuple[str, int]]:
    queues = f"  - {{name: a, capacity: 100, ordering_policy: {ordering}}}"
    result = run(one_node(16, queues, fair_assignment_jobs()), **MEMORY)
    name = job_field(result, "name")
    return [
        (name[r["job"]], int(r["resources"]["memory_mb"]) // 1024)
        for r in of(result, ev.CONTAINER_ALLOCATED)
    ]


def test_fair_assignment_serves_the_app_using_least() -> None:
    """``testFairAssignment`` (FairOrderingPolicy): app_0 asks 2 GB then 1 GB, app_1 1 GB
    at a time: app_0 gets its 2 GB, app_1 1 GB, then app_1 again (1 GB < 2 GB) to 2 GB,
    then app_0 (a tie goes to the earlier application) to 3 GB."""
    assert allocation_order("fair")[:4] == [("app_0", 2), ("app_1", 1), ("app_1", 1), ("app_0", 1)]


def test_fifo_assignment_serves_in_submission_order() -> None:
    """``testFifoAssignment``'s rule (FifoOrderingPolicy, the default): the earlier
    application is served while it asks, whatever it holds: all of app_0's four
    containers before app_1's first."""
    order = allocation_order("fifo")
    assert [n for n, _ in order[:4]] == ["app_0"] * 4
    assert order[4][0] == "app_1"


# ----------------------------------------------------------------------- application limits
def test_am_limit_formula_and_activation() -> None:
    """``TestApplicationLimits``: the AM limit is capacity x maximum-am-resource-percent
    rounded up to the minimum allocation; applications activate in submission order while
    their AMs fit, and the first always does."""
    assert am_limit(0.5, 0.5, 1 / 64) == pytest.approx(0.25)
    waiting = [("a0", 0.0625), ("a1", 0.0625), ("a2", 0.0625), ("a3", 0.0625), ("a4", 0.0625)]
    assert activate(waiting, 0.0, 0, 0.25) == ["a0", "a1", "a2", "a3"]
    assert activate([("big", 1.0)], 0.0, 0, 0.25) == ["big"]


def test_active_application_limits_keep_the_fifth_pending() -> None:
    """``testActiveApplicationLimits`` (the queue's AM limit, 16 GB, with 4 GB AMs): four
    applications are active, "Submit third application, should remain pending" once the
    limit is reached; the pending one activates when an active one finishes."""
    queues = (
        "  - {name: a, capacity: 50, maximum_am_resource_percent: 0.5}\n  - {name: b, capacity: 50}"
    )
    jobs = "\n".join(job(f"app_{i}", f"user_{i}", "a", 1, s=100) for i in range(5))
    result = run(one_node(64, queues, jobs), am_memory_mb=4096, **MEMORY)
    name = job_field(result, "name")
    first = {}
    for r in of(result, ev.CONTAINER_ALLOCATED):
        first.setdefault(name[r["job"]], r["t"])
    assert all(first[f"app_{i}"] < 5 for i in range(4))
    assert first["app_4"] >= 100


def test_maximum_applications_refuses_the_submission_past_it() -> None:
    """``LeafQueue.validateSubmitApplication``: with maximum-applications 2, the third
    application submitted while two are in the queue fails at once ("Queue root.a already
    has 2 applications, cannot accept submission of application"); one submitted after
    they end is taken."""
    queues = "  - {name: a, capacity: 100, maximum_applications: 2}"
    jobs = "\n".join(
        [
            job("one", "u", "a", 1, s=50),
            job("two", "u", "a", 1, s=50),
            job("three", "u", "a", 1, s=50),
            job("four", "u", "a", 1, at=200, s=50),
        ]
    )
    result = run(one_node(8, queues, jobs), **MEMORY)
    name = job_field(result, "name")
    failed = of(result, ev.JOB_FAILED)
    assert [name[r["job"]] for r in failed] == ["three"]
    assert "Queue root.a already has 2 applications" in failed[0]["diagnostics"]
    assert sorted(name[r["job"]] for r in of(result, ev.JOB_FINISHED)) == ["four", "one", "two"]


def test_a_bad_leaf_limit_in_a_workload_is_one_clear_error() -> None:
    """The workload's queue keys are checked as YARN's are: an ordering policy that is
    neither fifo nor fair, or an AM share above 1, names the queue entry."""
    for bad, key in (
        ("ordering_policy: lifo", "ordering_policy"),
        ("maximum_am_resource_percent: 2", "maximum_am_resource_percent"),
    ):
        wl = one_node(8, f"  - {{name: a, {bad}}}", job("j", "u", "a", 1))
        with pytest.raises(InputError, match=rf"queues\[0\]\.{key}"):
            parse_workload(wl, "bad.yaml")


def test_a_capacity_scheduler_xml_drives_the_same_limits(tmp_path: Path) -> None:
    """``testSingleQueueWithOneUser``'s queue given as a capacity-scheduler.xml (10% with
    user-limit-factor 1) and applied to the workload, as ``treadle sim --queues`` does:
    the same 2 GB for user_0, and run_sim's summary lists the jobs as usual."""
    xml = capacity_xml(
        tmp_path,
        **{
            "root.queues": "a,b",
            "root.a.capacity": "10",
            "root.b.capacity": "90",
            "root.a.user-limit-factor": "1",
        },
    )
    jobs = "\n".join([job("app_0", "user_0", "a", 3, s=50), job("app_1", "user_0", "a", 2, s=50)])
    wl, refused = apply_queues(
        parse_workload(one_node(8, "  - {name: a}", jobs), "w.yaml"), load_queues(xml)
    )
    assert refused == []
    result, metrics = run_sim(wl, PolicyChoice("capacity", MEMORY), options=RunOptions())
    assert held_at(result, 10.0, by="job") == {"app_0": 2}
    assert metrics.summary["finished"] == 2
    assert "preemption" not in metrics.summary

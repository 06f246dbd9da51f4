"""FairScheduler preemption against Hadoop's ``TestFairSchedulerPreemption``.

Hadoop's setup, as a treadle workload: two nodes of 4 GB and 12 vcores; ``greedy`` takes
the whole cluster with eight 1 GB / 1 vcore containers; a ``starving`` application then
asks for four 2 GB / 2 vcore ones. Each scenario runs in Hadoop's four modes: min-share
preemption (``minSharePreemptionTimeout`` 0 on the parents, ``minResources`` 4096 mb,
4 vcores on the leaves) or fair-share preemption (threshold 1, timeout 0), each with the
fair or the drf policy on every queue; preemption on, ``waitTimeBeforeKill`` 0, the
utilization threshold 0. ``verifyPreemption(starved, greedy)`` becomes: a few seconds
after the starving application asks, greedy holds ``greedy`` task containers, the
starving one ``starved``, and ``8 - greedy`` containers were preempted, all greedy's, and
run again (greedy completes all eight tasks).

Differences: treadle names queues by their leaf name across the tree, so the
non-preemptable parent's children are ``np-child-1`` and ``np-child-2``. Not expressed:
``testPreemptionSelectNonAMContainer`` and the relaxed-locality tests mark containers as
AMs by hand and check where on the nodes the victims are; in the simulator AMs hold no
container, and treadle never preempts an AM container (``rm.policy.toolkit.fairpreempt``).
"""

from __future__ import annotations

from typing import Any

import pytest

from treadle.model import QueueSpec

from .fair_helpers import Log, job, nodes, res, run, tree

MODES = {
    "MinSharePreemption": (False, False),
    "MinSharePreemptionWithDRF": (False, True),
    "FairSharePreemption": (True, False),
    "FairSharePreemptionWithDRF": (True, True),
}
ASK_AT = 10.0  # when the starving application arrives
LOOK_AT = ASK_AT + 5.0


def _queues(fair_share: bool, drf: bool) -> QueueSpec:
    policy: dict[str, Any] = {"scheduling_policy": "drf"} if drf else {}
    parent: dict[str, Any] = (
        {"fair_share_preemption_threshold": 1.0, "fair_share_preemption_timeout_s": 0.0}
        if fair_share
        else {"min_share_preemption_timeout_s": 0.0}
    )
    leaf: dict[str, Any] = {} if fair_share else {"min_resources": res(4, 4)}

    def leaves(*names: str) -> tuple[QueueSpec, ...]:
        return tuple(QueueSpec(n, **leaf, **policy) for n in names)

    return tree(
        QueueSpec("preemptable", children=leaves("child-1", "child-2"), **parent, **policy),
        QueueSpec("preemptable-sibling", **parent, **policy),
        QueueSpec(
            "nonpreemptable",
            children=leaves("np-child-1", "np-child-2"),
            allow_preemption_from=False,
            **parent,
            **policy,
        ),
        **policy,
    )


def _run(mode: str, greedy_queue: str, *starving: tuple[str, float, float]) -> Log:
    """``starving``: (queue, container GB = vcores, submit time) per starving app."""
    fair_share, drf = MODES[mode]
    jobs = [job("greedy", greedy_queue, 8, 100.0, res(1, 1))]
    jobs += [
        job(f"starving{i + 1}", q, 4, 100.0, res(gb, gb), submit_s=t)
        for i, (q, gb, t) in enumerate(starving)
    ]
    params = {
        "resource": "dominant" if drf else "memory",
        "preemption": True,
        "wait_before_kill_s": 0.0,
        "utilization_threshold": 0.0,
    }
    return Log(run(nodes(2, 4, 12), _queues(fair_share, drf), jobs, params))


def _verify(
    log: Log, starved: int, greedy: int, t: float = LOOK_AT, name: str = "starving1"
) -> None:
    running = log.tasks_running(t)
    assert running.get("greedy", 0) == greedy
    assert running.get(name, 0) == starved
    assert log.completed_tasks("greedy") == 8  # the preempted tasks ran again


def _verify_none(log: Log) -> None:
    assert log.tasks_running(LOOK_AT).get("greedy") == 8
    assert not log.preempted()


@pytest.mark.parametrize("mode", MODES)
def test_preemption_within_same_leaf_queue(mode: str) -> None:
    """``testPreemptionWithinSameLeafQueue``: both applications in child-1: fair-share
    preemption takes 4 of greedy's 8 containers for the other (its fair share is half
    the leaf's); min-share preemption takes none (the leaf is above its min share)."""
    log = _run(mode, "child-1", ("child-1", 2, ASK_AT))
    if MODES[mode][0]:
        _verify(log, 2, 4)
        assert log.preempted_from() == {"greedy": 4}
    else:
        _verify_none(log)


@pytest.mark.parametrize("mode", MODES)
def test_preemption_between_two_sibling_leaf_queues(mode: str) -> None:
    """``testPreemptionBetweenTwoSiblingLeafQueues``: greedy in child-1, the starving app
    in child-2: greedy keeps 4 containers, the starving app gets 2, 4 preempted."""
    log = _run(mode, "child-1", ("child-2", 2, ASK_AT))
    _verify(log, 2, 4)
    assert log.preempted_from() == {"greedy": 4}


@pytest.mark.parametrize("mode", MODES)
def test_preemption_between_non_sibling_queues(mode: str) -> None:
    """``testPreemptionBetweenNonSiblingQueues``: greedy in preemptable.child-1, the
    starving app in nonpreemptable.child-1 (preemption is disallowed *from* that queue,
    not *for* it): greedy keeps 4, the starving app gets 2."""
    log = _run(mode, "child-1", ("np-child-1", 2, ASK_AT))
    _verify(log, 2, 4)


@pytest.mark.parametrize("mode", MODES)
def test_no_preemption_from_disallowed_queue(mode: str) -> None:
    """``testNoPreemptionFromDisallowedQueue``: greedy in nonpreemptable.child-1
    (``allowPreemptionFrom`` false on its parent, inherited), the starving app in
    preemptable.child-1: greedy keeps all 8 containers."""
    _verify_none(_run(mode, "np-child-1", ("child-1", 2, ASK_AT)))


@pytest.mark.parametrize("mode", MODES)
def test_app_not_preempted_below_fair_share(mode: str) -> None:
    """``testAppNotPreemptedBelowFairShare``: the starving app asks for 3 GB / 3 vcore
    containers; its starvation (4 GB) covers one, for which 3 of greedy's containers go:
    greedy keeps 5 (above its 4 GB share), the starving app gets 1."""
    log = _run(mode, "child-1", ("child-2", 3, ASK_AT))
    _verify(log, 1, 5)
    assert log.preempted_from() == {"greedy": 3}


@pytest.mark.parametrize("mode", [m for m, (fair_share, _) in MODES.items() if fair_share])
def test_preemption_between_sibling_queues_with_parent_at_fair_share(mode: str) -> None:
    """``testPreemptionBetweenSiblingQueuesWithParentAtFairShare`` (fair-share modes):
    greedy in child-1 takes all; a starving app in preemptable-sibling gets half the
    cluster (greedy keeps 4); then one in child-2 takes half of the parent's half from
    child-1: greedy keeps 2, the second starving app gets 1 container."""
    later = ASK_AT + 20.0
    log = _run(mode, "child-1", ("preemptable-sibling", 2, ASK_AT), ("child-2", 2, later))
    _verify(log, 2, 4)
    _verify(log, 1, 2, later + 5.0, "starving2")

"""FairScheduler queue properties against Hadoop's ``TestFairScheduler``, and the
min-share preemption scenario the configuration issue asks for.

Each scenario is the Hadoop test's cluster, queues and requests as a treadle workload run
under ``fair`` with ``resource=memory`` (Hadoop's FairSharePolicy compares memory). Hadoop
drives one node update at a time with ``assignMultiple`` off; a treadle heartbeat places
as much as fits, so the assertions read the order of the grants in the event log, or
what each application holds after the heartbeat. Not expressed: Hadoop's
``testQueueMaxAMShare`` family: in the simulator AMs hold no container (they are
unmanaged), so ``maxAMShare`` limits only managed AMs on a live cluster.
"""

from __future__ import annotations

from treadle.model import QueueSpec

from .fair_helpers import Log, job, nodes, res, run, tree

MEMORY = {"resource": "memory"}


def _first_t(log: Log) -> float:
    """When the first task container was granted (the first heartbeat with asks)."""
    return min(r["t"] for r in log.allocated.values() if r["priority"] >= 0)


def _grants(log: Log) -> list[str]:
    """The job of each task container granted at the first heartbeat, in grant order."""
    t = _first_t(log)
    return [
        log.name[r["job"]]
        for r in log.records
        if r["event"] == "container_allocated" and r["t"] == t and r["priority"] >= 0
    ]


def test_fifo_within_queue() -> None:
    """``testFifoWithinQueue``: one 3 GB node; app1 and app2 each ask for two 1 GB
    containers in queue1, whose policy is fifo: the first two containers go to app1, the
    third to app2."""
    jobs = [job("app1", "queue1", 2, 50, res(1)), job("app2", "queue1", 2, 50, res(1))]
    fifo = run(nodes(1, 3, 3), tree(QueueSpec("queue1", scheduling_policy="fifo")), jobs, MEMORY)
    assert _grants(Log(fifo))[:3] == ["app1", "app1", "app2"]
    fair = run(nodes(1, 3, 3), tree(QueueSpec("queue1")), jobs, MEMORY)
    assert _grants(Log(fair))[:3] == ["app1", "app2", "app1"]  # the queue's policy matters


def test_basic_drf_assignment() -> None:
    """``testBasicDRFAssignment``: one node of 8 GB and 5 vcores; in queue1 (policy drf)
    app1 asks for two <2 GB, 1 vcore>, app2 for two <1 GB, 2 vcores>: both get one, then
    app1 gets its second (dominant share 2/8 < 2/5), and app2's second no longer fits."""
    jobs = [
        job("app1", "queue1", 2, 50, res(2, 1)),
        job("app2", "queue1", 2, 50, res(1, 2)),
    ]
    log = Log(run(nodes(1, 8, 5), tree(QueueSpec("queue1", scheduling_policy="drf")), jobs, MEMORY))
    assert _grants(log) == ["app1", "app2", "app1"]
    by_memory = run(
        nodes(1, 8, 5), tree(QueueSpec("queue1", scheduling_policy="fair")), jobs, MEMORY
    )
    assert _grants(Log(by_memory)) == ["app1", "app2", "app2"]  # fair compares memory only
    assert log.tasks_running(_first_t(log)) == {"app1": 2, "app2": 1}


def test_fair_share_with_min_alloc() -> None:
    """``testFairShareWithMinAlloc``: one 3 GB node; queueA has minResources 1024 mb,
    queueB 2048 mb: their fair shares are 1 GB and 2 GB (Hadoop asserts the shares;
    treadle asserts what each holds when both ask for more 1 GB containers than fit:
    without the min shares the name order would give queueA two)."""
    q = tree(
        QueueSpec("queueA", min_resources=res(1, 0)),
        QueueSpec("queueB", min_resources=res(2, 0)),
    )
    jobs = [job("a", "queueA", 4, 50, res(1)), job("b", "queueB", 4, 50, res(1))]
    log = Log(run(nodes(1, 3, 8), q, jobs, MEMORY))
    assert log.held_gb(_first_t(log)) == {"a": 1.0, "b": 2.0}
    plain = Log(run(nodes(1, 3, 8), tree(QueueSpec("queueA"), QueueSpec("queueB")), jobs, MEMORY))
    assert plain.held_gb(_first_t(plain)) == {"a": 2.0, "b": 1.0}


def test_user_max_running_apps() -> None:
    """``testUserMaxRunningApps``: user1 may run one application; app1 (user1, one 1 GB
    container) runs; app2 of user1 gets nothing while app1 runs, then runs once it ends."""
    q = tree(QueueSpec("queue1"), user_max_running_apps=(("user1", 1),))
    jobs = [
        job("app1", "queue1", 1, 30, res(1), user="user1"),
        job("app2", "queue1", 1, 30, res(1), user="user1", submit_s=1),
    ]
    log = Log(run(nodes(1, 8, 8), q, jobs, MEMORY))
    assert log.tasks_running(10.0) == {"app1": 1}
    assert log.tasks_running(40.0) == {"app2": 1}


def test_max_resources_caps_a_queue_and_its_parent() -> None:
    """``maxResources`` (treadle's own scenario, Hadoop's ``FSQueue.fitsInMaxShare``): no
    container takes a queue, or a queue above it, past its max; the rest of the
    cluster stays free for others."""
    q = tree(
        QueueSpec("parent", max_resources=res(6, 64), children=(QueueSpec("leaf"),)),
        QueueSpec("capped", max_resources=res(1, 64)),
    )
    jobs = [job("big", "leaf", 10, 50, res(1)), job("small", "capped", 4, 50, res(1))]
    log = Log(run(nodes(2, 8, 8), q, jobs, MEMORY))
    assert log.held_gb(_first_t(log)) == {"big": 6.0, "small": 1.0}
    assert log.completed_tasks("big") == 10
    assert log.completed_tasks("small") == 4


def _min_share_run(wait_before_kill_s: float) -> Log:
    """Queue a's eight 200 s tasks fill two 4 GB nodes; at 20 s queue b (min share 4 GB,
    4 vcores, timeout 10 s) asks for four 60 s ones; preemption on."""
    q = tree(
        QueueSpec("a"),
        QueueSpec("b", min_resources=res(4, 4), min_share_preemption_timeout_s=10.0),
    )
    jobs = [job("a", "a", 8, 200, res(1)), job("b", "b", 4, 60, res(1), submit_s=20)]
    params = {**MEMORY, "preemption": True, "wait_before_kill_s": wait_before_kill_s}
    return Log(run(nodes(2, 4, 12), q, jobs, params))


def test_min_share_preemption_after_its_timeout() -> None:
    """Min-share preemption (the issue's must-show; Hadoop's
    ``FSLeafQueue.minShareStarvation`` and ``FSPreemptionThread``): queue a fills the two
    4 GB nodes with long tasks; at 20 s queue b (minResources 4 GB, 4 vcores;
    minSharePreemptionTimeout 10 s) asks for four 1 GB containers. Until the timeout b
    holds nothing; at 30 s four of a's containers are preempted and b reaches its min
    share by the next heartbeat; a's preempted tasks run again and a finishes all
    eight."""
    log = _min_share_run(wait_before_kill_s=0.0)
    assert log.held_gb(29.0) == {"a": 8.0}
    pre = log.preempted()
    assert {r["t"] for r in pre} == {30.0}
    assert log.preempted_from() == {"a": 4}
    assert {r["queue"] for r in pre} == {"a"}
    assert log.held_gb(31.0) == {"a": 4.0, "b": 4.0}
    assert log.completed_tasks("a") == 8
    assert log.completed_tasks("b") == 4
    finished = log.finished("a")
    assert finished is not None
    assert finished > 200.0


def test_wait_before_kill_delays_the_preemption() -> None:
    """``waitTimeBeforeKill``: victims chosen at the timeout are killed that long after
    (here 5 s), and the cluster-utilization threshold is the default 0.8."""
    log = _min_share_run(wait_before_kill_s=5.0)
    assert {r["t"] for r in log.preempted()} == {35.0}
    assert log.held_gb(36.0) == {"a": 4.0, "b": 4.0}

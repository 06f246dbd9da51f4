"""FairScheduler ``maxRunningApps`` against Hadoop's ``TestMaxRunningAppsEnforcer``.

Each scenario is the Hadoop test's queues and limits as a treadle queue tree; its
applications are jobs of one long task (an application holding containers is a runnable
one: a non-runnable one gets nothing), submitted a second apart (Hadoop's start-time
order); "removeApp(app1)" is app1's job ending at 100 s. Hadoop counts runnable and
non-runnable applications per leaf; treadle reads them from the event log: who holds a
container before and after app1 ends. Not expressible: Hadoop's
``testMultiListStartTimeIteratorEmptyAppLists`` tests an iterator of its own, and the
tests that change limits on reload (``testUpdateRunnabilityOnReload``): treadle's queue
tree is fixed for a run.
"""

from __future__ import annotations

from treadle.model import QueueSpec

from .fair_helpers import Log, job, nodes, res, run, tree

BEFORE, AFTER = 50.0, 150.0  # app1 (the first job) ends at 100 s


def _run(queues: QueueSpec, apps: list[tuple[str, str]]) -> Log:
    """``apps``: (leaf, user) per application, app1 first; app1 runs 100 s, the others
    1000 s, so the cluster (room for all) never limits who runs."""
    jobs = [
        job(f"app{i + 1}", leaf, 1, 100.0 if i == 0 else 1000.0, res(1), user=user, submit_s=i)
        for i, (leaf, user) in enumerate(apps)
    ]
    return Log(run(nodes(1, 64, 64), queues, jobs))


def _running(log: Log, t: float) -> set[str]:
    return set(log.tasks_running(t))


def test_remove_does_not_enable_any_app() -> None:
    """``testRemoveDoesNotEnableAnyApp``: root max 2, queue1 and queue2 max 1; app1 in
    queue1, two in queue2: one runnable per queue, one waiting in queue2; app1's end
    frees root but queue2 is still at its max, so nothing more runs."""
    q = tree(
        QueueSpec("queue1", max_running_apps=1),
        QueueSpec("queue2", max_running_apps=1),
        max_running_apps=2,
    )
    log = _run(q, [("queue1", "user"), ("queue2", "user"), ("queue2", "user")])
    assert _running(log, BEFORE) == {"app1", "app2"}
    assert _running(log, AFTER) == {"app2"}


def _cousins(*children: QueueSpec) -> QueueSpec:
    return tree(
        QueueSpec(
            "queue1",
            max_running_apps=2,
            children=(
                QueueSpec("subqueue1", children=(QueueSpec("leaf1"),)),
                QueueSpec("subqueue2", children=(QueueSpec("leaf2"),)),
            ),
        ),
        *children,
    )


def test_remove_enables_app_on_cousin_queue() -> None:
    """``testRemoveEnablesAppOnCousinQueue``: queue1 max 2 above leaf1 and leaf2; app1 in
    leaf1, two in leaf2 (one waits); app1's end makes the waiting one in leaf2 runnable
    (2 runnable in leaf2, none waiting)."""
    log = _run(_cousins(), [("leaf1", "user"), ("leaf2", "user"), ("leaf2", "user")])
    assert _running(log, BEFORE) == {"app1", "app2"}
    assert _running(log, AFTER) == {"app2", "app3"}


def test_remove_enables_one_by_queue_one_by_user() -> None:
    """``testRemoveEnablesOneByQueueOneByUser``: leaf1 max 2, user1 max 1; leaf1 gets
    user1, user2, user3, leaf2 gets user1: 2 runnable in leaf1, one waiting in each;
    app1's (user1's) end lets user3's app in leaf1 and user1's in leaf2 run."""
    q = tree(
        QueueSpec(
            "queue1",
            children=(QueueSpec("leaf1", max_running_apps=2), QueueSpec("leaf2")),
        ),
        user_max_running_apps=(("user1", 1),),
    )
    log = _run(q, [("leaf1", "user1"), ("leaf1", "user2"), ("leaf1", "user3"), ("leaf2", "user1")])
    assert _running(log, BEFORE) == {"app1", "app2"}
    assert _running(log, AFTER) == {"app2", "app3", "app4"}


def test_remove_enabling_ordered_by_start_time() -> None:
    """``testRemoveEnablingOrderedByStartTime``: queue1 max 2; app1 in leaf1, two in
    leaf2, then (20 ticks later) one more in leaf1: one waiting in each leaf; app1's end
    makes the older waiting one (leaf2's) runnable, not leaf1's."""
    q = _cousins()
    jobs = [
        job("app1", "leaf1", 1, 100.0, res(1), user="user", submit_s=0),
        job("app2", "leaf2", 1, 1000.0, res(1), user="user", submit_s=1),
        job("app3", "leaf2", 1, 1000.0, res(1), user="user", submit_s=2),
        job("app4", "leaf1", 1, 1000.0, res(1), user="user", submit_s=20),
    ]
    log = Log(run(nodes(1, 64, 64), q, jobs))
    assert _running(log, BEFORE) == {"app1", "app2"}
    assert _running(log, AFTER) == {"app2", "app3"}


def test_multiple_apps_waiting_on_cousin_queue() -> None:
    """``testMultipleAppsWaitingOnCousinQueue``: queue1 max 2; app1 in leaf1, three in
    leaf2 (two wait); app1's end makes one of them runnable, one still waits."""
    log = _run(
        _cousins(), [("leaf1", "user"), ("leaf2", "user"), ("leaf2", "user"), ("leaf2", "user")]
    )
    assert _running(log, BEFORE) == {"app1", "app2"}
    assert _running(log, AFTER) == {"app2", "app3"}
    assert log.finished("app4") is not None  # it runs once a runnable one ends

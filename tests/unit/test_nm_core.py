"""The NodeManager core's container states: what its heartbeats and ``container_status``
(the answer of GetContainerStatuses) say about a container at each point of its life.

(The NM's reporting and capacity checks are tested with the other cores in
``test_cores.py``.)
"""

from __future__ import annotations

import pytest

from nm.core import NodeManager
from treadle.messages import (
    EXIT_ABORTED,
    EXIT_KILLED_BY_AM,
    EXIT_SUCCESS,
    ContainerLaunch,
    ContainerState,
    ContainerStatus,
)
from treadle.resources import Resources

NODE = Resources(vcores=4, memory_mb=8192)
TASK = Resources(vcores=1, memory_mb=1024)

RUNNING = ContainerState.RUNNING
COMPLETE = ContainerState.COMPLETE


def launch(cid: str, duration: float) -> ContainerLaunch:
    return ContainerLaunch(cid, "app", "n1", TASK, duration)


def status(nm: NodeManager, cid: str, now: float) -> tuple[object, ...] | None:
    s = nm.container_status(cid, now)
    if s is None:
        return None
    return (s.container_id, s.state, s.exit_status, s.start_s, s.finish_s)


def test_a_started_container_is_running_until_its_duration_elapses() -> None:
    nm = NodeManager("n1", NODE)
    nm.start_container(launch("c1", 5.0), 1.0)
    assert status(nm, "c1", 1.0) == ("c1", RUNNING, EXIT_SUCCESS, 1.0, 0.0)
    assert status(nm, "c1", 5.999) == ("c1", RUNNING, EXIT_SUCCESS, 1.0, 0.0)
    assert status(nm, "c1", 6.0) == ("c1", COMPLETE, EXIT_SUCCESS, 1.0, 6.0)
    assert status(nm, "c1", 9.0) == ("c1", COMPLETE, EXIT_SUCCESS, 1.0, 6.0)


def test_heartbeats_report_a_start_as_running_and_an_end_as_complete() -> None:
    nm = NodeManager("n1", NODE)
    nm.start_container(launch("c1", 5.0), 1.0)
    hb = nm.heartbeat(2.0)
    assert hb.started == [ContainerStatus("c1", RUNNING, EXIT_SUCCESS, 1.0, 0.0)]
    assert hb.completed == []
    nm.acknowledge(hb.seq)
    hb = nm.heartbeat(7.0)
    assert hb.started == []
    assert hb.completed == [ContainerStatus("c1", COMPLETE, EXIT_SUCCESS, 1.0, 6.0)]


@pytest.mark.parametrize(
    ("by_am", "exit_status"), [(False, EXIT_ABORTED), (True, EXIT_KILLED_BY_AM)], ids=["rm", "am"]
)
def test_a_stopped_container_is_killed(by_am: bool, exit_status: int) -> None:
    nm = NodeManager("n1", NODE)
    nm.start_container(launch("c1", 10.0), 0.0)
    assert nm.stop_container("c1", 3.0, by_am=by_am)
    assert status(nm, "c1", 4.0) == ("c1", ContainerState.KILLED, exit_status, 0.0, 3.0)


@pytest.mark.parametrize(
    ("code", "state"), [(0, COMPLETE), (1, ContainerState.FAILED)], ids=["exit-0", "exit-1"]
)
def test_a_process_container_ends_when_its_process_exits(code: int, state: ContainerState) -> None:
    nm = NodeManager("n1", NODE)
    nm.start_container(launch("am", float("inf")), 0.0)
    assert status(nm, "am", 1e9) == ("am", RUNNING, EXIT_SUCCESS, 0.0, 0.0)
    assert nm.finish_container("am", 8.0, code)
    assert status(nm, "am", 9.0) == ("am", state, code, 0.0, 8.0)


def test_the_nm_forgets_an_end_the_rm_acknowledged_and_never_knew_others() -> None:
    nm = NodeManager("n1", NODE)
    nm.start_container(launch("c1", 1.0), 0.0)
    nm.start_container(launch("c2", 10.0), 0.0)
    lost = nm.heartbeat(2.0)  # not answered yet: c1's end is still to be reported
    assert status(nm, "c1", 2.0) == ("c1", COMPLETE, EXIT_SUCCESS, 0.0, 1.0)
    nm.acknowledge(lost.seq)
    assert nm.container_status("c1", 2.0) is None  # the RM has its end now
    assert status(nm, "c2", 2.0) == ("c2", RUNNING, EXIT_SUCCESS, 0.0, 0.0)
    assert nm.container_status("never", 2.0) is None

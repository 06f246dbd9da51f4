"""rm.server.http_yarn: the RM's reports in YARN's REST shapes, on a real RM core driven by hand."""

from __future__ import annotations

import pytest

from rm.core.facade import ResourceManager
from rm.core.reports import app_details, node_reports, queue_reports
from rm.server import http_yarn as yj
from treadle.errors import InvalidRequestError
from treadle.messages import AppSubmission, FinalStatus, NodeRegistration
from treadle.model import QueueSpec
from treadle.registry import build
from treadle.resources import Resources
from treadle.yarnids import SIM_CLUSTER_TIMESTAMP, format_app_id

CLOCK = yj.Clock(epoch_unix_s=1_000_000.0, dilation=10.0)


def app_id(n: int) -> str:
    """The simulator's (and a default core's) n-th application id."""
    return format_app_id(SIM_CLUSTER_TIMESTAMP, n)


def _rm() -> ResourceManager:
    queues = QueueSpec(
        "root", children=(QueueSpec("etl", capacity=40), QueueSpec("adhoc", capacity=60))
    )
    rm = ResourceManager(build("policies", "drf", {}), queues=queues)
    for i in (1, 2):
        res = Resources(vcores=8, memory_mb=8192)
        rm.register_node(NodeRegistration(f"n{i}", res, address=f"10.0.0.{i}:7071"), 0.0)
    for name, user, queue in (("a", "alice", "etl"), ("b", "bob", "adhoc"), ("c", "bob", "etl")):
        rm.submit_application(AppSubmission(name, user, queue, 3, managed_am=False), 1.0)
    rm.register_application_master(app_id(1), 2.0)
    rm.finish_application(app_id(3), FinalStatus.KILLED, 5.0, "killed by test")
    return rm


def test_applications_map_to_yarn_states_and_filters() -> None:
    rm = _rm()
    apps = app_details(rm.state, rm.scheduler.share_of)
    by_id = {a.report.app_id: a for a in apps}
    assert yj.yarn_state(by_id[app_id(1)]) == "RUNNING"  # its AM registered
    assert yj.yarn_state(by_id[app_id(2)]) == "ACCEPTED"
    assert yj.yarn_state(by_id[app_id(3)]) == "KILLED"
    assert yj.final_status(by_id[app_id(3)]) == "KILLED"

    def ids(**query: str) -> list[str]:
        return [a.report.app_id for a in yj.AppFilter.parse(query).select(apps, CLOCK)]

    assert ids(states="running,accepted") == [app_id(1), app_id(2)]
    assert ids(user="bob") == [app_id(3), app_id(2)]
    assert ids(queue="etl", limit="1") == [app_id(3)]
    assert ids(finalStatus="KILLED") == [app_id(3)]
    assert ids(finishedTimeBegin=str(CLOCK.ms(4.0))) == [app_id(3)]
    for bad in ({"states": "DONE"}, {"limit": "0"}, {"limit": "x"}, {"finalStatus": "OK"}):
        with pytest.raises(InvalidRequestError):
            yj.AppFilter.parse(bad)

    killed = yj.app_json(by_id[app_id(3)], CLOCK, 9.0, rm.state.capacity, 0.4)
    assert killed["id"] == f"application_{SIM_CLUSTER_TIMESTAMP}_0003"
    assert killed["clusterId"] == CLOCK.ms(0.0)  # no cluster timestamp given: the epoch's
    stamped = yj.Clock(CLOCK.epoch_unix_s, CLOCK.dilation, SIM_CLUSTER_TIMESTAMP)
    assert yj.cluster_info(stamped, "drf")["clusterInfo"]["id"] == SIM_CLUSTER_TIMESTAMP
    (attempt,) = yj.app_attempts(by_id[app_id(1)], CLOCK)["appAttempts"]["appAttempt"]
    assert attempt["appAttemptId"] == f"appattempt_{SIM_CLUSTER_TIMESTAMP}_0001_000001"
    assert killed["startedTime"] == 1_000_000_100  # epoch + 1 emulated s / dilation 10, in ms
    assert killed["elapsedTime"] == 400
    assert (killed["diagnostics"], killed["unmanagedApplication"]) == ("killed by test", True)


def test_cluster_metrics_nodes_and_scheduler() -> None:
    rm = _rm()
    apps = app_details(rm.state, rm.scheduler.share_of)
    m = yj.cluster_metrics(rm.reports.cluster(), apps, 9.0)["clusterMetrics"]
    assert (m["appsSubmitted"], m["appsRunning"], m["appsPending"], m["appsKilled"]) == (3, 1, 1, 1)
    assert (m["totalMB"], m["totalVirtualCores"], m["activeNodes"]) == (16384, 16, 2)

    rm.lose_node("n2", 3.0)
    nodes = {n.node_id: yj.node_json(n, CLOCK) for n in node_reports(rm.state)}
    assert (nodes["n1"]["state"], nodes["n2"]["state"]) == ("RUNNING", "LOST")
    # YARN's NodeId: the name as the host, the emulated NodeManagers' port.
    assert (nodes["n1"]["id"], nodes["n1"]["nodeHostName"]) == ("n1:8041", "n1")
    assert nodes["n1"]["nodeHTTPAddress"] == "10.0.0.1:7071"
    assert nodes["n1"]["totalResource"]["memory"] == 8192
    assert yj.parse_node_states("lost") == {"LOST"}
    with pytest.raises(InvalidRequestError):
        yj.parse_node_states("GONE")

    root = queue_reports(rm.state, rm.scheduler.share_of)
    sched = yj.scheduler_json(root, rm.state.capacity, "drf", None, None)["scheduler"]
    info = sched["schedulerInfo"]
    leaves = {q["queueName"]: q for q in info["queues"]["queue"]}
    assert leaves["etl"]["absoluteCapacity"] == pytest.approx(40.0)
    assert leaves["etl"]["type"] == "capacitySchedulerLeafQueueInfo"
    assert leaves["etl"]["numApplications"] == 1
    assert "price" not in info


def test_errors_are_remote_exceptions() -> None:
    body = yj.remote_exception(404, "app with id: x not found")["RemoteException"]
    assert body["exception"] == "NotFoundException"
    assert body["javaClassName"] == "org.apache.hadoop.yarn.webapp.NotFoundException"
    assert yj.remote_exception(400, "bad")["RemoteException"]["exception"] == "BadRequestException"

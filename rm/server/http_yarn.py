"""The RM's reports in the JSON shapes of YARN's ResourceManager REST API (Hadoop's
ResourceManagerRest.md), so that YARN tools read treadle unchanged.

Pure functions of ``rm.core.reports`` values; ``rm.server.http`` serves them. The rules of
the mapping:

- resources: ``memory_mb`` is YARN's memory (MB), ``vcores`` its vCores; every resource of
  the vector is listed under ``resourceInformations`` too (``gpu`` and the like);
- times: YARN's milliseconds since the Unix epoch, on the wall clock (the RM's clock epoch
  plus emulated seconds / dilation), so dates read as dates; ``elapsedTime`` is their
  difference. The emulated seconds are given beside them (``submitS``, ``finishS``);
- an application is ``ACCEPTED`` until an AM attempt registers, then ``RUNNING``; it ends
  ``FINISHED`` (final status SUCCEEDED), ``FAILED`` or ``KILLED``. Progress is in percent;
- ids are YARN's (``treadle.yarnids``): ``application_<clusterTimestamp>_0001``, its
  attempts ``appattempt_..._000001``, containers ``container_[e<epoch>_]..._01_000001``;
  a node's id is its NodeId, ``host:port`` (a name that is not ``host:port`` gets the
  emulated NodeManagers' port), and ``/nodes/{id}`` takes the NodeId or the bare name;
- a node is ``RUNNING`` or ``LOST``;
- the scheduler is a capacity scheduler's queue tree (capacities in percent) with the
  policy's view added to each queue: ``policyShare`` (the sum of its applications'
  entitlements, for a policy that sends shares), pending resources and containers, and,
  under a policy with budget accounts, each leaf's ``budget``, ``spendingRate`` and
  ``accountShare`` (and the ``price`` at the root).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rm.core.reports import AppDetail, ClusterReport, NodeReport, QueueReport
from rm.policy.accounts import AccountInfo
from treadle.errors import InvalidRequestError
from treadle.messages import Container
from treadle.resources import Resources
from treadle.yarnids import format_attempt_id, format_node_id

VERSION = "treadle"
APP_TYPE = "TREADLE"
APP_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING", "FINISHED", "FAILED",
              "KILLED")  # fmt: skip
FINAL_STATUSES = ("UNDEFINED", "SUCCEEDED", "FAILED", "KILLED")
NODE_STATES = ("NEW", "RUNNING", "UNHEALTHY", "DECOMMISSIONING", "DECOMMISSIONED", "LOST",
               "REBOOTED", "SHUTDOWN")  # fmt: skip
ZERO = Resources()
_UNITS = {"memory_mb": ("memory-mb", "Mi"), "vcores": ("vcores", "")}


@dataclass(frozen=True)
class Clock:
    """How emulated seconds map to wall-clock dates: ``epoch_unix_s + t / dilation``;
    ``cluster_ts``: the RM's cluster timestamp (ms, YARN's cluster id: it names the
    applications the RM admits; default the epoch's ms)."""

    epoch_unix_s: float
    dilation: float
    cluster_ts: int | None = None

    @property
    def cluster_id(self) -> int:
        return self.ms(0.0) if self.cluster_ts is None else self.cluster_ts

    def ms(self, t: float | None) -> int:
        if t is None:
            return 0
        return round((self.epoch_unix_s + t / self.dilation) * 1000)


def mb(r: Resources) -> int:
    return round(r.get("memory_mb"))


def vcores(r: Resources) -> int:
    return round(r.get("vcores"))


def resource_info(r: Resources) -> dict[str, Any]:
    """YARN's ResourceInfo: memory, vCores and every resource by name."""
    infos = []
    amounts = {"memory_mb": 0.0, "vcores": 0.0, **r.to_dict()}  # YARN always lists these two
    for name, value in amounts.items():
        yarn_name, units = _UNITS.get(name, (name, ""))
        infos.append(
            {"name": yarn_name, "units": units, "value": value, "resourceType": "COUNTABLE"}
        )
    return {
        "memory": mb(r),
        "vCores": vcores(r),
        "resourceInformations": {"resourceInformation": infos},
    }


# ---------------------------------------------------------------------- cluster
def cluster_info(clock: Clock, policy: str) -> dict[str, Any]:
    started = clock.ms(0.0)
    return {
        "clusterInfo": {
            "id": clock.cluster_id,
            "startedOn": started,
            "state": "STARTED",
            "haState": "ACTIVE",
            "rmStateStoreName": "treadle",
            "resourceManagerVersion": VERSION,
            "resourceManagerBuildVersion": VERSION,
            "resourceManagerVersionBuiltOn": "",
            "hadoopVersion": VERSION,
            "hadoopBuildVersion": VERSION,
            "hadoopVersionBuiltOn": "",
            "haZooKeeperConnectionState": "not used",
            "schedulerType": policy,
            "dilation": clock.dilation,
        }
    }


def yarn_state(a: AppDetail) -> str:
    state = a.report.state
    if state == "RUNNING":
        return "RUNNING" if a.am_registered else "ACCEPTED"
    return state


def final_status(a: AppDetail) -> str:
    return {"FINISHED": "SUCCEEDED", "FAILED": "FAILED", "KILLED": "KILLED"}.get(
        a.report.state, "UNDEFINED"
    )


def cluster_metrics(c: ClusterReport, apps: Sequence[AppDetail], now_s: float) -> dict[str, Any]:
    states = [yarn_state(a) for a in apps]
    containers = sum(a.report.running for a in apps)
    free = c.capacity - c.used
    return {
        "clusterMetrics": {
            "appsSubmitted": len(apps),
            "appsCompleted": states.count("FINISHED"),
            "appsPending": states.count("ACCEPTED"),
            "appsRunning": states.count("RUNNING"),
            "appsFailed": states.count("FAILED"),
            "appsKilled": states.count("KILLED"),
            "reservedMB": 0,
            "availableMB": mb(free),
            "allocatedMB": mb(c.used),
            "pendingMB": 0,
            "reservedVirtualCores": 0,
            "availableVirtualCores": vcores(free),
            "allocatedVirtualCores": vcores(c.used),
            "pendingVirtualCores": 0,
            "containersAllocated": containers,
            "containersReserved": 0,
            "containersPending": c.pending_containers,
            "totalMB": mb(c.capacity),
            "totalVirtualCores": vcores(c.capacity),
            "utilizedMBPercent": _pct(c.used.get("memory_mb"), c.capacity.get("memory_mb")),
            "utilizedVirtualCoresPercent": _pct(c.used.get("vcores"), c.capacity.get("vcores")),
            "totalNodes": c.nodes,
            "activeNodes": c.nodes,
            "lostNodes": c.lost_nodes,
            "unhealthyNodes": 0,
            "decommissioningNodes": 0,
            "decommissionedNodes": 0,
            "rebootedNodes": 0,
            "shutdownNodes": 0,
            "totalUsedResourcesAcrossPartition": resource_info(c.used),
            "totalClusterResourcesAcrossPartition": resource_info(c.capacity),
            "totalReservedResourcesAcrossPartition": resource_info(Resources()),
            "totalAllocatedContainersAcrossPartition": containers,
            "emulatedTimeS": now_s,  # treadle's own: the RM's emulated clock
        }
    }


def _pct(part: float, whole: float) -> int:
    return round(100 * part / whole) if whole else 0


# ---------------------------------------------------------------------- applications
@dataclass(frozen=True)
class AppFilter:
    """YARN's query parameters of ``/apps`` that treadle honours."""

    states: frozenset[str] = frozenset()
    final_status: str | None = None
    user: str | None = None
    queue: str | None = None
    limit: int | None = None
    started_begin: int | None = None
    started_end: int | None = None
    finished_begin: int | None = None
    finished_end: int | None = None

    @classmethod
    def parse(cls, q: Mapping[str, str]) -> AppFilter:
        """From a query string's values; a bad one is ``InvalidRequestError`` (HTTP 400)."""
        states: set[str] = set()
        for key in ("states", "state"):
            for s in filter(None, (x.strip().upper() for x in q.get(key, "").split(","))):
                if s not in APP_STATES:
                    raise InvalidRequestError(
                        f"Invalid application-state {s} specified. It should be one of "
                        + ", ".join(APP_STATES)
                    )
                states.add(s)
        final = q.get("finalStatus", "").strip().upper() or None
        if final is not None and final not in FINAL_STATUSES:
            raise InvalidRequestError(
                f"Invalid final status {final}; it should be one of {', '.join(FINAL_STATUSES)}"
            )
        return cls(
            frozenset(states),
            final,
            q.get("user") or None,
            q.get("queue") or None,
            _number(q, "limit", low=1),
            _number(q, "startedTimeBegin"),
            _number(q, "startedTimeEnd"),
            _number(q, "finishedTimeBegin"),
            _number(q, "finishedTimeEnd"),
        )

    def select(self, apps: Iterable[AppDetail], clock: Clock) -> list[AppDetail]:
        out = []
        for a in apps:
            r = a.report
            if self.states and yarn_state(a) not in self.states:
                continue
            if self.final_status and final_status(a) != self.final_status:
                continue
            if (self.user and r.user != self.user) or (self.queue and r.queue != self.queue):
                continue
            started, finished = clock.ms(r.submit_s), clock.ms(r.finish_s)
            if not _within(started, self.started_begin, self.started_end):
                continue
            if (self.finished_begin is not None or self.finished_end is not None) and (
                r.finish_s is None or not _within(finished, self.finished_begin, self.finished_end)
            ):
                continue
            out.append(a)
            if self.limit is not None and len(out) >= self.limit:
                break
        return out


def _within(x: int, low: int | None, high: int | None) -> bool:
    return (low is None or x >= low) and (high is None or x <= high)


def _number(q: Mapping[str, str], key: str, low: int = 0) -> int | None:
    text = q.get(key)
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        raise InvalidRequestError(f"{key} must be an integer, got {text!r}") from None
    if value < low:
        raise InvalidRequestError(f"{key} value must be greater than or equal to {low}")
    return value


def app_type(a: AppDetail) -> str:
    """An application's YARN type: its submission's, or treadle's (``APP_TYPE``)."""
    return a.submission.app_type or APP_TYPE


def app_json(
    a: AppDetail,
    clock: Clock,
    now_s: float,
    cluster: Resources,
    queue_abs: float,
) -> dict[str, Any]:
    """One application; ``queue_abs``: its queue's absolute capacity (a fraction)."""
    r, sub = a.report, a.submission
    started, finished = clock.ms(r.submit_s), clock.ms(r.finish_s)
    end = finished if r.finish_s is not None else clock.ms(now_s)
    share = a.allocated.dominant_share(cluster) if cluster else 0.0
    return {
        "id": r.app_id,
        "user": r.user,
        "name": r.name,
        "queue": r.queue,
        "state": yarn_state(a),
        "finalStatus": final_status(a),
        "progress": round(100.0 * r.progress, 4),
        "trackingUI": "History" if r.finish_s is not None else "ApplicationMaster",
        "trackingUrl": "",
        "diagnostics": r.diagnostics,
        "clusterId": clock.cluster_id,
        "applicationType": app_type(a),
        "applicationTags": ",".join(sub.tags),
        "priority": sub.priority,
        "startedTime": started,
        "launchTime": started,
        "finishedTime": finished,
        "elapsedTime": max(0, end - started),
        "amContainerLogs": "",
        "amHostHttpAddress": format_node_id(a.am_node or ""),
        "amRPCAddress": "N/A",
        "masterNodeId": format_node_id(a.am_node or ""),
        "allocatedMB": mb(a.allocated),
        "allocatedVCores": vcores(a.allocated),
        "reservedMB": 0,
        "reservedVCores": 0,
        "runningContainers": r.running,
        "memorySeconds": 0,
        "vcoreSeconds": 0,
        "queueUsagePercentage": 100 * share / queue_abs if queue_abs else 0.0,
        "clusterUsagePercentage": 100 * share,
        "preemptedResourceMB": 0,
        "preemptedResourceVCores": 0,
        "numNonAMContainerPreempted": 0,
        "numAMContainerPreempted": 0,
        "logAggregationStatus": "DISABLED",
        "unmanagedApplication": not r.managed_am,
        "amNodeLabelExpression": "",
        "runningAttempt": r.attempt,
        # treadle's own: emulated seconds, what is asked for, the policy's entitlement.
        "submitS": r.submit_s,
        "finishS": r.finish_s,
        "pendingContainers": r.pending,
        "pendingResources": resource_info(a.demand),
        "allocatedResources": resource_info(a.allocated),
        "policyShare": resource_info(a.share) if a.share is not None else None,
    }


def app_attempts(a: AppDetail, clock: Clock) -> dict[str, Any]:
    """Attempts 1..current; treadle keeps the AM container of the current one only."""
    r = a.report
    out = []
    for n in range(1, r.attempt + 1):
        current = n == r.attempt
        if current and r.state == "RUNNING":
            state = "RUNNING" if a.am_registered else "LAUNCHED"
        elif current:
            state = {"FINISHED": "FINISHED", "KILLED": "KILLED"}.get(r.state, "FAILED")
        else:
            state = "FAILED"
        out.append(
            {
                "id": n,
                "appAttemptId": format_attempt_id(r.app_id, n),
                "startTime": clock.ms(r.submit_s) if n == 1 else 0,
                "finishedTime": clock.ms(r.finish_s) if current else 0,
                "containerId": (a.am_container or "") if current else "",
                "nodeHttpAddress": format_node_id(a.am_node or "") if current else "",
                "nodeId": format_node_id(a.am_node or "") if current else "",
                "logsLink": "",
                "blacklistedNodes": "",
                "nodesBlacklistedBySystem": "",
                "appAttemptState": state,
            }
        )
    return {"appAttempts": {"appAttempt": out}}


def container_json(c: Container, node_address: str, started_ms: int, now_ms: int) -> dict[str, Any]:
    """A running container of an attempt (YARN's ContainerInfo): ``started_ms`` when the
    RM allocated it (YARN's creation time; 0: not known), running for ``now_ms`` less
    that, not finished (0)."""
    return {
        "containerId": c.container_id,
        "allocatedMB": mb(c.resources),
        "allocatedVCores": vcores(c.resources),
        "assignedNodeId": format_node_id(c.node_id),
        "priority": c.priority,
        "startedTime": started_ms,
        "finishedTime": 0,
        "elapsedTime": max(0, now_ms - started_ms) if started_ms else 0,
        "logUrl": "",
        "containerExitStatus": 0,
        "containerState": "RUNNING",
        "nodeHttpAddress": node_address,
        "nodeId": format_node_id(c.node_id),
        "allocatedResources": resource_info(c.resources),
    }


# ---------------------------------------------------------------------- nodes
def node_state(n: NodeReport) -> str:
    return "RUNNING" if n.alive else "LOST"


def parse_node_states(text: str) -> frozenset[str]:
    states = set()
    for s in filter(None, (x.strip().upper() for x in text.split(","))):
        if s not in NODE_STATES:
            raise InvalidRequestError(
                f"Invalid node state {s}; it should be one of {', '.join(NODE_STATES)}"
            )
        states.add(s)
    return frozenset(states)


def node_json(n: NodeReport, clock: Clock) -> dict[str, Any]:
    free = n.capacity - n.used if n.alive else Resources()
    node_id = format_node_id(n.node_id)
    return {
        "id": node_id,
        "rack": n.rack,
        "state": node_state(n),
        "nodeHostName": node_id.rpartition(":")[0] or node_id,  # the NodeId's host
        "nodeHTTPAddress": n.address,
        "lastHealthUpdate": clock.ms(n.last_heartbeat_s),
        "version": VERSION,
        "healthReport": "" if n.alive else "lost: missed its heartbeats",
        "numContainers": n.containers,
        "usedMemoryMB": mb(n.used),
        "availMemoryMB": mb(free),
        "usedVirtualCores": vcores(n.used),
        "availableVirtualCores": vcores(free),
        "totalResource": resource_info(n.capacity),
        "usedResource": resource_info(n.used),
        "availableResource": resource_info(free),
    }


# ---------------------------------------------------------------------- scheduler
def scheduler_json(
    root: QueueReport,
    cluster: Resources,
    policy: str,
    accounts: Sequence[AccountInfo] | None,
    price: float | None,
) -> dict[str, Any]:
    by_queue = {a.queue: a for a in accounts or ()}
    top = _queue_json(root, cluster, by_queue)
    info: dict[str, Any] = {
        "type": "capacityScheduler",
        "capacity": 100.0,
        "usedCapacity": top["absoluteUsedCapacity"],
        "maxCapacity": 100.0,
        "queueName": root.name,
        "queues": top.get("queues", {"queue": []}),
        "policy": policy,
        "policyShare": top["policyShare"],
        "pendingResources": top["pendingResources"],
    }
    if accounts is not None:
        info["price"] = price
    return {"scheduler": {"schedulerInfo": info}}


def _queue_json(
    q: QueueReport, cluster: Resources, accounts: Mapping[str, AccountInfo]
) -> dict[str, Any]:
    used_share = q.used.dominant_share(cluster) if cluster else 0.0
    out: dict[str, Any] = {
        "queuePath": q.path,
        "queueName": q.name,
        "state": "RUNNING",
        "capacity": 100 * q.capacity,
        "maxCapacity": 100 * q.max_capacity,
        "absoluteCapacity": 100 * q.abs_capacity,
        "absoluteMaxCapacity": 100 * q.abs_max_capacity,
        "absoluteUsedCapacity": 100 * used_share,
        "usedCapacity": 100 * used_share / q.abs_capacity if q.abs_capacity else 0.0,
        "weight": q.weight,
        "numApplications": q.apps,
        "numContainers": q.containers,
        "usedResources": f"<memory:{mb(q.used)}, vCores:{vcores(q.used)}>",
        "resourcesUsed": resource_info(q.used),
        "pendingContainers": q.pending,
        "pendingResources": resource_info(q.demand),
        "policyShare": resource_info(q.share) if q.share is not None else None,
        "policyShareOfCluster": (
            100 * q.share.dominant_share(cluster) if q.share is not None and cluster else None
        ),
    }
    if q.children:
        out["queues"] = {"queue": [_queue_json(c, cluster, accounts) for c in q.children]}
    else:
        out["type"] = "capacitySchedulerLeafQueueInfo"
        out["numActiveApplications"] = q.apps
        out["numPendingApplications"] = 0
        acct = accounts.get(q.name)
        if acct is not None:
            out["budget"] = acct.budget
            out["spendingRate"] = acct.spending_rate
            out["accountShare"] = acct.share
    return out


def remote_exception(status: int, message: str) -> dict[str, Any]:
    """YARN's error body for an HTTP status."""
    name, java = _EXCEPTIONS.get(status, ("WebApplicationException", "javax.ws.rs"))
    return {
        "RemoteException": {
            "exception": name,
            "message": message,
            "javaClassName": f"{java}.{name}",
        }
    }


_EXCEPTIONS = {
    400: ("BadRequestException", "org.apache.hadoop.yarn.webapp"),
    401: ("AuthenticationException", "org.apache.hadoop.security.authentication.client"),
    403: ("ForbiddenException", "org.apache.hadoop.yarn.webapp"),
    404: ("NotFoundException", "org.apache.hadoop.yarn.webapp"),
    405: ("WebApplicationException", "javax.ws.rs"),
    500: ("WebApplicationException", "javax.ws.rs"),
}

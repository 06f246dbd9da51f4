"""The RM's Prometheus metrics (``/metrics`` on its HTTP port, ``rm.server.http``).

One ``CollectorRegistry`` per RM server (several RMs may run in one process). What is
measured as it happens: RPCs by method and status code and the latency of node heartbeats
and of Allocate calls (a gRPC server interceptor), and the time the policy spends deciding
a heartbeat's placements (``time_policy``). What is read from the RM when scraped:
applications by YARN state, nodes, containers, allocated and pending resources and the
policy's share per queue, restarts (NM re-registrations, AM attempts after the first),
timer lateness and RPC queueing (``treadle.live.lag``, wall seconds). Names start with
``treadle_rm_``; resources are labelled by treadle's names (``vcores``, ``memory_mb``).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import grpc
import structlog
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rm.core.reports import QueueReport, app_details, queue_reports
from rm.server import http_yarn
from treadle.live import lag

if TYPE_CHECKING:
    from rm.server.service import RmServer

log = structlog.get_logger("rm")

LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                   0.25, 0.5, 1.0, 2.5)  # fmt: skip
DECISION_BUCKETS = (0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                    0.005, 0.01, 0.025, 0.05, 0.1)  # fmt: skip
HEARTBEATS = frozenset({"NodeHeartbeat", "NodeHeartbeatBatch"})
APP_STATES = ("ACCEPTED", "RUNNING", "FINISHED", "FAILED", "KILLED")


class RmMetrics:
    """The metrics of one RM server."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.rpcs = Counter(
            "treadle_rm_rpcs", "gRPC calls handled, by method and status code",
            ("method", "code"), registry=r,
        )  # fmt: skip
        self.heartbeat = Histogram(
            "treadle_rm_heartbeat_latency_seconds",
            "Time to handle a NodeHeartbeat (or NodeHeartbeatBatch) call, wall s",
            registry=r, buckets=LATENCY_BUCKETS,
        )  # fmt: skip
        self.allocate = Histogram(
            "treadle_rm_allocate_latency_seconds",
            "Time to handle an AM's Allocate call, wall s",
            registry=r, buckets=LATENCY_BUCKETS,
        )  # fmt: skip
        self.decision = Histogram(
            "treadle_rm_policy_decision_seconds",
            "Time the policy spent choosing one heartbeat's placements, wall s",
            registry=r, buckets=DECISION_BUCKETS,
        )  # fmt: skip
        self._server: RmServer | None = None

    def attach(self, server: RmServer) -> None:
        """Read ``server``'s RM at every scrape, and time its policy's decisions."""
        self._server = server
        self.registry.register(_StateCollector(server))
        time_policy(server.rm.policy, self.decision.observe)

    def interceptor(self) -> grpc.aio.ServerInterceptor:
        return _Interceptor(self)

    def record(self, method: str, code: str, seconds: float) -> None:
        self.rpcs.labels(method, code).inc()
        if method in HEARTBEATS:
            self.heartbeat.observe(seconds)
        elif method == "Allocate":
            self.allocate.observe(seconds)


class _Interceptor(grpc.aio.ServerInterceptor):
    def __init__(self, metrics: RmMetrics) -> None:
        self.metrics = metrics

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner: Any = handler.unary_unary
        method = handler_call_details.method.rsplit("/", 1)[-1]
        record = self.metrics.record

        async def behavior(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            start = time.perf_counter()
            code = "OK"
            try:
                result = inner(request, context)  # the health service's handlers are sync
                return (await result) if inspect.isawaitable(result) else result
            except grpc.aio.AbortError:
                status = context.code()
                code = status.name if isinstance(status, grpc.StatusCode) else "UNKNOWN"
                raise
            except BaseException:
                code = "UNKNOWN"
                raise
            finally:
                record(method, code, time.perf_counter() - start)

        return grpc.unary_unary_rpc_method_handler(
            behavior,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def time_policy(policy: Any, observe: Callable[[float], None]) -> None:
    """Make ``policy.on_node_heartbeat`` report the time spent inside it (its own
    computing between placements, not the RM's applying them) to ``observe``. A policy
    whose attributes cannot be set is left as it is (and logged)."""
    inner = policy.on_node_heartbeat

    def timed(node: Any, cluster: Any) -> Iterator[Any]:
        spent = 0.0
        start = time.perf_counter()
        try:
            for placement in inner(node, cluster):
                spent += time.perf_counter() - start
                yield placement
                start = time.perf_counter()
            spent += time.perf_counter() - start
        finally:
            observe(spent)

    try:
        policy.on_node_heartbeat = timed
    except (AttributeError, TypeError):
        log.warning("policy_not_timed", policy=type(policy).__name__)


class _StateCollector(Collector):
    """What the RM holds, read at each scrape."""

    def __init__(self, server: RmServer) -> None:
        self.server = server

    def collect(self) -> Iterable[Metric]:
        s = self.server
        rm = s.rm
        share_of = rm.scheduler.share_of
        apps = app_details(rm.state, share_of)
        by_state = dict.fromkeys(APP_STATES, 0)
        restarts = 0
        for a in apps:
            st = http_yarn.yarn_state(a)
            by_state[st] = by_state.get(st, 0) + 1
            restarts += max(0, a.report.attempt - 1)
        g = GaugeMetricFamily(
            "treadle_rm_applications", "Applications by YARN state", labels=("state",)
        )
        for st, n in by_state.items():
            g.add_metric((st,), n)
        yield g
        c = rm.reports.cluster()
        nodes = GaugeMetricFamily("treadle_rm_nodes", "Nodes by state", labels=("state",))
        nodes.add_metric(("RUNNING",), c.nodes)
        nodes.add_metric(("LOST",), c.lost_nodes)
        yield nodes
        yield _by_resource(
            "treadle_rm_cluster_capacity", "Capacity of the live nodes", c.capacity.to_dict()
        )
        yield _by_resource("treadle_rm_cluster_allocated", "Allocated", c.used.to_dict())
        yield from _queue_families(queue_reports(rm.state, share_of))
        yield CounterMetricFamily(
            "treadle_rm_node_restarts",
            "Registrations of a node the RM already knew (an NM restarted or came back)",
            value=s.node_restarts,
        )
        yield CounterMetricFamily(
            "treadle_rm_am_restarts", "AM attempts started after an application's first",
            value=restarts,
        )  # fmt: skip
        yield CounterMetricFamily(
            "treadle_rm_policy_failures", "Heartbeats on which the policy raised",
            value=rm.reports.policy_failures,
        )  # fmt: skip
        yield CounterMetricFamily(
            "treadle_rm_rejected_placements", "Placements of the policy the RM refused",
            value=rm.reports.rejected_placements,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "treadle_rm_emulated_time_seconds", "The RM's emulated clock", value=s.now()
        )
        yield from _lag_families(lag.PROCESS)


def _by_resource(name: str, doc: str, amounts: dict[str, float]) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc, labels=("resource",))
    for res, v in amounts.items():
        g.add_metric((res,), v)
    return g


def _queue_families(root: QueueReport) -> Iterator[Metric]:
    fams = {
        "allocated": GaugeMetricFamily(
            "treadle_rm_queue_allocated", "Resources a queue's containers hold",
            labels=("queue", "resource"),
        ),
        "pending": GaugeMetricFamily(
            "treadle_rm_queue_pending", "Resources a queue's applications still ask for",
            labels=("queue", "resource"),
        ),
        "share": GaugeMetricFamily(
            "treadle_rm_queue_policy_share",
            "The policy's entitlement for a queue's applications (policies that send shares)",
            labels=("queue", "resource"),
        ),
    }  # fmt: skip
    containers = GaugeMetricFamily(
        "treadle_rm_queue_containers", "Running containers of a queue", labels=("queue",)
    )
    pending = GaugeMetricFamily(
        "treadle_rm_queue_pending_containers", "Containers a queue asks for", labels=("queue",)
    )
    apps = GaugeMetricFamily(
        "treadle_rm_queue_applications", "Running applications of a queue", labels=("queue",)
    )
    stack = [root]
    while stack:
        q = stack.pop()
        stack.extend(q.children)
        for what, r in (("allocated", q.used), ("pending", q.demand), ("share", q.share)):
            for res, v in (r.to_dict() if r is not None else {}).items():
                fams[what].add_metric((q.name, res), v)
        containers.add_metric((q.name,), q.containers)
        pending.add_metric((q.name,), q.pending)
        apps.add_metric((q.name,), q.apps)
    yield from fams.values()
    yield from (containers, pending, apps)


def _lag_families(lag_: lag.Lag) -> Iterator[Metric]:
    for name, doc, dist in (
        ("timer_lateness", "How late the process's timers woke up", lag_.timer),
        ("rpc_queue", "How long RPCs queued before their handler ran", lag_.rpc_queue),
    ):
        s = dist.summary()
        g = GaugeMetricFamily(
            f"treadle_rm_{name}_seconds", f"{doc}, wall s (p50, p90, p99; max as 1)",
            labels=("quantile",),
        )  # fmt: skip
        for q, key in (("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99"), ("1", "max")):
            g.add_metric((q,), s[key])
        yield g
        yield CounterMetricFamily(f"treadle_rm_{name}_samples", f"{doc}: count", value=s["count"])

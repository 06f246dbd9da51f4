"""The ResourceManager's gRPC services: thin adapters around the RM core.

Each RPC converts its request (treadle.live.wire), calls the core with the emulated ``now`` and
converts the answer back; errors become status codes in treadle.live.rpcutil.map_errors. All
handlers run on one asyncio loop, so core calls never interleave. Background tasks expire
silent NMs and AM attempts, tick the policy, launch managed AMs' containers and write what
changed to the RM's state store (``rm.server.store``), if it has one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import structlog

from rm.core.facade import ResourceManager
from rm.core.reports import AppReport
from rm.server import admin as admin_service, grants, memory, submissions
from rm.server.config import RmLimits
from rm.server.store import Persister, StateStore
from treadle import events as ev
from treadle.errors import InvalidRequestError
from treadle.live import auth, lag, wire
from treadle.live.clock import EmulatedClock
from treadle.live.gate import Caller, Gate
from treadle.live.rpcutil import CHANNEL_OPTIONS, TlsFiles, add_health, bind, channel, map_errors
from treadle.messages import ContainerLaunch, FinalStatus
from treadle.model import DEFAULT_QUEUE
from treadle.rpc.v1 import (
    admin_pb2_grpc as admin_grpc,
    application_master_pb2 as am_pb,
    application_master_pb2_grpc as am_grpc,
    client_pb2 as client_pb,
    client_pb2_grpc as client_grpc,
    common_pb2 as pb,
    container_manager_pb2 as cm_pb,
    container_manager_pb2_grpc as cm_grpc,
    resource_tracker_pb2 as rt_pb,
    resource_tracker_pb2_grpc as rt_grpc,
)

log = structlog.get_logger("rm")

INT32_MAX = 2**31 - 1
#: How often (wall s) the housekeeping loop writes what changed to the state store.
PERSIST_EVERY_S = 1.0
#: Expiries allow for the RM's own stalls over this many expiries (``housekeeping``).
STALL_WINDOW = 2

SERVICES = (
    "treadle.v1.ResourceTracker",
    "treadle.v1.ApplicationMaster",
    "treadle.v1.Client",
    admin_service.SERVICE,
)


@dataclass
class RmSettings:
    dilation: float = 1.0
    am_interval_s: float = 1.0
    am_command: Sequence[str] = ("{python}", "-m", "am")
    advertise: str = ""  # the address NMs' AM processes use to reach this RM
    tls: TlsFiles | None = None  # serve over mutual TLS
    limits: RmLimits = field(default_factory=RmLimits)
    epoch: float | None = None  # the clock's epoch (unix s): a restarted RM keeps its own
    #: ``cluster: {scheduling: event}``: pending asks are also placed at each Allocate,
    #: not only at node heartbeats (``ResourceManager.on_allocate``'s ``place``).
    event: bool = False


class RmServer:
    """The RM core, its clock, and the bookkeeping the adapters share."""

    def __init__(
        self,
        rm: ResourceManager,
        settings: RmSettings,
        gate: Gate | None = None,
        store: StateStore | None = None,
    ) -> None:
        self.rm = rm
        self.settings = settings
        self.gate = gate if gate is not None else Gate.open()
        self.clock = EmulatedClock(settings.epoch, dilation=settings.dilation)
        #: Where the RM keeps what a restart needs (None: nowhere; a restart starts empty).
        self.store = store
        self.persister = Persister(store, rm, self.gate) if store else None
        rm.admission.max_pending_tasks = settings.limits.max_pending_tasks  # the core's bound
        if store is not None:
            store.save_clock(self.clock.epoch, self.clock.dilation)
        self.addresses: dict[str, str] = {}  # node id -> ContainerManager address
        self.task_bounds: dict[str, float] = {}  # app id -> its grants' max_duration_s
        self._tasks: set[asyncio.Task[None]] = set()  # AM launches under way
        #: Registrations of nodes already known (NM restarts): a metric (rm.server.http_metrics).
        self.node_restarts = 0
        #: The RM's own stalls, in emulated s (``housekeeping``).
        self.stalls = lag.Stalls()
        #: (kind, id): silences past their expiry that the stalls' grace keeps for now (a
        #: registration removes one: a restarted NM or AM process is a fault, not lag).
        self.overdue: set[tuple[str, str]] = set()

    def now(self) -> float:
        return self.clock.now()

    # ------------------------------------------------------------ queue administrators
    def administers(self, caller: Caller, queue: str) -> bool:
        """Whether ``caller`` administers ``queue`` by its ACLs (``treadle.acl``; a tree
        without ACLs makes no user an administrator)."""
        acls = self.rm.admission.acls
        return bool(caller.user) and acls.enabled and acls.may_administer(caller.user, queue)

    def may_act_on(self, caller: Caller, app: AppReport, what: str) -> None:
        """A user reads and kills its own applications, an administrator of their queue
        those of the queue (YARN's ``acl_administer_queue``), an admin every one."""
        if not self.administers(caller, app.queue):
            self.gate.may_act_for(caller, app.user, what)

    def may_use_queue(self, caller: Caller, queue: str, what: str) -> None:
        """A queue's account: the user it is named after, its administrators, an admin."""
        if not self.administers(caller, queue):
            self.gate.may_use_queue(caller, queue, what)

    def clock_pb(self) -> pb.Clock:
        return pb.Clock(epoch_unix_s=self.clock.epoch, dilation=self.clock.dilation)

    def after_core_calls(self) -> None:
        """Do what the core's last calls left to do: start the AM containers they
        allocated. (Nodes heartbeat on their own here, so touched nodes need nothing.)"""
        for c in self.rm.take_effects().am_launches:
            task = asyncio.get_running_loop().create_task(
                self._launch_am(c.container_id, c.app_id, c.node_id)
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _launch_am(self, container_id: str, app_id: str, node_id: str) -> None:
        address = self.addresses.get(node_id, "")
        command = [*self.settings.am_command, "--rm", self.settings.advertise, "--app-id", app_id]
        if self.settings.event:
            command.append("--event")  # a managed AM calls on news too
        if not self.rm.reports.is_running(app_id):
            return
        launch = wire.launch_to_pb(
            ContainerLaunch(container_id, app_id, node_id, self.rm.am_resources, 0.0), command
        )
        token = self.gate.am_tokens.get(app_id)
        if token:
            launch.environment[auth.ENV_AM_TOKEN] = token
        grants.sign_am_launch(self, launch)  # command and environment included
        try:
            async with channel(address) as ch:
                stub: Any = cm_grpc.ContainerManagerStub(ch)
                resp = await stub.StartContainers(
                    cm_pb.StartContainersRequest(launches=[launch]), timeout=10
                )
            if container_id in resp.failed:
                raise RuntimeError(resp.failed[container_id])
        except Exception as e:
            log.warning("am_launch_failed", app=app_id, node=node_id, error=str(e))
            with contextlib.suppress(Exception):
                self.rm.fail_attempt(app_id, f"AM container failed to launch: {e}", self.now())
            self.after_core_calls()

    def check_submission(self, request: client_pb.SubmitApplicationRequest) -> int:
        """Refuse a submission over one of the RM's limits (``RmLimits``), before anything
        is decoded into the core's objects or changed; return its task count."""
        tasks = submissions.check_limits(request, self.settings.limits)
        self.rm.admission.check(tasks)
        return tasks

    async def submit(
        self,
        caller: Caller,
        request: client_pb.SubmitApplicationRequest,
        app_id: str = "",
        yarn: submissions.YarnContext = submissions.NO_CONTEXT,
    ) -> tuple[str, str]:
        """Submit ``request`` for ``caller`` (gRPC's SubmitApplication and the REST API's
        submit alike: the same checks, core call and store write), under ``app_id`` if
        new-application handed it out, with ``yarn``'s fields (the REST API's); its id and
        AM token. What grows with a big
        request runs off the event loop, so that it never holds up heartbeats."""
        big = request.ByteSize() > submissions.OFF_LOOP_BYTES
        off_loop = submissions.maybe_off_loop
        now = self.now()
        if not request.user:
            raise InvalidRequestError("user must not be empty")
        self.gate.may_act_for(caller, request.user, "submit applications")
        # Refused before the work of decoding; submitting checks again.
        self.rm.admission.check_queue(request.user, request.queue or DEFAULT_QUEUE)
        tasks = await off_loop(big, submissions.check_limits, request, self.settings.limits)
        # Before decoding; submitting checks again (others may be admitted meanwhile).
        self.rm.admission.check(tasks)
        sub = await off_loop(big, submissions.decode, request, now, yarn)
        app_id = self.rm.submit_application(sub, now, app_id)
        token = self.gate.issue_am_token(app_id)
        self.persist([app_id])  # before the answer: an acknowledged submission survives
        self.after_core_calls()
        log.info("app_submitted", app=app_id, name=sub.name, user=request.user, by=caller.user)
        return app_id, token

    def kill(self, caller: Caller, app_id: str) -> None:
        """Kill a running application for ``caller`` (gRPC's KillApplication and the REST
        API's state PUT alike), and write it to the store."""
        self.may_act_on(caller, self.rm.reports.application(app_id), "kill the applications")
        self.rm.finish_application(
            app_id, FinalStatus.KILLED, self.now(), f"killed by {caller.user or 'a client'}"
        )
        log.info("app_killed", app=app_id, by=caller.user)
        self.persist([app_id])
        self.after_core_calls()

    # ------------------------------------------------------------------ the state store
    def persist(self, app_ids: Sequence[str] = (), *, every_s: float = 0.0) -> None:
        """Write what changed to the store, if there is one (``Persister.persist``); forget
        the ended applications the core dropped (``rm.core.ended``): their AM tokens and
        task bounds here, their rows in the store. A large application that just ended
        (one of ``app_ids``) gives its memory back (``rm.server.memory``)."""
        finished = self.rm.state.finished
        if any(a in finished and finished[a].tasks >= memory.LARGE_TASKS for a in app_ids):
            memory.give_back()
        dropped = self.rm.take_dropped_apps()
        for app_id in dropped:
            self.gate.am_tokens.pop(app_id, None)
            self.task_bounds.pop(app_id, None)
        if self.persister is not None:
            self.persister.persist(app_ids, every_s=every_s, dropped=dropped)

    def persist_balances(self) -> None:
        """Write the budget accounts' balances if they changed (whichever call did it)."""
        if self.persister is not None:
            self.persister.persist_balances()

    def count_deferred(self, now: float, grace: float, expired: set[tuple[str, str]]) -> None:
        """A node or an AM attempt silent past its expiry that only the RM's stall grace
        kept, and that was then heard from again, had been alive all along: its expiry
        was deferred for the RM's own lag (``lag.Lag.record_deferred``). The run kept its
        jobs, but its timing was not the emulated cluster's, and a fidelity verdict must
        say so. One that stays silent expires in the end, and is judged as an expiry."""
        if grace <= 0 and not self.overdue:
            return  # nothing kept, nothing to watch (the usual case: no scan)
        nodes, ams = self.rm.overdue(now)
        current = {("node", who) for who, _ in nodes} | {("am", who) for who, _ in ams}
        for kind, who in self.overdue - current - expired:
            lag.PROCESS.record_deferred(kind)
            log.warning("expiry_deferred", kind=kind, who=who, note="the RM had stalled")
        self.overdue = current

    async def housekeeping(self, stop: asyncio.Event) -> None:
        """Expire silent NMs and AMs; tick the policy.

        The RM allows for its own stalls (a big request decoded, a slow write): this loop
        measures how late its timer fires (its own work included), and a node or an AM
        attempt expires only when it has been silent for its expiry plus the RM's stalls
        in the last ``STALL_WINDOW`` expiries (``lag.Stalls``): the messages it missed may
        be waiting in the RM's own queue."""
        rm = self.rm
        tick = rm.policy.tick_interval_s
        next_tick = self.now() + tick if tick else float("inf")
        window = STALL_WINDOW * max(rm.nodes.expiry_s, rm.apps.am_expiry_s)
        due = self.now()
        while not stop.is_set():
            due += rm.heartbeat_s
            now = await self.clock.sleep_until(due)
            late, due = now - due, now
            self.stalls.record(now, late)
            if late > rm.heartbeat_s:
                log.warning("rm_stalled", late_s=round(late, 3), note="expiries allow for it")
            grace = self.stalls.since(now - window)
            expired: set[tuple[str, str]] = set()
            for node in rm.expire_nodes(now, grace):
                log.warning("node_lost", node=node, grace_s=round(grace, 3))
                expired.add(("node", node))
            for app in rm.expire_am_attempts(now, grace):
                log.warning("am_attempt_expired", app=app, grace_s=round(grace, 3))
                expired.add(("am", app))
            self.count_deferred(now, grace, expired)
            lost = rm.recovery.end_unreported(now)
            if lost:
                log.warning("containers_not_recovered", count=lost)
            if now >= next_tick:
                rm.tick(now)
                next_tick = now + (tick or 0.0)
            self.after_core_calls()
            self.persist(every_s=PERSIST_EVERY_S)


def _app_pb(app: AppReport) -> client_pb.ApplicationReport:
    return client_pb.ApplicationReport(
        app_id=app.app_id,
        name=app.name,
        user=app.user,
        queue=app.queue,
        state=app.state,
        submit_s=app.submit_s,
        finish_s=app.finish_s or 0.0,
        progress=app.progress,
        attempt=app.attempt,
        diagnostics=app.diagnostics,
        awaiting_am=app.awaiting_am,
        managed_am=app.managed_am,
    )


def _body(request: Any) -> bytes:
    return bytes(request.SerializeToString(deterministic=True))


@map_errors
class ResourceTrackerServicer(rt_grpc.ResourceTrackerServicer):
    def __init__(self, server: RmServer) -> None:
        self.s = server

    async def RegisterNode(
        self, request: rt_pb.RegisterNodeRequest, context: Any
    ) -> rt_pb.RegisterNodeResponse:
        s = self.s
        reg = wire.registration_from_pb(request)
        with structlog.contextvars.bound_contextvars(node=reg.node_id):
            node = s.rm.state.nodes.get(reg.node_id)
            token = s.gate.register_node(
                "/treadle.v1.ResourceTracker/RegisterNode",
                _body(request),
                context.invocation_metadata() or (),
                reg.node_id,
                request.node_token,
                live=node is not None and node.alive,
            )
            s.rm.register_node(reg, s.now())
            s.node_restarts += node is not None
            s.overdue.discard(("node", reg.node_id))  # a restart, not a late heartbeat
            s.addresses[reg.node_id] = reg.address
            if s.store is not None and token and token != request.node_token:
                s.store.save_node_token(reg.node_id, token)
            log.info(
                "node_registered",
                address=reg.address,
                capacity=reg.resources.to_dict(),
                containers=len(reg.containers),
            )
        return rt_pb.RegisterNodeResponse(
            clock=s.clock_pb(), heartbeat_interval_s=s.rm.heartbeat_s, node_token=token
        )

    async def NodeHeartbeat(
        self, request: rt_pb.NodeHeartbeatRequest, context: Any
    ) -> rt_pb.NodeHeartbeatResponse:
        self.s.gate.check_heartbeat(request.node_id, request.node_token)
        resp = self._heartbeat(request)
        self.s.after_core_calls()
        return resp

    def _heartbeat(self, request: rt_pb.NodeHeartbeatRequest) -> rt_pb.NodeHeartbeatResponse:
        # The hottest call of the RM: no per-call log context (errors name the node anyway).
        hb = wire.heartbeat_from_pb(request)
        return wire.hb_response_to_pb(self.s.rm.node_heartbeat(hb, self.s.now()))

    async def NodeHeartbeatBatch(
        self, request: rt_pb.NodeHeartbeatBatchRequest, context: Any
    ) -> rt_pb.NodeHeartbeatBatchResponse:
        gate = self.s.gate
        for hb in request.heartbeats:  # all or nothing: no effect unless every token holds
            gate.check_heartbeat(hb.node_id, hb.node_token)
        out = rt_pb.NodeHeartbeatBatchResponse()
        for hb in request.heartbeats:
            try:
                out.responses.append(self._heartbeat(hb))
                out.errors.append("")
            except InvalidRequestError as e:  # one bad heartbeat must not fail the batch
                out.responses.append(rt_pb.NodeHeartbeatResponse(resync=True))
                out.errors.append(str(e))
        self.s.after_core_calls()
        return out


@map_errors
class ApplicationMasterServicer(am_grpc.ApplicationMasterServicer):
    def __init__(self, server: RmServer) -> None:
        self.s = server

    async def RegisterApplicationMaster(
        self, request: am_pb.RegisterApplicationMasterRequest, context: Any
    ) -> am_pb.RegisterApplicationMasterResponse:
        s = self.s
        with structlog.contextvars.bound_contextvars(app=request.app_id):
            s.gate.check_am(request.app_id, request.am_token, "RegisterApplicationMaster")
            reg = s.rm.register_application_master(request.app_id, s.now())
            s.overdue.discard(("am", request.app_id))  # a new AM process, not a late call
            log.info("am_registered", attempt=reg.attempt)
        resp = am_pb.RegisterApplicationMasterResponse(
            clock=s.clock_pb(),
            allocate_interval_s=s.settings.am_interval_s,
            attempt=reg.attempt,
            completed_tasks=[am_pb.CompletedTask(stage=a, task=b) for a, b in reg.completed_tasks],
            cluster=wire.resources_to_pb(s.rm.reports.cluster().capacity),
            ask_strategy=pb.AskStrategy(name=reg.ask_strategy, params_json=reg.ask_params_json),
            user=reg.user,
            queue=reg.queue,
        )
        if reg.job is not None:
            resp.job.CopyFrom(wire.job_to_pb(reg.job))
        return resp

    async def Allocate(
        self, request: am_pb.AllocateRequest, context: Any
    ) -> am_pb.AllocateResponse:
        s = self.s
        with structlog.contextvars.bound_contextvars(app=request.app_id):
            s.gate.check_am(request.app_id, request.am_token, "Allocate")
            req = wire.allocate_from_pb(request)
            resp = s.rm.on_allocate(req, s.now(), place=s.settings.event)
        s.after_core_calls()
        out = wire.allocate_response_to_pb(resp, s.addresses)
        if s.gate.enabled:
            grants.sign_task_grants(s, out)
        return out

    async def FinishApplicationMaster(
        self, request: am_pb.FinishApplicationMasterRequest, context: Any
    ) -> am_pb.FinishApplicationMasterResponse:
        s = self.s
        status = wire.final_status_from_pb(request.status)
        with structlog.contextvars.bound_contextvars(app=request.app_id):
            s.gate.check_am(request.app_id, request.am_token, "FinishApplicationMaster")
            now = s.now()
            s.rm.finish_application(
                request.app_id, status, now, request.diagnostics, attempt=request.attempt
            )
            s.persist([request.app_id])
            s.after_core_calls()
            log.info("app_finished", status=str(status))
        return am_pb.FinishApplicationMasterResponse()


@map_errors
class ClientServicer(client_grpc.ClientServicer):
    """Every call is signed by a user of the ACL (treadle.live.gate): a user submits, reads
    and kills its own applications; the event log and queue budgets are admin only."""

    def __init__(self, server: RmServer) -> None:
        self.s = server

    def _caller(self, method: str, request: Any, context: Any, body: bytes | None = None) -> Caller:
        gate = self.s.gate
        caller = gate.client(
            f"/treadle.v1.Client/{method}",
            _body(request) if body is None else body,
            context.invocation_metadata() or (),
        )
        problem = gate.acl_problem()
        if problem:
            log.error("acl_reload_failed", error=problem, kept="the previous entries")
        return caller

    def _report(self, caller: Caller, app: AppReport) -> client_pb.ApplicationReport:
        out = _app_pb(app)
        if caller.admin and app.awaiting_am and not app.managed_am:
            out.am_token = self.s.gate.am_tokens.get(app.app_id, "")
        return out

    async def SubmitApplication(
        self, request: client_pb.SubmitApplicationRequest, context: Any
    ) -> client_pb.SubmitApplicationResponse:
        s = self.s
        # What grows with a big request runs off the event loop (``RmServer.submit``).
        big = request.ByteSize() > submissions.OFF_LOOP_BYTES
        body = await submissions.maybe_off_loop(big, _body, request)
        caller = self._caller("SubmitApplication", request, context, body)
        app_id, token = await s.submit(caller, request)
        return client_pb.SubmitApplicationResponse(app_id=app_id, am_token=token)

    async def GetApplicationReport(
        self, request: client_pb.GetApplicationReportRequest, context: Any
    ) -> client_pb.ApplicationReport:
        caller = self._caller("GetApplicationReport", request, context)
        app = self.s.rm.reports.application(request.app_id)
        self.s.may_act_on(caller, app, "read the applications")
        return self._report(caller, app)

    async def ListApplications(
        self, request: client_pb.ListApplicationsRequest, context: Any
    ) -> client_pb.ListApplicationsResponse:
        caller = self._caller("ListApplications", request, context)
        apps = self.s.rm.reports.applications(awaiting_am_only=request.awaiting_am_only)
        if not caller.admin:
            s = self.s
            apps = [a for a in apps if a.user == caller.user or s.administers(caller, a.queue)]
        return client_pb.ListApplicationsResponse(
            applications=[self._report(caller, a) for a in apps]
        )

    async def GetClusterMetrics(
        self, request: client_pb.GetClusterMetricsRequest, context: Any
    ) -> client_pb.ClusterMetrics:
        s = self.s
        self._caller("GetClusterMetrics", request, context)
        c = s.rm.reports.cluster()
        return client_pb.ClusterMetrics(
            nodes=c.nodes,
            lost_nodes=c.lost_nodes,
            capacity=wire.resources_to_pb(c.capacity),
            used=wire.resources_to_pb(c.used),
            running_apps=c.running_apps,
            finished_apps=c.finished_apps,
            pending_containers=min(c.pending_containers, INT32_MAX),
            now_s=s.now(),
            policy=c.policy,
            clock=s.clock_pb(),
            heartbeat_interval_s=c.heartbeat_s,
        )

    async def KillApplication(
        self, request: client_pb.KillApplicationRequest, context: Any
    ) -> client_pb.KillApplicationResponse:
        caller = self._caller("KillApplication", request, context)
        self.s.kill(caller, request.app_id)
        return client_pb.KillApplicationResponse()

    async def SetQueueBudget(
        self, request: client_pb.SetQueueBudgetRequest, context: Any
    ) -> client_pb.SetQueueBudgetResponse:
        caller = self._caller("SetQueueBudget", request, context)
        self.s.gate.admin_only(caller, "set queue budgets")
        self.s.rm.set_queue_budget(request.queue, request.budget, request.spending_rate)
        self.s.persist_balances()
        return client_pb.SetQueueBudgetResponse()

    async def GetEvents(
        self, request: client_pb.GetEventsRequest, context: Any
    ) -> client_pb.GetEventsResponse:
        caller = self._caller("GetEvents", request, context)
        self.s.gate.admin_only(caller, "read the event log (it holds every user's applications)")
        if request.offset < 0 or request.limit < 0:
            raise InvalidRequestError("offset and limit must be >= 0")
        records = self.s.rm.log.records
        limit = request.limit or 10_000
        chunk = records[request.offset : request.offset + limit]
        return client_pb.GetEventsResponse(
            records=[ev.dumps(r) for r in chunk], next_offset=request.offset + len(chunk)
        )


async def serve(
    rm: ResourceManager,
    settings: RmSettings,
    address: str,
    gate: Gate | None = None,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    store: StateStore | None = None,
) -> tuple[grpc.aio.Server, RmServer, int]:
    """Build and start the RM's server; return it, the shared state and the bound port.
    Without a ``gate`` every call is let through (in-process tests); ``interceptors``
    see every call (the HTTP port's metrics, rm.server.http_metrics); without a ``store``
    nothing survives a restart."""
    state = RmServer(rm, settings, gate, store)
    # A request over the byte limit is refused by gRPC itself (RESOURCE_EXHAUSTED) before
    # it is decoded; the decoded submission is checked again (check_submission).
    receive = ("grpc.max_receive_message_length", settings.limits.max_request_bytes)
    options = [o for o in CHANNEL_OPTIONS if o[0] != receive[0]]
    server = grpc.aio.server(
        interceptors=interceptors, options=[("grpc.so_reuseport", 0), *options, receive]
    )
    rt_grpc.add_ResourceTrackerServicer_to_server(ResourceTrackerServicer(state), server)
    am_grpc.add_ApplicationMasterServicer_to_server(ApplicationMasterServicer(state), server)
    client_grpc.add_ClientServicer_to_server(ClientServicer(state), server)
    admin_grpc.add_AdminServicer_to_server(admin_service.AdminServicer(state), server)
    add_health(server, SERVICES)
    port = bind(server, address, settings.tls)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    if not settings.advertise:
        host = address.rsplit(":", 1)[0]
        settings.advertise = f"{host}:{port}"
    await server.start()
    return server, state, port

"""The ApplicationMaster runtime over gRPC: the sans-IO core driven by real calls.

``run_application_master`` is one AM attempt: register with the RM, then every allocate
interval of emulated time send the core's request, feed it the answer and start the
containers it launches on their NMs (one StartContainers call per NM address), until the
job is done and FinishApplicationMaster reports it. ``run_am_host`` hosts the unmanaged
AMs of a cluster: it polls the RM for applications awaiting an AM and runs one attempt
per application as an asyncio task, each with its own channel and session.

Errors from Allocate: UNAVAILABLE (and other transient codes) are retried with backoff
(an interval, doubling, up to ``BACKOFF_CAP_INTERVALS``), carrying the unsent releases
and completed tasks over (an RM being restarted is absent for a while) and the whole ask
table (the RM may or may not have applied the call); FAILED_PRECONDITION "register
again" (the RM restarted and lost this attempt's session, YARN's
ApplicationMasterNotRegisteredException) makes the attempt register again and go on
where it was: its running containers (which the restarted RM recovers from their
nodes, or reports lost) and the tasks done so far; NOT_FOUND and
other FAILED_PRECONDITIONs mean the application ended or this attempt was replaced, so
the AM stops quietly; INVALID_ARGUMENT means the job cannot run as asked, so the AM
finishes it as FAILED with the RM's reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import Sequence
from typing import Any

import grpc
import structlog

from am.core import ApplicationMaster
from treadle.errors import TreadleError
from treadle.live import lag, wire
from treadle.live.backoff import Backoff
from treadle.live.clock import EmulatedClock
from treadle.live.gate import Grant
from treadle.live.rpcutil import channel
from treadle.messages import AllocateRequest, ContainerLaunch, FinalStatus
from treadle.model import JobSpec
from treadle.registry import build
from treadle.rpc.v1 import (
    application_master_pb2 as am_pb,
    application_master_pb2_grpc as am_grpc,
    client_pb2 as client_pb,
    client_pb2_grpc as client_grpc,
    container_manager_pb2 as cm_pb,
    container_manager_pb2_grpc as cm_grpc,
)

log = structlog.get_logger("am")
#: A container the RM did not grant (the NM refuses its launch, with the reason).
NO_GRANT = Grant("", 0.0, 0.0)

#: In a FAILED_PRECONDITION's details: the RM lost this attempt's session (it restarted).
REGISTER_AGAIN = "register again"
#: Failed calls are retried with backoff (treadle.live.backoff) up to this many allocate
#: intervals apart: well inside the RM's AM expiry (10 intervals by default).
BACKOFF_CAP_INTERVALS = 4
#: The AM host's polls of an RM that does not answer back off up to this many wall s.
HOST_BACKOFF_CAP_S = 2.0
#: Re-registrations in a row (no Allocate answered between) before the attempt gives up.
MAX_REREGISTRATIONS = 3
#: Event mode: wall seconds after a container's expected end (its launch plus its
#: duration) before the AM calls to hear of it, and between calls until it has: the NM's
#: out-of-band heartbeat has to reach the RM first.
EVENT_END_GRACE_WALL_S = 0.002
#: Event mode: wall seconds between calls while tasks wait for containers (the grants'
#: news, which the RM cannot push).
EVENT_WAIT_WALL_S = 0.005
#: Event mode: calls at once in a row, at most, before the periodic one is awaited (a
#: guard, as the simulator's ``MAX_EVENT_CALLS``).
MAX_EVENT_CALLS_IN_A_ROW = 20

#: The application ended, was killed, or this attempt is no longer the current one.
GONE = (
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.UNAUTHENTICATED,  # not (or no longer) this application's AM
    grpc.StatusCode.PERMISSION_DENIED,
)


class AmError(TreadleError):
    """This AM attempt cannot run (the RM refused it or was lost); one line, no traceback."""


async def run_application_master(
    rm_address: str,
    app_id: str,
    *,
    am_token: str = "",
    stop: asyncio.Event | None = None,
    rpc_timeout_s: float = 10.0,
    rm_lost_s: float = 60.0,
    event: bool = False,
) -> FinalStatus:
    """Run one AM attempt for ``app_id`` to its end and return the job's final status.

    Returns without calling Finish when ``stop`` is set (KILLED: the RM will expire the
    attempt and start another) or when the RM says the application or attempt is gone
    (KILLED if the application was killed, FAILED otherwise). Raises :class:`AmError` when
    the RM refuses the registration or cannot be reached for ``rm_lost_s`` wall seconds.
    ``am_token`` is the application's AM token (issued at submission), sent with every
    Register, Allocate and Finish. ``event`` (``cluster: {scheduling: event}``): the AM
    also calls at once on news, as AMRMClientAsync's heartbeat thread wakes early
    (``_Session.next_call``).
    """
    stop = stop if stop is not None else asyncio.Event()
    with structlog.contextvars.bound_contextvars(app=app_id):
        async with channel(rm_address) as ch, _NodeChannels() as nodes:
            session = _Session(ch, app_id, nodes, rpc_timeout_s, rm_lost_s, am_token)
            session.event = event
            return await session.run(stop)


class _NodeChannels:
    """One channel per NM ContainerManager address, closed together at the end."""

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, Any] = {}

    def stub(self, address: str) -> Any:
        stub = self._stubs.get(address)
        if stub is None:
            ch = self._channels[address] = channel(address)
            stub = self._stubs[address] = cm_grpc.ContainerManagerStub(ch)
        return stub

    async def __aenter__(self) -> _NodeChannels:
        return self

    async def __aexit__(self, *exc: object) -> None:
        channels, self._channels, self._stubs = self._channels, {}, {}
        for ch in channels.values():
            await ch.close()


class _Session:
    """One register / allocate / finish session of an AM attempt."""

    def __init__(
        self,
        ch: grpc.aio.Channel,
        app_id: str,
        nodes: _NodeChannels,
        rpc_timeout_s: float,
        rm_lost_s: float,
        am_token: str = "",
    ) -> None:
        self.app_id = app_id
        self.am_token = am_token
        self.grants: dict[str, Grant] = {}  # container id -> the RM's grant of it
        self.rm: Any = am_grpc.ApplicationMasterStub(ch)
        self.client: Any = client_grpc.ClientStub(ch)
        self.nodes = nodes
        self.timeout = rpc_timeout_s
        self.rm_lost_s = rm_lost_s
        self.addresses: dict[str, str] = {}  # container id -> its NM's address
        # Releases and completed tasks of a request that did not get through: sent again
        # with the next one (the RM ignores releases it has already applied).
        self._carry_releases: list[str] = []
        self._carry_done: list[tuple[int, int]] = []
        self.attempt = 0  # set at registration; sent with Finish
        self.event = False  # event mode: call at once on news (``next_call``)
        # Event mode: container id -> when it is expected to end (emulated), from its
        # launch until the RM reports its end.
        self.ends: dict[str, float] = {}
        self._sent_asks: list[Any] | None = None  # event mode: the last call's asks
        self._at_once = 0  # event mode: calls at once in a row

    # ------------------------------------------------------------------ register
    async def register(self) -> am_pb.RegisterApplicationMasterResponse:
        req = am_pb.RegisterApplicationMasterRequest(app_id=self.app_id, am_token=self.am_token)
        try:
            resp: am_pb.RegisterApplicationMasterResponse = await self.rm.RegisterApplicationMaster(
                req, timeout=max(self.timeout, self.rm_lost_s), wait_for_ready=True
            )
        except grpc.aio.AioRpcError as e:
            raise AmError(
                f"cannot register the AM of {self.app_id}: {e.code().name}: {e.details()}"
            ) from None
        return resp

    def build_core(
        self, reg: am_pb.RegisterApplicationMasterResponse
    ) -> tuple[ApplicationMaster | None, str]:
        """The AM core for the registered job, or None and why the job cannot run."""
        try:
            job = wire.job_from_pb(reg.job, reg.user or "unknown", reg.queue or "default", 0.0)
            params = json.loads(reg.ask_strategy.params_json or "{}")
            if not isinstance(params, dict):
                raise TreadleError("ask strategy parameters must be a JSON object")
            strategy = build("asks", reg.ask_strategy.name or "greedy", params)
        except (TreadleError, ValueError) as e:
            return None, f"the AM cannot run this job: {e}"
        done = _valid_completed(job, [(t.stage, t.task) for t in reg.completed_tasks])
        core = ApplicationMaster(
            job, self.app_id, strategy, completed_tasks=done, attempt=reg.attempt
        )
        with contextlib.suppress(TreadleError):
            core.cluster = wire.resources_from_pb(reg.cluster)
        return core, ""

    # ------------------------------------------------------------------ the attempt
    async def run(self, stop: asyncio.Event) -> FinalStatus:
        reg = await self.register()
        self.attempt = reg.attempt
        with structlog.contextvars.bound_contextvars(attempt=reg.attempt):
            core, why = self.build_core(reg)
            if core is None:
                log.error("am_cannot_run", reason=why)
                return await self.finish(FinalStatus.FAILED, why)
            clock = EmulatedClock(reg.clock.epoch_unix_s, reg.clock.dilation or 1.0)
            interval = reg.allocate_interval_s if reg.allocate_interval_s > 0 else 1.0
            log.info(
                "am_registered",
                job=core.job.name,
                tasks=core.job.tasks,
                already_done=len(reg.completed_tasks),
                strategy=reg.ask_strategy.name or "greedy",
            )
            return await self._allocate_until_done(core, clock, interval, stop)

    async def _allocate_until_done(
        self, core: ApplicationMaster, clock: EmulatedClock, interval: float, stop: asyncio.Event
    ) -> FinalStatus:
        """Allocate every ``interval`` of emulated time until the job is done, then Finish;
        the errors as the module says (retried, registered again, gone, rejected, lost)."""
        failing_since: float | None = None
        reregistered = 0
        backoff = Backoff(interval, BACKOFF_CAP_INTERVALS * interval)
        t = clock.now()
        while not core.finished:
            step = interval
            if stop.is_set():
                log.info("am_stopped", progress=round(core.progress, 4))
                return FinalStatus.KILLED
            now = clock.now()
            request = self._with_carry(core.allocate_request(now))
            msg = wire.allocate_to_pb(request)
            msg.am_token = self.am_token
            try:
                resp = await self.rm.Allocate(msg, timeout=self.timeout)
            except grpc.aio.AioRpcError as e:
                code = e.code()
                again = code is grpc.StatusCode.FAILED_PRECONDITION and REGISTER_AGAIN in (
                    e.details() or ""
                )
                if again and reregistered < MAX_REREGISTRATIONS:
                    reregistered += 1
                    same = await self._register_again(core, request)
                    if same is None:
                        return await self._gone(e)
                    core = same
                    failing_since = None
                    continue
                if code in GONE:
                    return await self._gone(e)
                if code is grpc.StatusCode.INVALID_ARGUMENT:
                    why = f"the RM rejected Allocate: {e.details()}"
                    log.error("allocate_rejected", details=e.details())
                    return await self.finish(FinalStatus.FAILED, why)
                self._carry_releases = request.releases
                self._carry_done = request.completed_tasks
                core.allocate_failed()  # the RM may hold the asks sent, or not
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > self.rm_lost_s:
                    raise AmError(
                        f"lost the RM: Allocate failed for {self.rm_lost_s:g} s "
                        f"({code.name}: {e.details()})"
                    ) from None
                step = backoff.next()
                log.warning("allocate_failed", code=code.name, details=e.details())
            else:
                failing_since = None
                reregistered = 0
                backoff.reset()
                news = await self._take_allocation(core, resp, clock)
                if core.finished:
                    break
                if self.event:  # ``t`` keeps the periodic calls' times
                    wake = self.next_call(core, request, news, t + interval, clock)
                    if wake is not None:
                        if await _sleep_or_stop(clock, wake, stop):
                            continue
                        if clock.now() < t + interval:
                            continue  # an event call, off the periodic schedule
            t += step
            if clock.now() > t + interval:
                t = clock.now()  # fell behind: no burst of calls to catch up
            if await _sleep_or_stop(clock, t, stop):
                continue  # the loop head reports the stop
        status = core.final_status
        log.info(
            "am_finished",
            status=str(status),
            reason=core.failed_reason,
        )
        return await self.finish(status, core.failed_reason or "")

    async def _take_allocation(
        self, core: ApplicationMaster, resp: am_pb.AllocateResponse, clock: EmulatedClock
    ) -> bool:
        """Feed an Allocate answer to the core: note each new container's NM and grant,
        launch what the core starts, forget the containers completed. Whether it had news
        (containers granted, ended or preempted)."""
        for c in resp.allocated:
            self.addresses[c.container_id] = c.node_address
            self.grants[c.container_id] = wire.grant_from_pb(c)
        launches = core.on_allocate_response(wire.allocate_response_from_pb(resp), clock.now())
        if launches:
            await self.launch(core, launches)
            if self.event:
                now = clock.now()
                for x in launches:
                    if x.container_id in self.addresses:  # started (not failed)
                        self.ends[x.container_id] = now + x.duration_s
        for s in resp.completed:
            self.addresses.pop(s.container_id, None)
            self.grants.pop(s.container_id, None)
            self.ends.pop(s.container_id, None)
        return bool(resp.allocated or resp.completed or resp.preempted)

    def next_call(
        self,
        core: ApplicationMaster,
        sent: AllocateRequest,
        news: bool,
        periodic: float,
        clock: EmulatedClock,
    ) -> float | None:
        """Event mode: when to call next, if before the ``periodic`` call (None: at it).
        At once after a call that changed what either side knows (it sent asks, releases
        or finished tasks, or heard news: the next stage's asks, the grants the RM placed
        on them). Else the earlier of: a grace after the first container's expected end,
        and again each grace until the RM reports it (Spark's driver hears of a task's end
        from its executor at once and calls); and, while tasks wait for containers, every
        ``EVENT_WAIT_WALL_S``: the RM pushes nothing, so this poll stands for the
        simulator's call back on a grant (as Spark's AM polls at its short
        ``initial-allocation.interval`` while requests are pending)."""
        now = clock.now()
        changed = sent.asks != self._sent_asks or sent.releases or sent.completed_tasks
        self._sent_asks = sent.asks
        if (news or changed) and self._at_once < MAX_EVENT_CALLS_IN_A_ROW:
            self._at_once += 1
            return now
        self._at_once = 0
        wakes = [periodic]
        if self.ends:
            grace = EVENT_END_GRACE_WALL_S * clock.dilation
            wakes.append(max(min(self.ends.values()), now) + grace)
        if any(core.unassigned(stage) for stage in core.runnable_stages()):
            wakes.append(now + EVENT_WAIT_WALL_S * clock.dilation)
        wake = min(wakes)
        return wake if wake < periodic else None

    async def _register_again(
        self, core: ApplicationMaster, unsent: AllocateRequest
    ) -> ApplicationMaster | None:
        """Register this attempt again and go on with the same core in a new session; every
        task done is sent again (the RM may have lost the last reports), and so are the
        releases not yet sent. None when the RM gave the application another attempt
        meanwhile."""
        done = sorted({*core.completed_tasks(), *unsent.completed_tasks})
        reg = await self.register()
        if reg.attempt != self.attempt:
            log.info("am_attempt_replaced", attempt=reg.attempt)
            return None
        core.resync()
        running = sum(core.running(i) for i in range(len(core.job.stages)))
        log.warning(
            "am_registered_again",
            already_done=len(reg.completed_tasks),
            done_here=len(done),
            running=running,
        )
        self._carry_releases = list(unsent.releases)
        self._carry_done = done
        return core

    def _with_carry(self, r: AllocateRequest) -> AllocateRequest:
        if self._carry_releases or self._carry_done:
            r.releases = [*self._carry_releases, *r.releases]
            r.completed_tasks = [*self._carry_done, *r.completed_tasks]
            self._carry_releases, self._carry_done = [], []
        return r

    async def _gone(self, e: grpc.aio.AioRpcError) -> FinalStatus:
        """The RM no longer takes this attempt's calls: end quietly (no Finish)."""
        status = FinalStatus.FAILED
        with contextlib.suppress(grpc.aio.AioRpcError):
            report = await self.client.GetApplicationReport(
                client_pb.GetApplicationReportRequest(app_id=self.app_id), timeout=self.timeout
            )
            if report.state == "KILLED":
                status = FinalStatus.KILLED
        log.info("am_attempt_gone", code=e.code().name, details=e.details(), status=str(status))
        return status

    async def finish(self, status: FinalStatus, diagnostics: str) -> FinalStatus:
        req = am_pb.FinishApplicationMasterRequest(
            app_id=self.app_id,
            status=wire.final_status_to_pb(status),
            diagnostics=diagnostics,
            attempt=self.attempt,
            am_token=self.am_token,
        )
        try:
            await self.rm.FinishApplicationMaster(
                req, timeout=max(self.timeout, self.rm_lost_s), wait_for_ready=True
            )
        except grpc.aio.AioRpcError as e:
            if e.code() in GONE:
                return await self._gone(e)
            raise AmError(f"cannot finish {self.app_id}: {e.code().name}: {e.details()}") from None
        return status

    # ------------------------------------------------------------------ launches
    async def launch(self, core: ApplicationMaster, launches: Sequence[ContainerLaunch]) -> None:
        """Start the launches on their NMs: one call per NM address, all concurrently.
        Launches an NM refuses (or whose call fails) go back to the core."""
        groups: dict[str, list[ContainerLaunch]] = {}
        for launch in launches:
            address = self.addresses.get(launch.container_id, "")
            if not address:
                log.warning("no_node_address", container=launch.container_id)
                core.on_launch_failed(launch.container_id)
                continue
            groups.setdefault(address, []).append(launch)
        results = await asyncio.gather(
            *(self._start(address, group) for address, group in groups.items())
        )
        for failed in results:
            for cid, reason in failed.items():
                log.warning("launch_failed", container=cid, reason=reason)
                self.addresses.pop(cid, None)
                core.on_launch_failed(cid)

    async def _start(self, address: str, group: list[ContainerLaunch]) -> dict[str, str]:
        """Start one NM's launches; return the ones that failed, with the reason."""
        msgs = [wire.launch_to_pb(x) for x in group]
        for m in msgs:
            wire.put_grant(m, self.grants.get(m.container_id, NO_GRANT))
        req = cm_pb.StartContainersRequest(launches=msgs)
        try:
            resp = await self.nodes.stub(address).StartContainers(req, timeout=self.timeout)
        except grpc.aio.AioRpcError as e:
            reason = f"StartContainers at {address}: {e.code().name}: {e.details()}"
            return {x.container_id: reason for x in group}
        failed = dict(resp.failed)
        started = set(resp.started)
        for x in group:  # an answer that names neither is a failure too
            if x.container_id not in started and x.container_id not in failed:
                failed[x.container_id] = "not reported started by the NM"
        return failed


def _valid_completed(job: JobSpec, pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (stage, task) pairs that name a task of ``job``, each once."""
    out: dict[tuple[int, int], None] = {}
    for stage, task in pairs:
        if 0 <= stage < len(job.stages) and 0 <= task < job.stages[stage].tasks:
            out[(stage, task)] = None
        else:
            log.warning("bad_completed_task", stage=stage, task=task)
    return list(out)


async def _sleep_or_stop(clock: EmulatedClock, t: float, stop: asyncio.Event) -> bool:
    """Sleep until emulated time ``t`` (recording timer lateness); True if ``stop`` was
    set meanwhile."""
    if stop.is_set():
        return True
    sleeper = asyncio.ensure_future(clock.sleep_until(t))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((sleeper, stopper), return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        stopper.cancel()
    return stop.is_set()


# ---------------------------------------------------------------------- the AM host
async def run_am_host(
    rm_address: str,
    *,
    poll_s: float,
    stop: asyncio.Event,
    max_concurrent: int = 10_000,
    event: bool = False,
) -> None:
    """Host the unmanaged AMs: every ``poll_s`` wall seconds, start an AM attempt for each
    application the RM lists as awaiting one (``event``: AMs that call at once on news);
    run until ``stop`` is set, then cancel the attempts still running (the RM expires
    them and a later host starts new ones)."""
    if not poll_s > 0:
        raise ValueError(f"poll_s must be > 0, got {poll_s}")
    if max_concurrent < 1:
        raise ValueError(f"max_concurrent must be >= 1, got {max_concurrent}")
    running: dict[str, asyncio.Task[FinalStatus]] = {}

    def done(app_id: str, task: asyncio.Task[FinalStatus]) -> None:
        if running.get(app_id) is task:
            del running[app_id]
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            log.info("am_done", app=app_id, status=str(task.result()))
        elif isinstance(exc, TreadleError):
            log.warning("am_ended", app=app_id, error=str(exc))
        else:
            log.error("am_crashed", app=app_id, exc_info=exc)

    async with channel(rm_address) as ch:
        client: Any = client_grpc.ClientStub(ch)
        request = client_pb.ListApplicationsRequest(awaiting_am_only=True)
        backoff = Backoff(poll_s, max(poll_s, HOST_BACKOFF_CAP_S))
        try:
            while not stop.is_set():
                wait_s = poll_s
                try:
                    listing = await client.ListApplications(request, timeout=max(poll_s, 5.0))
                except grpc.aio.AioRpcError as e:
                    wait_s = backoff.next()  # an RM that is down is not polled at full rate
                    log.warning(
                        "list_applications_failed",
                        code=e.code().name,
                        details=e.details(),
                        retry_in_s=round(wait_s, 3),
                    )
                else:
                    backoff.reset()
                    for report in listing.applications:
                        if report.app_id in running or report.managed_am:
                            continue
                        if len(running) >= max_concurrent:
                            log.warning("am_host_full", running=len(running))
                            break
                        task = asyncio.create_task(
                            run_application_master(
                                rm_address,
                                report.app_id,
                                am_token=report.am_token,
                                stop=stop,
                                event=event,
                            ),
                            name=f"am-{report.app_id}",
                        )
                        running[report.app_id] = task
                        task.add_done_callback(functools.partial(done, report.app_id))
                due = time.monotonic() + wait_s
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=wait_s)
                if not stop.is_set():
                    lag.PROCESS.record_timer(time.monotonic() - due)
        finally:
            tasks = list(running.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

"""Replaying a workload on a live cluster: the YARN client side of an emulated run.

``replay`` reads the RM's clock, submits every job at its emulated submission time, waits
until every application has ended, then fetches the RM's event log through GetEvents and
keeps this run's records (its applications' records and the node events), headed by a
``run_started`` record that carries what the metrics need. The records are then analysed
by treadle.metrics exactly as a simulation's are. A workload that changes queue accounts
(an admin timeline, per-job spending rates) has them applied as it goes through the
Admin service (``LiveAccounts``).
``probe`` and ``wait_for_rm`` ask an RM
for its metrics; ``run_async`` runs a coroutine with SIGTERM as cancellation, so that
clusters are stopped on the way out. The comparison built on this is treadle.study.compare.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import signal
from collections.abc import Coroutine, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import grpc
import structlog

from treadle import events as ev
from treadle.cluster.outcome import (
    EVENTS_EVERY_S,
    ReplayTimedOut as ReplayTimedOut,
    RmUnreachable,
    rm_lost,
)
from treadle.errors import TreadleError
from treadle.live import wire
from treadle.live.backoff import Backoff
from treadle.live.clock import EmulatedClock
from treadle.live.lag import Lag
from treadle.live.rpcutil import channel
from treadle.model import (
    ADD_BUDGET,
    SET_BUDGET,
    SET_SPENDING_RATE,
    JobSpec,
    ProgressFn,
    Workload,
    closed_loop_followers,
)
from treadle.registry import build
from treadle.rpc.v1 import (
    admin_pb2 as admin_pb,
    admin_pb2_grpc as admin_grpc,
    client_pb2 as client_pb,
    client_pb2_grpc as client_grpc,
    common_pb2 as pb,
)
from treadle.workload.timeline import AccountCall, AccountTimeline

log = structlog.get_logger("driver")
T = TypeVar("T")

FINAL_STATES = frozenset({"FINISHED", "FAILED", "KILLED"})
NODE_EVENTS = frozenset({ev.NODE_REGISTERED, ev.NODE_LOST})
#: The RM's own records of no application, kept from the run's start on (a policy's books).
RUN_EVENTS = frozenset({ev.DP_ACCOUNT})
DP_ACCOUNT = ev.DP_ACCOUNT  # the dp policy's per-interval record of each queue's account
DEFAULT_TIMEOUT_S = 3600.0
CONNECT_TIMEOUT_S = 5.0
RPC_TIMEOUT_S = 30.0
#: How long a replay outlives its RM's absence (a restart) by default, in wall seconds.
RM_ABSENT_S = 120.0
EVENTS_PAGE = 5000
#: How long, after a timeout, the driver waits for the RM to hand it the run's events.
AFTER_TIMEOUT_ABSENT_S = 10.0


def _rpc_error(what: str, address: str, e: grpc.aio.AioRpcError) -> TreadleError:
    code = e.code()
    name = code.name if code is not None else "UNKNOWN"
    detail = (e.details() or "").splitlines()[0] if e.details() else ""
    if code == grpc.StatusCode.UNAVAILABLE:
        return TreadleError(f"cannot reach the RM at {address}: {detail or name}")
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        return TreadleError(
            f"{what} refused by the RM {address}: {name}: {detail} (sign as a user of its ACL: "
            "--user and --key-file, $TREADLE_USER with $TREADLE_KEY_FILE, or the --cluster-dir "
            "of `treadle cluster up`)"
        )
    return TreadleError(f"{what} failed at the RM {address}: {name}: {detail}")


async def _call(what: str, address: str, rpc: Any, request: Any, timeout: float) -> Any:
    try:
        return await rpc(request, timeout=timeout)
    except grpc.aio.AioRpcError as e:
        raise _rpc_error(what, address, e) from None


async def _call_through_absence(
    what: str,
    address: str,
    rpc: Any,
    request: Any,
    absent_s: float,
    *,
    idempotent: bool = True,
) -> Any:
    """``_call``, retried with backoff (0.1 s doubling to 2 s, jittered) while the RM cannot
    be reached (UNAVAILABLE; a time-out too when the call may be repeated), for up to
    ``absent_s`` wall seconds: an RM being restarted comes back on the same address."""
    loop = asyncio.get_running_loop()
    since: float | None = None
    backoff = Backoff(0.1, 2.0)
    while True:
        try:
            return await rpc(request, timeout=RPC_TIMEOUT_S)
        except grpc.aio.AioRpcError as e:
            code = e.code()
            if code != grpc.StatusCode.UNAVAILABLE and not (
                idempotent and code == grpc.StatusCode.DEADLINE_EXCEEDED
            ):
                raise _rpc_error(what, address, e) from None
            now = loop.time()
            if since is None:
                since = now
                log.warning("rm_unreachable", rm=address, call=what, code=code.name)
            if now - since >= absent_s:
                problem = f"{_rpc_error(what, address, e)} (still after {absent_s:g} s"
                raise RmUnreachable(f"{problem}; --rm-absent-s)") from None
        await asyncio.sleep(backoff.next())
        if since is not None and backoff.failures > 5:  # at the cap
            log.info("rm_still_unreachable", rm=address, for_s=round(loop.time() - since, 1))


async def probe(rm_address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> client_pb.ClusterMetrics:
    """The RM's cluster metrics; a TreadleError naming the address when it does not answer."""
    async with channel(rm_address) as ch:
        stub: Any = client_grpc.ClientStub(ch)
        m: client_pb.ClusterMetrics = await _call(
            "GetClusterMetrics",
            rm_address,
            stub.GetClusterMetrics,
            client_pb.GetClusterMetricsRequest(),
            timeout_s,
        )
        return m


async def wait_for_rm(rm_address: str, wait_s: float, nodes: int = 0) -> client_pb.ClusterMetrics:
    """``probe``, retried for up to ``wait_s`` wall seconds until the RM answers with at
    least ``nodes`` nodes registered (a deployment that is still starting); the error names
    the address and the wait."""
    deadline = asyncio.get_running_loop().time() + wait_s
    while True:
        try:
            m = await probe(rm_address)
            if m.nodes >= nodes:
                return m
            problem = TreadleError(
                f"the RM at {rm_address} has {m.nodes} of the {nodes} nodes waited for"
            )
        except TreadleError as e:
            problem = e
        if asyncio.get_running_loop().time() >= deadline:
            waited = f" (waited {wait_s:g} s)" if wait_s > 0 else ""
            raise TreadleError(f"{problem}{waited}") from None
        await asyncio.sleep(0.5)


def _run_started(
    m: client_pb.ClusterMetrics, workload: Workload, mode: str, t0: float
) -> ev.Record:
    head = ev.EventLog()
    head.run_started(
        t0,
        policy=m.policy,
        workload=workload.name,
        mode=mode,
        seed=workload.seed,
        dilation=m.clock.dilation,
        heartbeat_s=m.heartbeat_interval_s,
        nodes=m.nodes,
        capacity=dict(m.capacity.amounts),
    )
    return head.records[0]


def _check_shape(m: client_pb.ClusterMetrics, workload: Workload, address: str) -> None:
    want = workload.cluster.capacity
    have = wire.resources_from_pb(m.capacity, "cluster capacity")
    if have != want or m.nodes != len(workload.cluster.nodes):
        log.warning(
            "cluster_differs_from_workload",
            rm=address,
            nodes=m.nodes,
            capacity=have.to_dict(),
            workload_nodes=len(workload.cluster.nodes),
            workload_capacity=want.to_dict(),
        )


async def fetch_events(
    stub: Any,
    address: str,
    page: int = EVENTS_PAGE,
    absent_s: float = 0.0,
    since: list[ev.Record] | None = None,
) -> list[ev.Record]:
    """The RM's whole event log so far, page by page (through ``absent_s`` wall seconds
    of the RM's absence); with ``since``, the records after those, appended to it."""
    out: list[ev.Record] = [] if since is None else since
    offset = len(out)
    while True:
        resp = await _call_through_absence(
            "GetEvents",
            address,
            stub.GetEvents,
            client_pb.GetEventsRequest(offset=offset, limit=page),
            absent_s,
        )
        for line in resp.records:
            out.append(json.loads(line))
        if not resp.records or resp.next_offset <= offset:
            return out
        offset = resp.next_offset


class LiveAccounts:
    """A replay's account changes (``treadle.workload.timeline``) made through the RM's
    Admin service, signed with the driver's identity (the cluster's admin, see
    ``ClusterBase.driver_peer``): ``set_budget`` is SetBudget, ``add_budget`` AddBudget
    (relative, so the RM's charges since the last interval are kept exactly) and a rate
    change SetSpendingRate (the budget untouched). A boosted job's end is acted on when
    the driver sees it, at its next poll of the applications (``poll_s``)."""

    def __init__(self, admin: Any, address: str, workload: Workload) -> None:
        self.admin = admin
        self.address = address
        self.workload = workload
        self.timeline = AccountTimeline.of(workload)

    async def start(self) -> None:
        """Set every queue the run changes to its declared account (budget and rate, each
        when declared): the first calls, so a policy without accounts fails here, before
        any job is submitted."""
        changed = {a.queue for a in self.workload.admin}
        changed |= {j.queue for j in self.workload.jobs if j.spending_rate is not None}
        leaves = self.workload.leaf_queues
        for q in sorted(changed):
            spec = leaves.get(q)
            try:
                await self._call(
                    "GetQueueInfo", self.admin.GetQueueInfo, admin_pb.GetQueueInfoRequest(queue=q)
                )
                if spec is not None and spec.budget is not None:
                    await self._do(AccountCall(SET_BUDGET, q, spec.budget))
                if spec is not None and spec.spending_rate is not None:
                    await self._do(AccountCall(SET_SPENDING_RATE, q, spec.spending_rate))
            except TreadleError as e:
                raise TreadleError(
                    f"workload {self.workload.name!r} changes queue accounts (admin timeline "
                    f"or per-job spending_rate), which the RM refused: {e}"
                ) from None

    async def apply(self, calls: list[AccountCall]) -> None:
        for c in calls:
            await self._do(c)

    async def _do(self, c: AccountCall) -> None:
        q = c.queue
        if c.action == SET_BUDGET:
            request: Any = admin_pb.SetBudgetRequest(queue=q, budget=c.amount)
            await self._call("SetBudget", self.admin.SetBudget, request, q)
        elif c.action == ADD_BUDGET:
            request = admin_pb.AddBudgetRequest(queue=q, credits=c.amount)
            await self._call("AddBudget", self.admin.AddBudget, request, q)
        else:
            request = admin_pb.SetSpendingRateRequest(queue=q, spending_rate=c.amount)
            await self._call("SetSpendingRate", self.admin.SetSpendingRate, request, q)

    async def _call(self, name: str, rpc: Any, request: Any, queue: str | None = None) -> Any:
        q = queue if queue is not None else getattr(request, "queue", "")
        return await _call(f"{name} of queue {q!r}", self.address, rpc, request, RPC_TIMEOUT_S)


async def replay(
    rm_address: str,
    workload: Workload,
    *,
    alone: Mapping[str, float] | None = None,
    ask_strategy: str = "greedy",
    ask_params: Mapping[str, Any] | None = None,
    managed_am: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: ProgressFn | None = None,
    mode: str = "live",
    poll_s: float | None = None,
    rm_absent_s: float = RM_ABSENT_S,
    rm_log: Path | None = None,
) -> list[ev.Record]:
    """Replay ``workload``'s jobs on the cluster whose RM listens at ``rm_address``.

    Jobs are submitted at t0 + submit_s in emulated time, t0 being the RM's clock when the
    replay starts. ``timeout_s`` bounds the whole replay in wall seconds; when it runs out
    no more jobs are submitted, the unfinished applications are killed, and
    ``ReplayTimedOut`` names them and carries the run's records as far as they went. The replay
    outlives the RM's absence (a restart on the same address) for ``rm_absent_s`` wall
    seconds at a time, retrying its calls with backoff; beyond that, ``RmLost`` carries
    the records fetched so far and names the cause (the RM's last error in ``rm_log``,
    its log, if given: treadle.cluster.outcome). Returns this
    run's records: ``run_started`` (t = t0) first, then every record of the submitted
    applications, every node event and the policy's books of the run's span, sorted by
    time.
    """
    build("asks", ask_strategy, ask_params or {})  # a bad strategy fails before submitting
    if not timeout_s > 0:
        raise TreadleError(f"--timeout-s must be > 0, got {timeout_s:g}")
    if not rm_absent_s >= 0:
        raise TreadleError(f"--rm-absent-s must be >= 0, got {rm_absent_s:g}")
    ask = pb.AskStrategy(name=ask_strategy, params_json=json.dumps(dict(ask_params or {})))
    deadline = asyncio.get_running_loop().time() + timeout_s
    async with channel(rm_address) as ch:
        stub: Any = client_grpc.ClientStub(ch)
        m = await _call(
            "GetClusterMetrics",
            rm_address,
            stub.GetClusterMetrics,
            client_pb.GetClusterMetricsRequest(),
            CONNECT_TIMEOUT_S,
        )
        _check_shape(m, workload, rm_address)
        run = _Replay(stub, rm_address, workload, m, alone, ask, managed_am, poll_s, rm_absent_s)
        if workload.has_account_timeline:
            run.accounts = LiveAccounts(admin_grpc.AdminStub(ch), rm_address, workload)
            await run.accounts.start()
        try:
            timed_out = await run.poll_until_done(deadline, timeout_s, progress)
            absent_s = min(rm_absent_s, AFTER_TIMEOUT_ABSENT_S) if timed_out else rm_absent_s
            everything = await fetch_events(stub, rm_address, absent_s=absent_s)
        except RmUnreachable as e:
            records = run.records(run.events, m, mode)
            raise rm_lost(e, rm_address, records, run.jobs, run.names, rm_log) from None
    records = run.records(everything, m, mode)
    if timed_out is not None:
        submitted = set(run.names.values())
        raise ReplayTimedOut(timed_out, records, [j for j in run.jobs if j.name not in submitted])
    return records


class _Replay:
    """One replay on a reached RM, its phases as methods: ``submit_all`` (closed-loop
    followers by ``release_after``) and ``admin_all`` run beside ``poll_until_done``, which
    ends with every job ended or the timeout's kills; then ``records`` of the run."""

    def __init__(
        self,
        stub: Any,
        address: str,
        workload: Workload,
        m: client_pb.ClusterMetrics,
        alone: Mapping[str, float] | None,
        ask: pb.AskStrategy,  # sent with each submission
        managed_am: bool,
        poll_s: float | None,
        rm_absent_s: float,
    ) -> None:
        self.stub, self.address, self.workload = stub, address, workload
        self.alone, self.ask, self.managed_am = alone, ask, managed_am
        self.rm_absent_s = rm_absent_s
        self.lag = Lag()  # this replay's own: submissions and polls
        self.clock = EmulatedClock(m.clock.epoch_unix_s, m.clock.dilation or 1.0, self.lag)
        self.t0 = self.clock.now()
        if poll_s is None:
            poll_s = min(0.5, max(0.02, self.clock.wall_seconds(m.heartbeat_interval_s or 1.0)))
        self.poll_s = poll_s
        self.jobs = sorted(workload.jobs, key=lambda j: j.submit_s)
        self.names: dict[str, str] = {}  # app id -> job name
        self.accounts: LiveAccounts | None = None
        self.specs = {j.name: j for j in self.jobs}
        self.ended: set[str] = set()  # app ids seen in a final state
        self.states: dict[str, str] = {}  # app id -> its state at the last poll
        self.events: list[ev.Record] = []  # the RM's log as fetched while running
        self.followers = closed_loop_followers(workload)
        self.released = {j.name for js in self.followers.values() for j, _ in js}

    async def admin_all(self) -> None:
        assert self.accounts is not None
        for action in self.workload.admin:
            await self.clock.sleep_until(self.t0 + action.at_s)
            await self.accounts.apply(self.accounts.timeline.admin(action))

    async def submit_all(self) -> None:
        # Closed-loop users: a released job waits for its predecessor's end.
        followed = [j for j in self.jobs if j.name in self.followers]
        chains = [asyncio.create_task(self.release_after(j)) for j in followed]
        try:
            for job in self.jobs:
                if job.name not in self.released:
                    await self.clock.sleep_until(self.t0 + job.submit_s)
                    await self.submit(job)
            await asyncio.gather(*chains)
        finally:
            for c in chains:
                c.cancel()

    async def release_after(self, job: JobSpec) -> None:
        """Submit the jobs ``job``'s end releases, each its wait after that end."""
        while job.name not in self.names.values():
            await asyncio.sleep(self.poll_s)
        app_id = next(a for a, n in self.names.items() if n == job.name)
        while True:
            rpc = self.stub.GetApplicationReport
            request = client_pb.GetApplicationReportRequest(app_id=app_id)
            report = await _call_through_absence(
                "GetApplicationReport", self.address, rpc, request, self.rm_absent_s
            )
            if report.state in FINAL_STATES:
                break
            await asyncio.sleep(self.poll_s)
        for nxt, wait_s in sorted(self.followers[job.name], key=lambda f: f[1]):
            await self.clock.sleep_until(report.finish_s + wait_s)
            await self.submit(nxt)

    async def submit(self, job: JobSpec) -> None:
        if self.accounts is not None:
            await self.accounts.apply(self.accounts.timeline.job_submitted(job))
        a = (self.alone or {}).get(job.name)
        request = client_pb.SubmitApplicationRequest(
            user=job.user,
            queue=job.queue,
            job=wire.job_to_pb(job),
            alone_jct_s=a if a is not None and math.isfinite(a) else 0.0,
            has_alone_jct=a is not None and math.isfinite(a),
            managed_am=self.managed_am,
            ask_strategy=self.ask,
        )
        what, rpc = f"SubmitApplication of job {job.name!r}", self.stub.SubmitApplication
        resp = await _call_through_absence(
            what, self.address, rpc, request, self.rm_absent_s, idempotent=False
        )
        self.names[resp.app_id] = job.name

    async def poll_until_done(
        self, deadline: float, timeout_s: float, progress: ProgressFn | None
    ) -> str | None:
        """Submit the jobs (and run the admin timeline) while polling the applications
        every ``poll_s``: None once every job has ended, or past ``deadline`` the message
        of the timeout (``_time_out``). A failed submission or account change ends it."""
        loop = asyncio.get_running_loop()
        submitter = asyncio.create_task(self.submit_all())
        # The timeline runs beside the jobs and stops with them, as in the simulator.
        timeline = self.accounts is not None and bool(self.workload.admin)
        admin = asyncio.create_task(self.admin_all()) if timeline else None
        events_at = loop.time()
        try:
            while True:
                due = loop.time() + self.poll_s
                await asyncio.sleep(self.poll_s)
                self.lag.record_timer(loop.time() - due)
                self.lag.tick()
                if submitter.done():
                    submitter.result()  # a failed submission ends the replay
                if admin is not None and admin.done():
                    admin.result()  # so does a refused account change
                self.states = await self._listed_states(self.rm_absent_s)
                if loop.time() - events_at >= EVENTS_EVERY_S:  # what a lost RM leaves
                    events_at = loop.time()
                    with contextlib.suppress(TreadleError):  # tried again next time
                        await fetch_events(self.stub, self.address, since=self.events)
                if self.accounts is not None:
                    await self._apply_ends(self.accounts)
                done = sum(1 for s in self.states.values() if s in FINAL_STATES)
                if progress is not None:
                    progress(done, len(self.jobs), max(0.0, self.clock.now() - self.t0))
                if submitter.done() and done == len(self.jobs):
                    return None
                if loop.time() > deadline:
                    return await self._time_out(submitter, timeout_s)
        except BaseException:
            if not submitter.done():
                await _cancel(submitter)
            raise
        finally:
            if admin is not None and not admin.done():
                await _cancel(admin)

    async def _listed_states(self, absent_s: float) -> dict[str, str]:
        """The state of each of this replay's applications, as the RM lists them."""
        rpc, request = self.stub.ListApplications, client_pb.ListApplicationsRequest()
        apps = await _call_through_absence("ListApplications", self.address, rpc, request, absent_s)
        return {a.app_id: a.state for a in apps.applications if a.app_id in self.names}

    async def _apply_ends(self, accounts: LiveAccounts) -> None:
        """The account changes of each job newly seen ended (a boosted job's end)."""
        for app_id, state in self.states.items():
            if state in FINAL_STATES and app_id not in self.ended:
                self.ended.add(app_id)
                spec = self.specs[self.names[app_id]]
                await accounts.apply(accounts.timeline.job_ended(spec))

    async def _time_out(self, submitter: asyncio.Task[None], timeout_s: float) -> str:
        """Stop submitting, kill the open applications (``_kill_open``, its message returned)
        and take their states once more if the RM answers within AFTER_TIMEOUT_ABSENT_S."""
        await _cancel(submitter)  # no submission after the kills
        timed_out = await self._kill_open(timeout_s)
        with contextlib.suppress(TreadleError):  # else: the states last seen
            self.states = await self._listed_states(AFTER_TIMEOUT_ABSENT_S)
        return timed_out

    async def _kill_open(self, timeout_s: float) -> str:
        """Kill the applications not yet ended (leave nothing running on a shared cluster);
        return the one-line message naming them."""
        names, states = self.names, self.states
        open_ = [a for a in names if states.get(a) not in FINAL_STATES]
        for app_id in open_:
            with contextlib.suppress(grpc.aio.AioRpcError):
                request = client_pb.KillApplicationRequest(app_id=app_id)
                await self.stub.KillApplication(request, timeout=5)
        never = len(self.jobs) - len(names)
        listed = [f"{names[a]} ({a}, {states.get(a, 'unknown')})" for a in open_]
        shown = ", ".join(listed[:10]) + (
            f" and {len(listed) - 10} more" if len(listed) > 10 else ""
        )
        extra = f"; {never} job(s) not submitted" if never else ""
        return (
            f"replay on {self.address} timed out after {timeout_s:g} s: "
            f"{len(open_)} job(s) unfinished, killed: {shown or '-'}{extra}"
        )

    def records(
        self, everything: list[ev.Record], m: client_pb.ClusterMetrics, mode: str
    ) -> list[ev.Record]:
        """This run's records out of the RM's whole log, between run_started and
        run_finished (see ``replay``)."""
        names, t0 = self.names, self.t0
        ours = [r for r in everything if r.get("job") in names or r.get("event") in NODE_EVENTS]
        end = max((float(r["t"]) for r in ours), default=t0)
        ours += [
            r for r in everything if r.get("event") in RUN_EVENTS and t0 <= float(r["t"]) <= end
        ]
        ours.sort(key=lambda r: float(r["t"]))
        finished = sum(1 for s in self.states.values() if s == "FINISHED")
        tail = ev.EventLog()
        tail.run_finished(
            end,
            finished=finished,
            unfinished=len(self.jobs) - finished,
            stalled=None,
            submit_timers=self.lag.summary(),
        )
        return [_run_started(m, self.workload, mode, t0), *ours, *tail.records]


async def _cancel(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait for its end, whatever it was."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


def finished_count(records: Iterable[Mapping[str, Any]]) -> int:
    return sum(
        1
        for r in records
        if r.get("event") == ev.JOB_FINISHED and r.get("status", "SUCCEEDED") == "SUCCEEDED"
    )


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` that also turns SIGTERM into cancellation, so that ``finally``
    blocks (stopping local clusters) run before the process exits."""

    async def main() -> T:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        terminated = False

        def on_term() -> None:
            nonlocal terminated
            terminated = True
            if task is not None:
                task.cancel()

        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGTERM, on_term)
        try:
            return await coro
        except asyncio.CancelledError:
            if terminated:
                raise TreadleError("terminated by SIGTERM; local processes were stopped") from None
            raise
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGTERM)

    return asyncio.run(main())

"""The discrete-event simulator: the real RM, NM and AM cores driven by a virtual clock.

Events on the heap are node heartbeats (at each node's phase + k * heartbeat_s), AM
allocate calls (every ``am_interval_s`` while the job runs), job submissions, policy
ticks and the workload's admin timeline (``Workload.admin``: changes to queue accounts,
first at their instant; per-job spending rates change them at a job's submission and
end, ``treadle.workload.timeline``). A container's end is reported by an out-of-band
heartbeat of its node at that instant (YARN's NodeStatusUpdater); the AM hears of it at its
next call, and the RM places the next asks at the nodes' next heartbeats, as in YARN.

With ``cluster.scheduling: event`` (``treadle.sim.eventmode``) the RM also places and the
AMs also call at the instant something changes; the events above go on unchanged.

AM calls that cannot change anything are skipped too: when the AM's request would repeat
its last one (same asks, nothing released or finished, nothing received since), the RM
says whether it has anything to answer. While a container runs, such an AM (one whose asks
do not move with time alone) goes to sleep instead of queuing its next call, and calls
again at its first call time after the RM notes news for it (containers granted or ended,
its attempt or application ended, the cluster resized), or once no container runs (the
stall check watches the calls of an idle cluster). A wide job waiting for its tasks at a
10 ms AM interval thus costs a heap event per task end, not one per interval. Call times
and the order of calls at one instant are exactly those of queuing every call
(``treadle.sim.amclock``).

Heartbeats that cannot change anything are skipped: a node whose heartbeat would report
nothing and on which no pending ask could fit sleeps until its next container ends, and is
woken (at its own phase) when asks that might fit it appear. A skipped heartbeat is one
the RM would have answered with nothing, so results equal those of heartbeating always.
"""

from __future__ import annotations

import bisect
import gc
import heapq
import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from am.asks import AskStrategy
from am.core import ApplicationMaster
from nm.core import NodeManager
from rm.core.facade import ResourceManager
from rm.core.hints import SchedulingHints
from rm.core.state import Node
from rm.policy import Policy
from treadle import events as ev
from treadle.errors import ConflictError
from treadle.messages import AppSubmission
from treadle.model import AccountAction, JobSpec, Workload, closed_loop_followers
from treadle.sim.amclock import AmClock, AmKey
from treadle.sim.eventmode import NEWS, PLACE, EventScheduling
from treadle.sim.records import canonical_order, log as _log, logging_decisions
from treadle.workload.timeline import AccountCall, AccountTimeline

# Event kinds, in the order they run when they fall at the same instant. A container ends
# exactly ``duration`` after the AM call that launched it, so the AM's call at that same
# instant runs first: a real launch takes a moment, and the AM learns of the end on its
# next call, as on a live cluster.
_SUBMIT, _AM, _TICK, _HB, _WAKE = 0, 1, 2, 3, 4
# Event-driven scheduling only (``treadle.sim.eventmode``): an AM called back at once, and
# the RM's placement pass; both after everything else of their instant.
_NEWS, _PLACE = NEWS, PLACE
# An admin's account change runs before anything else at its instant: a tick then sees it.
_ADMIN = -1

ProgressFn = Callable[[int, int, float], None]  # (jobs done, jobs total, sim time)


@dataclass
class SimResult:
    records: list[ev.Record]
    jobs: int
    finished: int
    end_s: float
    stalled: str | None = None
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def unfinished(self) -> int:
        return self.jobs - self.finished


def node_phases(workload: Workload, phase_seed: int = 0) -> list[float]:
    """Each node's heartbeat phase in [0, heartbeat_s), in the cluster's node order: drawn
    from the workload's seed and ``phase_seed``."""
    rng = random.Random(f"phases:{workload.seed}:{phase_seed}")
    h = workload.cluster.heartbeat_s
    return [rng.random() * h for _ in workload.cluster.nodes]


class _SimNode:
    __slots__ = ("due", "index", "nm", "phase", "rm_node", "token")

    def __init__(self, nm: NodeManager, phase: float, index: int, rm_node: Node) -> None:
        self.nm = nm
        self.rm_node = rm_node  # the RM's book of it (the simulator never re-registers it)
        self.phase = phase
        self.index = index
        self.due: float | None = None  # time of this node's live heartbeat event
        self.token = 0  # heap entries carrying an older token are stale


class Simulation:
    """One run of one workload under one policy. Deterministic: no clock, no global RNG."""

    # Keep the instance's attributes few (28 in heartbeat mode): past about 30, CPython
    # 3.11 stops sharing the keys of instance dicts and every ``self.x`` in the loop gets
    # slower (two more cost 0.7% of the loop's instructions). Hence class-level defaults.
    #: Event-driven scheduling (``workload.cluster.scheduling == "event"``): the calls it
    #: adds at the instant something changes; None in heartbeat mode.
    events: EventScheduling | None = None

    def __init__(
        self,
        workload: Workload,
        policy: Policy,
        make_strategy: Callable[[], AskStrategy],
        *,
        policy_name: str | None = None,
        am_interval_s: float | None = None,
        alone_jct_s: dict[str, float] | None = None,
        stall_s: float = 3600.0,
        progress: ProgressFn | None = None,
        mode: str = "sim",
        phase_seed: int = 0,
        event_log: ev.EventLog | None = None,
    ) -> None:
        self.workload = workload
        self.h = workload.cluster.heartbeat_s
        self.am_interval_s = am_interval_s if am_interval_s is not None else self.h
        self.policy_name = policy_name or policy.name
        # A columnar log (treadle.event_columns) keeps no records: SimResult.records is
        # then empty and the log is read from where its sink wrote it.
        self.log = event_log if event_log is not None else ev.EventLog()
        self.rm = ResourceManager(
            policy,
            queues=workload.queues,
            users=workload.users,
            event_log=self.log,
            heartbeat_s=self.h,
        )
        #: What the loop asks the RM to skip work (a separate attribute, so the property
        #: tests can withdraw the hints).
        self.hints = self.rm.hints
        self.make_strategy = make_strategy
        self.alone = alone_jct_s or {}
        self.stall_s = stall_s
        self.progress = progress
        self.mode = mode
        #: Picks the nodes' heartbeat phases (with the workload's seed). Results depend on
        #: the phases a little, as a live cluster's do: vary it to see that spread.
        self.phase_seed = phase_seed
        self._heap: list[tuple[float, int, Any, Any]] = []  # (t, kind, seq or AmKey, payload)
        self._seq = 0
        self._nodes: dict[str, _SimNode] = {}
        self._sleepers: dict[str, _SimNode] = {}
        self._pending_seen = 0
        self._by_phase: list[_SimNode] = []  # every node, by heartbeat phase
        self._phases: list[float] = []
        self._wake_cursor: list[Any] = [0.0, 0, 0]  # [period start, index, steps taken]
        self._wake_scheduled = False
        #: allocates: AM calls made; allocates_skipped: calls that would have changed
        #: nothing (asleep or not); am_events: AM calls taken off the heap.
        self.stats = {
            "heartbeats": 0,
            "allocates": 0,
            "allocates_skipped": 0,
            "am_events": 0,
            "wakeups": 0,
        }
        self._heartbeats = 0  # counted apart from ``stats``: the hottest counter
        #: AMs asleep: app id -> (AM, its last call, which was skipped).
        self._sleeping: dict[str, tuple[ApplicationMaster, AmKey]] = {}
        self._busy: set[str] = set()  # nodes running containers
        self._on_node_heartbeat = self.rm.node_heartbeat
        self._pending = self.rm.state.pending  # the applications with asks
        #: The account changes this run makes (None: the workload makes none).
        self._accounts: AccountTimeline | None = None
        if workload.has_account_timeline:
            if not self.rm.accounts.enabled:
                raise ConflictError(
                    f"workload {workload.name!r} changes queue accounts (admin timeline or "
                    f"per-job spending_rate) but policy {self.policy_name!r} keeps none; "
                    "run it under a policy with accounts (dp)"
                )
            self._accounts = AccountTimeline.of(workload)

        if structlog.is_configured() and _log.is_enabled_for(logging.DEBUG):
            self._on_node_heartbeat = logging_decisions(policy, self.policy_name, self.rm)
        if workload.cluster.event_driven:
            self.events = EventScheduling(self)
            self._after_rm_change = self.events.after_rm_change  # type: ignore[method-assign]

    def _account_calls(self, calls: list[AccountCall]) -> None:
        accounts = self.rm.accounts
        for c in calls:
            getattr(accounts, c.action)(c.queue, c.amount)

    def _push(self, t: float, kind: int, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, payload))

    def _next_phase(self, node: _SimNode, t: float) -> float:
        """The first regular heartbeat time of ``node`` at or after ``t``."""
        k = math.ceil((t - node.phase) / self.h - 1e-9)
        return node.phase + max(k, 0) * self.h

    def _phase_after(self, node: _SimNode, t: float) -> float:
        """The first regular heartbeat time of ``node`` strictly after ``t``."""
        k = math.floor((t - node.phase) / self.h + 1e-9) + 1
        return node.phase + max(k, 0) * self.h

    def _schedule_hb(self, node: _SimNode, t: float) -> None:
        node.due = t
        node.token = token = node.token + 1
        # Heartbeats at one instant run in node order, not in the order they were queued:
        # the order must not depend on which heartbeats were skipped.
        self._seq = seq = self._seq + 1
        heapq.heappush(self._heap, (t, _HB, ((node.index + 1) << 40) | seq, (node, token)))

    def _heartbeat(self, node: _SimNode, t: float) -> None:
        """One heartbeat of ``node`` at ``t``, and when its next one is due."""
        nm = node.nm
        self._heartbeats += 1
        # Delivered in the same call, so acknowledged at once (``NodeManager.beat``).
        hb_resp = self._on_node_heartbeat(nm.beat(t), t)
        stopped = False
        if hb_resp.stop:
            for cid in hb_resp.stop:
                stopped |= nm.stop_container(cid, t)
        # Regular heartbeats follow the node's phase; a container's end triggers an
        # out-of-band one (as YARN's NodeStatusUpdater does).
        nf = nm.next_finish_s
        nid = nm.node_id
        if nf == math.inf:
            self._busy.discard(nid)
        else:
            self._busy.add(nid)
        hints = self.hints
        if type(hints) is SchedulingHints:  # could_place_on, inlined (not when wrapped)
            rm_node = node.rm_node
            pending = self._pending
            if rm_node.alive and pending.apps:
                m = pending.min_ask
                could = rm_node._free.covers(m if m is not None else pending.lower_bound())
            else:
                could = False
        else:
            could = hints.could_place_on(nid)
        if stopped or could:
            if stopped and self.events is not None:
                nf = t  # the NM reports the stop at once (an out-of-band heartbeat)
            self._schedule_hb(node, min(self._phase_after(node, t), nf))
            self._sleepers.pop(nid, None)
        else:
            if nf != math.inf:
                self._schedule_hb(node, nf)
            else:
                node.due = None
                node.token += 1
            self._sleepers[nid] = node

    def _wake(self, t: float) -> None:
        """Asks appeared that sleeping nodes might take. Regular heartbeats resume in phase
        order from ``t``, one node at a time and only while asks remain pending: once the
        asks are placed, the other sleepers' heartbeats would change nothing. Every node
        beats with the same period, so phase order is one static list walked cyclically."""
        base = math.floor(t / self.h) * self.h
        i = bisect.bisect_left(self._phases, t - base - 1e-12)
        if i == len(self._phases):
            i, base = 0, base + self.h
        self._wake_cursor = [base, i, 0]
        if not self._wake_scheduled:
            self._wake_scheduled = True
            self._push(base + self._phases[i], _WAKE, None)

    def _wake_next(self, t: float) -> None:
        self._wake_scheduled = False
        hints = self.hints
        cursor = self._wake_cursor
        order = self._by_phase
        n = len(order)
        while cursor[2] < n and hints.has_pending:
            base, i, _ = cursor
            node = order[i]
            due = base + node.phase
            if due > t + 1e-12:
                self._wake_scheduled = True
                self._push(due, _WAKE, None)
                return
            cursor[1] = i + 1
            if cursor[1] == n:
                cursor[0], cursor[1] = base + self.h, 0
            cursor[2] += 1
            nid = node.nm.node_id
            if nid not in self._sleepers or (node.due is not None and node.due <= t):
                continue  # heartbeating on its own already
            if hints.could_place_on(nid):
                self.stats["wakeups"] += 1
                self._heartbeat(node, t)

    def _after_rm_change(self, t: float) -> None:
        """Wake the nodes that an AM call or a tick gave something to do."""
        hints = self.hints
        for nid in self.rm.take_effects().touched_nodes:
            node = self._nodes[nid]
            due = self._next_phase(node, t)
            if node.due is None or due < node.due:
                self._schedule_hb(node, due)
            self._sleepers.pop(nid, None)
        if self._sleepers and hints.has_pending and hints.pending_epoch != self._pending_seen:
            self._pending_seen = hints.pending_epoch
            self._wake(t)

    def _am_key(self, clock: AmClock, k: int) -> Any:
        """The heap's tie-break for call ``k`` of an AM: its place among the AM calls of
        its instant (``treadle.sim.amclock``)."""
        return AmKey(clock, k)

    def _may_sleep(self, am: ApplicationMaster) -> bool:
        """Whether an AM whose call was just skipped may skip its next ones unseen: while
        a container runs (the stall check needs every call of an idle cluster), when its
        asks do not move with time alone and when the RM has nothing to do for a skipped
        call (no shares to compute)."""
        return bool(self._busy) and am.strategy.time_invariant and self.hints.unseen_skips

    def _wake_news(self, t: float, kind: int, key: Any, news: list[str] | None = None) -> None:
        """After the event (t, kind, key): AMs asleep that have news (``news``, else the
        RM's), or all of them once no container runs, call again at their first call after
        that event."""
        sleeping = self._sleeping
        if not self._busy:
            woken = list(sleeping)
        else:
            if news is None:
                news = self.hints.take_news()
            woken = [a for a in news if a in sleeping]
        for app_id in woken:
            am, last = sleeping.pop(app_id)
            clock = last.clock
            # Calls at t before this event already ran (unseen); a submission or an
            # account change runs before the calls of its instant.
            j = clock.first_after(last.k, t, at=kind <= _AM)
            if kind == _AM and clock.time(j) == t and AmKey(clock, j) < key:
                j = clock.first_after(j, t, at=False)
            self.stats["allocates_skipped"] += j - last.k - 1
            heapq.heappush(self._heap, (clock.time(j), _AM, self._am_key(clock, j), am))

    def run(self) -> SimResult:
        # The loop makes almost no reference cycles; collecting would only cost time.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run()
        finally:
            if was_enabled:
                gc.enable()

    def _run(self) -> SimResult:
        wl = self.workload
        rm = self.rm
        n = len(wl.cluster.nodes)
        shuffle = rm.policy.shuffles_tasks()  # AMs run tasks in a seeded random order
        self.log.run_started(
            0.0,
            policy=self.policy_name,
            workload=wl.name,
            mode=self.mode,
            seed=wl.seed,
            dilation=1.0,
            heartbeat_s=self.h,
            nodes=n,
            capacity=wl.cluster.capacity.to_dict(),
        )
        # Nodes heartbeat at random phases (drawn from the seed), as real NMs do.
        phases = node_phases(wl, self.phase_seed)
        for i, nspec in enumerate(wl.cluster.nodes):
            nm = NodeManager(nspec.node_id, nspec.resources, nspec.rack)
            rm.register_node(nm.registration(), 0.0)
            node = _SimNode(nm, phases[i], i, rm.state.nodes[nspec.node_id])
            self._nodes[nspec.node_id] = node
            self._sleepers[nspec.node_id] = node
        self.hints.take_news()  # from now on the RM notes which AMs have news
        # Sleeping AMs wake on news (``_wake_news``): the RM's list of it, read directly
        # to skip the call on the many events that bring none (``take_news`` says "every
        # AM" only when the cluster's size changed, which nothing in the loop does).
        st = rm.state
        news = st.news
        assert news is not None
        capacity = st.capacity
        self._by_phase = sorted(self._nodes.values(), key=lambda nd: (nd.phase, nd.index))
        self._phases = [nd.phase for nd in self._by_phase]
        # Closed-loop users: a follower is submitted when its predecessor ends, + wait.
        followers = closed_loop_followers(wl)
        released: set[str] = {j.name for js in followers.values() for j, _ in js}
        for jspec in wl.jobs:
            if jspec.name not in released:
                self._push(jspec.submit_s, _SUBMIT, jspec)
        job_names: dict[str, str] = {}  # app id -> job name, for the followers
        timeline = self._accounts
        specs: dict[str, JobSpec] = {}  # app id -> job, when jobs change accounts
        if timeline is not None:
            for entry in wl.admin:
                self._push(entry.at_s, _ADMIN, entry)
        tick = rm.policy.tick_interval_s
        if tick:
            self._push(tick, _TICK, tick)

        total = len(wl.jobs)
        submitted = finished = 0
        active: dict[str, ApplicationMaster] = {}
        events = self.events
        if events is not None:
            events.active = active
        # AMs that an event call finished while their periodic call was queued.
        gone: set[ApplicationMaster] = events.gone if events is not None else set()
        last_events = 0
        last_progress_t = 0.0
        stalled: str | None = None
        heap = self._heap
        heappop = heapq.heappop
        heappush = heapq.heappush
        heartbeat = self._heartbeat
        schedule_hb = self._schedule_hb
        nodes = self._nodes
        log = self.log
        t = 0.0
        stats = self.stats
        sleeping = self._sleeping
        busy = self._busy
        h = self.am_interval_s
        am_key = self._am_key
        while heap and finished < total:
            t, kind, key, payload = heappop(heap)
            if kind == _HB:
                node, token = payload
                if node.token == token:  # else superseded by an earlier wake-up
                    heartbeat(node, t)
            elif kind == _WAKE:
                self._wake_next(t)
            elif kind == _AM or kind == _NEWS:  # noqa: SIM109 (stops at the common kind)
                am: ApplicationMaster = payload
                if kind == _NEWS:  # an event call (event-driven scheduling)
                    assert events is not None
                    if not events.called_back(am):
                        continue
                elif gone and am in gone:
                    gone.discard(am)  # its periodic call, after an event call finished it
                    continue
                else:
                    stats["am_events"] += 1
                req = am.allocate_request(t)
                if am.repeats_last_request and self.hints.skip_allocate(
                    am.app_id, t, reads_share=am.strategy.reads_share, asks=bool(req.asks)
                ):
                    # The call would repeat the last one and get nothing back (or a share
                    # the AM does not read); so would the next ones until the RM has news
                    # for it (or no container runs).
                    stats["allocates_skipped"] += 1
                    if kind == _NEWS:
                        pass  # nothing to say: its periodic calls go on as they were
                    elif self._may_sleep(am):
                        sleeping[am.app_id] = (am, key)
                    else:
                        heappush(heap, (t + h, _AM, am_key(key.clock, key.k + 1), am))
                else:
                    stats["allocates"] += 1
                    resp = rm.on_allocate(req, t)
                    for launch in am.on_allocate_response(resp, t):
                        node = nodes[launch.node_id]
                        node.nm.start_container(launch, t)
                        busy.add(launch.node_id)
                        # Its out-of-band heartbeat: at its end; in event mode at once too,
                        # reporting the start.
                        due = t + launch.duration_s if events is None else t
                        if node.due is None or due < node.due:
                            schedule_hb(node, due)
                    if am.finished:
                        rm.finish_application(am.app_id, am.final_status, t)
                        del active[am.app_id]
                        finished += 1
                        if timeline is not None:
                            self._account_calls(timeline.job_ended(specs.pop(am.app_id)))
                        if followers:
                            for nxt, wait_s in followers.get(job_names[am.app_id], ()):
                                self._push(t + wait_s, _SUBMIT, nxt)
                        if self.progress is not None:
                            self.progress(finished, total, t)
                        if kind == _NEWS:
                            assert events is not None
                            events.drop_periodic(am)
                    else:
                        if kind == _AM:
                            heappush(heap, (t + h, _AM, am_key(key.clock, key.k + 1), am))
                        if events is not None and not am.quiet:
                            events.call_back(am, t)  # it has more to say: its next asks
                    self._after_rm_change(t)
                # Stall detection: nothing logged for stall_s while jobs wait and no
                # container runs (a task longer than stall_s is progress, not a stall).
                if len(log) != last_events:
                    last_events = len(log)
                    last_progress_t = t
                elif t - last_progress_t > self.stall_s and submitted == total:
                    if any(n.nm.next_finish_s != math.inf for n in nodes.values()):
                        last_progress_t = t
                    else:
                        stalled = (
                            f"no progress for {self.stall_s:g} s at t={t:g}: {total - finished} "
                            f"job(s) unfinished under policy {self.policy_name!r}"
                        )
                        break
            elif kind == _SUBMIT:
                job: JobSpec = payload
                submitted += 1
                if timeline is not None:
                    self._account_calls(timeline.job_submitted(job))
                app_id = rm.submit_application(
                    AppSubmission(
                        job.name, job.user, job.queue, job.tasks, self.alone.get(job.name), job
                    ),
                    t,
                )
                rm.register_application_master(app_id, t)
                job_names[app_id] = job.name
                if timeline is not None:
                    specs[app_id] = job
                am = ApplicationMaster(
                    job,
                    app_id,
                    self.make_strategy(),
                    task_order_seed=f"tasks:{wl.seed}:{app_id}" if shuffle else None,
                )
                active[app_id] = am
                heappush(heap, (t, _AM, am_key(AmClock(t, h, key), 0), am))
            elif kind == _ADMIN:
                action: AccountAction = payload
                assert timeline is not None
                self._account_calls(timeline.admin(action))
            elif kind == _PLACE:
                assert events is not None
                events.place(t)
            else:  # _TICK
                rm.tick(t)
                self._after_rm_change(t)
                self._push(t + payload, _TICK, payload)
            if events is not None:
                events.on_news(t, kind, key)
            elif sleeping and (news or not busy or st.capacity is not capacity):
                self._wake_news(t, kind, key)
        stats["heartbeats"] += self._heartbeats
        self._heartbeats = 0
        self.log.run_finished(t, finished=finished, unfinished=total - finished, stalled=stalled)
        return SimResult(
            canonical_order(self.log.records), total, finished, t, stalled, dict(stats)
        )

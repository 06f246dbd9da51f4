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

The loop's rule: the engine alone pops the heap; each event goes to the one handler of
its kind (``treadle.sim.kinds``; ``treadle.sim.handlers.EventHandlers.table``, a tuple
indexed by the kind, bound once per run), which acts on the cores and queues the events
that follow; then, unless the handler said the event was moot, the AMs with news are
woken (``_wake_news``) or, in event mode, called back. Nothing else is dispatched by kind.
A handler keeps what it reads in slots of the one ``EventHandlers`` object, not in locals
of the loop, and calls no other handler except the heartbeat's (a heartbeat now: the
wake-up walk, a placement pass). One call per event through the table costs what the
if/elif chain it replaced cost, provided a hot handler does its work itself rather than
call on (measured in ``tests/benchmarks/bench_sim.py``).
"""

from __future__ import annotations

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
from rm.policy import Policy
from treadle import events as ev
from treadle.errors import ConflictError, WorkloadError
from treadle.model import JobSpec, ProgressFn, Workload, closed_loop_followers
from treadle.sim.amclock import AmClock, AmKey
from treadle.sim.eventmode import EventScheduling
from treadle.sim.feed import JobFeed, queue_all
from treadle.sim.handlers import EventHandlers, SimNode
from treadle.sim.kinds import ADMIN, AM, HB, TICK
from treadle.sim.records import canonical_order, log as _log, logging_decisions
from treadle.workload.timeline import AccountCall, AccountTimeline
from treadle.yarnids import SIM_CLUSTER_TIMESTAMP


@dataclass
class SimResult:
    records: list[ev.Record]
    jobs: int
    finished: int
    end_s: float
    stalled: str | None = None
    stats: dict[str, int] = field(default_factory=dict)
    #: Jobs submitted (those a queue refused included).
    submitted: int = 0
    #: Why a streamed workload's run ended early: the job its source could not read (the
    #: run's results are then partial: the jobs submitted before it).
    source_error: WorkloadError | None = None

    @property
    def unfinished(self) -> int:
        return self.jobs - self.finished


def node_phases(workload: Workload, phase_seed: int = 0) -> list[float]:
    """Each node's heartbeat phase in [0, heartbeat_s), in the cluster's node order: drawn
    from the workload's seed and ``phase_seed``."""
    rng = random.Random(f"phases:{workload.seed}:{phase_seed}")
    h = workload.cluster.heartbeat_s
    return [rng.random() * h for _ in workload.cluster.nodes]


class Simulation:
    """One run of one workload under one policy. Deterministic: no clock, no global RNG."""

    # Keep the instance's attributes few (22 in heartbeat mode): past about 30, CPython
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
        alone_jct_s: dict[str, float] | Callable[[JobSpec], float | None] | None = None,
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
            cluster_timestamp=SIM_CLUSTER_TIMESTAMP,  # fixed: the same ids every run
        )
        #: What the loop asks the RM to skip work (a separate attribute, so the property
        #: tests can withdraw the hints).
        self.hints = self.rm.hints
        self.make_strategy = make_strategy
        #: Each job's alone-JCT reference (slowdown's denominator): by job name, or a
        #: function of the job (computed as jobs are submitted, for a streamed workload).
        self.alone = alone_jct_s if alone_jct_s is not None else {}
        self.stall_s = stall_s
        self.progress = progress
        self.mode = mode
        #: Picks the nodes' heartbeat phases (with the workload's seed). Results depend on
        #: the phases a little, as a live cluster's do: vary it to see that spread.
        self.phase_seed = phase_seed
        self._heap: list[tuple[float, int, Any, Any]] = []  # (t, kind, seq or AmKey, payload)
        self._seq = 0
        self._nodes: dict[str, SimNode] = {}
        self._sleepers: dict[str, SimNode] = {}
        #: allocates: AM calls made; allocates_skipped: calls that would have changed
        #: nothing (asleep or not); am_events: AM calls taken off the heap.
        self.stats = {
            "heartbeats": 0,
            "allocates": 0,
            "allocates_skipped": 0,
            "am_events": 0,
            "wakeups": 0,
        }
        #: AMs asleep: app id -> (AM, its last call, which was skipped).
        self._sleeping: dict[str, tuple[ApplicationMaster, AmKey]] = {}
        self._busy: set[str] = set()  # nodes running containers
        self._on_node_heartbeat = self.rm.node_heartbeat
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

    def _account_calls(self, calls: list[AccountCall]) -> None:
        accounts = self.rm.accounts
        for c in calls:
            getattr(accounts, c.action)(c.queue, c.amount)

    def _push(self, t: float, kind: int, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, payload))

    def _next_phase(self, node: SimNode, t: float) -> float:
        """The first regular heartbeat time of ``node`` at or after ``t``."""
        k = math.ceil((t - node.phase) / self.h - 1e-9)
        return node.phase + max(k, 0) * self.h

    def _phase_after(self, node: SimNode, t: float) -> float:
        """The first regular heartbeat time of ``node`` strictly after ``t``."""
        k = math.floor((t - node.phase) / self.h + 1e-9) + 1
        return node.phase + max(k, 0) * self.h

    def _schedule_hb(self, node: SimNode, t: float) -> None:
        node.due = t
        node.token = token = node.token + 1
        # Heartbeats at one instant run in node order, not in the order they were queued:
        # the order must not depend on which heartbeats were skipped.
        self._seq = seq = self._seq + 1
        heapq.heappush(self._heap, (t, HB, ((node.index + 1) << 40) | seq, (node, token)))

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
            j = clock.first_after(last.k, t, at=kind <= AM)
            if kind == AM and clock.time(j) == t and AmKey(clock, j) < key:
                j = clock.first_after(j, t, at=False)
            self.stats["allocates_skipped"] += j - last.k - 1
            heapq.heappush(self._heap, (clock.time(j), AM, self._am_key(clock, j), am))

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
        # The setup stays in the loop's function: moved into a method of its own, it left
        # the loop's code unchanged, yet the loop took about 0.9% more instructions
        # (cachegrind, fifo at 100 nodes, twice; the cause was not found).
        wl = self.workload
        rm = self.rm
        self.log.run_started(
            0.0,
            policy=self.policy_name,
            workload=wl.name,
            mode=self.mode,
            seed=wl.seed,
            dilation=1.0,
            heartbeat_s=self.h,
            nodes=len(wl.cluster.nodes),
            capacity=wl.cluster.capacity.to_dict(),
        )
        # Nodes heartbeat at random phases (drawn from the seed), as real NMs do.
        phases = node_phases(wl, self.phase_seed)
        for i, nspec in enumerate(wl.cluster.nodes):
            nm = NodeManager(nspec.node_id, nspec.resources, nspec.rack)
            rm.register_node(nm.registration(), 0.0)
            node = SimNode(nm, phases[i], i, rm.state.nodes[nspec.node_id])
            self._nodes[nspec.node_id] = node
            self._sleepers[nspec.node_id] = node
        self.hints.take_news()  # from now on the RM notes which AMs have news
        followers = closed_loop_followers(wl)
        feed = None
        if wl.source is None:
            queue_all(self._heap, wl, {j.name for js in followers.values() for j, _ in js})
        else:
            feed = JobFeed(self._heap, wl)
        if self._accounts is not None:
            for entry in wl.admin:
                self._push(entry.at_s, ADMIN, entry)
        tick = rm.policy.tick_interval_s
        if tick:
            self._push(tick, TICK, tick)

        run = EventHandlers(self, followers, feed)
        handle = run.table()
        # Sleeping AMs wake on news (``_wake_news``): the RM's list of it, read directly
        # to skip the call on the many events that bring none (``take_news`` says "every
        # AM" only when the cluster's size changed, which nothing in the loop does).
        st = self.rm.state
        news = st.news
        assert news is not None
        capacity = st.capacity
        events = self.events
        sleeping = self._sleeping
        busy = self._busy
        heap = self._heap
        heappop = heapq.heappop
        t = 0.0
        while heap and run.running:
            t, kind, key, payload = heappop(heap)
            if handle[kind](t, key, payload):
                continue  # moot: nothing to note after it
            if events is not None:
                events.on_news(t, kind, key)
            elif sleeping and (news or not busy or st.capacity is not capacity):
                self._wake_news(t, kind, key)
        self.stats["heartbeats"] += run.heartbeats
        finished, total = run.finished, run.total
        self.log.run_finished(
            t, finished=finished, unfinished=total - finished, stalled=run.stalled
        )
        return SimResult(
            canonical_order(self.log.records),
            total,
            finished,
            t,
            run.stalled,
            dict(self.stats),
            run.submitted,
            feed.error if feed is not None else None,
        )

"""What the simulator does with each kind of heap event: one method per kind, in the
order of ``treadle.sim.kinds`` (``treadle.sim.engine`` owns the heap and the loop that
dispatches to them).

A handler takes the event's time, tie-break key and payload, acts on the cores (the RM,
the AMs, the NMs) and queues the events that follow. It returns True when the event turned
out moot (the periodic call of an AM whose job an event call ended, an event call made
needless, a stall that ends the run): the loop then skips its after-event step for it. A
handler returns None or False otherwise (testing the result costs the loop what
discarding it would).

The run's state lives here, in slots of one object: the counters (jobs submitted and
finished, the stall watch, heartbeats), the walk that wakes sleeping nodes and the
engine's parts a handler reads (hoisted once, so ``self.x`` is a slot read). The loop
reads ``running`` to know when to stop.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from am.core import ApplicationMaster
from rm.core.hints import SchedulingHints
from treadle.messages import AppSubmission, ContainerLaunch
from treadle.model import AccountAction, JobSpec
from treadle.sim.amclock import AmClock, AmKey
from treadle.sim.kinds import ADMIN, AM, HB, KINDS, NEWS, PLACE, SUBMIT, TICK, WAKE

if TYPE_CHECKING:
    from nm.core import NodeManager
    from rm.core.facade import ResourceManager
    from rm.core.state import Node
    from treadle.events import EventLog
    from treadle.model import ProgressFn, Workload
    from treadle.sim.eventmode import EventScheduling
    from treadle.sim.feed import JobFeed
    from treadle.workload.timeline import AccountCall, AccountTimeline


class SimNode:
    """One simulated node: its NM core, the RM's book of it, its heartbeat phase and the
    token of its live heartbeat event."""

    __slots__ = ("due", "index", "nm", "phase", "rm_node", "token")

    def __init__(self, nm: NodeManager, phase: float, index: int, rm_node: Node) -> None:
        self.nm = nm
        self.rm_node = rm_node  # the RM's book of it (the simulator never re-registers it)
        self.phase = phase
        self.index = index
        self.due: float | None = None  # time of this node's live heartbeat event
        self.token = 0  # heap entries carrying an older token are stale


class Engine(Protocol):
    """What the handlers use of the engine that owns them (``treadle.sim.engine``)."""

    workload: Workload
    h: float
    am_interval_s: float
    policy_name: str
    log: EventLog
    rm: ResourceManager
    hints: SchedulingHints
    alone: dict[str, float] | Callable[[JobSpec], float | None]
    stall_s: float
    progress: ProgressFn | None
    stats: dict[str, int]
    events: EventScheduling | None
    _heap: list[tuple[float, int, Any, Any]]
    _nodes: dict[str, SimNode]
    _sleepers: dict[str, SimNode]
    _sleeping: dict[str, tuple[ApplicationMaster, AmKey]]
    _busy: set[str]
    _accounts: AccountTimeline | None
    _on_node_heartbeat: Callable[..., Any]

    def make_strategy(self) -> Any: ...
    def _account_calls(self, calls: list[AccountCall]) -> None: ...
    def _push(self, t: float, kind: int, payload: Any) -> None: ...
    def _next_phase(self, node: SimNode, t: float) -> float: ...
    def _phase_after(self, node: SimNode, t: float) -> float: ...
    def _schedule_hb(self, node: SimNode, t: float) -> None: ...
    def _am_key(self, clock: AmClock, k: int) -> Any: ...
    def _may_sleep(self, am: ApplicationMaster) -> bool: ...


#: A handler: (time, tie-break key, payload) -> True when the event was moot.
Handler = Callable[[float, Any, Any], "bool | None"]


@dataclass(slots=True)
class WakeCursor:
    """Where the walk of the nodes in phase order stands (``EventHandlers.wake``)."""

    period_start: float  # the start of the heartbeat period the walk is in
    index: int  # the next node's place in phase order
    steps: int = 0  # nodes walked past since asks last appeared


class EventHandlers:
    """The handlers of one run of one ``Simulation``, and the run's counters."""

    __slots__ = (
        "accounts",
        "active",
        "after_rm_change",
        "alone_of",
        "am_interval_s",
        "am_key",
        "busy",
        "by_phase",
        "cursor",
        "events",
        "feed",
        "finished",
        "followers",
        "gone",
        "heap",
        "heartbeat_s",
        "heartbeats",
        "hints",
        "job_names",
        "last_events",
        "last_progress_t",
        "nodes",
        "on_node_heartbeat",
        "pending",
        "pending_seen",
        "phase_after",
        "phases",
        "rm",
        "running",
        "schedule_hb",
        "shuffle",
        "sim",
        "sleepers",
        "sleeping",
        "specs",
        "stalled",
        "stats",
        "submitted",
        "timeline",
        "total",
        "wake_queued",
    )

    def __init__(
        self,
        sim: Engine,
        followers: dict[str, list[tuple[JobSpec, float]]],
        feed: JobFeed | None = None,
    ) -> None:
        self.sim = sim
        # Read at the start of the run, not at the simulation's construction: the property
        # tests swap the hints and the RM for wrappers after ``Simulation.__init__``.
        self.rm = sim.rm
        self.hints = sim.hints
        self.stats = sim.stats
        self.heap = sim._heap
        self.sleeping = sim._sleeping
        self.nodes = sim._nodes
        self.busy = sim._busy
        self.schedule_hb = sim._schedule_hb
        self.on_node_heartbeat = sim._on_node_heartbeat
        self.pending = self.rm.state.pending  # the applications with asks
        self.phase_after = sim._phase_after
        self.heartbeats = 0  # counted apart from ``stats``: the hottest counter
        self.am_key = sim._am_key
        self.accounts = sim._account_calls
        self.am_interval_s = sim.am_interval_s
        self.events = events = sim.events
        self.after_rm_change = self.wake_nodes if events is None else events.after_rm_change
        self.timeline = sim._accounts
        self.shuffle = self.rm.policy.shuffles_tasks()  # AMs run tasks in a seeded order
        # Closed-loop users: a follower is submitted when its predecessor ends, + wait.
        self.followers = followers
        self.total = sim.workload.job_count
        self.submitted = self.finished = 0
        # False once every job finished, the run stalled or a streamed workload's source
        # failed (``feed.error``).
        self.running = self.total > 0
        self.feed = feed
        if feed is not None and not feed.start():
            self.running = False
        alone = sim.alone
        self.alone_of: Callable[[JobSpec], float | None] = (
            (lambda job: alone.get(job.name)) if isinstance(alone, dict) else alone
        )
        self.stalled: str | None = None
        self.active: dict[str, ApplicationMaster] = {}
        if events is not None:
            events.active = self.active
        # AMs that an event call finished while their periodic call was queued.
        self.gone: set[ApplicationMaster] = events.gone if events is not None else set()
        self.job_names: dict[str, str] = {}  # app id -> job name, for the followers
        self.specs: dict[str, JobSpec] = {}  # app id -> job, when jobs change accounts
        self.last_events = 0
        self.last_progress_t = 0.0
        # Waking sleeping nodes (``wake_nodes``): every node, by heartbeat phase.
        self.sleepers = sim._sleepers
        self.heartbeat_s = sim.h
        self.by_phase = sorted(sim._nodes.values(), key=lambda nd: (nd.phase, nd.index))
        self.phases = [nd.phase for nd in self.by_phase]
        self.cursor = WakeCursor(0.0, 0)
        self.wake_queued = False
        self.pending_seen = 0  # the RM's pending epoch when the walk last started

    def table(self) -> tuple[Handler, ...]:
        """The handlers indexed by event kind (ADMIN, -1, last)."""
        by_kind: dict[int, Handler] = {
            SUBMIT: self.submit,
            AM: self.am_call,
            TICK: self.tick,
            HB: self.heartbeat,
            WAKE: self.wake,
            NEWS: self.news_call,
            PLACE: self.place,
            ADMIN: self.admin,
        }
        return (*(by_kind[kind] for kind in range(KINDS - 1)), by_kind[ADMIN])

    def heartbeat(self, t: float, key: Any, payload: tuple[SimNode, int]) -> None:
        """A node's heartbeat (regular, or out of band at a container's end), and when its
        next one is due; none if a wake-up moved it earlier since (an older token). A
        heartbeat now (the wake-up walk, a placement pass) passes the node's own token."""
        node, token = payload
        if node.token != token:
            return
        nm = node.nm
        self.heartbeats += 1
        # Delivered in the same call, so acknowledged at once (``NodeManager.beat``).
        hb_resp = self.on_node_heartbeat(nm.beat(t), t)
        stopped = False
        if hb_resp.stop:
            for cid in hb_resp.stop:
                stopped |= nm.stop_container(cid, t)
        # Regular heartbeats follow the node's phase; a container's end triggers an
        # out-of-band one (as YARN's NodeStatusUpdater does).
        nf = nm.next_finish_s
        nid = nm.node_id
        if nf == math.inf:
            self.busy.discard(nid)
        else:
            self.busy.add(nid)
        hints = self.hints
        if type(hints) is SchedulingHints:  # could_place_on, inlined (not when wrapped)
            rm_node = node.rm_node
            pending = self.pending
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
            self.schedule_hb(node, min(self.phase_after(node, t), nf))
            self.sleepers.pop(nid, None)
        else:
            if nf != math.inf:
                self.schedule_hb(node, nf)
            else:
                node.due = None
                node.token += 1
            self.sleepers[nid] = node

    def wake_nodes(self, t: float) -> None:
        """After an AM call or a tick: the nodes the RM has something for heartbeat at
        their next phase, and new asks start a walk of the sleeping nodes."""
        hints = self.hints
        nodes = self.nodes
        sleepers = self.sleepers
        next_phase = self.sim._next_phase
        for nid in self.rm.take_effects().touched_nodes:
            node = nodes[nid]
            due = next_phase(node, t)
            if node.due is None or due < node.due:
                self.schedule_hb(node, due)
            sleepers.pop(nid, None)
        if sleepers and hints.has_pending and hints.pending_epoch != self.pending_seen:
            self.pending_seen = hints.pending_epoch
            self._start_walk(t)

    def _start_walk(self, t: float) -> None:
        """Asks appeared that sleeping nodes might take. Regular heartbeats resume in phase
        order from ``t``, one node at a time and only while asks remain pending: once the
        asks are placed, the other sleepers' heartbeats would change nothing. Every node
        beats with the same period, so phase order is one static list walked cyclically."""
        h = self.heartbeat_s
        base = math.floor(t / h) * h
        i = bisect.bisect_left(self.phases, t - base - 1e-12)
        if i == len(self.phases):
            i, base = 0, base + h
        self.cursor = WakeCursor(base, i)
        if not self.wake_queued:
            self.wake_queued = True
            self.sim._push(base + self.phases[i], WAKE, None)

    def wake(self, t: float, key: Any, payload: None) -> None:
        """The walk reaches a node's phase: the sleepers due by ``t`` on which an ask
        could fit heartbeat, until one is due later (queued) or no ask is pending."""
        self.wake_queued = False
        hints = self.hints
        cursor = self.cursor
        order = self.by_phase
        n = len(order)
        while cursor.steps < n and hints.has_pending:
            base = cursor.period_start
            i = cursor.index
            node: SimNode = order[i]
            due = base + node.phase
            if due > t + 1e-12:
                self.wake_queued = True
                self.sim._push(due, WAKE, None)
                return
            i += 1
            if i == n:
                cursor.period_start, i = base + self.heartbeat_s, 0
            cursor.index = i
            cursor.steps += 1
            nid = node.nm.node_id
            if nid not in self.sleepers or (node.due is not None and node.due <= t):
                continue  # heartbeating on its own already
            if hints.could_place_on(nid):
                self.stats["wakeups"] += 1
                self.heartbeat(t, None, (node, node.token))

    def am_call(self, t: float, key: AmKey, am: ApplicationMaster) -> bool | None:
        """A periodic AM call."""
        gone = self.gone
        if gone and am in gone:
            gone.discard(am)  # its periodic call, after an event call finished it
            return True
        self.stats["am_events"] += 1
        return self._allocate(t, key, am, True)

    def news_call(self, t: float, key: Any, am: ApplicationMaster) -> bool | None:
        """An AM called back at once (event-driven scheduling)."""
        assert self.events is not None
        if not self.events.called_back(am):
            return True
        return self._allocate(t, key, am, False)

    def _allocate(self, t: float, key: AmKey, am: ApplicationMaster, periodic: bool) -> bool:
        """The AM's allocate call, unless the RM says it would change nothing."""
        stats = self.stats
        req = am.allocate_request(t)
        if am.repeats_last_request and self.hints.skip_allocate(
            am.app_id, t, reads_share=am.strategy.reads_share, asks=bool(req.asks)
        ):
            # The call would repeat the last one and get nothing back (or a share the AM
            # does not read); so would the next ones until the RM has news for it (or no
            # container runs). An event call's periodic calls go on as they were.
            stats["allocates_skipped"] += 1
            if not periodic:
                pass
            elif self.sim._may_sleep(am):
                self.sleeping[am.app_id] = (am, key)
            else:
                self._next_call(t, key, am)
        else:
            stats["allocates"] += 1
            self._start(am.on_allocate_response(self.rm.on_allocate(req, t), t), t)
            if am.finished:
                self._job_ended(am, t, periodic)
            else:
                if periodic:
                    self._next_call(t, key, am)
                events = self.events
                if events is not None and not am.quiet:
                    events.call_back(am, t)  # it has more to say: its next asks
            self.after_rm_change(t)
        return self._stall_check(t)

    def _next_call(self, t: float, key: AmKey, am: ApplicationMaster) -> None:
        """Queue the AM's periodic call after the one at ``t``."""
        next_key = self.am_key(key.clock, key.k + 1)
        heapq.heappush(self.heap, (t + self.am_interval_s, AM, next_key, am))

    def _start(self, launches: Iterable[ContainerLaunch], t: float) -> None:
        """The containers an allocate response launched start on their nodes."""
        nodes = self.nodes
        in_event_mode = self.events is not None
        for launch in launches:
            node = nodes[launch.node_id]
            node.nm.start_container(launch, t)
            self.busy.add(launch.node_id)
            # Its out-of-band heartbeat: at its end; in event mode at once too, reporting
            # the start.
            due = t if in_event_mode else t + launch.duration_s
            if node.due is None or due < node.due:
                self.schedule_hb(node, due)

    def _job_ended(self, am: ApplicationMaster, t: float, periodic: bool) -> None:
        app_id = am.app_id
        self.rm.finish_application(app_id, am.final_status, t)
        del self.active[app_id]
        am.release()  # what it kept per task goes now, not when the collector runs
        self.finished += 1
        self.running = self.finished < self.total
        if self.timeline is not None:
            self.accounts(self.timeline.job_ended(self.specs.pop(app_id)))
        if self.followers:
            push = self.sim._push
            for nxt, wait_s in self.followers.get(self.job_names[app_id], ()):
                push(t + wait_s, SUBMIT, nxt)
        progress = self.sim.progress
        if progress is not None:
            progress(self.finished, self.total, t)
        if not periodic:
            assert self.events is not None
            self.events.drop_periodic(am)

    def _stall_check(self, t: float) -> bool:
        """Whether the run stalled: nothing logged for ``stall_s`` while jobs wait and no
        container runs (a task longer than ``stall_s`` is progress, not a stall)."""
        sim = self.sim
        logged = len(sim.log)
        if logged != self.last_events:
            self.last_events = logged
            self.last_progress_t = t
        elif t - self.last_progress_t > sim.stall_s and self.submitted == self.total:
            if any(n.nm.next_finish_s != math.inf for n in sim._nodes.values()):
                self.last_progress_t = t
            else:
                self.stalled = (
                    f"no progress for {sim.stall_s:g} s at t={t:g}: "
                    f"{self.total - self.finished} job(s) unfinished under policy "
                    f"{sim.policy_name!r}"
                )
                self.running = False
                return True
        return False

    def submit(self, t: float, key: int, job: JobSpec | None) -> bool | None:
        """A job's submission: the RM admits it and its AM's first call is queued. No job:
        the streamed workload's marker (``treadle.sim.feed``), which reads the next jobs."""
        if job is None:
            assert self.feed is not None
            if not self.feed.refill(t):
                self.running = False
            return True
        sim = self.sim
        rm = self.rm
        self.submitted += 1
        timeline = self.timeline
        if timeline is not None:
            self.accounts(timeline.job_submitted(job))
        app_id = rm.submit_application(
            AppSubmission(job.name, job.user, job.queue, job.tasks, self.alone_of(job), job),
            t,
        )
        self.job_names[app_id] = job.name
        if app_id not in rm.state.apps:  # its queue refused it (maximum_applications)
            self.finished += 1
            self.running = self.finished < self.total
            return None
        rm.register_application_master(app_id, t)
        if timeline is not None:
            self.specs[app_id] = job
        am = ApplicationMaster(
            job,
            app_id,
            sim.make_strategy(),
            task_order_seed=_task_order_seed(sim.workload.seed, rm.state.apps[app_id].seq)
            if self.shuffle
            else None,
        )
        self.active[app_id] = am
        heapq.heappush(self.heap, (t, AM, self.am_key(AmClock(t, self.am_interval_s, key), 0), am))
        return None

    def tick(self, t: float, key: Any, interval_s: float) -> None:
        """The policy's periodic tick."""
        self.rm.tick(t)
        self.after_rm_change(t)
        self.sim._push(t + interval_s, TICK, interval_s)

    def place(self, t: float, key: Any, payload: None) -> None:
        """The RM's placement pass (event-driven scheduling)."""
        assert self.events is not None
        self.events.place(t, self.heartbeat)

    def admin(self, t: float, key: Any, action: AccountAction) -> None:
        """An admin's change to a queue's account."""
        assert self.timeline is not None
        self.accounts(self.timeline.admin(action))


def _task_order_seed(seed: int, seq: int) -> str:
    """The seed of a job's task order: the run's seed and the job's submission number,
    written as treadle's ids once were (``application_00001``), so that seeded orders, and
    the results of policies that shuffle tasks, do not depend on how ids are written."""
    return f"tasks:{seed}:application_{seq + 1:05d}"

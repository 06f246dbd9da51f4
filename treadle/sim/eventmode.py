"""Event-driven scheduling (``cluster: {scheduling: event}``): the simulator also schedules
at the instant something changes, as a YARN cluster can with three of its features:

- a NodeManager reports a container's start, end or stop at once (NodeStatusUpdater's
  out-of-band heartbeat, ``sendOutofBandHeartBeat``; the end is reported at once in
  heartbeat mode too);
- the RM places pending asks as soon as asks or free room appear, not only when a node
  heartbeats (CapacityScheduler's asynchronous scheduling,
  ``yarn.scheduler.capacity.schedule-asynchronously.enable``);
- an AM is called back at once when the RM has news for it, a grant or a container's end
  (AMRMClientAsync's callback handler; Spark's driver reacts to a task's end at once), and
  calls again at once while its last call changed what it knows (with the next stage's
  asks, say).

A task then starts the instant a slot frees, as in the UWFQ spec's idealized model. The
periodic heartbeats and AM calls go on exactly as in heartbeat mode; events only add calls.

Order within one instant (deterministic): first every event of heartbeat mode (admin
changes, submissions, periodic AM calls, ticks, node heartbeats, in their usual order);
then the event calls of AMs, first in first out (in the order their news arose); then one
placement pass: the nodes in the cluster's node order, each on which a pending ask could
fit heartbeating (the RM places at a heartbeat), until no ask is pending. Grants found by
the pass are news, so their AMs' calls come next (a launch is reported by an out-of-band
heartbeat, which runs before them), then another pass, and so on.

The cascade ends: an AM is called back only for news (a grant, a container's end or stop)
or after a call that changed what it knows, and each grant or end is news once; a pass
runs only after an AM call or a tick that changed the RM's books, and only while asks are
pending. As a guard against a policy that would preempt what it grants in a loop, at most
``MAX_EVENT_CALLS`` event calls and passes are queued at one instant; beyond that the
periodic calls take over (``stats["event_calls_capped"]`` counts the calls left out).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

from am.core import ApplicationMaster
from rm.core.facade import ResourceManager
from rm.core.hints import SchedulingHints
from treadle.sim.kinds import NEWS, PLACE


class Host(Protocol):
    """What of ``treadle.sim.engine.Simulation`` this module uses."""

    rm: ResourceManager
    hints: SchedulingHints
    stats: dict[str, int]
    _sleeping: dict[str, Any]
    _sleepers: dict[str, Any]
    _nodes: dict[str, Any]

    def _push(self, t: float, kind: int, payload: Any) -> None: ...
    def _schedule_hb(self, node: Any, t: float) -> None: ...
    def _wake_news(self, t: float, kind: int, key: Any, news: list[str] | None = None) -> None: ...


#: Event calls and placement passes queued at one instant, at most.
MAX_EVENT_CALLS = 100_000


class EventScheduling:
    """The calls event-driven scheduling adds to one ``Simulation``'s loop."""

    __slots__ = ("_at", "_count", "_place_queued", "_queued", "_sim", "active", "gone")

    def __init__(self, sim: Host) -> None:
        self._sim = sim
        self._queued: set[str] = set()  # applications with an event call queued
        self._place_queued = False
        #: AMs an event call finished while their periodic call was on the heap: the loop
        #: drops that call.
        self.gone: set[ApplicationMaster] = set()
        #: app id -> its AM, while it runs (the loop's).
        self.active: dict[str, ApplicationMaster] = {}
        self._at = -math.inf  # the instant ``_count`` counts
        self._count = 0
        sim.stats.update(event_calls=0, placement_passes=0, event_calls_capped=0)

    def _budget(self, t: float) -> bool:
        if t != self._at:
            self._at, self._count = t, 0
        if self._count >= MAX_EVENT_CALLS:
            self._sim.stats["event_calls_capped"] += 1
            return False
        self._count += 1
        return True

    def call_back(self, am: ApplicationMaster, t: float) -> None:
        """Queue an event call of ``am`` at ``t`` (once: one queued call hears it all)."""
        app_id = am.app_id
        if app_id in self._queued or not self._budget(t):
            return
        self._queued.add(app_id)
        self._sim._push(t, NEWS, am)

    def called_back(self, am: ApplicationMaster) -> bool:
        """``am``'s event call is due: whether to make it (not once its job ended)."""
        self._queued.discard(am.app_id)
        if am.finished:
            return False
        self._sim.stats["event_calls"] += 1
        return True

    def drop_periodic(self, am: ApplicationMaster) -> None:
        """An event call finished ``am``'s job: its periodic calls stop."""
        if self._sim._sleeping.pop(am.app_id, None) is None:
            self.gone.add(am)  # its next periodic call is on the heap

    def after_rm_change(self, t: float) -> None:
        """After an AM call or a tick: the nodes the RM has something for heartbeat at once,
        and a placement pass is queued while asks are pending."""
        sim = self._sim
        for nid in sim.rm.take_effects().touched_nodes:
            node = sim._nodes[nid]
            if node.due is None or t < node.due:
                sim._schedule_hb(node, t)
            sim._sleepers.pop(nid, None)
        if not self._place_queued and sim.hints.has_pending and self._budget(t):
            self._place_queued = True
            sim._push(t, PLACE, None)

    def place(self, t: float, heartbeat: Callable[[float, Any, Any], None]) -> None:
        """The placement pass: nodes in node order heartbeat while an ask could fit them
        (``heartbeat``: the loop's handler of heartbeat events)."""
        self._place_queued = False
        sim = self._sim
        hints = sim.hints
        sim.stats["placement_passes"] += 1
        for node in sim._nodes.values():
            if not hints.has_pending:
                break
            if hints.could_place_on(node.nm.node_id):
                heartbeat(t, None, (node, node.token))

    def on_news(self, t: float, kind: int, key: Any) -> None:
        """After every event: the AMs the RM has news for are called back at once (and
        sleeping ones resume their periodic calls, as in heartbeat mode)."""
        sim = self._sim
        news = sim.hints.take_news()
        if sim._sleeping:
            sim._wake_news(t, kind, key, news)
        if news:
            active = self.active
            for app_id in news:
                am = active.get(app_id)
                if am is not None:
                    self.call_back(am, t)

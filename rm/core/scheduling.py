"""The scheduling pass of one node heartbeat (YARN's NODE_UPDATE): while asks are pending
and the node could fit one, the policy yields placements and each is checked and applied
at once, so the policy's next decision sees it. A placement that is impossible (unknown
or finished application, no such ask, a lost node, not enough room) is rejected and
logged, never applied.

One heartbeat, one way down and back out:

1. the NM core builds it (``nm.core.NodeManager.beat``); the server's adapter decodes it
   (``rm.server.service``, ``treadle.live.wire``), the simulator hands it over as is;
2. ``ResourceManager.node_heartbeat`` -> ``NodeTracker.heartbeat`` (``rm.core.nodes``):
   a stale or repeated one is answered at once; the containers it reports started or
   ended are applied (``rm.core.containers``, which frees them in ``rm.core.state``);
3. if a pending ask could fit the node: ``Scheduler.schedule`` (here) asks the policy,
   ``Policy.on_node_heartbeat``, for placements;
4. ``Scheduler._apply`` checks each and applies it in one call,
   ``ClusterState.place_container`` (the container, the ask one fewer, the node's room,
   the books, the pending index);
5. back in ``NodeTracker.heartbeat``: the attempts of AM containers that ended fail
   (``Applications.settle_am_exits``); the answer carries the containers to stop, and
   the outbox the AM containers to launch (``ResourceManager.take_effects``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from rm.core.effects import Outbox
from rm.core.state import AM_PRIORITY, ClusterState, Node
from rm.policy import Placement, Policy
from treadle.errors import PluginError
from treadle.events import EventLog
from treadle.resources import Resources

log = structlog.get_logger("rm")

#: Stop consuming a policy's placements for one heartbeat after this many rejections.
MAX_REJECTIONS_PER_HEARTBEAT = 32


def overridden(policy: Policy, name: str) -> Any:
    """``policy``'s bound hook ``name``, or None if it is the base class's no-op (the hot
    paths then skip the call)."""
    method = getattr(policy, name)
    if getattr(method, "__func__", None) is getattr(Policy, name):
        return None
    return method


class Scheduler:
    """Runs the policy on heartbeats and applies its placements; answers shares."""

    def __init__(
        self,
        policy: Policy,
        state: ClusterState,
        log_: EventLog,
        outbox: Outbox,
        *,
        policy_errors: str,
    ) -> None:
        if policy_errors not in ("raise", "log"):
            raise ValueError("policy_errors must be 'raise' or 'log'")
        self.policy = policy
        self.policy_name = policy.name
        self._state = state
        self._view = state
        self._log = log_
        self._outbox = outbox
        self._policy_errors = policy_errors
        self._on_allocated = overridden(policy, "on_container_allocated")
        #: The policy's ``shares``, or None when it sends none.
        self.shares_hook = overridden(policy, "shares")
        self._shares_cache: tuple[int, Mapping[str, Resources] | None] | None = None
        self.rejected_placements = 0
        self.policy_failures = 0

    def schedule(self, node: Node, now: float) -> None:
        pending = self._state.pending.apps
        rejections = 0
        try:
            for placement in self.policy.on_node_heartbeat(node, self._view):
                if not self._apply(node, placement, now):
                    rejections += 1
                    if rejections >= MAX_REJECTIONS_PER_HEARTBEAT:
                        break
                if not pending:
                    break
        except Exception as e:  # a faulty plugin must not take the RM down
            self.policy_failures += 1
            if self._policy_errors == "raise":
                raise PluginError(
                    f"policy {self.policy_name!r} failed on the heartbeat of node "
                    f"{node.node_id!r} at t={now:g}: {type(e).__name__}: {e}"
                ) from e
            log.error("policy_failed", policy=self.policy_name, node=node.node_id, exc_info=True)

    def _reject(self, node: Node, p: Any, reason: str, now: float) -> bool:
        self.rejected_placements += 1
        log.warning("placement_rejected", node=node.node_id, placement=repr(p), reason=reason)
        self._log.placement_rejected(
            now, node.node_id, getattr(p, "app_id", None), getattr(p, "priority", None), reason
        )
        return False

    def _apply(self, node: Node, p: Placement, now: float) -> bool:
        """Check ``p`` against the state and apply it (``ClusterState.place_container``),
        or reject it with nothing changed."""
        if type(p) is not Placement and not isinstance(p, Placement):
            return self._reject(node, p, "not a Placement", now)
        st = self._state
        app = st.apps.get(p.app_id)
        if app is None:
            return self._reject(node, p, "unknown or finished application", now)
        ask = app.asks.get(p.priority)
        if ask is None:
            return self._reject(node, p, "no outstanding ask at that priority", now)
        if not node.alive:
            return self._reject(node, p, "node is not alive", now)
        res = ask.resources
        if not node._free.covers(res):
            return self._reject(node, p, f"{res} does not fit free {node.free}", now)
        c = st.place_container(node, app, ask)
        if c.priority == AM_PRIORITY:
            self._outbox.am_launches.append(c)
        app_id = app.app_id
        log_ = self._log
        if not app.started:
            app.started = True
            log_.job_started(now, app_id, app.user, app.queue)
        log_.container_allocated(
            now, app_id, c.container_id, node.node_id, res, c.priority, str(c.kind)
        )
        if self._on_allocated is not None:
            self._on_allocated(c, self._view)
        return True

    def share_of(self, app_id: str) -> Resources | None:
        """``app_id``'s entitlement, from the policy's shares (computed at most once per
        change of state)."""
        if self.shares_hook is None:
            return None
        version = self._state.version
        cache = self._shares_cache
        if cache is None or cache[0] != version:
            cache = (version, self.shares_hook(self._view))
            self._shares_cache = cache
        shares = cache[1]
        return shares.get(app_id) if shares is not None else None

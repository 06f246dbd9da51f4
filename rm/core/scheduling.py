"""The scheduling pass of one node heartbeat (YARN's NODE_UPDATE): while asks are pending
and the node could fit one, the policy yields placements and each is checked and applied
at once, so the policy's next decision sees it. A placement that is impossible (unknown
or finished application, no such ask, a lost node, not enough room) is rejected and
logged, never applied."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from rm.core.effects import Outbox
from rm.core.netting import ask_with_count
from rm.core.state import ClusterState, Node
from rm.policy import Placement, Policy
from treadle.errors import PluginError
from treadle.events import EventLog
from treadle.frozen import slot_setters
from treadle.messages import Container
from treadle.resources import Resources, add_to_all

log = structlog.get_logger("rm")

#: The priority of the RM's own ask for a managed AM's container (served before tasks).
AM_PRIORITY = -1

#: Stop consuming a policy's placements for one heartbeat after this many rejections.
MAX_REJECTIONS_PER_HEARTBEAT = 32

_new = object.__new__
_c_id, _c_app, _c_node, _c_prio, _c_res, _c_kind = slot_setters(
    Container, ("container_id", "app_id", "node_id", "priority", "resources", "kind")
)


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
        if type(p) is not Placement and not isinstance(p, Placement):
            return self._reject(node, p, "not a Placement", now)
        st = self._state
        app = st.apps.get(p.app_id)
        if app is None:
            return self._reject(node, p, "unknown or finished application", now)
        asks = app.asks
        prio = p.priority
        ask = asks.get(prio)
        if ask is None:
            return self._reject(node, p, "no outstanding ask at that priority", now)
        if not node.alive:
            return self._reject(node, p, "node is not alive", now)
        res = ask.resources
        free = node._free
        if not free.covers(res):
            return self._reject(node, p, f"{res} does not fit free {node.free}", now)
        n = app.next_container
        cid = f"{app._cid_prefix}{n:06d}"
        app.next_container = n + 1
        app_id = app.app_id
        node_id = node.node_id
        kind = ask.kind
        c: Container = _new(Container)  # Container(cid, app_id, ...), faster
        _c_id(c, cid)
        _c_app(c, app_id)
        _c_node(c, node_id)
        _c_prio(c, prio)
        _c_res(c, res)
        _c_kind(c, kind)
        free.sub(res)
        node.containers[cid] = c
        app.containers[cid] = c
        if prio == AM_PRIORITY:
            app.am_container = cid
            self._outbox.am_launches.append(c)
        else:
            app.undelivered.append(c)
            news = st.news
            if news is not None:
                news[app_id] = None
        # One container of the ask is granted: the same ask with one fewer (set_ask,
        # inlined: the application stays pending unless that was its last container).
        # ``sorted_asks()`` follows without a sort: a new list (one handed out is never
        # changed) with the ask replaced or dropped.
        count = ask.count
        by_prio = app._sorted_asks
        if count > 1:
            asks[prio] = fewer = ask_with_count(ask, count - 1)
            if by_prio is not None:
                if len(by_prio) == 1:
                    by_prio = [fewer]
                else:
                    by_prio = [fewer if a is ask else a for a in by_prio]
        else:
            del asks[prio]
            if by_prio is not None:
                by_prio = [a for a in by_prio if a is not ask]
        app._sorted_asks = by_prio
        app.pending -= 1
        app._demand = None
        pending = st.pending
        if app.pending <= 0:
            pending.update(app, True, (prio,))
        else:  # PendingIndex.touch, inlined
            for w in pending.watchers:
                w[app_id] = app
            if pending.priority_watchers:
                pending.priorities_changed(app_id, (prio,))
        ledger = st.ledger  # the application's books (``BookLedger.add``, inlined)
        if not ledger.on:
            add_to_all(app._all_books, res)
        elif app._book_shape is res:
            app._book_n += 1
            ledger.pending[app] = None
        else:
            ledger.add(app, res)
        st.version += 1
        log_ = self._log
        if not app.started:
            app.started = True
            log_.job_started(now, app_id, app.user, app.queue)
        log_.container_allocated(now, app_id, cid, node_id, res, prio, str(kind))
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

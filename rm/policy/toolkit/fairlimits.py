"""The ``fair`` policy's FairScheduler state when a queue tree sets its properties: what
it keeps between calls (runnable applications, AM and task containers, starvation) and
the checks its placement and preemption make (the rules: ``fairrules`` and
``fairpreempt``). Usage is measured by the policy's ``usage`` (a fraction of the
cluster), so ``resource=memory`` compares memory as Hadoop's FairSharePolicy does.

Where treadle differs from Hadoop 3: fair shares are capped by demand (used + asked for,
as treadle's fair policy always did; Hadoop splits among active queues whatever they
ask), so an application's fair share, and what preemption leaves it, is at most its
demand; starved applications are relieved in submission order (Hadoop: a queue of
starved applications, one at a time); victims are looked for on the nodes in their
order; AM containers are never preempted; the AM limit reads the share among active
leaves (Hadoop: the fair share, or the available resources where it is 0)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Protocol

from rm.policy.toolkit.fairpreempt import (
    Held,
    Starvation,
    Starved,
    choose_victims,
    share_min,
    shortfall,
    split_min_share,
)
from rm.policy.toolkit.fairrules import (
    DRF,
    FIFO,
    Amount,
    QueueRules,
    RunnableApps,
    bounded_fill,
    has_rules,
    leaf_shares,
    queue_rules,
    resolve,
    user_limits,
)
from rm.policy.views import AppView, ClusterView, NodeView, QueueView
from treadle.messages import Ask, Container
from treadle.resources import ZERO, Resources, total

#: A policy's measure of resources: (amount, cluster capacity) -> fraction.
Usage = Callable[[Resources, Resources], float]
_EPS = 1e-9


class PreemptionParams(Protocol):
    @property
    def wait_before_kill_s(self) -> float: ...
    @property
    def utilization_threshold(self) -> float: ...
    @property
    def starvation_recheck_s(self) -> float: ...


class FairLimits:
    """The rules of one run (module docstring)."""

    def __init__(self, rules: dict[str, QueueRules], runnable: RunnableApps, inner: str) -> None:
        self.rules = rules
        self.runnable = runnable
        self.default_inner = inner
        self.am_used: dict[str, Resources] = {}  # per leaf, its AMs' resources
        self.am_room: dict[str, Resources] = {}  # per leaf, its AM limit this heartbeat
        self.held: dict[str, Held] = {}  # live task containers
        #: Live container -> its application and that application's queue.
        self.queue_of: dict[str, tuple[str, str]] = {}
        self.am_of: dict[str, Resources] = {}  # live AM container -> its resources
        self.starvation = Starvation()
        self.marked: dict[str, float] = {}  # container -> when to kill it
        self.relieved_until: dict[str, float] = {}  # application -> not starved till then

    @classmethod
    def of(cls, cluster: ClusterView, preemption: bool, inner: str) -> FairLimits | None:
        """The rules of ``cluster``'s queue tree; None when it sets none and preemption is
        off."""
        rules = queue_rules(cluster.root_queue)
        if not preemption and not has_rules(rules, cluster.root_queue):
            return None
        users, default = user_limits(cluster.root_queue)
        queue_max = {
            n: r.max_running_apps for n, r in rules.items() if r.max_running_apps is not None
        }
        parents = {n: r.parent for n, r in rules.items()}
        return cls(rules, RunnableApps(queue_max, parents, users, default), inner)

    # Books ------------------------------------------------------------------------
    def added(self, app: AppView) -> None:
        self.runnable.add(app.app_id, app.seq, app.queue, app.user)

    def removed(self, app: AppView) -> None:
        self.runnable.remove(app.app_id)
        self.relieved_until.pop(app.app_id, None)

    def refuse_move(self, app: AppView, queue: str, cluster: ClusterView) -> str | None:
        """Why ``app`` may not move to ``queue``: a runnable application would pass the
        maxRunningApps or, with what it holds, the maxResources of a queue between the
        target and the lowest queue above both (Hadoop's
        ``verifyMoveDoesNotViolateConstraints``)."""
        full = self.runnable.blocks_move(app.app_id, queue)
        if full is not None:
            return f"it would violate queue maxRunningApps constraints on queue {full}"
        if not self.runnable.is_runnable(app.app_id):
            return None
        above = set(_chain(self.rules, app.queue))
        cap, held = cluster.capacity, app.allocated
        for name in _chain(self.rules, queue):
            if name in above:
                break
            most = resolve(self.rules[name].max_resources, cap)
            if most is not None and not (cluster.queues[name].used + held).fits_in(most):
                return f"it would violate queue maxShare constraints on queue {name}"
        return None

    def moved(self, app: AppView, old_queue: str) -> None:
        """``app`` moved from ``old_queue``: it counts (runnable or waiting) in its new
        queue, and so does its AM's share of the leaf's AM resources."""
        self.runnable.move(app.app_id, app.queue)
        for cid, (app_id, queue) in self.queue_of.items():
            if app_id != app.app_id:
                continue
            self.queue_of[cid] = (app_id, app.queue)
            am = self.am_of.get(cid)
            if am is not None:  # its AM container
                self.am_used[queue] = shortfall(self.am_used.get(queue, ZERO), am)
                self.am_used[app.queue] = self.am_used.get(app.queue, ZERO) + am

    def allocated(self, container: Container, cluster: ClusterView) -> None:
        app = cluster.apps.get(container.app_id)
        if app is None:
            return
        cid, r = container.container_id, container.resources
        self.queue_of[cid] = (app.app_id, app.queue)
        if container.priority < 0:  # an AM
            self.am_of[cid] = r
            self.am_used[app.queue] = self.am_used.get(app.queue, ZERO) + r
        else:
            self.held[cid] = Held(cid, app.app_id, container.node_id, r, cluster.now)

    def finished(self, container: Container) -> None:
        cid = container.container_id
        owner = self.queue_of.pop(cid, None)
        self.marked.pop(cid, None)
        self.held.pop(cid, None)
        if self.am_of.pop(cid, None) is not None and owner is not None:
            queue = owner[1]
            self.am_used[queue] = shortfall(self.am_used.get(queue, ZERO), container.resources)

    # Placement --------------------------------------------------------------------
    def inner(self, queue: str) -> str:
        r = self.rules.get(queue)
        return r.scheduling_policy if r is not None and r.scheduling_policy else self.default_inner

    def parent_is_drf(self, name: str) -> bool:
        r = self.rules.get(name)
        return r is not None and r.parent is not None and self.inner(r.parent) == DRF

    def _fraction(self, cap: Resources, usage: Usage) -> Callable[[Amount | None], float | None]:
        def fraction(amount: Amount | None) -> float | None:
            r = resolve(amount, cap)
            return None if r is None else usage(r, cap)

        return fraction

    def prepare(self, cluster: ClusterView, min_share: str, usage: Usage) -> dict[str, float]:
        """Before a heartbeat's walk: each queue's min share capped by its demand, and
        each leaf's room for AMs: ``maxAMShare`` x its fair share among the active leaves,
        within its max resources (``FSLeafQueue.computeMaxAMResource``)."""
        qs, cap = cluster.queues, cluster.capacity
        asked: dict[str, Resources] = {}
        active: set[str] = set()
        for app in cluster.apps.values():
            if not self.runnable.is_runnable(app.app_id):
                continue
            active.add(app.queue)
            q: QueueView | None = qs.get(app.queue)
            while q is not None:
                asked[q.name], q = asked.get(q.name, ZERO) + app.demand, q.parent
        fraction = self._fraction(cap, usage)
        out: dict[str, float] = {}
        for name, d in asked.items():
            own = (
                qs[name].abs_capacity
                if min_share == "capacity"
                else fraction(self.rules[name].min_resources)
            )
            if own:
                out[name] = min(own, usage(qs[name].used + d, cap))
        self.am_room.clear()
        if any(self.rules[q].max_am_share is not None for q in active):
            shares = leaf_shares(
                cluster.root_queue, dict.fromkeys(active, 1.0), self.rules, fraction
            )
            for leaf, s in shares.items():
                share = self.rules[leaf].max_am_share
                if share is None or share < 0:
                    continue
                most = resolve(self.rules[leaf].max_resources, cap)  # FSLeafQueue's
                fair = cap * s if most is None else share_min(cap * s, most)
                self.am_room[leaf] = fair * share
        return out

    def first_fit(
        self, app: AppView, leaf: str, node: NodeView, cluster: ClusterView
    ) -> Ask | None:
        """The most important ask of ``app`` that fits ``node`` and the rules: the
        application is runnable, no queue passes its max, an AM fits its leaf's room."""
        if not self.runnable.is_runnable(app.app_id):
            return None
        free, cap = node.free, cluster.capacity
        for ask in app.sorted_asks():
            r = ask.resources
            if not r.fits_in(free) or not self._within_max(app.queue, r, cluster, cap):
                continue
            room = self.am_room.get(app.queue) if ask.priority < 0 else None
            if room is not None and not (self.am_used.get(app.queue, ZERO) + r).fits_in(room):
                continue
            return ask
        return None

    def _within_max(self, queue: str, r: Resources, cluster: ClusterView, cap: Resources) -> bool:
        name: str | None = queue
        while name is not None:
            rules = self.rules[name]
            most = resolve(rules.max_resources, cap)
            if most is not None and not (cluster.queues[name].used + r).fits_in(most):
                return False
            name = rules.parent
        return True

    # Shares -----------------------------------------------------------------------
    def shares(self, cluster: ClusterView, inner: str, usage: Usage) -> dict[str, Resources]:
        """Each runnable application's fair share: the tree split by weight within each
        queue's [min, max] and its demand, a leaf's share to its applications equally
        (in submission order under fifo), each a vector of its own demand."""
        cap = cluster.capacity
        if cap.is_zero():
            return {}
        apps_of: dict[str, list[tuple[AppView, Resources]]] = {}
        want: dict[str, float] = {}
        for app in cluster.apps.values():
            if self.runnable.is_runnable(app.app_id):
                apps_of.setdefault(app.queue, []).append((app, app.allocated + app.demand))
        qs = cluster.queues
        for leaf, apps in apps_of.items():
            d = usage(total([d for _, d in apps]), cap)
            q: QueueView | None = qs[leaf]
            while q is not None:
                want[q.name], q = want.get(q.name, 0.0) + d, q.parent
        fraction = self._fraction(cap, usage)
        out: dict[str, Resources] = {}

        def split(q: QueueView, share: float) -> None:
            if not q.is_leaf:
                kids = [k for k in q.children if k.name in want]
                rules = [self.rules[k.name] for k in kids]
                hi = [
                    min(want[k.name], _or(fraction(r.max_resources), 1.0))
                    for k, r in zip(kids, rules, strict=True)
                ]
                lo = [
                    min(_or(fraction(r.min_resources), 0.0), h)
                    for r, h in zip(rules, hi, strict=True)
                ]
                got = bounded_fill(share, [k.weight for k in kids], lo, hi)
                for k, s in zip(kids, got, strict=True):
                    split(k, s)
                return
            apps = apps_of.get(q.name, [])
            caps = [usage(d, cap) for _, d in apps]
            if self.inner(q.name) == FIFO:
                got, left = [], share
                for c in caps:
                    got.append(min(c, max(0.0, left)))
                    left -= c
            else:
                got = bounded_fill(share, [1.0] * len(apps), [0.0] * len(apps), caps)
            for (app, d), c, s in zip(apps, caps, got, strict=True):
                if c > 0:
                    out[app.app_id] = d * (s / c)

        split(cluster.root_queue, 1.0)
        return out

    # Preemption -------------------------------------------------------------------
    def preempt(
        self,
        cluster: ClusterView,
        params: PreemptionParams,
        shares: Mapping[str, Resources],
        usage: Usage,
    ) -> list[str]:
        """Containers to kill now: those chosen ``wait_before_kill_s`` ago, then, while
        the cluster's usage passes the threshold, victims for the starved applications."""
        now, cap = cluster.now, cluster.capacity
        due = [c for c, t in self.marked.items() if t <= now + _EPS and c in self.held]
        for c in due:
            del self.marked[c]
        starved = self._starved(cluster, shares, usage)
        if cap.is_zero() or cluster.used.dominant_share(cap) <= params.utilization_threshold:
            return due
        if not starved:
            return due
        held = [h for c, h in self.held.items() if c not in self.marked and c not in due]
        taking: dict[str, Resources] = {}  # per application, what it is losing already
        for c in (*self.marked, *due):
            h = self.held[c]
            taking[h.app_id] = taking.get(h.app_id, ZERO) + h.resources
        apps = cluster.apps

        def can_lose(app_id: str, more: Resources) -> bool:
            app = apps.get(app_id)
            if app is None or not self.rules[app.queue].preemptable:
                return False
            after = shortfall(app.allocated, more + taking.get(app_id, ZERO))
            return usage(after, cap) >= usage(shares.get(app_id, ZERO), cap) - _EPS

        nodes = [(n.node_id, n.free) for n in cluster.nodes.values()]
        victims = choose_victims(starved, nodes, held, can_lose)
        if victims:
            for s in starved:
                self.relieved_until[s.app_id] = (
                    now + params.wait_before_kill_s + params.starvation_recheck_s
                )
        kill_at = now + params.wait_before_kill_s
        for c in victims:
            self.marked[c] = kill_at
        now_too = [c for c in victims if kill_at <= now + _EPS]
        for c in now_too:
            del self.marked[c]
        return due + now_too

    def _starved(
        self, cluster: ClusterView, shares: Mapping[str, Resources], usage: Usage
    ) -> list[Starved]:
        """The starved applications, in submission order, with their starvation."""
        now, cap = cluster.now, cluster.capacity
        amounts: dict[str, Resources] = {}
        by_leaf: dict[str, list[AppView]] = {}
        for app in cluster.apps.values():
            if not self.runnable.is_runnable(app.app_id):
                continue
            by_leaf.setdefault(app.queue, []).append(app)
            rules = self.rules[app.queue]
            target = share_min(shares.get(app.app_id, ZERO) * rules.fair_share_threshold,
                               app.allocated + app.demand)  # fmt: skip
            below = app.pending > 0 and usage(app.allocated, cap) < usage(target, cap) - _EPS
            if self.starvation.fair(app.app_id, below, now, rules.fair_share_timeout_s):
                amounts[app.app_id] = shortfall(target, app.allocated)
        for leaf, apps in by_leaf.items():
            self._min_share_starvation(cluster, leaf, apps, amounts, usage)
        self.starvation.forget(cluster.apps)
        out: list[Starved] = []
        for app in cluster.apps.values():
            amount = amounts.get(app.app_id)
            if amount is None or self.relieved_until.get(app.app_id, -1.0) > now:
                continue
            asks = [a for a in app.sorted_asks() if a.priority >= 0]
            if asks:
                out.append(Starved(app.app_id, amount, asks[0].resources, asks[0].count))
        return out

    def _min_share_starvation(
        self,
        cluster: ClusterView,
        leaf: str,
        apps: Sequence[AppView],
        amounts: dict[str, Resources],
        usage: Usage,
    ) -> None:
        rules, cap = self.rules[leaf], cluster.capacity
        least = resolve(rules.min_resources, cap)
        if least is None:
            return
        q = cluster.queues[leaf]
        demand = q.used + total([a.demand for a in apps])
        desired = share_min(least, demand)
        below = usage(q.used, cap) < usage(desired, cap) - _EPS
        if not self.starvation.minimum(leaf, below, cluster.now, rules.min_share_timeout_s):
            return
        room = [(a.app_id, shortfall(a.demand, amounts.get(a.app_id, ZERO))) for a in apps]
        for app_id, extra in split_min_share(shortfall(desired, q.used), room).items():
            amounts[app_id] = amounts.get(app_id, ZERO) + extra


def _or(x: float | None, default: float) -> float:
    return default if x is None else x


def _chain(rules: Mapping[str, QueueRules], queue: str) -> Iterator[str]:
    """``queue`` and the queues above it, up to the root."""
    name: str | None = queue
    while name is not None:
        yield name
        name = rules[name].parent

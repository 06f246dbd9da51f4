"""The FairScheduler's queue rules, as the ``fair`` policy applies them: each queue's
properties resolved down the tree (``queue_rules``), the running-application limits
(``RunnableApps``, Hadoop's ``MaxRunningAppsEnforcer``) and fair shares bounded by min and
max shares (``bounded_fill``, Hadoop's ``ComputeFairShares``).

Inheritance, as ``AllocationConfiguration``: the preemption timeouts, the fair-share
threshold and ``allowPreemptionFrom=false`` pass from a queue to its children; a queue's
scheduling policy is its own (else the policy's ``inner``); limits are per queue. Hadoop's
defaults where a file sets nothing: fair-share threshold 0.5, timeouts never.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from rm.policy.views import QueueView
from treadle.model import ClusterPercent, QueueSpec
from treadle.resources import Resources

FIFO, FAIR, DRF = "fifo", "fair", "drf"
SCHEDULING_POLICIES = (FIFO, FAIR, DRF)
#: ``fairSharePreemptionThreshold`` when no queue above sets it (Hadoop's default).
DEFAULT_FAIR_SHARE_THRESHOLD = 0.5

Amount = Resources | ClusterPercent


@dataclass(frozen=True, slots=True)
class QueueRules:
    """One queue's FairScheduler properties, inherited ones resolved."""

    name: str
    parent: str | None
    min_resources: Amount | None = None
    max_resources: Amount | None = None
    max_running_apps: int | None = None
    max_am_share: float | None = None
    scheduling_policy: str | None = None
    fair_share_timeout_s: float = math.inf
    fair_share_threshold: float = DEFAULT_FAIR_SHARE_THRESHOLD
    min_share_timeout_s: float = math.inf
    preemptable: bool = True


def _spec(q: QueueView) -> QueueSpec | None:
    spec = getattr(q, "spec", None)
    return spec if isinstance(spec, QueueSpec) else None


def queue_rules(root: QueueView) -> dict[str, QueueRules]:
    """Every queue's rules, by name, from the specs the RM's queues carry."""
    out: dict[str, QueueRules] = {}

    def walk(q: QueueView, up: QueueRules | None) -> None:
        s = _spec(q)
        if s is None:
            s = QueueSpec(q.name)

        def inherit(own: float | None, parent: float, default: float) -> float:
            if own is not None:
                return own
            return parent if up is not None else default

        r = QueueRules(
            q.name,
            up.name if up is not None else None,
            s.min_resources,
            s.max_resources,
            s.max_running_apps,
            s.max_am_share,
            s.scheduling_policy,
            inherit(
                s.fair_share_preemption_timeout_s, up.fair_share_timeout_s if up else 0, math.inf
            ),
            inherit(
                s.fair_share_preemption_threshold,
                up.fair_share_threshold if up else 0,
                DEFAULT_FAIR_SHARE_THRESHOLD,
            ),
            inherit(
                s.min_share_preemption_timeout_s, up.min_share_timeout_s if up else 0, math.inf
            ),
            s.allow_preemption_from is not False and (up is None or up.preemptable),
        )
        out[q.name] = r
        for c in q.children:
            walk(c, r)

    walk(root, None)
    return out


def has_rules(rules: Mapping[str, QueueRules], root: QueueView) -> bool:
    """Whether any queue sets a property beyond weights (else the policy runs as before)."""
    s = _spec(root)
    if s is not None and (s.user_max_apps_default is not None or s.user_max_running_apps):
        return True
    blank = QueueRules("", None)
    return any(
        (r.min_resources, r.max_resources, r.max_running_apps, r.max_am_share)
        != (None, None, None, None)
        or r.scheduling_policy is not None
        or (r.fair_share_timeout_s, r.min_share_timeout_s)
        != (blank.fair_share_timeout_s, blank.min_share_timeout_s)
        for r in rules.values()
    )


def resolve(amount: Amount | None, capacity: Resources) -> Resources | None:
    """An amount in resources: a percentage of ``capacity`` or as given."""
    if amount is None or isinstance(amount, Resources):
        return amount
    return amount.of(capacity)


def user_limits(root: QueueView) -> tuple[dict[str, int], int | None]:
    """Per user, its running-application limit, and the default for the others."""
    s = _spec(root)
    if s is None:
        return {}, None
    return dict(s.user_max_running_apps), s.user_max_apps_default


class RunnableApps:
    """Which applications may run (Hadoop's ``MaxRunningAppsEnforcer``): an application is
    runnable when its user runs fewer than the user's limit and its queue and every queue
    above run fewer than theirs; the others wait, not runnable, in submission order. When a
    runnable one ends, the waiting ones that now pass become runnable, oldest first."""

    def __init__(
        self,
        queue_max: Mapping[str, int],
        parent: Mapping[str, str | None],
        user_max: Mapping[str, int],
        user_default: int | None,
    ) -> None:
        self._queue_max, self._parent = dict(queue_max), dict(parent)
        self._user_max, self._user_default = dict(user_max), user_default
        self._queue_running: dict[str, int] = {}
        self._user_running: dict[str, int] = {}
        #: Runnable applications: id -> (queue, user).
        self._runnable: dict[str, tuple[str, str]] = {}
        #: Waiting ones, in submission order: id -> (seq, queue, user).
        self._waiting: dict[str, tuple[int, str, str]] = {}

    def _chain(self, queue: str) -> Iterable[str]:
        q: str | None = queue
        while q is not None:
            yield q
            q = self._parent.get(q)

    def can_run(self, queue: str, user: str) -> bool:
        limit = self._user_max.get(user, self._user_default)
        if limit is not None and self._user_running.get(user, 0) >= limit:
            return False
        for q in self._chain(queue):
            m = self._queue_max.get(q)
            if m is not None and self._queue_running.get(q, 0) >= m:
                return False
        return True

    def _run(self, app_id: str, queue: str, user: str) -> None:
        self._runnable[app_id] = (queue, user)
        self._user_running[user] = self._user_running.get(user, 0) + 1
        for q in self._chain(queue):
            self._queue_running[q] = self._queue_running.get(q, 0) + 1

    def add(self, app_id: str, seq: int, queue: str, user: str) -> bool:
        """Submit ``app_id``; whether it is runnable."""
        if self.can_run(queue, user):
            self._run(app_id, queue, user)
            return True
        self._waiting[app_id] = (seq, queue, user)
        return False

    def remove(self, app_id: str) -> list[str]:
        """``app_id`` ended; the applications it made runnable, oldest first."""
        if self._waiting.pop(app_id, None) is not None:
            return []
        held = self._runnable.pop(app_id, None)
        if held is None:
            return []
        queue, user = held
        self._user_running[user] -= 1
        for q in self._chain(queue):
            self._queue_running[q] -= 1
        return self._wake()

    def _wake(self) -> list[str]:
        """The waiting applications that now pass, made runnable, oldest first."""
        woken: list[str] = []
        for waiting_id, (_, q, u) in sorted(self._waiting.items(), key=lambda kv: kv[1][0]):
            if self.can_run(q, u):
                del self._waiting[waiting_id]
                self._run(waiting_id, q, u)
                woken.append(waiting_id)
        return woken

    def blocks_move(self, app_id: str, queue: str) -> str | None:
        """The queue whose maxRunningApps a runnable ``app_id`` would pass in ``queue``, up
        to (not counting) the lowest queue above both (Hadoop's
        ``FairScheduler.verifyMoveDoesNotViolateConstraints``); None: none."""
        held = self._runnable.get(app_id)
        if held is None:
            return None  # not runnable: it moves, and runs there when it can
        shared = set(self._chain(held[0]))
        for q in self._chain(queue):
            if q in shared:
                return None
            m = self._queue_max.get(q)
            if m is not None and self._queue_running.get(q, 0) >= m:
                return q
        return None

    def move(self, app_id: str, queue: str) -> list[str]:
        """``app_id`` moved to ``queue`` (``blocks_move`` let it): a runnable one runs there,
        a waiting one waits there unless it can run; the applications that now may run,
        oldest first (the moved one too, if it may now; Hadoop's ``executeMove``)."""
        held = self._runnable.pop(app_id, None)
        if held is not None:
            old, user = held
            for q in self._chain(old):
                self._queue_running[q] -= 1
            self._runnable[app_id] = (queue, user)
            for q in self._chain(queue):
                self._queue_running[q] = self._queue_running.get(q, 0) + 1
        elif app_id in self._waiting:
            seq, _, user = self._waiting[app_id]
            self._waiting[app_id] = (seq, queue, user)
        return self._wake()

    def is_runnable(self, app_id: str) -> bool:
        return app_id in self._runnable

    def waiting(self, queue: str | None = None) -> list[str]:
        """The waiting applications (of ``queue``), in submission order."""
        items = sorted(self._waiting.items(), key=lambda kv: kv[1][0])
        return [a for a, (_, q, _) in items if queue is None or q == queue]


def bounded_fill(
    amount: float, weights: Sequence[float], mins: Sequence[float], maxs: Sequence[float]
) -> list[float]:
    """Split ``amount`` as Hadoop's ``ComputeFairShares``: each part is ``weight x R``
    clamped to [min, max], with R the ratio at which the parts sum to ``amount`` (found
    by bisection; when the mins alone pass it, each part is its min). A zero weight
    gets its min."""

    def parts(r: float) -> list[float]:
        return [min(max(w * r, lo), hi) for w, lo, hi in zip(weights, mins, maxs, strict=True)]

    if not weights:
        return []
    cap = sum(maxs)
    target = min(amount, cap)
    hi = 1.0
    while sum(parts(hi)) < target - 1e-12 and hi < 1e12:
        hi *= 2.0
    lo = 0.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if sum(parts(mid)) < target:
            lo = mid
        else:
            hi = mid
    return parts(hi)


def leaf_shares(
    root: QueueView,
    active: Mapping[str, float],
    rules: Mapping[str, QueueRules],
    bound: Callable[[Amount | None], float | None],
) -> dict[str, float]:
    """Each leaf's fair share (a fraction of the cluster) among the queues with runnable
    applications (``active``: leaf -> its demand as a fraction, ``math.inf`` for no cap),
    by weight at each level within min and max shares (``bound``: an amount as a
    fraction). Hadoop's instantaneous fair share, which the AM share limit reads."""
    demand: dict[str, float] = {}
    for leaf, d in active.items():
        demand[leaf] = d
        up = rules[leaf].parent
        while up is not None:
            demand[up] = demand.get(up, 0.0) + d
            up = rules[up].parent
    out: dict[str, float] = {}

    def split(q: QueueView, share: float) -> None:
        if q.is_leaf:
            out[q.name] = share
            return
        kids = [k for k in q.children if k.name in demand]
        mins = [min(bound(rules[k.name].min_resources) or 0.0, demand[k.name]) for k in kids]
        maxs = [min(_or_one(bound(rules[k.name].max_resources)), demand[k.name]) for k in kids]
        got = bounded_fill(share, [k.weight for k in kids], mins, maxs)
        for k, s in zip(kids, got, strict=True):
            split(k, s)

    if root.name in demand:
        split(root, 1.0)
    return out


def _or_one(x: float | None) -> float:
    return 1.0 if x is None else x

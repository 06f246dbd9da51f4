"""dp: Dynamic Priority (Sandholm & Lai, "Dynamic Proportional Share Scheduling in Hadoop";
treadle's spec B1). One budget account per leaf queue (one queue per user, as in the
paper); the books of each allocation interval are ``rm.policy.toolkit.dynprio.allocate``.

Every ``interval_s`` (the tick): each queue is charged for the interval that ended, and
the price, its share and its quota for the next interval are computed from the spending
rates in force (``semantics``: ``paper`` or ``hadoop``, see ``rm.policy.toolkit.dynprio``). Before
the first tick no queue has a quota. Charged usage: the mean number of containers the
queue held over the interval (``paper``) or those it holds at the tick (``hadoop``),
capped at its quota, so work-conserving extra containers are free.

Quotas count containers, Hadoop's slots: ``round(share x slots)`` with ``slots`` = the
cluster's vcores / ``slot_vcores``, and every container counts one slot whatever its
size. Chosen over dominant-share entitlements because the paper and the code count slots,
its experiments run uniform one-core tasks, and its hand-checkable figures (Fig. 1's
8/3/4, quotas ``round(120n/55)``) are rounded slot counts that entitlements (which floor)
do not give; a workload of mixed task sizes is served by container count.

Placement on each heartbeat, in two passes (Hadoop's ``PriorityScheduler``): NO_FILL gives
the node's room to the pending applications in submission order whose queue holds fewer
containers than its quota, one container at a time while the queue stays under it; FILL
then gives what is left to the applications in submission order, ignoring quotas. So a
workload without credits anywhere (the defaults: queues the workload does not configure
hold ``budget=0`` credits) runs as FIFO. Kept between heartbeats (``ByShape``, filed by
the shapes asked for): the pending applications in submission order, for FILL, and
those of the queues under quota, for NO_FILL; a queue's applications join or leave the
latter when it crosses its quota (a container allocated or ended, a tick), so a
placement costs O(shapes + log applications) in either pass.

Initial accounts: a queue's ``budget`` and ``spending_rate`` from the workload's queue
(when its ``QueueSpec`` has them), else the budget of the user named like the queue, else
these parameters. The RM's admin calls (``rm.core.accounts``) change them; a change takes
effect at the next tick.

Preemption (``kill_interval_s`` > 0): a kill check runs after a tick at least
``kill_interval_s`` after the previous check, whether or not that one took anything (so
effectively every multiple of the interval); the first is one kill interval after the
start. This is Hadoop's free-running kill clock (``PriorityScheduler.assignMapRedTasks``
moves ``lastKill`` whenever the check runs; its first check, at the first heartbeat, finds
no quotas yet), not a delay after the last kill. At a check the under-quota queues are
owed ``sum min(pending, quota - held)`` containers; they are taken from the over-quota
queues by ``rm.policy.toolkit.dynprio.choose_victims``: first the queue whose latest job in the
system was submitted last (Hadoop keys on ``JobInProgress.getStartTime()``, the
submission time, of every running job), its containers least elapsed first. The RM ends
each PREEMPTED; its task runs again in full and does not count as a failed attempt. AM
containers are never taken.

A client's move (``on_app_moved``): the application's containers count in its new
queue's account from then on (held, charged, preempted as the new queue's), what they
held before in the interval stays charged to the old queue, and its pending tasks wait
under the new queue's quota. The spec is silent on moves (the paper's queue is its
user's); this is the reading that charges each account for exactly what its queue held.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rm.policy import (
    AppView,
    ByShape,
    Changes,
    ClusterView,
    NodeView,
    Placement,
    Policy,
    placement,
)
from rm.policy.accounts import AccountBalance, AccountBook, AccountInfo
from rm.policy.toolkit.dynprio import Account, Held, allocate, choose_victims
from rm.policy.toolkit.ordering import first_fit_ask
from rm.policy.toolkit.tracking import shapes_of
from treadle.messages import Container, ContainerStatus
from treadle.resources import VCORES


class DpParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The allocation interval (seconds).
    interval_s: float = Field(20.0, gt=0, allow_inf_nan=False)
    semantics: Literal["paper", "hadoop"] = "paper"
    #: Preempt at most this often (0: never).
    kill_interval_s: float = Field(0.0, ge=0, allow_inf_nan=False)
    #: A queue's initial budget and spending rate when the workload sets none.
    budget: float = Field(0.0, ge=0, allow_inf_nan=False)
    spending_rate: float = Field(1.0, ge=0, allow_inf_nan=False)
    #: vcores per slot (the cluster's slots: its vcores / this).
    slot_vcores: float = Field(1.0, gt=0, allow_inf_nan=False)


class DpPolicy(Policy[DpParams]):
    description = "Dynamic Priority: budgets and spending rates buy shares per interval"

    def __init__(self, params: DpParams | None = None) -> None:
        super().__init__(params)
        self.tick_interval_s = self.params.interval_s
        self._accounts: dict[str, Account] = {}
        self._price = 0.0
        self._share: dict[str, float] = {}
        self._quota: dict[str, int] = {}
        self._books: list[AccountBook] = []
        self._running: dict[str, int] = {}  # queue -> containers held
        self._area: dict[str, float] = {}  # queue -> container-seconds this interval
        self._since: dict[str, float] = {}  # queue -> when _area was last brought up
        self._interval_start = 0.0
        self._queue_of: dict[str, tuple[str, str]] = {}  # live container -> (app, queue)
        self._held: dict[str, tuple[str, str, float]] = {}  # task cid -> (app, queue, t)
        self._last_kill = -math.inf
        self._changes = Changes()
        self._all = ByShape()  # pending applications by (seq, id), filed by shape
        #: The same, of the queues under their quota (``_under``): NO_FILL's order.
        self._within_quota = ByShape()
        self._members: dict[str, set[str]] = {}  # queue -> its pending applications

    # ------------------------------------------------------------------ accounts
    def on_start(self, cluster: ClusterView) -> None:
        p = self.params
        self._last_kill = cluster.now  # the kill clock starts with the policy (no quotas yet)
        users = cluster.users
        for q in sorted(cluster.queues.values(), key=lambda q: q.name):
            if not q.is_leaf or q.name in self._accounts:
                continue
            budget = getattr(q, "budget", None)
            if budget is None and q.name in users:
                budget = users[q.name].budget
            rate = getattr(q, "spending_rate", None)
            self._accounts[q.name] = Account(
                float(budget if budget is not None else p.budget),
                float(rate if rate is not None else p.spending_rate),
            )

    def _account(self, queue: str) -> Account:
        a = self._accounts.get(queue)
        if a is None:
            a = self._accounts[queue] = Account(self.params.budget, self.params.spending_rate)
        return a

    def price(self) -> float:
        return self._price

    def account_infos(self, cluster: ClusterView) -> Sequence[AccountInfo]:
        pending = _pending_by_queue(cluster)
        return [
            AccountInfo(
                q,
                a.budget,
                a.spending_rate,
                self._share.get(q, 0.0),
                self._running.get(q, 0),
                pending.get(q, 0),
            )
            for q, a in sorted(self._accounts.items())
        ]

    def set_spending_rate(self, queue: str, rate: float) -> None:
        self._accounts[queue] = Account(self._account(queue).budget, rate)

    def set_budget(self, queue: str, budget: float) -> None:
        self._accounts[queue] = Account(budget, self._account(queue).spending_rate)

    def add_budget(self, queue: str, credits: float) -> None:
        a = self._account(queue)
        self._accounts[queue] = Account(a.budget + credits, a.spending_rate)

    def balances(self) -> Mapping[str, AccountBalance]:
        return {
            q: AccountBalance(a.budget, a.spending_rate) for q, a in sorted(self._accounts.items())
        }

    def restore_balances(self, balances: Mapping[str, AccountBalance]) -> None:
        for q, b in balances.items():
            self._accounts[q] = Account(b.budget, b.spending_rate)

    # ------------------------------------------------------------------ the interval
    def _bring_up(self, queue: str, now: float) -> None:
        self._area[queue] = self._area.get(queue, 0.0) + self._running.get(queue, 0) * (
            now - self._since.get(queue, self._interval_start)
        )
        self._since[queue] = now

    def tick(self, cluster: ClusterView) -> None:
        now = cluster.now
        span = now - self._interval_start
        pending = _pending_by_queue(cluster)
        running = self._running
        hadoop = self.params.semantics == "hadoop"
        used: dict[str, float] = {}
        for q in self._accounts:
            self._bring_up(q, now)
            held = running.get(q, 0) if hadoop or span <= 0 else self._area[q] / span
            used[q] = min(held, self._quota.get(q, 0))
        slots = int(cluster.capacity[VCORES] / self.params.slot_vcores + 1e-9)
        alloc = allocate(
            dict(sorted(self._accounts.items())),
            used,
            pending,
            slots,
            self.params.semantics,
            running=running,
        )
        self._price = alloc.price
        self._books = []
        for q, b in alloc.books.items():
            self._accounts[q] = Account(b.budget, b.spending_rate)
            self._share[q] = b.share
            self._quota[q] = b.quota
            self._books.append(
                AccountBook(
                    q, alloc.price, b.budget, b.spending_rate, b.share, b.used, b.pending, b.charged
                )
            )
        self._area = dict.fromkeys(self._area, 0.0)
        self._interval_start = now
        self._within_quota.clear()
        for q in self._members:
            if self._under(q):
                self._quota_crossed(q, True)

    def tick_books(self) -> Sequence[AccountBook]:
        return self._books

    def preempt(self, cluster: ClusterView) -> Sequence[str]:
        kill = self.params.kill_interval_s
        now = cluster.now
        if kill <= 0 or now - self._last_kill < kill - 1e-9:
            return ()
        self._last_kill = now
        running = self._running
        left = {q: self._quota.get(q, 0) - running.get(q, 0) for q in self._accounts}
        apps = cluster.apps
        held = [
            Held(cid, q, apps[a].seq, apps[a].submit_s, t)
            for cid, (a, q, t) in self._held.items()
            if a in apps
        ]
        started: dict[str, float] = {}  # queue -> its latest job's submission
        for app in apps.values():
            started[app.queue] = max(started.get(app.queue, -math.inf), app.submit_s)
        return choose_victims(left, _pending_by_queue(cluster), held, started)

    # ------------------------------------------------------------------ placement
    def _under(self, queue: str) -> bool:
        """Whether ``queue`` holds fewer containers than its quota (by one at least)."""
        return self._quota.get(queue, 0) - self._running.get(queue, 0) >= 1

    def _quota_crossed(self, queue: str, under: bool) -> None:
        """File ``queue``'s pending applications in ``_within_quota`` (``under``), or
        take them out."""
        within, items = self._within_quota, self._all.items
        for app_id in self._members.get(queue, ()):
            if not under:
                within.remove(app_id)
            elif (filed := items.get(app_id)) is not None:
                within.put(app_id, *filed)

    def _sync(self, cluster: ClusterView) -> None:
        """The pending applications by (seq, id), filed by shape: all, and those of the
        queues under quota."""
        changed = self._changes.take(cluster)
        if changed is None:
            self._all.clear()
            self._within_quota.clear()
            self._members.clear()
            changed = list(cluster.pending_apps())
        for app in changed:
            self._file(app, cluster)

    def _file(self, app: AppView, cluster: ClusterView) -> None:
        app_id, q = app.app_id, app.queue
        if app.pending > 0 and app_id in cluster.apps:
            entry, shapes = (app.seq, app_id), shapes_of(app)
            self._all.put(app_id, entry, shapes)
            members = self._members.get(q)
            if members is None:
                members = self._members[q] = set()
            members.add(app_id)
            if self._quota.get(q, 0) - self._running.get(q, 0) >= 1:  # ``_under(q)``
                self._within_quota.put(app_id, entry, shapes)
            return
        self._all.remove(app_id)
        self._within_quota.remove(app_id)
        members = self._members.get(q)
        if members is not None:
            members.discard(app_id)
            if not members:
                del self._members[q]

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        self._sync(cluster)
        apps = cluster.apps
        # NO_FILL (within quota), then FILL (work conservation, free): each in submission
        # order. A placement that fills its queue's quota takes the queue's applications
        # out of ``_within_quota`` (``on_container_allocated``).
        for index in (self._within_quota, self._all) if self._quota else (self._all,):
            while True:
                free = node.free
                head = index.first(index.fitting(free))
                if head is None:
                    break
                app = apps[head[1]]
                ask = first_fit_ask(app, free)
                if ask is None:  # cannot happen while the index is current
                    break
                yield placement(app.app_id, ask.priority)
                self._file(app, cluster)

    def on_app_moved(self, app: AppView, old_queue: str, cluster: ClusterView) -> None:
        """From the move on, ``app``'s containers count in (and are charged to) its new
        queue's account; what they held before stays charged to the old one's. Its pending
        tasks wait under the new queue's quota."""
        now, new = cluster.now, app.queue
        self._bring_up(old_queue, now)  # the interval's usage so far stays where it was
        self._bring_up(new, now)
        moved = 0
        for cid, (app_id, q) in self._queue_of.items():
            if app_id == app.app_id and q == old_queue:
                self._queue_of[cid] = (app_id, new)
                held = self._held.get(cid)
                if held is not None:
                    self._held[cid] = (app_id, new, held[2])
                moved += 1
        self._running[old_queue] = self._running.get(old_queue, 0) - moved
        self._running[new] = self._running.get(new, 0) + moved
        members = self._members.get(old_queue)
        if members is not None:
            members.discard(app.app_id)
            if not members:
                del self._members[old_queue]
        self._within_quota.remove(app.app_id)
        self._file(app, cluster)
        for q in (old_queue, new):  # either may have crossed its quota
            self._quota_crossed(q, self._under(q))

    def on_container_allocated(self, container: Container, cluster: ClusterView) -> None:
        app = cluster.apps[container.app_id]
        q, now, cid = app.queue, cluster.now, container.container_id
        self._bring_up(q, now)
        held = self._running.get(q, 0)
        self._running[q] = held + 1
        if self._quota.get(q, 0) - held == 1:  # it was under its quota by one: now at it
            self._quota_crossed(q, False)
        self._queue_of[cid] = (app.app_id, q)
        if container.priority >= 0:  # AM containers are never preempted
            self._held[cid] = (app.app_id, q, now)

    def on_container_finished(
        self, container: Container, status: ContainerStatus, cluster: ClusterView
    ) -> None:
        cid = container.container_id
        owner = self._queue_of.pop(cid, None)
        if owner is None:
            return
        q = owner[1]
        self._held.pop(cid, None)
        self._bring_up(q, cluster.now)
        held = self._running[q] = self._running[q] - 1
        if self._quota.get(q, 0) - held == 1:  # it was at its quota: now under it by one
            self._quota_crossed(q, True)


def _pending_by_queue(cluster: ClusterView) -> dict[str, int]:
    out: dict[str, int] = {}
    for app in cluster.pending_apps():
        out[app.queue] = out.get(app.queue, 0) + app.pending
    return out

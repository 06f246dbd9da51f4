"""Dynamic Priority's books (Sandholm & Lai, "Dynamic Proportional Share Scheduling in
Hadoop"; treadle's spec B1.2): the accounting of one allocation interval and the choice
of preemption victims, as pure functions a policy calls and a test feeds directly (the
way Hadoop's tests inject each queue's usage).

One allocation interval (``allocate``), per queue: ``active`` = it holds slots or asks for
more; the price is the sum of the spending rates of the eligible queues; an eligible
queue's share is ``rate / price`` (0 for the others) and its quota ``round(share x
slots)`` containers; it is charged ``rate x used`` for the interval that ended. The rules
where Hadoop's code and the paper differ (``semantics``):

- ``paper``: eligible = active, rate > 0 and budget >= rate (it can pay one slot for one
  interval), judged after the charge; charge ``min(budget, rate x used)``.
- ``hadoop`` (``DynamicPriorityScheduler.updateAllocation`` exactly): ``active`` reads
  the charged (capped) usage; the price counts active queues with ``rate <= budget``,
  judged before the charge; a queue that cannot pay ``rate x used`` is not charged and
  gets share 0; any other active queue is charged and gets ``rate / price``, even one the
  price left out (so shares may sum to more or less than 1 for an interval).

``used`` is what the caller charges for: slots held during the interval capped at the
queue's quota (work-conserving extra slots are free).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

#: Which rules ``allocate`` applies where the paper and Hadoop's code differ.
Semantics = Literal["paper", "hadoop"]


@dataclass(frozen=True, slots=True)
class Account:
    """A queue's budget (credits) and spending rate (credits per slot per interval)."""

    budget: float
    spending_rate: float


@dataclass(frozen=True, slots=True)
class Book:
    """One queue's books for the interval that begins: its budget after the charge for the
    interval that ended, its share and quota for the one that begins."""

    queue: str
    budget: float
    spending_rate: float
    share: float
    #: Containers the queue may hold: ``round(share x slots)``.
    quota: int
    #: The slots charged for (capped at the quota).
    used: float
    pending: int
    charged: float


@dataclass(frozen=True, slots=True)
class Allocation:
    price: float
    #: Per queue, in the order of the accounts given.
    books: dict[str, Book]


def allocate(
    accounts: Mapping[str, Account],
    used: Mapping[str, float],
    pending: Mapping[str, int],
    slots: int,
    semantics: Semantics = "paper",
    *,
    running: Mapping[str, int] | None = None,
) -> Allocation:
    """The books of one allocation interval (module docstring). ``used``: per queue, the
    slots to charge for; ``pending``: tasks asked for; ``running``: slots held now (the
    ``paper`` activity test; ``used`` when not given). Missing queues count 0."""
    held = running if running is not None else used
    out: dict[str, Book] = {}
    if semantics == "hadoop":
        price = 0.0
        for q, a in accounts.items():
            u, p = used.get(q, 0.0), pending.get(q, 0)
            if a.spending_rate <= a.budget and (u != 0 or p != 0):
                price += a.spending_rate
        for q, a in accounts.items():
            u, p = used.get(q, 0.0), pending.get(q, 0)
            rate, budget, charged = a.spending_rate, a.budget, 0.0
            if budget < rate * u or (u == 0 and p == 0):
                rate = 0.0
            else:
                charged = a.spending_rate * u
                budget -= charged
            share = rate / price if price > 0 else 0.0
            out[q] = Book(
                q, budget, a.spending_rate, share, round_half_up(share * slots), u, p, charged
            )
        return Allocation(price, out)
    if semantics != "paper":
        raise ValueError(f"semantics must be 'paper' or 'hadoop', not {semantics!r}")
    after: dict[str, tuple[float, float, bool]] = {}
    price = 0.0
    for q, a in accounts.items():
        u = used.get(q, 0.0)
        charged = min(a.budget, a.spending_rate * u)
        budget = a.budget - charged
        active = held.get(q, 0) > 0 or pending.get(q, 0) > 0
        eligible = active and a.spending_rate > 0 and budget >= a.spending_rate
        if eligible:
            price += a.spending_rate
        after[q] = (budget, charged, eligible)
    for q, a in accounts.items():
        budget, charged, eligible = after[q]
        share = a.spending_rate / price if eligible else 0.0
        out[q] = Book(
            q,
            budget,
            a.spending_rate,
            share,
            round_half_up(share * slots),
            used.get(q, 0.0),
            pending.get(q, 0),
            charged,
        )
    return Allocation(price, out)


def round_half_up(x: float) -> int:
    """Java's ``Math.round`` (halves up), which Hadoop's quotas use; Python rounds halves
    to even."""
    return int(x + 0.5) if x >= 0 else -int(-x + 0.5)


@dataclass(frozen=True, slots=True)
class Held:
    """A running task container, as victim selection sees it."""

    container_id: str
    queue: str
    #: Its application's submission order.
    app_seq: int
    #: When its application started: was submitted (Hadoop's ``JobInProgress.startTime``).
    app_start_s: float
    #: When the container was allocated (the later, the less progress).
    start_s: float


def owed(quota_left: Mapping[str, int], pending: Mapping[str, int]) -> int:
    """Slots the under-quota queues are owed: ``sum min(pending, max(quota_left, 0))``."""
    return sum(min(pending.get(q, 0), max(left, 0)) for q, left in quota_left.items())


def choose_victims(
    quota_left: Mapping[str, int],
    pending: Mapping[str, int],
    held: Iterable[Held],
    started: Mapping[str, float] | None = None,
) -> list[str]:
    """Containers to preempt so the under-quota queues get what they are owed (Hadoop's
    ``PriorityScheduler`` kill rule, spec B1.2 step 4). ``quota_left``: per queue, its
    quota minus the containers it holds. Over-quota queues (``quota_left < 0``) give up
    containers, the queue whose running job started most recently first (ties: queue
    name), each at most its excess; inside a queue its jobs in submission order, each
    job's containers least progress (latest allocated) first. ``started``: per queue,
    when its most recently started job in the system started, whether or not that job
    holds containers (Hadoop keys on every running job of the queue); a queue it does
    not name: the latest ``app_start_s`` of its held containers."""
    todo = owed(quota_left, pending)
    if todo <= 0:
        return []
    by_queue: dict[str, list[Held]] = {}
    for h in held:
        if quota_left.get(h.queue, 0) < 0:
            by_queue.setdefault(h.queue, []).append(h)
    last = dict(started or {})
    for q, hs in by_queue.items():
        last.setdefault(q, max(h.app_start_s for h in hs))
    order = sorted(by_queue, key=lambda q: (-last[q], q))
    out: list[str] = []
    for q in order:
        take = min(todo - len(out), -quota_left[q])
        victims = sorted(by_queue[q], key=lambda h: (h.app_seq, -h.start_s, h.container_id))
        out += [h.container_id for h in victims[:take]]
        if len(out) >= todo:
            break
    return out

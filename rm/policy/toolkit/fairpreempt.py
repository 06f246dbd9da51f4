"""The FairScheduler's preemption (Hadoop 3's ``FSPreemptionThread``), as pure rules.

Starvation, judged at each check (``Starvation``):

- fair share: an application whose usage is below ``fairSharePreemptionThreshold x`` its
  fair share for longer than its queue's ``fairSharePreemptionTimeout`` is starved by
  ``min(threshold x share, its demand) - usage``;
- min share: a leaf queue whose usage is below ``min(minResources, its demand)`` for
  longer than ``minSharePreemptionTimeout`` is starved by the difference, handed to its
  applications in the queue's order, each at most what it still asks for beyond its own
  fair-share starvation (``FSLeafQueue.updateStarvedAppsMinshare``).

Victims (``choose_victims``): for each starved application, as many containers of its
most important ask as its starvation covers (``floor(starvation / ask)``, as
``getStarvedResourceRequests``); for each such container,
the first node (in order) where its free room plus containers taken from it fit the ask,
taking on that node the latest-started containers first of applications that stay at or
above their fair share after losing them, in queues that allow preemption. AM containers
are never taken (Hadoop takes them last; treadle's AM re-running the job is not modelled).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from treadle.resources import ZERO, Resources
from treadle.yarnids import container_sort_key


@dataclass(frozen=True, slots=True)
class Held:
    """A running task container, as victim selection sees it."""

    container_id: str
    app_id: str
    node_id: str
    resources: Resources
    start_s: float


@dataclass(frozen=True, slots=True)
class Starved:
    """An application's starvation and the ask that would relieve it."""

    app_id: str
    amount: Resources
    ask: Resources
    asked: int  # containers it asks for at that shape


@dataclass
class Starvation:
    """Since when each application (leaf queue) has been below its fair share threshold
    (its min share): kept between checks."""

    below_fair_since: dict[str, float] = field(default_factory=dict)
    below_min_since: dict[str, float] = field(default_factory=dict)

    def fair(self, app_id: str, below: bool, now: float, timeout_s: float) -> bool:
        """Whether ``app_id`` is starved of its fair share (below it for the timeout)."""
        return _starved(self.below_fair_since, app_id, below, now, timeout_s)

    def minimum(self, queue: str, below: bool, now: float, timeout_s: float) -> bool:
        """Whether leaf ``queue`` is starved of its min share."""
        return _starved(self.below_min_since, queue, below, now, timeout_s)

    def forget(self, live: Iterable[str]) -> None:
        """Drop what no longer exists (ended applications)."""
        keep = set(live)
        for k in [k for k in self.below_fair_since if k not in keep]:
            del self.below_fair_since[k]


def _starved(since: dict[str, float], key: str, below: bool, now: float, timeout: float) -> bool:
    if not below:
        since.pop(key, None)
        return False
    start = since.setdefault(key, now)
    return not math.isinf(timeout) and now - start >= timeout - 1e-9


def shortfall(target: Resources, usage: Resources) -> Resources:
    """``target - usage``, componentwise, none below zero."""
    return Resources({k: max(0.0, v - usage[k]) for k, v in target.items()})


def share_min(a: Resources, b: Resources) -> Resources:
    return Resources({k: min(a[k], b[k]) for k in set(a) | set(b)})


def split_min_share(
    starvation: Resources, apps: Sequence[tuple[str, Resources]]
) -> dict[str, Resources]:
    """A leaf's min-share starvation handed to its applications in order: each
    ``(app_id, room)`` takes at most its room (what it asks beyond its own fair-share
    starvation)."""
    out: dict[str, Resources] = {}
    left = starvation
    for app_id, room in apps:
        if left.is_zero():
            break
        give = share_min(left, room)
        if not give.is_zero():
            out[app_id] = give
            left = shortfall(left, give)
    return out


def containers_for(amount: Resources, ask: Resources, asked: int) -> int:
    """How many containers of ``ask`` a starvation of ``amount`` calls for: as many as fit
    in it (``floor``, by the scarcest resource the ask uses), at most ``asked``."""
    ratios = [amount[k] / v for k, v in ask.items() if v > 0]
    if not ratios:
        return 0
    return max(0, min(asked, math.floor(min(ratios) + 1e-9)))


def choose_victims(
    starved: Sequence[Starved],
    nodes: Sequence[tuple[str, Resources]],
    held: Sequence[Held],
    can_lose: Callable[[str, Resources], bool],
) -> list[str]:
    """Containers to preempt for ``starved`` (module docstring). ``nodes``: (id, free
    room) in the order to look at them; ``can_lose(app_id, resources)``: whether the
    application may lose that much more (it stays at or above its fair share, its queue
    allows preemption)."""
    by_node: dict[str, list[Held]] = {}
    for h in sorted(held, key=lambda h: (-h.start_s, container_sort_key(h.container_id))):
        by_node.setdefault(h.node_id, []).append(h)
    losing: dict[str, Resources] = {}  # per application, what it gives up so far
    taken: set[str] = set()
    free = dict(nodes)
    out: list[str] = []
    for s in starved:
        for _ in range(containers_for(s.amount, s.ask, s.asked)):
            got = _one_container(s.ask, free, by_node, taken, losing, can_lose)
            if got is None:
                break
            out += got
    return out


def _one_container(
    ask: Resources,
    free: dict[str, Resources],
    by_node: Mapping[str, list[Held]],
    taken: set[str],
    losing: dict[str, Resources],
    can_lose: Callable[[str, Resources], bool],
) -> list[str] | None:
    """Victims that make room for one ``ask`` on the first node that can: their ids (the
    books updated), or None."""
    for node_id, room in free.items():
        if ask.fits_in(room):
            free[node_id] = shortfall(room, ask)
            return []
        picked: list[Held] = []
        trial = dict(losing)
        for h in by_node.get(node_id, ()):
            if h.container_id in taken:
                continue
            more = trial.get(h.app_id, ZERO) + h.resources
            if not can_lose(h.app_id, more):
                continue
            trial[h.app_id] = more
            picked.append(h)
            room = room + h.resources
            if ask.fits_in(room):
                losing.update(trial)
                taken.update(p.container_id for p in picked)
                free[node_id] = shortfall(room, ask)
                return [p.container_id for p in picked]
    return None

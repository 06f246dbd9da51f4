"""What the helpers keep between heartbeats: the RM's feed of changed applications, and
ordered entries indexed by the resource shapes their applications ask for.

A helper updates its ordered structures only for the applications that changed (their
asks or allocation; ``ClusterView.watch_apps``), so a placement costs O(shapes + log n),
not a walk over every pending application. On a cluster without the feed (a test
double), on another cluster than before, and when the cluster's capacity changed (every
share-based key moves), the helper rebuilds from ``pending_apps()`` instead.

``SortedGroups`` keeps totally ordered entries in named groups (a shape, a queue, ...),
each group a sorted list; ``first(groups)`` is the smallest entry of any of ``groups``.
An entry is a tuple led by what orders it, a float key (remaining work, a share) or a
submission number, whose next fields break ties, so that the order never depends on when
an entry was filed. ``ByShape`` is a ``SortedGroups`` by shape that also remembers each
item's entry, to file an application (or a group of them) under every shape it asks for
and move it in one call.

Sorted Python lists with ``bisect`` (the standard library's): a list holds one entry per
pending application asking for that shape, hundreds to tens of thousands, where
inserting is a memmove in C, cheaper than a tree's Python-level rebalancing
(``sortedcontainers``, the well-kept option, is itself a list of lists of about a
thousand items each), and it adds no dependency. Filing or unfiling an entry costs
O(log n) comparisons plus that memmove.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Generic, TypeVar

from rm.policy.views import AppView, ClusterView, NodeView
from treadle.resources import Accumulator, Resources

#: An entry: a totally ordered tuple whose last field is its item's name.
Entry = tuple[Any, ...]

G = TypeVar("G", bound=Hashable)
E = TypeVar("E", bound=tuple[Any, ...])


class Changes:
    """The applications a helper must look at again, from the RM's change feed; with
    ``priorities``, also which of their priorities changed (``take_priorities``)."""

    __slots__ = ("_cluster", "_feed", "_priorities", "capacity", "priorities")

    def __init__(self, priorities: bool = False) -> None:
        self._cluster: object = None
        self._feed: dict[str, AppView] | None = None
        self.priorities = priorities
        self._priorities: dict[str, set[int] | None] | None = None
        #: The cluster's capacity when the helper last rebuilt.
        self.capacity: Resources | None = None

    def take(self, cluster: ClusterView) -> list[AppView] | None:
        """The applications changed since the last call (and the ones that ended), or
        None when the caller must rebuild from ``cluster.pending_apps()``."""
        cap = cluster.capacity
        feed = self._feed
        if cluster is not self._cluster:
            self._cluster = cluster
            watch = getattr(cluster, "watch_apps", None)
            self._feed = watch() if watch is not None else None
            by_priority = getattr(cluster, "watch_priorities", None)
            if self._feed is not None and self.priorities and by_priority is not None:
                self._priorities = by_priority()
            else:
                self._priorities = None
            self.capacity = cap
            return None
        if feed is None:
            return None
        if cap is not self.capacity and cap != self.capacity:
            self.capacity = cap
            feed.clear()
            if self._priorities is not None:
                self._priorities.clear()
            return None
        if not feed:
            return []
        out = list(feed.values())
        feed.clear()
        return out

    def take_priorities(self) -> dict[str, set[int] | None] | None:
        """Per application changed since the last call, its changed priorities (None:
        any may have; an application missing: any may have); None when the cluster does
        not tell. Call it right after ``take``."""
        feed = self._priorities
        if feed is None:
            return None
        out = dict(feed)
        feed.clear()
        return out


def free_test(node: NodeView) -> Callable[[Resources], bool]:
    """``lambda r: r.fits_in(node.free)``, read live as placements are applied; for the
    RM's own nodes (their free space an ``Accumulator``) without a snapshot per test."""
    acc = getattr(node, "_free", None)
    if type(acc) is Accumulator:
        covers: Callable[[Resources], bool] = acc.covers
        return covers
    return lambda r: r.fits_in(node.free)


def shapes_of(app: AppView) -> tuple[Resources, ...]:
    """The distinct shapes ``app`` asks for, in priority order."""
    asks = app.sorted_asks()
    if len(asks) == 1:
        return (asks[0].resources,)
    return tuple(dict.fromkeys([a.resources for a in asks]))


class SortedGroups(Generic[G, E]):
    """Entries in order, in named groups; see the module docstring. ``lists`` maps each
    group to its entries, sorted, and holds no empty group: a group emptied is dropped
    (filing into it again adds it last, so iterating ``lists`` is deterministic)."""

    __slots__ = ("lists",)

    def __init__(self) -> None:
        self.lists: dict[G, list[E]] = {}

    def __bool__(self) -> bool:
        return bool(self.lists)

    def clear(self) -> None:
        self.lists.clear()

    def file(self, group: G, entry: E) -> None:
        """Add ``entry`` to ``group`` (in order; an equal entry already there stays
        before it)."""
        lst = self.lists.get(group)
        if lst is None:
            self.lists[group] = [entry]
        else:
            insort(lst, entry)

    def unfile(self, group: G, entry: E) -> None:
        """Take ``entry`` out of ``group``; it must be there (filed and not unfiled)."""
        lst = self.lists[group]
        if len(lst) == 1:
            del self.lists[group]
        else:
            del lst[bisect_left(lst, entry)]

    def get(self, group: G) -> list[E]:
        """``group``'s entries in order (empty: none filed); read, never change, them."""
        return self.lists.get(group) or []

    def first(self, groups: Iterable[G]) -> E | None:
        """The smallest entry filed under any of ``groups``."""
        best: E | None = None
        lists = self.lists
        for g in groups:
            lst = lists.get(g)
            if lst is not None:
                head = lst[0]
                if best is None or head < best:
                    best = head
        return best


class ByShape(SortedGroups[Resources, Entry]):
    """Items' entries filed by shape; see the module docstring."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        super().__init__()
        #: Per item: its entry and its shapes.
        self.items: dict[Hashable, tuple[Entry, tuple[Resources, ...]]] = {}

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def clear(self) -> None:
        self.lists.clear()
        self.items.clear()

    def put(self, name: Hashable, entry: Entry, shapes: tuple[Resources, ...]) -> None:
        """File ``name`` as ``entry`` under ``shapes`` (replacing what it was)."""
        old = self.items.get(name)
        lists = self.lists
        if old is not None:
            old_entry, old_shapes = old
            if old_entry == entry:
                if old_shapes == shapes:
                    return
                for s in old_shapes:
                    if s not in shapes:
                        self.unfile(s, entry)
                for s in shapes:
                    if s not in old_shapes:
                        self.file(s, entry)
                self.items[name] = (entry, shapes)
                return
            for s in old_shapes:
                self.unfile(s, old_entry)
        for s in shapes:  # ``file``, inlined: the hot path
            lst = lists.get(s)
            if lst is None:
                lists[s] = [entry]
            else:
                insort(lst, entry)
        self.items[name] = (entry, shapes)

    def remove(self, name: Hashable) -> None:
        """Unfile ``name`` (nothing if it is not filed)."""
        old = self.items.pop(name, None)
        if old is not None:
            for s in old[1]:
                self.unfile(s, old[0])

    def fitting(self, free: Resources) -> list[Resources]:
        """The shapes filed that fit in ``free``."""
        return [s for s in self.lists if s.fits_in(free)]

    def fitting_by(self, fits: Callable[[Resources], bool]) -> list[Resources]:
        """The shapes filed that ``fits`` takes (``free_test``)."""
        return [s for s in self.lists if fits(s)]

    def first_where(self, accept: Callable[[Resources], bool]) -> Entry | None:
        """``first`` of the shapes that ``accept`` takes, asking it about as few as it
        can: shape by shape in the order of their first entries, up to the first taken."""
        lists = self.lists
        if len(lists) == 1:
            ((shape, lst),) = lists.items()
            return lst[0] if accept(shape) else None
        for shape, lst in sorted(lists.items(), key=_head):
            if accept(shape):
                return lst[0]
        return None


def _head(item: tuple[Resources, list[Entry]]) -> Entry:
    return item[1][0]

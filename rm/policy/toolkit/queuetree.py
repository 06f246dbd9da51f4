"""Queue-tree policies: walk the queue tree by a key, order the chosen leaf's applications,
drop what no longer fits (YARN's capacity and fair schedulers, DRF across users)."""

from __future__ import annotations

import heapq
from abc import abstractmethod
from bisect import bisect_left, insort
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from rm.policy.base import P, Placement, Policy, placement
from rm.policy.toolkit.ordering import first_fit_ask
from rm.policy.toolkit.tracking import ByShape, Changes, Entry, free_test, shapes_of
from rm.policy.views import AppView, ClusterView, NodeView
from treadle.messages import Ask
from treadle.resources import Resources

#: A heap entry: (key, tie, item). Ties are unique per heap, so items are never compared.
_Entry = tuple[Any, int, Any]


class _Tree:
    """A queue-tree policy's state between heartbeats."""

    __slots__ = ("app_leaf", "apps", "changes", "firsts", "groups", "leaves")

    def __init__(self) -> None:
        self.changes = Changes()
        #: Per leaf, its pending applications by (app key, seq), filed by shape.
        self.leaves: dict[str, ByShape] = {}
        self.apps: dict[str, AppView] = {}
        self.app_leaf: dict[str, str] = {}
        #: With ``flat``: the groups by (group key, seq of the first pending application),
        #: filed by the shapes their applications ask for; per group, those seqs.
        self.groups = ByShape()
        self.firsts: dict[str, list[int]] = {}


class QueueTreePolicy(Policy[P]):
    """Helper for policies that serve a tree of queues.

    On a node's heartbeat, while anything fits: from the root down, at each level the
    child with the smallest ``group_key`` that still has an application under it with an
    ask that ``fits`` is chosen (ties: the order of the children); in the chosen leaf
    (``leaf_of``: the application's queue), the application with the smallest ``app_key``
    (ties: submission order) with an ask that ``fits`` gets one container for its most
    important such ask. During a heartbeat the node's free resources only shrink and
    usage only grows, so what did not fit is not looked at again.

    With ``flat = True`` the leaves are not queues but one level of groups under the root
    (DRF's users or jobs), ties broken by the submission order of each group's first
    pending application.

    ``group_key`` must depend only on what is under the group (its usage): after a
    placement the keys of the leaf and its ancestors are recomputed and the others kept.
    ``app_key`` may depend only on the application (e.g. its usage); it is recomputed
    when the application changes (asks, allocation), and with ``resort = True`` after
    each of its placements (else at the next heartbeat).

    Cost: the pending applications are kept, per leaf (and with ``flat``, the groups),
    sorted and filed by the shapes they ask for, updated only for the applications that
    changed; a placement costs O(shapes + log applications) (plus, without ``flat``, one
    key per queue visited on the heartbeat). A policy that overrides ``first_fit`` (the
    older hook) instead looks at every pending application on each heartbeat: override
    ``fits`` instead.
    """

    flat: ClassVar[bool] = False
    resort: ClassVar[bool] = False

    @abstractmethod
    def group_key(self, name: str, cluster: ClusterView) -> Any:
        """The key of the queue (with ``flat``, the group) ``name``: smaller first."""

    def leaf_of(self, app: AppView) -> str:
        """The leaf that ``app`` waits in: its queue (with ``flat``, a group's name)."""
        return app.queue

    def app_key(self, app: AppView, cluster: ClusterView) -> Any:
        """The order of applications within a leaf, smaller first (ties: submission
        order). Default: submission order."""
        return 0

    def fits(self, resources: Resources, leaf: str, node: NodeView, cluster: ClusterView) -> bool:
        """Whether an ask of ``resources`` from ``leaf`` may be placed on ``node`` now
        (default: it fits the node's free resources). During a heartbeat it may only turn
        from true to false (e.g. a queue's maximum: usage only grows)."""
        return resources.fits_in(node.free)

    def first_fit(
        self, app: AppView, leaf: str, node: NodeView, cluster: ClusterView
    ) -> Ask | None:
        """The ask of ``app`` to place on ``node`` (None: nothing fits). Default: the most
        important ask that ``fits``. Overriding it makes every heartbeat look at every
        pending application; override ``fits`` instead."""
        return first_fit_ask(app, node.free)

    def prepare(self, cluster: ClusterView) -> None:
        """Called at the start of every heartbeat's walk, before any key."""

    # The kept state --------------------------------------------------------------
    def _tree_state(self) -> _Tree:
        t: _Tree | None = self.__dict__.get("_queuetree")
        if t is None:
            t = self.__dict__["_queuetree"] = _Tree()
        return t

    def _leaf(self, app: AppView) -> str:
        return app.queue if type(self).leaf_of is QueueTreePolicy.leaf_of else self.leaf_of(app)

    def _file_app(self, t: _Tree, app: AppView, cluster: ClusterView, rekey: bool) -> str:
        """Index ``app`` in its leaf (its key recomputed when ``rekey``), or drop it
        (nothing pending, or ended); returns its leaf."""
        app_id = app.app_id
        leaf = t.app_leaf.get(app_id)
        if app.pending > 0 and app_id in cluster.apps:
            if leaf is None:
                leaf = t.app_leaf[app_id] = self._leaf(app)
                t.apps[app_id] = app
                members = t.leaves.get(leaf)
                if members is None:
                    members = t.leaves[leaf] = ByShape()
                if self.flat:
                    insort(t.firsts.setdefault(leaf, []), app.seq)
                rekey = True
            else:
                members = t.leaves[leaf]
            if rekey:
                default = type(self).app_key is QueueTreePolicy.app_key
                entry: Entry = (0 if default else self.app_key(app, cluster), app.seq, app_id)
            else:
                entry = members.items[app_id][0]
            members.put(app_id, entry, shapes_of(app))
            return leaf
        if leaf is None:
            return self._leaf(app)
        return self._unfile_app(t, app)

    def on_app_moved(self, app: AppView, old_queue: str, cluster: ClusterView) -> None:
        """``app`` waits in its new leaf from now on: it leaves the old one's index (and,
        with ``flat``, its group is filed again) and joins the new one's."""
        super().on_app_moved(app, old_queue, cluster)
        t = self.__dict__.get("_queuetree")
        if t is None or t.app_leaf.get(app.app_id) in (None, self._leaf(app)):
            return
        old = self._unfile_app(t, app)
        new = self._file_app(t, app, cluster, True)
        if self.flat:
            for name in {old, new}:
                self._file_group(t, name, cluster)

    def _unfile_app(self, t: _Tree, app: AppView) -> str:
        """Drop ``app`` (filed) from its leaf's index; that leaf."""
        app_id = app.app_id
        leaf = t.app_leaf.pop(app_id)
        del t.apps[app_id]
        members = t.leaves[leaf]
        members.remove(app_id)
        if not members:
            del t.leaves[leaf]
        if self.flat:
            seqs = t.firsts[leaf]
            del seqs[bisect_left(seqs, app.seq)]
        return leaf

    def _file_group(
        self, t: _Tree, name: str, cluster: ClusterView, tie: int | None = None
    ) -> None:
        """Re-key group ``name`` and re-file it by its shapes (its tie: ``tie``, else the
        seq of its first pending application)."""
        members = t.leaves.get(name)
        if not members:
            t.groups.remove(name)
            t.firsts.pop(name, None)
            return
        key = (self.group_key(name, cluster), t.firsts[name][0] if tie is None else tie, name)
        t.groups.put(name, key, tuple(members.lists))

    def _sync(self, t: _Tree, cluster: ClusterView) -> None:
        changed = t.changes.take(cluster)
        flat = self.flat
        if changed is None:
            t.leaves.clear()
            t.apps.clear()
            t.app_leaf.clear()
            t.groups.clear()
            t.firsts.clear()
            for app in cluster.pending_apps():
                self._file_app(t, app, cluster, True)
            if flat:
                for name in list(t.leaves):
                    self._file_group(t, name, cluster)
            return
        if not flat:
            for app in changed:
                self._file_app(t, app, cluster, True)
            return
        touched = {self._file_app(t, app, cluster, True): None for app in changed}
        for name in touched:
            if name in t.leaves or name in t.groups.items:
                self._file_group(t, name, cluster)

    # The heartbeat ---------------------------------------------------------------
    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        if type(self).first_fit is not QueueTreePolicy.first_fit:
            yield from self._walk_every_app(node, cluster)
            return
        if not cluster.pending_apps():
            return
        self.prepare(cluster)
        t = self._tree_state()
        self._sync(t, cluster)
        if not t.leaves:
            return
        if self.flat:
            yield from self._walk_groups(t, node, cluster)
        else:
            yield from self._walk_queues(t, node, cluster)

    def _fitting(self, members: ByShape, leaf: str, node: NodeView, cluster: ClusterView) -> Any:
        if type(self).fits is QueueTreePolicy.fits:
            return members.fitting_by(free_test(node))
        return [s for s in members.lists if self.fits(s, leaf, node, cluster)]

    def _ask(self, app: AppView, leaf: str, node: NodeView, cluster: ClusterView) -> Ask | None:
        if type(self).fits is QueueTreePolicy.fits:
            fits = free_test(node)
            for ask in app.sorted_asks():  # first_fit_ask, by ``fits``
                if fits(ask.resources):
                    return ask
            return None
        for ask in app.sorted_asks():
            if self.fits(ask.resources, leaf, node, cluster):
                return ask
        return None

    def _placed(self, t: _Tree, app: AppView, cluster: ClusterView) -> None:
        """``app`` got a container: re-file it (re-keyed with ``resort``)."""
        resort = self.resort and type(self).app_key is not QueueTreePolicy.app_key
        self._file_app(t, app, cluster, resort)

    def _walk_groups(self, t: _Tree, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        groups = t.groups
        custom = type(self).fits is not QueueTreePolicy.fits
        fits = free_test(node)
        while True:
            if not custom:
                fit = groups.fitting_by(fits)
                head = groups.first(fit)
                if head is None:
                    return
                name = head[-1]
            else:
                found = self._first_group(t, node, cluster)
                if found is None:
                    return
                name = found
                fit = self._fitting(t.leaves[name], name, node, cluster)
            members = t.leaves[name]
            entry = members.first(fit)
            if entry is None:  # cannot happen while the index is current
                return
            app = t.apps[entry[-1]]
            ask = self._ask(app, name, node, cluster)
            if ask is None:
                return
            tie = groups.items[name][0][1]  # a group's tie stays for the heartbeat
            yield placement(app.app_id, ask.priority)
            self._placed(t, app, cluster)
            self._file_group(t, name, cluster, tie)

    def _first_group(self, t: _Tree, node: NodeView, cluster: ClusterView) -> str | None:
        """With a ``fits`` of its own: the first group, per shape, that it lets place."""
        best: Entry | None = None
        for shape, lst in t.groups.lists.items():
            for e in lst:
                if best is not None and e >= best:
                    break
                if self.fits(shape, e[-1], node, cluster):
                    best = e
                    break
        return best[-1] if best is not None else None

    def _walk_queues(self, t: _Tree, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        group_key = self.group_key
        queues, root = cluster.queues, cluster.root_queue
        live: set[str] = set()
        for name in t.leaves:
            q = queues.get(name)
            if q is None or not q.is_leaf:
                continue  # applications of a queue that is not a leaf are never served
            while q is not None and q.name not in live:
                live.add(q.name)
                q = q.parent
        if root.name not in live:
            return

        def children(name: str | None) -> list[tuple[int, str]]:
            if name is None:
                return [(0, root.name)]
            return [(i, c.name) for i, c in enumerate(queues[name].children) if c.name in live]

        def pick(name: str, path: list[str]) -> tuple[AppView, Ask] | None:
            members = t.leaves.get(name)
            if not members:
                return None
            if type(self).fits is QueueTreePolicy.fits:
                entry = members.first(members.fitting_by(free_test(node)))
            else:  # a test of its own, maybe costly: the shapes by their first entry
                entry = members.first_where(lambda s: self.fits(s, name, node, cluster))
            if entry is None:
                return None
            app = t.apps[entry[-1]]
            ask = self._ask(app, name, node, cluster)
            return (app, ask) if ask is not None else None

        def placed(app: AppView, path: list[str]) -> None:
            self._placed(t, app, cluster)

        yield from _serve_tree(
            children, group_key, cluster, lambda name: queues[name].is_leaf, pick, placed
        )

    # A first_fit of the policy's own: every pending application, every heartbeat ---------
    def _walk_every_app(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        pending = cluster.pending_apps()
        if not pending:
            return
        self.prepare(cluster)
        cls, group_key = type(self), self.group_key
        by_queue = cls.leaf_of is QueueTreePolicy.leaf_of
        app_key = None if cls.app_key is QueueTreePolicy.app_key else self.app_key
        # Per leaf, its applications: in submission order, a stack (the head last, pop()
        # drops it); by app_key, a heap of (key, seq, app).
        waiting: dict[str, list[Any]] = {}
        firsts: dict[str, int] = {}  # per leaf, the seq of its first application
        if app_key is None:
            for app in reversed(pending):
                leaf = app.queue if by_queue else self.leaf_of(app)
                waiting.setdefault(leaf, []).append(app)
                firsts[leaf] = app.seq
        else:
            for app in pending:
                leaf = app.queue if by_queue else self.leaf_of(app)
                waiting.setdefault(leaf, []).append((app_key(app, cluster), app.seq, app))
                firsts.setdefault(leaf, app.seq)
            for h in waiting.values():
                heapq.heapify(h)
        children = self._tree(cluster, waiting, firsts)

        def pick(name: str, path: list[str]) -> tuple[AppView, Ask] | None:
            apps = waiting[name]
            while apps:
                app = apps[-1] if app_key is None else apps[0][2]
                ask = self.first_fit(app, path[-1], node, cluster)
                if ask is not None:
                    return app, ask
                if app_key is None:  # nothing of this application fits any more
                    apps.pop()
                else:
                    heapq.heappop(apps)
            return None

        def placed(app: AppView, path: list[str]) -> None:
            if app_key is not None and self.resort:
                apps = waiting[path[-1]]
                if app.pending:
                    heapq.heapreplace(apps, (app_key(app, cluster), app.seq, app))
                else:
                    heapq.heappop(apps)

        yield from _serve_tree(children, group_key, cluster, waiting.__contains__, pick, placed)

    def _tree(
        self, cluster: ClusterView, waiting: dict[str, list[Any]], firsts: dict[str, int]
    ) -> Callable[[str | None], list[tuple[int, str]]]:
        """``children(name)``: the (tie, name) of the children of inner node ``name`` (None:
        the root) that have applications waiting under them. Applications whose queue is
        not a leaf of the tree are never served."""
        if self.flat:
            groups = [(firsts[g], g) for g in waiting]
            return lambda _: groups
        queues, root = cluster.queues, cluster.root_queue
        live: set[str] = set()
        for name in list(waiting):
            q = queues.get(name)
            if q is None or not q.is_leaf:
                del waiting[name]
                continue
            while q is not None and q.name not in live:
                live.add(q.name)
                q = q.parent

        def children(name: str | None) -> list[tuple[int, str]]:
            if name is None:  # above the root: the root, when anything waits
                return [(0, root.name)] if root.name in live else []
            return [(i, c.name) for i, c in enumerate(queues[name].children) if c.name in live]

        return children


def _serve_tree(
    children: Callable[[str | None], list[tuple[int, str]]],
    group_key: Callable[[str, ClusterView], Any],
    cluster: ClusterView,
    is_leaf: Callable[[str], bool],
    pick: Callable[[str, list[str]], tuple[AppView, Ask] | None],
    placed: Callable[[AppView, list[str]], None],
) -> Iterator[Placement]:
    """Placements down the tree, one at a time: from above the root (None), each inner
    node's children (``children(name)``: their (tie, name)) in a heap by
    ``(group_key, tie)``, down to the first leaf where ``pick(name, path)`` finds an
    application and its ask (``path``: the names from the root to that leaf); a child in
    which nothing is found is dropped from its parent's heap for the rest of the walk.
    After each placement, ``placed(app, path)``, then each node on the path is filed
    again in its parent's heap under its new key."""
    heaps: dict[str | None, list[_Entry]] = {}  # per inner node (None: above the root)

    def descend(name: str | None, path: list[str]) -> tuple[AppView, Ask] | None:
        if name is not None and is_leaf(name):
            return pick(name, path)
        heap = heaps.get(name)
        if heap is None:
            heap = heaps[name] = [(group_key(c, cluster), i, c) for i, c in children(name)]
            heapq.heapify(heap)
        while heap:
            path.append(heap[0][2])
            found = descend(heap[0][2], path)
            if found is not None:
                return found
            path.pop()
            heapq.heappop(heap)
        return None

    while True:
        path: list[str] = []
        found = descend(None, path)
        if found is None:
            return
        app, ask = found
        yield placement(app.app_id, ask.priority)
        placed(app, path)
        parent: str | None = None
        for name in path:  # each is the head of its parent's heap
            heap = heaps[parent]
            if len(heap) > 1:  # heaps only shrink: an only child is never compared
                heapq.heapreplace(heap, (group_key(name, cluster), heap[0][1], name))
            parent = name

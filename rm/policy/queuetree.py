"""Queue-tree policies: walk the queue tree by a key, order the chosen leaf's applications,
drop what no longer fits (YARN's capacity and fair schedulers, DRF across users)."""

from __future__ import annotations

import heapq
from abc import abstractmethod
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from rm.policy.base import P, Placement, Policy, _placement
from rm.policy.ordering import first_fit_ask
from rm.policy.views import AppView, ClusterView, NodeView
from treadle.messages import Ask

#: A heap entry: (key, tie, item). Ties are unique per heap, so items are never compared.
_Entry = tuple[Any, int, Any]


class QueueTreePolicy(Policy[P]):
    """Helper for policies that serve a tree of queues.

    On a node's heartbeat the applications with pending asks are grouped by leaf
    (``leaf_of``: their queue). Then, while anything fits: from the root down, at each
    level the child with the smallest ``group_key`` that still has applications under it
    is chosen (ties: the order of the children); in the chosen leaf, the application with
    the smallest ``app_key`` (ties: submission order) whose ``first_fit`` finds an ask
    gets one container for that ask. An application with nothing that fits is dropped for
    the rest of the heartbeat, and so is a leaf with no application left: during a
    heartbeat the node's free resources only shrink and usage only grows.

    With ``flat = True`` the leaves are not queues but one level of groups under the root
    (DRF's users or jobs), ties broken by the submission order of each group's first
    pending application.

    ``group_key`` must depend only on what is under the group (its usage): after a
    placement the keys of the leaf and its ancestors are recomputed and the others kept.
    ``app_key`` is computed once per heartbeat, or after each of the application's
    placements with ``resort = True`` (keys that depend on the application's usage).
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

    def first_fit(
        self, app: AppView, leaf: str, node: NodeView, cluster: ClusterView
    ) -> Ask | None:
        """The ask of ``app`` to place on ``node`` (None: nothing fits). Default: the most
        important ask that fits the node's free resources."""
        return first_fit_ask(app, node.free)

    def prepare(self, cluster: ClusterView) -> None:
        """Called at the start of every heartbeat's walk, before any key."""

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        pending = cluster.pending_apps()
        if not pending:
            return
        self.prepare(cluster)
        cls, group_key = type(self), self.group_key
        # The defaults, inlined on this hot path (same results, fewer calls).
        by_queue = cls.leaf_of is QueueTreePolicy.leaf_of
        app_key = None if cls.app_key is QueueTreePolicy.app_key else self.app_key
        fit = None if cls.first_fit is QueueTreePolicy.first_fit else self.first_fit
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
        heaps: dict[str | None, list[_Entry]] = {}  # per inner node (None: the root)

        def descend(name: str | None, path: list[str]) -> tuple[AppView, Ask] | None:
            """The first application with an ask to place under ``name`` (its leaf is
            ``path[-1]``): applications with nothing that fits are dropped, and the
            children found without any application are dropped from their parent."""
            apps = waiting.get(name) if name is not None else None
            if apps is not None:  # a leaf
                while apps:
                    app = apps[-1] if app_key is None else apps[0][2]
                    ask = (
                        first_fit_ask(app, node.free)
                        if fit is None
                        else fit(app, path[-1], node, cluster)
                    )
                    if ask is not None:
                        return app, ask
                    if app_key is None:  # nothing of this application fits any more
                        apps.pop()
                    else:
                        heapq.heappop(apps)
                return None
            heap = heaps.get(name)
            if heap is None:
                heap = heaps[name] = [(group_key(c, cluster), t, c) for t, c in children(name)]
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
            yield _placement(app.app_id, ask.priority)
            if app_key is not None and self.resort:
                apps = waiting[path[-1]]
                if app.pending:
                    heapq.heapreplace(apps, (app_key(app, cluster), app.seq, app))
                else:
                    heapq.heappop(apps)
            parent: str | None = None
            for name in path:  # each is the head of its parent's heap
                heap = heaps[parent]
                if len(heap) > 1:  # heaps only shrink: an only child is never compared
                    heapq.heapreplace(heap, (group_key(name, cluster), heap[0][1], name))
                parent = name

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

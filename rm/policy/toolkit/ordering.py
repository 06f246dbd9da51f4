"""Ordering policies: an order over applications, first-fit placement in that order."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator
from typing import Any, ClassVar

from rm.policy.base import P, Placement, Policy, placement
from rm.policy.toolkit.tracking import ByShape, Changes, free_test, shapes_of
from rm.policy.views import AppView, ClusterView, NodeView
from treadle.messages import Ask, AskKind
from treadle.resources import Resources


def fill_node(app: AppView, node: NodeView) -> Iterator[Placement]:
    """Yield placements of ``app``'s asks on ``node``, most important priority first,
    while they fit (the RM updates ``node.free`` as each one is applied)."""
    app_id = app.app_id
    for ask in app.sorted_asks():
        count = ask.count
        fits_in = ask.resources.fits_in
        priority = ask.priority
        while count > 0 and fits_in(node.free):
            yield placement(app_id, priority)
            count -= 1


def first_fit_ask(app: AppView, free: Resources, kind: AskKind | None = None) -> Ask | None:
    """The most important outstanding ask of ``app`` that fits in ``free``."""
    for ask in app.sorted_asks():
        if (kind is None or ask.kind is kind) and ask.resources.fits_in(free):
            return ask
    return None


class _Order:
    """An ordering policy's state between heartbeats."""

    __slots__ = ("apps", "changes", "held", "index", "rebuild", "stale")

    def __init__(self) -> None:
        self.changes = Changes()
        #: Pending applications by (sort key, seq), filed by the shapes they ask for.
        self.index = ByShape()
        self.apps: dict[str, AppView] = {}
        self.held: list[AppView] = []  # passed over by ``eligible`` last heartbeat
        self.stale: set[str] = set()  # to re-key (``rekey``)
        self.rebuild = False


class OrderingPolicy(Policy[P]):
    """Helper for the many policies that are an order over applications.

    Implement ``sort_key``; placement is first-fit in that order: the application with the
    smallest key (ties: submission order) that has an ask fitting the node gets its most
    important ask that fits. With ``resort = False`` (FIFO, SJF) each application is
    filled before the next; with ``resort = True`` (fair-share policies whose key depends
    on usage) the key is recomputed after every placement, one container at a time.

    Keys are kept between heartbeats, each recomputed when its application changes: it
    starts asking, its asks change (an Allocate call, or a placement: with ``resort =
    False`` then at the next heartbeat), or its allocation changes (a container allocated
    or freed). So a key may depend on the application alone (its asks, allocation, job,
    submission) and on what the policy knew of it when it was added; a key that depends
    on more (the time, other applications) needs ``rekey()`` when that changes, or
    ``rekey_each_heartbeat = True`` (every key recomputed on every heartbeat: O(pending
    applications) each). A placement costs O(shapes asked for + log applications).
    """

    resort: ClassVar[bool] = False
    #: Recompute every key on every heartbeat (keys that depend on the time, or on other
    #: applications); else only the changed applications' keys.
    rekey_each_heartbeat: ClassVar[bool] = False

    @abstractmethod
    def sort_key(self, app: AppView, cluster: ClusterView) -> Any:
        """Smaller keys are served first."""

    def eligible(self, app: AppView, cluster: ClusterView) -> bool:
        """Whether ``app`` may receive a container now (e.g. below a queue's maximum).
        Asked when the application comes up to be served (with ``resort``, each time;
        else once per heartbeat); one refused is passed over for the rest of the
        heartbeat."""
        return True

    def rekey(self, *app_ids: str) -> None:
        """Recompute the keys of ``app_ids`` (of every application, without arguments)
        before the next heartbeat's placements."""
        o = self._order()
        if app_ids:
            o.stale.update(app_ids)
        else:
            o.rebuild = True

    def _order(self) -> _Order:
        o: _Order | None = self.__dict__.get("_ordering")
        if o is None:
            o = self.__dict__["_ordering"] = _Order()
        return o

    def _file(self, o: _Order, app: AppView, cluster: ClusterView) -> None:
        """Index ``app`` under its current key and shapes, or drop it (nothing pending,
        or ended)."""
        app_id = app.app_id
        if app.pending > 0 and app_id in cluster.apps:
            o.apps[app_id] = app
            o.index.put(app_id, (self.sort_key(app, cluster), app.seq, app_id), shapes_of(app))
        elif o.apps.pop(app_id, None) is not None:
            o.index.remove(app_id)

    def _sync(self, o: _Order, cluster: ClusterView) -> None:
        changed = o.changes.take(cluster)
        if changed is None or o.rebuild or self.rekey_each_heartbeat:
            o.index.clear()
            o.apps.clear()
            o.held.clear()
            o.stale.clear()
            o.rebuild = False
            for app in cluster.pending_apps():
                self._file(o, app, cluster)
            return
        if o.held:
            changed += o.held
            o.held = []
        if o.stale:
            apps = cluster.apps
            changed += [a for i in o.stale if (a := apps.get(i)) is not None]
            for i in o.stale:
                if i not in apps and o.apps.pop(i, None) is not None:
                    o.index.remove(i)
            o.stale.clear()
        for app in changed:
            self._file(o, app, cluster)

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        o = self._order()
        self._sync(o, cluster)
        index, apps = o.index, o.apps
        if not index:
            return
        check = type(self).eligible is not OrderingPolicy.eligible
        resort = self.resort
        approved: set[str] = set()
        fits = free_test(node)
        lists = index.lists
        while True:
            shapes = [s for s in lists if fits(s)]
            entry = index.first(shapes)
            if entry is None:
                return
            # One shape fitting (the common case): an ask of that very shape fits.
            fitting = shapes[0] if len(shapes) == 1 else None
            app_id = entry[-1]
            app = apps[app_id]
            if check and (resort or app_id not in approved):
                if not self.eligible(app, cluster):
                    index.remove(app_id)  # back at the next heartbeat
                    del apps[app_id]
                    o.held.append(app)
                    continue
                approved.add(app_id)
            for ask in app.sorted_asks():  # first_fit_ask, by ``fits``
                if ask.resources is fitting or fits(ask.resources):
                    break
            else:  # cannot happen while the index is current
                index.remove(app_id)
                del apps[app_id]
                continue
            yield placement(app_id, ask.priority)
            if app.pending > 0 and app_id in cluster.apps:
                if resort:
                    entry = (self.sort_key(app, cluster), entry[1], app_id)
                index.put(app_id, entry, shapes_of(app))
            elif apps.pop(app_id, None) is not None:
                index.remove(app_id)

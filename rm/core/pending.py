"""The applications with outstanding asks, a lower bound of what any of them asks, and
the feed of changed applications that keeps the policies' ordered structures current.

The RM calls its policy on a node's heartbeat only when some pending ask could fit the
node: ``min_ask`` is a componentwise lower bound of every pending ask, narrowed as asks
arrive and never widened while any remain, so the test can say yes wrongly (the policy
then finds nothing) but never no wrongly. ``epoch`` grows whenever nodes that could place
nothing before might place something now (asks appear on an idle cluster, or smaller
asks arrive).

``sorted_apps()`` is kept in submission order as applications start and stop asking (a
binary search each), never re-sorted; a list handed out is never changed afterwards (the
next change works on a copy), so a caller may iterate it while placing.

``watch()`` hands out a dict that the RM fills, from then on, with every application
(by id) whose asks or allocation change, including one that starts or stops asking or
ends: ``touch`` records it. Whoever watches empties the dict as it reads it, and so
updates only what changed since its last look. ``watch_priorities()`` hands out one that
the same calls fill with, per such application, the priorities whose ask (its count,
shape, kind or group: not its hints) or containers changed (None: any may have, e.g. its
asks were cleared), for whoever keeps something per priority or per stage (the
stage-ordering policies' task sets).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from treadle.messages import Ask
from treadle.resources import ZERO, Accumulator, Resources


class _Asking(Protocol):
    """What the index reads of an application (``rm.core.state.Application``)."""

    @property
    def app_id(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def pending(self) -> int: ...
    @property
    def asks(self) -> Mapping[int, Ask]: ...


Application = TypeVar("Application", bound=_Asking)


class PendingIndex(Generic[Application]):
    __slots__ = (
        "_handed",
        "_seqs",
        "_sorted",
        "apps",
        "epoch",
        "min_ask",
        "priority_watchers",
        "watchers",
    )

    def __init__(self) -> None:
        self.apps: dict[str, Application] = {}
        self._sorted: list[Application] = []  # ``apps`` by seq
        self._seqs: list[int] = []  # their seqs, for the binary search
        self._handed = False  # ``_sorted`` was handed out: copy it before changing it
        #: A lower bound of every pending ask (None: recompute it from the asks).
        self.min_ask: Resources | None = None
        self.epoch = 0
        #: The dicts handed out by ``watch`` (filled by ``touch``).
        self.watchers: tuple[dict[str, Any], ...] = ()
        #: The dicts handed out by ``watch_priorities``.
        self.priority_watchers: tuple[dict[str, set[int] | None], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.apps)

    def sorted_apps(self) -> list[Application]:
        """Pending applications in submission order (do not change the list)."""
        self._handed = True
        return self._sorted

    def watch(self) -> dict[str, Any]:
        """A new dict that ``touch`` fills with each changed application, by id."""
        feed: dict[str, Any] = {}
        self.watchers = (*self.watchers, feed)
        return feed

    def watch_priorities(self) -> dict[str, set[int] | None]:
        """A new dict that ``touch`` and ``update`` fill with each changed application's
        changed priorities (None: every one), by id."""
        feed: dict[str, set[int] | None] = {}
        self.priority_watchers = (*self.priority_watchers, feed)
        return feed

    def unwatch(self, feed: dict[str, Any]) -> None:
        """Stop filling ``feed`` (of either kind)."""
        self.watchers = tuple(w for w in self.watchers if w is not feed)
        self.priority_watchers = tuple(w for w in self.priority_watchers if w is not feed)

    def touch(self, app: Application, priority: int | None = None) -> None:
        """``app``'s asks or allocation changed (or it ended): tell the watchers; only at
        ``priority`` when given."""
        for w in self.watchers:
            w[app.app_id] = app
        if self.priority_watchers:
            self.priorities_changed(app.app_id, None if priority is None else (priority,))

    def granted(self, app: Application, priority: int) -> None:
        """``app`` got a container of its ask at ``priority`` (``update`` if that was its
        last pending one, else ``touch``)."""
        if app.pending <= 0:
            self.update(app, True, (priority,))
            return
        app_id = app.app_id
        for w in self.watchers:
            w[app_id] = app
        if self.priority_watchers:
            self.priorities_changed(app_id, (priority,))

    def priorities_changed(self, app_id: str, priorities: Iterable[int] | None) -> None:
        """Tell the priority watchers (only them) that ``app_id`` changed at
        ``priorities`` (None: at any)."""
        for w in self.priority_watchers:
            if priorities is None:
                w[app_id] = None
            elif app_id not in w:
                w[app_id] = set(priorities)
            else:
                seen = w[app_id]
                if seen is not None:
                    seen.update(priorities)

    def update(
        self, app: Application, was_pending: bool, priorities: Iterable[int] | None = None
    ) -> None:
        """``app``'s asks changed (only at ``priorities`` when given); it had some before
        when ``was_pending``."""
        for w in self.watchers:
            w[app.app_id] = app
        if self.priority_watchers:
            self.priorities_changed(app.app_id, priorities)
        now_pending = app.pending > 0
        if now_pending and not was_pending:
            if not self.apps:
                self.epoch += 1
            self.apps[app.app_id] = app
            self._patch(app, True)
        elif was_pending and not now_pending:
            if self.apps.pop(app.app_id, None) is not None:
                self._patch(app, False)
            if not self.apps:
                self.min_ask = None  # recomputed (tight again) when asks come back

    def _patch(self, app: Application, add: bool) -> None:
        if self._handed:
            self._sorted = list(self._sorted)
            self._seqs = list(self._seqs)
            self._handed = False
        seq = app.seq
        i = bisect_left(self._seqs, seq)
        if add:
            self._seqs.insert(i, seq)
            self._sorted.insert(i, app)
        elif i < len(self._seqs) and self._seqs[i] == seq:
            del self._seqs[i]
            del self._sorted[i]

    def narrow(self, resources: Resources) -> bool:
        """An ask of ``resources`` arrived: lower the bound to cover it. True (and the
        epoch grows) when the bound moved."""
        m = self.min_ask
        if m is not None:
            narrowed = m.componentwise_min(resources)
            if narrowed is not m and narrowed != m:
                self.min_ask = narrowed
                self.epoch += 1
                return True
        return False

    def could_fit(self, free: Accumulator) -> bool:
        """Whether some pending ask might fit in ``free``."""
        if not self.apps:
            return False
        m = self.min_ask
        return free.covers(m if m is not None else self.lower_bound())

    def lower_bound(self) -> Resources:
        """``min_ask``, recomputed from the pending asks."""
        m: Resources | None = None
        for app in self.apps.values():
            for ask in app.asks.values():
                m = ask.resources if m is None else m.componentwise_min(ask.resources)
        self.min_ask = out = m if m is not None else ZERO
        return out

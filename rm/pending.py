"""The applications with outstanding asks, and a lower bound of what any of them asks.

The RM calls its policy on a node's heartbeat only when some pending ask could fit the
node: ``min_ask`` is a componentwise lower bound of every pending ask, narrowed as asks
arrive and never widened while any remain, so the test can say yes wrongly (the policy
then finds nothing) but never no wrongly. ``epoch`` grows whenever nodes that could place
nothing before might place something now (asks appear on an idle cluster, or smaller
asks arrive).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, Protocol, TypeVar

from treadle.messages import Ask
from treadle.resources import ZERO, Accumulator, Resources


class _Asking(Protocol):
    """What the index reads of an application (``rm.state.Application``)."""

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
    __slots__ = ("_sorted", "apps", "epoch", "min_ask")

    def __init__(self) -> None:
        self.apps: dict[str, Application] = {}
        self._sorted: list[Application] | None = None
        #: A lower bound of every pending ask (None: recompute it from the asks).
        self.min_ask: Resources | None = None
        self.epoch = 0

    def __bool__(self) -> bool:
        return bool(self.apps)

    def sorted_apps(self) -> list[Application]:
        """Pending applications in submission order."""
        if self._sorted is None:
            self._sorted = sorted(self.apps.values(), key=_by_seq)
        return self._sorted

    def update(self, app: Application, was_pending: bool) -> None:
        """``app``'s asks changed; it had some before when ``was_pending``."""
        now_pending = app.pending > 0
        if now_pending and not was_pending:
            if not self.apps:
                self.epoch += 1
            self.apps[app.app_id] = app
            self._sorted = None
        elif was_pending and not now_pending:
            self.apps.pop(app.app_id, None)
            self._sorted = None
            if not self.apps:
                self.min_ask = None  # recomputed (tight again) when asks come back

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


def _by_seq(app: _Asking) -> int:
    return app.seq

"""Ordering policies: an order over applications, first-fit placement in that order."""

from __future__ import annotations

import heapq
from abc import abstractmethod
from collections.abc import Iterator
from typing import Any, ClassVar

from rm.policy.base import P, Placement, Policy, _placement
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
            yield _placement(app_id, priority)
            count -= 1


def first_fit_ask(app: AppView, free: Resources, kind: AskKind | None = None) -> Ask | None:
    """The most important outstanding ask of ``app`` that fits in ``free``."""
    for ask in app.sorted_asks():
        if (kind is None or ask.kind is kind) and ask.resources.fits_in(free):
            return ask
    return None


class OrderingPolicy(Policy[P]):
    """Helper for the many policies that are an order over applications.

    Implement ``sort_key``; placement is first-fit in that order. With ``resort = False``
    (FIFO, SJF) the order is computed once per heartbeat and each application is filled
    before the next; with ``resort = True`` (fair-share policies whose key depends on
    usage) the key is recomputed after every placement, one container at a time.
    """

    resort: ClassVar[bool] = False

    @abstractmethod
    def sort_key(self, app: AppView, cluster: ClusterView) -> Any:
        """Smaller keys are served first."""

    def eligible(self, app: AppView, cluster: ClusterView) -> bool:
        """Whether ``app`` may receive a container now (e.g. below a queue's maximum)."""
        return True

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        if type(self).eligible is OrderingPolicy.eligible:
            apps = list(cluster.pending_apps())  # every application is eligible
        else:
            apps = [a for a in cluster.pending_apps() if self.eligible(a, cluster)]
        if not apps:
            return
        if not self.resort:
            sort_key = self.sort_key
            apps.sort(key=lambda a: sort_key(a, cluster))
            for app in apps:
                yield from fill_node(app, node)
            return
        heap = [(self.sort_key(a, cluster), a.seq, a) for a in apps]
        heapq.heapify(heap)
        while heap:
            _, seq, app = heapq.heappop(heap)
            ask = first_fit_ask(app, node.free)
            if ask is None:
                continue  # nothing of this app fits this node any more
            yield _placement(app.app_id, ask.priority)
            if app.pending and self.eligible(app, cluster):
                heapq.heappush(heap, (self.sort_key(app, cluster), seq, app))

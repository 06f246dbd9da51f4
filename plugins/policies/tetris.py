"""tetris: multi-resource packing (Grandl et al., SIGCOMM 2014).

On a node's heartbeat, place the ask with the highest score, update, and repeat while any
ask fits the node. score = alignment - eps x remaining work of the ask's job, where
alignment = sum over resource dimensions k of (demand_k / capacity_k) x (free_k /
capacity_k) (capacity and free of the node) and eps = ``remaining_work_weight`` x mean
alignment of the asks that fit / mean remaining work of the pending jobs (Tetris' way of
making the two terms comparable; the weight 0 is pure packing). Remaining work is the AM's
hint (``Ask.remaining_work``; see ``rm.policy.remaining_work``). Ties: less remaining
work, then submission order, then priority.

Fairness knob ``f`` in [0, 1]: the N jobs with pending asks are sorted by their deficit
from the fair share (each one's fair share is 1/N of the cluster, so: lowest dominant share
of what it holds first, ties by submission order) and only the first
max(1, ceil((1 - f) x N)) are considered; the order is updated after every placement.
f = 0 considers every job (pure performance); f = 1 only the job furthest below its share.
So that no node idles while a task fits, when none of the considered jobs has an ask that
fits the node, every job is considered for that placement.

Cost per placement: O(shapes + log jobs) with the shape index of ``rm.policy.toolkit.packing`` and,
when f > 0, a second one holding only the window's asks; the indexes and the window
persist across heartbeats and move only the applications that changed (asks or
allocation) and the at most two jobs each change moves in or out of the window.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict, Field

from rm.policy import (
    AppView,
    AskIndex,
    ClusterView,
    Entry,
    FairWindow,
    NodeView,
    Placement,
    Policy,
    SortedGroups,
    best_scored,
    placement,
)
from treadle.resources import Resources


class TetrisParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Fairness knob: 0 = pure performance, 1 = only the job furthest below its share.
    f: float = Field(0.25, ge=0.0, le=1.0, allow_inf_nan=False)
    #: Weight of the remaining-work term relative to alignment (0: packing only).
    remaining_work_weight: float = Field(1.0, ge=0.0, allow_inf_nan=False)


class TetrisPolicy(Policy[TetrisParams]):
    description = "Tetris: best-aligned ask (demand . free) plus less remaining work; knob f"
    oracle = True  # the asks' remaining-work hints

    def __init__(self, params: TetrisParams | None = None) -> None:
        super().__init__(params)
        self._index = AskIndex()
        self._window: FairWindow | None = None
        #: The window's asks: per shape, the entries of the jobs in the window.
        self._considered: SortedGroups[Resources, Entry] = SortedGroups()
        self._filed: dict[str, list[tuple[Resources, Entry]]] = {}

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        index = self._index
        changed = index.sync(cluster)
        f, weight = self.params.f, self.params.remaining_work_weight
        window = self._window
        if f > 0:
            if changed is None or window is None or window.capacity != cluster.capacity:
                window = self._window = FairWindow(
                    cluster.pending_apps(), cluster.capacity, f, track_moves=True
                )
                self._considered.clear()
                self._filed.clear()
                for app_id in window.members:
                    self._refile(app_id)
            else:  # only the jobs that changed move
                running = cluster.apps
                for app in changed:
                    window.charged(app, app.pending > 0 and app.app_id in running)
                    self._refile(app.app_id)
                for app_id in window.take_moved():
                    self._refile(app_id)
        if not index.apps:
            return
        while True:
            align = index.alignments(node.free, node.capacity)
            if not align:
                return
            eps = index.tetris_weight(align, weight)
            best = None
            if window is not None and window.size < len(index.apps):
                best = best_scored(self._in_window(align), eps)
            if best is None:  # f = 0, or nothing of the considered jobs fits
                best = best_scored(((a, e) for a, _, e in index.heads(align)), eps)
            if best is None:
                return
            yield placement(best.app_id, best.priority)
            placed = index.placed(best.app_id, cluster)
            if window is not None:
                if placed is not None:
                    window.charged(placed, placed.pending > 0)
                self._refile(best.app_id)
                for app_id in window.take_moved():
                    self._refile(app_id)

    def _refile(self, app_id: str) -> None:
        """File ``app_id``'s entries among the window's asks if it is in the window."""
        considered = self._considered
        for shape, e in self._filed.pop(app_id, ()):
            considered.unfile(shape, e)
        rec = self._index.apps.get(app_id)
        window = self._window
        if rec is None or window is None or not window.contains(app_id):
            return
        for shape, e in rec.entries:
            considered.file(shape, e)
        self._filed[app_id] = rec.entries

    def _in_window(self, align: dict[Resources, float]) -> Iterator[tuple[float, Entry]]:
        """Candidates of the considered jobs: the first considered entry of each fitting
        shape (Tetris' best within a shape: its score falls with remaining work)."""
        considered = self._considered.lists
        for shape, a in align.items():
            lst = considered.get(shape)
            if lst:
                yield a, lst[0]

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        self._index.remove(app.app_id)

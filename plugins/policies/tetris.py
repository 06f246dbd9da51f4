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

Cost per placement: O(shapes) with the shape index of ``rm.policy.packing`` (plus the jobs
outside the window passed over at the head of a shape's list, and O(window) when f >= 0.75,
where the window's own asks are scored); the index and the window persist across
heartbeats and move only the applications that changed (asks or allocation).
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
    best_scored,
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

    def __init__(self, params: TetrisParams | None = None) -> None:
        super().__init__(params)
        self._index = AskIndex()
        self._window: FairWindow | None = None

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        index = self._index
        changed = index.sync(cluster)
        f, weight = self.params.f, self.params.remaining_work_weight
        window = self._window
        if f > 0:
            if changed is None or window is None or window.capacity != cluster.capacity:
                window = self._window = FairWindow(cluster.pending_apps(), cluster.capacity, f)
            else:  # only the jobs that changed move
                running = cluster.apps
                for changed_app in changed:
                    window.charged(
                        changed_app, changed_app.pending > 0 and changed_app.app_id in running
                    )
        if not index.apps:
            return
        while True:
            align = index.alignments(node.free, node.capacity)
            if not align:
                return
            eps = index.tetris_weight(align, weight)
            best = None
            if window is not None and window.size < len(index.apps):
                best = best_scored(_in_window(index, window, align), eps)
            if best is None:  # f = 0, or nothing of the considered jobs fits
                best = best_scored(((a, e) for a, _, e in index.heads(align)), eps)
            if best is None:
                return
            yield Placement(best.app_id, best.priority)
            placed = index.placed(best.app_id, cluster)
            if placed is not None and window is not None:
                window.charged(placed, placed.pending > 0)

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        self._index.remove(app.app_id)


def _in_window(
    index: AskIndex, window: FairWindow, align: dict[Resources, float]
) -> Iterator[tuple[float, Entry]]:
    """Candidates of the considered jobs: the first considered entry of each fitting shape
    (Tetris' best within a shape), or, when few jobs are considered, all their asks that
    fit (cheaper than walking past the others). Both give the same best."""
    if window.size * 4 <= len(index.apps):
        for _, app_id in window.order[: window.size]:  # best_scored breaks ties totally
            for shape, e in index.apps[app_id].entries:
                a = align.get(shape)
                if a is not None:
                    yield a, e
        return
    contains = window.contains
    for shape, a in align.items():
        for e in index.by_shape[shape]:
            if contains(e.app_id):
                yield a, e
                break

"""carbyne: altruistic multi-resource scheduling, the RM side (Grandl et al., OSDI 2016).

``shares()``: each job's DRF entitlement across jobs (progressive filling over used +
asked for, ``rm.policy.drf_entitlements``), sent to its AM in every Allocate response.
Recomputed at most every ``update_interval_s`` (the paper computes it periodically) and as
soon as a new job first asks for containers. An altruistic AM asks DEFAULT for the tasks
it must start now to finish in the time its share allows, ALTRUISTIC for the rest.

On a node's heartbeat, while anything fits the node:

1. DEFAULT asks, within the share: each job's candidate is its most important (lowest
   priority number: the AM's hint) DEFAULT ask that fits the node, if what the job holds
   plus that container stays within ``guarantee`` x its entitlement (in dominant share;
   ``guarantee`` is 1 by default, the paper's rule), or within the whole entitlement while
   the job holds less than ``guarantee`` x it; among the candidates, the best Tetris score
   (``rm.policy.toolkit.packing``: alignment - eps x remaining work).
   A job whose candidate would exceed its entitlement gets nothing more in this step.
2. Once no such ask fits, the leftover goes to every other ask: ALTRUISTIC asks, and
   DEFAULT asks beyond the share (so that no node idles while a task fits; the paper's
   work conservation). ``leftover_order=srtf_then_packing`` (the paper's default): the job
   with the least remaining work (``rm.policy.remaining_work``: resource-seconds in
   cluster-seconds, from the AM's ``Ask.remaining_usage``) that has an ask fitting, and its
   best-aligned ask (ties: lower priority number); ``packing_then_srtf``: the best-aligned
   ask, ties to the job with the least remaining work.

A job whose AM sends only DEFAULT asks (the greedy strategy) gets its DRF entitlement first
and leftovers by remaining work, so carbyne with greedy AMs behaves like DRF across jobs
(with ``guarantee`` = 1).

``guarantee`` < 1 protects only that fraction of each job's share: the DEFAULT asks beyond
it compete in the leftover, where the job with the least remaining work wins.
``guarantee_long`` (not in the paper) applies a guarantee to the long jobs only: those
whose remaining work is at least the median among the jobs with indexed asks (the others
keep ``guarantee``). Why, and what each trades: ``tests/benchmarks/bench_carbyne.py``.

Cost per placement: O(shapes) with the shape index of ``rm.policy.toolkit.packing``. Step 1 walks,
per shape, only the DEFAULT asks of jobs within their share for that shape (kept between
heartbeats, updated for the jobs that changed and rebuilt when the shares are); a job
whose more important ask was at its share earlier in the heartbeat stays out of step 1
for the rest of it (as if the walk had met it: see ``_was_at_share``), found by replaying
the heartbeat's earlier placements for that job only. With ``guarantee_long``, every
heartbeat sorts the jobs' remaining work and walks every DEFAULT ask (the guarantee of a
job moves with the median).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rm.policy import (
    AppView,
    AskIndex,
    CachedShares,
    ClusterView,
    Entry,
    NodeView,
    Placement,
    SortedGroups,
    best_scored,
    drf_entitlements,
    placement,
)
from treadle.messages import Ask, AskKind
from treadle.resources import ZERO, Resources

#: Slack of the entitlement test (float dust must not deny a container that fits exactly).
EPS = 1e-9


class CarbyneParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    leftover_order: Literal["srtf_then_packing", "packing_then_srtf"] = "srtf_then_packing"
    #: Weight of the remaining-work term when packing DEFAULT asks (0: packing only).
    remaining_work_weight: float = Field(1.0, ge=0.0, allow_inf_nan=False)
    #: Recompute DRF entitlements at most this often; 0: on every change.
    update_interval_s: float = Field(0.5, ge=0.0, allow_inf_nan=False)
    #: The fraction of its DRF share within which a job's DEFAULT asks come first (1: the
    #: paper's rule). Below 1, DEFAULT asks beyond it join the leftover, served by SRTF.
    guarantee: float = Field(1.0, ge=0.0, le=1.0)
    #: The guarantee of the long jobs, those whose remaining work is at least the median of
    #: the jobs asking for containers (None: ``guarantee`` for every job). The rest of
    #: their share joins the SRTF leftover.
    guarantee_long: float | None = Field(None, ge=0.0, le=1.0)


class CarbynePolicy(CachedShares[CarbyneParams]):
    description = "Carbyne: DRF shares to AMs; DEFAULT asks packed within them; leftover by SRTF"
    oracle = True  # the asks' remaining-usage hints
    ask_strategy = "altruistic"
    #: Shares are recomputed as soon as a new job first asks: it must be entitled to some.
    shares_on_first_ask = True

    def __init__(self, params: CarbyneParams | None = None) -> None:
        super().__init__(params)
        self._index = AskIndex()
        self._limit: dict[str, float] = {}  # entitled dominant share, per app
        self._limit_cap: Resources = ZERO  # the capacity the limits were computed against
        #: Step 1's asks: per shape, the DEFAULT entries of the jobs within their share
        #: for one more container of it, grouped by the shapes of the job's more
        #: important DEFAULT asks (an entry is its job's candidate when none of those
        #: fits); per job, where its entries are filed.
        self._within: dict[Resources, SortedGroups[tuple[Resources, ...], Entry]] = {}
        self._filed: dict[str, list[tuple[Resources, tuple[Resources, ...], Entry]]] = {}
        self._within_stale = True

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        super().on_app_removed(app, cluster)
        self._index.remove(app.app_id)
        self._refile(app.app_id)

    # Shares -----------------------------------------------------------------------
    def shares_interval_s(self) -> float:
        return self.params.update_interval_s

    def compute_shares(self, cluster: ClusterView) -> dict[str, Resources]:
        out = drf_entitlements(cluster, lambda app: app.app_id, lambda _: 1.0)
        cap = self._limit_cap = cluster.capacity
        self._limit = {app_id: r.dominant_share(cap) for app_id, r in out.items()}
        self._within_stale = True
        return out

    def _refile(self, app_id: str) -> None:
        """File ``app_id``'s DEFAULT entries under the shapes it is within its share for,
        but not one whose shape covers that of a more important DEFAULT ask of the job
        (when it fits, so does the other: it is never the job's candidate)."""
        within = self._within
        for shape, blockers, e in self._filed.pop(app_id, ()):
            within[shape].unfile(blockers, e)
        rec = self._index.apps.get(app_id)
        if rec is None:
            return
        lim = self._limit.get(app_id)
        if lim is None:
            return
        held, cap, g = rec.app.allocated, self._limit_cap, self.params.guarantee
        held_share = held.dominant_share(cap)
        filed = []
        before: list[Resources] = []  # shapes of the job's more important DEFAULT asks
        for shape, e in rec.entries:  # in priority order
            if not e.default:
                continue
            if not any(_covers(shape, other) for other in before) and _within_share(
                held, held_share, shape, cap, lim, g
            ):
                blockers = tuple(dict.fromkeys(before))
                groups = within.get(shape)
                if groups is None:
                    groups = within[shape] = SortedGroups()
                groups.file(blockers, e)
                filed.append((shape, blockers, e))
            before.append(shape)
        if filed:
            self._filed[app_id] = filed

    def _sync_within(self, changed: Sequence[AppView] | None) -> None:
        if changed is None or self._within_stale:
            self._within.clear()
            self._filed.clear()
            self._within_stale = False
            for app_id in self._index.apps:
                self._refile(app_id)
            return
        for app in changed:
            self._refile(app.app_id)

    # Placement --------------------------------------------------------------------
    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        index = self._index
        changed = index.sync(cluster)
        if self.params.guarantee_long is None:
            self._sync_within(changed)
            if index.apps:
                yield from self._place(node, cluster)
        elif index.apps:
            yield from self._place_walking(node, cluster)

    def _place_walking(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        """The heartbeat's placements, step 1 walking every DEFAULT ask (``_due``)."""
        long_from = self._long_from()
        at_share: set[str] = set()  # jobs whose DEFAULT candidate would exceed their share

        def step1(align: dict[Resources, float], eps: float) -> Entry | None:
            return best_scored(self._due(align, at_share, long_from), eps)

        return self._placements(node, cluster, step1, None)

    def _place(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        """The heartbeat's placements (no ``guarantee_long``): step 1 from the asks filed
        within their share."""
        steps: list[_Step] = []  # step 1's walks so far in this heartbeat
        at_share: set[str] = set()
        placed_at: dict[str, int] = {}  # per job placed, len(steps) after its placement

        def step1(align: dict[Resources, float], eps: float) -> Entry | None:
            cands: list[tuple[float, Entry]] = []
            heads: dict[Resources, Entry | None] = {}
            for shape, a in align.items():
                heads[shape] = head = self._first_due(shape, align, steps, at_share, placed_at)
                if head is not None:
                    cands.append((a, head))
            steps.append((align, heads))
            return best_scored(cands, eps)

        def placed(app_id: str) -> None:
            self._refile(app_id)
            placed_at[app_id] = len(steps)

        return self._placements(node, cluster, step1, placed)

    def _placements(
        self,
        node: NodeView,
        cluster: ClusterView,
        step1: Callable[[dict[Resources, float], float], Entry | None],
        placed: Callable[[str], None] | None,
    ) -> Iterator[Placement]:
        """While anything fits: step 1's pick (``step1(alignments, eps)``), else the
        leftover's; ``placed(app_id)`` after each placement."""
        index = self._index
        weight = self.params.remaining_work_weight
        due = True  # step 1 may still find something
        while True:
            align = index.alignments(node.free, node.capacity)
            if not align:
                return
            best = None
            if due:
                best = step1(align, index.tetris_weight(align, weight))
                # Free space only shrinks and holdings only grow, so step 1 is not retried
                # in this heartbeat (it could only find a job whose more important ask
                # stopped fitting: that one waits for the leftover or the next heartbeat).
                due = best is not None
            if best is None:
                best = self._leftover(align)
            if best is None:
                return
            yield placement(best.app_id, best.priority)
            index.placed(best.app_id, cluster)
            if placed is not None:
                placed(best.app_id)

    def _first_due(
        self,
        shape: Resources,
        align: dict[Resources, float],
        steps: list[_Step],
        at_share: set[str],
        placed_at: dict[str, int],
    ) -> Entry | None:
        """The first DEFAULT ask of ``shape`` that is its job's candidate (none of the
        job's more important DEFAULT asks fits), within its share, of a job not found at
        its share earlier in the heartbeat."""
        apps = self._index.apps
        best: Entry | None = None
        groups = self._within.get(shape)
        if groups is None:
            return None
        for blockers, entries in groups.lists.items():
            if any(b in align for b in blockers):
                continue
            for e in entries:
                if best is not None and e >= best:
                    break
                app_id = e.app_id
                if app_id in at_share:
                    continue
                # Met at its share before only with another candidate: a more important
                # ask that fitted on some walk since the job's last placement (the first
                # such walk had the most room).
                since = placed_at.get(app_id, 0)
                if (
                    blockers
                    and since < len(steps)
                    and any(b in steps[since][0] for b in blockers)
                    and self._was_at_share(apps[app_id], steps[since:])
                ):
                    at_share.add(app_id)
                    continue
                best = e
                break
        return best

    def _was_at_share(self, rec: Any, steps: list[_Step]) -> bool:
        """Whether the walk of ``_due`` would have met this job at its share in one of
        ``steps`` (the heartbeat's step 1 walks since its last placement, over which its
        holdings stayed): its candidate then (a more important DEFAULT ask, whose shape
        no longer fits) was beyond its share and came before that shape's first due ask."""
        lim = self._limit.get(rec.app.app_id)
        held, cap, g = rec.app.allocated, self._limit_cap, self.params.guarantee
        for align, heads in steps:
            cand = next(
                (a for a in rec.asks if a.kind is AskKind.DEFAULT and a.resources in align), None
            )
            if cand is None:
                continue
            shape = cand.resources
            if lim is not None and _within(held, shape, cap, lim, g):
                continue
            head = heads[shape]
            mine = next(e for s, e in rec.entries if e.priority == cand.priority)
            if head is None or mine < head:
                return True
        return False

    def _long_from(self) -> float:
        """The remaining work from which a job is long (infinity: no job is treated so)."""
        if self.params.guarantee_long is None:
            return math.inf
        rs = sorted(rec.remaining for rec in self._index.apps.values())
        return rs[len(rs) // 2] if rs else math.inf

    def _due(
        self, align: dict[Resources, float], at_share: set[str], long_from: float
    ) -> Iterator[tuple[float, Entry]]:
        """Step 1's candidates: per fitting shape, the first DEFAULT ask that is its job's
        candidate and within the job's guaranteed part of its entitlement."""
        index, limit, cap = self._index, self._limit, self._limit_cap
        g_short = self.params.guarantee
        g_long = self.params.guarantee_long
        for shape, a in align.items():
            for e in index.by_shape[shape]:
                app_id = e.app_id
                if not e.default or app_id in at_share:
                    continue
                rec = index.apps[app_id]
                if not _is_candidate(rec.asks, e.priority, align):
                    continue
                lim = limit.get(app_id)
                g = g_long if g_long is not None and rec.remaining >= long_from else g_short
                if lim is None or not _within(rec.app.allocated, shape, cap, lim, g):
                    at_share.add(app_id)
                    continue
                yield a, e
                break

    def _leftover(self, align: dict[Resources, float]) -> Entry | None:
        index = self._index
        heads = [(a, e) for a, _, e in index.heads(align)]
        if not heads:
            return None
        if self.params.leftover_order == "packing_then_srtf":
            return min(heads, key=lambda h: (-h[0], h[1]))[1]
        # The job with the least remaining work (heads are each shape's least), then its
        # best-aligned ask.
        job = min(e for _, e in heads)
        rec = index.apps[job.app_id]
        return min(((-align[s], e.priority), e) for s, e in rec.entries if s in align)[1]


#: One walk of step 1: the shapes that fitted, and the first due ask found per shape.
_Step = tuple[dict[Resources, float], dict[Resources, Entry | None]]


def _within_share(
    held: Resources, held_share: float, shape: Resources, cap: Resources, limit: float, g: float
) -> bool:
    """``_within(held, shape, cap, limit, g)`` without building ``held + shape`` (the same
    floats: each dimension is added, then divided, as there); ``held_share`` is
    ``held.dominant_share(cap)``."""
    after = held.dominant_share_with(shape, cap)
    if after <= g * limit + EPS:
        return True
    return after <= limit + EPS and held_share < g * limit - EPS


def _within(held: Resources, shape: Resources, cap: Resources, limit: float, g: float) -> bool:
    """Whether one more container of ``shape`` keeps the job within ``g`` x its entitled
    dominant share ``limit``; a job below that may also take one that stays within the
    whole entitlement (else a job entitled to exactly one big task would never get it)."""
    after = (held + shape).dominant_share(cap)
    if after <= g * limit + EPS:
        return True
    return after <= limit + EPS and held.dominant_share(cap) < g * limit - EPS


def _covers(big: Resources, small: Resources) -> bool:
    """Whether ``small`` <= ``big`` in every dimension (exactly: whatever ``big`` fits
    in, ``small`` fits in too)."""
    return all(v <= big[k] for k, v in small.to_dict().items())


def _is_candidate(asks: Sequence[Ask], priority: int, align: dict[Resources, float]) -> bool:
    """Whether the ask at ``priority`` is its job's most important DEFAULT ask that fits."""
    for a in asks:
        if a.priority == priority:
            return True
        if a.kind is AskKind.DEFAULT and a.resources in align:
            return False
    return True

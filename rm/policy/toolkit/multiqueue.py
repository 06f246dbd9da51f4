"""Multi-level queues of jobs (SLearn's GS and LAS, spec slearn.md A1.1): the layout of
priority positions, FIFO inside a position, weighted sharing across positions, pilot
tasks of jobs being sampled, and the books (containers held per position). Subclasses
decide where jobs go (``plugins/policies/gs.py``, ``las.py``).

Layout. Runtime ranges ``[0, q0_hi_s)``, ``[q0_hi_s, q0_hi_s x growth)``, ... (each
``growth`` times the last, the last open-ended) sit at priority positions with weights
``weight_factor^-position``; position 1 is the sampling queue (``sampling_queue``:
``position``, the spec's option C, keeps ``queues`` positions and maps ranges to 0, 2,
3, ...; ``extra`` inserts the sampling level, ``queues`` + 1 positions; ``shared``:
sampling jobs share position 1 with the second range).

Placement (each container, while one fits the node): in each position, the head is the
first job (FIFO by queue entry, or by submission with ``fifo_key: submit``) with a
schedulable task that fits (a job being sampled: only pilot tasks of its first stage,
at most its pilot count live or done); among positions with a head, ``sharing:
min_ratio`` picks the least ``used_k / w_k`` (containers held by its jobs; ties: higher
priority) and ``deficit`` the largest ``w_k / (sum of eligible w) - share_k`` (dominant
shares of the cluster). Nothing eligible: with ``work_conservation``, non-pilot tasks of
jobs still sampling, in submission order (charged to the sampling position). Never
preempts.

Kept between heartbeats: per position, its jobs with pending tasks, filed by the shapes
they may run now (a job being sampled: its pilots' and AM's) in the position's order;
and, for work conservation, the sampling jobs by submission. A job is refiled when the
RM's feed says its application changed (asks, allocation, end) and when its books or
queue change here; a placement costs O(positions x shapes + log jobs).

YARN's leaf queues play no part here (the positions are runtime ranges): a client's
move (``Policy.on_app_moved``) leaves a job where it was, and needs no hook.

Log (``Policy.log_to``): a ``job_queue_changed`` record each time a job leaves a position
for another (gs: out of the sampling position; las: a demotion); entering the first
position is not a change.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rm.policy.base import P, Placement, Policy, PolicyLog
from rm.policy.toolkit.ordering import first_fit_ask
from rm.policy.toolkit.tracking import ByShape, Changes, shapes_of
from rm.policy.views import AppView, ClusterView, NodeView
from treadle.messages import Ask, Container, ContainerState, ContainerStatus
from treadle.resources import ZERO, Resources

#: How many of the latest queue entries ``MultiQueue.queue_log`` keeps.
QUEUE_LOG_ENTRIES = 10_000

THIN, SAMPLING, PLACED, WAITING = "thin", "sampling", "placed", "waiting"


class QueueParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    queues: int = Field(10, ge=2)
    q0_hi_s: float = Field(1000.0, gt=0, allow_inf_nan=False)
    growth: float = Field(10.0, gt=1, allow_inf_nan=False)
    weight_factor: float = Field(10.0, ge=1, allow_inf_nan=False)
    sampling_queue: Literal["position", "extra", "shared"] = "position"
    sharing: Literal["min_ratio", "deficit"] = "min_ratio"
    fifo_key: Literal["entry", "submit"] = "entry"


def runtime_range(size_s: float, q0_hi_s: float, growth: float, count: int) -> int:
    """The range ``r`` with ``lo_r <= size_s < hi_r`` among ``count`` ranges (the last
    open-ended)."""
    r, hi = 0, q0_hi_s
    while size_s >= hi and r < count - 1:
        r += 1
        hi *= growth
    return r


class Layout:
    """Positions, weights and the range -> position map of ``QueueParams``."""

    def __init__(self, p: QueueParams) -> None:
        self.p = p
        mode = p.sampling_queue
        self.ranges = p.queues - 1 if mode == "position" else p.queues
        self.positions = p.queues + 1 if mode == "extra" else p.queues
        self.sampling = 1
        self.weights = [p.weight_factor**-k for k in range(self.positions)]

    def position(self, size_s: float) -> int:
        r = runtime_range(size_s, self.p.q0_hi_s, self.p.growth, self.ranges)
        return r if (r == 0 or self.p.sampling_queue == "shared") else r + 1


class QueueJob:
    __slots__ = (
        "app_id",
        "cids",
        "done_s",
        "entry",
        "phase",
        "pilot_stage",
        "pilots",
        "pilots_done",
        "pilots_live",
        "position",
        "ran_s",
        "ratio",
        "seq",
        "starts",
    )

    def __init__(self, app: AppView) -> None:
        self.app_id = app.app_id
        self.seq = app.seq
        self.phase = WAITING
        self.position = -1
        self.entry = 0
        self.pilots = 0
        self.ratio: float | None = None  # the sampling ratio of its pilots
        self.pilots_live = 0
        self.pilots_done = 0
        self.pilot_stage = 0
        self.cids: dict[str, tuple[bool, Resources, float]] = {}  # pilot, resources, start
        self.done_s = 0.0  # run time of its successful containers (its observed size)
        self.ran_s = 0.0  # run time of all its ended containers
        self.starts = 0.0  # sum of the live containers' allocation times


class MultiQueue(Policy[P]):
    """The queue machinery shared by ``gs`` and ``las``; subclasses decide where jobs go."""

    def __init__(self, params: P | None = None) -> None:
        super().__init__(params)
        self.layout = Layout(self.params)  # type: ignore[arg-type]
        n = self.layout.positions
        self.members: list[list[QueueJob]] = [[] for _ in range(n)]
        self.used = [0] * n
        self.held: list[Resources] = [ZERO] * n
        self.jobs: dict[str, QueueJob] = {}
        self._entries = 0
        self._granting: tuple[QueueJob, bool] | None = None
        #: (time, app id, position) of the latest entries into a queue, in order: the last
        #: ``QUEUE_LOG_ENTRIES`` (a long trace's would grow with it).
        self.queue_log: deque[tuple[float, str, int]] = deque(maxlen=QUEUE_LOG_ENTRIES)
        self.log: PolicyLog | None = None
        self._changes = Changes()
        #: Per position: its jobs with a task they may run, by (FIFO key, app id).
        self._heads = [ByShape() for _ in range(n)]
        self._filed: dict[str, int] = {}  # app id -> the position it is filed in
        #: Sampling jobs with pending tasks, by (seq, app id) (work conservation).
        self._spare = ByShape()
        self._dirty: set[str] = set()  # jobs to refile (books or queue changed)

    def log_to(self, log: PolicyLog) -> None:
        self.log = log

    # ------------------------------------------------------------------ queues
    def position_of(self, app_id: str) -> int | None:
        job = self.jobs.get(app_id)
        return job.position if job is not None and job.position >= 0 else None

    def _enter(self, job: QueueJob, position: int, now: float) -> None:
        old = job.position
        self._dirty.add(job.app_id)  # its phase may have changed too
        if old == position:
            return
        if old >= 0:
            self.members[old].remove(job)
            self.used[old] -= len(job.cids)
            self.held[old] = self.held[old] - _sum(job)
        job.position = position
        self._entries += 1
        job.entry = self._entries
        members = self.members[position]
        if self.params.fifo_key == "submit":  # type: ignore[attr-defined]
            i = len(members)
            while i > 0 and members[i - 1].seq > job.seq:
                i -= 1
            members.insert(i, job)
        else:
            members.append(job)
        self.used[position] += len(job.cids)
        self.held[position] = self.held[position] + _sum(job)
        self.queue_log.append((now, job.app_id, position))
        if old >= 0 and self.log is not None:
            self.log.job_queue_changed(now, job.app_id, old, position)

    def _refresh(self, cluster: ClusterView) -> None:
        """Before each heartbeat's placements (moves between queues)."""

    # ------------------------------------------------------------------ placement
    def _task(self, job: QueueJob, app: AppView, free: Resources) -> Ask | None:
        """The ask of ``job`` whose task it may run now in ``free``."""
        if job.phase != SAMPLING:
            return first_fit_ask(app, free)
        pilots_left = job.pilots_live + job.pilots_done < job.pilots
        for ask in app.sorted_asks():
            if not ask.resources.fits_in(free):
                continue
            if ask.priority < 0:  # the RM's ask for a managed AM's container
                return ask
            stage = app.stage_of(ask.priority)
            if pilots_left and (stage is None or stage == job.pilot_stage):
                return ask
        return None

    def _shapes(self, job: QueueJob, app: AppView) -> tuple[Resources, ...]:
        """The shapes of the asks ``_task`` may return for ``job`` (given the room)."""
        if job.phase != SAMPLING:
            return shapes_of(app)
        pilots_left = job.pilots_live + job.pilots_done < job.pilots
        out: dict[Resources, None] = {}
        for ask in app.sorted_asks():
            if ask.priority < 0:
                out[ask.resources] = None
            elif pilots_left:
                stage = app.stage_of(ask.priority)
                if stage is None or stage == job.pilot_stage:
                    out[ask.resources] = None
        return tuple(out)

    def _file(self, app_id: str, cluster: ClusterView) -> None:
        """File ``app_id``'s job where it now belongs (or nowhere)."""
        job = self.jobs.get(app_id)
        app = cluster.apps.get(app_id)
        old = self._filed.pop(app_id, -1)
        if job is None or app is None or app.pending <= 0 or job.position < 0:
            if old >= 0:
                self._heads[old].remove(app_id)
            self._spare.remove(app_id)
            return
        k = job.position
        if old >= 0 and old != k:
            self._heads[old].remove(app_id)
        if self.params.fifo_key == "submit":  # type: ignore[attr-defined]
            entry: tuple[int, ...] = (job.seq, job.entry)
        else:
            entry = (job.entry,)
        self._heads[k].put(app_id, (*entry, app_id), self._shapes(job, app))
        self._filed[app_id] = k
        if job.phase == SAMPLING and k == self.layout.sampling:
            self._spare.put(app_id, (job.seq, app_id), shapes_of(app))
        else:
            self._spare.remove(app_id)

    def _sync(self, cluster: ClusterView) -> None:
        changed = self._changes.take(cluster)
        dirty = self._dirty
        if changed is None:  # rebuild
            for heads in self._heads:
                heads.clear()
            self._spare.clear()
            self._filed.clear()
            dirty.clear()
            for app_id in self.jobs:
                self._file(app_id, cluster)
            return
        for app in changed:
            dirty.add(app.app_id)
        for app_id in dirty:
            self._file(app_id, cluster)
        dirty.clear()

    def _choose(self, free: Resources, cluster: ClusterView) -> tuple[QueueJob, Ask, bool] | None:
        """In each position, its first job with a task that fits; ``_pick`` one of them."""
        apps = cluster.apps
        while True:
            heads: list[tuple[int, str]] = []
            for k, index in enumerate(self._heads):
                if index:
                    e = index.first(index.fitting(free))
                    if e is not None:
                        heads.append((k, e[-1]))
            if not heads:
                break
            k = self._pick([h[0] for h in heads], cluster)
            app_id = next(h[1] for h in heads if h[0] == k)
            job = self.jobs[app_id]
            ask = self._task(job, apps[app_id], free)
            if ask is None:  # cannot happen while the index is current
                self._heads[k].remove(app_id)
                self._filed.pop(app_id, None)
                continue
            return job, ask, job.phase == SAMPLING and ask.priority >= 0
        if getattr(self.params, "work_conservation", False) and self._spare:
            spare = self._spare
            e = spare.first(spare.fitting(free))
            if e is not None:
                job = self.jobs[e[-1]]
                ask = first_fit_ask(apps[job.app_id], free)
                if ask is not None:
                    return job, ask, False
        return None

    def _pick(self, eligible: list[int], cluster: ClusterView) -> int:
        w = self.layout.weights
        if self.params.sharing == "min_ratio":  # type: ignore[attr-defined]
            return min(eligible, key=lambda k: (self.used[k] / w[k], k))
        cap = cluster.capacity
        total = sum(w[k] for k in eligible)
        return max(eligible, key=lambda k: (w[k] / total - self.held[k].dominant_share(cap), -k))

    def on_node_heartbeat(self, node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        self._refresh(cluster)
        self._sync(cluster)
        while True:
            choice = self._choose(node.free, cluster)
            if choice is None:
                return
            job, ask, pilot = choice
            self._granting = (job, pilot)
            yield Placement(job.app_id, ask.priority)
            self._granting = None
            self._dirty.add(job.app_id)
            self._sync(cluster)

    # ------------------------------------------------------------------ books
    def on_container_allocated(self, container: Container, cluster: ClusterView) -> None:
        job = self.jobs.get(container.app_id)
        if job is None:
            return
        g = self._granting
        pilot = g is not None and g[0] is job and g[1]
        job.cids[container.container_id] = (pilot, container.resources, cluster.now)
        job.starts += cluster.now
        self._dirty.add(job.app_id)
        if pilot:
            job.pilots_live += 1
        if job.position >= 0:
            self.used[job.position] += 1
            self.held[job.position] = self.held[job.position] + container.resources

    def on_container_finished(
        self, container: Container, status: ContainerStatus, cluster: ClusterView
    ) -> None:
        job = self.jobs.get(container.app_id)
        entry = job.cids.pop(container.container_id, None) if job is not None else None
        if job is None or entry is None:
            return
        pilot, res, start = entry
        job.starts -= start
        self._dirty.add(job.app_id)
        if job.position >= 0:
            self.used[job.position] -= 1
            self.held[job.position] = self.held[job.position] - res
        ok = status.state is ContainerState.COMPLETE and status.exit_status == 0
        ran = max(0.0, status.finish_s - status.start_s)
        job.ran_s += ran
        if ok:
            job.done_s += ran
        if pilot:
            job.pilots_live -= 1
            job.pilots_done += ok
        self._finished(job, container, status, pilot, cluster)

    def _finished(
        self,
        job: QueueJob,
        container: Container,
        status: ContainerStatus,
        pilot: bool,
        cluster: ClusterView,
    ) -> None:
        """A container of ``job`` ended (after the books)."""

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        job = self.jobs.pop(app.app_id, None)
        self._dirty.add(app.app_id)
        if job is not None and job.position >= 0:
            self.members[job.position].remove(job)
            self.used[job.position] -= len(job.cids)
            self.held[job.position] = self.held[job.position] - _sum(job)


def _sum(job: QueueJob) -> Resources:
    out = ZERO
    for _, r, _ in job.cids.values():
        out = out + r
    return out

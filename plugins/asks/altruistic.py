"""altruistic: Carbyne's AM side (Grandl et al., OSDI 2016, sections 3.3 and 4.2).

Given the share the RM last sent, the job's completion time T is estimated by packing its
remaining DAG forward into the share: a multi-resource list schedule where a stage's tasks
start once every parent stage has finished and they fit in the share minus what is running,
and running tasks hold their resources until their expected end. The DAG is then reversed
and the unassigned tasks are packed backwards from T; a task's latest start is T minus its
finish time in reversed time (if the backward packing needs less time than the forward
one, T is brought forward to match: T is meant to be the least time the job needs). A
runnable task whose latest start is now must start now to keep T: it is asked for as
DEFAULT. Every other runnable task is an ALTRUISTIC ask, which the RM serves from leftovers:
the job yields what it does not need yet to other jobs.

A task not yet launched counts ``overhead_s`` (default 1 s, an AM interval) more than its
duration in both packings.

With probability ``1 - altruism`` a scheduling event does not yield (every runnable task is
DEFAULT, as greedy); the draws come from an RNG seeded by ``seed`` and a CRC of the job's
name, so runs repeat exactly. Without a share, with a zero share, or with a share in which
some remaining task does not fit at all, the job asks as greedy does.

Plans are cached: a new one is made when the share changes (by more than
``replan_tolerance`` of some resource, if set) or a task finishes, fails or is re-queued (a
stage becomes runnable only then). Between plans, time passing turns tasks
whose latest start has come into DEFAULT asks, and launched tasks count against the DEFAULT
ones first (tasks of a stage are interchangeable).

Both packings are list schedules that place a stage's tasks in bulk (one resource vector
per stage: the number that fits is one division per resource) and keep completions grouped
by end time. Stages are served longest remaining path first (towards the end of the DAG
going forward, towards its start going backward); tasks within a stage longest first.
Cost of a plan (one forward and one or two backward passes): O(N log N + E x (S + R))
for N remaining tasks, E distinct task end times (E <= N; a stage of equal durations ends
in one event per wave), S stages, R resource kinds; in practice a few stages are looked at
per event, as stages whose demand no longer fits are skipped. Cost of a cached call:
O(S log N), plus O(n) to average a stage's n unassigned durations when that count changed.
Why the overhead and the re-plan tolerance, and measured plan times:
``tests/benchmarks/bench_carbyne.py``.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from am.asks import AskStrategy, JobProgress, group_of, priority_of
from treadle.dag import earliest_finish, time_to_end
from treadle.messages import Ask, AskKind
from treadle.model import JobSpec
from treadle.resources import Resources

_EPS = 1e-9
Vec = tuple[float, ...]


class AltruisticParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: P(altruism): the probability that the job yields at a scheduling event (0: greedy).
    altruism: float = Field(1.0, ge=0.0, le=1.0)
    #: Seeds the altruism draws, together with a stable hash of the job's name.
    seed: int = Field(0, ge=0)
    #: What a task holds its container for beyond its duration, in the plans (from its
    #: grant on a node's heartbeat to its launch on the AM's next call).
    overhead_s: float = Field(1.0, ge=0.0, allow_inf_nan=False)
    #: Re-plan on a share change only when some resource of the share moved by more than
    #: this fraction (0: on any change).
    replan_tolerance: float = Field(0.0, ge=0.0, lt=1.0)


@dataclass
class _Plan:
    job: JobSpec
    share: Resources
    task_events: int
    #: Per runnable stage, the sorted latest starts of its unassigned tasks; None: greedy.
    latest: dict[int, list[float]] | None
    #: Per runnable stage, its unassigned count when planned (later drops are launches).
    queued: dict[int, int]
    means: dict[int, tuple[int, float]] = field(default_factory=dict)


class AltruisticAsks(AskStrategy):
    description = "Carbyne: only tasks that must start now to keep T are DEFAULT asks"
    Params = AltruisticParams

    def __init__(self, params: BaseModel | None = None) -> None:
        super().__init__(params)
        # Without altruism the asks are greedy's, whatever the share.
        self.reads_share = self.params.altruism > 0
        self._plan: _Plan | None = None
        self._rng: random.Random | None = None
        self._rng_job: JobSpec | None = None
        #: Plans made so far (for tests and benchmarks: cached calls make none).
        self.plans = 0

    def asks(self, progress: JobProgress, now: float) -> list[Ask]:
        share = progress.share
        runnable = progress.runnable_stages()
        if not runnable:
            return []
        if self.params.altruism <= 0 or share is None or share.is_zero():
            return self._emit(progress, runnable, None, now)
        plan = self._plan
        if (
            plan is None
            or plan.job is not progress.job
            or not _share_close(plan.share, share, self.params.replan_tolerance)
            or plan.task_events != progress.task_events
            or any(s not in plan.queued for s in runnable)
        ):
            plan = self._plan = self._make_plan(progress, share, runnable, now)
        return self._emit(progress, runnable, plan, now)

    # ---------------------------------------------------------------------------------
    def _make_plan(
        self, progress: JobProgress, share: Resources, runnable: Sequence[int], now: float
    ) -> _Plan:
        self.plans += 1
        job = progress.job
        queued = {s: progress.unassigned(s) for s in runnable}
        latest = None
        if self._draw(job) < self.params.altruism:
            latest = latest_starts(progress, share, now, self.params.overhead_s)
        return _Plan(job, share, progress.task_events, latest, queued)

    def _draw(self, job: JobSpec) -> float:
        if self._rng is None or self._rng_job is not job:
            # zlib.crc32, not hash(): str hashes change with PYTHONHASHSEED.
            self._rng = random.Random(self.params.seed * 2**32 + zlib.crc32(job.name.encode()))
            self._rng_job = job
        return self._rng.random()

    def _emit(
        self, progress: JobProgress, runnable: Sequence[int], plan: _Plan | None, now: float
    ) -> list[Ask]:
        stages = progress.job.stages
        remaining = progress.remaining_work_s
        usage = progress.remaining_usage
        out: list[Ask] = []
        for s in runnable:
            n = progress.unassigned(s)
            due = n
            if plan is not None and plan.latest is not None and s in plan.latest:
                launched = plan.queued[s] - n
                due = bisect.bisect_right(plan.latest[s], now + _EPS * max(1.0, abs(now)))
                due = min(n, max(0, due - launched))
            mean = _mean(progress, s, n, plan)
            res = stages[s].resources
            g = group_of(s)
            if due:
                kind = AskKind.DEFAULT
                out.append(Ask(priority_of(s, kind), res, due, kind, mean, remaining, usage, g))
            if n - due:
                kind = AskKind.ALTRUISTIC
                out.append(Ask(priority_of(s, kind), res, n - due, kind, mean, remaining, usage, g))
        return out


def _share_close(planned: Resources, share: Resources, tolerance: float) -> bool:
    """Whether ``share`` is within ``tolerance`` (relative, per resource) of the share a
    plan was made for."""
    if planned == share:
        return True
    if tolerance <= 0:
        return False
    for k in planned.keys() | share.keys():
        a, b = planned[k], share[k]
        if abs(a - b) > tolerance * max(a, b):
            return False
    return True


def _mean(progress: JobProgress, stage: int, n: int, plan: _Plan | None) -> float:
    # Between plans, unassigned tasks only leave a stage's queue from its front, so its
    # count identifies the set and the mean can be reused.
    if plan is not None:
        cached = plan.means.get(stage)
        if cached is not None and cached[0] == n:
            return cached[1]
    durations = progress.unassigned_durations(stage)
    mean = sum(durations) / len(durations)
    if plan is not None:
        plan.means[stage] = (n, mean)
    return mean


# ------------------------------------------------------------------------- packing
def latest_starts(
    progress: JobProgress, share: Resources, now: float, overhead_s: float = 0.0
) -> dict[int, list[float]] | None:
    """Per runnable stage, the sorted latest starts of its unassigned tasks that keep the
    job's completion time T in ``share``; None if some remaining task never fits in it.
    Each unassigned task counts ``overhead_s`` more than its duration (its launch delay).

    T is the forward packing's completion time, or the backward packing's if that one is
    shorter (both are heuristics; T is meant to be the least time the job needs)."""
    job = progress.job
    n = len(job.stages)
    pend = [
        sorted((d + overhead_s for d in progress.unassigned_durations(s)), reverse=True)
        for s in range(n)
    ]
    ends = [[max(now, e) for e in progress.running_ends(s)] for s in range(n)]
    live = [s for s in range(n) if pend[s] or ends[s]]
    dims = sorted(set(share).union(*(job.stages[s].resources for s in live)))
    cap = tuple(float(share[d]) for d in dims)
    need = [tuple(float(st.resources[d]) for d in dims) for st in job.stages]
    for s in live:
        if pend[s] and _fit(cap, need[s], 1) < 1:
            return None
    # Longest remaining path, to the end of the DAG (forward) and from its start (backward),
    # a stage counting its longest remaining task.
    rem = [max(pend[s][0] if pend[s] else 0.0, max(ends[s], default=now) - now) for s in range(n)]
    forward_rank = [(-d, s) for s, d in enumerate(time_to_end(job, rem))]
    backward_rank = [(-d, s) for s, d in enumerate(earliest_finish(job, rem))]

    t_end = _forward(job, cap, need, pend, ends, forward_rank, now)
    if t_end is None:
        return None
    want = {s for s in progress.runnable_stages() if pend[s]}
    starts, span = _backward(job, cap, need, pend, ends, backward_rank, now, t_end, want)
    eps = _EPS * max(1.0, abs(t_end))
    slack = t_end - now - span
    if slack > eps:
        if not any(ends):  # nothing else depends on T: the same packing, earlier
            return {s: [t - slack for t in v] for s, v in starts.items()}
        # Running tasks hold the share near now: the earlier T stands if a packing from it
        # still ends by now.
        sooner, span2 = _backward(job, cap, need, pend, ends, backward_rank, now, now + span, want)
        if span2 <= span + eps:
            return sooner
    return starts


def _grouped(durations: list[float], i: int, k: int) -> Iterable[tuple[float, int]]:
    """(duration, count) of ``durations[i : i + k]``: one completion event per distinct
    duration, counted in C."""
    if k == 1:
        return ((durations[i], 1),)
    return Counter(durations[i : i + k]).items()


def _fit(avail: Sequence[float], need: Vec, limit: int) -> int:
    """How many tasks of demand ``need`` (at most ``limit``) fit in ``avail``."""
    k = limit
    for a, r in zip(avail, need, strict=True):
        if r > 0:
            m = int((a + _EPS) // r)
            if m < k:
                if m <= 0:
                    return 0
                k = m
    return k


class _Ends:
    """Completions grouped by time: time -> stage -> count, with a heap of the times."""

    def __init__(self) -> None:
        self.at: dict[float, dict[int, int]] = {}
        self.heap: list[float] = []

    def add(self, t: float, stage: int, count: int) -> None:
        slot = self.at.get(t)
        if slot is None:
            slot = self.at[t] = {}
            heapq.heappush(self.heap, t)
        slot[stage] = slot.get(stage, 0) + count

    def pop(self) -> tuple[float, dict[int, int]]:
        t = heapq.heappop(self.heap)
        return t, self.at.pop(t)


def _forward(
    job: JobSpec,
    cap: Vec,
    need: list[Vec],
    pend: list[list[float]],
    ends: list[list[float]],
    rank: list[tuple[float, int]],
    now: float,
) -> float | None:
    """The completion time of the list schedule of the remaining DAG into ``cap``."""
    n = len(pend)
    avail = list(cap)
    done_at = _Ends()
    left = [len(pend[s]) + len(ends[s]) for s in range(n)]
    for s in range(n):
        for e, c in Counter(ends[s]).items():
            done_at.add(e, s, c)
        for j, r in enumerate(need[s]):
            avail[j] -= r * len(ends[s])
    waiting = [sum(1 for p in job.parent_indices[s] if left[p]) for s in range(n)]
    ready = sorted((s for s in range(n) if pend[s] and not waiting[s]), key=rank.__getitem__)
    nxt = [0] * n
    t = last = now
    kinds = len({need[s] for s in ready})
    while True:
        full: set[Vec] = set()  # demands that no longer fit at t: skip their stages
        drop = False
        for s in ready:
            r_s = need[s]
            if r_s in full:
                continue
            i = nxt[s]
            size = len(pend[s])
            k = _fit(avail, r_s, size - i)
            if k:
                nxt[s] = i + k
                for j, r in enumerate(r_s):
                    avail[j] -= r * k
                for d, c in _grouped(pend[s], i, k):
                    done_at.add(t + d, s, c)
                if i + k == size:
                    drop = True
                    continue
            full.add(r_s)
            if len(full) == kinds:
                break  # nothing else fits until a task ends
        if drop:
            ready = [s for s in ready if nxt[s] < len(pend[s])]
            kinds = len({need[s] for s in ready})
        if not done_at.heap:
            break
        t, finished = done_at.pop()
        last = t
        grew = False
        for s, c in finished.items():
            for j, r in enumerate(need[s]):
                avail[j] += r * c
            left[s] -= c
            if not left[s]:
                for child in job.children[s]:
                    waiting[child] -= 1
                    if not waiting[child] and pend[child]:
                        ready.append(child)
                        grew = True
        if grew:
            ready.sort(key=rank.__getitem__)
            kinds = len({need[s] for s in ready})
    return None if ready else last


def _backward(
    job: JobSpec,
    cap: Vec,
    need: list[Vec],
    pend: list[list[float]],
    ends: list[list[float]],
    rank: list[tuple[float, int]],
    now: float,
    t_end: float,
    want: set[int],
) -> tuple[dict[int, list[float]], float]:
    """Pack the unassigned tasks of the reversed DAG from ``t_end`` back towards ``now``;
    return the latest starts of the tasks of the stages in ``want`` and the span of the
    packing in reversed time (more than ``t_end - now`` if some task is late, infinite if
    some task was left over).

    Reversed time x maps to real time ``t_end - x``. A running task ending at e holds its
    resources over reversed [t_end - e, horizon), horizon = t_end - now. A task placed at x
    for d seconds must fit beside the packed tasks running at x (their use only shrinks
    after x) and the running tasks' hold at x + d (which only grows with x): a safe check,
    one lookup per placement. A task not packed by the horizon is late: due now."""
    n = len(pend)
    horizon = t_end - now
    eps = _EPS * max(1.0, abs(t_end))
    # Running tasks by remaining time, longest first, with prefix sums of their demand.
    held = sorted(((e - now, s) for s in range(n) for e in ends[s] if e > now), reverse=True)
    neg_rem = [-r for r, _ in held]
    prefix: list[Vec] = [tuple(0.0 for _ in cap)]
    for _, s in held:
        prefix.append(tuple(a + b for a, b in zip(prefix[-1], need[s], strict=True)))

    used = [0.0] * len(cap)
    done_at = _Ends()
    left = [len(p) for p in pend]
    waiting = [sum(1 for c in job.children[s] if pend[c]) for s in range(n)]
    ready = sorted((s for s in range(n) if pend[s] and not waiting[s]), key=rank.__getitem__)
    nxt = [0] * n
    starts: dict[int, list[float]] = {s: [] for s in want}
    x = 0.0
    span = held[0][0] if held else 0.0  # the job ends after its running tasks, too
    kinds = len({need[s] for s in ready})
    while x < horizon - eps:
        # Demand -> the least hold under which it no longer fits at x: skip its stages there.
        full: dict[Vec, int] = {}
        blocked = 0  # demands that fit under no hold at all
        drop = False
        for s in ready:
            i = nxt[s]
            r_s = need[s]
            # Running tasks with more than horizon - (x + d) left hold before x + d.
            hi = bisect.bisect_left(neg_rem, x + pend[s][i] - horizon) if held else 0
            least = full.get(r_s, hi + 1)
            if least <= hi:
                continue
            size = len(pend[s])
            avail = [c - u - r for c, u, r in zip(cap, used, prefix[hi], strict=True)]
            k = _fit(avail, r_s, size - i)
            if k:
                nxt[s] = i + k
                for j, r in enumerate(r_s):
                    used[j] += r * k
                for d, c in _grouped(pend[s], i, k):
                    done_at.add(x + d, s, c)
                    if s in starts:
                        starts[s].extend([t_end - x - d] * c)
                span = max(span, x + pend[s][i])
                if i + k == size:
                    drop = True
                    continue
            full[r_s] = hi
            if hi == 0:
                blocked += 1
                if blocked == kinds:
                    break  # nothing else fits until a task ends
        if drop:
            ready = [s for s in ready if nxt[s] < len(pend[s])]
            kinds = len({need[s] for s in ready})
        if not done_at.heap:
            break
        x, finished = done_at.pop()
        grew = False
        for s, c in finished.items():
            for j, r in enumerate(need[s]):
                used[j] -= r * c
            left[s] -= c
            if not left[s]:
                for p in job.parent_indices[s]:
                    if pend[p]:
                        waiting[p] -= 1
                        if not waiting[p]:
                            ready.append(p)
                            grew = True
        if grew:
            ready.sort(key=rank.__getitem__)
            kinds = len({need[s] for s in ready})
    if any(nxt[s] < len(pend[s]) for s in range(n)):
        span = math.inf  # tasks left over: the packing does not end by now
    for s, out in starts.items():
        out.extend([now] * (len(pend[s]) - nxt[s]))
        out.sort()
    return starts, span

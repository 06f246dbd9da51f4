"""The estimator API: how policies that need job sizes (GS, SJF-like orders) learn them.

An estimator sizes jobs in **task-seconds** (the sum of their tasks' durations). It sees
applications through the views policies see, and learns only from what a real scheduler
could observe: finished containers (their start and finish as NMs report them), finished
jobs, and a history of past jobs. Only an estimator that declares ``oracle = True`` may
read true durations (the submitted job's task durations, the asks' duration hints); the
RM zeroes them for every policy that does not declare itself an oracle
(``Policy.uses_oracle``), so a non-oracle estimator cannot read them even by mistake.

The life of one job, as a policy drives it:

1. ``on_app_added`` returns a :class:`Plan`: run ``pilots`` containers of the job's first
   stage before an estimate exists (task sampling), or none; or ``thin`` (never
   estimated: the top queue).
2. The policy grants pilots, reports every container that ends with ``observe`` (saying
   whether it was a pilot) and asks ``size_s`` until it is not None (``ready``).
3. When the job ends, ``on_app_finished`` gives its completion time and its observed size
   (the successful containers' run times), which adaptive estimators score.

``load_history`` feeds past jobs (:class:`HistoryJob`, e.g. from ``read_history``) to
estimators that learn from them. Plugins in ``treadle.estimators`` subclass
:class:`Estimator`.
"""

from __future__ import annotations

import bisect
import csv
import json
import math
from abc import ABC, abstractmethod
from array import array
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from rm.policy import AppView, ClusterView, NoParams
from treadle.errors import InputError
from treadle.messages import Container, ContainerStatus
from treadle.model import JobSpec

#: The entry-point group of estimator plugins (the registry's ``estimators`` kind).
ENTRY_POINT_GROUP = "treadle.estimators"


@dataclass(frozen=True, slots=True)
class Plan:
    """What an estimator wants for a newly added job.

    ``pilots``: containers of the job's first stage to run before its estimate exists (0:
    the estimate needs none). ``thin``: the job is never estimated and goes to the top
    queue (SLearn's thin jobs). ``ratio``: the sampling ratio that gave ``pilots``.
    """

    pilots: int = 0
    thin: bool = False
    ratio: float | None = None


@dataclass(frozen=True, slots=True)
class HistoryStage:
    """One stage of a past job: its name, task count and mean task runtime (seconds)."""

    name: str
    tasks: int
    mean_task_s: float


@dataclass(frozen=True, slots=True)
class HistoryJob:
    """A past job as history-based estimators learn from it: its features and its mean
    task runtime (seconds); ``stages``, when known, each stage's (the DAG variants')."""

    name: str
    user: str
    submit_s: float
    tasks: int
    mean_task_s: float
    vcores: float = 0.0
    memory_mb: float = 0.0
    stages: tuple[HistoryStage, ...] = ()


#: The history CSV's columns; ``vcores``, ``memory_mb`` and ``stages`` are optional.
#: ``stages`` is a JSON list of ``[stage name, tasks, mean_task_s]`` (empty: unknown).
HISTORY_COLUMNS = (
    "name",
    "user",
    "submit_s",
    "tasks",
    "mean_task_s",
    "vcores",
    "memory_mb",
    "stages",
)


def history_of(jobs: Iterable[JobSpec]) -> list[HistoryJob]:
    """Past jobs as history: each job's mean task runtime over all its tasks and each
    stage's; its first stage's resources."""
    out = []
    for j in jobs:
        tasks = j.tasks
        if tasks <= 0:
            continue
        r = j.stages[0].resources
        stages = tuple(
            HistoryStage(s.name, s.tasks, s.work_s / s.tasks) for s in j.stages if s.tasks > 0
        )
        out.append(
            HistoryJob(
                j.name,
                j.user,
                j.submit_s,
                tasks,
                j.work_s / tasks,
                r.get("vcores", 0.0),
                r.get("memory_mb", 0.0),
                stages,
            )
        )
    return out


def read_history(path: str) -> list[HistoryJob]:
    """A history CSV with the header ``HISTORY_COLUMNS`` (vcores, memory_mb and stages
    optional). A malformed row is an ``InputError`` naming the file, line and column."""
    try:
        with open(path, newline="") as f:
            return list(_rows(path, csv.DictReader(f)))
    except OSError as e:
        raise InputError(path, "", f"cannot read history: {e.strerror or e}") from None


def _rows(path: str, reader: csv.DictReader[str]) -> Iterator[HistoryJob]:
    missing = [c for c in HISTORY_COLUMNS[:5] if c not in (reader.fieldnames or ())]
    if missing:
        raise InputError(path, "header", f"missing column(s) {', '.join(missing)}")
    for row in reader:
        line = reader.line_num
        yield HistoryJob(
            row["name"] or "",
            row["user"] or "",
            _num(path, line, row, "submit_s", low=-math.inf),  # history may precede the run
            _num(path, line, row, "tasks", integer=True),
            _num(path, line, row, "mean_task_s"),
            _num(path, line, row, "vcores", default=0.0),
            _num(path, line, row, "memory_mb", default=0.0),
            _stages(path, line, (row.get("stages") or "").strip()),
        )


def _stages(path: str, line: int, raw: str) -> tuple[HistoryStage, ...]:
    if not raw:
        return ()
    where = f"line {line}, stages"
    try:
        items = json.loads(raw)
    except ValueError:
        items = None
    shape = "a JSON list of [stage name, tasks, mean_task_s]"
    if not isinstance(items, list):
        raise InputError(path, where, f"not {shape}: {raw[:60]!r}")
    out = []
    for item in items:
        ok = isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
        if ok:
            _, tasks, mean = item
            ok = isinstance(tasks, int) and not isinstance(tasks, bool) and tasks >= 0
            ok = ok and isinstance(mean, int | float) and not isinstance(mean, bool)
            ok = ok and math.isfinite(mean) and mean >= 0
        if not ok:
            raise InputError(path, where, f"not {shape}: {json.dumps(item)[:60]}")
        out.append(HistoryStage(item[0], item[1], float(item[2])))
    return tuple(out)


def _num(
    path: str,
    line: int,
    row: dict[str, str],
    col: str,
    *,
    integer: bool = False,
    default: float | None = None,
    low: float = 0.0,
) -> Any:
    raw = (row.get(col) or "").strip()
    if not raw and default is not None:
        return default
    try:
        x = int(raw) if integer else float(raw)
    except ValueError:
        raise InputError(path, f"line {line}, {col}", f"not a number: {raw!r}") from None
    if not math.isfinite(x) or x < low:
        raise InputError(path, f"line {line}, {col}", f"must be finite and >= {low:g}: {raw}")
    return x


class Estimator(ABC):
    """Base class of estimators. Subclasses set ``description`` and implement
    ``size_s``; every other hook is optional."""

    description: ClassVar[str] = ""
    Params: ClassVar[type[BaseModel]] = NoParams
    #: Reads true durations (``AppView.job``'s durations, the asks' hints). Only an
    #: oracle may; a policy using a non-oracle estimator is handed them zeroed.
    oracle: ClassVar[bool] = False
    #: Asks for pilot tasks: the AMs then run each stage's tasks in a seeded random
    #: order, so pilots are a uniform sample.
    samples: ClassVar[bool] = False

    name: str

    def __init__(self, params: BaseModel | None = None) -> None:
        self.params: Any = params if params is not None else self.Params()
        if "name" not in self.__dict__:
            self.name = type(self).__name__

    def on_app_added(self, app: AppView, cluster: ClusterView) -> Plan:
        """A job arrived: what it needs before an estimate (default: nothing)."""
        return Plan()

    @abstractmethod
    def size_s(self, app: AppView, cluster: ClusterView) -> float | None:
        """The job's estimated total task-seconds; None while not ready."""

    def ready(self, app: AppView, cluster: ClusterView) -> bool:
        """Whether ``size_s`` has an estimate for ``app``."""
        return self.size_s(app, cluster) is not None

    def remaining_s(self, app: AppView, cluster: ClusterView) -> float:
        """Estimated remaining work of ``app`` in task-seconds (default: its size, 0 if
        not ready)."""
        return self.size_s(app, cluster) or 0.0

    def observe(  # noqa: B027
        self, app: AppView, container: Container, status: ContainerStatus, *, pilot: bool = False
    ) -> None:
        """A container of ``app`` ended (``pilot``: one the policy ran as a pilot task)."""

    def on_app_finished(  # noqa: B027
        self, app: AppView, jct_s: float, size_s: float
    ) -> None:
        """``app`` ended after ``jct_s`` seconds; ``size_s``: the task-seconds its
        successful containers ran (what was observed)."""

    def on_app_removed(self, app: AppView) -> None:  # noqa: B027
        """``app`` is gone (finished or not): forget its per-job state."""

    def load_history(self, jobs: Iterable[HistoryJob]) -> None:  # noqa: B027
        """Learn from past jobs (default: ignore them)."""


# ---------------------------------------------------------------- history estimators
"""The history estimators' common part (3Sigma's method, spec A1.4 items 4-7).

A job's features: its recurring name (``recurring_name``: up to the first ``:``), user,
submission day and hour (``day = floor(submit_s / 86400) mod 7``, ``hour = floor(submit_s
/ 3600) mod 24``), cpu and memory request (first stage). Treadle's jobs carry no
application name, so five of 3Sigma's six features exist. The *similar jobs* of a job for
feature ``f``: history jobs with the same value of ``f`` submitted within ``window_days``
before it (all of them without a window). Learned quantity: each job's mean task runtime;
``size = point(similar) x tasks``, where the subclass gives ``point`` (3sigma: utility
certainty-equivalent; point: median).

Feature choice: each feature keeps the mean absolute percentage error of the predictions
it would have made for jobs whose runtime became known (history jobs in submission order,
each predicted from the ones before it; with ``online``, finished jobs too); a job is
predicted by the feature with the lowest error among those with similar jobs (ties: the
order above; a feature never scored counts as the worst). No similar job for any feature:
the whole window; an empty history: size 0 (the top queue).

``dag`` (3Sigma-DAG, §6): the same method once per stage name, learning that stage's mean
task runtime from the history jobs that have a stage of that name (the history's
``stages``; a job's features are its own, so similar jobs are those of the same recurring
name, user, ... having that stage); ``size = sum over the job's stages of point(similar
stages) x the stage's tasks``. A stage whose name has no history in the window is sized
by the job-level prediction (the mean task runtime over all tasks of similar jobs) x its
tasks: the best history there is for it, and on a history without stages (older files)
the sum is then exactly the job-level estimate, so ``dag`` changes nothing there. Not
with ``online``: a finished job's per-stage run times are not observed.

The history's bound (``max_history``, default ``MAX_HISTORY``): each series (one feature
value's, the whole history's, and each stage name's with ``dag``) keeps its latest
``max_history`` jobs by submission time; older ones count no more (``HistorySeries``), so
an estimator's memory is at most some 16 bytes x 6 series x ``max_history`` x 5/4 per
distinct feature value, however long the run (each job's values are in six series).

``history``: a CSV of past jobs (``rm.policy.estimator.read_history``). ``thin_top``: jobs of
fewer than ``thin_limit`` tasks go to the top queue unestimated (3SigmaTL).
"""

FEATURES = ("name", "user", "when", "cpu", "memory")
#: A job's values of ``FEATURES``.
Features = tuple[Hashable, ...]


#: How many values a ``HistorySeries`` keeps by default (``max_history``).
MAX_HISTORY = 100_000


class HistoryParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    history: str | None = None
    window_days: float | None = Field(None, gt=0)
    online: bool = False
    thin_top: bool = False
    thin_limit: int = Field(3, ge=1)
    dag: bool = False
    max_history: int = Field(MAX_HISTORY, ge=1)

    @field_validator("dag")
    @classmethod
    def _dag_offline(cls, dag: bool, info: ValidationInfo) -> bool:
        if dag and info.data.get("online"):
            raise ValueError("not with online=true (per-stage run times are not observed)")
        return dag


def recurring_name(name: str) -> str:
    """The part of a job's name that recurs across runs of the same job: the name up to
    its first ``:``. Job names are unique in a workload, so importers that know a
    recurring key write ``KEY:ID`` (swim: ``INPUT_PATH:jobN``; wta and uwfq:
    ``USER:...``); a name without ``:`` is its own."""
    return name.partition(":")[0]


def features(name: str, user: str, submit_s: float, vcores: float, memory_mb: float) -> Features:
    when = (int(submit_s // 86400) % 7, int(submit_s // 3600) % 24)
    return (recurring_name(name), user, when, vcores, memory_mb)


def app_features(app: AppView) -> Features:
    """``features`` of a running job (its first stage's resources)."""
    job = app.job
    r: Any = job.stages[0].resources if job is not None else {}
    return features(app.name, app.user, app.submit_s, r.get("vcores", 0.0), r.get("memory_mb", 0.0))


class HistorySeries:
    """One learned quantity's values by submission time, and the point value of those
    submitted in ``[t0, t1]`` (``t0`` None: from the first). Values arrive mostly in
    time order; ties keep their arrival order. This base recomputes ``point`` over the
    range's values (in time order) on every query; subclasses keep a structure that
    answers exactly the same faster (``inserted``, ``dropped`` and ``point_of``).

    The bound: a series is its latest ``cap`` values (by submission time, ties by
    arrival; ``max_history``, default ``MAX_HISTORY``); an older one counts no more, as
    if never added. Times and values are arrays of doubles (8 bytes each); the values
    that no longer count are dropped once they are a fifth of the series (so a series
    holds at most ``cap * 5 / 4``, and dropping costs O(1) per value added)."""

    __slots__ = ("cap", "point_fn", "times", "values")

    def __init__(self, point: Callable[[Sequence[float]], float] | None = None) -> None:
        self.point_fn = point
        self.times = array("d")
        self.values = array("d")
        self.cap = MAX_HISTORY

    def add(self, t: float, v: float) -> None:
        times = self.times
        i = bisect.bisect_right(times, t)
        times.insert(i, t)
        self.values.insert(i, v)
        self.inserted(i, v)
        extra = len(times) - self.cap
        if 4 * extra > self.cap:
            del times[:extra]
            del self.values[:extra]
            self.dropped(extra)

    def point(self, t0: float | None, t1: float) -> float | None:
        """The point value of the values submitted in ``[t0, t1]`` (of the latest
        ``cap``); None: there are none."""
        times = self.times
        lo = 0 if t0 is None else bisect.bisect_left(times, t0)
        lo = max(lo, len(times) - self.cap)
        hi = bisect.bisect_right(times, t1)
        return self.point_of(lo, hi) if lo < hi else None

    def inserted(self, i: int, v: float) -> None:
        """``v`` was inserted at index ``i`` of ``values``."""

    def dropped(self, k: int) -> None:
        """The first ``k`` values were dropped (indices shift down by ``k``)."""

    def point_of(self, lo: int, hi: int) -> float:
        """The point value of ``values[lo:hi]`` (never empty)."""
        assert self.point_fn is not None, "a HistorySeries without a point function"
        return self.point_fn(self.values[lo:hi])


class _Learner:
    """The history of one learned quantity (a job's or one stage's mean task runtime):
    values by feature value and in all, and each feature's past error."""

    __slots__ = ("by_feature", "error_n", "error_sum", "everything", "new_series", "window_s")

    def __init__(
        self,
        new_series: Callable[[], HistorySeries],
        window_s: float | None,
        cap: int = MAX_HISTORY,
    ) -> None:
        def capped() -> HistorySeries:
            series = new_series()
            series.cap = cap
            return series

        self.new_series = capped
        self.window_s = window_s
        self.by_feature: list[dict[Hashable, HistorySeries]] = [{} for _ in FEATURES]
        self.everything = capped()
        self.error_sum = [0.0] * len(FEATURES)
        self.error_n = [0] * len(FEATURES)

    def _since(self, now: float) -> float | None:
        return now - self.window_s if self.window_s is not None else None

    def predictions(self, f: Features, now: float) -> list[float | None]:
        t0 = self._since(now)
        out: list[float | None] = []
        for i, value in enumerate(f):
            series = self.by_feature[i].get(value)
            out.append(series.point(t0, now) if series is not None else None)
        return out

    def learn(self, f: Features, t: float, predicted: list[float | None], actual: float) -> None:
        if actual > 0:
            for i, p in enumerate(predicted):
                if p is not None:
                    self.error_sum[i] += abs(p - actual) / actual
                    self.error_n[i] += 1
        for i, value in enumerate(f):
            series = self.by_feature[i].get(value)
            if series is None:
                series = self.by_feature[i][value] = self.new_series()
            series.add(t, actual)
        self.everything.add(t, actual)

    def mean_task_s(self, predicted: list[float | None], now: float) -> float | None:
        """The prediction of the feature with the lowest past error; None: no history
        in the window at all."""
        best: tuple[float, int] | None = None
        for i, p in enumerate(predicted):
            if p is None:
                continue
            err = self.error_sum[i] / self.error_n[i] if self.error_n[i] else float("inf")
            if best is None or (err, i) < best:
                best = (err, i)
        if best is not None:
            return predicted[best[1]] or 0.0
        return self.everything.point(self._since(now), now)


class HistoryEstimator(Estimator):
    """3Sigma-style history estimators (see the notes above); subclasses implement
    ``point`` and may give ``new_series`` a faster series computing the same."""

    Params = HistoryParams

    def __init__(self, params: HistoryParams | None = None) -> None:
        super().__init__(params)
        p: HistoryParams = self.params
        self.window_s = p.window_days * 86400 if p.window_days is not None else None
        self.learner = _Learner(self.new_series, self.window_s, p.max_history)
        #: With ``dag``: one learner per stage name.
        self.stage_learners: dict[str, _Learner] = {}
        #: Per running job: its estimate, its features and what each feature predicted.
        self.jobs: dict[str, tuple[float, Features, list[float | None], int]] = {}
        if p.history is not None:
            self.load_history(read_history(p.history))

    def point(self, values: Sequence[float]) -> float:
        raise NotImplementedError

    def new_series(self) -> HistorySeries:
        """An empty series of learned values whose ``point`` is this estimator's
        (default: recomputed over the range on every query)."""
        return HistorySeries(self.point)

    # ------------------------------------------------------------------ learning
    def load_history(self, jobs: Iterable[HistoryJob]) -> None:
        dag = self.params.dag
        for j in sorted(jobs, key=lambda j: j.submit_s):
            f = features(j.name, j.user, j.submit_s, j.vcores, j.memory_mb)
            self._learn(f, j.submit_s, self._predictions(f, j.submit_s), j.mean_task_s)
            for s in j.stages if dag else ():
                learner = self.stage_learners.get(s.name)
                if learner is None:
                    learner = self.stage_learners[s.name] = _Learner(
                        self.new_series, self.window_s, self.params.max_history
                    )
                learner.learn(f, j.submit_s, learner.predictions(f, j.submit_s), s.mean_task_s)

    def _predictions(self, f: Features, now: float) -> list[float | None]:
        return self.learner.predictions(f, now)

    def _learn(self, f: Features, t: float, predicted: list[float | None], actual: float) -> None:
        self.learner.learn(f, t, predicted, actual)

    def mean_task_s(self, predicted: list[float | None], now: float) -> float:
        """The prediction of the feature with the lowest past error (0: no history)."""
        return self.learner.mean_task_s(predicted, now) or 0.0

    def stage_means(self, app: AppView) -> list[float | None]:
        """Per stage of ``app``'s job, the predicted mean task runtime of that stage name
        (None: no history of it in the window); needs ``dag``."""
        job = app.job
        if job is None:
            return []
        f, now = app_features(app), app.submit_s
        out: list[float | None] = []
        for stage in job.stages:
            learner = self.stage_learners.get(stage.name)
            out.append(
                None if learner is None else learner.mean_task_s(learner.predictions(f, now), now)
            )
        return out

    # ------------------------------------------------------------------ the API
    def on_app_added(self, app: AppView, cluster: ClusterView) -> Plan:
        p: HistoryParams = self.params
        job = app.job
        tasks = job.tasks if job is not None else app.pending
        width = job.stages[0].tasks if job is not None else tasks
        if p.thin_top and width < p.thin_limit:
            return Plan(thin=True)
        f = app_features(app)
        predicted = self._predictions(f, app.submit_s)
        mean = self.mean_task_s(predicted, app.submit_s)
        if p.dag and job is not None:
            stages = zip(self.stage_means(app), job.stages, strict=True)
            size = sum((mean if m is None else m) * s.tasks for m, s in stages)
        else:
            size = mean * tasks
        self.jobs[app.app_id] = (size, f, predicted, tasks)
        return Plan()

    def size_s(self, app: AppView, cluster: ClusterView) -> float | None:
        entry = self.jobs.get(app.app_id)
        return entry[0] if entry is not None else None

    def on_app_finished(self, app: AppView, jct_s: float, size_s: float) -> None:
        entry = self.jobs.get(app.app_id)
        if entry is None or not self.params.online or entry[3] <= 0:
            return
        _, f, predicted, tasks = entry
        self._learn(f, app.submit_s, predicted, size_s / tasks)

    def on_app_removed(self, app: AppView) -> None:
        self.jobs.pop(app.app_id, None)

"""slearn: SLearn's task sampling (Jajoo et al., NSDI'22, section 5.1.2; spec A1.2-A1.3).

A job of width ``S`` (tasks of its first stage) below ``thin_limit`` is thin: never
sampled, it goes to the top queue. A wide job runs ``m = max(1, rounding(ratio x S))``
pilot tasks of its first stage (the AM runs tasks in a seeded random order, so they are a
uniform sample); once all ``m`` pilots have succeeded its size is their mean run time x
its total task count, never updated afterwards. A failed pilot is run again (the policy
grants another). With ``include_early``, other tasks of the job that succeeded before the
last pilot count in the mean too.

The ratio is fixed, or ``adaptive`` (Figure 4): the first ``window`` wide jobs (by
arrival) use 3%, the next ``window`` 2%, the next 4%; after that the ratio whose last
``window`` finished wide jobs have the lowest mean normalized JCT (JCT / observed size;
ties: the lower ratio), moved to 1% when it is 2% and 3%'s score exceeds 1.1 x its own,
to 5% when it is 4% and 3%'s score exceeds 1.1 x its own (a missing 3% score: no move;
no score at all: 3%). ``window_mode``: ``exact`` keeps the last ``window`` scores per
ratio, ``literal`` the pseudo-code's check-before-append (up to ``window`` + 1).

``dag`` (SLearn-DAG, section 6; spec A1.4 item 7): the pilots sample the first stage as
above, giving its mean task runtime ``t_s`` (``d_s = t_s x S``); 3Sigma's per-stage
history (``3sigma`` with ``dag``, over ``history`` and ``window_days``) predicts each
stage's mean task runtime ``t_h,k`` at arrival; ``ratio = t_s / t_h,0`` (``= d_s /
d_h``); the size is ``d_s + sum over the other stages of t_h,k x ratio x tasks_k``.
Fallbacks: a later stage with no history of its name is sized by plain slearn's rule
(``t_s x tasks_k``), so on an empty history or one without stages ``dag`` gives plain
slearn's sizes; a first stage with no history leaves the later stages' history
estimates unscaled (ratio 1: nothing to calibrate them with, and the history of a later
stage still says more about it than the first stage's pilots do). ``thin``: ``top``
(thin jobs unestimated in the top queue, as above) or ``history`` (with ``dag``: a thin
job is sized at arrival by 3Sigma-DAG, the paper's section 7 "history for thin jobs").
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from rm.policy import AppView, ClusterView
from rm.policy.estimator import Estimator, HistoryEstimator, Plan
from treadle import registry
from treadle.messages import Container, ContainerState, ContainerStatus

ADAPTIVE_RATIOS = (1, 2, 3, 4, 5)  # per cent


class SlearnParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ratio: Literal["adaptive"] | float = Field("adaptive", description="fraction or adaptive")
    thin_limit: int = Field(3, ge=1)
    rounding: Literal["floor", "ceil", "round"] = "floor"
    window: int = Field(100, ge=1)
    window_mode: Literal["exact", "literal"] = "exact"
    include_early: bool = False
    dag: bool = False
    history: str | None = None
    window_days: float | None = Field(None, gt=0)
    thin: Literal["top", "history"] = "top"

    @field_validator("history", "window_days", "thin")
    @classmethod
    def _dag_only(cls, v: Any, info: ValidationInfo) -> Any:
        if v not in (None, "top") and not info.data.get("dag"):
            raise ValueError("only used with dag=true")
        return v

    @field_validator("ratio")
    @classmethod
    def _fraction(cls, r: str | float) -> str | float:
        if r != "adaptive" and not 0 < float(r) <= 1:
            raise ValueError(f"must be 'adaptive' or a fraction in (0, 1], got {r!r}")
        return r


def pilot_count(width: int, ratio: float, rounding: str = "floor") -> int:
    """``max(1, rounding(ratio x width))`` (spec A1.2 rule 3)."""
    x = ratio * width
    # A small tolerance so 0.03 x 100 is 3, not 2.9999999999999996.
    n = {"floor": math.floor(x + 1e-9), "ceil": math.ceil(x - 1e-9), "round": round(x)}[rounding]
    return max(1, int(n))


class AdaptiveRatio:
    """Figure 4's sampling-percentage choice and its score maps."""

    def __init__(self, window: int, mode: str = "exact") -> None:
        self.window = window
        self.literal = mode == "literal"
        self.arrivals = 0
        self.scores: dict[int, deque[float]] = {r: deque() for r in ADAPTIVE_RATIOS}

    def next_percent(self) -> int:
        """The percentage for the next wide job (counts it as arrived)."""
        n, t = self.arrivals, self.window
        self.arrivals += 1
        if n < 3 * t:
            return (3, 2, 4)[n // t]
        means = {r: sum(v) / len(v) for r, v in self.scores.items() if v}
        if not means:
            return 3
        best = min(means, key=lambda r: (means[r], r))
        low, three = means[best], means.get(3)
        if best == 2 and three is not None and 1.1 * low < three:
            return 1
        if best == 4 and three is not None and three > 1.1 * low:
            return 5
        return best

    def score(self, percent: int, normalized_jct: float) -> None:
        q = self.scores.setdefault(percent, deque())
        if len(q) > self.window if self.literal else len(q) >= self.window:
            q.popleft()
        q.append(normalized_jct)


def dag_size(mean_s: float, stage_tasks: list[int], history_means: list[float | None]) -> float:
    """SLearn-DAG's size (see the module's docstring): ``mean_s``, the pilots' mean task
    runtime of the first stage; per stage its tasks and its history prediction (None: no
    history)."""
    h0 = history_means[0]
    ratio = mean_s / h0 if h0 is not None and h0 > 0 else 1.0
    size = mean_s * stage_tasks[0]
    for tasks, h in zip(stage_tasks[1:], history_means[1:], strict=True):
        size += mean_s * tasks if h is None else h * ratio * tasks
    return size


class _Sampled:
    __slots__ = (
        "durations",
        "history_means",
        "percent",
        "pilots",
        "pilots_done",
        "size",
        "stage_tasks",
        "tasks",
    )

    def __init__(self, tasks: int, pilots: int, percent: int | None) -> None:
        self.tasks = tasks
        self.pilots = pilots
        self.percent = percent
        self.pilots_done = 0
        self.durations: list[float] = []
        self.size: float | None = None
        #: With ``dag``: each stage's tasks and history prediction.
        self.stage_tasks: list[int] = []
        self.history_means: list[float | None] = []


class SlearnEstimator(Estimator):
    description = "SLearn: sample a few tasks of each wide job, size = their mean x width"
    Params = SlearnParams
    samples = True

    def __init__(self, params: SlearnParams | None = None) -> None:
        super().__init__(params)
        p: SlearnParams = self.params
        self.adaptive = AdaptiveRatio(p.window, p.window_mode) if p.ratio == "adaptive" else None
        self.jobs: dict[str, _Sampled] = {}
        #: With ``dag``: 3Sigma over the per-stage history.
        self.history: HistoryEstimator | None = None
        if p.dag:
            hist = {"history": p.history, "window_days": p.window_days, "dag": True}
            est = registry.build("estimators", "3sigma", hist)
            assert isinstance(est, HistoryEstimator)
            self.history = est

    def on_app_added(self, app: AppView, cluster: ClusterView) -> Plan:
        p: SlearnParams = self.params
        job = app.job
        width = job.stages[0].tasks if job is not None else app.pending
        if width < p.thin_limit:
            if p.thin == "history" and self.history is not None and job is not None:
                self.history.on_app_added(app, cluster)
                s = self.jobs[app.app_id] = _Sampled(job.tasks, 0, None)
                s.size = self.history.size_s(app, cluster)
                self.history.on_app_removed(app)
                return Plan()
            return Plan(thin=True)
        percent: int | None = None
        if self.adaptive is not None:
            percent = self.adaptive.next_percent()
            ratio = percent / 100
        else:
            ratio = float(p.ratio)
        m = pilot_count(width, ratio, p.rounding)
        s = self.jobs[app.app_id] = _Sampled(job.tasks if job is not None else width, m, percent)
        if self.history is not None and job is not None:
            s.stage_tasks = [stage.tasks for stage in job.stages]
            s.history_means = self.history.stage_means(app)
        return Plan(pilots=m, ratio=ratio)

    def size_s(self, app: AppView, cluster: ClusterView) -> float | None:
        s = self.jobs.get(app.app_id)
        return s.size if s is not None else None

    def observe(
        self, app: AppView, container: Container, status: ContainerStatus, *, pilot: bool = False
    ) -> None:
        s = self.jobs.get(app.app_id)
        if s is None or s.size is not None:
            return
        if status.state is not ContainerState.COMPLETE or status.exit_status != 0:
            return  # a failed pilot is run again: only successes count
        if pilot or self.params.include_early:
            s.durations.append(max(0.0, status.finish_s - status.start_s))
        if pilot:
            s.pilots_done += 1
            if s.pilots_done >= s.pilots:
                mean_s = sum(s.durations) / len(s.durations)
                if s.stage_tasks:
                    s.size = dag_size(mean_s, s.stage_tasks, s.history_means)
                else:
                    s.size = mean_s * s.tasks

    def on_app_finished(self, app: AppView, jct_s: float, size_s: float) -> None:
        s = self.jobs.get(app.app_id)
        if s is not None and s.percent is not None and self.adaptive is not None and size_s > 0:
            self.adaptive.score(s.percent, normalized_jct(jct_s, size_s))

    def on_app_removed(self, app: AppView) -> None:
        self.jobs.pop(app.app_id, None)


def normalized_jct(jct_s: float, size_s: float) -> float:
    """JCT over the job's size (its total task-seconds), spec A1.3."""
    return jct_s / size_s

"""gs: SLearn's generic multi-queue scheduler (Jajoo et al., NSDI'22, section 5.1; spec
A1.1-A1.2), sizing jobs with a pluggable estimator (``rm.policy.estimator``). Queues, weights,
FIFO, sharing and work conservation: ``rm.policy.toolkit.multiqueue``; every estimator gets the
same layout (the sampling position stays empty for those that do not sample).

Jobs. The estimator's plan decides where a new job goes: a thin job to position 0 (never
estimated); one that needs pilots to the sampling position, where only its pilots run
(plus work conservation); others to the position of their estimated size as soon as it
exists. A sampled job moves to its size's position once its estimate is ready and stays
there. When a job ends the estimator hears its completion time and observed size.

Log: a ``job_estimated`` record when a job gets its estimate (its size, the position it
goes to, its sampling ratio and pilot count; never for a thin job), and the moves of
``rm.policy.toolkit.multiqueue``.

Estimator: ``estimator=NAME`` and its parameters as ``NAME.PARAM=VALUE``
(``--set gs.estimator=slearn --set gs.slearn.ratio=0.03`` with ``compare``).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from rm.policy import AppView, ClusterView
from rm.policy.estimator import Estimator
from rm.policy.toolkit.multiqueue import PLACED, SAMPLING, THIN, MultiQueue, QueueJob, QueueParams
from treadle import registry
from treadle.errors import PluginError
from treadle.messages import Container, ContainerStatus


class GsParams(QueueParams):
    estimator: str = "oracle"
    estimator_params: dict[str, Any] = Field(default_factory=dict)
    work_conservation: bool = True
    #: The estimator validating these parameters built, handed to the first policy built
    #: from them: building an estimator may read a history, once.
    _built: Estimator | None = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _dotted(cls, data: Any) -> Any:
        """``NAME.PARAM`` keys are the estimator's parameters."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        name = data.get("estimator", "oracle")
        extra = dict(data.get("estimator_params") or {})
        for key in [k for k in data if isinstance(k, str) and "." in k]:
            prefix, _, param = key.partition(".")
            if prefix != name:
                raise PluginError(
                    f"policy 'gs': parameter {key!r}: the estimator is {name!r}, not {prefix!r}"
                )
            extra[param] = data.pop(key)
        data["estimator_params"] = extra
        return data

    @model_validator(mode="after")
    def _estimator(self) -> GsParams:
        self._built = make_estimator(self.estimator, self.estimator_params)  # a bad one fails here
        return self


def make_estimator(name: str, params: dict[str, Any]) -> Estimator:
    """Build estimator ``name``; an unknown name or a bad parameter is one PluginError."""
    try:
        est: Estimator = registry.build("estimators", name, params)
    except PluginError as e:
        raise PluginError(f"policy 'gs': {e}") from None
    return est


class GsPolicy(MultiQueue[GsParams]):
    description = "GS multi-queue scheduler sized by an estimator (SLearn: estimator=slearn)"

    def __init__(self, params: GsParams | None = None) -> None:
        super().__init__(params)
        p: GsParams = self.params
        built, p._built = p._built, None
        self.estimator = (
            built if built is not None else make_estimator(p.estimator, p.estimator_params)
        )
        self.waiting: dict[str, QueueJob] = {}  # jobs without an estimate nor a queue yet

    def uses_oracle(self) -> bool:
        return self.estimator.oracle

    def shuffles_tasks(self) -> bool:
        return self.estimator.samples

    def on_app_added(self, app: AppView, cluster: ClusterView) -> None:
        job = self.jobs[app.app_id] = QueueJob(app)
        plan = self.estimator.on_app_added(app, cluster)
        # The time of the submission: the RM does not move ``cluster.now`` on a submission.
        now = max(cluster.now, app.submit_s)
        if plan.thin:
            job.phase = THIN
            self._enter(job, 0, now)
        elif plan.pilots > 0:
            job.phase = SAMPLING
            job.pilots = plan.pilots
            job.ratio = plan.ratio
            self._enter(job, self.layout.sampling, now)
        else:
            self._try_place(job, app, cluster, now)

    def _try_place(
        self, job: QueueJob, app: AppView, cluster: ClusterView, now: float | None = None
    ) -> None:
        now = cluster.now if now is None else now
        size = self.estimator.size_s(app, cluster)
        if size is None:
            self.waiting[job.app_id] = job
        else:
            self.waiting.pop(job.app_id, None)
            job.phase = PLACED
            position = self.layout.position(size)
            if self.log is not None:
                self.log.job_estimated(now, job.app_id, size, position, job.ratio, job.pilots)
            self._enter(job, position, now)

    def _refresh(self, cluster: ClusterView) -> None:
        apps = cluster.apps
        for job in list(self.waiting.values()):
            if (app := apps.get(job.app_id)) is not None:
                self._try_place(job, app, cluster)

    def _finished(
        self,
        job: QueueJob,
        container: Container,
        status: ContainerStatus,
        pilot: bool,
        cluster: ClusterView,
    ) -> None:
        app = cluster.apps.get(container.app_id)
        if app is None:
            return
        self.estimator.observe(app, container, status, pilot=pilot)
        if job.phase == SAMPLING and job.pilots_done >= job.pilots:
            self._try_place(job, app, cluster)

    def on_app_removed(self, app: AppView, cluster: ClusterView) -> None:
        job = self.jobs.get(app.app_id)
        if job is not None:
            self.estimator.on_app_finished(app, cluster.now - app.submit_s, job.done_s)
        self.estimator.on_app_removed(app)
        self.waiting.pop(app.app_id, None)
        super().on_app_removed(app, cluster)

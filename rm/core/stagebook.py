"""What the RM knows of an application's stages, for the policy views (``AppView.stage_of``,
``stage_running``, ``stage_runnable_s``).

An ask names its stage through its group: ``Ask.group`` is the stage's index in the job
plus one (0: the ask belongs to no stage, e.g. a managed AM's container). The book keeps
each priority's stage, so a container (which carries only its priority) is traced back to
its stage. A stage becomes runnable when the last task of its last parent stage ends (the
finish time the NM reports), or when the application is submitted for a stage without
parents: the moment Spark's DAG scheduler submits the stage, independent of when the AM
next calls. Without the job's DAG, or for a stage the DAG does not know, the moment is
when its first ask reached the RM.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from treadle.messages import Ask, Container
from treadle.model import JobSpec


class StageBook:
    __slots__ = (
        "_asked_s",
        "_done",
        "_done_s",
        "_job",
        "_parents_left",
        "_runnable_s",
        "_tasks",
        "stages",
        "unasked",
    )

    def __init__(self, job: JobSpec | None, submit_s: float) -> None:
        self._job = job
        #: priority -> stage, for every ask seen with a group.
        self.stages: dict[int, int] = {}
        self._asked_s: dict[int, float] = {}  # stage -> when its first ask arrived
        self._runnable_s: dict[int, float] = {}
        #: Stages runnable by the DAG whose first ask has not arrived (the AM is about to
        #: ask for them), in the order they became runnable.
        self.unasked: dict[int, None] = {}
        if job is None:
            self._done: list[int] = []
            self._done_s: list[float] = []
            self._parents_left: list[int] = []
            self._tasks: list[int] = []
            return
        n = len(job.stages)
        self._done = [0] * n
        self._done_s = [submit_s] * n
        self._parents_left = [len(p) for p in job.parent_indices]
        self._tasks = [s.tasks for s in job.stages]  # per stage
        for i, left in enumerate(self._parents_left):
            if left == 0:
                self._runnable_s[i] = submit_s
                self.unasked[i] = None

    def asked(self, asks: Iterable[Ask], now: float) -> bool:
        """Asks arrived from the AM at ``now``. True when a priority moved to another
        stage (its containers with it)."""
        stages = self.stages
        moved = False
        for ask in asks:
            g = ask.group
            if g > 0:
                stage = g - 1
                if stages.setdefault(ask.priority, stage) != stage:
                    stages[ask.priority] = stage
                    moved = True
                if ask.count and stage not in self._asked_s:
                    self._asked_s[stage] = now
                    self.unasked.pop(stage, None)
        return moved

    def task_done(self, priority: int, finish_s: float) -> None:
        """A container at ``priority`` completed successfully at ``finish_s``."""
        stage = self.stages.get(priority)
        done = self._done  # empty without the job's DAG
        if stage is None or not 0 <= stage < len(done):
            return
        n = done[stage] = done[stage] + 1
        if finish_s > self._done_s[stage]:
            self._done_s[stage] = finish_s
        if n != self._tasks[stage]:
            return
        job = self._job
        assert job is not None
        for child in job.children[stage]:
            self._parents_left[child] -= 1
            if self._parents_left[child] == 0:
                self._runnable_s[child] = max(self._done_s[p] for p in job.parent_indices[child])
                if child not in self._asked_s:
                    self.unasked[child] = None

    def stage_of(self, priority: int) -> int | None:
        return self.stages.get(priority)

    def running(self, containers: Mapping[str, Container], stage: int) -> int:
        """Live containers of ``stage`` among ``containers``."""
        stages = self.stages
        return sum(1 for c in containers.values() if stages.get(c.priority) == stage)

    def runnable_s(self, stage: int) -> float | None:
        t = self._runnable_s.get(stage)
        return t if t is not None else self._asked_s.get(stage)

"""Runtime partitioning (the UWFQ paper's "-P" runs): every stage is cut into equal tasks
of about an advisory task runtime, the same way for every policy of a comparison.

A stage of W task-seconds becomes N tasks of W / N seconds each, with its resources per
task unchanged: N = max(N_min, ceil(W / ATR)) (``rule=atr``, ATR 0.5 s by default), or the
authors' LoopCustom rule N = max(N_min, floor(4 + 1.832672 W^1.012495)) (``rule=loopcustom``,
fitted to about 0.55 s per task). N_min is ``min_tasks``, by default as many of the
stage's tasks as the whole cluster runs at once (its vcores over the task's vcores, at
least 1: 32 on the paper's 32-core cluster). A stage whose tasks ask no vcores is left as
it is: it splits no input over cores (the UWFQ importer's driver overhead is one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from treadle.model import ClusterSpec, JobSpec, StageSpec, Workload

ATR_S = 0.5
RULES = ("atr", "loopcustom")


@dataclass(frozen=True)
class Partitioning:
    atr_s: float = ATR_S
    rule: Literal["atr", "loopcustom"] = "atr"
    min_tasks: int | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.atr_s) and self.atr_s > 0):
            raise ValueError(f"the advisory task runtime must be a number > 0, got {self.atr_s}")
        if self.rule not in RULES:
            raise ValueError(f"unknown partitioning rule {self.rule!r}; expected atr or loopcustom")
        if self.min_tasks is not None and self.min_tasks < 1:
            raise ValueError(f"min_tasks must be >= 1, got {self.min_tasks}")

    def label(self) -> str:
        return "loopcustom" if self.rule == "loopcustom" else f"{self.atr_s:g}"


def parse_partition(text: str) -> Partitioning:
    """``--partition``'s value: an advisory task runtime in seconds, or ``loopcustom``."""
    if text.strip().lower() == "loopcustom":
        return Partitioning(rule="loopcustom")
    try:
        atr = float(text)
    except ValueError:
        raise ValueError(
            f"--partition takes an advisory task runtime in seconds (e.g. 0.5) or "
            f"'loopcustom', got {text!r}"
        ) from None
    try:
        return Partitioning(atr_s=atr)
    except ValueError as e:
        raise ValueError(f"--partition: {e}") from None


def task_count(work_s: float, n_min: int, p: Partitioning) -> int:
    """N for a stage of ``work_s`` task-seconds."""
    if p.rule == "loopcustom":
        n = math.floor(4 + 1.832672 * work_s**1.012495)
    else:
        n = math.ceil(work_s / p.atr_s - 1e-9)
    return int(max(n_min, n, 1))


def min_tasks(stage: StageSpec, cluster: ClusterSpec, p: Partitioning) -> int:
    if p.min_tasks is not None:
        return p.min_tasks
    total = cluster.capacity["vcores"]
    v = stage.resources["vcores"]
    return max(1, math.floor(total / v + 1e-9)) if v > 0 else max(1, math.floor(total))


def partition_stage(stage: StageSpec, n_min: int, p: Partitioning) -> StageSpec:
    work = stage.work_s
    n = task_count(work, n_min, p)
    return replace(stage, durations=(work / n,) * n)


def partition_workload(wl: Workload, p: Partitioning) -> Workload:
    """``wl`` with every stage partitioned by ``p``."""
    jobs = []
    for job in wl.jobs:
        stages = tuple(
            partition_stage(s, min_tasks(s, wl.cluster, p), p) if s.resources["vcores"] > 0 else s
            for s in job.stages
        )
        jobs.append(JobSpec(job.name, job.user, job.submit_s, stages, job.queue))
    return replace(wl, jobs=tuple(jobs))

"""Critical-path method (CPM) over a job's stage DAG.

Each stage takes an estimated time (by default the mean of its task durations: the time of
one wave of its tasks when they all run at once); a stage starts when all its parents have
finished. ``critical_path_s`` is the job's duration with unbounded resources, what SJF
ranks jobs by; ``time_to_end`` gives, per stage, the longest path from its start to the
end of the job (what an altruistic AM needs to know how long a stage may wait without
delaying the job). Both are O(stages + edges): stages are already in topological order.
"""

from __future__ import annotations

from collections.abc import Sequence

from treadle.model import JobSpec, StageSpec


def mean_duration(stage: StageSpec) -> float:
    """The stage's estimated time: the mean of its task durations."""
    return sum(stage.durations) / len(stage.durations) if stage.durations else 0.0


def stage_estimates(job: JobSpec) -> tuple[float, ...]:
    return tuple(mean_duration(s) for s in job.stages)


def earliest_finish(job: JobSpec, est: Sequence[float] | None = None) -> list[float]:
    """Per stage, its earliest finish time from the job's start (forward pass)."""
    est = stage_estimates(job) if est is None else est
    finish: list[float] = []
    for i, parents in enumerate(job.parent_indices):
        finish.append(max((finish[p] for p in parents), default=0.0) + est[i])
    return finish


def time_to_end(job: JobSpec, est: Sequence[float] | None = None) -> list[float]:
    """Per stage, the longest path from its start to the job's end, itself included
    (backward pass)."""
    est = stage_estimates(job) if est is None else est
    out = [0.0] * len(job.stages)
    for i in reversed(range(len(job.stages))):
        out[i] = est[i] + max((out[c] for c in job.children[i]), default=0.0)
    return out


def critical_path_s(job: JobSpec, est: Sequence[float] | None = None) -> float:
    """The length of the longest chain of stages (each counting its estimate)."""
    return max(earliest_finish(job, est))

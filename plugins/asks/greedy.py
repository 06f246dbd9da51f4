"""greedy: breadth-first, every runnable task asked for at once as a DEFAULT ask."""

from __future__ import annotations

from pydantic import BaseModel

from am.asks import AskStrategy, JobProgress, group_of, priority_of
from treadle.messages import Ask, AskKind, new_ask


class GreedyAsks(AskStrategy):
    description = "breadth-first: every runnable task is a DEFAULT ask"
    time_invariant = True
    reads_share = False

    def __init__(self, params: BaseModel | None = None) -> None:
        super().__init__(params)
        self._seen: tuple[JobProgress, int] | None = None
        self._asks: list[Ask] = []

    def asks(self, progress: JobProgress, now: float) -> list[Ask]:
        # They depend on the job's progress alone: the same list until it moves.
        seen = self._seen
        if seen is not None and seen[0] is progress and seen[1] == progress.version:
            return self._asks
        self._seen = (progress, progress.version)
        self._asks = self._make(progress)
        return self._asks

    def _make(self, progress: JobProgress) -> list[Ask]:
        stages = progress.job.stages
        remaining = progress.remaining_work_s
        usage = progress.remaining_usage
        unassigned = progress.unassigned
        mean_duration = progress.unassigned_mean_duration
        kind = AskKind.DEFAULT
        return [
            new_ask(
                priority_of(i, kind),
                stages[i].resources,
                unassigned(i),
                kind,
                mean_duration(i),
                remaining,
                usage,
                group_of(i),
            )
            for i in progress.runnable_stages()
        ]

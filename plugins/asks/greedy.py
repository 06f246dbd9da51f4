"""greedy: breadth-first, every runnable task asked for at once as a DEFAULT ask."""

from __future__ import annotations

from am.asks import AskStrategy, JobProgress, group_of, priority_of
from treadle.messages import Ask, AskKind


class GreedyAsks(AskStrategy):
    description = "breadth-first: every runnable task is a DEFAULT ask"
    progress_only = True

    def asks(self, progress: JobProgress, now: float) -> list[Ask]:
        stages = progress.job.stages
        remaining = progress.remaining_work_s
        usage = progress.remaining_usage
        out = []
        for i in progress.runnable_stages():
            durations = progress.unassigned_durations(i)
            out.append(
                Ask(
                    priority_of(i, AskKind.DEFAULT),
                    stages[i].resources,
                    len(durations),
                    AskKind.DEFAULT,
                    sum(durations) / len(durations),
                    remaining,
                    usage,
                    group_of(i),
                )
            )
        return out

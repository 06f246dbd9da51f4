"""What a run hands back to a test: its event records and their metrics, with the
questions tests ask most (``job``, ``finish_order``) answered directly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from treadle import events as ev
from treadle.metrics import RunMetrics, analyze
from treadle.metrics.jobs import JobResult
from treadle.model import Workload


@dataclass(frozen=True)
class Results:
    """One run of a workload under a policy, simulated or live. ``records``: its event
    log (empty for a simulation that streamed it to a file); ``metrics``: what
    ``treadle sim``/``treadle run`` write as summary.json and jobs.csv."""

    policy: str
    records: Sequence[ev.Record]
    metrics: RunMetrics

    @classmethod
    def of(cls, records: Sequence[ev.Record], workload: Workload, policy: str) -> Results:
        weights = {name: u.weight for name, u in workload.users.items()}
        return cls(policy, records, analyze(records, policy=policy, user_weights=weights))

    @property
    def summary(self) -> dict[str, Any]:
        return self.metrics.summary

    @property
    def jobs(self) -> list[JobResult]:
        return self.metrics.jobs

    @property
    def finished(self) -> int:
        return sum(j.finished for j in self.jobs)

    def job(self, name: str) -> JobResult:
        """The job named ``name`` in the workload; KeyError if the run has none."""
        for j in self.jobs:
            if j.name == name:
                return j
        raise KeyError(f"no job named {name!r} in this run (jobs: {[j.name for j in self.jobs]})")

    def finish_order(self) -> list[str]:
        """The finished jobs' names, the first to finish first (ties by name)."""
        done = [j for j in self.jobs if j.finish_s is not None]
        return [j.name for j in sorted(done, key=lambda j: (j.finish_s, j.name))]

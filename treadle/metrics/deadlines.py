"""The UWFQ paper's deadline and rank metrics over plain numbers (the paper's P5.1.1, in
the authors' code's convention): not yet in the summary files.

Deadline ratios against a reference run: for each job in both runs,
v = ((F - t0) - (F_ref - t0_ref)) / RT_ref, where F is the job's finish and t0 its run's
earliest job start. DVR is the mean of v over v > 0 (violations), DSR the mean of |v| over
v <= 0 (slack; zero counts as slack, as the authors' code counts it).

Rank groups: a run's response times sorted ascending, the means of the ranks
[0, 0.8N), [0.8N, 0.95N) and [0.95N, N) (each bound floored).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class DeadlineRatios:
    dvr: float | None
    violations: int
    dsr: float | None
    slack: int


def deadline_ratios(
    reference: Mapping[str, tuple[float, float]],
    target: Mapping[str, float],
    t0_reference: float,
    t0_target: float,
) -> DeadlineRatios:
    """``reference``: job -> (finish, response time); ``target``: job -> finish."""
    late: list[float] = []
    early: list[float] = []
    for job, finish in target.items():
        ref = reference.get(job)
        if ref is None or not ref[1] > 0:
            continue
        v = ((finish - t0_target) - (ref[0] - t0_reference)) / ref[1]
        (late if v > 0 else early).append(v)
    return DeadlineRatios(
        math.fsum(late) / len(late) if late else None,
        len(late),
        math.fsum(-v for v in early) / len(early) if early else None,
        len(early),
    )


def rank_groups(response_times: Sequence[float]) -> tuple[float | None, ...]:
    """Mean response time of the 0-80%, 80-95% and 95-100% rank groups."""
    a = sorted(response_times)
    n = len(a)
    bounds = (0, math.floor(0.8 * n), math.floor(0.95 * n), n)
    return tuple(
        math.fsum(a[lo:hi]) / (hi - lo) if hi > lo else None
        for lo, hi in itertools.pairwise(bounds)
    )

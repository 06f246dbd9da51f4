"""The UWFQ paper's metrics (its section 5.1.1; docs: metrics.md), as array code.

*Response time* (RT) is a job's JCT: its finish minus its submission, over the jobs that
succeeded.

Rank groups: a run's response times sorted ascending, the means of the ranks
[0, 0.8N), [0.8N, 0.95N) and [0.95N, N) (each bound floored): groups by rank in the run,
not by job size.

Deadline ratios against a reference run (another policy on the same workload): for each
job that succeeded in both runs (and took time in the reference),
v = ((F - t0) - (F_ref - t0_ref)) / RT_ref, where F is the job's finish and t0 its run's
earliest job submission (the start of the earliest response time). DVR is the mean of v
over v > 0 (the violations), DSR the mean of |v| over v <= 0 (the slack; zero counts as
slack, as the authors' code counts it).

Per-user response time relative to the reference (the paper's Fig. 7): for each user with
a succeeded job in both runs, (mean RT under the policy) / (mean RT under the reference)
- 1.

Means are exact (``math.fsum``); per-user sums add the jobs in their order
(``np.add.at``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from treadle.metrics.stats import FloatArray, mean, pct

#: The rank groups' names and their bounds, fractions of the run's jobs.
RANK_GROUPS: tuple[tuple[str, float, float], ...] = (
    ("0-80%", 0.0, 0.8),
    ("80-95%", 0.8, 0.95),
    ("95-100%", 0.95, 1.0),
)


@dataclass(frozen=True)
class DeadlineRatios:
    dvr: float | None
    violations: int
    dsr: float | None
    slack: int


def violation_ratios(
    finish: FloatArray,
    ref_finish: FloatArray,
    ref_rt: FloatArray,
    t0: float,
    t0_reference: float,
) -> FloatArray:
    """v of each job (arrays aligned job by job); NaN where a finish is NaN or the
    reference's RT is not > 0."""
    ok = np.isfinite(finish) & np.isfinite(ref_finish) & (ref_rt > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = ((finish - t0) - (ref_finish - t0_reference)) / np.where(ok, ref_rt, 1.0)
    out: FloatArray = np.where(ok, v, np.nan)
    return out


def ratios_of(v: FloatArray) -> DeadlineRatios:
    """DVR, violations, DSR and slack of the finite values of ``v``."""
    v = v[np.isfinite(v)]
    late = v[v > 0]
    early = v[v <= 0]
    return DeadlineRatios(mean(late), len(late), mean(-early), len(early))


def deadline_ratios(
    reference: Mapping[str, tuple[float, float]],
    target: Mapping[str, float],
    t0_reference: float,
    t0_target: float,
) -> DeadlineRatios:
    """``reference``: job -> (finish, response time); ``target``: job -> finish."""
    jobs = [j for j in target if j in reference]
    ref = np.array([reference[j] for j in jobs], dtype=float).reshape(-1, 2)
    finish = np.array([target[j] for j in jobs], dtype=float)
    return ratios_of(violation_ratios(finish, ref[:, 0], ref[:, 1], t0_target, t0_reference))


def rank_groups(response_times: Sequence[float] | FloatArray) -> tuple[float | None, ...]:
    """Mean response time of the 0-80%, 80-95% and 95-100% rank groups (None if empty)."""
    a = np.sort(np.asarray(response_times, dtype=float))
    n = len(a)
    bounds = [math.floor(lo * n) for _, lo, _ in RANK_GROUPS] + [n]
    return tuple(mean(a[lo:hi]) for lo, hi in itertools.pairwise(bounds))


def rank_group_dict(response_times: Sequence[float] | FloatArray) -> dict[str, float | None]:
    """``rank_groups`` keyed by the groups' names (``RANK_GROUPS``)."""
    groups = rank_groups(response_times)
    return {name: g for (name, _, _), g in zip(RANK_GROUPS, groups, strict=True)}


def user_means(users: np.ndarray, rt: FloatArray) -> dict[str, float]:
    """Mean RT per user over the finite ``rt`` (users without one left out)."""
    ok = np.isfinite(rt)
    names, inverse = np.unique(users[ok].astype(str), return_inverse=True)
    sums = np.zeros(len(names))
    np.add.at(sums, inverse, rt[ok])
    counts = np.bincount(inverse, minlength=len(names))
    return dict(zip(names.tolist(), (sums / counts).tolist(), strict=True))


def best_and_worst(means: Mapping[str, float | None]) -> dict[str, Any]:
    """The users of lowest and highest mean (ties: the first name in sorted order)."""
    known = sorted((u, m) for u, m in means.items() if m is not None)
    if not known:
        return {"best_user": None, "worst_user": None}
    best = min(known, key=lambda x: x[1])
    worst = max(known, key=lambda x: x[1])
    return {
        "best_user": {"user": best[0], "mean_jct_s": best[1]},
        "worst_user": {"user": worst[0], "mean_jct_s": worst[1]},
    }


def user_rt_relative(
    means: Mapping[str, float], reference: Mapping[str, float]
) -> dict[str, float]:
    """Per user in both with a reference mean > 0: mean / reference mean - 1 (Fig. 7)."""
    return {
        u: means[u] / reference[u] - 1
        for u in sorted(means.keys() & reference.keys())
        if reference[u] > 0
    }


def spread(values: Sequence[float]) -> dict[str, float | None]:
    """Median, min and max of ``values`` (None when empty)."""
    a = np.asarray(values, dtype=float)
    return {
        "median": pct(a, 50),
        "min": float(a.min()) if len(a) else None,
        "max": float(a.max()) if len(a) else None,
    }

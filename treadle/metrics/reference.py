"""Metrics of a run against a reference run of the same comparison (``deadlines``' DVR, DSR
and per-user RT relative to the reference), from the runs' per-job results alone: the
report computes them from what each run sends back, never from the event logs.

Jobs are matched by name; a name that repeats is matched by order of submission (as
``factor_of_improvement`` keys them: ``name``, ``name#2``, ...).

``paper_compat`` replicates the analysis quirks the authors' code bakes into the
published tables (docs: metrics.md, "The UWFQ paper's metrics"):

1. Deadline ratios collect every job twice when its name carries a micro job type
   (``loop<N>_``: the per-job-type loop, then the per-user loop), so violation and slack
   counts double (DVR and DSR, means, do not move).
2. Users are matched to jobs by substring: user ``user_1`` collects the jobs of
   ``user_10`` ... ``user_19`` as well. Every statistic (means, worst 10%, rank groups,
   per-user means, deadline ratios and counts) is then over these entries, some jobs
   counted twice.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from treadle.metrics.deadlines import (
    best_and_worst,
    rank_group_dict,
    ratios_of,
    spread,
    user_means,
    user_rt_relative,
    violation_ratios,
)
from treadle.metrics.jobs import JobResult
from treadle.metrics.scan import SUCCEEDED
from treadle.metrics.stats import FloatArray, mean, worst_fraction_mean

IntArray = npt.NDArray[np.int64]
StrArray = npt.NDArray[np.str_]

#: The micro job types of the authors' analysis (``paper_compat``, quirk 1).
MICRO_JOB_TYPE = re.compile(r"loop\d+_")


@dataclass(frozen=True, slots=True)
class JobTimes:
    """A run's jobs as arrays, in (submit, job) order; NaN finish and RT unless the job
    succeeded."""

    key: StrArray
    name: StrArray
    user: StrArray
    submit: FloatArray
    finish: FloatArray
    rt: FloatArray

    @property
    def t0(self) -> float:
        """The earliest submission (the start of the earliest response time)."""
        return float(self.submit.min()) if len(self.submit) else 0.0


def job_times(jobs: Sequence[JobResult]) -> JobTimes:
    """The arrays of ``job_results``' list (or any results in (submit, job) order)."""
    name = np.array([j.name for j in jobs], dtype=str)
    done = np.array([j.status == SUCCEEDED and j.finish_s is not None for j in jobs], bool)
    finish = np.array([np.nan if j.finish_s is None else j.finish_s for j in jobs], float)
    rt = np.array([np.nan if j.jct_s is None else j.jct_s for j in jobs], float)
    finish[~done] = np.nan
    rt[~done] = np.nan
    # Occurrence of each name in submission order: its rank within its run of equal names.
    order = np.argsort(name, kind="stable")
    sorted_names = name[order]
    first = np.r_[True, sorted_names[1:] != sorted_names[:-1]] if len(name) else np.zeros(0, bool)
    starts = np.flatnonzero(first)
    group = np.cumsum(first) - 1
    occurrence = np.empty(len(name), dtype=np.int64)
    occurrence[order] = np.arange(len(name)) - starts[group]
    key = name.astype(object)
    for i in np.flatnonzero(occurrence):
        key[i] = f"{name[i]}#{occurrence[i] + 1}"
    return JobTimes(
        key.astype(str),
        name,
        np.array([j.user for j in jobs], dtype=str),
        np.array([j.submit_s for j in jobs], dtype=float),
        finish,
        rt,
    )


def matched(run: JobTimes, reference: JobTimes) -> IntArray:
    """For each job of ``run``, the index of the same job in ``reference`` (-1: none)."""
    out = np.full(len(run.key), -1, dtype=np.int64)
    _, mine, theirs = np.intersect1d(run.key, reference.key, True, return_indices=True)
    out[mine] = theirs
    return out


def _violations(run: JobTimes, reference: JobTimes) -> FloatArray:
    """v of every job of ``run`` (NaN where it has none)."""
    m = matched(run, reference)  # -1 picks the NaN appended to each reference column
    ref_finish = np.r_[reference.finish, np.nan][m]
    ref_rt = np.r_[reference.rt, np.nan][m]
    return violation_ratios(run.finish, ref_finish, ref_rt, run.t0, reference.t0)


def _against(
    v: FloatArray, means: dict[str, float], reference_means: dict[str, float]
) -> dict[str, Any]:
    r = ratios_of(v)
    relative = user_rt_relative(means, reference_means)
    return {
        "jobs": r.violations + r.slack,
        "dvr": r.dvr,
        "violations": r.violations,
        "dsr": r.dsr,
        "slack": r.slack,
        "user_rt_vs_reference": relative,
        "user_rt_vs_reference_spread": spread(list(relative.values())),
    }


def versus_reference(run: JobTimes, reference: JobTimes, name: str) -> dict[str, Any]:
    """DVR, violations, DSR, slack and per-user RT relative to ``reference`` (the policy
    ``name``), over the jobs that succeeded in both runs."""
    v = _violations(run, reference)
    out = {"reference": name}
    return out | _against(v, user_means(run.user, run.rt), user_means(reference.user, reference.rt))


# --------------------------------------------------------------------------------------
# paper_compat


def compat_entries(run: JobTimes, users: Sequence[str] | None = None) -> tuple[IntArray, StrArray]:
    """The authors' per-user entries: for each user (``users``, the workload's declared
    users, even those without a job; None: the run's, in order of first submission), the
    jobs whose user name contains it. Returns (job index, user) per entry."""
    if users is None:
        _, first = np.unique(run.user, return_index=True)
        users = run.user[np.sort(first)].tolist()
    rows = [np.flatnonzero(np.char.find(run.user, u) >= 0) for u in users]
    idx = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    labels = np.repeat(np.array(users, dtype=str), [len(r) for r in rows])
    return idx.astype(np.int64), labels


def _deadline_entries(run: JobTimes, idx: IntArray) -> IntArray:
    """The per-job-type entries (micro job types only), then the per-user ones."""
    typed = np.array([MICRO_JOB_TYPE.search(n) is not None for n in run.name[idx]], bool)
    return np.concatenate([idx[typed] if len(idx) else idx, idx])


def compat_summary(run: JobTimes, users: Sequence[str] | None = None) -> dict[str, Any]:
    """A run's RT statistics over the authors' per-user entries (quirk 2)."""
    idx, labels = compat_entries(run, users)
    rt = run.rt[idx]
    ok = rt[np.isfinite(rt)]
    means = user_means(labels, rt)
    return {
        "entries": len(ok),
        "mean_jct_s": mean(ok),
        "worst10_jct_s": worst_fraction_mean(ok, 0.1),
        "jct_groups_s": rank_group_dict(ok),
        "per_user_mean_jct_s": means,
        **best_and_worst(means),
    }


def compat_versus_reference(
    run: JobTimes, reference: JobTimes, name: str, users: Sequence[str] | None = None
) -> dict[str, Any]:
    """``versus_reference`` over the authors' entries (quirks 1 and 2)."""
    idx, labels = compat_entries(run, users)
    ref_idx, ref_labels = compat_entries(reference, users)
    v = _violations(run, reference)[_deadline_entries(run, idx)]
    means = user_means(labels, run.rt[idx])
    out = {"reference": name}
    return out | _against(v, means, user_means(ref_labels, reference.rt[ref_idx]))


def against_reference(
    jobs: Mapping[str, Sequence[JobResult]],
    reference: str | None,
    *,
    paper_compat: bool = False,
    users: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """What comparison.json adds to each policy's summary: ``vs_reference`` (every policy
    but the reference, when ``reference`` is among ``jobs``) and, with ``paper_compat``,
    ``paper_compat`` (``compat_summary``, plus ``vs_reference`` by the quirks; ``users``:
    the workload's declared users, see ``compat_entries``)."""
    times = {name: job_times(js) for name, js in jobs.items()}
    ref = times.get(reference) if reference is not None else None
    out: dict[str, dict[str, Any]] = {name: {} for name in jobs}
    for name, t in times.items():
        vs = ref if name != reference else None
        if vs is not None and reference is not None:
            out[name]["vs_reference"] = versus_reference(t, vs, reference)
        if paper_compat:
            compat = compat_summary(t, users)
            if vs is not None and reference is not None:
                compat["vs_reference"] = compat_versus_reference(t, vs, reference, users)
            out[name]["paper_compat"] = compat
    return out

"""Dynamic Priority's metrics (the DP paper's, spec dp.md B2), numpy over the log's table.

* **Shares** of the queues: each queue's mean spending rate over the allocation intervals
  in which it was granted a share (its ``dp_account`` records with ``share`` > 0),
  normalised to sum 1 over those queues: the entitlement its rate bought while it could
  pay. Callers that know the rates may pass their own.
* **Per-queue JCT**: mean, max and a ~95% half-width (1.96 standard errors) over the
  queue's finished jobs.
* **Differentiation**: ``JCT_max(lowest-share queue) / JCT_max(highest-share queue)``
  (the paper's 5,800/3,200 = 1.8), and the same ratio of mean JCTs.
* **Ideal line**: queue JCTs inversely proportional to the share, with the mean over the
  queues equal to the FIFO mean ``F``: ``ideal_i = F (1/s_i) / mean_j(1/s_j)`` (needs a
  FIFO run: ``ideal_line``). **Adjusted ideal**: the same ratios anchored at the observed
  mean JCT of the highest-share queue: ``adj_i = JCT(top) s_top / s_i``. **Distance**:
  ``|mean JCT_i - ideal_i|`` per queue.
* **Preemptions**: containers with a ``container_preempted`` record or ending
  ``PREEMPTED`` (each container once). **Preemption overhead**: (mean JCT with
  preemption - without) / without, of two runs.
* **Boost factor**: per user, the mean JCT of its unboosted jobs over its boosted jobs'
  mean JCT; the factor is the mean over the users with both.

``dp_summary`` is what summary.json holds under ``dp``, only for runs with ``dp_account``
records (other runs' summaries are unchanged).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from treadle import events as ev
from treadle.metrics.jobs import JobColumns
from treadle.metrics.scan import SUCCEEDED, FloatArray, LogFacts
from treadle.metrics.stats import mean

DP_ACCOUNT = ev.DP_ACCOUNT
CONTAINER_PREEMPTED = ev.CONTAINER_PREEMPTED
#: The columns these metrics read besides those of ``treadle.metrics.scan``.
COLUMNS = ("price", "budget", "spending_rate", "share", "used", "pending", "charged")
PREEMPTED = "PREEMPTED"
Z95 = 1.96


def _column(table: pa.Table, name: str, rows: pa.Array, fill: float = 0.0) -> FloatArray:
    if name not in table.schema.names:
        return np.full(len(rows), np.nan)
    col = table.column(name).take(rows).fill_null(fill)
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=float)


def _strings(table: pa.Table, name: str, rows: pa.Array) -> list[str]:
    if name not in table.schema.names:
        return [""] * len(rows)
    col = table.column(name).take(rows)
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    return [s or "" for s in col.to_pylist()]


def _rows(table: pa.Table, *events: str) -> pa.Array:
    kind = table.column("event")
    if pa.types.is_dictionary(kind.type):
        kind = kind.cast(kind.type.value_type)
    hit = pc.is_in(kind, value_set=pa.array(list(events)))
    return pa.array(np.flatnonzero(hit.to_numpy(zero_copy_only=False)))


def has_dp_records(table: pa.Table) -> bool:
    """Whether the log holds ``dp_account`` records (a run of a policy with accounts)."""
    return table.num_rows > 0 and len(_rows(table, DP_ACCOUNT)) > 0


def account_shares(table: pa.Table) -> dict[str, float]:
    """Each queue's share: its mean spending rate while granted a share, normalised."""
    rows = _rows(table, DP_ACCOUNT)
    queues = _strings(table, "queue", rows)
    rate = _column(table, "spending_rate", rows)
    active = _column(table, "share", rows) > 0
    rates: dict[str, float] = {}
    for q in sorted(set(queues)):
        mine = np.asarray([x == q for x in queues]) & active
        if mine.any():
            rates[q] = float(np.mean(rate[mine]))
    total = sum(rates.values())
    return {q: r / total for q, r in rates.items()} if total > 0 else {}


def queue_jcts(log: LogFacts, cols: JobColumns) -> dict[str, FloatArray]:
    """Queue -> the JCTs of its finished jobs (in the log's job order)."""
    done = (cols.status == SUCCEEDED) & ~np.isnan(cols.jct)
    queues = log.queue.astype(str)
    return {str(q): cols.jct[done & (queues == q)] for q in sorted(set(queues.tolist()))}


def ci95(values: FloatArray) -> float | None:
    """Half-width of a ~95% confidence interval of the mean (None below two values)."""
    if len(values) < 2:
        return None
    return float(Z95 * np.std(values, ddof=1) / math.sqrt(len(values)))


def _top_and_bottom(shares: Mapping[str, float]) -> tuple[str, str] | None:
    ranked = sorted((s, q) for q, s in shares.items() if s > 0)
    if len(ranked) < 2:
        return None
    return ranked[-1][1], ranked[0][1]


def differentiation(
    jcts: Mapping[str, Sequence[float] | FloatArray], shares: Mapping[str, float]
) -> tuple[float | None, float | None]:
    """(max-JCT ratio, mean-JCT ratio) of the lowest-share queue to the highest-share one;
    None where either queue has no finished job."""
    ends = _top_and_bottom({q: s for q, s in shares.items() if len(jcts.get(q, ())) > 0})
    if ends is None:
        return None, None
    top, bottom = ends
    hi, lo = np.asarray(jcts[top], float), np.asarray(jcts[bottom], float)
    max_ratio = float(lo.max() / hi.max()) if hi.max() > 0 else None
    mean_ratio = float(lo.mean() / hi.mean()) if hi.mean() > 0 else None
    return max_ratio, mean_ratio


def ideal_line(fifo_mean_s: float, shares: Mapping[str, float]) -> dict[str, float]:
    """JCTs inversely proportional to the shares, averaging ``fifo_mean_s`` over queues."""
    inv = {q: 1.0 / s for q, s in shares.items() if s > 0}
    if not inv:
        return {}
    norm = sum(inv.values()) / len(inv)
    return {q: fifo_mean_s * v / norm for q, v in inv.items()}


def adjusted_ideal_line(
    observed_mean_s: Mapping[str, float], shares: Mapping[str, float]
) -> dict[str, float]:
    """The ideal ratios anchored at the observed mean JCT of the highest-share queue."""
    known = {q: s for q, s in shares.items() if s > 0 and q in observed_mean_s}
    if not known:
        return {}
    top = max(known, key=lambda q: (known[q], q))
    anchor = observed_mean_s[top] * known[top]
    return {q: anchor / s for q, s in shares.items() if s > 0}


def distances(observed_s: Mapping[str, float], ideal_s: Mapping[str, float]) -> dict[str, float]:
    """|observed - ideal| per queue present in both."""
    return {q: abs(observed_s[q] - ideal_s[q]) for q in ideal_s if q in observed_s}


def preemption_count(table: pa.Table) -> int:
    """Containers preempted: a ``container_preempted`` record or a ``PREEMPTED`` end."""
    pre = _rows(table, CONTAINER_PREEMPTED)
    fin = _rows(table, ev.CONTAINER_FINISHED)
    states = _strings(table, "state", fin)
    ended = [i for i, s in zip(fin.to_pylist(), states, strict=True) if s == PREEMPTED]
    ids = set(_strings(table, "container", pre))
    ids |= set(_strings(table, "container", pa.array(ended, pa.int64())))
    return len(ids - {""})


def preemption_overhead(mean_jct_with_s: float, mean_jct_without_s: float) -> float:
    """Relative increase of the mean JCT that preemption costs (paper: < 2.6%)."""
    return (mean_jct_with_s - mean_jct_without_s) / mean_jct_without_s


def boost_factor(
    jct_s: Mapping[str, float], user_of: Mapping[str, str], boosted: Collection[str]
) -> tuple[float | None, dict[str, float]]:
    """(mean over users, per user) of unboosted mean JCT / boosted mean JCT; ``jct_s``
    maps job names to JCTs, ``user_of`` job names to users."""
    plain: dict[str, list[float]] = {}
    fast: dict[str, list[float]] = {}
    for job, jct in jct_s.items():
        (fast if job in boosted else plain).setdefault(user_of[job], []).append(jct)
    per_user = {
        u: float(np.mean(plain[u]) / np.mean(fast[u]))
        for u in sorted(fast)
        if u in plain and np.mean(fast[u]) > 0
    }
    overall = float(np.mean(list(per_user.values()))) if per_user else None
    return overall, per_user


def dp_summary(table: pa.Table, log: LogFacts, cols: JobColumns) -> dict[str, Any] | None:
    """summary.json's ``dp`` section (None without ``dp_account`` records)."""
    if not has_dp_records(table):
        return None
    shares = account_shares(table)
    jcts = queue_jcts(log, cols)
    means = {q: float(v.mean()) for q, v in jcts.items() if len(v)}
    adjusted = adjusted_ideal_line(means, shares)
    far = distances(means, adjusted)
    rows = _rows(table, DP_ACCOUNT)
    acct_queue = np.asarray(_strings(table, "queue", rows), dtype=object)
    acct_t = _column(table, "t", rows)
    budget = _column(table, "budget", rows)
    charged = _column(table, "charged", rows)
    queues: dict[str, Any] = {}
    for q in sorted(set(jcts) | set(acct_queue.tolist())):
        v = jcts.get(q, np.empty(0))
        mine = np.flatnonzero(acct_queue == q)
        last = mine[np.argmax(acct_t[mine])] if len(mine) else None
        queues[q] = {
            "share": shares.get(q),
            "finished": len(v),
            "mean_jct_s": mean(v),
            "max_jct_s": float(v.max()) if len(v) else None,
            "ci95_jct_s": ci95(v),
            "ideal_adjusted_s": adjusted.get(q),
            "distance_adjusted_s": far.get(q),
            "final_budget": float(budget[last]) if last is not None else None,
            "charged": float(np.nansum(charged[mine])) if len(mine) else None,
        }
    diff_max, diff_mean = differentiation(jcts, shares)
    price = _column(table, "price", rows)
    _, first = np.unique(acct_t, return_index=True)  # one price per interval
    return {
        "differentiation_max": diff_max,
        "differentiation_mean": diff_mean,
        "preemptions": preemption_count(table),
        "intervals": len(first),
        "mean_price": mean(price[first]) if len(first) else None,
        "queues": queues,
    }

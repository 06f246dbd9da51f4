"""The report.html sections the family issues add, each shown only when the results hold
its data: ``vs-reference`` (DVR, DSR and per-user RT against the reference, from
comparison.json's ``vs_reference``), ``paper-compat``, ``estimation`` (``job_estimated``
records against the jobs' observed sizes) and ``dp-accounts`` (``dp_account`` records:
each queue's budget and price over time, and its jobs' JCT over time)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from treadle.metrics import RunMetrics
from treadle.metrics.stats import mean, pct
from treadle.report import charts
from treadle.report.cells import GROUPS, num, signed
from treadle.report.html import _e, _note, figure, table
from treadle.report.logdata import LogExtras


def vs_reference(
    runs: Mapping[str, RunMetrics], extra: Mapping[str, Mapping[str, Any]], reference: str
) -> list[str]:
    rows, ids, bars = [], [], {}
    for name in runs:
        vs = (extra.get(name) or {}).get("vs_reference")
        if vs is None:
            rows.append([name, "reference" if name == reference else "-", *["-"] * 7])
        else:
            sp = vs["user_rt_vs_reference_spread"]
            rows.append(
                [
                    name,
                    num(vs["jobs"]),
                    num(vs["dvr"]),
                    num(vs["violations"]),
                    num(vs["dsr"]),
                    num(vs["slack"]),
                    *[signed(sp[k]) for k in ("median", "min", "max")],
                ]
            )
            bars[name] = {"dvr": vs["dvr"], "dsr": vs["dsr"]}
        ids.append(name)
    header = ["policy", "jobs", "DVR", "violations", "DSR", "slack"]
    header += ["user RT median", "user RT min", "user RT max"]
    out = [table(header, rows, row_ids=ids, tid="dvr-dsr")]
    if bars:
        uri = charts.bars(
            bars,
            list(runs),
            [("dvr", "DVR"), ("dsr", "DSR")],
            f"Deadline violation and slack ratios vs {reference}",
        )
        out.append(figure(uri, cls="dvr"))
    out.append(
        _note(
            f"Per job that succeeded in both runs, v = ((F - t0) - (F_ref - t0_ref)) / RT_ref "
            f"(RT_ref: the JCT under {reference}). DVR: mean v over the violations (v > 0); "
            "DSR: mean |v| over the slack (v <= 0). User RT: each user's mean JCT / its mean "
            f"JCT under {reference} - 1 (median, min, max over users)."
        )
    )
    return out


def paper_compat(extra: Mapping[str, Mapping[str, Any]]) -> list[str]:
    rows = []
    for name, e in extra.items():
        c = e.get("paper_compat") or {}
        vs = c.get("vs_reference") or {}
        g = c.get("jct_groups_s") or {}
        rows.append(
            [
                name,
                *[num(c.get(k)) for k in ("entries", "mean_jct_s", "worst10_jct_s")],
                *[num(g.get(k)) for k in GROUPS],
                *[num(vs.get(k)) for k in ("dvr", "violations", "dsr", "slack")],
            ]
        )
    header = ["policy", "entries", "mean JCT (s)", "worst 10% (s)", *GROUPS]
    header += ["DVR", "violations", "DSR", "slack"]
    return [
        table(header, rows),
        _note(
            "The same figures as the UWFQ authors' analysis counted them; the tables above "
            "are the correct ones."
        ),
    ]


NO_DP_ACCOUNT = (
    "Left out: no queue has a budget (give queues budget and spending_rate in the "
    "workload), so every DP account stays at 0 and dp places in submission order."
)


def no_dp_account(logs: Mapping[str, LogExtras]) -> bool:
    """No dp_account record of any run shows a budget, a charge or a price: the charts
    would be flat at 0."""
    keys = ("budget", "charged", "price")
    return not any(
        isinstance(r.get(k), int | float) and r[k] != 0
        for x in logs.values()
        for r in x.dp
        for k in keys
    )


def exact_estimates(names: Sequence[str], logs: Mapping[str, LogExtras]) -> str:
    """The one-line reason to leave the estimation section out, when every estimate
    with an observed size is exact (an oracle's: its error CDF would be rounding noise);
    else ''."""
    estimated = [n for n in names if n in logs and logs[n].estimates]
    errors = [
        abs(e["estimate_s"] - e["actual_s"]) / e["actual_s"]
        for n in estimated
        for e in logs[n].estimates
        if e.get("actual_s") and isinstance(e.get("estimate_s"), int | float)
    ]
    if not errors or max(errors) > 1e-9:
        return ""
    return (
        f"Left out: every estimate of {', '.join(estimated)} is the job's exact size (the "
        "oracle estimator reads it from the submitted job); set another estimator, e.g. "
        "--set gs.estimator=slearn, to see estimation error."
    )


def estimation(names: Sequence[str], logs: Mapping[str, LogExtras]) -> list[str]:
    rows, errors = [], {}
    for n in names:
        est = logs[n].estimates if n in logs else []
        if not est:
            continue
        relative = [
            (e["estimate_s"] - e["actual_s"]) / e["actual_s"]
            for e in est
            if e.get("actual_s") and isinstance(e.get("estimate_s"), int | float)
        ]
        absolute = [abs(v) for v in relative]
        errors[n] = absolute
        rows.append(
            [
                n,
                str(len(est)),
                str(len(relative)),
                num(pct(relative, 50), 3),
                num(pct(absolute, 50), 3),
                num(pct(absolute, 90), 3),
                num(mean([float(e.get("pilots") or 0) for e in est]), 1),
            ]
        )
    header = ["policy", "estimated jobs", "with observed size", "P50 signed error"]
    header += ["P50 |error|", "P90 |error|", "mean pilots"]
    return [
        table(header, rows, row_ids=[r[0] for r in rows], tid="estimation-table"),
        figure(
            charts.cdf(
                errors,
                names,
                xlabel="|estimate - observed size| / observed size",
                title="Estimation error CDF",
                seconds=False,
            ),
            cls="cdf estimation",
        ),
        _note(
            "Error of each job_estimated record against the job's observed size: the run "
            "times of its containers that ended with exit status 0 (task-seconds)."
        ),
    ]


def _per_queue_series(
    records: Sequence[Mapping[str, Any]], key: str, t0: float
) -> dict[str, tuple[list[float], list[float]]]:
    out: dict[str, tuple[list[float], list[float]]] = {}
    for r in sorted(records, key=lambda r: r["t"]):
        v = r.get(key)
        if isinstance(v, int | float) and math.isfinite(v):
            xs, ys = out.setdefault(str(r.get("queue")), ([], []))
            xs.append(r["t"] - t0)
            ys.append(float(v))
    return out


def dp_accounts(
    runs: Mapping[str, RunMetrics], logs: Mapping[str, LogExtras], t_max: float
) -> list[str]:
    names = [n for n in runs if n in logs and logs[n].dp]
    out = []
    rows = []
    for n in names:
        recs = logs[n].dp
        jobs = runs[n].jobs
        t0 = min((j.submit_s for j in jobs), default=min(r["t"] for r in recs))
        end = max(t_max, max(r["t"] for r in recs) - t0)
        last: dict[str, Mapping[str, Any]] = {}
        charged: dict[str, float] = {}
        for r in sorted(recs, key=lambda r: r["t"]):
            q = str(r.get("queue"))
            last[q] = r
            if isinstance(r.get("charged"), int | float):
                charged[q] = charged.get(q, 0.0) + float(r["charged"])
        for q in sorted(last):
            rec = last[q]
            rows.append(
                [
                    n,
                    q,
                    *[
                        num(rec.get(k), 3)
                        for k in ("budget", "price", "spending_rate", "share", "used", "pending")
                    ],
                    num(charged.get(q), 3),
                ]
            )
        jct: dict[str, tuple[list[float], list[float]]] = {}
        for j in sorted(jobs, key=lambda j: j.finish_s or 0.0):
            if j.finished and j.finish_s is not None and j.jct_s is not None:
                xs, ys = jct.setdefault(j.queue, ([], []))
                xs.append(j.finish_s - t0)
                ys.append(j.jct_s)
        out.append(
            f'<h3 data-policy="{_e(n)}">{_e(n)}</h3><div class="grid">'
            + figure(
                charts.lines_panel(
                    f"{n}: budget",
                    _per_queue_series(recs, "budget", t0),
                    ylabel="budget",
                    t_max=end,
                ),
                policy=n,
                cls="panel dp",
            )
            + figure(
                charts.lines_panel(
                    f"{n}: price", _per_queue_series(recs, "price", t0), ylabel="price", t_max=end
                ),
                policy=n,
                cls="panel dp",
            )
            + figure(
                charts.lines_panel(
                    f"{n}: JCT by finish time", jct, ylabel="JCT (s)", t_max=end, marker="o"
                ),
                policy=n,
                cls="panel dp",
            )
            + "</div>"
        )
    header = ["policy", "queue", "budget", "price", "spending rate", "share", "used"]
    header += ["pending", "charged (sum)"]
    return [
        table(header, rows, tid="dp-table"),
        _note(
            "Each queue's last dp_account record, and the sum of its charges; per policy "
            "with accounts, budget and price over time and each succeeded job's JCT at its "
            "finish time, by queue."
        ),
        *out,
    ]

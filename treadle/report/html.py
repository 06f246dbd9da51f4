"""``report.html``: the comparison as one self-contained page (styles inline, charts as
base64 PNG data URIs; it opens offline and loads nothing).

Sections, each a ``<section id=...>``: ``parameters`` (the run's and every policy's
resolved parameters), ``results``, ``groups`` (JCT rank groups, best and worst user),
``per-user``, ``per-queue``, ``improvement`` (factor of improvement, with a baseline),
``cdfs`` (JCT, slowdown, waiting time, factor of improvement), ``jain`` (Jain's index over
time), ``utilization`` and ``timeline`` (one panel per policy), and when the results hold
them: ``vs-reference`` (DVR, DSR, user RT against the reference), ``paper-compat``,
``estimation`` (``job_estimated`` records against the jobs' observed sizes),
``dp-accounts`` (``dp_account`` records: budget and price over time, per-queue JCT over
time) and ``fidelity`` (live runs' lag). Tables scroll inside their box.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from treadle.metrics import JobResult, RunMetrics
from treadle.metrics.stats import mean, pct
from treadle.report import charts
from treadle.report.cells import GROUPS, num, param, percent, signed, user_cell
from treadle.report.inputs import ReportInputs
from treadle.report.verdicts import identical_lines

Row = Sequence[str]

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1500px;
padding:0 1.2em 3em;color:#222;line-height:1.4}
h1{margin-top:.8em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
nav ul{columns:4;list-style:none;padding:0}nav a{text-decoration:none}
.scroll{overflow:auto;max-height:32em;border:1px solid #ddd;margin:.6em 0}
table{border-collapse:collapse;font-size:.86em;font-variant-numeric:tabular-nums}
th,td{padding:.25em .6em;border-bottom:1px solid #eee;white-space:nowrap;vertical-align:top}
th{background:#f5f5f5;position:sticky;top:0;z-index:1;text-align:left}
td.n{text-align:right}td.p{white-space:normal;min-width:18em}
tr:hover td{background:#fafafa}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:.6em}
figure{margin:0}figure img{max-width:100%;height:auto}
figcaption,.note{color:#555;font-size:.88em}
code{font-size:.92em}
"""


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _is_num(s: str) -> bool:
    try:
        float(s.rstrip("%").replace("+", ""))
    except ValueError:
        return False
    return True


def table(
    header: Sequence[str],
    rows: Sequence[Row],
    *,
    row_ids: Sequence[str] | None = None,
    raw: bool = False,
    tid: str = "",
) -> str:
    """A scrolling table; numeric cells right-aligned. ``raw``: cells are HTML already
    (only the parameters' cells are), otherwise they are escaped."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        attr = f' data-policy="{_e(row_ids[i])}"' if row_ids else ""
        cells = []
        for c in row:
            cls = ' class="n"' if _is_num(c) else (' class="p"' if raw else "")
            cells.append(f"<td{cls}>{c if raw else _e(c)}</td>")
        body.append(f"<tr{attr}>{''.join(cells)}</tr>")
    idattr = f' id="{tid}"' if tid else ""
    return (
        f'<div class="scroll"><table{idattr}><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def figure(uri: str, caption: str = "", policy: str | None = None, cls: str = "") -> str:
    attrs = f' class="{cls}"' if cls else ""
    if policy is not None:
        attrs += f' data-policy="{_e(policy)}"'
    cap = f"<figcaption>{_e(caption)}</figcaption>" if caption else ""
    return f'<figure{attrs}><img src="{uri}" alt="{_e(caption or policy or "")}">{cap}</figure>'


def panels(kind: str, names: Sequence[str], draw: Callable[[str], str]) -> str:
    """One figure per policy, ``class="panel KIND"``, in a grid."""
    figs = "".join(figure(draw(n), policy=n, cls=f"panel {kind}") for n in names)
    return f'<div class="grid">{figs}</div>'


class Page:
    def __init__(self) -> None:
        self.sections: list[tuple[str, str, str]] = []

    def add(self, sid: str, title: str, *parts: str) -> None:
        self.sections.append((sid, title, "".join(parts)))

    def render(self, title: str) -> str:
        toc = "".join(f'<li><a href="#{s}">{_e(t)}</a></li>' for s, t, _ in self.sections)
        body = "".join(
            f'<section id="{s}"><h2>{_e(t)}</h2>{content}</section>'
            for s, t, content in self.sections
        )
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{_e(title)}</h1><nav><ul>{toc}</ul></nav>{body}</body></html>\n"
        )


def _note(text: str) -> str:
    return f'<p class="note">{_e(text)}</p>'


#: Long tables (one row per user or queue and policy) show at most this many rows.
MAX_LONG_ROWS = 5000


def _long(header: Sequence[str], rows: Sequence[Row], what: str) -> str:
    shown = table(header, rows[:MAX_LONG_ROWS])
    if len(rows) > MAX_LONG_ROWS:
        shown += _note(f"The first {MAX_LONG_ROWS} of {len(rows)} rows; all in comparison.json.")
    return f"<details><summary>Every {what} under every policy</summary>{shown}</details>"


# ------------------------------------------------------------------------- sections


def _params_cell(params: Mapping[str, Any]) -> str:
    if not params:
        return '<span class="note">none</span>'
    items = [f"<code>{_e(k)}</code>&nbsp;=&nbsp;{_e(_value(params[k]))}" for k in sorted(params)]
    return "<br>".join(items)


def _value(v: Any) -> str:
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{k}: {_value(v[k])}" for k in sorted(v)) + "}"
    if isinstance(v, float):
        return f"{v:g}"
    return "null" if v is None else str(v)


_RUN_PARAMS = (
    ("workload", "workload"),
    ("mode", "mode"),
    ("seed", "seed"),
    ("dilation", "dilation"),
    ("heartbeat_s", "heartbeat (s)"),
    ("nodes", "nodes"),
    ("capacity", "capacity"),
    ("jain_window_s", "Jain window (s)"),
)


_OPTIONS = (
    ("phase_seed", "phase seed (heartbeat phases)"),
    ("ask_strategy", "ask strategy for every policy (--asks)"),
    ("ask_params", "ask parameters (--ask-set)"),
    ("am_interval_s", "AM allocate interval (s)"),
    ("stall_s", "stall limit (s)"),
    ("slowdown", "slowdown (alone references)"),
    ("events", "event log"),
    ("scaling", "scaling (--nodes, --nodes-scale, --load)"),
)


def parameters(runs: Mapping[str, RunMetrics], inputs: ReportInputs) -> list[str]:
    rows = []
    for key, label in _RUN_PARAMS:
        values = {n: param(r.summary.get(key)) for n, r in runs.items()}
        distinct = set(values.values())
        text = (
            next(iter(distinct))
            if len(distinct) == 1
            else "; ".join(f"{n}: {v}" for n, v in values.items())
        )
        rows.append([label, text])
    for key, label in _OPTIONS:
        if key in inputs.options:
            v = inputs.options[key]
            rows.append([label, "-" if v is None else _value(v)])
    rows.append(["baseline (factor of improvement)", inputs.baseline or "-"])
    rows.append(["reference (DVR, DSR)", inputs.reference or "-"])
    out = [table(["parameter", "value"], rows, tid="run-parameters")]
    prow, ids = [], []
    for n in runs:
        p = inputs.parameters.get(n)
        if p is None:
            prow.append([_e(n), '<span class="note">not recorded</span>', "-", "-"])
        else:
            asks = p.get("asks") or {}
            est = p.get("estimator")
            prow.append(
                [
                    f"<b>{_e(n)}</b>",
                    _params_cell(p.get("params") or {}),
                    f"<b>{_e(asks.get('name', '-'))}</b><br>"
                    + _params_cell(asks.get("params") or {}),
                    "-"
                    if not est
                    else f"<b>{_e(est['name'])}</b><br>{_params_cell(est.get('params') or {})}",
                ]
            )
        ids.append(n)
    out.append(
        table(
            ["policy", "parameters", "ask strategy", "estimator"],
            prow,
            row_ids=ids,
            raw=True,
            tid="policy-parameters",
        )
    )
    out.append(_note("Every parameter as the policy resolved it, defaults included."))
    return out


def results(runs: Mapping[str, RunMetrics]) -> list[str]:
    resources = sorted({r for run in runs.values() for r in run.summary.get("utilization", {})})
    header = ["policy", "jobs", "finished", "failed", "unfinished", "makespan (s)"]
    header += ["mean JCT (s)", "P50 JCT (s)", "P95 JCT (s)", "worst 10% JCT (s)"]
    header += ["mean slowdown", "mean wait (s)", *[f"util {r}" for r in resources]]
    header += ["Jain users", "Jain jobs"]
    rows = []
    for name, run in runs.items():
        s = run.summary
        util = s.get("utilization", {})
        rows.append(
            [
                name,
                *[num(s.get(k)) for k in ("jobs", "finished", "failed", "unfinished")],
                *[num(s.get(k)) for k in ("makespan_s", "mean_jct_s", "p50_jct_s")],
                *[num(s.get(k)) for k in ("p95_jct_s", "worst10_jct_s", "mean_slowdown")],
                num(s.get("mean_wait_s")),
                *[percent(util.get(r)) for r in resources],
                num(s.get("jain_users_mean"), 3),
                num(s.get("jain_jobs_mean"), 3),
            ]
        )
    window = param(next(iter(runs.values())).summary.get("jain_window_s"))
    return [
        table(header, rows, row_ids=list(runs), tid="results-table"),
        _note(
            "JCT, slowdown and wait are over the jobs that succeeded. Utilization is the mean "
            "allocated fraction of capacity from the first submission to the last job end. "
            f"Jain is the mean of Jain's index of dominant-share-seconds over {window} s "
            "windows."
        ),
    ]


def groups(runs: Mapping[str, RunMetrics]) -> list[str]:
    rows = []
    for name, run in runs.items():
        g = run.summary.get("jct_groups_s") or {}
        rows.append(
            [
                name,
                *[num(g.get(k)) for k in GROUPS],
                user_cell(run.summary.get("best_user")),
                user_cell(run.summary.get("worst_user")),
            ]
        )
    header = ["policy", *[f"{g} JCT (s)" for g in GROUPS], "best user (s)", "worst user (s)"]
    return [
        table(header, rows, row_ids=list(runs)),
        _note(
            "Each run's JCTs sorted ascending, the mean of ranks [0, 0.8N), [0.8N, 0.95N) and "
            "[0.95N, N); best and worst user: lowest and highest mean JCT."
        ),
    ]


def _matrix(
    keys: Sequence[str],
    names: Sequence[str],
    cell: Callable[[str, str], str],
    label: str,
) -> str:
    return table([label, *names], [[k, *[cell(k, n) for n in names]] for k in keys])


_USER_COLUMNS = ["user", "policy", "jobs", "finished", "mean JCT (s)", "mean slowdown"]
_USER_COLUMNS += ["mean wait (s)"]
_QUEUE_COLUMNS = ["queue", "policy", "jobs", "finished", "mean JCT (s)", "P95 JCT (s)"]
_QUEUE_COLUMNS += ["mean slowdown", "mean wait (s)"]
_QUEUE_KEYS = ("jobs", "finished", "mean_jct_s", "p95_jct_s", "mean_slowdown", "mean_wait_s")


def per_user(runs: Mapping[str, RunMetrics], extra: Mapping[str, Mapping[str, Any]]) -> list[str]:
    users = sorted({u for run in runs.values() for u in run.summary.get("per_user", {})})
    if not users:
        return [_note("No user submitted a job.")]
    names = list(runs)

    def jct(u: str, n: str) -> str:
        entry = runs[n].summary.get("per_user", {}).get(u, {})
        text = num(entry.get("mean_jct_s"))
        rel = ((extra.get(n) or {}).get("vs_reference") or {}).get("user_rt_vs_reference", {})
        return f"{text} ({signed(rel[u])})" if u in rel else text

    rows = []
    for u in users:
        for n in names:
            e = runs[n].summary.get("per_user", {}).get(u)
            if e is None:
                continue
            rows.append(
                [
                    u,
                    n,
                    num(e.get("jobs")),
                    num(e.get("finished")),
                    num(e.get("mean_jct_s")),
                    num(e.get("mean_slowdown")),
                    num(e.get("mean_wait_s")),
                ]
            )
    return [
        _matrix(users, names, jct, "user"),
        _note(
            "Mean JCT (s) of each user under each policy; in brackets, relative to the "
            "reference (mean RT / mean RT under the reference - 1) where there is one."
        ),
        _long(_USER_COLUMNS, rows, "user"),
    ]


def _queue_stats(jobs: Sequence[JobResult]) -> dict[str, dict[str, Any]]:
    by: dict[str, list[JobResult]] = {}
    for j in jobs:
        by.setdefault(j.queue, []).append(j)
    out = {}
    for q, js in by.items():
        ok = [j for j in js if j.finished]
        jct = [j.jct_s for j in ok if j.jct_s is not None]
        out[q] = {
            "jobs": len(js),
            "finished": len(ok),
            "mean_jct_s": mean(jct),
            "p95_jct_s": pct(jct, 95),
            "mean_wait_s": mean([j.wait_s for j in ok if j.wait_s is not None]),
            "mean_slowdown": mean([j.slowdown for j in ok if j.slowdown is not None]),
        }
    return out


def per_queue(runs: Mapping[str, RunMetrics]) -> list[str]:
    stats = {n: _queue_stats(r.jobs) for n, r in runs.items()}
    queues = sorted({q for s in stats.values() for q in s})
    if not queues:
        return [_note("No jobs.")]
    names = list(runs)
    rows = []
    for q in queues:
        for n in names:
            e = stats[n].get(q)
            if e is not None:
                rows.append([q, n, *[num(e[k]) for k in _QUEUE_KEYS]])
    return [
        _matrix(queues, names, lambda q, n: num(stats[n].get(q, {}).get("mean_jct_s")), "queue"),
        _note("Mean JCT (s) of each queue's succeeded jobs under each policy."),
        _long(_QUEUE_COLUMNS, rows, "queue"),
    ]


def improvement(foi: Mapping[str, Mapping[str, Any]], baseline: str) -> list[str]:
    rows = [
        [n, num(f["jobs"]), *[num(f[k], 3) for k in ("mean", "p50", "p95", "min", "max")]]
        for n, f in foi.items()
    ]
    return [
        table(["policy", "jobs", "mean", "P50", "P95", "min", "max"], rows, row_ids=list(foi)),
        _note(
            f"Factor = JCT under {baseline} / JCT under the policy, per job succeeded in both "
            "(> 1 is faster than the baseline)."
        ),
        *[f'<p class="note identical">{_e(line)}</p>' for line in identical_lines(foi, baseline)],
    ]


#: Above this many policies the CDF section adds one JCT CDF panel per policy.
OVERLAY_MAX = 8


def cdfs(
    runs: Mapping[str, RunMetrics],
    foi: Mapping[str, Mapping[str, Any]],
    baseline: str | None,
) -> list[str]:
    names = list(runs)

    def of(attr: str) -> dict[str, list[float]]:
        return {
            n: [getattr(j, attr) for j in r.jobs if j.finished and getattr(j, attr) is not None]
            for n, r in runs.items()
        }

    jcts = of("jct_s")
    out = [
        figure(
            charts.cdf(
                jcts,
                names,
                xlabel="job completion time (s)",
                title="JCT CDF (succeeded jobs)",
            ),
            cls="cdf jct",
        ),
        figure(
            charts.cdf(
                of("slowdown"),
                names,
                xlabel="slowdown (JCT / JCT alone)",
                title="Slowdown CDF",
                seconds=False,
            ),
            cls="cdf slowdown",
        ),
        figure(
            charts.cdf(
                of("wait_s"),
                names,
                xlabel="waiting time (s)",
                title="Waiting time CDF (submission to first container)",
                log_x=False,
            ),
            cls="cdf wait",
        ),
    ]
    if len(names) > OVERLAY_MAX:
        out += [
            panels(
                "jct-cdf",
                names,
                lambda n: charts.cdf_panel(n, jcts, names, xlabel="job completion time (s)"),
            ),
            _note(
                f"With more than {OVERLAY_MAX} policies the overlay is hard to read: the JCT "
                "CDF again, one panel per policy over every other policy's in grey."
            ),
        ]
    if baseline is not None and foi:
        values = {n: [v for v, _ in f.get("cdf", [])] for n, f in foi.items()}
        out.append(
            figure(
                charts.cdf(
                    values,
                    names,
                    xlabel=f"factor of improvement vs {baseline}",
                    title=f"Factor of improvement vs {baseline} (> 1: faster)",
                    seconds=False,
                    mark=1.0,
                ),
                cls="cdf improvement",
            )
        )
    return out


def horizon(runs: Mapping[str, RunMetrics]) -> float:
    """The longest run's span in seconds (the shared x limit of per-policy panels)."""
    spans = [
        s[-1][0] - s[0][0] for r in runs.values() for s in r.utilization.values() if len(s) > 1
    ]
    ends = []
    for r in runs.values():
        if r.jobs:
            t0 = min(j.submit_s for j in r.jobs)
            ends += [j.finish_s - t0 for j in r.jobs if j.finish_s is not None]
    return max([*spans, *ends, 0.0])

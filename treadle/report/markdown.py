"""The side-by-side comparison of one workload replayed under several policies.

``write_comparison`` takes, per policy, the ``RunMetrics`` that ``treadle.metrics.analyze``
computes from that policy's event log, and writes to ``out_dir``:

* ``comparison.json``: {policy: summary}, each summary as in summary.json plus, when a
  baseline is given and present, ``vs_baseline`` (factor of improvement, baseline excluded);
  when a reference is given and present, ``vs_reference`` (DVR, DSR, their counts and each
  user's mean JCT relative to the reference's, reference excluded:
  ``treadle.metrics.reference``); with ``paper_compat``, ``paper_compat`` (the same
  figures by the UWFQ authors' analysis quirks);
* ``report.md``: run parameters, the comparison table, the JCT rank groups and best/worst
  users, the deadline table against the reference, the factor-of-improvement table and
  the two plots as relative image links;
* ``jct_cdf.png``: JCT CDF per policy (log x when the JCTs span more than two decades);
* ``utilization.png``: allocated fraction of capacity over time (seconds), one subplot
  per resource;
* ``report.html`` (``treadle.report.page``): all of it and more on one self-contained page;
* ``report_inputs.json`` (``treadle.report.inputs``): what ``treadle report DIR`` needs to
  build the report again.

Plots use ``matplotlib.figure.Figure`` directly (no pyplot, no global backend state).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from treadle.metrics import (
    RunMetrics,
    against_reference,
    factor_of_improvement,
    rounded,
    write_json,
)
from treadle.report.cells import GROUPS, num, param, percent, signed, user_cell
from treadle.report.charts import policy_style, seconds_axis
from treadle.report.series import plot_points
from treadle.report.verdicts import identical_lines

COMPARISON_JSON = "comparison.json"
REPORT_MD = "report.md"
JCT_CDF_PNG = "jct_cdf.png"
UTILIZATION_PNG = "utilization.png"
REPORT_HTML = "report.html"

_FIGSIZE = (8.0, 4.5)
_DPI = 100

_PARAMS: tuple[tuple[str, str], ...] = (
    ("workload", "workload"),
    ("mode", "mode"),
    ("dilation", "dilation"),
    ("seed", "seed"),
    ("heartbeat_s", "heartbeat (s)"),
    ("nodes", "nodes"),
    ("capacity", "capacity"),
)


def write_comparison(
    runs: Mapping[str, RunMetrics],
    out_dir: Path,
    *,
    baseline: str | None = None,
    title: str = "",
    reference: str | None = None,
    paper_compat: bool = False,
    users: Sequence[str] | None = None,
    user_weights: Mapping[str, float] | None = None,
    parameters: Mapping[str, Mapping[str, Any]] | None = None,
    options: Mapping[str, Any] | None = None,
    notes: str = "",
) -> Path:
    """Write comparison.json, report.md, jct_cdf.png, utilization.png, report.html and
    report_inputs.json; return report.md.

    ``runs`` maps policy names to their metrics, in the order the table should list them.
    A ``baseline`` or ``reference`` that is not among ``runs`` is reported in report.md
    (and its figures omitted), not raised. ``users``: the workload's declared users (the
    ``paper_compat`` figures collect jobs by them); ``user_weights`` weigh their Jain's
    index over time in report.html; ``parameters``: each policy's resolved parameters
    (``treadle.report.inputs.policy_parameters``); ``options``: the run options
    (``treadle.report.inputs.run_options``); ``notes``: Markdown appended to
    report.md (and shown in report.html), the live runs' lag and fidelity.
    The HTML page reads each run's event log from ``out_dir/POLICY/``.
    """
    if not runs:
        raise ValueError("write_comparison: no runs to compare")
    out_dir.mkdir(parents=True, exist_ok=True)

    foi: dict[str, dict[str, Any]] = {}
    if baseline is not None and baseline in runs:
        base_jobs = runs[baseline].jobs
        for name, run in runs.items():
            if name != baseline:
                foi[name] = {"baseline": baseline, **factor_of_improvement(base_jobs, run.jobs)}

    jobs = {name: run.jobs for name, run in runs.items()}
    extra = against_reference(jobs, reference, paper_compat=paper_compat, users=users)
    comparison: dict[str, Any] = {}
    for name, run in runs.items():
        entry = dict(run.summary)
        if name in foi:
            entry["vs_baseline"] = foi[name]
        entry.update(extra[name])
        comparison[name] = entry
    write_json(rounded(comparison), out_dir / COMPARISON_JSON)

    _plot_jct_cdf(runs, out_dir / JCT_CDF_PNG)
    _plot_utilization(runs, out_dir / UTILIZATION_PNG)

    path = out_dir / REPORT_MD
    text = _markdown(runs, foi, baseline, title, rounded(extra), reference, paper_compat)
    path.write_text(text + notes, encoding="utf-8")

    from treadle.report.inputs import ReportInputs
    from treadle.report.page import write_html

    inputs = ReportInputs(
        title=title,
        policies=list(runs),
        baseline=baseline,
        reference=reference,
        paper_compat=paper_compat,
        users=list(users) if users is not None else None,
        user_weights=dict(user_weights) if user_weights is not None else None,
        parameters={k: dict(v) for k, v in (parameters or {}).items()},
        options=dict(options or {}),
    )
    inputs.write(out_dir)
    write_html(runs, out_dir, inputs, foi, rounded(extra), notes)
    return path


# --------------------------------------------------------------------------------------
# Markdown


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, numeric: bool = True
) -> list[str]:
    """A Markdown table; with ``numeric`` every column but the first is right-aligned."""
    align = ["---"] + ["---:" if numeric else "---"] * (len(header) - 1)
    out = ["| " + " | ".join(_cell(h) for h in header) + " |", "| " + " | ".join(align) + " |"]
    out.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)
    return out


def _markdown(
    runs: Mapping[str, RunMetrics],
    foi: Mapping[str, Mapping[str, Any]],
    baseline: str | None,
    title: str,
    extra: Mapping[str, Mapping[str, Any]],
    reference: str | None,
    paper_compat: bool,
) -> str:
    lines = [f"# {title or 'Policy comparison'}", ""]
    lines += _run_parameters(runs)
    lines += _results(runs)
    lines += _groups_and_users(runs)
    if reference is not None:
        lines += _versus_reference(runs, extra, reference)
    if paper_compat:
        lines += _paper_compat(extra, reference)
    if baseline is not None:
        lines += _improvement(runs, foi, baseline)
    lines += _plots()
    return "\n".join(lines)


def _run_parameters(runs: Mapping[str, RunMetrics]) -> list[str]:
    """Each run parameter: its one value, or each policy's when they differ."""
    params = []
    for key, label in _PARAMS:
        values = {name: param(run.summary.get(key)) for name, run in runs.items()}
        if len(set(values.values())) == 1:
            params.append([label, next(iter(values.values()))])
        else:
            params.append([label, "; ".join(f"{n}: {v}" for n, v in values.items())])
    first = next(iter(runs.values())).summary.get("parameters") or {}
    scaling = (first.get("workload") or {}).get("scaling")
    if scaling:  # --nodes, --nodes-scale, --load: the same for every run compared
        params.append(["scaling", param(scaling)])
    return ["## Run parameters", "", *_table(["parameter", "value"], params, numeric=False), ""]


def _results(runs: Mapping[str, RunMetrics]) -> list[str]:
    """The comparison table: one row of headline figures per policy."""
    resources = sorted({r for run in runs.values() for r in run.summary.get("utilization", {})})
    header = [
        "policy",
        "jobs",
        "finished",
        "makespan (s)",
        "mean JCT (s)",
        "P50 JCT (s)",
        "P95 JCT (s)",
        "worst 10% JCT (s)",
        "mean slowdown",
        "mean wait (s)",
        *[f"util {r}" for r in resources],
        "Jain users",
        "Jain jobs",
    ]
    rows = []
    for name, run in runs.items():
        s = run.summary
        util = s.get("utilization", {})
        rows.append(
            [
                name,
                num(s.get("jobs")),
                num(s.get("finished")),
                num(s.get("makespan_s")),
                num(s.get("mean_jct_s")),
                num(s.get("p50_jct_s")),
                num(s.get("p95_jct_s")),
                num(s.get("worst10_jct_s")),
                num(s.get("mean_slowdown")),
                num(s.get("mean_wait_s")),
                *[percent(util.get(r)) for r in resources],
                num(s.get("jain_users_mean"), 3),
                num(s.get("jain_jobs_mean"), 3),
            ]
        )
    return [
        "## Results",
        "",
        *_table(header, rows),
        "",
        "JCT, slowdown and wait are over the jobs that succeeded. Utilization is the mean "
        "allocated fraction of capacity from the first submission to the last job end. "
        "Jain is the mean of Jain's index of dominant-share-seconds over "
        f"{param(next(iter(runs.values())).summary.get('jain_window_s'))} s windows.",
        "",
    ]


def _improvement(
    runs: Mapping[str, RunMetrics], foi: Mapping[str, Mapping[str, Any]], baseline: str
) -> list[str]:
    """The factor of improvement of each policy over ``baseline``."""
    lines = [f"## Factor of improvement vs {baseline}", ""]
    if baseline not in runs:
        lines += [f"Baseline {baseline!r} is not among the runs compared.", ""]
    elif not foi:
        lines += ["No other policy to compare.", ""]
    else:
        frows = [
            [
                name,
                num(f["jobs"]),
                num(f["mean"], 3),
                num(f["p50"], 3),
                num(f["p95"], 3),
                num(f["min"], 3),
                num(f["max"], 3),
            ]
            for name, f in foi.items()
        ]
        lines += [
            *_table(["policy", "jobs", "mean", "P50", "P95", "min", "max"], frows),
            "",
            f"Factor = JCT under {baseline} / JCT under the policy, per job succeeded in "
            "both (> 1 is faster than the baseline).",
            "",
        ]
        identical = identical_lines(foi, baseline)
        lines += [*(f"- {line}" for line in identical), *([""] if identical else [])]
    return lines


def _plots() -> list[str]:
    """Where the plots and the rest of the report are."""
    return [
        "## Plots",
        "",
        f"More in `{REPORT_HTML}` (one page, opens offline): every policy's parameters, "
        "per-user and per-queue tables, CDFs, Jain's index over time, utilization per policy "
        "and a timeline of jobs.",
        "",
        f"![JCT CDF]({JCT_CDF_PNG})",
        "",
        f"![Cluster utilization]({UTILIZATION_PNG})",
        "",
    ]


#: Show each user's mean JCT per policy when there are at most this many users.
MAX_USER_ROWS = 30


def _groups_and_users(runs: Mapping[str, RunMetrics]) -> list[str]:
    rows = []
    for name, run in runs.items():
        s = run.summary
        groups = s.get("jct_groups_s") or {}
        rows.append(
            [
                name,
                *[num(groups.get(g)) for g in GROUPS],
                user_cell(s.get("best_user")),
                user_cell(s.get("worst_user")),
            ]
        )
    header = ["policy", *[f"{g} JCT (s)" for g in GROUPS], "best user (s)", "worst user (s)"]
    return [
        "## Response-time groups and users",
        "",
        *_table(header, rows),
        "",
        "Each run's JCTs sorted ascending, the mean of ranks [0, 0.8N), [0.8N, 0.95N) and "
        "[0.95N, N) (groups by rank, not by job size); best and worst user: the users of "
        "lowest and highest mean JCT.",
        "",
    ]


def _versus_reference(
    runs: Mapping[str, RunMetrics], extra: Mapping[str, Mapping[str, Any]], reference: str
) -> list[str]:
    lines = [f"## Deadlines and users vs {reference}", ""]
    if reference not in runs:
        return [
            *lines,
            f"The reference {reference!r} is not among the runs compared: no DVR, DSR or "
            "per-user figures (add it to the policies, or name another with --reference).",
            "",
        ]
    rows = []
    for name in runs:
        vs = extra[name].get("vs_reference")
        if vs is None:
            rows.append([name, "reference" if name == reference else "-", *["-"] * 7])
            continue
        sp = vs["user_rt_vs_reference_spread"]
        spread = [signed(sp[k]) for k in ("median", "min", "max")]
        rows.append([name, num(vs["jobs"]), *_deadline_cells(vs), *spread])
    header = ["policy", "jobs", "DVR", "violations", "DSR", "slack"]
    header += ["user RT median", "user RT min", "user RT max"]
    lines += [
        *_table(header, rows),
        "",
        f"Per job that succeeded in both runs, v = ((F - t0) - (F_ref - t0_ref)) / RT_ref "
        f"(F: finish, t0: the run's first submission, RT_ref: the JCT under {reference}). "
        "DVR: mean v over the violations (v > 0); DSR: mean |v| over the slack (v <= 0, zero "
        f"counts as slack). User RT: each user's mean JCT / its mean JCT under {reference} "
        "- 1, median, min and max over users (the UWFQ paper's Fig. 7).",
        "",
    ]
    users = sorted({u for run in runs.values() for u in run.summary.get("per_user", {})})
    if 0 < len(users) <= MAX_USER_ROWS:
        urows = []
        for u in users:
            row = [u]
            for name, run in runs.items():
                mean_s = run.summary.get("per_user", {}).get(u, {}).get("mean_jct_s")
                rel = (extra[name].get("vs_reference") or {}).get("user_rt_vs_reference", {})
                cell = num(mean_s)
                if u in rel:
                    cell += f" ({signed(rel[u])})"
                row.append(cell)
            urows.append(row)
        lines += [
            *_table(["user", *runs], urows),
            "",
            f"Mean JCT (s) of each user, and relative to {reference} in brackets.",
            "",
        ]
    return lines


def _deadline_cells(vs: Mapping[str, Any] | None) -> list[str]:
    """DVR, violations, DSR and slack ("-" without a reference)."""
    keys = ("dvr", "violations", "dsr", "slack")
    return ["-"] * len(keys) if vs is None else [num(vs[k]) for k in keys]


def _paper_compat(extra: Mapping[str, Mapping[str, Any]], reference: str | None) -> list[str]:
    rows = []
    for name, e in extra.items():
        c = e["paper_compat"]
        vs = c.get("vs_reference")
        groups = c["jct_groups_s"]
        rt = [num(c[k]) for k in ("entries", "mean_jct_s", "worst10_jct_s")]
        rt += [num(groups.get(g)) for g in GROUPS]
        rows.append([name, *rt, *_deadline_cells(vs)])
    header = ["policy", "entries", "mean JCT (s)", "worst 10% (s)", *GROUPS]
    header += ["DVR", "violations", "DSR", "slack"]
    return [
        "## As the UWFQ authors' analysis counts (paper_compat)",
        "",
        *_table(header, rows),
        "",
        "Figures over the authors' entries, not the jobs: a user collects the jobs of every "
        "user whose name contains its name (user_1 takes user_10's), and jobs of a micro "
        "type (loop<N>_) enter the deadline figures twice "
        f"(reference: {reference or '-'}). The tables above are the correct figures.",
        "",
    ]


# --------------------------------------------------------------------------------------
# Plots


def _plot_jct_cdf(runs: Mapping[str, RunMetrics], path: Path) -> None:
    fig = Figure(figsize=_FIGSIZE, dpi=_DPI)
    ax = fig.add_subplot()
    lo, hi = math.inf, 0.0
    plotted = 0
    for i, (name, run) in enumerate(runs.items()):
        jcts = sorted(j.jct_s for j in run.jobs if j.finished and j.jct_s is not None)
        if not jcts:
            continue
        n = len(jcts)
        ys = [(i + 1) / n for i in range(n)]
        ax.step(
            [jcts[0], *jcts], [0.0, *ys], where="post", label=f"{name} ({n})", **policy_style(i)
        )
        positive = [x for x in jcts if x > 0]
        if positive:
            lo = min(lo, positive[0])
        hi = max(hi, jcts[-1])
        plotted += 1
    if plotted and lo > 0 and hi / lo > 100:
        ax.set_xscale("log")
    if not plotted:
        ax.text(0.5, 0.5, "no job finished", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.legend(loc="lower right", fontsize="small")
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0.0, 1.02)
    ax.grid(True, alpha=0.3)
    ax.set_title("JCT CDF (succeeded jobs)")
    fig.tight_layout()
    fig.savefig(path, format="png")
    fig.clear()


def _plot_utilization(runs: Mapping[str, RunMetrics], path: Path) -> None:
    resources = sorted({r for run in runs.values() for r in run.utilization})
    fig = Figure(figsize=(_FIGSIZE[0], max(_FIGSIZE[1], 2.0 * len(resources))), dpi=_DPI)
    if not resources:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "no utilization data", ha="center", va="center")
        ax.set_axis_off()
    else:
        span = max(
            (s[-1][0] - s[0][0] for run in runs.values() for s in run.utilization.values() if s),
            default=0.0,
        )
        axes = fig.subplots(len(resources), 1, sharex=True, squeeze=False)[:, 0]
        for ax, res in zip(axes, resources, strict=True):
            for i, (name, run) in enumerate(runs.items()):
                series = run.utilization.get(res)
                if not series:
                    continue
                xs, ys = plot_points(series)
                t0 = series[0][0]
                ax.step([x - t0 for x in xs], ys, where="post", label=name, **policy_style(i))
            ax.set_ylabel(res)
            seconds_axis(ax)
            ax.set_ylim(0.0, 1.05)
            ax.grid(True, alpha=0.3)
        axes[0].set_title("allocated fraction of capacity (from first submission)")
        axes[0].legend(loc="upper right", fontsize="small")
        axes[-1].set_xlabel("time (s)")
        axes[-1].set_xlim(0.0, max(span, 1e-9))
    fig.tight_layout()
    fig.savefig(path, format="png")
    fig.clear()

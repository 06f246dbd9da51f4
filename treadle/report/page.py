"""``write_html``: report.html from the runs' metrics and their event logs (see
``treadle.report.html`` for its sections)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from treadle.metrics import RunMetrics
from treadle.report import charts, families, html as h
from treadle.report.inputs import ReportInputs
from treadle.report.logdata import LogExtras, read_extras

REPORT_HTML = "report.html"


def write_html(
    runs: Mapping[str, RunMetrics],
    out_dir: Path,
    inputs: ReportInputs,
    foi: Mapping[str, Mapping[str, Any]],
    extra: Mapping[str, Mapping[str, Any]],
    notes: str = "",
) -> Path:
    """Write ``out_dir/report.html``; the runs' logs are read from ``out_dir/POLICY/``."""
    logs = {n: read_extras(out_dir / n, inputs.user_weights) for n in runs}
    path = out_dir / REPORT_HTML
    path.write_text(render(runs, inputs, foi, extra, logs, notes), encoding="utf-8")
    return path


def render(
    runs: Mapping[str, RunMetrics],
    inputs: ReportInputs,
    foi: Mapping[str, Mapping[str, Any]],
    extra: Mapping[str, Mapping[str, Any]],
    logs: Mapping[str, LogExtras],
    notes: str = "",
) -> str:
    page = h.Page()
    _add_tables(page, runs, inputs, foi, extra)
    _add_charts(page, runs, logs)
    _add_families(page, runs, inputs, extra, logs, notes)
    return page.render(inputs.title or "Policy comparison")


def _add_tables(
    page: h.Page,
    runs: Mapping[str, RunMetrics],
    inputs: ReportInputs,
    foi: Mapping[str, Mapping[str, Any]],
    extra: Mapping[str, Mapping[str, Any]],
) -> None:
    """The sections every report has, from the parameters to the distributions."""
    page.add("parameters", "Run parameters", *h.parameters(runs, inputs))
    page.add("results", "Results", *h.results(runs))
    page.add("groups", "Response-time groups and users", *h.groups(runs))
    page.add("per-user", "Per user", *h.per_user(runs, extra))
    page.add("per-queue", "Per queue", *h.per_queue(runs))
    baseline = inputs.baseline
    if baseline is not None and baseline in runs and foi:
        page.add(
            "improvement", f"Factor of improvement vs {baseline}", *h.improvement(foi, baseline)
        )
    page.add("cdfs", "Distributions", *h.cdfs(runs, foi, baseline))


def _add_charts(
    page: h.Page, runs: Mapping[str, RunMetrics], logs: Mapping[str, LogExtras]
) -> None:
    """The sections of one chart per policy: Jain's index, utilization, timeline."""
    names = list(runs)
    t_max = h.horizon(runs)
    no_log = [n for n in names if logs.get(n, LogExtras()).log is None]
    missing = h._note(f"No event log (--events none): {', '.join(no_log)}.") if no_log else ""
    page.add(
        "jain",
        "Jain's index over time",
        h.panels(
            "jain",
            names,
            lambda n: charts.jain_panel(
                n,
                logs[n].jain if n in logs else None,
                (runs[n].summary.get("jain_users_mean"), runs[n].summary.get("jain_jobs_mean")),
                t_max,
                names.index(n),
            ),
        ),
        h._note(
            "Per window, Jain's index of the dominant-share-seconds of the active users "
            "(solid, divided by their weights) and jobs (dashed); grey lines: the run's means "
            "(the results table's). Windows with fewer than two active users or jobs have none."
        ),
        missing,
    )
    page.add(
        "utilization",
        "Utilization",
        h.panels(
            "utilization",
            names,
            lambda n: charts.utilization_panel(n, runs[n].utilization, t_max),
        ),
        h._note(
            "Allocated fraction of the capacity of each resource, one panel per policy, "
            "from the first submission (seconds; the same axes in every panel)."
        ),
    )
    queues = sorted({j.queue for r in runs.values() for j in r.jobs})
    page.add(
        "timeline",
        "Timeline of jobs",
        h.panels("timeline", names, lambda n: charts.gantt_panel(n, runs[n].jobs, queues, t_max)),
        h._note(
            "One row per job in submission order: grey while it waits for its first "
            "container, then coloured by queue until it ends (red: failed or killed)."
        ),
    )


def _add_families(
    page: h.Page,
    runs: Mapping[str, RunMetrics],
    inputs: ReportInputs,
    extra: Mapping[str, Mapping[str, Any]],
    logs: Mapping[str, LogExtras],
    notes: str,
) -> None:
    """The sections a report has when its runs have their figures: against the
    reference, as the paper counts, estimation, DP accounts, the live runs' fidelity."""
    names = list(runs)
    reference = inputs.reference
    if reference is not None and any((extra.get(n) or {}).get("vs_reference") for n in names):
        page.add(
            "vs-reference",
            f"Deadlines and users vs {reference}",
            *families.vs_reference(runs, extra, reference),
        )
    if inputs.paper_compat and any((extra.get(n) or {}).get("paper_compat") for n in names):
        compat = families.paper_compat(extra)
        page.add("paper-compat", "As the UWFQ authors' analysis counts", *compat)
    if any(logs[n].estimates for n in names if n in logs):
        exact = families.exact_estimates(names, logs)
        if exact:
            page.add("estimation", "Estimation error", h._note(exact))
        else:
            page.add("estimation", "Estimation error", *families.estimation(names, logs))
    if any(logs[n].dp for n in names if n in logs):
        if families.no_dp_account(logs):
            page.add("dp-accounts", "DP accounts", h._note(families.NO_DP_ACCOUNT))
        else:
            accounts = families.dp_accounts(runs, logs, h.horizon(runs))
            page.add("dp-accounts", "DP accounts", *accounts)
    if notes.strip():
        page.add(
            "fidelity", "Lag and fidelity of the live runs", f"<pre>{h._e(notes.strip())}</pre>"
        )

"""``treadle report DIR``: build a comparison's report again from its results directory.

It reads what ``treadle compare`` wrote: ``report_inputs.json`` (the policies in their
order, baseline, reference, parameters...; without it, as ``comparison.json`` says, the
policies in name order), and per policy ``summary.json``, ``jobs.parquet`` (or
``jobs.csv``) and the event log (for the utilization, Jain's index over time and the
sections other events feed; a run without one has none of those). It then writes
``comparison.json``, ``report.md``, the two PNGs and ``report.html`` as the comparison
did: the same bytes for the first three when nothing changed.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from treadle.errors import InputError
from treadle.metrics import JobResult, RunMetrics
from treadle.metrics.scan import scan
from treadle.metrics.utilization import utilization_series_from
from treadle.report.inputs import ReportInputs
from treadle.report.logdata import event_log, metrics_source
from treadle.report.series import thinned

COMPARISON_JSON = "comparison.json"
_FLOATS = ("submit_s", "start_s", "finish_s", "jct_s", "wait_s", "slowdown", "alone_jct_s")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        msg = "missing (not a treadle compare results directory?)"
        raise InputError(str(path), None, msg) from None
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(str(path), None, f"unreadable: {e}") from None


def _jobs(run_dir: Path) -> list[JobResult]:
    fields = list(JobResult.__dataclass_fields__)
    if (run_dir / "jobs.parquet").exists():
        import pyarrow.parquet as pq

        rows = pq.read_table(str(run_dir / "jobs.parquet"), columns=fields).to_pylist()
        return [JobResult(**{k: r[k] for k in fields}) for r in rows]
    path = run_dir / "jobs.csv"
    if not path.exists():
        raise InputError(str(run_dir), None, "no jobs.parquet or jobs.csv")
    out = []
    with path.open(encoding="utf-8", newline="") as f:
        for n, r in enumerate(csv.DictReader(f), 2):
            try:
                vals: dict[str, Any] = {k: r[k] for k in fields}
                for k in _FLOATS:
                    vals[k] = float(vals[k]) if vals[k] != "" else None
                vals["tasks"] = int(vals["tasks"])
            except (KeyError, ValueError) as e:
                raise InputError(str(path), f"line {n}", f"bad job row: {e}") from None
            out.append(JobResult(**vals))
    return out


def load_run(run_dir: Path) -> RunMetrics:
    """A run's metrics from its files (the utilization series thinned as compare keeps it)."""
    summary = _json(run_dir / "summary.json")
    log = event_log(run_dir)
    utilization = thinned(utilization_series_from(scan(metrics_source(log)))) if log else {}
    return RunMetrics(summary, _jobs(run_dir), utilization)


def _inferred(out_dir: Path, comparison: dict[str, Any]) -> ReportInputs:
    policies = sorted(comparison)
    baseline = reference = None
    for entry in comparison.values():
        baseline = baseline or (entry.get("vs_baseline") or {}).get("baseline")
        reference = reference or (entry.get("vs_reference") or {}).get("reference")
    first = comparison[policies[0]] if policies else {}
    return ReportInputs(
        title=f"treadle: {first.get('workload')} under {len(policies)} policies",
        policies=policies,
        baseline=baseline,
        reference=reference,
        paper_compat=any("paper_compat" in e for e in comparison.values()),
    )


def rebuild(out_dir: Path) -> Path:
    """Write the report of the comparison in ``out_dir`` again; return report.md's path."""
    from treadle.report.markdown import write_comparison

    if not out_dir.is_dir():
        raise InputError(str(out_dir), None, "not a directory")
    inputs = ReportInputs.read(out_dir)
    if inputs is None:
        inputs = _inferred(out_dir, _json(out_dir / COMPARISON_JSON))
    if not inputs.policies:
        raise InputError(str(out_dir), None, "no policies to report")
    runs = {name: load_run(out_dir / name) for name in inputs.policies}
    notes = ""
    report_md = out_dir / "report.md"
    if report_md.exists():  # live runs' lag: the part of report.md compare appended
        text = report_md.read_text(encoding="utf-8")
        mark = text.find("\n## Lag and fidelity of the live runs")
        notes = text[mark:] if mark >= 0 else ""
    return write_comparison(
        runs,
        out_dir,
        baseline=inputs.baseline,
        title=inputs.title,
        reference=inputs.reference,
        paper_compat=inputs.paper_compat,
        users=inputs.users,
        user_weights=inputs.user_weights,
        parameters=inputs.parameters,
        options=inputs.options,
        notes=notes,
    )

"""A study's report: ``report.md`` (its tables) and ``report.html`` (the tables, bar
charts of every metric's mean with its 95% CI as error bars, the parameter sweeps and the
drill-down links), from an ``Analysis`` (``treadle.study.studies``).

Per workload: the mean and the median of every metric per config with their CIs and
``n``; each config against the baseline (ratio of means, its CI, the Wilcoxon p-value,
``n`` pairs; a ratio whose CI includes 1 is marked ``n.d.``, not distinguishable); a
sweep per grid parameter (one line per policy over the parameter's values, the CI as a
band). A section whose data would mean nothing is left out with a one-line reason.
Colours follow ``treadle.report.charts.policy_style`` by the policy's place in the study.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treadle.report.cells import num
from treadle.study import stats

if TYPE_CHECKING:
    from treadle.study.analysis import Analysis

REPORT_MD = "report.md"
REPORT_HTML = "report.html"
ND = "n.d."  # not distinguishable from the baseline


def interval(iv: stats.Interval | None) -> str:
    """``148.60 [140.10, 155.20]``; ``-`` without a value, no brackets without a CI."""
    if iv is None:
        return "-"
    if iv.low is None or iv.high is None:
        return num(iv.value)
    return f"{num(iv.value)} [{num(iv.low)}, {num(iv.high)}]"


def pair_cell(p: stats.Paired) -> str:
    """``0.92 [0.88, 0.97] p=0.0625``, with ``n.d.`` when the CI includes 1."""
    text = interval(p.ratio) if p.ratio is not None else "- (baseline mean 0)"
    if p.distinguishable is False:
        text += f" {ND}"
    if p.p_value is not None:
        return text + f" p={p.p_value:.4g}"
    return text + (" p=- (all equal)" if p.n > 1 else " p=-")


def _configs(analysis: Analysis, workload: str) -> list[str]:
    return [c.label for c in analysis.study.configs if (workload, c.label) in analysis.cells]


def cell_rows(analysis: Analysis, workload: str, stat: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of ``stat`` (``mean`` or ``median``) per config and metric."""
    metrics = list(analysis.study.doc.metrics)
    header = ["config", "n", *metrics]
    rows = []
    for label in _configs(analysis, workload):
        cells = analysis.cells[(workload, label)]
        n = max((c.n for c in cells.values()), default=0)
        row = [label, str(n)]
        row += [interval(getattr(cells[m], stat)) if m in cells else "-" for m in metrics]
        rows.append(row)
    return header, rows


def pair_rows(analysis: Analysis, workload: str) -> tuple[list[str], list[list[str]]]:
    metrics = list(analysis.study.doc.metrics)
    header = ["config", "n pairs", *metrics]
    rows = []
    for label in _configs(analysis, workload):
        pairs = analysis.pairs.get((workload, label))
        if pairs is None:
            continue
        n = max((p.n for p in pairs.values()), default=0)
        rows.append([label, str(n), *(pair_cell(pairs[m]) if m in pairs else "-" for m in metrics)])
    return header, rows


def reasons(analysis: Analysis) -> dict[str, str]:
    """The sections left out, each with its one-line reason."""
    study = analysis.study
    out: dict[str, str] = {}
    if len(study.replications) < 2:
        out["ci"] = (
            "Confidence intervals and p-values need 2 replications or more; this study has 1."
        )
    if study.baseline is None:
        out["pairs"] = "No paired comparison: the spec names no baseline and fifo is not run."
    if not sweep_axes(analysis):
        out["sweeps"] = "No parameter sweep: no `set` key of the spec has a list of values."
    return out


def sweep_axes(analysis: Analysis) -> list[str]:
    """The grid parameters (by name) with more than one value."""
    names: list[str] = []
    for key, value in analysis.study.doc.set.items():
        param = key.partition(".")[2]
        if isinstance(value, list) and len(value) > 1 and param not in names:
            names.append(param)
    return names


def _header(analysis: Analysis) -> list[str]:
    study = analysis.study
    reps = study.replications
    seeds = f"{reps[0].seed}..{reps[-1].seed}" if len(reps) > 1 else str(reps[0].seed)
    return [
        f"Spec: `{Path(study.source).name}`. Workloads: {', '.join(study.workloads)}. "
        f"{len(study.configs)} configs x {len(reps)} replications (vary {study.doc.vary}, "
        f"seeds {seeds}) = {len(study.configs) * len(reps) * len(study.workloads)} runs "
        f"per the tables' n. Baseline: {study.baseline or 'none'}.",
        f"Statistics: 95% percentile-bootstrap CIs ({stats.RESAMPLES} resamples, seed "
        f"{stats.SEED}); ratios of means paired on the same seeds; two-sided Wilcoxon "
        f"signed-rank p-values; {ND}: the ratio's CI includes 1.",
    ]


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return [*lines, ""]


def markdown(analysis: Analysis, drill: Mapping[tuple[str, int], Path], out_dir: Path) -> str:
    study = analysis.study
    lines = [f"# treadle study: {Path(study.source).name}", "", *_header(analysis), ""]
    skipped = reasons(analysis)
    for text in skipped.values():
        lines += [f"_{text}_", ""]
    for w in study.workloads:
        lines += [f"## {w}", "", "### Mean per config (95% CI)", ""]
        lines += _md_table(*cell_rows(analysis, w, "mean"))
        lines += ["### Median per config (95% CI)", ""]
        lines += _md_table(*cell_rows(analysis, w, "median"))
        if "pairs" not in skipped:
            lines += [f"### Ratio of means against {study.baseline}, paired on seeds", ""]
            lines += _md_table(*pair_rows(analysis, w))
    lines += ["## Drill-down: the compare report of one replication", ""]
    lines += [f"- {line}" for line in drill_lines(drill, out_dir)]
    return "\n".join(lines) + "\n"


def drill_lines(drill: Mapping[tuple[str, int], Path], out_dir: Path) -> list[str]:
    out = []
    for (w, r), where in drill.items():
        rel = os.path.relpath(where, out_dir)
        if (where / REPORT_HTML).is_file():
            out.append(f"{w}, replication {r}: [{rel}/report.html]({rel}/report.html)")
        else:
            out.append(f"{w}, replication {r}: `treadle report {rel}` (in the study's folder)")
    return out


def policy_index(analysis: Analysis) -> dict[str, int]:
    """Each policy's place in the study (its colour and line style)."""
    order: dict[str, int] = {}
    for c in analysis.study.configs:
        order.setdefault(c.policy, len(order))
    return order


def grid_lines(analysis: Analysis, param: str) -> dict[str, tuple[str, list[tuple[Any, str]]]]:
    """For sweep parameter ``param``: per line (a policy, with its other grid values), its
    policy and the (value, config label) points in the grid's order."""
    lines: dict[str, tuple[str, list[tuple[Any, str]]]] = {}
    for c in analysis.study.configs:
        if param not in c.grid:
            continue
        others = ",".join(f"{k}={v}" for k, v in c.grid.items() if k != param)
        name = c.policy + (f" [{others}]" if others else "")
        lines.setdefault(name, (c.policy, []))[1].append((c.grid[param], c.label))
    return lines

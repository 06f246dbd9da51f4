"""``report.html`` of a study (``treadle.study.study_report`` says what it holds): one
self-contained page, its charts base64 PNGs drawn with matplotlib's ``Figure`` (no
pyplot), each config coloured as its policy (``treadle.report.charts.policy_style``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure

from treadle.report import html as h
from treadle.report.charts import data_uri, policy_style
from treadle.study import stats, study_report as sr

if TYPE_CHECKING:
    from treadle.study.analysis import Analysis


_HATCHES = ("", "//", "..", "xx")


def bars(analysis: Analysis, workload: str, metric: str) -> str:
    """Horizontal bars of ``metric``'s mean per config, the 95% CI as error bars."""
    labels = sr._configs(analysis, workload)
    colours = sr.policy_index(analysis)
    policy_of = {c.label: c.policy for c in analysis.study.configs}
    means, err_low, err_high, colour = [], [], [], []
    for label in labels:
        iv = analysis.cells[(workload, label)].get(metric)
        value = iv.mean.value if iv is not None else 0.0
        low = iv.mean.low if iv is not None and iv.mean.low is not None else value
        high = iv.mean.high if iv is not None and iv.mean.high is not None else value
        means.append(value)
        err_low.append(value - low)
        err_high.append(high - value)
        colour.append(policy_style(colours[policy_of[label]])["color"])
    height = max(2.2, 0.7 + 0.28 * len(labels))
    fig = Figure(figsize=(5.2, height))
    left = min(0.5, 0.08 + 0.012 * max((len(lb) for lb in labels), default=4))
    fig.subplots_adjust(left=left, right=0.97, bottom=0.45 / height, top=1 - 0.35 / height)
    ax = fig.add_subplot()
    ys = np.arange(len(labels))
    drawn = ax.barh(ys, means, color=colour, xerr=[err_low, err_high], capsize=3, ecolor="#333")
    for label, patch in zip(labels, drawn.patches, strict=True):  # colours repeat every 10
        patch.set_hatch(_HATCHES[(colours[policy_of[label]] // 10) % len(_HATCHES)])
    ax.set_yticks(ys, labels, fontsize="small")
    ax.invert_yaxis()
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(f"{metric}: mean, 95% CI", fontsize="medium")
    return data_uri(fig)


def sweep(analysis: Analysis, workload: str, param: str, metric: str) -> str:
    """``metric``'s mean over ``param``'s values, one line per policy, its CI a band."""
    fig = Figure(figsize=(5.2, 3.0))
    fig.subplots_adjust(left=0.14, right=0.72, bottom=0.17, top=0.88)
    ax = fig.add_subplot()
    colours = sr.policy_index(analysis)
    lines = sr.grid_lines(analysis, param)
    values = [v for _, pts in lines.values() for v, _ in pts]
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    ticks = list(dict.fromkeys(str(v) for v in values))
    for name, (policy, points) in lines.items():
        xs = [float(v) if numeric else ticks.index(str(v)) for v, _ in points]
        cells = [analysis.cells.get((workload, label), {}).get(metric) for _, label in points]
        ys = [c.mean.value if c else np.nan for c in cells]
        lo = [_bound(c, "low", y) for c, y in zip(cells, ys, strict=True)]
        hi = [_bound(c, "high", y) for c, y in zip(cells, ys, strict=True)]
        style = policy_style(colours[policy])
        ax.plot(xs, ys, marker="o", ms=3, lw=1.2, label=name, **style)
        ax.fill_between(xs, lo, hi, color=style["color"], alpha=0.18, lw=0)
    base = analysis.cells.get((workload, analysis.study.baseline or ""), {}).get(metric)
    if base is not None:  # the baseline has no such parameter: its mean, for reference
        ax.axhline(base.mean.value, color="#777", lw=1, ls=":", label=f"{analysis.study.baseline}")
    if not numeric:
        ax.set_xticks(range(len(ticks)), ticks)
    ax.set_xlabel(param)
    ax.set_title(f"{metric} over {param}", fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small")
    return data_uri(fig)


def _bound(cell: stats.CellStats | None, side: str, value: float) -> float:
    """The CI's ``side`` of the mean of ``cell`` (``value`` without a CI)."""
    bound = getattr(cell.mean, side) if cell is not None else None
    return value if bound is None else float(bound)


def _grid(figures: list[str]) -> str:
    return f'<div class="grid">{"".join(figures)}</div>'


def render(analysis: Analysis, drill: Mapping[tuple[str, int], Path], out_dir: Path) -> str:
    study = analysis.study
    page = h.Page()
    skipped = sr.reasons(analysis)
    page.add("study", "Study", *(h._note(t) for t in sr._header(analysis)),
             *(h._note(t) for t in skipped.values()))  # fmt: skip
    metrics = list(study.doc.metrics)
    for i, w in enumerate(study.workloads):
        sid = f"w{i}"
        page.add(f"{sid}-means", f"{w}: mean per config (95% CI)",
                 h.table(*sr.cell_rows(analysis, w, "mean")),
                 _grid([h.figure(bars(analysis, w, m), m) for m in metrics]))  # fmt: skip
        page.add(f"{sid}-medians", f"{w}: median per config (95% CI)",
                 h.table(*sr.cell_rows(analysis, w, "median")))  # fmt: skip
        if "pairs" not in skipped:
            page.add(f"{sid}-pairs", f"{w}: against {study.baseline}, paired on seeds",
                     h.table(*sr.pair_rows(analysis, w)),
                     h._note(f"Ratio of means [95% CI] and Wilcoxon p; {sr.ND}: the CI "
                             "includes 1 (not distinguishable from the baseline)."))  # fmt: skip
        if "sweeps" not in skipped:
            figs = [
                h.figure(sweep(analysis, w, p, m), f"{m} over {p}")
                for p in sr.sweep_axes(analysis)
                for m in metrics
            ]
            page.add(f"{sid}-sweeps", f"{w}: parameter sweeps", _grid(figs))
    links = []
    for (w, r), where in drill.items():
        rel = os.path.relpath(where, out_dir)
        if (where / sr.REPORT_HTML).is_file():
            links.append(
                f'<li><a href="{h._e(rel)}/report.html">{h._e(w)}, replication {r}</a></li>'
            )
        else:
            links.append(
                f"<li>{h._e(w)}, replication {r}: <code>treadle report {h._e(rel)}</code></li>"
            )
    page.add("drill-down", "Drill-down: the compare report of one replication",
             f"<ul>{''.join(links)}</ul>")  # fmt: skip
    return page.render(f"treadle study: {Path(study.source).name}")

"""A study's statistics table by table: the runs table's metric columns per workload and
config (in replication order), each cell's statistics, and each config against the
baseline paired on the same seeds (``treadle.study.stats`` says what they are)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from treadle.study import stats
from treadle.study.spec import Study


@dataclass
class Analysis:
    """Per workload and config label: each metric's cell statistics, and against the
    baseline (not for the baseline itself) each metric's paired comparison."""

    study: Study
    cells: dict[tuple[str, str], dict[str, stats.CellStats]]
    pairs: dict[tuple[str, str], dict[str, stats.Paired]]
    values: dict[tuple[str, str], dict[str, list[float]]]


def analyse(study: Study, runs: Mapping[str, list[Any]]) -> Analysis:
    """The statistics of the runs table ``runs`` (as columns)."""
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    columns = {m: runs[m] for m in study.doc.metrics if m in runs}
    for i, workload in enumerate(runs["workload"]):
        per = values.setdefault((workload, runs["config"][i]), {})
        for m, column in columns.items():
            if column[i] is not None:
                per.setdefault(m, []).append(float(column[i]))
    cells = {k: {m: stats.cell(v) for m, v in per.items()} for k, per in values.items()}
    pairs: dict[tuple[str, str], dict[str, stats.Paired]] = {}
    if study.baseline is not None:
        for (workload, label), per in values.items():
            if label == study.baseline:
                continue
            base = values.get((workload, study.baseline), {})
            pairs[(workload, label)] = {
                m: stats.paired(v, base[m])
                for m, v in per.items()
                if len(base.get(m, ())) == len(v)
            }
    return Analysis(study, cells, pairs, values)

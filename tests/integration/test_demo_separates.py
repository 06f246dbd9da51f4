"""The built-in demo gives every installed policy something to decide: no two policies'
rows of ``make demo``'s results table are identical (a newcomer would read a tie with
fifo as a broken policy)."""

from __future__ import annotations

import pytest

from treadle.registry import discover
from treadle.study.runner import PolicyChoice, RunOptions, run_sim
from treadle.workload import load_workload

#: The columns of ``treadle compare``'s table.
COLUMNS = ("finished", "makespan_s", "mean_jct_s", "p95_jct_s", "mean_slowdown")


@pytest.mark.slow
def test_no_two_policies_show_the_same_figures_on_the_demo() -> None:
    wl = load_workload("demo")
    rows: dict[tuple[object, ...], list[str]] = {}
    for name in sorted(discover("policies")):
        _, run = run_sim(wl, PolicyChoice(name, {}), options=RunOptions())
        assert run.summary["finished"] == len(wl.jobs), name
        rows.setdefault(tuple(run.summary[c] for c in COLUMNS), []).append(name)
    ties = [names for names in rows.values() if len(names) > 1]
    assert not ties, f"policies with identical results on demo: {ties}"
    assert len(rows) >= 14

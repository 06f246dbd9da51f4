"""The metrics as array code give what the per-record metrics gave (``tests.reference_metrics``,
the implementation they replaced), to the precision the files print (6 decimals; jobs,
series and summaries are compared whole), on the golden logs (demo, dags, sls, rumen under
every policy) and on random logs with and without long idle gaps."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from tests import reference_metrics as _ref  # noqa: F401  (the package docstring says why)
from tests.golden import WORKLOADS, available
from tests.reference_metrics import (
    fairness as ref_fairness,
    jobs as ref_jobs,
    summary as ref_summary,
)
from tests.unit.test_metrics import random_logs, tiny_log
from treadle import metrics
from treadle.registry import discover
from treadle.study.runner import PolicyChoice, RunOptions, run_sim
from treadle.workload import load_workload

Record = dict[str, Any]
WINDOWS = (1.0, 10.0, 60.0)


def as_json(x: Any) -> str:
    return json.dumps(metrics.rounded(x), sort_keys=True, default=str)


def assert_same(records: list[Record], weights: Mapping[str, float] | None = None) -> None:
    """Every metric of ``records``, new against reference."""
    new = metrics.analyze(records, user_weights=weights)
    old = ref_summary.analyze(records, user_weights=weights)
    assert as_json(new.summary) == as_json(old.summary)
    assert [tuple(_fields(j)) for j in new.jobs] == [tuple(_fields(j)) for j in old.jobs]
    assert new.utilization == old.utilization
    for by in ("user", "job"):
        for w in WINDOWS:
            got = metrics.jain_over_windows(records, by, w, weights)  # type: ignore[arg-type]
            want = ref_fairness.jain_over_windows(records, by, w, weights)  # type: ignore[arg-type]
            assert as_json(got) == as_json(want), (by, w)
    old_jobs = ref_jobs.job_results(records)
    got_f = metrics.factor_of_improvement(new.jobs, list(reversed(new.jobs)))
    want_f = ref_jobs.factor_of_improvement(old_jobs, list(reversed(old_jobs)))
    assert as_json(got_f) == as_json(want_f)


def _fields(j: Any) -> list[Any]:
    return [getattr(j, f) for f in metrics.JOBS_CSV_COLUMNS]


def gappy(recs: list[Record], gap: float) -> list[Record]:
    return [{**r, "t": float(r["t"]) + gap if float(r["t"]) > 100 else r["t"]} for r in recs]


@settings(max_examples=300, deadline=None)
@given(recs=random_logs(), gap=st.sampled_from([0.0, 333.3, 5000.0, 1.0e12]), w=st.booleans())
def test_same_as_the_reference_on_random_logs(recs: list[Record], gap: float, w: bool) -> None:
    assert_same(gappy(recs, gap), {"u1": 2.0, "u3": 0.5} if w else None)


@pytest.mark.parametrize("j2_start", [5.0, 10.0, 17.5])
@pytest.mark.parametrize("run_started", [True, False])
def test_same_as_the_reference_on_the_unit_test_log(j2_start: float, run_started: bool) -> None:
    assert_same(tiny_log(j2_start=j2_start, run_started=run_started), {"alice": 2.0})


GOLDEN = [(w, p) for w in available() for p in discover("policies")]


@pytest.fixture(scope="module")
def golden_logs() -> dict[tuple[str, str], tuple[list[Record], dict[str, float]]]:
    out = {}
    for workload, policy in GOLDEN:
        wl = load_workload(WORKLOADS[workload])
        result, _ = run_sim(wl, PolicyChoice(policy, {}), options=RunOptions())
        weights = {name: u.weight for name, u in wl.users.items()}
        out[workload, policy] = (result.records, weights)
    return out


@pytest.mark.parametrize(("workload", "policy"), GOLDEN, ids=[f"{w}-{p}" for w, p in GOLDEN])
def test_same_as_the_reference_on_the_golden_logs(
    golden_logs: dict[tuple[str, str], tuple[list[Record], dict[str, float]]],
    workload: str,
    policy: str,
) -> None:
    records, weights = golden_logs[workload, policy]
    assert_same(records, weights)

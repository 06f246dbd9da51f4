"""The metrics as array code give what the per-record metrics gave (``tests.reference_metrics``,
the implementation they replaced), to the precision the files print (6 decimals; jobs,
series and summaries are compared whole), on the golden logs (demo, dags, sls, rumen under
every policy) and on random logs with and without long idle gaps."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
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
from treadle import event_columns as ec, events as ev, metrics
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


@pytest.mark.parametrize(("workload", "policy"), GOLDEN, ids=[f"{w}-{p}" for w, p in GOLDEN])
def test_a_run_streamed_to_parquet_has_the_same_metrics_and_rows(
    golden_logs: dict[tuple[str, str], tuple[list[Record], dict[str, float]]],
    workload: str,
    policy: str,
    tmp_path: Path,
) -> None:
    """The run as ``--events parquet`` makes it (rows as they are logged, in row groups of
    100 here) reads back to the records of ``--events jsonl`` (in another order) and gives
    the same files."""
    records, _ = golden_logs[workload, policy]
    wl = load_workload(WORKLOADS[workload])
    out = {}
    for events in ("parquet", "jsonl"):
        run_sim(wl, PolicyChoice(policy, {}), tmp_path / events, options=RunOptions(events=events))
        out[events] = {p.name: p.read_bytes() for p in (tmp_path / events).iterdir()}
    for name in ("summary.json", "jobs.csv", "jobs.parquet"):
        assert out["parquet"][name] == out["jsonl"][name], name
    # the same rows, whatever the row groups
    path = tmp_path / "small-groups.parquet"
    log = ec.ParquetEventLog(path, list(wl.cluster.capacity), row_group_rows=100)
    from treadle.study.runner import _simulate, alone_jcts

    _simulate(wl, PolicyChoice(policy, {}), RunOptions(), None, alone_jcts(wl), log)
    log.close()
    streamed = ec.read_events(path)
    assert len(streamed) == len(records) == len(log)
    lines = [norm(r) for r in records]
    # the table holds the records exactly (amounts of resources as floats): the same lines
    assert [norm(r) for r in ec.records_from_table(ec.table_from_records(records))] == lines
    assert sorted(map(norm, streamed)) == sorted(lines)
    on_disk = ec.read_events(tmp_path / "parquet" / "events.parquet")
    assert sorted(map(norm, on_disk)) == sorted(lines)


def norm(rec: Record) -> str:
    """The record's JSON line, amounts of resources as floats."""
    out = {
        k: {r: float(x) for r, x in v.items()} if k in ("capacity", "resources") else v
        for k, v in rec.items()
    }
    return ev.dumps(out)

"""The metrics of an ``events.parquet`` file read by row group (``treadle.metrics.logfile``)
are those of its whole table, to the last bit, whatever the row groups and the rows' order."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.unit.test_metrics import random_logs
from treadle import event_columns as ec
from treadle.metrics import analyze, logfile, read_log
from treadle.metrics.logfile import EventFile, id_hashes
from treadle.metrics.scan import Spans, scan
from treadle.study.runner import PolicyChoice, RunOptions
from treadle.workload import load_workload

Record = dict[str, Any]


def _write(records: list[Record], path: Path, row_group: int) -> None:
    table = ec.table_from_records(records)
    pq.write_table(table, str(path), row_group_size=row_group)


def _joined(chunks: list[Spans], like: Spans) -> Spans:
    if not chunks:
        return like.part(slice(0, 0))
    return Spans(*(np.concatenate([getattr(c, f) for c in chunks]) for f in Spans.__slots__))


def _same(path: Path) -> None:
    """The facts (every array, the spans in their order), then the metrics."""
    a, b = scan(EventFile(path).table()), scan(read_log(path))
    for f in dataclasses.fields(a):
        if f.name == "spans":
            whole = a.spans.whole()
            swept = _joined(list(b.spans.chunks()), whole)
            for y in (b.spans.whole(), swept):
                for g in dataclasses.fields(whole):
                    x, z = getattr(whole, g.name), getattr(y, g.name)
                    assert x.shape == z.shape, g.name
                    assert np.array_equal(x, z), g.name
        elif isinstance(getattr(a, f.name), np.ndarray):
            x, y = getattr(a, f.name), getattr(b, f.name)
            assert x.tolist() == y.tolist() or np.array_equal(x, y, equal_nan=True), f.name
        else:
            assert getattr(a, f.name) == getattr(b, f.name), f.name
    whole = analyze(EventFile(path).table(), policy="p")
    by_group = analyze(read_log(path), policy="p")
    assert by_group.summary == whole.summary
    assert by_group.jobs == whole.jobs
    assert by_group.utilization == whole.utilization


@st.composite
def shuffled_logs(draw: st.DrawFn) -> list[Record]:
    """Random logs, some rows repeated (a container allocated twice, ended twice), rows in
    any order."""
    recs = draw(random_logs())
    extra = [r for r in recs if draw(st.integers(0, 5)) == 0]
    return draw(st.permutations(recs + [dict(r) for r in extra]))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(recs=shuffled_logs(), row_group=st.integers(1, 9), batch=st.integers(1, 12))
def test_row_groups_give_the_whole_tables_metrics(
    tmp_path: Path, recs: list[Record], row_group: int, batch: int
) -> None:
    """Any row groups, read in batches of any size."""
    path = tmp_path / "events.parquet"
    _write(recs, path, row_group)
    kept = logfile.BATCH_ROWS
    logfile.BATCH_ROWS = batch
    try:
        _same(path)
    finally:
        logfile.BATCH_ROWS = kept


def test_containers_that_tie_keep_the_order_of_their_ids(tmp_path: Path) -> None:
    """Two containers of one job, allocated and ended at the same instants, of different
    sizes: their shares add in the order of their ids, as the whole table's do."""
    recs: list[Record] = [
        {"t": 0.0, "event": "run_started", "capacity": {"vcores": 3, "memory_mb": 7}},
        {"t": 0.0, "event": "job_submitted", "job": "j", "user": "u", "name": "j"},
        {"t": 0.0, "event": "job_submitted", "job": "k", "user": "v", "name": "k"},
        {"t": 90.0, "event": "job_finished", "job": "j", "status": "SUCCEEDED"},
        {"t": 90.0, "event": "job_finished", "job": "k", "status": "SUCCEEDED"},
    ]
    for cid, vc in (("c9", 1), ("c10", 2), ("c1", 3)):
        res = {"vcores": vc, "memory_mb": vc / 3}
        recs.append({"t": 0.5, "event": "container_allocated", "job": "j", "container": cid,
                     "resources": res})  # fmt: skip
        recs.append({"t": 70.1, "event": "container_finished", "job": "j", "container": cid})
    recs.append({"t": 0.5, "event": "container_allocated", "job": "k", "container": "c1",
                 "resources": {"vcores": 1, "memory_mb": 1}})  # fmt: skip
    path = tmp_path / "events.parquet"
    _write(recs, path, 2)
    _same(path)


def test_a_simulated_runs_row_groups(tmp_path: Path) -> None:
    """A run of a DAG workload logged in row groups of 64 rows: the same files as its
    whole table gives."""
    wl = load_workload("dags")
    path = tmp_path / "events.parquet"
    log = ec.ParquetEventLog(path, list(wl.cluster.capacity), row_group_rows=64)
    from treadle.study.runner import _simulate, build_policy

    choice = PolicyChoice("drf", {})
    _simulate(wl, choice, RunOptions(), None, {}, log, build_policy(choice))
    log.close()
    assert pq.ParquetFile(str(path)).num_row_groups > 3
    _same(path)


def test_ids_hash_apart() -> None:
    import pyarrow as pa

    ids = [f"container_e1_{a:05d}_01_{c:06d}" for a in range(1, 40) for c in range(1, 300)]
    h = id_hashes(pa.array([*ids, "", "x"]))
    assert len(set(h.tolist())) == len(ids) + 2
    assert (
        id_hashes(pa.array(["ab", "abc"]).slice(1)).tolist()
        == id_hashes(pa.array(["abc"])).tolist()
    )


def test_jobs_parquet_is_written_by_row_group(tmp_path: Path) -> None:
    """jobs.parquet in row groups of the size asked: the same table as one written whole."""
    from treadle.metrics.writers import write_jobs_parquet

    wl = load_workload("dags")
    from treadle.study.runner import run_sim

    _, run = run_sim(wl, PolicyChoice("fifo", {}))
    assert len(run.jobs) > 3
    write_jobs_parquet(run.jobs, tmp_path / "whole.parquet")
    write_jobs_parquet(iter(run.jobs), tmp_path / "groups.parquet", row_group=2)
    groups = pq.ParquetFile(str(tmp_path / "groups.parquet"))
    assert groups.num_row_groups == (len(run.jobs) + 1) // 2
    assert groups.read().equals(pq.read_table(str(tmp_path / "whole.parquet")))

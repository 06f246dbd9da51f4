"""The second pass over an event file (``treadle.metrics.sweep``): the spans in span order
while holding only the running work, and the exact sums the metrics keep across chunks."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from hypothesis import given, settings, strategies as st

from treadle import event_columns as ec
from treadle.metrics import read_log
from treadle.metrics.scan import scan
from treadle.metrics.stats import ExactSum
from treadle.metrics.sweep import StreamedSpans, Sweep


def _long_log(containers: int) -> list[dict[str, Any]]:
    """One job whose containers run one after another, 4 at a time, 10 s each."""
    recs: list[dict[str, Any]] = [
        {"t": 0.0, "event": "run_started", "capacity": {"vcores": 4, "memory_mb": 4096}},
        {"t": 0.0, "event": "job_submitted", "job": "j", "user": "u", "name": "j"},
    ]
    res = {"vcores": 1, "memory_mb": 1024}
    for c in range(containers):
        a = (c // 4) * 10.0
        recs.append({"t": a, "event": "container_allocated", "job": "j",
                     "container": f"c{c:06d}", "resources": res})  # fmt: skip
        recs.append({"t": a + 10.0, "event": "container_finished", "job": "j",
                     "container": f"c{c:06d}"})  # fmt: skip
    recs.sort(key=lambda r: r["t"])  # stable: a container's end before the next ones start
    recs.append({"t": (containers // 4) * 10.0 + 10.0, "event": "job_finished", "job": "j"})
    return recs


def test_a_long_log_is_swept_holding_only_the_running_containers(tmp_path: Path) -> None:
    path = tmp_path / "events.parquet"
    pq.write_table(ec.table_from_records(_long_log(20_000)), str(path), row_group_size=2_000)
    facts = scan(read_log(path))
    spans = facts.spans
    assert isinstance(spans, StreamedSpans)
    sweep = Sweep(spans.plan)
    handed = sum(len(out) for t in spans.batches() if (out := sweep.feed(t)) is not None)
    assert handed == 20_000
    assert sweep.held_most < 2_000  # a row group's worth, not the log's 20,000
    whole = spans.whole()
    swept = list(spans.chunks())
    assert np.array_equal(np.concatenate([c.a for c in swept]), whole.a)
    assert np.array_equal(np.concatenate([c.b for c in swept]), whole.b)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300),
        max_size=60,
    ),
    st.integers(1, 5),
)
def test_exact_sum_is_fsum_of_all_the_parts(values: list[float], parts: int) -> None:
    acc = ExactSum()
    for part in np.array_split(np.array(values, dtype=float), parts):
        acc.add(part)
    assert acc.value() == math.fsum(values)


def test_exact_sum_keeps_what_a_float_sum_loses() -> None:
    acc = ExactSum()
    acc.add(np.array([1e16, 1.0]))
    acc.add(np.array([-1e16, 5e-324]))
    assert acc.value() == 1.0


def test_a_run_without_its_log_reads_its_utilization_then_deletes_the_temporary_file(
    tmp_path: Path,
) -> None:
    """``--events none``: the metrics are swept from a temporary file, which the
    utilization series (read later, by a comparison's report) reads, then deletes."""
    import gc

    from treadle.study.runner import PolicyChoice, RunOptions, run_sim
    from treadle.workload import load_workload

    wl = load_workload("dags")
    _, kept = run_sim(wl, PolicyChoice("drf", {}), tmp_path / "kept")
    _, run = run_sim(wl, PolicyChoice("drf", {}), tmp_path / "none",
                     options=RunOptions(events="none"))  # fmt: skip
    assert run.summary == kept.summary
    assert list((tmp_path / "none").glob(".events-*"))  # the series not read yet
    assert dict(run.utilization) == dict(kept.utilization)
    assert not list((tmp_path / "none").glob(".events-*"))
    _, unread = run_sim(wl, PolicyChoice("drf", {}), tmp_path / "unread",
                        options=RunOptions(events="none"))  # fmt: skip
    del unread
    gc.collect()
    assert not list((tmp_path / "unread").glob(".events-*"))  # never read: gone with it

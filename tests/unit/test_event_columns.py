"""The event log as columns: its builders and the dict log's are the schema's, it writes
row groups as it goes, and its file reads back to the records the dict log holds."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from treadle import (
    event_builders,
    event_codegen,
    event_columns as ec,
    event_schema,
    event_table as et,
    events as ev,
)
from treadle.errors import InputError
from treadle.resources import Resources


def sample_args(name: str, *, nulls: bool) -> dict[str, Any]:
    """Arguments for the builder of event type ``name``, from its schema: a value of each
    field's argument type, its own (``nulls``: None where the field may be null or left
    out); numbers of the other kind where the builder converts them (numpy's, sums)."""
    etype = ev.SCHEMA[name]
    args: dict[str, Any] = {}
    for i, f in enumerate(etype.fields):
        arg = f.arg or ARG[f.type]
        values: dict[str, Any] = {
            "str": f"{f.name}-{i}",
            "int": float(3 + i) if etype.converts else 3 + i,
            "float": 1 + i if etype.converts else 1.5 + i,
            "bool": i % 2 == 0,
            "Resources": Resources(vcores=2.0 + i, memory_mb=512.0),  # columns hold floats
            "Mapping[str, float]": {"vcores": 4.0 + i, "memory_mb": 4096.0},
            "Mapping[str, Any]": {"late_p50_s": 0.25, "polls": 7 + i},
        }
        if f.const is None:
            args[f.name] = None if nulls and (f.nullable or f.optional) else values[arg]
    return args


ARG = event_schema.ARG_TYPES


def test_the_generated_builders_are_the_schemas() -> None:
    """(If not: ``python -m treadle.event_codegen`` after editing the schema.)"""
    assert Path(event_builders.__file__).read_text(encoding="utf-8") == event_codegen.render()
    assert event_codegen.main(["--check"]) == 0


@pytest.mark.parametrize("nulls", [False, True])
@pytest.mark.parametrize("name", list(ev.SCHEMA))
def test_both_writers_log_every_event_type_alike(tmp_path: Path, name: str, nulls: bool) -> None:
    path = tmp_path / "e.parquet"
    columns, plain = ec.ParquetEventLog(path, ["memory_mb", "vcores"]), ev.EventLog()
    for log in (columns, plain):
        for t in (0.25, 1.0000004):
            getattr(log, name)(t, **sample_args(name, nulls=nulls))
    columns.close()
    assert [ev.check_record(r) for r in plain.records] == [None, None]
    back = ec.read_events(path)
    assert back == plain.records
    assert [list(r) for r in back] == [list(r) for r in plain.records]
    assert [ev.dumps(r) for r in back] == [ev.dumps(r) for r in plain.records]


def test_one_column_per_field_with_resources_flattened() -> None:
    names = ec.column_names(["vcores", "memory_mb"])
    assert names[:2] == ["t", "event"]
    assert "resources_vcores" in names
    assert "capacity_memory_mb" in names
    assert "resources" not in names
    every = {f.name for e in ev.SCHEMA.values() for f in e.fields if f.type != "resources"}
    assert every <= set(names)


def log_some(log: ev.EventLog) -> None:
    res = Resources(vcores=1, memory_mb=512)
    log.run_started(
        0, policy="fifo", workload="w", mode="sim", seed=1, dilation=1.0, heartbeat_s=1.0,
        nodes=1, capacity={"vcores": 4, "memory_mb": 4096},
    )  # fmt: skip
    log.node_registered(0, "n1", "/r", Resources(vcores=4, memory_mb=4096))
    log.job_submitted(0, "a1", "j", "u", "q", 3, None)
    for i in range(3):
        log.container_allocated(i, "a1", f"c{i}", "n1", res, 1, "DEFAULT")
        log.container_started(i + 0.5, "a1", f"c{i}", "n1")
        log.container_finished(i + 2, "a1", f"c{i}", "n1", "COMPLETE", 0)
    log.placement_rejected(1, "n1", None, None, "full")
    log.job_finished(5, "a1", "u", "q")
    log.run_finished(5, finished=1, unfinished=0, stalled=None, submit_timers={"late": 0.1})


def test_row_groups_are_written_as_the_run_goes(tmp_path: Path) -> None:
    path = tmp_path / "events.parquet"
    log = ec.ParquetEventLog(path, ["vcores", "memory_mb"], row_group_rows=4)
    log_some(log)
    assert len(log) == 15
    assert log.pending < 4  # only the rows of the unfinished group are held
    log.close()
    assert pq.ParquetFile(path).metadata.num_row_groups == 4
    plain = ev.EventLog()
    log_some(plain)
    assert ec.read_events(path) == plain.records  # in the order logged


def test_a_resource_the_run_does_not_have_is_refused(tmp_path: Path) -> None:
    log = ec.ParquetEventLog(tmp_path / "e.parquet", ["vcores"])
    log.node_registered(0, "n1", "/r", Resources(vcores=4, gpu=1))
    with pytest.raises(ValueError, match="resource 'gpu' is not the run's"):
        log.flush()


def test_the_refusal_names_the_first_row_logged_with_a_stray_resource(tmp_path: Path) -> None:
    log = ec.ParquetEventLog(tmp_path / "e.parquet", ["vcores"])
    log.node_registered(0, "n1", "/r", Resources(vcores=4))
    log.container_allocated(1, "a1", "c1", "n1", Resources(vcores=1, fpga=1), 1, "DEFAULT")
    log.node_registered(2, "n2", "/r", Resources(vcores=4, gpu=1))
    with pytest.raises(ValueError, match="container_allocated: resource 'fpga'"):
        log.flush()


def test_times_are_written_rounded_to_the_microsecond(tmp_path: Path) -> None:
    path = tmp_path / "e.parquet"
    log = ec.ParquetEventLog(path, ["vcores"])
    for t in (0.1 + 0.2, 2, 1e-7, 7.0000005, 12.3456785):
        log.node_lost(t, "n1")
    log.close()
    assert ec.read_table(path)["t"].to_pylist() == [0.3, 2.0, 0.0, 7.0, 12.345678]


def test_rounded_times_are_python_round_bit_for_bit() -> None:
    rng = random.Random(7)
    ts: list[float] = [rng.uniform(-1e4, 1e4) for _ in range(20_000)]
    ts += [rng.randrange(10**10) / 1e6 for _ in range(20_000)]  # already on the grid
    ts += [(k + 0.5) / 1e6 for k in range(0, 2_000_000, 997)]  # halves of a microsecond
    ts += [math.nextafter(v, d) for v in ts[-2000:] for d in (-math.inf, math.inf)]
    ts += [0.0, -0.0, 1e-9, -1e-9, 5e8 + 5e-7, 1e12 + 0.1234565, 2.0**60, math.inf]
    want = [round(float(t), 6) for t in ts]
    got = et.rounded_times(ts).tolist()
    assert [math.copysign(1, v) for v in got] == [math.copysign(1, v) for v in want]
    assert got == want


def test_a_file_that_is_not_an_event_log_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "events.parquet"
    bad.write_text("not parquet")
    with pytest.raises(InputError, match=r"events\.parquet"):
        ec.read_table(bad)


def test_str_enum_members_are_written_as_their_values(tmp_path: Path) -> None:
    from treadle.messages import AskKind, ContainerState

    path = tmp_path / "e.parquet"
    log = ec.ParquetEventLog(path, ["vcores"])
    res = Resources(vcores=1)
    log.container_allocated(0, "a1", "c1", "n1", res, 1, AskKind.DEFAULT)
    log.container_finished(1, "a1", "c1", "n1", ContainerState.COMPLETE, 0)
    log.close()
    plain = ev.EventLog()
    plain.container_allocated(0, "a1", "c1", "n1", res, 1, "DEFAULT")
    plain.container_finished(1, "a1", "c1", "n1", "COMPLETE", 0)
    assert ec.read_events(path) == plain.records

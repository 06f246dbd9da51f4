"""The files of one run: summary.json, jobs.csv, jobs.parquet and the event log
(events.parquet, events.jsonl, or none), deterministic bytes."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from treadle import event_columns as ec, events as ev
from treadle.metrics.jobs import JobResult
from treadle.metrics.logfile import EventFile
from treadle.metrics.scan import RecordLike
from treadle.metrics.stats import round6
from treadle.metrics.summary import RunMetrics, analyze

JOBS_CSV_COLUMNS: tuple[str, ...] = (
    "job",
    "name",
    "user",
    "queue",
    "submit_s",
    "start_s",
    "finish_s",
    "jct_s",
    "slowdown",
    "tasks",
    "wait_s",
    "status",
    "alone_jct_s",
)


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(round6(v))
    return v


def write_jobs_csv(results: Iterable[JobResult], path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(JOBS_CSV_COLUMNS)
        for r in results:
            w.writerow([_cell(getattr(r, c)) for c in JOBS_CSV_COLUMNS])


#: Rows per row group of jobs.parquet.
JOBS_ROW_GROUP = 65_536


def write_jobs_parquet(
    results: Iterable[JobResult], path: Path, row_group: int = JOBS_ROW_GROUP
) -> None:
    """jobs.csv's columns as a Parquet table (floats as they are, not rounded), written
    ``row_group`` rows at a time as ``results`` yields them (one row group's columns in
    memory at once)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"tasks": pa.int64(), "status": pa.string()}
    for c in ("job", "name", "user", "queue"):
        types[c] = pa.string()
    schema = pa.schema([(c, types.get(c, pa.float64())) for c in JOBS_CSV_COLUMNS])

    def table(rows: list[JobResult]) -> pa.Table:
        return pa.table(
            {c: pa.array([getattr(r, c) for r in rows], type=schema.field(c).type)
             for c in JOBS_CSV_COLUMNS}
        )  # fmt: skip

    with pq.ParquetWriter(str(path), schema, compression=ec.PARQUET_COMPRESSION) as w:
        rows: list[JobResult] = []
        written = False
        for r in results:
            rows.append(r)
            if len(rows) == row_group:
                w.write_table(table(rows), row_group_size=row_group)
                rows, written = [], True
        if rows or not written:  # no job: one empty row group, as a whole table has
            w.write_table(table(rows), row_group_size=max(1, len(rows)))


#: ``--events``: the event log's file format.
EVENT_FORMATS = ("parquet", "jsonl", "none")
EVENT_FILES = {"parquet": "events.parquet", "jsonl": "events.jsonl"}


def write_json(obj: Any, path: Path) -> None:
    """Deterministic JSON: sorted keys, 2-space indent, no NaN, trailing newline."""
    path.write_text(
        json.dumps(obj, sort_keys=True, indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )


def write_run_files(run: RunMetrics, out_dir: Path) -> None:
    """summary.json, jobs.csv and jobs.parquet of analysed metrics (``out_dir`` created if
    needed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(run.summary, out_dir / "summary.json")
    write_jobs_csv(run.jobs, out_dir / "jobs.csv")
    write_jobs_parquet(run.jobs, out_dir / "jobs.parquet")


def write_run_outputs(
    records: Iterable[RecordLike],
    out_dir: Path,
    *,
    policy: str,
    user_weights: Mapping[str, float] | None = None,
    run: RunMetrics | None = None,
    events: str = "parquet",
) -> dict[str, Any]:
    """Write summary.json, jobs.csv, jobs.parquet and the event log (records in the order
    given; ``events``: ``parquet``, ``jsonl`` or ``none``) to ``out_dir`` (created if
    needed) and return the summary. Pass ``run`` when the records were already analysed,
    to skip a second pass."""
    if events not in EVENT_FORMATS:
        raise ValueError(f"events must be one of {', '.join(EVENT_FORMATS)}, got {events!r}")
    recs = [r if isinstance(r, dict) else dict(r) for r in records]
    if run is None:
        run = analyze(recs, policy=policy, user_weights=user_weights)
    write_run_files(run, out_dir)
    if events == "jsonl":
        ev.write_jsonl(recs, out_dir / EVENT_FILES[events])
    elif events == "parquet":
        ec.write_parquet(recs, out_dir / EVENT_FILES[events])
    return run.summary


def read_log(path: Path) -> Any:
    """An event log file (``.parquet`` or JSON lines) as what ``analyze`` takes: of a
    Parquet file, an :class:`~treadle.metrics.logfile.EventFile` that the metrics read by
    row group (the columns they read; the ``dp``, ``estimation`` and ``preemption``
    sections' columns only when the log has their records)."""
    if path.suffix != ".parquet":
        return ev.read_jsonl(path)
    return EventFile(path)

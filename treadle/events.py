"""The event log: one record per thing that happened, the only input of the metrics.

Each record is a flat JSON object with ``t`` (emulated seconds, rounded to 1 us) and
``event`` first, then the fields its event type declares in :data:`SCHEMA`, in that
order. Records are built only by the typed methods of :class:`EventLog` (one per event
type, named after it, generated from the schema: :mod:`treadle.event_builders`), so every
writer (the simulator, the RM process, the replay driver) writes the same fields.
Serialisation is deterministic: the same records give the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TextIO

from treadle.errors import InputError
from treadle.event_builders import RecordBuilders
from treadle.event_schema import (
    ATTEMPT_FAILED as ATTEMPT_FAILED,
    ATTEMPT_STARTED as ATTEMPT_STARTED,
    CONTAINER_ALLOCATED as CONTAINER_ALLOCATED,
    CONTAINER_FINISHED as CONTAINER_FINISHED,
    CONTAINER_PREEMPTED as CONTAINER_PREEMPTED,
    CONTAINER_RELEASED as CONTAINER_RELEASED,
    CONTAINER_STARTED as CONTAINER_STARTED,
    DP_ACCOUNT as DP_ACCOUNT,
    JOB_ESTIMATED as JOB_ESTIMATED,
    JOB_FAILED as JOB_FAILED,
    JOB_FINISHED as JOB_FINISHED,
    JOB_QUEUE_CHANGED as JOB_QUEUE_CHANGED,
    JOB_STARTED as JOB_STARTED,
    JOB_SUBMITTED as JOB_SUBMITTED,
    NODE_LOST as NODE_LOST,
    NODE_REGISTERED as NODE_REGISTERED,
    PLACEMENT_REJECTED as PLACEMENT_REJECTED,
    RUN_FINISHED as RUN_FINISHED,
    RUN_STARTED as RUN_STARTED,
    SCHEMA as SCHEMA,
    EventType as EventType,
    Field as Field,
    Record as Record,
    check_record as check_record,
    schema_markdown as schema_markdown,
)


class EventLog(RecordBuilders):
    """Collects records in memory and, optionally, streams each one to ``sink`` as it comes
    (so that a process that is stopped loses nothing it had logged). One method per event
    type builds and logs its record (:class:`treadle.event_builders.RecordBuilders`)."""

    __slots__ = ("_sink", "add", "records")

    def __init__(self, sink: TextIO | None = None) -> None:
        self.records: list[Record] = []
        self._sink = sink
        #: Log a record (built by one of the builders).
        self.add: Callable[[Record], None] = (
            self.records.append if sink is None else self._add_and_write
        )

    def _add_and_write(self, rec: Record) -> None:
        self.records.append(rec)
        sink = self._sink
        if sink is not None:
            try:
                sink.write(dumps(rec) + "\n")
            except OSError as e:  # name the file: a failed write ends a live RM
                e.filename = e.filename or getattr(sink, "name", None)
                raise

    # ------------------------------------------------------------------ reading
    def flush(self) -> None:
        if self._sink is not None:
            self._sink.flush()

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def of(self, event: str) -> list[Record]:
        return [r for r in self.records if r["event"] == event]


def dumps(rec: Record) -> str:
    return json.dumps(rec, separators=(",", ":"), allow_nan=False)


def write_jsonl(records: Iterable[Record], path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for rec in records:
            f.write(dumps(rec))
            f.write("\n")


def read_jsonl(path: Path) -> list[Record]:
    """Read an event log; a malformed line is an InputError naming the file and line."""
    out: list[Record] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(str(path), f"line {n}", f"not JSON: {e.msg}") from None
            if not isinstance(rec, dict) or "t" not in rec or "event" not in rec:
                raise InputError(str(path), f"line {n}", "record needs 't' and 'event'")
            out.append(rec)
    return out

"""The event log: one record per thing that happened, the only input of the metrics.

Each record is a flat JSON object with ``t`` (emulated seconds) and ``event`` first, then
the ids that apply. The simulator and the emulated cluster write the same records, so
their results are computed by the same code. Serialisation is deterministic: the same
records give the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from treadle.errors import InputError

# Event names (the file contract; add, never rename).
JOB_SUBMITTED = "job_submitted"
JOB_STARTED = "job_started"
JOB_FINISHED = "job_finished"
JOB_FAILED = "job_failed"
CONTAINER_ALLOCATED = "container_allocated"
CONTAINER_STARTED = "container_started"
CONTAINER_FINISHED = "container_finished"
CONTAINER_RELEASED = "container_released"
ATTEMPT_STARTED = "attempt_started"
ATTEMPT_FAILED = "attempt_failed"
NODE_REGISTERED = "node_registered"
NODE_LOST = "node_lost"
PLACEMENT_REJECTED = "placement_rejected"
RUN_STARTED = "run_started"
RUN_FINISHED = "run_finished"

Record = dict[str, Any]

_ROUND = 6  # microsecond resolution keeps files stable across float noise


class EventLog:
    """Collects records in memory and, optionally, streams each one to ``sink`` as it comes
    (so that a process that is stopped loses nothing it had logged)."""

    __slots__ = ("_sink", "add", "records")

    def __init__(self, sink: TextIO | None = None) -> None:
        self.records: list[Record] = []
        self._sink = sink
        #: Log a record the caller built: ``{"t": round(float(t), 6), "event": ..., ...}``,
        #: as ``emit`` would (the hot paths' cheaper ``emit``).
        self.add: Callable[[Record], None] = (
            self.records.append if sink is None else self._add_and_write
        )

    def _add_and_write(self, rec: Record) -> None:
        self.records.append(rec)
        sink = self._sink
        if sink is not None:
            sink.write(dumps(rec))
            sink.write("\n")

    def emit(self, t: float, event: str, **fields: Any) -> None:
        rec: Record = {"t": round(float(t), _ROUND), "event": event}
        rec.update(fields)
        self.records.append(rec)
        if self._sink is not None:
            self._sink.write(dumps(rec))
            self._sink.write("\n")

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

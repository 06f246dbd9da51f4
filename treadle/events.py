"""The event log: one record per thing that happened, the only input of the metrics.

Each record is a flat JSON object with ``t`` (emulated seconds, rounded to 1 us) and
``event`` first, then the fields its event type declares in :data:`SCHEMA`, in that
order. Records are built only by the typed methods of :class:`EventLog` (one per event
type, named after it), so every writer (the simulator, the RM process, the replay driver)
writes the same fields. Serialisation is deterministic: the same records give the same
bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from treadle.errors import InputError
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
from treadle.resources import Resources


class EventLog:
    """Collects records in memory and, optionally, streams each one to ``sink`` as it comes
    (so that a process that is stopped loses nothing it had logged). One method per event
    type builds and logs its record."""

    __slots__ = ("_sink", "add", "records")

    def __init__(self, sink: TextIO | None = None) -> None:
        self.records: list[Record] = []
        self._sink = sink
        #: Log a record (built by one of the methods below).
        self.add: Callable[[Record], None] = (
            self.records.append if sink is None else self._add_and_write
        )

    def _add_and_write(self, rec: Record) -> None:
        self.records.append(rec)
        sink = self._sink
        if sink is not None:
            sink.write(dumps(rec))
            sink.write("\n")

    # ------------------------------------------------------------------ runs
    def run_started(
        self,
        t: float,
        *,
        policy: str,
        workload: str | None,
        mode: str,
        seed: int | None,
        dilation: float,
        heartbeat_s: float,
        nodes: int,
        capacity: Mapping[str, float],
    ) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": RUN_STARTED,
                "policy": policy,
                "workload": workload,
                "mode": mode,
                "seed": seed,
                "dilation": dilation,
                "heartbeat_s": heartbeat_s,
                "nodes": nodes,
                "capacity": {k: capacity[k] for k in sorted(capacity)},
            }
        )

    def run_finished(
        self,
        t: float,
        *,
        finished: int,
        unfinished: int,
        stalled: str | None,
        submit_timers: Mapping[str, Any] | None = None,
    ) -> None:
        rec: Record = {
            "t": round(float(t), 6),
            "event": RUN_FINISHED,
            "finished": finished,
            "unfinished": unfinished,
            "stalled": stalled,
        }
        if submit_timers is not None:
            rec["submit_timers"] = dict(submit_timers)
        self.add(rec)

    # ------------------------------------------------------------------ nodes
    def node_registered(self, t: float, node: str, rack: str, resources: Resources) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": NODE_REGISTERED,
                "node": node,
                "rack": rack,
                "resources": resources.to_dict(),
            }
        )

    def node_lost(self, t: float, node: str) -> None:
        self.add({"t": round(float(t), 6), "event": NODE_LOST, "node": node})

    # ------------------------------------------------------------------ jobs
    def job_submitted(
        self,
        t: float,
        job: str,
        name: str,
        user: str,
        queue: str,
        tasks: int,
        alone_jct_s: float | None,
    ) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": JOB_SUBMITTED,
                "job": job,
                "name": name,
                "user": user,
                "queue": queue,
                "tasks": tasks,
                "alone_jct_s": alone_jct_s,
            }
        )

    def job_started(self, t: float, job: str, user: str, queue: str) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": JOB_STARTED,
                "job": job,
                "user": user,
                "queue": queue,
            }
        )

    def job_finished(self, t: float, job: str, user: str, queue: str) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": JOB_FINISHED,
                "job": job,
                "user": user,
                "queue": queue,
                "status": "SUCCEEDED",
            }
        )

    def job_failed(
        self, t: float, job: str, user: str, queue: str, status: str, diagnostics: str
    ) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": JOB_FAILED,
                "job": job,
                "user": user,
                "queue": queue,
                "status": status,
                "diagnostics": diagnostics,
            }
        )

    def attempt_started(self, t: float, job: str, attempt: int) -> None:
        self.add(
            {"t": round(float(t), 6), "event": ATTEMPT_STARTED, "job": job, "attempt": attempt}
        )

    def attempt_failed(self, t: float, job: str, attempt: int, reason: str) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": ATTEMPT_FAILED,
                "job": job,
                "attempt": attempt,
                "reason": reason,
            }
        )

    # ------------------------------------------------------------------ containers
    def container_allocated(
        self,
        t: float,
        job: str,
        container: str,
        node: str,
        resources: Resources,
        priority: int,
        kind: str,
    ) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": CONTAINER_ALLOCATED,
                "job": job,
                "container": container,
                "node": node,
                "resources": resources.to_dict(),
                "priority": priority,
                "kind": kind,
            }
        )

    def container_started(self, t: float, job: str, container: str, node: str) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": CONTAINER_STARTED,
                "job": job,
                "container": container,
                "node": node,
            }
        )

    def container_finished(
        self, t: float, job: str, container: str, node: str, state: str, exit_status: int
    ) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": CONTAINER_FINISHED,
                "job": job,
                "container": container,
                "node": node,
                "state": state,
                "exit_status": exit_status,
            }
        )

    def container_released(self, t: float, job: str, container: str, node: str) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": CONTAINER_RELEASED,
                "job": job,
                "container": container,
                "node": node,
            }
        )

    def placement_rejected(
        self, t: float, node: str, job: str | None, priority: int | None, reason: str
    ) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": PLACEMENT_REJECTED,
                "node": node,
                "job": job,
                "priority": priority,
                "reason": reason,
            }
        )

    def container_preempted(
        self, t: float, job: str, container: str, node: str, queue: str
    ) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": CONTAINER_PREEMPTED,
                "job": job,
                "container": container,
                "node": node,
                "queue": queue,
            }
        )

    def dp_account(
        self,
        t: float,
        queue: str,
        price: float,
        budget: float,
        spending_rate: float,
        share: float,
        used: float,
        pending: int,
        charged: float,
    ) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": DP_ACCOUNT,
                "queue": queue,
                "price": float(price),
                "budget": float(budget),
                "spending_rate": float(spending_rate),
                "share": float(share),
                "used": float(used),
                "pending": int(pending),
                "charged": float(charged),
            }
        )

    def job_estimated(
        self, t: float, job: str, estimate_s: float, position: int, ratio: float | None, pilots: int
    ) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": JOB_ESTIMATED,
                "job": job,
                "estimate_s": float(estimate_s),
                "position": int(position),
                "ratio": None if ratio is None else float(ratio),
                "pilots": int(pilots),
            }
        )

    def job_queue_changed(self, t: float, job: str, from_position: int, to_position: int) -> None:
        self.add(
            {
                "t": round(float(t), 6),
                "event": JOB_QUEUE_CHANGED,
                "job": job,
                "from_position": int(from_position),
                "to_position": int(to_position),
            }
        )

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

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from treadle.errors import InputError
from treadle.resources import Resources

# Event names (the file contract; add, never rename).
RUN_STARTED = "run_started"
RUN_FINISHED = "run_finished"
NODE_REGISTERED = "node_registered"
NODE_LOST = "node_lost"
JOB_SUBMITTED = "job_submitted"
JOB_STARTED = "job_started"
JOB_FINISHED = "job_finished"
JOB_FAILED = "job_failed"
ATTEMPT_STARTED = "attempt_started"
ATTEMPT_FAILED = "attempt_failed"
CONTAINER_ALLOCATED = "container_allocated"
CONTAINER_STARTED = "container_started"
CONTAINER_FINISHED = "container_finished"
CONTAINER_RELEASED = "container_released"
PLACEMENT_REJECTED = "placement_rejected"
CONTAINER_PREEMPTED = "container_preempted"
DP_ACCOUNT = "dp_account"
JOB_ESTIMATED = "job_estimated"
JOB_QUEUE_CHANGED = "job_queue_changed"

Record = dict[str, Any]

# Times are rounded to 1 us (``round(float(t), 6)``, written out in each builder: they are
# on the simulator's hottest path): files stay stable across float noise.


@dataclass(frozen=True, slots=True)
class Field:
    """One field of an event type. ``type`` is the JSON value's kind: ``str``, ``int``,
    ``float``, ``bool``, ``resources`` (an object of resource name -> amount) or ``object``
    (any JSON object). ``nullable`` fields may be null; ``optional`` fields are left out
    of the record when they have no value; a ``const`` field always holds that value."""

    name: str
    type: str
    doc: str
    nullable: bool = False
    optional: bool = False
    const: str | None = None


@dataclass(frozen=True, slots=True)
class EventType:
    name: str
    doc: str
    fields: tuple[Field, ...]


def _f(
    name: str,
    type_: str,
    doc: str,
    *,
    nullable: bool = False,
    optional: bool = False,
    const: str | None = None,
) -> Field:
    return Field(name, type_, doc, nullable, optional, const)


_JOB = _f("job", "str", "application id (application_NNNNN)")
_USER = _f("user", "str", "the submitting user")
_QUEUE = _f("queue", "str", "the leaf queue")
_NODE = _f("node", "str", "node id")
_CONTAINER = _f("container", "str", "container id")

#: Every event type, its fields in record order. The metrics read these fields only.
SCHEMA: dict[str, EventType] = {
    e.name: e
    for e in (
        EventType(
            RUN_STARTED,
            "a run began (first record); what the metrics need to know of the run",
            (
                _f("policy", "str", "the scheduling policy"),
                _f("workload", "str", "the workload's name", nullable=True),
                _f("mode", "str", "sim, local, docker, live"),
                _f("seed", "int", "the workload's seed", nullable=True),
                _f("dilation", "float", "emulated seconds per wall second (1 in sim)"),
                _f("heartbeat_s", "float", "the NM heartbeat interval"),
                _f("nodes", "int", "nodes at the start"),
                _f("capacity", "resources", "the cluster's total resources"),
            ),
        ),
        EventType(
            RUN_FINISHED,
            "the run ended (last record)",
            (
                _f("finished", "int", "jobs that succeeded"),
                _f("unfinished", "int", "jobs that did not"),
                _f("stalled", "str", "why the simulator gave up, if it did", nullable=True),
                _f(
                    "submit_timers",
                    "object",
                    "the replay driver's own lag: timer lateness of its submissions and "
                    "polls as a distribution (live runs; treadle.live.lag)",
                    optional=True,
                ),
            ),
        ),
        EventType(
            NODE_REGISTERED,
            "a node joined (or came back after it was lost)",
            (_NODE, _f("rack", "str", "its rack"), _f("resources", "resources", "capacity")),
        ),
        EventType(NODE_LOST, "a node missed its heartbeats and was expired", (_NODE,)),
        EventType(
            JOB_SUBMITTED,
            "an application was submitted",
            (
                _JOB,
                _f("name", "str", "the job's name in the workload"),
                _USER,
                _QUEUE,
                _f("tasks", "int", "tasks in the job"),
                _f(
                    "alone_jct_s",
                    "float",
                    "its JCT alone on the empty cluster (slowdown's denominator)",
                    nullable=True,
                ),
            ),
        ),
        EventType(JOB_STARTED, "an application got its first container", (_JOB, _USER, _QUEUE)),
        EventType(
            JOB_FINISHED,
            "an application ended successfully",
            (_JOB, _USER, _QUEUE, _f("status", "str", "SUCCEEDED", const="SUCCEEDED")),
        ),
        EventType(
            JOB_FAILED,
            "an application ended without success (its AM failed it, its attempts ran "
            "out, or it was killed)",
            (
                _JOB,
                _USER,
                _QUEUE,
                _f("status", "str", "FAILED or KILLED"),
                _f("diagnostics", "str", "why"),
            ),
        ),
        EventType(
            ATTEMPT_STARTED, "an AM attempt registered", (_JOB, _f("attempt", "int", "1, 2, ..."))
        ),
        EventType(
            ATTEMPT_FAILED,
            "an AM attempt died or went silent",
            (_JOB, _f("attempt", "int", "1, 2, ..."), _f("reason", "str", "why")),
        ),
        EventType(
            CONTAINER_ALLOCATED,
            "the RM granted a container",
            (
                _JOB,
                _CONTAINER,
                _NODE,
                _f("resources", "resources", "what it holds"),
                _f("priority", "int", "the ask's priority (-1: a managed AM's container)"),
                _f("kind", "str", "DEFAULT or ALTRUISTIC"),
            ),
        ),
        EventType(
            CONTAINER_STARTED,
            "an NM reported the container running (t: when it started)",
            (_JOB, _CONTAINER, _NODE),
        ),
        EventType(
            CONTAINER_FINISHED,
            "a started container ended (t: when it ended)",
            (
                _JOB,
                _CONTAINER,
                _NODE,
                _f("state", "str", "COMPLETE, FAILED, KILLED, LOST or PREEMPTED"),
                _f("exit_status", "int", "0 on success; YARN's codes otherwise"),
            ),
        ),
        EventType(
            CONTAINER_RELEASED,
            "a container that never started was given back",
            (_JOB, _CONTAINER, _NODE),
        ),
        EventType(
            PLACEMENT_REJECTED,
            "the RM refused a policy's placement (nothing was applied)",
            (
                _NODE,
                _f("job", "str", "the placement's application", nullable=True),
                _f("priority", "int", "the placement's priority", nullable=True),
                _f("reason", "str", "why"),
            ),
        ),
        EventType(
            CONTAINER_PREEMPTED,
            "the policy took a running container back (its container_finished follows, "
            "PREEMPTED; its task runs again, not counted as a failed attempt)",
            (_JOB, _CONTAINER, _NODE, _QUEUE),
        ),
        EventType(
            DP_ACCOUNT,
            "one budget account after an allocation interval (Dynamic Priority; one per "
            "queue per interval)",
            (
                _QUEUE,
                _f("price", "float", "sum of the eligible accounts' spending rates"),
                _f("budget", "float", "credits left after the charge"),
                _f("spending_rate", "float", "credits per slot per interval"),
                _f("share", "float", "fraction of the slots granted for the next interval"),
                _f("used", "float", "slots charged for (held, capped at the quota)"),
                _f("pending", "int", "tasks the queue's applications ask for"),
                _f("charged", "float", "credits charged for the interval that ended"),
            ),
        ),
        EventType(
            JOB_ESTIMATED,
            "the policy's estimator gave a job its size (multi-queue policies: gs)",
            (
                _JOB,
                _f("estimate_s", "float", "estimated total task-seconds"),
                _f("position", "int", "the priority position it goes to (0: highest)"),
                _f("ratio", "float", "the sampling ratio of its pilots", nullable=True),
                _f("pilots", "int", "pilot tasks run before the estimate (0: none)"),
            ),
        ),
        EventType(
            JOB_QUEUE_CHANGED,
            "a job moved between priority positions (gs: out of sampling; las: demoted)",
            (
                _JOB,
                _f("from_position", "int", "where it was"),
                _f("to_position", "int", "where it goes"),
            ),
        ),
    )
}


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


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "resources": (dict,),
    "object": (dict,),
}


def check_record(rec: Mapping[str, Any]) -> str | None:
    """What is wrong with ``rec`` against :data:`SCHEMA` (None if nothing): an unknown
    event, a missing or extra field, fields out of order, a value of the wrong kind."""
    etype = SCHEMA.get(rec.get("event"))  # type: ignore[arg-type]
    if etype is None:
        return f"unknown event {rec.get('event')!r}"
    keys = list(rec)
    if keys[:2] != ["t", "event"]:
        return "a record starts with 't' and 'event'"
    want = [f.name for f in etype.fields if not (f.optional and f.name not in rec)]
    if keys[2:] != want:
        return f"{etype.name}: fields {keys[2:]}, expected {want}"
    for f in etype.fields:
        if f.name not in rec:
            continue
        v = rec[f.name]
        if v is None:
            if not f.nullable:
                return f"{etype.name}.{f.name} must not be null"
            continue
        if (isinstance(v, bool) and f.type != "bool") or not isinstance(v, _JSON_TYPES[f.type]):
            return f"{etype.name}.{f.name}: {v!r} is not of type {f.type}"
        if f.const is not None and v != f.const:
            return f"{etype.name}.{f.name} is always {f.const!r}, not {v!r}"
    return None


def schema_markdown() -> str:
    """The schema as a Markdown table (for the README and the docs)."""
    lines = ["| event | fields | meaning |", "|---|---|---|"]
    for e in SCHEMA.values():
        fields = ", ".join(
            f"`{f.name}`" + ("?" if f.optional else "") + ("" if not f.nullable else " (or null)")
            for f in e.fields
        )
        lines.append(f"| `{e.name}` | {fields} | {e.doc} |")
    return "\n".join(lines)


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

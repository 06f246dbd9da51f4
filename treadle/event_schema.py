"""The event log's schema: the event names, each type's fields in order, and the check of
one record against them (the file contract of ``events.jsonl`` and ``events.parquet``; add,
never rename). It is the one place a field is named: the typed builders of both writers
(``treadle.event_builders``) are generated from it by ``python -m treadle.event_codegen``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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

# Times are rounded to 1 us (``round(float(t), 6)``, in each record builder; once per row
# group for the columns): files stay stable across float noise.


@dataclass(frozen=True, slots=True)
class Field:
    """One field of an event type. ``type`` is the JSON value's kind: ``str``, ``int``,
    ``float``, ``bool``, ``resources`` (an object of resource name -> amount) or ``object``
    (any JSON object). ``nullable`` fields may be null; ``optional`` fields are left out
    of the record when they have no value; a ``const`` field always holds that value (its
    builder takes no argument for it). ``arg``: the builder's parameter type when it is not
    the field type's own (:data:`ARG_TYPES`)."""

    name: str
    type: str
    doc: str
    nullable: bool = False
    optional: bool = False
    const: str | None = None
    arg: str | None = None


@dataclass(frozen=True, slots=True)
class EventType:
    """One event type and its builder: ``keywords``: it takes its fields by keyword only
    (many of one kind, where a slip of position would go unnoticed); ``converts``: it
    converts numbers to their field's type (values from numpy or a policy's arithmetic)."""

    name: str
    doc: str
    fields: tuple[Field, ...]
    keywords: bool = False
    converts: bool = False


#: The builders' parameter type of each field type (``Field.arg`` overrides it).
ARG_TYPES = {
    "str": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "resources": "Resources",
    "object": "Mapping[str, Any]",
}


def _f(
    name: str,
    type_: str,
    doc: str,
    *,
    nullable: bool = False,
    optional: bool = False,
    const: str | None = None,
    arg: str | None = None,
) -> Field:
    return Field(name, type_, doc, nullable, optional, const, arg)


_JOB = _f("job", "str", "application id (application_<clusterTimestamp>_NNNN)")
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
                _f(
                    "capacity",
                    "resources",
                    "the cluster's total resources",
                    arg="Mapping[str, float]",
                ),
            ),
            keywords=True,
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
            keywords=True,
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
            converts=True,
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
            converts=True,
        ),
        EventType(
            JOB_QUEUE_CHANGED,
            "a job moved between priority positions (gs: out of sampling; las: demoted)",
            (
                _JOB,
                _f("from_position", "int", "where it was"),
                _f("to_position", "int", "where it goes"),
            ),
            converts=True,
        ),
    )
}


def rows_attr(event: str) -> str:
    """The attribute of a columnar log that holds the pending rows of type ``event``."""
    return f"_{event}_rows"


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
    """The schema as a Markdown table (for the docs)."""
    lines = ["| event | fields | meaning |", "|---|---|---|"]
    for e in SCHEMA.values():
        fields = ", ".join(
            f"`{f.name}`" + ("?" if f.optional else "") + ("" if not f.nullable else " (or null)")
            for f in e.fields
        )
        lines.append(f"| `{e.name}` | {fields} | {e.doc} |")
    return "\n".join(lines)

"""The event schema: one typed builder per event type, every record a run writes
conforms to ``SCHEMA``, and the checker notices what does not."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from treadle import events as ev
from treadle.registry import discover
from treadle.resources import Resources
from treadle.study.runner import PolicyChoice, RunOptions, run_sim
from treadle.workload import load_workload

SAMPLE: dict[str, Any] = {
    "str": "x",
    "int": 3,
    "float": 1.5,
    "bool": True,
    "resources": Resources(vcores=1),
    "object": {"k": 1},
}


def build(name: str, **overrides: Any) -> ev.Record:
    """A record of event type ``name`` built by its EventLog method with sample values."""
    log = ev.EventLog()
    method = getattr(log, name)
    args: dict[str, Any] = {}
    for f in ev.SCHEMA[name].fields:
        mapping = f.type == "resources" and f.arg is not None  # capacity: a plain mapping
        args[f.name] = {"vcores": 1.0} if mapping else SAMPLE[f.type]
    args.update(overrides)
    params = inspect.signature(method).parameters
    method(0.25, **{k: v for k, v in args.items() if k in params})
    (rec,) = log.records
    return rec


@pytest.mark.parametrize("name", list(ev.SCHEMA))
def test_every_event_type_has_a_builder_that_writes_its_fields_in_order(name: str) -> None:
    params = [p for p in inspect.signature(getattr(ev.EventLog, name)).parameters if p != "self"]
    fields = [f.name for f in ev.SCHEMA[name].fields if f.const is None]
    assert params == ["t", *fields]
    rec = build(name)
    assert ev.check_record(rec) is None
    assert list(rec)[:2] == ["t", "event"]
    assert rec["event"] == name


def test_builders_round_times_to_a_microsecond_and_keep_floats() -> None:
    log = ev.EventLog()
    log.node_lost(2, "n1")
    log.node_lost(1.23456789, "n1")
    assert [r["t"] for r in log.records] == [2.0, 1.234568]
    assert ev.dumps(log.records[0]) == '{"t":2.0,"event":"node_lost","node":"n1"}'


def test_optional_fields_are_left_out_when_absent() -> None:
    sim = build("run_finished", submit_timers=None)
    assert "submit_timers" not in sim
    assert ev.check_record(sim) is None
    live = build("run_finished", submit_timers={"late_p50_s": 0.01})
    assert live["submit_timers"] == {"late_p50_s": 0.01}
    assert ev.check_record(live) is None


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"t": 0, "event": "nope"}, "unknown event"),
        ({"event": "node_lost", "t": 0, "node": "n"}, "starts with"),
        ({"t": 0, "event": "node_lost"}, "expected ['node']"),
        ({"t": 0, "event": "node_lost", "node": "n", "extra": 1}, "expected ['node']"),
        ({"t": 0, "event": "node_lost", "node": None}, "must not be null"),
        ({"t": 0, "event": "attempt_started", "job": "j", "attempt": "1"}, "not of type int"),
        ({"t": 0, "event": "attempt_started", "job": "j", "attempt": True}, "not of type int"),
        (
            {"t": 0, "event": "job_finished", "job": "j", "user": "u", "queue": "q", "status": "X"},
            "always 'SUCCEEDED'",
        ),
    ],
)
def test_the_checker_names_what_is_wrong(record: ev.Record, problem: str) -> None:
    found = ev.check_record(record)
    assert found is not None
    assert problem in found


def test_every_record_of_a_run_conforms_under_every_policy() -> None:
    wl = load_workload("demo")
    for policy in discover("policies"):
        result, _ = run_sim(wl, PolicyChoice(policy, {}), options=RunOptions(slowdown=False))
        problems = {ev.check_record(r) for r in result.records} - {None}
        assert problems == set(), policy
        assert result.records[0]["event"] == ev.RUN_STARTED
        assert result.records[-1]["event"] == ev.RUN_FINISHED


def test_the_schema_renders_as_one_table() -> None:
    table = ev.schema_markdown()
    for name in ev.SCHEMA:
        assert f"| `{name}` |" in table

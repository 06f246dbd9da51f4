"""Shared by the CapacityScheduler fidelity tests: run a YAML workload under ``capacity``
in the simulator and read what each queue, user and application held when."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from treadle import events as ev, registry
from treadle.sim import SimResult, Simulation
from treadle.workload.loading import parse_workload


def run(yaml_text: str, **params: Any) -> SimResult:
    """``yaml_text`` simulated under ``capacity`` with ``params``; it must not stall."""
    wl = parse_workload(yaml_text, "fidelity.yaml")
    sim = Simulation(
        wl,
        registry.build("policies", "capacity", params),
        lambda: registry.build("asks", "greedy"),
        policy_name="capacity",
    )
    result = sim.run()
    assert result.stalled is None, result.stalled
    return result


def of(result: SimResult, event: str) -> list[ev.Record]:
    return [r for r in result.records if r["event"] == event]


def job_field(result: SimResult, field: str) -> dict[str, str]:
    """Per application id, its submission's ``field`` (queue, user, name)."""
    return {r["job"]: r[field] for r in of(result, ev.JOB_SUBMITTED)}


def held_at(result: SimResult, t: float, by: str = "queue") -> Counter[str]:
    """Containers held at time ``t`` (allocated at or before, not yet ended), counted per
    queue (``by="queue"``), user or job name."""
    key = job_field(result, "name" if by == "job" else by)
    live: dict[str, str] = {}
    for r in sorted(result.records, key=lambda r: r["t"]):
        if r["t"] > t:
            break
        if r["event"] == ev.CONTAINER_ALLOCATED:
            live[r["container"]] = key[r["job"]]
        elif r["event"] in (ev.CONTAINER_FINISHED, ev.CONTAINER_RELEASED):
            live.pop(r["container"], None)
    return Counter(live.values())


def first_time(result: SimResult, queue: str, count: int) -> float | None:
    """When ``queue`` first held ``count`` containers (None: never)."""
    queue_of = job_field(result, "queue")
    live: set[str] = set()
    for r in sorted(result.records, key=lambda r: r["t"]):
        if r["event"] == ev.CONTAINER_ALLOCATED and queue_of[r["job"]] == queue:
            live.add(r["container"])
        elif r["event"] in (ev.CONTAINER_FINISHED, ev.CONTAINER_RELEASED):
            live.discard(r["container"])
        if len(live) >= count:
            return float(r["t"])
    return None


def queues_yaml(queues: Mapping[str, Mapping[str, Any]]) -> str:
    """A workload's ``queues:`` entries, one flow mapping a line."""
    lines = []
    for name, keys in queues.items():
        body = ", ".join([f"name: {name}", *(f"{k}: {v}" for k, v in keys.items())])
        lines.append(f"  - {{{body}}}")
    return "queues:\n" + "\n".join(lines)

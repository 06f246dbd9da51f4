"""Helpers of the FairScheduler fidelity scenarios: small workloads built from the model
classes, run under ``fair`` in the simulator, and what a scenario reads back from the
event log (who holds what when, which containers were preempted, which jobs run)."""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import Any

from treadle import registry
from treadle.model import (
    ROOT_QUEUE,
    ClusterSpec,
    JobSpec,
    NodeSpec,
    QueueSpec,
    StageSpec,
    Workload,
)
from treadle.resources import Resources
from treadle.sim import SimResult, Simulation

GB = 1024
Record = dict[str, Any]


def res(memory_gb: float, vcores: float = 1) -> Resources:
    return Resources(memory_mb=memory_gb * GB, vcores=vcores)


def nodes(count: int, memory_gb: float, vcores: float) -> ClusterSpec:
    return ClusterSpec(tuple(NodeSpec(f"n{i + 1}", res(memory_gb, vcores)) for i in range(count)))


def job(
    name: str,
    queue: str,
    tasks: int,
    duration_s: float,
    size: Resources,
    *,
    user: str = "u",
    submit_s: float = 0.0,
) -> JobSpec:
    return JobSpec(name, user, submit_s, (StageSpec("s", size, (duration_s,) * tasks),), queue)


def tree(*children: QueueSpec, **root: Any) -> QueueSpec:
    return QueueSpec(ROOT_QUEUE, children=children, **root)


def run(
    cluster: ClusterSpec,
    queues: QueueSpec,
    jobs: list[JobSpec],
    params: Mapping[str, Any] | None = None,
) -> SimResult:
    wl = Workload("fidelity", cluster, tuple(sorted(jobs, key=lambda j: j.submit_s)), queues)
    result = Simulation(
        wl,
        registry.build("policies", "fair", dict(params or {})),
        lambda: registry.build("asks", "greedy"),
        policy_name="fair",
    ).run()
    assert result.stalled is None
    return result


class Log:
    """What a run's event log says, by job name."""

    def __init__(self, result: SimResult) -> None:
        self.records = result.records
        self.name = {r["job"]: r["name"] for r in self.records if r["event"] == "job_submitted"}
        self.allocated = {
            r["container"]: r for r in self.records if r["event"] == "container_allocated"
        }
        # (t, job name, +/- memory, is task) per change of a held container
        self._changes: list[tuple[float, str, float, bool]] = []
        for r in self.records:
            if r["event"] == "container_allocated":
                mem = r["resources"].get("memory_mb", 0.0)
                self._changes.append((r["t"], self.name[r["job"]], mem, r["priority"] >= 0))
            elif r["event"] in ("container_finished", "container_released"):
                a = self.allocated.get(r["container"])
                if a is not None and r.get("state") != "RELEASED":
                    mem = a["resources"].get("memory_mb", 0.0)
                    self._changes.append((r["t"], self.name[a["job"]], -mem, a["priority"] >= 0))
        self._times = [c[0] for c in self._changes]

    def held_gb(self, t: float, tasks_only: bool = False) -> dict[str, float]:
        """Memory (GB) each job holds just after everything that happened at ``t``."""
        out: dict[str, float] = {}
        for _, name, mem, task in self._changes[: bisect.bisect_right(self._times, t)]:
            if task or not tasks_only:
                out[name] = out.get(name, 0.0) + mem / GB
        return {k: v for k, v in out.items() if abs(v) > 1e-9}

    def tasks_running(self, t: float) -> dict[str, int]:
        """Task containers each job holds just after ``t``."""
        out: dict[str, int] = {}
        for _, name, mem, task in self._changes[: bisect.bisect_right(self._times, t)]:
            if task:
                out[name] = out.get(name, 0) + (1 if mem > 0 else -1)
        return {k: v for k, v in out.items() if v}

    def am_started(self, name: str) -> float | None:
        """When ``name``'s AM container was granted (None: never)."""
        for r in self.allocated.values():
            if self.name[r["job"]] == name and r["priority"] < 0:
                return float(r["t"])
        return None

    def preempted(self) -> list[Record]:
        return [r for r in self.records if r["event"] == "container_preempted"]

    def preempted_from(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.preempted():
            out[self.name[r["job"]]] = out.get(self.name[r["job"]], 0) + 1
        return out

    def finished(self, name: str) -> float | None:
        for r in self.records:
            if r["event"] == "job_finished" and self.name[r["job"]] == name:
                return float(r["t"])
        return None

    def completed_tasks(self, name: str) -> int:
        return sum(
            1
            for r in self.records
            if r["event"] == "container_finished"
            and r["state"] == "COMPLETE"
            and self.allocated[r["container"]]["priority"] >= 0
            and self.name[r["job"]] == name
        )

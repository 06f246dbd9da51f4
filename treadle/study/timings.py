"""Where a run's time goes, phase by phase (``treadle sim --timings``): the setup (the
interpreter's start, the imports, the command line and the checks before the workload is
read), loading the workload, the alone references, the simulation itself, the metrics,
writing the files, and ``other`` (between and after those, up to the report). A debugging
aid, printed on stderr; never part of ``summary.json``."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def _since_process_start() -> float | None:
    """Wall seconds since this process started (Linux: ``/proc``, to 1/100 s), or None."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # starttime, 22nd field
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class Timings:
    """Wall seconds per named phase, in the order the phases first ran.

    ``setup=True``: the time from the process's start to now is the first phase,
    ``setup`` (its CPU seconds are the process's so far; its wall seconds count from
    ``started``, a ``perf_counter`` reading, where the process's start is not known)."""

    def __init__(self, *, setup: bool = False, started: float | None = None) -> None:
        self.phases: dict[str, float] = {}
        self.cpu: dict[str, float] = {}  # this process's CPU seconds in each phase
        self._origin = time.perf_counter()
        self._origin_cpu = time.process_time()
        if setup:
            ago = _since_process_start()
            if ago is None and started is not None:
                ago = self._origin - started
            self._origin -= ago or 0.0
            self._origin_cpu = 0.0  # process_time counts from the process's start
            self.phases["setup"] = time.perf_counter() - self._origin
            self.cpu["setup"] = time.process_time()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        cpu = time.process_time()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start
            self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - cpu

    def report(self) -> dict[str, Any]:
        """The phases (wall seconds, 6 decimals), ``other`` (the time since this object
        was made, or since the process's start with ``setup``, that no phase holds), their
        total, the CPU seconds of each (``cpu``: on a busy machine they vary less) and
        this process's peak RSS."""
        wall = time.perf_counter() - self._origin
        cpu = time.process_time() - self._origin_cpu
        phases = {**self.phases, "other": max(0.0, wall - sum(self.phases.values()))}
        cpus = {**self.cpu, "other": max(0.0, cpu - sum(self.cpu.values()))}
        out: dict[str, Any] = {name: round(s, 6) for name, s in phases.items()}
        out["total"] = round(sum(phases.values()), 6)
        out["cpu"] = {name: round(s, 6) for name, s in cpus.items()}
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB (bytes on macOS)
        out["peak_rss_mb"] = round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)
        return out

    def line(self) -> str:
        """``timings: {...}``: one line of JSON, for people and for scripts."""
        return "timings: " + json.dumps(self.report())


@contextmanager
def maybe(timings: Timings | None, name: str) -> Iterator[None]:
    """``timings.phase(name)``, or nothing when there are no timings to keep."""
    if timings is None:
        yield
    else:
        with timings.phase(name):
            yield

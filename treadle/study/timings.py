"""Where a run's wall time goes, phase by phase (``treadle sim --timings``): loading the
workload, the alone references, the simulation itself, the metrics and writing the files.
A debugging aid, printed on stderr; never part of ``summary.json``."""

from __future__ import annotations

import json
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Timings:
    """Wall seconds per named phase, in the order the phases first ran."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.cpu: dict[str, float] = {}  # this process's CPU seconds in each phase

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
        """The phases (wall seconds, 6 decimals), their total, the CPU seconds of each
        (``cpu``: on a busy machine they vary less) and this process's peak RSS."""
        out: dict[str, Any] = {name: round(s, 6) for name, s in self.phases.items()}
        out["total"] = round(sum(self.phases.values()), 6)
        out["cpu"] = {name: round(s, 6) for name, s in self.cpu.items()}
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

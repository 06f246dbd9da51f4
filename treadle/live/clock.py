"""Emulated time for the processes of a live cluster.

emulated seconds = (wall seconds - epoch) x dilation. The RM picks the epoch when it
starts and hands epoch and dilation to every NM and AM at registration, so all processes
agree on "now" without talking. The cores never read this: the services pass ``now`` in.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field


@dataclass
class TimerStats:
    """How late timers fired, in emulated seconds (fidelity is measured, not assumed)."""

    count: int = 0
    total_late_s: float = 0.0
    max_late_s: float = 0.0
    samples: list[float] = field(default_factory=list)
    _limit: int = 10_000

    def record(self, late_s: float) -> None:
        late_s = max(0.0, late_s)
        self.count += 1
        self.total_late_s += late_s
        self.max_late_s = max(self.max_late_s, late_s)
        if len(self.samples) < self._limit:
            self.samples.append(late_s)

    def summary(self) -> dict[str, float]:
        s = sorted(self.samples)
        p99 = s[min(len(s) - 1, int(0.99 * len(s)))] if s else 0.0
        return {
            "timers": self.count,
            "mean_late_s": self.total_late_s / self.count if self.count else 0.0,
            "p99_late_s": p99,
            "max_late_s": self.max_late_s,
        }


class EmulatedClock:
    def __init__(self, epoch: float | None = None, dilation: float = 1.0) -> None:
        if not dilation > 0:
            raise ValueError(f"dilation must be > 0, got {dilation}")
        self.epoch = time.time() if epoch is None else epoch
        self.dilation = dilation
        self.timers = TimerStats()

    def now(self) -> float:
        return (time.time() - self.epoch) * self.dilation

    def wall_seconds(self, emulated_s: float) -> float:
        return emulated_s / self.dilation

    async def sleep_until(self, t: float) -> float:
        """Sleep until emulated time ``t``; return the emulated time on waking and record
        how late the wake-up was."""
        delay = (t - self.now()) / self.dilation
        if delay > 0:
            await asyncio.sleep(delay)
        now = self.now()
        self.timers.record(now - t)
        return now

    async def sleep(self, emulated_s: float) -> float:
        return await self.sleep_until(self.now() + emulated_s)

"""Emulated time for the processes of a live cluster.

emulated seconds = (wall seconds - epoch) x dilation. The RM picks the epoch when it
starts and hands epoch and dilation to every NM and AM at registration, so all processes
agree on "now" without talking. The cores never read this: the services pass ``now`` in.
Every wake-up records how late it was in a ``treadle.live.lag.Lag`` (the process's own
by default), so fidelity is measured, not assumed.
"""

from __future__ import annotations

import asyncio
import time

from treadle.live import lag as lag_mod


class EmulatedClock:
    def __init__(
        self, epoch: float | None = None, dilation: float = 1.0, lag: lag_mod.Lag | None = None
    ) -> None:
        if not dilation > 0:
            raise ValueError(f"dilation must be > 0, got {dilation}")
        self.epoch = time.time() if epoch is None else epoch
        self.dilation = dilation
        self.lag = lag_mod.PROCESS if lag is None else lag
        self.lag.dilation = dilation

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
        self.lag.record_timer((now - t) / self.dilation)
        return now

    async def sleep(self, emulated_s: float) -> float:
        return await self.sleep_until(self.now() + emulated_s)

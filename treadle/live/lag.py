"""How far behind a live process runs: timer lateness and RPC queueing, as distributions.

Two kinds of lag, both recorded in wall seconds and reported in emulated seconds (x the
process's dilation, the unit of the liveness expiries they are compared with):

- timer lateness: how long after its due time a periodic loop or timer woke up (the NM
  heartbeat loop, the RM's expiry loop, every AM's allocate loop, the driver's
  submissions and polls): ``record_timer``, fed by ``EmulatedClock.sleep_until``;
- RPC queueing: how long a request waited between its client sending it (a wall-clock
  stamp in the call's metadata, ``SENT_KEY``, added by every channel of
  ``treadle.live.rpcutil``) and its handler starting: ``record_rpc``, fed by
  ``rpcutil.map_errors``. On one machine both ends read one clock; across hosts the
  figure also holds their clock offset.

A process keeps one ``Lag`` (``PROCESS``); a replay driver keeps its own per run. Each
distribution keeps an exact count and maximum and a uniform sample of at most
``SAMPLE_LIMIT`` values (reservoir sampling, fixed seed) for its percentiles. ``summary``
also states how busy the process's main thread (the event loop) was: its CPU seconds
per wall second (with the time it waited for a CPU, where Linux tells), over the run and
at its peak.
"""

from __future__ import annotations

import random
import time
from collections import deque
from pathlib import Path
from typing import Any

SAMPLE_LIMIT = 20_000
DEMAND_WINDOW_S = 2.0  # wall s: the windows of ``peak_demand``
SENT_KEY = "treadle-sent-unix"  # gRPC metadata: the client's wall clock when it sent
PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))


class Distribution:
    """Non-negative values: exact count and max, percentiles from a bounded sample."""

    def __init__(self, limit: int = SAMPLE_LIMIT) -> None:
        self.count = 0
        self.max = 0.0
        self.samples: list[float] = []
        self._limit = limit
        self._rng = random.Random(0)

    def record(self, value: float) -> None:
        value = max(0.0, value)
        self.count += 1
        if value > self.max:
            self.max = value
        if len(self.samples) < self._limit:
            self.samples.append(value)
        else:  # reservoir sampling: every value so far is kept with the same probability
            k = self._rng.randrange(self.count)
            if k < self._limit:
                self.samples[k] = value

    def summary(self, scale: float = 1.0) -> dict[str, float]:
        """count, p50, p90, p99, max (values x ``scale``)."""
        s = sorted(self.samples)
        out: dict[str, float] = {"count": self.count}
        for name, q in PERCENTILES:
            out[name] = s[min(len(s) - 1, int(q * len(s)))] * scale if s else 0.0
        out["max"] = self.max * scale
        return out


def _usage() -> tuple[float, float]:
    """(wall clock, CPU seconds used or waited for) of the calling thread (the loop's)."""
    wall = time.monotonic()
    try:
        cpu_ns, wait_ns, *_ = Path("/proc/thread-self/schedstat").read_text().split()
        return wall, (int(cpu_ns) + int(wait_ns)) / 1e9
    except (OSError, ValueError):
        return wall, time.thread_time()


def _demand(a: tuple[float, float], b: tuple[float, float]) -> float:
    return (b[1] - a[1]) / (b[0] - a[0]) if b[0] > a[0] else 0.0


class Lag:
    """One process's (or one replay's) timer lateness and RPC queueing."""

    def __init__(self, dilation: float = 1.0) -> None:
        self.dilation = dilation
        self.timer = Distribution()  # wall s
        self.rpc_queue = Distribution()  # wall s
        self._start = self._window = _usage()
        self.peak_demand = 0.0
        #: Expiries this process deferred because it had stalled itself (kind -> count).
        self.deferred_expiries = {"node": 0, "am": 0}

    def tick(self) -> None:
        """Close the current demand window if ``DEMAND_WINDOW_S`` has passed (call it
        from the event loop's thread, often: it is cheap until a window ends)."""
        if time.monotonic() - self._window[0] >= DEMAND_WINDOW_S:
            now = _usage()
            self.peak_demand = max(self.peak_demand, _demand(self._window, now))
            self._window = now

    def record_timer(self, late_wall_s: float) -> None:
        self.timer.record(late_wall_s)

    def record_deferred(self, kind: str) -> None:
        """A node (``kind`` "node") or an AM attempt ("am") went silent past its expiry
        and was kept only because this process had stalled itself: lag, not a fault."""
        self.deferred_expiries[kind] = self.deferred_expiries.get(kind, 0) + 1

    def record_rpc(self, sent_unix_s: float) -> None:
        self.rpc_queue.record(time.time() - sent_unix_s)

    def summary(self) -> dict[str, Any]:
        """Emulated seconds: ``timer_late_s`` and ``rpc_queue_s`` (count, p50, p90, p99,
        max). CPU demand of the main thread (the event loop), in wall s per wall s:
        ``demand`` since the process started (CPU time plus time spent waiting for a
        CPU, Linux schedstat; CPU time alone elsewhere) and ``peak_demand``, the largest
        over windows of ``DEMAND_WINDOW_S``: about 1 means the loop was saturated."""
        self.tick()
        now = _usage()
        return {
            "dilation": self.dilation,
            "timer_late_s": self.timer.summary(self.dilation),
            "rpc_queue_s": self.rpc_queue.summary(self.dilation),
            "demand": _demand(self._start, now),
            "peak_demand": max(self.peak_demand, _demand(self._window, now)),
            "deferred_expiries": dict(self.deferred_expiries),
        }


#: This process's lag: its clocks' timers and the RPCs its servers handled.
PROCESS = Lag()


class Stalls:
    """How long an event loop could not run lately, from the lateness of one of its
    periodic timers: ``record(at, late)`` at each wake-up, ``since(t)`` the lateness of
    the wake-ups at or after ``t`` (any one unit of time; ``t`` never decreases, older
    records are dropped). A host allows for its own stalls with it: the RM expires a
    node or an AM only when it has been silent for the expiry plus the RM's stalls."""

    def __init__(self) -> None:
        self._recent: deque[tuple[float, float]] = deque()
        self._total = 0.0

    def record(self, at: float, late: float) -> None:
        if late > 0:
            self._recent.append((at, late))
            self._total += late

    def since(self, t: float) -> float:
        recent = self._recent
        while recent and recent[0][0] < t:
            self._total -= recent.popleft()[1]
        if not recent:
            self._total = 0.0  # no float dust left behind
        return max(0.0, self._total)


def sent_stamp() -> tuple[str, str]:
    """The metadata entry a client adds to every call (its wall clock now)."""
    return (SENT_KEY, repr(time.time()))


#: Wall seconds between the lag summaries a process logs while it runs (the last one
#: survives a SIGKILL; a clean stop logs a final one).
LOG_EVERY_S = 5.0


async def log_periodically(logger: Any, stop: Any, every_s: float = LOG_EVERY_S) -> None:
    """Log ``PROCESS.summary()`` as ``lag`` every ``every_s`` wall seconds until ``stop``
    (an asyncio.Event) is set."""
    import asyncio
    import contextlib

    last = time.monotonic()
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=DEMAND_WINDOW_S / 2)
        PROCESS.tick()
        if time.monotonic() - last >= every_s:
            last = time.monotonic()
            logger.info("lag_summary", lag=PROCESS.summary())

"""Submit-and-kill churn against a real RM process: do its memory and its state store stay
flat? (issue: "ended work is kept for ever"; bounded retention, ``rm.core.ended``.)

A ``python -m rm`` with a state store and an event log (``--state-dir``, ``--events``,
``--insecure``, no nodes) takes ``--cycles`` rounds of one user submitting a job of one
stage of ``--tasks`` tasks and killing it at once. After each round the RM's resident
memory (``VmRSS`` of /proc/PID/status) and the store's size on disk (the database, its
WAL and shared-memory files) are read; the table shows them after round ``--first`` and
after the last, and their ratios (the target: within 1.2x).

Figures (2-core machine shared with other work; 20 rounds of 1,000,000 tasks; round 2
-> round 20). Before: main at c5d5d4f (``--checkout /work/main``); after: this branch::

                         RM RSS (MB)                 store (MB)
    before               239.3 -> 1080.6  4.52x      38.36 -> 175.84  4.58x
    after                 71.5 ->   71.3  1.00x       5.91 ->   5.92  1.00x
    after, --distinct     78.2 ->  112.8  1.44x       5.91 ->   5.92  1.00x

With every task's duration its own (``--distinct``) the RSS still creeps, ~1.9 MB a
round: the round's long-lived small objects (its events, its ended record) land in the
arenas of Python's small-object allocator that the million floats filled, and keep them.
Traces repeat durations (one float each, ``wire.job_from_pb``), as the default job does.

Run: ``python -m tests.benchmarks churn [--cycles 20] [--tasks 1000000] [--first 2]
[--max-completed-applications N] [--distinct] [--checkout DIR]`` (DIR: another checkout
whose ``python -m rm`` to run, e.g. main's for the "before").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rm.server.store import DB_NAME
from treadle.live.rpcutil import channel
from treadle.rpc.v1 import client_pb2 as client_pb, client_pb2_grpc as client_grpc, common_pb2 as pb


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def store_mb(state: Path) -> float:
    files = [state / DB_NAME, *(state / f"{DB_NAME}-{x}" for x in ("wal", "shm"))]
    return sum(f.stat().st_size for f in files if f.exists()) / 2**20


@contextlib.contextmanager
def rm_process(
    where: Path, kept: int | None, checkout: str | None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = where / "rm.port"
    argv = [sys.executable, "-m", "rm", "--policy", "fifo", "--insecure",
            "--state-dir", str(where / "state"), "--events", str(where / "events.jsonl"),
            "--port-file", str(port), "--log-level", "warning"]  # fmt: skip
    if kept is not None:
        argv += ["--max-completed-applications", str(kept)]
    env = {**os.environ, "PYTHONPATH": checkout} if checkout else None
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, env=env, cwd=checkout)
    try:
        deadline = time.monotonic() + 60
        while not (port.exists() and port.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the RM did not start")
            time.sleep(0.05)
        yield proc, port.read_text().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@dataclass(frozen=True)
class Churn:
    """What to churn: ``cycles`` rounds of a job of ``tasks`` tasks, submitted and killed."""

    cycles: int
    tasks: int
    settle_s: float = 1.5
    distinct: bool = False
    kept: int | None = None  # --max-completed-applications
    checkout: str | None = None  # another checkout's RM


@dataclass(frozen=True)
class ChurnFigures:
    started: tuple[float, float]  # (RSS MB, store MB) before the first round
    rounds: list[tuple[float, float]]  # after each round


def measure(spec: Churn) -> ChurnFigures:
    """Start an RM, churn it as ``spec`` says, and read its RSS and store after each round."""
    with (
        tempfile.TemporaryDirectory(prefix="treadle-churn-") as tmp,
        rm_process(Path(tmp), spec.kept, spec.checkout) as (proc, address),
    ):
        started = (rss_mb(proc.pid), store_mb(Path(tmp) / "state"))
        rounds = asyncio.run(churn(address, proc.pid, Path(tmp) / "state", spec))
    return ChurnFigures(started, rounds)


async def churn(address: str, pid: int, state: Path, args: Churn) -> list[tuple[float, float]]:
    """(RSS MB, store MB) after each round of submitting and killing one job."""
    # Equal durations (as traces repeat them), or with --distinct each its own.
    durations = (
        [10.0 + i * 1e-6 for i in range(args.tasks)] if args.distinct else [10.0] * args.tasks
    )
    job = pb.JobSpec(
        name="churn",
        stages=[pb.StageSpec(name="map", resources=pb.Resources(amounts={"vcores": 1,
                "memory_mb": 1024}), durations=durations)],
    )  # fmt: skip
    request = client_pb.SubmitApplicationRequest(user="alice", job=job)
    out = []
    async with channel(address) as ch:
        stub: Any = client_grpc.ClientStub(ch)
        for n in range(1, args.cycles + 1):
            app_id = (await stub.SubmitApplication(request, timeout=120)).app_id
            await stub.KillApplication(client_pb.KillApplicationRequest(app_id=app_id), timeout=60)
            await asyncio.sleep(args.settle_s)  # a housekeeping pass or two
            out.append((rss_mb(pid), store_mb(state)))
            print(f"round {n:3d}  {app_id}  RSS {out[-1][0]:7.1f} MB  store {out[-1][1]:7.2f} MB",
                  file=sys.stderr, flush=True)  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.benchmarks churn", description=__doc__)
    p.add_argument("--cycles", type=int, default=20)
    p.add_argument("--tasks", type=int, default=1_000_000)
    p.add_argument("--first", type=int, default=2, help="the round compared with the last")
    p.add_argument("--settle-s", type=float, default=1.5, help="wall s to wait after a kill")
    p.add_argument("--max-completed-applications", type=int, dest="kept")
    p.add_argument(
        "--checkout", metavar="DIR", help="run another checkout's RM (e.g. /work/main: before)"
    )
    p.add_argument("--distinct", action="store_true", help="every task a duration of its own")
    args = p.parse_args(argv)
    if not 1 <= args.first < args.cycles:
        p.error("--first must be at least 1 and below --cycles")
    spec = Churn(args.cycles, args.tasks, args.settle_s, args.distinct, args.kept, args.checkout)
    result = measure(spec)
    started, figures = result.started, result.rounds
    (rss_a, store_a), (rss_b, store_b) = figures[args.first - 1], figures[-1]
    print(f"churn: {args.cycles} rounds of submitting and killing a job of {args.tasks:,} "
          f"tasks (one stage), a real RM with a state store and an event log")  # fmt: skip
    print(f"{'':18}{'started':>10}{f'round {args.first}':>12}{f'round {args.cycles}':>12}"
          f"{'ratio':>9}")  # fmt: skip
    print(f"{'RM RSS (MB)':18}{started[0]:10.1f}{rss_a:12.1f}{rss_b:12.1f}{rss_b / rss_a:8.2f}x")
    print(f"{'store (MB)':18}{started[1]:10.2f}{store_a:12.2f}{store_b:12.2f}"
          f"{store_b / store_a:8.2f}x")  # fmt: skip
    return 0

"""``treadle compare`` in worker processes: the wall time of one compare of 4 policies on
a medium workload with ``--workers 1`` (one after another, in-process) and ``--workers 2``
(each policy in a process of its own, two at a time), measured in the same run, and the
speedup. The issue's target: >= 1.8x on 2 cores.

The workload is ``bench_sim``'s (N nodes of 16 vcores, jobs of 100 two-vcore tasks of
~30 s at 80% load, arrivals for S simulated seconds), without slowdown by default (the
alone references are computed in the parent either way; ``--slowdown`` includes them).
Each timed compare runs in a fresh process (spawned), so the parallel one pays the
forkserver's start as a ``treadle compare`` does; the workload is built before the clock
starts; the timing ends when the report is written. Both runs' files are compared byte for
byte (the plots aside) and the benchmark fails if they differ.

Measured on 2026-11-26, 2 cores shared with three other sessions running tests and
benchmarks (load average 2.4-2.7 throughout, so about one core free): 400 nodes, 273 jobs,
27,300 tasks, 2 runs per side: medians 12.80 s (--workers 1) and 12.13 s (--workers 2),
1.06x; outputs identical. That says nothing about the 1.8x target yet: measure it on an
idle machine. In-process timings of the same compare (200 nodes) put the fixed costs of
the parallel side at ~0.45 s (the forkserver importing treadle, overlapped with the alone
references when slowdown is on) plus the report (~0.4 s, written in the parent either way).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.benchmarks.bench_sim import make_workload

POLICIES = ("fifo", "drf", "fair", "sjf")
TARGET = 1.8


def _timed_compare(
    q: Any, nodes: int, span_s: float, workers: int, out: str, slowdown: bool
) -> None:
    from treadle.study.compare import SimBackend, compare
    from treadle.study.runner import PolicyChoice, RunOptions

    wl = make_workload(nodes, span_s)
    choices = [PolicyChoice(p, {}) for p in POLICIES]
    start = time.perf_counter()
    compare(
        wl, choices, Path(out), SimBackend(), options=RunOptions(slowdown=slowdown), workers=workers
    )
    q.put((time.perf_counter() - start, len(wl.jobs), wl.tasks))


def run_once(nodes: int, span_s: float, workers: int, out: Path, slowdown: bool) -> float:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_timed_compare, args=(q, nodes, span_s, workers, str(out), slowdown))
    p.start()
    wall, jobs, tasks = q.get()
    p.join()
    if p.exitcode != 0:
        raise RuntimeError(f"the compare with --workers {workers} exited {p.exitcode}")
    run_once.shape = (jobs, tasks)  # type: ignore[attr-defined]
    wall_s: float = wall
    return wall_s


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix != ".png"
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks compare-workers")
    parser.add_argument("--nodes", type=int, default=400)
    parser.add_argument("--span-s", type=float, default=300.0, help="seconds of arrivals")
    parser.add_argument("--repeat", type=int, default=1, help="runs per side, alternating")
    parser.add_argument("--workers", type=int, default=2, help="the parallel side's workers")
    parser.add_argument("--slowdown", action="store_true", help="include alone references")
    args = parser.parse_args(argv)
    walls: dict[int, list[float]] = {1: [], args.workers: []}
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        for r in range(args.repeat):
            for w in walls:
                out = Path(tmp) / f"r{r}-w{w}"
                walls[w].append(run_once(args.nodes, args.span_s, w, out, args.slowdown))
                print(f"run {r + 1}: --workers {w}: {walls[w][-1]:.2f} s", flush=True)
        first = {w: _files(Path(tmp) / f"r0-w{w}") for w in walls}
        same = first[1] == first[args.workers]
    jobs, tasks = run_once.shape  # type: ignore[attr-defined]
    seq = statistics.median(walls[1])
    par = statistics.median(walls[args.workers])
    print(
        f"compare of {len(POLICIES)} policies ({', '.join(POLICIES)}) on {args.nodes} nodes, "
        f"{jobs} jobs, {tasks} tasks, slowdown {'on' if args.slowdown else 'off'}"
    )
    print(f"--workers 1: {seq:.2f} s   --workers {args.workers}: {par:.2f} s (medians)")
    print(f"speedup {seq / par:.2f}x (target >= {TARGET}x on 2 cores)")
    print(f"outputs identical (plots aside): {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

"""Memory of a whole ``treadle sim`` run against the trace's length, at the same load.

Workload (deterministic, seeded, the issue's measurement): 1,000 nodes of 16 vcores /
65536 memory_mb, 1 s heartbeats; jobs of one stage of 100 tasks of 30 s +- 5 s (uniform),
each task 1 vcore / 4096 memory_mb (16 per node); Poisson arrivals for 80 % load from 10
users (one ``poisson`` generator each, in a small workload file). At 1x the arrivals span
600 s (2,560 jobs, 256,000 tasks); 5x and 20x span five and twenty times that, so
the running work (about 13,000 containers at a time) is the same and only the trace's
length grows. ``--tasks N`` adds a case of about N tasks (the must-show's 10 million).

Each case is ``python -m treadle.cli sim FILE --policy fifo --events none|parquet`` in a
fresh process (the real command: loading, the alone references, the run, the metrics and
the run files); its peak RSS is that process's own ``ru_maxrss`` (``os.wait4``), its time
the process's wall time, per task of the trace. Printed: each case, then per event-log
format the ratios of peak RSS and of time per task to the 1x case.

Then the live case (``--live-cycles``, 1,000 by default; 0 leaves it out): a real ``python
-m rm`` with a state store and an event log takes that many applications of
``--live-tasks`` tasks (20,000), each submitted and killed at once (``bench_churn``), and
its RSS after round ``--live-first`` (10) and after the last are printed, with their ratio
(the target: within 1.2x). ``--scales ''`` runs the live case alone.

``--against DIR`` runs every case in another checkout too (a ``git worktree`` of the start
commit, say), alternating, with that checkout's ``treadle`` on ``PYTHONPATH``; the
workload files are this file's, so both sides run exactly the same trace. It prints this
checkout's figures over the other's.

Measured on 2026-12-02 (2 cores, load average 5-8, so wall times wander by 2-4x between
runs: read the RSS, and instruction counts for time), ``--scales 1,5 --events none``:
main 488543a 575 MB at 1x, 2,138 MB at 5x (3.72x; 1.53 KB per task of the trace);
branch i30-stream (an ended job's AM freed at once) 563 MB and 1,974 MB (3.50x; 1.38 KB
per task); with the ended simulation collected before the metrics, 551 MB and 1,829 MB
(3.32x; 1.25 KB per task). ``--events parquet --against`` main, one run each, alternating:
578 -> 527 MB at 1x, 2,143 -> 1,818 MB at 5x (3.71x -> 3.45x), time per task 0.78x and
0.79x of main's (wall time, noisy as said). That collection costs 0.69 s of CPU at 1x
(of 15.2 s: 4.5%; ``time.process_time`` around it, 425,000 tracked objects), most of it
freeing the RM's ended applications, which a run that released them as they end would
pay as it goes. That collection was left out (its CPU cost is over the time-per-task
target, and the RM's ended applications are now compacted as they end, ``rm.core.ended``,
which was not yet merged when these figures were taken): re-measure on main.
The AM release leaves the loop's instructions as they were: ``bench_sim --child fifo 200
300`` under ``valgrind --tool=cachegrind --cache-sim=no`` with ``PYTHONHASHSEED=0``,
5.5485 G on main, 5.5476 G on the branch, the same events, heartbeats and allocates.

Measured on 2026-12-02, branch h-metrics (the output side) against its start 87c2d70,
one run each, alternating, ``--scales 1,5``: ``--events none`` 564 -> 276 MB at 1x, 1,988
-> 613 MB at 5x (3.53x -> 2.22x of 1x; 0.33 KB per task of the trace beyond 1x, was 1.38
KB); ``--events parquet`` 559 -> 279 MB and 1,986 -> 616 MB (3.55x -> 2.21x); time per task
1.21x and 0.92x of the start's (wall time on a loaded machine: noise, as said). The
outputs are the same bytes (summary.json, jobs.csv, jobs.parquet, events.parquet,
``cmp``) at 600 s and 3,000 s of arrivals and on every golden workload and policy with
both event modes. 10 million tasks (100,000 jobs over 23,438 s of arrivals, ``--events
none``, the same command, input side as at 87c2d70): 3,416 MB peak, 10 min 26 s (63 us
per task, loaded machine), as the 0.33 KB per task predicts; the start's rate predicts
some 14 GB. The loop's instructions
(``bench_sim --child fifo 200 300 1`` under cachegrind as above): 5.4699 G at 87c2d70,
5.4599 G on the branch. What changed: the metrics read ``events.parquet`` a batch of rows
at a time (``treadle.metrics.logfile``: per-job rows and some 60 bytes per container,
never the event table); the utilization series is computed only when read (a run's files
never read it; as Python pairs it was some 200 bytes per container); the RM's book ledger
forgets an application when it ends (it kept every ended ``Application``, with its job,
its asks and its last allocate response, to the end of the run).

Where the rest goes (the same phases in one process, peak RSS after each, at 600 s and
3,000 s of arrivals, ``--events none``): loading 110 -> 157 MB (46 B per task: the decoded
workload, the input side's), the simulation 215 -> 275 MB (13 B per task of its own beyond
the workload), the metrics' scan of the log 256 -> 523 MB and their analysis after it:
about 250-300 B per container at the peak, the per-container spans (start, end, resources,
share, job: 48 B) and the arrays that sort them and that Jain's index over windows builds
per span. That is what stands between this and the 1.25x target: the spans would have to
be swept in (start, end, job, container) order as containers end, and Jain's index and
the utilization level accumulated per window as the sweep passes it.

``--columnar`` converts each case's workload file (``treadle convert``) and runs the
columnar file instead, which ``treadle sim`` streams (read a row group at a time as the
clock approaches the jobs, ``treadle.workload.streaming``). Measured on 2026-12-02,
branch h-stream (from 87c2d70; the metrics' own streaming not in it), ``--scales 1,5
--events none``, the machine shared with other runs (wall times are not comparable):
YAML 585 MB at 1x, 1,992 MB at 5x (3.41x); ``--columnar`` 573 MB and 1,986 MB (3.47x).
Streaming the input saves little of the peak: the decoded workload is 65 MB at 5x (RSS
after ``load_workload`` of the 3,000 s YAML; opening the streamed file: 24 MB, none of
it per task), and the jobs are still held after they are submitted, by the RM's ended
applications, and the peak comes in the metrics' phase (the bulk, as said above). The
10 M-task case was not measured. Outputs of the 600 s and 3,000 s traces (jobs.csv,
summary.json, events.parquet, jobs.parquet) are byte-identical between 87c2d70 and the
branch, YAML or columnar (summary.json's ``source`` aside, which names the file given).

Measured on 2026-12-02 (main de11af6), ``--scales 1,5 --events none --columnar``: 325 MB
at 1x, 637 MB at 5x (1.96x). How much of that is the allocators' rather than live data
(the same command with the environment set, one run each):
``MALLOC_MMAP_THRESHOLD_=131072`` 316 and 626 MB; ``ARROW_DEFAULT_MEMORY_POOL=system``
263 and 625 MB; both 249 and 566 MB (2.27x), wall times within noise. Arrow's default
pool (mimalloc) keeps what the Parquet reads and writes freed, and glibc's dynamic mmap
threshold moves freed numpy blocks onto the heap. The metrics alone on the 5x run's
``events.parquet`` (a fresh process, 64 MB after imports): ``scan_facts`` 7 s, RSS 411 MB
after it, of which ``tracemalloc`` sees 65 MB (the spans, 48 B each) and at most 178 MB
during it; Jain's index then peaks 70-100 MB higher. The allocators lower every case but
not the growth: about 310 B per task of the trace beyond 1x remains, the spans and what
they are sorted and windowed with. The fix that meets the target is the sweep above,
in two passes over the file (the first for the horizon, capacity and jobs, O(jobs); the
second closing each container's span as its end row comes and adding its parts to the
(window, entity) cells in span order, where a cell is final once every container
allocated up to its window has ended).

Measured on 2026-12-02 (main df0586e), ``--scales 1,5 --events none,parquet --columnar
--live-cycles 0``: 325 MB at 1x, 493 MB at 5x (1.51x; ``--events parquet`` 325 and 501 MB,
1.54x), time per task 37.3 and 36.0 us. Two changes brought 5x down from 637 MB. First,
the scan gives the C heap's free pages back (``treadle.c_heap``) after each array it
joins and at its end. Second, Jain's index sums the spans' parts into their cells a chunk
of spans at a time (``fairness.SPAN_CHUNK``), where it built some 100 bytes per span at
once. Metrics alone on the 5x ``events.parquet``: peak 439 -> 345 MB (64 MB of it imports),
and Jain's index no longer raises the peak. Outputs are the same bytes (``cmp`` of
summary.json, jobs.csv, jobs.parquet, events.parquet against 57132ec at 600 s and 3,000 s).
What is left is the spans themselves (48 B each, plus what sorts them), which is what the
sweep above removes. ``--against`` the start commit 0f33e71 (``--scales 1,5 --events none``,
YAML, one run each, alternating, on eaa8e98's parent): time per task 1.007x at 1x and
1.017x at 5x (wall time; 35.2 vs 34.9 and 35.8 vs 35.2 us), peak RSS 0.49x and 0.30x.
The live case, 1,000 applications of 20,000 tasks: 63.8 MB after round 10, 66.9 MB after
round 1,000 (1.05x). ``--tasks 10000000 --columnar --events none``: 2,276 MB peak in
392 s (39.2 us per task); eaa8e98 (the heap's pages given back after the scan only)
2,919 MB, and the start of that day 3,306 MB. The target is under 2 GB.

Measured on 2026-12-03 (main d1c7c8a), ``--scales 1,5 --events none,parquet --columnar
--live-cycles 0``: 264 MB at 1x, 301 MB at 5x (1.14x; ``--events parquet`` 267 and 309 MB,
1.16x). ``--tasks 10000000 --columnar --events none``: 695 MB peak, 491 s (49.1 us per task,
the machine running tests beside it). ``--scales 1,5 --events none --against`` 0f33e71
(YAML: 0f33e71 reads no columnar file): 259 and 344 MB (1.33x: a YAML workload is decoded
whole, 46 B per task), against 617 and 2,136 MB; time per task 1.009x and 0.975x. What
changed, each measured on the 5x run: the spans are swept from the file in span order a
chunk at a time (``treadle.metrics.sweep``: the running containers and 8 B per container
held, where the scan held some 150 B per container); ``id_hashes`` hashes a row group's
dictionary a slice at a time (its work arrays were 32 B per byte of ids: 58 MB at once);
row groups are read whole and cut into batches (``iter_batches`` kept some 100 KB of
Arrow's memory per batch to the end of the file); Arrow's pool gives its free pages back
with the C heap's (``release_free_heap``, after each row group the event log writes and
every 16 batches the metrics read); a columnar workload's row group is decoded 256 jobs at
a time (10,000 jobs' durations as Python floats were 41 MB); and a streamed run's alone
references are keyed by a digest of the job's shape, where the shape itself kept every
job's durations to the end of the run (41 MB). Outputs are the same bytes (summary.json,
jobs.csv, jobs.parquet, events.parquet, ``cmp`` against 121b578's at 600 s and 3,000 s).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.benchmarks.bench_churn import Churn, measure
from tests.benchmarks.bench_sim import LOAD, TASK_S, TASKS_PER_JOB, USERS

NODES = 1000
SLOTS_PER_NODE = 16  # tasks of 1 vcore (bench_sim's take 2)
BASE_SPAN_S = 600.0
DEFAULT_SCALES = (1, 5, 20)
EVENTS = ("none", "parquet")

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]


def jobs_per_user(span_s: float) -> int:
    """Jobs each user submits over ``span_s`` at the bench's load (the expected count)."""
    rate = LOAD * NODES * SLOTS_PER_NODE / (TASKS_PER_JOB * TASK_S)  # jobs per second
    return max(1, round(rate * span_s / USERS))


def workload_yaml(span_s: float, seed: int = 1) -> str:
    """The bench's workload file: ``USERS`` Poisson generators sized for ``span_s``."""
    rate = LOAD * NODES * SLOTS_PER_NODE / (TASKS_PER_JOB * TASK_S)
    per_min = rate * 60.0 / USERS
    count = jobs_per_user(span_s)
    lines = [
        "# bench_memory: 80 % load on 1,000 nodes, jobs of 100 tasks of 30 s +- 5 s",
        f"seed: {seed}",
        "cluster:",
        "  nodes:",
        f"    - {{count: {NODES}, resources: {{vcores: 16, memory_mb: 65536}}}}",
        "users:",
        *(f"  user{u}: {{weight: 1}}" for u in range(USERS)),
        "generators:",
    ]
    for u in range(USERS):
        lines += [
            "  - kind: poisson",
            f"    user: user{u}",
            f"    rate_per_min: {per_min!r}",
            f"    count: {count}",
            "    job:",
            "      stages:",
            f"        - {{name: s0, tasks: {TASKS_PER_JOB}, resources: {{vcores: 1, "
            "memory_mb: 4096}, duration_s: {dist: uniform, low: 25, high: 35}}",
        ]
    return "\n".join(lines) + "\n"


@dataclass
class Case:
    checkout: Path
    label: str  # 1x, 5x, ... or the task count
    events: str
    tasks: int
    wall_s: float
    peak_rss_mb: float

    @property
    def us_per_task(self) -> float:
        return self.wall_s / self.tasks * 1e6


def run_case(checkout: Path, trace: Path, events: str, label: str, tasks: int) -> Case:
    """``treadle sim`` of ``trace`` in a fresh process importing ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as out:
        argv = [sys.executable, "-m", "treadle.cli", "sim", str(trace), "--policy", "fifo"]
        argv += ["--out", out, "--events", events]
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv, env=env, cwd=checkout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        assert proc.stderr is not None
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"treadle sim failed in {checkout} ({label}):\n{err[-2000:]}")
    kb = usage.ru_maxrss  # KiB on Linux
    return Case(checkout, label, events, tasks, wall, kb / 1024.0)


def _print(cases: list[Case], against: Path | None) -> None:
    head = (
        f"{'checkout':<10} {'events':<8} {'trace':>6} {'tasks':>11} {'wall s':>8} "
        f"{'us/task':>8} {'peak MB':>9} {'RSS / 1x':>9}"
    )
    print(head + "\n" + "-" * len(head))
    base: dict[tuple[Path, str], Case] = {}
    for c in cases:
        base.setdefault((c.checkout, c.events), c)
        first = base[(c.checkout, c.events)]
        side = "this" if c.checkout == REPO else "against"
        print(
            f"{side:<10} {c.events:<8} {c.label:>6} {c.tasks:>11,} {c.wall_s:>8.1f} "
            f"{c.us_per_task:>8.1f} {c.peak_rss_mb:>9.0f} "
            f"{c.peak_rss_mb / first.peak_rss_mb:>8.2f}x"
        )
    if against is None:
        return
    print("\nthis / against (peak RSS, time per task):")
    theirs = {(c.label, c.events): c for c in cases if c.checkout == against}
    for c in cases:
        other = theirs.get((c.label, c.events))
        if c.checkout == REPO and other is not None:
            print(
                f"  {c.events:<8} {c.label:>6}: RSS {c.peak_rss_mb / other.peak_rss_mb:.3f}x, "
                f"time per task {c.us_per_task / other.us_per_task:.3f}x"
            )


def _converted(trace: Path) -> Path:
    """``trace`` converted to a columnar file beside it (by this checkout's treadle)."""
    out = trace.with_suffix(".parquet")
    argv = [sys.executable, "-m", "treadle.cli", "convert", str(trace), "--to", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run(argv, env=env, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return out


def live_rm(cycles: int, tasks: int, first: int) -> str:
    """The live RM's line: its RSS after round ``first`` and after the last of ``cycles``
    rounds of an application of ``tasks`` tasks submitted and killed (``bench_churn``)."""
    rounds = measure(Churn(cycles, tasks)).rounds
    a, b = rounds[first - 1][0], rounds[-1][0]
    return (
        f"live RM ({cycles:,} applications of {tasks:,} tasks submitted and killed): RSS "
        f"after {first:,} {a:.1f} MB, after {cycles:,} {b:.1f} MB, {b / a:.2f}x"
    )


def _int_list(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks memory", description=__doc__)
    ap.add_argument("--scales", type=_int_list, default=list(DEFAULT_SCALES), help="e.g. 1,5")
    ap.add_argument("--events", default=",".join(EVENTS), help="none, parquet or both")
    ap.add_argument("--tasks", type=int, help="also a case of about this many tasks")
    ap.add_argument("--against", type=Path, help="another checkout to measure in the same run")
    ap.add_argument(
        "--columnar",
        action="store_true",
        help="run each trace as a columnar file (treadle convert of the YAML, streamed)",
    )
    ap.add_argument("--live-cycles", type=int, default=1000, help="live RM rounds (0: none)")
    ap.add_argument("--live-tasks", type=int, default=20_000, help="tasks per live application")
    ap.add_argument("--live-first", type=int, default=10, help="the round compared with the last")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.live_cycles and not 1 <= args.live_first < args.live_cycles:
        ap.error("--live-first must be at least 1 and below --live-cycles")
    if args.live_cycles < 0 or args.live_tasks < 1:
        ap.error("--live-cycles must be >= 0 and --live-tasks >= 1")
    formats = [e.strip() for e in args.events.split(",") if e.strip()]
    if args.against is not None and not (args.against / "treadle").is_dir():
        ap.error(f"--against {args.against}: not a treadle checkout")
    against = args.against.resolve() if args.against is not None else None
    spans = [(f"{s}x", BASE_SPAN_S * s) for s in args.scales]
    if args.tasks:
        per_second = jobs_per_user(BASE_SPAN_S) * USERS * TASKS_PER_JOB / BASE_SPAN_S
        spans.append((f"{args.tasks / 1e6:g}M", args.tasks / per_second))
    checkouts = [REPO] if against is None else [against, REPO]
    cases: list[Case] = []
    with tempfile.TemporaryDirectory(prefix="bench-memory-wl-") as tmp:
        for label, span in spans:
            trace = Path(tmp) / f"memory-{label}.yaml"
            trace.write_text(workload_yaml(span), encoding="utf-8")
            if args.columnar:
                trace = _converted(trace)
            tasks = jobs_per_user(span) * USERS * TASKS_PER_JOB
            for events in formats:
                for checkout in checkouts:
                    c = run_case(checkout, trace, events, label, tasks)
                    cases.append(c)
                    print(
                        f"  {checkout.name} {events} {label}: {tasks:,} tasks, "
                        f"{c.wall_s:.1f} s, {c.peak_rss_mb:.0f} MB",
                        flush=True,
                    )
    cases.sort(key=lambda c: (c.checkout != REPO, c.events, c.tasks))
    print()
    if cases:
        _print(cases, against)
    if args.live_cycles:
        print("\n" + live_rm(args.live_cycles, args.live_tasks, args.live_first))
    return 0


if __name__ == "__main__":
    sys.exit(main())

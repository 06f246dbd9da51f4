"""The event log and the metrics of one run, before and after they became columns: the
same run's metrics by the per-record reference (``tests.reference_metrics``, the yardstick)
and by the array code, and its log written as ``events.jsonl`` (after the run, from the
records) and as ``events.parquet`` (row groups streamed during the run), timed in the same
process; bytes per task of each log; and the metrics of a run with a far-future submit.

The workload is ``bench_sim``'s (N nodes of 16 vcores, 1 s heartbeats, jobs of 100 tasks of
~30 s at 80% load for S simulated seconds), fifo, no slowdown. The run is simulated twice,
``--events jsonl`` (records in memory) then ``--events parquet``; the summaries and job
lists of all the ways are compared and the benchmark fails if they differ.

Measured on 2026-11-25, 2 cores shared with five other sessions (load average 5-9: the
absolute times are several times an idle machine's and move by 2x between runs; read the
ratios of one run), ``--workload /tmp/e2e/w1000.yaml`` (the issue's: 1,000 nodes, 2,594
jobs, 259,400 tasks, 789,578 rows), one run:

* metrics: reference 9.50 s; arrays from events.parquet 2.69 s (read 0.97 + 1.72): 3.5x;
  arrays from the records 11.48 s (0.8x: turning a list of dicts into columns is itself a
  pass per record, which a run with ``--events parquet|none`` never makes);
* event log: write events.jsonl 6.13 s after the run; the row groups of events.parquet
  2.55 s in all, during the run: 2.4x less;
* bytes per task: events.jsonl 493, events.parquet 28.7 (17x smaller);
* the metrics of a run with a 1e12 s submit gap: 0.003 s;
* summaries and job lists: the same all three ways.

``treadle sim /tmp/e2e/w1000.yaml --policy fifo --no-slowdown`` split by timers, before
(main at 1dfd7ac) and after, in two processes a minute apart (loads 8.8 and ~6): metrics
25.6 s -> 1.5 s + 2.7 s to read the columns back (0.5-0.8 s when measured again alone);
writing the files 9.4 s -> 0.04 s after the run (the log's row groups are written during
it); summary.json and jobs.csv byte-identical.

2026-11-26, the rows grouped by event type (main at d9f73bf against branch i13/evlog-rows,
run in alternation in one session; 2 cores, load average 5-6.5, so CPU seconds, best of
the runs). This benchmark's defaults (200 nodes, 83k rows), two runs each: a task's three
rows, logged and turned into tables, 5771 and 4402 ns -> 2908 and 2673 ns (16-20x -> 9.3-9.5x
three calls that do nothing, 272-313 ns); the row groups during the run 0.21 and 0.19 s CPU
-> 0.17 and 0.20 s (tables 0.15-0.17 -> 0.13-0.15, writing 0.04-0.05: in the run the
conversion of each string to Arrow dominates, and ``t``'s rounding moved there from the
builders). Where the builders' time went: ``round(float(t), 6)`` was 200 of their 380 ns a
row; a row now costs a tuple and a bytearray append (150 ns), and ``t`` is rounded once per
row group by numpy (``event_table.rounded_times``: bit for bit ``round``, those within
rounding error of a half microsecond through ``round``). The row group from the rows of
one fifo run of w1000.yaml --limit-jobs 600 (three groups, 183k rows, outside the run):
0.53 -> 0.28 s (no sort of the rows, one ``zip`` per type, resource vectors converted per
distinct object, the resource check per distinct vector). ``Simulation.run`` with
``--events parquet``, w1000.yaml --limit-jobs 600, fifo, best of 3, two rounds: 3.31 and
3.37 s -> 2.93 and 2.98 s CPU (about -11%); row groups 0.56 and 0.65 -> 0.49 and 0.49 s.
``treadle sim /tmp/e2ek/w1000.yaml --policy fifo --no-slowdown`` (789k rows), simulate
phase, three runs each: 13.8, 12.5, 13.3 s -> 12.3, 13.6, 12.0 s CPU (best -4%, at the
edge of the noise). Outputs (events.parquet, events.jsonl, jobs.csv, jobs.parquet,
summary.json) byte-identical for fifo, drf and fair (--limit-jobs 600) and for fifo on the
whole file.

2026-12-02, the builders of both logs generated from the schema (``treadle.event_builders``
by ``python -m treadle.event_codegen``; branch i31/evlog against main at 0f33e71). Instruction
counts (valgrind --tool=callgrind, PYTHONHASHSEED=0, bytecode cached; per task: the count
at 30,000 tasks minus that at 10,000, over 20,000) of the three container rows of a task,
its ids made in the loop as ``builder_cost`` makes them: rows only (no row group built)
19,762 -> 19,673 instructions (-0.5%; bytecode not cached); rows and their row groups
31,037 -> 30,994 (-0.1%); as records into an EventLog 31,861 -> 31,851 (-0.0%). Importing
the log costs +1.4M instructions (166.6M -> 168.1M for ``import treadle.event_columns``:
the larger generated module). ``bench_sim``'s ``run_case`` at 40 nodes, 120 s, fifo (1,100
tasks, 3,386 records), the run without the imports: 438.35M -> 439.18M (+0.19%; the same
base checkout with 2,000 more objects allocated before it starts, which moves only the
addresses: 439.33M, so within the layout's noise). Wall clock, load average 10-13 (so
read the ratios): this benchmark three times each in alternation, a task's three rows
3426/3483/3190 -> 3475/3217/2509 ns, as records 2737/2726/2518 -> 2710/2458/2196 ns;
``python -m tests.benchmarks sim --against`` at 1,000 nodes, 5 runs each: fifo 1.075x
(medians 12.9 vs 12.0 simulated s per wall s; best 1.120x). Golden outputs
byte-identical.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.benchmarks.bench_sim import make_workload


def _timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks eventlog", description=__doc__)
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--span-s", type=float, default=600.0)
    ap.add_argument("--workload", help="a workload file instead (e.g. /tmp/e2e/w1000.yaml)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)

    from tests.reference_metrics import summary as reference
    from treadle import event_columns as ec, events as ev, metrics
    from treadle.study import runner
    from treadle.workload import load_workload, parse_workload

    wl = load_workload(args.workload) if args.workload else make_workload(args.nodes, args.span_s)
    tasks = sum(j.tasks for j in wl.jobs)
    print(f"workload: {len(wl.cluster.nodes)} nodes, {len(wl.jobs)} jobs, {tasks} tasks; fifo")
    choice = runner.PolicyChoice("fifo", {})
    weights = {name: u.weight for name, u in wl.users.items()}
    flush_s = write_s = 0.0  # CPU seconds: the machine is shared
    real_flush, real_write = ec.ColumnarEventLog.flush, ec.ParquetEventWriter.write

    def timed_flush(self: ec.ColumnarEventLog) -> None:
        nonlocal flush_s
        start = time.process_time()
        real_flush(self)
        flush_s += time.process_time() - start

    def timed_write(self: ec.ParquetEventWriter, table: Any) -> None:
        nonlocal write_s
        start = time.process_time()
        real_write(self, table)
        write_s += time.process_time() - start

    ec.ColumnarEventLog.flush = timed_flush  # type: ignore[method-assign]
    ec.ParquetEventWriter.write = timed_write  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        result, sim_dicts = _timed(runner._simulate, wl, choice, runner.RunOptions(), None, {})
        records = result.records
        old, old_s = _timed(reference.analyze, records, policy="fifo", user_weights=weights)
        new, new_s = _timed(metrics.analyze, records, policy="fifo", user_weights=weights)
        _, jsonl_s = _timed(ev.write_jsonl, records, out / "events.jsonl")
        jsonl_bytes = (out / "events.jsonl").stat().st_size
        del result, records
        log = ec.ParquetEventLog(out / "events.parquet", list(wl.cluster.capacity))
        _, sim_columns = _timed(runner._simulate, wl, choice, runner.RunOptions(), None, {}, log)
        log.close()
        table, read_s = _timed(metrics.read_log, out / "events.parquet")
        cols, cols_s = _timed(metrics.analyze, table, policy="fifo", user_weights=weights)
        parquet_bytes = (out / "events.parquet").stat().st_size

        far = parse_workload(FAR, "far.yaml")
        runner.run_sim(far, choice, out / "far", options=runner.RunOptions(slowdown=False))
        far_table = metrics.read_log(out / "far" / "events.parquet")
        _, far_s = _timed(metrics.analyze, far_table, policy="fifo")

    def same(a: Any, b: Any) -> bool:
        return json.dumps(a.summary, sort_keys=True) == json.dumps(b.summary, sort_keys=True) and [
            tuple(vars_of(j)) for j in a.jobs
        ] == [tuple(vars_of(j)) for j in b.jobs]

    rows = len(table)
    print(f"metrics, per-record reference (yardstick): {old_s:7.2f} s")
    print(f"metrics, arrays from the records:          {new_s:7.2f} s  ({old_s / new_s:.1f}x)")
    print(
        f"metrics, arrays from events.parquet:       {read_s + cols_s:7.2f} s  "
        f"(read {read_s:.2f} + {cols_s:.2f}; {old_s / (read_s + cols_s):.1f}x)"
    )
    print(f"write events.jsonl after the run:          {jsonl_s:7.2f} s")
    print(
        f"events.parquet row groups during the run:  {flush_s:7.2f} s CPU  "
        f"(tables {flush_s - write_s:.2f} + writing {write_s:.2f}; {jsonl_s / flush_s:.1f}x "
        f"less than jsonl)"
    )
    per_row, per_record, per_call = builder_cost(ec, ev)
    print(
        f"a task's three rows (allocated, started, finished): {per_row * 1e9:.0f} ns "
        f"logged, {per_call * 1e9:.0f} ns for three calls that do nothing "
        f"({per_row / per_call:.2f}x); as three records: {per_record * 1e9:.0f} ns"
    )
    print(
        f"simulation with dict records / with rows:  {sim_dicts:7.2f} s / {sim_columns:.2f} s "
        f"(includes the row groups)"
    )
    print(
        f"bytes per task: events.jsonl {jsonl_bytes / tasks:.0f}, "
        f"events.parquet {parquet_bytes / tasks:.1f} ({rows} rows)"
    )
    print(f"metrics of a run with a 1e12 s submit gap: {far_s:.3f} s")
    ok = same(old, new) and same(new, cols)
    print(f"same summary and jobs, reference / records / parquet: {ok}")
    return 0 if ok and far_s < 1.0 else 1


def builder_cost(ec: Any, ev: Any, tasks: int = 100_000) -> tuple[float, float, float]:
    """CPU seconds per task of logging its three container rows into a ColumnarEventLog
    (row groups built and dropped), of logging them as records into an EventLog (kept),
    and of three calls to a method that does nothing (the yardstick: what the call sites
    cost whatever the log does); best of 3, with the cyclic GC off as in
    ``Simulation.run``."""
    import gc

    from treadle.resources import Resources

    res = Resources(vcores=1, memory_mb=2048)
    ids = [
        (f"application_{i // 100:05d}", f"container_{i:08d}", f"node{i % 1000}")
        for i in range(tasks)
    ]

    class Nothing:
        def container_allocated(self, *args: Any) -> None:
            pass

        container_started = container_finished = container_allocated

    def run(log: Any) -> float:
        alloc, start, finish = (
            log.container_allocated,
            log.container_started,
            log.container_finished,
        )
        t0 = time.process_time()
        for k, (job, cid, node) in enumerate(ids):
            t = k * 0.001
            alloc(t, job, cid, node, res, 0, "DEFAULT")
            start(t + 0.5, job, cid, node)
            finish(t + 30.0, job, cid, node, "COMPLETE", 0)
        if hasattr(log, "flush"):
            log.flush()
        return time.process_time() - t0

    gc.disable()
    try:
        logged = min(
            run(ec.ColumnarEventLog(lambda table: None, ["memory_mb", "vcores"])) for _ in range(3)
        )
        records = min(run(ev.EventLog()) for _ in range(3))
        nothing = min(run(Nothing()) for _ in range(3))
    finally:
        gc.enable()
    return logged / tasks, records / tasks, nothing / tasks


def vars_of(job: Any) -> list[Any]:
    return [getattr(job, f) for f in job.__dataclass_fields__]


FAR = """
seed: 1
cluster:
  nodes:
    - {count: 2, resources: {vcores: 4, memory_mb: 8192}}
jobs:
  - name: now
    user: alice
    submit_s: 0
    stages:
      - {name: map, tasks: 4, duration_s: 10, resources: {vcores: 1, memory_mb: 1024}}
  - name: later
    user: bob
    submit_s: 1.0e+12
    stages:
      - {name: map, tasks: 2, duration_s: 5, resources: {vcores: 1, memory_mb: 1024}}
"""

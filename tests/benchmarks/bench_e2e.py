"""End to end: ``treadle sim`` and ``treadle compare`` as a user runs them, against a bare
heap-based DES of the same workload shape measured in the same run.

Workload (the issue's shape, from a seeded Poisson generator, written as YAML to a temp
directory so that loading is measured as a user meets it): N nodes of 16 vcores /
65536 MB, 1 s heartbeats, jobs of 100 one-vcore / 2048 MB tasks of 25-35 s (uniform),
arriving for ``span`` simulated seconds at 80% load (at 1,000 nodes and 600 s: ~2,600
jobs, ~260k tasks), over 10 users.

Per size it prints:

- the bare DES: YARN at its barest, no protocol, no AM, no event log. Every node
  heartbeats every ``heartbeat_s`` at its phase and takes pending tasks FIFO into its free
  vcores; a task frees its vcore ``duration`` after it started. One ``heapq`` of events.
  Its speed (simulated seconds per wall second) is the yardstick;
- ``treadle sim --policy fifo`` in a subprocess, ``--no-slowdown`` and with slowdown, each
  with a cold alone cache (``TREADLE_CACHE_DIR`` a fresh directory): end-to-end speed
  (the run's makespan over the wall time of the whole command) and its ratio to the bare
  DES; the core loop's speed (``Simulation.run``: the ``simulate`` phase of
  ``--timings``) and its ratio; the split of the wall time (process start and imports,
  load, alone references, simulate, metrics, write); bytes of event log per task
  (``events.jsonl`` or ``events.parquet``, whichever the run wrote); peak RSS (the
  child's, from ``wait4``);
- ``treadle compare`` of 4 policies with ``--workers`` 1, 2 and the machine's cores (on a
  smaller size, ``--compare-nodes``): wall times, speedups, and whether the outputs are
  identical (plots aside).

Targets (the issue's): end-to-end ``--no-slowdown`` >= 0.25x the bare DES at 1,000 nodes,
>= 0.15x with slowdown (cold cache).

Measured on 2026-11-25, branch i13/core-speed against main (a8cf56b) in the same session, 2
cores shared with other sessions (load average 3-4: the bare DES's own CPU time moved from
0.66 to 1.05 s between runs, so the ratios below are all taken against its best, 0.66 s =
964x; treadle's CPU seconds are the firmer figures, and even they move 10-20% run to run).
At 1,000 nodes (2,434 jobs, 243k tasks, 635 simulated s), ``treadle sim --no-slowdown``,
one run each: main 17.3 s CPU end to end (0.038x bare), core loop about 11.8 s (0.056x);
this branch 15.1 s (0.044x), core loop about 10.3 s (0.064x); with slowdown 18.4 -> 16.0 s
CPU. Split (this branch, wall): start 9%, load 10%, simulate 71%, metrics 10%, write 0%;
event log 28 bytes per task (Parquet); peak RSS 760 MB. At 200 nodes (120 s of arrivals)
the run is mostly start-up (start 65%: importing ``treadle.study.runner`` alone is 0.75 s
CPU). The core loop alone (``Simulation.run``, 120 s of arrivals, main and the branch run
in alternation, best of 3-6, two sessions): 1,000 nodes fifo 2.53 -> 2.45 s and 3.21 ->
2.86 s, drf 3.82 -> 3.81 s and 4.43 -> 3.97 s, fair 6.21 -> 5.89 s; 200 nodes fifo 0.56
-> 0.48 s, drf 0.80 -> 0.76 s: a few per cent, at the edge of the noise. Firmer: the
workload YAML 2.1 -> 1.6 s CPU (1,000 nodes, 600 s), the Parquet row groups 0.20 -> 0.15 s
(171k rows). Where the core loop's time goes now (fifo, cProfile): the RM's heartbeat and
placements (``rm.core.nodes``, ``rm.core.scheduling``: about half), a container's end in the RM
(``rm.core.containers.done``, its books), the NM's and AM's per-container work, the event log
(about 10%: the row tuples, then ``table_from_rows``); drf and fair add the entitlements
sent on every Allocate call (about 15% and 9% of their core loop), and their AM calls are
never skipped (20.7k calls against fifo's 7.3k: ``SchedulingHints.skip_allocate`` refuses
whenever the policy sends shares). Compiling the RM, NM and AM cores and the simulator
loop with mypyc (an experiment, not in the build) changed nothing measurable (fifo 3.04 vs
3.23 s, best of 4): that code mostly handles uncompiled objects (messages, ``Resources``,
dicts). Compare of 4 policies: not re-measured here.

2026-11-26, branch i13/process against main (d9f73bf), ``treadle sim w1000.yaml --policy
fifo --no-slowdown --timings``, 3 runs each alternated, same venv, best CPU s (machine at
load 6-7): whole process 19.5 -> 15.8; load 1.74 -> 0.81 (the cyclic GC paused while it
loads: ``treadle.study.heap``); metrics 1.61 -> 1.01 (GC paused; ids ranked in Arrow; the
dp/estimation columns read only when used); outside the old phases 1.51 -> 0.81 (now
``setup`` 0.72, from the process's start, ``other`` 0.01, and 0.08 of exit: what the run
made is frozen, so the exit does not scan it). Peak RSS 716 -> 596 MB (the columns not
read). Six runs in one process (300 nodes, fifo/drf/fair/sjf/fifo/drf): RSS flat at ~300 MB
both ways, tracked objects flat (~65.6k), no cyclic garbage left (the run's cycles,
387k objects at 1,000 nodes, are young when it ends: the next collection takes them).

2026-11-26 (i13/core2, the per-container work): a heartbeat acknowledged in the NM's own
call, a heartbeat's completions ended in one RM call, AMs woken only on news, and the
RM's books kept lazily while exact (``rm.core.books``). Opcodes run by ``Simulation.run``
(w1000.yaml, first 100 jobs; deterministic): fifo 35.3M -> 28.8M (-19%), drf 48.5M ->
47.5M, fair 47.3M -> 46.2M (-2%); cProfile calls (800 jobs, fifo) 12.4M -> 11.0M. The
simulate phase's CPU, alternating, best of 3, load average ~6.7 (noisy): full file fifo
14.31 -> 11.95 s; 600 jobs drf 4.05 -> 3.71 s, fair 3.44 -> 3.26 s.

2026-11-26, branch i13/alloc-skip against main (d9f73bf), /tmp/e2ek/w1000.yaml (1,000
nodes, 2,434 jobs), greedy asks, load average 5-6 on 2 cores: a greedy AM's quiet calls
are now skipped under drf and fair too (``rm/core/hints.py``): Allocate calls made 90,089 ->
31,697 (drf) and 90,106 -> 31,739 (fair), the rest skipped. The core loop barely moves
(simulate phase CPU, best of 3 alternating: drf 19.7 -> 18.7 s, fair 19.2 -> 18.7 s;
600 jobs, best of 3 x 3: within the noise): a skipped call still costs its heap event,
its request and the share computation it would have triggered (kept so that outputs
stay exact), and the entitlements are computed 2,851 times either way, 2,434 of them
right after a submission invalidated the cache (``SharesCache``), not per call.

2026-11-26, main after those four branches and i13/load-rs (workloads through yaml_rs
where provably equal) against main at d9f73bf, same session, quiet machine, run in
alternation, ``--nodes 1000 --compare-nodes 0``: end to end (--no-slowdown) 14.5 and 13.9
s CPU (0.046x, 0.048x) -> 9.1 and 10.2 s (0.072x, 0.063x); core loop 0.066x, 0.069x ->
0.092x, 0.078x; load 1.6 -> 0.21 s; metrics 1.2 -> 0.75 s; peak RSS 709 -> 600-630 MB.
Split now: setup 7%, load 2%, simulate 81%, metrics 9%. Compare of 4 policies at 1,000
nodes: --workers 1 57.2 s, 2 29.8 s = 1.92x, outputs identical. What is left is the core
loop itself: the target needs the whole command within 2.6 s CPU (4x the bare DES's 0.65
s), the phases around the loop already take 1.6 s, and a task's three event-log rows
alone cost 2.7 us (``bench_eventlog``), 0.66 s for 243k tasks: the bare DES's whole run.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

NODE_VCORES = 16
NODE_MEMORY_MB = 65536
TASK_MEMORY_MB = 2048
TASKS_PER_JOB = 100
TASK_S = (25.0, 35.0)
LOAD = 0.8
USERS = 10
HEARTBEAT_S = 1.0

DEFAULT_NODES = (100, 1000, 10000)
#: Simulated seconds of arrivals per size: the default run stays a few minutes on 2 cores.
DEFAULT_SPAN_S = {100: 600.0, 1000: 600.0, 10000: 60.0}
COMPARE_POLICIES = "fifo,fair,drf,sjf"
TARGET_NO_SLOWDOWN = 0.25
TARGET_SLOWDOWN = 0.15


# ---------------------------------------------------------------------------- workload
def generate(nodes: int, span_s: float, seed: int = 1) -> list[tuple[float, list[float]]]:
    """Jobs as (submit time, task durations): Poisson arrivals at ``LOAD``."""
    rng = random.Random(f"e2e:{nodes}:{span_s}:{seed}")
    mean_task = sum(TASK_S) / 2
    rate = LOAD * NODE_VCORES * nodes / (TASKS_PER_JOB * mean_task)  # jobs per second
    jobs = []
    t = rng.expovariate(rate)
    while t < span_s:
        durations = [round(rng.uniform(*TASK_S), 3) for _ in range(TASKS_PER_JOB)]
        jobs.append((round(t, 6), durations))
        t += rng.expovariate(rate)
    return jobs


def write_yaml(path: Path, nodes: int, jobs: list[tuple[float, list[float]]]) -> None:
    lines = [
        "seed: 1",
        "cluster:",
        f"  heartbeat_s: {HEARTBEAT_S}",
        "  nodes:",
        f"  - count: {nodes}",
        f"    resources: {{vcores: {NODE_VCORES}, memory_mb: {NODE_MEMORY_MB}}}",
        "jobs:",
    ]
    for i, (submit, durations) in enumerate(jobs):
        lines += [
            f"- name: job{i:06d}",
            f"  user: user{i % USERS}",
            f"  submit_s: {submit}",
            "  stages:",
            "  - name: s0",
            f"    tasks: {len(durations)}",
            f"    duration_s: [{', '.join(map(str, durations))}]",
            f"    resources: {{vcores: 1, memory_mb: {TASK_MEMORY_MB}}}",
        ]
    path.write_text("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------- bare DES
_FINISH, _SUBMIT, _HB = 0, 1, 2  # at one instant: ends free vcores before heartbeats fill


def bare_des(nodes: int, jobs: list[tuple[float, list[float]]], seed: int = 1) -> float:
    """The bare DES of the module docstring; returns the last task's end (its makespan
    from the first submission)."""
    rng = random.Random(f"bare:{seed}")
    free = [NODE_VCORES] * nodes
    heap: list[tuple[float, int, int]] = [
        (rng.random() * HEARTBEAT_S, _HB, n) for n in range(nodes)
    ]
    heap += [(submit, _SUBMIT, j) for j, (submit, _) in enumerate(jobs)]
    heapq.heapify(heap)
    pending: deque[float] = deque()
    left = sum(len(d) for _, d in jobs)
    push, pop = heapq.heappush, heapq.heappop
    h = HEARTBEAT_S
    t = 0.0
    while left:
        t, kind, x = pop(heap)
        if kind == _HB:
            f = free[x]
            while f and pending:
                push(heap, (t + pending.popleft(), _FINISH, x))
                f -= 1
            free[x] = f
            push(heap, (t + h, _HB, x))
        elif kind == _FINISH:
            free[x] += 1
            left -= 1
        else:
            pending.extend(jobs[x][1])
    return t - jobs[0][0]


def time_bare(nodes: int, jobs: list[tuple[float, list[float]]]) -> tuple[float, float, float]:
    """(simulated span, wall s, CPU s) of the bare DES: the best of 3 runs (it is short,
    so one run is at the mercy of a busy machine)."""
    best = (0.0, float("inf"), float("inf"))
    for _ in range(3):
        start = time.perf_counter()
        cpu = time.process_time()
        span = bare_des(nodes, jobs)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        best = (span, min(best[1], wall), min(best[2], cpu))
    return best


# ---------------------------------------------------------------------------- treadle
def _measure(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``cmd`` in a fresh child of a fresh Python, so that the child's peak RSS
    (``RUSAGE_CHILDREN`` of that Python) is its own."""
    wrapper = (
        "import json, resource, subprocess, sys, time\n"
        "cmd = json.loads(sys.argv[1])\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run(cmd, capture_output=True, text=True)\n"
        "wall = time.perf_counter() - t\n"
        "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "rss, cpu = ru.ru_maxrss / 1024, ru.ru_utime + ru.ru_stime\n"
        "print(json.dumps({'wall': wall, 'cpu': cpu, 'rss_mb': rss, 'rc': p.returncode, "
        "'out': p.stdout, 'err': p.stderr}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", wrapper, json.dumps(cmd)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    res: dict[str, Any] = json.loads(proc.stdout)
    if res["rc"]:
        raise SystemExit(f"{' '.join(cmd)} failed ({res['rc']}):\n{res['err'][-2000:]}")
    return res


def timings_of(stderr: str) -> dict[str, Any]:
    for line in stderr.splitlines():
        if line.startswith("timings: "):
            found: dict[str, Any] = json.loads(line.removeprefix("timings: "))
            return found
    return {}


def events_file(out: Path) -> Path | None:
    for name in ("events.parquet", "events.jsonl"):
        if (out / name).exists():
            return out / name
    found = sorted(out.glob("events.*"))
    return found[0] if found else None


def treadle_sim(workload: Path, out: Path, slowdown: bool, tmp: Path) -> dict[str, Any]:
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=tmp))  # cold
    env = {**os.environ, "TREADLE_CACHE_DIR": str(cache)}
    cmd = [sys.executable, "-m", "treadle.cli", "sim", str(workload), "--policy", "fifo"]
    cmd += ["--out", str(out), "--timings"]
    if not slowdown:
        cmd.append("--no-slowdown")
    res = _measure(cmd, env)
    summary = json.loads((out / "summary.json").read_text())
    ev = events_file(out)
    return {
        "wall": res["wall"],
        "cpu": res["cpu"],
        "rss_mb": res["rss_mb"],
        "timings": timings_of(res["err"]),
        "makespan": float(summary["makespan_s"]),
        "events_bytes": ev.stat().st_size if ev is not None else 0,
        "events_name": ev.name if ev is not None else "none",
    }


def treadle_compare(workload: Path, out: Path, workers: int, tmp: Path) -> float:
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=tmp))
    env = {**os.environ, "TREADLE_CACHE_DIR": str(cache)}
    cmd = [sys.executable, "-m", "treadle.cli", "compare", str(workload)]
    cmd += ["--policies", COMPARE_POLICIES, "--workers", str(workers), "--out", str(out)]
    wall: float = _measure(cmd, env)["wall"]
    return wall


def _files(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.suffix not in (".png", ".svg")
    }


# ---------------------------------------------------------------------------- report
PHASES = ("start", "setup", "load", "alone", "simulate", "metrics", "write", "other")


def split(run: dict[str, Any]) -> str:
    t = dict(run["timings"])
    if not t:
        return "(no --timings output)"
    t["start"] = max(0.0, run["wall"] - t.get("total", 0.0))  # spawn and exit
    parts = [f"{p} {t.get(p, 0.0):.2f}s ({t.get(p, 0.0) / run['wall']:.0%})" for p in PHASES]
    return ", ".join(parts)


def one_size(nodes: int, span_s: float, tmp: Path) -> dict[str, Any]:
    jobs = generate(nodes, span_s)
    tasks = sum(len(d) for _, d in jobs)
    workload = tmp / f"w{nodes}.yaml"
    write_yaml(workload, nodes, jobs)
    bare_span, bare_wall, bare_cpu = time_bare(nodes, jobs)
    bare = bare_span / bare_wall
    bare_c = bare_span / bare_cpu
    print(
        f"\n== {nodes} nodes: {len(jobs)} jobs, {tasks} tasks, arrivals for {span_s:g} s "
        f"({workload.stat().st_size / 1e6:.1f} MB of YAML)",
        flush=True,
    )
    print(
        f"bare DES: {bare_span:.0f} simulated s in {bare_wall:.2f} s = {bare:.0f}x "
        f"(CPU {bare_cpu:.2f} s = {bare_c:.0f}x)",
        flush=True,
    )
    out: dict[str, Any] = {"nodes": nodes, "jobs": len(jobs), "tasks": tasks, "bare": bare}
    for slowdown in (False, True):
        label = "with slowdown" if slowdown else "--no-slowdown"
        run = treadle_sim(workload, tmp / f"o{nodes}-{int(slowdown)}", slowdown, tmp)
        e2e = run["makespan"] / run["wall"]
        e2e_c = run["makespan"] / run["cpu"]
        sim_s = run["timings"].get("simulate")
        sim_c = run["timings"].get("cpu", {}).get("simulate")
        core = run["makespan"] / sim_s if sim_s else float("nan")
        core_c = run["makespan"] / sim_c if sim_c else float("nan")
        target = TARGET_SLOWDOWN if slowdown else TARGET_NO_SLOWDOWN
        print(
            f"treadle sim {label}: {run['wall']:.2f} s wall ({run['cpu']:.2f} s CPU), "
            f"peak RSS {run['rss_mb']:.0f} MB",
            flush=True,
        )
        print(
            f"  end to end: {e2e:.0f}x = {e2e / bare:.3f}x bare by wall, "
            f"{e2e_c / bare_c:.3f}x by CPU (target >= {target}x at 1,000 nodes)"
        )
        print(
            f"  core loop (Simulation.run): {core:.0f}x = {core / bare:.3f}x bare by wall, "
            f"{core_c / bare_c:.3f}x by CPU"
        )
        print(f"  split: {split(run)}")
        print(
            f"  event log: {run['events_name']} {run['events_bytes'] / 1e6:.1f} MB = "
            f"{run['events_bytes'] / tasks:.0f} bytes per task"
        )
        out["slowdown" if slowdown else "no_slowdown"] = {**run, "e2e": e2e, "core": core}
    out["bare_cpu"] = bare_c
    return out


def compare_speedups(nodes: int, span_s: float, tmp: Path) -> None:
    jobs = generate(nodes, span_s)
    workload = tmp / f"c{nodes}.yaml"
    write_yaml(workload, nodes, jobs)
    cores = os.cpu_count() or 1
    counts = sorted({1, 2, cores})
    walls: dict[int, float] = {}
    outputs: dict[int, dict[str, bytes]] = {}
    for w in counts:
        out = tmp / f"cmp{nodes}-w{w}"
        walls[w] = treadle_compare(workload, out, w, tmp)
        outputs[w] = _files(out)
    policies = len(COMPARE_POLICIES.split(","))
    print(
        f"\n== treadle compare of {policies} policies ({COMPARE_POLICIES}) on {nodes} nodes, "
        f"{len(jobs)} jobs, slowdown on, cold cache; {cores} cores"
    )
    for w in counts:
        print(f"--workers {w}: {walls[w]:.2f} s, speedup {walls[1] / walls[w]:.2f}x")
    same = all(outputs[w] == outputs[1] for w in counts)
    print(f"outputs identical (plots aside): {'yes' if same else 'NO'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks e2e")
    parser.add_argument(
        "--nodes", default=",".join(map(str, DEFAULT_NODES)), help="comma-separated sizes"
    )
    parser.add_argument("--span-s", type=float, help="seconds of arrivals (default per size)")
    parser.add_argument(
        "--compare-nodes", type=int, default=100, help="size of the compare runs (0: none)"
    )
    parser.add_argument("--keep", type=Path, help="keep workloads and outputs in this directory")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.nodes.split(",") if n.strip()]
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as scratch:
        tmp = args.keep if args.keep is not None else Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        for nodes in sizes:
            span = args.span_s if args.span_s else DEFAULT_SPAN_S.get(nodes, 600.0)
            one_size(nodes, span, tmp)
        if args.compare_nodes:
            span = args.span_s if args.span_s else DEFAULT_SPAN_S.get(args.compare_nodes, 600.0)
            compare_speedups(args.compare_nodes, span, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())

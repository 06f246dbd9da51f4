"""Simulator throughput: simulated seconds per wall second on synthetic clusters.

Workload (deterministic, seeded):

- N nodes of 16 vcores / 65536 memory_mb, 1 s heartbeats (phases spread over the second);
- every task asks 2 vcores / 8192 memory_mb, so a node holds 8 tasks and both
  dimensions fill together; a job is one stage of 100 tasks of 30 s +- 5 s (uniform);
- jobs arrive as a Poisson process sized for 80 % load: rate = 0.8 * 8 N slots /
  (100 tasks * 30 s), spread over 10 users, submitted during the first S simulated
  seconds only; the run then drains (every job finishes), so the simulated span reported
  is the end time of the run, a little more than S.

Each (size, policy) case runs in a fresh process so that peak RSS is its own. Wall time is
``time.perf_counter`` around ``Simulation.run()`` alone (the workload is built first).

Targets printed: the issue's goal of 300 simulated seconds per wall second at 1,000
nodes, and Hadoop SLS, which replays in real time (1x).

``--profile`` runs one case (default 1,000 nodes) under cProfile in this process instead
and prints the top functions by own time and by cumulative time.

``--against DIR`` measures the same cases on another checkout (a ``git worktree`` of an
older commit, say) in the same run: each case runs ``--repeat`` times in each checkout,
alternating, every run in a fresh process whose ``treadle``, ``rm``, ``am``, ``nm`` and
``plugins`` come from that checkout; it prints the median speeds and their ratio. The
workload and the timing are this file's, so both sides do exactly the same thing (the
child needs only ``Simulation``, ``build`` and ``factory``, which every commit has).

Measured on 2026-11-25 (2 cores, a shared VM whose speed wanders by +-15% from run to
run), at 1,000 nodes, after the renovation of the RM core, the event schema and the layers
against d4792c7 (the commit before it), ``--against`` with 7 to 15 runs per side: fifo
0.976x, 0.972x and 0.985x (ratios of medians; 140 simulated s per wall s against 141);
capacity 0.89x, fair 0.97x, drf 0.90x (7 runs each, the noisiest). Every run of both sides
logged the same events, heartbeats and allocate calls.

Measured on 2026-11-25, branch i13/fastcore (the RM's books as lists indexed by
dimension, the NM's reports handed over uncopied) against 83d95a0, ``--against`` with 5
runs per side at 1,000 nodes, load average 3-6: fifo 1.10x, fair 1.01x, drf 1.11x (ratios
of medians; single runs wandered from 53 to 138 simulated s per wall s). Instructions of
``Simulation.run`` under callgrind (200 nodes, fifo, deterministic): 1.191 G -> 1.086 G.

Measured on 2026-11-25, branch i14/event (opt-in event-driven scheduling) against main
a8cf56b, heartbeat mode: ``--against`` at 200 nodes, fifo, ``--sim-seconds 600``, 9 runs
per side, load average 3-4: 0.996x (ratio of medians; best runs 1.010x). Instructions
of the whole process under ``valgrind --tool=cachegrind`` with ``PYTHONHASHSEED=0`` (the
same case; imports alone, a 1 s span, 2.82 G on both sides): 10.049-10.064 G on main,
10.077 G on the branch, the loop within 0.2%. A first version was 0.7% slower: two more
attributes on ``Simulation`` took it past the size at which CPython 3.11 shares an
instance dict's keys, and every ``self.x`` got slower (the event mode's state now lives on
a class-level default and its own object). Event mode itself, on the 200-node case with
300 s of arrivals: 2.4-2.9x the CPU of heartbeat mode (about three AM calls per task: the
callback on its end, the next asks, the callback on the grant), the last job ending
2 s sooner.

Measured on 2026-11-26, branch i31/engine (the loop as a table of handlers,
``treadle.sim.handlers``) against main 0f33e71. Instructions of the whole process under
``valgrind --tool=cachegrind`` with ``PYTHONHASHSEED=0``, 200 nodes, ``--sim-seconds
600`` (the loop: minus the same process at a 1 s span, 2.313-2.325 G on main, 2.322-2.335
G on the branch, which compiles two more modules, the venv writing no bytecode): fifo
8.174 G -> 8.196 G, the loop 5.862 G -> 5.874 G (+0.20%); drf 12.247 G -> 12.280 G, the
loop 9.922 G -> 9.946 G (+0.24%). ``--against`` at 1,000 nodes, 5 runs per side, load
average 10-14 (other jobs and these cachegrind runs: 7-9 simulated s per wall s, noise
far above the difference): fifo 1.10x, drf 1.01x (ratios of medians; drf runs from 3.8 to
32.4). Along the way: a heartbeat handler that called on to the heartbeat (two calls per
event) cost 600 instructions per heartbeat, 0.33% of the loop, hence the heartbeat's work
in its handler; and moving the run's setup out of ``_run`` cost 0.9% of the loop with the
loop's code unchanged (not the frame's size nor the setup's freed locals: padding either
moved it by under 0.2%; the cause was not found), hence it stays there. Every run of both
sides logged the same events, heartbeats and allocate calls; records and stats of 68 runs
(four policies on a 60-node bench case, every policy on demo and dags, heartbeat and
event mode) identical.

Measured on 2026-12-02, branch i31/rmcore (the heartbeat one way through the RM core: a
façade verb ``node_heartbeat`` instead of an alias, no callback into the façade, a
placement's and a completion's bookkeeping in the modules that own it instead of inlined
in the scheduler and the container lifecycle) against 0f33e71 (the same code before rm/
was moved into floors). Instructions of the whole process under ``valgrind
--tool=cachegrind --cache-sim=no`` with ``PYTHONHASHSEED=0`` at 200 nodes, 300 s of
arrivals (14,300 tasks, 15,510 heartbeats; imports alone, a 1 s span, 2.315 G before and
2.323 G after): fifo 5.353-5.355 G -> 5.438-5.446 G, the loop +2.5% to +2.8%; drf
7.774-7.777 G -> 7.851-7.859 G, the loop +1.2% to +1.6%. The cost is some ten Python
calls more per task (``ClusterState.place_container``, ``Application.grant``,
``BookLedger.add``/``sub``, ``PendingIndex.granted``/``touch``,
``ContainerLifecycle.done``, ``ClusterState.free_container``), each 500 to 900
instructions on this interpreter, and one per heartbeat
(``ResourceManager.node_heartbeat``). ``--against`` at 1,000 nodes, 5 runs per side,
load average 8-14 on 2 cores: fifo 1.10x, drf 1.34x (ratios of medians), single runs
wandering from 4 to 45 simulated s per wall s (some 140 on a quiet machine): noise,
which the instruction counts above resolve.

Measured on 2026-12-02 on main 87c2d70 and after two of those calls per container were
inlined again (``BookLedger``'s usual case in ``ClusterState.place_container`` and
``free_container``, ``tell`` in ``ContainerLifecycle.done``; ``Queue`` and ``User`` moved
to ``rm.core.queues`` to keep ``state.py`` under 600 lines), against 0f33e71, the same
cachegrind measure at 200 nodes and 600 s of arrivals (27,300 tasks, 31,470 heartbeats,
83,194 events on both; a 1 s span 2.196 G before, 2.331-2.332 G after): fifo loop 5.862
G; 6.038 G on 87c2d70 (+2.99%), 6.007 G after (+2.47%); drf loop 9.923 G -> 10.094 G
(+1.71%). A call of ``hold`` from ``place_container`` instead of its inlined body costs
12.2 M of those instructions (0.2% of the loop): about 450 instructions per call.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import multiprocessing as mp
import os
import pstats
import random
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from treadle.messages import ContainerState
from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, UserSpec, Workload
from treadle.registry import build, factory
from treadle.resources import Resources
from treadle.sim import Simulation

NODE = Resources(vcores=16, memory_mb=65536)
TASK = Resources(vcores=2, memory_mb=8192)
SLOTS_PER_NODE = 8
TASKS_PER_JOB = 100
TASK_S = 30.0
TASK_JITTER_S = 5.0
LOAD = 0.8
USERS = 10
HEARTBEAT_S = 1.0

DEFAULT_NODES = (100, 1000, 10000)
#: Simulated seconds of arrivals per size (the whole suite runs in a few minutes on 2 cores).
DEFAULT_SPAN_S = {100: 600.0, 1000: 300.0, 10000: 120.0}
TARGET_AT_1000 = 300.0  # simulated seconds per wall second, at 1,000 nodes
SLS_SPEED = 1.0  # Hadoop SLS replays in real time


def default_span(nodes: int) -> float:
    if nodes in DEFAULT_SPAN_S:
        return DEFAULT_SPAN_S[nodes]
    # Keep the number of tasks near that of the nearest default size.
    return max(60.0, min(600.0, 300_000.0 / nodes))


def make_workload(nodes: int, span_s: float, seed: int = 1) -> Workload:
    rng = random.Random(seed)
    cluster = ClusterSpec(
        tuple(NodeSpec(f"node{i + 1}", NODE, rack=f"rack{i // 40}") for i in range(nodes)),
        heartbeat_s=HEARTBEAT_S,
    )
    rate = LOAD * nodes * SLOTS_PER_NODE / (TASKS_PER_JOB * TASK_S)  # jobs per second
    jobs = []
    t = rng.expovariate(rate)
    while t < span_s:
        durations = tuple(
            round(rng.uniform(TASK_S - TASK_JITTER_S, TASK_S + TASK_JITTER_S), 3)
            for _ in range(TASKS_PER_JOB)
        )
        n = len(jobs)
        stage = StageSpec("s0", TASK, durations)
        jobs.append(JobSpec(f"job{n:06d}", f"user{n % USERS}", round(t, 6), (stage,)))
        t += rng.expovariate(rate)
    users = {f"user{i}": UserSpec(f"user{i}") for i in range(USERS)}
    return Workload(f"bench-{nodes}", cluster, tuple(jobs), users=users, seed=seed)


@dataclass
class Row:
    policy: str
    nodes: int
    jobs: int
    tasks: int
    sim_s: float
    wall_s: float
    tasks_completed: int
    heartbeats: int
    allocates: int
    events: int
    peak_rss_mb: float
    finished: int

    @property
    def speed(self) -> float:
        return self.sim_s / self.wall_s if self.wall_s > 0 else float("inf")


def _peak_rss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return kb / 1024.0 if sys.platform != "darwin" else kb / (1024.0 * 1024.0)


def run_case(policy: str, nodes: int, span_s: float, seed: int) -> Row:
    wl = make_workload(nodes, span_s, seed)
    sim = Simulation(wl, build("policies", policy), factory("asks", "greedy"))
    t0 = time.perf_counter()
    result = sim.run()
    wall = time.perf_counter() - t0
    complete = str(ContainerState.COMPLETE)
    done = sum(
        1
        for r in result.records
        if r["event"] == "container_finished" and r.get("state") == complete
    )
    return Row(
        policy,
        nodes,
        len(wl.jobs),
        wl.tasks,
        result.end_s,
        wall,
        done,
        result.stats.get("heartbeats", 0),
        result.stats.get("allocates", 0),
        len(result.records),
        _peak_rss_mb(),
        result.finished,
    )


def _child(q: Any, policy: str, nodes: int, span_s: float, seed: int) -> None:
    q.put(asdict(run_case(policy, nodes, span_s, seed)))


def run_isolated(policy: str, nodes: int, span_s: float, seed: int) -> Row:
    ctx = mp.get_context("fork") if sys.platform != "win32" else mp.get_context()
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q, policy, nodes, span_s, seed))
    p.start()
    out = q.get()
    p.join()
    return Row(**out)


HERE = Path(__file__).resolve()
REPO = HERE.parents[2]


def run_in_checkout(checkout: Path, policy: str, nodes: int, span_s: float, seed: int) -> Row:
    """One case in a fresh process importing the project from ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    argv = [sys.executable, str(HERE), "--child", policy, str(nodes), repr(span_s), str(seed)]
    proc = subprocess.run(argv, env=env, cwd=checkout, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the case failed in {checkout}:\n{proc.stderr[-2000:]}")
    return Row(**json.loads(proc.stdout.strip().splitlines()[-1]))


def compare_checkouts(
    other: Path, policies: list[str], sizes: list[int], span: float | None, seed: int, repeat: int
) -> None:
    print(f"this checkout: {REPO}\nagainst:       {other}\n")
    head = (
        f"{'policy':<8} {'nodes':>6} {'this (median)':>14} {'against':>8} {'ratio':>7}"
        f" {'this (best)':>12} {'against':>8} {'ratio':>7}"
    )
    lines = [head, "-" * len(head)]
    for policy in policies:
        for n in sizes:
            s = span if span is not None else default_span(n)
            speeds: dict[Path, list[float]] = {REPO: [], other: []}
            counts: dict[Path, tuple[int, int, int]] = {}
            for _ in range(repeat):
                for checkout in (other, REPO):
                    row = run_in_checkout(checkout, policy, n, s, seed)
                    speeds[checkout].append(row.speed)
                    counts[checkout] = (row.events, row.heartbeats, row.allocates)
            mine, theirs = statistics.median(speeds[REPO]), statistics.median(speeds[other])
            best, their_best = max(speeds[REPO]), max(speeds[other])
            print(
                f"  {policy} {n}: this {[round(x, 1) for x in speeds[REPO]]}, "
                f"against {[round(x, 1) for x in speeds[other]]}",
                flush=True,
            )
            if counts[REPO] != counts[other]:
                print(f"  note: the runs differ (events, heartbeats, allocates): {counts}")
            lines.append(
                f"{policy:<8} {n:>6} {mine:>14.1f} {theirs:>8.1f} {mine / theirs:>6.3f}x"
                f" {best:>12.1f} {their_best:>8.1f} {best / their_best:>6.3f}x"
            )
    print("\n" + "\n".join(lines))
    print(
        "\nspeeds in simulated s per wall s; ratio: here / there (> 1: this checkout is "
        "faster). Single runs wander on a shared machine: read the medians of many runs."
    )


def print_table(rows: list[Row]) -> None:
    head = (
        f"{'policy':<8} {'nodes':>6} {'jobs':>6} {'sim s':>8} {'wall s':>8} "
        f"{'sim s/wall s':>12} {'tasks done':>11} {'heartbeats':>11} {'allocates':>10} "
        f"{'events':>9} {'peak RSS MB':>11} {'vs 300x':>8} {'vs SLS':>8}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r.policy:<8} {r.nodes:>6} {r.jobs:>6} {r.sim_s:>8.0f} {r.wall_s:>8.2f} "
            f"{r.speed:>12.1f} {r.tasks_completed:>11} {r.heartbeats:>11} {r.allocates:>10} "
            f"{r.events:>9} {r.peak_rss_mb:>11.0f} {r.speed / TARGET_AT_1000:>7.2f}x "
            f"{r.speed / SLS_SPEED:>7.0f}x"
        )
        if r.finished != r.jobs:
            print(f"  warning: only {r.finished} of {r.jobs} jobs finished")


def profile(policy: str, nodes: int, span_s: float, seed: int, top: int) -> None:
    wl = make_workload(nodes, span_s, seed)
    sim = Simulation(wl, build("policies", policy), factory("asks", "greedy"))
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    result = sim.run()
    prof.disable()
    wall = time.perf_counter() - t0
    print(
        f"profiled {policy} at {nodes} nodes, {result.end_s:.0f} simulated s, {wall:.1f} wall s "
        f"under cProfile ({len(wl.jobs)} jobs, {wl.tasks} tasks, stats {result.stats})"
    )
    for key in ("tottime", "cumtime"):
        print(f"\n=== top {top} by {key} ===")
        pstats.Stats(prof, stream=sys.stdout).sort_stats(key).print_stats(top)


def _int_list(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:  # one case for run_in_checkout: its Row as JSON
        policy, nodes, span, seed = argv[1], int(argv[2]), float(argv[3]), int(argv[4])
        print(json.dumps(asdict(run_case(policy, nodes, span, seed))))
        return 0
    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks sim", description=__doc__)
    ap.add_argument("--nodes", type=_int_list, default=list(DEFAULT_NODES), help="e.g. 100,1000")
    ap.add_argument(
        "--sim-seconds",
        type=float,
        default=None,
        help="seconds of job arrivals (default per size: 600 s at 100 nodes, 300 s at "
        "1,000, 120 s at 10,000)",
    )
    ap.add_argument("--policies", default="fifo", help="comma-separated, e.g. fifo,drf")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", action="store_true", help="cProfile one case instead")
    ap.add_argument("--top", type=int, default=25, help="rows of the profile to print")
    ap.add_argument("--against", type=Path, help="another checkout to measure in the same run")
    ap.add_argument("--repeat", type=int, default=5, help="runs per checkout with --against")
    args = ap.parse_args(argv)

    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if args.profile:
        nodes = args.nodes[0] if args.nodes != list(DEFAULT_NODES) else 1000
        span = args.sim_seconds if args.sim_seconds is not None else default_span(nodes)
        profile(policies[0], nodes, span, args.seed, args.top)
        return 0

    if args.against is not None:
        if not (args.against / "treadle").is_dir():
            ap.error(f"--against {args.against}: not a treadle checkout")
        nodes = args.nodes if args.nodes != list(DEFAULT_NODES) else [1000]
        compare_checkouts(
            args.against.resolve(), policies, nodes, args.sim_seconds, args.seed, args.repeat
        )
        return 0

    print(
        f"workload: nodes of {NODE}; tasks of {TASK} ({SLOTS_PER_NODE} per node); jobs of "
        f"{TASKS_PER_JOB} tasks x {TASK_S:g} s +- {TASK_JITTER_S:g} s; Poisson arrivals for "
        f"{LOAD:.0%} load; {USERS} users; heartbeat {HEARTBEAT_S:g} s; arrivals stop after the "
        "span, then the run drains"
    )
    rows = []
    for policy in policies:
        for n in args.nodes:
            span = args.sim_seconds if args.sim_seconds is not None else default_span(n)
            row = run_isolated(policy, n, span, args.seed)
            rows.append(row)
            print(
                f"  {policy} {n} nodes: {row.sim_s:.0f} sim s in {row.wall_s:.1f} wall s",
                flush=True,
            )
    print()
    print_table(rows)
    print(
        f"\nvs 300x: speed / {TARGET_AT_1000:g} (the issue's target, stated for 1,000 nodes); "
        f"vs SLS: speed / {SLS_SPEED:g} (Hadoop SLS runs in real time)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

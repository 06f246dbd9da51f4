"""``python -m tests.benchmarks wta``: the WTA homo CSV without the homo filter, as
``treadle sim`` reads it (133 jobs, 205,376 tasks of 1 vcore on 32 vcores, 10 ms
heartbeats and AM calls), against the loop in which every AM call is queued.

The CSV's jobs are wide (up to 1,023 parallel stages of 32 tasks) and its work is about
1.25 M core-s, so a run spans about 39,000 simulated seconds in which a waiting AM has
nothing to say for hundreds of thousands of 10 ms intervals. The yardstick, measured in
the same run on the same workload prefix, is the simulator with no AM asleep and the
calls of one instant in queue order (``tests.unit.test_sim_sleeping_ams``); both must log
the same events. Printed: AM calls taken off the heap and wall time of each, and the
speed-up (yardstick wall / simulator wall).

Options: ``--jobs N`` (default 40) simulates the first N jobs by submit time;
``--policies`` (default ``fifo,uwfq``); ``--homo-filter F``; ``--no-yardstick`` runs the
simulator alone (for the whole file: ``--jobs 0``); ``--asks``: see the end.

``--refile`` measures the stage-ordering policies instead (``--policies`` default
``uwfq,cfq``): each as shipped, which refiles only the task sets of the stages whose asks
or containers changed (the RM's priority feed), against the same policy refiling every
task set of each changed application (``keys_follow_app`` forced true: the path before),
in the same run on the same prefix; both must log the same events. Printed: wall time of
each and the speed-up (whole-application wall / per-stage wall).

Measured on 2026-11-25 (2 shared cores, load average 5-7), before this change: a
60-job prefix under uwfq spent 51 of 90 s in ``Ask.__eq__`` (a quiet AM compared its
rebuilt, equal ask list ask by ask on each of its 1.6 M calls); after the AM kept the
newest list, 7.5 s; the whole CSV under uwfq did not finish in 15 minutes. With AMs
asleep the 60-job prefix makes 7,052 AM calls off the heap instead of 1.6 M, and the
whole CSV runs under fifo in 83 s (458,338 AM calls off the heap for 179 M intervals).
``--jobs 40``: fifo 26.2x (1.20 s against 31.4 s), uwfq 3.2x (2.12 s against 6.73 s).
The whole CSV under uwfq (``treadle sim --no-slowdown``) then took 1,057 s of wall and
392 s of CPU (load average about 6).
The stage-ordering policies then spend most of their time building and ordering every
pending task set on each node heartbeat (``rm.policy.toolkit.stageorder``): thousands of stages.

Profiled (cProfile, 2026-11-25, 64-job prefix, 29,856 tasks; jobs of 192 and 377 stages)
before the stage-by-stage refiling: uwfq 20.9 s, of which 7.7 s in ``_sync`` refiling
every task set of each changed application (1.6 M ``ByShape.put`` and ``TaskSet`` for
15,536 refiles, ~100 stages each: a placement, an AM call or a container's end on a wide
job rebuilt and re-keyed all its stages); cfq 20.0 s, 11.1 s in ``_sync``; spark-fair
291 s, 147 s in the policy (``stage_running`` is O(the application's containers), called
for every stage of every refile: 7.5 M calls, 61 s). After it, uwfq's policy share fell
from 37 % to 8 % of the run; what is left is the AM-RM ask path, O(stages) per AM call
(the greedy AM rebuilds a wide job's whole ask list, each ask restamped with the job's
``remaining_work``, and the RM validates and stores every ask): about three quarters of
uwfq's run.

``--refile`` (load average 5-6 on 2 cores, so walls are inflated; ratios in one run):
``--jobs 64``: uwfq policy 1.63 s against 9.72 s whole-application (6.0x; wall 23.0 s
against 32.8 s, 1.4x), cfq 1.38 s against 8.58 s (6.2x; wall 10.1 s against 18.5 s,
1.8x); ``--jobs 40``: spark-fair 1.78 s against 10.20 s (5.7x; wall 1.3x), ujf 0.97 s
against 4.77 s (4.9x; wall 1.3x). Every pair logged the same events.
The whole CSV, ``treadle compare ... --policies spark-fair,ujf,cfq,uwfq --no-slowdown``
(2 workers, machine shared, 82 % of one core on average): 34 min 13 s of wall, 1,686 s
of CPU; cfq took about 70 s and uwfq about 83 s (uwfq alone took 1,057 s before),
spark-fair about 31 min and ujf about 33 min. For those two the ask path is what is left:
on the 40-job prefix (cProfile, unloaded) spark-fair spends 5.3 of 10.3 s in the RM's
``allocate`` (validating, blinding and storing every ask of a wide job on each of 16,049
calls) and 2.6 s in the AM building the lists, 1.0 s in the policy.

``--asks`` (``--policies`` default ``spark-fair,ujf``) measures that ask path: the AMs
sending deltas (``am.core``: only the asks that differ from what the RM holds, as the AM
counts it) against the same AMs sending their whole table on every call
(``ApplicationMaster.whole_table``), in the same run on the same prefix; both must log the
same events. Printed: Allocate calls, asks sent and wall time of each, and the speed-up.

Measured on 2026-11-25 (branch perf/ask-deltas, 2 cores shared, load average 4-5). The
greedy AM restamps every ask with the job's ``remaining_work`` and ``remaining_usage``
whenever one of its tasks ends, and a changed hint must be sent, so deltas halve the asks
at best on these jobs: in the 25-job prefix 5,880 of 6,036 list rebuilds had a new
``remaining_work``; the asks saved are those of the calls in which no task ended. The rest
came from making each ask cheaper on both sides (the AM keeps each stage's mean duration,
usage term and the runnable stages until they change and builds asks by their slots; the
RM skips the shape checks of a shape already checked in the call and leaves alone, when
it hides hints from its policy, an ask that changed in its hints alone). Every run below
logged the same events and wrote the same jobs and summary as before.

- ``treadle sim ... --policy spark-fair --no-slowdown --limit-jobs 25`` under cProfile:
  ``Simulation.run`` 14.8 s before, 10.1 s after; the RM's ``allocate`` 7.6 s to 2.0 s
  (``validate_asks`` 2.8 s to 0.9 s, blinding 1.2 s to 0, ``set_ask`` 475 k calls to
  486), the AM's ``allocate_request`` 4.0 s to 3.7 s (``unassigned_durations`` 251 k
  calls to 6 k; the AM now also compares each ask with what the RM holds, 0.8 s). Asks
  through the RM's 11,464 calls: 474,962 before, 252,770 after. Without the profiler,
  CPU of the whole command (about 1.3 s of it start-up): 4.6-5.1 s before, 2.5-2.7 s after.
- The same with ``--limit-jobs 60``: spark-fair 13.05 s of CPU before, 5.39 s after
  (2.4x); ujf 13.00 s before, 6.04 s after (2.2x); sjf (oracle: hints reach the policy)
  ``--limit-jobs 25`` 1.88 s before, 1.47 s after.
- The whole CSV, ``treadle sim ... --policy spark-fair --no-slowdown`` after: 259 s of
  CPU, 517 s of wall (load average about 5; about 15 minutes of wall before, not
  measured again here).
- ``--asks --jobs 40``: spark-fair 282,641 asks against 538,650 for the whole table,
  1.49 s against 1.67 s of wall (1.12x); ujf 273,160 against 524,897, 1.54 s against
  1.75 s (1.14x). The deltas alone gain little once the RM leaves a hint-only change
  alone; before that shortcut and the AM's cached runnable stages: spark-fair 4.01 s
  against 5.24 s (1.31x), ujf 4.45 s against 5.22 s (1.17x).
- ``python -m tests.benchmarks e2e --nodes 200 --compare-nodes 0`` (single-stage jobs:
  one ask per AM) core loop by CPU, two runs each: before 0.052x and 0.048x of the bare
  DES (0.056x, 0.053x with slowdown), after 0.050x and 0.045x (0.045x, 0.044x); the
  same workload's ``Simulation.run`` in one process, best of 3, three pairs: before 2.12,
  2.25, 2.13 s of CPU, after 2.21, 2.16, 2.01 s: no change beyond the noise.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from pathlib import Path

from am.core import ApplicationMaster
from rm.policy import ClusterView, NodeView, Placement
from tests.unit.test_sim_sleeping_ams import QueueOrderSimulation
from treadle.importers.tabular import first_jobs
from treadle.importers.wta import WtaOptions, load_wta
from treadle.messages import AllocateRequest, AllocateResponse
from treadle.model import Workload
from treadle.registry import build, factory
from treadle.sim import SimResult, Simulation

HOMO_CSV = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "traces"
    / "google-wta"
    / "macro_benchmarks_homo.csv"
)


def simulate(wl: Workload, policy: str, sim_cls: type[Simulation]) -> tuple[SimResult, float]:
    sim = sim_cls(
        wl, build("policies", policy, {}), factory("asks", "greedy", {}), policy_name=policy
    )
    started = time.perf_counter()
    result = sim.run()
    return result, time.perf_counter() - started


def simulate_refiling(
    wl: Workload, policy: str, whole_apps: bool
) -> tuple[SimResult, float, float]:
    """``policy`` as shipped, or refiling every task set of each changed application:
    the result, the wall time, and the part of it spent in the policy's heartbeats."""
    built = build("policies", policy, {})
    if whole_apps:
        built.keys_follow_app = lambda: True  # type: ignore[attr-defined]
    inside = [0.0]
    heartbeat = built.on_node_heartbeat

    def timed(node: NodeView, cluster: ClusterView) -> Iterator[Placement]:
        placements = iter(heartbeat(node, cluster))
        while True:
            t = time.perf_counter()
            p = next(placements, None)
            inside[0] += time.perf_counter() - t
            if p is None:
                return
            yield p

    built.on_node_heartbeat = timed  # type: ignore[method-assign]
    sim = Simulation(wl, built, factory("asks", "greedy", {}), policy_name=policy)
    started = time.perf_counter()
    result = sim.run()
    return result, time.perf_counter() - started, inside[0]


def refile(wl: Workload, policies: list[str]) -> None:
    print(
        f"{'policy':<11} {'sim s':>7} {'policy s':>9} {'wall s':>7} {'whole-app policy s':>19}"
        f" {'wall s':>7} {'policy speed-up':>16} {'wall speed-up':>14}"
    )
    for policy in policies:
        fast, wall, inside = simulate_refiling(wl, policy, False)
        ref, ref_wall, ref_inside = simulate_refiling(wl, policy, True)
        same = ref.records == fast.records and ref.end_s == fast.end_s
        line = f"{policy:<11} {fast.end_s:>7.0f} {inside:>9.2f} {wall:>7.2f}"
        line += f" {ref_inside:>19.2f} {ref_wall:>7.2f}"
        line += f" {ref_inside / inside:>15.1f}x {ref_wall / wall:>13.1f}x"
        print(line + ("" if same else "  (the runs differ!)"), flush=True)


def simulate_asks(wl: Workload, policy: str, whole: bool) -> tuple[SimResult, float, int, int]:
    """``policy`` with the AMs sending deltas, or their whole ask table on every call: the
    result, the wall time, the Allocate calls and the asks they carried."""
    sim = Simulation(
        wl, build("policies", policy, {}), factory("asks", "greedy", {}), policy_name=policy
    )
    on_allocate = sim.rm.on_allocate
    sent = [0, 0]

    def counted(req: AllocateRequest, now: float) -> AllocateResponse:
        sent[0] += 1
        sent[1] += len(req.asks)
        return on_allocate(req, now)

    sim.rm.on_allocate = counted  # type: ignore[method-assign]
    was = ApplicationMaster.whole_table
    ApplicationMaster.whole_table = whole
    try:
        started = time.perf_counter()
        result = sim.run()
        wall = time.perf_counter() - started
    finally:
        ApplicationMaster.whole_table = was
    return result, wall, sent[0], sent[1]


def asks(wl: Workload, policies: list[str]) -> None:
    print(
        f"{'policy':<11} {'calls':>8} {'asks':>10} {'wall s':>7} {'whole-table asks':>17}"
        f" {'wall s':>7} {'speed-up':>9}"
    )
    for policy in policies:
        fast, wall, calls, sent = simulate_asks(wl, policy, False)
        ref, ref_wall, _, ref_sent = simulate_asks(wl, policy, True)
        same = ref.records == fast.records and ref.end_s == fast.end_s
        line = f"{policy:<11} {calls:>8,} {sent:>10,} {wall:>7.2f} {ref_sent:>17,}"
        line += f" {ref_wall:>7.2f} {ref_wall / wall:>8.2f}x"
        print(line + ("" if same else "  (the runs differ!)"), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks wta")
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--policies", default=None)
    ap.add_argument("--homo-filter", type=float, default=None)
    ap.add_argument("--no-yardstick", action="store_true")
    ap.add_argument("--refile", action="store_true")
    ap.add_argument("--asks", action="store_true")
    args = ap.parse_args(argv)
    wl = load_wta(HOMO_CSV, WtaOptions(homo_filter=args.homo_filter))
    wl = first_jobs(wl, args.jobs or None)
    h = wl.cluster.heartbeat_s
    print(f"{HOMO_CSV.name}: {len(wl.jobs)} jobs, {wl.tasks} tasks, heartbeat {h} s")
    if args.refile:
        refile(wl, (args.policies or "uwfq,cfq").split(","))
        return 0
    if args.asks:
        asks(wl, (args.policies or "spark-fair,ujf").split(","))
        return 0
    header = f"{'policy':<10} {'sim s':>9} {'AM calls':>11} {'off heap':>9} {'wall s':>8}"
    print(header + f" {'yardstick off heap':>19} {'wall s':>8} {'speed-up':>9}")
    for policy in (args.policies or "fifo,uwfq").split(","):
        fast, wall = simulate(wl, policy, Simulation)
        calls = fast.stats["allocates"] + fast.stats["allocates_skipped"]
        off_heap = fast.stats["am_events"]
        line = f"{policy:<10} {fast.end_s:>9.0f} {calls:>11,} {off_heap:>9,} {wall:>8.2f}"
        if not args.no_yardstick:
            ref, ref_wall = simulate(wl, policy, QueueOrderSimulation)
            if len(ref.records) != len(fast.records) or ref.end_s != fast.end_s:
                print(f"  note: the runs differ ({len(fast.records)} vs {len(ref.records)} events)")
            line += f" {ref.stats['am_events']:>19,} {ref_wall:>8.2f} {ref_wall / wall:>8.1f}x"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

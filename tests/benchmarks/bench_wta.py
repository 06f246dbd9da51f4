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
simulator alone (for the whole file: ``--jobs 0``).

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
pending task set on each node heartbeat (``rm.policy.stageorder``): thousands of stages.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tests.unit.test_sim_sleeping_ams import QueueOrderSimulation
from treadle.importers.tabular import first_jobs
from treadle.importers.wta import WtaOptions, load_wta
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


def simulate_refiling(wl: Workload, policy: str, whole_apps: bool) -> tuple[SimResult, float]:
    """``policy`` as shipped, or refiling every task set of each changed application."""
    built = build("policies", policy, {})
    if whole_apps:
        built.keys_follow_app = lambda: True  # type: ignore[attr-defined]
    sim = Simulation(wl, built, factory("asks", "greedy", {}), policy_name=policy)
    started = time.perf_counter()
    result = sim.run()
    return result, time.perf_counter() - started


def refile(wl: Workload, policies: list[str]) -> None:
    print(f"{'policy':<11} {'sim s':>9} {'per stage s':>12} {'whole app s':>12} {'speed-up':>9}")
    for policy in policies:
        fast, wall = simulate_refiling(wl, policy, False)
        ref, ref_wall = simulate_refiling(wl, policy, True)
        same = ref.records == fast.records and ref.end_s == fast.end_s
        line = f"{policy:<11} {fast.end_s:>9.0f} {wall:>12.2f} {ref_wall:>12.2f}"
        print(line + f" {ref_wall / wall:>8.1f}x" + ("" if same else "  (the runs differ!)"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks wta")
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--policies", default=None)
    ap.add_argument("--homo-filter", type=float, default=None)
    ap.add_argument("--no-yardstick", action="store_true")
    ap.add_argument("--refile", action="store_true")
    args = ap.parse_args(argv)
    wl = load_wta(HOMO_CSV, WtaOptions(homo_filter=args.homo_filter))
    wl = first_jobs(wl, args.jobs or None)
    h = wl.cluster.heartbeat_s
    print(f"{HOMO_CSV.name}: {len(wl.jobs)} jobs, {wl.tasks} tasks, heartbeat {h} s")
    if args.refile:
        refile(wl, (args.policies or "uwfq,cfq").split(","))
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

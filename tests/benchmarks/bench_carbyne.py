"""Carbyne against its baselines on TPC-H DAGs, in the simulator (the seed's section 5).

Workloads (``kind: tpch`` generator over ``../shared/traces/tpch-dags``, read in place):

- offline: 50 TPC-H jobs (every scale and query, drawn by seed), all submitted at t = 0;
- online: 250 jobs, Poisson arrivals with a mean inter-arrival of 20 s;

on 100 nodes of 20 vcores and 64 GB. Task demands are the generator's default (vcores
from {1, 2, 4}, memory from {1, 2, 4, 8} GB, drawn per stage, so that both resources bind
and packing matters); trace durations are scaled by ``--duration-scale`` (default 10:
many TPC-H tasks last tens of milliseconds, below the 1 s heartbeat) with a 1 s floor.

carbyne runs with its altruistic AMs; drf (across jobs, as in the seed), tetris and sjf
with greedy AMs. Printed:

- offline: the issue's checks against drf (no job slower by more than 5%, mean JCT
  improved at least 1.2x, Jain's index over 60 s windows within 0.1) and tetris
  (makespan within 1.1x);
- online: factor of improvement of carbyne over drf, tetris and sjf (mean, P50, P95; the
  seed's Table 3) and an altruism sweep (0, 0.5, 1) where 0 should stay within 2% of drf.

``--jobs-offline`` / ``--jobs-online`` shrink the runs for a quick look.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from treadle import metrics
from treadle.model import Workload
from treadle.runner import PolicyChoice, RunOptions, run_sim
from treadle.workload import parse_workload

TRACE = Path(__file__).resolve().parents[3] / "shared/traces/tpch-dags/tpch_dag_summary.json"


def workload(trace: Path, jobs: int, interarrival_s: float, scale: float, seed: int) -> Workload:
    arrival = (
        f"interarrival_s: {{dist: exponential, mean: {interarrival_s}}}"
        if interarrival_s > 0
        else "interarrival_s: 0"
    )
    text = f"""
seed: {seed}
cluster:
  nodes:
    - {{count: 100, resources: {{vcores: 20, memory_mb: 65536}}}}
users: {{u1: {{weight: 1}}, u2: {{weight: 1}}, u3: {{weight: 1}}, u4: {{weight: 1}}}}
jobs: []
generators:
  - kind: tpch
    path: {trace}
    count: {jobs}
    users: [u1, u2, u3, u4]
    {arrival}
    duration_scale: {scale}
    min_task_s: 1.0
"""
    return parse_workload(text, f"tpch-{jobs}")


#: Carbyne's fair baseline (and its own shares) is DRF across jobs.
POLICY_PARAMS: dict[str, dict[str, Any]] = {"drf": {"across": "jobs"}}


def run(wl: Workload, policy: str, **ask: Any) -> metrics.RunMetrics:
    params = {f"altruistic.{k}": v for k, v in ask.items()}
    t = time.perf_counter()
    choice = PolicyChoice(policy, POLICY_PARAMS.get(policy, {}))
    result, m = run_sim(wl, choice, options=RunOptions(ask_params=params, slowdown=False))
    s = m.summary
    print(
        f"  {policy:<8}{' ' + str(ask) if ask else '':<18} {s['finished']}/{s['jobs']} jobs, "
        f"makespan {s['makespan_s']:.0f} s, mean JCT {s['mean_jct_s']:.1f} s, "
        f"Jain(jobs) {s['jain_jobs_mean']:.3f}  [{time.perf_counter() - t:.1f} s wall]",
        flush=True,
    )
    if result.stalled:
        raise SystemExit(f"{policy} stalled: {result.stalled}")
    return m


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def offline(args: argparse.Namespace) -> bool:
    wl = workload(args.trace, args.jobs_offline, 0.0, args.duration_scale, args.seed)
    print(f"offline: {len(wl.jobs)} TPC-H jobs at t = 0, {wl.tasks} tasks, 100 nodes")
    runs = {p: run(wl, p) for p in ("drf", "tetris", "carbyne")}
    drf, carbyne, tetris = runs["drf"], runs["carbyne"], runs["tetris"]
    f = metrics.factor_of_improvement(drf.jobs, carbyne.jobs)
    slowest = min(f["per_job"].values())  # drf JCT / carbyne JCT: < 1 means slower
    mean_gain = drf.summary["mean_jct_s"] / carbyne.summary["mean_jct_s"]
    jain_gap = abs(carbyne.summary["jain_jobs_mean"] - drf.summary["jain_jobs_mean"])
    makespan = carbyne.summary["makespan_s"] / tetris.summary["makespan_s"]
    checks = [
        (f"worst job vs drf: {1 / slowest:.3f}x drf's JCT (<= 1.05)", 1 / slowest <= 1.05),
        (
            f"jobs slower than drf by > 5%: {sum(v < 1 / 1.05 for v in f['per_job'].values())}",
            True,
        ),
        (f"mean JCT improvement over drf: {mean_gain:.2f}x (>= 1.2)", mean_gain >= 1.2),
        (f"Jain(jobs, 60 s) gap to drf: {jain_gap:.3f} (<= 0.1)", jain_gap <= 0.1),
        (f"makespan vs tetris: {makespan:.3f}x (<= 1.1)", makespan <= 1.1),
    ]
    for text, ok in checks:
        print(f"  [{verdict(ok)}] {text}")
    return all(ok for _, ok in checks)


def online(args: argparse.Namespace) -> bool:
    wl = workload(args.trace, args.jobs_online, 20.0, args.duration_scale, args.seed)
    print(f"online: {len(wl.jobs)} TPC-H jobs, Poisson arrivals (mean 20 s), {wl.tasks} tasks")
    runs = {p: run(wl, p) for p in ("drf", "tetris", "sjf", "carbyne")}
    print("  factor of improvement of carbyne (baseline JCT / carbyne JCT):")
    print(f"  {'over':<8} {'mean':>6} {'P50':>6} {'P95':>6}")
    for base in ("drf", "tetris", "sjf"):
        f = metrics.factor_of_improvement(runs[base].jobs, runs["carbyne"].jobs)
        print(f"  {base:<8} {f['mean']:>6.2f} {f['p50']:>6.2f} {f['p95']:>6.2f}")
    print("  altruism sweep (carbyne):")
    drf_mean = runs["drf"].summary["mean_jct_s"]
    sweep = {0.0: run(wl, "carbyne", altruism=0.0), 0.5: run(wl, "carbyne", altruism=0.5)}
    sweep[1.0] = runs["carbyne"]
    for a, m in sweep.items():
        print(f"    altruism {a:<4} mean JCT {m.summary['mean_jct_s']:.1f} s")
    gap = abs(sweep[0.0].summary["mean_jct_s"] / drf_mean - 1)
    ok = gap <= 0.02
    print(f"  [{verdict(ok)}] altruism 0 vs drf: mean JCT differs by {gap:.1%} (<= 2%)")
    return ok


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.benchmarks carbyne", description=__doc__)
    p.add_argument("--trace", type=Path, default=TRACE)
    p.add_argument("--jobs-offline", type=int, default=50)
    p.add_argument("--jobs-online", type=int, default=250)
    p.add_argument("--duration-scale", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--only", choices=("offline", "online"))
    args = p.parse_args(argv)
    ok = True
    if args.only in (None, "offline"):
        ok &= offline(args)
    if args.only in (None, "online"):
        ok &= online(args)
    return 0 if ok else 1

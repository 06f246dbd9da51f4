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

carbyne runs at each ``--guarantees`` value (default 1 and 0.7): 1 is the paper's rule
(DEFAULT asks first within the whole DRF share); below 1 only that fraction of the share
is protected and the rest of the DEFAULT asks compete in the SRTF leftover. ``--seeds``
repeats the offline runs on other TPC-H draws (the worst-job figure moves with the draw).
``--jobs-offline`` / ``--jobs-online`` shrink the runs for a quick look.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from treadle import metrics
from treadle.metrics import RunMetrics as Metrics
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


def run(wl: Workload, policy: str, params: dict[str, Any] | None = None, **ask: Any) -> Metrics:
    ask_params = {f"altruistic.{k}": v for k, v in ask.items()}
    t = time.perf_counter()
    choice = PolicyChoice(policy, {**POLICY_PARAMS.get(policy, {}), **(params or {})})
    result, m = run_sim(wl, choice, options=RunOptions(ask_params=ask_params, slowdown=False))
    s = m.summary
    label = " ".join(f"{k}={v}" for k, v in {**(params or {}), **ask}.items())
    print(
        f"  {policy:<8} {label:<28} {s['finished']}/{s['jobs']} jobs, "
        f"makespan {s['makespan_s']:.0f} s, mean JCT {s['mean_jct_s']:.1f} s, "
        f"Jain(jobs) {s['jain_jobs_mean']:.3f}  [{time.perf_counter() - t:.1f} s wall]",
        flush=True,
    )
    if result.stalled:
        raise SystemExit(f"{policy} stalled: {result.stalled}")
    return m


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def offline_checks(drf: Metrics, tetris: Metrics, carbyne: Metrics) -> list[tuple[str, bool]]:
    """The issue's offline checks of one carbyne run against drf and tetris."""
    f = metrics.factor_of_improvement(drf.jobs, carbyne.jobs)
    slowest = min(f["per_job"].values())  # drf JCT / carbyne JCT: < 1 means slower
    mean_gain = drf.summary["mean_jct_s"] / carbyne.summary["mean_jct_s"]
    jain_gap = abs(carbyne.summary["jain_jobs_mean"] - drf.summary["jain_jobs_mean"])
    makespan = carbyne.summary["makespan_s"] / tetris.summary["makespan_s"]
    slower = sum(v < 1 / 1.05 for v in f["per_job"].values())
    return [
        (
            f"worst job vs drf: {1 / slowest:.3f}x drf's JCT (<= 1.05; {slower} slower by > 5%)",
            1 / slowest <= 1.05,
        ),
        (f"mean JCT improvement over drf: {mean_gain:.3f}x (>= 1.2)", mean_gain >= 1.2),
        (f"Jain(jobs, 60 s) gap to drf: {jain_gap:.3f} (<= 0.1)", jain_gap <= 0.1),
        (f"makespan vs tetris: {makespan:.3f}x (<= 1.1)", makespan <= 1.1),
    ]


def offline(args: argparse.Namespace) -> bool:
    ok = True
    for seed in args.seeds:
        wl = workload(args.trace, args.jobs_offline, 0.0, args.duration_scale, seed)
        print(f"offline, seed {seed}: {len(wl.jobs)} TPC-H jobs at t = 0, {wl.tasks} tasks")
        drf, tetris = run(wl, "drf"), run(wl, "tetris")
        for g in args.guarantees:
            checks = offline_checks(drf, tetris, run(wl, "carbyne", {"guarantee": g}))
            for text, passed in checks:
                print(f"    [{verdict(passed)}] guarantee={g}: {text}")
            ok &= all(passed for _, passed in checks)
    return ok


def online(args: argparse.Namespace) -> bool:
    wl = workload(args.trace, args.jobs_online, 20.0, args.duration_scale, args.seeds[0])
    print(f"online: {len(wl.jobs)} TPC-H jobs, Poisson arrivals (mean 20 s), {wl.tasks} tasks")
    base = {p: run(wl, p) for p in ("drf", "tetris", "sjf")}
    drf_mean = base["drf"].summary["mean_jct_s"]
    ok = True
    for g in args.guarantees:
        carbyne = run(wl, "carbyne", {"guarantee": g})
        print(f"  guarantee={g}: factor of improvement of carbyne (baseline JCT / carbyne JCT):")
        print(f"  {'over':<8} {'mean':>6} {'P50':>6} {'P95':>6}")
        for name, m in base.items():
            f = metrics.factor_of_improvement(m.jobs, carbyne.jobs)
            print(f"  {name:<8} {f['mean']:>6.2f} {f['p50']:>6.2f} {f['p95']:>6.2f}")
        print(f"  guarantee={g}: altruism sweep")
        sweep = {a: run(wl, "carbyne", {"guarantee": g}, altruism=a) for a in (0.0, 0.5)}
        sweep[1.0] = carbyne
        for a, m in sweep.items():
            print(f"    altruism {a:<4} mean JCT {m.summary['mean_jct_s']:.1f} s")
        gap = abs(sweep[0.0].summary["mean_jct_s"] / drf_mean - 1)
        print(
            f"    [{verdict(gap <= 0.02)}] altruism 0 vs drf: mean JCT differs by {gap:.1%} (<= 2%)"
        )
        ok &= gap <= 0.02
    return ok


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.benchmarks carbyne", description=__doc__)
    p.add_argument("--trace", type=Path, default=TRACE)
    p.add_argument("--jobs-offline", type=int, default=50)
    p.add_argument("--jobs-online", type=int, default=250)
    p.add_argument("--duration-scale", type=float, default=10.0)
    p.add_argument("--seeds", type=_ints, default=[1], help="workload seeds, e.g. 1,2,3")
    p.add_argument(
        "--guarantees",
        type=_floats,
        default=[1.0, 0.7],
        help="carbyne's guarantee values to run (1: the paper's rule)",
    )
    p.add_argument("--only", choices=("offline", "online"))
    args = p.parse_args(argv)
    ok = True
    if args.only in (None, "offline"):
        ok &= offline(args)
    if args.only in (None, "online"):
        ok &= online(args)
    return 0 if ok else 1

"""Carbyne against its baselines on TPC-H DAGs, in the simulator (the seed's section 5).

Workloads (``kind: tpch`` generator over ``../shared/traces/tpch-dags``, read in place):

- offline: 50 TPC-H jobs (every scale and query, drawn by seed), all submitted at t = 0;
- online: 250 jobs, Poisson arrivals with a mean inter-arrival of 20 s
  (``--interarrival-s``);

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

carbyne runs with each ``--carbyne`` setting (repeatable; default ``paper`` and
``guarantee_long=0.7``): ``paper`` is the paper's rule (DEFAULT asks first within the
whole DRF share); ``guarantee_long=G`` protects only G of the share of the jobs with at
least the median remaining work, whose other DEFAULT asks compete in the SRTF leftover
(any carbyne parameters, comma-separated, e.g. ``guarantee=0.8,guarantee_long=0.7``).
``--seeds`` repeats the offline runs on other TPC-H draws.
``--jobs-offline`` / ``--jobs-online`` shrink the runs for a quick look.

A job's JCT moves with the draw of the nodes' heartbeat phases, under any one policy: on
these workloads drf against itself slows some job by up to 9% between two draws. The
offline checks therefore run each policy ``--phase-draws`` times (default 3), each with
another draw, and compare per-job means (and means of the summary figures); the spread of
drf against itself is printed beside them.

Why carbyne's and the altruistic AM's knobs exist, and what was measured (the plugins'
docstrings give only the rules):

- ``guarantee`` < 1 (carbyne): in the offline case a job's DRF share grows as others
  finish, so its T planned on today's share is later than DRF would finish it: at the
  paper's rule long jobs keep most of their share while short ones wait for the leftover.
  A lower guarantee trades instantaneous isolation (Jain's index) for mean JCT; the offline
  checks print both.
- ``guarantee_long`` (carbyne, not in the paper): the Theorem 3.1 argument fails once jobs
  depart: a job plans T on today's share, its share grows as others finish, and DRF
  finishes it before T. The long jobs end last under DRF anyway, so part of their share can
  go to the SRTF leftover, where the short jobs gain from it, while the short and mid-sized
  jobs keep their whole DEFAULT protection. The default ``--carbyne`` settings compare it
  with the paper's rule.
- ``overhead_s`` (altruistic): a freed container is granted on a node's heartbeat and
  reaches the AM on its next call (YARN's default AM interval is 1 s), so a stage of 1 s
  tasks occupies its share about twice as long as its durations say. Without the overhead
  such a stage looks to need less of the share than it does, and the job yields what it
  needs.
- ``replan_tolerance`` (altruistic): under DRF, shares shift a little with every other
  job's demand, so on a loaded cluster nearly every call re-plans and planning was most of
  a simulation's time. Measured when it was added: 80 TPC-H jobs every 5 s ran 2.9x faster
  at 0.1, mean JCT within 3%. No option here sets it (``run(wl, "carbyne",
  replan_tolerance=0.1)`` does).
- Plan cost (altruistic): 15,000 tasks in 30 stages took ~4 ms per plan with equal
  durations per stage and ~150 ms with all-distinct ones, measured when the strategy was
  written; no benchmark here times a plan on its own.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treadle import metrics
from treadle.errors import TreadleError
from treadle.metrics import SUCCEEDED, RunMetrics as Metrics
from treadle.model import Workload
from treadle.registry import build, parse_settings
from treadle.study.runner import PolicyChoice, RunOptions, run_sim
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


#: The setting beside the paper's rule: the long half of the jobs protects 0.7 of its share
#: (it passes the four offline checks on seeds 1-5; at 0.6 Jain's gap to drf passes 0.1
#: on seeds 2 and 3).
LONG_JOBS = "guarantee_long=0.7"

#: Carbyne's fair baseline (and its own shares) is DRF across jobs.
POLICY_PARAMS: dict[str, dict[str, Any]] = {"drf": {"across": "jobs"}}


def run(
    wl: Workload,
    policy: str,
    params: dict[str, Any] | None = None,
    phase_seed: int = 0,
    **ask: Any,
) -> Metrics:
    ask_params = {f"altruistic.{k}": v for k, v in ask.items()}
    t = time.perf_counter()
    choice = PolicyChoice(policy, {**POLICY_PARAMS.get(policy, {}), **(params or {})})
    options = RunOptions(ask_params=ask_params, slowdown=False, phase_seed=phase_seed)
    result, m = run_sim(wl, choice, options=options)
    s = m.summary
    label = " ".join(f"{k}={v}" for k, v in {**(params or {}), **ask}.items())
    if phase_seed:
        label = f"{label} phases={phase_seed}".strip()
    print(
        f"  {policy:<8} {label:<28} {s['finished']}/{s['jobs']} jobs, "
        f"makespan {s['makespan_s']:.0f} s, mean JCT {s['mean_jct_s']:.1f} s, "
        f"Jain(jobs) {s['jain_jobs_mean']:.3f}  [{time.perf_counter() - t:.1f} s wall]",
        flush=True,
    )
    if result.stalled:
        raise SystemExit(f"{policy} stalled: {result.stalled}")
    return m


@dataclass
class Draws:
    """Runs of one policy on one workload, one per draw of the nodes' heartbeat phases.

    A job's JCT moves with the phases (which heartbeat finds a free slot first), by several
    percent for some jobs even under one policy: the per-job check compares per-job means
    over the draws, and ``spread`` shows how far one draw strays from another."""

    runs: list[Metrics]

    def _per_run(self) -> list[dict[str, float]]:
        return [
            {j.name: j.jct_s for j in m.jobs if j.status == SUCCEEDED and j.jct_s}
            for m in self.runs
        ]

    def jct(self) -> dict[str, float]:
        """Mean JCT per job over the draws (jobs that succeeded in every draw)."""
        per_run = self._per_run()
        names = set.intersection(*(set(d) for d in per_run))
        return {n: sum(d[n] for d in per_run) / len(per_run) for n in sorted(names)}

    def mean(self, key: str) -> float:
        return sum(float(m.summary[key]) for m in self.runs) / len(self.runs)

    def spread(self) -> float:
        """The largest JCT ratio of one job between two draws (1: draws agree)."""
        per_run = self._per_run()
        return max(
            (b[n] / a[n] for a in per_run for b in per_run for n in a.keys() & b.keys()),
            default=1.0,
        )


def draws(wl: Workload, policy: str, k: int, params: dict[str, Any] | None = None) -> Draws:
    return Draws([run(wl, policy, params, phase_seed=i) for i in range(k)])


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def offline_checks(drf: Draws, tetris: Draws, carbyne: Draws) -> list[tuple[str, bool]]:
    """The issue's offline checks of carbyne against drf and tetris (means over draws)."""
    d, c = drf.jct(), carbyne.jct()
    ratio = {n: c[n] / d[n] for n in d.keys() & c.keys()}  # > 1: slower under carbyne
    worst_job = max(ratio, key=ratio.__getitem__)
    worst = ratio[worst_job]
    slower = sum(v > 1.05 for v in ratio.values())
    mean_gain = drf.mean("mean_jct_s") / carbyne.mean("mean_jct_s")
    jain_gap = abs(carbyne.mean("jain_jobs_mean") - drf.mean("jain_jobs_mean"))
    makespan = carbyne.mean("makespan_s") / tetris.mean("makespan_s")
    return [
        (
            f"worst job vs drf: {worst:.3f}x drf's JCT (<= 1.05; {worst_job}; "
            f"{slower} slower by > 5%)",
            worst <= 1.05,
        ),
        (f"mean JCT improvement over drf: {mean_gain:.3f}x (>= 1.2)", mean_gain >= 1.2),
        (f"Jain(jobs, 60 s) gap to drf: {jain_gap:.3f} (<= 0.1)", jain_gap <= 0.1),
        (f"makespan vs tetris: {makespan:.3f}x (<= 1.1)", makespan <= 1.1),
    ]


def offline(args: argparse.Namespace) -> bool:
    ok = True
    k = args.phase_draws
    for seed in args.seeds:
        wl = workload(args.trace, args.jobs_offline, 0.0, args.duration_scale, seed)
        print(
            f"offline, seed {seed}: {len(wl.jobs)} TPC-H jobs at t = 0, {wl.tasks} tasks, "
            f"{k} draw(s) of heartbeat phases per policy"
        )
        drf, tetris = draws(wl, "drf", k), draws(wl, "tetris", k)
        if k > 1:
            print(
                f"    drf against itself: one job's JCT differs by up to "
                f"{drf.spread():.3f}x between two phase draws"
            )
        for label, params in args.carbyne:
            carbyne = draws(wl, "carbyne", k, params)
            for text, passed in offline_checks(drf, tetris, carbyne):
                print(f"    [{verdict(passed)}] {label}: {text}")
                ok &= passed
    return ok


def online(args: argparse.Namespace) -> bool:
    gap_s = args.interarrival_s
    wl = workload(args.trace, args.jobs_online, gap_s, args.duration_scale, args.seeds[0])
    print(
        f"online: {len(wl.jobs)} TPC-H jobs, Poisson arrivals (mean {gap_s:g} s), {wl.tasks} tasks"
    )
    base = {p: run(wl, p) for p in ("drf", "tetris", "sjf")}
    drf_mean = base["drf"].summary["mean_jct_s"]
    ok = True
    for label, params in args.carbyne:
        carbyne = run(wl, "carbyne", params)
        print(f"  {label}: factor of improvement of carbyne (baseline JCT / carbyne JCT):")
        print(f"  {'over':<8} {'mean':>6} {'P50':>6} {'P95':>6}")
        for name, m in base.items():
            f = metrics.factor_of_improvement(m.jobs, carbyne.jobs)
            print(f"  {name:<8} {f['mean']:>6.2f} {f['p50']:>6.2f} {f['p95']:>6.2f}")
        print(f"  {label}: altruism sweep")
        sweep = {a: run(wl, "carbyne", params, altruism=a) for a in (0.0, 0.5)}
        sweep[1.0] = carbyne
        for a, m in sweep.items():
            print(f"    altruism {a:<4} mean JCT {m.summary['mean_jct_s']:.1f} s")
        gap = abs(sweep[0.0].summary["mean_jct_s"] / drf_mean - 1)
        print(
            f"    [{verdict(gap <= 0.02)}] altruism 0 vs drf: mean JCT differs by {gap:.1%} (<= 2%)"
        )
        ok &= gap <= 0.02
    return ok


def _setting(text: str) -> tuple[str, dict[str, Any]]:
    """``paper`` (carbyne's defaults) or ``key=value,...`` carbyne parameters."""
    if text.strip() == "paper":
        return "paper's rule", {}
    try:
        params = parse_settings([x for x in text.split(",") if x.strip()], "--carbyne")
        build("policies", "carbyne", params)  # a bad parameter fails before any run
    except TreadleError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text.strip(), params


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.benchmarks carbyne", description=__doc__)
    p.add_argument("--trace", type=Path, default=TRACE)
    p.add_argument("--jobs-offline", type=int, default=50)
    p.add_argument("--jobs-online", type=int, default=250)
    p.add_argument("--duration-scale", type=float, default=10.0)
    p.add_argument(
        "--interarrival-s",
        type=float,
        default=20.0,
        help="online: mean inter-arrival of the jobs (default 20 s, the seed's; at that "
        "rate the cluster is lightly loaded: lower it to make the jobs contend)",
    )
    p.add_argument("--seeds", type=_ints, default=[1], help="workload seeds, e.g. 1,2,3")
    p.add_argument(
        "--carbyne",
        type=_setting,
        action="append",
        help="a carbyne setting to run: 'paper' or KEY=VALUE,... (repeatable; default: "
        f"'paper' and {LONG_JOBS!r})",
    )
    p.add_argument(
        "--phase-draws",
        type=int,
        default=3,
        help="offline: runs per policy, each with another draw of the heartbeat phases; "
        "the checks use per-job means over them (1: one run, the phases of phase seed 0)",
    )
    p.add_argument("--only", choices=("offline", "online"))
    args = p.parse_args(argv)
    if args.phase_draws < 1:
        p.error("--phase-draws must be >= 1")
    if not args.interarrival_s > 0 or args.interarrival_s == float("inf"):
        p.error("--interarrival-s must be a positive number of seconds")
    if args.carbyne is None:
        args.carbyne = [_setting("paper"), _setting(LONG_JOBS)]
    ok = True
    if args.only in (None, "offline"):
        ok &= offline(args)
    if args.only in (None, "online"):
        ok &= online(args)
    return 0 if ok else 1

"""``python -m tests.benchmarks dp``: the Dynamic Priority paper's experiments beside ours.

Sandholm & Lai, "Dynamic Proportional Share Scheduling in Hadoop" (spec dp.md B3), in the
simulator, on generated closed-loop Pi workloads: every user submits a stream of Pi jobs
(a map stage with as many tasks as the cluster has slots, then one short reduce task),
the next one as the last ends. Task times are the spec's derived ones ("derived task
times"): about 1,500 s on the big cluster (120 slots), 90 s on the small one (40 slots),
drawn uniform +-5% so the waves do not stay in lock step. Budgets are ample (no account
runs dry): the experiments measure shares, not exhaustion. Allocation interval 20 s.

1. **Fig. 1**: rates 4, 1.5 and 2 on 15 slots; the containers each user holds before and
   after the first interval (paper: 8, 3, 4).
2. **Two users at 2:1** on 120 slots (30 nodes x 4 vcores): dp without preemption, dp with
   60 s preemption, capacity with the same 2:1 split (66.7/33.3%, max 100%; treadle's
   capacity does not preempt, the paper's had a 60-min preemption timeout, longer than a
   task), and fifo for the ideal line's FIFO mean. Differentiation = max JCT of queue2 /
   max JCT of queue1 (paper: DP 1.8, capacity 1.5), the mean-JCT ratio, each queue's
   distance to the ideal and adjusted ideal lines with ~95% bounds (paper Table 3), the
   preemptions and the preemption overhead (paper: < 2.6%).
3. **Ten users at shares n/55** on 120 slots: each level's mean JCT against the ideal line
   (``3.4142 F / n``) and the adjusted one; how many levels come out in order.
4. **Boost**: 10 users, 40 slots (5 nodes x 8 vcores), 10 jobs each in sequence; user n
   spends 4x for its n-th job (``spending_rates: {n: 4}``): boosted jobs' speedup over the
   same user's other jobs (paper ~3x; the share model 4/13 over 1/10 = 3.08x), with and
   without preemption, and the preemption overhead.

Steady state: a user's first job (its level is "random" in the paper: the queues start
from FIFO before the first interval) and every job ending after the first user's stream
has ended (the other users then have the cluster to themselves) are left out of 2 and 3.

Options: ``--quick`` (fewer jobs per user), ``--only fig1,two,ten,boost``, ``--jobs N``
(queue2's jobs in the two-user runs; queue1 gets 1.5 N). The default run: 28 s wall (22 s
of CPU) on the 2-core machine, the ten-user runs 25 s of it; ``--quick`` about a third.

Figures of the default run (paper in brackets):

* Fig. 1: 15/0/0 containers before the first interval (FIFO), 8/3/4 after it [8/3/4].
* Two users, 2:1 (F = 2,978 s; ideal 1,985/3,970 s): dp with 60 s preemption: queue1
  3,057-3,141 s (mean 3,098), queue2 3,240-4,578 s (mean 3,732) [3,000-3,200 and
  4,500-5,800]; differentiation 1.46 [1.8], mean-JCT ratio 1.20; distances to the ideal
  line 1,112+-23 and 238+-590 s [DynPrio 800+-20 and 300+-200]; 297 preemptions.
  capacity 1.01 [1.5], distances 980+-23 and 1,004+-32 s [1,000+-150 and 600+-250]. dp
  without preemption is exactly fifo (1.01): each user has one job at a time and a job is
  one wave of the whole cluster, so when a job's tasks end the other queue's waiting job
  takes the slots (NO_FILL or FILL alike) and holds them a whole task (1,500 s); the next
  job of the first queue waits for them, whatever the quotas say. Only preemption
  enforces the shares here.
* Why 1.46 and not 1.8 (the policy follows Hadoop's rules, checked against the contrib
  code): queue1's 120-task job on its 80-slot quota takes ceil(120/80) = 2 waves, ~3,030 s,
  which is also what FIFO gives it (wait one wave, run one): the 2:1 share cannot make
  queue1 faster, only queue2 slower. Holding queue2 to its 40 slots without losing work
  gives it 3 waves, ~4,530 s: a differentiation of 1.50 at most (printed as "strict
  quotas"). And the shares are not strict: in queue1's second wave it uses 40 of its 80
  slots and work conservation (FILL) gives the other 40 to queue2, in phase with that
  wave, so they end before queue1's next job claims them; over the steady state queue1
  holds 59.6 containers on average, queue2 51.9 (quotas 80/40), and queue2's jobs take
  3,240-4,578 s. The paper's queue2 at 4,500-5,800 s (3 to 3.9 waves) ran below its
  40-slot share, which no slot scheduler gives without throwing queue2's work away; the
  paper names the cause (HDFS IO and network, which it does not control) and that is
  outside this model. Sensitivity (6 queue2 jobs, measured while investigating): task
  times fixed (+-0%) synchronise the waves completely and give 1.02; +-5% (this run)
  1.46, +-15% 1.41, +-30% 1.35, +-50% 1.27; the reduce at 0, 5 or 30 s 1.47/1.47/1.46.
* Preemption overhead +10.7%, but preempted containers had run only 3.3% of all container
  time: the rest is the differentiation itself. Without preemption every job takes
  ~2,978 s; with it queue1 cannot gain (2 waves) while queue2 loses, so the mean JCT over
  all jobs rises (strict quotas without lost work would give 3,030/4,530 s: +22%). The
  paper's < 2.6% is the boost experiment's.
* Ten users (F = 14,938 s): all 10 levels in order, with and without preemption [all 10].
  With 60 s preemption levels 3-10 lie 3,600-7,900 s above the FIFO-anchored ideal and
  within 2,100 s of the adjusted one from level 4 up; level 1 below its ideal (45,303 vs
  51,001 s) and level 2 far above (35,280 vs 25,501) [levels 3-9 near the ideal lines,
  1-2 outside]. Without preemption the levels are compressed (25,280 s at level 1, 2.6x
  level 10's instead of 10x): the low levels live on the FILL leftovers.
* Boost: boosted jobs 370 s, others 944 s: 2.73x without preemption, 2.68x with (375 vs
  974 s) [~300 vs ~900 s, ~3x; the share model 3.08x]; preemption overhead +3.1% [< 2.6%].
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from treadle.metrics import RunMetrics, dp as dpm
from treadle.metrics.scan import to_table
from treadle.model import Workload
from treadle.study.runner import PolicyChoice, RunOptions, run_sim
from treadle.workload import WorkloadFile, build_workload

INTERVAL_S = 20.0
BIG_HB_S = 3.0  # Hadoop 0.20's shortest TaskTracker heartbeat; tasks take 1,500 s
BUDGET = 1e9  # ample: no account runs dry
OPTIONS = RunOptions(slowdown=False, alone_cache=False)


def pi_job(tasks: int, task_s: float, reduce_s: float) -> dict[str, Any]:
    """A Pi estimator job: ``tasks`` maps of about ``task_s`` (+-5%), then one reduce."""
    spread = {"dist": "uniform", "low": 0.95 * task_s, "high": 1.05 * task_s}
    return {
        "stages": [
            {"name": "map", "tasks": tasks, "duration_s": spread, "resources": {"vcores": 1}},
            {
                "name": "reduce",
                "tasks": 1,
                "duration_s": reduce_s,
                "resources": {"vcores": 1},
                "after": ["map"],
            },
        ]
    }


def workload(
    name: str,
    nodes: int,
    vcores: int,
    users: Sequence[tuple[str, float, int, Mapping[int, float]]],
    job: dict[str, Any],
    capacities: Mapping[str, float] | None = None,
    heartbeat_s: float = 1.0,
) -> Workload:
    """One queue per user: ``users`` are (name, spending rate, jobs, per-job rates)."""
    queues = []
    for u, rate, _, _ in users:
        q: dict[str, Any] = {"name": u, "budget": BUDGET, "spending_rate": rate}
        if capacities:
            q["capacity"] = capacities[u]
        queues.append(q)
    doc = {
        "seed": 1,
        "cluster": {
            "heartbeat_s": heartbeat_s,
            "nodes": [{"count": nodes, "resources": {"vcores": vcores}}],
        },
        "queues": queues,
        "generators": [
            {
                "kind": "closed_loop",
                "user": u,
                "queue": u,
                "count": count,
                "job": job,
                "spending_rates": dict(boosts),
            }
            for u, _, count, boosts in users
        ],
    }
    return build_workload(WorkloadFile.model_validate(doc), name, Path(), name)


def run(wl: Workload, policy: str, **params: Any) -> tuple[list[dict[str, Any]], RunMetrics]:
    if policy != "dp":
        from treadle.workload.timeline import without_accounts

        wl = without_accounts(wl)
    result, metrics = run_sim(wl, PolicyChoice(policy, params), options=OPTIONS)
    if result.unfinished:
        raise SystemExit(f"{wl.name} under {policy}: {result.unfinished} jobs unfinished")
    return result.records, metrics


def dp_params(kill_interval_s: float = 0.0) -> dict[str, Any]:
    return {"interval_s": INTERVAL_S, "kill_interval_s": kill_interval_s}


def steady(metrics: RunMetrics) -> dict[str, list[float]]:
    """Queue -> JCTs of its steady-state jobs (see the module docstring)."""
    by_user: dict[str, list[Any]] = {}
    for j in metrics.jobs:
        by_user.setdefault(j.user, []).append(j)
    horizon = min(max(j.finish_s or 0.0 for j in js) for js in by_user.values())
    out: dict[str, list[float]] = {}
    for js in by_user.values():
        js.sort(key=lambda j: j.submit_s)
        for j in js[1:]:
            if j.jct_s is not None and j.finish_s is not None and j.finish_s <= horizon:
                out.setdefault(j.queue, []).append(j.jct_s)
    return out


def _f(x: float | None, spec: str = ".0f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


# ------------------------------------------------------------------------------ Fig. 1
def held_at(records: Sequence[Mapping[str, Any]], t: float) -> dict[str, int]:
    """Containers each queue holds at time ``t``."""
    queue = {r["job"]: r["queue"] for r in records if r["event"] == "job_submitted"}
    start = {r["container"]: r for r in records if r["event"] == "container_allocated"}
    end = {r["container"]: r["t"] for r in records if r["event"] == "container_finished"}
    out: dict[str, int] = {}
    for cid, r in start.items():
        if r["t"] <= t < end.get(cid, math.inf):
            q = queue[r["job"]]
            out[q] = out.get(q, 0) + 1
    return out


def fig1() -> None:
    users = [("alice", 4.0, 1, {}), ("bob", 1.5, 1, {}), ("sam", 2.0, 1, {})]
    wl = workload("fig1", 5, 3, users, pi_job(300, 5.0, 1.0))
    records, _ = run(wl, "dp", **dp_params())
    print("1. Fig. 1: rates 4, 1.5, 2 on 15 slots (containers held: alice/bob/sam)")
    print(f"   {'time':>8}  {'ours':>10}  {'paper':>8}")
    for t in (10.0, 30.0, 60.0, 120.0):
        h = held_at(records, t)
        ours = "/".join(str(h.get(u, 0)) for u, *_ in users)
        paper = "8/3/4" if t > INTERVAL_S else "-"
        note = " (before the first interval: FIFO)" if t < INTERVAL_S else ""
        print(f"   {t:>6.0f} s  {ours:>10}  {paper:>8}{note}")


# ------------------------------------------------------------------------ two users 2:1
def slot_use(
    records: Sequence[Mapping[str, Any]], lo: float, hi: float
) -> tuple[dict[str, float], float]:
    """(mean containers each queue held over [lo, hi], the fraction of all container
    time of the run that preempted containers had run: work thrown away)."""
    queue = {r["job"]: r["queue"] for r in records if r["event"] == "job_submitted"}
    start = {r["container"]: r for r in records if r["event"] == "container_allocated"}
    area: dict[str, float] = {}
    busy = lost = 0.0
    for r in records:
        if r["event"] != "container_finished" or r["container"] not in start:
            continue
        s = start[r["container"]]
        q, t0, t1 = queue[s["job"]], float(s["t"]), float(r["t"])
        busy += t1 - t0
        if r.get("state") == "PREEMPTED":
            lost += t1 - t0
        area[q] = area.get(q, 0.0) + max(0.0, min(t1, hi) - max(t0, lo))
    return {q: a / (hi - lo) for q, a in area.items()}, (lost / busy if busy else 0.0)


def steady_window(metrics: RunMetrics) -> tuple[float, float]:
    """From the first steady-state job's submission to the horizon (see ``steady``)."""
    by_user: dict[str, list[Any]] = {}
    for j in metrics.jobs:
        by_user.setdefault(j.user, []).append(j)
    horizon = min(max(j.finish_s or 0.0 for j in js) for js in by_user.values())
    firsts = [sorted(js, key=lambda j: j.submit_s) for js in by_user.values()]
    return max(js[1].submit_s for js in firsts if len(js) > 1), horizon


def two_users(jobs: int) -> None:
    # queue1 buys twice the slots: it finishes a job in ~2 waves, queue2 in ~3.
    users = [("queue1", 2.0, jobs + jobs // 2, {}), ("queue2", 1.0, jobs, {})]
    job = pi_job(120, 1500.0, 30.0)
    wl = workload("two", 30, 4, users, job, {"queue1": 200 / 3, "queue2": 100 / 3}, BIG_HB_S)
    shares = {"queue1": 2 / 3, "queue2": 1 / 3}
    runs = {
        "fifo": run(wl, "fifo"),
        "capacity": run(wl, "capacity"),
        "dp": run(wl, "dp", **dp_params()),
        "dp-60s": run(wl, "dp", **dp_params(60.0)),
    }
    fifo = steady(runs["fifo"][1])
    fifo_mean = float(np.mean([x for v in fifo.values() for x in v]))
    ideal = dpm.ideal_line(fifo_mean, shares)
    print(
        f"2. Two users at 2:1 on 120 slots ({jobs + jobs // 2}/{jobs} jobs; FIFO mean "
        f"F = {fifo_mean:.0f} s; ideal {ideal['queue1']:.0f}/{ideal['queue2']:.0f} s)"
    )
    head = (
        f"   {'run':<9} {'q1 mean':>8} {'q1 range':>11} {'q2 mean':>8} {'q2 range':>11} "
        f"{'diff':>5} {'(paper)':>7} {'mean r':>6}  {'dist q1':>10} {'dist q2':>10}  "
        f"{'adj q2':>9} {'preempt':>7}"
    )
    print(head)
    paper_diff = {"dp-60s": 1.8, "capacity": 1.5}
    means: dict[str, float] = {}
    for name in ("fifo", "capacity", "dp", "dp-60s"):
        records, metrics = runs[name]
        jct = {q: np.asarray(v) for q, v in steady(metrics).items()}
        mean = {q: float(v.mean()) for q, v in jct.items()}
        means[name] = float(np.mean([j.jct_s for j in metrics.jobs if j.jct_s is not None]))
        diff_max, diff_mean = dpm.differentiation(jct, shares)
        far = dpm.distances(mean, ideal)
        adj = dpm.distances(mean, dpm.adjusted_ideal_line(mean, shares))
        ci = {q: dpm.ci95(v) for q, v in jct.items()}
        table = to_table(records)[0]
        rng = {q: f"{v.min():.0f}-{v.max():.0f}" for q, v in jct.items()}
        print(
            f"   {name:<9} {mean['queue1']:>8.0f} {rng['queue1']:>11} {mean['queue2']:>8.0f} "
            f"{rng['queue2']:>11} {_f(diff_max, '.2f'):>5} {_f(paper_diff.get(name), '.1f'):>7} "
            f"{_f(diff_mean, '.2f'):>6}  {far['queue1']:>5.0f}+-{_f(ci['queue1']):<4}"
            f"{far['queue2']:>5.0f}+-{_f(ci['queue2']):<4} {adj['queue2']:>9.0f} "
            f"{dpm.preemption_count(table):>7}"
        )
    overhead = dpm.preemption_overhead(means["dp-60s"], means["dp"])
    records, metrics = runs["dp-60s"]
    lo, hi = steady_window(metrics)
    held, lost = slot_use(records, lo, hi)
    waves = {q: math.ceil(120 / round(120 * s)) for q, s in shares.items()}
    bound = (waves["queue2"] * 1500.0 + 30.0) / (waves["queue1"] * 1500.0 + 30.0)
    print(
        f"   dp-60s, steady state: mean containers held queue1 {held.get('queue1', 0):.1f}, "
        f"queue2 {held.get('queue2', 0):.1f} (quotas 80/40); preempted containers had run "
        f"{100 * lost:.1f}% of all container time"
    )
    print(
        f"   strict quotas without lost work: {waves['queue1']} and {waves['queue2']} waves "
        f"of 1,500 s tasks, differentiation {bound:.2f}"
    )
    print(
        "   paper (Table 3, distance to ideal, s): capacity 1000+-150 / 600+-250, "
        "DynPrio 800+-20 / 300+-200 (queue1 / queue2); differentiation DP 1.8, capacity 1.5"
    )
    print(
        f"   preemption overhead (mean JCT, all jobs, 60 s preemption vs none): "
        f"{100 * overhead:+.1f}% (the paper's < 2.6% is the boost experiment's)"
    )


# ---------------------------------------------------------------------------- ten users
def ten_users(scale: float) -> None:
    task_s = 1500.0
    horizon = scale * 3 * 120 / 2 * task_s  # three jobs of the lowest level (2 slots)
    users = []
    for n in range(1, 11):
        slots = round(120 * n / 55)
        jct = math.ceil(120 / slots) * task_s
        users.append((f"level{n:02d}", float(n), math.ceil(horizon / jct) + 2, {}))
    wl = workload("ten", 30, 4, users, pi_job(120, task_s, 30.0), heartbeat_s=BIG_HB_S)
    shares = {u: n / 55 for n, (u, *_) in enumerate(users, 1)}
    fifo = steady(run(wl, "fifo")[1])
    fifo_mean = float(np.mean([x for v in fifo.values() for x in v]))
    ideal = dpm.ideal_line(fifo_mean, shares)
    print(f"3. Ten users at shares n/55 on 120 slots (FIFO mean F = {fifo_mean:.0f} s)")
    print(
        f"   {'level':>5} {'ideal':>7} | {'dp: jobs':>8} {'mean':>6} {'adjust':>6} {'dist':>6} | "
        f"{'dp-60s: jobs':>12} {'mean':>6} {'adjust':>6} {'dist':>6}"
    )
    cols: list[dict[str, tuple[int, float, float]]] = []
    ordered: list[int] = []
    for kill in (0.0, 60.0):
        jct = steady(run(wl, "dp", **dp_params(kill))[1])
        mean = {q: float(np.mean(v)) for q, v in jct.items() if v}
        adj = dpm.adjusted_ideal_line(mean, shares)
        cols.append({q: (len(jct[q]), mean[q], adj[q]) for q in mean})
        levels = [mean[q] for q in sorted(mean)]
        ordered.append(1 + sum(1 for a, b in itertools.pairwise(levels) if a > b))
    for q in sorted(ideal):
        row = f"   {q[-2:]:>5} {ideal[q]:>7.0f} |"
        for width, col in ((8, cols[0]), (12, cols[1])):
            n, m, a = col.get(q, (0, math.nan, math.nan))
            row += f" {n:>{width}} {m:>6.0f} {a:>6.0f} {abs(m - ideal[q]):>6.0f} |"
        print(row.rstrip(" |"))
    print(
        f"   levels in order: dp {ordered[0]}/10, dp-60s {ordered[1]}/10 (paper: all 10 "
        "enforced; levels 3-9 near the ideal lines, 1-2 outside)"
    )


# -------------------------------------------------------------------------------- boost
def boost(jobs: int) -> None:
    users = [(f"user{n:02d}", 1.0, jobs, {n: 4.0} if n <= jobs else {}) for n in range(1, 11)]
    wl = workload("boost", 5, 8, users, pi_job(40, 90.0, 10.0))
    boosted = {f"user{n:02d}-{n}" for n in range(1, min(10, jobs) + 1)}
    print(f"4. Boost: 10 users, 40 slots, {jobs} jobs each; user n spends 4x on its n-th job")
    print(
        f"   {'run':<7} {'boosted':>8} {'others':>7} {'speedup':>8}  {'(paper ~3x, model 3.08x)'}"
    )
    means = {}
    for name, kill in (("dp", 0.0), ("dp-60s", 60.0)):
        _, metrics = run(wl, "dp", **dp_params(kill))
        jct = {j.name: j.jct_s for j in metrics.jobs if j.jct_s is not None}
        users_of = {j.name: j.user for j in metrics.jobs}
        factor, _ = dpm.boost_factor(jct, users_of, boosted)
        fast = [v for k, v in jct.items() if k in boosted]
        slow = [v for k, v in jct.items() if k not in boosted]
        means[name] = float(np.mean(list(jct.values())))
        print(f"   {name:<7} {np.mean(fast):>7.0f}s {np.mean(slow):>6.0f}s {_f(factor, '.2f'):>7}x")
    overhead = dpm.preemption_overhead(means["dp-60s"], means["dp"])
    print(f"   preemption overhead (mean JCT): {100 * overhead:+.1f}% (paper < 2.6%)")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks dp")
    ap.add_argument("--quick", action="store_true", help="fewer jobs per user")
    ap.add_argument("--only", default="fig1,two,ten,boost")
    ap.add_argument("--jobs", type=int, default=None, help="queue2's jobs in the 2-user runs")
    args = ap.parse_args(argv)
    only = set(args.only.split(","))
    unknown = only - {"fig1", "two", "ten", "boost"}
    if unknown:
        ap.error(f"unknown experiment(s) {sorted(unknown)}; choose from fig1,two,ten,boost")
    started = time.perf_counter()
    parts = {
        "fig1": fig1,
        "two": lambda: two_users(args.jobs or (3 if args.quick else 6)),
        "ten": lambda: ten_users(0.5 if args.quick else 1.0),
        "boost": lambda: boost(5 if args.quick else 10),
    }
    for key, part in parts.items():
        if key in only:
            t = time.perf_counter()
            part()
            print(f"   ({time.perf_counter() - t:.1f} s wall)\n")
    print(f"total {time.perf_counter() - started:.1f} s wall")
    return 0

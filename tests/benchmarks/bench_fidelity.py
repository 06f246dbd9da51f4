"""Fidelity: a workload replayed on a local cluster of real processes against the simulator.

For each policy, ``compare WORKLOAD`` runs once in the simulator (mode sim) and once per
dilation on a fresh local cluster (mode local: one RM, NM host processes and the
unmanaged-AM host, as ``treadle compare --mode local`` starts them). Printed per policy
and dilation: mean JCT and makespan in both modes and their ratio (local / sim; 1.000 is
perfect), the wall time of the local run, and how late timers fired in the processes
(worst p50 and p99 over RM, NMs and AM host, in emulated seconds) and in the driver.

Both sides are distributions, not numbers: the simulator's result depends on the nodes'
heartbeat phases (a random draw, as on a live cluster), and a live run is one draw of
the same kind (its phases and the order of same-instant events fall where the wall clock
puts them). The simulator therefore runs with ``--phase-seeds`` different phases and the
cluster ``--repeats`` times; their means are compared, and both ranges are printed.
Makespan is one job's finish, so it spreads far more than mean JCT under a fair-sharing
policy (demo under drf: 388 s in 6 of 10 phase draws, 425-434 s in the other 4).

``--mode docker`` runs the cluster as containers (``treadle compare --mode docker``; the
image must be built) instead of local processes.

Run: ``python -m tests.benchmarks fidelity [--dilations 10,50] [--repeats 3]`` (or
``python -m tests.benchmarks.bench_fidelity``).

``--frontier`` finds, per cluster size, the largest dilation this machine emulates
faithfully (treadle.cluster.fidelity: no NM or AM expiry caused by lag, every job
finished). The workload is the issue's shape: nodes of 16 vcores, 1 s heartbeats, jobs of
100 one-vcore tasks of 25-35 s arriving (Poisson, 10 users) at 80% load for ``--span``
emulated seconds, then draining. Per size it tries ``--dilations`` from the largest down
and stops at the first faithful run; every row prints the lag (worst p99 of timer
lateness and of RPC queueing over the roles, emulated s), the busiest role's peak CPU
demand and the dilation its estimate names (``fit``), so the estimate can be checked
against the frontier found. ``--write-workload N:JOBS:FILE`` writes that shape as a
workload file (N nodes, JOBS jobs) for ``treadle compare --mode local``.

Measured (2 cores shared with other helpers' tests and benchmarks, load average 6-9:
a live cluster's frontier moves with that load), ``--dilations 20,10,5,2``: 100 nodes
faithful at 20 (the largest tried); 300 nodes unfaithful at 20 (198 lag expiries, fit
named 11), faithful at 10; 1,000 nodes (512 jobs) unfaithful at 20, 10 and 5 (fit named
9.5, 5, 2.5; at 5 every job finished but 212 AM attempts expired), faithful at 2 (102 s
of wall). The whole table is in docs/emulation.md ("How large a cluster this machine
emulates").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from treadle.metrics import summarize
from treadle.registry import build, factory
from treadle.sim import Simulation
from treadle.study.compare import compare, make_backend
from treadle.study.runner import PolicyChoice, RunOptions
from treadle.workload import load_workload


def _sim_spread(wl: Any, policy: str, draws: int) -> dict[str, float]:
    """Mean JCT and makespan of the simulator over ``draws`` heartbeat-phase draws."""
    jct, span = [], []
    for k in range(draws):
        result = Simulation(
            wl, build("policies", policy), factory("asks", "greedy"), phase_seed=k
        ).run()
        s = summarize(result.records)
        jct.append(s["mean_jct_s"])
        span.append(s["makespan_s"])
    return {
        "mean_jct_s": statistics.mean(jct),
        "makespan_s": statistics.mean(span),
        "jct_min": min(jct),
        "jct_max": max(jct),
        "span_min": min(span),
        "span_max": max(span),
    }


def _cluster_run(
    args: argparse.Namespace, wl: Any, choice: PolicyChoice, out: Path, dilation: float
) -> Any:
    options = RunOptions(slowdown=False)  # JCT and makespan need no alone-JCT references
    backend = make_backend(
        args.mode, wl, dilation=dilation, nm_processes=args.nm_processes
    )  # docker: 2 NM containers (1 for a one-node workload)
    result = compare(wl, [choice], out, backend, options=options)
    return result.runs[choice.name]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _timers(run_dir: Path) -> dict[str, Any]:
    import json

    path = run_dir / "timers.json"
    if not path.is_file():
        return {}
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _late(timers: dict[str, Any]) -> str:
    procs: dict[str, dict[str, Any]] = timers.get("processes") or {}
    if not procs:
        return "-"
    p50 = max(p["timer_late_s"]["p50"] for p in procs.values())
    p99 = max(p["timer_late_s"]["p99"] for p in procs.values())
    submit = (timers.get("driver") or {}).get("timer_late_s", {}).get("max")
    extra = f", driver max {submit:.3f}" if submit is not None else ""
    return f"p50 {p50:.3f} p99 {p99:.3f}{extra}"


SLOTS = 16  # one-vcore tasks per 16-vcore node
TASKS_PER_JOB = 100
TASK_S = (25.0, 35.0)
LOAD = 0.8
USERS = 10


def frontier_workload_yaml(nodes: int, jobs: int, seed: int = 1) -> str:
    """The issue's overload shape as a workload file: ``nodes`` 16-vcore nodes and
    ``jobs`` jobs of 100 one-vcore tasks of 25-35 s, arriving at 80% load."""
    rate_per_min = LOAD * nodes * SLOTS / (TASKS_PER_JOB * sum(TASK_S) / 2) * 60 / USERS
    per_user = [jobs // USERS + (1 if k < jobs % USERS else 0) for k in range(USERS)]
    lines = [
        f"# {nodes} nodes, {jobs} jobs of {TASKS_PER_JOB} one-vcore tasks at {LOAD:.0%} load",
        f"seed: {seed}",
        "cluster:",
        "  heartbeat_s: 1.0",
        f"  nodes: [{{count: {nodes}, resources: {{vcores: {SLOTS}, memory_mb: 65536}}}}]",
        "users: {" + ", ".join(f"u{k}: {{weight: 1}}" for k in range(USERS)) + "}",
        "generators:",
    ]
    job = (
        f"{{stages: [{{name: s, tasks: {TASKS_PER_JOB}, duration_s: {{dist: uniform, "
        f"low: {TASK_S[0]:g}, high: {TASK_S[1]:g}}}, resources: {{vcores: 1, memory_mb: 2048}}}}]}}"
    )
    for k, count in enumerate(per_user):
        if count:
            lines.append(
                f"  - {{kind: poisson, user: u{k}, rate_per_min: {rate_per_min:.6g}, "
                f"count: {count}, start_s: 0, job: {job}}}"
            )
    return "\n".join(lines) + "\n"


def _frontier(args: argparse.Namespace, root: Path) -> int:
    import json
    import os

    from treadle.workload import parse_workload

    sizes = [int(x) for x in _floats(args.sizes)]
    dilations = sorted(args.dilations, reverse=True)
    print(
        f"fidelity frontier: nodes of {SLOTS} vcores, jobs of {TASKS_PER_JOB} one-vcore "
        f"tasks at {LOAD:.0%} load for {args.span:g} emulated s; dilations "
        f"{', '.join(f'{d:g}' for d in dilations)} (largest first, stop at the first "
        "faithful); lag columns: worst p99 over the roles, emulated s"
    )
    header = (
        f"{'nodes':>6}{'jobs':>6}{'dilation':>9}{'finished':>10}{'lag exp.':>9}"
        f"{'timer p99':>10}{'queue p99':>10}{'peak CPU':>9}{'fit':>6}{'wall s':>8}"
        f"{'load':>6}  verdict"
    )
    print(header)
    print("-" * len(header))
    found: dict[int, float | None] = {}
    for nodes in sizes:
        rate = LOAD * nodes * SLOTS / (TASKS_PER_JOB * sum(TASK_S) / 2)
        jobs = max(USERS, round(rate * args.span))
        wl = parse_workload(frontier_workload_yaml(nodes, jobs), f"frontier-{nodes}")
        found[nodes] = None
        for dilation in dilations:
            load = os.getloadavg()[0]
            t = time.perf_counter()
            backend = make_backend(
                "local", wl, dilation=dilation, nm_processes=args.nm_processes, timeout_s=900
            )
            out = root / f"frontier-{nodes}-x{dilation:g}"
            result = compare(
                wl, [PolicyChoice("fifo", {})], out, backend, options=RunOptions(slowdown=False)
            )
            wall = time.perf_counter() - t
            run = result.results["fifo"]
            fid = json.loads((out / "fifo" / "timers.json").read_text())
            roles = {**fid["processes"], "driver": fid["driver"] or {}}
            late = max(r.get("timer_late_s", {}).get("p99", 0.0) for r in roles.values())
            queue = max(r.get("rpc_queue_s", {}).get("p99", 0.0) for r in roles.values())
            ok = run.unfaithful is None and run.finished == run.jobs
            print(
                f"{nodes:>6}{jobs:>6}{dilation:>9g}{f'{run.finished}/{run.jobs}':>10}"
                f"{fid['expiries']['caused_by_lag']:>9}{late:>10.3g}{queue:>10.3g}"
                f"{fid['busiest']['demand']:>9.0%}{fid['fit_dilation']:>6g}{wall:>8.1f}"
                f"{load:>6.1f}  {'faithful' if ok else 'UNFAITHFUL'}",
                flush=True,
            )
            if ok:
                found[nodes] = dilation
                break
    print(
        "frontier (largest faithful dilation): "
        + ", ".join(
            f"{n} nodes: {d:g}" if d else f"{n} nodes: none tried" for n, d in found.items()
        )
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks fidelity", description=__doc__)
    ap.add_argument("--workload", default="demo", help="a workload file or built-in name")
    ap.add_argument("--policies", default="fifo,drf", help="comma-separated policy names")
    ap.add_argument("--dilations", type=_floats, default=[10.0], help="e.g. 10,50")
    ap.add_argument("--nm-processes", type=int, default=1)
    ap.add_argument("--phase-seeds", type=int, default=10, help="simulator runs to average")
    ap.add_argument("--repeats", type=int, default=3, help="cluster runs to average")
    ap.add_argument("--mode", choices=("local", "docker"), default="local")
    ap.add_argument("--out", type=Path, help="keep the result directories here")
    ap.add_argument("--frontier", action="store_true", help="find the faithful frontier")
    ap.add_argument("--sizes", default="100,300,1000", help="--frontier: node counts")
    ap.add_argument("--span", type=float, default=120.0, help="--frontier: arrivals, emul. s")
    ap.add_argument("--write-workload", metavar="N:JOBS:FILE", help="write the frontier shape")
    args = ap.parse_args(argv)
    if args.write_workload:
        n, jobs, path = args.write_workload.split(":", 2)
        Path(path).write_text(frontier_workload_yaml(int(n), int(jobs)))
        print(f"wrote {path}: {n} nodes, {jobs} jobs")
        return 0
    if args.frontier:
        if args.dilations == [10.0]:
            args.dilations = [20.0, 10.0, 5.0, 2.0, 1.0]
        if args.out:
            return _frontier(args, args.out)
        with tempfile.TemporaryDirectory(prefix="treadle-frontier-") as tmp:
            return _frontier(args, Path(tmp))

    wl = load_workload(args.workload)
    choices = [PolicyChoice(p.strip(), {}) for p in args.policies.split(",") if p.strip()]
    if args.repeats < 1 or args.phase_seeds < 1:
        ap.error("--repeats and --phase-seeds must be >= 1")
    with tempfile.TemporaryDirectory(prefix="treadle-fidelity-") as tmp:
        root = args.out or Path(tmp)
        t = time.perf_counter()
        sim = {c.name: _sim_spread(wl, c.name, args.phase_seeds) for c in choices}
        sim_wall = time.perf_counter() - t
        print(
            f"fidelity: {wl.name}, {len(wl.jobs)} jobs on {len(wl.cluster.nodes)} nodes, "
            f"heartbeat {wl.cluster.heartbeat_s:g} s; simulator {sim_wall:.1f} s wall for "
            f"{args.phase_seeds} phase draws per policy; {args.repeats} {args.mode} runs per "
            "policy and dilation (columns: means)"
        )
        for name, spread in sim.items():
            print(
                f"  {name}: simulator mean JCT {spread['jct_min']:.1f}..{spread['jct_max']:.1f}, "
                f"makespan {spread['span_min']:.1f}..{spread['span_max']:.1f} over the draws"
            )
        header = (
            f"{'policy':<10}{'dilation':>9}{'JCT sim':>10}{'JCT ' + args.mode:>12}{'ratio':>8}"
            f"{'span sim':>10}{'span ' + args.mode:>13}{'ratio':>8}{'wall s':>8}  "
            "timer lateness (emul. s)"
        )
        print(header)
        print("-" * len(header))
        worst = 1.0
        for dilation in args.dilations:
            out = root / f"local-x{dilation:g}"
            for c in choices:
                runs, walls = [], []
                for k in range(args.repeats):
                    t = time.perf_counter()
                    runs.append(_cluster_run(args, wl, c, out / f"{c.name}-{k}", dilation))
                    walls.append(time.perf_counter() - t)
                s = sim[c.name]
                jcts = [r.summary["mean_jct_s"] for r in runs]
                spans = [r.summary["makespan_s"] for r in runs]
                l_jct, l_span = statistics.mean(jcts), statistics.mean(spans)
                r_jct, r_span = l_jct / s["mean_jct_s"], l_span / s["makespan_s"]
                worst = max(worst, abs(r_jct - 1) + 1, abs(r_span - 1) + 1)
                print(
                    f"{c.name:<10}{dilation:>9g}{s['mean_jct_s']:>10.1f}{l_jct:>12.1f}"
                    f"{r_jct:>8.3f}{s['makespan_s']:>10.1f}{l_span:>13.1f}"
                    f"{r_span:>8.3f}{statistics.mean(walls):>8.1f}  "
                    f"{_late(_timers(out / f'{c.name}-0' / c.name))}",
                    flush=True,
                )
                print(
                    f"{'':<10}{'':>9}  {args.mode} runs: mean JCT "
                    f"{', '.join(f'{x:.1f}' for x in jcts)}; makespan "
                    f"{', '.join(f'{x:.1f}' for x in spans)}",
                    flush=True,
                )
        print(f"worst deviation from the simulator: {worst - 1:+.1%}")
        if args.out:
            print(f"results kept in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Fidelity: a workload replayed on a local cluster of real processes against the simulator.

For each policy, ``compare WORKLOAD`` runs once in the simulator (mode sim) and once per
dilation on a fresh local cluster (mode local: one RM, NM host processes and the
unmanaged-AM host, as ``treadle compare --mode local`` starts them). Printed per policy
and dilation: mean JCT and makespan in both modes and their ratio (local / sim; 1.000 is
perfect), the wall time of the local run, and how late timers fired in the processes
(mean and worst p99 over RM, NMs and AM host, in emulated seconds) and in the driver's
submissions.

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
    procs: dict[str, dict[str, float]] = timers.get("processes") or {}
    if not procs:
        return "-"
    mean = max(p.get("mean_late_s", 0.0) for p in procs.values())
    p99 = max(p.get("p99_late_s", 0.0) for p in procs.values())
    submit = (timers.get("driver_submit") or {}).get("max_late_s")
    extra = f", submit max {submit:.3f}" if submit is not None else ""
    return f"mean {mean:.3f} p99 {p99:.3f}{extra}"


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
    args = ap.parse_args(argv)

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

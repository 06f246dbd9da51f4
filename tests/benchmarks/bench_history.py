"""``python -m tests.benchmarks history``: the history estimators' setup and per-estimate
time, the fast series against the old straightforward code, measured in the same run.

Estimators: 3sigma and point, plain and ``dag=true``. Histories: synthetic, 1k, 10k and
50k jobs submitted over half a day (SWIM's shape: 20 runs of each recurring name, 50
users, 2 cpu and 2 memory sizes, 1-50 maps and 0-5 reduces), seeded; ``--swim``: SWIM
FB-2010 day 0 with input paths, the ``swim`` importer's jobs split at the half of the
day (``split_history``; 12,714 history jobs). Setup: ``load_history`` (each history job
predicted from the earlier ones, then learned; the CSV's parse, the same for both, is
left out). Per estimate: the prediction a new job gets at arrival (every feature's
point, the feature choice, with ``dag`` each stage's), over 200 jobs submitted after the
history. The old code is ``HistorySeries`` with the estimator's ``point`` (every query
slices its range and sorts or sums it: what every history estimator did before the fast
series), run only up to ``--old-max`` jobs (10k; above that it takes minutes). Every
estimate of the two is checked equal (the same float) where both ran. ``--window DAYS``
sets ``window_days``.

Figures (2-core machine shared with other helpers, one run each; ratio = old / new; the
default run 4 minutes, ``--swim --old-max 20000`` 6 minutes, nearly all of it the old
code):

=====  ==========  =========  ======  =====  ===========  ========  =====
jobs   estimator   setup new  old     ratio  per est new  old       ratio
=====  ==========  =========  ======  =====  ===========  ========  =====
1k     3sigma      0.018 s    0.20 s  11x    26 us        330 us    13x
1k     3sigma-dag  0.062 s    0.87 s  14x    14 us        950 us    68x
1k     point       0.024 s    0.06 s  2x     6 us         74 us     13x
1k     point-dag   0.127 s    0.16 s  1x     38 us        473 us    12x
10k    3sigma      0.26 s     18.2 s  71x    6 us         3,481 us  544x
10k    3sigma-dag  0.72 s     52.4 s  73x    27 us        10.7 ms   403x
10k    point       0.38 s     10.4 s  27x    9 us         2,115 us  228x
10k    point-dag   1.34 s     27.9 s  21x    68 us        8,027 us  119x
50k    3sigma      1.5 s      -              29 us
50k    3sigma-dag  5.0 s      -              53 us
50k    point       2.5 s      -              14 us
50k    point-dag   6.4 s      -              30 us
swim   3sigma      0.40 s     43.4 s  110x   4 us         9.9 ms    2446x
swim   3sigma-dag  1.35 s     125 s   93x    31 us        23.9 ms   762x
swim   point       0.46 s     31.3 s  68x    30 us        5.5 ms    186x
swim   point-dag   1.95 s     88.4 s  45x    40 us        19.6 ms   490x
=====  ==========  =========  ======  =====  ===========  ========  =====

The new setup grows as n log n (1k to 50k: x80 for 3sigma, x50 for point-dag); the old
as n^2. Under 1k jobs (and ranges of up to ``point.SMALL`` values) there is little to
gain: sorting a few values in C is as fast as the order-statistics list.

With a window (``--window 0.05``: 1.2 hours, a tenth of the history's span) point keeps
its speed (10k: 0.21 s against 1.02 s, 5x; 50k: 2.7 s, point-dag 8.2 s) but 3sigma does
not: a windowed range starting elsewhere than the last one is summed afresh, O(window),
because the running sums from another start would round differently (10k: 3sigma 0.44 s
against 4.3 s, 10x, 3sigma-dag 2.0 s against 13.5 s, 7x; 50k: 3sigma 9.8 s, 3sigma-dag
63 s, 1.7 ms per estimate). A window longer than the history's span costs nothing more: every
range then starts at the first value.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

from plugins.estimators.point import PointEstimator
from plugins.estimators.threesigma import ThreeSigmaEstimator
from rm.policy.estimator import (
    HistoryEstimator,
    HistoryJob,
    HistorySeries,
    HistoryStage,
    features,
    history_of,
)

LIVE_JOBS = 200
HALF_DAY_S = 43200.0
TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
SWIM_PATHS = TRACES / "swim" / "FB-2010_samples_24_times_1hr_withInputPaths_0.tsv"


def synthetic_history(n: int, seed: int = 1) -> list[HistoryJob]:
    """``n`` jobs over half a day, then ``LIVE_JOBS`` more after it (see the module)."""
    rng = random.Random(seed)
    total = n + LIVE_JOBS
    names = [f"/input/path{k}" for k in range(max(1, n // 20))]
    users = [f"user{k}" for k in range(50)]
    step = HALF_DAY_S / max(1, n)
    jobs = []
    t = 0.0
    for i in range(total):
        t += rng.expovariate(1 / step)
        maps, reduces = rng.randint(1, 50), rng.randint(0, 5)
        map_s, reduce_s = rng.lognormvariate(3, 1), rng.lognormvariate(4, 1)
        stages = (HistoryStage("map", maps, map_s),)
        if reduces:
            stages += (HistoryStage("reduce", reduces, reduce_s),)
        mean = (maps * map_s + reduces * reduce_s) / (maps + reduces)
        jobs.append(
            HistoryJob(
                f"{rng.choice(names)}:job{i}",
                rng.choice(users),
                t,
                maps + reduces,
                mean,
                rng.choice([1.0, 2.0]),
                rng.choice([1024.0, 2048.0]),
                stages,
            )
        )
    return jobs


def swim_history() -> list[HistoryJob]:
    """FB-2010 day 0 with input paths, the ``swim`` importer's jobs (all of them), split
    at the half of the day: the first half, then ``LIVE_JOBS`` of the second."""
    from treadle.importers.swim import load_swim
    from treadle.importers.tabular import split_history

    wl, past = split_history(load_swim(SWIM_PATHS), 0.5)
    return history_of(past) + history_of(wl.jobs[:LIVE_JOBS])


def old(cls: type[HistoryEstimator]) -> type[HistoryEstimator]:
    """``cls`` on the old series: its ``point`` over a slice of the range per query."""

    class Old(cls):  # type: ignore[valid-type, misc]
        def new_series(self) -> HistorySeries:
            return HistorySeries(self.point)

    return Old


def estimate(est: HistoryEstimator, job: HistoryJob) -> tuple[float, ...]:
    """What ``on_app_added`` computes for ``job``: its mean task runtime by the chosen
    feature and, with ``dag``, each of its stages' (None: no history of it)."""
    f = features(job.name, job.user, job.submit_s, job.vcores, job.memory_mb)
    now = job.submit_s
    out = [est.mean_task_s(est._predictions(f, now), now)]
    for stage in job.stages if est.params.dag else ():
        learner = est.stage_learners.get(stage.name)
        m = None if learner is None else learner.mean_task_s(learner.predictions(f, now), now)
        out.append(-1.0 if m is None else m)
    return tuple(out)


def measure(
    cls: type[HistoryEstimator], params: dict[str, Any], history: list[HistoryJob]
) -> tuple[float, float, list[tuple[float, ...]]]:
    """Setup seconds, seconds per estimate, the estimates."""
    past, live = history[:-LIVE_JOBS], history[-LIVE_JOBS:]
    t0 = time.perf_counter()
    est = cls(cls.Params(**params))
    est.load_history(past)
    t1 = time.perf_counter()
    out = [estimate(est, j) for j in live]
    t2 = time.perf_counter()
    return t1 - t0, (t2 - t1) / len(live), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks history", description=__doc__)
    ap.add_argument("--sizes", default="1000,10000,50000", help="history sizes (jobs)")
    ap.add_argument("--old-max", type=int, default=10000, help="run the old code up to this")
    ap.add_argument("--window", type=float, default=None, help="window_days")
    ap.add_argument("--swim", action="store_true", help="SWIM's half day instead of --sizes")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.swim:
        swim = swim_history()
        sizes = [len(swim) - LIVE_JOBS]
    variants = [
        ("3sigma", ThreeSigmaEstimator, False),
        ("3sigma-dag", ThreeSigmaEstimator, True),
        ("point", PointEstimator, False),
        ("point-dag", PointEstimator, True),
    ]
    print(f"window_days: {args.window}; old code up to {args.old_max} jobs; ratio = old / new")
    print(
        f"{'jobs':>6} {'estimator':<11} {'setup new':>10} {'old':>9} {'ratio':>7}   "
        f"{'per estimate new':>16} {'old':>9} {'ratio':>7}"
    )
    ok = True
    for n in sizes:
        history = swim if args.swim else synthetic_history(n)
        for name, cls, dag in variants:
            params = {"dag": dag, "window_days": args.window}
            setup, each, got = measure(cls, params, history)
            row = f"{n:>6} {name:<11} {setup:>9.3f}s"
            if n <= args.old_max:
                setup_old, each_old, want = measure(old(cls), params, history)
                same = got == want
                ok = ok and same
                row += f" {setup_old:>8.2f}s {setup_old / setup:>6.0f}x   {each * 1e6:>13.1f}us"
                row += f" {each_old * 1e6:>7.0f}us {each_old / each:>6.0f}x"
                row += "" if same else "  ESTIMATES DIFFER"
            else:
                row += f" {'(skipped)':>9} {'':>7}   {each * 1e6:>13.1f}us"
            print(row, flush=True)
    if n > args.old_max:
        print(f"(the old code is skipped above {args.old_max} jobs: it is quadratic)")
    print("estimates equal to the old code's: " + ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

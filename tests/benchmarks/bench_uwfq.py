"""``python -m tests.benchmarks uwfq``: the UWFQ paper's Tables 1 and 2 beside ours.

Runs Scenario 1 (``micro-synthetic/2_power_2_small_users_default.json``), Scenario 2
(``4_super_small_users_default.json``) and the homogeneous macro benchmark
(``macro/homo_macro_config.json``, plain and partitioned "-P" by the authors' LoopCustom
rule) under spark-fair (the paper's "Fair"), ujf, cfq and uwfq, in the simulator, and
prints each table row as the paper's figures (``../shared/specs/uwfq.md`` §4.5) over ours.
Every figure is treadle's own: each run's summary (mean and worst-10% JCT, the JCT rank
groups, best/worst user) and ``treadle.metrics.against_reference`` (DVR/DSR against ujf of
the same scenario, ujf-P for the -P rows, as ``treadle compare`` reports them).

Conventions of ours that differ from the printed tables (spec §3.5): violation and slack
counts are job counts (the paper's Table 1 counts every job twice); Table 2's statistics
are over the 97 jobs (the paper's are over 174 entries, its user-matching bug);
``--paper-compat`` counts as the paper does. One run per row (the paper averages 3).
"Freq."/"Infreq." are the mean of the 2 power (2 small) users' mean RTs; "First"/"Last"
the min/max per-user mean RT (best/worst user), as the authors' code has them.

Options: ``--only s1,s2,homo,homo-p`` picks scenarios; ``--workers N`` (default 2) runs
that many simulations at once; ``--heartbeat-s H`` (default 0.01) the cluster's heartbeat
and the AMs' interval. To measure a gap: ``--slot-scale F`` multiplies every micro class's
slot-time; ``--option KEY=VALUE`` sets an importer option (``nodes``, ``driver_slots``,
``driver_s``, ``skew``, ``tasks``, ``macro_driver_s``: ``UwfqOptions``); ``--set
POLICY.KEY=VALUE`` a policy parameter. The default run is 16 simulations: 72 s wall, 143 s
of run time with 2 workers on the shared 2-core machine (homo and homo-p: 15 s wall).

Gaps to the paper, measured (one run per row; [BT] is kazemaksOG/spark-benchmark-tool,
``results/tables/*_run_data.csv``, the per-iteration rows behind the paper's tables).

**Homo DVR: UWFQ 1.96, UWFQ-P 0.01 (paper 0.44, 0.61).** No bug: v checked job by job. DVR
is the mean of v over the violators only, v = lateness / RT under ujf. UWFQ has 12 violators;
three tiny jobs (3.8-10.7 core-s, ujf RT 0.25-2.7 s) give 19.9 of their 23.5 sum of v (v =
8.5, 7.7, 3.7; without them DVR 0.40): each arrives while UWFQ's schedule holds every core
with tasks of big stages (a LoopCustom stage is 32 tasks, up to 20.9 s long, not
preemptible) and waits 2-12 s for its first task, where under ujf it started within 0.3 s;
the event log shows no container ending during those waits (blocked, not passed over).
Shorter tasks remove it (``treadle compare .../macro/homo_macro_config.json --policies
ujf,cfq,uwfq --partition ATR``): with the longest task 20.9/10/5/2/1/0.5 s, UWFQ's DVR is
1.96/1.12/0.49/0.18/0.02/0.01 and its largest lateness 11.2 s (20.9), 3.4 s (5), 2.1 s
(0.5), the paper's bound F_UWFQ <= F_UJF + c t_max (Cor. A.5). CFQ stays at 0.57-1.28
(largest lateness 71, 72, 78 s at 20.9, 5, 0.5): its violations come from its order (no
user level), not from blocking. UWFQ-P is ~0 because with 0.5-s tasks it finishes every
job within 2.1 s of ujf (6 violators, v <= 0.016). The paper's DVRs carry Spark's
run-to-run noise, which a deterministic simulator has none of: [BT]'s UJF against its own
iteration 0 scores DVR 0.71 and 0.52 (homo), 0.03 and 0.48 (homo-P), so the paper's 0.44
and 0.61 sit at that floor. The authors' size inflation (``--set
uwfq.size_inflation=4.3``) gives 1.17 (17 violators) and 0.29 (9); a macro driver overhead
(``--option macro_driver_s=0.73``, the smallest ujf RT 0.84 s) 1.41 and 0.01.

**Scenario 1 RTs 12-21% above the paper's.** The task-time mapping. The paper ran the 184
Loop100 jobs in 142.0-145.9 s (all 12 [BT] runs); 32 cores can do that only if a job took
at most 145.9 x 32 / 184 = 25.4 core-s, 94% of the oracle's 26.926 that our tasks hold,
and our makespan is 157.3 s. Change of the mean RTs of Fair/UJF/CFQ/UWFQ (gap to the paper
+6.0/+7.2/+3.7/+6.1 s) per knob:

- ``--slot-scale 0.92`` (makespan 145.0 s): -6.8/-7.1/-6.1/-6.4 s, giving 43.2/43.2/30.1/
  29.1 (paper 44.0/43.1/32.5/29.4) and Freq. 44.9/48.8/29.7/33.0 (44.5/48.8/32.3/33.1):
  the whole gap. Near saturation (112% load, 103% at 0.92) RT moves far more than work.
- ``--option driver_slots=1000`` (the last note's guess, no driver queue): +0.4/-0.8/-0.9/
  -0.1 s: not it. ``--option driver_s=0``: -0.9/+0.6/-1.5/-0.8. ``--option skew=false``:
  within 0.6 s. ``--heartbeat-s 0.002``: -0.4 to -0.9; ``0.05``: +1.3 to +1.9.
- ``--option nodes=9`` (36 cores): -8.5 to -8.8 s. The makespan fixes the ratio of work to
  capacity, not its side; the spec documents 32 cores, so we read it as the oracle's size.

Fair's/UJF's worst 10% (129/146 s; 107/123 at 0.92; paper 86/75) is the FAIR tie: the
worst jobs are user1_power's first burst, finishing at the very end (at 0.92: RT 141-145 s
of a 145-s run), because Spark compares the names ``TaskSet_<id>.0`` as strings:
``TaskSet_37.0`` sorts after every later stage from ``TaskSet_100.0`` to
``TaskSet_369.0``. ``--set spark-fair.tie=submit --set ujf.tie=submit`` gives 55.0/60.5
(at 0.92). Who loses depends on how many stage ids a job takes: 3 here (plan, compute,
collect); 4/5/6/8 (a scratch patch of ``SparkStageIds``) give Fair 106/88/85/94, UJF
113/89/92/100. Spark's count per Loop100 job is unknown, so this residue is left as the
tie's numbering, not fitted.

**Scenario 2: UWFQ lowest by 0.1-0.2 s; First/Last 20.1/24.1 (paper 15.8/31.3).** 120
identical jobs pass the 2 driver slots (makespan 44.4 s under every policy), and any order
that completes them one by one has the same sum of completion times: fifo 22.6, uwfq 22.6,
ujf 22.7, spark-fair 22.8; only cfq interleaves (33.3: a collect stage's F = V(its
arrival) + S sorts behind every plan stage that arrived at 0.1-0.4 s). The paper's
Fair/UJF (28.1/29.1) lose 3-4 s there, we think in Spark's driver, which works on
concurrent jobs together rather than two at a time in the policy's order (not measured;
the model has no such sharing). uwfq follows the spec: D = A_k + j S, A_k = V_g at the
user's arrival (0, 3.2, 4.8, 5.87 core-s for users 0.1 s apart; S = 2.257), so the users'
j-th jobs are served in turn (completions by user 1112231423142314...), user 4 about 2.6
jobs behind user 1: per-user 20.1/22.5/23.8/24.1. In the authors' code every job has left
virtual time by 5.85 s (S = 1.523, ``TwoLevelClock``), and a stage submitted after that
gets deadline 0 and runs in submission order (spec 1.5, rule 2). Spark submits a job's
stages only after the driver's own work for it, so most come after 5.85 s: the paper's
UWFQ per-user means rise with arrival order (15.8/25.4/29.5/31.3) like T-FIFO's
(9.4/20.7/31.0/39.6), and its makespan is T-FIFO's (50.7 vs 50.6 s; Fair/UJF 43.3). Ours
puts the driver work in the job's first stage, which arrives at submission while the job
is virtually active, so the turns last the whole run. That reading of Spark is inferred
from [BT]'s per-user rows, not measured.

Sizes count the driver: cfq's and uwfq's ``slot_time`` counts a task without vcores as one
slot, so Loop20's S is 2.257 core-s, not the oracle's 1.523. With driver-free sizes (a
scratch patch) Scenario 2's per-user means move by 0.4 s at most and Scenario 1's by 0.8 s
(user3_small 3.0 -> 3.8); left as it is.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from treadle.errors import TreadleError
from treadle.importers.uwfq import JOB_CLASSES, UwfqOptions, load_uwfq
from treadle.metrics import RunMetrics, against_reference
from treadle.model import Workload
from treadle.registry import build, parse_settings
from treadle.study.runner import PolicyChoice, RunOptions, run_sim, split_policy_settings
from treadle.workload.partition import Partitioning, partition_workload

SCENARIOS = Path(__file__).resolve().parents[3] / "shared" / "traces" / "uwfq-scenarios"
POLICIES = ("spark-fair", "ujf", "cfq", "uwfq")
PAPER_NAME = {"spark-fair": "Fair", "ujf": "UJF", "cfq": "CFQ", "uwfq": "UWFQ"}
REFERENCE = "ujf"


@dataclass(frozen=True)
class Scenario:
    key: str
    file: str
    partitioned: bool = False


SCEN = {
    "s1": Scenario("s1", "micro-synthetic/2_power_2_small_users_default.json"),
    "s2": Scenario("s2", "micro-synthetic/4_super_small_users_default.json"),
    "homo": Scenario("homo", "macro/homo_macro_config.json"),
    "homo-p": Scenario("homo-p", "macro/homo_macro_config.json", partitioned=True),
}

# The paper's Table 1 and 2 (spec §4.5), keyed (scenario, policy).
T1_COLS = ("avg_rt", "avg_sl", "w10_rt", "w10_sl", "a", "b", "dvr", "viol", "dsr", "slack")
PAPER_T1 = {
    "s1": {
        "spark-fair": (44.0, 19.9, 86.1, 39.0, 44.5, 40.8, 3.25, 141, 0.27, 227),
        "ujf": (43.1, 19.5, 74.7, 33.9, 48.8, 5.13, None, None, None, None),
        "cfq": (32.5, 14.7, 49.8, 22.5, 32.3, 34.2, 3.69, 91, 0.38, 277),
        "uwfq": (29.4, 13.3, 50.3, 22.8, 33.1, 4.50, 0.23, 58, 0.37, 310),
    },
    "s2": {
        "spark-fair": (28.1, 32.9, 41.6, 48.9, 21.4, 33.7, 0.78, 95, 0.31, 145),
        "ujf": (29.1, 34.1, 41.3, 48.5, 25.4, 33.3, None, None, None, None),
        "cfq": (43.2, 50.7, 49.5, 58.1, 36.7, 47.3, 0.80, 211, 0.51, 29),
        "uwfq": (25.5, 29.9, 46.5, 54.6, 15.8, 31.3, 0.50, 94, 0.43, 146),
    },
}
T2_COLS = ("runtime", "avg_rt", "g80", "g95", "g100", "dvr", "viol", "dsr", "slack")
PAPER_T2 = {
    "homo": {
        "spark-fair": (563.1, 46.12, 28.29, 100.5, 164.4, 1.00, 83, 0.42, 91),
        "ujf": (565.7, 54.12, 27.43, 140.9, 215.5, None, None, None, None),
        "cfq": (621.0, 37.05, 11.05, 85.67, 298.1, 0.55, 30, 0.52, 144),
        "uwfq": (624.2, 41.42, 12.33, 92.36, 343.5, 0.44, 38, 0.51, 136),
    },
    "homo-p": {
        "spark-fair": (563.8, 49.66, 27.94, 112.7, 202.7, 1.30, 102, 0.28, 72),
        "ujf": (562.8, 50.44, 23.02, 140.2, 214.4, None, None, None, None),
        "cfq": (592.5, 28.64, 5.51, 63.78, 284.2, 0.69, 28, 0.61, 146),
        "uwfq": (591.8, 31.19, 6.05, 67.44, 314.6, 0.61, 27, 0.56, 147),
    },
}
IDLE_S = {"s1": JOB_CLASSES["Loop100"].idle_s, "s2": JOB_CLASSES["Loop20"].idle_s}


#: Importer options ``--option`` may set (``UwfqOptions`` fields) and the types they take.
OPTION_TYPES: dict[str, tuple[type, ...]] = {
    "nodes": (int,),
    "vcores_per_node": (int,),
    "tasks": (int,),
    "driver_slots": (int,),
    "driver_s": (int, float),
    "skew": (bool,),
    "macro_driver_s": (int, float),
}


def importer_options(
    heartbeat_s: float, settings: Mapping[str, Any], slot_scale: float = 1.0
) -> UwfqOptions:
    """The importer's options: the heartbeat, ``--option`` values, and every micro class's
    slot-time times ``slot_scale`` (idle RTs unchanged). Raises ValueError naming the
    option."""
    kw: dict[str, Any] = {}
    for key, value in settings.items():
        types = OPTION_TYPES.get(key)
        if types is None:
            raise ValueError(f"--option {key}: unknown; choose from {', '.join(OPTION_TYPES)}")
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            kinds = " or ".join(t.__name__ for t in types)
            raise ValueError(f"--option {key}={value!r}: expected {kinds}")
        kw[key] = value
    if not (math.isfinite(slot_scale) and slot_scale > 0):
        raise ValueError(f"--slot-scale must be a number > 0, got {slot_scale}")
    classes = {n: c._replace(slot_s=c.slot_s * slot_scale) for n, c in JOB_CLASSES.items()}
    try:
        return UwfqOptions(heartbeat_s=heartbeat_s, classes=classes, **kw)
    except ValueError as e:
        raise ValueError(f"--option: {e}") from None


def load(scenario: Scenario, options: UwfqOptions) -> Workload:
    wl = load_uwfq(str(SCENARIOS / scenario.file), options)
    if scenario.partitioned:
        wl = partition_workload(wl, Partitioning(rule="loopcustom"))
    return wl


def run_one(
    key: str, policy: str, importer: UwfqOptions, params: Mapping[str, Any]
) -> tuple[str, str, RunMetrics, list[str], float]:
    started = time.perf_counter()
    wl = load(SCEN[key], importer)
    options = RunOptions(slowdown=False, alone_cache=False)
    _, run = run_sim(wl, PolicyChoice(policy, dict(params)), options=options)
    run = dataclasses.replace(run, utilization={})  # not needed here
    return key, policy, run, list(wl.users), time.perf_counter() - started


def figures(
    runs: Mapping[str, RunMetrics], users: list[str], paper_compat: bool
) -> dict[str, tuple[dict[str, Any], dict[str, Any] | None]]:
    """Per policy: its RT figures (the summary's, or with ``paper_compat`` the authors'
    entries') and its figures against the reference (None for the reference)."""
    jobs = {p: r.jobs for p, r in runs.items()}
    extra = against_reference(jobs, REFERENCE, paper_compat=paper_compat, users=users)
    out: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {}
    for p, run in runs.items():
        if paper_compat:
            c = extra[p]["paper_compat"]
            users = c["per_user_mean_jct_s"]
            out[p] = (c | {"users": users}, c.get("vs_reference"))
        else:
            s = run.summary
            users = {u: v["mean_jct_s"] for u, v in s["per_user"].items()}
            out[p] = (s | {"users": users}, extra[p].get("vs_reference"))
    return out


def _mean(xs: Sequence[float]) -> float | None:
    return math.fsum(xs) / len(xs) if xs else None


def _deadlines(vs: Mapping[str, Any] | None) -> tuple[object, ...]:
    if vs is None:
        return (None, None, None, None)
    return vs["dvr"], vs["violations"], vs["dsr"], vs["slack"]


def table1_row(key: str, rt: Mapping[str, Any], vs: Mapping[str, Any] | None) -> tuple[object, ...]:
    idle = IDLE_S[key] or 1.0
    users = {u: m for u, m in rt["users"].items() if m is not None}
    if key == "s1":  # the mean over the 2 power (2 small) users of each one's mean RT
        a = _mean([v for u, v in users.items() if "power" in u])
        b = _mean([v for u, v in users.items() if "small" in u])
    else:  # First/Last: the min and max per-user mean RT, as the authors' code has them
        a = rt["best_user"]["mean_jct_s"] if rt["best_user"] else None
        b = rt["worst_user"]["mean_jct_s"] if rt["worst_user"] else None
    avg, w = rt["mean_jct_s"], rt["worst10_jct_s"]
    return (avg, (avg or 0) / idle, w, (w or 0) / idle, a, b, *_deadlines(vs))


def table2_row(
    run: RunMetrics, rt: Mapping[str, Any], vs: Mapping[str, Any] | None
) -> tuple[object, ...]:
    groups = rt["jct_groups_s"]
    return (
        run.summary["makespan_s"],
        rt["mean_jct_s"],
        *(groups[g] for g in ("0-80%", "80-95%", "95-100%")),
        *_deadlines(vs),
    )


def fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, int):
        return str(v)
    assert isinstance(v, float)
    return f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"


def print_table(
    title: str,
    cols: Sequence[str],
    paper: Mapping[str, tuple[object, ...]],
    ours: Mapping[str, tuple[object, ...]],
    suffix: str = "",
) -> None:
    print(f"\n{title}")
    print(f"{'policy':<10}{'':<7}" + "".join(f"{c:>9}" for c in cols))
    for p in POLICIES:
        name = PAPER_NAME[p] + suffix
        print(f"{name:<10}{'paper':<7}" + "".join(f"{fmt(v):>9}" for v in paper[p]))
        if p in ours:
            print(f"{'':<10}{'ours':<7}" + "".join(f"{fmt(v):>9}" for v in ours[p]))


def checks(rows: Mapping[str, Mapping[str, tuple[object, ...]]]) -> list[tuple[str, bool]]:
    """The issue's must-show orderings, on our figures."""
    out: list[tuple[str, bool]] = []

    def col(key: str, policy: str, i: int) -> float:
        v = rows[key][policy][i]
        return float(v) if isinstance(v, int | float) else math.nan

    if "s1" in rows and len(rows["s1"]) == 4:
        u, c, j, f = (col("s1", p, 0) for p in ("uwfq", "cfq", "ujf", "spark-fair"))
        out.append(("S1 mean RT: UWFQ < CFQ < UJF and Fair", u < c < min(j, f)))
        inf = col("s1", "uwfq", 5)
        ok = inf <= col("s1", "spark-fair", 5) / 3 and inf <= col("s1", "cfq", 5) / 3
        out.append(("S1 infrequent users: UWFQ <= 1/3 of Fair's and CFQ's", ok))
        dvrs = {p: col("s1", p, 6) for p in ("uwfq", "cfq", "spark-fair")}
        out.append(("S1 DVR: UWFQ lowest", min(dvrs, key=lambda p: dvrs[p]) == "uwfq"))
    if "s2" in rows and len(rows["s2"]) == 4:
        means = {p: col("s2", p, 0) for p in POLICIES}
        out.append(("S2 mean RT: UWFQ lowest", min(means, key=lambda p: means[p]) == "uwfq"))
        out.append(("S2 mean RT: CFQ highest", max(means, key=lambda p: means[p]) == "cfq"))
    for key, cap in (("homo", 0.6), ("homo-p", 0.4)):
        if key in rows and len(rows[key]) == 4:
            ref = col(key, "ujf", 2)
            for p in ("cfq", "uwfq") if key == "homo" else ("uwfq",):
                ratio = col(key, p, 2) / ref
                out.append((f"{key} {p} 0-80% RT {ratio:.2f}x UJF's (<= {cap})", ratio <= cap))
    if "homo" in rows and len(rows["homo"]) == 4:
        base = col("homo", "ujf", 0)
        for p in ("cfq", "uwfq"):
            ratio = col("homo", p, 0) / base
            out.append((f"homo {p} makespan {ratio:.3f}x UJF's (within 15%)", ratio <= 1.15))
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks uwfq")
    ap.add_argument("--only", default=",".join(SCEN))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--heartbeat-s", type=float, default=0.01)
    ap.add_argument("--paper-compat", action="store_true")
    ap.add_argument("--slot-scale", type=float, default=1.0)
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--set", action="append", default=[], metavar="POLICY.KEY=VALUE")
    args = ap.parse_args(argv)
    try:
        importer = importer_options(
            args.heartbeat_s, parse_settings(args.option, "--option"), args.slot_scale
        )
        params = split_policy_settings(parse_settings(args.set), POLICIES)
        for p in POLICIES:
            build("policies", p, params[p])  # a bad value fails here, not in a worker
    except (ValueError, TreadleError) as e:
        print(e, file=sys.stderr)
        return 2
    keys = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SCEN]
    if unknown:
        print(
            f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCEN)}",
            file=sys.stderr,
        )
        return 2
    if not SCENARIOS.is_dir():
        print(f"{SCENARIOS} is absent (../shared is not beside the checkout)", file=sys.stderr)
        return 2
    knobs = [f"--slot-scale {args.slot_scale:g}"] if args.slot_scale != 1.0 else []
    knobs += [f"--option {o}" for o in args.option] + [f"--set {o}" for o in args.set]
    if knobs:
        print(f"Changed from the spec's reading: {' '.join(knobs)}")
    started = time.perf_counter()
    results: dict[str, dict[str, RunMetrics]] = {k: {} for k in keys}
    users: dict[str, list[str]] = {}
    cpu: dict[tuple[str, str], float] = {}
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = [pool.submit(run_one, k, p, importer, params[p]) for k in keys for p in POLICIES]
        for fut in futures:
            key, policy, run, users[key], secs = fut.result()
            results[key][policy] = run
            cpu[key, policy] = secs
            jobs = len(run.jobs)
            print(f"  {key:<7}{policy:<11}{jobs:>4} jobs  {secs:6.1f} s", file=sys.stderr)
    rows: dict[str, dict[str, tuple[object, ...]]] = {}
    for key in keys:
        figs = figures(results[key], users[key], args.paper_compat)
        if key in ("s1", "s2"):
            rows[key] = {p: table1_row(key, *figs[p]) for p in results[key]}
        else:
            rows[key] = {p: table2_row(run, *figs[p]) for p, run in results[key].items()}
    labels = {
        "s1": ("Table 1, Scenario 1 (a: Freq. RT, b: Infreq. RT)", PAPER_T1, T1_COLS, ""),
        "s2": (
            "Table 1, Scenario 2 (a: First = min user RT, b: Last = max)",
            PAPER_T1,
            T1_COLS,
            "",
        ),
        "homo": ("Table 2, homo macro", PAPER_T2, T2_COLS, ""),
        "homo-p": ("Table 2, homo macro -P (LoopCustom partitioning)", PAPER_T2, T2_COLS, "-P"),
    }
    for key in keys:
        title, paper, cols, suffix = labels[key]
        print_table(title, cols, paper[key], rows[key], suffix)
    if args.paper_compat:
        print("\nFigures over the authors' entries (--paper-compat, spec §3.5).")
    else:
        print(
            "\nCounts: ours are jobs; the paper's Table 1 counts each job twice, its Table 2 "
            "is over 174 entries for 97 jobs (spec §3.5; --paper-compat counts as they do)."
        )
    print("\nMust-show checks on our figures:")
    for text, ok in checks(rows):
        print(f"  [{'ok' if ok else 'NO'}] {text}")
    total = time.perf_counter() - started
    print(f"\n{len(cpu)} simulations, {sum(cpu.values()):.0f} s of run time, {total:.0f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

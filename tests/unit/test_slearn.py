"""GS, LAS and the estimators they learn sizes with (spec slearn.md, part A): the
hand-checkable cases G1-G3, G5, G6, G9, G10, G12, each estimator's rule, and bad input.

Times in the spec are exact for decisions taken the instant a slot frees; treadle's
decisions wait for a node heartbeat (1 s) and the AM's allocate interval, so orders and
queues are asserted exactly and times within a few seconds.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from am.core import ApplicationMaster
from plugins.asks.greedy import GreedyAsks
from plugins.estimators.point import PointEstimator, lower_median
from plugins.estimators.slearn import AdaptiveRatio, SlearnEstimator, normalized_jct, pilot_count
from plugins.estimators.threesigma import ThreeSigmaEstimator, utility_point
from plugins.policies.gs import GsPolicy
from plugins.policies.las import LasPolicy
from rm.policy.estimator import HistoryJob, features, read_history, recurring_name
from rm.policy.toolkit.multiqueue import Layout, QueueParams, runtime_range
from treadle import events as ev, registry
from treadle.errors import InputError, PluginError
from treadle.messages import Ask
from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.resources import ZERO, Resources
from treadle.sim import SimResult, Simulation

SLOT = Resources(vcores=1, memory_mb=1024)


def job(name: str, durations: list[float], submit: float = 0.0, user: str = "u") -> JobSpec:
    return JobSpec(name, user, submit, (StageSpec("s", SLOT, tuple(durations)),))


def workload(slots: int, *jobs: JobSpec, seed: int = 0) -> Workload:
    node = NodeSpec("n0", Resources(vcores=slots, memory_mb=1024 * slots))
    return Workload("t", ClusterSpec((node,)), tuple(jobs), seed=seed)


def simulate(wl: Workload, policy: str, params: Mapping[str, Any] | None = None) -> Any:
    p = registry.build("policies", policy, params)
    result = Simulation(wl, p, lambda: registry.build("asks", "greedy"), policy_name=policy).run()
    assert result.stalled is None
    return result, p


def by_name(result: SimResult) -> dict[str, str]:
    return {r["job"]: r["name"] for r in result.records if r["event"] == "job_submitted"}


def allocations(result: SimResult) -> list[tuple[float, str]]:
    names = by_name(result)
    return [
        (r["t"], names[r["job"]]) for r in result.records if r["event"] == "container_allocated"
    ]


def jct(result: SimResult) -> dict[str, float]:
    names = by_name(result)
    sub = {r["job"]: r["t"] for r in result.records if r["event"] == "job_submitted"}
    return {
        names[r["job"]]: r["t"] - sub[r["job"]]
        for r in result.records
        if r["event"] == "job_finished"
    }


# ----------------------------------------------------------------------------- G1, G2
def test_g1_thresholds_plain_and_with_the_sampling_position() -> None:
    sizes = [999, 1000, 12_345, 99_999, 1e5, 1e12]
    assert [runtime_range(s, 1000, 10, 10) for s in sizes] == [0, 1, 2, 2, 3, 9]
    layout = Layout(QueueParams())  # option C: ranges at positions 0, 2, 3, ..., 9
    assert [layout.position(s) for s in sizes] == [0, 2, 3, 3, 4, 9]
    assert layout.position(1e10) == 9
    assert layout.position(1e10 - 1) == 8
    assert layout.weights[:3] == [1.0, 0.1, 0.01]
    assert Layout(QueueParams(sampling_queue="extra")).position(1e12) == 10
    assert Layout(QueueParams(sampling_queue="shared")).position(1000) == 1


def test_g2_pilot_count_rounds_down_by_default() -> None:
    cases = [(3, 0.03, 1), (33, 0.03, 1), (34, 0.03, 1), (100, 0.03, 3), (40, 0.05, 2)]
    assert [pilot_count(s, r) for s, r, _ in cases] == [m for _, _, m in cases]
    assert pilot_count(150, 0.05) == 7
    assert pilot_count(150, 0.05, "ceil") == 8
    assert pilot_count(150, 0.05, "round") == 8


# ----------------------------------------------------------------------------- G3
def test_g3_thin_jobs_go_to_the_top_queue_unsampled() -> None:
    wl = workload(4, job("thin", [30, 30]), job("wide", [30, 30, 30], submit=0.5))
    params = {"estimator": "slearn", "slearn.ratio": 0.03, "work_conservation": False}
    result, gs = simulate(wl, "gs", params)
    names = {v: k for k, v in by_name(result).items()}
    log = [(app, pos) for _, app, pos in gs.queue_log]
    assert log[0] == (names["thin"], 0)
    assert log[1] == (names["wide"], 1)  # the sampling position
    # One pilot: the wide job holds one container until it ends, then the rest.
    wide = [t for t, n in allocations(result) if n == "wide"]
    assert len(wide) == 3
    assert wide[1] >= wide[0] + 30
    assert log[2] == (names["wide"], 0)  # 90 task-seconds: the top queue


# ----------------------------------------------------------------------------- G5
def g5() -> Workload:
    return workload(3, job("A", [2000] * 3), job("B", [10] * 3))


def test_g5_weighted_sharing_min_ratio() -> None:
    result, _ = simulate(g5(), "gs", {"estimator": "oracle"})
    alloc = allocations(result)
    assert [n for _, n in alloc] == ["B", "A", "B", "B", "A", "A"]
    assert alloc[2][0] - alloc[0][0] < 1  # three slots at once
    assert 10 <= alloc[3][0] < 13
    assert alloc[4][0] == alloc[3][0]
    assert 20 <= alloc[5][0] < 24  # B ended: A's third task
    times = jct(result)
    assert 20 <= times["B"] < 25
    assert 2020 <= times["A"] < 2026


def test_g5_weighted_sharing_deficit_and_fifo() -> None:
    result, _ = simulate(g5(), "gs", {"estimator": "oracle", "sharing": "deficit"})
    assert [n for _, n in allocations(result)] == ["B"] * 3 + ["A"] * 3
    times = jct(result)
    assert 10 <= times["B"] < 14
    assert 2010 <= times["A"] < 2014
    result, _ = simulate(g5(), "fifo")
    assert [n for _, n in allocations(result)] == ["A"] * 3 + ["B"] * 3
    assert 2010 <= jct(result)["B"] < 2014


# ----------------------------------------------------------------------------- G6
@pytest.mark.parametrize("conserve", [True, False])
def test_g6_work_conservation(conserve: bool) -> None:
    wl = workload(10, job("w", [50.0] * 100))
    params = {"estimator": "slearn", "slearn.ratio": 0.03, "work_conservation": conserve}
    result, gs = simulate(wl, "gs", params)
    alloc = allocations(result)
    first = [t for t, _ in alloc if t == alloc[0][0]]
    assert len(first) == (10 if conserve else 3)
    if not conserve:
        assert 50 <= alloc[3][0] < 54
        assert len([t for t, _ in alloc if t == alloc[3][0]]) == 10  # the whole cluster
    positions = [pos for _, _, pos in gs.queue_log]
    assert positions == [1, 2]  # sampling, then [1e3, 1e4) s: R = 50 x 100 = 5,000


def run_times(result: SimResult) -> list[float]:
    """Run times of the containers, in the order they started."""
    started = {r["container"]: r["t"] for r in result.records if r["event"] == "container_started"}
    ends = {r["container"]: r["t"] for r in result.records if r["event"] == "container_finished"}
    return [ends[c] - t for c, t in sorted(started.items(), key=lambda kv: kv[1])]


def test_pilots_are_a_seeded_uniform_sample_not_the_lowest_indices() -> None:
    durations = [float(10 + i) for i in range(40)]  # index order would start with 10 s
    wl = workload(1, job("w", durations))
    params = {"estimator": "slearn", "slearn.ratio": 0.05}
    result, _ = simulate(wl, "gs", params)
    assert run_times(result)[0] != 10.0
    assert run_times(simulate(wl, "fifo")[0])[0] == 10.0  # other policies: index order
    again, _ = simulate(wl, "gs", params)
    assert again.records == result.records  # seeded: the same run twice


def test_the_am_task_order_is_a_seeded_uniform_permutation() -> None:
    spec = job("w", [float(i) for i in range(10)])
    firsts = [0] * 10
    for seed in range(2000):
        am = ApplicationMaster(spec, "app", GreedyAsks(), task_order_seed=f"s{seed}")
        order = am.unassigned_durations(0)
        assert sorted(order) == [float(i) for i in range(10)]
        firsts[int(order[0])] += 1
    assert all(130 < n < 270 for n in firsts), firsts  # 200 expected each
    plain = ApplicationMaster(spec, "app", GreedyAsks())
    assert plain.unassigned_durations(0) == [float(i) for i in range(10)]


# ----------------------------------------------------------------------------- G9
def test_g9_normalized_jct_and_adaptive_scores() -> None:
    assert normalized_jct(300, 200) == 1.5
    a = AdaptiveRatio(window=2)
    assert [a.next_percent() for _ in range(6)] == [3, 3, 2, 2, 4, 4]
    assert a.next_percent() == 3  # no score yet
    for pct, score in [(3, 2.0), (2, 1.0), (4, 3.0)]:
        a.score(pct, score)
    assert a.next_percent() == 1  # 2% is best and 1.1 x 1.0 < 2.0
    a.score(2, 10.0)  # 2%'s mean is 5.5 now: 3% is best
    assert a.next_percent() == 3
    a.score(4, 0.1)
    a.score(4, 0.1)  # the window keeps the last two: 4% at 0.1, 3% above 1.1 x that
    assert a.next_percent() == 5
    lit = AdaptiveRatio(window=2, mode="literal")
    for x in (1.0, 2.0, 3.0):
        lit.score(3, x)
    assert list(lit.scores[3]) == [1.0, 2.0, 3.0]  # check-before-append keeps T + 1


def test_g9_slearn_scores_finished_wide_jobs_by_normalized_jct() -> None:
    wl = workload(4, job("w", [50.0] * 4))
    result, gs = simulate(wl, "gs", {"estimator": "slearn"})
    scores = gs.estimator.adaptive.scores[3]
    (score,) = scores
    times = jct(result)
    assert score == pytest.approx(times["w"] / 200.0)


# ----------------------------------------------------------------------------- G10
@pytest.mark.parametrize(("tasks", "at"), [(2, 500.0), (4, 250.0)])
def test_g10_las_demotes_as_attained_service_grows(tasks: int, at: float) -> None:
    # A job of ``tasks`` long tasks; a stream of 1 s tasks keeps decisions coming.
    wl = workload(tasks + 1, job("long", [2000.0] * tasks), job("stream", [1.0] * 700))
    result, las = simulate(wl, "las")
    names = {v: k for k, v in by_name(result).items()}
    moves = [(t, pos) for t, app, pos in las.queue_log if app == names["long"]]
    assert moves[0] == (0.0, 0)
    t, pos = moves[1]
    assert pos == 2
    assert at <= t < at + 3
    assert isinstance(las, LasPolicy)


# ----------------------------------------------------------------------------- G12
def _zeroed_run(wl: Workload, policy: str, params: Mapping[str, Any], hints: bool) -> list[str]:
    """The run's event log as JSON lines; without ``hints`` the RM is told nothing of
    durations by the client or the AMs (zeroed), while the AMs run the real tasks."""
    p = registry.build("policies", policy, params)

    def strategy() -> Any:
        inner = registry.build("asks", "greedy")
        if hints:
            return inner

        class Zeroed(type(inner)):  # type: ignore[misc]
            def asks(self, progress: Any, now: float) -> list[Ask]:
                return [
                    Ask(a.priority, a.resources, a.count, a.kind, 0.0, 0.0, ZERO, a.group)
                    for a in super().asks(progress, now)
                ]

        return Zeroed()

    sim = Simulation(wl, p, strategy, policy_name=policy)
    if not hints:
        submit = sim.rm.submit_application

        def zeroed_submit(sub: Any, now: float) -> str:
            job = sub.job
            stages = tuple(dataclasses.replace(s, durations=(0.0,) * s.tasks) for s in job.stages)
            blind = JobSpec(job.name, job.user, job.submit_s, stages, job.queue)
            return submit(dataclasses.replace(sub, job=blind), now)

        sim.rm.submit_application = zeroed_submit  # type: ignore[method-assign]
    result = sim.run()
    assert result.stalled is None
    return [ev.dumps(r) for r in result.records]


def mixed_workload() -> Workload:
    rng = random.Random(7)
    jobs = []
    for i in range(24):
        width = rng.choice([1, 2, 3, 5, 8, 20])
        mean = rng.choice([5, 50, 200])
        durations = [max(1.0, rng.gauss(mean, mean / 3)) for _ in range(width)]
        jobs.append(job(f"j{i}", durations, submit=i * 7.0, user=f"u{i % 3}"))
    return workload(8, *jobs)


@pytest.mark.parametrize("estimator", ["slearn", "point", "3sigma"])
def test_g12_no_oracle_leakage(estimator: str, tmp_path: Path) -> None:
    wl = mixed_workload()
    params: dict[str, Any] = {"estimator": estimator, "q0_hi_s": 100}  # sizes spread
    if estimator != "slearn":  # a history, and learning online, so sizes vary
        hist = tmp_path / "h.csv"
        hist.write_text("name,user,submit_s,tasks,mean_task_s\nj1,u1,-100,3,40\nx,u2,-50,2,7\n")
        params |= {f"{estimator}.history": str(hist), f"{estimator}.online": True}
    seen = _zeroed_run(wl, "gs", params, hints=True)
    assert _zeroed_run(wl, "gs", params, hints=False) == seen
    _, gs = simulate(wl, "gs", params)
    assert len({pos for _, _, pos in gs.queue_log}) >= 2  # estimates steer the run


def test_g12_the_leakage_check_can_fail() -> None:
    """The oracle's runs differ when it is told nothing: the comparison above sees it."""
    wl, oracle = mixed_workload(), {"estimator": "oracle"}
    assert _zeroed_run(wl, "gs", oracle, hints=False) != _zeroed_run(wl, "gs", oracle, hints=True)


def test_policies_see_zeroed_durations_unless_they_declare_an_oracle() -> None:
    seen: dict[str, Any] = {}

    class Probe(GsPolicy):
        def on_app_added(self, app: Any, cluster: Any) -> None:
            seen[self.params.estimator] = app.job.work_s
            super().on_app_added(app, cluster)

    wl = workload(2, job("a", [5.0, 7.0]))
    for name in ("slearn", "oracle"):
        p = Probe(registry.build("policies", "gs", {"estimator": name}).params)
        Simulation(wl, p, lambda: registry.build("asks", "greedy")).run()
    assert seen == {"slearn": 0.0, "oracle": 12.0}
    assert registry.build("policies", "sjf").uses_oracle()
    assert not registry.build("policies", "fifo").uses_oracle()


# ----------------------------------------------------------------------------- estimators
def test_slearn_estimate_is_the_pilots_mean_times_the_width() -> None:
    wl = workload(1, job("w", [10.0, 20.0, 30.0, 40.0]))
    _, gs = simulate(wl, "gs", {"estimator": "slearn", "slearn.ratio": 0.5})
    # Two pilots run one after the other on the single slot; the job then sits in the
    # top queue (size <= 4 x 40 s).
    assert [pos for _, _, pos in gs.queue_log] == [1, 0]
    assert gs.estimator.jobs == {}  # forgotten once the job ended


def test_history_estimators_pick_the_feature_with_the_least_past_error() -> None:
    hist = [
        HistoryJob("etl", "ann", 0.0, 4, 100.0),
        HistoryJob("etl", "bob", 10.0, 4, 110.0),
        HistoryJob("ml", "ann", 20.0, 4, 5.0),
        HistoryJob("etl", "ann", 30.0, 4, 105.0),
    ]
    est = PointEstimator()
    est.load_history(hist)
    # ``name`` predicted the last etl jobs well (110 -> 100, 105 -> 100); ``user`` badly.
    f = features("etl", "ann", 40.0, 0.0, 0.0)
    predicted = est._predictions(f, 40.0)
    assert predicted[0] == 105.0
    assert predicted[1] == 100.0
    assert est.mean_task_s(predicted, 40.0) == 105.0
    assert lower_median([3.0, 1.0, 2.0, 4.0]) == 2.0
    three = ThreeSigmaEstimator()
    three.load_history(hist)
    assert three.mean_task_s(three._predictions(f, 40.0), 40.0) == pytest.approx(
        utility_point([100.0, 110.0, 105.0])
    )
    assert utility_point([1.0, 1.0]) == 1.0
    assert utility_point([1.0, 3.0]) < 2 / (1 + 1 / 3)


def test_history_estimators_match_jobs_by_their_recurring_name() -> None:
    # swim names a job over an input path ``PATH:jobN``: unique, but PATH recurs.
    est = PointEstimator()
    est.load_history([HistoryJob("in/7:job1", "u1", 0.0, 4, 100.0)])
    f = features("in/7:job9", "u2", 50.0, 1.0, 0.0)
    assert f[0] == recurring_name("in/7:job9") == "in/7"
    assert est._predictions(f, 50.0)[0] == 100.0
    assert recurring_name("plain") == "plain"


def test_history_window_and_empty_history() -> None:
    est = PointEstimator(PointEstimator.Params(window_days=1))
    est.load_history([HistoryJob("a", "u", 0.0, 2, 50.0)])
    f = features("a", "u", 3 * 86400.0, 0.0, 0.0)
    assert est.mean_task_s(est._predictions(f, 3 * 86400.0), 3 * 86400.0) == 0.0
    assert est.mean_task_s(est._predictions(f, 3600.0), 3600.0) == 50.0


def test_read_history_names_the_bad_line(tmp_path: Path) -> None:
    good = tmp_path / "h.csv"
    good.write_text("name,user,submit_s,tasks,mean_task_s,vcores\na,u,1,3,2.5,1\n")
    assert read_history(str(good)) == [HistoryJob("a", "u", 1.0, 3, 2.5, 1.0, 0.0)]
    bad = tmp_path / "b.csv"
    bad.write_text("name,user,submit_s,tasks,mean_task_s\na,u,1,3,2.5\nb,u,2,x,1\n")
    with pytest.raises(InputError, match=r"b\.csv: line 3, tasks: not a number: 'x'"):
        read_history(str(bad))
    (tmp_path / "c.csv").write_text("name,user\n")
    with pytest.raises(InputError, match="missing column"):
        read_history(str(tmp_path / "c.csv"))


def test_oracle_estimator_sizes_by_the_true_durations() -> None:
    _, gs = simulate(workload(2, job("big", [600.0, 600.0])), "gs")
    assert [pos for _, _, pos in gs.queue_log] == [2]  # 1,200 s: [1e3, 1e4)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"estimator": "nosuch"}, "policy 'gs': unknown estimator 'nosuch' (installed: "),
        (
            {"estimator": "slearn", "slearn.ratio": 7},
            "policy 'gs': estimator 'slearn': parameter 'ratio': ",
        ),
        (
            {"estimator": "slearn", "slearn.speed": 1},
            "policy 'gs': estimator 'slearn': parameter 'speed': unknown parameter",
        ),
        ({"point.window_days": 3}, "the estimator is 'oracle', not 'point'"),
        ({"estimator": "point", "point.history": "/nonexistent.csv"}, "/nonexistent.csv"),
    ],
)
def test_bad_estimator_is_one_clear_error(params: dict[str, Any], expected: str) -> None:
    with pytest.raises((PluginError, InputError)) as e:
        registry.build("policies", "gs", params)
    assert expected in str(e.value)
    assert "\n" not in str(e.value)


def test_slearn_params_are_typed() -> None:
    assert SlearnEstimator(SlearnEstimator.Params(ratio=0.05)).adaptive is None
    with pytest.raises(PluginError, match="rounding"):
        registry.build("estimators", "slearn", {"rounding": "up"})


def test_the_queue_log_keeps_the_latest_entries_only(monkeypatch: pytest.MonkeyPatch) -> None:
    wl = workload(4, *(job(f"j{i}", [30, 30, 30], submit=float(i)) for i in range(6)))
    params = {"estimator": "slearn", "slearn.ratio": 0.03, "work_conservation": False}
    _, whole = simulate(wl, "gs", params)
    assert len(whole.queue_log) > 3
    monkeypatch.setattr("rm.policy.toolkit.multiqueue.QUEUE_LOG_ENTRIES", 3)
    _, bounded = simulate(wl, "gs", params)
    assert list(bounded.queue_log) == list(whole.queue_log)[-3:]

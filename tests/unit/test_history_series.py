"""The history estimators' fast series (``point``'s ``MedianSeries``, ``3sigma``'s
``UtilitySeries``) give exactly the floats the straightforward code gave: the old series
(kept below as the reference) sliced the values of the range and applied ``point`` to them
on every query. Random histories, with and without windows, values arriving out of time
order, ties in time. And gs reads its estimator's history once."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

import rm.policy.estimator
from plugins.estimators.point import MedianSeries, PointEstimator, lower_median
from plugins.estimators.threesigma import ThreeSigmaEstimator, UtilitySeries, utility_point
from rm.policy.estimator import HistoryEstimator, HistoryJob, HistorySeries, HistoryStage, features
from treadle import registry
from treadle.importers.tabular import write_history
from treadle.workload import load_workload


class OldSeries:
    """The reference: rm.policy.estimator's ``_Series`` before the fast series, and the
    ``point(values) if values else None`` its callers applied."""

    def __init__(self, point: Callable[[Sequence[float]], float]) -> None:
        self.point_fn = point
        self.times: list[float] = []
        self.values: list[float] = []

    def add(self, t: float, v: float) -> None:
        i = bisect.bisect_right(self.times, t)
        self.times.insert(i, t)
        self.values.insert(i, v)

    def since(self, t0: float | None, t1: float) -> list[float]:
        lo = 0 if t0 is None else bisect.bisect_left(self.times, t0)
        return self.values[lo : bisect.bisect_right(self.times, t1)]

    def point(self, t0: float | None, t1: float) -> float | None:
        values = self.since(t0, t1)
        return self.point_fn(values) if values else None


def same(a: float | None, b: float | None) -> bool:
    """Equal to the bit (``repr`` tells 0.0 from -0.0 and 2 from 2.0)."""
    return repr(a) == repr(b)


# Few distinct times (ties) and values (equal values), runtimes below MIN_DURATION_S too.
times = st.one_of(st.integers(0, 40).map(float), st.floats(0, 40, allow_nan=False))
values = st.one_of(
    st.sampled_from([0.0, 0.0004, 1.0, 2.5, 100.0]),
    st.floats(0.0, 5000.0, allow_nan=False, allow_subnormal=False).map(abs),
)
window = st.one_of(st.none(), st.floats(0.5, 30.0))
# ("add", time, value) or ("ask", now): a query of [now - window, now].
op = st.one_of(
    st.tuples(st.just("add"), times, values),
    st.tuples(st.just("ask"), times, st.just(0.0)),
)


def check_series(
    new: HistorySeries, point: Callable[[Sequence[float]], float], ops: list[Any], w: float | None
) -> None:
    old = OldSeries(point)
    for kind, t, v in ops:
        if kind == "add":
            new.add(t, v)
            old.add(t, v)
        else:
            t0 = None if w is None else t - w
            assert same(new.point(t0, t), old.point(t0, t)), (t0, t, old.since(t0, t))


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(op, max_size=80), w=window)
def test_median_series_equals_the_old_code(ops: list[Any], w: float | None) -> None:
    check_series(MedianSeries(), lower_median, ops, w)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(op, max_size=80), w=window)
def test_utility_series_equals_the_old_code(ops: list[Any], w: float | None) -> None:
    check_series(UtilitySeries(), utility_point, ops, w)


@settings(max_examples=100, deadline=None)
@given(
    arrivals=st.lists(st.tuples(times, values), min_size=1, max_size=300),
    w=window,
    late=st.lists(st.tuples(times, values), max_size=20),
)
def test_series_in_time_order_then_late_values(
    arrivals: list[tuple[float, float]], w: float | None, late: list[tuple[float, float]]
) -> None:
    """The estimators' own pattern: values added in time order, each after the query at
    its time (``load_history``), then late ones (``online``) between further queries."""
    ops: list[Any] = []
    for t, v in sorted(arrivals, key=lambda a: a[0]):
        ops += [("ask", t, 0.0), ("add", t, v)]
    for t, v in late:
        ops += [("ask", 40.0, 0.0), ("add", t, v), ("ask", t, 0.0)]
    check_series(MedianSeries(), lower_median, ops, w)
    check_series(UtilitySeries(), utility_point, ops, w)


def reference(cls: type[HistoryEstimator]) -> type[HistoryEstimator]:
    class Old(cls):  # type: ignore[valid-type, misc]
        def new_series(self) -> Any:
            return OldSeries(self.point)

    return Old


job = st.builds(
    HistoryJob,
    name=st.sampled_from(["etl:1", "etl:2", "ml", "adhoc"]),
    user=st.sampled_from(["ann", "bob"]),
    submit_s=st.floats(0, 3 * 86400, allow_nan=False),
    tasks=st.integers(1, 50),
    mean_task_s=values,
    vcores=st.sampled_from([1.0, 2.0]),
    memory_mb=st.just(1024.0),
    stages=st.lists(
        st.builds(HistoryStage, st.sampled_from(["map", "reduce"]), st.integers(1, 9), values),
        max_size=2,
    ).map(tuple),
)


@settings(max_examples=60, deadline=None)
@given(
    history=st.lists(job, max_size=60),
    window_days=st.one_of(st.none(), st.floats(0.1, 2.0)),
    dag=st.booleans(),
    live=st.lists(st.tuples(job, st.booleans()), max_size=15),
)
def test_estimators_equal_the_old_code(
    history: list[HistoryJob], window_days: float | None, dag: bool, live: list[Any]
) -> None:
    """3sigma and point, plain and dag, with or without a window: every prediction of
    every feature and every stage, while loading the history and for live jobs, some of
    which then finish and are learned (``online``: out of time order)."""
    for cls in (ThreeSigmaEstimator, PointEstimator):
        params = cls.Params(window_days=window_days, dag=dag)
        new, old = cls(params), reference(cls)(params)
        new.load_history(history)
        old.load_history(history)
        for j, finishes in live:
            f = features(j.name, j.user, j.submit_s, j.vcores, j.memory_mb)
            now = j.submit_s
            p_new, p_old = new._predictions(f, now), old._predictions(f, now)
            assert [repr(p) for p in p_new] == [repr(p) for p in p_old]
            assert same(new.mean_task_s(p_new, now), old.mean_task_s(p_old, now))
            assert new.stage_learners.keys() == old.stage_learners.keys()
            for name, learner in new.stage_learners.items():
                other = old.stage_learners[name]
                a = learner.mean_task_s(learner.predictions(f, now), now)
                b = other.mean_task_s(other.predictions(f, now), now)
                assert same(a, b)
            if finishes and not dag:
                new._learn(f, now, p_new, j.mean_task_s)
                old._learn(f, now, p_old, j.mean_task_s)


def test_a_long_in_order_history_keeps_running_sums() -> None:
    """Without a window, 3sigma's sums run from the first value: asking again after each
    new value only extends them (the speed ``bench_history`` measures)."""
    series = UtilitySeries()
    for k in range(1000):
        series.add(float(k), 1.0 + k % 7)
        assert series.point(None, float(k)) == utility_point(series.values)
    assert len(series.prefix) == 1001
    assert math.isclose(series.point(None, 999.0) or 0.0, utility_point(series.values))


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    """A history CSV (the ``dags`` jobs) and the list of paths ``read_history`` read."""
    path = tmp_path / "history.csv"
    write_history(load_workload("dags").jobs, path)
    reads: list[str] = []
    read = rm.policy.estimator.read_history

    def counted(p: str) -> list[HistoryJob]:
        reads.append(p)
        return read(p)

    monkeypatch.setattr(rm.policy.estimator, "read_history", counted)
    return path, reads


@pytest.mark.parametrize(
    ("estimator", "params"),
    [("3sigma", {}), ("point", {}), ("3sigma", {"dag": True}), ("slearn", {"dag": True})],
)
def test_gs_reads_its_history_once(
    history: tuple[Path, list[str]], estimator: str, params: dict[str, Any]
) -> None:
    """Building gs validates its estimator's parameters by building the estimator, and
    the policy keeps that one: the history CSV is read once, not once more to validate."""
    path, reads = history
    dotted = {f"{estimator}.{k}": v for k, v in {**params, "history": str(path)}.items()}
    gs = registry.build("policies", "gs", {"estimator": estimator, **dotted})
    assert reads == [str(path)]
    kept = gs.estimator.history if estimator == "slearn" else gs.estimator
    assert kept.learner.everything.values  # the policy's estimator has the history
    registry.build("policies", "gs", {"estimator": estimator, **dotted})
    assert reads == [str(path)] * 2  # another policy: its own estimator, its own read


def test_a_gs_run_reads_its_history_once(tmp_path: Path, history: tuple[Path, list[str]]) -> None:
    """A whole run (simulation, metrics, the summary's parameters with the estimator's)
    builds the policy once, so the history CSV is read once."""
    from treadle.study.runner import PolicyChoice, RunOptions, run_sim

    path, reads = history
    choice = PolicyChoice("gs", {"estimator": "3sigma", "3sigma.history": str(path)})
    _, run = run_sim(
        load_workload("dags"), choice, tmp_path / "out", options=RunOptions(slowdown=False)
    )
    assert reads == [str(path)]
    estimator = run.summary["parameters"]["estimator"]
    assert estimator["name"] == "3sigma"
    assert estimator["params"]["history"] == str(path)


class CappedOldSeries(OldSeries):
    """The reference of a capped series: the old one over its latest ``cap`` values."""

    def __init__(self, point: Callable[[Sequence[float]], float], cap: int) -> None:
        super().__init__(point)
        self.cap = cap

    def since(self, t0: float | None, t1: float) -> list[float]:
        lo = 0 if t0 is None else bisect.bisect_left(self.times, t0)
        lo = max(lo, len(self.times) - self.cap)
        return self.values[lo : bisect.bisect_right(self.times, t1)]


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(op, max_size=120), w=window, cap=st.integers(1, 12))
def test_a_capped_series_is_its_latest_values(ops: list[Any], w: float | None, cap: int) -> None:
    """``max_history``: a series counts its latest ``cap`` values only (older ones are
    dropped in batches), for the base series and both fast ones."""
    for new, point in (
        (HistorySeries(lower_median), lower_median),
        (MedianSeries(), lower_median),
        (UtilitySeries(), utility_point),
    ):
        new.cap = cap
        old = CappedOldSeries(point, cap)
        for kind, t, v in ops:
            if kind == "add":
                new.add(t, v)
                old.add(t, v)
                assert len(new.values) <= cap + cap // 4 + 1
            else:
                t0 = None if w is None else t - w
                assert same(new.point(t0, t), old.point(t0, t)), (t0, t, cap)

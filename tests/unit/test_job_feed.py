"""Streamed workloads (``Workload.source``, ``treadle.sim.feed``): a run that reads its
jobs as the clock approaches them does exactly what the whole workload's run does, reads
at most the look-ahead ahead of the submissions, and a job the source cannot read ends
the run there, naming the file, the line and the field."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from treadle.errors import WorkloadError
from treadle.events import EventLog
from treadle.model import JobSource, JobSpec, StageSpec, Workload, in_memory
from treadle.registry import build, factory
from treadle.resources import Resources
from treadle.sim import Simulation, feed
from treadle.workload import load_workload
from treadle.workload.columnar_write import write_workload
from treadle.workload.streaming import ColumnarSource, open_columnar

LOOK = 8  # the look-ahead in these tests


class ListSource(JobSource):
    """A workload's jobs read one at a time; notes how far reading ran ahead of the run's
    submissions, and may fail at job ``fail_at``."""

    def __init__(self, jobs: tuple[JobSpec, ...], fail_at: int | None = None) -> None:
        self.source = "list"
        self.all = jobs
        self.jobs = len(jobs)
        self.tasks = sum(j.tasks for j in jobs)
        self.fail_at = fail_at
        self.log: EventLog | None = None
        self.ahead = 0  # the most jobs read and not yet submitted
        self._seen = self._submitted = 0

    def __iter__(self) -> Iterator[JobSpec]:
        for i, job in enumerate(self.all):
            if i == self.fail_at:
                raise WorkloadError("trace.csv", f"line {i + 2}.run_time", "expected a number")
            if self.log is not None:
                records = self.log.records
                self._submitted += sum(r["event"] == "job_submitted" for r in records[self._seen :])
                self._seen = len(records)
                self.ahead = max(self.ahead, i + 1 - self._submitted)
            yield job


def many_jobs(n: int) -> Workload:
    """``demo``'s cluster with ``n`` jobs of two 1 s tasks, three at each second."""
    wl = load_workload("demo")
    stage = StageSpec("s", Resources(vcores=1), (1.0, 1.0))
    base = wl.jobs[0]
    jobs = tuple(JobSpec(f"j{i}", base.user, float(i // 3), (stage,), base.queue) for i in range(n))
    return replace(wl, jobs=jobs)


@pytest.fixture(autouse=True)
def short_look_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feed, "LOOKAHEAD_JOBS", LOOK)


def simulate(wl: Workload, log: EventLog | None = None) -> Simulation:
    return Simulation(
        wl, build("policies", "fair"), factory("asks", "greedy"), policy_name="fair", event_log=log
    )


def streamed(wl: Workload, source: JobSource) -> Workload:
    return replace(wl, jobs=(), source=source)


@pytest.mark.parametrize("name", ["demo", "dags", "tiny"])
def test_a_streamed_run_equals_the_whole_one(name: str) -> None:
    wl = load_workload(name)
    whole = simulate(wl).run()
    again = simulate(streamed(wl, ListSource(wl.jobs))).run()
    assert again.records == whole.records
    assert (again.jobs, again.finished, again.end_s) == (whole.jobs, whole.finished, whole.end_s)
    assert again.source_error is None


def test_reading_stays_within_the_look_ahead() -> None:
    wl = many_jobs(3 * LOOK)
    source = ListSource(wl.jobs)
    log = EventLog()
    source.log = log
    result = simulate(streamed(wl, source), log).run()
    assert result.finished == len(wl.jobs)
    assert 0 < source.ahead <= LOOK + 1
    assert result.records == simulate(wl).run().records


def test_a_job_the_source_cannot_read_ends_the_run_there() -> None:
    wl = many_jobs(3 * LOOK)
    result = simulate(streamed(wl, ListSource(wl.jobs, fail_at=2 * LOOK))).run()
    assert result.source_error is not None
    assert str(result.source_error) == (
        f"trace.csv: line {2 * LOOK + 2}.run_time: expected a number"
    )
    # Every job read before it that the clock reached ran; none after it.
    assert 0 < result.submitted <= 2 * LOOK
    assert result.finished < result.jobs == len(wl.jobs)


def test_jobs_out_of_submission_order_are_refused() -> None:
    wl = many_jobs(10)
    jobs = (*wl.jobs[:5], replace(wl.jobs[5], submit_s=-1.0), *wl.jobs[6:])
    result = simulate(streamed(wl, ListSource(jobs))).run()
    assert result.source_error is not None
    assert "out of submission order" in str(result.source_error)


# The columnar file ------------------------------------------------------------------------


def test_a_columnar_file_in_order_streams_and_reads_back_the_same_jobs(tmp_path: Path) -> None:
    wl = load_workload("demo")
    path = tmp_path / "demo.parquet"
    write_workload(wl, path, "demo", rows=6)
    opened = open_columnar(path, "demo.parquet")
    assert isinstance(opened.source, ColumnarSource)
    assert opened.jobs == ()
    assert (opened.job_count, opened.tasks) == (len(wl.jobs), wl.tasks)
    whole = in_memory(opened)
    assert whole.source is None
    assert [j.name for j in whole.jobs] == [j.name for j in wl.jobs]
    assert simulate(opened).run().records == simulate(wl).run().records


def test_a_columnar_file_out_of_order_or_closed_loop_is_read_whole(tmp_path: Path) -> None:
    wl = load_workload("demo")
    path = tmp_path / "rev.parquet"
    write_workload(replace(wl, jobs=wl.jobs[::-1]), path, "rev")
    assert open_columnar(path).source is None
    budgets = tmp_path / "budgets.parquet"
    write_workload(load_workload("budgets"), budgets, "budgets")  # follows and rates
    assert open_columnar(budgets).source is None
    # --sort writes the reversed one in order again: it streams.
    write_workload(replace(wl, jobs=wl.jobs[::-1]), path, "rev", sort=True)
    assert open_columnar(path).source is not None


def test_a_bad_row_of_a_columnar_file_is_found_when_its_row_group_is_read(
    tmp_path: Path,
) -> None:
    wl = many_jobs(60)
    jobs = list(wl.jobs)
    stage = jobs[54].stages[0]
    jobs[54] = replace(jobs[54], stages=(replace(stage, durations=(-1.0, *stage.durations[1:])),))
    path = tmp_path / "bad.parquet"
    write_workload(replace(wl, jobs=tuple(jobs)), path, "bad", rows=10)
    opened = open_columnar(path, "bad.parquet")  # the header and the order are fine
    assert opened.source is not None
    result = simulate(opened).run()
    assert str(result.source_error) == (
        "bad.parquet: row group 5, job 54.stages[0].durations_s[0]: "
        "must be in (0, 1e+15] seconds, got -1.0"
    )
    with pytest.raises(WorkloadError, match="row group 5, job 54"):
        load_workload(str(path))  # validate reads it whole: the same error, first


@pytest.mark.parametrize("name", ["dags", "demo"])
def test_the_alone_references_of_a_streamed_run_are_the_whole_ones(
    tmp_path: Path, name: str
) -> None:
    from treadle.study.runner import PolicyChoice, RunOptions, run_sim

    wl = load_workload(name)
    options = RunOptions(alone_cache=False, events="jsonl")
    for label, run in (("whole", wl), ("streamed", streamed(wl, ListSource(wl.jobs)))):
        run_sim(run, PolicyChoice("fair", {}), tmp_path / label, options=options)
    for f in ("jobs.csv", "events.jsonl", "summary.json"):
        assert (tmp_path / "streamed" / f).read_bytes() == (tmp_path / "whole" / f).read_bytes()

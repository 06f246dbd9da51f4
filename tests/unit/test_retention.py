"""Bounded retention of ended applications (``rm.core.ended``): at most
``max_completed_applications`` are kept, the first to end dropped first; a dropped one is
unknown, as in YARN; an ended one keeps no job, asks or per-task state; its events stay."""

from __future__ import annotations

import pytest

from plugins.policies.fifo import FifoPolicy
from rm.core.ended import MAX_COMPLETED_APPLICATIONS, EndedApp
from rm.core.facade import ResourceManager
from rm.server.config import parse_rm_config
from treadle import events as ev
from treadle.errors import ConflictError, InputError, NotFoundError
from treadle.messages import AllocateRequest, AppSubmission, Ask, FinalStatus
from treadle.model import JobSpec, StageSpec
from treadle.resources import Resources
from treadle.yarnids import SIM_CLUSTER_TIMESTAMP, format_app_id

SMALL = Resources(vcores=1, memory_mb=1024)


def big_job(tasks: int = 1000) -> JobSpec:
    return JobSpec("big", "alice", 0.0, (StageSpec("map", SMALL, (1.0,) * tasks),))


def submit_and_end(rm: ResourceManager, n: int, start: float = 0.0) -> list[str]:
    """``n`` applications, each submitted then ended (killed, failed or finished in turn)."""
    ids = []
    statuses = (FinalStatus.KILLED, FinalStatus.FAILED, FinalStatus.SUCCEEDED)
    for i in range(n):
        t = start + i
        sub = AppSubmission(f"j{i}", "alice", "default", 1000, job=big_job())
        app_id = rm.submit_application(sub, t)
        rm.finish_application(app_id, statuses[i % 3], t + 0.5, "done with it")
        ids.append(app_id)
    return ids


def test_only_the_newest_ended_applications_are_kept_and_the_dropped_are_unknown() -> None:
    rm = ResourceManager(FifoPolicy(), max_completed_applications=5)
    running = rm.submit_application(AppSubmission("long", "bob", "default", 1), 0.0)
    ids = submit_and_end(rm, 8, start=1.0)
    assert list(rm.state.finished) == ids[3:]  # the first three to end are gone
    assert rm.take_dropped_apps() == ids[:3]
    assert rm.take_dropped_apps() == []
    listed = [a.app_id for a in rm.reports.applications()]
    assert listed == [*ids[3:], running]
    assert rm.reports.cluster().finished_apps == 5
    for gone in ids[:3]:
        with pytest.raises(NotFoundError, match=f"unknown application '{gone}'"):
            rm.reports.application(gone)
        with pytest.raises(NotFoundError):
            rm.finish_application(gone, FinalStatus.KILLED, 20.0)
    # A kept one answers as ended; its report is what it was.
    kept = rm.reports.application(ids[-1])
    assert (kept.state, kept.finish_s, kept.diagnostics) == ("FAILED", 8.5, "done with it")
    with pytest.raises(ConflictError, match="already finished"):
        rm.finish_application(ids[-1], FinalStatus.KILLED, 20.0)
    # Every application's events are still in the event log, dropped ones' too.
    submitted = [r["job"] for r in rm.log.records if r["event"] == ev.JOB_SUBMITTED]
    ended = [r["job"] for r in rm.log.records
             if r["event"] in (ev.JOB_FINISHED, ev.JOB_FAILED)]  # fmt: skip
    assert submitted == [running, *ids]
    assert ended == ids
    # The running application is untouched, and ids go on.
    assert rm.reports.is_running(running)
    assert rm.submit_application(AppSubmission("next", "bob", "default", 1), 30.0) == (
        format_app_id(SIM_CLUSTER_TIMESTAMP, 10)
    )


def test_an_ended_application_keeps_no_job_asks_or_tasks() -> None:
    rm = ResourceManager(FifoPolicy())
    sub = AppSubmission("j", "alice", "default", 1000, job=big_job())
    app_id = rm.submit_application(sub, 0.0)
    rm.register_application_master(app_id, 0.5)
    rm.on_allocate(AllocateRequest(app_id, [Ask(0, SMALL, 1000)], completed_tasks=[(0, 1)]), 1.0)
    rm.finish_application(app_id, FinalStatus.KILLED, 2.0)
    ended = rm.state.finished[app_id]
    assert type(ended) is EndedApp
    assert ended.submission.job is None
    assert (ended.name, ended.user, ended.tasks, ended.attempt) == ("j", "alice", 1000, 1)
    assert ended.done_tasks == ()
    assert not ended.containers
    assert ended.pending == 0
    # What a store writes of it has no job either (the record is the report's).
    (record,) = rm.app_records([app_id])
    assert record.submission.job is None
    assert record.done_tasks == ()
    assert record.to_json()["state"] == "KILLED"


def test_the_default_bound_is_yarns() -> None:
    assert MAX_COMPLETED_APPLICATIONS == 1000
    rm = ResourceManager(FifoPolicy())  # a core without a bound keeps every one
    submit_and_end(rm, 3)
    assert len(rm.state.finished) == 3
    assert rm.take_dropped_apps() == []


def test_zero_keeps_no_ended_application() -> None:
    rm = ResourceManager(FifoPolicy(), max_completed_applications=0)
    ids = submit_and_end(rm, 2)
    assert rm.state.finished == {}
    assert rm.take_dropped_apps() == ids


def test_a_restart_keeps_the_bound_and_hands_out_no_id_twice() -> None:
    rm = ResourceManager(FifoPolicy())
    ids = submit_and_end(rm, 6)
    restarted = ResourceManager(FifoPolicy(), max_completed_applications=4)
    # The store lacks the 7th and 8th submissions, which a previous run handed out.
    restarted.restore(rm.app_records(), 10.0, next_seq=8)
    assert list(restarted.state.finished) == ids[2:]
    assert restarted.take_dropped_apps() == ids[:2]
    assert restarted.submit_application(AppSubmission("n", "bob", "default", 1), 11.0) == (
        format_app_id(SIM_CLUSTER_TIMESTAMP, 9)
    )


def test_the_rm_config_file_sets_the_bound_and_a_bad_one_names_the_field() -> None:
    assert parse_rm_config("heartbeat_s: 1.0\n", "rm.yaml").max_completed_applications == 1000
    config = parse_rm_config("max_completed_applications: 5\n", "rm.yaml")
    assert config.max_completed_applications == 5
    for text in ("max_completed_applications: -1\n", "max_completed_applications: '5'\n"):
        with pytest.raises(InputError) as err:
            parse_rm_config(text, "rm.yaml")
        assert str(err.value).startswith("rm.yaml: max_completed_applications: "), str(err.value)

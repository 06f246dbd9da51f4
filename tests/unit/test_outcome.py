"""What a replay whose RM is lost hands back (treadle.cluster.outcome, issue 26 item 4):
the jobs it has no record of marked, and a message naming the cause."""

from __future__ import annotations

from pathlib import Path

from treadle.cluster.outcome import RmUnreachable, rm_lost, rm_said
from treadle.model import JobSpec, StageSpec
from treadle.resources import Resources

ADDRESS = "127.0.0.1:8032"


def _job(name: str, submit_s: float) -> JobSpec:
    stage = StageSpec("s", Resources({"vcores": 1}), (5.0, 5.0))
    return JobSpec(name, "alice", submit_s, (stage,))


JOBS = [_job("a", 0.0), _job("b", 1.0), _job("c", 2.0), _job("d", 9.0)]
RECORDS = [
    {"event": "run_started", "t": 100.0},
    {"event": "job_submitted", "t": 100.0, "job": "app_1"},
    {"event": "job_submitted", "t": 101.0, "job": "app_2"},
    {"event": "job_finished", "t": 104.0, "job": "app_1", "status": "SUCCEEDED"},
]
SUBMITTED = {"app_1": "a", "app_2": "b", "app_3": "c"}  # c: submitted, not yet fetched
UNREACHABLE = RmUnreachable(f"cannot reach the RM at {ADDRESS}: x (still after 3 s; --rm-absent-s)")


def test_a_lost_rm_marks_what_the_records_miss_and_says_it_was_unreachable() -> None:
    lost = rm_lost(UNREACHABLE, ADDRESS, RECORDS, JOBS, SUBMITTED, rm_log=None)
    assert str(lost) == (
        f"the RM at {ADDRESS} stopped answering ({UNREACHABLE}); 3 of 4 jobs unfinished"
    )
    assert lost.unsubmitted_rows() == [("d", "alice", "default", 109.0, 2)]
    assert lost.unrecorded_rows() == [("c", "alice", "default", 102.0, 2)]


def test_the_rm_s_last_error_line_names_the_cause(tmp_path: Path) -> None:
    log = tmp_path / "rm.log"
    line = "python -m rm: error: cannot write /x/rm-events.jsonl: EFBIG: File too large; ..."
    log.write_text('{"event": "rm_started"}\n' + line + "\n")
    assert rm_said(log) == line
    lost = rm_lost(UNREACHABLE, ADDRESS, RECORDS, JOBS, SUBMITTED, rm_log=log)
    assert str(lost).startswith(f"the RM at {ADDRESS} stopped answering (the RM said: {line});")
    assert rm_said(tmp_path / "absent.log") is None
    log.write_text('{"event": "rm_started"}\n')
    assert rm_said(log) is None

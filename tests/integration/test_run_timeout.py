"""A replay that runs out of time still writes every job's result (issue 16, deliverable 5):
on a real local cluster (``treadle cluster up``), ``treadle run --timeout-s`` shorter than
the workload kills the unfinished applications (KILLED, as YARN's clients do on a
timeout), lists the jobs it never submitted as NOT_SUBMITTED, writes jobs.csv,
summary.json and the event log, and exits 1 with one line saying so.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.faults import DILATION, JOBS, WORKLOAD, cli


def test_a_timed_out_run_writes_every_jobs_status_and_fails(tmp_path: Path) -> None:
    wl = tmp_path / "six.yaml"
    wl.write_text(WORKLOAD)
    cdir = tmp_path / "cluster"
    up = cli(["cluster", "up", "--workload", str(wl), "--policy", "fifo", "--dilation",
              str(DILATION), "--dir", str(cdir), "--no-http"], tmp_path)  # fmt: skip
    assert up.returncode == 0, up.stderr
    out = tmp_path / "out"
    try:
        # Jobs are due over 40 emulated s (10 wall s at dilation 4): 4 s leaves some
        # running and the last two not yet due.
        run = cli(["run", str(wl), "--cluster-dir", str(cdir), "--out", str(out),
                   "--no-slowdown", "--timeout-s", "4", "--events", "jsonl"], tmp_path)  # fmt: skip
    finally:
        down = cli(["cluster", "down", "--dir", str(cdir)], tmp_path)
    assert down.returncode == 0, down.stderr
    assert run.returncode == 1, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("error: replay on ")
    assert "timed out after 4 s" in lines[0]
    assert "killed:" in lines[0]
    assert "2 job(s) not submitted" in lines[0]
    assert lines[0].endswith(f"every job's result written to {out}")
    with (out / "jobs.csv").open() as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    assert sorted(rows) == ["a", "b", "c", "d", "e", "f"]
    assert rows["e"]["status"] == rows["f"]["status"] == "NOT_SUBMITTED"
    assert rows["e"]["job"] == rows["e"]["start_s"] == rows["e"]["finish_s"] == ""
    statuses = {r["status"] for r in rows.values()}
    assert "KILLED" in statuses
    assert statuses <= {"SUCCEEDED", "KILLED", "NOT_SUBMITTED"}  # none left UNFINISHED
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs"] == JOBS
    assert summary["not_submitted"] == 2
    assert summary["killed"] == sum(r["status"] == "KILLED" for r in rows.values())
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    killed = [e for e in events if e["event"] == "job_failed" and e["status"] == "KILLED"]
    assert len(killed) == summary["killed"]
    assert events[-1]["event"] == "run_finished"

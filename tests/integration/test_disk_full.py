"""Disk full no longer wedges the cluster (issue 26, item 4): on a real local cluster
(``treadle cluster up`` with no restart budget, then ``treadle run``; the test reaps the
RM, so it reads its exit status), a file size limit
put on the RM mid-run makes it exit 74 within a second of its first failed write, and
the driver write jobs.csv with the jobs it has no end of marked UNFINISHED, then exit
non-zero with a line naming the cause (the RM's own last line)."""

from __future__ import annotations

import contextlib
import csv
import ctypes
import json
import os
import re
import resource
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.faults import DILATION, JOBS, TREADLE, WORKLOAD, cli, read_events
from treadle.cluster.outcome import EVENTS_EVERY_S
from treadle.cluster.procs import read_state, recorded_processes
from treadle.live.fatal import EX_IOERR

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def _wait_for(what: str, cond: Any, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


@contextlib.contextmanager
def _adopting_orphans() -> Iterator[None]:
    """Make this process the subreaper of the processes orphaned meanwhile: the roles
    ``treadle cluster up`` starts become its children, so that it can read their exit
    status (``os.waitpid``) when they end."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0, os.strerror(ctypes.get_errno())
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def _exit_status(pid: int, timeout_s: float) -> int | None:
    """The exit status of the child ``pid`` once it ends (None: still running)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    return None


def _reap(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def _cluster_up(tmp_path: Path, max_restarts: int) -> tuple[Path, dict[str, Any]]:
    """A local cluster for the six-job workload (tmp_path/six.yaml): its dir, its state."""
    wl = tmp_path / "six.yaml"
    wl.write_text(WORKLOAD)
    cdir = tmp_path / "cluster"
    up = cli(["cluster", "up", "--workload", str(wl), "--policy", "fifo", "--dilation",
              str(DILATION), "--dir", str(cdir), "--no-http", "--max-restarts",
              str(max_restarts)], tmp_path)  # fmt: skip
    assert up.returncode == 0, up.stderr
    state = read_state(cdir)
    assert state is not None
    return cdir, state


def _run(tmp_path: Path, cdir: Path, rm_absent_s: float) -> subprocess.Popen[str]:
    """``treadle run`` of the six jobs on that cluster, into tmp_path/out."""
    return subprocess.Popen(
        [*TREADLE, "run", str(tmp_path / "six.yaml"), "--cluster-dir", str(cdir), "--out",
         str(tmp_path / "out"), "--no-slowdown", "--rm-absent-s", str(rm_absent_s)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_a_file_size_limit_on_the_rm_mid_run_stops_it_and_the_run_reports(
    tmp_path: Path,
) -> None:
    with _adopting_orphans():  # no supervisor (no restart budget): the test reaps the RM
        cdir, state = _cluster_up(tmp_path, max_restarts=0)
    out, events = tmp_path / "out", cdir / "rm-events.jsonl"
    roles = recorded_processes(state)
    rm = next(p for p in roles if p.name == "rm")
    try:
        run = _run(tmp_path, cdir, rm_absent_s=3)
        try:

            def ended() -> set[str]:
                return {r["job"] for r in read_events(events) if r["event"] == "job_finished"}

            _wait_for("a job to finish", ended)
            first = ended()
            time.sleep(EVENTS_EVERY_S + 1.0)  # the driver has fetched its end since
            assert len(ended()) < JOBS, "the run ended before the limit"
            # No file of the RM may grow from now on: its next event record fails (the
            # log, smaller, keeps room for the RM's last line).
            log_size, events_size = Path(rm.log).stat().st_size, events.stat().st_size
            assert log_size + 4096 < events_size
            resource.prlimit(rm.pid, resource.RLIMIT_FSIZE, (events_size, events_size))
            limited = time.time()
            code = _exit_status(rm.pid, timeout_s=10)
            exited = time.time()
            _, stderr = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()
    finally:
        cli(["cluster", "down", "--dir", str(cdir)], tmp_path)
        _reap([p.pid for p in roles])
    # The RM: its first failed write, then its exit within a second, status 74.
    rm_log = Path(rm.log).read_text(errors="replace")
    failed = [r for r in _json_lines(Path(rm.log)) if r.get("event") == "rm_write_failed"]
    assert len(failed) == 1, rm_log[-3000:]
    assert limited <= failed[0]["at"] < exited
    assert exited - failed[0]["at"] < 1.0, f"the RM exited {exited - failed[0]['at']:.2f} s on"
    # Whichever write came first: the event log's (EFBIG) or the store's (SQLite's I/O
    # error); the line names the file.
    said = [line for line in rm_log.splitlines() if line.startswith("python -m rm: error:")]
    assert len(said) == 1, rm_log[-3000:]
    last = said[0]
    store = cdir / "rm-state" / "rm-state.sqlite"
    assert re.fullmatch(
        f"python -m rm: error: cannot write ({re.escape(str(events))}: EFBIG: File too large"
        f"|{re.escape(str(store))}: EIO: disk I/O error \\(SQLite\\)); stopping \\(exit 74\\) "
        "so that its supervisor or operator acts",
        last,
    ), last
    assert code == EX_IOERR, rm_log[-3000:]
    # The driver: every job's result, the unfinished marked; non-zero, naming the cause.
    with (out / "jobs.csv").open() as f:
        statuses = {r["name"]: r["status"] for r in csv.DictReader(f)}
    assert len(statuses) == JOBS, statuses
    unfinished = [n for n, s in statuses.items() if s in ("UNFINISHED", "NOT_SUBMITTED")]
    assert unfinished, statuses
    # Each job ended before the driver's last fetch of the RM's events is there.
    assert list(statuses.values()).count("SUCCEEDED") >= len(first), statuses
    assert set(statuses.values()) <= {"SUCCEEDED", "UNFINISHED", "NOT_SUBMITTED"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs"] == JOBS
    assert summary["finished"] == JOBS - len(unfinished)
    assert run.returncode == 1, stderr
    message = stderr.strip().splitlines()[-1]
    assert message.startswith(f"error: the RM at {state['rm']} stopped answering (the RM said: ")
    assert last in message
    assert f"); {len(unfinished)} of {JOBS} jobs unfinished; " in message
    assert message.endswith(f"every job's result written to {out}")
    print(
        f"fsize limit: the RM exited {code} {exited - failed[0]['at']:.3f} s after its first "
        f"failed write; jobs.csv: {statuses}; the driver: {message}"
    )


def test_with_a_restart_budget_the_supervisor_restarts_the_rm_and_the_run_finishes(
    tmp_path: Path,
) -> None:
    """The RM's exit is what lets its supervisor act: restarted (without the limit, which
    was its process's alone) from its store, it serves the run to its end."""
    cdir, state = _cluster_up(tmp_path, max_restarts=1)
    out, events = tmp_path / "out", cdir / "rm-events.jsonl"
    rm = next(p for p in recorded_processes(state) if p.name == "rm")
    try:
        driver = _run(tmp_path, cdir, rm_absent_s=60)
        try:
            _wait_for(
                "a job to finish",
                lambda: any(r["event"] == "job_finished" for r in read_events(events)),
            )
            size = events.stat().st_size
            resource.prlimit(rm.pid, resource.RLIMIT_FSIZE, (size, size))
            _, stderr = driver.communicate(timeout=120)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.communicate()
    finally:
        cli(["cluster", "down", "--dir", str(cdir)], tmp_path)
    supervised = _json_lines(cdir / "supervisor.log")
    restarts = [r for r in supervised if r["event"] == "role_restarted"]
    assert [r["role"] for r in restarts] == ["rm"]  # (not its parent: no exit status)
    assert f"stopping (exit {EX_IOERR}) so that its supervisor" in Path(rm.log).read_text()
    assert driver.returncode == 0, stderr
    with (out / "jobs.csv").open() as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["SUCCEEDED"] * JOBS

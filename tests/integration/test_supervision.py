"""Fault injection under supervision (issue 16): kill -9 of the RM, of an NM host and of the
AM host in the middle of a run; the cluster's supervisor (treadle.cluster.supervisor)
starts the role again, not the test, and every job finishes.

Real processes throughout: ``treadle cluster up`` (its supervisor process) with ``treadle
run`` for the RM; a ``LocalCluster`` watched by its ``guard`` for an NM host;
``treadle compare --mode local`` for the AM host. Each test prints its figures: how long
the recovery took and how many tasks ran again.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.faults import (
    DILATION,
    JOBS,
    TASKS,
    TREADLE,
    WORKLOAD,
    busy,
    cli as _cli,
    count as _count,
    host_nodes,
    mid_run as _mid_run,
    read_events as _events,
    tasks_rerun,
)
from treadle import events as ev
from treadle.cluster.driver import replay
from treadle.cluster.local import LocalCluster
from treadle.cluster.procs import read_state, recorded_processes
from treadle.errors import TreadleError
from treadle.workload import parse_workload


def _wait_for(what: str, cond: Callable[[], Any], timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = cond()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _pid_of(cdir: Path, role: str) -> int:
    state = read_state(cdir)
    assert state is not None
    return next(p.pid for p in recorded_processes(state) if p.name == role)


def _check_counts(records: list[dict[str, Any]]) -> int:
    """Every job submitted once and finished, none failed, every task done; returns how
    many task containers ran beyond one per task (the tasks run again)."""
    assert _count(records, ev.JOB_SUBMITTED) == JOBS
    assert _count(records, ev.JOB_FINISHED) == JOBS
    assert _count(records, ev.JOB_FAILED) == 0
    ok = [r for r in records if r["event"] == ev.CONTAINER_FINISHED and r["state"] == "COMPLETE"]
    assert len({r["container"] for r in ok if r["exit_status"] == 0}) >= TASKS
    return tasks_rerun(records)


def test_the_rm_killed_mid_run_is_restarted_by_the_supervisor(tmp_path: Path) -> None:
    wl = tmp_path / "six.yaml"
    wl.write_text(WORKLOAD)
    cdir = tmp_path / "cluster"
    events = cdir / "rm-events.jsonl"
    up = _cli(["cluster", "up", "--workload", str(wl), "--policy", "fifo", "--dilation",
               str(DILATION), "--dir", str(cdir)], tmp_path)  # fmt: skip
    assert up.returncode == 0, up.stderr
    address = up.stdout.strip()
    out = tmp_path / "out"
    run: subprocess.Popen[str] | None = None
    try:
        old = _pid_of(cdir, "rm")
        run = subprocess.Popen(
            [*TREADLE, "run", str(wl), "--rm", address, "--cluster-dir", str(cdir),
             "--out", str(out), "--no-slowdown", "--rm-absent-s", "60"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        _wait_for("the run to be under way", _mid_run(events))
        os.killpg(old, signal.SIGKILL)
        killed = time.monotonic()
        new = _wait_for("the supervisor to restart the RM",
                        lambda: (p := _pid_of(cdir, "rm")) != old and p)  # fmt: skip
        restarted = time.monotonic()
        nodes_before = _count(_events(events), ev.NODE_REGISTERED)
        _wait_for("the NMs to register again",
                  lambda: _count(_events(events), ev.NODE_REGISTERED) > nodes_before)  # fmt: skip
        back = time.monotonic()
        _stdout, stderr = run.communicate(timeout=60)
        assert run.returncode == 0, stderr
        status = _cli(["cluster", "status", "--dir", str(cdir), "--json"], tmp_path)
        assert status.returncode == 0, status.stderr
        shown = json.loads(status.stdout)
        assert shown["roles"]["rm"] == {"pid": new, "alive": True, "restarts": 1}
        assert shown["roles"]["nm-1"]["restarts"] == 0
        assert shown["supervisor"]["alive"]
    finally:
        if run is not None and run.poll() is None:
            run.kill()
            run.communicate()
        down = _cli(["cluster", "down", "--dir", str(cdir)], tmp_path)
    assert down.returncode == 0, down.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["jobs"], summary["finished"]) == (JOBS, JOBS)
    rerun = _check_counts(_events(events))
    assert "role_restarted" in (cdir / "supervisor.log").read_text()
    print(
        f"RM kill -9: restarted by the supervisor {restarted - killed:.2f} s after the kill, "
        f"NMs registered again {back - killed:.2f} s after it; {rerun} tasks re-run"
    )


def test_an_nm_host_killed_mid_run_is_restarted_with_its_nodes(tmp_path: Path) -> None:
    wl = parse_workload(WORKLOAD, "six")
    cluster = LocalCluster(wl, "fifo", workdir=tmp_path / "cluster", dilation=DILATION,
                           nm_processes=2)  # fmt: skip
    events = cluster.events_path
    figures: dict[str, float] = {}

    async def scenario() -> list[ev.Record]:
        await cluster.start()
        run = asyncio.ensure_future(replay(cluster.rm_address, wl, timeout_s=50, mode="local"))
        # Killed while its node runs containers: an idle node's new incarnation leaves no
        # trace in the event log to wait for.
        nodes = host_nodes(cluster.workdir, 2)
        while not (_mid_run(events)() and busy(events, nodes)):
            await asyncio.sleep(0.05)
        registered = _count(_events(events), ev.NODE_REGISTERED)
        os.killpg(cluster.processes["nm-2"].pid, signal.SIGKILL)
        killed = time.monotonic()

        def back() -> bool:
            # Its new incarnation registered: the old one's containers ended lost (or, had
            # the RM expired the node first, the node registered anew).
            records = _events(events)
            lost = any(r["event"] == ev.CONTAINER_FINISHED and r["state"] == "LOST"
                       for r in records)  # fmt: skip
            return lost or _count(records, ev.NODE_REGISTERED) > registered

        async def watch() -> None:
            while not back():
                await asyncio.sleep(0.05)
            figures["back_s"] = time.monotonic() - killed

        watcher = asyncio.ensure_future(watch())
        records = await cluster.guard(run)
        await watcher
        return records

    try:
        records = asyncio.run(asyncio.wait_for(scenario(), 60))
    finally:
        cluster.stop()
    assert cluster.restart_counts() == {"nm-2": 1}
    rerun = _check_counts(records)
    lost = [r for r in records if r["event"] == ev.CONTAINER_FINISHED and r["state"] == "LOST"]
    assert lost  # the old incarnation's containers ended lost...
    assert rerun >= len(lost)  # ...and their tasks ran again
    assert cluster.lag_stats()["nm-2"]["restarts"] == 1
    print(
        f"NM host kill -9: its node registered again {figures['back_s']:.2f} s after the kill "
        f"(restarted by the cluster's guard); {len(lost)} containers lost, {rerun} tasks re-run"
    )


def test_the_am_host_killed_mid_run_in_a_comparison_comes_back(tmp_path: Path) -> None:
    wl = tmp_path / "six.yaml"
    wl.write_text(WORKLOAD)
    out = tmp_path / "out"
    cdir = out / "fifo" / "cluster"
    events = cdir / "rm-events.jsonl"
    cmp = subprocess.Popen(
        [*TREADLE, "compare", str(wl), "--mode", "local", "--policies", "fifo", "--out",
         str(out), "--dilation", str(DILATION), "--no-slowdown", "--timeout-s", "50"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_for("the run to be under way", _mid_run(events), 40)
        old = _pid_of(cdir, "am")
        os.killpg(old, signal.SIGKILL)
        killed = time.monotonic()
        attempts = lambda: sum(  # noqa: E731
            1 for r in _events(events) if r["event"] == ev.ATTEMPT_STARTED and r["attempt"] == 2
        )
        _wait_for("a second AM attempt", attempts, 40)
        back = time.monotonic()
        _stdout, stderr = cmp.communicate(timeout=60)
        assert cmp.returncode == 0, stderr
    finally:
        if cmp.poll() is None:
            cmp.kill()
            cmp.communicate()
    records = _events(events)
    rerun = _check_counts(records)
    summary = json.loads((out / "fifo" / "summary.json").read_text())
    assert (summary["jobs"], summary["finished"]) == (JOBS, JOBS)
    timers = json.loads((out / "fifo" / "timers.json").read_text())
    assert timers["processes"]["am"]["restarts"] == 1
    second = sum(1 for r in records if r["event"] == ev.ATTEMPT_STARTED and r["attempt"] == 2)
    print(
        f"AM host kill -9: first new attempt {back - killed:.2f} s after the kill (the RM "
        f"expires the old ones: 5 wall s); {second} AMs came back as attempt 2, "
        f"{rerun} tasks re-run"
    )


def test_an_am_host_death_uses_up_an_attempt_as_yarn_counts_an_am_death(tmp_path: Path) -> None:
    """YARN counts an attempt whose AM died or expired (only an AM container ABORTED,
    PREEMPTED, DISKS_FAILED or KILLED_BY_RESOURCEMANAGER is exempt: node loss, YARN-614),
    and the supervisor restarting the AM host does not change that: with one attempt
    allowed, the jobs whose AMs ran on the killed host fail; those without an AM yet get
    their first attempt from the new host and finish."""
    wl = parse_workload(WORKLOAD, "six")
    cluster = LocalCluster(wl, "fifo", workdir=tmp_path / "cluster", dilation=DILATION,
                           max_am_attempts=1)  # fmt: skip
    events = cluster.events_path
    running: set[str] = set()

    async def scenario() -> list[ev.Record]:
        await cluster.start()
        run = asyncio.ensure_future(replay(cluster.rm_address, wl, timeout_s=50, mode="local"))
        while not _mid_run(events)():
            await asyncio.sleep(0.05)
        os.killpg(cluster.processes["am"].pid, signal.SIGKILL)
        await asyncio.sleep(0.5)  # calls in flight at the kill reach the RM's log
        records = _events(events)
        ended = {r["job"] for r in records if r["event"] in (ev.JOB_FINISHED, ev.JOB_FAILED)}
        running.update(r["job"] for r in records if r["event"] == ev.ATTEMPT_STARTED)
        running.difference_update(ended)
        return await cluster.guard(run)

    try:
        records = asyncio.run(asyncio.wait_for(scenario(), 60))
    finally:
        cluster.stop()
    assert cluster.restart_counts() == {"am": 1}
    failed = {r["job"]: r for r in records if r["event"] == ev.JOB_FAILED}
    # Each job whose attempt was on the dead host: failed (or it had just finished).
    finished = {r["job"] for r in records if r["event"] == ev.JOB_FINISHED}
    assert failed
    assert set(failed) <= running
    assert running <= set(failed) | finished
    for r in failed.values():
        assert r["diagnostics"].startswith("attempt 1 failed: AM missed Allocate calls")
    assert len(failed) + len(finished) == JOBS
    later = [r for r in records if r["event"] == ev.JOB_SUBMITTED and r["job"] not in running]
    assert later  # jobs with no AM at the kill...
    assert all(r["job"] in finished for r in later)  # ...finish under the new host


def test_a_role_dying_beyond_its_restart_budget_fails_the_cluster(tmp_path: Path) -> None:
    wl = parse_workload(WORKLOAD, "six")
    cluster = LocalCluster(wl, "fifo", workdir=tmp_path / "cluster", dilation=DILATION,
                           max_restarts=1)  # fmt: skip

    async def scenario() -> None:
        await cluster.start()

        async def kill_twice() -> None:
            for _ in range(2):
                pid = cluster.processes["am"].pid
                os.killpg(pid, signal.SIGKILL)
                while cluster.processes["am"].pid == pid:
                    await asyncio.sleep(0.05)
            await asyncio.sleep(30)

        await cluster.guard(kill_twice())

    try:
        with pytest.raises(TreadleError, match=r"am died again beyond its restart budget "
                           r"\(1 restarts per 60 s\): the cluster has failed"):  # fmt: skip
            asyncio.run(asyncio.wait_for(scenario(), 40))
    finally:
        cluster.stop()
    assert cluster.restart_counts() == {"am": 1}


def test_a_detached_cluster_beyond_its_budget_is_declared_failed(tmp_path: Path) -> None:
    """``cluster up``'s supervisor: the AM host killed twice with a budget of one restart;
    the cluster is declared failed (status says why), its other roles are stopped, and
    ``cluster down`` clears it."""
    cdir = tmp_path / "cluster"
    up = _cli(["cluster", "up", "--nodes", "1", "--policy", "fifo", "--dir", str(cdir),
               "--max-restarts", "1", "--no-http"], tmp_path)  # fmt: skip
    assert up.returncode == 0, up.stderr
    try:
        first = _pid_of(cdir, "am")
        os.killpg(first, signal.SIGKILL)
        second = _wait_for(
            "the AM host's restart", lambda: (p := _pid_of(cdir, "am")) != first and p
        )
        os.killpg(second, signal.SIGKILL)
        _wait_for("the cluster to fail", lambda: (read_state(cdir) or {}).get("failed"))
        status = _cli(["cluster", "status", "--dir", str(cdir)], tmp_path)
        assert "FAILED: am died again beyond its restart budget" in status.stdout

        def all_stopped() -> dict[str, Any] | None:
            res = _cli(["cluster", "status", "--dir", str(cdir), "--json"], tmp_path)
            shown: dict[str, Any] = json.loads(res.stdout)
            alive = [r for r in shown["roles"].values() if r["alive"]]
            return None if alive or shown["supervisor"]["alive"] else shown

        shown = _wait_for("the supervisor and the other roles to stop", all_stopped)
        assert shown["roles"]["am"]["restarts"] == 1
        assert shown["failed"].startswith(
            "am died again beyond its restart budget (1 restarts per 60 s): the cluster has failed"
        )
    finally:
        down = _cli(["cluster", "down", "--dir", str(cdir)], tmp_path)
    assert down.returncode == 0, down.stderr
    assert not (cdir / "cluster.json").exists()


DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _command(service: dict[str, Any]) -> str:
    cmd = service["command"]
    return " ".join(cmd) if isinstance(cmd, list) else str(cmd)


def test_the_deployments_restart_the_roles_but_not_the_driver() -> None:
    """Static check of deploy/compose.yaml and deploy/stack.yaml: the RM (with its state
    store), the NM hosts (with their node tokens) and the AM host restart; the driver,
    whose exit ends the run, does not."""
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    stack = yaml.safe_load((DEPLOY / "stack.yaml").read_text())["services"]
    for role in ("rm", "nm", "am"):
        assert compose[role]["restart"] == "unless-stopped", role
        policy = stack[role]["deploy"]["restart_policy"]
        assert policy["condition"] == "on-failure", role
        assert policy["max_attempts"] >= 1, role
    assert "restart" not in compose["driver"]
    assert stack["driver"]["deploy"]["restart_policy"] == {"condition": "none"}
    for services in (compose, stack):
        assert "--state-dir" in _command(services["rm"])
        assert "--work-dir" in _command(services["nm"])
    # A stack's restarted task is a new container: what it reloads is on a volume, under
    # the service's id (a new deployment starts afresh).
    assert "SERVICE_ID" in _command(stack["rm"])
    assert any(v.endswith(":/state") for v in stack["rm"]["volumes"])
    assert any(v.endswith(":/work") for v in stack["nm"]["volumes"])

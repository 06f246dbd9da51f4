"""Supervision of a local cluster's role processes: a role that dies is started again.

Rules (the same for ``compare --mode local`` and ``treadle cluster up``):

- a role process that exits (or is killed) while the cluster runs is started again with
  its own command line: the RM on the address it had (and its HTTP port), from its state
  store, so that the NMs, the AM host and the driver reconnect to it; an NM host with its
  ``--work-dir``, whose node tokens let it register its nodes again (the RM ends the old
  incarnation's containers as lost); the AM host, whose AMs the RM expires and gives new
  attempts that skip the tasks done;
- each role may be restarted ``max_restarts`` times within any ``window_s`` wall seconds
  (``RestartBudget``); one more death within the window and the cluster is declared
  failed, with the role, the budget and the end of its log;
- restarts are counted per role: ``ProcessInfo.restarts`` in cluster.json, ``treadle
  cluster status --json`` and, for a comparison, timers.json.

A ``LocalCluster`` run in the driver's process (``compare --mode local``) supervises its
roles itself, from its ``guard``. A detached cluster (``treadle cluster up``), whose command
returns, is watched by a small process of its own, ``python -m treadle.cluster.supervisor
--dir WORKDIR``, started detached once the cluster is ready; it records itself in
cluster.json (``supervisor``), writes the roles' new pids and restart counts there and
its log to ``supervisor.log``; ``treadle cluster down`` stops it first. Beyond the budget
it records ``failed`` (the reason) in cluster.json, stops the other roles and exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from treadle.cluster.procs import (
    PRIVATE_UMASK,
    ProcessInfo,
    log_tail,
    pid_alive,
    read_state,
    recorded_processes,
    start_time,
    terminate,
    write_state,
)

DEFAULT_MAX_RESTARTS = 3
DEFAULT_WINDOW_S = 60.0
POLL_S = 0.2
SUPERVISOR = "supervisor"
LOG = "supervisor.log"


@dataclass
class RestartBudget:
    """At most ``max_restarts`` restarts of each role within any ``window_s`` wall seconds."""

    max_restarts: int = DEFAULT_MAX_RESTARTS
    window_s: float = DEFAULT_WINDOW_S
    _times: dict[str, deque[float]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {self.max_restarts}")
        if not self.window_s > 0:
            raise ValueError(f"window_s must be > 0, got {self.window_s}")

    def spend(self, name: str, now: float) -> bool:
        """Count a restart of ``name`` at ``now``; False (nothing counted) beyond the budget."""
        times = self._times.setdefault(name, deque())
        while times and now - times[0] > self.window_s:
            times.popleft()
        if len(times) >= self.max_restarts:
            return False
        times.append(now)
        return True

    def __str__(self) -> str:
        return f"{self.max_restarts} restarts per {self.window_s:g} s"


def exhausted(name: str, budget: RestartBudget, log: str) -> str:
    """The message of a cluster declared failed: ``name`` died once more than ``budget``."""
    tail = log_tail(log)
    detail = f"; last lines of {log}:\n{tail}" if tail else f"; see {log}"
    return f"{name} died again beyond its restart budget ({budget}): the cluster has failed{detail}"


def _replace(argv: list[str], flag: str, value: str) -> None:
    if flag in argv[:-1]:
        argv[argv.index(flag) + 1] = value


def restart_argv(info: ProcessInfo, rm_address: str, http_url: str | None) -> list[str]:
    """``info``'s command line for a restart: the RM listens on the address it had (it was
    told port 0) and serves HTTP on the port it had; the others run as they were."""
    argv = list(info.argv)
    if info.name == "rm":
        _replace(argv, "--listen", rm_address)
        port = (http_url or "").rstrip("/").rpartition(":")[2]
        if port.isdigit():
            _replace(argv, "--http-port", port)
    return argv


def spawn(
    name: str, argv: list[str], log: Path, *, append: bool = False
) -> subprocess.Popen[bytes]:
    """Start a role process leading a session of its own (swept on stop; outlives a
    detached CLI), its output to ``log`` (appended to, for a restart)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(log, flags, 0o600)
    os.fchmod(fd, 0o600)  # a log an older version left open to others: private from now on
    with os.fdopen(fd, "wb") as logf:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            close_fds=True,
            umask=PRIVATE_UMASK,  # its files (store, event log, ports) are its own
        )


def info_of(name: str, popen: subprocess.Popen[bytes], argv: list[str], log: Path,
            restarts: int = 0) -> ProcessInfo:  # fmt: skip
    return ProcessInfo(name, popen.pid, argv, str(log), start_time(popen.pid), restarts)


# ---------------------------------------------------------------------- the detached one
def _say(event: str, **fields: Any) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    print(json.dumps({"event": event, "timestamp": stamp, **fields}), flush=True)


def start_detached(workdir: Path, budget: RestartBudget, timeout_s: float = 10.0) -> ProcessInfo:
    """Start the supervisor of the detached cluster recorded in ``workdir`` and wait until
    it has recorded itself in cluster.json."""
    argv = [
        sys.executable, "-m", "treadle.cluster.supervisor", "--dir", str(workdir),
        "--max-restarts", str(budget.max_restarts), "--window-s", repr(budget.window_s),
    ]  # fmt: skip
    log = workdir / LOG
    popen = spawn(SUPERVISOR, argv, log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = read_state(workdir) or {}
        if (state.get(SUPERVISOR) or {}).get("pid") == popen.pid:
            return info_of(SUPERVISOR, popen, argv, log)
        if popen.poll() is not None:
            break
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        popen.kill()
    from treadle.errors import TreadleError

    raise TreadleError(f"local cluster: the supervisor did not start; last lines of {log}:\n"
                       f"{log_tail(log)}")  # fmt: skip


class _Watch:
    """The supervisor process's loop over the roles recorded in cluster.json."""

    def __init__(self, workdir: Path, budget: RestartBudget) -> None:
        self.workdir = workdir
        self.budget = budget
        self.children: dict[str, subprocess.Popen[bytes]] = {}  # those it started: reaped
        self.stopping = False

    def run(self) -> int:
        state = read_state(self.workdir)
        if state is None:
            _say("no_cluster", dir=str(self.workdir))
            return 1
        me = ProcessInfo(SUPERVISOR, os.getpid(), sys.argv, str(self.workdir / LOG),
                         start_time(os.getpid()))  # fmt: skip
        state = dict(state, supervisor=asdict(me), budget=str(self.budget), failed=None)
        write_state(self.workdir, state)
        _say("supervisor_started", dir=str(self.workdir), budget=str(self.budget))
        while not self.stopping:
            time.sleep(POLL_S)
            if self.stopping:
                break
            state = self.tick(state)
            if state.get("failed"):
                return 1
        _say("supervisor_stopped")
        return 0

    def tick(self, state: dict[str, Any]) -> dict[str, Any]:
        procs = recorded_processes(state)
        changed = False
        for i, p in enumerate(procs):
            child = self.children.get(p.name)
            code = child.poll() if child is not None else None
            if (child is not None and code is None) or (
                child is None and pid_alive(p.pid, p.started)
            ):
                continue
            if self.stopping:
                break
            if not self.budget.spend(p.name, time.monotonic()):
                why = exhausted(p.name, self.budget, p.log)
                _say("cluster_failed", role=p.name, reason=why.splitlines()[0])
                terminate([q for q in procs if q.name != p.name])
                return self.record(state, procs, failed=why)
            argv = restart_argv(p, str(state.get("rm") or ""), state.get("http"))
            popen = spawn(p.name, argv, Path(p.log), append=True)
            self.children[p.name] = popen
            procs[i] = info_of(p.name, popen, p.argv, Path(p.log), p.restarts + 1)
            _say("role_restarted", role=p.name, old_pid=p.pid, exit_status=code,
                 pid=popen.pid, restarts=p.restarts + 1)  # fmt: skip
            changed = True
        return self.record(state, procs) if changed else state

    def record(self, state: Mapping[str, Any], procs: list[ProcessInfo], failed: str | None = None
               ) -> dict[str, Any]:  # fmt: skip
        new = dict(state, processes=[asdict(p) for p in procs])
        if failed:
            new["failed"] = failed
        write_state(self.workdir, new)
        return new


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m treadle.cluster.supervisor",
        description="Restart the role processes of the local cluster recorded in --dir.",
    )
    p.add_argument("--dir", required=True, type=Path, help="the cluster's directory")
    p.add_argument("--max-restarts", type=int, default=DEFAULT_MAX_RESTARTS)
    p.add_argument("--window-s", type=float, default=DEFAULT_WINDOW_S)
    args = p.parse_args(argv)
    try:
        budget = RestartBudget(args.max_restarts, args.window_s)
    except ValueError as e:
        p.error(str(e))
    watch = _Watch(args.dir, budget)

    def on_term(signum: int, frame: object) -> None:
        watch.stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    return watch.run()


if __name__ == "__main__":
    sys.exit(main())

"""Local clusters as real OS processes: one RM, NM host processes and the unmanaged-AM host.

``LocalCluster`` starts ``python -m rm`` on port 0 (it publishes its address in a port
file) with its configuration file (the workload's queues, users and heartbeat), waits for
its health check, starts the NM host processes with ``--nodes-json`` files listing exactly
the workload's nodes, waits until the RM counts them all, then starts the AM host
(``python -m am --rm ADDR``) unless AMs are managed (launched by the NMs in AM
containers). Every process writes its log to the work directory and the RM streams its
event log to ``rm-events.jsonl`` there; ``cluster.json`` records pids and addresses.

Once ready, the roles are supervised (treadle.cluster.supervisor): one that dies is started
again within a restart budget, by the cluster itself while its ``guard`` watches a run, or,
for a detached cluster, by a supervisor process of its own.

Each process leads a session (and process group) of its own, so that ``stop()`` can sweep
what a process left behind (an NM's AM processes) and so that a detached cluster
(``treadle cluster up``) outlives the command that started it. ``stop()`` sends SIGTERM,
waits a grace period, then SIGKILLs.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from treadle.cluster.base import ClusterBase
from treadle.cluster.commands import nodes_json
from treadle.cluster.procs import (
    STATE_FILE,
    ProcessInfo,
    live_processes,
    log_tail,
    read_state,
    signal_group,
    write_private,
    write_state,
)
from treadle.cluster.secrets import ClusterSecrets
from treadle.cluster.supervisor import (
    DEFAULT_MAX_RESTARTS,
    DEFAULT_WINDOW_S,
    RestartBudget,
    exhausted,
    info_of,
    restart_argv,
    spawn,
    start_detached,
)
from treadle.errors import TreadleError
from treadle.model import NodeSpec

RM_EVENTS = "rm-events.jsonl"
RM_CONFIG = "rm-config.yaml"
RM_STATE = "rm-state"  # the RM's state store (python -m rm --state-dir)


@dataclass
class _Running:
    info: ProcessInfo
    popen: subprocess.Popen[bytes]


@functools.cache
def am_account(python: str) -> str | None:
    """``--run-as`` for this machine's NM hosts: None (their default: nobody when root)
    unless this process is root and nobody cannot run ``python`` with treadle (installed
    under a private home, as in a root-only container): then root, said once on stderr,
    since a managed AM that cannot start fails every job."""
    if os.geteuid() != 0:
        return None
    try:
        probe = subprocess.run(
            [python, "-c", "import am.server.main"],
            user="nobody", cwd="/", capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    except (OSError, KeyError, subprocess.SubprocessError) as e:
        reason = str(e)
    else:
        if probe.returncode == 0:
            return None
        reason = (probe.stderr.strip().splitlines() or ["exit status " + str(probe.returncode)])[-1]
    print(
        f"treadle: warning: AM containers run as root: the account nobody cannot run "
        f"{python} with treadle ({reason})",
        file=sys.stderr,
    )
    return "root"


def _read_text(path: Path) -> str | None:
    with contextlib.suppress(OSError):
        return path.read_text().strip() or None
    return None


@dataclass
class LocalCluster(ClusterBase):
    """An RM, ``nm_processes`` NM host processes and (unmanaged AMs) an AM host, started
    on this machine; ``detached`` ones outlive this interpreter (treadle cluster up)."""

    nm_processes: int = 1
    detached: bool = False
    #: The RM keeps its state in WORKDIR/rm-state (fresh for every start), so that the RM
    #: process, killed and started again with its recorded command line on its address,
    #: goes on with the run (docs/emulation.md: RM restart).
    rm_state: bool = True
    #: Restart a role that dies once the cluster is ready (treadle.cluster.supervisor),
    #: each at most ``max_restarts`` times within ``restart_window_s`` wall seconds.
    supervise: bool = True
    max_restarts: int = DEFAULT_MAX_RESTARTS
    restart_window_s: float = DEFAULT_WINDOW_S
    python: str = sys.executable
    #: Where the RM listens (gRPC and its HTTP port); loopback: this machine only.
    rm_host: str = "127.0.0.1"
    _procs: list[_Running] = field(default_factory=list, init=False, repr=False)
    _budget: RestartBudget | None = field(default=None, init=False, repr=False)
    _restarts: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    mode: ClassVar[str] = "local"
    kind: ClassVar[str] = "local cluster"
    parts_option: ClassVar[str] = "--nm-processes"

    @property
    def parts(self) -> int:
        return self.nm_processes

    @property
    def where(self) -> str:
        return "local cluster"

    @property
    def events_path(self) -> Path:
        return self.workdir / RM_EVENTS

    @property
    def processes(self) -> dict[str, ProcessInfo]:
        return {r.info.name: r.info for r in self._procs}

    # ------------------------------------------------------------------ start
    def restart_counts(self) -> dict[str, int]:
        return dict(self._restarts)

    def _is_started(self) -> bool:
        return bool(self._procs)

    def _stop_at_exit(self) -> bool:
        return not self.detached

    async def _prepare(self) -> None:
        self.workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.workdir.chmod(0o700)  # one made before: its new files are private all the same
        state = read_state(self.workdir)
        if state is not None:
            if live_processes(state):
                raise TreadleError(
                    f"a cluster is already running in {self.workdir} (rm at "
                    f"{state.get('rm') or '?'}); stop it first: treadle cluster down "
                    f"--dir {self.workdir}"
                )
            (self.workdir / STATE_FILE).unlink()
        self._budget, self._restarts = None, {}
        RestartBudget(self.max_restarts, self.restart_window_s)  # a bad budget fails now
        self.secrets = ClusterSecrets.generate()
        self.secrets.write(self.workdir / "secrets")
        stale = [RM_EVENTS, "rm.port", "rm.http", *(p.name for p in self.workdir.glob("nm-*.port"))]
        stale += [f"{p.name}/node-tokens.json" for p in self.workdir.glob("nm-*") if p.is_dir()]
        for name in stale:
            (self.workdir / name).unlink(missing_ok=True)
        shutil.rmtree(self.workdir / RM_STATE, ignore_errors=True)  # a fresh cluster's RM

    async def _launch_rm(self, deadline: float) -> str:
        wd = self.workdir
        config = wd / RM_CONFIG
        write_private(config, self.rm_config_text())
        argv = self.rm_argv(
            self.python,
            listen=f"{self.rm_host}:0",
            port_file=str(wd / "rm.port"),
            config=str(config),
            events=str(self.events_path),
            http_port_file=str(wd / "rm.http"),
            state_dir=str(wd / RM_STATE) if self.rm_state else None,
        )
        self._spawn("rm", argv)
        port_file = wd / "rm.port"
        address = await self._wait_until(lambda: _read_text(port_file), deadline, "rm",
                                         "wrote no port file")  # fmt: skip
        self.http_url = _read_text(wd / "rm.http") or ""  # written before the port file
        return address

    async def _launch_nm(self, name: str, nodes: Sequence[NodeSpec]) -> None:
        spec = self.workdir / f"nodes-{name.removeprefix('nm-')}.json"
        write_private(spec, nodes_json(nodes))
        argv = self.nm_argv(
            self.python,
            self.rm_address,
            str(spec),
            listen="127.0.0.1:0",
            port_file=str(self.workdir / f"{name}.port"),
            work_dir=str(self.workdir / name),  # its node tokens: it may be restarted
            run_as=am_account(self.python) if self.managed_am else None,
        )
        self._spawn(name, argv)

    async def _launch_am(self, deadline: float) -> None:
        ready = self.workdir / "am.ready"
        ready.unlink(missing_ok=True)
        self._spawn("am", self.am_argv(self.python, self.rm_address, port_file=str(ready)))
        await self._wait_until(lambda: _read_text(ready), deadline, "am", "wrote no port file")

    def _spawn(self, name: str, argv: list[str]) -> None:
        log_path = self.log_path(name)
        popen = spawn(name, argv, log_path)
        self._procs.append(_Running(info_of(name, popen, argv, log_path), popen))

    def _started(self) -> None:
        budget = RestartBudget(self.max_restarts, self.restart_window_s)
        write_state(self.workdir, self._state())
        if self.supervise and self.detached:
            start_detached(self.workdir, budget)  # the command returns; it watches on
        elif self.supervise:
            self._budget = budget  # watched from guard (_dead)

    def _state(self) -> dict[str, Any]:
        return {
                "rm": self.rm_address,
                "http": self.http_url or None,
                "policy": self.policy,
                "params": dict(self.params),
                "dilation": self.dilation,
                "heartbeat_s": self.heartbeat_s,
                "nodes": len(self.nodes),
                "nm_processes": self.nm_processes,
                "managed_am": self.managed_am,
                "workload": self.workload.name,
                "detached": self.detached,
                "events": str(self.events_path),
                "rm_state": str(self.workdir / RM_STATE) if self.rm_state else None,
                "secrets": None if self.insecure else str(self.workdir / "secrets"),
                "insecure": self.insecure,
                "tls": list(self.tls_paths()) or None,
                "started_unix": time.time(),
                "processes": [asdict(r.info) for r in self._procs],
        }  # fmt: skip

    # ------------------------------------------------------------------ watching
    def _dead(self) -> list[tuple[str, int | None]]:
        out: list[tuple[str, int | None]] = []
        for r in self._procs:
            code = r.popen.poll()
            if r.info.name not in self._expected_exit and code is not None:
                out.append((r.info.name, code))
        if out and self._budget is not None:
            out = self._restart(out, self._budget)
        return out

    def _restart(
        self, dead: list[tuple[str, int | None]], budget: RestartBudget
    ) -> list[tuple[str, int | None]]:
        """Start the ``dead`` roles again (treadle.cluster.supervisor); beyond the budget the
        cluster has failed."""
        by_name = {r.info.name: r for r in self._procs}
        for name, _code in dead:
            old = by_name[name]
            if not budget.spend(name, time.monotonic()):
                self._budget = None  # failed: no more restarts, stop() sweeps the rest
                raise TreadleError(f"{self.kind}: " + exhausted(name, budget, old.info.log))
            signal_group(old.info.pid, signal.SIGKILL)  # what it left behind (AM containers)
            argv = restart_argv(old.info, self.rm_address, self.http_url)
            popen = spawn(name, argv, Path(old.info.log), append=True)
            self._restarts[name] = self._restarts.get(name, 0) + 1
            info = info_of(name, popen, old.info.argv, Path(old.info.log), self._restarts[name])
            self._procs[self._procs.index(old)] = _Running(info, popen)
        write_state(self.workdir, dict(self._state(), restarts=self.restart_counts()))
        return []

    def _log_tail(self, name: str) -> tuple[str, str]:
        path = self.log_path(name)
        return log_tail(path), str(path)

    # ------------------------------------------------------------------ stop
    def _stop(self) -> None:
        procs, self._procs = self._procs, []
        if not procs:
            return
        self._logs = {r.info.name: Path(r.info.log) for r in procs}
        deadline = time.monotonic() + self.stop_grace_s
        by_name = {r.info.name: r for r in procs}
        ordered = [by_name[n] for n in self.stop_order(list(by_name))]
        rm = [r for r in ordered if r.info.name == "rm"]
        for phase in ([r for r in ordered if r.info.name != "rm"], rm):
            for r in phase:
                if r.popen.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        r.popen.send_signal(signal.SIGTERM)
            for r in phase:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    r.popen.wait(max(0.0, deadline - time.monotonic()))
        for r in procs:
            # SIGKILL a leader that outlived the grace period and sweep its group
            # (processes it started, such as an NM's AM containers).
            signal_group(r.info.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                r.popen.wait(5.0)

"""The async base of every cluster: an RM, NM host processes and (unmanaged AMs) an AM host.

``ClusterBase`` owns what local processes and containers share: the settings checks (a bad
policy name or parameter fails on construction, before anything starts), the start-up
sequence under one deadline (the RM, its health check, the NM hosts, every node
registered, the AM host), ``guard(aw)`` that fails fast with the end of a dead role's log,
``expect_exit``, ``stop`` on every way out of ``start()`` and ``async with`` (exceptions,
cancellation, KeyboardInterrupt) and at interpreter exit, the lag summaries the roles
log, the run's fidelity verdict (treadle.cluster.fidelity) and the log paths. Subclasses
say how a role is launched, watched and stopped: ``LocalCluster``
(treadle.cluster.local) and ``DockerCluster`` (treadle.cluster.docker).
"""

from __future__ import annotations

import abc
import asyncio
import atexit
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

import grpc

from treadle.cluster.commands import (
    DEFAULT_EXPIRY_INTERVALS,
    DEFAULT_MAX_AM_ATTEMPTS,
    am_host_command,
    am_poll_s,
    check_cluster_settings,
    nm_command,
    rm_command,
    split_nodes,
)
from treadle.cluster.config import rm_config_for
from treadle.cluster.fidelity import Fidelity, Liveness, expiries
from treadle.cluster.procs import lag_summary
from treadle.cluster.secrets import ClusterSecrets
from treadle.errors import TreadleError
from treadle.live.rpcutil import Peer, TlsFiles, channel, remember_peer, wait_ready
from treadle.model import NodeSpec, Workload
from treadle.registry import PolicyChoice
from treadle.rpc.v1 import client_pb2 as client_pb, client_pb2_grpc as client_grpc

T = TypeVar("T")

#: A fresh cluster for one policy, its files under the given directory.
ClusterFactory = Callable[[PolicyChoice, Path], "ClusterBase"]


@dataclass
class ClusterBase(abc.ABC):
    """A cluster of ``workload``'s shape (its nodes, heartbeat, queues and users; its jobs
    are not used) under ``policy``. ``rm_address`` is the RM's address from this machine
    once started."""

    workload: Workload
    policy: str
    params: Mapping[str, Any] = field(default_factory=dict)
    workdir: Path = Path(".treadle/cluster")
    dilation: float = 10.0
    managed_am: bool = False
    am_interval_s: float | None = None  # default: the heartbeat interval, as in sim
    expiry_intervals: int = DEFAULT_EXPIRY_INTERVALS
    max_am_attempts: int = DEFAULT_MAX_AM_ATTEMPTS
    ready_timeout_s: float = 30.0
    stop_grace_s: float = 5.0
    log_level: str = "info"
    tls: TlsFiles | None = None  # every role's channels over mutual TLS (one cert for all)
    http_port: int | None = None  # the RM's HTTP port (rm.server.http; 0: any free one)
    #: YARN's simple mode: the roles run ``--insecure`` (no ACL, no node secret, nothing
    #: signed; the HTTP port trusts ``?user.name=``). Local clusters on loopback only.
    insecure: bool = False
    rm_address: str = field(default="", init=False)
    #: The RM's HTTP port's URL from this machine, once started (when it has one).
    http_url: str = field(default="", init=False)
    #: Fresh for every start (treadle.cluster.secrets): the ACL, the node secret, the keys.
    secrets: ClusterSecrets = field(default_factory=ClusterSecrets.generate, init=False)
    _expected_exit: set[str] = field(default_factory=set, init=False, repr=False)
    _logs: dict[str, Path] = field(default_factory=dict, init=False, repr=False)

    mode: ClassVar[str]  # the replays' run mode: "local", "docker"
    kind: ClassVar[str]  # errors start with it: "local cluster: ..."
    role_label: ClassVar[str] = "{}"  # how errors name a role
    parts_option: ClassVar[str]  # the option giving the number of NM hosts
    guard_poll_s: ClassVar[float] = 0.25
    blocking: ClassVar[bool] = False  # watching and stopping block: run them in a thread

    def __post_init__(self) -> None:
        check_cluster_settings(
            self.workload,
            self.policy,
            self.params,
            dilation=self.dilation,
            parts=self.parts,
            parts_option=self.parts_option,
            expiry_intervals=self.expiry_intervals,
            max_am_attempts=self.max_am_attempts,
            am_interval_s=self.am_interval_s,
        )
        self.workdir = Path(self.workdir)

    @classmethod
    def per_policy(cls, workload: Workload, **settings: Any) -> ClusterFactory:
        """A factory of clusters of this kind with ``settings``, one per compared policy."""

        def make(choice: PolicyChoice, workdir: Path) -> ClusterBase:
            return cls(workload, choice.name, dict(choice.params), workdir=workdir, **settings)

        return make

    # ------------------------------------------------------------------ views
    @property
    @abc.abstractmethod
    def parts(self) -> int:
        """How many NM hosts share the nodes."""

    @property
    @abc.abstractmethod
    def where(self) -> str:
        """What the cluster runs on, for reports: "local cluster", "2 NM containers of ..."."""

    @property
    def nodes(self) -> tuple[NodeSpec, ...]:
        return self.workload.cluster.nodes

    @property
    def heartbeat_s(self) -> float:
        return self.workload.cluster.heartbeat_s

    @property
    def am_poll_s(self) -> float:
        return am_poll_s(self.heartbeat_s, self.dilation)

    def log_path(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    @property
    def driver_peer(self) -> Peer:
        """How this process's clients reach the RM: as the ``treadle`` admin, over TLS if on."""
        return Peer(None if self.insecure else self.secrets.driver, self.tls)

    def tls_paths(self) -> tuple[str, ...]:
        """The roles' --tls-* paths (their own view of the files)."""
        return (self.tls.cert, self.tls.key, self.tls.ca) if self.tls else ()

    def secrets_dir(self) -> str:
        """Where the roles find the cluster's secrets (their own view)."""
        return str(self.workdir / "secrets")

    def roles_secrets(self) -> str | None:
        """The secrets directory the roles' commands name (None: ``insecure``)."""
        return None if self.insecure else self.secrets_dir()

    # ------------------------------------------------------------------ the roles' commands
    def rm_config_text(self) -> str:
        """The RM's configuration file: the workload's queues, users and heartbeat."""
        note = f"queues and users of workload {self.workload.name!r} for the RM (by treadle)"
        return rm_config_for(self.workload, note)

    def rm_argv(
        self,
        python: str,
        *,
        listen: str,
        config: str,
        events: str,
        port_file: str | None = None,
        advertise: str | None = None,
        http_port_file: str | None = None,
        state_dir: str | None = None,
    ) -> list[str]:
        return rm_command(
            python,
            self.policy,
            self.params,
            listen=listen,
            port_file=port_file,
            advertise=advertise,
            http_port=self.http_port,
            http_port_file=http_port_file if self.http_port is not None else None,
            dilation=self.dilation,
            config=config,
            events=events,
            heartbeat_s=self.heartbeat_s,
            am_interval_s=self.am_interval_s or self.heartbeat_s,
            expiry_intervals=self.expiry_intervals,
            max_am_attempts=self.max_am_attempts,
            log_level=self.log_level,
            secrets=self.roles_secrets(),
            tls=self.tls_paths(),
            state_dir=state_dir,
            event=self.workload.cluster.event_driven,
        )

    def nm_argv(
        self,
        python: str,
        rm: str,
        nodes_file: str,
        *,
        listen: str,
        port_file: str | None = None,
        advertise: str | None = None,
        work_dir: str | None = None,
        run_as: str | None = None,
    ) -> list[str]:
        return nm_command(
            python,
            rm,
            nodes_file,
            listen=listen,
            port_file=port_file,
            advertise=advertise,
            work_dir=work_dir,
            run_as=run_as,
            event=self.workload.cluster.event_driven,
            rm_wait_s=max(1.0, self.ready_timeout_s),
            log_level=self.log_level,
            secrets=self.roles_secrets(),
            tls=self.tls_paths(),
        )

    def am_argv(self, python: str, rm: str, *, port_file: str) -> list[str]:
        return am_host_command(
            python,
            rm,
            port_file=port_file,
            poll_s=self.am_poll_s,
            event=self.workload.cluster.event_driven,
            log_level=self.log_level,
            secrets=self.roles_secrets(),
            tls=self.tls_paths(),
        )

    # ------------------------------------------------------------------ what subclasses do
    @abc.abstractmethod
    def _is_started(self) -> bool: ...

    @abc.abstractmethod
    async def _prepare(self) -> None:
        """Checks and set-up before anything is started (the work directory, the image)."""

    @abc.abstractmethod
    async def _launch_rm(self, deadline: float) -> str:
        """Start the RM; return its address from this machine once it is known."""

    @abc.abstractmethod
    async def _launch_nm(self, name: str, nodes: Sequence[NodeSpec]) -> None: ...

    @abc.abstractmethod
    async def _launch_am(self, deadline: float) -> None:
        """Start the AM host and wait until it polls the RM."""

    @abc.abstractmethod
    def _dead(self) -> list[tuple[str, int | None]]:
        """(name, exit status) of the roles that stopped, expected ones aside."""

    @abc.abstractmethod
    def _log_tail(self, name: str) -> tuple[str, str]:
        """The last lines of a role's log and where they come from."""

    @abc.abstractmethod
    def _stop(self) -> None:
        """Stop every role (the RM last), keep their logs in ``_logs``; idempotent."""

    def _stop_at_exit(self) -> bool:
        return True

    def _started(self) -> None:  # noqa: B027 (a hook: most clusters need none)
        """Called once the cluster is ready."""

    def preflight(self) -> None:  # noqa: B027 (a hook: most clusters need none)
        """Checks worth making once before a series of clusters of this kind starts."""

    # ------------------------------------------------------------------ start
    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self) -> str:
        """Start every role and wait until the cluster is ready; return the RM address.
        On any failure (or cancellation) what was started is stopped before raising."""
        if self._is_started():
            raise TreadleError("this cluster is already started")
        await self._prepare()
        if self._stop_at_exit():
            atexit.register(self.stop)
        try:
            await self._start()
        except BaseException:
            await self.aclose()
            raise
        return self.rm_address

    async def _start(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        self.rm_address = await self._launch_rm(deadline)
        remember_peer(self.rm_address, self.driver_peer)
        await self._wait_rm(deadline)
        for k, chunk in enumerate(split_nodes(self.nodes, self.parts), 1):
            await self._launch_nm(f"nm-{k}", chunk)
        await self._wait_nodes(deadline)
        if not self.managed_am:
            await self._launch_am(deadline)
        await self._check()
        await self._io(self._started)

    async def _wait_until(
        self,
        probe: Callable[[], T | None],
        deadline: float,
        name: str,
        what: str,
        poll_s: float = 0.05,
    ) -> T:
        """``probe()`` once it returns something, while no role dies; at ``deadline`` an
        error saying that ``name`` ``what`` (e.g. "wrote no port file") in time."""
        while True:
            found = await self._io(probe)
            if found:
                return found
            await self._check()
            if time.monotonic() > deadline:
                raise self._failure(name, f"{what} in {self.ready_timeout_s:g} s")
            await asyncio.sleep(poll_s)

    async def _wait_rm(self, deadline: float) -> None:
        while True:
            await self._check()
            try:
                await wait_ready(self.rm_address, min(1.0, max(0.1, deadline - time.monotonic())))
                return
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise self._failure("rm", "did not answer its health check") from None

    async def _wait_nodes(self, deadline: float) -> None:
        """Poll the RM until every node is registered, while no role dies."""
        want, seen = len(self.nodes), 0
        async with channel(self.rm_address) as ch:
            stub: Any = client_grpc.ClientStub(ch)
            while True:
                await self._check()
                with contextlib.suppress(grpc.aio.AioRpcError):
                    request = client_pb.GetClusterMetricsRequest()
                    seen = (await stub.GetClusterMetrics(request, timeout=2)).nodes
                    if seen >= want:
                        return
                if time.monotonic() > deadline:
                    others = "(and the other NM hosts) " if self.parts > 1 else ""
                    raise self._failure(
                        "nm-1",
                        f"{others}registered {seen}/{want} nodes with the RM in "
                        f"{self.ready_timeout_s:g} s",
                    )
                await asyncio.sleep(0.05)

    # ------------------------------------------------------------------ watching
    async def _io(self, fn: Callable[..., T], *args: Any) -> T:
        if self.blocking:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    async def _check(self, what: str = "exited early") -> None:
        dead = await self._io(self._dead)
        if dead:
            name, code = dead[0]
            raise self._failure(name, what, code)

    def _failure(self, name: str, what: str, code: int | None = None) -> TreadleError:
        status = f" (exit status {code})" if code is not None else ""
        tail, source = self._log_tail(name)
        detail = f"; last lines of {source}:\n{tail}" if tail else f"; see {self.log_path(name)}"
        role = self.role_label.format(name)
        return TreadleError(f"{self.kind}: {role} {what}{status}{detail}")

    def expect_exit(self, name: str) -> None:
        """Declare that role ``name`` may stop (a test killing an NM host) without ``guard``
        treating it as a failure."""
        self._expected_exit.add(name)

    def restart_counts(self) -> dict[str, int]:
        """How often each role was started again by supervision (roles never restarted
        left out)."""
        return {}

    def exited(self) -> list[str]:
        """Names of the roles that stopped without being expected to."""
        return [name for name, _ in self._dead()]

    async def guard(self, aw: Awaitable[T], poll_s: float | None = None) -> T:
        """Await ``aw`` while watching the roles: if one stops, cancel ``aw`` and raise a
        TreadleError with the end of that role's log."""
        task = asyncio.ensure_future(aw)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=poll_s or self.guard_poll_s)
                if done:
                    return task.result()
                await self._check("exited during the run")
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Stop every role (SIGTERM, then SIGKILL after ``stop_grace_s``), the RM last, and
        keep their logs. Safe to call twice, from a ``finally`` or at exit."""
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        self._stop()

    async def aclose(self) -> None:
        await self._io(self.stop)

    @staticmethod
    def stop_order(names: Sequence[str]) -> list[str]:
        """The AM host and the NM hosts first (last started first), the RM last: it keeps
        logging until it stops."""
        return [n for n in reversed(names) if n != "rm"] + (["rm"] if "rm" in names else [])

    def lag_stats(self) -> dict[str, dict[str, Any]]:
        """Each role's lag (treadle.live.lag: timer lateness and RPC queueing, emulated s),
        from the summaries the roles log; call after ``stop()``."""
        out: dict[str, dict[str, Any]] = {}
        restarts = self.restart_counts()
        for name, log in self._logs.items():
            summary = lag_summary(log)
            if summary is not None:
                out[name] = dict(summary, restarts=restarts[name]) if name in restarts else summary
        return out

    def liveness(self) -> Liveness:
        am_interval = self.am_interval_s or self.heartbeat_s
        return Liveness(
            self.heartbeat_s,
            self.expiry_intervals * self.heartbeat_s,
            am_interval,
            self.expiry_intervals * am_interval,
        )

    def fidelity(self, records: Sequence[Mapping[str, Any]]) -> Fidelity:
        """This run's lag per role (the driver's from its ``run_finished`` record), its
        expiries and the verdict (treadle.cluster.fidelity); call after ``stop()``."""
        roles = self.lag_stats()
        for r in records:
            driver = r.get("submit_timers") if r.get("event") == "run_finished" else None
            if isinstance(driver, dict) and "timer_late_s" in driver:
                roles["driver"] = dict(driver)
        found = expiries(
            records,
            self.nodes,
            self.parts,
            managed_am=self.managed_am,
            stopped=self._expected_exit | set(self.restart_counts()),
        )
        return Fidelity(self.dilation, self.liveness(), roles, found)

"""Local clusters as real OS processes: one RM, NM host processes and the unmanaged-AM host.

``LocalCluster`` starts ``python -m rm`` on port 0 (it publishes its address in a port
file), waits for its health check, starts the NM host processes with ``--nodes-json``
files listing exactly the workload's nodes, waits until the RM counts them all, then
starts the AM host (``python -m am --rm ADDR``) unless AMs are managed (launched by the NMs
in AM containers). Every process writes its log to the work directory and the RM streams
its event log to ``rm-events.jsonl`` there; ``cluster.json`` records pids and addresses.

Each process leads a session (and process group) of its own, so that ``stop()`` can sweep
what a process left behind (an NM's AM processes) and so that a detached cluster
(``treadle cluster up``) outlives the command that started it. ``stop()`` sends SIGTERM,
waits a grace period, then SIGKILLs; it runs on every way out of ``start()`` and of
``async with`` (exceptions, cancellation, KeyboardInterrupt) and, as a last resort, at
interpreter exit. Pids read back from ``cluster.json`` are signalled only while they still
belong to the process that was started (same start time in ``/proc``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import grpc
import yaml

from treadle.errors import InputError, TreadleError
from treadle.model import ROOT_QUEUE, NodeSpec, QueueSpec, Workload
from treadle.registry import build
from treadle.resources import Resources
from treadle.rpc.v1 import client_pb2 as client_pb, client_pb2_grpc as client_grpc
from treadle.rpcutil import channel, wait_ready

T = TypeVar("T")

STATE_FILE = "cluster.json"
RM_EVENTS = "rm-events.jsonl"
RM_CONFIG = "rm-workload.yaml"
LOG_TAIL_LINES = 12
DEFAULT_EXPIRY_INTERVALS = 10
DEFAULT_MAX_AM_ATTEMPTS = 2


@dataclass
class ProcessInfo:
    """One OS process of a cluster, as recorded in cluster.json."""

    name: str  # "rm", "nm-1", ..., "am"
    pid: int
    argv: list[str]
    log: str
    started: int | None = None  # /proc start time (clock ticks after boot): pid-reuse guard


# --------------------------------------------------------------------------------------
# Processes by pid (the cluster may have been started by another command)


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time) of ``pid`` from /proc, or None where /proc is missing."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: split after the last ')'.
    rest = text[text.rfind(")") + 2 :].split()
    try:
        return rest[0], int(rest[19])
    except (IndexError, ValueError):
        return None


def start_time(pid: int) -> int | None:
    stat = _proc_stat(pid)
    return stat[1] if stat is not None else None


def pid_alive(pid: int, started: int | None = None) -> bool:
    """Whether ``pid`` runs (zombies count as dead) and, when ``started`` is given, is still
    the process that was started then (not a later process that reused the pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return started is None  # someone else's process: cannot be ours
    stat = _proc_stat(pid)
    if stat is None:
        # Gone since kill(0), or a system without /proc (then kill(0) is all we know).
        return not Path("/proc/self").exists()
    state, start = stat
    if state in ("Z", "X"):
        return False
    return started is None or start == started


def _signal_group(pid: int, sig: int) -> None:
    """Signal the process group led by ``pid`` (each cluster process leads its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def terminate(processes: Sequence[ProcessInfo], grace_s: float = 5.0) -> list[str]:
    """SIGTERM every live recorded process, wait up to ``grace_s``, SIGKILL the rest and
    what their groups still hold. Returns the names that needed SIGKILL."""
    live = [p for p in processes if pid_alive(p.pid, p.started)]
    for p in live:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(pid_alive(p.pid, p.started) for p in live):
        time.sleep(0.05)
    killed = []
    for p in live:
        if pid_alive(p.pid, p.started):
            killed.append(p.name)
        _signal_group(p.pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and any(pid_alive(p.pid, p.started) for p in live):
        time.sleep(0.02)
    return killed


# --------------------------------------------------------------------------------------
# The state file


def read_state(workdir: Path) -> dict[str, Any] | None:
    path = workdir / STATE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise InputError(str(path), None, f"unreadable cluster state: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("processes"), list):
        raise InputError(str(path), None, "not a treadle cluster state file")
    return data


def recorded_processes(state: Mapping[str, Any]) -> list[ProcessInfo]:
    out = []
    for p in state.get("processes", []):
        try:
            out.append(
                ProcessInfo(
                    str(p["name"]),
                    int(p["pid"]),
                    [str(a) for a in p.get("argv", [])],
                    str(p.get("log", "")),
                    int(p["started"]) if p.get("started") is not None else None,
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return out


def live_processes(state: Mapping[str, Any]) -> list[ProcessInfo]:
    return [p for p in recorded_processes(state) if pid_alive(p.pid, p.started)]


def stop_recorded(workdir: Path, grace_s: float = 5.0) -> dict[str, Any]:
    """Stop the cluster recorded in ``workdir`` (``treadle cluster down``) and remove its
    state file; return the state that was recorded."""
    state = read_state(workdir)
    if state is None:
        raise TreadleError(f"no cluster is recorded in {workdir} (no {STATE_FILE})")
    terminate(recorded_processes(state), grace_s)
    left = live_processes(state)
    if left:
        names = ", ".join(f"{p.name} (pid {p.pid})" for p in left)
        raise TreadleError(f"could not stop {names}; {workdir / STATE_FILE} is kept")
    (workdir / STATE_FILE).unlink(missing_ok=True)
    return state


def log_tail(path: Path | str, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 16_384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def timer_summary(log: Path | str) -> dict[str, float] | None:
    """The last ``timers`` summary a process logged on its way out (JSON log lines)."""
    found: dict[str, float] | None = None
    for line in log_tail(log, 50).splitlines():
        if '"timers"' not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        timers = rec.get("timers") if isinstance(rec, dict) else None
        if isinstance(timers, dict):
            found = {str(k): float(v) for k, v in timers.items() if isinstance(v, int | float)}
    return found


# --------------------------------------------------------------------------------------
# What the RM reads: the workload's queues and users


def _queue_doc(q: QueueSpec) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": q.name, "weight": q.weight, "max_capacity": q.max_capacity}
    if q.capacity is not None:
        doc["capacity"] = q.capacity
    if q.children:
        doc["queues"] = [_queue_doc(c) for c in q.children]
    return doc


def rm_config_yaml(workload: Workload) -> str:
    """A workload file holding ``workload``'s queues and users for ``python -m rm
    --workload`` (the RM reads nothing else from it; the one job is a placeholder the
    loader requires)."""
    largest = workload.cluster.largest_node()
    leaf = next(iter(workload.leaf_queues), "default")
    users = {
        u.name: {"weight": u.weight, **({"budget": u.budget} if u.budget is not None else {})}
        for u in workload.users.values()
    }
    doc: dict[str, Any] = {
        "seed": workload.seed,
        "cluster": {
            "heartbeat_s": workload.cluster.heartbeat_s,
            "nodes": [{"resources": largest.to_dict()}],
        },
        "users": users,
        "jobs": [
            {
                "name": "rm-config-placeholder",
                "user": next(iter(users), "treadle"),
                "queue": leaf,
                "stages": [
                    {"name": "s", "tasks": 1, "duration_s": 1.0, "resources": largest.to_dict()}
                ],
            }
        ],
    }
    if workload.queues.name == ROOT_QUEUE:
        doc["queues"] = [_queue_doc(c) for c in workload.queues.children]
    return (
        f"# queues and users of workload {workload.name!r} for the RM (written by treadle)\n"
        + yaml.safe_dump(doc, sort_keys=False)
    )


def parse_node_resources(text: str, where: str) -> Resources:
    """``vcores=8,memory_mb=16384`` as a resource vector (a node's capacity)."""
    amounts: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep:
            raise InputError(where, None, f"expected name=amount, got {part!r}")
        try:
            amounts[name.strip()] = float(value)
        except ValueError:
            raise InputError(where, name.strip(), f"not a number: {value!r}") from None
    try:
        res = Resources.parse(amounts, where)
    except ValueError as e:
        raise InputError(where, None, str(e)) from None
    if res.is_zero():
        raise InputError(where, None, "a node needs some resources")
    return res


def split_nodes(nodes: Sequence[NodeSpec], parts: int) -> list[list[NodeSpec]]:
    """``nodes`` in ``parts`` contiguous chunks whose sizes differ by at most one."""
    q, r = divmod(len(nodes), parts)
    out, i = [], 0
    for k in range(parts):
        n = q + (1 if k < r else 0)
        out.append(list(nodes[i : i + n]))
        i += n
    return out


def _setting(value: Any) -> str:
    # The RM reads --set values as YAML scalars; JSON is YAML and keeps the type.
    return json.dumps(value)


def nodes_json(nodes: Iterable[NodeSpec]) -> str:
    """The ``--nodes-json`` file of an NM host process: exactly these nodes."""
    rows = [
        {"node_id": n.node_id, "resources": n.resources.to_dict(), "rack": n.rack} for n in nodes
    ]
    return json.dumps(rows, indent=1) + "\n"


def am_poll_s(heartbeat_s: float, dilation: float) -> float:
    """Wall seconds between the AM host's polls for new applications: a quarter of a
    heartbeat, so that an AM starts about as soon as in the simulator (where it registers
    at submission)."""
    return min(0.2, max(0.005, heartbeat_s / dilation / 4))


# The command lines of the three roles, shared by local processes and containers.
def rm_command(
    python: str,
    policy: str,
    params: Mapping[str, Any],
    *,
    listen: str,
    dilation: float,
    config: str,
    events: str,
    heartbeat_s: float,
    am_interval_s: float,
    expiry_intervals: int,
    max_am_attempts: int,
    log_level: str,
    port_file: str | None = None,
    advertise: str | None = None,
) -> list[str]:
    return [
        python, "-m", "rm",
        "--policy", policy,
        *(a for k, v in params.items() for a in ("--set", f"{k}={_setting(v)}")),
        "--listen", listen,
        *(("--port-file", port_file) if port_file else ()),
        *(("--advertise", advertise) if advertise else ()),
        "--dilation", repr(float(dilation)),
        "--workload", config,
        "--events", events,
        "--heartbeat-s", repr(float(heartbeat_s)),
        "--am-interval-s", repr(float(am_interval_s)),
        "--expiry-intervals", str(expiry_intervals),
        "--max-am-attempts", str(max_am_attempts),
        "--log-level", log_level,
    ]  # fmt: skip


def nm_command(
    python: str,
    rm: str,
    nodes_file: str,
    *,
    listen: str,
    rm_wait_s: float,
    log_level: str,
    port_file: str | None = None,
    advertise: str | None = None,
) -> list[str]:
    return [
        python, "-m", "nm",
        "--rm", rm,
        "--nodes-json", nodes_file,
        "--batch",
        "--listen", listen,
        *(("--port-file", port_file) if port_file else ()),
        *(("--advertise", advertise) if advertise else ()),
        "--rm-wait-s", repr(float(rm_wait_s)),
        "--log-level", log_level,
    ]  # fmt: skip


def am_host_command(
    python: str, rm: str, *, poll_s: float, log_level: str, port_file: str | None = None
) -> list[str]:
    return [
        python, "-m", "am",
        "--rm", rm,
        *(("--port-file", port_file) if port_file else ()),
        "--poll-s", repr(poll_s),
        "--log-level", log_level,
    ]  # fmt: skip


def check_cluster_settings(
    workload: Workload,
    policy: str,
    params: Mapping[str, Any],
    *,
    dilation: float,
    parts: int,
    parts_option: str,
    expiry_intervals: int,
    max_am_attempts: int,
    am_interval_s: float | None,
) -> None:
    """Every check a cluster makes before it starts anything: a bad value is a clear error
    (``parts`` is how many NM host processes or containers share the nodes)."""
    nodes = workload.cluster.nodes
    if not nodes:
        raise InputError("cluster", None, "the workload has no nodes")
    if not dilation > 0:
        raise InputError("--dilation", None, f"must be > 0, got {dilation:g}")
    if not 1 <= parts <= len(nodes):
        raise InputError(
            parts_option, None, f"must be between 1 and the {len(nodes)} node(s), got {parts}"
        )
    if expiry_intervals < 1 or max_am_attempts < 1:
        raise InputError("cluster", None, "expiry intervals and AM attempts must be >= 1")
    if am_interval_s is not None and not am_interval_s > 0:
        raise InputError("--am-interval-s", None, f"must be > 0, got {am_interval_s}")
    build("policies", policy, params)  # bad name or parameter: fail now


async def wait_for_nodes(
    rm_address: str,
    want: int,
    deadline: float,
    check: Callable[[], Awaitable[None]],
    timeout: Callable[[int], Exception],
) -> None:
    """Poll the RM until ``want`` nodes are registered; ``check`` raises if a part of the
    cluster died meanwhile, ``timeout(seen)`` is raised at ``deadline``."""
    seen = 0
    async with channel(rm_address) as ch:
        stub: Any = client_grpc.ClientStub(ch)
        while True:
            await check()
            with contextlib.suppress(grpc.aio.AioRpcError):
                m = await stub.GetClusterMetrics(client_pb.GetClusterMetricsRequest(), timeout=2)
                seen = m.nodes
                if seen >= want:
                    return
            if time.monotonic() > deadline:
                raise timeout(seen)
            await asyncio.sleep(0.05)


async def guarded(aw: Awaitable[T], check: Callable[[], Awaitable[None]], poll_s: float) -> T:
    """Await ``aw``, calling ``check`` every ``poll_s``; if ``check`` raises (a part of the
    cluster died), cancel ``aw`` and let that error through."""
    task = asyncio.ensure_future(aw)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=poll_s)
            if done:
                return task.result()
            await check()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


# --------------------------------------------------------------------------------------
# The cluster


@dataclass
class _Running:
    info: ProcessInfo
    popen: subprocess.Popen[bytes]


@dataclass
class LocalCluster:
    """An RM, NM host processes and (unmanaged AMs) an AM host, started on this machine.

    ``workload`` gives the nodes (ids, resources, racks), the heartbeat interval and the
    queues and users; its jobs are not used. Parameters are checked on construction, so a
    bad policy name or parameter fails before any process starts.
    """

    workload: Workload
    policy: str
    params: Mapping[str, Any] = field(default_factory=dict)
    workdir: Path = Path(".treadle/cluster")
    dilation: float = 10.0
    nm_processes: int = 1
    managed_am: bool = False
    am_interval_s: float | None = None  # default: the heartbeat interval, as in sim
    expiry_intervals: int = DEFAULT_EXPIRY_INTERVALS
    max_am_attempts: int = DEFAULT_MAX_AM_ATTEMPTS
    ready_timeout_s: float = 30.0
    stop_grace_s: float = 5.0
    detached: bool = False  # processes survive this interpreter (treadle cluster up)
    log_level: str = "info"
    python: str = sys.executable
    rm_address: str = field(default="", init=False)
    _procs: list[_Running] = field(default_factory=list, init=False, repr=False)
    _expected_exit: set[str] = field(default_factory=set, init=False, repr=False)
    _stopped: list[ProcessInfo] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        check_cluster_settings(
            self.workload,
            self.policy,
            self.params,
            dilation=self.dilation,
            parts=self.nm_processes,
            parts_option="--nm-processes",
            expiry_intervals=self.expiry_intervals,
            max_am_attempts=self.max_am_attempts,
            am_interval_s=self.am_interval_s,
        )
        self.workdir = Path(self.workdir)

    # ------------------------------------------------------------------ views
    @property
    def nodes(self) -> tuple[NodeSpec, ...]:
        return self.workload.cluster.nodes

    @property
    def heartbeat_s(self) -> float:
        return self.workload.cluster.heartbeat_s

    @property
    def events_path(self) -> Path:
        return self.workdir / RM_EVENTS

    @property
    def processes(self) -> dict[str, ProcessInfo]:
        return {r.info.name: r.info for r in self._procs}

    @property
    def am_poll_s(self) -> float:
        return am_poll_s(self.heartbeat_s, self.dilation)

    def log_path(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    # ------------------------------------------------------------------ start
    async def __aenter__(self) -> LocalCluster:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def start(self) -> str:
        """Start every process and wait until the cluster is ready; return the RM address.
        On any failure (or cancellation) what was started is stopped before raising."""
        if self._procs:
            raise TreadleError("this cluster is already started")
        self._prepare_workdir()
        if not self.detached:
            atexit.register(self.stop)
        try:
            await self._start()
            self._write_state()
        except BaseException:
            self.stop()
            raise
        return self.rm_address

    def _prepare_workdir(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        state = read_state(self.workdir)
        if state is not None:
            if live_processes(state):
                raise TreadleError(
                    f"a cluster is already running in {self.workdir} (rm at "
                    f"{state.get('rm') or '?'}); stop it first: treadle cluster down "
                    f"--dir {self.workdir}"
                )
            (self.workdir / STATE_FILE).unlink()
        stale = [RM_EVENTS, "rm.port", *(p.name for p in self.workdir.glob("nm-*.port"))]
        for name in stale:
            (self.workdir / name).unlink(missing_ok=True)

    async def _start(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        wd = self.workdir
        config = wd / RM_CONFIG
        config.write_text(rm_config_yaml(self.workload), encoding="utf-8")
        rm_argv = rm_command(
            self.python,
            self.policy,
            self.params,
            listen="127.0.0.1:0",
            port_file=str(wd / "rm.port"),
            dilation=self.dilation,
            config=str(config),
            events=str(self.events_path),
            heartbeat_s=self.heartbeat_s,
            am_interval_s=self.am_interval_s or self.heartbeat_s,
            expiry_intervals=self.expiry_intervals,
            max_am_attempts=self.max_am_attempts,
            log_level=self.log_level,
        )
        rm = self._spawn("rm", rm_argv)
        self.rm_address = await self._wait_port_file(rm, wd / "rm.port", deadline)
        try:
            await wait_ready(self.rm_address, max(0.1, deadline - time.monotonic()))
        except TimeoutError:
            raise self._failure(rm, "did not answer its health check") from None
        self._check_alive()

        nms = []
        for k, chunk in enumerate(split_nodes(self.nodes, self.nm_processes), 1):
            spec = wd / f"nodes-{k}.json"
            spec.write_text(nodes_json(chunk), encoding="utf-8")
            argv = nm_command(
                self.python,
                self.rm_address,
                str(spec),
                listen="127.0.0.1:0",
                port_file=str(wd / f"nm-{k}.port"),
                rm_wait_s=max(1.0, self.ready_timeout_s),
                log_level=self.log_level,
            )
            nms.append(self._spawn(f"nm-{k}", argv))
        await self._wait_nodes(deadline)

        if not self.managed_am:
            ready = wd / "am.ready"
            ready.unlink(missing_ok=True)
            argv = am_host_command(
                self.python,
                self.rm_address,
                port_file=str(ready),
                poll_s=self.am_poll_s,
                log_level=self.log_level,
            )
            am = self._spawn("am", argv)
            await self._wait_port_file(am, ready, deadline)
        self._check_alive()

    def _spawn(self, name: str, argv: list[str]) -> _Running:
        log_path = self.log_path(name)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(log_path, "wb") as logf:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # own group: swept on stop; survives a detached CLI
                close_fds=True,
            )
        info = ProcessInfo(name, popen.pid, argv, str(log_path), start_time(popen.pid))
        running = _Running(info, popen)
        self._procs.append(running)
        return running

    def _failure(self, proc: _Running, what: str) -> TreadleError:
        code = proc.popen.poll()
        status = f" (exit status {code})" if code is not None else ""
        tail = log_tail(proc.info.log)
        detail = f"; last lines of {proc.info.log}:\n{tail}" if tail else f"; see {proc.info.log}"
        return TreadleError(f"local cluster: {proc.info.name} {what}{status}{detail}")

    def _exited(self) -> list[_Running]:
        return [
            r
            for r in self._procs
            if r.info.name not in self._expected_exit and r.popen.poll() is not None
        ]

    def _check_alive(self) -> None:
        dead = self._exited()
        if dead:
            raise self._failure(dead[0], "exited early")

    async def _wait_port_file(self, proc: _Running, path: Path, deadline: float) -> str:
        while True:
            with contextlib.suppress(OSError):
                text = path.read_text().strip()
                if text:
                    return text
            self._check_alive()
            if time.monotonic() > deadline:
                raise self._failure(proc, f"wrote no port file in {self.ready_timeout_s:g} s")
            await asyncio.sleep(0.05)

    async def _wait_nodes(self, deadline: float) -> None:
        def timeout(seen: int) -> TreadleError:
            nm = next(r for r in self._procs if r.info.name.startswith("nm-"))
            return self._failure(
                nm,
                f"registered {seen}/{len(self.nodes)} nodes with the RM in "
                f"{self.ready_timeout_s:g} s",
            )

        async def check() -> None:
            self._check_alive()

        await wait_for_nodes(self.rm_address, len(self.nodes), deadline, check, timeout)

    def _write_state(self) -> None:
        state = {
            "rm": self.rm_address,
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
            "started_unix": time.time(),
            "processes": [asdict(r.info) for r in self._procs],
        }
        path = self.workdir / STATE_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(state, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    # ------------------------------------------------------------------ running
    def expect_exit(self, name: str) -> None:
        """Declare that process ``name`` may exit (a test killing an NM) without ``guard``
        treating it as a failure."""
        self._expected_exit.add(name)

    def exited(self) -> list[str]:
        """Names of processes that exited without being expected to."""
        return [r.info.name for r in self._exited()]

    async def guard(self, aw: Awaitable[T], poll_s: float = 0.25) -> T:
        """Await ``aw`` while watching the processes: if one exits, cancel ``aw`` and raise
        a TreadleError with the end of that process's log."""

        async def check() -> None:
            dead = self._exited()
            if dead:
                raise self._failure(dead[0], "exited during the run")

        return await guarded(aw, check, poll_s)

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """SIGTERM every process, wait ``stop_grace_s``, SIGKILL what is left and every
        process group. Safe to call twice, from a ``finally`` or at exit."""
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        procs, self._procs = self._procs, []
        if not procs:
            return
        self._stopped = [r.info for r in procs]
        deadline = time.monotonic() + self.stop_grace_s
        # The AM host and the NMs first, the RM last: it keeps logging until it stops.
        rm = [r for r in procs if r.info.name == "rm"]
        others = [r for r in reversed(procs) if r.info.name != "rm"]
        for phase in (others, rm):
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
            _signal_group(r.info.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                r.popen.wait(5.0)

    def timer_stats(self) -> dict[str, dict[str, float]]:
        """How late each process's timers fired (emulated s), from the summaries the
        processes log when they stop; call after ``stop()``."""
        out: dict[str, dict[str, float]] = {}
        for info in self._stopped:
            summary = timer_summary(info.log)
            if summary is not None:
                out[info.name] = summary
        return out


def cluster_workload(
    nodes: Iterable[NodeSpec], heartbeat_s: float, like: Workload | None = None
) -> Workload:
    """A job-less workload of ``nodes`` carrying ``like``'s queues and users (for a
    cluster started without a workload to replay: ``treadle cluster up``)."""
    from treadle.model import ClusterSpec

    cluster = ClusterSpec(tuple(nodes), heartbeat_s)
    if like is None:
        return Workload("cluster", cluster, ())
    return Workload(like.name, cluster, (), like.queues, like.users, like.seed)

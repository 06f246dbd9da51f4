"""NodeManager host: one process running many NM cores, their heartbeats and their
ContainerManager service.

The heartbeat loop sends every hosted NM's heartbeat each interval, unary (one call per
NM, like a real NM) or batched (one call for all). StartContainers routes each launch to
the NM it names. An AM container's launch carries a command: the NM runs it as its own
OS process and the container ends when the process exits.

Identity (with a node secret): a launch starts only with the RM's signature of its grant
(the container token), which covers the whole launch context: an AM container's command
and environment (a task container runs none), the longest duration a task may run and
the grant's expiry; each grant starts once (treadle.live.gate.ContainerVerifier). An AM
container's process runs as ``run_as`` (``python -m nm --run-as``; nobody when the host
runs as root). StopContainers and GetContainerStatuses name, per container, that
same token, which only the RM and the AM it granted the container to hold (YARN's NMToken
ties these calls to the container's application): a call lacking one is UNAUTHENTICATED,
one whose token is not the container's is PERMISSION_DENIED, whole, before any effect.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import structlog

from nm.core import NodeManager
from treadle.errors import InvalidRequestError, NotFoundError
from treadle.live import auth, wire
from treadle.live.auth import PermissionDeniedError, UnauthenticatedError
from treadle.live.backoff import Backoff
from treadle.live.clock import EmulatedClock
from treadle.live.gate import ContainerVerifier
from treadle.live.rpcutil import channel, map_errors, peer_for
from treadle.messages import Container, ContainerLaunch
from treadle.model import NodeSpec
from treadle.rpc.v1 import (
    container_manager_pb2 as cm_pb,
    container_manager_pb2_grpc as cm_grpc,
    resource_tracker_pb2 as rt_pb,
    resource_tracker_pb2_grpc as rt_grpc,
)

log = structlog.get_logger("nm")
#: Failed heartbeats are retried with backoff (treadle.live.backoff) up to this many
#: intervals apart: well inside the RM's node expiry (10 intervals by default).
BACKOFF_CAP_INTERVALS = 4


class NodeHost:
    """The NM cores of one process and their link to the RM."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        rm_address: str,
        *,
        batch: bool,
        address: str = "",
        node_secret: bytes | None = None,
        token_file: Path | None = None,
        run_as: Account | None = None,
        event: bool = False,
    ) -> None:
        if not nodes:
            raise InvalidRequestError("an NM host needs at least one node")
        self.nms = {n.node_id: NodeManager(n.node_id, n.resources, n.rack) for n in nodes}
        self.rm_address = rm_address
        self.batch = batch
        self.address = address
        self.clock = EmulatedClock()
        self.interval_s = 1.0
        self.processes: dict[str, asyncio.subprocess.Process] = {}
        # container id -> its launch, from its start until the RM acknowledged its end: what
        # a resync reports (``register``).
        self.launches: dict[str, ContainerLaunch] = {}
        # container id -> the container token its launch was verified with, for as long
        # as ``launches`` holds it: what Stop/GetContainerStatuses callers must present.
        self.grant_tokens: dict[str, str] = {}
        self._channel: grpc.aio.Channel | None = None
        self._stub: Any = None
        self._hb_lock = asyncio.Lock()
        self._oob: dict[str, None] = {}  # nodes owing an out-of-band heartbeat
        self._oob_task: asyncio.Task[None] | None = None
        # Registrations are signed with the node secret; the RM's container signatures
        # are checked under a key derived from it (None: an RM without identity checks).
        self.node_secret = node_secret
        self.verifier = ContainerVerifier(node_secret)
        # node id -> the token the RM issued it, kept in ``token_file`` so that this host,
        # restarted before the RM expired its nodes, may register them again (a new
        # incarnation: the RM ends the old one's containers as lost).
        self.token_file = token_file
        self.tokens: dict[str, str] = load_tokens(token_file) if token_file else {}
        #: Whom AM containers' processes run as (None: this process's own account).
        self.run_as = run_as
        #: Event mode (``cluster: {scheduling: event}``): a container's start is reported
        #: out of band too, as its end always is (``out_of_band``).
        self.event = event

    def nm(self, node_id: str) -> NodeManager:
        nm = self.nms.get(node_id)
        if nm is None:
            raise NotFoundError(f"node {node_id!r} is not hosted here")
        return nm

    async def connect(self) -> None:
        peer = peer_for(self.rm_address)
        if self.node_secret is not None:
            peer = replace(peer, creds=auth.Credentials(auth.NODE_PRINCIPAL, self.node_secret))
        self._channel = channel(self.rm_address, peer)
        self._stub = rt_grpc.ResourceTrackerStub(self._channel)

    async def close(self) -> None:
        for proc in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        if self._channel is not None:
            await self._channel.close()

    async def register(
        self, node_ids: Sequence[str] | None = None, *, with_containers: bool = False
    ) -> None:
        """Register these nodes (default: all); ``with_containers`` (a resync) reports
        what each still holds, for a restarted RM to recover."""
        for node_id in node_ids or list(self.nms):
            nm = self.nms[node_id]
            req = wire.registration_to_pb(nm.registration(self.address))
            req.node_token = self.tokens.get(node_id, "")
            if with_containers:
                held = [x for x in self.launches.values() if x.node_id == node_id]
                req.containers.extend(
                    wire.container_to_pb(
                        Container(x.container_id, x.app_id, node_id, -1, x.resources)
                    )
                    for x in held
                )
            resp = await self._stub.RegisterNode(req, timeout=30)
            if self.tokens.get(node_id) != resp.node_token:
                self.tokens[node_id] = resp.node_token
                if self.token_file is not None:
                    save_tokens(self.token_file, self.tokens)
            self.clock = _adopt(self.clock, resp.clock.epoch_unix_s, resp.clock.dilation)
            self.interval_s = resp.heartbeat_interval_s or 1.0

    async def heartbeat_once(self) -> None:
        await self.heartbeat(list(self.nms))

    async def heartbeat(self, node_ids: Sequence[str]) -> None:
        """Send these NMs' heartbeats. One round at a time: a node's heartbeats must reach
        the RM in sequence order, or the RM would ignore the older one."""
        async with self._hb_lock:
            now = self.clock.now()
            hbs = [self.nms[n].heartbeat(now) for n in node_ids]
            msgs = [wire.heartbeat_to_pb(h) for h in hbs]
            for m in msgs:
                m.node_token = self.tokens.get(m.node_id, "")
            if self.batch:
                req = rt_pb.NodeHeartbeatBatchRequest(heartbeats=msgs)
                resp = await self._stub.NodeHeartbeatBatch(req, timeout=30)
                answers = list(resp.responses)
            else:
                answers = await asyncio.gather(
                    *(self._stub.NodeHeartbeat(m, timeout=30) for m in msgs)
                )
            resync = []
            launches = self.launches
            for hb, answer in zip(hbs, answers, strict=True):
                nm = self.nms[hb.node_id]
                if answer.resync:  # nothing applied: the reports go again after it
                    resync.append(hb.node_id)
                    continue
                nm.acknowledge(hb.seq)
                for s in hb.completed:  # the RM has them now
                    launches.pop(s.container_id, None)
                    self.grant_tokens.pop(s.container_id, None)
                for cid in answer.stop:
                    self._stop(nm, cid, now)
        if resync:
            # The RM does not know these nodes: it restarted, or it lost them. Register
            # again with what they hold (YARN's NM resync): a restarted RM recovers the
            # containers of running applications and has the others stopped, as it does
            # all of a node it had lost (it failed them then).
            log.warning("nm_resync", nodes=resync)
            await self.register(resync, with_containers=True)

    async def register_again(self) -> None:
        """The RM refused a heartbeat's node token: it no longer knows it (restarted on a
        new or set-aside store). Register every node again, as a resync does, rather than
        heartbeat in vain: the RM issues new tokens to nodes it does not know and keeps
        those of nodes whose token it holds."""
        try:
            await self.register(with_containers=True)
        except grpc.aio.AioRpcError as e:
            log.warning("nm_register_again_failed", code=str(e.code()), details=e.details())

    def out_of_band(self, node_id: str) -> None:
        """A container ended (or, in event mode, started): report it now rather than at
        the next regular heartbeat, as YARN's ``NodeStatusUpdater.sendOutofBandHeartBeat``
        wakes its heartbeat loop. No rate limit (YARN has none either): requests arriving
        while a round is under way share the next round, and a round waits for the one
        before it (``_hb_lock``)."""
        self._oob[node_id] = None
        if self._oob_task is None or self._oob_task.done():
            self._oob_task = asyncio.get_running_loop().create_task(self._flush_oob())

    async def _flush_oob(self) -> None:
        while self._oob:
            nodes = list(self._oob)
            self._oob.clear()
            try:
                await self.heartbeat(nodes)
            except grpc.aio.AioRpcError as e:
                log.warning("oob_heartbeat_failed", code=str(e.code()), details=e.details())

    def schedule_completion(self, node_id: str, duration_s: float) -> None:
        if duration_s == math.inf:
            return
        delay = max(0.0, self.clock.wall_seconds(duration_s))
        asyncio.get_running_loop().call_later(delay, self.out_of_band, node_id)

    async def heartbeat_loop(self, stop: asyncio.Event) -> None:
        """Heartbeat every interval; after failures in a row, with backoff (up to
        ``BACKOFF_CAP_INTERVALS``, inside the RM's node expiry). The deadlines are times
        of the clock the last registration handed out: a resync with an RM of another
        epoch (one restarted without its state) starts them afresh on the new clock, else
        the loop would sleep for as long as the old clock was ahead."""
        clock = self.clock
        t = clock.now()
        backoff = Backoff(self.interval_s, BACKOFF_CAP_INTERVALS * self.interval_s)
        step = self.interval_s
        while not stop.is_set():
            t += step
            await clock.sleep_until(t)
            step = self.interval_s
            try:
                await self.heartbeat_once()
                backoff.reset()
            except grpc.aio.AioRpcError as e:
                log.warning("heartbeat_failed", code=str(e.code()), details=e.details())
                if e.code() == grpc.StatusCode.UNAUTHENTICATED:
                    await self.register_again()
                else:  # an RM that is down is not called at full rate
                    step = backoff.next()
            if self.clock is not clock:
                clock = self.clock
                t = clock.now()
                log.info("nm_clock_changed", epoch=clock.epoch, dilation=clock.dilation)
            elif clock.now() > t + self.interval_s:
                t = clock.now()  # fell behind: do not fire a burst to catch up

    def check_grants(
        self, method: str, container_ids: Sequence[str], tokens: Sequence[str]
    ) -> None:
        """A Stop/GetContainerStatuses caller holds each named container's grant: one
        token per container id, the one its launch carried (a container not started here
        needs none: the call has no effect on it). Without a node secret, anyone may."""
        if self.node_secret is None:
            return
        if len(tokens) != len(container_ids):
            raise UnauthenticatedError(
                f"{method} needs the container token of each container named "
                f"({len(tokens)} token(s) for {len(container_ids)} container(s))"
            )
        for cid, token in zip(container_ids, tokens, strict=True):
            known = self.grant_tokens.get(cid)
            if known is None:
                continue
            if not token:
                raise UnauthenticatedError(f"{method}: container {cid} carries no container token")
            if not auth.same(known, token):
                raise PermissionDeniedError(
                    f"{method}: not the container token of {cid} (only the application it "
                    "was granted to may stop it or read its status)"
                )

    def _stop(self, nm: NodeManager, cid: str, now: float, *, by_am: bool = False) -> bool:
        """Stop a container: asked by the RM (a heartbeat's answer) or by its AM
        (StopContainers), which the exit status it ends with tells apart."""
        proc = self.processes.pop(cid, None)
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        return nm.stop_container(cid, now, by_am=by_am)

    async def launch_process(
        self,
        nm: NodeManager,
        cid: str,
        command: Sequence[str],
        environment: Mapping[str, str] | None = None,
    ) -> None:
        """Run an AM container's command (the RM's, as its grant names it) as ``run_as``;
        the container completes when it exits. Its environment is this process's without
        treadle's own variables (which may carry secrets), and the grant's."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
        env.update(TREADLE_CONTAINER_ID=cid, TREADLE_NODE_ID=nm.node_id)
        env.update(environment or {})
        argv = [sys.executable if a == "{python}" else a for a in command]
        if self.run_as is not None:
            argv = [*as_account(self.run_as), *argv]
        proc = await asyncio.create_subprocess_exec(*argv, env=env)
        self.processes[cid] = proc
        asyncio.get_running_loop().create_task(self._reap(nm, cid, proc))

    async def _reap(self, nm: NodeManager, cid: str, proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        if self.processes.pop(cid, None) is not None:
            nm.finish_container(cid, self.clock.now(), code)
            self.out_of_band(nm.node_id)
            log.info("am_process_exited", container=cid, node=nm.node_id, exit_code=code)


@dataclass(frozen=True)
class Account:
    """An OS account AM containers' processes run as."""

    name: str
    uid: int
    gid: int


# Drops to the account, then execs the command. The NM does not ask Popen for user= and
# group=: those make it fork() rather than vfork(), and a fork of a process with gRPC's
# threads runs gRPC's fork handlers in the child, which crashed it (SIGSEGV) under load.
_AS_ACCOUNT = (
    "import os, sys; uid, gid = int(sys.argv[1]), int(sys.argv[2]); os.setgroups([]); "
    "os.setgid(gid); os.setuid(uid); os.chdir('/'); os.execvp(sys.argv[3], sys.argv[3:])"
)


def as_account(account: Account) -> list[str]:
    """The argv prefix that runs a command as ``account``, with no supplementary groups
    and ``/`` as its working directory (an isolated interpreter: ``-I``)."""
    return [sys.executable, "-I", "-c", _AS_ACCOUNT, str(account.uid), str(account.gid)]


def load_tokens(path: Path) -> dict[str, str]:
    """The node tokens a previous run of this host kept (none if the file is missing or
    unreadable: the nodes then register as new, or are refused while they are alive)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        if path.exists():
            log.warning("node_tokens_unreadable", file=str(path), error=str(e))
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, str)}


def save_tokens(path: Path, tokens: Mapping[str, str]) -> None:
    """Write the node tokens (mode 0600), replacing the file atomically."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(dict(tokens), f)
    os.replace(tmp, path)


def _adopt(clock: EmulatedClock, epoch: float, dilation: float) -> EmulatedClock:
    if clock.epoch == epoch and clock.dilation == dilation:
        return clock
    return EmulatedClock(epoch, dilation)  # its timers go to the same process Lag


@map_errors
class ContainerManagerServicer(cm_grpc.ContainerManagerServicer):
    def __init__(self, host: NodeHost) -> None:
        self.host = host

    async def StartContainers(
        self, request: cm_pb.StartContainersRequest, context: Any
    ) -> cm_pb.StartContainersResponse:
        host = self.host
        now = host.clock.now()
        # All or nothing: a launch the RM did not grant as asked (terms, once, in time)
        # refuses the call before any starts.
        host.verifier.check([wire.signed_launch_from_pb(m) for m in request.launches], now)
        resp = cm_pb.StartContainersResponse()
        for m in request.launches:
            try:
                launch = wire.launch_from_pb(m)
                nm = host.nm(launch.node_id)
                if m.command:
                    launch = type(launch)(
                        launch.container_id,
                        launch.app_id,
                        launch.node_id,
                        launch.resources,
                        math.inf,
                    )
                nm.start_container(launch, now)
                host.launches[launch.container_id] = launch
                if host.node_secret is not None:
                    host.grant_tokens[launch.container_id] = m.container_token
                host.schedule_completion(launch.node_id, launch.duration_s)
                if host.event:
                    host.out_of_band(launch.node_id)
                if m.command:
                    await host.launch_process(
                        nm, launch.container_id, list(m.command), dict(m.environment)
                    )
                resp.started.append(launch.container_id)
            except Exception as e:  # one bad launch must not fail the others
                resp.failed[m.container_id] = str(e)
        return resp

    async def StopContainers(
        self, request: cm_pb.StopContainersRequest, context: Any
    ) -> cm_pb.StopContainersResponse:
        nm = self.host.nm(request.node_id)
        ids = list(request.container_ids)
        self.host.check_grants("StopContainers", ids, list(request.container_tokens))
        now = self.host.clock.now()
        stopped = [c for c in request.container_ids if self.host._stop(nm, c, now, by_am=True)]
        return cm_pb.StopContainersResponse(stopped=stopped)

    async def GetContainerStatuses(
        self, request: cm_pb.GetContainerStatusesRequest, context: Any
    ) -> cm_pb.GetContainerStatusesResponse:
        nm = self.host.nm(request.node_id)
        ids = list(request.container_ids)
        self.host.check_grants("GetContainerStatuses", ids, list(request.container_tokens))
        now = self.host.clock.now()
        resp = cm_pb.GetContainerStatusesResponse()
        for cid in request.container_ids:
            status = nm.container_status(cid, now)
            if status is None:
                resp.unknown.append(cid)
            else:
                resp.statuses.append(wire.status_to_pb(status))
        return resp

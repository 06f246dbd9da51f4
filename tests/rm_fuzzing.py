"""What the RM's robustness tests share: an RM serving in a thread of its own (as ``python
-m rm`` runs it: ``serve`` and the housekeeping task on one event loop), and the status
codes the RM's contract allows (test_rm_fuzz.py, test_rm_stalls.py,
test_fuzz_during_run.py)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import grpc

from rm.core.facade import ResourceManager
from rm.server.service import RmServer, RmSettings, serve
from treadle.registry import build

Code = grpc.StatusCode
OK, INVALID, NOT_FOUND, PRECONDITION = (
    Code.OK,
    Code.INVALID_ARGUMENT,
    Code.NOT_FOUND,
    Code.FAILED_PRECONDITION,
)
#: Every answer the contract allows an unauthenticated RM (``--insecure``) to give.
ANSWERS = frozenset({OK, INVALID, NOT_FOUND, PRECONDITION})
#: And an RM with identities and limits: refused callers and requests over a limit.
GUARDED_ANSWERS = ANSWERS | {
    Code.UNAUTHENTICATED,
    Code.PERMISSION_DENIED,
    Code.RESOURCE_EXHAUSTED,
}
#: A gRPC method's full name, for raw (possibly undecodable) payloads.
RAW_METHODS = (
    "/treadle.v1.ResourceTracker/RegisterNode",
    "/treadle.v1.ResourceTracker/NodeHeartbeat",
    "/treadle.v1.ResourceTracker/NodeHeartbeatBatch",
    "/treadle.v1.ApplicationMaster/RegisterApplicationMaster",
    "/treadle.v1.ApplicationMaster/Allocate",
    "/treadle.v1.ApplicationMaster/FinishApplicationMaster",
    "/treadle.v1.Client/SubmitApplication",
    "/treadle.v1.Client/GetApplicationReport",
    "/treadle.v1.Client/KillApplication",
    "/treadle.v1.Client/GetEvents",
)
HEARTBEAT_S = 1.0


class ServerThread:
    """``serve`` and the housekeeping task on an event loop running in another thread
    (by default an RM with policy ``drf``, policy faults logged)."""

    def __init__(self, rm: ResourceManager | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="rm", daemon=True)
        self.rm = rm or ResourceManager(
            build("policies", "drf"), heartbeat_s=HEARTBEAT_S, policy_errors="log"
        )
        self.server: grpc.aio.Server | None = None
        self.state: RmServer | None = None
        self.port = 0
        self._stop: asyncio.Event | None = None
        self._housekeeping: asyncio.Task[None] | None = None

    def run(self, coro: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> None:
        self.thread.start()
        self.run(self._start())

    async def _start(self) -> None:
        self.server, self.state, self.port = await serve(self.rm, RmSettings(), "127.0.0.1:0")
        self._stop = asyncio.Event()
        self._housekeeping = asyncio.create_task(self.state.housekeeping(self._stop))

    async def _shutdown(self) -> None:
        if self._stop is not None and self._housekeeping is not None:
            self._stop.set()
            self._housekeeping.cancel()
            await asyncio.gather(self._housekeeping, return_exceptions=True)
        if self.state is not None:  # managed AMs' launches (they fail: no NM listens)
            await asyncio.wait_for(asyncio.gather(*self.state._tasks, return_exceptions=True), 15)
        if self.server is not None:
            await self.server.stop(None)

    def stop(self) -> None:
        try:
            if self.thread.is_alive():
                self.run(self._shutdown())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()

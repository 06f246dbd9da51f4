"""What every gRPC process shares: error mapping, servers, channels, health, signals.

Errors are mapped to status codes here and nowhere else: servicers raise the project's
errors (or let the cores raise them) and ``map_errors`` turns each into one status. Every
channel stamps its calls with the client's wall clock and every ``map_errors`` handler
records how long its request queued before it ran (``treadle.live.lag``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import signal
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from treadle.errors import ConflictError, InvalidRequestError, NotFoundError, TreadleError
from treadle.live import lag

log = structlog.get_logger("rpc")

STATUS_OF: tuple[tuple[type[Exception], grpc.StatusCode], ...] = (
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (InvalidRequestError, grpc.StatusCode.INVALID_ARGUMENT),
    (ConflictError, grpc.StatusCode.FAILED_PRECONDITION),
    (TreadleError, grpc.StatusCode.FAILED_PRECONDITION),
)

T = TypeVar("T")

# Keep messages small; a batched heartbeat of thousands of NMs still fits.
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]


def status_for(exc: BaseException) -> grpc.StatusCode:
    for cls, code in STATUS_OF:
        if isinstance(exc, cls):
            return code
    return grpc.StatusCode.INTERNAL


def map_errors(cls: type[T]) -> type[T]:
    """Class decorator: every async RPC method of a servicer aborts with the status code
    of the error it raised (unexpected errors: INTERNAL, logged with a traceback), and
    records in ``lag.PROCESS`` how long its request queued (when the client stamped it)."""
    for name, fn in list(vars(cls).items()):
        if name.startswith("_") or not inspect.iscoroutinefunction(fn):
            continue
        setattr(cls, name, _wrap(fn))
    return cls


def _wrap(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(fn)
    async def method(self: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        _record_queueing(context)
        try:
            return await fn(self, request, context)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as e:
            code = status_for(e)
            if code is grpc.StatusCode.INTERNAL:
                log.error("rpc_failed", method=fn.__name__, exc_info=True)
                await context.abort(code, f"internal error: {type(e).__name__}: {e}")
            await context.abort(code, str(e))

    return method


def _record_queueing(context: grpc.aio.ServicerContext[Any, Any]) -> None:
    for key, value in context.invocation_metadata() or ():
        if key == lag.SENT_KEY:
            with contextlib.suppress(TypeError, ValueError):
                lag.PROCESS.record_rpc(float(value))
            return


class _Stamp(grpc.aio.UnaryUnaryClientInterceptor):
    """Adds the client's wall clock to every unary call (``lag.SENT_KEY``)."""

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        metadata = grpc.aio.Metadata(*(details.metadata or ()), lag.sent_stamp())
        return await continuation(details._replace(metadata=metadata), request)


def add_health(server: grpc.aio.Server, services: Iterable[str]) -> health.HealthServicer:
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    for name in ["", *services]:
        servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return servicer


def channel(address: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS, interceptors=[_Stamp()])


async def wait_ready(address: str, timeout_s: float) -> None:
    """Wait until a gRPC server answers its health check (raises TimeoutError)."""
    async with channel(address) as ch:
        stub: Any = health_pb2_grpc.HealthStub(ch)  # the stubs package omits its methods
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            try:
                resp = await stub.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
                if resp.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            if loop.time() > deadline:
                raise TimeoutError(f"no gRPC server answered at {address} in {timeout_s:g} s")
            await asyncio.sleep(0.1)


def install_stop_signals(stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT set ``stop`` so the process can shut down cleanly."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

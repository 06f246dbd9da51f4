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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from treadle.errors import (
    ConflictError,
    InputError,
    InvalidRequestError,
    LimitExceededError,
    NotFoundError,
    TreadleError,
)
from treadle.live import auth, fatal, lag

log = structlog.get_logger("rpc")

STATUS_OF: tuple[tuple[type[Exception], grpc.StatusCode], ...] = (
    (auth.UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
    (auth.PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (InvalidRequestError, grpc.StatusCode.INVALID_ARGUMENT),
    (LimitExceededError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (ConflictError, grpc.StatusCode.FAILED_PRECONDITION),
    (TreadleError, grpc.StatusCode.FAILED_PRECONDITION),
)

T = TypeVar("T")

# Keep messages small; a batched heartbeat of thousands of NMs still fits.
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    # A peer that went away (an RM being restarted) is tried again at least every second:
    # gRPC's default backoff grows to 120 s, and a role would stay silent that long.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def status_for(exc: BaseException) -> grpc.StatusCode:
    for cls, code in STATUS_OF:
        if isinstance(exc, cls):
            return code
    return grpc.StatusCode.INTERNAL


def map_errors(cls: type[T]) -> type[T]:
    """Class decorator: every async RPC method of a servicer aborts with the status code
    of the error it raised (unexpected errors: INTERNAL, logged with a traceback; a failed
    write: UNAVAILABLE, and the process stops, ``treadle.live.fatal``), and
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
            if fatal.PROCESS.note(e):  # the process is stopping (treadle.live.fatal)
                await context.abort(grpc.StatusCode.UNAVAILABLE, f"stopping: cannot write: {e}")
            code = status_for(e)
            if code in _REFUSALS:
                _log_refusal(fn.__name__, context, code, e)
            if code is grpc.StatusCode.INTERNAL:
                log.error("rpc_failed", method=fn.__name__, exc_info=True)
                await context.abort(code, f"internal error: {type(e).__name__}: {e}")
            await context.abort(code, str(e))

    return method


_REFUSALS = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


def _log_refusal(
    method: str, context: grpc.aio.ServicerContext[Any, Any], code: grpc.StatusCode, e: Exception
) -> None:
    """A refused call, logged with who the caller claimed to be and where it came from."""
    user = next((v for k, v in context.invocation_metadata() or () if k == auth.USER_KEY), "")
    log.warning(
        "rpc_refused", method=method, code=code.name, user=user, peer=context.peer(), reason=str(e)
    )


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


class _Sign(grpc.aio.UnaryUnaryClientInterceptor):
    """Signs the calls that need a user's signature (treadle.live.auth): every Client and
    Admin call, and a node's registration."""

    SIGNED = (
        "/treadle.v1.Client/",
        "/treadle.v1.Admin/",
        "/treadle.v1.ResourceTracker/RegisterNode",
    )

    def __init__(self, creds: auth.Credentials) -> None:
        self.creds = creds

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        method = details.method
        if isinstance(method, bytes):
            method = method.decode()
        if method.startswith(self.SIGNED):
            body = request.SerializeToString(deterministic=True)
            signed = auth.signed_metadata(self.creds, method, body, _STAMPER.next())
            metadata = grpc.aio.Metadata(*(details.metadata or ()), *signed)
            details = details._replace(metadata=metadata)
        return await continuation(details, request)


_STAMPER = auth.Stamper()


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: this process's certificate and key, and the CA that signs its peers'.
    With all three, both ends of every channel authenticate (mutual TLS)."""

    cert: str
    key: str
    ca: str

    def read(self) -> tuple[bytes, bytes, bytes]:
        out = []
        for flag, path in (
            ("--tls-cert", self.cert),
            ("--tls-key", self.key),
            ("--tls-ca", self.ca),
        ):
            try:
                out.append(Path(path).read_bytes())
            except OSError as e:
                raise InputError(flag, None, f"cannot read {path}: {e}") from None
        return out[0], out[1], out[2]


@dataclass(frozen=True)
class Peer:
    """How this process reaches a server: as whom (None: unsigned) and over TLS or not."""

    creds: auth.Credentials | None = None
    tls: TlsFiles | None = None


#: This process's identity and TLS (set by a role's ``__main__`` or a CLI command), and
#: per server address, the identity a cluster started here gave its own clients.
DEFAULT_PEER = Peer()
_PEERS: dict[str, Peer] = {}


def configure(peer: Peer) -> None:
    """Set this process's own identity and TLS for every channel it opens."""
    global DEFAULT_PEER
    DEFAULT_PEER = peer


def remember_peer(address: str, peer: Peer) -> None:
    """Channels to ``address`` use ``peer`` (a cluster started by this process)."""
    _PEERS[address] = peer


def forget_peer(address: str) -> None:
    _PEERS.pop(address, None)


def peer_for(address: str) -> Peer:
    return _PEERS.get(address, DEFAULT_PEER)


def channel(address: str, peer: Peer | None = None) -> grpc.aio.Channel:
    """A channel to ``address``: stamped for lag, signed and over TLS as ``peer`` says
    (default: what this process was told for that address, else its own identity)."""
    peer = peer if peer is not None else peer_for(address)
    interceptors: list[Any] = [_Stamp()]
    if peer.creds is not None:
        interceptors.append(_Sign(peer.creds))
    if peer.tls is None:
        return grpc.aio.insecure_channel(
            address, options=CHANNEL_OPTIONS, interceptors=interceptors
        )
    cert, key, ca = peer.tls.read()
    creds = grpc.ssl_channel_credentials(ca, key, cert)
    return grpc.aio.secure_channel(
        address, creds, options=CHANNEL_OPTIONS, interceptors=interceptors
    )


def bind(server: grpc.aio.Server, address: str, tls: TlsFiles | None) -> int:
    """Listen on ``address`` (over mutual TLS when ``tls`` is given); the bound port."""
    if tls is None:
        return server.add_insecure_port(address)
    cert, key, ca = tls.read()
    creds = grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca, require_client_auth=True
    )
    return server.add_secure_port(address, creds)


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

"""The RM's HTTP port (``python -m rm --http-port``): YARN's ResourceManager REST API
(``/ws/v1/cluster/...``, shapes in ``rm.server.http_yarn``), Prometheus metrics (``/metrics``,
``rm.server.http_metrics``) and a live page (``/``, also at YARN's ``/cluster``; assets in
``rm/server/web``), served by aiohttp on the RM's own event loop, so every read sees the RM
between two of its calls.

Who may call (``/ws/...``; the writes are ``rm.server.http_writes``):

- an unsecured RM (``--insecure``: YARN's "simple" mode, as its pseudo authentication):
  ``?user.name=NAME`` names the caller, trusted as sent; everyone reads, a write needs a
  name (401 without) and acts only on that user's applications (403 otherwise) in the
  queues whose ACLs admit it;
- a secured RM (an ACL): a request is signed as a gRPC call is (``treadle.live.auth``):
  headers ``X-Treadle-User``, ``X-Treadle-Ts`` (integer ns since the Unix epoch, fresh for
  that user) and ``X-Treadle-Sig``, the base64 HMAC-SHA256 under the user's key of
  ``"VERB <path?query as sent>\nUSER\nTS\n" + sha256hex(body)`` (``http_auth`` builds
  them). A ``user`` sees and changes its own applications, an ``admin`` all; nodes,
  queues and cluster metrics are for every user of the ACL. Unsigned or badly signed:
  401; a user reading or changing another's application: 403.

The page, its assets and ``/metrics`` (aggregates per queue and state, no user names)
are not signed; the page signs its own data requests in the browser (WebCrypto, which
browsers allow on https and on localhost). Errors on ``/ws/`` are YARN's JSON
``RemoteException`` with the matching status (400, 401, 403, 404, 405).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from rm.core.reports import AppDetail, QueueReport, app_details, node_reports, queue_reports
from rm.server import http_yarn as yj
from rm.server.http_metrics import RmMetrics
from rm.server.http_writes import Writes, add_routes as add_write_routes
from treadle.errors import InvalidRequestError, NotFoundError, TreadleError
from treadle.live import auth
from treadle.live.gate import ANYONE, Caller, Gate
from treadle.live.rpcutil import TlsFiles
from treadle.yarnids import format_node_id

if TYPE_CHECKING:
    from rm.server.service import RmServer

log = structlog.get_logger("rm")

WEB = Path(__file__).parent / "web"
ASSETS = {"app.js": "text/javascript", "style.css": "text/css", "index.html": "text/html"}
#: The utilization history the page draws: one sample a wall second, this many kept.
HISTORY_SAMPLES = 600
HEADERS = {"user": "X-Treadle-User", "ts": "X-Treadle-Ts", "sig": "X-Treadle-Sig"}

_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (auth.UnauthenticatedError, 401),
    (auth.PermissionDeniedError, 403),
    (NotFoundError, 404),
    (InvalidRequestError, 400),
)


def signed_target(verb: str, target: str) -> str:
    """What a signed HTTP request's canonical form names as its method."""
    return f"{verb} {target}"


class RmHttp:
    """The handlers over one RM server."""

    def __init__(self, server: RmServer, metrics: RmMetrics) -> None:
        self.s = server
        self.metrics = metrics
        self.history: deque[dict[str, Any]] = deque(maxlen=HISTORY_SAMPLES)
        self.writes = Writes(self)

    # ------------------------------------------------------------------ plumbing
    @property
    def gate(self) -> Gate:
        return self.s.gate

    def caller(self, request: web.Request) -> Caller:
        """Who reads (``identify`` of a request without a body)."""
        return self.identify(request, b"", write=False)

    def identify(self, request: web.Request, body: bytes, *, write: bool) -> Caller:
        """Who calls: on a secured RM the signer of the request and its ``body``; in simple
        mode the user ``?user.name=`` names (a write needs one), a read without one
        anyone's."""
        gate = self.gate
        if not gate.enabled:
            user = request.query.get("user.name", "")
            if user:
                return Caller(user, "user")
            if write:
                raise auth.UnauthenticatedError(
                    "name the caller: ?user.name=NAME (this RM runs YARN's simple mode)"
                )
            return ANYONE
        h = request.headers
        metadata = [(auth.USER_KEY, h.get(HEADERS["user"], "")),
                    (auth.TS_KEY, h.get(HEADERS["ts"], "")),
                    (auth.SIG_KEY, h.get(HEADERS["sig"], ""))]  # fmt: skip
        try:
            return gate.client(signed_target(request.method, request.raw_path), body, metadata)
        except auth.UnauthenticatedError as e:
            if "no credentials" in str(e):
                raise auth.UnauthenticatedError(
                    "this RM is secured: sign the request (headers "
                    f"{', '.join(HEADERS.values())}; see the docs, HTTP API)"
                ) from None
            raise

    def clock(self) -> yj.Clock:
        c = self.s.clock
        return yj.Clock(c.epoch, c.dilation, self.s.rm.cluster_timestamp)

    def apps(self) -> list[AppDetail]:
        rm = self.s.rm
        return app_details(rm.state, rm.scheduler.share_of)

    def visible(self, caller: Caller, apps: list[AppDetail]) -> list[AppDetail]:
        if caller.admin:
            return apps
        s = self.s
        return [
            a for a in apps if a.report.user == caller.user or s.administers(caller, a.report.queue)
        ]

    def queue_abs(self) -> dict[str, float]:
        return {name: q.abs_capacity for name, q in self.s.rm.state.queues.items()}

    def app_json(self, a: AppDetail, abs_of: dict[str, float]) -> dict[str, Any]:
        rm = self.s.rm
        return yj.app_json(
            a, self.clock(), self.s.now(), rm.state.capacity, abs_of.get(a.report.queue, 1.0)
        )

    # ------------------------------------------------------------------ handlers
    async def info(self, request: web.Request) -> web.Response:
        self.caller(request)
        return web.json_response(yj.cluster_info(self.clock(), self.s.rm.reports.policy_name))

    async def cluster_metrics(self, request: web.Request) -> web.Response:
        self.caller(request)
        return web.json_response(
            yj.cluster_metrics(self.s.rm.reports.cluster(), self.apps(), self.s.now())
        )

    async def list_apps(self, request: web.Request) -> web.Response:
        caller = self.caller(request)
        chosen = yj.AppFilter.parse(request.query).select(
            self.visible(caller, self.apps()), self.clock()
        )
        abs_of = self.queue_abs()
        body = {"app": [self.app_json(a, abs_of) for a in chosen]} if chosen else None
        return web.json_response({"apps": body})

    def find_app(self, request: web.Request) -> AppDetail:
        caller = self.caller(request)
        app_id = request.match_info["app_id"]
        for a in self.apps():
            if a.report.app_id == app_id:
                self.s.may_act_on(caller, a.report, "read the applications")
                return a
        raise NotFoundError(f"app with id: {app_id} not found")

    async def one_app(self, request: web.Request) -> web.Response:
        a = self.find_app(request)
        return web.json_response({"app": self.app_json(a, self.queue_abs())})

    async def app_attempts(self, request: web.Request) -> web.Response:
        return web.json_response(yj.app_attempts(self.find_app(request), self.clock()))

    async def nodes(self, request: web.Request) -> web.Response:
        self.caller(request)
        states = yj.parse_node_states(request.query.get("states", ""))
        clock = self.clock()
        rows = [
            yj.node_json(n, clock)
            for n in node_reports(self.s.rm.state)
            if not states or yj.node_state(n) in states
        ]
        return web.json_response({"nodes": {"node": rows} if rows else None})

    async def one_node(self, request: web.Request) -> web.Response:
        self.caller(request)
        node_id = request.match_info["node_id"]
        for n in node_reports(self.s.rm.state):
            if node_id in (n.node_id, format_node_id(n.node_id)):  # its NodeId, or its name
                return web.json_response({"node": yj.node_json(n, self.clock())})
        raise NotFoundError(f"nodeId, {node_id}, is not found")

    async def scheduler(self, request: web.Request) -> web.Response:
        self.caller(request)
        rm = self.s.rm
        accounts = price = None
        if rm.accounts.enabled:
            accounts, price = list(rm.accounts.infos()), rm.accounts.price()
        root: QueueReport = queue_reports(rm.state, rm.scheduler.share_of)
        return web.json_response(
            yj.scheduler_json(root, rm.state.capacity, rm.reports.policy_name, accounts, price)
        )

    async def utilization(self, request: web.Request) -> web.Response:
        """treadle's own: the last minutes of cluster utilization (the page's chart)."""
        self.caller(request)
        return web.json_response({"utilization": {"sample": list(self.history)}})

    async def prometheus(self, request: web.Request) -> web.Response:
        body = generate_latest(self.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def page(self, request: web.Request) -> web.FileResponse:
        return self._asset("index.html")

    async def static(self, request: web.Request) -> web.FileResponse:
        name = request.match_info["name"]
        if name not in ASSETS:
            raise web.HTTPNotFound(text=f"no asset {name!r}")
        return self._asset(name)

    def _asset(self, name: str) -> web.FileResponse:
        return web.FileResponse(
            WEB / name, headers={"Content-Type": ASSETS[name], "Cache-Control": "no-cache"}
        )

    # ------------------------------------------------------------------ sampling
    def sample(self) -> None:
        c = self.s.rm.reports.cluster()
        self.history.append(
            {
                "t": round(time.time() * 1000),
                "emulatedS": round(self.s.now(), 3),
                "capacity": dict(c.capacity.to_dict()),
                "used": dict(c.used.to_dict()),
                "runningApps": c.running_apps,
                "pendingContainers": c.pending_containers,
            }
        )

    async def sample_forever(self, every_s: float = 1.0) -> None:
        while True:
            with contextlib.suppress(Exception):  # a failed sample must not end the loop
                self.sample()
            await asyncio.sleep(every_s)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _yarn_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """On ``/ws/``: every error as YARN's RemoteException JSON with its status."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        if not request.path.startswith("/ws/") or e.status < 400:
            raise
        return _error(e.status, e.text or e.reason)
    except TreadleError as e:
        status = next((code for cls, code in _STATUS if isinstance(e, cls)), 400)
        if status in (401, 403):
            log.warning("http_refused", path=request.path, status=status, reason=str(e))
        return _error(status, str(e))
    except Exception as e:
        log.error("http_failed", path=request.path, exc_info=True)
        return _error(500, f"internal error: {type(e).__name__}: {e}")


def _error(status: int, message: str) -> web.Response:
    return web.json_response(yj.remote_exception(status, message), status=status)


def build_app(h: RmHttp) -> web.Application:
    app = web.Application(middlewares=[_yarn_errors])
    r = app.router
    ws = "/ws/v1/cluster"
    for path, fn in (
        (ws, h.info),
        (f"{ws}/", h.info),
        (f"{ws}/info", h.info),
        (f"{ws}/metrics", h.cluster_metrics),
        (f"{ws}/apps", h.list_apps),
        (f"{ws}/apps/{{app_id}}", h.one_app),
        (f"{ws}/apps/{{app_id}}/appattempts", h.app_attempts),
        (f"{ws}/nodes", h.nodes),
        (f"{ws}/nodes/{{node_id}}", h.one_node),
        (f"{ws}/scheduler", h.scheduler),
        ("/ws/v1/treadle/utilization", h.utilization),
        ("/metrics", h.prometheus),
        ("/", h.page),
        ("/cluster", h.page),
        ("/ui", h.page),
        ("/static/{name}", h.static),
    ):
        r.add_get(path, fn)
    add_write_routes(r, h.writes, ws)
    r.add_route("*", "/ws/{tail:.*}", _not_found)
    return app


async def _not_found(request: web.Request) -> web.Response:
    if request.method not in ("GET", "HEAD"):
        return _error(405, f"{request.method} {request.path} is not supported by this RM")
    return _error(404, f"no resource at {request.path}")


class HttpServer:
    """The running HTTP port: its URL, and how to stop it."""

    def __init__(self, runner: web.AppRunner, url: str, sampler: asyncio.Task[None]) -> None:
        self.runner = runner
        self.url = url
        self._sampler = sampler

    async def stop(self) -> None:
        self._sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._sampler
        await self.runner.cleanup()


async def start_http(
    server: RmServer, metrics: RmMetrics, host: str, port: int, tls: TlsFiles | None = None
) -> HttpServer:
    """Serve the RM's HTTP port on ``host:port`` (0: any free port) in this event loop;
    HTTPS with the RM's certificate when it serves gRPC over TLS (no client certificate
    asked: browsers and YARN tools have none)."""
    handlers = RmHttp(server, metrics)
    runner = web.AppRunner(build_app(handlers), access_log=None, handle_signals=False)
    await runner.setup()
    context = None
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls.cert, tls.key)
    site = web.TCPSite(runner, host or "0.0.0.0", port, ssl_context=context, reuse_port=False)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    bound = runner.addresses[0][1]
    scheme = "https" if context is not None else "http"
    shown = "127.0.0.1" if host in ("", "0.0.0.0") else host
    handlers.sample()
    sampler = asyncio.get_running_loop().create_task(handlers.sample_forever())
    return HttpServer(runner, f"{scheme}://{_bracket(shown)}:{bound}", sampler)


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host

"""``python -m rm``: the ResourceManager process."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

import structlog

from rm.core.ended import MAX_COMPLETED_APPLICATIONS
from rm.core.facade import ResourceManager
from rm.policy import Policy
from rm.server import memory
from rm.server.config import LIMITS, RmConfig, RmLimits, load_rm_config
from rm.server.runlog import ended_containers, open_containers
from rm.server.service import RmServer, RmSettings, serve
from rm.server.store import StateStore, StoredState, open_state, restore
from treadle import events as ev
from treadle.errors import TreadleError
from treadle.live import fatal, lag
from treadle.live.auth import AclFile, check_private, read_secret
from treadle.live.gate import Gate
from treadle.live.proc import (
    ArgumentParser,
    add_common,
    add_security,
    fail,
    host_port,
    security_from,
    setup_logging,
    write_port_file,
)
from treadle.live.rpcutil import TlsFiles, configure
from treadle.registry import build, parse_settings

if TYPE_CHECKING:
    import grpc

    from rm.server.http import HttpServer
    from rm.server.http_metrics import RmMetrics

PROG = "python -m rm"
LIMIT_HELP = {
    "max_tasks_per_job": "most tasks one submission may have",
    "max_stages_per_job": "most stages one submission may have",
    "max_request_bytes": "largest request (bytes), as received and as decoded",
    "max_pending_tasks": "most tasks of running applications not yet done",
    "max_parents_per_job": "most stage dependencies (parents named) one submission may have",
    "max_name_chars": "longest name (job, user, queue, stage) a submission may have",
}
log = structlog.get_logger("rm")


def parser() -> ArgumentParser:
    p = ArgumentParser(prog=PROG, description="Run a treadle ResourceManager.")
    p.add_argument("--policy", required=True, help="scheduling policy (treadle policies)")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="policy parameter"
    )
    p.add_argument("--listen", default="127.0.0.1:0", help="host:port to serve on (port 0: any)")
    p.add_argument("--advertise", help="host:port AM processes use to reach this RM")
    p.add_argument(
        "--http-port",
        type=int,
        metavar="PORT",
        help="serve YARN's REST API, /metrics and the live page on this port of the --listen "
        "host (0: any free port; default: no HTTP port)",
    )
    p.add_argument("--http-port-file", metavar="FILE", help="write the HTTP port's URL here")
    p.add_argument("--dilation", type=float, default=1.0, help="emulated seconds per wall second")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="queues, users and heartbeat_s (YAML; see the docs, Emulation)",
    )
    p.add_argument("--heartbeat-s", type=float, help="NM heartbeat interval (emulated s)")
    p.add_argument("--am-interval-s", type=float, default=1.0, help="AM allocate interval")
    p.add_argument(
        "--event",
        action="store_true",
        help="event mode (cluster.scheduling: event): also place asks after each Allocate",
    )
    p.add_argument("--expiry-intervals", type=int, default=10, help="NM/AM expiry, in intervals")
    p.add_argument("--max-am-attempts", type=int, default=2)
    p.add_argument(
        "--max-completed-applications",
        type=int,
        metavar="N",
        help="ended applications kept in memory and in the state store, the first to end "
        f"dropped first (default: the config file's, else {MAX_COMPLETED_APPLICATIONS}, YARN's)",
    )
    p.add_argument("--events", help="stream the event log to this JSON-lines file")
    p.add_argument(
        "--state-dir",
        metavar="DIR",
        help="keep what a restart needs in DIR/rm-state.sqlite and reload it on start "
        "(the docs: Emulation, RM restart); give --events too, so the event log continues",
    )
    p.add_argument(
        "--fresh-state",
        action="store_true",
        help="set aside a state store or event log that is refused (empty, corrupt, another "
        "cluster's, its WAL lost, cut short) and start a new run",
    )
    g = p.add_argument_group("limits (default: the config file's, else RmLimits')")
    for name in LIMITS:
        g.add_argument("--" + name.replace("_", "-"), type=int, metavar="N", help=LIMIT_HELP[name])
    g = p.add_argument_group("identity (see the docs, Security)")
    g.add_argument("--acl", metavar="FILE", help="users: 'user role key' lines, reloaded on change")
    g.add_argument("--node-secret-file", metavar="FILE", help="the secret NMs register with")
    g.add_argument(
        "--replay-window-s",
        type=float,
        default=30.0,
        help="how far out of order a user's concurrent calls may arrive (wall s)",
    )
    g.add_argument(
        "--clock-skew-s",
        type=float,
        default=300.0,
        help="how far ahead of the RM's clock a signed call's timestamp may be (wall s; "
        "Kerberos' default)",
    )
    g.add_argument(
        "--insecure", action="store_true", help="accept every call unauthenticated (tests only)"
    )
    add_security(p, identity=False)
    add_common(p)
    return p


def _limits_from(args: argparse.Namespace, limits: RmLimits) -> RmLimits:
    """The config file's limits, with the --max-* flags given."""
    given = {n: getattr(args, n) for n in LIMITS if getattr(args, n) is not None}
    for name, value in given.items():
        low = {"max_request_bytes": 1024, "max_parents_per_job": 0}.get(name, 1)
        if not low <= value <= 2**31 - 1:
            fail(PROG, f"--{name.replace('_', '-')} must be between {low} and 2**31-1, got {value}")
    return dataclasses.replace(limits, **given)


def _configuration(args: argparse.Namespace) -> tuple[Policy, RmConfig]:
    """The policy, and the RM's configuration: the --config file's (or the defaults) with
    the flags given (``--heartbeat-s``, the limits, ``--max-completed-applications``)."""
    try:
        policy = build("policies", args.policy, parse_settings(args.set))
        config = load_rm_config(args.config) if args.config else RmConfig()
    except TreadleError as e:
        fail(PROG, str(e))
    kept = args.max_completed_applications
    if kept is None:
        kept = config.max_completed_applications
    elif not 0 <= kept <= 2**31 - 1:
        fail(PROG, f"--max-completed-applications must be between 0 and 2**31-1, got {kept}")
    return policy, dataclasses.replace(
        config,
        heartbeat_s=args.heartbeat_s or config.heartbeat_s,
        limits=_limits_from(args, config.limits),
        max_completed_applications=kept,
    )


def _gate(args: argparse.Namespace) -> Gate:
    if args.insecure:
        if args.acl or args.node_secret_file:
            fail(PROG, "--insecure excludes --acl and --node-secret-file")
        log.warning("rm_insecure", note="every call is accepted without authentication")
        return Gate.open()
    if not args.acl or not args.node_secret_file:
        fail(
            PROG,
            "the RM needs --acl FILE and --node-secret-file FILE (treadle cluster up makes "
            "them), or --insecure to accept unauthenticated calls",
        )
    if not args.replay_window_s >= 0:
        fail(PROG, f"--replay-window-s must be >= 0, got {args.replay_window_s}")
    if not 0 <= args.clock_skew_s < 10**9:
        fail(PROG, f"--clock-skew-s must be >= 0, got {args.clock_skew_s}")
    try:
        check_private(args.acl, "ACL file")
        check_private(args.node_secret_file, "node secret")
        acl = AclFile(args.acl)
        secret = read_secret(args.node_secret_file, "node secret")
    except TreadleError as e:
        fail(PROG, str(e))
    return Gate(acl, secret, replay_window_s=args.replay_window_s, clock_skew_s=args.clock_skew_s)


async def main_async(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    os.umask(0o077)  # the store, event log and port files are the RM's alone (issue 26)
    setup_logging(args.log_level, PROG)
    if not args.dilation > 0:
        fail(PROG, f"--dilation must be > 0, got {args.dilation}")
    if args.expiry_intervals < 1 or args.max_am_attempts < 1:
        fail(PROG, "--expiry-intervals and --max-am-attempts must be >= 1")
    peer = security_from(PROG, args)
    configure(peer)
    policy, config = _configuration(args)
    heartbeat_s, limits = config.heartbeat_s or 1.0, config.limits
    if not heartbeat_s > 0:
        fail(PROG, f"--heartbeat-s must be > 0, got {heartbeat_s}")
    gate = _gate(args)
    if args.http_port is not None and not 0 <= args.http_port <= 65535:
        fail(PROG, f"--http-port must be between 0 and 65535, got {args.http_port}")
    try:
        if args.events and os.path.exists(args.events):
            check_private(args.events, "event log")
        store, stored = None, None
        previous: list[ev.Record] = []
        if args.state_dir:
            store, stored, previous = open_state(
                args.state_dir, args.events, cluster=gate.cluster_id, fresh=args.fresh_state
            )
    except TreadleError as e:
        fail(PROG, str(e))
    sink = open(args.events, "a", buffering=1, encoding="utf-8") if args.events else None  # noqa: SIM115
    log_ = ev.EventLog(sink)
    log_.records.extend(previous)  # already in the file
    rm = ResourceManager(
        policy,
        queues=config.queues,
        users=config.users,
        event_log=log_,
        heartbeat_s=heartbeat_s,
        node_expiry_s=args.expiry_intervals * heartbeat_s,
        am_expiry_s=args.expiry_intervals * args.am_interval_s,
        max_am_attempts=args.max_am_attempts,
        policy_errors="log",
        max_completed_applications=config.max_completed_applications,
        # YARN's clusterTimeStamp: this RM's start (a restarted one's too, as YARN's; the
        # applications it recovers keep their ids, and their numbers go on).
        cluster_timestamp=round(time.time() * 1000),
    )
    settings = RmSettings(
        dilation=args.dilation,
        am_interval_s=args.am_interval_s,
        tls=peer.tls,
        limits=limits,
        event=args.event,
    )
    restarted = _restored(args, store, stored, rm, gate, settings)
    metrics = _metrics() if args.http_port is not None else None
    hooks = [metrics.interceptor()] if metrics is not None else []
    try:
        server, state, port = await serve(rm, settings, args.listen, gate, hooks, store=store)
    except (OSError, RuntimeError) as e:
        fail(PROG, f"cannot serve on {args.listen}: {e}", 1)
    if restarted:
        rm.recovery.await_containers(open_containers(log_.records), state.now())
        rm.recovery.redeliver_ended(ended_containers(log_.records))
    http = await _start_http(args, state, metrics, peer.tls) if metrics is not None else None
    address = host_port(args.listen, port)
    settings.advertise = args.advertise or address
    if not restarted:  # a restarted RM's stream goes on
        _stream_started(log_, args, state.now(), heartbeat_s)
    await _serve_until_stopped(args, server, state, http, address)
    if fatal.PROCESS.error is not None:
        return _stopped_by_write_error()
    log_.flush()
    if sink is not None:
        sink.close()
    if store is not None:
        store.close()
    log.info("rm_stopped", events=len(log_), lag=lag.PROCESS.summary())
    return 0


def _stopped_by_write_error() -> int:
    """The RM's end after a write it could not make: one line on stderr (plain, in case
    the log cannot be written either) and EX_IOERR; nothing more is written (the event
    log and the store keep what they had: a restart reloads it)."""
    with contextlib.suppress(OSError):
        failed = fatal.PROCESS
        log.error("rm_write_failed", error=str(failed.error), at=failed.at, exit=fatal.EX_IOERR)
    with contextlib.suppress(OSError):
        print(fatal.PROCESS.line(PROG), file=sys.stderr, flush=True)
    return fatal.EX_IOERR


def _fatal_if_write_error(task: asyncio.Task[None]) -> None:
    """A background loop that died of a failed write stops the RM (``treadle.live.fatal``)."""
    if not task.cancelled() and task.exception() is not None:
        fatal.PROCESS.note(task.exception())  # type: ignore[arg-type]


def _metrics() -> RmMetrics:
    """The HTTP port's metrics (aiohttp and prometheus_client: imported only when asked
    for)."""
    from rm.server.http_metrics import RmMetrics

    return RmMetrics()


def _stream_started(log_: ev.EventLog, args: argparse.Namespace, now: float, hb: float) -> None:
    """The RM's own event stream starts when it does; nodes join later (a replay driver
    writes the run's record with the cluster it found)."""
    log_.run_started(
        now,
        policy=args.policy,
        workload=None,
        mode="local",
        seed=None,
        dilation=args.dilation,
        heartbeat_s=hb,
        nodes=0,
        capacity={},
    )


def _restored(
    args: argparse.Namespace,
    store: StateStore | None,
    stored: StoredState | None,
    rm: ResourceManager,
    gate: Gate,
    settings: RmSettings,
) -> bool:
    """Reload what the state store kept of a previous run, if it kept any; whether it did
    (the clock then goes on from the stored one)."""
    if store is None or stored is None or stored.empty:
        return False
    settings.epoch = restore(stored, rm, gate, args.dilation)
    store.save_restarts(stored.restarts + 1)
    log.info(
        "rm_restored",
        state_dir=args.state_dir,
        restarts=stored.restarts + 1,
        running=len(rm.state.apps),
        ended=len(rm.state.finished),
        nodes_known=len(stored.node_tokens),
    )
    return True


async def _start_http(
    args: argparse.Namespace, state: RmServer, metrics: RmMetrics, tls: TlsFiles | None
) -> HttpServer:
    """The HTTP port (YARN's REST API, /metrics, the live page) on the --listen host."""
    from rm.server.http import start_http

    metrics.attach(state)
    host = args.listen.rsplit(":", 1)[0].strip("[]")
    try:
        http = await start_http(state, metrics, host, args.http_port, tls)
    except OSError as e:
        fail(PROG, f"--http-port: cannot serve on {host}:{args.http_port}: {e}", 1)
    write_port_file(args.http_port_file, http.url)
    return http


async def _serve_until_stopped(
    args: argparse.Namespace,
    server: grpc.aio.Server,
    state: RmServer,
    http: HttpServer | None,
    address: str,
) -> None:
    """Serve, with the housekeeping loop, until a stop signal; then stop serving and write
    what the state store still lacks."""
    stop = asyncio.Event()
    from treadle.live.rpcutil import install_stop_signals

    install_stop_signals(stop)
    fatal.PROCESS.on_fatal(stop.set)  # a failed write stops the RM at once
    housekeeping = asyncio.create_task(state.housekeeping(stop))
    housekeeping.add_done_callback(_fatal_if_write_error)
    lag_log = asyncio.create_task(lag.log_periodically(log, stop))
    write_port_file(args.port_file, address)
    # Start-up objects never die: keep them out of every collection, so a full collection
    # does not stall heartbeats for tens of milliseconds (measured in the heartbeat bench).
    gc.collect()
    gc.freeze()
    log.info(
        "rm_started",
        address=address,
        http=http.url if http else None,
        policy=args.policy,
        dilation=args.dilation,
    )
    await stop.wait()
    failed = fatal.PROCESS.error is not None
    with contextlib.suppress(OSError):
        log.info("rm_stopping")
    if http is not None:
        await http.stop()
    await server.stop(grace=0.0 if failed else 2.0)  # after a failed write: at once
    housekeeping.cancel()
    lag_log.cancel()
    if not failed:
        state.persist()


def main() -> None:
    # A write past a file size limit (RLIMIT_FSIZE) raises SIGXFSZ, whose default action
    # kills the process without a word; ignored (as CPython does at start-up), the write
    # fails with EFBIG instead, and the RM ends with a line naming the file (fatal.py).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    memory.few_arenas()
    sys.exit(asyncio.run(main_async(sys.argv[1:])))


if __name__ == "__main__":
    main()

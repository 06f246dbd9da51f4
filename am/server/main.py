"""``python -m am``: one ApplicationMaster, or the host of a cluster's unmanaged AMs.

With ``--app-id`` the process runs one AM attempt (this is how an NM runs a managed AM in
its container) and exits 0 when the job SUCCEEDED, 1 otherwise (failed, killed, stopped
by a signal, or the RM refused or was unreachable). Without it the process hosts the
unmanaged AMs: it polls the RM for applications awaiting an AM and runs each one; it
exits 0 on SIGTERM/SIGINT. Bad arguments exit 2. ``--port-file`` receives the line
``ready`` once the RM has answered (an AM serves nothing, so there is no port to publish).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

import grpc
import structlog

from treadle.errors import TreadleError
from treadle.live import lag
from treadle.live.auth import ENV_AM_TOKEN
from treadle.live.proc import (
    ArgumentParser,
    add_common,
    add_security,
    fail,
    security_from,
    setup_logging,
    write_port_file,
)
from treadle.live.rpcutil import configure, install_stop_signals, wait_ready

PROG = "python -m am"
log = structlog.get_logger("am")


def parser() -> ArgumentParser:
    p = ArgumentParser(
        prog=PROG, description="Run one ApplicationMaster, or host the unmanaged AMs."
    )
    p.add_argument("--rm", required=True, help="the RM's host:port")
    p.add_argument("--app-id", help="run the AM of this application only (a managed AM)")
    p.add_argument("--poll-s", type=float, default=0.2, help="host: wall seconds between RM polls")
    p.add_argument("--max-concurrent", type=int, default=10_000, help="host: most AMs run at once")
    p.add_argument(
        "--event",
        action="store_true",
        help="event mode (cluster.scheduling: event): AMs also call at once on news",
    )
    p.add_argument("--rm-wait-s", type=float, default=60.0, help="how long to wait for the RM")
    add_security(p, identity=True)
    add_common(p)
    return p


def _check_address(address: str) -> str | None:
    """None if ``address`` looks like a gRPC target, else what is wrong with it."""
    if address.startswith(("unix:", "dns:", "ipv4:", "ipv6:")):
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return f"--rm must be host:port, got {address!r}"
    return None


async def _until_ready(address: str, timeout_s: float, stop: asyncio.Event) -> bool:
    """Wait for the RM's health check; False if ``stop`` was set first."""
    ready = asyncio.ensure_future(wait_ready(address, timeout_s))
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((ready, stopped), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not ready.done():
            ready.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ready
    if not ready.done() or ready.cancelled():
        return False
    ready.result()  # raises TimeoutError when the RM never answered
    return True


async def main_async(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    setup_logging(args.log_level, PROG)
    problem = _check_address(args.rm)
    if problem:
        fail(PROG, problem)
    if args.app_id is not None and not args.app_id.strip():
        fail(PROG, "--app-id must not be empty")
    if not args.poll_s > 0:
        fail(PROG, f"--poll-s must be > 0, got {args.poll_s}")
    if not args.rm_wait_s >= 0:
        fail(PROG, f"--rm-wait-s must be >= 0, got {args.rm_wait_s}")
    if args.max_concurrent < 1:
        fail(PROG, f"--max-concurrent must be >= 1, got {args.max_concurrent}")
    configure(security_from(PROG, args))
    stop = asyncio.Event()
    install_stop_signals(stop)
    try:
        if not await _until_ready(args.rm, args.rm_wait_s, stop):
            return 1 if args.app_id else 0
    except TimeoutError:
        fail(PROG, f"cannot reach the RM at {args.rm} within {args.rm_wait_s:g} s", 1)
    # Imported only now, so that a bad argument is reported without loading the runtime.
    from am.server.service import run_am_host, run_application_master
    from treadle.messages import FinalStatus

    write_port_file(args.port_file, "ready")
    if args.app_id is None:
        log.info("am_host_started", rm=args.rm, poll_s=args.poll_s)
        lag_log = asyncio.create_task(lag.log_periodically(log, stop))
        await run_am_host(
            args.rm,
            poll_s=args.poll_s,
            stop=stop,
            max_concurrent=args.max_concurrent,
            event=args.event,
        )
        lag_log.cancel()
        log.info("am_host_stopped", lag=lag.PROCESS.summary())
        return 0
    try:
        token = os.environ.get(ENV_AM_TOKEN, "")
        status = await run_application_master(
            args.rm, args.app_id, am_token=token, stop=stop, event=args.event
        )
    except TreadleError as e:
        fail(PROG, str(e), 1)
    except grpc.aio.AioRpcError as e:
        fail(PROG, f"RM call failed: {e.code().name}: {e.details()}", 1)
    return 0 if status is FinalStatus.SUCCEEDED else 1


def main() -> None:
    code = asyncio.run(main_async(sys.argv[1:]))
    # The work is done and every channel is closed. Interpreter teardown (gRPC's core
    # shutdown) takes ~0.1 s with SIGTERM back at its default action, and the NM stops the
    # container of an AM that has just finished its job: exit now, so the status is ours.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()

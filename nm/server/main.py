"""``python -m nm``: a process hosting one or many NodeManagers."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pwd
import sys
from pathlib import Path

import grpc
import structlog

from nm.server.service import Account, ContainerManagerServicer, NodeHost
from treadle.errors import InvalidRequestError, TreadleError
from treadle.live import lag
from treadle.live.auth import check_private, read_secret
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
from treadle.live.rpcutil import (
    CHANNEL_OPTIONS,
    add_health,
    bind,
    configure,
    install_stop_signals,
    wait_ready,
)
from treadle.model import NodeSpec
from treadle.resources import Resources
from treadle.rpc.v1 import container_manager_pb2_grpc as cm_grpc

PROG = "python -m nm"
TOKEN_FILE = "node-tokens.json"
#: Whom a root NM host runs AM containers as, unless --run-as says otherwise.
DEFAULT_RUN_AS = "nobody"
log = structlog.get_logger("nm")


def parser() -> ArgumentParser:
    p = ArgumentParser(prog=PROG, description="Run NodeManagers that heartbeat to an RM.")
    p.add_argument("--rm", required=True, help="the RM's host:port")
    p.add_argument("--count", type=int, default=1, help="how many NMs this process hosts")
    p.add_argument(
        "--resources",
        default="vcores=8,memory_mb=16384",
        help="each NM's capacity as name=amount,name=amount",
    )
    p.add_argument("--rack", default="default-rack")
    p.add_argument("--id-prefix", default="node", help="node ids are PREFIX1, PREFIX2, ...")
    p.add_argument("--first-index", type=int, default=1)
    p.add_argument(
        "--nodes-json", help="JSON list of {node_id, resources, rack} (overrides --count)"
    )
    p.add_argument("--listen", default="127.0.0.1:0", help="ContainerManager host:port")
    p.add_argument("--advertise", help="host:port AMs use to reach this process")
    p.add_argument("--batch", action="store_true", help="send all NMs' heartbeats in one call")
    p.add_argument(
        "--event",
        action="store_true",
        help="event mode (cluster.scheduling: event): report a start out of band too",
    )
    p.add_argument("--rm-wait-s", type=float, default=60.0, help="how long to wait for the RM")
    p.add_argument(
        "--node-secret-file",
        metavar="FILE",
        help="the cluster's node secret (see the docs, Security)",
    )
    p.add_argument(
        "--work-dir",
        metavar="DIR",
        help="where this host keeps its node tokens (node-tokens.json, mode 0600), so "
        "that it can register its nodes again after a restart",
    )
    p.add_argument(
        "--run-as",
        metavar="USER",
        help="the account AM containers' processes run as (default: nobody when this "
        "process runs as root, else its own; root only if named)",
    )
    p.add_argument(
        "--insecure", action="store_true", help="register unsigned, start unsigned containers"
    )
    add_security(p, identity=False)
    add_common(p)
    return p


def parse_resources(text: str, where: str) -> Resources:
    amounts: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep:
            raise InvalidRequestError(f"{where}: expected name=amount, got {part!r}")
        try:
            amounts[name.strip()] = float(value)
        except ValueError:
            raise InvalidRequestError(f"{where}.{name.strip()}: not a number: {value!r}") from None
    try:
        res = Resources.parse(amounts, where)
    except ValueError as e:
        raise InvalidRequestError(str(e)) from None
    if res.is_zero():
        raise InvalidRequestError(f"{where}: a node needs some resources")
    return res


def work_dir(text: str) -> Path:
    path = Path(text)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InvalidRequestError(f"--work-dir {path}: {e}") from None
    return path


def run_as(name: str | None) -> Account | None:
    """Whom AM containers run as: ``name``; by default nobody if this process is root
    (a container must not hold the host's privileges), else this process's own account
    (None). Another account than one's own needs root."""
    euid = os.geteuid()
    if name is None:
        if euid != 0:
            return None
        name = DEFAULT_RUN_AS
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise InvalidRequestError(f"--run-as {name}: no such account on this host") from None
    if entry.pw_uid == euid:
        return None
    if euid != 0:
        raise InvalidRequestError(
            f"--run-as {name}: only a host running as root may run containers as another account"
        )
    return Account(name, entry.pw_uid, entry.pw_gid)


def _own_account() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # an account without a passwd entry (a container's arbitrary uid)
        return str(os.geteuid())


def node_specs(a: argparse.Namespace) -> list[NodeSpec]:
    if a.nodes_json:
        path = Path(a.nodes_json)
        try:
            rows = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise InvalidRequestError(f"--nodes-json {path}: {e}") from None
        if not isinstance(rows, list) or not rows:
            raise InvalidRequestError(f"--nodes-json {path}: expected a non-empty list")
        out = []
        for i, r in enumerate(rows):
            if not isinstance(r, dict) or "node_id" not in r or "resources" not in r:
                raise InvalidRequestError(f"--nodes-json {path}: [{i}] needs node_id and resources")
            try:
                res = Resources.parse(r["resources"], f"[{i}].resources")
            except (ValueError, AttributeError) as e:
                raise InvalidRequestError(f"--nodes-json {path}: {e}") from None
            out.append(NodeSpec(str(r["node_id"]), res, str(r.get("rack", "default-rack"))))
        return out
    count: int = a.count
    if count < 1:
        raise InvalidRequestError(f"--count must be >= 1, got {count}")
    res = parse_resources(a.resources, "--resources")
    first: int = a.first_index
    prefix: str = a.id_prefix
    return [NodeSpec(f"{prefix}{first + i}", res, a.rack) for i in range(count)]


async def main_async(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    os.umask(0o077)  # what this host writes (its node tokens, port file) is its own
    setup_logging(args.log_level, PROG)
    peer = security_from(PROG, args)
    configure(peer)
    if args.insecure == bool(args.node_secret_file):
        fail(PROG, "give --node-secret-file FILE, or --insecure for an RM without identity checks")
    try:
        specs = node_specs(args)
        secret = None
        if args.node_secret_file:
            check_private(args.node_secret_file, "node secret")
            secret = read_secret(args.node_secret_file, "node secret")
        token_file = work_dir(args.work_dir) / TOKEN_FILE if args.work_dir else None
        if token_file is not None and token_file.exists():
            check_private(token_file, "node token file")
        account = run_as(args.run_as)
    except TreadleError as e:
        fail(PROG, str(e))
    server = grpc.aio.server(options=CHANNEL_OPTIONS)
    port = bind(server, args.listen, peer.tls)
    address = host_port(args.listen, port)
    host = NodeHost(
        specs,
        args.rm,
        batch=args.batch,
        address=args.advertise or address,
        node_secret=secret,
        token_file=token_file,
        run_as=account,
        event=args.event,
    )
    cm_grpc.add_ContainerManagerServicer_to_server(ContainerManagerServicer(host), server)
    add_health(server, ["treadle.v1.ContainerManager"])
    await server.start()
    stop = asyncio.Event()
    install_stop_signals(stop)
    try:
        await wait_ready(args.rm, args.rm_wait_s)
        await host.connect()
        await host.register()
    except (TimeoutError, grpc.aio.AioRpcError) as e:
        detail = e.details() if isinstance(e, grpc.aio.AioRpcError) else str(e)
        await server.stop(0)
        fail(PROG, f"cannot register with the RM at {args.rm}: {detail}", 1)
    write_port_file(args.port_file, address)
    am_account = account.name if account is not None else _own_account()
    if am_account == "root":
        log.warning("am_containers_run_as_root", note="--run-as root: AM processes hold root")
    log.info("nm_started", nodes=len(specs), address=address, batch=args.batch, run_as=am_account)
    loop_task = asyncio.create_task(host.heartbeat_loop(stop))
    lag_log = asyncio.create_task(lag.log_periodically(log, stop))
    await stop.wait()
    loop_task.cancel()
    lag_log.cancel()
    await host.close()
    await server.stop(grace=1.0)
    log.info("nm_stopped", lag=lag.PROCESS.summary())
    return 0


def main() -> None:
    sys.exit(asyncio.run(main_async(sys.argv[1:])))


if __name__ == "__main__":
    main()

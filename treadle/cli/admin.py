"""``treadle admin``: Dynamic Priority's account calls on a live RM (its Admin service).

Each command signs as the user the other client commands do (``--user``/``--key-file``,
``$TREADLE_USER`` with ``$TREADLE_KEY_FILE``, or the driver of the cluster recorded in
``--cluster-dir``); with none of them the call goes unsigned, which only ``price`` may.
A refused or failed call is one line on stderr and exit 1; a malformed argument, exit 2.
Those options are declared once (``admin_command`` adds them to every command).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.models import ArgumentInfo

from treadle.cli.cluster import (
    DEFAULT_CLUSTER_DIR,
    ClusterDirOpt,
    KeyFileOpt,
    TlsCaOpt,
    TlsCertOpt,
    TlsKeyOpt,
    UserOpt,
    identify,
)
from treadle.cli.common import errors, fail, out, say
from treadle.errors import TreadleError

admin_app = typer.Typer(
    no_args_is_help=True,
    help="Dynamic Priority accounts on a live RM: price, queue info, spending rates, budgets.",
)

RmOpt = Annotated[str, typer.Option("--rm", help="The RM's host:port.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
QueueArg = Annotated[str, typer.Argument(help="A leaf queue (a user's queue is named after it).")]
TIMEOUT_S = 10.0
#: A negative amount ("-5") is an argument the RM refuses, not an unknown option.
AMOUNTS = {"ignore_unknown_options": True}


class Target:
    """The RM to call, this process's channels to it signed as ``identify`` chooses."""

    def __init__(
        self,
        rm: str,
        user: str | None,
        key_file: str | None,
        tls: tuple[str | None, str | None, str | None],
        cluster_dir: Path,
    ) -> None:
        self.rm = rm
        identify(rm, user, key_file, tls, cluster_dir)

    def call(self, what: str, method: str, request: Any) -> Any:
        """Call ``Admin.method``; a refusal or failure becomes one TreadleError line."""
        from treadle.cluster.driver import run_async

        return run_async(self._call(what, method, request))

    async def _call(self, what: str, method: str, request: Any) -> Any:
        import grpc

        from treadle.live.rpcutil import channel
        from treadle.rpc.v1 import admin_pb2_grpc as admin_grpc

        async with channel(self.rm) as ch:
            stub: Any = admin_grpc.AdminStub(ch)
            try:
                return await getattr(stub, method)(request, timeout=TIMEOUT_S)
            except grpc.aio.AioRpcError as e:
                raise _refusal(what, self.rm, e) from None


def _refusal(what: str, address: str, e: Any) -> TreadleError:
    import grpc

    code = e.code()
    name = code.name if code is not None else "UNKNOWN"
    detail = (e.details() or "").splitlines()[0] if e.details() else ""
    if code == grpc.StatusCode.UNAVAILABLE:
        return TreadleError(f"cannot reach the RM at {address}: {detail or name}")
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return TreadleError(
            f"{what} refused by the RM {address}: {name}: {detail} (sign as a user of its "
            "ACL: --user and --key-file, or $TREADLE_USER with $TREADLE_KEY_FILE)"
        )
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return TreadleError(f"{what} refused by the RM {address}: {name}: {detail}")
    return TreadleError(f"{what} failed at the RM {address}: {name}: {detail}")


def _number(text: str, name: str) -> float:
    """A command-line amount; the RM judges its range (finite, >= 0)."""
    try:
        return float(text)
    except ValueError:
        fail(f"{name} must be a number, got {text!r}", 2)


def _info(q: Any) -> dict[str, Any]:
    return {
        "queue": q.queue,
        "budget": q.budget,
        "spending_rate": q.spending_rate,
        "share": q.share,
        "used": q.used,
        "pending": q.pending,
    }


def _info_line(i: dict[str, Any]) -> str:
    return (
        f"{i['queue']}: budget {i['budget']:g}, spending rate {i['spending_rate']:g}, "
        f"share {i['share']:.4g}, used {i['used']}, pending {i['pending']}"
    )


def _show(data: dict[str, Any], as_json: bool, text: Callable[[dict[str, Any]], str]) -> None:
    if as_json:
        out.print_json(json.dumps(data))
    else:
        say(text(data))


@dataclass(frozen=True)
class Connection:
    """The RM to call and as whom: the options every admin command takes, declared once
    (``RM_OPTION``, ``SIGNING_OPTIONS``) and handed to each command whole by
    ``admin_command``."""

    rm: str
    user: str | None
    key_file: str | None
    tls_cert: str | None
    tls_key: str | None
    tls_ca: str | None
    cluster_dir: Path

    def target(self) -> Target:
        """The RM, its calls signed (a bad choice of identity fails here, one line)."""
        tls = (self.tls_cert, self.tls_key, self.tls_ca)
        return Target(self.rm, self.user, self.key_file, tls, self.cluster_dir)


KEYWORD = inspect.Parameter.KEYWORD_ONLY


def _option(
    name: str, annotation: Any, default: Any = inspect.Parameter.empty
) -> inspect.Parameter:
    return inspect.Parameter(name, KEYWORD, annotation=annotation, default=default)


#: The connection options as a command's parameters: ``--rm`` stands after the command's
#: arguments, whom to sign as after its own options (the order of its ``--help``).
RM_OPTION = _option("rm", RmOpt)
SIGNING_OPTIONS = (
    _option("user", UserOpt, None),
    _option("key_file", KeyFileOpt, None),
    _option("tls_cert", TlsCertOpt, None),
    _option("tls_key", TlsKeyOpt, None),
    _option("tls_ca", TlsCaOpt, None),
    _option("cluster_dir", ClusterDirOpt, DEFAULT_CLUSTER_DIR),
)
CONNECTION = tuple(f.name for f in dataclasses.fields(Connection))

Command = Callable[..., None]


def admin_command(name: str, **settings: Any) -> Callable[[Command], Command]:
    """Register ``command(conn, ...)`` as ``treadle admin NAME``: its own arguments and
    options, and the connection options, which come to it as one ``Connection``."""

    def register(command: Command) -> Command:
        hints = typing.get_type_hints(command, include_extras=True)
        own = [
            p.replace(kind=KEYWORD, annotation=hints[p.name])
            for p in inspect.signature(command).parameters.values()
            if p.name != "conn"
        ]
        arguments = [p for p in own if _is_argument(p.annotation)]
        options = [p for p in own if not _is_argument(p.annotation)]
        params = [*arguments, RM_OPTION, *options, *SIGNING_OPTIONS]

        @functools.wraps(command)
        def run(**given: Any) -> None:
            conn = Connection(**{key: given.pop(key) for key in CONNECTION})
            command(conn, **given)

        run.__annotations__ = {p.name: p.annotation for p in params}
        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        admin_app.command(name, **settings)(run)
        return command

    return register


def _is_argument(annotation: Any) -> bool:
    return any(isinstance(m, ArgumentInfo) for m in getattr(annotation, "__metadata__", ()))


@admin_command("price")
def price(conn: Connection, as_json: JsonOpt = False) -> None:
    """The current price and the RM's time (anyone, signed or not).

    The price is the sum of the spending rates of the eligible queues."""
    from treadle.rpc.v1 import admin_pb2 as admin_pb

    with errors():
        r = conn.target().call("price", "GetPrice", admin_pb.GetPriceRequest())
    data = {
        "price": r.price,
        "now_s": r.now_s,
        "epoch_unix_s": r.clock.epoch_unix_s,
        "dilation": r.clock.dilation,
    }
    _show(data, as_json, lambda d: f"price {d['price']:g} (RM time {d['now_s']:.1f} s)")


@admin_command("info")
def info(conn: Connection, queue: QueueArg, as_json: JsonOpt = False) -> None:
    """QUEUE's account (its user or an admin).

    Budget, spending rate, share, containers used and tasks pending."""
    from treadle.rpc.v1 import admin_pb2 as admin_pb

    with errors():
        r = conn.target().call("info", "GetQueueInfo", admin_pb.GetQueueInfoRequest(queue=queue))
    _show(_info(r), as_json, _info_line)


@admin_command("infos")
def infos(conn: Connection, as_json: JsonOpt = False) -> None:
    """The price and every queue's account (admin)."""
    from treadle.rpc.v1 import admin_pb2 as admin_pb

    with errors():
        r = conn.target().call("infos", "ListQueueInfos", admin_pb.ListQueueInfosRequest())
    data = {"price": r.price, "now_s": r.now_s, "queues": [_info(q) for q in r.queues]}
    if as_json:
        out.print_json(json.dumps(data))
        return
    say(f"price {r.price:g} (RM time {r.now_s:.1f} s)")
    for q in data["queues"]:
        say("  " + _info_line(q))


def _write(what: str, method: str, request: Any, conn: Connection, as_json: bool) -> None:
    r = conn.target().call(what, method, request)
    _show(_info(r), as_json, _info_line)


@admin_command("set-rate", context_settings=AMOUNTS)
def set_rate(
    conn: Connection,
    queue: QueueArg,
    rate: Annotated[str, typer.Argument(help="Credits per slot per allocation interval, >= 0.")],
    as_json: JsonOpt = False,
) -> None:
    """Set QUEUE's spending rate (its user or an admin); print the account."""
    from treadle.rpc.v1 import admin_pb2 as admin_pb

    amount = _number(rate, "RATE")
    with errors():
        req = admin_pb.SetSpendingRateRequest(queue=queue, spending_rate=amount)
        _write("set-rate", "SetSpendingRate", req, conn, as_json)


@admin_command("add-budget", context_settings=AMOUNTS)
def add_budget(
    conn: Connection,
    queue: QueueArg,
    credits: Annotated[str, typer.Argument(help="Credits to add, >= 0.")],
    as_json: JsonOpt = False,
) -> None:
    """Add CREDITS to QUEUE's budget (admin); print the account."""
    from treadle.rpc.v1 import admin_pb2 as admin_pb

    amount = _number(credits, "CREDITS")
    with errors():
        req = admin_pb.AddBudgetRequest(queue=queue, credits=amount)
        _write("add-budget", "AddBudget", req, conn, as_json)


@admin_command("set-budget", context_settings=AMOUNTS)
def set_budget(
    conn: Connection,
    queue: QueueArg,
    budget: Annotated[str, typer.Argument(help="The new budget in credits, >= 0.")],
    as_json: JsonOpt = False,
) -> None:
    """Set QUEUE's budget (admin); print the account."""
    from treadle.rpc.v1 import admin_pb2 as admin_pb

    amount = _number(budget, "BUDGET")
    with errors():
        req = admin_pb.SetBudgetRequest(queue=queue, budget=amount)
        _write("set-budget", "SetBudget", req, conn, as_json)


@admin_command("add-queue")
def add_queue(conn: Connection, queue: QueueArg) -> None:
    """Add QUEUE (admin): refused, the RM's queue tree is fixed.

    Add the queue to the RM's --config and restart it instead."""
    from treadle.rpc.v1 import admin_pb2 as admin_pb

    with errors():
        conn.target().call("add-queue", "AddQueue", admin_pb.AddQueueRequest(queue=queue))
    say(f"added queue {queue}")


@admin_command("remove-queue")
def remove_queue(conn: Connection, queue: QueueArg) -> None:
    """Remove QUEUE (admin): refused, the RM's queue tree is fixed.

    A spending rate of 0 takes a queue out of the price instead."""
    from treadle.rpc.v1 import admin_pb2 as admin_pb

    with errors():
        conn.target().call("remove-queue", "RemoveQueue", admin_pb.RemoveQueueRequest(queue=queue))
    say(f"removed queue {queue}")

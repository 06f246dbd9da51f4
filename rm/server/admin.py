"""The RM's Admin service: Dynamic Priority's account calls, thin adapters over
``ResourceManager.accounts`` (which checks queues and amounts and applies whole or not at
all) behind the gate (``treadle.live.gate``).

Who may call what (the paper's servlet, spec dp.md B1.3): the price and server time,
anyone, signed or not; one queue's info and its spending rate, that queue's user (the user
named like the queue) or an admin; every queue's info, budgets, and adding or removing a
queue, an admin. Who is calling is settled first, then whether they may, then the
arguments: a refused call has no effect.

Queues are not added or removed at runtime: the RM's queue tree is fixed when it starts
(from its configuration), policies size their guarantees from it, and every leaf queue
already has its account, so AddQueue and RemoveQueue are refused with
FAILED_PRECONDITION and say what to do instead.
"""

from __future__ import annotations

from typing import Any, Protocol

import structlog

from rm.core.facade import ResourceManager
from rm.policy.accounts import AccountInfo
from treadle.errors import ConflictError, InvalidRequestError, NotFoundError
from treadle.live.gate import Caller, Gate
from treadle.live.rpcutil import map_errors
from treadle.rpc.v1 import admin_pb2 as admin_pb, admin_pb2_grpc as admin_grpc, common_pb2 as pb

log = structlog.get_logger("rm")

SERVICE = "treadle.v1.Admin"


class Server(Protocol):
    """What the Admin service uses of ``rm.server.service.RmServer``."""

    rm: ResourceManager
    gate: Gate

    def now(self) -> float: ...

    def clock_pb(self) -> pb.Clock: ...

    def may_use_queue(self, caller: Caller, queue: str, what: str) -> None: ...


def _info_pb(a: AccountInfo) -> admin_pb.QueueInfo:
    return admin_pb.QueueInfo(
        queue=a.queue,
        budget=a.budget,
        spending_rate=a.spending_rate,
        share=a.share,
        used=a.used,
        pending=a.pending,
    )


def _body(request: Any) -> bytes:
    return bytes(request.SerializeToString(deterministic=True))


@map_errors
class AdminServicer(admin_grpc.AdminServicer):
    def __init__(self, server: Server) -> None:
        self.s = server

    def _caller(self, method: str, request: Any, context: Any, *, open_: bool = False) -> Caller:
        gate = self.s.gate
        check = gate.anyone if open_ else gate.client
        caller = check(f"/{SERVICE}/{method}", _body(request), context.invocation_metadata() or ())
        problem = gate.acl_problem()
        if problem:
            log.error("acl_reload_failed", error=problem, kept="the previous entries")
        return caller

    def _changed(self, what: str, queue: str, caller: Caller, **values: float) -> None:
        log.info("account_changed", what=what, queue=queue, by=caller.user, **values)

    async def GetPrice(
        self, request: admin_pb.GetPriceRequest, context: Any
    ) -> admin_pb.GetPriceResponse:
        s = self.s
        self._caller("GetPrice", request, context, open_=True)
        return admin_pb.GetPriceResponse(
            price=s.rm.accounts.price(), now_s=s.now(), clock=s.clock_pb()
        )

    async def GetQueueInfo(
        self, request: admin_pb.GetQueueInfoRequest, context: Any
    ) -> admin_pb.QueueInfo:
        caller = self._caller("GetQueueInfo", request, context)
        self.s.may_use_queue(caller, request.queue, "read the account")
        return _info_pb(self.s.rm.accounts.info(request.queue))

    async def ListQueueInfos(
        self, request: admin_pb.ListQueueInfosRequest, context: Any
    ) -> admin_pb.ListQueueInfosResponse:
        s = self.s
        caller = self._caller("ListQueueInfos", request, context)
        s.gate.admin_only(caller, "read every queue's account")
        accounts = s.rm.accounts
        return admin_pb.ListQueueInfosResponse(
            price=accounts.price(), now_s=s.now(), queues=[_info_pb(a) for a in accounts.infos()]
        )

    async def SetSpendingRate(
        self, request: admin_pb.SetSpendingRateRequest, context: Any
    ) -> admin_pb.QueueInfo:
        accounts = self.s.rm.accounts
        caller = self._caller("SetSpendingRate", request, context)
        self.s.may_use_queue(caller, request.queue, "set the spending rate")
        accounts.set_spending_rate(request.queue, request.spending_rate)
        self._changed("spending_rate", request.queue, caller, spending_rate=request.spending_rate)
        return _info_pb(accounts.info(request.queue))

    async def AddBudget(
        self, request: admin_pb.AddBudgetRequest, context: Any
    ) -> admin_pb.QueueInfo:
        accounts = self.s.rm.accounts
        caller = self._caller("AddBudget", request, context)
        self.s.gate.admin_only(caller, "add budget")
        accounts.add_budget(request.queue, request.credits)
        self._changed("add_budget", request.queue, caller, credits=request.credits)
        return _info_pb(accounts.info(request.queue))

    async def SetBudget(
        self, request: admin_pb.SetBudgetRequest, context: Any
    ) -> admin_pb.QueueInfo:
        accounts = self.s.rm.accounts
        caller = self._caller("SetBudget", request, context)
        self.s.gate.admin_only(caller, "set budgets")
        accounts.set_budget(request.queue, request.budget)
        self._changed("budget", request.queue, caller, budget=request.budget)
        return _info_pb(accounts.info(request.queue))

    async def AddQueue(self, request: admin_pb.AddQueueRequest, context: Any) -> admin_pb.QueueInfo:
        caller = self._caller("AddQueue", request, context)
        self.s.gate.admin_only(caller, "add queues")
        if not request.queue:
            raise InvalidRequestError("queue must not be empty")
        if request.queue in self.s.rm.state.queues:
            raise ConflictError(
                f"queue {request.queue!r} exists already (every leaf queue has its account)"
            )
        raise ConflictError(
            f"cannot add queue {request.queue!r}: the RM's queue tree is fixed when it starts "
            "(policies size their shares from it); add the queue to the RM's --config and "
            "restart it (budgets and rates are kept by the state store)"
        )

    async def RemoveQueue(
        self, request: admin_pb.RemoveQueueRequest, context: Any
    ) -> admin_pb.RemoveQueueResponse:
        caller = self._caller("RemoveQueue", request, context)
        self.s.gate.admin_only(caller, "remove queues")
        if request.queue not in self.s.rm.state.queues:
            raise NotFoundError(f"unknown queue {request.queue!r}")
        raise ConflictError(
            f"cannot remove queue {request.queue!r}: the RM's queue tree is fixed when it "
            "starts; set its spending rate to 0 to take it out of the price, or remove it "
            "from the RM's --config and restart it"
        )

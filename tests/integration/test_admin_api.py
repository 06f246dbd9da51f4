"""The Dynamic Priority admin API (issue 17): who may read and change the accounts, each
refusal with its status and no effect, and ``treadle admin`` as a user runs it.

An in-process RM on port 0 behind a real gate (an ACL file with users alice and bob and
the admin root), a leaf queue per user, and a small real policy with accounts; real gRPC
channels signing as each of them, or as nobody. The CLI runs as a subprocess against it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from plugins.policies.fifo import FifoPolicy
from rm.core.facade import ResourceManager
from rm.policy.accounts import AccountBalance, AccountInfo
from rm.server.service import RmSettings, serve
from treadle.live import auth
from treadle.live.gate import Gate
from treadle.live.rpcutil import Peer, channel
from treadle.model import QueueSpec
from treadle.rpc.v1 import admin_pb2 as admin_pb, admin_pb2_grpc as admin_grpc

UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
DENIED = grpc.StatusCode.PERMISSION_DENIED
NOT_FOUND = grpc.StatusCode.NOT_FOUND
INVALID = grpc.StatusCode.INVALID_ARGUMENT
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
KEYS = {
    "alice": "alice-key-0123456789",
    "bob": "bob-key-0123456789xx",
    "root": "root-key-0123456789x",
}
NODE_SECRET = b"node-secret-0123456789"
QUEUES = QueueSpec("root", children=(QueueSpec("alice"), QueueSpec("bob")))


class AccountsFifo(FifoPolicy):
    """FIFO with Dynamic Priority's books and none of its scheduling: an account per leaf
    queue (budget 0, rate 0 at the start), the price the sum of the rates of the accounts
    with budget left, share = rate / price."""

    name = "accounts-fifo"

    def __init__(self, queues: tuple[str, ...] = ("alice", "bob")) -> None:
        super().__init__()
        self.books = {q: AccountBalance(0.0, 0.0) for q in queues}

    def price(self) -> float:
        return sum(a.spending_rate for a in self.books.values() if a.budget > 0)

    def account_infos(self, cluster: Any) -> list[AccountInfo]:
        price = self.price()
        return [
            AccountInfo(q, a.budget, a.spending_rate, a.spending_rate / price if price else 0, 0, 0)
            for q, a in sorted(self.books.items())
        ]

    def set_spending_rate(self, queue: str, rate: float) -> None:
        self.books[queue] = AccountBalance(self.books[queue].budget, rate)

    def set_budget(self, queue: str, budget: float) -> None:
        self.books[queue] = AccountBalance(budget, self.books[queue].spending_rate)

    def add_budget(self, queue: str, credits: float) -> None:
        a = self.books[queue]
        self.books[queue] = AccountBalance(a.budget + credits, a.spending_rate)

    def balances(self) -> dict[str, AccountBalance]:
        return dict(self.books)

    def restore_balances(self, balances: Mapping[str, AccountBalance]) -> None:
        self.books.update(balances)


def aio(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return run


@dataclass
class Rm:
    policy: AccountsFifo
    address: str
    channels: list[grpc.aio.Channel]

    def admin(self, user: str | None, key: str | None = None) -> Any:
        """An Admin stub signing as ``user`` (with ``key``, default its own), or unsigned."""
        who = auth.Credentials(user, (key or KEYS[user]).encode()) if user else None
        ch = channel(self.address, Peer(who))
        self.channels.append(ch)
        return admin_grpc.AdminStub(ch)

    def books(self) -> dict[str, tuple[float, float]]:
        return {q: (a.budget, a.spending_rate) for q, a in self.policy.books.items()}


@contextlib.asynccontextmanager
async def running_rm(tmp_path: Path) -> AsyncIterator[Rm]:
    acl = tmp_path / "acl"
    acl.write_text(
        f"alice user {KEYS['alice']}\nbob user {KEYS['bob']}\nroot admin {KEYS['root']}\n"
    )
    policy = AccountsFifo()
    rm = ResourceManager(policy, queues=QUEUES, policy_errors="log")
    server, _, port = await serve(
        rm, RmSettings(), "127.0.0.1:0", Gate(auth.AclFile(acl), NODE_SECRET)
    )
    r = Rm(policy, f"127.0.0.1:{port}", [])
    try:
        yield r
    finally:
        for ch in r.channels:
            await ch.close()
        await server.stop(None)


async def refused(code: grpc.StatusCode, call: Any) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() == code, (info.value.code(), info.value.details())
    return info.value.details() or ""


# ---------------------------------------------------------------------- who may call what
@aio
async def test_anyone_may_ask_the_price_unsigned(tmp_path: Path) -> None:
    async with running_rm(tmp_path) as r:
        root = r.admin("root")
        await root.AddBudget(admin_pb.AddBudgetRequest(queue="alice", credits=100))
        await root.SetSpendingRate(admin_pb.SetSpendingRateRequest(queue="alice", spending_rate=4))
        for who in (None, "bob"):
            got = await r.admin(who).GetPrice(admin_pb.GetPriceRequest())
            assert got.price == 4.0
            assert got.now_s >= 0
            assert got.clock.dilation == 1.0
        # A claimed identity is checked all the same, never taken as anonymous: a name
        # without a signature, or a forged signature.
        claim = ((auth.USER_KEY, "root"),)
        why = await refused(
            UNAUTHENTICATED, r.admin(None).GetPrice(admin_pb.GetPriceRequest(), metadata=claim)
        )
        assert "no credentials" in why
        why = await refused(
            UNAUTHENTICATED,
            r.admin("bob", "not-bobs-key-012345").GetPrice(admin_pb.GetPriceRequest()),
        )
        assert "bad signature" in why


@aio
async def test_a_user_reads_and_sets_its_own_queue_only(tmp_path: Path) -> None:
    async with running_rm(tmp_path) as r:
        alice = r.admin("alice")
        info = await alice.SetSpendingRate(
            admin_pb.SetSpendingRateRequest(queue="alice", spending_rate=2.5)
        )
        assert (info.queue, info.spending_rate) == ("alice", 2.5)
        assert (
            await alice.GetQueueInfo(admin_pb.GetQueueInfoRequest(queue="alice"))
        ).spending_rate == 2.5
        why = await refused(
            DENIED,
            alice.SetSpendingRate(admin_pb.SetSpendingRateRequest(queue="bob", spending_rate=9)),
        )
        assert "'alice' may not set the spending rate of queue 'bob'" in why
        await refused(DENIED, alice.GetQueueInfo(admin_pb.GetQueueInfoRequest(queue="bob")))
        await refused(DENIED, alice.ListQueueInfos(admin_pb.ListQueueInfosRequest()))
        assert r.books() == {"alice": (0.0, 2.5), "bob": (0.0, 0.0)}


@aio
async def test_a_user_cannot_add_or_set_budget(tmp_path: Path) -> None:
    async with running_rm(tmp_path) as r:
        alice = r.admin("alice")
        why = await refused(
            DENIED, alice.AddBudget(admin_pb.AddBudgetRequest(queue="alice", credits=1e6))
        )
        assert "may not add budget: admin only" in why
        await refused(DENIED, alice.SetBudget(admin_pb.SetBudgetRequest(queue="alice", budget=1e6)))
        assert r.books()["alice"] == (0.0, 0.0)


@aio
async def test_unsigned_calls_other_than_the_price_are_refused(tmp_path: Path) -> None:
    async with running_rm(tmp_path) as r:
        nobody = r.admin(None)
        why = await refused(
            UNAUTHENTICATED, nobody.GetQueueInfo(admin_pb.GetQueueInfoRequest(queue="alice"))
        )
        assert "no credentials" in why
        await refused(
            UNAUTHENTICATED,
            nobody.SetSpendingRate(admin_pb.SetSpendingRateRequest(queue="alice", spending_rate=1)),
        )
        assert r.books()["alice"] == (0.0, 0.0)


@aio
async def test_a_forged_signature_is_refused(tmp_path: Path) -> None:
    async with running_rm(tmp_path) as r:
        forged = r.admin("root", "stolen-guess-0123456789")
        why = await refused(
            UNAUTHENTICATED, forged.AddBudget(admin_pb.AddBudgetRequest(queue="alice", credits=5))
        )
        assert "bad signature for user 'root'" in why
        # A body changed after signing: alice signs rate 1, the wire carries rate 100.
        method = "/treadle.v1.Admin/SetSpendingRate"
        signed = admin_pb.SetSpendingRateRequest(queue="alice", spending_rate=1)
        sent = admin_pb.SetSpendingRateRequest(queue="alice", spending_rate=100)
        md = auth.signed_metadata(
            auth.Credentials("alice", KEYS["alice"].encode()),
            method,
            signed.SerializeToString(deterministic=True),
            auth.Stamper().next(),
        )
        await refused(UNAUTHENTICATED, r.admin(None).SetSpendingRate(sent, metadata=md))
        assert r.books() == {"alice": (0.0, 0.0), "bob": (0.0, 0.0)}


@aio
async def test_a_replayed_request_is_refused(tmp_path: Path) -> None:
    async with running_rm(tmp_path) as r:
        request = admin_pb.AddBudgetRequest(queue="bob", credits=10)
        md = auth.signed_metadata(
            auth.Credentials("root", KEYS["root"].encode()),
            "/treadle.v1.Admin/AddBudget",
            request.SerializeToString(deterministic=True),
            auth.Stamper().next(),
        )
        wire = r.admin(None)  # the metadata is the signature: an eavesdropper's copy
        assert (await wire.AddBudget(request, metadata=md)).budget == 10
        why = await refused(UNAUTHENTICATED, wire.AddBudget(request, metadata=md))
        assert "replayed request" in why
        assert r.books()["bob"] == (10.0, 0.0)  # added once


# ---------------------------------------------------------------------- what an admin does
@aio
async def test_admin_adds_budget_then_info_shows_it(tmp_path: Path) -> None:
    async with running_rm(tmp_path) as r:
        root = r.admin("root")
        assert (
            await root.AddBudget(admin_pb.AddBudgetRequest(queue="alice", credits=70))
        ).budget == 70
        await root.AddBudget(admin_pb.AddBudgetRequest(queue="alice", credits=30.5))
        await root.SetBudget(admin_pb.SetBudgetRequest(queue="bob", budget=50))
        await root.SetSpendingRate(admin_pb.SetSpendingRateRequest(queue="bob", spending_rate=3))
        await r.admin("alice").SetSpendingRate(
            admin_pb.SetSpendingRateRequest(queue="alice", spending_rate=1)
        )
        info = await r.admin("alice").GetQueueInfo(admin_pb.GetQueueInfoRequest(queue="alice"))
        assert (info.budget, info.spending_rate, info.share) == (100.5, 1.0, 0.25)
        every = await root.ListQueueInfos(admin_pb.ListQueueInfosRequest())
        assert every.price == 4.0
        assert [(q.queue, q.budget, q.spending_rate, q.share) for q in every.queues] == [
            ("alice", 100.5, 1.0, 0.25),
            ("bob", 50.0, 3.0, 0.75),
        ]


@aio
async def test_bad_arguments_change_nothing(tmp_path: Path) -> None:
    async with running_rm(tmp_path) as r:
        root = r.admin("root")
        await root.SetBudget(admin_pb.SetBudgetRequest(queue="alice", budget=10))
        cases = [
            (
                root.AddBudget(admin_pb.AddBudgetRequest(queue="alice", credits=-1)),
                INVALID,
                "credits",
            ),
            (
                root.SetBudget(admin_pb.SetBudgetRequest(queue="alice", budget=float("inf"))),
                INVALID,
                "budget",
            ),
            (
                root.SetSpendingRate(
                    admin_pb.SetSpendingRateRequest(queue="alice", spending_rate=float("nan"))
                ),
                INVALID,
                "spending_rate",
            ),
            (
                root.SetBudget(admin_pb.SetBudgetRequest(queue="root", budget=1)),
                INVALID,
                "not a leaf",
            ),
            (
                root.AddBudget(admin_pb.AddBudgetRequest(queue="carol", credits=1)),
                NOT_FOUND,
                "'carol'",
            ),
            (root.GetQueueInfo(admin_pb.GetQueueInfoRequest(queue="carol")), NOT_FOUND, "'carol'"),
        ]
        for call, code, fragment in cases:
            assert fragment in await refused(code, call)
        assert r.books() == {"alice": (10.0, 0.0), "bob": (0.0, 0.0)}


@aio
async def test_queues_are_not_added_or_removed_at_runtime(tmp_path: Path) -> None:
    async with running_rm(tmp_path) as r:
        root = r.admin("root")
        why = await refused(PRECONDITION, root.AddQueue(admin_pb.AddQueueRequest(queue="carol")))
        assert "queue tree is fixed" in why
        assert "--config" in why
        why = await refused(
            PRECONDITION, root.RemoveQueue(admin_pb.RemoveQueueRequest(queue="bob"))
        )
        assert "spending rate to 0" in why
        await refused(NOT_FOUND, root.RemoveQueue(admin_pb.RemoveQueueRequest(queue="carol")))
        await refused(DENIED, r.admin("alice").AddQueue(admin_pb.AddQueueRequest(queue="carol")))
        assert sorted(r.books()) == ["alice", "bob"]


@aio
async def test_a_policy_without_accounts_says_so(tmp_path: Path) -> None:
    acl = tmp_path / "acl"
    acl.write_text(f"root admin {KEYS['root']}\n")
    rm = ResourceManager(FifoPolicy(), queues=QUEUES)
    server, _, port = await serve(
        rm, RmSettings(), "127.0.0.1:0", Gate(auth.AclFile(acl), NODE_SECRET)
    )
    try:
        async with channel(f"127.0.0.1:{port}", Peer()) as ch:
            why = await refused(
                PRECONDITION, admin_grpc.AdminStub(ch).GetPrice(admin_pb.GetPriceRequest())
            )
        assert "has no queue budgets" in why
    finally:
        await server.stop(None)


# ---------------------------------------------------------------------- treadle admin
async def treadle_admin(home: Path, *args: str, user: str | None = None) -> tuple[int, str, str]:
    """``treadle admin ARGS`` in a fresh process, signing as ``user`` through
    $TREADLE_USER and $TREADLE_KEY_FILE (or unsigned)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
    if user:
        key = home / f"{user}.key"
        key.write_text(KEYS[user] + "\n")
        env.update(TREADLE_USER=user, TREADLE_KEY_FILE=str(key))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "treadle.cli",
        "admin",
        *args,
        cwd=home,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.slow
@aio
async def test_the_admin_commands_end_to_end(tmp_path: Path) -> None:
    async with running_rm(tmp_path) as r:
        rm = ("--rm", r.address)

        async def ok(*args: str, user: str | None = None) -> str:
            code, out, err = await treadle_admin(tmp_path, *args, *rm, user=user)
            assert code == 0, err
            return out

        async def fails(*args: str, user: str | None = None, code: int = 1) -> str:
            got, out, err = await treadle_admin(tmp_path, *args, *rm, user=user)
            assert (got, out) == (code, ""), err
            assert len(err.strip().splitlines()) == 1, err
            return err

        out = await ok("add-budget", "alice", "100", "--json", user="root")
        assert json.loads(out)["budget"] == 100.0
        out = await ok("set-rate", "alice", "2", user="alice")
        assert out.strip() == "alice: budget 100, spending rate 2, share 1, used 0, pending 0"
        assert json.loads(await ok("price", "--json"))["price"] == 2.0  # unsigned
        assert (await ok("price")).startswith("price 2 (RM time ")
        out = await ok("info", "alice", user="alice")
        assert "budget 100, spending rate 2" in out
        await ok("set-budget", "bob", "40", user="root")
        every = json.loads(await ok("infos", "--json", user="root"))
        assert [(q["queue"], q["budget"]) for q in every["queues"]] == [("alice", 100), ("bob", 40)]

        # Refusals and bad input: one line each, nothing applied.
        err = await fails("set-rate", "bob", "5", user="alice")
        assert "PERMISSION_DENIED" in err
        err = await fails("add-budget", "alice", "5", user="alice")
        assert "PERMISSION_DENIED" in err
        assert "admin only" in err
        err = await fails("info", "alice")  # unsigned
        assert "UNAUTHENTICATED" in err
        err = await fails("set-budget", "alice", "-5", user="root")
        assert "INVALID_ARGUMENT" in err
        assert "budget must be a finite number >= 0" in err
        err = await fails("set-rate", "alice", "fast", user="root", code=2)
        assert err.strip() == "error: RATE must be a number, got 'fast'"
        err = await fails("add-budget", "carol", "5", user="root")
        assert "NOT_FOUND" in err
        assert "unknown queue 'carol'" in err
        err = await fails("add-queue", "carol", user="root")
        assert "FAILED_PRECONDITION" in err
        assert "queue tree is fixed" in err
        assert r.books() == {"alice": (100.0, 2.0), "bob": (40.0, 0.0)}


@contextlib.asynccontextmanager
async def dp_rm_process(tmp_path: Path) -> AsyncIterator[str]:
    """A real ``python -m rm --policy dp`` behind its ACL: queues alice and bob, alice's
    budget 100 from the config; its address."""
    (tmp_path / "rm.yaml").write_text(
        "queues: [{name: alice}, {name: bob}]\nusers:\n  alice: {budget: 100}\n  bob: {}\n"
    )
    (tmp_path / "acl").write_text(
        f"alice user {KEYS['alice']}\nbob user {KEYS['bob']}\nroot admin {KEYS['root']}\n"
    )
    (tmp_path / "node-secret").write_bytes(NODE_SECRET)
    for secret in ("acl", "node-secret"):
        (tmp_path / secret).chmod(0o600)  # the RM refuses secrets others may read
    port_file = tmp_path / "rm.port"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rm", "--policy", "dp", "--set", "interval_s=1",
        "--config", str(tmp_path / "rm.yaml"), "--acl", str(tmp_path / "acl"),
        "--node-secret-file", str(tmp_path / "node-secret"), "--port-file", str(port_file),
        "--log-level", "warning",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.returncode is not None:
                _, err = await proc.communicate()
                pytest.fail(f"the RM exited: {err.decode()}")
            assert loop.time() < deadline, "the RM wrote no port file"
            await asyncio.sleep(0.05)
        yield port_file.read_text().strip()
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.communicate()


@pytest.mark.slow
@aio
async def test_the_admin_commands_on_a_dp_rm_process(tmp_path: Path) -> None:
    async with dp_rm_process(tmp_path) as address:
        rm = ("--rm", address)

        async def run(*args: str, user: str | None = None) -> tuple[int, str, str]:
            return await treadle_admin(tmp_path, *args, *rm, user=user)

        code, out, err = await run("price", "--json")  # unsigned
        assert code == 0, err
        assert json.loads(out)["price"] == 0.0  # no queue is active: nothing runs
        code, out, err = await run("set-rate", "alice", "2.5", "--json", user="alice")
        assert code == 0, err
        assert (json.loads(out)["budget"], json.loads(out)["spending_rate"]) == (100.0, 2.5)
        code, out, err = await run("add-budget", "bob", "50", user="root")
        assert code == 0, err
        code, out, err = await run("set-rate", "bob", "9", user="alice")
        assert code == 1
        assert "PERMISSION_DENIED" in err
        code, out, err = await run("set-rate", "alice", "-1", user="root")
        assert code == 1
        assert "INVALID_ARGUMENT" in err
        code, out, err = await run("infos", "--json", user="root")
        assert code == 0, err
        books = [(q["queue"], q["budget"], q["spending_rate"]) for q in json.loads(out)["queues"]]
        assert books == [("alice", 100.0, 2.5), ("bob", 50.0, 1.0)]

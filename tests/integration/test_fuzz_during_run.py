"""10,000 fuzzed requests during a real run (issue 16, deliverable 7): no innocent job
fails, the RM never crashes, every answer is a status code the contract allows, the RM's
memory stays bounded.

Real processes throughout: ``treadle cluster up`` (RM, an NM host with four nodes, the AM
host, a supervisor) and ``treadle run`` replaying the innocent users' jobs (alice's and
bob's), at dilation 4 with a 1 s heartbeat, so a node or an AM expires after 2.5 wall s
of silence. While the run goes on, this process sends ``REQUESTS`` requests from
``CONCURRENCY`` concurrent callers, as

- a stranger (no credentials), a forger (a known user's name, a wrong key), a replayer
  (a call's exact signed metadata sent again), a rogue NM (no node secret, forged node
  tokens) and a rogue AM (forged AM tokens for the innocent applications);
- mallory, a known `user` of the ACL who misbehaves: reads and kills other users'
  applications by guessed ids, reads the event log, sets budgets, submits for alice,
  submits malformed jobs and random junk, calls Allocate with junk asks on its own
  applications, sends bytes that do not parse;
- and, spread over the run, mallory's legal but oversized submissions near the RM's
  limits (a million tasks, 8 MB; ten thousand stages with long names, 14 MB; a DAG of 447
  stages each after all those before it, 99,681 dependencies) plus a few just over them
  (a task, a byte, a name character or a dependency too many).

mallory kills every application it submits at once. Every answer must be in
``GUARDED_ANSWERS`` (UNKNOWN only for bytes that do not parse); where the answer is
determined by the request alone (a stranger, a forger, a replay, an admin-only call) the
exact code is checked. Afterwards: every innocent job SUCCEEDED, the RM process is the
one that started (no crash, no restart), no node was lost, and its peak resident memory
(VmHWM) stayed under ``PEAK_RSS_BOUND``. The test prints the request count, the codes
seen, the peak and the time.

The rate: unpaced, the callers got through ~520 requests per wall second beside the run
on 2 shared cores (the RM's event loop is the bottleneck); they are paced at ``RATE``, so
that the fuzz (~40 s) spreads over most of the run (~55 s, its jobs arriving over 46 s)
with room for a slower machine. mallory learns the innocent applications' ids as they
are submitted (from the RM's event log, as if they had leaked) and aims most of its
reads, kills and forged AM calls at them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import subprocess
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from rm.server.config import RmLimits
from rm.server.service import SERVICES
from tests.faults import TREADLE, cli
from tests.rm_fuzzing import GUARDED_ANSWERS, RAW_METHODS, Code
from treadle import events as ev
from treadle.cluster.procs import read_state, recorded_processes
from treadle.live import auth
from treadle.live.rpcutil import Peer, channel
from treadle.rpc.v1 import (
    application_master_pb2 as am_pb,
    application_master_pb2_grpc as am_grpc,
    client_pb2 as client_pb,
    client_pb2_grpc as client_grpc,
    common_pb2 as pb,
    resource_tracker_pb2 as rt_pb,
    resource_tracker_pb2_grpc as rt_grpc,
)

REQUESTS = int(os.environ.get("FUZZ_REQUESTS", "10000"))
CONCURRENCY = 8
#: Requests per wall second: the fuzz spreads over most of the run. Measured unpaced
#: beside the run on 2 shared cores: ~520/s; the run lasts ~55 s.
RATE = 250.0
CALL_TIMEOUT = 60.0  # wall s: a call held up behind a big submission still answers
DILATION = 4.0
INNOCENT_JOBS = 24
#: The legal oversized submissions, and those just over a limit, spread over the fuzz.
BIG_LEGAL, OVER_LIMIT = 6, 4
#: The RM's peak resident memory. Measured: ~80 MB at the start; at the peak ~690 MB
#: with 2,000 fuzzed requests and with 10,000 when the six oversized ones were all of
#: the two largest kinds (the junk costs nothing that lasts), ~510 MB with these six.
#: Each large one the RM admits costs ~100 MB (decoded, and kept: ended applications
#: stay in the RM for reports and restarts). The bound: the start plus six at 150 MB.
PEAK_RSS_BOUND_MB = 1024
LIMITS = RmLimits()
UNAUTHENTICATED, DENIED, EXHAUSTED = (
    Code.UNAUTHENTICATED,
    Code.PERMISSION_DENIED,
    Code.RESOURCE_EXHAUSTED,
)
TASK = pb.Resources(amounts={"vcores": 1.0, "memory_mb": 1024.0})


def workload() -> str:
    jobs = "\n".join(
        f"  - {{name: j{i}, user: {('alice', 'bob')[i % 2]}, submit_s: {8 * i}, stages: "
        f"[{{name: s, tasks: 4, duration_s: 20, resources: {{vcores: 1, memory_mb: 1024}}}}]}}"
        for i in range(INNOCENT_JOBS)
    )
    return (
        "seed: 7\ncluster:\n  heartbeat_s: 1.0\n  nodes:\n"
        "    - {count: 4, resources: {vcores: 4, memory_mb: 16384}}\n"
        f"users: {{alice: {{weight: 1}}, bob: {{weight: 1}}}}\njobs:\n{jobs}\n"
    )


# --------------------------------------------------------------------------------------
# Requests


def job(
    name: str, stages: int = 1, tasks: int = 1, name_chars: int = 0, dense: bool = False
) -> pb.JobSpec:
    """A legal job of ``stages`` stages of ``tasks`` tasks each, chained (or each after
    all those before it: ``dense``)."""
    pad = "s" * name_chars
    names = [f"{i}{pad}"[: max(name_chars, len(str(i)))] for i in range(stages)]
    return pb.JobSpec(
        name=name,
        stages=[
            pb.StageSpec(
                name=n,
                resources=TASK,
                durations=[1.0] * tasks,
                parents=names[:i] if dense else names[max(0, i - 1) : i],
            )
            for i, n in enumerate(names)
        ],
    )


def oversized() -> list[tuple[str, client_pb.SubmitApplicationRequest, Code]]:
    """Legal submissions near the limits (OK) and some just over them (refused)."""
    max_tasks, max_stages = LIMITS.max_tasks_per_job, LIMITS.max_stages_per_job
    per = max_tasks // max_stages
    dense = int((2 * LIMITS.max_parents_per_job) ** 0.5)  # n(n-1)/2 dependencies

    def sub(spec: pb.JobSpec) -> client_pb.SubmitApplicationRequest:
        return client_pb.SubmitApplicationRequest(user="mallory", job=spec)

    legal = [
        ("a million tasks", sub(job("wide", 1, max_tasks)), Code.OK),
        ("10,000 stages, long names", sub(job("deep", max_stages, per, 300)), Code.OK),
        ("a dense DAG", sub(job("dense", dense, 1, dense=True)), Code.OK),
    ]
    over = [
        ("a task too many", sub(job("wider", 1, max_tasks + 1)), EXHAUSTED),
        ("bytes over the limit", sub(job("deeper", max_stages, per, 1000)), EXHAUSTED),
        ("a name too long", sub(job("n" * (LIMITS.max_name_chars + 1))), EXHAUSTED),
        ("a dependency too many", sub(job("denser", dense + 1, 1, dense=True)), EXHAUSTED),
    ]
    for what, req, _ in legal:
        assert req.ByteSize() <= LIMITS.max_request_bytes, what
    assert over[1][1].ByteSize() > LIMITS.max_request_bytes
    assert sum(len(st.parents) for st in legal[2][1].job.stages) <= LIMITS.max_parents_per_job
    return [legal[i % len(legal)] for i in range(BIG_LEGAL)] + over[:OVER_LIMIT]


@dataclass
class Fuzz:
    """The callers, what they sent and what they got."""

    address: str
    mallory_key: str
    innocent_nodes: list[str]
    events: Path  # the RM's event log: the innocent applications' ids leak from it
    rng: random.Random = field(default_factory=lambda: random.Random(16))
    sent: int = 0
    codes: Counter[tuple[str, str]] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)
    mallory_apps: dict[str, str] = field(default_factory=dict)  # app id -> AM token
    #: Guessed ids a call acted on (answered OK or FAILED_PRECONDITION): mallory's own.
    touched_by_guess: set[str] = field(default_factory=set)
    innocent_apps: list[str] = field(default_factory=list)
    replays: list[tuple[str, bytes, tuple[tuple[str, str], ...]]] = field(default_factory=list)
    channels: list[grpc.aio.Channel] = field(default_factory=list)

    def __post_init__(self) -> None:
        def open_(creds: auth.Credentials | None) -> grpc.aio.Channel:
            ch = channel(self.address, Peer(creds))
            self.channels.append(ch)
            return ch

        self.plain = open_(None)  # the stranger's, the rogue NM's and AM's, replays, raw
        self.mallory_ch = open_(auth.Credentials("mallory", self.mallory_key.encode()))
        self.forger_ch = open_(auth.Credentials("treadle", b"not-the-admin-key-0123456789"))
        self.mallory: Any = client_grpc.ClientStub(self.mallory_ch)
        self.mallory_am: Any = am_grpc.ApplicationMasterStub(self.mallory_ch)
        self.stranger: Any = client_grpc.ClientStub(self.plain)
        self.forger: Any = client_grpc.ClientStub(self.forger_ch)
        self.rt: Any = rt_grpc.ResourceTrackerStub(self.plain)
        self.am: Any = am_grpc.ApplicationMasterStub(self.plain)

    async def close(self) -> None:
        for ch in self.channels:
            await ch.close()

    async def call(
        self,
        label: str,
        fn: Callable[..., Awaitable[Any]],
        request: Any,
        allowed: frozenset[Code] | Code = GUARDED_ANSWERS,
        **kwargs: Any,
    ) -> tuple[Code, Any]:
        self.sent += 1
        try:
            resp, code = await fn(request, timeout=CALL_TIMEOUT, **kwargs), Code.OK
            details = ""
        except grpc.aio.AioRpcError as e:
            resp, code, details = None, e.code(), e.details() or ""
        self.codes[(label, code.name)] += 1
        ok = allowed if isinstance(allowed, frozenset) else frozenset({allowed})
        if code not in ok:
            self.wrong.append(f"{label}: {code.name} ({details[:200]})")
        return code, resp

    # ---------------------------------------------------------------- random ids
    def guessed_app(self) -> str:
        """Mostly an innocent application's id (as if leaked), else a guess."""
        if self.innocent_apps and self.rng.random() < 0.7:
            return self.rng.choice(self.innocent_apps)
        stamp = self.innocent_apps[0].split("_")[1] if self.innocent_apps else "1"
        return f"application_{stamp}_{self.rng.randint(1, 2 * INNOCENT_JOBS):04d}"

    def junk_id(self) -> str:
        r = self.rng
        if r.random() < 0.2:
            return "".join(chr(r.randint(1, 0x2FF)) for _ in range(r.randint(1, 40)))
        return r.choice(["", " ", "\u202e", "node-x", "application_99999", "c_1_2", "a" * 300])

    def junk_job(self) -> pb.JobSpec:
        r = self.rng
        stages = []
        for i in range(r.randint(0, 3)):
            amounts = r.choice([{"vcores": 1.0}, {}, {"vcores": -1.0}, {"CPU": 1.0},
                                {"vcores": float("nan")}, {"vcores": 1e308}])  # fmt: skip
            durations = r.choice([[1.0], [], [-1.0], [float("inf")], [2.0] * 3])
            parents = r.choice([[], ["ghost"], [f"s{i}"], [f"s{i + 1}"]])
            stages.append(pb.StageSpec(name=f"s{i}", resources=pb.Resources(amounts=amounts),
                                       durations=durations, parents=parents))  # fmt: skip
        return pb.JobSpec(name=r.choice(["", "junk", "x" * 50]), stages=stages)

    # ---------------------------------------------------------------- one request
    async def one(self) -> None:
        r = self.rng
        kind = r.choices(list(KINDS), weights=[w for w, _ in KINDS.values()])[0]
        await KINDS[kind][1](self)

    async def submit_own(self, spec: pb.JobSpec, label: str, allowed: Code) -> None:
        req = client_pb.SubmitApplicationRequest(user="mallory", job=spec)
        code, resp = await self.call(label, self.mallory.SubmitApplication, req, allowed)
        if code is Code.OK:
            self.mallory_apps[resp.app_id] = resp.am_token
            kill = client_pb.KillApplicationRequest(app_id=resp.app_id)
            await self.call("mallory kills its own", self.mallory.KillApplication, kill, Code.OK)


def _kind(weight: int) -> Callable[[Callable[[Fuzz], Awaitable[None]]], Any]:
    def register(fn: Callable[[Fuzz], Awaitable[None]]) -> Any:
        KINDS[fn.__name__] = (weight, fn)
        return fn

    return register


KINDS: dict[str, tuple[int, Callable[[Fuzz], Awaitable[None]]]] = {}


@_kind(10)
async def stranger(f: Fuzz) -> None:
    req = f.rng.choice([
        client_pb.ListApplicationsRequest(), client_pb.GetClusterMetricsRequest(),
        client_pb.KillApplicationRequest(app_id=f.guessed_app()),
        client_pb.SubmitApplicationRequest(user="alice", job=job("s")),
        client_pb.GetEventsRequest(),
    ])  # fmt: skip
    method = {
        client_pb.ListApplicationsRequest: f.stranger.ListApplications,
        client_pb.GetClusterMetricsRequest: f.stranger.GetClusterMetrics,
        client_pb.KillApplicationRequest: f.stranger.KillApplication,
        client_pb.SubmitApplicationRequest: f.stranger.SubmitApplication,
        client_pb.GetEventsRequest: f.stranger.GetEvents,
    }[type(req)]
    await f.call("stranger", method, req, UNAUTHENTICATED)


@_kind(8)
async def forger(f: Fuzz) -> None:
    req = client_pb.KillApplicationRequest(app_id=f.guessed_app())
    await f.call("forged admin", f.forger.KillApplication, req, UNAUTHENTICATED)


@_kind(8)
async def replay(f: Fuzz) -> None:
    """Sign a call as mallory, send it, then send the very same bytes and metadata again."""
    if f.replays and f.rng.random() < 0.5:
        method, body, md = f.replays.pop(f.rng.randrange(len(f.replays)))
        call = f.plain.unary_unary(method)
        await f.call("replayed", call, body, UNAUTHENTICATED, metadata=md)
        return
    method = "/treadle.v1.Client/GetClusterMetrics"
    body = client_pb.GetClusterMetricsRequest().SerializeToString(deterministic=True)
    creds = auth.Credentials("mallory", f.mallory_key.encode())
    md = auth.signed_metadata(creds, method, body, time.time_ns() + f.rng.randrange(10**6))
    await f.call("signed once", f.plain.unary_unary(method), body, Code.OK, metadata=md)
    f.replays.append((method, body, md))


@_kind(8)
async def rogue_nm(f: Fuzz) -> None:
    r = f.rng
    node = r.choice([*f.innocent_nodes, f.junk_id()])
    if r.random() < 0.3:
        cap = pb.Resources(amounts={"vcores": 64.0})
        req = rt_pb.RegisterNodeRequest(node_id=node, address="127.0.0.1:1", capacity=cap)
        # (A malformed registration is refused as such, before its signature is checked.)
        allowed = frozenset({UNAUTHENTICATED, Code.INVALID_ARGUMENT})
        await f.call("rogue NM registers", f.rt.RegisterNode, req, allowed)
        return
    done = [pb.ContainerStatus(container_id=f.junk_id(), state=1, start_s=1, finish_s=2)]
    req = rt_pb.NodeHeartbeatRequest(
        node_id=node, seq=r.randint(-5, 10**6), completed=done, node_token=f.junk_id()
    )
    if r.random() < 0.3:
        batch = rt_pb.NodeHeartbeatBatchRequest(heartbeats=[req] * r.randint(1, 20))
        await f.call("rogue NM heartbeats", f.rt.NodeHeartbeatBatch, batch)
    else:
        await f.call("rogue NM heartbeats", f.rt.NodeHeartbeat, req)
    # Allowed: UNAUTHENTICATED for a forged token; an id nobody registered may be
    # answered as such (the code set is checked; the innocent nodes are checked after).


@_kind(10)
async def rogue_am(f: Fuzz) -> None:
    r = f.rng
    app, token = f.guessed_app(), r.choice(["", f.junk_id(), "x" * 43])
    which = r.randrange(3)
    if which == 0:
        req: Any = am_pb.RegisterApplicationMasterRequest(app_id=app, am_token=token)
        await f.call("rogue AM registers", f.am.RegisterApplicationMaster, req)
    elif which == 1:
        asks = [am_pb.Ask(priority=1, resources=TASK, count=r.randint(0, 10**6))]
        req = am_pb.AllocateRequest(app_id=app, asks=asks, am_token=token, progress=1.0)
        await f.call("rogue AM allocates", f.am.Allocate, req)
    else:
        req = am_pb.FinishApplicationMasterRequest(
            app_id=app, status=pb.FINAL_STATUS_SUCCEEDED, am_token=token
        )
        await f.call("rogue AM finishes", f.am.FinishApplicationMaster, req)


@_kind(12)
async def mallory_on_others(f: Fuzz) -> None:
    r = f.rng
    which = r.randrange(5)
    app = f.guessed_app()
    # A guessed id may be one of mallory's own: then it acts (checked afterwards).
    guessed = frozenset({DENIED, Code.NOT_FOUND, Code.OK, Code.FAILED_PRECONDITION})
    if which == 0:
        req: Any = client_pb.KillApplicationRequest(app_id=app)
        code, _ = await f.call("mallory kills others'", f.mallory.KillApplication, req, guessed)
    elif which == 1:
        req = client_pb.GetApplicationReportRequest(app_id=app)
        code, _ = await f.call("mallory reads others'", f.mallory.GetApplicationReport, req,
                               guessed)  # fmt: skip
    if which < 2 and code in (Code.OK, Code.FAILED_PRECONDITION):
        f.touched_by_guess.add(app)
    elif which == 2:
        req = client_pb.GetEventsRequest(offset=r.randint(0, 100), limit=r.randint(0, 100))
        await f.call("mallory reads the event log", f.mallory.GetEvents, req, DENIED)
    elif which == 3:
        req = client_pb.SetQueueBudgetRequest(queue="default", budget=1e9, spending_rate=0)
        await f.call("mallory sets a budget", f.mallory.SetQueueBudget, req, DENIED)
    else:
        req = client_pb.SubmitApplicationRequest(user="alice", job=job("as-alice"))
        await f.call("mallory submits for alice", f.mallory.SubmitApplication, req, DENIED)


@_kind(14)
async def mallory_submits(f: Fuzz) -> None:
    r = f.rng
    if r.random() < 0.3:
        await f.submit_own(
            job("small", r.randint(1, 3), r.randint(1, 5)), "mallory submits", Code.OK
        )
        return
    spec = f.junk_job()
    req = client_pb.SubmitApplicationRequest(
        user="mallory", queue=r.choice(["", "default", "nope", f.junk_id()]), job=spec,
        ask_strategy=pb.AskStrategy(name=r.choice(["", "greedy", f.junk_id()]),
                                    params_json=r.choice(["", "{}", "[", "1e999", "[" * 60])),
    )  # fmt: skip
    code, resp = await f.call("mallory submits junk", f.mallory.SubmitApplication, req)
    if code is Code.OK:
        f.mallory_apps[resp.app_id] = resp.am_token
        kill = client_pb.KillApplicationRequest(app_id=resp.app_id)
        await f.call("mallory kills its own", f.mallory.KillApplication, kill, Code.OK)


@_kind(8)
async def mallory_as_am(f: Fuzz) -> None:
    """mallory's own (killed) applications, with its own tokens, and junk asks."""
    if not f.mallory_apps:
        return
    r = f.rng
    app = r.choice(sorted(f.mallory_apps))
    count = r.choice([1, -1, 10**9, 2**31 - 1])
    size = r.choice([{"vcores": 1.0}, {"vcores": float("inf")}, {"": 1.0}, {"vcores": 1e6}])
    asks = [am_pb.Ask(priority=r.randint(-1, 3), resources=pb.Resources(amounts=size),
                      count=count, kind=r.randint(-1, 3))]  # fmt: skip
    req = am_pb.AllocateRequest(app_id=app, asks=asks, am_token=f.mallory_apps[app],
                                response_id=r.randint(-2, 5))  # fmt: skip
    await f.call("mallory's AM allocates junk", f.mallory_am.Allocate, req)


@_kind(6)
async def list_and_health(f: Fuzz) -> None:
    r = f.rng
    if r.random() < 0.5:
        req = client_pb.ListApplicationsRequest(awaiting_am_only=r.random() < 0.5)
        _, resp = await f.call("mallory lists", f.mallory.ListApplications, req, Code.OK)
        if resp is not None:
            others = [a.app_id for a in resp.applications if a.user != "mallory"]
            if others:
                f.wrong.append(f"mallory listed others' applications {others[:3]}")
        return
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    service = r.choice(["", *SERVICES, "nope"])
    stub: Any = health_pb2_grpc.HealthStub(f.plain)
    allowed = Code.OK if service != "nope" else Code.NOT_FOUND
    await f.call("health", stub.Check, health_pb2.HealthCheckRequest(service=service), allowed)


@_kind(8)
async def raw_bytes(f: Fuzz) -> None:
    """Bytes that may not parse: gRPC answers UNKNOWN before any servicer runs."""
    r = f.rng
    payload = r.choice([bytes(r.randrange(256) for _ in range(r.randint(0, 64))),
                        b"\x0a\x03\xff\xfe\xfd", b"\x0a\x80", b"\xff" * 8])  # fmt: skip
    method = r.choice(RAW_METHODS)
    md = None
    if r.random() < 0.5:  # signed as mallory, as the bytes are
        creds = auth.Credentials("mallory", f.mallory_key.encode())
        md = auth.signed_metadata(creds, method, payload, time.time_ns() + r.randrange(10**6))
    call = f.plain.unary_unary(method)
    await f.call("raw bytes", call, payload, GUARDED_ANSWERS | {Code.UNKNOWN}, metadata=md)


# --------------------------------------------------------------------------------------
# The test


def _rm_pid(cdir: Path) -> int:
    state = read_state(cdir)
    assert state is not None
    return next(p.pid for p in recorded_processes(state) if p.name == "rm")


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


async def fuzz(
    f: Fuzz,
    big: list[tuple[str, client_pb.SubmitApplicationRequest, Code]],
    run_over: Callable[[], bool],
) -> None:
    """``REQUESTS`` requests from ``CONCURRENCY`` callers, the big ones at even intervals,
    while the run goes on."""
    every = REQUESTS // (len(big) + 1)
    pending = list(big)
    start = time.monotonic()

    async def caller() -> None:
        while f.sent < REQUESTS:
            if run_over():
                return
            ahead = start + f.sent / RATE - time.monotonic()
            if ahead > 0:  # paced, to spread over the run
                await asyncio.sleep(ahead)
            if pending and f.sent >= every * (len(big) - len(pending) + 1):
                what, req, expect = pending.pop(0)
                await f.submit_own(req.job, f"oversized: {what}", expect)
            else:
                await f.one()

    async def learn() -> None:
        while True:
            submitted = [r for r in _records(f.events) if r["event"] == ev.JOB_SUBMITTED]
            f.innocent_apps = [r["job"] for r in submitted if r["user"] in ("alice", "bob")]
            await asyncio.sleep(0.5)

    spy = asyncio.ensure_future(learn())
    try:
        await asyncio.gather(*(caller() for _ in range(CONCURRENCY)))
    finally:
        spy.cancel()


def _records(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):  # a line being written
            out.append(json.loads(line))
    return out


@pytest.mark.slow
def test_ten_thousand_fuzzed_requests_during_a_real_run(tmp_path: Path) -> None:
    wl = tmp_path / "innocent.yaml"
    wl.write_text(workload())
    cdir, out = tmp_path / "cluster", tmp_path / "out"
    big = oversized()
    up = cli(["cluster", "up", "--workload", str(wl), "--policy", "fair", "--dilation",
              str(DILATION), "--dir", str(cdir), "--no-http"], tmp_path)  # fmt: skip
    assert up.returncode == 0, up.stderr
    address = up.stdout.strip()
    run: subprocess.Popen[str] | None = None
    try:
        rm_pid = _rm_pid(cdir)
        idle = _peak_rss_mb(rm_pid)
        key = auth.new_secret()
        acl = cdir / "secrets" / "acl"
        acl.write_text(acl.read_text() + f"mallory user {key}\n")  # the RM reloads it
        nodes = [n["node_id"] for n in json.loads((cdir / "nodes-1.json").read_text())]
        run = subprocess.Popen(
            [*TREADLE, "run", str(wl), "--rm", address, "--cluster-dir", str(cdir),
             "--out", str(out), "--no-slowdown", "--timeout-s", "240"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        start = time.monotonic()

        async def go() -> Fuzz:
            f = Fuzz(address, key, nodes, cdir / "rm-events.jsonl")
            try:
                await fuzz(f, big, lambda: run.poll() is not None)
            finally:
                await f.close()
            return f

        f = asyncio.run(go())
        fuzz_s = time.monotonic() - start
        _stdout, stderr = run.communicate(timeout=240)
        run_s = time.monotonic() - start
        assert run.returncode == 0, stderr
        peak = _peak_rss_mb(rm_pid)
        assert _rm_pid(cdir) == rm_pid  # never restarted
        status = cli(["cluster", "status", "--dir", str(cdir), "--json"], tmp_path)
        roles = json.loads(status.stdout)["roles"]
    finally:
        if run is not None and run.poll() is None:
            run.kill()
            run.communicate()
        down = cli(["cluster", "down", "--dir", str(cdir)], tmp_path)
    assert down.returncode == 0, down.stderr
    summary = ", ".join(f"{k} {c}: {n}" for (k, c), n in sorted(f.codes.items()))
    print(
        f"{f.sent} fuzzed requests in {fuzz_s:.1f} s ({f.sent / fuzz_s:.0f}/s, "
        f"{CONCURRENCY} callers) during a run of {run_s:.1f} s; RM peak RSS {peak:.0f} MB "
        f"(at the start {idle:.0f} MB, bound {PEAK_RSS_BOUND_MB}); codes: {summary}"
    )
    assert f.sent >= REQUESTS, "the run ended before the fuzz did: make it longer"
    assert f.wrong == [], f.wrong[:20]
    assert roles["rm"]["alive"], roles
    assert all(role["restarts"] == 0 for role in roles.values()), roles
    assert f.touched_by_guess <= set(f.mallory_apps), f.touched_by_guess - set(f.mallory_apps)
    for what, _req, expect in big:  # every oversized one was answered as expected
        assert f.codes[(f"oversized: {what}", expect.name)] >= 1, (what, summary)
    # Every innocent job succeeded; no node was lost.
    jobs = _records(cdir / "rm-events.jsonl")
    innocent = [r for r in jobs if r.get("user") in ("alice", "bob")]
    finished = [r for r in innocent if r["event"] == ev.JOB_FINISHED]
    assert len(finished) == INNOCENT_JOBS, [r for r in innocent if r["event"] == ev.JOB_FAILED]
    assert all(r["status"] == "SUCCEEDED" for r in finished), finished
    assert not [r for r in jobs if r["event"] == ev.NODE_LOST]
    ids = {r["job"] for r in innocent}
    assert not [r for r in jobs if r["event"] == ev.ATTEMPT_FAILED and r["job"] in ids]
    result = json.loads((out / "summary.json").read_text())
    assert (result["jobs"], result["finished"]) == (INNOCENT_JOBS, INNOCENT_JOBS)
    assert peak < PEAK_RSS_BOUND_MB, peak

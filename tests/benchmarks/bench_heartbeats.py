"""RM heartbeat throughput and latency over real gRPC, against a real ``python -m rm``.

Setup, per cluster size N:

- the RM runs as its own process: ``python -m rm --policy fifo --listen 127.0.0.1:0
  --port-file F --heartbeat-s 1`` (plus ``--log-level warning`` and a long
  ``--expiry-intervals`` so that no synthetic node expires between phases and turns the
  measured path into the cheaper resync answer);
- N synthetic NMs (16 vcores / 64 GiB each) register from this process;
- then client processes (spawned, so that RM and clients use both cores) drive heartbeats
  for a fixed wall time (``--seconds``, after ``--warmup-s`` not counted). Nodes are split
  between the processes; each node's sequence numbers stay increasing. The heartbeats are
  those of idle NMs (no container reports) on an idle cluster (no asks): this measures the
  RM's per-heartbeat cost (gRPC, conversion, the core), not the policy's.

Phases (``--modes``):

- ``unary``: one NodeHeartbeat call per NM heartbeat, ``--inflight`` calls in flight per
  client process (grpc.aio), as fast as the RM answers (saturation);
- ``paced``: unary at a fixed total rate (``--rate``, default the 1,500/s target),
  open loop, for ``--paced-seconds``: latency at the target rate, not only at saturation.
  "p99 sched" counts from the scheduled send time, so client lag is not hidden
  (coordinated omission);
- ``batch``: NodeHeartbeatBatch with ``--batch-sizes`` NMs per call, ``--batch-inflight``
  calls in flight per process (what a host of many NMs sends).

Latencies are per call (a batch call carries B heartbeats). Targets: unary >= 1,500
heartbeats/s at p99 <= 10 ms; batched >= 20,000 NM heartbeats/s. Ratios > 1 meet them.

``--gc-freeze`` starts the RM with ``gc.freeze()`` after its imports (an experiment on
the p99 tail: full garbage collections pause the RM for tens of ms at 5,000+ nodes).

``--profile F`` runs the RM under cProfile (``python -m cProfile -o F -m rm ...``, no change
to ``rm``) and prints its top functions after the run.

Run: ``python -m tests.benchmarks.bench_heartbeats [--nodes 1000,5000,10000] [--seconds S]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from treadle.live.rpcutil import channel, wait_ready
from treadle.rpc.v1 import (
    client_pb2 as client_pb,
    client_pb2_grpc as client_grpc,
    common_pb2 as pb,
    resource_tracker_pb2 as rt_pb,
    resource_tracker_pb2_grpc as rt_grpc,
)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_NODES = (1000, 5000, 10000)
NODE = {"vcores": 16.0, "memory_mb": 65536.0}
UNARY_TARGET = 1500.0  # heartbeats/s
UNARY_P99_MS = 10.0
BATCH_TARGET = 20000.0  # NM heartbeats/s
MAX_SAMPLES = 200_000  # latency samples kept per client process


# ----------------------------------------------------------------------------------
# The RM process
# ----------------------------------------------------------------------------------


#: ``--gc-freeze``: start ``python -m rm`` after moving everything its imports created into
#: the permanent GC generation, so full collections stop re-scanning it (rm/* unchanged).
GC_FREEZE_LAUNCHER = (
    "import gc, runpy, sys; import rm.server.main; gc.collect(); gc.freeze(); "
    "sys.argv = ['rm', *sys.argv[1:]]; runpy.run_module('rm', run_name='__main__')"
)


class RmProcess:
    def __init__(
        self, workdir: Path, profile: Path | None = None, *, gc_freeze: bool = False
    ) -> None:
        self.port_file = workdir / "rm.port"
        self.log = workdir / "rm.log"
        argv = [sys.executable]
        if profile is not None:
            argv += ["-m", "cProfile", "-o", str(profile), "-m", "rm"]
        elif gc_freeze:
            argv += ["-c", GC_FREEZE_LAUNCHER]
        else:
            argv += ["-m", "rm"]
        argv += [
            "--policy",
            "fifo",
            "--listen",
            "127.0.0.1:0",
            "--port-file",
            str(self.port_file),
            "--heartbeat-s",
            "1",
            "--expiry-intervals",
            "1000000",
            "--log-level",
            "warning",
            "--insecure",  # the heartbeat path's own cost; a token check is one dict lookup
        ]
        self._log = self.log.open("w")
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT)
        self.address = ""

    def wait_address(self, timeout_s: float = 30.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the RM exited ({self.proc.returncode}): {self.tail()}")
            with contextlib.suppress(FileNotFoundError):
                text = self.port_file.read_text().strip()
                if text:
                    self.address = text
                    return text
            time.sleep(0.05)
        raise TimeoutError(f"the RM wrote no port file in {timeout_s:g} s: {self.tail()}")

    def tail(self, n: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text().splitlines()[-n:])
        return ""

    def cpu_seconds(self) -> float:
        """User + system CPU time of the RM so far (Linux /proc)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


async def register_nodes(address: str, ids: list[str], inflight: int = 200) -> float:
    t0 = time.perf_counter()
    async with channel(address) as ch:
        stub: Any = rt_grpc.ResourceTrackerStub(ch)
        queue = list(reversed(ids))

        async def worker() -> None:
            while queue:
                node_id = queue.pop()
                req = rt_pb.RegisterNodeRequest(
                    node_id=node_id, address="", capacity=pb.Resources(amounts=NODE)
                )
                await stub.RegisterNode(req, timeout=60)

        await asyncio.gather(*(worker() for _ in range(inflight)))
        client: Any = client_grpc.ClientStub(ch)
        m = await client.GetClusterMetrics(client_pb.GetClusterMetricsRequest(), timeout=60)
        if m.nodes < len(ids):
            raise RuntimeError(f"only {m.nodes} of {len(ids)} nodes registered")
    return time.perf_counter() - t0


async def cluster_nodes(address: str) -> tuple[int, int]:
    async with channel(address) as ch:
        client: Any = client_grpc.ClientStub(ch)
        m = await client.GetClusterMetrics(client_pb.GetClusterMetricsRequest(), timeout=60)
        return m.nodes, m.lost_nodes


# ----------------------------------------------------------------------------------
# Client processes
# ----------------------------------------------------------------------------------


@dataclass
class Job:
    """What one client process does."""

    address: str
    mode: str  # unary, paced, batch
    nodes: list[str]
    seq_base: int
    start_at: float  # wall clock (time.time) when every process starts sending
    warmup_s: float
    seconds: float
    inflight: int = 1
    batch: int = 1
    rate: float = 0.0  # paced: calls per second of this process


@dataclass
class Outcome:
    calls: int = 0
    heartbeats: int = 0
    errors: int = 0
    resyncs: int = 0
    latencies: list[float] = field(default_factory=list)  # seconds, per call
    sched_latencies: list[float] = field(default_factory=list)  # paced: from schedule
    behind: int = 0  # paced: sends later than 1 ms after their schedule
    error: str = ""


def client_main(job: Job, conn: Any) -> None:
    try:
        out = asyncio.run(_drive(job))
    except Exception as e:  # report, do not hang the parent
        out = Outcome(error=f"{type(e).__name__}: {e}")
    conn.send(out)
    conn.close()


async def _drive(job: Job) -> Outcome:
    out = Outcome()
    async with channel(job.address) as ch:
        stub: Any = rt_grpc.ResourceTrackerStub(ch)
        await ch.channel_ready()
        delay = job.start_at - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        t0 = time.perf_counter()
        record_from = t0 + job.warmup_s
        end = record_from + job.seconds
        if job.mode == "unary":
            await _unary(stub, job, out, record_from, end)
        elif job.mode == "paced":
            await _paced(stub, job, out, record_from, end)
        elif job.mode == "batch":
            await _batch(stub, job, out, record_from, end)
        else:
            raise ValueError(f"unknown mode {job.mode!r}")
    return out


def _keep(samples: list[float], value: float) -> None:
    if len(samples) < MAX_SAMPLES:
        samples.append(value)


async def _unary(stub: Any, job: Job, out: Outcome, record_from: float, end: float) -> None:
    perf = time.perf_counter
    reqs = [rt_pb.NodeHeartbeatRequest(node_id=n) for n in job.nodes]
    inflight = min(job.inflight, len(reqs))

    async def lane(j: int) -> None:
        # Lane j owns nodes j, j + inflight, ...: one call per node at a time.
        mine = reqs[j::inflight]
        seq = job.seq_base
        while True:
            seq += 1
            for req in mine:
                req.seq = seq
                t0 = perf()
                if t0 >= end:
                    return
                try:
                    resp = await stub.NodeHeartbeat(req, timeout=30)
                except grpc.aio.AioRpcError:
                    out.errors += 1
                    continue
                t1 = perf()
                if t0 >= record_from and t1 <= end:
                    out.calls += 1
                    out.heartbeats += 1
                    out.resyncs += resp.resync
                    _keep(out.latencies, t1 - t0)

    await asyncio.gather(*(lane(j) for j in range(inflight)))


async def _paced(stub: Any, job: Job, out: Outcome, record_from: float, end: float) -> None:
    perf = time.perf_counter
    reqs = [rt_pb.NodeHeartbeatRequest(node_id=n) for n in job.nodes]
    seqs = [job.seq_base] * len(reqs)
    busy = [False] * len(reqs)
    interval = 1.0 / job.rate
    pending: set[asyncio.Task[None]] = set()

    async def send(i: int, scheduled: float) -> None:
        busy[i] = True
        seqs[i] += 1
        reqs[i].seq = seqs[i]
        t0 = perf()
        try:
            resp = await stub.NodeHeartbeat(reqs[i], timeout=30)
        except grpc.aio.AioRpcError:
            out.errors += 1
            return
        finally:
            busy[i] = False
        t1 = perf()
        if scheduled >= record_from and t1 <= end:
            out.calls += 1
            out.heartbeats += 1
            out.resyncs += resp.resync
            out.behind += t0 - scheduled > 1e-3
            _keep(out.latencies, t1 - t0)
            _keep(out.sched_latencies, t1 - scheduled)

    nxt = perf()
    i = 0
    while nxt < end:
        now = perf()
        if now < nxt:
            await asyncio.sleep(nxt - now)
            continue
        while nxt <= now and nxt < end:  # catch up: fire every send that is due
            for _ in range(len(reqs)):  # skip a node whose previous call is still out
                i = (i + 1) % len(reqs)
                if not busy[i]:
                    break
            task = asyncio.create_task(send(i, nxt))
            pending.add(task)
            task.add_done_callback(pending.discard)
            nxt += interval
    if pending:
        await asyncio.wait(pending, timeout=30)


async def _batch(stub: Any, job: Job, out: Outcome, record_from: float, end: float) -> None:
    perf = time.perf_counter
    b = job.batch
    batches = [
        rt_pb.NodeHeartbeatBatchRequest(
            heartbeats=[rt_pb.NodeHeartbeatRequest(node_id=n) for n in job.nodes[k : k + b]]
        )
        for k in range(0, len(job.nodes), b)
    ]
    inflight = min(job.inflight, len(batches))

    async def lane(j: int) -> None:
        mine = batches[j::inflight]
        seq = job.seq_base
        while True:
            seq += 1
            for req in mine:
                for hb in req.heartbeats:
                    hb.seq = seq
                t0 = perf()
                if t0 >= end:
                    return
                try:
                    resp = await stub.NodeHeartbeatBatch(req, timeout=60)
                except grpc.aio.AioRpcError:
                    out.errors += 1
                    continue
                t1 = perf()
                if t0 >= record_from and t1 <= end:
                    out.calls += 1
                    out.heartbeats += len(req.heartbeats)
                    out.resyncs += sum(r.resync for r in resp.responses)
                    out.errors += sum(1 for e in resp.errors if e)
                    _keep(out.latencies, t1 - t0)

    await asyncio.gather(*(lane(j) for j in range(inflight)))


# ----------------------------------------------------------------------------------
# Phases and the table
# ----------------------------------------------------------------------------------


@dataclass
class Row:
    mode: str
    nodes: int
    procs: int
    batch: int
    inflight: int
    seconds: float
    heartbeats: int
    calls: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    sched_p99_ms: float = float("nan")
    rm_cpu: float = float("nan")  # RM CPU seconds per wall second during the phase
    errors: int = 0
    resyncs: int = 0
    behind: int = 0
    rate: float = 0.0

    @property
    def hb_s(self) -> float:
        return self.heartbeats / self.seconds

    @property
    def calls_s(self) -> float:
        return self.calls / self.seconds

    @property
    def hb_per_cpu_s(self) -> float:
        """Heartbeats per RM CPU-second: what one full core would serve, load aside."""
        return self.hb_s / self.rm_cpu if self.rm_cpu > 0 else float("nan")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def run_phase(
    rm: RmProcess,
    mode: str,
    ids: list[str],
    procs: int,
    phase: int,
    args: argparse.Namespace,
    *,
    batch: int = 1,
    inflight: int = 1,
) -> Row:
    ctx = mp.get_context("spawn")
    seconds = args.paced_seconds if mode == "paced" else args.seconds
    start_at = time.time() + 1.5 + 0.5 * procs  # time for the children to start and connect
    shares = [ids[k::procs] for k in range(procs)]
    jobs = [
        Job(
            rm.address,
            mode,
            share,
            seq_base=phase * 1_000_000_000,
            start_at=start_at,
            warmup_s=args.warmup_s,
            seconds=seconds,
            inflight=inflight,
            batch=batch,
            rate=args.rate / procs,
        )
        for share in shares
    ]
    children = []
    for job in jobs:
        parent, child = ctx.Pipe(duplex=False)
        p = ctx.Process(target=client_main, args=(job, child), daemon=True)
        p.start()
        child.close()
        children.append((p, parent))
    delay = start_at + args.warmup_s - time.time()
    if delay > 0:
        time.sleep(delay)
    cpu0, w0 = rm.cpu_seconds(), time.perf_counter()
    time.sleep(max(0.0, seconds - 0.2))
    cpu1, w1 = rm.cpu_seconds(), time.perf_counter()
    outcomes: list[Outcome] = []
    for p, conn in children:
        if not conn.poll(seconds + args.warmup_s + 120):
            p.kill()
            raise RuntimeError(f"a {mode} client process did not report")
        outcomes.append(conn.recv())
        p.join(30)
    for o in outcomes:
        if o.error:
            raise RuntimeError(f"{mode} client failed: {o.error}")
    lat = [x for o in outcomes for x in o.latencies]
    sched = [x for o in outcomes for x in o.sched_latencies]
    return Row(
        mode,
        len(ids),
        procs,
        batch,
        inflight,
        seconds,
        sum(o.heartbeats for o in outcomes),
        sum(o.calls for o in outcomes),
        percentile(lat, 0.50) * 1e3,
        percentile(lat, 0.99) * 1e3,
        max(lat, default=float("nan")) * 1e3,
        percentile(sched, 0.99) * 1e3 if sched else float("nan"),
        (cpu1 - cpu0) / (w1 - w0),
        sum(o.errors for o in outcomes),
        sum(o.resyncs for o in outcomes),
        sum(o.behind for o in outcomes),
        args.rate if mode == "paced" else 0.0,
    )


def target_text(r: Row) -> str:
    if r.mode == "batch":
        return f"{r.hb_s / BATCH_TARGET:5.2f}x of 20k/s"
    rate = r.hb_s / UNARY_TARGET
    lat = UNARY_P99_MS / r.p99_ms if r.p99_ms > 0 else float("inf")
    ok = "ok" if rate >= 0.99 and lat >= 1 else "MISS"
    if r.mode == "paced":
        return f"p99 {lat:5.2f}x of 10ms {ok}"
    return f"{rate:5.2f}x of 1.5k/s, p99 {lat:5.2f}x of 10ms {ok}"


def print_table(rows: list[Row]) -> None:
    head = (
        f"{'mode':<10} {'nodes':>6} {'procs':>5} {'batch':>5} {'infl':>4} {'HB/s':>9} "
        f"{'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'p99 sched':>9} {'RM CPU':>6} "
        f"{'HB/CPU-s':>9} "
        f"{'err':>4} {'resync':>6}  vs target"
    )
    print(head)
    print("-" * (len(head) + 38))
    for r in rows:
        mode = f"paced@{r.rate:g}" if r.mode == "paced" else r.mode
        sched = f"{r.sched_p99_ms:9.2f}" if r.sched_p99_ms == r.sched_p99_ms else f"{'':>9}"
        print(
            f"{mode:<10} {r.nodes:>6} {r.procs:>5} {r.batch:>5} {r.inflight:>4} {r.hb_s:>9,.0f} "
            f"{r.calls_s:>8,.0f} {r.p50_ms:>7.2f} {r.p99_ms:>7.2f} {r.max_ms:>7.1f} {sched} "
            f"{r.rm_cpu:>6.2f} "
            f"{r.hb_per_cpu_s:>9,.0f} "
            f"{r.errors:>4} {r.resyncs:>6}  {target_text(r)}"
        )


def print_profile(path: Path, top: int) -> None:
    if not path.exists():
        print(f"no profile was written to {path}")
        return
    stats = pstats.Stats(str(path), stream=sys.stdout)
    stats.strip_dirs()
    for key in ("tottime", "cumtime"):
        print(f"\n=== RM profile: top {top} by {key} ===")
        stats.sort_stats(key).print_stats(top)


def _int_list(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bench_heartbeats",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--nodes", type=_int_list, default=list(DEFAULT_NODES), help="e.g. 1000,5000")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured wall time per phase")
    ap.add_argument(
        "--paced-seconds",
        type=float,
        default=30.0,
        help="measured wall time of the paced phase (its p99 hinges on rare pauses)",
    )
    ap.add_argument("--warmup-s", type=float, default=1.0, help="not measured, per phase")
    ap.add_argument("--modes", default="unary,paced,batch", help="unary, paced, batch")
    ap.add_argument("--procs", type=_int_list, default=[1, 2], help="client processes to try")
    ap.add_argument("--inflight", type=_int_list, default=[8, 64], help="unary calls in flight")
    ap.add_argument("--batch-sizes", type=_int_list, default=[50, 100, 500])
    ap.add_argument("--batch-inflight", type=int, default=2, help="batch calls in flight")
    ap.add_argument("--rate", type=float, default=UNARY_TARGET, help="paced: total calls/s")
    ap.add_argument("--profile", type=Path, help="run the RM under cProfile, write stats here")
    ap.add_argument(
        "--gc-freeze",
        action="store_true",
        help="start the RM with gc.freeze() after its imports (an experiment; rm/* unchanged)",
    )
    ap.add_argument("--top", type=int, default=30, help="profile rows to print")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if bad := sorted(set(modes) - {"unary", "paced", "batch"}):
        ap.error(f"unknown modes {bad}")
    if args.profile is not None and args.gc_freeze:
        ap.error("--profile and --gc-freeze do not combine")

    print(
        f"RM: python -m rm --policy fifo --heartbeat-s 1 (no expiry)"
        f"{' with gc.freeze() after imports' if args.gc_freeze else ''}; {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f} at start; idle NMs of {NODE}; "
        f"{args.seconds:g} s measured per phase after {args.warmup_s:g} s of warm-up",
        flush=True,
    )
    rows: list[Row] = []
    for n in args.nodes:
        with tempfile.TemporaryDirectory(prefix="bench-hb-") as tmp:
            rm = RmProcess(Path(tmp), args.profile, gc_freeze=args.gc_freeze)
            try:
                rm.wait_address()
                asyncio.run(wait_ready(rm.address, 30))
                ids = [f"bench-node-{i:05d}" for i in range(n)]
                took = asyncio.run(register_nodes(rm.address, ids))
                print(f"{n} nodes: registered in {took:.1f} s", flush=True)
                plans: list[tuple[str, int, int, int]] = []  # mode, procs, batch, inflight
                for procs in args.procs:
                    if "unary" in modes:
                        plans += [("unary", procs, 1, k) for k in args.inflight]
                    if "batch" in modes:
                        plans += [
                            ("batch", procs, b, args.batch_inflight) for b in args.batch_sizes
                        ]
                if "paced" in modes:
                    plans.append(("paced", 1, 1, 0))
                for phase, (mode, procs, batch, inflight) in enumerate(plans, 1):
                    row = run_phase(
                        rm, mode, ids, procs, phase, args, batch=batch, inflight=inflight
                    )
                    rows.append(row)
                    print(
                        f"  {mode:<5} procs={procs} batch={batch:<3} inflight={inflight:<3} "
                        f"{row.hb_s:>9,.0f} HB/s  p50 {row.p50_ms:.2f} ms  "
                        f"p99 {row.p99_ms:.2f} ms  RM CPU {row.rm_cpu:.2f}",
                        flush=True,
                    )
                alive, lost = asyncio.run(cluster_nodes(rm.address))
                if alive != n or lost:
                    print(f"  warning: {alive} nodes alive, {lost} lost at the end")
            finally:
                rm.stop()
            if rm.proc.returncode not in (0, None):
                print(f"  warning: the RM exited with {rm.proc.returncode}: {rm.tail()}")
            if args.profile is not None:
                print_profile(args.profile, args.top)
    print()
    print_table(rows)
    print(
        "\nHB/s: NM heartbeats per second (a batch call carries `batch` of them); latencies "
        "per call; p99 sched: paced, from the scheduled send time; RM CPU: RM process CPU "
        "seconds per wall second (below ~0.9 at saturation: the RM lacked CPU, e.g. other "
        "load); HB/CPU-s: heartbeats per RM CPU-second. Targets: unary >= 1,500 HB/s at "
        f"p99 <= 10 ms; batched >= 20,000 HB/s. Load average at the end: "
        f"{os.getloadavg()[0]:.2f}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

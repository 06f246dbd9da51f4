"""The one way policies are compared: in the simulator or on a fresh cluster per policy.

``compare`` runs every policy on a ``Backend`` and writes the per-policy files
(``summary.json``, ``jobs.csv``, ``events.jsonl``...) and the comparison report, the same
files whatever the backend. ``SimBackend`` simulates each policy, several at once in worker
processes with ``workers > 1`` (see ``_run_parallel``); ``ClusterBackend`` builds
a cluster per policy from a factory (``LocalCluster.per_policy(...)``,
``DockerCluster.per_policy(...)``), starts it, replays the workload on it
(treadle.cluster.driver), stops it, and adds ``timers.json`` (each role's lag and the
run's fidelity verdict, treadle.cluster.fidelity; also a section of the report) and the
cluster's logs under POLICY/cluster/, one policy at a time. ``make_backend`` gives the
backend of ``treadle compare --mode MODE``.

A comparison keeps of each run only what the report needs (``RunMetrics``) and a
``RunResult`` (counts, end time, stall, stats); the full event log is on disk
(``RunResult.records()`` reads it back), never held for every policy at once.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing as mp
import queue as queue_mod
import signal
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from treadle import events as ev, metrics
from treadle.cluster.driver import DEFAULT_TIMEOUT_S, finished_count, replay, run_async
from treadle.errors import TreadleError
from treadle.event_columns import read_events
from treadle.model import Workload
from treadle.registry import build
from treadle.sim import ProgressFn, SimResult
from treadle.study.runner import (
    PolicyChoice,
    RunOptions,
    alone_jcts,
    asks_for,
    build_policy,
    run_sim,
)

if TYPE_CHECKING:  # the cluster classes and the report's plots load when used: a worker
    # process imports this module and needs neither
    from treadle.cluster.base import ClusterBase, ClusterFactory

TIMERS_JSON = "timers.json"
EVENTS_FILES = ("events.parquet", "events.jsonl")  # the event log, by --events

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunResult:
    """One run of a comparison without its event log (on disk under ``run_dir``)."""

    policy: str
    jobs: int
    finished: int
    end_s: float
    stalled: str | None
    stats: dict[str, int]
    run_dir: Path
    unfaithful: str | None = None  # a live run whose lag expired roles: why

    @property
    def unfinished(self) -> int:
        return self.jobs - self.finished

    @classmethod
    def of(cls, policy: str, result: SimResult, run_dir: Path) -> RunResult:
        return cls(
            policy,
            result.jobs,
            result.finished,
            result.end_s,
            result.stalled,
            dict(result.stats),
            run_dir,
        )

    def records(self) -> list[ev.Record]:
        """The run's event log, read back from its file (none with ``--events none``)."""
        for name in EVENTS_FILES:
            if (self.run_dir / name).exists():
                return read_events(self.run_dir / name)
        raise TreadleError(f"{self.run_dir}: no event log (the run had --events none)")


@dataclass
class Comparison:
    """Every run's metrics and result, in the order the policies were given."""

    runs: dict[str, metrics.RunMetrics]
    results: dict[str, RunResult]
    report: Path


#: Called with each run as it ends (in completion order): policy, result, metrics.
OnFinished = Callable[[str, RunResult, metrics.RunMetrics], None]


class Backend(Protocol):
    """Where a comparison runs each policy: the simulator, or a fresh cluster per policy."""

    #: Whether runs may go to worker processes, several at once (``run`` is then called
    #: in a worker, on a copy of the backend made after ``prepare``).
    parallel: ClassVar[bool]

    def prepare(
        self,
        workload: Workload,
        choices: Sequence[PolicyChoice],
        options: RunOptions,
        out_dir: Path,
    ) -> None:
        """Every check, before anything runs: a bad name or setting fails here."""

    def run(
        self,
        workload: Workload,
        choice: PolicyChoice,
        options: RunOptions,
        alone: dict[str, float],
        progress: ProgressFn | None,
        run_dir: Path,
    ) -> tuple[RunResult, metrics.RunMetrics]:
        """Run one policy and write its files under ``run_dir``."""

    def title(self, workload: Workload, policies: int) -> str: ...


class SimBackend:
    """Each policy in the simulator (``treadle compare --mode sim``)."""

    parallel: ClassVar[bool] = True

    def prepare(
        self,
        workload: Workload,
        choices: Sequence[PolicyChoice],
        options: RunOptions,
        out_dir: Path,
    ) -> None:
        for c in choices:
            build_policy(c)
            build("asks", *asks_for(c, options))

    def run(
        self,
        workload: Workload,
        choice: PolicyChoice,
        options: RunOptions,
        alone: dict[str, float],
        progress: ProgressFn | None,
        run_dir: Path,
    ) -> tuple[RunResult, metrics.RunMetrics]:
        result, run = run_sim(
            workload, choice, run_dir, options=options, progress=progress, alone=alone
        )
        return RunResult.of(choice.name, result, run_dir), run

    def title(self, workload: Workload, policies: int) -> str:
        return f"treadle: {workload.name} under {policies} policies"


class ClusterBackend:
    """Each policy on a fresh cluster that ``make`` builds (started, replayed on and
    stopped before the next one starts); its logs stay under POLICY/cluster/. One policy at
    a time whatever ``workers`` says: a cluster uses the machine already."""

    parallel: ClassVar[bool] = False

    def __init__(self, make: ClusterFactory, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.make = make
        self.timeout_s = timeout_s
        self.clusters: dict[str, ClusterBase] = {}
        self.notes: dict[str, str] = {}

    def prepare(
        self,
        workload: Workload,
        choices: Sequence[PolicyChoice],
        options: RunOptions,
        out_dir: Path,
    ) -> None:
        SimBackend().prepare(workload, choices, options, out_dir)
        if not self.timeout_s > 0:
            raise TreadleError(f"--timeout-s must be > 0, got {self.timeout_s:g}")
        # Built (and so checked) now; each is started in its turn.
        for c in choices:
            cluster = self.make(c, out_dir / c.name / "cluster")
            if options.am_interval_s is not None and cluster.am_interval_s is None:
                cluster = dataclasses.replace(cluster, am_interval_s=options.am_interval_s)
            self.clusters[c.name] = cluster
        if self.clusters:
            next(iter(self.clusters.values())).preflight()

    def run(
        self,
        workload: Workload,
        choice: PolicyChoice,
        options: RunOptions,
        alone: dict[str, float],
        progress: ProgressFn | None,
        run_dir: Path,
    ) -> tuple[RunResult, metrics.RunMetrics]:
        cluster = self.clusters[choice.name]
        strategy, params = asks_for(choice, options)

        async def replay_on_cluster() -> list[ev.Record]:
            async with cluster:
                return await cluster.guard(
                    replay(
                        cluster.rm_address,
                        workload,
                        alone=alone,
                        ask_strategy=strategy,
                        ask_params=params,
                        managed_am=cluster.managed_am,
                        timeout_s=self.timeout_s,
                        progress=progress,
                        mode=cluster.mode,
                    )
                )

        records = run_async(replay_on_cluster())
        weights = {name: u.weight for name, u in workload.users.items()}
        run = metrics.analyze(records, policy=choice.name, user_weights=weights)
        metrics.write_run_outputs(
            records,
            run_dir,
            policy=choice.name,
            user_weights=weights,
            run=run,
            events=options.events,
        )
        fidelity = cluster.fidelity(records)  # lag per role, expiries, verdict
        metrics.write_json(metrics.rounded(fidelity.to_json()), run_dir / TIMERS_JSON)
        self.notes[choice.name] = fidelity.markdown(choice.name)
        end = max((float(r["t"]) for r in records), default=0.0)
        result = RunResult(
            choice.name,
            len(workload.jobs),
            finished_count(records),
            end,
            None,
            {},
            run_dir,
            unfaithful=None if fidelity.faithful else fidelity.message(),
        )
        return result, run

    def report_notes(self) -> str:
        """The report's section on each run's lag and fidelity."""
        if not self.notes:
            return ""
        return "\n## Lag and fidelity of the live runs\n\n" + "\n".join(self.notes.values())

    def title(self, workload: Workload, policies: int) -> str:
        first = next(iter(self.clusters.values()))
        return (
            f"treadle: {workload.name} under {policies} policies "
            f"({first.where}, dilation {first.dilation:g})"
        )


def make_backend(
    mode: str,
    workload: Workload,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    dilation: float = 10.0,
    managed_am: bool = False,
    nm_processes: int = 1,
    nm_containers: int | None = None,
    image: str | None = None,
    **settings: Any,
) -> Backend:
    """The backend of ``treadle compare --mode MODE``: ``sim``, or ``local`` / ``docker``
    clusters of ``workload``'s shape (``nm_processes`` NM host processes, or
    ``nm_containers`` NM host containers of ``image``: by default 2, or 1 for one node);
    ``settings`` are further fields of the cluster class (``ready_timeout_s``, ...)."""
    if mode == "sim":
        return SimBackend()
    settings.update(dilation=dilation, managed_am=managed_am)
    if mode == "local":
        from treadle.cluster.local import LocalCluster

        make = LocalCluster.per_policy(workload, nm_processes=nm_processes, **settings)
        return ClusterBackend(make, timeout_s)
    if mode == "docker":
        from treadle.cluster.docker import DockerCluster

        nm = nm_containers or min(2, len(workload.cluster.nodes))
        if image is not None:
            settings["image"] = image
        return ClusterBackend(
            DockerCluster.per_policy(workload, nm_containers=nm, **settings), timeout_s
        )
    raise TreadleError(f"unknown --mode {mode!r}; use sim, local or docker")


def compare(
    workload: Workload,
    policies: Iterable[PolicyChoice],
    out_dir: Path,
    backend: Backend,
    *,
    options: RunOptions | None = None,
    baseline: str | None = None,
    on_policy: Callable[[str], ProgressFn | None] | None = None,
    on_finished: OnFinished | None = None,
    workers: int = 1,
) -> Comparison:
    """Run every policy on ``backend`` and write ``out_dir``'s per-policy files and the
    comparison report (the same files whatever the backend, and whatever ``workers``).

    ``workers > 1`` runs up to that many policies at once, each in its own process, when
    the backend allows it (the simulator; clusters run one at a time). ``on_policy(NAME)``
    is called for every policy before any run starts, in the order given, and returns its
    progress callback; ``on_finished`` is called as each run ends."""
    if workers < 1:
        raise TreadleError(f"--workers must be >= 1, got {workers}")
    options = options or RunOptions()
    choices = list(policies)
    backend.prepare(workload, choices, options, out_dir)  # bad settings fail before any run
    workers = min(workers, len(choices))
    parallel = workers > 1 and backend.parallel
    if parallel:
        _start_forkserver()  # it imports treadle while the references are computed
    alone = alone_jcts(workload, options) if options.slowdown else {}
    progress = {c.name: on_policy(c.name) if on_policy else None for c in choices}
    if parallel:
        done = _run_parallel(
            backend, workload, choices, options, alone, out_dir, workers, progress, on_finished
        )
    else:
        done = {}
        for c in choices:
            done[c.name] = backend.run(
                workload, c, options, alone, progress[c.name], out_dir / c.name
            )
            if on_finished is not None:
                on_finished(c.name, *done[c.name])
    results = {c.name: done[c.name][0] for c in choices}  # the order given, not of completion
    runs = {c.name: done[c.name][1] for c in choices}
    from treadle import report

    title = backend.title(workload, len(choices))
    path = report.write_comparison(runs, out_dir, baseline=baseline, title=title)
    notes = getattr(backend, "report_notes", None)  # live runs: their lag and fidelity
    if notes is not None and (text := notes()):
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
    return Comparison(runs, results, path)


# Parallel runs. Each policy runs in a process of its own (at most ``workers`` at once),
# started from a forkserver where the platform has one (else spawn): the parent holds
# threads (rich's refresh thread, the queue's feeder), which a plain fork copies in
# whatever state they are, locks included; the forkserver is a fresh interpreter that
# imports treadle once and forks each worker from that clean state, nearly as cheaply.
# A process per run, rather than a pool, names the policy whose process died (its exit
# code) instead of breaking every pending run at once. Workers send their progress, their
# result (RunResult and RunMetrics: what the report needs, not the event log) or their
# error through one queue.

PROGRESS_INTERVAL_S = 0.1  # a worker reports progress at most this often (and at the end)
_PRELOAD = ["treadle.study.compare"]


def _mp_context() -> Any:
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return mp.get_context("spawn")


def _start_forkserver() -> None:
    if _mp_context().get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def _worker(
    index: int,
    backend: Backend,
    workload: Workload,
    choice: PolicyChoice,
    options: RunOptions,
    alone: dict[str, float],
    run_dir: Path,
    messages: Any,
) -> None:
    last = 0.0

    def progress(done: int, total: int, t: float) -> None:
        nonlocal last
        now = time.monotonic()
        if done >= total or now - last >= PROGRESS_INTERVAL_S:
            last = now
            messages.put(("progress", index, (done, total, t)))

    try:
        outcome = backend.run(workload, choice, options, alone, progress, run_dir)
    except Exception as e:  # sent to the parent, which names the policy
        text = str(e) if isinstance(e, TreadleError) else f"{type(e).__name__}: {e}"
        messages.put(("error", index, (text, traceback.format_exc())))
    else:
        messages.put(("done", index, outcome))


def _died(process: BaseProcess) -> str:
    code = process.exitcode
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            pass
    return f"exit status {code}"


def _run_parallel(
    backend: Backend,
    workload: Workload,
    choices: Sequence[PolicyChoice],
    options: RunOptions,
    alone: dict[str, float],
    out_dir: Path,
    workers: int,
    progress: dict[str, ProgressFn | None],
    on_finished: OnFinished | None,
) -> dict[str, tuple[RunResult, metrics.RunMetrics]]:
    ctx = _mp_context()
    messages = ctx.Queue()
    waiting = deque(enumerate(choices))
    running: dict[int, BaseProcess] = {}
    done: dict[str, tuple[RunResult, metrics.RunMetrics]] = {}
    try:
        while waiting or running:
            while waiting and len(running) < workers:
                i, c = waiting.popleft()
                process = ctx.Process(
                    target=_worker,
                    args=(i, backend, workload, c, options, alone, out_dir / c.name, messages),
                    name=f"treadle-compare-{c.name}",
                    daemon=True,
                )
                process.start()
                running[i] = process
            # A process flushes its queue before it exits: one that had exited before this
            # wait, when the wait finds nothing, has sent everything it ever will; if its
            # outcome is not among that, it died.
            exited = [i for i, process in running.items() if process.exitcode is not None]
            try:
                kind, i, payload = messages.get(timeout=PROGRESS_INTERVAL_S)
            except queue_mod.Empty:
                if exited:
                    raise TreadleError(
                        f"policy {choices[exited[0]].name}: its worker process died "
                        f"({_died(running[exited[0]])}) before the run ended"
                    ) from None
                continue
            name = choices[i].name
            if kind == "progress":
                fn = progress[name]
                if fn is not None:
                    fn(*payload)
            elif kind == "error":
                text, trace = payload
                log.debug("policy %s failed in its worker:\n%s", name, trace)
                raise TreadleError(f"policy {name}: {text}")
            else:
                done[name] = payload
                running.pop(i).join()
                if on_finished is not None:
                    on_finished(name, *payload)
    finally:
        for process in running.values():  # an error, or an interrupt: stop the others
            process.terminate()
        for process in running.values():
            process.join()
        messages.close()
        messages.cancel_join_thread()
    return done

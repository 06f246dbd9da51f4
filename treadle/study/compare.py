"""The one way policies are compared: in the simulator or on a fresh cluster per policy.

``compare`` runs every policy on a ``Backend`` and writes the per-policy files
(``summary.json``, ``jobs.csv``, ``events.jsonl``...) and the comparison report, the same
files whatever the backend. ``SimBackend`` simulates each policy, several at once in worker
processes with ``workers > 1`` (``treadle.study.parallel``) or on a Dask cluster
(``treadle.study.dask_runs``); ``ClusterBackend`` builds
a cluster per policy from a factory (``LocalCluster.per_policy(...)``,
``DockerCluster.per_policy(...)``), starts it, replays the workload on it
(treadle.cluster.driver), stops it, and adds ``timers.json`` (each role's lag and the
run's fidelity verdict, treadle.cluster.fidelity; also a section of the report) and the
cluster's logs under POLICY/cluster/, one policy at a time. ``make_backend`` gives the
backend of ``treadle compare --mode MODE``.

A comparison keeps of each run only what the report needs (``RunMetrics``, its
utilization series thinned to the points the plot draws: ``report.series.thinned``) and a
``RunResult`` (counts, end time, stall, stats): its per-job results are all the
report's figures against a reference need; the full event log is on disk
(``RunResult.records()`` reads it back), never held for every policy at once.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from treadle import events as ev, metrics
from treadle.cluster.driver import (
    DEFAULT_TIMEOUT_S,
    ReplayTimedOut,
    finished_count,
    replay,
    run_async,
)
from treadle.errors import TreadleError
from treadle.event_columns import read_events
from treadle.model import Workload
from treadle.registry import build
from treadle.report.series import thinned
from treadle.sim import ProgressFn, SimResult
from treadle.study.parallel import Runner, mp_context, run_in_processes, start_forkserver
from treadle.study.runner import (
    PolicyChoice,
    RunOptions,
    alone_jcts,
    asks_for,
    build_policy,
    policy_parameters,
    run_options,
    run_parameters,
    run_sim,
)

if TYPE_CHECKING:  # the cluster classes and the report's plots load when used: a worker
    # process imports this module and needs neither
    from treadle.cluster.base import ClusterBase, ClusterFactory

TIMERS_JSON = "timers.json"
#: The policy a comparison's deadline figures (DVR, DSR) are against, when present: the
#: UWFQ paper's reference.
DEFAULT_REFERENCE = "ujf"
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


def _for_report(run: metrics.RunMetrics) -> metrics.RunMetrics:
    """What the report needs of a run: its utilization series as the plot draws them (at
    most a few thousand points, where a long run has millions)."""
    return dataclasses.replace(run, utilization=thinned(run.utilization))


class Backend(Runner, Protocol):
    """Where a comparison runs each policy: the simulator, or a fresh cluster per policy
    (``run`` runs one, each backend's result a :class:`RunResult`)."""

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
        return RunResult.of(choice.name, result, run_dir), _for_report(run)

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

        timed_out: ReplayTimedOut | None = None
        try:
            records = run_async(replay_on_cluster())
        except ReplayTimedOut as e:  # every job's result is written all the same
            records, timed_out = e.records, e
        weights = {name: u.weight for name, u in workload.users.items()}
        run = metrics.analyze(records, policy=choice.name, user_weights=weights)
        if timed_out is not None:
            run = metrics.summary.with_unsubmitted(run, timed_out.unsubmitted_rows())
        run.summary["parameters"] = run_parameters(workload, choice, options)
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
        if timed_out is not None:
            raise TreadleError(
                f"{choice.name}: {timed_out}; every job's result written to {run_dir}"
            )
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
        return result, _for_report(run)

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
    reference: str | None = DEFAULT_REFERENCE,
    paper_compat: bool = False,
    on_policy: Callable[[str], ProgressFn | None] | None = None,
    on_finished: OnFinished | None = None,
    workers: int = 1,
    cluster: str | None = None,
) -> Comparison:
    """Run every policy on ``backend`` and write ``out_dir``'s per-policy files and the
    comparison report (the same files whatever the backend, ``workers`` and ``cluster``).

    ``workers > 1`` runs up to that many policies at once, each in its own process, when
    the backend allows it (the simulator; clusters run one at a time). ``cluster``
    (``tcp://HOST:PORT``) sends the runs to that Dask scheduler instead
    (``treadle.study.dask_runs``; the simulator only). ``on_policy(NAME)`` is called for
    every policy before any run starts, in the order given, and returns its progress
    callback; ``on_finished`` is called as each run ends. The alone references are
    computed here either way, once for every policy. ``reference`` is the policy the
    deadline and per-user figures are against (reported absent when it is not among
    ``policies``: no run is added for it); ``paper_compat`` adds those figures as the UWFQ
    authors' analysis counted them (``treadle.metrics.reference``)."""
    if workers < 1:
        raise TreadleError(f"--workers must be >= 1, got {workers}")
    if cluster is not None and not backend.parallel:
        raise TreadleError("--cluster runs simulations (--mode sim) only")
    options = options or RunOptions()
    choices = list(policies)
    backend.prepare(workload, choices, options, out_dir)  # bad settings fail before any run
    done = _run_all(
        backend, workload, choices, options, out_dir,
        workers=min(workers, len(choices)), cluster=cluster, on_policy=on_policy,
        on_finished=on_finished,
    )  # fmt: skip
    results = {c.name: done[c.name][0] for c in choices}  # the order given, not of completion
    runs = {c.name: done[c.name][1] for c in choices}
    path = _write_report(
        runs, workload, choices, options, out_dir, backend,
        baseline=baseline, reference=reference, paper_compat=paper_compat,
    )  # fmt: skip
    return Comparison(runs, results, path)


def _run_all(
    backend: Backend,
    workload: Workload,
    choices: list[PolicyChoice],
    options: RunOptions,
    out_dir: Path,
    *,
    workers: int,
    cluster: str | None,
    on_policy: Callable[[str], ProgressFn | None] | None,
    on_finished: OnFinished | None,
) -> dict[str, tuple[RunResult, metrics.RunMetrics]]:
    """Every policy's run, by policy name in completion order: on the Dask scheduler
    ``cluster``, in up to ``workers`` local processes, or one after another in this one."""
    local_parallel = cluster is None and workers > 1 and backend.parallel
    connection = None
    if cluster is not None:  # an unreachable scheduler fails before the references
        from treadle.study import dask_runs

        connection = dask_runs.connect(cluster)
    ctx = mp_context() if local_parallel else None
    if ctx is not None:
        start_forkserver(ctx)  # if it is one: it imports treadle while the references run
    try:
        alone = alone_jcts(workload, options) if options.slowdown else {}
        progress = {c.name: on_policy(c.name) if on_policy else None for c in choices}
        if connection is not None:
            return dask_runs.run_on_cluster(
                connection, backend, workload, choices, options, alone, out_dir, progress,
                on_finished,
            )  # fmt: skip
        if ctx is not None:
            return run_in_processes(
                backend, workload, choices, options, alone, out_dir, workers, progress,
                on_finished, ctx=ctx, all_started=_load_report,
            )  # fmt: skip
        return _run_here(backend, workload, choices, options, alone, out_dir, progress, on_finished)
    finally:
        if connection is not None:
            connection.close()


def _run_here(
    backend: Backend,
    workload: Workload,
    choices: list[PolicyChoice],
    options: RunOptions,
    alone: dict[str, float],
    out_dir: Path,
    progress: dict[str, ProgressFn | None],
    on_finished: OnFinished | None,
) -> dict[str, tuple[RunResult, metrics.RunMetrics]]:
    """Every policy's run in this process, one after another, in the order given."""
    done = {}
    for c in choices:
        done[c.name] = backend.run(workload, c, options, alone, progress[c.name], out_dir / c.name)
        if on_finished is not None:
            on_finished(c.name, *done[c.name])
    return done


def _write_report(
    runs: dict[str, metrics.RunMetrics],
    workload: Workload,
    choices: list[PolicyChoice],
    options: RunOptions,
    out_dir: Path,
    backend: Backend,
    *,
    baseline: str | None,
    reference: str | None,
    paper_compat: bool,
) -> Path:
    """The comparison report of ``runs`` (in the order given), written under ``out_dir``."""
    from treadle import report

    notes = getattr(backend, "report_notes", None)  # live runs: their lag and fidelity
    return report.write_comparison(
        runs,
        out_dir,
        baseline=baseline,
        title=backend.title(workload, len(choices)),
        reference=reference,
        paper_compat=paper_compat,
        users=list(workload.users),
        user_weights={name: u.weight for name, u in workload.users.items()},
        parameters=policy_parameters(choices, options),
        options=run_options(options),
        notes=notes() if notes is not None else "",
    )


def _load_report() -> None:
    """Import the report's plotting (matplotlib) while the last runs go on."""
    import treadle.report.markdown
    import treadle.report.page  # noqa: F401

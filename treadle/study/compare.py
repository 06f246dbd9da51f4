"""The one way policies are compared: in the simulator or on a fresh cluster per policy.

``compare`` runs every policy on a ``Backend`` in turn and writes the per-policy files
(``summary.json``, ``jobs.csv``, ``events.jsonl``...) and the comparison report, the same
files whatever the backend. ``SimBackend`` simulates each policy; ``ClusterBackend`` builds
a cluster per policy from a factory (``LocalCluster.per_policy(...)``,
``DockerCluster.per_policy(...)``), starts it, replays the workload on it
(treadle.cluster.driver), stops it, and adds ``timers.json`` and the cluster's logs under
POLICY/cluster/. ``make_backend`` gives the backend of ``treadle compare --mode MODE``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from treadle import events as ev, metrics, report
from treadle.cluster.base import ClusterBase, ClusterFactory
from treadle.cluster.driver import DEFAULT_TIMEOUT_S, finished_count, replay, run_async
from treadle.cluster.local import LocalCluster
from treadle.errors import TreadleError
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

TIMERS_JSON = "timers.json"


@dataclass
class Comparison:
    runs: dict[str, metrics.RunMetrics]
    results: dict[str, SimResult]
    report: Path


class Backend(Protocol):
    """Where a comparison runs each policy: the simulator, or a fresh cluster per policy."""

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
    ) -> tuple[SimResult, metrics.RunMetrics]:
        """Run one policy and write its files under ``run_dir``."""

    def title(self, workload: Workload, policies: int) -> str: ...


class SimBackend:
    """Each policy in the simulator (``treadle compare --mode sim``)."""

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
    ) -> tuple[SimResult, metrics.RunMetrics]:
        return run_sim(workload, choice, run_dir, options=options, progress=progress, alone=alone)

    def title(self, workload: Workload, policies: int) -> str:
        return f"treadle: {workload.name} under {policies} policies"


class ClusterBackend:
    """Each policy on a fresh cluster that ``make`` builds (started, replayed on and
    stopped before the next one starts); its logs stay under POLICY/cluster/."""

    def __init__(self, make: ClusterFactory, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.make = make
        self.timeout_s = timeout_s
        self.clusters: dict[str, ClusterBase] = {}

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
    ) -> tuple[SimResult, metrics.RunMetrics]:
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
            records, run_dir, policy=choice.name, user_weights=weights, run=run
        )
        timers = {"dilation": cluster.dilation, "processes": cluster.timer_stats()}
        for r in records:
            if r["event"] == ev.RUN_FINISHED:
                timers["driver_submit"] = r.get("submit_timers")
        metrics.write_json(metrics.rounded(timers), run_dir / TIMERS_JSON)
        end = max((float(r["t"]) for r in records), default=0.0)
        result = SimResult(records, len(workload.jobs), finished_count(records), end, None, {})
        return result, run

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
) -> Comparison:
    """Run every policy on ``backend`` in turn and write ``out_dir``'s per-policy files and
    the comparison report (the same files whatever the backend)."""
    options = options or RunOptions()
    choices = list(policies)
    backend.prepare(workload, choices, options, out_dir)  # bad settings fail before any run
    alone = alone_jcts(workload, options) if options.slowdown else {}
    runs: dict[str, metrics.RunMetrics] = {}
    results: dict[str, SimResult] = {}
    for c in choices:
        progress = on_policy(c.name) if on_policy else None
        results[c.name], runs[c.name] = backend.run(
            workload, c, options, alone, progress, out_dir / c.name
        )
    title = backend.title(workload, len(choices))
    path = report.write_comparison(runs, out_dir, baseline=baseline, title=title)
    return Comparison(runs, results, path)

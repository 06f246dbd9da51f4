"""One policy's run in the simulator, and what every run needs: policies and ask
strategies by name with their settings, and the reference JCTs for slowdown (each job
alone on the empty cluster, computed once per distinct job shape; they travel in the event
log so that metrics need nothing else). ``treadle.study.compare`` runs several policies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from treadle import metrics
from treadle.errors import InputError, PluginError
from treadle.model import JobSpec, Workload
from treadle.registry import build, discover, factory
from treadle.sim import ProgressFn, SimResult, Simulation

REFERENCE_POLICY = "fifo"  # an empty cluster makes every policy behave alike; fifo is cheapest


@dataclass(frozen=True)
class PolicyChoice:
    """A policy by name with its parameters (validated when built)."""

    name: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class RunOptions:
    #: The AMs' ask strategy; None: each policy's own (``Policy.ask_strategy``).
    ask_strategy: str | None = None
    #: Its parameters: ``key`` for every strategy in use, ``STRATEGY.key`` for one.
    ask_params: Mapping[str, Any] | None = None
    am_interval_s: float | None = None
    stall_s: float = 3600.0
    slowdown: bool = True  # compute alone-JCTs (one extra small simulation per job shape)
    #: Draws the nodes' heartbeat phases (with the workload's seed): results move a little
    #: with the phases, as a live cluster's do; vary it to see that spread.
    phase_seed: int = 0


def _job_shape(job: JobSpec) -> tuple[Any, ...]:
    return tuple((s.name, s.resources, s.durations, s.parents) for s in job.stages)


def alone_jcts(
    workload: Workload, options: RunOptions = RunOptions(), progress: ProgressFn | None = None
) -> dict[str, float]:
    """JCT of every job run alone on the empty cluster (the slowdown denominator), with
    greedy AMs whatever the compared runs use: one reference for every policy."""
    options = replace(options, ask_strategy="greedy", ask_params=None)
    cache: dict[tuple[Any, ...], float] = {}
    out: dict[str, float] = {}
    total = len(workload.jobs)
    for i, job in enumerate(workload.jobs):
        key = _job_shape(job)
        if key not in cache:
            alone = replace(
                workload, name=f"{workload.name}:{job.name}", jobs=(replace(job, submit_s=0.0),)
            )
            result = _simulate(alone, PolicyChoice(REFERENCE_POLICY, {}), options, None, {})
            finish = [r["t"] for r in result.records if r["event"] == "job_finished"]
            cache[key] = finish[0] if finish else float("nan")
        out[job.name] = cache[key]
        if progress is not None:
            progress(i + 1, total, 0.0)
    return out


def build_policy(choice: PolicyChoice) -> Any:
    return build("policies", choice.name, choice.params)


def asks_for(choice: PolicyChoice | None, options: RunOptions) -> tuple[str, dict[str, Any]]:
    """The ask strategy and its parameters for runs of ``choice`` (``None``: the reference
    runs for slowdown, which use greedy unless a strategy is named). Keys ``S.key`` of the
    ask parameters go to strategy ``S`` only; they are checked when the strategy is built."""
    name = options.ask_strategy
    if name is None:
        name = type(build_policy(choice)).ask_strategy if choice is not None else "greedy"
    params: dict[str, Any] = {}
    for key, value in (options.ask_params or {}).items():
        strategy, dot, param = key.partition(".")
        if not dot:
            params[key] = value
        elif strategy == name:
            params[param] = value
    return name, params


def _strategy_factory(options: RunOptions, choice: PolicyChoice | None) -> Callable[[], Any]:
    """Validates the parameters now; then one fresh strategy per job."""
    return factory("asks", *asks_for(choice, options))


def _simulate(
    workload: Workload,
    choice: PolicyChoice,
    options: RunOptions,
    progress: ProgressFn | None,
    alone: dict[str, float],
) -> SimResult:
    sim = Simulation(
        workload,
        build_policy(choice),
        _strategy_factory(options, choice),
        policy_name=choice.name,
        am_interval_s=options.am_interval_s,
        alone_jct_s=alone,
        stall_s=options.stall_s,
        progress=progress,
        phase_seed=options.phase_seed,
    )
    return sim.run()


def run_sim(
    workload: Workload,
    choice: PolicyChoice,
    out_dir: Path | None = None,
    *,
    options: RunOptions = RunOptions(),
    progress: ProgressFn | None = None,
    alone: dict[str, float] | None = None,
) -> tuple[SimResult, metrics.RunMetrics]:
    """Simulate ``workload`` under one policy; write the run files when ``out_dir`` is set."""
    if alone is None:
        alone = alone_jcts(workload, options) if options.slowdown else {}
    result = _simulate(workload, choice, options, progress, alone)
    weights = {name: u.weight for name, u in workload.users.items()}
    run = metrics.analyze(result.records, policy=choice.name, user_weights=weights)
    if out_dir is not None:
        metrics.write_run_outputs(
            result.records, out_dir, policy=choice.name, user_weights=weights, run=run
        )
    return result, run


def resolve_policies(spec: str) -> list[str]:
    """``"all"`` or a comma-separated list, checked against the installed policies."""
    installed = list(discover("policies"))
    if spec.strip() == "all":
        return installed
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise InputError("--policies", None, "name at least one policy, or 'all'")
    unknown = [n for n in names if n not in installed]
    if unknown:
        raise PluginError(
            f"unknown policy {unknown[0]!r} in --policies (installed: {', '.join(installed)})"
        )
    if len(set(names)) != len(names):
        raise InputError("--policies", None, "a policy is named twice")
    return names


def split_policy_settings(
    settings: Mapping[str, Any], policies: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """``{"drf.across": "jobs"}`` -> ``{"drf": {"across": "jobs"}}``; every key must name a
    policy being compared."""
    out: dict[str, dict[str, Any]] = {p: {} for p in policies}
    for key, value in settings.items():
        policy, dot, param = key.partition(".")
        if not dot or not param:
            raise InputError("--set", key, "use POLICY.PARAM=VALUE with compare")
        if policy not in out:
            raise InputError("--set", key, f"policy {policy!r} is not among {list(policies)}")
        out[policy][param] = value
    return out

"""One policy's run in the simulator, and what every run needs: policies and ask
strategies by name with their settings, and the reference JCTs for slowdown (each job
alone on the empty cluster, computed once per distinct job shape; they travel in the event
log so that metrics need nothing else). ``treadle.study.compare`` runs several policies.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import os
import pickle
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from treadle import metrics
from treadle.errors import InputError, PluginError
from treadle.event_columns import ParquetEventLog
from treadle.metrics.utilization import LazySeries
from treadle.model import ClusterSpec, JobSpec, Workload
from treadle.registry import (
    PolicyChoice as PolicyChoice,  # a run's policy: the study's API offers it too
    build,
    did_you_mean,
    discover,
    factory,
    load,
    lookup,
)
from treadle.sim import ProgressFn, SimResult, Simulation
from treadle.sim.alone import AloneModel
from treadle.sim.feed import stream_error
from treadle.study import heap
from treadle.study.alone_cache import AloneCache, context_key, job_key
from treadle.study.timings import Timings, maybe
from treadle.workload.timeline import without_accounts

REFERENCE_POLICY = "fifo"  # an empty cluster makes every policy behave alike; fifo is cheapest


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
    #: Read and store the alone-JCT references in the on-disk cache (``alone_cache``).
    alone_cache: bool = True
    #: The event log's file (``--events``): parquet (written as the run goes), jsonl
    #: (today's lines, in time order) or none (metrics still computed, from a temporary
    #: Parquet file that is deleted).
    events: str = "parquet"
    #: What the workload was loaded from (a path or a built-in name, as given), and the
    #: ``--partition`` applied to it: recorded in ``summary.json``'s ``parameters``.
    workload_source: str | None = None
    partition: str | None = None
    #: The importer options it was loaded with (``--homo-filter``, ...), if any.
    trace_options: Mapping[str, Any] | None = None
    #: What ``--nodes``, ``--nodes-scale`` and ``--load`` did to it, if given
    #: (``treadle.workload.scaling.scaled``): recorded in ``parameters`` too.
    scaling: Mapping[str, Any] | None = None


def _job_shape(job: JobSpec) -> tuple[Any, ...]:
    return tuple((s.name, s.resources, s.durations, s.parents) for s in job.stages)


def _shape_digest(job: JobSpec) -> bytes:
    """A 128-bit digest of the job's shape: a key that holds none of the job (as a key,
    the shape kept every streamed job's durations to the end of the run)."""
    return hashlib.blake2b(pickle.dumps(_job_shape(job), protocol=5), digest_size=16).digest()


#: Distinct shapes to compute before ``alone_jcts(workers=None)`` starts worker processes
#: (starting them costs about as much as this many references on a small cluster).
MIN_PARALLEL = 64


def _reference_options(options: RunOptions) -> RunOptions:
    # Greedy AMs whatever the compared runs use: one reference for every policy.
    return replace(options, ask_strategy="greedy", ask_params=None)


def _reference_settings(options: RunOptions) -> dict[str, Any]:
    """Everything of the reference runs' settings that a reference depends on (its key)."""
    return {
        "policy": REFERENCE_POLICY,
        "asks": asks_for(None, options),
        "am_interval_s": options.am_interval_s,
        "stall_s": options.stall_s,
        "phase_seed": options.phase_seed,
    }


def _simulated_reference(workload: Workload, job: JobSpec, options: RunOptions) -> float:
    """``job`` alone on ``workload``'s empty cluster, submitted at 0: its finish time."""
    # Alone on an empty cluster under fifo: no queue accounts to change.
    alone = without_accounts(
        replace(workload, name=f"{workload.name}:{job.name}", jobs=(replace(job, submit_s=0.0),))
    )
    result = _simulate(alone, PolicyChoice(REFERENCE_POLICY, {}), options, None, {})
    for r in reversed(result.records):
        if r["event"] == "job_finished":
            return float(r["t"])
    return float("nan")


#: The last ``AloneModel`` built, with what it was built from (one workload at a time).
_model_memo: tuple[ClusterSpec, int, RunOptions, AloneModel] | None = None


def _alone_model(workload: Workload, options: RunOptions) -> AloneModel:
    global _model_memo
    memo = _model_memo
    if memo is None or not (
        memo[0] is workload.cluster and memo[1] == workload.seed and memo[2] == options
    ):
        model = AloneModel(
            workload,
            am_interval_s=options.am_interval_s,
            stall_s=options.stall_s,
            phase_seed=options.phase_seed,
        )
        memo = _model_memo = (workload.cluster, workload.seed, options, model)
    return memo[3]


_worker_context: tuple[Workload, RunOptions] | None = None


def _init_worker(base: Workload, options: RunOptions) -> None:
    global _worker_context
    _worker_context = (base, options)


def _worker_reference(job: JobSpec) -> float:
    assert _worker_context is not None, "not a reference worker"
    return _simulated_reference(_worker_context[0], job, _worker_context[1])


def _references(
    workload: Workload,
    jobs: Sequence[JobSpec],
    options: RunOptions,
    workers: int | None,
) -> Iterator[float]:
    """The simulated references of ``jobs``, in their order: in this process, or in
    worker processes (each receives the cluster once, then jobs in chunks)."""
    auto = workers is None
    n = min(os.cpu_count() or 1, len(jobs)) if workers is None else min(workers, len(jobs))
    if n <= 1 or (auto and len(jobs) < MIN_PARALLEL) or multiprocessing.current_process().daemon:
        for job in jobs:
            yield _simulated_reference(workload, job, options)
        return
    # fork: the workers start at once and never run the main module again (a script
    # without ``if __name__ == "__main__"`` is fine). With other threads running (a
    # progress bar), forking could copy a lock one of them holds: forkserver then (its
    # server is forked once, with the simulator imported), which imports ``__main__`` in
    # each worker as spawn does.
    if threading.active_count() == 1:
        ctx: multiprocessing.context.BaseContext = multiprocessing.get_context("fork")
    else:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
    base = replace(workload, jobs=())
    chunk = max(1, min(64, len(jobs) // (n * 8)))
    with ProcessPoolExecutor(n, ctx, initializer=_init_worker, initargs=(base, options)) as ex:
        yield from ex.map(_worker_reference, jobs, chunksize=chunk)


def alone_jcts(
    workload: Workload,
    options: RunOptions = RunOptions(),
    progress: ProgressFn | None = None,
    *,
    workers: int | None = None,
    cache: AloneCache | None = None,
) -> dict[str, float]:
    """JCT of every job run alone on the empty cluster (the slowdown denominator), with
    greedy AMs whatever the compared runs use: one reference for every policy.

    One reference per distinct job shape (the first job of the shape), by the exact rule
    of ``treadle.sim.alone`` where it applies (in this process: it costs less than a
    cache lookup); the others are read from the on-disk cache when
    ``options.alone_cache`` (``cache``: a cache other than the default one), or simulated
    in ``workers`` processes (None: one per core, in this process when there are few; 1:
    in this process) and stored. The result is the same whatever the workers, the cache
    and the order."""
    options = _reference_options(options)
    shapes = [_job_shape(job) for job in workload.jobs]
    first: dict[tuple[Any, ...], JobSpec] = {}
    jobs_of: dict[tuple[Any, ...], int] = {}
    for job, shape in zip(workload.jobs, shapes, strict=True):
        first.setdefault(shape, job)
        jobs_of[shape] = jobs_of.get(shape, 0) + 1
    values: dict[tuple[Any, ...], float] = {}
    model = _alone_model(workload, options)
    for shape, job in first.items():
        exact = model.jct(job)
        if exact is not None:
            values[shape] = exact
    if cache is None and options.alone_cache:
        cache = AloneCache()
    if not options.alone_cache:
        cache = None
    keys: dict[tuple[Any, ...], str] = {}
    if cache is not None:
        context = context_key(workload, _reference_settings(options))
        for shape, job in first.items():
            if shape not in values:
                keys[shape] = key = job_key(context, job)
                found = cache.get(key)
                if found is not None:
                    values[shape] = found
    total = len(workload.jobs)
    done = sum(jobs_of[s] for s in values)
    if progress is not None and done:
        progress(done, total, 0.0)
    misses = [shape for shape in first if shape not in values]
    computed = _references(workload, [first[s] for s in misses], options, workers)
    for shape, value in zip(misses, computed, strict=True):
        values[shape] = value
        if cache is not None:
            cache.put(keys[shape], value)
        done += jobs_of[shape]
        if progress is not None:
            progress(done, total, 0.0)
    return {job.name: values[shape] for job, shape in zip(workload.jobs, shapes, strict=True)}


def build_policy(choice: PolicyChoice) -> Any:
    return build("policies", choice.name, choice.params)


def policy_class(name: str) -> Any:
    """The class of installed policy ``name`` (an unknown name: PluginError)."""
    return load(lookup("policies", name))


def asks_for(choice: PolicyChoice | None, options: RunOptions) -> tuple[str, dict[str, Any]]:
    """The ask strategy and its parameters for runs of ``choice`` (``None``: the reference
    runs for slowdown, which use greedy unless a strategy is named). Keys ``S.key`` of the
    ask parameters go to strategy ``S`` only; they are checked when the strategy is built."""
    name = options.ask_strategy
    if name is None:
        # The class attribute, without building the policy (a build may read files).
        name = policy_class(choice.name).ask_strategy if choice is not None else "greedy"
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
    alone: dict[str, float] | Callable[[JobSpec], float | None],
    event_log: Any = None,
    policy: Any = None,
) -> SimResult:
    sim = Simulation(
        workload,
        policy if policy is not None else build_policy(choice),
        _strategy_factory(options, choice),
        policy_name=choice.name,
        am_interval_s=options.am_interval_s,
        alone_jct_s=alone,
        stall_s=options.stall_s,
        progress=progress,
        phase_seed=options.phase_seed,
        event_log=event_log,
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
    timings: Timings | None = None,
) -> tuple[SimResult, metrics.RunMetrics]:
    """Simulate ``workload`` under one policy; write the run files when ``out_dir`` is set.

    With ``out_dir`` and ``options.events`` ``parquet`` or ``none``, the event log goes to
    a Parquet file as the run goes (``SimResult.records`` is then empty) and the metrics
    are read from it; otherwise the records are kept in memory. ``timings`` (if given)
    gets the wall time of each phase: alone, simulate, metrics, write. The cyclic garbage
    collector is paused after the alone references (``treadle.study.heap.running``)."""
    refs: dict[str, float] | Callable[[JobSpec], float | None] | None = alone
    if refs is None:
        with maybe(timings, "alone"):
            if not options.slowdown:
                refs = {}
            elif workload.source is not None:  # streamed: each shape's when first submitted
                refs = LazyAlone(workload, options)
            else:
                refs = alone_jcts(workload, options)
    with heap.running():
        result, run = _run_sim(workload, choice, out_dir, options, progress, refs, timings)
    if result.source_error is not None:
        raise stream_error(result.source_error, result.submitted)
    return result, run


class LazyAlone:
    """The alone-JCT references of a streamed workload, computed as its jobs are
    submitted: one per distinct job shape (the first job of the shape, in submission
    order), exactly as ``alone_jcts`` computes each (the exact rule, else the on-disk
    cache, else a reference run in this process), so a run's results equal those of the
    whole workload's."""

    def __init__(self, workload: Workload, options: RunOptions) -> None:
        # Without its source: a reference run holds its one job, never the trace.
        self.workload = replace(workload, source=None)
        self.options = _reference_options(options)
        self.values: dict[bytes, float] = {}
        self.cache = AloneCache() if self.options.alone_cache else None
        self.context = (
            context_key(workload, _reference_settings(self.options))
            if self.cache is not None
            else ""
        )

    def __call__(self, job: JobSpec) -> float:
        shape = _shape_digest(job)
        value = self.values.get(shape)
        if value is None:
            value = self.values[shape] = self._compute(job)
        return value

    def _compute(self, job: JobSpec) -> float:
        exact = _alone_model(self.workload, self.options).jct(job)
        if exact is not None:
            return exact
        key = job_key(self.context, job) if self.cache is not None else ""
        if self.cache is not None:
            found = self.cache.get(key)
            if found is not None:
                return found
        value = _simulated_reference(self.workload, job, self.options)
        if self.cache is not None:
            self.cache.put(key, value)
        return value


def _run_sim(
    workload: Workload,
    choice: PolicyChoice,
    out_dir: Path | None,
    options: RunOptions,
    progress: ProgressFn | None,
    alone: dict[str, float] | Callable[[JobSpec], float | None],
    timings: Timings | None,
) -> tuple[SimResult, metrics.RunMetrics]:
    weights = {name: u.weight for name, u in workload.users.items()}
    policy = build_policy(choice)  # once: the run and its parameters share it
    if out_dir is None or options.events == "jsonl":
        with maybe(timings, "simulate"):
            result = _simulate(workload, choice, options, progress, alone, policy=policy)
        with maybe(timings, "metrics"):
            run = metrics.analyze(result.records, policy=choice.name, user_weights=weights)
            run.summary["parameters"] = run_parameters(workload, choice, options, policy)
            _mark_partial(run, result)
        if out_dir is not None:
            with maybe(timings, "write"):
                metrics.write_run_outputs(
                    result.records,
                    out_dir,
                    policy=choice.name,
                    user_weights=weights,
                    run=run,
                    events=options.events,
                )
        return result, run
    if options.events not in metrics.EVENT_FORMATS:
        raise InputError("--events", None, f"use one of {', '.join(metrics.EVENT_FORMATS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / metrics.EVENT_FILES["parquet"]
    if options.events == "none":
        fd, name = tempfile.mkstemp(".parquet", ".events-", out_dir)
        os.close(fd)
        path = Path(name)
    try:
        with maybe(timings, "simulate"):  # the log's row groups are written meanwhile
            log = ParquetEventLog(path, list(workload.cluster.capacity))
            try:
                result = _simulate(workload, choice, options, progress, alone, log, policy)
            finally:
                log.close()
        with maybe(timings, "metrics"):
            run = metrics.analyze(metrics.read_log(path), policy=choice.name, user_weights=weights)
            run.summary["parameters"] = run_parameters(workload, choice, options, policy)
            _mark_partial(run, result)
    except BaseException:
        if options.events == "none":
            path.unlink(missing_ok=True)
        raise
    if options.events == "none" and isinstance(run.utilization, LazySeries):
        run.utilization.own(path)  # its series is read from the file, if ever
    elif options.events == "none":
        path.unlink(missing_ok=True)
    with maybe(timings, "write"):
        metrics.write_run_files(run, out_dir)
    return result, run


def _mark_partial(run: metrics.RunMetrics, result: SimResult) -> None:
    """A run a streamed workload's bad job ended: ``summary.json`` says so (``partial``:
    why, and the jobs submitted before it), so its figures are not taken for the trace's."""
    error = result.source_error
    if error is not None:
        run.summary["partial"] = {
            "reason": str(error),
            "jobs_run": result.submitted,
            "jobs_finished": result.finished,
            "stopped_at_s": result.end_s,
        }


def _resolved(plugin: Any) -> dict[str, Any]:
    return dict(plugin.params.model_dump(mode="json"))


def run_parameters(
    workload: Workload, choice: PolicyChoice, options: RunOptions, policy: Any = None
) -> dict[str, Any]:
    """What a run was asked to do, every default filled in: the policy's parameters, the
    AMs' ask strategy and its parameters, the policy's estimator (``None`` without one),
    the workload (name, where it came from, seed, partitioning, ``scheduling: event`` when
    it schedules on events) and the simulator's
    settings. ``summary.json`` carries it as ``parameters``. ``policy``: the run's policy
    object, if built already (its parameters are frozen, so the run has not changed them;
    a policy that built an estimator gives its parameters without building another)."""
    if policy is None:
        policy = build_policy(choice)
    strategy, strategy_params = asks_for(choice, options)
    estimator = getattr(policy.params, "estimator", None)
    built_estimator = getattr(policy, "estimator", None)
    return {
        "policy": {"name": choice.name, "params": _resolved(policy)},
        "asks": {"name": strategy, "params": _resolved(build("asks", strategy, strategy_params))},
        "estimator": None
        if not isinstance(estimator, str)
        else {
            "name": estimator,
            "params": _resolved(
                built_estimator
                if isinstance(getattr(built_estimator, "params", None), BaseModel)
                else build("estimators", estimator, getattr(policy.params, "estimator_params", {}))
            ),
        },
        "workload": {
            "name": workload.name,
            "source": options.workload_source,
            "seed": workload.seed,
            "partition": options.partition,
            **({"importer": dict(options.trace_options)} if options.trace_options else {}),
            **({"scaling": dict(options.scaling)} if options.scaling else {}),
            # Only when not the default: heartbeat-mode summaries stay as they were.
            **({"scheduling": "event"} if workload.cluster.event_driven else {}),
        },
        "phase_seed": options.phase_seed,
        "slowdown": options.slowdown,
        "am_interval_s": options.am_interval_s,
    }


def run_options(options: RunOptions) -> dict[str, Any]:
    """The run options as JSON values (no ask parameters: ``{}``, however given)."""
    out: dict[str, Any] = json.loads(json.dumps(dataclasses.asdict(options), default=str))
    out["ask_params"] = out.get("ask_params") or {}
    return out


def _dump(params: Any) -> dict[str, Any]:
    if isinstance(params, BaseModel):
        out: dict[str, Any] = params.model_dump(mode="json")
        return out
    return dict(params) if isinstance(params, Mapping) else {}


def policy_parameters(
    choices: Sequence[PolicyChoice], options: RunOptions
) -> dict[str, dict[str, Any]]:
    """Every policy's resolved parameters, ask strategy and estimator (see the module)."""
    out: dict[str, dict[str, Any]] = {}
    for c in choices:
        policy = build_policy(c)
        entry: dict[str, Any] = {"params": _dump(getattr(policy, "params", None))}
        strategy, ask_params = asks_for(c, options)
        entry["asks"] = {
            "name": strategy,
            "params": _dump(getattr(build("asks", strategy, ask_params), "params", None)),
        }
        estimator = getattr(policy, "estimator", None)
        if estimator is not None and hasattr(estimator, "params"):
            name = getattr(getattr(policy, "params", None), "estimator", None)
            entry["estimator"] = {
                "name": name or getattr(estimator, "name", type(estimator).__name__),
                "params": _dump(estimator.params),
            }
            entry["params"].pop("estimator_params", None)  # shown resolved as the estimator's
        out[c.name] = entry
    return out


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
            + did_you_mean(unknown[0], installed)
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

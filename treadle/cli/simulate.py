"""``treadle sim`` and ``treadle compare``: one policy, or several side by side, on one
workload, in the simulator (``compare --mode local|docker``: on emulated clusters). The
command line is checked whole before the workload is loaded."""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Annotated, Any

import typer

from treadle.cli.common import (
    INVOCATION,
    UNFAITHFUL,
    USAGE,
    DilationOpt,
    ForceOpt,
    FormatOpt,
    HomoFilterOpt,
    LogLevelOpt,
    ManagedAmOpt,
    NmProcessesOpt,
    NodesFileOpt,
    OutOpt,
    RunsProgress,
    SetOpt,
    WorkloadArg,
    WtaScalingOpt,
    check_out,
    err,
    errors,
    fail,
    load,
    num,
    out,
    progress_bars,
    say,
    trace_options,
    tracker,
)
from treadle.cli.options import (
    LIVE_TIMEOUT_S,
    AskSetOpt,
    AsksOpt,
    ClusterOpt,
    EventsOpt,
    ImageOpt,
    LoadOpt,
    NmContainersOpt,
    NoCacheOpt,
    NodesOpt,
    NodesScaleOpt,
    PartitionOpt,
    PhaseSeedOpt,
    Scaling,
    SchedulingOpt,
    SlowdownOpt,
    TimeoutOpt,
    TimingsOpt,
    WorkersOpt,
    check_events,
    check_scaling,
    partitioned,
    partitioning,
    scaled,
    scheduled,
)
from treadle.cli.queues import QueuesOpt, StrictOpt, with_queues
from treadle.cli.study import compare_seeds
from treadle.live import logs

if TYPE_CHECKING:
    from treadle.study.compare import Comparison
    from treadle.study.runner import PolicyChoice, RunOptions

PolicyOpt = Annotated[str, typer.Option("--policy", help="Policy name (see `treadle policies`).")]
LimitJobsOpt = Annotated[
    int | None,
    typer.Option("--limit-jobs", min=1, help="Simulate only the first N jobs by submit time."),
]
PoliciesOpt = Annotated[
    str, typer.Option("--policies", help="Comma-separated policy names, or 'all'.")
]
ModeOpt = Annotated[
    str,
    typer.Option(
        "--mode",
        help="sim (simulator), local (a cluster of local processes per policy) or docker "
        "(a deployment of containers per policy).",
    ),
]
PolicySetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="POLICY.PARAM=VALUE for one compared policy (repeatable)."),
]
BaselineOpt = Annotated[
    str | None, typer.Option("--baseline", help="Policy for factor-of-improvement figures.")
]
ReferenceOpt = Annotated[
    str | None,
    typer.Option(
        "--reference",
        help="Policy the deadline figures (DVR, DSR) and per-user RT ratios are against "
        "[default: ujf, when compared].",
    ),
]
SeedsOpt = Annotated[
    int | None,
    typer.Option(
        "--seeds",
        min=1,
        help="Simulator: run every policy on N phase seeds (from --phase-seed on) and write "
        "a study (runs.parquet, a report with 95% CIs and paired tests): treadle study's "
        "short form.",
        show_default=False,
    ),
]
PaperCompatOpt = Annotated[
    bool,
    typer.Option(
        "--paper-compat",
        help="Also report those figures as the UWFQ authors' analysis counted them.",
    ),
]


def run_options(
    workload: str,
    asks: str | None,
    ask_settings: list[str] | None,
    imports: dict[str, Any],
    slowdown: bool,
    phase_seed: int,
    no_cache: bool,
    events: str,
    partition: str | None,
) -> RunOptions:
    """The run options of ``sim`` and ``compare``, as their flags give them."""
    from treadle.registry import parse_settings
    from treadle.study.runner import RunOptions

    return RunOptions(
        asks,
        parse_settings(ask_settings or [], "--ask-set"),
        slowdown=slowdown,
        phase_seed=phase_seed,
        alone_cache=not no_cache,
        events=events,
        workload_source=workload,
        partition=partition,
        trace_options=imports or None,
    )


def _whole(*transforms: Any) -> bool:
    """Whether a transform that needs every job is asked for (``None``: not asked;
    ``--nodes``' scaling knobs are a tuple of Nones when none is given)."""
    return any(t is not None and t != (None, None, None) for t in transforms)


def sim(
    workload: WorkloadArg,
    policy: PolicyOpt,
    out_dir: OutOpt,
    settings: SetOpt = None,
    fmt: FormatOpt = None,
    nodes_file: NodesFileOpt = None,
    asks: AsksOpt = None,
    ask_settings: AskSetOpt = None,
    slowdown: SlowdownOpt = True,
    no_cache: NoCacheOpt = False,
    phase_seed: PhaseSeedOpt = 0,
    partition: PartitionOpt = None,
    scheduling: SchedulingOpt = None,
    timings: TimingsOpt = False,
    events: EventsOpt = "parquet",
    log_level: LogLevelOpt = "warning",
    limit_jobs: LimitJobsOpt = None,
    homo_filter: HomoFilterOpt = None,
    wta_scaling: WtaScalingOpt = None,
    queues_file: QueuesOpt = None,
    strict: StrictOpt = False,
    nodes: NodesOpt = None,
    nodes_scale: NodesScaleOpt = None,
    load_target: LoadOpt = None,
    force: ForceOpt = False,
) -> None:
    """Simulate WORKLOAD under one policy; write summary.json, jobs.csv, jobs.parquet and
    the event log (events.parquet by default)."""
    with errors():
        from treadle.registry import parse_settings
        from treadle.study import heap
        from treadle.study.runner import PolicyChoice, build_policy, run_sim
        from treadle.study.timings import Timings

        logs.configure(log_level)
        check_events(events)
        check_out(out_dir, force)
        knobs = check_scaling(nodes, nodes_scale, load_target)
        choice = PolicyChoice(policy, parse_settings(settings or []))
        imports = trace_options(homo_filter, wta_scaling)
        flags = (slowdown, phase_seed, no_cache, events, partition)
        options = run_options(workload, asks, ask_settings, imports, *flags)
        build_policy(choice)  # bad name or parameter: fail before loading a large trace
        parts = partitioning(partition)
        if INVOCATION.standalone:
            heap.ends_with_run()
        clock = Timings(setup=True, started=INVOCATION.started) if timings else None
        with clock.phase("load") if clock is not None else nullcontext():
            # Streamed when the format can be read as the run goes and nothing below
            # needs every job first (treadle.workload.streaming).
            whole = _whole(queues_file, limit_jobs, parts, knobs)
            wl = load(workload, fmt, nodes_file, imports, stream=not whole)
            wl = with_queues(wl, queues_file, strict)
            if limit_jobs is not None:  # a trace reader's module: imported only when asked
                from treadle.importers.tabular import first_jobs

                wl = first_jobs(wl, limit_jobs)
            wl = scheduled(partitioned(wl, parts), scheduling)
            wl, options = scaled(wl, options, knobs)
        with progress_bars() as progress:
            result, run = run_sim(
                wl,
                choice,
                out_dir,
                options=options,
                progress=tracker(progress, policy, wl.job_count),
                timings=clock,
            )
    s = run.summary
    say(
        f"{policy}: {s['finished']}/{s['jobs']} jobs, makespan {s['makespan_s']} s, "
        f"mean JCT {s['mean_jct_s']} s -> {out_dir}"
    )
    if clock is not None:
        err.print(clock.line(), markup=False, highlight=False, soft_wrap=True)
    if result.stalled:
        fail(f"simulation stalled: {result.stalled}")


def compare(
    workload: WorkloadArg,
    out_dir: OutOpt,
    policies: PoliciesOpt = "all",
    mode: ModeOpt = "sim",
    settings: PolicySetOpt = None,
    baseline: BaselineOpt = None,
    reference: ReferenceOpt = None,
    paper_compat: PaperCompatOpt = False,
    fmt: FormatOpt = None,
    nodes_file: NodesFileOpt = None,
    asks: AsksOpt = None,
    ask_settings: AskSetOpt = None,
    slowdown: SlowdownOpt = True,
    no_cache: NoCacheOpt = False,
    dilation: DilationOpt = 10.0,
    nm_processes: NmProcessesOpt = 1,
    nm_containers: NmContainersOpt = None,
    image: ImageOpt = "treadle:latest",
    managed_am: ManagedAmOpt = False,
    timeout_s: TimeoutOpt = LIVE_TIMEOUT_S,
    phase_seed: PhaseSeedOpt = 0,
    workers: WorkersOpt = None,
    partition: PartitionOpt = None,
    scheduling: SchedulingOpt = None,
    events: EventsOpt = "parquet",
    cluster: ClusterOpt = None,
    log_level: LogLevelOpt = "warning",
    homo_filter: HomoFilterOpt = None,
    wta_scaling: WtaScalingOpt = None,
    queues_file: QueuesOpt = None,
    strict: StrictOpt = False,
    nodes: NodesOpt = None,
    nodes_scale: NodesScaleOpt = None,
    load_target: LoadOpt = None,
    force: ForceOpt = False,
    seeds: SeedsOpt = None,
) -> None:
    """Run WORKLOAD under several policies and write a side-by-side report."""
    with errors():
        logs.configure(log_level)
        check_events(events)
        knobs = check_scaling(nodes, nodes_scale, load_target)
        workers = _checked_workers(mode, workers, phase_seed, cluster)
        choices, baseline = _compared(policies, settings, baseline, reference)
        imports = trace_options(homo_filter, wta_scaling)
        flags = (slowdown, phase_seed, no_cache, events, partition)
        options = run_options(workload, asks, ask_settings, imports, *flags)
        if seeds is not None:  # treadle study's short form: its own runs and report
            return compare_seeds(seeds, mode, out_dir, choices, settings, baseline, options,
                                 workers, cluster, queues=(queues_file, strict),
                                 knobs=knobs, force=force)  # fmt: skip
        check_out(out_dir, force)
        loaded = with_queues(load(workload, fmt, nodes_file, imports), queues_file, strict)
        wl, options = _compared_workload(mode, loaded, partition, scheduling, options, knobs)
        from treadle.study.compare import DEFAULT_REFERENCE, compare as run_compare, make_backend

        backend = make_backend(mode, wl, timeout_s=timeout_s, dilation=dilation,
                               managed_am=managed_am, nm_processes=nm_processes,
                               nm_containers=nm_containers, image=image)  # fmt: skip
        with RunsProgress([c.name for c in choices], len(wl.jobs)) as progress:
            result = run_compare(
                wl,
                choices,
                out_dir,
                backend,
                options=options,
                baseline=baseline,
                reference=reference or DEFAULT_REFERENCE,
                paper_compat=paper_compat,
                on_policy=progress.tracker,
                on_finished=lambda n, _, run: progress.finished(n, run.summary),
                workers=workers,
                cluster=cluster,
            )
    _print_comparison(result)


def _checked_workers(mode: str, workers: int | None, phase_seed: int, cluster: str | None) -> int:
    """``--workers`` (default: the usable cores), once --mode and the flags that apply to
    the simulator only are known to agree."""
    if mode not in ("sim", "local", "docker"):
        fail(f"unknown --mode {mode!r}; use sim, local or docker", USAGE)
    if phase_seed and mode != "sim":
        fail("--phase-seed applies to --mode sim (live nodes heartbeat when they do)", USAGE)
    if cluster is not None and mode != "sim":
        fail("--cluster applies to --mode sim (a live cluster runs on its own machines)", USAGE)
    if workers is None:
        from treadle.study.parallel import usable_cores

        return usable_cores()
    if workers < 1:
        fail(f"--workers must be >= 1, got {workers}", USAGE)
    return workers


def _compared(
    policies: str, settings: list[str] | None, baseline: str | None, reference: str | None
) -> tuple[list[PolicyChoice], str | None]:
    """Each compared policy with its own --set values, and the baseline (fifo when it is
    compared with others and none is named)."""
    from treadle.registry import parse_settings
    from treadle.study.runner import PolicyChoice, resolve_policies, split_policy_settings

    names = resolve_policies(policies)
    per_policy = split_policy_settings(parse_settings(settings or []), names)
    if baseline is not None and baseline not in names:
        fail(f"--baseline {baseline!r} is not among the compared policies {names}", USAGE)
    if baseline is None and "fifo" in names and len(names) > 1:
        baseline = "fifo"
    if reference is not None and reference not in names:
        fail(f"--reference {reference!r} is not among the compared policies {names}", USAGE)
    return [PolicyChoice(n, per_policy[n]) for n in names], baseline


def _compared_workload(
    mode: str,
    wl: Any,
    partition: str | None,
    scheduling: str | None,
    options: RunOptions,
    knobs: Scaling,
) -> tuple[Any, RunOptions]:
    """The workload as --partition, --scheduling and the scaling flags make it, checked
    against --mode, and the run options recording the scaling."""
    wl = scheduled(partitioned(wl, partitioning(partition)), scheduling)
    wl, options = scaled(wl, options, knobs)
    return wl, options


def _print_comparison(result: Comparison) -> None:
    """The comparison's table and report paths; a stalled or unfaithful run fails."""
    from rich.table import Table

    table = Table(show_edge=False)
    for col in ("policy", "finished", "makespan s", "mean JCT s", "p95 JCT s", "slowdown"):
        table.add_column(col)
    for name, run in result.runs.items():
        s = run.summary
        table.add_row(
            name,
            f"{s['finished']}/{s['jobs']}",
            num(s["makespan_s"]),
            num(s["mean_jct_s"]),
            num(s["p95_jct_s"]),
            num(s["mean_slowdown"]),
        )
    out.print(table)
    say(f"report: {result.report} and {result.report.with_suffix('.html')}")
    stalled = [n for n, r in result.results.items() if r.stalled]
    if stalled:
        fail(f"simulation stalled under {', '.join(stalled)}")
    unfaithful = [f"{n}: {r.unfaithful}" for n, r in result.results.items() if r.unfaithful]
    if unfaithful:
        fail("; ".join(unfaithful), UNFAITHFUL)

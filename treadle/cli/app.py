"""The ``treadle`` command line: simulate, compare, replay; ``treadle cluster`` in cluster.py."""

from __future__ import annotations

import json
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated

import typer

from treadle.cli.admin import admin_app
from treadle.cli.cluster import (
    DEFAULT_CLUSTER_DIR,
    ClusterDirOpt,
    KeyFileOpt,
    TlsCaOpt,
    TlsCertOpt,
    TlsKeyOpt,
    UserOpt,
    cluster_app,
    identify,
)
from treadle.cli.common import (
    FAILED,
    UNFAITHFUL,
    USAGE,
    DilationOpt,
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
    NmContainersOpt,
    NoCacheOpt,
    PartitionOpt,
    PhaseSeedOpt,
    SchedulingOpt,
    SlowdownOpt,
    TimeoutOpt,
    TimingsOpt,
    WorkersOpt,
    check_events,
    partitioned,
    partitioning,
    scheduled,
)
from treadle.cli.queues import QueuesOpt, StrictOpt, queues, with_queues
from treadle.errors import TreadleError
from treadle.live import logs

#: When the command line's code began (``--timings``' setup, where the process's start is
#: not known).
STARTED = time.perf_counter()

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Help texts are plain text: rich markup would take "[default: ...]" for a tag.
    rich_markup_mode=None,
    help="Try cluster scheduling policies: simulate or emulate a YARN-style cluster. "
    f"Exit status: 0 done, {USAGE} a wrong command line or input (nothing ran), "
    f"{FAILED} a run failed, {UNFAITHFUL} an emulation was unfaithful (compare).",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        say(f"treadle {version('treadle')}")
        raise typer.Exit()


@app.callback()
def _main(
    _: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    pass


@app.command()
def policies(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List installed policies, estimators and ask strategies."""
    from rich.table import Table

    from treadle.registry import GROUPS, describe

    with errors():
        data = {kind: describe(kind) for kind in GROUPS}
    if as_json:
        out.print_json(json.dumps(data))
        return
    for kind, rows in data.items():
        table = Table(title=kind, title_justify="left", show_edge=False)
        table.add_column("name")
        table.add_column("description")
        table.add_column("from")
        for r in rows:
            table.add_row(r["name"], r["description"], r["distribution"])
        out.print(table)


@app.command()
def workloads() -> None:
    """List the built-in workloads."""
    from treadle.workload import builtin_workloads

    for name, doc in builtin_workloads().items():
        say(f"{name}\t{doc}")


@app.command()
def validate(
    workload: WorkloadArg,
    fmt: FormatOpt = None,
    nodes_file: NodesFileOpt = None,
    homo_filter: HomoFilterOpt = None,
    wta_scaling: WtaScalingOpt = None,
) -> None:
    """Check a workload and print what it holds."""
    with errors():
        wl = load(workload, fmt, nodes_file, trace_options(homo_filter, wta_scaling))
    say(
        f"{wl.name}: {len(wl.cluster.nodes)} nodes ({wl.cluster.capacity}), "
        f"{len(wl.jobs)} jobs, {wl.tasks} tasks, {len(wl.leaf_queues)} leaf queues"
    )


@app.command()
def schema() -> None:
    """Print the JSON schema of workload YAML files."""
    from treadle.workload import workload_json_schema

    out.print_json(json.dumps(workload_json_schema()))


@app.command()
def sim(
    workload: WorkloadArg,
    policy: Annotated[str, typer.Option("--policy", help="Policy name (see `treadle policies`).")],
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
    limit_jobs: Annotated[
        int | None,
        typer.Option("--limit-jobs", min=1, help="Simulate only the first N jobs by submit time."),
    ] = None,
    homo_filter: HomoFilterOpt = None,
    wta_scaling: WtaScalingOpt = None,
    queues_file: QueuesOpt = None,
    strict: StrictOpt = False,
) -> None:
    """Simulate WORKLOAD under one policy; write summary.json, jobs.csv, jobs.parquet and
    the event log (events.parquet by default)."""
    with errors():
        from treadle.registry import parse_settings
        from treadle.study import heap
        from treadle.study.runner import PolicyChoice, RunOptions, build_policy, run_sim
        from treadle.study.timings import Timings

        logs.configure(log_level)
        check_events(events)
        choice = PolicyChoice(policy, parse_settings(settings or []))
        imports = trace_options(homo_filter, wta_scaling)
        options = RunOptions(
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
        build_policy(choice)  # bad name or parameter: fail before loading a large trace
        parts = partitioning(partition)
        if _standalone:
            heap.ends_with_run()
        clock = Timings(setup=True, started=STARTED) if timings else None
        with clock.phase("load") if clock is not None else nullcontext():
            wl = with_queues(load(workload, fmt, nodes_file, imports), queues_file, strict)
            if limit_jobs is not None:  # a trace reader's module: imported only when asked
                from treadle.importers.tabular import first_jobs

                wl = first_jobs(wl, limit_jobs)
            wl = scheduled(partitioned(wl, parts), scheduling)
        with progress_bars() as progress:
            result, run = run_sim(
                wl,
                choice,
                out_dir,
                options=options,
                progress=tracker(progress, policy, len(wl.jobs)),
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


@app.command()
def compare(
    workload: WorkloadArg,
    out_dir: OutOpt,
    policies: Annotated[
        str, typer.Option("--policies", help="Comma-separated policy names, or 'all'.")
    ] = "all",
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="sim (simulator), local (a cluster of local processes per policy) or docker "
            "(a deployment of containers per policy).",
        ),
    ] = "sim",
    settings: Annotated[
        list[str] | None,
        typer.Option("--set", help="POLICY.PARAM=VALUE for one compared policy (repeatable)."),
    ] = None,
    baseline: Annotated[
        str | None, typer.Option("--baseline", help="Policy for factor-of-improvement figures.")
    ] = None,
    reference: Annotated[
        str | None,
        typer.Option(
            "--reference",
            help="Policy the deadline figures (DVR, DSR) and per-user RT ratios are against "
            "[default: ujf, when compared].",
        ),
    ] = None,
    paper_compat: Annotated[
        bool,
        typer.Option(
            "--paper-compat",
            help="Also report those figures as the UWFQ authors' analysis counted them.",
        ),
    ] = False,
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
) -> None:
    """Run WORKLOAD under several policies and write a side-by-side report."""
    from rich.table import Table

    with errors():
        from treadle.registry import parse_settings
        from treadle.study.runner import (
            PolicyChoice,
            RunOptions,
            resolve_policies,
            split_policy_settings,
        )

        logs.configure(log_level)
        check_events(events)
        if mode not in ("sim", "local", "docker"):
            fail(f"unknown --mode {mode!r}; use sim, local or docker", USAGE)
        if workers is None:
            from treadle.study.parallel import usable_cores

            workers = usable_cores()
        elif workers < 1:
            fail(f"--workers must be >= 1, got {workers}", USAGE)
        if phase_seed and mode != "sim":
            fail("--phase-seed applies to --mode sim (live nodes heartbeat when they do)", USAGE)
        if cluster is not None and mode != "sim":
            fail("--cluster applies to --mode sim (a live cluster runs on its own machines)", USAGE)
        names = resolve_policies(policies)
        per_policy = split_policy_settings(parse_settings(settings or []), names)
        if baseline is not None and baseline not in names:
            fail(f"--baseline {baseline!r} is not among the compared policies {names}", USAGE)
        if baseline is None and "fifo" in names and len(names) > 1:
            baseline = "fifo"
        if reference is not None and reference not in names:
            fail(f"--reference {reference!r} is not among the compared policies {names}", USAGE)
        imports = trace_options(homo_filter, wta_scaling)
        options = RunOptions(
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
        choices = [PolicyChoice(n, per_policy[n]) for n in names]
        parts = partitioning(partition)
        wl = with_queues(load(workload, fmt, nodes_file, imports), queues_file, strict)
        wl = scheduled(partitioned(wl, parts), scheduling)
        if mode != "sim" and wl.cluster.event_driven:
            fail(
                f"cluster.scheduling 'event' is simulator-only (--mode sim); a {mode} cluster "
                "schedules on its heartbeats and AM intervals",
                USAGE,
            )
        from treadle.study.compare import DEFAULT_REFERENCE, compare as run_compare, make_backend

        backend = make_backend(
            mode,
            wl,
            timeout_s=timeout_s,
            dilation=dilation,
            managed_am=managed_am,
            nm_processes=nm_processes,
            nm_containers=nm_containers,
            image=image,
        )
        with RunsProgress(names, len(wl.jobs)) as progress:
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


@app.command("report")
def report_cmd(
    results: Annotated[
        Path, typer.Argument(help="A `treadle compare` output directory.", show_default=False)
    ],
) -> None:
    """Build report.md and report.html again from a comparison's results directory."""
    with errors():
        from treadle.report.rebuild import rebuild

        path = rebuild(results)
    say(f"report: {path} and {path.with_suffix('.html')}")


@app.command("run")
def run_live(
    workload: WorkloadArg,
    out_dir: OutOpt,
    rm: Annotated[
        str | None,
        typer.Option(
            "--rm",
            help="The RM's host:port [default: the cluster `treadle cluster up` recorded in "
            "--cluster-dir].",
            show_default=False,
        ),
    ] = None,
    fmt: FormatOpt = None,
    nodes_file: NodesFileOpt = None,
    asks: AsksOpt = None,
    ask_settings: AskSetOpt = None,
    managed_am: ManagedAmOpt = False,
    timeout_s: TimeoutOpt = LIVE_TIMEOUT_S,
    slowdown: SlowdownOpt = True,
    expect_policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            help="The policy the RM should run (checked with its --set values before "
            "anything else, then against the RM): a deployment's settings fail here, early.",
        ),
    ] = None,
    settings: SetOpt = None,
    rm_wait_s: Annotated[
        float,
        typer.Option("--rm-wait-s", help="Wait up to this many seconds for the RM to answer."),
    ] = 0.0,
    rm_absent_s: Annotated[
        float,
        typer.Option(
            "--rm-absent-s",
            help="During the replay, survive the RM's absence (a restart) this many seconds.",
        ),
    ] = 120.0,
    wait_nodes: Annotated[
        int,
        typer.Option("--wait-nodes", help="Start only once the RM has this many nodes."),
    ] = 0,
    events: EventsOpt = "parquet",
    log_level: LogLevelOpt = "warning",
    user: UserOpt = None,
    key_file: KeyFileOpt = None,
    tls_cert: TlsCertOpt = None,
    tls_key: TlsKeyOpt = None,
    tls_ca: TlsCaOpt = None,
    cluster_dir: ClusterDirOpt = DEFAULT_CLUSTER_DIR,
) -> None:
    """Replay WORKLOAD on a live cluster (RM at --rm, else the one `treadle cluster up`
    recorded); write the files `treadle sim` does. It signs its calls as --user (or
    $TREADLE_USER), else as the driver of the cluster recorded in --cluster-dir, if that
    is the RM at --rm."""
    with errors():
        logs.configure(log_level)
        check_events(events)
        if rm is None:
            from treadle.cluster.procs import read_state

            state = read_state(cluster_dir)
            if state is None or not state.get("rm"):
                fail(f"give --rm HOST:PORT (no cluster is recorded in {cluster_dir})", USAGE)
            rm = str(state["rm"])
        identify(rm, user, key_file, (tls_cert, tls_key, tls_ca), cluster_dir)
        from treadle import metrics
        from treadle.cluster.driver import ReplayTimedOut, replay, run_async, wait_for_rm
        from treadle.metrics.summary import with_unsubmitted
        from treadle.registry import build, parse_settings
        from treadle.study.runner import (
            PolicyChoice,
            RunOptions,
            alone_jcts,
            asks_for,
            build_policy,
        )

        params = parse_settings(ask_settings or [], "--ask-set")
        if asks is not None:
            build("asks", *asks_for(None, RunOptions(asks, params)))  # fail before anything
        if expect_policy is not None:
            expected = PolicyChoice(expect_policy, parse_settings(settings or []))
            build_policy(expected)
            build("asks", *asks_for(expected, RunOptions(asks, params)))
        elif settings:
            fail("--set needs --policy (the policy whose parameters they are)", USAGE)
        if not rm_wait_s >= 0:
            fail(f"--rm-wait-s must be >= 0, got {rm_wait_s:g}", USAGE)
        # An unreachable RM fails before the simulations.
        if wait_nodes < 0:
            fail(f"--wait-nodes must be >= 0, got {wait_nodes}", USAGE)
        live = run_async(wait_for_rm(rm, rm_wait_s, wait_nodes))
        if expect_policy is not None and live.policy != expect_policy:
            fail(f"the RM at {rm} runs policy {live.policy!r}, not {expect_policy!r}")
        wl = load(workload, fmt, nodes_file)
        options = RunOptions(asks, params, slowdown=slowdown)
        # The strategy the RM's policy is designed with, unless --asks names one.
        try:
            strategy, strategy_params = asks_for(PolicyChoice(live.policy, {}), options)
        except TreadleError:  # a policy installed on the RM only: its AMs default to greedy
            strategy, strategy_params = asks_for(None, options)
        alone = alone_jcts(wl, options) if slowdown else None
        timed_out: ReplayTimedOut | None = None
        with progress_bars() as progress:
            try:
                records = run_async(
                    replay(
                        rm,
                        wl,
                        alone=alone,
                        ask_strategy=strategy,
                        ask_params=strategy_params,
                        managed_am=managed_am,
                        timeout_s=timeout_s,
                        progress=tracker(progress, live.policy or "replay", len(wl.jobs)),
                        rm_absent_s=rm_absent_s,
                    )
                )
            except ReplayTimedOut as e:  # every job's result is written all the same
                records, timed_out = e.records, e
        policy = str(records[0].get("policy") or "unknown")
        weights = {name: u.weight for name, u in wl.users.items()}
        run = metrics.analyze(records, policy=policy, user_weights=weights)
        if timed_out is not None:
            run = with_unsubmitted(run, timed_out.unsubmitted_rows())
        s = metrics.write_run_outputs(
            records, out_dir, policy=policy, user_weights=weights, run=run, events=events
        )
        if timed_out is not None:
            fail(f"{timed_out}; every job's result written to {out_dir}")
    say(
        f"{policy}: {s['finished']}/{s['jobs']} jobs, makespan {num(s['makespan_s'])} s, "
        f"mean JCT {num(s['mean_jct_s'])} s -> {out_dir}"
    )


app.command("queues")(queues)
app.add_typer(cluster_app, name="cluster")
app.add_typer(admin_app, name="admin")


#: Set by ``main``: the process ends when the command does.
_standalone = False


def main() -> None:
    """The console script (``treadle``, ``python -m treadle.cli``)."""
    global _standalone
    _standalone = True
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)

"""The ``treadle`` command line."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from treadle import logs
from treadle.errors import TreadleError
from treadle.importers import FORMATS as TRACE_FORMATS, or_list
from treadle.registry import GROUPS, describe, parse_settings
from treadle.runner import (
    PolicyChoice,
    RunOptions,
    compare as run_compare,
    resolve_policies,
    run_sim,
    split_policy_settings,
)
from treadle.sim import ProgressFn

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Try cluster scheduling policies: simulate or emulate a YARN-style cluster.",
)
err = Console(stderr=True)
out = Console()

WorkloadArg = Annotated[
    str, typer.Argument(help="A workload file (YAML, SLS or Rumen JSON) or a built-in name.")
]
FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        help=f"Workload format: {or_list(('yaml', *TRACE_FORMATS))} (default: inferred).",
    ),
]
NodesFileOpt = Annotated[
    Path | None, typer.Option("--nodes-file", help="SLS nodes file giving the cluster.")
]
OutOpt = Annotated[Path, typer.Option("--out", help="Directory for the results.")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Policy parameter as key=value (repeatable)."),
]
AsksOpt = Annotated[
    str | None,
    typer.Option(
        "--asks",
        help="AM ask strategy [default: each policy's own: altruistic for carbyne, else greedy].",
        show_default=False,
    ),
]
AskSetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--ask-set", help="Ask-strategy parameter key=value, or STRATEGY.key=value for one."
    ),
]
SlowdownOpt = Annotated[
    bool,
    typer.Option(
        "--slowdown/--no-slowdown",
        help="Simulate each job alone on the empty cluster for slowdown figures.",
    ),
]
LogLevelOpt = Annotated[str, typer.Option("--log-level", help="debug, info, warning, error.")]
LIVE_TIMEOUT_S = 3600.0
DilationOpt = Annotated[
    float,
    typer.Option("--dilation", help="Local clusters: emulated seconds per wall second."),
]
NmProcessesOpt = Annotated[
    int,
    typer.Option("--nm-processes", help="Local clusters: NM host processes to spread nodes over."),
]
NmContainersOpt = Annotated[
    int | None,
    typer.Option(
        "--nm-containers",
        help="Docker: NM host containers to spread nodes over [default: 2, or 1 for one node].",
        show_default=False,
    ),
]
ImageOpt = Annotated[
    str,
    typer.Option("--image", help="Docker: the treadle image (deploy/build-image.sh builds it)."),
]
ManagedAmOpt = Annotated[
    bool,
    typer.Option(
        "--managed-am/--unmanaged-am",
        help="Run AMs in containers launched by the NMs instead of one unmanaged-AM host.",
    ),
]
PhaseSeedOpt = Annotated[
    int,
    typer.Option(
        "--phase-seed",
        min=0,
        help="Simulator: draw the nodes' heartbeat phases with this seed (with the "
        "workload's). Results move a little with the phases, as a live cluster's do; vary "
        "it to see that spread.",
    ),
]
TimeoutOpt = Annotated[
    float,
    typer.Option("--timeout-s", help="Live replays: give up after this many wall seconds."),
]


def _fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def _errors() -> Iterator[None]:
    """Every expected failure becomes one line on stderr and a non-zero exit."""
    try:
        yield
    except TreadleError as e:
        _fail(str(e))
    except OSError as e:
        where = f" {e.filename}" if getattr(e, "filename", None) else ""
        _fail(f"{e.strerror or e}{':' if where else ''}{where}")


def _load(workload: str, fmt: str | None, nodes_file: Path | None) -> Any:
    from treadle.workload import load_workload

    return load_workload(workload, fmt, nodes_file=str(nodes_file) if nodes_file else None)


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("jobs"),
        TextColumn("t={task.fields[sim_t]:.0f}s"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
        disable=not err.is_terminal,
    )


def _tracker(progress: Progress, label: str, total: int) -> ProgressFn:
    task = progress.add_task(label, total=total, sim_t=0.0)

    def update(done: int, total_jobs: int, t: float) -> None:
        progress.update(task, completed=done, total=total_jobs, sim_t=t)

    return update


@app.command()
def policies(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List installed policies, estimators and ask strategies."""
    with _errors():
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
        out.print(f"{name}\t{doc}", markup=False, highlight=False)


@app.command()
def validate(workload: WorkloadArg, fmt: FormatOpt = None, nodes_file: NodesFileOpt = None) -> None:
    """Check a workload and print what it holds."""
    with _errors():
        wl = _load(workload, fmt, nodes_file)
    out.print(
        f"{wl.name}: {len(wl.cluster.nodes)} nodes ({wl.cluster.capacity}), "
        f"{len(wl.jobs)} jobs, {wl.tasks} tasks, {len(wl.leaf_queues)} leaf queues",
        markup=False,
        highlight=False,
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
    phase_seed: PhaseSeedOpt = 0,
    log_level: LogLevelOpt = "warning",
) -> None:
    """Simulate WORKLOAD under one policy; write summary.json, jobs.csv, events.jsonl."""
    with _errors():
        logs.configure(log_level)
        choice = PolicyChoice(policy, parse_settings(settings or []))
        options = RunOptions(
            asks,
            parse_settings(ask_settings or [], "--ask-set"),
            slowdown=slowdown,
            phase_seed=phase_seed,
        )
        from treadle.runner import build_policy

        build_policy(choice)  # bad name or parameter: fail before loading a large trace
        wl = _load(workload, fmt, nodes_file)
        with _progress() as progress:
            result, run = run_sim(
                wl,
                choice,
                out_dir,
                options=options,
                progress=_tracker(progress, policy, len(wl.jobs)),
            )
    s = run.summary
    out.print(
        f"{policy}: {s['finished']}/{s['jobs']} jobs, makespan {s['makespan_s']} s, "
        f"mean JCT {s['mean_jct_s']} s -> {out_dir}",
        markup=False,
        highlight=False,
    )
    if result.stalled:
        _fail(f"simulation stalled: {result.stalled}")


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
    fmt: FormatOpt = None,
    nodes_file: NodesFileOpt = None,
    asks: AsksOpt = None,
    ask_settings: AskSetOpt = None,
    slowdown: SlowdownOpt = True,
    dilation: DilationOpt = 10.0,
    nm_processes: NmProcessesOpt = 1,
    nm_containers: NmContainersOpt = None,
    image: ImageOpt = "treadle:latest",
    managed_am: ManagedAmOpt = False,
    timeout_s: TimeoutOpt = LIVE_TIMEOUT_S,
    phase_seed: PhaseSeedOpt = 0,
    log_level: LogLevelOpt = "warning",
) -> None:
    """Run WORKLOAD under several policies and write a side-by-side report."""
    with _errors():
        logs.configure(log_level)
        if mode not in ("sim", "local", "docker"):
            _fail(f"unknown --mode {mode!r}; use sim, local or docker", 2)
        if phase_seed and mode != "sim":
            _fail("--phase-seed applies to --mode sim (live nodes heartbeat when they do)", 2)
        names = resolve_policies(policies)
        per_policy = split_policy_settings(parse_settings(settings or []), names)
        if baseline is not None and baseline not in names:
            _fail(f"--baseline {baseline!r} is not among the compared policies {names}", 2)
        if baseline is None and "fifo" in names and len(names) > 1:
            baseline = "fifo"
        options = RunOptions(
            asks,
            parse_settings(ask_settings or [], "--ask-set"),
            slowdown=slowdown,
            phase_seed=phase_seed,
        )
        choices = [PolicyChoice(n, per_policy[n]) for n in names]
        wl = _load(workload, fmt, nodes_file)
        with _progress() as progress:
            if mode == "local":
                from treadle.driver import compare_local, run_async

                result = run_async(
                    compare_local(
                        wl,
                        choices,
                        out_dir,
                        options=options,
                        baseline=baseline,
                        dilation=dilation,
                        nm_processes=nm_processes,
                        managed_am=managed_am,
                        timeout_s=timeout_s,
                        on_policy=lambda n: _tracker(progress, n, len(wl.jobs)),
                    )
                )
            elif mode == "docker":
                from treadle.driver import compare_docker, run_async

                result = run_async(
                    compare_docker(
                        wl,
                        choices,
                        out_dir,
                        options=options,
                        baseline=baseline,
                        dilation=dilation,
                        nm_containers=nm_containers or min(2, len(wl.cluster.nodes)),
                        image=image,
                        managed_am=managed_am,
                        timeout_s=timeout_s,
                        on_policy=lambda n: _tracker(progress, n, len(wl.jobs)),
                    )
                )
            else:
                result = run_compare(
                    wl,
                    choices,
                    out_dir,
                    options=options,
                    baseline=baseline,
                    on_policy=lambda n: _tracker(progress, n, len(wl.jobs)),
                )
    table = Table(show_edge=False)
    for col in ("policy", "finished", "makespan s", "mean JCT s", "p95 JCT s", "slowdown"):
        table.add_column(col)
    for name, run in result.runs.items():
        s = run.summary
        table.add_row(
            name,
            f"{s['finished']}/{s['jobs']}",
            _num(s["makespan_s"]),
            _num(s["mean_jct_s"]),
            _num(s["p95_jct_s"]),
            _num(s["mean_slowdown"]),
        )
    out.print(table)
    out.print(f"report: {result.report}", markup=False, highlight=False)
    stalled = [n for n, r in result.results.items() if r.stalled]
    if stalled:
        _fail(f"simulation stalled under {', '.join(stalled)}")


@app.command("run")
def run_live(
    workload: WorkloadArg,
    rm: Annotated[str, typer.Option("--rm", help="The RM's host:port.")],
    out_dir: OutOpt,
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
    wait_nodes: Annotated[
        int,
        typer.Option("--wait-nodes", help="Start only once the RM has this many nodes."),
    ] = 0,
    log_level: LogLevelOpt = "warning",
) -> None:
    """Replay WORKLOAD on a live cluster (RM at --rm); write the files `treadle sim` does."""
    with _errors():
        logs.configure(log_level)
        from treadle import metrics
        from treadle.driver import replay, run_async, wait_for_rm
        from treadle.registry import build
        from treadle.runner import alone_jcts, asks_for, build_policy

        params = parse_settings(ask_settings or [], "--ask-set")
        if asks is not None:
            build("asks", *asks_for(None, RunOptions(asks, params)))  # fail before anything
        if expect_policy is not None:
            expected = PolicyChoice(expect_policy, parse_settings(settings or []))
            build_policy(expected)
            build("asks", *asks_for(expected, RunOptions(asks, params)))
        elif settings:
            _fail("--set needs --policy (the policy whose parameters they are)", 2)
        if not rm_wait_s >= 0:
            _fail(f"--rm-wait-s must be >= 0, got {rm_wait_s:g}", 2)
        # An unreachable RM fails before the simulations.
        if wait_nodes < 0:
            _fail(f"--wait-nodes must be >= 0, got {wait_nodes}", 2)
        live = run_async(wait_for_rm(rm, rm_wait_s, wait_nodes))
        if expect_policy is not None and live.policy != expect_policy:
            _fail(f"the RM at {rm} runs policy {live.policy!r}, not {expect_policy!r}")
        wl = _load(workload, fmt, nodes_file)
        options = RunOptions(asks, params, slowdown=slowdown)
        # The strategy the RM's policy is designed with, unless --asks names one.
        try:
            strategy, strategy_params = asks_for(PolicyChoice(live.policy, {}), options)
        except TreadleError:  # a policy installed on the RM only: its AMs default to greedy
            strategy, strategy_params = asks_for(None, options)
        alone = alone_jcts(wl, options) if slowdown else None
        with _progress() as progress:
            records = run_async(
                replay(
                    rm,
                    wl,
                    alone=alone,
                    ask_strategy=strategy,
                    ask_params=strategy_params,
                    managed_am=managed_am,
                    timeout_s=timeout_s,
                    progress=_tracker(progress, live.policy or "replay", len(wl.jobs)),
                )
            )
        policy = str(records[0].get("policy") or "unknown")
        weights = {name: u.weight for name, u in wl.users.items()}
        s = metrics.write_run_outputs(records, out_dir, policy=policy, user_weights=weights)
    out.print(
        f"{policy}: {s['finished']}/{s['jobs']} jobs, makespan {_num(s['makespan_s'])} s, "
        f"mean JCT {_num(s['mean_jct_s'])} s -> {out_dir}",
        markup=False,
        highlight=False,
    )


cluster_app = typer.Typer(
    no_args_is_help=True, help="Start, inspect and stop a detached local cluster."
)
app.add_typer(cluster_app, name="cluster")

DirOpt = Annotated[
    Path, typer.Option("--dir", help="Directory of the cluster's state file and logs.")
]
DEFAULT_CLUSTER_DIR = Path(".treadle/cluster")


@cluster_app.command("up")
def cluster_up(
    policy: Annotated[str, typer.Option("--policy", help="Policy name (see `treadle policies`).")],
    nodes: Annotated[
        int | None, typer.Option("--nodes", help="Number of nodes (default: the workload's).")
    ] = None,
    settings: SetOpt = None,
    dilation: DilationOpt = 10.0,
    resources: Annotated[
        str, typer.Option("--resources", help="Each node's capacity as name=amount,...")
    ] = "vcores=8,memory_mb=16384",
    rack: Annotated[
        str, typer.Option("--rack", help="Rack of the --nodes nodes.")
    ] = "default-rack",
    heartbeat_s: Annotated[
        float | None,
        typer.Option("--heartbeat-s", help="NM heartbeat (emulated s; default: workload's or 1)."),
    ] = None,
    workload: Annotated[
        str | None,
        typer.Option("--workload", help="Workload whose queues and users (and nodes) to use."),
    ] = None,
    fmt: FormatOpt = None,
    nodes_file: NodesFileOpt = None,
    nm_processes: NmProcessesOpt = 1,
    managed_am: ManagedAmOpt = False,
    cluster_dir: DirOpt = DEFAULT_CLUSTER_DIR,
    log_level: LogLevelOpt = "warning",
) -> None:
    """Start a local cluster that keeps running after this command; print the RM address."""
    with _errors():
        logs.configure(log_level)
        from treadle.driver import run_async
        from treadle.launcher import LocalCluster, cluster_workload, parse_node_resources
        from treadle.model import NodeSpec

        params = parse_settings(settings or [])
        like = _load(workload, fmt, nodes_file) if workload else None
        if nodes is not None:
            if nodes < 1:
                _fail(f"--nodes must be >= 1, got {nodes}", 2)
            res = parse_node_resources(resources, "--resources")
            specs = [NodeSpec(f"node{i}", res, rack) for i in range(1, nodes + 1)]
        elif like is not None:
            specs = list(like.cluster.nodes)
        else:
            _fail("give --nodes N (and --resources) or --workload WL for the cluster's nodes", 2)
        hb = heartbeat_s or (like.cluster.heartbeat_s if like is not None else 1.0)
        cluster = LocalCluster(
            cluster_workload(specs, hb, like),
            policy,
            params,
            workdir=cluster_dir,
            dilation=dilation,
            nm_processes=nm_processes,
            managed_am=managed_am,
            detached=True,
        )
        address = run_async(cluster.start())
    out.print(address, markup=False, highlight=False)
    err.print(
        f"cluster up: {len(specs)} nodes, policy {policy}, dilation {dilation:g}; state in "
        f"{cluster_dir}; stop it with: treadle cluster down --dir {cluster_dir}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@cluster_app.command("status")
def cluster_status(
    cluster_dir: DirOpt = DEFAULT_CLUSTER_DIR,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show the cluster recorded in --dir: its processes and, if it runs, its RM's view."""
    with _errors():
        from treadle.driver import probe, run_async
        from treadle.launcher import pid_alive, read_state, recorded_processes

        state = read_state(cluster_dir)
        if state is None:
            _fail(f"no cluster is recorded in {cluster_dir}")
        procs = recorded_processes(state)
        alive = {p.name: pid_alive(p.pid, p.started) for p in procs}
        metrics_: dict[str, Any] | None = None
        if alive.get("rm"):
            try:
                m = run_async(probe(str(state.get("rm")), timeout_s=3.0))
                metrics_ = {
                    "nodes": m.nodes,
                    "lost_nodes": m.lost_nodes,
                    "running_apps": m.running_apps,
                    "finished_apps": m.finished_apps,
                    "now_s": round(m.now_s, 3),
                }
            except TreadleError:
                metrics_ = None
    if as_json:
        data = dict(state, alive=alive, rm_metrics=metrics_)
        out.print_json(json.dumps(data, default=str))
        return
    running = sum(alive.values())
    out.print(
        f"rm {state.get('rm')}  policy {state.get('policy')}  dilation {state.get('dilation')}  "
        f"nodes {state.get('nodes')}  ({running}/{len(procs)} processes running)",
        markup=False,
        highlight=False,
    )
    for p in procs:
        out.print(
            f"  {p.name:<6} pid {p.pid:<8} {'running' if alive[p.name] else 'exited'}  {p.log}",
            markup=False,
            highlight=False,
        )
    if metrics_ is not None:
        out.print(
            f"  rm view: {metrics_['nodes']} nodes up, {metrics_['lost_nodes']} lost, "
            f"{metrics_['running_apps']} apps running, {metrics_['finished_apps']} finished, "
            f"t={metrics_['now_s']:.1f} s",
            markup=False,
            highlight=False,
        )


@cluster_app.command("down")
def cluster_down(cluster_dir: DirOpt = DEFAULT_CLUSTER_DIR) -> None:
    """Stop the cluster recorded in --dir (SIGTERM, then SIGKILL) and remove its state."""
    with _errors():
        from treadle.launcher import stop_recorded

        state = stop_recorded(cluster_dir)
    out.print(
        f"stopped the cluster in {cluster_dir} (rm was at {state.get('rm')})",
        markup=False,
        highlight=False,
    )


def _num(v: Any) -> str:
    return "-" if v is None else f"{v:.1f}"


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()

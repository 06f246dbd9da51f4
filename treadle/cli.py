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
from treadle.registry import GROUPS, describe, parse_settings
from treadle.runner import (
    PolicyChoice,
    RunOptions,
    resolve_policies,
    run_sim,
    split_policy_settings,
)
from treadle.runner import (
    compare as run_compare,
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
    typer.Option("--format", help="Workload format: yaml, sls or rumen (default: inferred)."),
]
NodesFileOpt = Annotated[
    Path | None, typer.Option("--nodes-file", help="SLS nodes file giving the cluster.")
]
OutOpt = Annotated[Path, typer.Option("--out", help="Directory for the results.")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Policy parameter as key=value (repeatable)."),
]
AsksOpt = Annotated[str, typer.Option("--asks", help="AM ask strategy.")]
AskSetOpt = Annotated[
    list[str] | None, typer.Option("--ask-set", help="Ask-strategy parameter key=value.")
]
SlowdownOpt = Annotated[
    bool,
    typer.Option(
        "--slowdown/--no-slowdown",
        help="Simulate each job alone on the empty cluster for slowdown figures.",
    ),
]
LogLevelOpt = Annotated[str, typer.Option("--log-level", help="debug, info, warning, error.")]


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
    asks: AsksOpt = "greedy",
    ask_settings: AskSetOpt = None,
    slowdown: SlowdownOpt = True,
    log_level: LogLevelOpt = "warning",
) -> None:
    """Simulate WORKLOAD under one policy; write summary.json, jobs.csv, events.jsonl."""
    with _errors():
        logs.configure(log_level)
        choice = PolicyChoice(policy, parse_settings(settings or []))
        options = RunOptions(
            asks, parse_settings(ask_settings or [], "--ask-set"), slowdown=slowdown
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
    mode: Annotated[str, typer.Option("--mode", help="sim (local and docker come later).")] = "sim",
    settings: Annotated[
        list[str] | None,
        typer.Option("--set", help="POLICY.PARAM=VALUE for one compared policy (repeatable)."),
    ] = None,
    baseline: Annotated[
        str | None, typer.Option("--baseline", help="Policy for factor-of-improvement figures.")
    ] = None,
    fmt: FormatOpt = None,
    nodes_file: NodesFileOpt = None,
    asks: AsksOpt = "greedy",
    ask_settings: AskSetOpt = None,
    slowdown: SlowdownOpt = True,
    log_level: LogLevelOpt = "warning",
) -> None:
    """Run WORKLOAD under several policies and write a side-by-side report."""
    with _errors():
        logs.configure(log_level)
        if mode != "sim":
            _fail(f"--mode {mode!r} is not available yet; use --mode sim", 2)
        names = resolve_policies(policies)
        per_policy = split_policy_settings(parse_settings(settings or []), names)
        if baseline is not None and baseline not in names:
            _fail(f"--baseline {baseline!r} is not among the compared policies {names}", 2)
        if baseline is None and "fifo" in names and len(names) > 1:
            baseline = "fifo"
        options = RunOptions(
            asks, parse_settings(ask_settings or [], "--ask-set"), slowdown=slowdown
        )
        wl = _load(workload, fmt, nodes_file)
        with _progress() as progress:
            result = run_compare(
                wl,
                [PolicyChoice(n, per_policy[n]) for n in names],
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

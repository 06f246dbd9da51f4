"""The ``treadle`` command line: the app and its small commands. ``sim`` and ``compare``
are in simulate.py, ``run`` in replay.py, ``treadle cluster`` in cluster.py, ``treadle
admin`` in admin.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from treadle.cli.admin import admin_app
from treadle.cli.cluster import cluster_app
from treadle.cli.common import (
    FAILED,
    INVOCATION,
    UNFAITHFUL,
    USAGE,
    FormatOpt,
    HomoFilterOpt,
    NodesFileOpt,
    WorkloadArg,
    WtaScalingOpt,
    err,
    errors,
    load,
    out,
    say,
    trace_options,
)
from treadle.cli.convert import convert
from treadle.cli.queues import queues
from treadle.cli.replay import run_live
from treadle.cli.simulate import compare, sim
from treadle.cli.study import study
from treadle.cli.traces import traces_command

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


app.command()(sim)
app.command()(compare)
app.command()(study)
app.command("run")(run_live)
app.add_typer(cluster_app, name="cluster")
app.add_typer(admin_app, name="admin")
app.command("traces")(traces_command)
app.command("queues")(queues)
app.command("convert")(convert)


def main() -> None:
    """The console script (``treadle``, ``python -m treadle.cli``)."""
    INVOCATION.standalone = True
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)

"""``treadle convert``: any workload (a trace of any format, a YAML file, a built-in) to a
columnar workload file (``treadle.workload.columnar``) that ``validate``, ``sim`` and the
other commands read as they read the original, with the same results.

The file is written under a temporary name beside ``--to`` and renamed into place when
whole, so a failed or interrupted conversion leaves no partial workload; an existing
``--to`` is refused unless ``--force``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from treadle.cli.common import (
    USAGE,
    FormatOpt,
    HomoFilterOpt,
    NodesFileOpt,
    WtaScalingOpt,
    errors,
    fail,
    load,
    say,
    trace_options,
)

ToOpt = Annotated[
    Path,
    typer.Option(
        "--to", help="The columnar workload file to write (FILE.parquet).", show_default=False
    ),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace --to if it exists.")]
SortOpt = Annotated[
    bool,
    typer.Option(
        "--sort",
        help="Write the jobs in submission order (ties in the workload's order): such a "
        "file is read as the run goes, not whole (the same results).",
    ),
]


def convert(
    trace: Annotated[
        str,
        typer.Argument(help="A trace, a workload file or a built-in name.", show_default=False),
    ],
    to: ToOpt,
    fmt: FormatOpt = None,
    nodes_file: NodesFileOpt = None,
    homo_filter: HomoFilterOpt = None,
    wta_scaling: WtaScalingOpt = None,
    force: ForceOpt = False,
    sort: SortOpt = False,
) -> None:
    """Write a workload (any supported format) as a columnar workload file (Parquet)."""
    if to.exists() and not force:
        fail(f"--to {to}: exists; pass --force to replace it", USAGE)
    if to.is_dir():
        fail(f"--to {to}: is a directory", USAGE)
    with errors():
        wl = load(trace, fmt, nodes_file, trace_options(homo_filter, wta_scaling))
        from treadle.workload.columnar_write import write_workload

        to.parent.mkdir(parents=True, exist_ok=True)
        # Beside --to (a rename stays on one file system), named by this process.
        temporary = to.with_name(f".{to.name}.{os.getpid()}.tmp")
        try:
            write_workload(wl, temporary, trace, sort=sort)
            temporary.replace(to)
        finally:
            temporary.unlink(missing_ok=True)
    say(f"{to}: {len(wl.jobs)} jobs, {wl.tasks} tasks ({wl.name}, from {trace})")

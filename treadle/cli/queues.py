"""``treadle queues FILE`` and the ``--queues FILE`` / ``--strict`` options: a YARN
scheduler configuration (``capacity-scheduler.xml`` or a Fair Scheduler allocation file)
as treadle's queue tree (``treadle.importers.yarnqueues``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from treadle.cli.common import err, errors, say

QueuesOpt = Annotated[
    Path | None,
    typer.Option(
        "--queues",
        help="A YARN capacity-scheduler.xml or Fair Scheduler allocation file: its queue "
        "tree and placement rules replace the workload's queues (`treadle queues FILE` "
        "shows how it is read).",
        show_default=False,
    ),
]
StrictOpt = Annotated[
    bool,
    typer.Option("--strict", help="With --queues: a property treadle does not model is an error."),
]


def warn(lines: list[str]) -> None:
    for line in lines:
        err.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)


def import_queues(path: Path, strict: bool) -> Any:
    """The file's ``ImportedQueues``, its warnings printed (raises on a bad file)."""
    from treadle.importers.yarnconf import load_queues

    imported = load_queues(path, strict=strict)
    warn(imported.warnings())
    return imported


def with_queues(wl: Any, path: Path | None, strict: bool) -> Any:
    """``wl`` with the queue tree of ``--queues`` (unchanged without it); the jobs it
    refuses at submission are left out, each reason one warning line."""
    if path is None:
        if strict:
            from treadle.errors import InputError

            raise InputError("--strict", None, "applies only with --queues FILE")
        return wl
    from treadle.importers.yarnqueues import apply_queues

    placed, lines = apply_queues(wl, import_queues(path, strict))
    warn(lines)
    return placed


def queues(
    file: Annotated[
        Path,
        typer.Argument(help="capacity-scheduler.xml or a Fair Scheduler allocation file."),
    ],
    strict: StrictOpt = False,
) -> None:
    """Print the queue tree of a YARN scheduler configuration as treadle understood it:
    each queue with what maps (capacities, weights, state, ACL) and what is not modelled,
    then the placement rules."""
    from treadle.importers.yarnqueues import describe_queues

    with errors():
        imported = import_queues(file, strict)
    for line in describe_queues(imported):
        say(line)

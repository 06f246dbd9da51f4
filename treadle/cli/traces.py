"""``treadle traces``: the public traces treadle reads, and the check of a traces directory.

Without ``--check`` it lists each trace (directory, format, source, licence, files) and
where the traces directory is; with ``--check`` it compares every catalogued file of
that directory with its SHA-256: exit 0 when every present file matches (missing ones
are listed: a partly filled directory is fine), 1 when one differs, 2 when no
directory is given or it is not one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from treadle.cli.common import errors, fail, out, say


def traces_command(
    check: Annotated[
        bool, typer.Option("--check", help="Check the directory's files against their SHA-256.")
    ] = False,
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            help="The traces directory (default: $TREADLE_TRACES).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List the public traces treadle reads, or check a traces directory (--check)."""
    from treadle.importers import catalogue

    if not check:
        _list(directory, as_json)
        return
    with errors():
        where = catalogue.traces_dir(directory)
        results = catalogue.check(where)
    if as_json:
        out.print_json(json.dumps({"dir": str(where), "files": [vars(r) for r in results]}))
    else:
        for r in results:
            if r.state != "ok":
                say(f"{r.state}: {r.path}")
        present = sum(r.state != "missing" for r in results)
        good = sum(r.state == "ok" for r in results)
        say(f"{where}: {good} of {len(results)} files present and intact ({present} present)")
    differ = [r.path for r in results if r.state == "differs"]
    if differ:
        fail(f"{len(differ)} file(s) differ from the published trace: {', '.join(differ)}")


def _list(directory: Path | None, as_json: bool) -> None:
    from treadle.importers.catalogue import TRACES, TRACES_ENV

    if as_json:
        rows = [
            {**vars(t), "files": [{"path": p, "sha256": d} for p, d in t.files]} for t in TRACES
        ]
        out.print_json(json.dumps(rows))
        return
    for t in TRACES:
        formats = t.formats.replace("`", "")
        say(f"{t.name}/  ({formats}; {len(t.files)} files; licence: {t.licence})")
        say(f"    {t.what}")
        say(f"    source: {t.source.replace('`', '')}")
    where = directory or f"${TRACES_ENV}"
    say(f"check a directory's files: treadle traces --check (reads {where})")

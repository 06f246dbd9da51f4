"""MkDocs hook: fills the pages' ``<!-- treadle:NAME -->`` placeholders with what the code
generates, so that no page keeps a copy that could drift: ``event-schema`` (the event
log's schema, ``treadle.events.schema_markdown``), ``workload-schema`` (``treadle schema``),
``traces`` (the public traces' catalogue, ``treadle.importers.catalogue``) and ``cli``
(every command's ``--help``)."""

from __future__ import annotations

import json
import re
from typing import Any

PLACEHOLDER = re.compile(r"<!-- treadle:([a-z-]+) -->")


def _event_schema() -> str:
    from treadle.events import schema_markdown

    return schema_markdown()


def _workload_schema() -> str:
    from treadle.workload import workload_json_schema

    return "```json\n" + json.dumps(workload_json_schema(), indent=2) + "\n```"


def _cli() -> str:
    import typer
    from typer.testing import CliRunner

    from treadle.cli.app import app

    parts: list[str] = []

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        result = CliRunner().invoke(app, [*path, "--help"], terminal_width=88)
        title = " ".join(("treadle", *path))
        parts.append(f"## `{title}`\n\n```text\n{result.output.rstrip()}\n```\n")
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return "\n".join(parts)


def _traces() -> str:
    from treadle.importers.catalogue import catalogue_markdown

    return catalogue_markdown()


GENERATORS = {
    "event-schema": _event_schema,
    "workload-schema": _workload_schema,
    "traces": _traces,
    "cli": _cli,
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    def fill(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in GENERATORS:
            raise ValueError(f"unknown placeholder treadle:{name}")
        return GENERATORS[name]()

    return PLACEHOLDER.sub(fill, markdown)

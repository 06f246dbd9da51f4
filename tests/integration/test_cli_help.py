"""``--help`` of every treadle command as a user reads it: each option's and argument's
help text whole (rich markup once swallowed ``[default: ...]`` and the like)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from treadle.cli.app import app

ROOT = typer.main.get_command(app)


def commands(group: Any = ROOT, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command's path under ``treadle`` (typer carries its own click: duck-typed)."""
    yield path
    for name, sub in getattr(group, "commands", {}).items():
        yield from commands(sub, (*path, name))


def command_at(path: tuple[str, ...]) -> Any:
    cmd: Any = ROOT
    for name in path:
        cmd = cmd.commands[name]
    return cmd


def squeezed(text: str) -> str:
    """Text without whitespace: wrapping moves line breaks, nothing else may change."""
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("path", list(commands()), ids=lambda p: " ".join(("treadle", *p)))
def test_help_shows_every_help_text_whole(path: tuple[str, ...]) -> None:
    command = command_at(path)
    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    shown = squeezed(result.output)
    texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
    for text in texts:
        first = text.split("\n\n")[0]  # a command's help: at least its first paragraph
        assert squeezed(first) in shown, f"treadle {' '.join(path)} --help lost: {first!r}"


def test_bracketed_help_survives() -> None:
    """The text a user reported eaten: ``--asks``'s default in brackets."""
    result = CliRunner().invoke(app, ["sim", "--help"], terminal_width=200)
    assert "[default: each policy's own: altruistic for carbyne, else greedy]" in re.sub(
        r"\s+", " ", result.output
    )


def test_version() -> None:
    from importlib.metadata import version

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"treadle {version('treadle')}\n"
